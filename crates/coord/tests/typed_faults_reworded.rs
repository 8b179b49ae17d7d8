//! The fault tests of `typed_faults` again, with every error message this process sends on
//! the wire reworded (reversed and marked): no decision may depend on a message's words.

mod common;
#[path = "common/fault_cases.rs"]
mod fault_cases;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_chain_faults_with_reworded_messages() {
    kintsugi_proto::wire_error::reword_messages();
    fault_cases::relay_chain_faults().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_faults_with_reworded_messages() {
    kintsugi_proto::wire_error::reword_messages();
    fault_cases::coordinator_faults().await;
}

#[test]
fn context_keeps_the_variant() {
    fault_cases::context_keeps_the_variant();
}
