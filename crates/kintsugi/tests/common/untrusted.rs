//! What the servers and the codec do with untrusted bytes before acting on them, shared by
//! the stable mutation fuzzer (tests/fuzz.rs) and the cargo-fuzz target (fuzz/).

#[path = "../../src/codec/manifest.rs"]
#[allow(dead_code)]
pub mod manifest;

use kintsugi_codes::CodeSpec;
use kintsugi_node::exec::check_assignment;
use kintsugi_proto::frame::decode_control;
use kintsugi_proto::{read_frame, Assignment, CoordRequest, CoordResponse, NodeRequest, NodeResponse};

/// Everything the servers and the codec do with untrusted bytes before acting on them.
pub fn exercise(rt: &tokio::runtime::Runtime, bytes: &[u8]) {
    // As a frame on the wire (a length prefix and kind byte, then the body).
    let mut r = bytes;
    let _ = rt.block_on(read_frame(&mut r));
    if let Ok(NodeRequest::RunRepair { assignment }) = decode_control::<NodeRequest>(bytes) {
        if let Ok((_, units)) = check_assignment(*assignment) {
            // Accepted: what a node then sizes from it stays bounded.
            let total: usize = units.iter().flatten().flatten().map(|r| r.len()).sum();
            assert!(total as u64 <= 64 * kintsugi_node::exec::MAX_CHUNK, "accepted plan sizes {total} bytes of units");
        }
    }
    if let Ok(CoordResponse::Plan { assignment }) = decode_control::<CoordResponse>(bytes) {
        let _ = check_assignment(*assignment);
    }
    if let Ok(a) = decode_control::<Assignment>(bytes) {
        let _ = check_assignment(a);
    }
    if let Ok(CoordRequest::CreateObject { code, .. }) = decode_control::<CoordRequest>(bytes) {
        // The coordinator builds the code a client names.
        let _ = code.build().map(|c| c.n());
    }
    let _ = decode_control::<NodeResponse>(bytes);
    if let Ok(m) = serde_json::from_slice::<manifest::Manifest>(bytes) {
        let _ = m.check();
    }
    if let Ok(s) = std::str::from_utf8(bytes) {
        if let Ok(spec) = s.parse::<CodeSpec>() {
            let _ = spec.build();
        }
    }
}
