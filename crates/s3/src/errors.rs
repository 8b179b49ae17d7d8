//! S3 error codes for what the cluster answers, by the kind of the client library's error.

use kintsugi_client::{Error, ErrorKind};
use s3s::{S3Error, S3ErrorCode};

/// The S3 error for a cluster error `e`: a missing object is NoSuchKey; no coordinator, too
/// few live nodes or chunks, a full cluster are ServiceUnavailable (retry later); a name or
/// size the cluster refuses is the client's fault; anything else is InternalError, logged.
pub fn from_cluster(e: Error) -> S3Error {
    let code = match e.kind() {
        ErrorKind::NotFound => S3ErrorCode::NoSuchKey,
        ErrorKind::InvalidPart => S3ErrorCode::InvalidPart,
        ErrorKind::InvalidName => S3ErrorCode::KeyTooLongError,
        ErrorKind::TooLarge => S3ErrorCode::EntityTooLarge,
        // A version replaced under a read: the client asks again and gets the new one.
        ErrorKind::Unavailable | ErrorKind::Replaced => S3ErrorCode::ServiceUnavailable,
        ErrorKind::BadRequest => S3ErrorCode::InvalidRequest,
        ErrorKind::Input => S3ErrorCode::IncompleteBody,
        // Stored bytes that fail their checksums where no other copy could stand in.
        ErrorKind::Internal | ErrorKind::Corrupt => {
            tracing::warn!("S3 request failed: {e}");
            S3ErrorCode::InternalError
        }
    };
    S3Error::with_message(code, e.message().to_string())
}

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
        assert_eq!(code(ErrorKind::InvalidName), S3ErrorCode::KeyTooLongError);
        assert_eq!(code(ErrorKind::InvalidPart), S3ErrorCode::InvalidPart);
        assert_eq!(code(ErrorKind::Internal), S3ErrorCode::InternalError);
        assert_eq!(code(ErrorKind::Corrupt), S3ErrorCode::InternalError);
        // Too few nodes travels as a shortfall, whatever its words: retry later.
        let e = Error::shortfall(kintsugi_proto::Scarce::Nodes, 9, 7, "anything");
        assert_eq!(from_cluster(e).code().clone(), S3ErrorCode::ServiceUnavailable);
    }
}
