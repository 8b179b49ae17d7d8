//! What a failed repair graph teaches whoever ran it: the helper chunks a node found corrupt
//! or missing (its error names them: `corrupt chunk ID: ...`, `chunk ID not found`), and the
//! graph's nodes that no longer answer. A reader (degraded read) and the coordinator (repair)
//! both re-plan around what they learnt, until fewer than k healthy chunks remain.

use kintsugi_node::exec::request;
use kintsugi_plan::NodeId;
use kintsugi_proto::{ChunkId, NodeRequest, NodeResponse};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::task::JoinSet;

/// How long a node has to answer a ping before it counts as gone.
const PING: Duration = Duration::from_secs(2);

/// The chunks among `terms` that `err` names as corrupt or missing, each with the words of
/// the error that say why (the innermost error of a chain of relays).
pub fn bad_chunks_named(err: &str, terms: &[ChunkId]) -> Vec<(ChunkId, String)> {
    let mut found: Vec<(ChunkId, String)> = Vec::new();
    for c in terms {
        let id = c.as_str();
        let corrupt = format!("corrupt chunk {id}");
        let missing = format!("chunk {id} not found");
        let at = err.find(&corrupt).or_else(|| err.find(&missing));
        // `s00000001.001` is also the start of `s00000001.0012`: only whole names count.
        let whole = |i: usize, pat: &str| !err[i + pat.len()..].starts_with(|ch: char| ch.is_ascii_alphanumeric() || ch == '.');
        let at = at.filter(|&i| whole(i, if err[i..].starts_with(&corrupt) { &corrupt } else { &missing }));
        if let Some(i) = at {
            let why: String = err[i..].split(';').next().unwrap_or("").trim().to_string();
            if !found.iter().any(|(f, _)| f == c) {
                found.push((c.clone(), why));
            }
        }
    }
    found
}

/// The nodes of `peers` that do not answer a ping as themselves within two seconds, asked
/// all at once.
pub async fn unanswering(peers: &BTreeMap<NodeId, String>) -> Vec<NodeId> {
    let mut set = JoinSet::new();
    for (&n, addr) in peers {
        let addr = addr.clone();
        set.spawn(async move {
            let ok = matches!(request(&addr, &NodeRequest::Ping, PING).await, Ok(NodeResponse::Pong { node }) if node == n);
            (n, ok)
        });
    }
    let mut gone = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok((n, false)) = r {
            gone.push(n);
        }
    }
    gone.sort_unstable();
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_corrupt_and_missing_helpers_of_a_relay_chain() {
        let terms: Vec<ChunkId> = (0..9).map(|i| ChunkId::new(1, i)).collect();
        let err = "node 1: node 11: node 10: corrupt chunk s00000001.001: block 0 has crc32c 5567e8ab, expected e0146d47; \
                   node 4: chunk s00000001.007 not found";
        let found = bad_chunks_named(err, &terms);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].0, ChunkId::new(1, 1));
        assert_eq!(found[0].1, "corrupt chunk s00000001.001: block 0 has crc32c 5567e8ab, expected e0146d47");
        assert_eq!(found[1], (ChunkId::new(1, 7), "chunk s00000001.007 not found".to_string()));
    }

    #[test]
    fn other_chunks_and_longer_names_are_not_taken_for_helpers() {
        let terms = vec![ChunkId::new(1, 1), ChunkId::new(1, 2)];
        // A chunk of another stripe, and a piece whose name starts with a helper's.
        let err = "corrupt chunk s00000002.001: block 3; corrupt chunk s00000001.002.o4096: block 0";
        assert!(bad_chunks_named(err, &terms).is_empty());
        assert!(bad_chunks_named("node 3 unreachable: connection refused", &terms).is_empty());
    }

    #[tokio::test]
    async fn a_closed_port_does_not_answer() {
        // A port nothing listens on: bind, learn the port, close.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let peers = BTreeMap::from([(4, addr)]);
        assert_eq!(unanswering(&peers).await, vec![4]);
    }
}
