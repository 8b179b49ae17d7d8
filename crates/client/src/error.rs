//! The client library's errors: a kind a caller can act on (the S3 gateway maps it to S3's
//! error codes, the CLI to its exit), and the message that says what happened.
//!
//! The coordinator answers errors as messages; their kind is told by the words
//! `kintsugi_proto` defines and the coordinator builds them with. Failures of the client's
//! own (no coordinator, a timeout, a chunk that does not match its checksum) are told here.

use kintsugi_proto::{BAD_NAME, NO_OBJECT, NO_PART, REPLACED, TOO_FEW_NODES, TOO_LARGE, UNREADABLE};
use std::fmt;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The object (or the version asked for) does not exist.
    NotFound,
    /// The version being read was replaced or deleted meanwhile: read again.
    Replaced,
    /// A part named in a compose is not there (S3's InvalidPart).
    InvalidPart,
    /// A name the cluster does not take.
    InvalidName,
    /// More than the cluster takes in one object.
    TooLarge,
    /// Not now: no coordinator answers, too few nodes are alive or have room, too few
    /// healthy chunks, a timeout. Worth retrying later.
    Unavailable,
    /// A request the cluster refused for another reason.
    BadRequest,
    /// The caller's reader failed or ended before the size it announced (a put).
    Input,
    /// Anything else: a bug or a corrupted answer.
    Internal,
}

/// How a put's error begins when its reader fails.
pub(crate) const READING_THE_OBJECT: &str = "reading the object: ";

/// An error of the client library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The kind of a failure known only by its message (the coordinator's, or one of the
    /// library's own): the most specific words found win.
    pub fn of(message: String) -> Self {
        let m = message.as_str();
        let kind = if m.starts_with(READING_THE_OBJECT) {
            ErrorKind::Input
        } else if m.contains(NO_PART) {
            ErrorKind::InvalidPart
        } else if m.contains(NO_OBJECT) {
            ErrorKind::NotFound
        } else if m.contains(REPLACED) {
            ErrorKind::Replaced
        } else if m.contains(BAD_NAME) {
            ErrorKind::InvalidName
        } else if m.contains(TOO_LARGE) {
            ErrorKind::TooLarge
        } else if m.contains(TOO_FEW_NODES)
            || m.contains(UNREADABLE)
            || m.starts_with("coordinator ")
            || m.contains("did not answer")
            || m.contains("timed out")
            || m.contains("unreachable")
            || m.contains("still being written")
        {
            ErrorKind::Unavailable
        } else if m.starts_with("bad request") || m.contains("unexpected answer") {
            ErrorKind::Internal
        } else {
            ErrorKind::BadRequest
        };
        Error { kind, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::of(message)
    }
}

/// Code that reports errors as messages keeps working with `?`.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coordinator's messages as it builds them, and the library's own, each of its kind.
    #[test]
    fn messages_are_told_apart_by_the_words_the_coordinator_uses() {
        let kind = |m: String| Error::of(m).kind();
        assert_eq!(kind(format!("{NO_OBJECT} 'b/k'")), ErrorKind::NotFound);
        assert_eq!(kind(format!("{NO_OBJECT} 'k' in the index (and coordinator x: refused)")), ErrorKind::NotFound);
        assert_eq!(kind(format!("{NO_PART} 'p' at version 3: it was replaced or deleted")), ErrorKind::InvalidPart);
        assert_eq!(kind(format!("object 'k'{REPLACED} (version 3 read, 4 now)")), ErrorKind::Replaced);
        assert_eq!(kind(format!("{BAD_NAME} 1 to 1100 bytes")), ErrorKind::InvalidName);
        assert_eq!(kind(format!("object size 9{TOO_LARGE}")), ErrorKind::TooLarge);
        assert_eq!(kind(format!("{TOO_FEW_NODES}rs:6,3 needs 9 live nodes, 7 are alive")), ErrorKind::Unavailable);
        assert_eq!(kind(format!("stripe 4{UNREADABLE}2 healthy chunks")), ErrorKind::Unavailable);
        assert_eq!(kind("coordinator 127.0.0.1:1: connection refused".into()), ErrorKind::Unavailable);
        assert_eq!(kind("chunk size 3 is below the smallest".into()), ErrorKind::BadRequest);
        assert_eq!(kind("unexpected answer Ok".into()), ErrorKind::Internal);
        assert_eq!(kind(format!("{READING_THE_OBJECT}unexpected end of file")), ErrorKind::Input);
        let e = Error::new(ErrorKind::NotFound, "gone");
        assert_eq!((e.to_string(), String::from(e)), ("gone".to_string(), "gone".to_string()));
    }
}
