//! Objects small enough to be kept in the metadata store itself, as MinIO keeps objects
//! under 128 KiB in their metadata: a put is one request and one (group-committed)
//! metadata transaction instead of k + m chunk files, each written, fsynced and renamed
//! on its node, and two transactions; a get is one request. Such an object is as durable
//! as the metadata that locates every other object: it survives the loss of any number of
//! storage nodes, and with etcd the loss of a minority of its members.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The largest object kept inline. Small enough that a batch of a hundred puts stays well
/// inside one etcd request, and that listing and version records stay small (the bytes
/// are stored beside the record, not in it).
pub const INLINE_MAX: u64 = 16 * 1024;

/// An inline object's bytes and their CRC-32C (checked by the reader, as chunks are).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inline {
    #[serde(serialize_with = "to_base64", deserialize_with = "from_base64")]
    pub data: Vec<u8>,
    pub crc32c: u32,
}

impl Inline {
    pub fn new(data: Vec<u8>) -> Self {
        let crc32c = crate::crc::crc32c(&data);
        Inline { data, crc32c }
    }

    /// Whether the bytes still match their checksum.
    pub fn intact(&self) -> bool {
        crate::crc::crc32c(&self.data) == self.crc32c
    }
}

impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Inline({} bytes, crc32c {:08x})", self.data.len(), self.crc32c)
    }
}

// Control messages are JSON, where bytes as a list of numbers take four times their size.
fn to_base64<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use base64::Engine;
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
}

fn from_base64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    use base64::Engine;
    let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    base64::engine::general_purpose::STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_bytes_travel_as_base64_and_keep_their_checksum() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let i = Inline::new(data.clone());
        let json = serde_json::to_string(&i).unwrap();
        assert!(json.len() < 1500, "{} bytes of JSON for 1000 bytes", json.len());
        let back: Inline = serde_json::from_str(&json).unwrap();
        assert_eq!(back.data, data);
        assert!(back.intact());
        let mut bad = back.clone();
        bad.data[500] ^= 1;
        assert!(!bad.intact());
        assert!(serde_json::from_str::<Inline>(r#"{"data":"not base64!","crc32c":0}"#).is_err());
    }
}
