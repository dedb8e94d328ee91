//! The error type of the codec crate.

use std::fmt;
use std::ops::Range;

/// Where in a store something went wrong: the array, the chunk (or inner chunk), the key and
/// the byte range, as far as they are known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
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
    /// A location that names only an array.
    #[must_use]
    pub fn array(path: &str) -> Self {
        Self { array: path.to_owned(), ..Self::default() }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "array {}", self.array)?;
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

/// Everything that can go wrong between a URL and a decoded batch.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument or configuration value is invalid; the message says which and why.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A store, array or key does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// A storage read failed (after retries).
    #[error("storage error at {location}: {message}")]
    Storage {
        /// What was being read.
        location: Box<Location>,
        /// The underlying failure.
        message: String,
    },
    /// Bytes could not be decoded: a corrupt or truncated chunk, a bad checksum, a bad index.
    #[error("decode error at {location}: {message}")]
    Decode {
        /// What was being decoded.
        location: Box<Location>,
        /// What was wrong with it.
        message: String,
    },
    /// Array metadata could not be read or is not valid zarr.
    #[error("invalid metadata for {path}: {message}")]
    Metadata {
        /// The array or node path.
        path: String,
        /// What was wrong.
        message: String,
    },
    /// The array uses something damacy does not support (a data type, a chunk grid, a codec).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl Error {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument(message.into())
    }

    pub(crate) fn decode(location: Location, message: impl fmt::Display) -> Self {
        Self::Decode { location: Box::new(location), message: message.to_string() }
    }

    pub(crate) fn storage(location: Location, message: impl fmt::Display) -> Self {
        Self::Storage { location: Box::new(location), message: message.to_string() }
    }
}

/// The codec crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
