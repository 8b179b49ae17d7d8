//! Failures told apart by their variants, through relay chains and the coordinator's
//! decisions (`common/fault_cases.rs`), with the messages as the code words them.

mod common;
#[path = "common/fault_cases.rs"]
mod fault_cases;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_chain_faults() {
    fault_cases::relay_chain_faults().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_faults() {
    fault_cases::coordinator_faults().await;
}

#[test]
fn context_keeps_the_variant() {
    fault_cases::context_keeps_the_variant();
}
