//! The CUDA backend (cudarc, driver and NVRTC loaded at run time).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig, PinnedHostSlice,
    sys,
};

use super::{Backend, DeviceKind, Event, EventBackend, Memory, PinnedMemory, Stream, StreamBackend};
use crate::error::{Error, Result};
use crate::images::{self, ImageLog, ImageOrigin, KernelImages};
use crate::kernel::Kernel;
use crate::launch::DynKernelArgs;

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

/// How many CUDA devices the driver lists ([`Error::NoDevice`] when no driver is usable).
pub fn device_count() -> Result<usize> {
    if let Some(r) = unavailable_reason() {
        return Err(Error::NoDevice(r));
    }
    CudaContext::device_count().map(|n| usize::try_from(n).unwrap_or(0)).map_err(cuda_err("cuDeviceGetCount"))
}

/// The ordinal of the device whose context is current on this thread, `None` when no context
/// is current. For the `Config.device` / current-context consistency check (ARCHITECTURE §5).
pub fn current_context_device() -> Result<Option<usize>> {
    if let Some(r) = unavailable_reason() {
        return Err(Error::NoDevice(r));
    }
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver is loaded and initialised (checked above); `ctx` is valid for writes.
    unsafe { sys::cuCtxGetCurrent(&raw mut ctx) }.result().map_err(cuda_err("cuCtxGetCurrent"))?;
    if ctx.is_null() {
        return Ok(None);
    }
    let mut dev: sys::CUdevice = 0;
    // SAFETY: a context is current; `dev` is valid for writes.
    unsafe { sys::cuCtxGetDevice(&raw mut dev) }.result().map_err(cuda_err("cuCtxGetDevice"))?;
    let n = CudaContext::device_count().map_err(cuda_err("cuDeviceGetCount"))?;
    for i in 0..n {
        if cudarc::driver::result::device::get(i).map_err(cuda_err("cuDeviceGet"))? == dev {
            return Ok(Some(i as usize));
        }
    }
    Err(Error::NoDevice(format!(
        "the current CUcontext's device ({dev}) is not among the {n} devices the driver lists"
    )))
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
pub(crate) struct CudaBackend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Every stream made by [`CudaBackend::new_stream`] that is still alive, for
    /// `Device::synchronize_all` (which must not synchronise the whole context: other libraries,
    /// `PyTorch` among them, share the primary context).
    streams: Mutex<Vec<Weak<CudaStream>>>,
    arch: (i32, i32),
    /// The driver's `cuDriverGetVersion`.
    driver: i32,
    /// Whether the shipped images serve this device (see [`shipped_serve`]); when not, the
    /// reason is the image log's fallback and every kernel comes from the kernel cache.
    shipped: bool,
    images: ImageLog,
    functions: Mutex<HashMap<Kernel, CudaFunction>>,
}

/// Whether the images shipped in this build serve every kernel on a device of `arch` under a
/// driver reporting `driver`, or why not: a build without images, a driver older than the NVRTC
/// that compiled them, an architecture none serves.
pub(crate) fn shipped_serve(arch: (i32, i32), driver: i32) -> std::result::Result<(), String> {
    let Some(built) = images::shipped_nvrtc() else {
        return Err(images::shipped_note().to_owned());
    };
    crate::nvrtc::driver_accepts(driver, built)
        .map_err(|e| format!("the shipped images cannot be loaded by this driver: {e}"))?;
    Kernel::ALL.iter().try_for_each(|&k| images::select(k, arch).map(drop))
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("ordinal", &self.ctx.ordinal())
            .field("arch", &self.arch)
            .finish_non_exhaustive()
    }
}

/// Maps a failed driver call to [`Error::Cuda`], keeping its `CUresult`.
fn cuda_err(call: &'static str) -> impl FnOnce(DriverError) -> Error {
    move |e| Error::driver(call, e)
}

/// Like [`cuda_err`] for allocations: the driver's out-of-memory code is
/// [`Error::OutOfMemory`], any other code stays a driver error.
fn alloc_err(call: &'static str, len: usize) -> impl FnOnce(DriverError) -> Error {
    move |e| {
        if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory(format!("{call} of {len} bytes: the device has no more memory"))
        } else {
            Error::driver(call, e)
        }
    }
}

impl CudaBackend {
    pub(crate) fn new(ordinal: Option<usize>) -> Result<Self> {
        if let Some(r) = unavailable_reason() {
            return Err(Error::NoDevice(r));
        }
        let count = CudaContext::device_count().map_err(cuda_err("cuDeviceGetCount"))?;
        let mut driver: std::ffi::c_int = 0;
        // SAFETY: the driver is initialised (device_count succeeded); `driver` is valid for writes.
        unsafe { sys::cuDriverGetVersion(&raw mut driver) }.result().map_err(cuda_err("cuDriverGetVersion"))?;
        let current = current_context_device()?;
        let dev = binding(ordinal, current, count as usize)?;
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the driver is initialised; `cur` is valid for writes.
        unsafe { sys::cuCtxGetCurrent(&raw mut cur) }.result().map_err(cuda_err("cuCtxGetCurrent"))?;
        let ctx = CudaContext::new(dev).map_err(cuda_err("cuDevicePrimaryCtxRetain"))?;
        if !cur.is_null() && ctx.cu_ctx() != cur {
            return Err(Error::InvalidArgument(format!(
                "the current CUcontext is not device {dev}'s primary context; damacy shares primary contexts only"
            )));
        }
        let arch = ctx.compute_capability().map_err(cuda_err("cuDeviceGetAttribute(COMPUTE_CAPABILITY)"))?;
        // SAFETY: buffers are addressed through raw device pointers in kernel arguments, which
        // cudarc cannot see; damacy tracks every buffer's uses itself (one event per stream
        // that used it, see `device::Uses`) and orders the free after them.
        unsafe { ctx.disable_event_tracking() };
        // Kernels come from the shipped images when they serve this device: no NVRTC needed.
        // Otherwise NVRTC compiles them at run time, and a driver older than NVRTC's CUDA major
        // version cannot load what it builds, which is better said now than at the first launch.
        let shipped = shipped_serve(arch, driver);
        if let Err(why) = &shipped {
            nvrtc_usable(driver).map_err(|e| not_shipped(e, why))?;
        }
        let stream = ctx.new_stream().map_err(cuda_err("cuStreamCreate"))?;
        Ok(Self {
            ctx,
            stream,
            streams: Mutex::new(Vec::new()),
            arch,
            driver,
            shipped: shipped.is_ok(),
            images: ImageLog::with_fallback(shipped.err()),
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// The default stream.
    pub(crate) fn default_stream(&self) -> Stream {
        Stream { imp: self.stream.clone() }
    }

    /// The kernel's function, loaded on first use: from its shipped image when those serve this
    /// device, else (or when the driver refuses the image) through the kernel cache, which
    /// compiles it with NVRTC unless the disk layer has it.
    pub(crate) fn function(&self, kernel: Kernel) -> Result<CudaFunction> {
        let mut map = self.functions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = map.get(&kernel) {
            return Ok(f.clone());
        }
        let shipped = if self.shipped { self.load_shipped(kernel) } else { None };
        let (f, origin) = if let Some(loaded) = shipped {
            loaded
        } else {
            nvrtc_usable(self.driver)
                .map_err(|e| not_shipped(e, self.images.snapshot().fallback.as_deref().unwrap_or("none")))?;
            let (image, origin) = crate::cache::compiled_image(kernel, self.arch)?;
            (self.load(image.as_ref().clone(), kernel)?, origin)
        };
        self.images.record(kernel, origin);
        map.insert(kernel, f.clone());
        Ok(f)
    }

    /// The kernel loaded from its shipped image; `None` (with the reason in the image log) when
    /// no image serves it or the driver refuses the one that does.
    fn load_shipped(&self, kernel: Kernel) -> Option<(CudaFunction, ImageOrigin)> {
        let image = images::select(kernel, self.arch).and_then(|i| images::check_shipped(i, kernel).map(|()| i));
        let image = match image {
            Ok(i) => i,
            Err(why) => {
                self.images.fall_back(why);
                return None;
            }
        };
        match self.load(image.image().to_vec(), kernel) {
            Ok(f) => Some((f, ImageOrigin::Shipped(image.target()))),
            Err(e) => {
                self.images.fall_back(format!(
                    "the driver refused the shipped {} image of {}: {e}",
                    image.target(),
                    image.file()
                ));
                None
            }
        }
    }

    /// `cuModuleLoadData` of a cubin or NUL-terminated PTX, and the kernel's function in it.
    fn load(&self, image: Vec<u8>, kernel: Kernel) -> Result<CudaFunction> {
        let module =
            self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image)).map_err(cuda_err("cuModuleLoadData"))?;
        module.load_function(kernel.name()).map_err(cuda_err("cuModuleGetFunction"))
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn cuda_ordinal(&self) -> Option<usize> {
        Some(self.ctx.ordinal())
    }

    fn sm_count(&self) -> u32 {
        // an attribute every CUDA device has; 1 (a device too small for teams) if the query fails
        self.ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .map_or(1, |n| n.max(1))
    }

    fn describe(&self) -> String {
        let name = self.ctx.name().unwrap_or_else(|_| "unknown".into());
        format!("CUDA device {} ({name}, sm_{}{})", self.ctx.ordinal(), self.arch.0, self.arch.1)
    }

    fn new_stream(&self, _name: &str) -> Result<Stream> {
        let s = self.ctx.new_stream().map_err(cuda_err("cuStreamCreate"))?;
        let mut list = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&s));
        Ok(Stream { imp: s })
    }

    /// An untimed event recorded on a foreign stream of this context.
    unsafe fn record_raw_stream(&self, stream: u64, _default: &Stream) -> Result<Event> {
        let event =
            self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)).map_err(cuda_err("cuEventCreate"))?;
        self.ctx.bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: `event` was just created in this context; `stream` is live per the contract.
        unsafe { cudarc::driver::result::event::record(event.cu_event(), stream as usize as sys::CUstream) }
            .map_err(cuda_err("cuEventRecord"))?;
        Ok(Event { imp: Box::new(event) })
    }

    /// A no-op: use Nsight Systems on CUDA.
    fn set_schedule_log(&self, _on: bool) {}

    /// Waits for the work on this backend's streams (the default one and every live one made
    /// by [`Backend::new_stream`]); work of other libraries in the context is not waited for.
    fn synchronize_all(&self) -> Result<()> {
        let live: Vec<Arc<CudaStream>> =
            self.streams.lock().unwrap_or_else(PoisonError::into_inner).iter().filter_map(Weak::upgrade).collect();
        self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))?;
        live.iter().try_for_each(|s| s.synchronize().map_err(cuda_err("cuStreamSynchronize")))
    }

    fn alloc(&self, len: usize) -> Result<Box<dyn Memory>> {
        let slice = self.stream.alloc_zeros::<u8>(len.max(1)).map_err(alloc_err("cuMemAllocAsync", len))?;
        // The allocation and its zeroing are ordered on the default stream only (stream-ordered
        // allocation): finish them before any other stream (the decoder's copy stream) writes
        // the buffer. Allocation happens at construction, never per batch, so this costs once.
        self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))?;
        Ok(Box::new(slice))
    }

    /// `len` zeroed bytes of page-locked host memory (cudarc's `PinnedHostSlice`, freed on
    /// drop), with its address.
    fn alloc_pinned(&self, len: usize) -> Result<(*mut u8, Box<dyn PinnedMemory>)> {
        let len = len.max(1);
        if isize::try_from(len).is_err() {
            return Err(Error::InvalidArgument(format!("a pinned allocation of {len} bytes")));
        }
        // SAFETY: the bytes are zeroed below before anyone reads them. Flags 0: plain cached
        // page-locked memory (not write-combined: the host reads the read-back buffers).
        let mut slice =
            unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len, 0) }.map_err(alloc_err("cuMemHostAlloc", len))?;
        let ptr = slice.as_mut_ptr().map_err(cuda_err("cuEventSynchronize"))?;
        // SAFETY: `ptr` points to `len` writable bytes that nothing else uses yet.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok((ptr, Box::new(slice)))
    }

    unsafe fn launch(&self, stream: &Stream, grid: (u32, u32), args: &dyn DynKernelArgs) -> Result<()> {
        let Some(stream) = stream.downcast::<CudaStream>() else {
            return Err(Error::InvalidArgument("the stream belongs to another backend".into()));
        };
        let kernel = args.kernel();
        let f = self.function(kernel)?;
        let mut b = stream.launch_builder(&f);
        args.push_args(&mut b);
        let cfg = LaunchConfig {
            grid_dim: (grid.0, grid.1, 1),
            block_dim: (kernel.block_threads(), 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the argument list is the kernel's own (checked against its `.cu` signature at
        // compile time) and the pointers address live buffers per this function's contract.
        unsafe { b.launch(cfg) }.map(|_| ()).map_err(cuda_err("cuLaunchKernel"))
    }

    fn prepare(&self, kernels: &[Kernel]) -> Result<()> {
        kernels.iter().try_for_each(|&k| self.function(k).map(drop))
    }

    /// Where this device's kernels came from so far.
    fn kernel_images(&self) -> KernelImages {
        self.images.snapshot()
    }
}

/// Whether NVRTC can be loaded and the driver loads what it builds ([`Error::NoDevice`] with
/// what to install when not).
fn nvrtc_usable(driver: i32) -> Result<()> {
    crate::nvrtc::driver_accepts(driver, crate::nvrtc::version()?).map_err(|e| {
        let found =
            crate::nvrtc::loaded_libraries().map_or_else(|_| "none".to_owned(), crate::nvrtc::Loaded::describe_found);
        Error::NoDevice(format!("{e} (NVRTC libraries found: {found})"))
    })
}

/// `e` (NVRTC cannot be used) with the reason the shipped images could not be used instead.
fn not_shipped(e: Error, why: &str) -> Error {
    match e {
        Error::NoDevice(m) => Error::NoDevice(format!("{m}; the shipped kernel images do not serve it: {why}")),
        e => e,
    }
}

impl StreamBackend for CudaStream {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn record(&self, timed: bool) -> Result<Event> {
        let flags =
            if timed { sys::CUevent_flags::CU_EVENT_DEFAULT } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING };
        Ok(Event { imp: Box::new(self.record_event(Some(flags)).map_err(cuda_err("cuEventRecord"))?) })
    }

    fn wait(&self, event: &Event) -> Result<()> {
        let Some(event) = event.downcast::<CudaEvent>() else {
            return Err(Error::InvalidArgument("the event belongs to another backend".into()));
        };
        CudaStream::wait(self, event).map_err(cuda_err("cuStreamWaitEvent"))
    }

    /// Makes this stream wait for a foreign `CUevent` (a raw handle from another library).
    unsafe fn wait_raw_event(&self, event: u64) -> Result<()> {
        self.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: the stream is alive (we hold it); `event` is live per the contract.
        unsafe {
            cudarc::driver::result::stream::wait_event(
                self.cu_stream(),
                event as usize as sys::CUevent,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(cuda_err("cuStreamWaitEvent"))
    }

    fn synchronize(&self) -> Result<()> {
        CudaStream::synchronize(self).map_err(cuda_err("cuStreamSynchronize"))
    }

    unsafe fn copy_to_device(&self, from: *const u8, len: usize, to: u64) -> Result<()> {
        self.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: the caller's contract: `from..from+len` is pinned memory, `to..to+len` device
        // memory, both alive and untouched by the host until the copy finished.
        unsafe {
            let src = std::slice::from_raw_parts(from, len);
            cudarc::driver::result::memcpy_htod_async(to, src, self.cu_stream())
        }
        .map_err(cuda_err("cuMemcpyHtoDAsync"))
    }

    unsafe fn copy_to_host(&self, from: u64, to: *mut u8, len: usize) -> Result<()> {
        self.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: the caller's contract, as `copy_to_device` the other way round.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(to, len);
            cudarc::driver::result::memcpy_dtoh_async(dst, from, self.cu_stream())
        }
        .map_err(cuda_err("cuMemcpyDtoHAsync"))
    }

    /// Copies pageable `src` to device address `to` and waits for it.
    fn upload(&self, src: &[u8], to: u64) -> Result<()> {
        self.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: `to..to+src.len()` lies inside a live allocation (checked by the caller); we
        // synchronise before `src` can go away.
        unsafe { cudarc::driver::result::memcpy_htod_async(to, src, self.cu_stream()) }
            .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
        StreamBackend::synchronize(self)
    }

    /// Copies device address `from` to pageable `dst` and waits for it.
    fn download(&self, from: u64, dst: &mut [u8]) -> Result<()> {
        self.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: `from..from+dst.len()` lies inside a live allocation (checked by the caller);
        // we synchronise before `dst` can be read or go away.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, from, self.cu_stream()) }
            .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
        StreamBackend::synchronize(self)
    }

    /// A no-op: the schedule log is the emulator's.
    fn set_label(&self, _label: &str) {}

    fn raw_handle(&self) -> u64 {
        self.cu_stream() as u64
    }
}

impl EventBackend for CudaEvent {
    /// Makes a foreign `CUstream` (a raw handle from another library) wait for this event.
    unsafe fn make_raw_stream_wait(&self, stream: u64) -> Result<()> {
        self.context().bind_to_thread().map_err(cuda_err("cuCtxSetCurrent"))?;
        // SAFETY: the event is alive (we hold it); `stream` is live per the contract.
        unsafe {
            cudarc::driver::result::stream::wait_event(
                stream as usize as sys::CUstream,
                self.cu_event(),
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(cuda_err("cuStreamWaitEvent"))
    }

    fn raw_handle(&self) -> u64 {
        self.cu_event() as u64
    }

    fn synchronize(&self) -> Result<()> {
        CudaEvent::synchronize(self).map_err(cuda_err("cuEventSynchronize"))
    }

    fn is_complete(&self) -> bool {
        CudaEvent::is_complete(self)
    }

    fn elapsed_since(&self, start: &Event) -> Result<std::time::Duration> {
        let Some(start) = start.downcast::<CudaEvent>() else {
            return Err(Error::InvalidArgument("events of two backends".into()));
        };
        let ms = start.elapsed_ms(self).map_err(cuda_err("cuEventElapsedTime"))?;
        Ok(std::time::Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

/// Device memory: its free is stream-ordered (queued on the slice's own stream when dropped).
impl Memory for CudaSlice<u8> {
    fn ptr(&self) -> u64 {
        let (p, _sync) = self.device_ptr(self.stream());
        p
    }

    fn kind(&self) -> Option<DeviceKind> {
        Some(DeviceKind::Cuda)
    }

    /// Makes the slice's own stream (the one its stream-ordered free is queued on) wait for
    /// each use, so the free runs after that work without blocking the host; the host waits
    /// for a use it could not order that way.
    fn free_after(&self, uses: Vec<Arc<Event>>) {
        for e in uses {
            let ordered = e.downcast::<CudaEvent>().is_some_and(|ev| self.stream().wait(ev).is_ok());
            if !ordered {
                // Could not order the free on the device: wait on the host instead.
                let _ = e.synchronize();
            }
        }
    }
}

impl PinnedMemory for PinnedHostSlice<u8> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_images_serve_sm80_to_sm12x_under_a_new_enough_driver() {
        if images::shipped().is_empty() {
            let e = shipped_serve((9, 0), 13_000).unwrap_err();
            assert!(e.contains("ships no kernel images"), "{e}");
            return;
        }
        let built = images::shipped_nvrtc().unwrap();
        let driver = built.0 * 1000;
        for arch in [(8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)] {
            assert_eq!(shipped_serve(arch, driver), Ok(()), "sm_{}{}", arch.0, arch.1);
        }
        // Turing: no image; NVRTC compiles at run time, and the reason names the architecture.
        let e = shipped_serve((7, 5), driver).unwrap_err();
        assert!(e.contains("sm_75"), "{e}");
        // A driver of an older CUDA major version than the NVRTC that built the images.
        let e = shipped_serve((9, 0), (built.0 - 1) * 1000 + 80).unwrap_err();
        assert!(e.contains("cannot be loaded by this driver"), "{e}");
        let e = not_shipped(Error::NoDevice("libnvrtc not found".into()), "why").to_string();
        assert!(e.contains("libnvrtc not found; the shipped kernel images do not serve it: why"), "{e}");
    }

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
