//! The crate's error type.

use std::fmt;

use crate::consts;
use crate::decode::WaveFootprint;

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
    /// A stored checksum (zstd's XXH64, gzip's CRC32/ISIZE/header CRC, zlib's Adler-32) does not
    /// match the decoded data.
    ChecksumMismatch,
    /// A valid feature the kernel does not implement (zstd dictionaries, zlib preset
    /// dictionaries).
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
            Self::Unsupported => {
                "unsupported feature (zstd dictionaries and zlib preset dictionaries are not supported)"
            }
            Self::Pending => "stream not processed",
            Self::Unknown(c) => return write!(f, "unknown status {c}"),
        };
        f.write_str(s)
    }
}

/// Errors of damacy-kernels.
///
/// Kinds a caller acts on are variants: a chunk the GPU route cannot take
/// ([`Error::Unsupported`]), a batch that does not fit in one wave ([`Error::WaveFull`]), corrupt
/// input ([`Error::Decode`], [`Error::Stream`]), a budget ([`Error::OutOfMemory`]) and device
/// failures that keep the driver's own result code ([`Error::Cuda`], [`Error::Nvrtc`]).
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
    /// The assemble kernel reported an error status for one job (an element outside the
    /// buffers: the job's strides or offsets do not describe the buffers it was given).
    #[error("assemble job {job} failed on the device: {status}")]
    Assemble {
        /// Index of the job in the call.
        job: usize,
        /// The status the kernel wrote.
        status: StreamStatus,
    },
    /// The chunk uses an encoding this crate has no kernel for; route it to the CPU executor.
    #[error("chunk {chunk}: unsupported on the GPU route: {what}")]
    Unsupported {
        /// Index of the chunk in the batch.
        chunk: usize,
        /// What is unsupported.
        what: String,
    },
    /// The chunks do not fit in one wave of the decoder's buffers (`chunk: None`, from
    /// [`Decoder::decode_wave`](crate::Decoder::decode_wave): decode them in several waves, e.g.
    /// with [`Decoder::decode_to_host`](crate::Decoder::decode_to_host)), or one chunk alone is
    /// larger than a wave (`chunk: Some(i)`: raise the wave sizes of
    /// [`DecodeConfig`](crate::DecodeConfig)). Not a device memory failure: nothing was
    /// allocated or launched. [`Decoder::plan_waves`](crate::Decoder::plan_waves) tells in
    /// advance.
    #[error(
        "{} {} encoded bytes, {} decoded bytes and {} streams; a wave of this decoder holds {}, {} and {}: {}",
        match chunk { Some(i) => format!("chunk {i} needs"), None => "the chunks need".to_string() },
        needed.src_bytes, needed.dst_bytes, needed.streams,
        capacity.src_bytes, capacity.dst_bytes, capacity.streams,
        if chunk.is_some() { "raise DecodeConfig's wave sizes" } else { "decode in several waves (decode_to_host) or raise DecodeConfig's wave sizes" }
    )]
    WaveFull {
        /// The chunk that alone exceeds a wave, or `None` when the chunks together do.
        chunk: Option<usize>,
        /// What the chunk (or the chunks) need.
        needed: WaveFootprint,
        /// What one wave holds.
        capacity: WaveFootprint,
    },
    /// An argument is out of range or inconsistent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A memory budget would be exceeded, or the device (or pinned host memory) is out of memory.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// No usable GPU: the reason (no driver library, no device, …).
    #[error("no usable GPU: {0}")]
    NoDevice(String),
    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed (CUresult {code}): {source}")]
    Cuda {
        /// The driver call (or the operation made of driver calls), e.g. `cuMemcpyHtoDAsync`.
        call: &'static str,
        /// The `CUresult` the driver returned.
        code: u32,
        /// The driver's error (cudarc's `DriverError`).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// An NVRTC API call failed (other than the compilation itself, see [`Error::Compile`]).
    #[error("NVRTC call {call} failed (nvrtcResult {code}): {source}")]
    Nvrtc {
        /// The NVRTC call, e.g. `nvrtcGetCUBIN`.
        call: &'static str,
        /// The `nvrtcResult` NVRTC returned.
        code: u32,
        /// NVRTC's error (cudarc's `NvrtcError`).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
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
    /// The emulator rejected a launch, or emulated stream work failed.
    #[error("emulator: {0}")]
    Emulator(String),
}

#[cfg(feature = "cuda")]
impl Error {
    /// A failed driver call, keeping its `CUresult`.
    pub(crate) fn driver(call: &'static str, e: cudarc::driver::DriverError) -> Self {
        Self::Cuda { call, code: e.0 as u32, source: Box::new(e) }
    }

    /// A failed NVRTC call, keeping its `nvrtcResult`.
    pub(crate) fn nvrtc(call: &'static str, e: cudarc::nvrtc::result::NvrtcError) -> Self {
        Self::Nvrtc { call, code: e.0 as u32, source: Box::new(e) }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::*;

    /// A driver failure keeps its call, its `CUresult` and cudarc's error as `source()`.
    #[test]
    fn driver_errors_keep_the_call_the_code_and_the_source() {
        use cudarc::driver::{DriverError, sys::cudaError_enum};
        let e = Error::driver("cuMemcpyHtoDAsync", DriverError(cudaError_enum::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(matches!(e, Error::Cuda { call: "cuMemcpyHtoDAsync", code: 700, .. }));
        // Not formatted: cudarc's `Display` asks the (absent) driver for the message.
        let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<DriverError>());
        assert_eq!(source.map(|d| d.0), Some(cudaError_enum::CUDA_ERROR_ILLEGAL_ADDRESS));
    }
}
