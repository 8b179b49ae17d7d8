//! A data directory's identity (`identity.json`): which node it belongs to and which
//! cluster it joined, so a directory is never served under another node id or cluster.

use crate::config::NodeConfig;
use kintsugi_plan::NodeId;
use serde::{Deserialize, Serialize};

/// What a data directory belongs to: the node id, written on its first start, the cluster,
/// written when the coordinator first welcomes it (0 until then), and a random token that
/// tells this directory from any other (the coordinator binds the node id to it).
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Identity {
    pub node: NodeId,
    #[serde(default)]
    pub cluster: u64,
    #[serde(default)]
    pub token: String,
}

fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
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

/// Refuses a data directory that belongs to another node id; claims a new one. Returns its
/// identity (a directory from before tokens is given one).
pub(crate) fn claim_data_dir(cfg: &NodeConfig) -> Result<Identity, String> {
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
            if id.token.is_empty() {
                let id = Identity { token: new_token(), ..id };
                return write_identity(&cfg.data_dir, &id).map(|_| id);
            }
            Ok(id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = Identity { node: cfg.id, cluster: 0, token: new_token() };
            write_identity(&cfg.data_dir, &id).map(|_| id)
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}
