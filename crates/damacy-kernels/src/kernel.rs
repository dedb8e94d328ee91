//! The kernels: names, embedded sources, and the source hash used by the compile cache.

/// `kernels/common.cuh`, inlined into every kernel source before NVRTC compiles it.
pub(crate) const COMMON_CUH: &str = include_str!("../../../kernels/common.cuh");

/// One kernel entry point of `kernels/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kernel {
    /// `lz4.cu`: LZ4 block decode (lz4 and lz4hc), one warp per stream.
    Lz4Decode,
    /// `blosclz.cu`: `BloscLZ` decode, one warp per stream.
    BloscLzDecode,
    /// `memcpy.cu`: raw copy, grid (streams, parts per stream).
    Memcpy,
    /// `shuffle.cu`: byte unshuffle and bitunshuffle, grid (blosc blocks, parts per block).
    Unshuffle,
    /// `crc32c.cu`: CRC32C verification, one block per stream.
    Crc32c,
    /// `assemble.cu`: crop + fill + byte order + transpose + cast, grid (tiles, jobs).
    Assemble,
    /// `zstd.cu`: Zstandard frame decode, one warp per job (one or more frames).
    ZstdDecode,
    /// `inflate.cu`: deflate decode (raw, zlib or gzip wrapped), one warp per stream.
    InflateDecode,
}

impl Kernel {
    /// Every kernel, in launch order of a wave.
    pub const ALL: [Kernel; 8] = [
        Kernel::Crc32c,
        Kernel::Lz4Decode,
        Kernel::BloscLzDecode,
        Kernel::ZstdDecode,
        Kernel::InflateDecode,
        Kernel::Memcpy,
        Kernel::Unshuffle,
        Kernel::Assemble,
    ];

    /// The `extern "C"` entry point name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Kernel::Lz4Decode => "dmc_lz4_decode",
            Kernel::BloscLzDecode => "dmc_blosclz_decode",
            Kernel::Memcpy => "dmc_memcpy",
            Kernel::Unshuffle => "dmc_unshuffle",
            Kernel::Crc32c => "dmc_crc32c",
            Kernel::Assemble => "dmc_assemble",
            Kernel::ZstdDecode => "dmc_zstd_decode",
            Kernel::InflateDecode => "dmc_inflate_decode",
        }
    }

    /// The source file name in `kernels/`.
    #[must_use]
    pub fn file(self) -> &'static str {
        match self {
            Kernel::Lz4Decode => "lz4.cu",
            Kernel::BloscLzDecode => "blosclz.cu",
            Kernel::Memcpy => "memcpy.cu",
            Kernel::Unshuffle => "shuffle.cu",
            Kernel::Crc32c => "crc32c.cu",
            Kernel::Assemble => "assemble.cu",
            Kernel::ZstdDecode => "zstd.cu",
            Kernel::InflateDecode => "inflate.cu",
        }
    }

    /// The raw source of the kernel's file (with its `#include "common.cuh"`).
    #[must_use]
    pub fn raw_source(self) -> &'static str {
        match self {
            Kernel::Lz4Decode => include_str!("../../../kernels/lz4.cu"),
            Kernel::BloscLzDecode => include_str!("../../../kernels/blosclz.cu"),
            Kernel::Memcpy => include_str!("../../../kernels/memcpy.cu"),
            Kernel::Unshuffle => include_str!("../../../kernels/shuffle.cu"),
            Kernel::Crc32c => include_str!("../../../kernels/crc32c.cu"),
            Kernel::Assemble => include_str!("../../../kernels/assemble.cu"),
            Kernel::ZstdDecode => include_str!("../../../kernels/zstd.cu"),
            Kernel::InflateDecode => include_str!("../../../kernels/inflate.cu"),
        }
    }

    /// The self-contained source handed to NVRTC: `common.cuh` inlined in place of its
    /// `#include`.
    #[must_use]
    pub fn source(self) -> String {
        crate::source::self_contained(self.raw_source(), COMMON_CUH)
    }

    /// The 64-bit FNV-1a hash of [`Kernel::source`]: what a compiled image's source is
    /// identified by (the kernel cache's file names, the shipped images' check).
    #[must_use]
    pub fn source_hash(self) -> u64 {
        crate::source::source_hash(&self.source())
    }

    /// Threads per block the launcher uses for this kernel.
    #[must_use]
    pub fn block_threads(self) -> u32 {
        use crate::consts as c;
        match self {
            Kernel::Lz4Decode => c::DMC_LZ4_WARPS_PER_BLOCK * c::DMC_WARP_SIZE,
            Kernel::BloscLzDecode => c::DMC_BLOSCLZ_WARPS_PER_BLOCK * c::DMC_WARP_SIZE,
            Kernel::Memcpy => c::DMC_MEMCPY_THREADS,
            Kernel::Unshuffle => c::DMC_SHUFFLE_THREADS,
            Kernel::Crc32c => c::DMC_CRC32C_THREADS,
            Kernel::Assemble => c::DMC_ASSEMBLE_THREADS,
            Kernel::ZstdDecode => c::DMC_ZSTD_WARPS_PER_BLOCK * c::DMC_WARP_SIZE,
            Kernel::InflateDecode => c::DMC_INFLATE_WARPS_PER_BLOCK * c::DMC_WARP_SIZE,
        }
    }
}
