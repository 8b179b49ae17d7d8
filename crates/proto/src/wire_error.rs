//! Errors as they cross the wire and the layers: a kind that every decision is made on
//! (retry, map to an S3 status, re-plan), the chunks and nodes found at fault on the way, the
//! counts of a shortfall, and a message for people. No caller reads the message to decide
//! anything, so rewording one changes no behaviour (see [`reword_for_tests`]).

use crate::chunk_id::ChunkId;
use crate::wire_graph::NodeId;
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// What kind of failure a [`WireError`] is: what its receiver may do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// What was asked for (an object, a version, a chunk, a repair) does not exist.
    NotFound,
    /// The version being read was replaced or deleted meanwhile: read again.
    Replaced,
    /// A part named in a compose is not there (S3's InvalidPart).
    InvalidPart,
    /// A conditional commit found the object other than it required (S3's 412).
    PreconditionFailed,
    /// A name the cluster does not take.
    InvalidName,
    /// More than the cluster takes in one object.
    TooLarge,
    /// Not now: too few nodes alive or with room, too few healthy chunks, a node that does
    /// not answer, a timeout, a coordinator that is not leading. Worth retrying later.
    Unavailable,
    /// Stored bytes that do not match their checksums.
    Corrupt,
    /// A version under retention or legal hold (object lock) that the request would delete,
    /// replace or release early (S3's AccessDenied).
    Locked,
    /// A request the receiver refused for another reason.
    BadRequest,
    /// The caller's reader failed or ended before the size it announced (a put).
    Input,
    /// Anything else: a bug, or an answer that makes no sense.
    Internal,
}

/// A chunk or node that a failure was traced to: whoever planned the work avoids it next
/// time (marks the chunk lost, suspects the node). A relay keeps its upstreams' faults.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Fault {
    /// A chunk whose stored bytes failed their checksum where it lies.
    CorruptChunk { chunk: ChunkId },
    /// A chunk its node does not hold.
    MissingChunk { chunk: ChunkId },
    /// A node that could not be connected to, or whose connection broke.
    Unreachable { node: NodeId },
    /// A node that sent nothing for longer than the I/O timeout.
    Silent { node: NodeId },
    /// No coordinator could be reached (none answered, or none leads yet): the request was
    /// not refused, it was not heard.
    NoCoordinator,
}

impl Fault {
    /// The chunk this fault names, if it names one.
    pub fn chunk(&self) -> Option<&ChunkId> {
        match self {
            Fault::CorruptChunk { chunk } | Fault::MissingChunk { chunk } => Some(chunk),
            Fault::Unreachable { .. } | Fault::Silent { .. } | Fault::NoCoordinator => None,
        }
    }

    /// The node this fault names, if it names one.
    pub fn node(&self) -> Option<NodeId> {
        match self {
            Fault::Unreachable { node } | Fault::Silent { node } => Some(*node),
            Fault::CorruptChunk { .. } | Fault::MissingChunk { .. } | Fault::NoCoordinator => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CorruptChunk { chunk } => write!(f, "corrupt chunk {chunk}"),
            Fault::MissingChunk { chunk } => write!(f, "chunk {chunk} not found"),
            Fault::Unreachable { node } => write!(f, "node {node} unreachable"),
            Fault::Silent { node } => write!(f, "node {node} silent"),
            Fault::NoCoordinator => f.write_str("no coordinator answered"),
        }
    }
}

/// Too few of something: nodes for a code, healthy chunks for a decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shortfall {
    pub what: Scarce,
    pub needed: u64,
    pub available: u64,
}

/// What a [`Shortfall`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scarce {
    /// Live nodes (with room) for a put's code.
    Nodes,
    /// Healthy chunks of a stripe for a read or a repair.
    Chunks,
    /// Room below the full ratio on enough nodes for a put: the cluster is full (not a
    /// condition that passes by itself; deleting or adding capacity ends it).
    Space,
}

/// An error of any kintsugi component, as it travels in `NodeResponse::Error` and
/// `CoordResponse::Error` and up through the client library.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub kind: ErrorKind,
    /// For people: what happened, with the values that matter.
    #[serde(serialize_with = "say")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortfall: Option<Shortfall>,
}

impl WireError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        WireError { kind, message: message.into(), faults: Vec::new(), shortfall: None }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// Node `node` could not be reached or its connection broke.
    pub fn unreachable(node: NodeId, message: impl Into<String>) -> Self {
        Self::unavailable(message).with_fault(Fault::Unreachable { node })
    }

    /// Node `node` sent nothing in time.
    pub fn silent(node: NodeId, message: impl Into<String>) -> Self {
        Self::unavailable(message).with_fault(Fault::Silent { node })
    }

    /// Too few nodes or chunks: unavailable now, with the counts.
    pub fn shortfall(what: Scarce, needed: u64, available: u64, message: impl Into<String>) -> Self {
        WireError { shortfall: Some(Shortfall { what, needed, available }), ..Self::unavailable(message) }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn with_fault(mut self, fault: Fault) -> Self {
        if !self.faults.contains(&fault) {
            self.faults.push(fault);
        }
        self
    }

    /// The same error of another kind (a node's NotFound of a helper chunk is, to the reader
    /// of an object, an Unavailable), its faults kept.
    pub fn as_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }

    /// The same error, its message prefixed with where it happened (`node 4: ...`).
    pub fn context(mut self, place: impl fmt::Display) -> Self {
        self.message = format!("{place}: {}", self.message);
        self
    }

    /// One error of several that failed together (the nodes of a dispatch): the first's
    /// kind, every one's faults, the messages joined.
    pub fn merge(errors: Vec<WireError>) -> Option<WireError> {
        let mut it = errors.into_iter();
        let mut first = it.next()?;
        for e in it {
            first.message = format!("{}; {}", first.message, e.message);
            for f in e.faults {
                first = first.with_fault(f);
            }
            first.shortfall = first.shortfall.or(e.shortfall);
        }
        Some(first)
    }

    /// The chunks this error traced the failure to, each once.
    pub fn bad_chunks(&self) -> impl Iterator<Item = &ChunkId> {
        self.faults.iter().filter_map(Fault::chunk)
    }

    /// Whether the request never reached a coordinator (as opposed to being refused by one).
    pub fn no_coordinator(&self) -> bool {
        self.faults.contains(&Fault::NoCoordinator)
    }

    /// The nodes this error traced the failure to.
    pub fn bad_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.faults.iter().filter_map(Fault::node)
    }

    /// Whether this error says too few of `what` are there (nodes for a put, healthy chunks
    /// for a read or a repair).
    pub fn is_short_of(&self, what: Scarce) -> bool {
        self.shortfall.is_some_and(|s| s.what == what)
    }

    /// The same error with more words after its message (what the caller saw on the way).
    pub fn and_then_said(mut self, more: impl fmt::Display) -> Self {
        self.message = format!("{}. {more}", self.message);
        self
    }

    /// Worth asking again later.
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind, ErrorKind::Unavailable | ErrorKind::Replaced)
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WireError {}

impl From<crate::FrameError> for WireError {
    fn from(e: crate::FrameError) -> Self {
        WireError::unavailable(e.to_string())
    }
}

/// A code asked for what it cannot do: a bad request, except a decode short of chunks.
impl From<kintsugi_codes::CodeError> for WireError {
    fn from(e: kintsugi_codes::CodeError) -> Self {
        use kintsugi_codes::CodeError;
        match e {
            CodeError::Unrecoverable { .. } | CodeError::HelpersInsufficient { .. } => WireError::unavailable(e.to_string()),
            _ => WireError::bad_request(e.to_string()),
        }
    }
}

/// No connection to a peer: not now (the caller names the node as a fault where it knows it).
impl From<crate::auth::ConnectError> for WireError {
    fn from(e: crate::auth::ConnectError) -> Self {
        WireError::unavailable(e.to_string())
    }
}

/// A task that panicked or was cancelled: a bug, or a shutdown.
impl From<tokio::task::JoinError> for WireError {
    fn from(e: tokio::task::JoinError) -> Self {
        WireError::internal(e.to_string())
    }
}

/// Code at a tool's edge reports errors as words.
impl From<WireError> for String {
    fn from(e: WireError) -> Self {
        e.message
    }
}

static REWORD_NOW: AtomicBool = AtomicBool::new(false);

/// Whether every message this process sends says other words, so that a test can show no
/// receiver's decision depends on them: set by `KINTSUGI_REWORD_ERRORS=1` (for node and
/// coordinator processes) or [`reword_messages`] (for a test's own in-process cluster).
pub fn reword_for_tests() -> bool {
    static FROM_ENV: OnceLock<bool> = OnceLock::new();
    REWORD_NOW.load(Ordering::Relaxed) || *FROM_ENV.get_or_init(|| std::env::var("KINTSUGI_REWORD_ERRORS").is_ok_and(|v| v == "1"))
}

/// From now on, this process rewords every error message it sends (tests only).
pub fn reword_messages() {
    REWORD_NOW.store(true, Ordering::Relaxed);
}

/// The words nobody may decide on, reversed and marked, when [`reword_for_tests`].
fn say<S: Serializer>(message: &str, s: S) -> Result<S::Ok, S::Error> {
    if reword_for_tests() {
        let reworded: String = message.chars().rev().collect();
        s.serialize_str(&format!("[reworded] {reworded}"))
    } else {
        s.serialize_str(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode_control, encode_control};

    #[test]
    fn kind_faults_and_counts_cross_the_wire() {
        let e = WireError::shortfall(Scarce::Chunks, 6, 5, "stripe 3 is short")
            .with_fault(Fault::CorruptChunk { chunk: ChunkId::new(3, 1) })
            .with_fault(Fault::Silent { node: 7 })
            .context("node 2");
        let back: WireError = decode_control(&encode_control(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.kind(), ErrorKind::Unavailable);
        assert_eq!(back.bad_chunks().collect::<Vec<_>>(), vec![&ChunkId::new(3, 1)]);
        assert_eq!(back.bad_nodes().collect::<Vec<_>>(), vec![7]);
        assert_eq!(back.to_string(), "node 2: stripe 3 is short");
    }

    #[test]
    fn a_merge_keeps_every_fault_once_and_the_first_kind() {
        let a = WireError::unreachable(4, "node 4: refused");
        let b = WireError::new(ErrorKind::Corrupt, "bad").with_fault(Fault::CorruptChunk { chunk: ChunkId::new(1, 2) });
        let c = WireError::unreachable(4, "again");
        let m = WireError::merge(vec![a, b, c]).unwrap();
        assert_eq!(m.kind(), ErrorKind::Unavailable);
        assert_eq!(m.faults, vec![Fault::Unreachable { node: 4 }, Fault::CorruptChunk { chunk: ChunkId::new(1, 2) }]);
        assert_eq!(m.message(), "node 4: refused; bad; again");
        assert!(WireError::merge(Vec::new()).is_none());
    }
}
