//! etcd's v3 API through its JSON gateway (`POST /v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/...` on the client port, served by every etcd since 3.3). The gRPC client
//! crate (`etcd-client`) compiles etcd's protobuf files at build time with `protoc`, which
//! our build does not have (cargo and a C compiler only); the gateway speaks the same API as
//! JSON over HTTP/1.1, with keys and values in base64 and 64-bit numbers as strings.
//!
//! Blocking calls (ureq): the metadata store's interface is synchronous, as redb's is. A
//! call goes to the member that answered last and moves on to the next member when one
//! fails, so the loss of a member costs one timeout, not an outage.

use crate::metadata::records::MetaError;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A key-value pair as etcd returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub mod_revision: i64,
}

/// One operation of a transaction.
#[derive(Clone, Debug)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    },
    Delete {
        key: Vec<u8>,
    },
    /// Keys from `key` up to `end` (exclusive; None: the key alone).
    Range {
        key: Vec<u8>,
        end: Option<Vec<u8>>,
    },
}

/// One comparison guarding a transaction.
#[derive(Clone, Debug)]
pub enum Cmp {
    /// The key holds exactly this value.
    ValueIs { key: Vec<u8>, value: Vec<u8> },
    /// The key does not exist.
    Absent { key: Vec<u8> },
}

/// A client of an etcd cluster through its gateway.
pub struct Etcd {
    endpoints: Vec<String>,
    agent: ureq::Agent,
    /// The member tried first: the one that answered last.
    at: AtomicUsize,
    /// How long a call keeps trying the members (a member lost, etcd electing a new raft
    /// leader) before it fails.
    retry_for: Duration,
}

/// The first key past every key starting with `prefix` (etcd's range end for a prefix).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff: to the end of the key space.
    vec![0]
}

fn b64(x: &[u8]) -> String {
    B64.encode(x)
}

fn unb64(v: &Value) -> Result<Vec<u8>, MetaError> {
    B64.decode(v.as_str().unwrap_or("")).map_err(|e| MetaError::Corrupt(format!("etcd sent bad base64: {e}")))
}

/// A 64-bit number: the gateway sends them as strings, and leaves out zeros.
fn num(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn kvs(v: &Value) -> Result<Vec<Kv>, MetaError> {
    v["kvs"]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or(&[])
        .iter()
        .map(|kv| Ok(Kv { key: unb64(&kv["key"])?, value: unb64(&kv["value"])?, mod_revision: num(&kv["mod_revision"]) }))
        .collect()
}

fn op_json(op: &Op) -> Value {
    match op {
        Op::Put { key, value, lease } => {
            let mut put = json!({ "key": b64(key), "value": b64(value) });
            if *lease != 0 {
                put["lease"] = json!(lease.to_string());
            }
            json!({ "request_put": put })
        }
        Op::Delete { key } => json!({ "request_delete_range": { "key": b64(key) } }),
        Op::Range { key, end } => {
            let mut r = json!({ "key": b64(key) });
            if let Some(end) = end {
                r["range_end"] = json!(b64(end));
            }
            json!({ "request_range": r })
        }
    }
}

fn cmp_json(c: &Cmp) -> Value {
    match c {
        Cmp::ValueIs { key, value } => json!({ "target": "VALUE", "key": b64(key), "result": "EQUAL", "value": b64(value) }),
        Cmp::Absent { key } => json!({ "target": "CREATE", "key": b64(key), "result": "EQUAL", "create_revision": "0" }),
    }
}

impl Etcd {
    /// `endpoints`: `host:port` of the members' client ports; `timeout` bounds one request
    /// to one member, and a call tries the members again until `retry_for` has passed.
    pub fn new(endpoints: &[String], timeout: Duration, retry_for: Duration) -> Result<Self, MetaError> {
        if endpoints.is_empty() {
            return Err(MetaError::Config("etcd: no endpoints".into()));
        }
        let agent = ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(2)).timeout(timeout).build();
        let endpoints = endpoints.iter().map(|e| if e.contains("://") { e.clone() } else { format!("http://{e}") }).collect();
        Ok(Etcd { endpoints, agent, at: AtomicUsize::new(0), retry_for })
    }

    /// POSTs `body` to `path`, trying each member in turn from the last that answered, in
    /// rounds until one answers or `retry_for` has passed.
    fn post(&self, path: &str, body: &Value) -> Result<Value, MetaError> {
        let started = std::time::Instant::now();
        loop {
            match self.post_round(path, body) {
                Ok(v) => return Ok(v),
                Err(e) if started.elapsed() >= self.retry_for => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// One try of every member.
    fn post_round(&self, path: &str, body: &Value) -> Result<Value, MetaError> {
        let first = self.at.load(Ordering::Relaxed);
        let mut errors = Vec::new();
        for k in 0..self.endpoints.len() {
            let i = (first + k) % self.endpoints.len();
            let url = format!("{}{path}", self.endpoints[i]);
            match self.agent.post(&url).send_json(body) {
                Ok(r) => {
                    self.at.store(i, Ordering::Relaxed);
                    return r
                        .into_json::<Value>()
                        .map_err(|e| MetaError::Unreachable(format!("etcd {}: unreadable answer: {e}", self.endpoints[i])));
                }
                Err(ureq::Error::Status(code, r)) => {
                    let v: Value = r.into_json().unwrap_or(Value::Null);
                    let msg = v["message"].as_str().or(v["error"].as_str()).unwrap_or("").to_string();
                    errors.push(format!("{}: {code} {msg}", self.endpoints[i]));
                }
                Err(e) => errors.push(format!("{}: {e}", self.endpoints[i])),
            }
        }
        Err(MetaError::Unreachable(format!("etcd unavailable: no member could serve {path}: {}", errors.join("; "))))
    }

    /// Up to `limit` keys from `key` up to `end` (None: the key alone), in key order; and
    /// whether there are more.
    pub fn range(&self, key: &[u8], end: Option<&[u8]>, limit: usize) -> Result<(Vec<Kv>, bool), MetaError> {
        let mut body = json!({ "key": b64(key) });
        if let Some(end) = end {
            body["range_end"] = json!(b64(end));
        }
        if limit > 0 && limit < usize::MAX {
            body["limit"] = json!(limit.to_string());
        }
        let v = self.post("/v3/kv/range", &body)?;
        Ok((kvs(&v)?, v["more"].as_bool().unwrap_or(false)))
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Kv>, MetaError> {
        Ok(self.range(key, None, 1)?.0.into_iter().next())
    }

    /// Every key with `prefix`, a page of `page` at a time.
    pub fn scan(&self, prefix: &[u8], page: usize) -> Result<Vec<Kv>, MetaError> {
        let end = prefix_end(prefix);
        let mut from = prefix.to_vec();
        let mut all = Vec::new();
        loop {
            let (got, more) = self.range(&from, Some(&end), page)?;
            let Some(last) = got.last() else { break };
            from = last.key.clone();
            from.push(0);
            all.extend(got);
            if !more {
                break;
            }
        }
        Ok(all)
    }

    /// A transaction: if every comparison holds, `success` runs, else `failure`. Returns
    /// which, and the pairs each range operation of the branch that ran read.
    pub fn txn(&self, cmps: &[Cmp], success: &[Op], failure: &[Op]) -> Result<(bool, Vec<Vec<Kv>>), MetaError> {
        let body = json!({
            "compare": cmps.iter().map(cmp_json).collect::<Vec<_>>(),
            "success": success.iter().map(op_json).collect::<Vec<_>>(),
            "failure": failure.iter().map(op_json).collect::<Vec<_>>(),
        });
        let v = self.post("/v3/kv/txn", &body)?;
        let ranges = v["responses"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or(&[])
            .iter()
            .filter(|r| !r["response_range"].is_null())
            .map(|r| kvs(&r["response_range"]))
            .collect::<Result<_, _>>()?;
        Ok((v["succeeded"].as_bool().unwrap_or(false), ranges))
    }

    /// A lease of `ttl` seconds; its id.
    pub fn grant(&self, ttl: i64) -> Result<i64, MetaError> {
        let v = self.post("/v3/lease/grant", &json!({ "TTL": ttl.to_string() }))?;
        match num(&v["ID"]) {
            0 => Err(MetaError::Unreachable(format!("etcd granted no lease: {v}"))),
            id => Ok(id),
        }
    }

    /// Renews lease `id`; its remaining time to live (0: it has expired).
    pub fn keepalive(&self, id: i64) -> Result<i64, MetaError> {
        let v = self.post("/v3/lease/keepalive", &json!({ "ID": id.to_string() }))?;
        Ok(num(&v["result"]["TTL"]))
    }

    pub fn revoke(&self, id: i64) -> Result<(), MetaError> {
        self.post("/v3/lease/revoke", &json!({ "ID": id.to_string() })).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_past_every_key_with_the_prefix() {
        assert_eq!(prefix_end(b"a/"), b"a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }

    #[test]
    fn numbers_come_as_strings_or_not_at_all() {
        assert_eq!(num(&json!("42")), 42);
        assert_eq!(num(&json!(7)), 7);
        assert_eq!(num(&Value::Null), 0);
    }
}
