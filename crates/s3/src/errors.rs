//! S3 error codes for what the cluster answers, by the kind of the client library's error.

use kintsugi_client::{Error, ErrorKind};
use s3s::{S3Error, S3ErrorCode};

/// The code a full store answers with (507, as MinIO's XMinioStorageFull): SDKs do not retry
/// it, as they would a 503, since only deleting or adding capacity ends it.
pub const STORAGE_FULL: &str = "XKintsugiStorageFull";

/// The S3 error for a cluster error `e`, one place for all of them:
///
/// | kintsugi | S3 code | status |
/// |---|---|---|
/// | NotFound | NoSuchKey | 404 |
/// | InvalidPart | InvalidPart | 400 |
/// | PreconditionFailed (a conditional write lost to another) | PreconditionFailed | 412 |
/// | InvalidName | KeyTooLongError | 400 |
/// | TooLarge | EntityTooLarge | 400 |
/// | a shortfall of space (the cluster is full) | XKintsugiStorageFull | 507 |
/// | Unavailable (no coordinator, a leader changing, too few live nodes or chunks), Replaced | ServiceUnavailable, with Retry-After | 503 |
/// | Locked (object lock keeps the version) | AccessDenied | 403 |
/// | BadRequest (a code wider than the cluster, ...) | InvalidRequest | 400 |
/// | Input (the request's body broke off) | IncompleteBody | 400 |
/// | Internal, Corrupt | InternalError (logged) | 500 |
pub fn from_cluster(e: Error) -> S3Error {
    if e.is_short_of(kintsugi_proto::Scarce::Space) {
        let mut s = S3Error::with_message(S3ErrorCode::Custom(STORAGE_FULL.into()), e.message().to_string());
        s.set_status_code(http::StatusCode::INSUFFICIENT_STORAGE);
        return s;
    }
    let code = match e.kind() {
        ErrorKind::NotFound => S3ErrorCode::NoSuchKey,
        ErrorKind::InvalidPart => S3ErrorCode::InvalidPart,
        ErrorKind::PreconditionFailed => S3ErrorCode::PreconditionFailed,
        ErrorKind::InvalidName => S3ErrorCode::KeyTooLongError,
        ErrorKind::TooLarge => S3ErrorCode::EntityTooLarge,
        // A version replaced under a read: the client asks again and gets the new one.
        ErrorKind::Unavailable | ErrorKind::Replaced => S3ErrorCode::ServiceUnavailable,
        // A version kept by object lock, as S3 answers its deletion.
        ErrorKind::Locked => S3ErrorCode::AccessDenied,
        ErrorKind::BadRequest => S3ErrorCode::InvalidRequest,
        ErrorKind::Input => S3ErrorCode::IncompleteBody,
        // Stored bytes that fail their checksums where no other copy could stand in.
        ErrorKind::Internal | ErrorKind::Corrupt => {
            tracing::warn!("S3 request failed: {e}");
            S3ErrorCode::InternalError
        }
    };
    let mut s = S3Error::with_message(code, printable(e.message()));
    if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Replaced) {
        // Worth retrying soon: a node restarting or a leader changing takes about this long.
        let mut h = http::HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static(RETRY_AFTER_SECONDS));
        s.set_headers(h);
    }
    s
}

/// `m` without control characters, which XML 1.0 cannot carry even escaped (a client that
/// meets one cannot parse the error at all).
fn printable(m: &str) -> String {
    m.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { '?' } else { c }).collect()
}

/// What a 503 asks the client to wait before retrying.
pub const RETRY_AFTER_SECONDS: &str = "1";

/// Whether a cluster error says the object is not there.
pub fn is_missing(e: &Error) -> bool {
    e.kind() == ErrorKind::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_errors_map_to_the_codes_a_client_acts_on() {
        let code = |k: ErrorKind| from_cluster(Error::new(k, "m")).code().clone();
        assert_eq!(code(ErrorKind::NotFound), S3ErrorCode::NoSuchKey);
        assert_eq!(code(ErrorKind::Unavailable), S3ErrorCode::ServiceUnavailable);
        let busy = from_cluster(Error::new(ErrorKind::Unavailable, "m"));
        assert_eq!(busy.headers().and_then(|h| h.get("retry-after")).unwrap(), RETRY_AFTER_SECONDS);
        assert_eq!(code(ErrorKind::InvalidName), S3ErrorCode::KeyTooLongError);
        assert_eq!(code(ErrorKind::InvalidPart), S3ErrorCode::InvalidPart);
        assert_eq!(code(ErrorKind::PreconditionFailed), S3ErrorCode::PreconditionFailed);
        assert_eq!(code(ErrorKind::Internal), S3ErrorCode::InternalError);
        assert_eq!(code(ErrorKind::Corrupt), S3ErrorCode::InternalError);
        // Too few nodes travels as a shortfall, whatever its words: retry later.
        let e = Error::shortfall(kintsugi_proto::Scarce::Nodes, 9, 7, "anything");
        assert_eq!(from_cluster(e).code().clone(), S3ErrorCode::ServiceUnavailable);
        // A full cluster: 507, which SDKs do not retry.
        let full = from_cluster(Error::shortfall(kintsugi_proto::Scarce::Space, 6, 2, "the cluster is full"));
        assert_eq!((full.code().as_str(), full.status_code()), (STORAGE_FULL, Some(http::StatusCode::INSUFFICIENT_STORAGE)));
        // A code wider than the cluster: the request's fault, not retried.
        let wide = Error { kind: ErrorKind::BadRequest, ..Error::shortfall(kintsugi_proto::Scarce::Nodes, 9, 6, "too wide") };
        assert_eq!(from_cluster(wide).code().clone(), S3ErrorCode::InvalidRequest);
        assert_eq!(code(ErrorKind::Locked), S3ErrorCode::AccessDenied);
        // Control characters (of internal names) never reach the XML.
        let e = from_cluster(Error::new(ErrorKind::Locked, "'\u{7f}b/k\0ff' is held"));
        assert_eq!(e.message(), Some("'?b/k?ff' is held"));
    }
}
