//! S3's additional checksums (CRC32, CRC32C, CRC64NVME, SHA-1, SHA-256): what a write asks
//! for, computed over the body as it streams, checked against the value the client sent (in
//! a header, or in the trailer of an aws-chunked body) before the commit, stored with the
//! object and returned when a read asks (`x-amz-checksum-mode: ENABLED`). A multipart
//! object's checksum is COMPOSITE (the checksum of its parts' checksums, `-N`) or, for the
//! CRCs, FULL_OBJECT (the parts' CRCs combined into the whole body's).

use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::dto::{Checksum, ChecksumAlgorithm, ChecksumType};
use s3s::{s3_error, S3Result};
use std::fmt;
use std::str::FromStr;

/// The checksum values of an input that carries them (the same field names in each).
macro_rules! checksum_of {
    ($i:expr) => {
        s3s::dto::Checksum {
            checksum_crc32: $i.checksum_crc32.clone(),
            checksum_crc32c: $i.checksum_crc32c.clone(),
            checksum_crc64nvme: $i.checksum_crc64nvme.clone(),
            checksum_sha1: $i.checksum_sha1.clone(),
            checksum_sha256: $i.checksum_sha256.clone(),
            checksum_type: None,
        }
    };
}
pub(crate) use checksum_of;

/// A struct literal of an S3 output with the checksum fields of `c` (a [`Checksum`]) filled
/// in: every output that carries a checksum names them alike.
macro_rules! with_checksum {
    ($c:expr, $t:ident { $($rest:tt)* }) => {{
        let c: s3s::dto::Checksum = $c;
        $t {
            checksum_crc32: c.checksum_crc32,
            checksum_crc32c: c.checksum_crc32c,
            checksum_crc64nvme: c.checksum_crc64nvme,
            checksum_sha1: c.checksum_sha1,
            checksum_sha256: c.checksum_sha256,
            $($rest)*
        }
    }};
}
pub(crate) use with_checksum;

/// One of S3's checksum algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

pub const ALL: [Algorithm; 5] = [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64Nvme, Algorithm::Sha1, Algorithm::Sha256];

impl Algorithm {
    /// S3's name (`CRC32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Crc32 => ChecksumAlgorithm::CRC32,
            Algorithm::Crc32c => ChecksumAlgorithm::CRC32C,
            Algorithm::Crc64Nvme => ChecksumAlgorithm::CRC64NVME,
            Algorithm::Sha1 => ChecksumAlgorithm::SHA1,
            Algorithm::Sha256 => ChecksumAlgorithm::SHA256,
        }
    }

    /// The header carrying its value (`x-amz-checksum-crc32`, ...).
    pub fn header(self) -> String {
        format!("x-amz-checksum-{}", self.name().to_ascii_lowercase())
    }

    /// Whether parts' checksums combine into the whole body's (a CRC's do).
    pub fn combines(self) -> bool {
        matches!(self, Algorithm::Crc32 | Algorithm::Crc32c | Algorithm::Crc64Nvme)
    }

    fn digest_len(self) -> usize {
        match self {
            Algorithm::Crc32 | Algorithm::Crc32c => 4,
            Algorithm::Crc64Nvme => 8,
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
        }
    }

    fn crc(self) -> Option<crc_fast::CrcAlgorithm> {
        match self {
            Algorithm::Crc32 => Some(crc_fast::CrcAlgorithm::Crc32IsoHdlc),
            Algorithm::Crc32c => Some(crc_fast::CrcAlgorithm::Crc32Iscsi),
            Algorithm::Crc64Nvme => Some(crc_fast::CrcAlgorithm::Crc64Nvme),
            Algorithm::Sha1 | Algorithm::Sha256 => None,
        }
    }

    /// Its value in a [`Checksum`] (as s3s carries them in inputs and outputs).
    pub fn get(self, c: &Checksum) -> Option<&String> {
        match self {
            Algorithm::Crc32 => c.checksum_crc32.as_ref(),
            Algorithm::Crc32c => c.checksum_crc32c.as_ref(),
            Algorithm::Crc64Nvme => c.checksum_crc64nvme.as_ref(),
            Algorithm::Sha1 => c.checksum_sha1.as_ref(),
            Algorithm::Sha256 => c.checksum_sha256.as_ref(),
        }
    }

    fn set(self, c: &mut Checksum, v: String) {
        let slot = match self {
            Algorithm::Crc32 => &mut c.checksum_crc32,
            Algorithm::Crc32c => &mut c.checksum_crc32c,
            Algorithm::Crc64Nvme => &mut c.checksum_crc64nvme,
            Algorithm::Sha1 => &mut c.checksum_sha1,
            Algorithm::Sha256 => &mut c.checksum_sha256,
        };
        *slot = Some(v);
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = s3s::S3Error;
    fn from_str(s: &str) -> S3Result<Self> {
        ALL.into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| s3_error!(InvalidRequest, "Checksum algorithm '{s}' is not one of CRC32, CRC32C, CRC64NVME, SHA1, SHA256"))
    }
}

/// A checksum of a body, as S3 stores it: the algorithm, the value in base64 (a composite
/// one ends in `-N`), and whether it covers the whole body or its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub algorithm: Algorithm,
    pub value: String,
    pub composite: bool,
}

impl Stored {
    /// As s3s answers it: the value in its algorithm's field, and the type.
    pub fn answer(&self) -> (Checksum, ChecksumType) {
        let mut c = Checksum::default();
        self.algorithm.set(&mut c, self.value.clone());
        let t = if self.composite { ChecksumType::COMPOSITE } else { ChecksumType::FULL_OBJECT };
        (c, ChecksumType::from(t.to_string()))
    }
}

/// What a write asks to be checked and stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub algorithm: Algorithm,
    /// The value sent in a header; none when it comes in the body's trailer, or when the
    /// client only named the algorithm (the gateway computes and stores it).
    pub value: Option<String>,
    /// The trailer that carries the value (`x-amz-trailer`).
    pub trailer: bool,
}

/// The checksum a PutObject or UploadPart asks for: at most one `x-amz-checksum-*` value
/// header, or a trailer named in `x-amz-trailer`, or only an algorithm.
pub fn wanted(given: &Checksum, algorithm: Option<&ChecksumAlgorithm>, headers: &http::HeaderMap) -> S3Result<Option<Wanted>> {
    let values: Vec<(Algorithm, &String)> = ALL.into_iter().filter_map(|a| Some((a, a.get(given)?))).collect();
    if values.len() > 1 {
        return Err(s3_error!(InvalidRequest, "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."));
    }
    let named = algorithm.map(|a| a.as_str().parse::<Algorithm>()).transpose()?;
    let trailer = headers.get("x-amz-trailer").and_then(|v| v.to_str().ok()).map(|t| t.trim().to_ascii_lowercase());
    let from_trailer = match trailer.as_deref() {
        None | Some("") => None,
        Some(t) => Some(
            ALL.into_iter()
                .find(|a| a.header() == t)
                .ok_or_else(|| s3_error!(InvalidRequest, "the trailer '{t}' is not a checksum header S3 knows"))?,
        ),
    };
    let w = match (values.first(), from_trailer, named) {
        (Some(&(a, v)), None, _) => {
            check_form(a, v)?;
            Wanted { algorithm: a, value: Some(v.clone()), trailer: false }
        }
        (None, Some(a), _) => Wanted { algorithm: a, value: None, trailer: true },
        (None, None, Some(a)) => Wanted { algorithm: a, value: None, trailer: false },
        (None, None, None) => return Ok(None),
        (Some(_), Some(_), _) => return Err(s3_error!(InvalidRequest, "a checksum in both a header and the trailer")),
    };
    if named.is_some_and(|n| n != w.algorithm) {
        return Err(s3_error!(
            InvalidRequest,
            "x-amz-sdk-checksum-algorithm {} does not match the checksum sent ({})",
            named.expect("checked"),
            w.algorithm
        ));
    }
    Ok(Some(w))
}

/// A value must be its algorithm's digest in base64.
fn check_form(a: Algorithm, v: &str) -> S3Result<()> {
    use base64::Engine;
    match base64::engine::general_purpose::STANDARD.decode(v.trim()) {
        Ok(b) if b.len() == a.digest_len() => Ok(()),
        _ => Err(s3_error!(InvalidRequest, "Value for {} header is invalid.", a.header())),
    }
}

/// The value a write's checksum must have: from its header, or from the body's trailer
/// (read once the body has ended).
pub fn expected(w: &Wanted, trailers: Option<&s3s::TrailingHeaders>) -> S3Result<Option<String>> {
    if !w.trailer {
        return Ok(w.value.clone());
    }
    let header = w.algorithm.header();
    let v = trailers.and_then(|t| t.read(|h| h.get(header.as_str()).and_then(|v| v.to_str().ok()).map(str::to_string))).flatten();
    match v {
        Some(v) => {
            check_form(w.algorithm, &v)?;
            Ok(Some(v))
        }
        None => Err(s3_error!(InvalidRequest, "the body's trailer did not carry {header}")),
    }
}

/// Refuses a computed checksum that differs from the one sent (S3's BadDigest).
pub fn verify(a: Algorithm, expected: Option<&str>, computed: &str) -> S3Result<()> {
    match expected {
        Some(e) if e.trim() != computed => {
            Err(s3_error!(BadDigest, "The {a} you specified ({}) did not match the calculated checksum ({computed}).", e.trim()))
        }
        _ => Ok(()),
    }
}

/// A running checksum of one algorithm.
pub enum Hasher {
    Crc32(Crc32),
    Crc32c(Crc32c),
    Crc64Nvme(Crc64Nvme),
    Sha1(Sha1),
    Sha256(Sha256),
}

impl Hasher {
    pub fn new(a: Algorithm) -> Self {
        match a {
            Algorithm::Crc32 => Hasher::Crc32(Crc32::new()),
            Algorithm::Crc32c => Hasher::Crc32c(Crc32c::new()),
            Algorithm::Crc64Nvme => Hasher::Crc64Nvme(Crc64Nvme::new()),
            Algorithm::Sha1 => Hasher::Sha1(Sha1::new()),
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
        }
    }

    pub fn update(&mut self, b: &[u8]) {
        match self {
            Hasher::Crc32(h) => h.update(b),
            Hasher::Crc32c(h) => h.update(b),
            Hasher::Crc64Nvme(h) => h.update(b),
            Hasher::Sha1(h) => h.update(b),
            Hasher::Sha256(h) => h.update(b),
        }
    }

    /// The digest in base64, as S3 writes it.
    pub fn finish(self) -> String {
        let d: Vec<u8> = match self {
            Hasher::Crc32(h) => h.finalize().to_vec(),
            Hasher::Crc32c(h) => h.finalize().to_vec(),
            Hasher::Crc64Nvme(h) => h.finalize().to_vec(),
            Hasher::Sha1(h) => h.finalize().as_ref().to_vec(),
            Hasher::Sha256(h) => h.finalize().as_ref().to_vec(),
        };
        b64(&d)
    }
}

fn b64(d: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(d)
}

fn unb64(v: &str) -> S3Result<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(v).map_err(|_| s3_error!(InternalError, "a stored checksum '{v}' is not base64"))
}

/// A COMPOSITE multipart checksum: the checksum of the parts' binary checksums, `-N`.
pub fn composite(a: Algorithm, parts: &[String]) -> S3Result<String> {
    let mut h = Hasher::new(a);
    for p in parts {
        h.update(&unb64(p)?);
    }
    Ok(format!("{}-{}", h.finish(), parts.len()))
}

/// A FULL_OBJECT multipart checksum: the parts' CRCs (with their sizes) combined into the
/// CRC of the whole body, as if it had been computed in one pass.
pub fn full_object(a: Algorithm, parts: &[(String, u64)]) -> S3Result<String> {
    let crc = a.crc().ok_or_else(|| s3_error!(InvalidRequest, "{a} checksums of parts do not combine into a FULL_OBJECT checksum"))?;
    let mut whole: Option<u64> = None;
    for (v, size) in parts {
        let b = unb64(v)?;
        let part = b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        whole = Some(match whole {
            None => part,
            Some(w) => crc_fast::checksum_combine(crc, w, part, *size),
        });
    }
    let w = whole.ok_or_else(|| s3_error!(InternalError, "no parts"))?;
    let bytes = w.to_be_bytes();
    Ok(b64(&bytes[8 - a.digest_len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(a: Algorithm, data: &[u8]) -> String {
        let mut h = Hasher::new(a);
        h.update(data);
        h.finish()
    }

    /// Known answers for "123456789", the check input every CRC catalogue gives:
    /// CRC-32 cbf43926, CRC-32C e3069283, CRC-64/NVME ae8b14860a799888; and
    /// `printf 123456789 | sha1sum` / `sha256sum`.
    #[test]
    fn digests_match_the_catalogues_check_values() {
        let hex = |a| {
            use base64::Engine;
            hex::encode(base64::engine::general_purpose::STANDARD.decode(of(a, b"123456789")).unwrap())
        };
        assert_eq!(hex(Algorithm::Crc32), "cbf43926");
        assert_eq!(hex(Algorithm::Crc32c), "e3069283");
        assert_eq!(hex(Algorithm::Crc64Nvme), "ae8b14860a799888");
        assert_eq!(hex(Algorithm::Sha1), "f7c3bc1d808e04732adf679965ccc34ca7ae3441");
        assert_eq!(hex(Algorithm::Sha256), "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225");
    }

    /// A FULL_OBJECT checksum of parts equals the checksum of their concatenation.
    #[test]
    fn combined_crcs_equal_the_whole_bodys() {
        let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for a in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64Nvme] {
            let cuts = [0, 1, 4_999, 50_000, 100_000];
            let parts: Vec<(String, u64)> = cuts.windows(2).map(|w| (of(a, &body[w[0]..w[1]]), (w[1] - w[0]) as u64)).collect();
            assert_eq!(full_object(a, &parts).unwrap(), of(a, &body), "{a}");
        }
        assert!(full_object(Algorithm::Sha256, &[(of(Algorithm::Sha256, b"x"), 1)]).is_err());
    }

    /// COMPOSITE: the checksum of the binary part checksums, then `-N` (as S3 documents;
    /// the value below is `python3 -c "import hashlib,base64; print(base64.b64encode(
    /// hashlib.sha256(hashlib.sha256(b'a').digest()+hashlib.sha256(b'b').digest()).digest()))"`).
    #[test]
    fn a_composite_checksum_hashes_the_parts_checksums() {
        let parts = [of(Algorithm::Sha256, b"a"), of(Algorithm::Sha256, b"b")];
        assert_eq!(composite(Algorithm::Sha256, &parts).unwrap(), "5aAf7hTg7VxIcU8iGA8lrYNltT+XefedxKPX6Tlj+Uo=-2");
    }

    #[test]
    fn a_request_asks_for_one_checksum() {
        let h = http::HeaderMap::new();
        let c = |crc32: Option<&str>, sha: Option<&str>| Checksum {
            checksum_crc32: crc32.map(str::to_string),
            checksum_sha256: sha.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(wanted(&c(None, None), None, &h).unwrap(), None);
        let w = wanted(&c(Some("AAAAAA=="), None), None, &h).unwrap().unwrap();
        assert_eq!((w.algorithm, w.value.as_deref(), w.trailer), (Algorithm::Crc32, Some("AAAAAA=="), false));
        assert!(wanted(&c(Some("AAAAAA=="), Some("x")), None, &h).is_err(), "two values");
        assert!(wanted(&c(Some("not base64!"), None), None, &h).is_err());
        assert!(wanted(&c(Some("AAAAAAAA"), None), None, &h).is_err(), "six bytes are no CRC32");
        let sha = ChecksumAlgorithm::from("SHA256".to_string());
        assert!(wanted(&c(Some("AAAAAA=="), None), Some(&sha), &h).is_err(), "algorithm and value disagree");
        let w = wanted(&c(None, None), Some(&sha), &h).unwrap().unwrap();
        assert_eq!((w.algorithm, w.value, w.trailer), (Algorithm::Sha256, None, false));
        let mut t = http::HeaderMap::new();
        t.insert("x-amz-trailer", "x-amz-checksum-crc32c".parse().unwrap());
        let w = wanted(&c(None, None), None, &t).unwrap().unwrap();
        assert_eq!((w.algorithm, w.trailer), (Algorithm::Crc32c, true));
        assert!(verify(Algorithm::Crc32, Some("AAAAAA=="), "AAAAAA==").is_ok());
        assert_eq!(verify(Algorithm::Crc32, Some("AAAAAA=="), "AAAAAQ==").unwrap_err().code().as_str(), "BadDigest");
    }
}
