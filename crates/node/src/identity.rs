//! A data directory's identity (`identity.json`): which node it belongs to and which
//! cluster it joined, so a directory is never served under another node id or cluster.

use crate::config::NodeConfig;
use kintsugi_plan::NodeId;
use serde::{Deserialize, Serialize};

/// What a data directory belongs to: the node id, written on its first start, and the
/// cluster, written when the coordinator first welcomes it (0 until then).
#[derive(Serialize, Deserialize)]
pub(crate) struct Identity {
    pub node: NodeId,
    #[serde(default)]
    pub cluster: u64,
}

pub(crate) fn write_identity(dir: &std::path::Path, id: &Identity) -> Result<(), String> {
    let path = dir.join("identity.json");
    // Temp file, fsync, rename: a crash leaves no half-written identity.
    let tmp = dir.join("identity.json.tmp");
    let body = serde_json::to_vec(id).expect("serialises");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, &body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Refuses a data directory that belongs to another node id; claims a new one. Returns
/// the cluster the directory joined (0: none yet).
pub(crate) fn claim_data_dir(cfg: &NodeConfig) -> Result<u64, String> {
    let path = cfg.data_dir.join("identity.json");
    match std::fs::read(&path) {
        Ok(bytes) => {
            let id: Identity = serde_json::from_slice(&bytes).map_err(|e| format!("{} is not a node identity: {e}", path.display()))?;
            if id.node != cfg.id {
                return Err(format!(
                    "{} belongs to node {}, not node {}: give that id or another directory",
                    cfg.data_dir.display(),
                    id.node,
                    cfg.id
                ));
            }
            Ok(id.cluster)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            write_identity(&cfg.data_dir, &Identity { node: cfg.id, cluster: 0 }).map(|_| 0)
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}
