//! The error type of the codec crate.
//!
//! Kinds a caller acts on are variants or [`StorageErrorKind`]s, decided from the store's own
//! error kinds (`std::io::ErrorKind`, opendal's `ErrorKind`), never from message text; the
//! underlying error stays reachable through [`std::error::Error::source`].
//!
//! There are no `From` conversions (`#[from]`): every underlying error needs context that a
//! conversion cannot supply — a storage or decode error the [`Location`] of what was read, a
//! kernel error (with its stream status) what damacy was doing or which unit failed — so each is
//! built by the constructor that takes that context.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// A shared, cloneable underlying error.
pub type Source = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Where in a store something went wrong: the array, the chunk (or inner chunk), the key and
/// the byte range, as far as they are known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Location {
    /// The store's URL.
    pub store: String,
    /// The array's path inside its store (`/v3/raw`).
    pub array: String,
    /// The chunk's grid coordinates (the shard's, for a sharded array).
    pub chunk: Option<Vec<u64>>,
    /// The inner chunk's coordinates inside its shard, for a sharded array.
    pub inner_chunk: Option<Vec<u64>>,
    /// The store key that was read.
    pub key: Option<String>,
    /// The byte range of the key that was read.
    pub byte_range: Option<Range<u64>>,
}

impl Location {
    /// A location that names only an array of a store.
    #[must_use]
    pub fn array(store: &str, path: &str) -> Self {
        Self { store: store.to_owned(), array: path.to_owned(), ..Self::default() }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "array {}", self.array)?;
        if !self.store.is_empty() {
            write!(f, " of {}", self.store)?;
        }
        if let Some(chunk) = &self.chunk {
            write!(f, ", chunk {chunk:?}")?;
        }
        if let Some(inner) = &self.inner_chunk {
            write!(f, ", inner chunk {inner:?}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ", key {key}")?;
        }
        if let Some(range) = &self.byte_range {
            write!(f, ", bytes {}..{}", range.start, range.end)?;
        }
        Ok(())
    }
}

/// What kind of storage failure happened: the part of a storage error a caller acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StorageErrorKind {
    /// The object does not exist (HTTP 404, `ENOENT`).
    NotFound,
    /// The store refused access (HTTP 401/403, `EACCES`): check credentials.
    PermissionDenied,
    /// A failure that may pass (throttling, 5xx, timeouts, resets) and persisted after the
    /// store's retries.
    Transient,
    /// A byte range lies beyond the end of the object (a truncated object).
    RangeNotSatisfied,
    /// The store itself is misconfigured or missing: no such bucket, a bad endpoint or region.
    Config,
    /// Anything else.
    Other,
}

impl fmt::Display for StorageErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotFound => "not found",
            Self::PermissionDenied => "permission denied",
            Self::Transient => "transient failure, retries exhausted",
            Self::RangeNotSatisfied => "byte range beyond the end of the object",
            Self::Config => "store misconfigured (bucket, endpoint, region or credentials)",
            Self::Other => "failed",
        })
    }
}

/// Everything that can go wrong between a URL and a decoded batch.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument or configuration value is invalid; the message says which and why.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A store or array does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A storage read failed (after the store's retries).
    #[error("storage error at {location}: {kind}: {source}")]
    Storage {
        /// What kind of failure it was.
        kind: StorageErrorKind,
        /// What was being read.
        location: Box<Location>,
        /// The store's own error.
        #[source]
        source: Source,
    },
    /// Bytes could not be decoded: a corrupt or truncated chunk, a bad checksum, a bad index.
    #[error("decode error at {location}: {message}")]
    Decode {
        /// What was being decoded.
        location: Box<Location>,
        /// What was wrong with it.
        message: String,
        /// The codec's own error, when there is one.
        #[source]
        source: Option<Source>,
    },
    /// Array metadata could not be read or is not valid zarr.
    #[error("invalid metadata for {path}: {message}")]
    Metadata {
        /// The array or node path.
        path: String,
        /// What was wrong.
        message: String,
        /// zarrs' own error, when there is one.
        #[source]
        source: Option<Source>,
    },
    /// The array uses something damacy does not support (a data type, a chunk grid, a codec).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The device (a CUDA driver call, a kernel launch, NVRTC) failed.
    #[error("device error: {context}: {source}")]
    Device {
        /// What damacy was doing.
        context: String,
        /// The kernel crate's error, with the driver's result code.
        #[source]
        source: Arc<damacy_kernels::Error>,
    },
    /// A configured memory budget is too small for what was asked.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// Something inside damacy failed that no argument or input explains: a thread that
    /// panicked, a lock a panic poisoned, a thread that could not be spawned. A bug or an
    /// exhausted system resource; `what` says what and where.
    #[error("internal error: {what}")]
    Internal {
        /// What failed, and where.
        what: String,
        /// The underlying error, when there is one (a spawn's `io::Error`, a panic's message).
        #[source]
        source: Option<Source>,
    },
}

impl Error {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument(message.into())
    }

    /// An internal failure (see [`Error::Internal`]) with no underlying error.
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        Self::Internal { what: what.into(), source: None }
    }

    /// An internal failure that keeps its underlying error.
    pub(crate) fn internal_from<E: std::error::Error + Send + Sync + 'static>(
        what: impl Into<String>,
        source: E,
    ) -> Self {
        Self::Internal { what: what.into(), source: Some(Arc::new(source)) }
    }

    /// A decode error with a message only.
    pub(crate) fn decode(location: Location, message: impl fmt::Display) -> Self {
        Self::Decode { location: Box::new(location), message: message.to_string(), source: None }
    }

    /// A decode error that keeps the codec's error as its source.
    pub(crate) fn decode_from<E: std::error::Error + Send + Sync + 'static>(location: Location, source: E) -> Self {
        Self::Decode { location: Box::new(location), message: source.to_string(), source: Some(Arc::new(source)) }
    }

    pub(crate) fn metadata(path: &str, message: impl Into<String>) -> Self {
        Self::Metadata { path: path.to_owned(), message: message.into(), source: None }
    }

    /// A storage error classified from zarrs' storage error.
    pub(crate) fn storage(location: Location, source: zarrs_storage::StorageError) -> Self {
        let kind = storage_kind(&source);
        Self::Storage { kind, location: Box::new(location), source: Arc::new(source) }
    }

    /// A read that the I/O driver never answered because the driver stopped (its task died:
    /// a panic in the HTTP stack). A storage error of kind [`StorageErrorKind::Other`] at the
    /// read's location, its source an [`IoDriverStopped`]: the read failed as a read (callers
    /// that catch storage errors still catch it), and the source says why.
    pub(crate) fn io_driver_stopped(location: Location) -> Self {
        Self::Storage { kind: StorageErrorKind::Other, location: Box::new(location), source: Arc::new(IoDriverStopped) }
    }

    /// A storage error classified from opendal's error.
    pub(crate) fn opendal(location: Location, source: opendal::Error) -> Self {
        let kind = opendal_kind(&source);
        Self::Storage { kind, location: Box::new(location), source: Arc::new(source) }
    }

    /// A device failure while doing `context`.
    pub(crate) fn device(context: impl Into<String>, source: damacy_kernels::Error) -> Self {
        Self::Device { context: context.into(), source: Arc::new(source) }
    }

    /// The storage failure kind, for storage errors.
    #[must_use]
    pub fn storage_kind(&self) -> Option<StorageErrorKind> {
        match self {
            Self::Storage { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// The kind of a zarrs storage error: from the I/O error's kind, or from the opendal error an
/// I/O error carries (see [`crate::store`]'s adapter).
fn storage_kind(e: &zarrs_storage::StorageError) -> StorageErrorKind {
    use zarrs_storage::StorageError as S;
    match e {
        S::IOError(io) => io_kind(io),
        S::InvalidByteRangeError(_) => StorageErrorKind::RangeNotSatisfied,
        _ => StorageErrorKind::Other,
    }
}

pub(crate) fn io_kind(io: &std::io::Error) -> StorageErrorKind {
    use std::io::ErrorKind as K;
    if let Some(op) = io.get_ref().and_then(|e| e.downcast_ref::<opendal::Error>()) {
        return opendal_kind(op);
    }
    match io.kind() {
        K::NotFound => StorageErrorKind::NotFound,
        K::PermissionDenied => StorageErrorKind::PermissionDenied,
        K::TimedOut | K::ConnectionReset | K::ConnectionAborted | K::Interrupted | K::WouldBlock => {
            StorageErrorKind::Transient
        }
        K::UnexpectedEof => StorageErrorKind::RangeNotSatisfied,
        _ => StorageErrorKind::Other,
    }
}

pub(crate) fn opendal_kind(e: &opendal::Error) -> StorageErrorKind {
    use opendal::ErrorKind as K;
    match e.kind() {
        K::NotFound => StorageErrorKind::NotFound,
        K::PermissionDenied => StorageErrorKind::PermissionDenied,
        K::RangeNotSatisfied => StorageErrorKind::RangeNotSatisfied,
        K::ConfigInvalid => StorageErrorKind::Config,
        K::RateLimited => StorageErrorKind::Transient,
        // 5xx, timeouts and resets are temporary; after the retry layer gave up on them they
        // are marked persistent.
        K::Unexpected if e.is_temporary() || e.is_persistent() => StorageErrorKind::Transient,
        _ => StorageErrorKind::Other,
    }
}

/// The source of a storage error whose read the I/O driver never answered: the driver (the
/// task on the I/O runtime that issues a batch's remote reads) stopped first, which only a
/// panic in the HTTP stack does. It is the error's [`std::error::Error::source`], shared like
/// every source: `source().and_then(|s| s.downcast_ref::<Source>())` and then
/// `downcast_ref::<IoDriverStopped>()` find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoDriverStopped;

impl fmt::Display for IoDriverStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the I/O driver stopped before this read was answered")
    }
}

impl std::error::Error for IoDriverStopped {}

/// The codec crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_error_kinds_not_text() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "not found (the text lies)");
        let e = Error::storage(Location::default(), zarrs_storage::StorageError::IOError(Arc::new(io)));
        assert_eq!(e.storage_kind(), Some(StorageErrorKind::PermissionDenied));
        assert!(std::error::Error::source(&e).is_some());

        let op = opendal::Error::new(opendal::ErrorKind::NotFound, "permission denied (the text lies)");
        let wrapped = std::io::Error::other(op);
        assert_eq!(io_kind(&wrapped), StorageErrorKind::NotFound);
        let op = opendal::Error::new(opendal::ErrorKind::Unexpected, "503").set_temporary();
        assert_eq!(opendal_kind(&op), StorageErrorKind::Transient);
    }

    #[test]
    fn a_stopped_io_driver_is_a_storage_error_with_its_own_source() {
        let at = Location { key: Some("c/0".into()), byte_range: Some(4..8), ..Location::array("s3://b", "/a") };
        let e = Error::io_driver_stopped(at.clone());
        assert_eq!(e.storage_kind(), Some(StorageErrorKind::Other));
        assert!(matches!(&e, Error::Storage { location, .. } if **location == at));
        let source = std::error::Error::source(&e).expect("the driver's error is the source");
        let shared = source.downcast_ref::<Source>().expect("sources are shared");
        assert!(shared.downcast_ref::<IoDriverStopped>().is_some());
        assert!(e.to_string().contains("I/O driver stopped"), "{e}");
    }
}
