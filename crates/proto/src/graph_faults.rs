//! What a failed repair graph teaches whoever ran it: the helper chunks a node found corrupt
//! or missing (its error names them as faults, kept through a chain of relays), and the
//! graph's nodes that do not answer a ping. A reader (degraded read) and the coordinator (repair)
//! both re-plan around what they learnt, until fewer than k healthy chunks remain.

use crate::rpc::request;
use crate::{ChunkId, NodeId, NodeRequest, NodeResponse, WireError};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::task::JoinSet;

/// How long a node has to answer a ping before it counts as gone.
const PING: Duration = Duration::from_secs(2);

/// The chunks among `terms` that `err` names as corrupt or missing, each with the words
/// that say so.
pub fn bad_chunks_named(err: &WireError, terms: &[ChunkId]) -> Vec<(ChunkId, String)> {
    let mut found: Vec<(ChunkId, String)> = Vec::new();
    for f in &err.faults {
        if let Some(c) = f.chunk().filter(|c| terms.contains(c)) {
            if !found.iter().any(|(x, _)| x == c) {
                found.push((c.clone(), f.to_string()));
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
    use crate::{ErrorKind, Fault};

    #[test]
    fn names_the_corrupt_and_missing_helpers_of_a_relay_chain() {
        let terms: Vec<ChunkId> = (0..9).map(|i| ChunkId::new(1, i)).collect();
        let inner =
            WireError::new(ErrorKind::Corrupt, "block 0 has crc32c 5567e8ab").with_fault(Fault::CorruptChunk { chunk: ChunkId::new(1, 1) });
        let missing = WireError::not_found("gone").with_fault(Fault::MissingChunk { chunk: ChunkId::new(1, 7) });
        let err = WireError::merge(vec![inner.context("node 10").context("node 11").context("node 1"), missing.context("node 4")]).unwrap();
        let found = bad_chunks_named(&err, &terms);
        assert_eq!(
            found,
            vec![
                (ChunkId::new(1, 1), "corrupt chunk s00000001.001".to_string()),
                (ChunkId::new(1, 7), "chunk s00000001.007 not found".to_string())
            ]
        );
    }

    #[test]
    fn chunks_of_other_stripes_and_node_faults_are_not_taken_for_helpers() {
        let terms = vec![ChunkId::new(1, 1), ChunkId::new(1, 2)];
        let err = WireError::new(ErrorKind::Corrupt, "x")
            .with_fault(Fault::CorruptChunk { chunk: ChunkId::new(2, 1) })
            .with_fault(Fault::Unreachable { node: 3 });
        assert!(bad_chunks_named(&err, &terms).is_empty());
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
