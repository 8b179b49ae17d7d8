//! Master key rotation. A new key put first in the key file wraps new objects from the
//! gateway's next start; [`rewrap`] then re-wraps every older SSE-S3 data key with it. Only
//! objects' attributes change: the chunks, sealed by the data keys, stay as they are, and
//! the old key can leave the file once nothing names it.

use super::master_key::MasterKeys;
use super::{packages, Sealed, SealedBy};
use kintsugi_client::{Client, VersionsPage};

/// What a pass found and did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Rewrapped {
    /// Versions looked at (every object and upload in the cluster).
    pub scanned: u64,
    /// SSE-S3 data keys re-wrapped with the current master key.
    pub rewrapped: u64,
    /// SSE-S3 data keys already under it.
    pub current: u64,
    /// Objects whose master key is not in the file, or whose data key does not open with it.
    pub unopenable: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RewrapError {
    #[error("listing the cluster's objects: {0}")]
    List(#[source] kintsugi_client::Error),
    #[error("writing the attributes of '{name}' version {version}: {source}")]
    Set { name: String, version: u64, source: kintsugi_client::Error },
}

/// Re-wraps every SSE-S3 data key not under `keys`' current master key with it.
/// `progress` sees the counts after each page of versions.
pub async fn rewrap(client: &Client, keys: &MasterKeys, progress: &dyn Fn(&Rewrapped)) -> Result<Rewrapped, RewrapError> {
    let (current_id, current) = keys.current();
    let mut done = Rewrapped::default();
    let (mut key_marker, mut version_marker) = (String::new(), None);
    loop {
        let page = VersionsPage { prefix: "", delimiter: "", key_marker: &key_marker, version_marker, limit: 1000 };
        let listing = client.list_versions(page).await.map_err(RewrapError::List)?;
        for v in &listing.versions {
            done.scanned += 1;
            let Some(sealed) = Sealed::of_attrs(&v.attrs) else { continue };
            let SealedBy::Master(id) = &sealed.by else { continue };
            if id == current_id {
                done.current += 1;
                continue;
            }
            let opened = keys.get(id).and_then(|old| packages::unwrap(old, &super::master_label(id), &sealed.wrapped));
            let Some(data_key) = opened else {
                done.unopenable.push(format!("{} version {} (master key '{id}')", v.name, v.version));
                continue;
            };
            let wrapped = packages::wrap(current, &super::master_label(current_id), &data_key);
            let mut attrs = v.attrs.clone();
            Sealed { by: SealedBy::Master(current_id.to_string()), wrapped, ..sealed }.write(&mut attrs);
            client.set_attrs(&v.name, v.version, attrs).await.map_err(|source| RewrapError::Set {
                name: v.name.clone(),
                version: v.version,
                source,
            })?;
            done.rewrapped += 1;
        }
        progress(&done);
        match listing.next {
            Some((k, v)) => (key_marker, version_marker) = (k, v),
            None => return Ok(done),
        }
    }
}
