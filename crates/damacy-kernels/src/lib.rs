//! damacy's GPU decode foundation: CUDA kernels for blosc (lz4, lz4hc, blosclz, zstd, memcpyed;
//! byte and bit shuffle), zstd, raw `bytes`, crc32c and the assemble step, the host parse that
//! turns blosc and zstd frames into a flat stream table, and one device interface with two
//! backends — CUDA
//! (cudarc, kernels compiled by NVRTC when the [`Decoder`] or [`Assembler`] that launches them
//! is built, or all at once by [`Device::prepare_kernels`]) and a host emulator that runs the
//! very same `.cu` files on the CPU.
//!
//! The kernel sources live in the workspace's top-level `kernels/` folder; they are embedded in
//! this crate ([`Kernel::source`]) and compiled for the device's own architecture. The tables
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

// Built with neither backend (e.g. `default-features = false`), the crate type-checks but no
// `Device` can exist: the backend-specific code paths are then unused.
#![cfg_attr(
    not(any(feature = "emulate", feature = "cuda")),
    allow(unused_variables, dead_code, unused_imports, unreachable_code, clippy::unnecessary_wraps)
)]

pub mod assemble;
pub mod blosc;
#[cfg(feature = "cuda")]
pub mod cache;
pub mod consts;
#[cfg(feature = "emulate")]
pub mod cost;
pub mod decode;
pub mod device;
pub mod dtype;
mod error;
mod kernel;
mod launch;
#[cfg(feature = "emulate")]
pub mod model;
#[cfg(feature = "cuda")]
pub mod nvrtc;
mod wire;
pub mod zstd;

pub use assemble::{AssembleJob, Assembler, assemble};
pub use blosc::{BloscCodec, BloscHeader, FrameErrorKind, Shuffle};
pub use decode::{
    ChunkEncoding, ChunkInput, DecodeConfig, DecodedWave, Decoder, HostDecoded, WaveFootprint, WavePlan, WaveStats,
};
pub use device::{Device, DeviceBuffer, DeviceKind};
pub use dtype::{Dtype, OutputDtype};
pub use error::{Error, Result, StreamStatus};
pub use kernel::Kernel;
pub use zstd::{ZstdModes, ZstdParseError, ZstdPlan};
