//! Where S3's things live among a cluster's object names. An object is `bucket/key`; a
//! bucket, an upload and a part are objects of their own under names no bucket can have
//! (bucket names start with a letter or a digit), so the gateway keeps no state and any
//! number of gateways serve one cluster.

/// A bucket's record: a zero-byte object whose attributes hold its settings.
pub const BUCKETS: &str = ".buckets/";
/// A multipart upload's record (`.uploads/bucket/upload-id`): the key and the metadata the
/// object will get.
pub const UPLOADS: &str = ".uploads/";
/// A multipart upload's parts (`.parts/upload-id/00001`), until completed or aborted.
pub const PARTS: &str = ".parts/";

/// The object holding `key` of `bucket`.
pub fn object(bucket: &str, key: &str) -> String {
    format!("{bucket}/{key}")
}

/// Where the keys of `bucket` start.
pub fn bucket_prefix(bucket: &str) -> String {
    format!("{bucket}/")
}

pub fn bucket_record(bucket: &str) -> String {
    format!("{BUCKETS}{bucket}")
}

pub fn upload_record(bucket: &str, upload_id: &str) -> String {
    format!("{UPLOADS}{bucket}/{upload_id}")
}

pub fn uploads_prefix(bucket: &str) -> String {
    format!("{UPLOADS}{bucket}/")
}

/// Part numbers are 1 to 10,000 (S3's limit), zero-padded so that parts list in order.
pub fn part(upload_id: &str, number: i32) -> String {
    format!("{PARTS}{upload_id}/{number:05}")
}

pub fn parts_prefix(upload_id: &str) -> String {
    format!("{PARTS}{upload_id}/")
}

/// The part number of a part's object name.
pub fn part_number(name: &str) -> Option<i32> {
    name.rsplit('/').next()?.parse().ok()
}

/// A new upload id: 128 random bits in hex.
pub fn new_upload_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// Whether `id` could be an upload id (so that it cannot point outside the parts' names).
pub fn is_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_parts_sort_by_number_and_upload_ids_are_checked() {
        let id = new_upload_id();
        assert!(is_upload_id(&id));
        assert!(!is_upload_id("../../x") && !is_upload_id(&id[1..]));
        assert!(part(&id, 9) < part(&id, 10) && part(&id, 999) < part(&id, 10_000));
        assert_eq!(part_number(&part(&id, 42)), Some(42));
        assert!(part(&id, 1).starts_with(&parts_prefix(&id)));
        assert_eq!(object("b", "a/b/c"), "b/a/b/c");
        assert!(object("b", "k").starts_with(&bucket_prefix("b")));
    }
}
