//! What `kintsugi serve` records in `DATA/cluster.toml`: where its services listen and which
//! secret they share, so that a restart binds the same ports (clients and nodes find it
//! where it was) and every CLI command finds the store by `--data-dir DATA`.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServeState {
    /// The coordinator's address.
    pub coordinator: String,
    /// The file holding the cluster secret.
    pub secret_file: PathBuf,
    /// The S3 endpoint.
    pub s3: String,
    /// Node `i`'s listen address, by id.
    pub nodes: Vec<String>,
}

impl ServeState {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("cluster.toml")
    }

    /// The state a `serve` in `data_dir` recorded, if one ever ran there.
    pub fn load(data_dir: &Path) -> Result<Option<Self>> {
        let path = Self::path(data_dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        toml::from_str(&text).map(Some).with_context(|| format!("{} is not a serve state file", path.display()))
    }

    /// The state in `data_dir`, or a clear error when no `serve` ran there.
    pub fn require(data_dir: &Path) -> Result<Self> {
        match Self::load(data_dir)? {
            Some(s) => Ok(s),
            None => bail!(
                "{} holds no {}: is it the --data-dir of a `kintsugi serve`?",
                data_dir.display(),
                Self::path(data_dir).file_name().unwrap_or_default().to_string_lossy()
            ),
        }
    }

    pub fn save(&self, data_dir: &Path) -> Result<()> {
        let text = toml::to_string(self).context("cannot encode the serve state")?;
        let text =
            format!("# Written by `kintsugi serve` at each start: where it listens. `kintsugi status --data-dir DIR` reads it.\n{text}");
        crate::atomic_file::write_atomic(&Self::path(data_dir), text.as_bytes())
    }
}

/// `addr` again if it can be bound now (a restart keeps its port), otherwise a fresh port
/// on the same host, with a warning.
pub fn reuse_or_fresh(what: &str, addr: Option<&str>) -> String {
    let Some(addr) = addr.filter(|a| !a.is_empty()) else { return "127.0.0.1:0".into() };
    // The probe is dropped before the service binds: another process could take the port
    // between the two, and then the service's own bind fails with a clear error. It allows
    // what the services allow (SO_REUSEADDR): the connections a killed store left in
    // TIME_WAIT do not keep its ports.
    let probe = || -> std::io::Result<()> {
        let at: std::net::SocketAddr =
            addr.parse().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("not HOST:PORT ({e})")))?;
        let s = socket2::Socket::new(socket2::Domain::for_address(at), socket2::Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        s.bind(&at.into())?;
        s.listen(1)
    };
    match probe() {
        Ok(()) => addr.to_string(),
        Err(e) => {
            tracing::warn!("{what}: {addr} of the last start cannot be bound ({e}); a new port is used");
            eprintln!("warning: {what} cannot listen on {addr} again ({e}); it gets a new port");
            "127.0.0.1:0".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_round_trips_and_a_missing_one_is_named() {
        let d = tempfile::tempdir().unwrap();
        assert!(ServeState::load(d.path()).unwrap().is_none());
        let e = ServeState::require(d.path()).unwrap_err().to_string();
        assert!(e.contains("cluster.toml") && e.contains("kintsugi serve"), "{e}");
        let s = ServeState {
            coordinator: "127.0.0.1:4000".into(),
            secret_file: d.path().join("secret"),
            s3: "127.0.0.1:9000".into(),
            nodes: vec!["127.0.0.1:4001".into(), "127.0.0.1:4002".into()],
        };
        s.save(d.path()).unwrap();
        assert_eq!(ServeState::load(d.path()).unwrap(), Some(s));
        std::fs::write(ServeState::path(d.path()), "coordinator = 3").unwrap();
        assert!(ServeState::load(d.path()).is_err());
    }

    #[test]
    fn a_taken_port_is_not_reused() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = held.local_addr().unwrap().to_string();
        assert_eq!(reuse_or_fresh("test", Some(&taken)), "127.0.0.1:0");
        drop(held);
        assert_eq!(reuse_or_fresh("test", Some(&taken)), taken);
        assert_eq!(reuse_or_fresh("test", None), "127.0.0.1:0");
    }
}
