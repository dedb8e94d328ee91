//! `DLPack` 1.x: the C structs (the legacy [`DLManagedTensor`] and the versioned
//! [`DLManagedTensorVersioned`]) and a helper that exports memory owned by a Rust value.
//!
//! The layouts follow `dlpack.h` (v1.0): `#[repr(C)]`, checked at compile time against the
//! sizes and offsets of the header on 64-bit targets. [`export`] and [`export_versioned`] box
//! the owner together with the shape and strides the tensor points to, and install a deleter that
//! drops exactly that box; the consumer calls the deleter once, when it no longer needs the
//! memory. [`DlpackTensor`] holds an export on the Rust side (its `Drop` calls the deleter) until
//! [`DlpackTensor::into_raw`] hands it to a consumer (a Python capsule, another library).
//!
//! ```
//! use damacy::dlpack::{DLDevice, DLDeviceType, TensorSpec, dl_dtype, export_versioned};
//! use damacy::Dtype;
//!
//! let data: Vec<u16> = (0..12).collect();
//! let spec = TensorSpec::c_contiguous(data.as_ptr().cast_mut().cast(), DLDevice::CPU, dl_dtype(Dtype::U16), &[3, 4]);
//! // SAFETY: `spec.data` points into `data`, which the export owns (the Vec's heap buffer does
//! // not move when the Vec is moved into the export), and describes exactly its 12 elements.
//! let tensor = unsafe { export_versioned(data, spec) };
//! let t = &tensor.managed().dl_tensor;
//! assert_eq!(t.device.device_type, DLDeviceType::CPU);
//! assert_eq!(unsafe { std::slice::from_raw_parts(t.shape, 2) }, &[3, 4]);
//! assert_eq!(unsafe { std::slice::from_raw_parts(t.strides, 2) }, &[4, 1]);
//! drop(tensor); // calls the deleter: the Vec is freed
//! ```

use std::ffi::c_void;
use std::ptr::NonNull;

use crate::Dtype;

/// The `DLPack` major version of [`DLManagedTensorVersioned`] exports.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The `DLPack` minor version of [`DLManagedTensorVersioned`] exports.
pub const DLPACK_MINOR_VERSION: u32 = 0;
/// [`DLManagedTensorVersioned::flags`] bit: the consumer must not write the memory.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1;
/// [`DLManagedTensorVersioned::flags`] bit: the producer copied the data for this export.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLDeviceType`: where the memory lives (a C enum, an `int`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub i32);

impl DLDeviceType {
    /// `kDLCPU`: host memory.
    pub const CPU: Self = Self(1);
    /// `kDLCUDA`: CUDA device memory.
    pub const CUDA: Self = Self(2);
    /// `kDLCUDAHost`: pinned host memory (`cudaMallocHost`).
    pub const CUDA_HOST: Self = Self(3);
    /// `kDLCUDAManaged`: CUDA managed (unified) memory.
    pub const CUDA_MANAGED: Self = Self(13);
}

/// `DLDevice`: a device type and its ordinal.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// The device type.
    pub device_type: DLDeviceType,
    /// The device ordinal (0 for the host).
    pub device_id: i32,
}

impl DLDevice {
    /// Host memory.
    pub const CPU: Self = Self { device_type: DLDeviceType::CPU, device_id: 0 };

    /// CUDA device `ordinal`.
    #[must_use]
    pub fn cuda(ordinal: usize) -> Self {
        Self { device_type: DLDeviceType::CUDA, device_id: i32::try_from(ordinal).unwrap_or(i32::MAX) }
    }
}

/// `DLDataTypeCode` values ([`DLDataType::code`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct DLDataTypeCode;

impl DLDataTypeCode {
    /// `kDLInt`: signed integers.
    pub const INT: u8 = 0;
    /// `kDLUInt`: unsigned integers.
    pub const UINT: u8 = 1;
    /// `kDLFloat`: IEEE floats.
    pub const FLOAT: u8 = 2;
    /// `kDLBfloat`: bfloat16.
    pub const BFLOAT: u8 = 4;
    /// `kDLBool`: booleans (8 bits each).
    pub const BOOL: u8 = 6;
}

/// `DLDataType`: type code, bits per lane, lanes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// A [`DLDataTypeCode`] value.
    pub code: u8,
    /// Bits per element (per lane).
    pub bits: u8,
    /// Lanes per element (1 for scalars).
    pub lanes: u16,
}

/// The `DLPack` data type of a damacy [`Dtype`].
#[must_use]
pub fn dl_dtype(dtype: Dtype) -> DLDataType {
    let code = match dtype {
        Dtype::Bool => DLDataTypeCode::BOOL,
        Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64 => DLDataTypeCode::INT,
        Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => DLDataTypeCode::UINT,
        Dtype::BF16 => DLDataTypeCode::BFLOAT,
        _ => DLDataTypeCode::FLOAT,
    };
    DLDataType { code, bits: (dtype.size() * 8) as u8, lanes: 1 }
}

/// `DLTensor`: a strided view of memory. `shape` and `strides` (in elements) hold `ndim`
/// entries each.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The start of the allocation (a device address for device memory).
    pub data: *mut c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements (never null in damacy's exports).
    pub strides: *mut i64,
    /// Bytes from `data` to element `[0, …, 0]`.
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the legacy (pre-1.0, unversioned) managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context (damacy: the box that owns the memory).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and its memory; the consumer calls it once.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLPackVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLManagedTensorVersioned`: the `DLPack` 1.x managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The `DLPack` version of this struct.
    pub version: DLPackVersion,
    /// The producer's context (damacy: the box that owns the memory).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and its memory; the consumer calls it once.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<DLDevice>() == 8 && size_of::<DLDataType>() == 4);
    assert!(size_of::<DLTensor>() == 48);
    assert!(offset_of!(DLTensor, device) == 8 && offset_of!(DLTensor, ndim) == 16);
    assert!(offset_of!(DLTensor, dtype) == 20 && offset_of!(DLTensor, shape) == 24);
    assert!(offset_of!(DLTensor, strides) == 32 && offset_of!(DLTensor, byte_offset) == 40);
    assert!(size_of::<DLManagedTensor>() == 64);
    assert!(offset_of!(DLManagedTensor, manager_ctx) == 48 && offset_of!(DLManagedTensor, deleter) == 56);
    assert!(size_of::<DLManagedTensorVersioned>() == 80);
    assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
    assert!(offset_of!(DLManagedTensorVersioned, deleter) == 16);
    assert!(offset_of!(DLManagedTensorVersioned, flags) == 24);
    assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);
};

/// What an export describes: the memory, its device, element type, shape and strides.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TensorSpec {
    /// The start of the memory.
    pub data: *mut c_void,
    /// Where it lives.
    pub device: DLDevice,
    /// The element type.
    pub dtype: DLDataType,
    /// Extents.
    pub shape: Vec<i64>,
    /// Strides in elements, one per extent.
    pub strides: Vec<i64>,
    /// Bytes from `data` to element `[0, …, 0]`.
    pub byte_offset: u64,
    /// Whether consumers must not write the memory (versioned exports carry the flag).
    pub read_only: bool,
}

impl TensorSpec {
    /// A C-contiguous tensor of `shape` at `data`.
    #[must_use]
    pub fn c_contiguous(data: *mut c_void, device: DLDevice, dtype: DLDataType, shape: &[u64]) -> Self {
        let strides = crate::c_strides(shape).iter().map(|&s| s as i64).collect();
        Self {
            data,
            device,
            dtype,
            shape: shape.iter().map(|&s| s as i64).collect(),
            strides,
            byte_offset: 0,
            read_only: false,
        }
    }
}

/// The two managed-tensor structs an export can be.
pub trait ManagedTensor: sealed::Sealed + Sized {
    /// The tensor the struct holds.
    fn dl_tensor(&self) -> &DLTensor;

    /// Calls the struct's deleter (if it has one).
    ///
    /// # Safety
    /// `ptr` is a live managed tensor whose deleter was not called yet; it is dangling after.
    unsafe fn delete(ptr: NonNull<Self>);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DLManagedTensor {}
    impl Sealed for super::DLManagedTensorVersioned {}
}

impl ManagedTensor for DLManagedTensor {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }

    unsafe fn delete(ptr: NonNull<Self>) {
        // SAFETY: the caller guarantees `ptr` is live and not yet deleted.
        if let Some(deleter) = unsafe { ptr.as_ref() }.deleter {
            // SAFETY: the deleter of a live tensor, called once (the caller's contract).
            unsafe { deleter(ptr.as_ptr()) }
        }
    }
}

impl ManagedTensor for DLManagedTensorVersioned {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }

    unsafe fn delete(ptr: NonNull<Self>) {
        // SAFETY: the caller guarantees `ptr` is live and not yet deleted.
        if let Some(deleter) = unsafe { ptr.as_ref() }.deleter {
            // SAFETY: the deleter of a live tensor, called once (the caller's contract).
            unsafe { deleter(ptr.as_ptr()) }
        }
    }
}

/// An exported managed tensor held on the Rust side: dropping it calls the deleter once;
/// [`DlpackTensor::into_raw`] hands it (and the duty to call the deleter) to a consumer.
#[derive(Debug)]
pub struct DlpackTensor<M: ManagedTensor> {
    ptr: NonNull<M>,
}

// SAFETY: the export owns its memory through an owner that is `Send` (required by `export`);
// the struct itself is plain data behind a unique pointer.
unsafe impl<M: ManagedTensor> Send for DlpackTensor<M> {}

impl<M: ManagedTensor> DlpackTensor<M> {
    /// The managed tensor, to read its fields.
    #[must_use]
    pub fn managed(&self) -> &M {
        // SAFETY: `ptr` is live until this value is dropped or turned into a raw pointer.
        unsafe { self.ptr.as_ref() }
    }

    /// The raw pointer, for a consumer that calls the deleter exactly once (a `PyCapsule`'s
    /// destructor, `torch.from_dlpack`).
    #[must_use]
    pub fn into_raw(self) -> NonNull<M> {
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr
    }

    /// Takes back a pointer made by [`DlpackTensor::into_raw`] (its deleter not yet called).
    ///
    /// # Safety
    /// `ptr` came from `into_raw` of the same `M`, and nobody else will call its deleter.
    #[must_use]
    pub unsafe fn from_raw(ptr: NonNull<M>) -> Self {
        Self { ptr }
    }
}

impl<M: ManagedTensor> Drop for DlpackTensor<M> {
    fn drop(&mut self) {
        // SAFETY: this value owns the export and its deleter has not been called.
        unsafe { M::delete(self.ptr) }
    }
}

/// The box behind `manager_ctx`: the managed struct first, then what its pointers point into.
#[repr(C)]
struct Holder<M, O> {
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    owner: O,
}

fn tensor(spec: &TensorSpec) -> DLTensor {
    DLTensor {
        data: spec.data,
        device: spec.device,
        ndim: spec.shape.len() as i32,
        dtype: spec.dtype,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: spec.byte_offset,
    }
}

/// Box `owner` with `managed` and point the tensor's shape and strides into the box.
fn boxed<M, O>(managed: M, spec: TensorSpec, owner: O, dl: impl Fn(&mut M) -> &mut DLTensor) -> *mut Holder<M, O> {
    let mut holder = Box::new(Holder { managed, shape: spec.shape, strides: spec.strides, owner });
    let (shape, strides) = (holder.shape.as_mut_ptr(), holder.strides.as_mut_ptr());
    let t = dl(&mut holder.managed);
    t.shape = shape;
    t.strides = strides;
    Box::into_raw(holder)
}

unsafe extern "C" fn delete_legacy<O>(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` is a live export of `export::<O>` (the deleter is only installed there),
    // whose `manager_ctx` is the `Holder` box; the consumer calls the deleter once.
    unsafe { drop(Box::from_raw((*managed).manager_ctx.cast::<Holder<DLManagedTensor, O>>())) }
}

unsafe extern "C" fn delete_versioned<O>(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: as `delete_legacy`, for `export_versioned::<O>`.
    unsafe { drop(Box::from_raw((*managed).manager_ctx.cast::<Holder<DLManagedTensorVersioned, O>>())) }
}

/// Export memory owned by `owner` as a legacy [`DLManagedTensor`]; the deleter drops `owner`.
///
/// # Safety
/// `spec` must describe memory that stays valid and unmoved while `owner` lives (it is owned by
/// `owner`, or kept alive by it), with `shape.len() == strides.len()` and every element inside
/// the memory; device memory must be ready for the consumer (or ordered by the caller).
pub unsafe fn export<O: Send + 'static>(owner: O, spec: TensorSpec) -> DlpackTensor<DLManagedTensor> {
    let managed = DLManagedTensor {
        dl_tensor: tensor(&spec),
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_legacy::<O>),
    };
    let holder = boxed(managed, spec, owner, |m| &mut m.dl_tensor);
    // SAFETY: `holder` is the live box just made; its first field is the managed struct
    // (`repr(C)`), so the two pointers are the same address.
    unsafe {
        (*holder).managed.manager_ctx = holder.cast();
        DlpackTensor { ptr: NonNull::new_unchecked(&raw mut (*holder).managed) }
    }
}

/// Export memory owned by `owner` as a `DLPack` 1.x [`DLManagedTensorVersioned`]; the deleter
/// drops `owner`.
///
/// # Safety
/// As [`export`].
pub unsafe fn export_versioned<O: Send + 'static>(
    owner: O,
    spec: TensorSpec,
) -> DlpackTensor<DLManagedTensorVersioned> {
    let flags = if spec.read_only { DLPACK_FLAG_BITMASK_READ_ONLY } else { 0 };
    let managed = DLManagedTensorVersioned {
        version: DLPackVersion { major: DLPACK_MAJOR_VERSION, minor: DLPACK_MINOR_VERSION },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_versioned::<O>),
        flags,
        dl_tensor: tensor(&spec),
    };
    let holder = boxed(managed, spec, owner, |m| &mut m.dl_tensor);
    // SAFETY: as in `export`.
    unsafe {
        (*holder).managed.manager_ctx = holder.cast();
        DlpackTensor { ptr: NonNull::new_unchecked(&raw mut (*holder).managed) }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Counted(Vec<u8>, Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn raw_exports_free_once_when_the_consumer_deletes() {
        let drops = Arc::new(AtomicUsize::new(0));
        let owner = Counted(vec![7u8; 24], drops.clone());
        let spec =
            TensorSpec::c_contiguous(owner.0.as_ptr().cast_mut().cast(), DLDevice::CPU, dl_dtype(Dtype::I16), &[3, 4]);
        // SAFETY: the data is the owner's Vec buffer (24 bytes = 12 int16), which does not move.
        let raw = unsafe { export(owner, spec) }.into_raw();
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        // SAFETY: a live export made just above.
        let m = unsafe { raw.as_ref() };
        assert_eq!(m.dl_tensor.dtype, DLDataType { code: DLDataTypeCode::INT, bits: 16, lanes: 1 });
        assert_eq!(m.dl_tensor.ndim, 2);
        // SAFETY: the deleter of a live export, called once as a consumer would.
        unsafe { (m.deleter.unwrap())(raw.as_ptr()) };
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn dtypes_map_to_dlpack_codes() {
        assert_eq!(dl_dtype(Dtype::Bool), DLDataType { code: 6, bits: 8, lanes: 1 });
        assert_eq!(dl_dtype(Dtype::BF16), DLDataType { code: 4, bits: 16, lanes: 1 });
        assert_eq!(dl_dtype(Dtype::F64), DLDataType { code: 2, bits: 64, lanes: 1 });
        assert_eq!(dl_dtype(Dtype::U32), DLDataType { code: 1, bits: 32, lanes: 1 });
        assert_eq!(dl_dtype(Dtype::I8), DLDataType { code: 0, bits: 8, lanes: 1 });
    }
}
