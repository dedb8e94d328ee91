//! The CUDA backend (cudarc, driver and NVRTC loaded at run time).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys};

use super::Arg;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, source_hash};
use crate::nvrtc;

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

type ImageKey = (u64, (i32, i32), (i32, i32));

/// Process-wide cache of compiled images keyed by (source hash, arch, NVRTC version).
fn image_cache() -> &'static Mutex<HashMap<ImageKey, Arc<Vec<u8>>>> {
    static C: OnceLock<Mutex<HashMap<ImageKey, Arc<Vec<u8>>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The on-disk cache folder: `DAMACY_KERNEL_CACHE_DIR`, else `$XDG_CACHE_HOME/damacy/kernels`,
/// else `~/.cache/damacy/kernels`.
#[must_use]
pub fn disk_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("DAMACY_KERNEL_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("damacy/kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/damacy/kernels"))
}

/// Compiles `kernel` for `sm_{major}{minor}`, through the memory and disk caches.
pub(crate) fn compiled_image(kernel: Kernel, arch: (i32, i32)) -> Result<Arc<Vec<u8>>> {
    let src = kernel.source();
    let ver = nvrtc::version()?;
    let key = (source_hash(&src), arch, ver);
    if let Some(img) = image_cache().lock().map_err(|_| Error::Cuda("kernel cache poisoned".into()))?.get(&key) {
        return Ok(img.clone());
    }
    let file = disk_cache_dir().map(|d| {
        d.join(format!("{}-{:016x}-sm_{}{}-nvrtc{}.{}.cubin", kernel.name(), key.0, arch.0, arch.1, ver.0, ver.1))
    });
    let image = match file.as_ref().and_then(|f| std::fs::read(f).ok()) {
        Some(bytes) if !bytes.is_empty() => bytes,
        _ => {
            let out = nvrtc::compile(kernel, &format!("sm_{}{}", arch.0, arch.1), &[])?;
            if let Some(f) = &file {
                // Best effort: a read-only cache folder only costs a recompile next time.
                if let Some(dir) = f.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let tmp = f.with_extension(format!("tmp{}", std::process::id()));
                if std::fs::write(&tmp, &out.image).is_ok() {
                    let _ = std::fs::rename(&tmp, f);
                }
            }
            out.image
        }
    };
    let img = Arc::new(image);
    image_cache().lock().map_err(|_| Error::Cuda("kernel cache poisoned".into()))?.insert(key, img.clone());
    Ok(img)
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
        let ctx = if let Some(n) = ordinal {
            if n >= count as usize {
                return Err(Error::InvalidArgument(format!("device={n} but this machine has {count} CUDA device(s)")));
            }
            CudaContext::new(n).map_err(cuda_err("retaining the primary context"))?
        } else {
            let Some(dev) = current_context_device()? else {
                return Err(Error::InvalidArgument(
                    "no CUcontext is current: set Config.device or make a context current on this thread".into(),
                ));
            };
            let mut cur: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: the driver is initialised; `cur` is valid for writes.
            unsafe { sys::cuCtxGetCurrent(&raw mut cur) }.result().map_err(cuda_err("cuCtxGetCurrent"))?;
            let ctx = CudaContext::new(dev).map_err(cuda_err("retaining the primary context"))?;
            if ctx.cu_ctx() != cur {
                return Err(Error::InvalidArgument(format!(
                    "the current CUcontext is not device {dev}'s primary context; damacy shares primary contexts only (set Config.device={dev})"
                )));
            }
            ctx
        };
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

    pub(crate) fn alloc(&self, len: usize) -> Result<CudaSlice<u8>> {
        self.stream
            .alloc_zeros::<u8>(len.max(1))
            .map_err(|e| Error::OutOfMemory(format!("cuMemAlloc of {len} bytes: {e}")))
    }

    pub(crate) fn upload(&self, src: &[u8], dst: &mut CudaSlice<u8>, offset: usize) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let mut view = dst.slice_mut(offset..offset + src.len());
        self.stream.memcpy_htod(src, &mut view).map_err(cuda_err("host-to-device copy"))
    }

    pub(crate) fn download(&self, src: &CudaSlice<u8>, offset: usize, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let view = src.slice(offset..offset + dst.len());
        self.stream.memcpy_dtoh(&view, dst).map_err(cuda_err("device-to-host copy"))?;
        self.synchronize()
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err("cuStreamSynchronize"))
    }

    pub(crate) fn function(&self, kernel: Kernel) -> Result<CudaFunction> {
        let mut map = self.functions.lock().map_err(|_| Error::Cuda("function table poisoned".into()))?;
        if let Some(f) = map.get(&kernel) {
            return Ok(f.clone());
        }
        let image = compiled_image(kernel, self.arch)?;
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
    pub(crate) unsafe fn launch(&self, kernel: Kernel, grid: (u32, u32), args: &[Arg]) -> Result<()> {
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
        let mut b = self.stream.launch_builder(&f);
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

/// The raw device address of a slice.
pub(crate) fn slice_ptr(s: &CudaSlice<u8>) -> u64 {
    let (p, _sync) = s.device_ptr(s.stream());
    p
}
