//! Where a batch lands: a host slice or a device buffer the caller owns ([`Output`]), or an
//! aligned allocation the reader makes ([`Batch`], with typed views), or a caller's strided
//! host array for chunk-level reads ([`HostArrayMut`]).

use std::alloc::Layout;
use std::ptr::NonNull;

use damacy_kernels::{DeviceBuffer, Stream};

use crate::dtype::Dtype;
use crate::error::{Error, Result};

/// Alignment of every [`Batch`] allocation: a cache line, and enough for any element type and
/// for SIMD loads.
pub const BATCH_ALIGN: usize = 64;

/// The destination of [`crate::Reader::read_batch_into`]: exactly [`crate::BatchPlan::nbytes`]
/// bytes, C order, of the plan's output dtype.
#[non_exhaustive]
pub enum Output<'a> {
    /// Host memory the caller owns.
    Host(&'a mut [u8]),
    /// Device memory the caller owns, from the reader's device, written in stream order: when
    /// the call returns, work queued on `stream` afterwards sees the batch.
    Device {
        /// The buffer; the batch is written at `offset`.
        buffer: &'a mut DeviceBuffer,
        /// Byte offset of the batch in `buffer`.
        offset: usize,
        /// The caller's stream, made to wait for the batch.
        stream: &'a Stream,
    },
}

impl std::fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Host(s) => write!(f, "Output::Host({} bytes)", s.len()),
            Output::Device { buffer, offset, .. } => {
                write!(f, "Output::Device({} bytes at offset {offset})", buffer.len())
            }
        }
    }
}

/// Element types a [`Batch`] can be viewed as.
pub trait Element: Copy + 'static + sealed::Sealed {
    /// The dtype of this element type.
    const DTYPE: Dtype;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$d;
        }
    )*};
}

element!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64,
    f32 => F32, f64 => F64, half::f16 => F16, half::bf16 => BF16);

/// A zeroed host allocation aligned to [`BATCH_ALIGN`].
pub(crate) struct AlignedBytes {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `AlignedBytes` owns its allocation exclusively, like a `Vec<u8>`.
unsafe impl Send for AlignedBytes {}
// SAFETY: shared references only read.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    pub(crate) fn zeroed(len: usize) -> Result<Self> {
        if len == 0 {
            return Ok(Self { ptr: NonNull::dangling(), len });
        }
        let layout = Layout::from_size_align(len, BATCH_ALIGN)
            .map_err(|e| Error::invalid(format!("a batch of {len} bytes cannot be allocated: {e}")))?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            NonNull::new(raw).ok_or_else(|| Error::OutOfMemory(format!("the host has no {len} bytes for a batch")))?;
        Ok(Self { ptr, len })
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised (zeroed) bytes, or dangling with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout (it was valid then).
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, BATCH_ALIGN)) }
        }
    }
}

/// A batch read into host memory the reader allocated: C order, native byte order, aligned
/// to [`BATCH_ALIGN`] bytes so it can be viewed as its element type without a copy.
#[non_exhaustive]
pub struct Batch {
    data: AlignedBytes,
    /// `[regions, region shape…]`.
    pub shape: Vec<u64>,
    /// The element type.
    pub dtype: Dtype,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch").field("shape", &self.shape).field("dtype", &self.dtype).finish_non_exhaustive()
    }
}

impl PartialEq for Batch {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape && self.dtype == other.dtype && self.bytes() == other.bytes()
    }
}

impl Batch {
    pub(crate) fn new(data: AlignedBytes, shape: Vec<u64>, dtype: Dtype) -> Self {
        Self { data, shape, dtype }
    }

    /// The batch's bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The batch's bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.data.as_mut_slice()
    }

    /// The elements, viewed as `T`; an error naming both types when `T` is not the batch's
    /// dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!("the batch holds {}, not {}", self.dtype, T::DTYPE)));
        }
        let bytes = self.data.as_slice();
        let n = bytes.len() / std::mem::size_of::<T>();
        // SAFETY: the allocation is aligned to BATCH_ALIGN (≥ align_of::<T>()), holds
        // `n * size_of::<T>()` initialised bytes, and every bit pattern is a valid `T` for the
        // element types `Element` is implemented for (integers, IEEE floats).
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), n) })
    }

    /// The bytes of region `r` of the batch.
    #[must_use]
    pub fn region(&self, r: usize) -> &[u8] {
        let per = self.shape.iter().skip(1).product::<u64>() as usize * self.dtype.size();
        &self.bytes()[r * per..(r + 1) * per]
    }
}

/// A caller's host array with its strides: the destination of chunk-level reads
/// ([`crate::Reader::read_chunks_into`]), as zarr-python's `out` buffer.
#[derive(Debug)]
#[non_exhaustive]
pub struct HostArrayMut<'a> {
    /// The memory the array lies in.
    pub data: &'a mut [u8],
    /// Byte offset of element `[0, …, 0]` in `data`.
    pub offset: usize,
    /// The array's shape.
    pub shape: Vec<u64>,
    /// Byte strides per axis (negative strides allowed).
    pub strides: Vec<isize>,
    /// The element type; must be the array's output dtype.
    pub dtype: Dtype,
}

impl<'a> HostArrayMut<'a> {
    /// A C-order array over `data`.
    pub fn c_order(data: &'a mut [u8], shape: Vec<u64>, dtype: Dtype) -> Self {
        let strides = crate::region::c_strides(&shape).iter().map(|s| (s * dtype.size() as u64) as isize).collect();
        Self { data, offset: 0, shape, strides, dtype }
    }

    /// An array with explicit byte strides over `data`, element `[0, …]` at `offset`.
    pub fn strided(data: &'a mut [u8], offset: usize, shape: Vec<u64>, strides: Vec<isize>, dtype: Dtype) -> Self {
        Self { data, offset, shape, strides, dtype }
    }

    /// Check that every element lies inside `data`.
    pub(crate) fn validate(&self) -> Result<()> {
        check_reach(self.offset, &self.shape, &self.strides, self.dtype, self.data.len())
    }
}

/// A caller's array in device memory with its strides (a `CuPy` or torch tensor under
/// `zarr.config.enable_gpu()`): the destination of
/// [`crate::Reader::read_chunks_into_device`].
#[derive(Debug)]
#[non_exhaustive]
pub struct DeviceArrayMut<'a> {
    /// The device memory the array lies in (from the reader's device; caller-owned memory is
    /// wrapped with [`damacy_kernels::Device::borrow_memory`]).
    pub buffer: &'a mut DeviceBuffer,
    /// Byte offset of element `[0, …, 0]` in `buffer`.
    pub offset: usize,
    /// The array's shape.
    pub shape: Vec<u64>,
    /// Byte strides per axis (negative strides allowed).
    pub strides: Vec<isize>,
    /// The element type; must be the array's output dtype.
    pub dtype: Dtype,
}

impl<'a> DeviceArrayMut<'a> {
    /// An array with explicit byte strides in `buffer`, element `[0, …]` at `offset`.
    pub fn strided(
        buffer: &'a mut DeviceBuffer,
        offset: usize,
        shape: Vec<u64>,
        strides: Vec<isize>,
        dtype: Dtype,
    ) -> Self {
        Self { buffer, offset, shape, strides, dtype }
    }

    /// Check that every element lies inside `buffer`.
    pub(crate) fn validate(&self) -> Result<()> {
        check_reach(self.offset, &self.shape, &self.strides, self.dtype, self.buffer.len())
    }
}

/// Whether every element of a strided array (`[0, …]` at `offset`) lies inside `len` bytes;
/// returns the byte span `[lo, hi)` it reaches (empty for an empty array).
pub(crate) fn reach(offset: usize, shape: &[u64], strides: &[isize], dtype: Dtype) -> (i128, i128) {
    if shape.contains(&0) {
        return (offset as i128, offset as i128);
    }
    let (mut lo, mut hi) = (offset as i128, offset as i128);
    for (n, s) in shape.iter().zip(strides) {
        let span = (i128::from(*n) - 1) * *s as i128;
        if span < 0 { lo += span } else { hi += span }
    }
    (lo, hi + dtype.size() as i128)
}

fn check_reach(offset: usize, shape: &[u64], strides: &[isize], dtype: Dtype, len: usize) -> Result<()> {
    if strides.len() != shape.len() {
        return Err(Error::invalid(format!("output array has {} strides for {} axes", strides.len(), shape.len())));
    }
    let (lo, hi) = reach(offset, shape, strides, dtype);
    if lo < 0 || hi > len as i128 {
        return Err(Error::invalid(format!(
            "output array of shape {shape:?} and strides {strides:?} at offset {offset} reaches outside its {len} bytes"
        )));
    }
    Ok(())
}
