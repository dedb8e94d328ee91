//! Device wire formats: the `#[repr(C)]` twins of the structs in `kernels/common.cuh`.
//!
//! Tables uploaded to the device are slices of these structs, turned into bytes with
//! [`bytemuck`] (whose `Pod` derive also proves that they have no padding). The C definitions
//! are the source of truth: the build script compiles them with the host C++ compiler, measures
//! the size of every struct and the offset and size of every field, and emits the `const`
//! assertions included at the end of this file, so a struct changed on one side only is a
//! compile error naming the field. Sizes are never written down anywhere else: use
//! [`std::mem::size_of`] on these types.

use bytemuck::{Pod, Zeroable};

use crate::consts as c;

/// Dimensions an assemble job can have (`DMC_ASSEMBLE_MAX_RANK`).
pub(crate) const MAX_RANK: usize = c::DMC_ASSEMBLE_MAX_RANK as usize;

/// `struct dmc_stream`: one decode stream, a byte range of the wave's source buffer that decodes
/// into a byte range of the wave's destination buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct StreamDesc {
    /// Byte offset of the encoded stream in the source buffer.
    pub(crate) src_off: u64,
    /// Byte offset of the decoded stream in the destination buffer.
    pub(crate) dst_off: u64,
    /// Encoded length.
    pub(crate) src_len: u32,
    /// Decoded length (the capacity the kernel may write).
    pub(crate) dst_len: u32,
    /// Which kernel handles the stream (the decoder's codec slot).
    pub(crate) codec: u32,
    /// Per-kernel extra word (crc32c: the expected checksum).
    pub(crate) flags: u32,
}

/// `struct dmc_shuffle_job`: one blosc block to unshuffle, `len` bytes at `src_off` → `dst_off`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct ShuffleJobDesc {
    /// Byte offset of the shuffled block.
    pub(crate) src_off: u64,
    /// Byte offset of the unshuffled block.
    pub(crate) dst_off: u64,
    /// Block length in bytes.
    pub(crate) len: u32,
    /// Element size in bytes.
    pub(crate) typesize: u32,
    /// `DMC_SHUFFLE_BYTE` or `DMC_SHUFFLE_BIT`.
    pub(crate) mode: u32,
    /// The status slot to write on a bad descriptor (the chunk's first stream).
    pub(crate) stream: u32,
}

/// `struct dmc_assemble_job`: copy an N-d region from the decoded buffer into the batch buffer
/// (or fill it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub(crate) struct AssembleJobDesc {
    /// Byte offset of the region origin in the source.
    pub(crate) src_off: u64,
    /// Byte offset of the region origin in the destination.
    pub(crate) dst_off: u64,
    /// Element strides in the source (unused dimensions 0).
    pub(crate) src_stride: [i64; MAX_RANK],
    /// Element strides in the destination (unused dimensions 0).
    pub(crate) dst_stride: [i64; MAX_RANK],
    /// Region extent per dimension (unused dimensions 1).
    pub(crate) shape: [u64; MAX_RANK],
    /// Product of `shape`.
    pub(crate) n_elems: u64,
    /// Fill value in the destination dtype, little-endian bits.
    pub(crate) fill_bits: u64,
    /// Dimensions used.
    pub(crate) rank: u32,
    /// `DMC_DTYPE_*` of the source.
    pub(crate) src_dtype: u32,
    /// `DMC_DTYPE_*` of the destination.
    pub(crate) dst_dtype: u32,
    /// `DMC_ASM_*` flags.
    pub(crate) flags: u32,
}

/// The size of the field a projection selects; lets the generated checks measure a field's
/// type without a value of the struct.
const fn field_size<S, F>(_: fn(&S) -> &F) -> usize {
    std::mem::size_of::<F>()
}

include!(concat!(env!("OUT_DIR"), "/wire_checks.rs"));
