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

/// An exclusive lock on a data directory, held while a process serves it: two processes on
/// one directory would both claim its identity token, and the coordinator lets that token
/// move a node to a new address.
pub(crate) struct DirLock(#[allow(dead_code)] std::fs::File);

/// Takes `dir`'s lock (`dir/lock`), or says that another process holds it.
pub(crate) fn lock_data_dir(dir: &std::path::Path) -> Result<DirLock, String> {
    use std::os::unix::io::AsRawFd;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join("lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a file descriptor this function owns; no memory is passed.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.kind() == std::io::ErrorKind::WouldBlock {
            format!("{} is in use by another node process (it holds {})", dir.display(), path.display())
        } else {
            format!("cannot lock {}: {e}", path.display())
        });
    }
    Ok(DirLock(f))
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
