//! Server-side encryption at rest. The gateway encrypts an object's bytes before the cluster
//! erasure-codes them, so chunks on nodes hold only ciphertext, and repair, scrub and
//! rebalancing work on it without any key. Each object has a random data key
//! ([`packages::DataKey`]) that seals its bytes in packages ([`packages`]); the data key is
//! kept with the object wrapped by a master key (SSE-S3, [`master_key`]) or by the client's
//! own key (SSE-C, never stored: a wrong key fails to unwrap it).

pub mod bucket_default;
pub mod master_key;
pub mod packages;
pub mod rotation;

use crate::gateway::Gateway;
use kintsugi_proto::Attrs;
pub use master_key::MasterKeys;
pub use packages::DataKey;
use s3s::dto::ServerSideEncryption;
use s3s::{s3_error, S3Result};

const KIND: &str = "s3.sse";
const WRAPPED: &str = "s3.sse.key";
const SIZE: &str = "s3.sse.size";
const CUSTOMER: &str = "C";
const AES256: &str = "AES256";

/// How an object is encrypted, as kept in its attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct Sealed {
    pub by: SealedBy,
    /// Its data key, wrapped ([`packages::wrap`]).
    pub wrapped: Vec<u8>,
    /// Its plaintext's length (the cluster's object holds the packages).
    pub size: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SealedBy {
    /// SSE-S3: the master key with this id.
    Master(String),
    /// SSE-C: the client's key.
    Customer,
}

impl Sealed {
    pub fn write(&self, a: &mut Attrs) {
        use base64::Engine;
        let kind = match &self.by {
            SealedBy::Master(id) => format!("{AES256} {id}"),
            SealedBy::Customer => CUSTOMER.to_string(),
        };
        a.insert(KIND.into(), kind);
        a.insert(WRAPPED.into(), base64::engine::general_purpose::STANDARD.encode(&self.wrapped));
        a.insert(SIZE.into(), self.size.to_string());
    }

    pub fn of_attrs(a: &Attrs) -> Option<Sealed> {
        use base64::Engine;
        let kind = a.get(KIND)?;
        let by = match kind.split_once(' ') {
            Some((AES256, id)) => SealedBy::Master(id.to_string()),
            _ if kind == CUSTOMER => SealedBy::Customer,
            _ => return None,
        };
        let wrapped = base64::engine::general_purpose::STANDARD.decode(a.get(WRAPPED)?).ok()?;
        Some(Sealed { by, wrapped, size: a.get(SIZE)?.parse().ok()? })
    }

    /// What a GET or HEAD answers about it: (x-amz-server-side-encryption, the customer
    /// algorithm, and the customer key's MD5 as sent).
    pub fn answer(&self, key: Option<&CustomerKey>) -> (Option<ServerSideEncryption>, Option<String>, Option<String>) {
        match self.by {
            SealedBy::Master(_) => (Some(ServerSideEncryption::from_static(ServerSideEncryption::AES256)), None, None),
            SealedBy::Customer => (None, Some(AES256.into()), key.map(|k| k.md5.clone())),
        }
    }
}

/// A key a client sends (SSE-C): checked against its MD5, used, never stored.
#[derive(Clone)]
pub struct CustomerKey {
    key: [u8; 32],
    /// Its MD5 in base64, as sent.
    pub md5: String,
}

/// The SSE-C key of a request's `(algorithm, key, key MD5)` headers, if it sends one.
pub fn customer_key(algorithm: Option<&str>, key: Option<&str>, md5: Option<&str>) -> S3Result<Option<CustomerKey>> {
    use base64::Engine;
    use md5::Digest;
    let b64 = &base64::engine::general_purpose::STANDARD;
    match (algorithm, key, md5) {
        (None, None, None) => Ok(None),
        (Some(a), Some(k), Some(m)) => {
            if a != AES256 {
                return Err(s3_error!(
                    InvalidEncryptionAlgorithmError,
                    "The encryption request you specified is not valid. The valid value is AES256."
                ));
            }
            let key: [u8; 32] = b64.decode(k.trim()).ok().and_then(|k| k.try_into().ok()).ok_or_else(|| {
                s3_error!(InvalidArgument, "The secret key was invalid for the specified algorithm (a base64 256-bit key).")
            })?;
            if b64.encode(md5::Md5::digest(key)) != m.trim() {
                return Err(s3_error!(InvalidArgument, "The calculated MD5 hash of the key did not match the hash that was provided."));
            }
            Ok(Some(CustomerKey { key, md5: m.trim().to_string() }))
        }
        _ => Err(s3_error!(
            InvalidArgument,
            "Requests specifying Server Side Encryption with Customer provided keys must provide the algorithm, the key and its MD5"
        )),
    }
}

/// The SSE-C key of an S3 input's `sse_customer_*` fields (the same names in every input).
macro_rules! customer_key_of {
    ($i:expr) => {
        $crate::sse::customer_key($i.sse_customer_algorithm.as_deref(), $i.sse_customer_key.as_deref(), $i.sse_customer_key_md5.as_deref())
    };
}
pub(crate) use customer_key_of;

/// The SSE-C key of a copy's source (`copy_source_sse_customer_*`).
macro_rules! source_customer_key_of {
    ($i:expr) => {
        $crate::sse::customer_key(
            $i.copy_source_sse_customer_algorithm.as_deref(),
            $i.copy_source_sse_customer_key.as_deref(),
            $i.copy_source_sse_customer_key_md5.as_deref(),
        )
    };
}
pub(crate) use source_customer_key_of;

/// What a write asks for.
#[derive(Clone)]
pub enum Asked {
    /// Nothing: the bucket's default encryption, if it has one.
    Nothing,
    /// SSE-S3 (`x-amz-server-side-encryption: AES256`).
    Master,
    Customer(CustomerKey),
}

/// A write's request: `x-amz-server-side-encryption` and the SSE-C headers.
pub fn asked(sse: Option<&ServerSideEncryption>, customer: Option<CustomerKey>) -> S3Result<Asked> {
    match (sse.map(|s| s.as_str()), customer) {
        (None, None) => Ok(Asked::Nothing),
        (None, Some(c)) => Ok(Asked::Customer(c)),
        (Some(ServerSideEncryption::AES256), None) => Ok(Asked::Master),
        (Some(_), Some(_)) => Err(s3_error!(
            InvalidArgument,
            "Server Side Encryption with Customer provided key is incompatible with the encryption method specified"
        )),
        (Some(other), None) => Err(s3_error!(
            NotImplemented,
            "server-side encryption '{other}' is not supported: AES256 (SSE-S3) and SSE-C are; KMS keys are not"
        )),
    }
}

/// A write's encryption: the new object's data key and how it is kept (its size is set when
/// the write commits).
pub struct Encryption {
    pub key: DataKey,
    pub sealed: Sealed,
    /// The client's key's MD5 (SSE-C), for the answer.
    pub customer_md5: Option<String>,
    /// The part it seals (1 for an object put whole).
    pub part: u32,
}

impl Encryption {
    /// The answer's (x-amz-server-side-encryption, customer algorithm, customer key MD5).
    pub fn answer(&self) -> (Option<ServerSideEncryption>, Option<String>, Option<String>) {
        match self.sealed.by {
            SealedBy::Master(_) => (Some(ServerSideEncryption::from_static(ServerSideEncryption::AES256)), None, None),
            SealedBy::Customer => (None, Some(AES256.into()), self.customer_md5.clone()),
        }
    }
}

pub(crate) fn master_label(id: &str) -> Vec<u8> {
    format!("kintsugi sse-s3 {id}").into_bytes()
}
const CUSTOMER_LABEL: &[u8] = b"kintsugi sse-c";

impl Gateway {
    /// The encryption of a new object in a bucket whose default is `bucket_default`, as
    /// `asked`: none when neither asks for any.
    pub fn encryption(&self, asked: &Asked, bucket_default: bool) -> S3Result<Option<Encryption>> {
        let key = DataKey::random();
        match asked {
            Asked::Nothing if !bucket_default => Ok(None),
            Asked::Nothing | Asked::Master => {
                let keys = self.master_keys.as_ref().ok_or_else(|| {
                    s3_error!(NotImplemented, "SSE-S3 needs the gateway's master key file (kintsugi s3 --sse-key-file); none is configured")
                })?;
                let (id, master) = keys.current();
                let wrapped = packages::wrap(master, &master_label(id), &key.0);
                let sealed = Sealed { by: SealedBy::Master(id.to_string()), wrapped, size: 0 };
                Ok(Some(Encryption { key, sealed, customer_md5: None, part: 1 }))
            }
            Asked::Customer(c) => {
                let wrapped = packages::wrap(&c.key, CUSTOMER_LABEL, &key.0);
                let sealed = Sealed { by: SealedBy::Customer, wrapped, size: 0 };
                Ok(Some(Encryption { key, sealed, customer_md5: Some(c.md5.clone()), part: 1 }))
            }
        }
    }

    /// The data key of an object sealed as `sealed`, with the client's key `customer` for
    /// SSE-C: 400 without it, 403 with another.
    pub fn data_key(&self, sealed: &Sealed, customer: Option<&CustomerKey>) -> S3Result<DataKey> {
        let opened = match (&sealed.by, customer) {
            (SealedBy::Customer, None) => {
                return Err(s3_error!(
                    InvalidRequest,
                    "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object."
                ))
            }
            (SealedBy::Customer, Some(c)) => packages::unwrap(&c.key, CUSTOMER_LABEL, &sealed.wrapped)
                .ok_or_else(|| s3_error!(AccessDenied, "The provided encryption key does not match the object's"))?,
            (SealedBy::Master(_), Some(_)) => {
                return Err(s3_error!(InvalidRequest, "The encryption parameters are not applicable to this object"))
            }
            (SealedBy::Master(id), None) => {
                let master = self.master_keys.as_ref().and_then(|k| k.get(id)).ok_or_else(|| {
                    s3_error!(InternalError, "the object is sealed with master key '{id}', which is not in the gateway's key file")
                })?;
                packages::unwrap(master, &master_label(id), &sealed.wrapped)
                    .ok_or_else(|| s3_error!(InternalError, "the object's data key does not open with master key '{id}'"))?
            }
        };
        Ok(DataKey(opened.try_into().map_err(|_| s3_error!(InternalError, "the object's data key is not 32 bytes"))?))
    }
}

impl Gateway {
    /// The encryption of part `part` of an upload whose record holds `sealed` (none for an
    /// upload that is not encrypted), with the client's key for SSE-C.
    pub fn part_encryption(&self, sealed: Option<&Sealed>, customer: Option<CustomerKey>, part: u32) -> S3Result<Option<Encryption>> {
        let Some(sealed) = sealed else {
            no_key_for_plain(customer.as_ref())?;
            return Ok(None);
        };
        let key = self.data_key(sealed, customer.as_ref())?;
        Ok(Some(Encryption { key, sealed: sealed.clone(), customer_md5: customer.map(|c| c.md5), part }))
    }
}

impl Gateway {
    /// The data key of an object encrypted as `sealed` (none for an object stored plain,
    /// which refuses a client's key as S3 does).
    pub fn key_of(&self, sealed: Option<&Sealed>, customer: Option<&CustomerKey>) -> S3Result<Option<DataKey>> {
        match sealed {
            Some(s) => self.data_key(s, customer).map(Some),
            None => no_key_for_plain(customer).map(|()| None),
        }
    }
}

/// Whether a request sends an SSE-C key (its own or its copy source's) in clear: over plain
/// HTTP from another host. S3 refuses those; loopback is allowed, as for the gateway's own
/// plain HTTP (`origin` is None in-process, where nothing crosses a network).
pub fn customer_key_in_clear(headers: &http::HeaderMap, origin: Option<crate::access::Origin>) -> bool {
    let sent = ["x-amz-server-side-encryption-customer-key", "x-amz-copy-source-server-side-encryption-customer-key"]
        .iter()
        .any(|h| headers.contains_key(*h));
    sent && origin.is_some_and(|o| !o.secure && !o.ip.is_loopback())
}

/// Refuses a key sent for an object that is not encrypted with one (S3's answer).
pub fn no_key_for_plain(customer: Option<&CustomerKey>) -> S3Result<()> {
    match customer {
        Some(_) => Err(s3_error!(InvalidRequest, "The encryption parameters are not applicable to this object")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(b: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    #[test]
    fn a_customer_key_is_checked_by_its_md5_and_its_length() {
        use md5::Digest;
        let key = [5u8; 32];
        let md5 = b64(&md5::Md5::digest(key));
        let k = customer_key(Some("AES256"), Some(&b64(&key)), Some(&md5)).unwrap().unwrap();
        assert_eq!(k.key, key);
        assert!(customer_key(None, None, None).unwrap().is_none());
        let code = |a, k: &str, m: &str| customer_key(a, Some(k), Some(m)).err().unwrap().code().as_str().to_string();
        assert_eq!(code(Some("AES256"), &b64(&key), &b64(&[0; 16])), "InvalidArgument");
        assert_eq!(code(Some("AES256"), &b64(&[5u8; 16]), &b64(&md5::Md5::digest([5u8; 16]))), "InvalidArgument");
        assert_eq!(code(Some("AES128"), &b64(&key), &md5), "InvalidEncryptionAlgorithmError");
        assert!(customer_key(Some("AES256"), None, Some(&md5)).is_err());
    }

    #[test]
    fn a_customer_key_in_clear_is_told_from_one_over_tls_or_loopback() {
        let mut h = http::HeaderMap::new();
        let at = |ip: &str, secure| Some(crate::access::Origin { ip: ip.parse().unwrap(), secure });
        assert!(!customer_key_in_clear(&h, at("10.0.0.1", false)), "no key sent");
        h.insert("x-amz-copy-source-server-side-encryption-customer-key", "AAAA".parse().unwrap());
        assert!(customer_key_in_clear(&h, at("10.0.0.1", false)));
        assert!(customer_key_in_clear(&h, at("2001:db8::1", false)));
        assert!(!customer_key_in_clear(&h, at("10.0.0.1", true)), "over TLS");
        assert!(!customer_key_in_clear(&h, at("127.0.0.1", false)), "loopback");
        assert!(!customer_key_in_clear(&h, at("::1", false)), "loopback");
        assert!(!customer_key_in_clear(&h, None), "in-process");
    }

    #[test]
    fn sealing_is_kept_in_attributes() {
        for by in [SealedBy::Master("k-1".into()), SealedBy::Customer] {
            let s = Sealed { by, wrapped: vec![1, 2, 3], size: 12345 };
            let mut a = Attrs::new();
            s.write(&mut a);
            assert_eq!(Sealed::of_attrs(&a), Some(s));
        }
        assert_eq!(Sealed::of_attrs(&Attrs::new()), None);
    }
}
