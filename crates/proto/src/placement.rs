//! Where an object's placement group is and who holds its index records: pure functions of
//! names and node ids, the same in every build, shared by the coordinator (which places)
//! and clients (which look objects up without it).

use crate::wire_graph::NodeId;

/// FNV-1a, then a splitmix finaliser: a hash that stays the same across builds and runs
/// (placement must not move when the coordinator is rebuilt).
pub fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The placement group of an object name.
pub fn placement_group(name: &str, groups: u32) -> u32 {
    (stable_hash(&[name.as_bytes()]) % groups.max(1) as u64) as u32
}

/// The `n` members of placement group `pg` among `nodes`: highest rendezvous weight first,
/// so a node joining or leaving moves only the groups it enters or leaves.
pub fn pg_members(pg: u32, nodes: &[NodeId], n: usize) -> Vec<NodeId> {
    let mut w: Vec<(u64, NodeId)> = nodes.iter().map(|&x| (stable_hash(&[&pg.to_le_bytes(), &x.to_le_bytes()]), x)).collect();
    w.sort_unstable_by(|a, b| b.cmp(a));
    w.into_iter().take(n).map(|(_, x)| x).collect()
}

/// The holders of placement group `pg`'s index among the registered `nodes`.
pub fn holders(pg: u32, nodes: &[NodeId], copies: usize) -> Vec<NodeId> {
    pg_members(pg, nodes, copies.min(nodes.len()))
}

/// How many of `n` holders make a majority.
pub fn majority(n: usize) -> usize {
    n / 2 + 1
}
