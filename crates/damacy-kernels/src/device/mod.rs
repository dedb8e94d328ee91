//! One device interface, two backends: CUDA (cudarc) and the host emulator.
//!
//! Everything above this module — stream tables, launches, status handling, assemble — is the
//! same code on both backends: buffers are typed handles with a device address, uploads and
//! downloads are explicit, and a launch names a [`Kernel`] with its grid and arguments.

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "emulate")]
mod emu;

use crate::error::{Error, Result};
use crate::kernel::Kernel;

/// Which backend a [`Device`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceKind {
    /// The host emulator (feature `emulate`).
    Emulated,
    /// A CUDA device (feature `cuda`).
    Cuda,
}

/// A device that runs damacy's kernels. Cloning is cheap: clones share one backend (one
/// context, one stream, one module cache).
#[derive(Debug, Clone)]
pub struct Device {
    backend: std::sync::Arc<Backend>,
}

#[derive(Debug)]
enum Backend {
    #[cfg(feature = "emulate")]
    Emulated { seed: u64 },
    #[cfg(feature = "cuda")]
    Cuda(cuda::CudaBackend),
    /// Built with neither backend: no `Device` can be constructed.
    #[cfg(not(any(feature = "emulate", feature = "cuda")))]
    #[allow(dead_code)]
    Never(std::convert::Infallible),
}

/// A kernel argument: a device address or a scalar (the kernels take nothing else).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg {
    /// A device address (`const T*` / `T*` in the kernel).
    Ptr(u64),
    /// `dmc_u32`.
    U32(u32),
    /// `dmc_u64`.
    U64(u64),
}

impl Device {
    /// The host emulator. `seed = 0` runs fibers in a fixed order; any other seed shuffles the
    /// order of ready fibers after every barrier and warp collective (seeded, reproducible), which
    /// makes a missing `__syncthreads`/`__syncwarp` show up as a wrong result.
    #[cfg(feature = "emulate")]
    #[must_use]
    pub fn emulated(seed: u64) -> Self {
        Self { backend: std::sync::Arc::new(Backend::Emulated { seed }) }
    }

    /// A CUDA device. `ordinal = Some(n)` retains device n's primary context; `None` uses the
    /// context current on the calling thread (which must be a primary context).
    ///
    /// Checks that the driver library is present and a device exists before any other cudarc
    /// call; without them this returns [`Error::NoDevice`] with the reason (the caller then picks
    /// the CPU executor).
    #[cfg(feature = "cuda")]
    pub fn cuda(ordinal: Option<usize>) -> Result<Self> {
        Ok(Self { backend: std::sync::Arc::new(Backend::Cuda(cuda::CudaBackend::new(ordinal)?)) })
    }

    /// Which backend this device runs on.
    #[must_use]
    pub fn kind(&self) -> DeviceKind {
        match &*self.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => DeviceKind::Emulated,
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => DeviceKind::Cuda,
        }
    }

    /// A human-readable description (device name and architecture, or "host emulator").
    #[must_use]
    pub fn describe(&self) -> String {
        match &*self.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { seed } => format!("host emulator (schedule seed {seed})"),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => c.describe(),
        }
    }

    /// Allocates `len` zeroed bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer> {
        match &*self.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => Ok(DeviceBuffer { mem: Mem::Host(HostAlloc::zeroed(len)?), len }),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => Ok(DeviceBuffer { mem: Mem::Cuda(c.alloc(len)?), len }),
        }
    }

    /// Copies `src` to `dst[offset..offset + src.len()]`.
    pub fn upload(&self, src: &[u8], dst: &mut DeviceBuffer, offset: usize) -> Result<()> {
        check_range(offset, src.len(), dst.len, "upload")?;
        match (&*self.backend, &mut dst.mem) {
            #[cfg(feature = "emulate")]
            (Backend::Emulated { .. }, Mem::Host(h)) => {
                // SAFETY: the range was checked against the allocation's length above, and `src`
                // is a live slice that cannot overlap an allocation we own exclusively (&mut).
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), h.ptr.add(offset), src.len()) };
                Ok(())
            }
            #[cfg(feature = "cuda")]
            (Backend::Cuda(c), Mem::Cuda(s)) => c.upload(src, s, offset),
            #[allow(unreachable_patterns)]
            _ => Err(Error::InvalidArgument("buffer belongs to another backend".into())),
        }
    }

    /// Copies `src[offset..offset + dst.len()]` to `dst`, after all earlier work finished.
    pub fn download(&self, src: &DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        check_range(offset, dst.len(), src.len, "download")?;
        match (&*self.backend, &src.mem) {
            #[cfg(feature = "emulate")]
            (Backend::Emulated { .. }, Mem::Host(h)) => {
                // SAFETY: range checked above; emulated launches are synchronous, so no kernel
                // writes the allocation while we read it.
                unsafe { std::ptr::copy_nonoverlapping(h.ptr.add(offset), dst.as_mut_ptr(), dst.len()) };
                Ok(())
            }
            #[cfg(feature = "cuda")]
            (Backend::Cuda(c), Mem::Cuda(s)) => c.download(s, offset, dst),
            #[allow(unreachable_patterns)]
            _ => Err(Error::InvalidArgument("buffer belongs to another backend".into())),
        }
    }

    /// Launches `kernel` on a `grid.0 × grid.1` grid of `kernel.block_threads()`-thread blocks.
    ///
    /// # Safety
    /// Every pointer argument must be the address of a live buffer of this device (or inside
    /// one), and the sizes passed alongside must describe those buffers: kernels trust them as
    /// their bounds.
    pub(crate) unsafe fn launch(&self, kernel: Kernel, grid: (u32, u32), args: &[Arg]) -> Result<()> {
        if grid.0 == 0 || grid.1 == 0 {
            return Ok(());
        }
        match &*self.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            // SAFETY: forwarded contract of this function.
            Backend::Emulated { seed } => unsafe { emu::launch(kernel, grid, *seed, args) },
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded contract of this function.
            Backend::Cuda(c) => unsafe { c.launch(kernel, grid, args) },
        }
    }

    /// Waits until all work issued on this device's stream finished.
    pub fn synchronize(&self) -> Result<()> {
        match &*self.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => Ok(()),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => c.synchronize(),
        }
    }

    /// Compiles (or loads from the caches) every kernel now, instead of at first launch.
    /// A no-op on the emulator.
    pub fn warm_up(&self) -> Result<()> {
        match &*self.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => Ok(()),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => {
                for k in Kernel::ALL {
                    c.function(k)?;
                }
                Ok(())
            }
        }
    }
}

fn check_range(offset: usize, len: usize, total: usize, what: &str) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= total => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "{what} of {len} bytes at offset {offset} exceeds the buffer's {total} bytes"
        ))),
    }
}

/// A device allocation (host memory on the emulator), freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer {
    mem: Mem,
    len: usize,
}

#[derive(Debug)]
enum Mem {
    #[cfg_attr(not(feature = "emulate"), allow(dead_code))]
    Host(HostAlloc),
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaSlice<u8>),
}

impl DeviceBuffer {
    /// Length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of byte 0 (a host address on the emulator). For FFI edges (`DLPack`).
    #[must_use]
    pub fn device_ptr(&self) -> u64 {
        match &self.mem {
            Mem::Host(h) => h.ptr as u64,
            #[cfg(feature = "cuda")]
            Mem::Cuda(s) => cuda::slice_ptr(s),
        }
    }

    /// The device address of byte `offset`, or an error past the end.
    pub(crate) fn ptr_at(&self, offset: usize) -> Result<Arg> {
        if offset > self.len {
            return Err(Error::InvalidArgument(format!("offset {offset} past the end of a {}-byte buffer", self.len)));
        }
        Ok(Arg::Ptr(self.device_ptr() + offset as u64))
    }
}

/// A zeroed, 256-byte aligned host allocation standing in for device memory.
#[derive(Debug)]
struct HostAlloc {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: HostAlloc owns its allocation exclusively, like Box<[u8]>.
unsafe impl Send for HostAlloc {}
// SAFETY: shared access only hands out the address; reads/writes go through &mut or launches.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    #[cfg_attr(not(feature = "emulate"), allow(dead_code))]
    fn zeroed(len: usize) -> Result<Self> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 256)
            .map_err(|e| Error::InvalidArgument(format!("allocation of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::OutOfMemory(format!("host allocation of {len} bytes failed")));
        }
        Ok(Self { ptr, layout })
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this very layout and not freed before.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}
