//! The JSON form of a [`Network`] for `--network FILE`: node capacities, pair caps as
//! `[from, to, bytes_per_s]` triples, foreground series, and whether the foreground on links
//! yields to repair (`elastic_foreground`, users' TCP traffic) or takes its rate first.

use crate::error::{Result, SimError};
use crate::network::{Foreground, Network, NodeSpec};
use serde::{Deserialize, Serialize};

/// `{"nodes": [...], "pair_caps": [[0, 1, 1.25e8], ...], "foreground": [...]}`
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkFile {
    pub nodes: Vec<NodeSpec>,
    #[serde(default)]
    pub pair_caps: Vec<(u32, u32, f64)>,
    #[serde(default)]
    pub foreground: Vec<Foreground>,
    #[serde(default)]
    pub elastic_foreground: bool,
}

impl NetworkFile {
    /// Parses and validates.
    pub fn parse(text: &str) -> Result<Network> {
        let f: NetworkFile = serde_json::from_str(text).map_err(|e| SimError::BadScenario(format!("network file: {e}")))?;
        let mut net = Network { nodes: f.nodes, foreground: f.foreground, elastic_foreground: f.elastic_foreground, ..Default::default() };
        for (a, b, c) in f.pair_caps {
            if net.pair_caps.insert((a, b), c).is_some() {
                return Err(SimError::BadScenario(format!("network file: pair cap {a}->{b} is given twice")));
            }
        }
        net.validate()?;
        Ok(net)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_reject() {
        let ok = r#"{"nodes":[{"up":1e6,"down":2e6,"disk_read":null,"disk_write":5e5,"seek":0.001}],
                     "pair_caps":[[0,0,1e5]],
                     "foreground":[{"node":0,"direction":"up","points":[[0,1e5],[2,0]]}]}"#;
        let net = NetworkFile::parse(ok).unwrap();
        assert_eq!(net.nodes[0].down, 2e6);
        assert_eq!(net.pair_caps[&(0, 0)], 1e5);
        assert!(!net.elastic_foreground, "taken first unless the file says");
        let elastic = ok.replace("\"pair_caps\"", "\"elastic_foreground\":true,\"pair_caps\"");
        assert!(NetworkFile::parse(&elastic).unwrap().elastic_foreground);
        let disk = r#"{"nodes":[{"up":1,"down":1,"disk_read":2,"disk_write":2,"seek":0}],"foreground":[{"node":0,"direction":"write","points":[[0,1]]}]}"#;
        assert_eq!(NetworkFile::parse(disk).unwrap().foreground[0].direction, crate::network::Direction::Write);
        for bad in [
            r#"{"nodes":[]}"#,
            r#"{"nodes":[{"up":0,"down":1,"disk_read":null,"disk_write":null,"seek":0}]}"#,
            r#"{"nodes":[{"up":1,"down":1,"disk_read":null,"disk_write":null,"seek":0}],"pair_caps":[[0,3,1]]}"#,
            r#"{"nodes":[{"up":1,"down":1,"disk_read":null,"disk_write":null,"seek":0}],"bogus":1}"#,
            "not json",
            // Users' disk reads on a node whose disk is not modelled.
            r#"{"nodes":[{"up":1,"down":1,"disk_read":null,"disk_write":null,"seek":0}],"foreground":[{"node":0,"direction":"read","points":[[0,1]]}]}"#,
        ] {
            assert!(NetworkFile::parse(bad).is_err(), "{bad}");
        }
    }
}
