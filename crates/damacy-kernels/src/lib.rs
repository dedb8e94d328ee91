//! damacy's GPU decode foundation: CUDA kernels for blosc (lz4, lz4hc, blosclz, zstd, memcpyed;
//! byte and bit shuffle), zstd, raw `bytes`, crc32c and the assemble step, the host parse that
//! turns blosc and zstd frames into a flat stream table, and one device interface with two
//! backends — CUDA
//! (cudarc; kernels loaded when the [`Decoder`] or [`Assembler`] that launches them is built, or
//! all at once by [`Device::prepare_kernels`], from the cubins and PTX compiled when this crate
//! was built — [`images`] — and compiled by NVRTC at run time only for other architectures) and
//! a host emulator that runs the very same `.cu` files on the CPU.
//!
//! The kernel sources live in the workspace's top-level `kernels/` folder; they are embedded in
//! this crate ([`Kernel::source`]); the build compiles them for `sm_80`, `sm_90` and (PTX)
//! `compute_90` when it finds NVRTC, and a device of another architecture compiles them for its own. The tables
//! uploaded to the device are `#[repr(C)]` structs whose layout the build checks against the C
//! definitions in `kernels/common.cuh`, and each kernel has one typed launcher used by both
//! backends.
//!
//! ```no_run
//! # #[cfg(feature = "emulate")] {
//! use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device};
//! let device = Device::emulated(0);
//! let mut decoder = Decoder::new(&device, DecodeConfig::default())?;
//! let frame: Vec<u8> = std::fs::read("chunk.blosc")?;
//! let out = decoder.decode_to_host(&[ChunkInput::blosc(&frame)])?;
//! let bytes: &Vec<u8> = out.chunks[0].as_ref().map_err(|e| e.to_string())?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The modules are private: the public surface is re-exported below. Six namespaces stay
// public because they are coherent sets of names that read badly at the root: `consts` (the
// `DMC_*` constants generated from `kernels/common.cuh`), `images` (the shipped kernel images),
// `nvrtc` (the run-time compiler: `load`, `compile`, `version`), `cuda` (probing the driver
// before a `Device` exists) and, with the emulator, `cost` and `model` (its cost counters and the
// GPU performance model built on them).
mod assemble;
mod blosc;
#[cfg(feature = "cuda")]
mod cache;
pub mod consts;
#[cfg(feature = "emulate")]
pub mod cost;
mod cubin;
mod decode;
mod device;
mod dtype;
mod error;
pub mod images;
mod kernel;
mod launch;
#[cfg(feature = "emulate")]
pub mod model;
#[cfg(feature = "cuda")]
pub mod nvrtc;
mod source;
mod wire;
mod zstd;

pub use assemble::{AssembleJob, Assembler, assemble};
pub use blosc::{
    BloscCodec, BloscHeader, FrameError, FrameErrorKind, FramePlan, FrameShuffle, FrameStream, Shuffle, StreamCodec,
    plan_frame,
};
#[cfg(feature = "cuda")]
pub use cache::{CacheStats, KernelCache, default_dir as default_kernel_cache_dir};
pub use decode::{
    BatchDecoded, ChunkEncoding, ChunkInput, DecodeConfig, DecodedWave, Decoder, HostDecoded, QueuedWave, Teams,
    WaveFootprint, WavePlan, WaveSchedule, WaveStats,
};
#[cfg(feature = "emulate")]
pub use device::ScheduleEntry;
#[cfg(feature = "cuda")]
pub use device::cuda;
pub use device::{Device, DeviceBuffer, DeviceKind, Event, PinnedBuffer, Stream};
pub use dtype::{CastKind, Dtype, OutputDtype, UnknownDtype};
pub use error::{Error, Result, StreamStatus};
pub use images::{ImageOrigin, KernelImages};
pub use kernel::Kernel;
pub use zstd::{ZstdFrame, ZstdJob, ZstdModes, ZstdParseError, ZstdPlan, parse as parse_zstd};
