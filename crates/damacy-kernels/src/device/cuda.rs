//! The CUDA backend (cudarc, driver and NVRTC loaded at run time).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys};

use super::Arg;
use crate::error::{Error, Result};
use crate::kernel::Kernel;

/// Why no CUDA device can be used, or `None` when one can. Makes no cudarc call that could
/// panic: the driver library's presence is checked first.
#[must_use]
pub fn unavailable_reason() -> Option<String> {
    // SAFETY: only probes whether libcuda can be opened.
    if !unsafe { sys::is_culib_present() } {
        return Some("libcuda.so not found (no NVIDIA driver on this machine)".into());
    }
    if let Err(e) = cudarc::driver::result::init() {
        return Some(format!("cuInit failed: {e}"));
    }
    match CudaContext::device_count() {
        Ok(0) => Some("the NVIDIA driver is present but reports no CUDA device".into()),
        Ok(_) => None,
        Err(e) => Some(format!("no CUDA device: {e}")),
    }
}

/// The ordinal of the device whose context is current on this thread, `None` when no context
/// is current. For the `Config.device` / current-context consistency check (ARCHITECTURE §5).
pub fn current_context_device() -> Result<Option<usize>> {
    if let Some(r) = unavailable_reason() {
        return Err(Error::NoDevice(r));
    }
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is loaded and initialised (checked above); `ctx` is valid for writes.
    unsafe { sys::cuCtxGetCurrent(&raw mut ctx) }.result().map_err(|e| Error::Cuda(format!("cuCtxGetCurrent: {e}")))?;
    if ctx.is_null() {
        return Ok(None);
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: a context is current; `dev` is valid for writes.
    unsafe { sys::cuCtxGetDevice(&raw mut dev) }.result().map_err(|e| Error::Cuda(format!("cuCtxGetDevice: {e}")))?;
    let n = CudaContext::device_count().map_err(|e| Error::Cuda(e.to_string()))?;
    for i in 0..n {
        if cudarc::driver::result::device::get(i).map_err(|e| Error::Cuda(e.to_string()))? == dev {
            return Ok(Some(i as usize));
        }
    }
    Err(Error::Cuda("the current context's device has no ordinal".into()))
}

/// Which device to bind (ARCHITECTURE §5): `requested` (`Config.device`) retains that device's
/// primary context and must agree with a context current on the calling thread, if any; without
/// it, the device of the current context; with neither, an error.
pub(crate) fn binding(requested: Option<usize>, current: Option<usize>, count: usize) -> Result<usize> {
    match (requested, current) {
        (Some(n), _) if n >= count => {
            Err(Error::InvalidArgument(format!("Config.device={n} but this machine has {count} CUDA device(s)")))
        }
        (Some(n), Some(m)) if m != n => Err(Error::InvalidArgument(format!(
            "Config.device={n} but a CUcontext of device {m} is current on this thread: call torch.cuda.set_device({n}) (or cudaSetDevice) first, or set Config.device={m}"
        ))),
        (Some(n), _) => Ok(n),
        (None, Some(m)) => Ok(m),
        (None, None) => Err(Error::InvalidArgument(
            "no CUcontext is current: set Config.device (e.g. to LOCAL_RANK) or make a context current on this thread"
                .into(),
        )),
    }
}

/// A CUDA device: a retained primary context, one non-blocking stream, loaded kernels.
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: (i32, i32),
    functions: Mutex<HashMap<Kernel, CudaFunction>>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("ordinal", &self.ctx.ordinal())
            .field("arch", &self.arch)
            .finish_non_exhaustive()
    }
}

fn cuda_err(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> Error + '_ {
    move |e| Error::Cuda(format!("{what}: {e}"))
}

impl CudaBackend {
    pub(crate) fn new(ordinal: Option<usize>) -> Result<Self> {
        if let Some(r) = unavailable_reason() {
            return Err(Error::NoDevice(r));
        }
        let count = CudaContext::device_count().map_err(cuda_err("cuDeviceGetCount"))?;
        let current = current_context_device()?;
        let dev = binding(ordinal, current, count as usize)?;
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver is initialised; `cur` is valid for writes.
        unsafe { sys::cuCtxGetCurrent(&raw mut cur) }.result().map_err(cuda_err("cuCtxGetCurrent"))?;
        let ctx = CudaContext::new(dev).map_err(cuda_err("retaining the primary context"))?;
        if !cur.is_null() && ctx.cu_ctx() != cur {
            return Err(Error::InvalidArgument(format!(
                "the current CUcontext is not device {dev}'s primary context; damacy shares primary contexts only"
            )));
        }
        let arch = ctx.compute_capability().map_err(cuda_err("compute capability"))?;
        // SAFETY: this backend synchronises its stream explicitly before buffers are reused or
        // read back, so cudarc's per-buffer event tracking is not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(cuda_err("cuStreamCreate"))?;
        Ok(Self { ctx, stream, arch, functions: Mutex::new(HashMap::new()) })
    }

    pub(crate) fn describe(&self) -> String {
        let name = self.ctx.name().unwrap_or_else(|_| "unknown".into());
        format!("CUDA device {} ({name}, sm_{}{})", self.ctx.ordinal(), self.arch.0, self.arch.1)
    }

    pub(crate) fn default_stream(&self) -> Arc<CudaStream> {
        self.stream.clone()
    }

    pub(crate) fn new_stream(&self) -> Result<Arc<CudaStream>> {
        self.ctx.new_stream().map_err(cuda_err("cuStreamCreate"))
    }

    /// Waits for all work in the context (every stream of this backend).
    pub(crate) fn synchronize_context(&self) -> Result<()> {
        self.ctx.synchronize().map_err(cuda_err("cuCtxSynchronize"))
    }

    pub(crate) fn alloc(&self, len: usize) -> Result<CudaSlice<u8>> {
        let slice = self
            .stream
            .alloc_zeros::<u8>(len.max(1))
            .map_err(|e| Error::OutOfMemory(format!("cuMemAlloc of {len} bytes: {e}")))?;
        // The allocation and its zeroing are ordered on the default stream only (stream-ordered
        // allocation): finish them before any other stream (the decoder's copy stream) writes
        // the buffer. Allocation happens at construction, never per batch, so this costs once.
        self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize after cuMemAllocAsync"))?;
        Ok(slice)
    }

    /// `len` zeroed bytes of page-locked host memory; free with [`Self::free_pinned`].
    pub(crate) fn alloc_pinned(&self, len: usize) -> Result<*mut u8> {
        self.ctx.bind_to_thread().map_err(cuda_err("binding the context"))?;
        // SAFETY: the context is current; the returned allocation has `len.max(1)` bytes.
        let p = unsafe { cudarc::driver::result::malloc_host(len.max(1), 0) }
            .map_err(|e| Error::OutOfMemory(format!("cuMemHostAlloc of {len} bytes: {e}")))?
            .cast::<u8>();
        // SAFETY: `p` points to `len.max(1)` writable bytes.
        unsafe { std::ptr::write_bytes(p, 0, len.max(1)) };
        Ok(p)
    }

    pub(crate) fn free_pinned(&self, ptr: *mut u8) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `alloc_pinned` and the device finished with it (the caller
            // synchronised the context).
            let _ = unsafe { cudarc::driver::result::free_host(ptr.cast()) };
        }
    }

    pub(crate) fn function(&self, kernel: Kernel) -> Result<CudaFunction> {
        let mut map = self.functions.lock().map_err(|_| Error::Cuda("function table poisoned".into()))?;
        if let Some(f) = map.get(&kernel) {
            return Ok(f.clone());
        }
        let image = crate::cache::compiled_image(kernel, self.arch)?;
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(image.as_ref().clone()))
            .map_err(cuda_err("cuModuleLoadData"))?;
        let f = module.load_function(kernel.name()).map_err(cuda_err("cuModuleGetFunction"))?;
        map.insert(kernel, f.clone());
        Ok(f)
    }

    /// # Safety
    /// As [`super::Device::launch`].
    pub(crate) unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        kernel: Kernel,
        grid: (u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        let f = self.function(kernel)?;
        let wide: Vec<u64> = args
            .iter()
            .filter_map(|a| match a {
                Arg::Ptr(p) | Arg::U64(p) => Some(*p),
                Arg::U32(_) => None,
            })
            .collect();
        let narrow: Vec<u32> = args
            .iter()
            .filter_map(|a| match a {
                Arg::U32(v) => Some(*v),
                _ => None,
            })
            .collect();
        let mut b = stream.launch_builder(&f);
        let (mut iw, mut in_) = (0, 0);
        for a in args {
            match a {
                Arg::Ptr(_) | Arg::U64(_) => {
                    b.arg(&wide[iw]);
                    iw += 1;
                }
                Arg::U32(_) => {
                    b.arg(&narrow[in_]);
                    in_ += 1;
                }
            }
        }
        let cfg = LaunchConfig {
            grid_dim: (grid.0, grid.1, 1),
            block_dim: (kernel.block_threads(), 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the argument list matches the kernel's parameters (built by this crate's
        // launchers) and the pointers address live buffers per this function's contract.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(cuda_err(kernel.name()))
    }
}

/// Records an event on `stream` (with timing when `timed`).
pub(crate) fn record(stream: &Arc<CudaStream>, timed: bool) -> Result<cudarc::driver::CudaEvent> {
    let flags = if timed { sys::CUevent_flags::CU_EVENT_DEFAULT } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING };
    stream.record_event(Some(flags)).map_err(cuda_err("cuEventRecord"))
}

/// Copies pageable `src` to device address `dst` on `stream` and waits for it.
pub(crate) fn upload_sync(stream: &Arc<CudaStream>, src: &[u8], dst: u64) -> Result<()> {
    stream.context().bind_to_thread().map_err(cuda_err("binding the context"))?;
    // SAFETY: `dst..dst+src.len()` lies inside a live allocation (checked by the caller); we
    // synchronise before `src` can go away.
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, stream.cu_stream()) }
        .map_err(cuda_err("host-to-device copy"))?;
    stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
}

/// Copies device address `src` to pageable `dst` on `stream` and waits for it.
pub(crate) fn download_sync(stream: &Arc<CudaStream>, src: u64, dst: &mut [u8]) -> Result<()> {
    stream.context().bind_to_thread().map_err(cuda_err("binding the context"))?;
    // SAFETY: `src..src+dst.len()` lies inside a live allocation (checked by the caller); we
    // synchronise before `dst` can be read or go away.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
        .map_err(cuda_err("device-to-host copy"))?;
    stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
}

/// Queues a copy of `len` pinned bytes at `src` to device address `dst`.
///
/// # Safety
/// `src..src+len` is pinned host memory and `dst..dst+len` device memory, both alive and
/// untouched by the host until the copy finished.
pub(crate) unsafe fn copy_h2d_async(stream: &Arc<CudaStream>, src: *const u8, len: usize, dst: u64) -> Result<()> {
    stream.context().bind_to_thread().map_err(cuda_err("binding the context"))?;
    // SAFETY: the caller's contract.
    unsafe {
        let src = std::slice::from_raw_parts(src, len);
        cudarc::driver::result::memcpy_htod_async(dst, src, stream.cu_stream())
    }
    .map_err(cuda_err("host-to-device copy"))
}

/// Queues a copy of `len` device bytes at `src` to pinned host memory at `dst`.
///
/// # Safety
/// As [`copy_h2d_async`], the other way round.
pub(crate) unsafe fn copy_d2h_async(stream: &Arc<CudaStream>, src: u64, dst: *mut u8, len: usize) -> Result<()> {
    stream.context().bind_to_thread().map_err(cuda_err("binding the context"))?;
    // SAFETY: the caller's contract.
    unsafe {
        let dst = std::slice::from_raw_parts_mut(dst, len);
        cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream())
    }
    .map_err(cuda_err("device-to-host copy"))
}

/// The raw device address of a slice.
pub(crate) fn slice_ptr(s: &CudaSlice<u8>) -> u64 {
    let (p, _sync) = s.device_ptr(s.stream());
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_follows_config_device_and_the_current_context() {
        assert_eq!(binding(Some(1), None, 2).unwrap(), 1);
        assert_eq!(binding(Some(1), Some(1), 2).unwrap(), 1);
        assert_eq!(binding(None, Some(0), 2).unwrap(), 0);
        let e = binding(Some(1), Some(0), 2).unwrap_err().to_string();
        assert!(e.contains("Config.device=1") && e.contains("device 0 is current"), "{e}");
        let e = binding(None, None, 2).unwrap_err().to_string();
        assert!(e.contains("no CUcontext is current"), "{e}");
        let e = binding(Some(4), None, 2).unwrap_err().to_string();
        assert!(e.contains("has 2 CUDA device(s)"), "{e}");
    }
}
