//! Which coordinator leads, when several share one etcd: the one holding the leader key,
//! a key attached to a lease it keeps alive. The others stand by, watching the key; when the
//! leader dies its lease expires (after `ttl`) and the first standby to create the key leads.
//! Every metadata transaction of the leader requires the key to still hold its value
//! ([`Leadership::fence`]), so a leader cut off from etcd cannot write once another has taken
//! over, even before it notices and stops.

use crate::metadata::etcd_http::{Cmp, Etcd, Op};
use kintsugi_proto::WireError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This coordinator's hold on the leader key.
pub struct Leadership {
    etcd: Arc<Etcd>,
    key: Vec<u8>,
    value: Vec<u8>,
    lease: i64,
    ttl: Duration,
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, WireError> + Send + 'static) -> Result<T, WireError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| WireError::internal(format!("etcd call failed: {e}")))?
}

/// Waits until this coordinator (`me`: its address, for the others' logs) holds the leader
/// key `key`, however long etcd takes to be reachable; says who leads meanwhile.
pub async fn campaign(etcd: Arc<Etcd>, key: Vec<u8>, me: &str, ttl: Duration) -> Result<Leadership, WireError> {
    let value = format!("{me} {:016x}", rand::random::<u64>()).into_bytes();
    let mut said = Vec::new();
    let mut complained = false;
    loop {
        let (e, k, v) = (etcd.clone(), key.clone(), value.clone());
        let ttl_s = ttl.as_secs().max(1) as i64;
        let tried = blocking(move || {
            let lease = e.grant(ttl_s)?;
            let put = Op::Put { key: k.clone(), value: v, lease };
            let (won, read) = e.txn(&[Cmp::Absent { key: k.clone() }], &[put], &[Op::Range { key: k, end: None }])?;
            if !won {
                let _ = e.revoke(lease);
            }
            let holder = read.into_iter().flatten().next().map(|kv| kv.value).unwrap_or_default();
            Ok((won, lease, holder))
        })
        .await;
        match tried {
            Ok((true, lease, _)) => {
                tracing::info!("leading: holding the leader key in etcd (lease of {} s)", ttl.as_secs());
                return Ok(Leadership { etcd, key, value, lease, ttl });
            }
            Ok((false, _, holder)) => {
                complained = false;
                if holder != said {
                    tracing::info!("standing by: {} leads", String::from_utf8_lossy(&holder));
                    said = holder;
                }
            }
            // etcd down or without a quorum: wait for it, as long as it takes.
            Err(err) if !complained => {
                tracing::warn!("standing by: cannot reach etcd ({err}); trying again");
                complained = true;
            }
            Err(err) => tracing::debug!("standing by: {err}"),
        }
        tokio::time::sleep(ttl / 6).await;
    }
}

impl Leadership {
    /// The comparison every metadata transaction of this leader carries.
    pub fn fence(&self) -> Cmp {
        Cmp::ValueIs { key: self.key.clone(), value: self.value.clone() }
    }

    /// Keeps the lease alive; returns, saying why, once the leadership is lost (the lease
    /// expired, or etcd could not be reached for as long as the lease lasts).
    pub async fn hold(&self) -> String {
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.ttl / 4).await;
            let (e, lease) = (self.etcd.clone(), self.lease);
            match blocking(move || Ok(e.keepalive(lease)?)).await {
                Ok(ttl) if ttl > 0 => last_renewed = Instant::now(),
                Ok(_) => return "the leader lease expired".into(),
                Err(err) if last_renewed.elapsed() >= self.ttl => {
                    return format!("etcd unreachable for {:?}, as long as the leader lease lasts: {err}", self.ttl)
                }
                Err(err) => tracing::warn!("renewing the leader lease: {err}"),
            }
        }
    }

    /// Lets the key go now (a clean stop), so a standby need not wait for the lease.
    pub async fn resign(&self) {
        let (e, lease) = (self.etcd.clone(), self.lease);
        let _ = blocking(move || Ok(e.revoke(lease)?)).await;
    }
}
