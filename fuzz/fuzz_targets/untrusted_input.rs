//! Every decoder and check that takes untrusted bytes (frames, control messages,
//! assignments, code specs, manifests), under libFuzzer's coverage guidance. Seed corpus:
//! `FUZZ_WRITE_CORPUS=fuzz/corpus/untrusted_input cargo test -p kintsugi --test fuzz`.
#![no_main]

#[path = "../../crates/kintsugi/tests/common/untrusted.rs"]
mod untrusted;

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let rt = RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().expect("runtime"));
    untrusted::exercise(rt, data);
});
