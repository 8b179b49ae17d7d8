//! S3 error codes for what the cluster answers. The client library reports errors as
//! messages; these are the ones a caller can act on, by what they say.

use s3s::{S3Error, S3ErrorCode};

/// The S3 error for a cluster error `e`: a missing object is NoSuchKey; no coordinator, too
/// few live nodes or chunks, a full cluster are ServiceUnavailable (retry later); a name or
/// size the cluster refuses is the client's fault; anything else is InternalError, logged.
pub fn from_cluster(e: String) -> S3Error {
    let code = if e.contains("no object named") {
        S3ErrorCode::NoSuchKey
    } else if e.starts_with("coordinator ")
        || e.contains("live nodes")
        || e.contains(" is unreadable: ")
        || e.contains("with room for")
        || e.contains("unavailable")
        || e.contains("did not answer")
    {
        S3ErrorCode::ServiceUnavailable
    } else if e.contains("object names are") {
        S3ErrorCode::KeyTooLongError
    } else if e.contains("is too large") || e.contains("stripes of") {
        S3ErrorCode::EntityTooLarge
    } else {
        tracing::warn!("S3 request failed: {e}");
        S3ErrorCode::InternalError
    };
    S3Error::with_message(code, e)
}

/// Whether a cluster error says the object is not there.
pub fn is_missing(e: &str) -> bool {
    e.contains("no object named")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_errors_map_to_the_codes_a_client_acts_on() {
        let code = |m: &str| from_cluster(m.to_string()).code().clone();
        assert_eq!(code("no object named 'b/k'"), S3ErrorCode::NoSuchKey);
        assert_eq!(code("coordinator 127.0.0.1:1: connection refused"), S3ErrorCode::ServiceUnavailable);
        assert_eq!(code("rs:6,3 needs 9 live nodes, 7 are alive"), S3ErrorCode::ServiceUnavailable);
        assert_eq!(code("object names are 1 to 1100 bytes"), S3ErrorCode::KeyTooLongError);
        assert_eq!(code("something else"), S3ErrorCode::InternalError);
    }
}
