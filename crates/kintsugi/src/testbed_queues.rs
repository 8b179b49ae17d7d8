//! How a testbed link shares its rate among the transfers queued on it (`testbed up
//! --queues`). One drop-tail queue (tc tbf) is a switch port's: TCP flows sharing it may get
//! unequal shares. A queue per peer, served round robin, is how a Linux host's default qdisc
//! (fq_codel, per flow) shares its NIC; this kernel may lack fq_codel, so HTB emulates it:
//! one class per peer under the link's rate, each guaranteed an equal share and borrowing
//! what the others leave, a quantum of one frame each so the sharing is byte-fair. On
//! full-node repair at 200 Mbit/s it measured no different from one queue (REPRODUCTION.md).

use crate::testbed::{tc_bits, tc_burst, tc_queue_limit};
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LinkQueues {
    /// One drop-tail queue per link, both directions (tc tbf), as a switch port.
    #[default]
    Fifo,
    /// A queue per peer on what a node sends (as a host's fq_codel); one queue on what it
    /// receives (a switch port).
    PeerSend,
    /// A queue per peer on both ends of every link.
    Peer,
}

impl std::fmt::Display for LinkQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.to_possible_value().expect("no skipped variants").get_name())
    }
}

/// Which address of a packet names its peer: the destination on a node's uplink, the
/// source on its downlink.
#[derive(Clone, Copy, Debug)]
pub enum PeerBy {
    Destination,
    Source,
}

/// `tc -batch` lines that give interface `dev` (`rate` bytes per second, queues of
/// `queue_ms` at that rate, frames of `mtu`) one round-robin class per address in `peers`,
/// plus one for anything else (ARP, other addresses).
pub fn per_peer_commands(dev: &str, rate: f64, queue_ms: u32, mtu: u32, peers: &[String], by: PeerBy) -> Vec<String> {
    let (bits, burst) = (tc_bits, tc_burst(rate));
    let frame = mtu as u64 + 14;
    let classes = peers.len() as f64 + 1.0;
    // Each peer's queue as long as the link's (fq_codel's limit is shared, not split): split
    // among 17 peers, 32-frame queues dropped slow starts' bursts, and reads stalled for
    // retransmission timeouts.
    let limit = tc_queue_limit(rate, queue_ms);
    let share = bits(rate / classes);
    let class = |id: u32| {
        format!(
            "class add dev {dev} parent 1:1 classid 1:{id:x} htb rate {share} ceil {} burst {burst} cburst {burst} quantum {frame} prio 0",
            bits(rate)
        )
    };
    let mut out = vec![
        format!("qdisc replace dev {dev} root handle 1: htb default 2"),
        format!("class add dev {dev} parent 1: classid 1:1 htb rate {} ceil {} burst {burst} cburst {burst}", bits(rate), bits(rate)),
    ];
    let ids = std::iter::once(2u32).chain((0..peers.len() as u32).map(|j| 0x10 + j));
    for id in ids {
        out.push(class(id));
        out.push(format!("qdisc add dev {dev} parent 1:{id:x} handle {id:x}: bfifo limit {limit}"));
    }
    let field = match by {
        PeerBy::Destination => "dst",
        PeerBy::Source => "src",
    };
    for (j, ip) in peers.iter().enumerate() {
        let id = 0x10 + j as u32;
        out.push(format!("filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip {field} {ip}/32 flowid 1:{id:x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_gets_an_equal_class_and_a_filter() {
        let peers: Vec<String> = (1..=3).map(|i| format!("10.9.0.{i}")).collect();
        let c = per_peer_commands("v0", 25e6, 20, 1500, &peers, PeerBy::Source);
        // 200 Mbit/s over 4 classes: 50 Mbit/s each, every one able to take the whole link.
        let classes: Vec<&String> = c.iter().filter(|l| l.contains("parent 1:1 classid")).collect();
        assert_eq!(classes.len(), 4);
        assert!(classes.iter().all(|l| l.contains("rate 50000000bit ceil 200000000bit") && l.contains("quantum 1514")), "{classes:?}");
        assert!(
            c.contains(&"filter add dev v0 parent 1: protocol ip prio 1 u32 match ip src 10.9.0.3/32 flowid 1:12".to_string()),
            "{c:?}"
        );
        assert_eq!(c.iter().filter(|l| l.contains("bfifo")).count(), 4);
        assert!(c[0].ends_with("htb default 2"));
    }

    #[test]
    fn queues_name_their_values() {
        assert_eq!(LinkQueues::PeerSend.to_string(), "peer-send");
        assert_eq!(LinkQueues::from_str("peer", false).unwrap(), LinkQueues::Peer);
    }
}
