//! The crate's error type.

use std::fmt;

use crate::consts;

/// A per-stream status written by a decode kernel (`DMC_STATUS_*` in `kernels/common.cuh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamStatus {
    /// Decoded completely, to exactly the declared size.
    Ok,
    /// The input ended in the middle of a token, a length or a literal run.
    SrcTruncated,
    /// The output would exceed the declared decoded size.
    DstOverflow,
    /// A match refers to bytes before the start of the output.
    BadOffset,
    /// Decoding ended cleanly but produced a different number of bytes than declared.
    SizeMismatch,
    /// The stored CRC32C does not match the data.
    CrcMismatch,
    /// The stream descriptor lies outside the wave buffers (a host-side bug).
    BadDescriptor,
    /// Malformed compressed data (a bad header, table, bitstream or reserved field).
    Corrupt,
    /// The stored content checksum (zstd's XXH64) does not match the decoded data.
    ChecksumMismatch,
    /// A valid feature the kernel does not implement (zstd dictionaries).
    Unsupported,
    /// The stream was never processed by a kernel (a host-side bug).
    Pending,
    /// A status code this version does not know.
    Unknown(u32),
}

impl StreamStatus {
    /// Maps a raw status code.
    #[must_use]
    pub fn from_code(code: u32) -> Self {
        match code {
            consts::DMC_STATUS_OK => Self::Ok,
            consts::DMC_STATUS_SRC_TRUNCATED => Self::SrcTruncated,
            consts::DMC_STATUS_DST_OVERFLOW => Self::DstOverflow,
            consts::DMC_STATUS_BAD_OFFSET => Self::BadOffset,
            consts::DMC_STATUS_SIZE_MISMATCH => Self::SizeMismatch,
            consts::DMC_STATUS_CRC_MISMATCH => Self::CrcMismatch,
            consts::DMC_STATUS_BAD_DESCRIPTOR => Self::BadDescriptor,
            consts::DMC_STATUS_CORRUPT => Self::Corrupt,
            consts::DMC_STATUS_CHECKSUM_MISMATCH => Self::ChecksumMismatch,
            consts::DMC_STATUS_UNSUPPORTED => Self::Unsupported,
            consts::DMC_STATUS_PENDING => Self::Pending,
            other => Self::Unknown(other),
        }
    }
}

impl fmt::Display for StreamStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::Ok => "ok",
            Self::SrcTruncated => "input truncated",
            Self::DstOverflow => "output larger than declared",
            Self::BadOffset => "match offset before the start of the output",
            Self::SizeMismatch => "decoded size differs from the declared size",
            Self::CrcMismatch => "crc32c mismatch",
            Self::BadDescriptor => "stream descriptor out of bounds",
            Self::Corrupt => "malformed compressed data",
            Self::ChecksumMismatch => "content checksum mismatch",
            Self::Unsupported => "unsupported feature (zstd dictionaries are not supported)",
            Self::Pending => "stream not processed",
            Self::Unknown(c) => return write!(f, "unknown status {c}"),
        };
        f.write_str(s)
    }
}

/// Errors of damacy-kernels.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A chunk's encoded bytes are malformed (bad header, offsets out of range).
    #[error("chunk {chunk}: malformed {what} at byte {offset}: {reason}")]
    Decode {
        /// Index of the chunk in the batch.
        chunk: usize,
        /// What was being parsed (e.g. "blosc frame").
        what: &'static str,
        /// Byte offset inside the chunk where the problem was found.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// A kernel reported an error status for one stream of a chunk.
    #[error(
        "chunk {chunk}: {codec} stream at bytes {src_start}..{src_end} of the chunk failed on the device: {status} (decoded {actual} of {expected} bytes)"
    )]
    Stream {
        /// Index of the chunk in the batch.
        chunk: usize,
        /// Codec of the stream ("lz4", "blosclz", "raw", "crc32c").
        codec: &'static str,
        /// Start of the stream's byte range inside the chunk.
        src_start: usize,
        /// End of the stream's byte range inside the chunk.
        src_end: usize,
        /// The status the kernel wrote.
        status: StreamStatus,
        /// Bytes produced (or the computed CRC for crc32c streams).
        actual: u32,
        /// Bytes expected (or the stored CRC for crc32c streams).
        expected: u32,
    },
    /// The chunk uses an encoding this crate has no kernel for; route it to the CPU executor.
    #[error("chunk {chunk}: unsupported on the GPU route: {what}")]
    Unsupported {
        /// Index of the chunk in the batch.
        chunk: usize,
        /// What is unsupported.
        what: String,
    },
    /// An argument is out of range or inconsistent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A device memory budget would be exceeded.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// No usable GPU: the reason (no driver library, no device, …).
    #[error("no usable GPU: {0}")]
    NoDevice(String),
    /// A CUDA driver call failed.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// NVRTC could not compile a kernel.
    #[error("NVRTC failed to compile {kernel} for {arch}: {log}")]
    Compile {
        /// Kernel source file.
        kernel: &'static str,
        /// Target architecture, e.g. `sm_90`.
        arch: String,
        /// The NVRTC log.
        log: String,
    },
    /// The emulator rejected a launch.
    #[error("emulator: {0}")]
    Emulator(String),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
