//! One device interface, two backends: CUDA (cudarc) and the host emulator.
//!
//! Everything above this module — stream tables, launches, status handling, assemble — is the
//! same code on both backends: buffers are typed handles with a device address, uploads and
//! downloads are explicit, and a launch names a [`Kernel`] with its grid and arguments.

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "emulate")]
mod emu;

#[cfg(feature = "emulate")]
pub use emu::ScheduleEntry;

use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::launch::{DevPtr, KernelArgs};

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
/// context, one default stream, one module cache).
///
/// Work is queued on [`Stream`]s: the device's default stream (every method of `Device` that
/// takes no stream uses it) and any number made by [`Device::new_stream`]. Streams are
/// non-blocking (they never wait for CUDA's legacy stream) and ordered among themselves only by
/// [`Event`]s. On the emulator a stream is a worker thread that runs its queue in order, so the
/// hand-offs between streams are exercised on a machine without a GPU too.
#[derive(Debug, Clone)]
pub struct Device {
    inner: std::sync::Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    default: Stream,
}

#[derive(Debug)]
enum Backend {
    #[cfg(feature = "emulate")]
    Emulated {
        seed: u64,
        streams: std::sync::Mutex<Vec<std::sync::Weak<emu::EmuStream>>>,
        log: std::sync::Arc<emu::ScheduleLog>,
        /// The shipped image each kernel would load on an `sm_90` device (`crate::images`).
        images: crate::images::ImageLog,
    },
    #[cfg(feature = "cuda")]
    Cuda(cuda::CudaBackend),
    /// Built with neither backend: no `Device` can be constructed.
    #[cfg(not(any(feature = "emulate", feature = "cuda")))]
    #[allow(dead_code)]
    Never(std::convert::Infallible),
}

/// A queue of device work: a non-blocking CUDA stream, or a worker thread on the emulator.
/// Work on one stream runs in order; work on two streams is ordered only by an [`Event`] that
/// one records and the other waits for. Cloning shares the queue.
#[derive(Debug, Clone)]
pub struct Stream {
    imp: StreamImpl,
}

#[derive(Debug, Clone)]
enum StreamImpl {
    #[cfg(feature = "emulate")]
    Emu(std::sync::Arc<emu::EmuStream>),
    #[cfg(feature = "cuda")]
    Cuda(std::sync::Arc<cudarc::driver::CudaStream>),
    #[cfg(not(any(feature = "emulate", feature = "cuda")))]
    #[allow(dead_code)]
    Never(std::convert::Infallible),
}

/// A point in a stream's queue: complete once everything queued before it finished.
#[derive(Debug)]
pub struct Event {
    imp: EventImpl,
}

#[derive(Debug)]
enum EventImpl {
    #[cfg(feature = "emulate")]
    Emu(std::sync::Arc<emu::Signal>),
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaEvent),
    #[cfg(not(any(feature = "emulate", feature = "cuda")))]
    #[allow(dead_code)]
    Never(std::convert::Infallible),
}

impl Stream {
    /// Records an event after the work queued so far. `timed` events can measure the time
    /// between two of them ([`Event::elapsed_since`]); untimed ones are cheaper.
    pub fn record(&self, timed: bool) -> Result<Event> {
        let imp = match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            StreamImpl::Emu(s) => EventImpl::Emu(s.record()?),
            #[cfg(feature = "cuda")]
            StreamImpl::Cuda(s) => EventImpl::Cuda(cuda::record(s, timed)?),
        };
        let _ = timed;
        Ok(Event { imp })
    }

    /// Makes work queued on this stream from now on wait until `event` is complete. Does not
    /// block the calling thread.
    pub fn wait(&self, event: &Event) -> Result<()> {
        match (&self.imp, &event.imp) {
            #[cfg(feature = "emulate")]
            (StreamImpl::Emu(s), EventImpl::Emu(e)) => s.wait(e.clone()),
            #[cfg(feature = "cuda")]
            (StreamImpl::Cuda(s), EventImpl::Cuda(e)) => s.wait(e).map_err(|e| Error::driver("cuStreamWaitEvent", e)),
            #[allow(unreachable_patterns)]
            _ => Err(Error::InvalidArgument("the event belongs to another backend".into())),
        }
    }

    /// Makes work queued on this stream from now on wait until a foreign `CUevent` (recorded by
    /// another library on a stream of the same device, e.g. `torch.cuda.Event.cuda_event`)
    /// is complete. Does not block the calling thread. The emulator has no foreign events: an
    /// [`Error::InvalidArgument`] there.
    ///
    /// # Safety
    /// `event` is a live `CUevent` of this stream's context, and stays alive until this call
    /// returns.
    pub unsafe fn wait_raw_event(&self, event: u64) -> Result<()> {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            StreamImpl::Emu(_) => {
                let _ = event;
                Err(Error::InvalidArgument("the emulator has no foreign CUDA events to wait for".into()))
            }
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded contract: `event` is live and of this stream's context.
            StreamImpl::Cuda(s) => unsafe { cuda::stream_wait_raw_event(s, event) },
        }
    }

    /// Blocks until all work queued on this stream finished; reports an error raised by that work.
    pub fn synchronize(&self) -> Result<()> {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            StreamImpl::Emu(s) => s.synchronize(),
            #[cfg(feature = "cuda")]
            StreamImpl::Cuda(s) => s.synchronize().map_err(|e| Error::driver("cuStreamSynchronize", e)),
        }
    }

    /// Queues a copy of `src[src_offset..+len]` (pinned) to `dst[dst_offset..+len]` on this
    /// stream and returns at once.
    ///
    /// Both buffers record the copy as a use: dropping either waits for it.
    ///
    /// # Safety
    /// Until an event recorded on this stream after this call is complete, the host must not
    /// write `src`'s range (dropping either buffer is safe: it waits for the copy).
    pub(crate) unsafe fn copy_to_device(
        &self,
        src: &PinnedBuffer,
        src_offset: usize,
        dst: &DeviceBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        check_range(src_offset, len, src.len, "host-to-device copy (source)")?;
        check_range(dst_offset, len, dst.len, "host-to-device copy (target)")?;
        if len == 0 {
            return Ok(());
        }
        let from = src.ptr as usize + src_offset;
        let to = dst.device_ptr() + dst_offset as u64;
        let copied: Result<()> = match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            // SAFETY: both ranges were checked; the caller keeps them alive and unwritten.
            StreamImpl::Emu(s) => unsafe { s.enqueue_copy(from as u64, to, len) },
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded contract; `from..from+len` is pinned memory we own.
            StreamImpl::Cuda(s) => unsafe { cuda::copy_h2d_async(s, from as *const u8, len, to) },
        };
        copied?;
        let event = Arc::new(self.record(false)?);
        src.uses.add(self.key(), &event);
        dst.uses.add(self.key(), &event);
        Ok(())
    }

    /// Queues a copy of `src[src_offset..+len]` to `dst[dst_offset..+len]` (pinned) on this
    /// stream and returns at once.
    ///
    /// Both buffers record the copy as a use: dropping either waits for it.
    ///
    /// # Safety
    /// Until an event recorded on this stream after this call is complete, the host must not read
    /// or write `dst`'s range.
    pub(crate) unsafe fn copy_to_host(
        &self,
        src: &DeviceBuffer,
        src_offset: usize,
        dst: &PinnedBuffer,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        check_range(src_offset, len, src.len, "device-to-host copy (source)")?;
        check_range(dst_offset, len, dst.len, "device-to-host copy (target)")?;
        if len == 0 {
            return Ok(());
        }
        let from = src.device_ptr() + src_offset as u64;
        let to = dst.ptr as usize + dst_offset;
        let copied: Result<()> = match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            // SAFETY: both ranges were checked; the caller keeps them alive and untouched.
            StreamImpl::Emu(s) => unsafe { s.enqueue_copy(from, to as u64, len) },
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded contract; `to..to+len` is pinned memory we own.
            StreamImpl::Cuda(s) => unsafe { cuda::copy_d2h_async(s, from, to as *mut u8, len) },
        };
        copied?;
        let event = Arc::new(self.record(false)?);
        src.uses.add(self.key(), &event);
        dst.uses.add(self.key(), &event);
        Ok(())
    }

    /// Labels the work queued on this stream from now on, for the emulator's schedule log
    /// ([`Device::schedule_log`]); a no-op on CUDA and while the log is off.
    pub fn set_label(&self, label: &str) {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            StreamImpl::Emu(s) => s.set_label(label),
            #[cfg(feature = "cuda")]
            StreamImpl::Cuda(_) => {
                let _ = label;
            }
        }
    }

    /// Identifies the queue (clones share it) for per-buffer use tracking.
    fn key(&self) -> usize {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            StreamImpl::Emu(s) => Arc::as_ptr(s) as usize,
            #[cfg(feature = "cuda")]
            StreamImpl::Cuda(s) => Arc::as_ptr(s) as usize,
        }
    }

    /// The `CUstream` handle for consumers that order their own work after damacy's (`DLPack`'s
    /// `stream` argument, `BatchInfo.ready_stream`); 0 on the emulator.
    #[must_use]
    pub fn raw_handle(&self) -> u64 {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            StreamImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            StreamImpl::Emu(_) => 0,
            #[cfg(feature = "cuda")]
            StreamImpl::Cuda(s) => s.cu_stream() as u64,
        }
    }
}

impl Event {
    /// Makes work queued from now on on a foreign `CUstream` (another library's stream of the
    /// same device; `DLPack`'s `stream` argument: 1 is the legacy default stream, 2 the
    /// per-thread default stream) wait until this event is complete, without blocking the
    /// host. On the emulator, whose device memory is host memory, this waits on the host.
    ///
    /// # Safety
    /// `stream` is a live `CUstream` of this event's context (or one of the special handles 0,
    /// 1, 2), and stays alive until this call returns.
    pub unsafe fn make_raw_stream_wait(&self, stream: u64) -> Result<()> {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            EventImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            EventImpl::Emu(e) => {
                let _ = stream;
                e.wait_done().map(|_| ())
            }
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded contract: `stream` is live and of this event's context.
            EventImpl::Cuda(e) => unsafe { cuda::raw_stream_wait_event(stream, e) },
        }
    }

    /// The `CUevent` handle, for consumers that order their own work after it; 0 on the
    /// emulator.
    #[must_use]
    pub fn raw_handle(&self) -> u64 {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            EventImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            EventImpl::Emu(_) => 0,
            #[cfg(feature = "cuda")]
            EventImpl::Cuda(e) => e.cu_event() as u64,
        }
    }

    /// Blocks until the event is complete; reports an error raised by the work before it.
    pub fn synchronize(&self) -> Result<()> {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            EventImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            EventImpl::Emu(e) => e.wait_done().map(|_| ()),
            #[cfg(feature = "cuda")]
            EventImpl::Cuda(e) => e.synchronize().map_err(|e| Error::driver("cuEventSynchronize", e)),
        }
    }

    /// Whether the event is complete, without blocking.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        match &self.imp {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            EventImpl::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            EventImpl::Emu(e) => e.is_done(),
            #[cfg(feature = "cuda")]
            EventImpl::Cuda(e) => e.is_complete(),
        }
    }

    /// Device time from `start` to this event, both recorded `timed`; waits for both. On the
    /// emulator, the wall time between the worker reaching them.
    pub fn elapsed_since(&self, start: &Event) -> Result<std::time::Duration> {
        match (&self.imp, &start.imp) {
            #[cfg(feature = "emulate")]
            (EventImpl::Emu(end), EventImpl::Emu(start)) => {
                let (b, a) = (end.wait_done()?, start.wait_done()?);
                Ok(b.saturating_duration_since(a))
            }
            #[cfg(feature = "cuda")]
            (EventImpl::Cuda(end), EventImpl::Cuda(start)) => {
                let ms = start.elapsed_ms(end).map_err(|e| Error::driver("cuEventElapsedTime", e))?;
                Ok(std::time::Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::InvalidArgument("events of two backends".into())),
        }
    }
}

impl Device {
    /// The host emulator. `seed = 0` runs fibers in a fixed order and stream work as soon as it
    /// is queued; any other seed shuffles the order of ready fibers after every barrier and warp
    /// collective, and delays each piece of stream work by a seeded random pause (seeded,
    /// reproducible), so a missing `__syncthreads`/`__syncwarp` or a missing event between two
    /// streams shows up as a wrong result.
    #[cfg(feature = "emulate")]
    #[must_use]
    pub fn emulated(seed: u64) -> Self {
        let log = std::sync::Arc::new(emu::ScheduleLog::default());
        let default = emu::EmuStream::new(seed, "default".into(), log.clone());
        let streams = std::sync::Mutex::new(vec![std::sync::Arc::downgrade(&default)]);
        Self {
            inner: std::sync::Arc::new(Inner {
                backend: Backend::Emulated { seed, streams, log, images: crate::images::ImageLog::default() },
                default: Stream { imp: StreamImpl::Emu(default) },
            }),
        }
    }

    /// A CUDA device. `ordinal = Some(n)` retains device n's primary context; `None` uses the
    /// context current on the calling thread (which must be a primary context).
    ///
    /// Checks that the driver library is present and a device exists before any other cudarc
    /// call; without them this returns [`Error::NoDevice`] with the reason (the caller then picks
    /// the CPU executor).
    #[cfg(feature = "cuda")]
    pub fn cuda(ordinal: Option<usize>) -> Result<Self> {
        let backend = cuda::CudaBackend::new(ordinal)?;
        let default = Stream { imp: StreamImpl::Cuda(backend.default_stream()) };
        Ok(Self { inner: std::sync::Arc::new(Inner { backend: Backend::Cuda(backend), default }) })
    }

    /// An event recorded on a foreign `CUstream` (another library's stream of this device, or
    /// one of the special handles 0, 1, 2): complete once the work queued there so far is. Lets
    /// a consumer's pending reads fence the reuse of damacy's memory without blocking the host.
    /// On the emulator (whose consumers read on the host) an event on the default stream.
    ///
    /// # Safety
    /// `stream` is a live `CUstream` of this device's primary context (or a special handle),
    /// and stays alive until this call returns.
    pub unsafe fn record_raw_stream(&self, stream: u64) -> Result<Event> {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => {
                let _ = stream;
                self.inner.default.record(false)
            }
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded contract: `stream` is live and of this context.
            Backend::Cuda(b) => Ok(Event { imp: EventImpl::Cuda(unsafe { b.record_raw_stream(stream) }?) }),
        }
    }

    /// Which backend this device runs on.
    #[must_use]
    pub fn kind(&self) -> DeviceKind {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => DeviceKind::Emulated,
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => DeviceKind::Cuda,
        }
    }

    /// The CUDA device ordinal (`DLPack`'s `device_id`); 0 on the emulator.
    #[must_use]
    pub fn ordinal(&self) -> usize {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => 0,
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => c.ordinal(),
        }
    }

    /// A human-readable description (device name and architecture, or "host emulator").
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { seed, .. } => format!("host emulator (schedule seed {seed})"),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => c.describe(),
        }
    }

    /// The CUDA device ordinal this device is bound to; `None` on the emulator.
    #[must_use]
    pub fn cuda_ordinal(&self) -> Option<usize> {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => None,
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => Some(c.ordinal()),
        }
    }

    /// The default stream: launches, uploads and downloads that name no stream go here.
    #[must_use]
    pub fn default_stream(&self) -> &Stream {
        &self.inner.default
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Stream> {
        self.new_stream_named("")
    }

    /// A new non-blocking stream, named `name` in the emulator's schedule log
    /// ([`Device::schedule_log`]; "stream N" when empty).
    pub fn new_stream_named(&self, name: &str) -> Result<Stream> {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { seed, streams, log, .. } => {
                // Each stream gets its own delay sequence, derived from the device's seed.
                let mut list = streams.lock().map_err(|_| Error::Emulator("stream list poisoned".into()))?;
                list.retain(|w| w.strong_count() > 0);
                let name = if name.is_empty() { format!("stream {}", list.len()) } else { name.to_owned() };
                let s = emu::EmuStream::new(
                    if *seed == 0 { 0 } else { seed ^ ((list.len() as u64 + 1) * 0x9e37) },
                    name,
                    log.clone(),
                );
                list.push(std::sync::Arc::downgrade(&s));
                Ok(Stream { imp: StreamImpl::Emu(s) })
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => {
                let _ = name;
                Ok(Stream { imp: StreamImpl::Cuda(c.new_stream()?) })
            }
        }
    }

    /// Turns the emulator's schedule log on or off: while on, every piece of work on this
    /// device's streams (copies, launches, event records and waits) is logged with its stream,
    /// label and start and end times. A no-op on CUDA (use Nsight Systems there).
    pub fn set_schedule_log(&self, on: bool) {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { log, .. } => log.set_enabled(on),
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => {
                let _ = on;
            }
        }
    }

    /// The schedule log's entries since the last call, in the order the work finished (see
    /// [`Device::set_schedule_log`]).
    #[cfg(feature = "emulate")]
    #[must_use]
    pub fn schedule_log(&self) -> Vec<ScheduleEntry> {
        match &self.inner.backend {
            Backend::Emulated { log, .. } => log.take(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => Vec::new(),
        }
    }

    /// Waits until the work on every stream of this device finished: the default stream and
    /// every live stream made by [`Device::new_stream`]. Other work in the CUDA context (other
    /// libraries' streams, e.g. `PyTorch`'s on the shared primary context) is not waited for.
    pub fn synchronize_all(&self) -> Result<()> {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { streams, .. } => {
                let live: Vec<_> = streams
                    .lock()
                    .map_err(|_| Error::Emulator("stream list poisoned".into()))?
                    .iter()
                    .filter_map(std::sync::Weak::upgrade)
                    .collect();
                live.iter().try_for_each(|s| s.synchronize())
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => c.synchronize_streams(),
        }
    }

    /// Allocates `len` zeroed bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer> {
        let mem = match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => Mem::Host(HostAlloc::zeroed(len)?),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => Mem::Cuda(c.alloc(len)?),
        };
        Ok(DeviceBuffer { mem, len, uses: Uses::default() })
    }

    /// Wraps `len` bytes of device memory that another library owns (a `CuPy` or torch tensor's
    /// storage; host memory on the emulator) as a [`DeviceBuffer`] the engine can write, for
    /// reads straight into a caller's array. Dropping the wrapper frees nothing; it waits for
    /// the work queued on the memory, since the owner may free or reuse it once the read
    /// returns.
    ///
    /// # Safety
    /// `ptr..ptr + len` is memory of this device (of its primary context on CUDA; a live host
    /// allocation on the emulator) that stays allocated, and that nothing else writes, until
    /// the returned buffer is dropped.
    #[must_use]
    pub unsafe fn borrow_memory(&self, ptr: u64, len: usize) -> DeviceBuffer {
        DeviceBuffer { mem: Mem::Borrowed(ptr), len, uses: Uses::default() }
    }

    /// Allocates `len` zeroed bytes of page-locked host memory (an aligned host allocation on
    /// the emulator): the source and target of asynchronous copies.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedBuffer> {
        let (ptr, mem) = match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { .. } => {
                let h = HostAlloc::zeroed(len)?;
                (h.ptr, PinnedMem::Host(h))
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => {
                let (slice, p) = c.alloc_pinned(len)?;
                (p, PinnedMem::Cuda(slice))
            }
        };
        Ok(PinnedBuffer { ptr, len, mem, uses: Uses::default() })
    }

    /// Copies `src` to `dst[offset..offset + src.len()]` on the default stream; returns when the
    /// copy (and the work queued before it) finished.
    pub fn upload(&self, src: &[u8], dst: &mut DeviceBuffer, offset: usize) -> Result<()> {
        self.upload_on(&self.inner.default, src, dst, offset)
    }

    /// [`Device::upload`] on `stream`.
    pub fn upload_on(&self, stream: &Stream, src: &[u8], dst: &mut DeviceBuffer, offset: usize) -> Result<()> {
        check_range(offset, src.len(), dst.len, "upload")?;
        if src.is_empty() {
            return Ok(());
        }
        let to = dst.device_ptr() + offset as u64;
        match (&stream.imp, &dst.mem) {
            #[cfg(feature = "emulate")]
            (StreamImpl::Emu(s), Mem::Host(_) | Mem::Borrowed(_)) => {
                let from = src.as_ptr() as usize;
                let len = src.len();
                // SAFETY: `src` outlives the copy (we synchronise before returning) and the
                // destination range was checked against the allocation above.
                unsafe { s.enqueue_copy(from as u64, to, len) }?;
                s.synchronize()
            }
            #[cfg(feature = "cuda")]
            (StreamImpl::Cuda(s), Mem::Cuda(_) | Mem::Borrowed(_)) => cuda::upload_sync(s, src, to),
            #[allow(unreachable_patterns)]
            _ => Err(Error::InvalidArgument("buffer belongs to another backend".into())),
        }
    }

    /// Copies `src[offset..offset + dst.len()]` to `dst` on the default stream, after all earlier
    /// work on it finished; returns when the bytes are in `dst`.
    pub fn download(&self, src: &DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.download_on(&self.inner.default, src, offset, dst)
    }

    /// [`Device::download`] on `stream`.
    pub fn download_on(&self, stream: &Stream, src: &DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        check_range(offset, dst.len(), src.len, "download")?;
        if dst.is_empty() {
            return Ok(());
        }
        let from = src.device_ptr() + offset as u64;
        match (&stream.imp, &src.mem) {
            #[cfg(feature = "emulate")]
            (StreamImpl::Emu(s), Mem::Host(_) | Mem::Borrowed(_)) => {
                let to = dst.as_mut_ptr() as usize;
                let len = dst.len();
                // SAFETY: `dst` outlives the copy (we synchronise before returning); the source
                // range was checked above.
                unsafe { s.enqueue_copy(from, to as u64, len) }?;
                s.synchronize()
            }
            #[cfg(feature = "cuda")]
            (StreamImpl::Cuda(s), Mem::Cuda(_) | Mem::Borrowed(_)) => cuda::download_sync(s, from, dst),
            #[allow(unreachable_patterns)]
            _ => Err(Error::InvalidArgument("buffer belongs to another backend".into())),
        }
    }

    /// Launches `args`' kernel on `stream`, on a `grid.0 × grid.1` grid of
    /// `block_threads()`-thread blocks, and returns without waiting for it. `uses` are the
    /// buffers the pointer arguments address: each records the launch as a use, and dropping it
    /// waits for the launch.
    ///
    /// # Safety
    /// Every pointer argument must be the address of a live buffer of this device (or inside
    /// one) listed in `uses`, and the sizes passed alongside must describe those buffers:
    /// kernels trust them as their bounds. The host must not write those buffers until the
    /// launch finished (synchronise the stream or an event recorded after it).
    pub(crate) unsafe fn launch_on<A: KernelArgs>(
        &self,
        stream: &Stream,
        grid: (u32, u32),
        args: A,
        uses: &[&DeviceBuffer],
    ) -> Result<()> {
        if grid.0 == 0 || grid.1 == 0 {
            return Ok(());
        }
        match (&self.inner.backend, &stream.imp) {
            #[cfg(feature = "emulate")]
            (Backend::Emulated { seed, images, .. }, StreamImpl::Emu(s)) => {
                look_up_emulated(images, A::KERNEL);
                let seed = *seed;
                // SAFETY: forwarded contract of this function: the buffers outlive the launch
                // (their drop waits for the event recorded below).
                s.enqueue_as(
                    "launch",
                    Box::new(move || unsafe { emu::launch(&args, grid, seed) }.map_err(|e| e.to_string())),
                )
            }
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded contract of this function.
            (Backend::Cuda(c), StreamImpl::Cuda(s)) => unsafe { c.launch(s, grid, &args) },
            #[allow(unreachable_patterns)]
            _ => Err(Error::InvalidArgument("the stream belongs to another backend".into())),
        }?;
        let event = Arc::new(stream.record(false)?);
        for b in uses {
            b.uses.add(stream.key(), &event);
        }
        Ok(())
    }

    /// Waits until all work issued on the default stream finished.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.default.synchronize()
    }

    /// Loads every kernel now — from the shipped images, else the kernel cache or an NVRTC
    /// compile (see [`Device::kernel_images`]) — so that no launch pays for it. [`Decoder::new`](crate::Decoder::new) and
    /// [`Assembler::new`](crate::Assembler::new) prepare the kernels they launch; call this to
    /// prepare all of them up front. On the emulator it only looks up the images.
    pub fn prepare_kernels(&self) -> Result<()> {
        self.prepare(&Kernel::ALL)
    }

    /// [`Device::prepare_kernels`] under its former name.
    #[deprecated(note = "renamed to `prepare_kernels`")]
    pub fn warm_up(&self) -> Result<()> {
        self.prepare_kernels()
    }

    /// Loads `kernels` now (on the emulator: looks their images up).
    #[cfg_attr(not(feature = "cuda"), allow(clippy::unnecessary_wraps))]
    pub(crate) fn prepare(&self, kernels: &[Kernel]) -> Result<()> {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { images, .. } => {
                for &k in kernels {
                    look_up_emulated(images, k);
                }
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => kernels.iter().try_for_each(|&k| c.function(k).map(drop)),
        }
    }

    /// Which kernels this device has loaded so far and where each image came from: a shipped
    /// image (cubin or PTX compiled when the crate was built), the kernel cache, or an NVRTC
    /// compile now, and why any did not come from a shipped image. The emulator runs host code
    /// but looks each kernel up the same way, as an `sm_90` device would
    /// ([`crate::images::EMULATED_ARCH`]).
    ///
    /// ```
    /// # #[cfg(feature = "emulate")] {
    /// let device = damacy_kernels::Device::emulated(0);
    /// device.prepare_kernels()?;
    /// let images = device.kernel_images();
    /// assert_eq!(images.loaded.len(), damacy_kernels::Kernel::ALL.len());
    /// assert_eq!(images.compiled(), 0); // the emulator never calls NVRTC
    /// println!("{images}"); // kernels: 8 from shipped images (sm_90), 0 from the kernel cache, …
    /// # }
    /// # Ok::<(), damacy_kernels::Error>(())
    /// ```
    #[must_use]
    pub fn kernel_images(&self) -> crate::images::KernelImages {
        match &self.inner.backend {
            #[cfg(not(any(feature = "emulate", feature = "cuda")))]
            Backend::Never(n) => match *n {},
            #[cfg(feature = "emulate")]
            Backend::Emulated { images, .. } => images.snapshot(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(c) => c.kernel_images(),
        }
    }
}

/// The emulator's lookup of `kernel`'s shipped image, once per device.
#[cfg(feature = "emulate")]
fn look_up_emulated(images: &crate::images::ImageLog, kernel: Kernel) {
    if !images.has(kernel) {
        let (origin, why) = crate::images::emulated_lookup(kernel);
        if let Some(why) = why {
            images.fall_back(why);
        }
        images.record(kernel, origin);
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

/// The queued device work that uses a buffer: the last event recorded after a use, one per
/// stream (a later event on a stream marks everything before it too). Dropping a buffer orders
/// its free after these events only — never a device- or context-wide synchronize, since other
/// libraries (`PyTorch`) share the primary context.
#[derive(Debug, Default)]
struct Uses(Mutex<Vec<(usize, Arc<Event>)>>);

impl Uses {
    /// Records `event` (on the stream with key `stream`) as the buffer's latest use there.
    fn add(&self, stream: usize, event: &Arc<Event>) {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|(s, e)| *s != stream && !e.is_complete());
        list.push((stream, event.clone()));
    }

    /// The events of the uses that may still be in flight.
    fn take(&mut self) -> Vec<Arc<Event>> {
        std::mem::take(self.0.get_mut().unwrap_or_else(PoisonError::into_inner)).into_iter().map(|(_, e)| e).collect()
    }

    /// Blocks until every recorded use finished.
    fn wait_all(&mut self) {
        for e in self.take() {
            // An error here belongs to the work that failed and was (or will be) reported to
            // whoever waits on it; the memory is freed either way.
            let _ = e.synchronize();
        }
    }
}

/// A device allocation (host memory on the emulator), freed on drop. The buffer tracks the
/// device work queued on it (one event per stream that used it) and its free is ordered after
/// that work: on CUDA the stream-ordered free waits for those events on the device without
/// blocking the host; on the emulator the drop waits for them.
#[derive(Debug)]
pub struct DeviceBuffer {
    mem: Mem,
    len: usize,
    uses: Uses,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match &self.mem {
            // The owner of borrowed memory may free or reuse it as soon as the wrapper is gone.
            Mem::Host(_) | Mem::Borrowed(_) => self.uses.wait_all(),
            #[cfg(feature = "cuda")]
            Mem::Cuda(slice) => {
                for e in self.uses.take() {
                    #[allow(irrefutable_let_patterns)]
                    let ordered =
                        if let EventImpl::Cuda(ev) = &e.imp { cuda::free_after(slice, ev).is_ok() } else { false };
                    if !ordered {
                        // Could not order the free on the device: wait on the host instead.
                        let _ = e.synchronize();
                    }
                }
            }
        }
    }
}

/// Page-locked host memory (cudarc's `PinnedHostSlice`; an aligned host allocation on the
/// emulator): the source and target of asynchronous copies. Dropping waits for the copies
/// queued on it (and nothing else) before the memory is freed.
#[derive(Debug)]
pub struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    /// Owns the allocation `ptr` points into; freed when dropped, after `drop` waited for the
    /// buffer's uses.
    #[allow(dead_code)]
    mem: PinnedMem,
    uses: Uses,
}

/// Owns the allocation; freed on drop (the fields are never read, only dropped).
#[derive(Debug)]
#[allow(dead_code)]
enum PinnedMem {
    #[cfg_attr(not(feature = "emulate"), allow(dead_code))]
    Host(HostAlloc),
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::PinnedHostSlice<u8>),
}

// SAFETY: PinnedBuffer owns its allocation exclusively, like Box<[u8]>; the device side only
// touches it through copies whose ordering the owner manages with events.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared references only read the length or the address.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
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

    /// `len` bytes at `offset`, for the host to read.
    ///
    /// # Safety
    /// No device copy into this range may be in flight (an event recorded after the last one
    /// must be complete); copies into other ranges may.
    pub(crate) unsafe fn range(&self, offset: usize, len: usize) -> Result<&[u8]> {
        check_range(offset, len, self.len, "host read of pinned memory")?;
        // SAFETY: the range lies inside the live allocation (checked above; zeroed at
        // allocation, so initialised); no concurrent device write to it per the contract.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) })
    }

    /// The bytes, for the host to write.
    ///
    /// # Safety
    /// No device copy from or into this buffer may be in flight.
    pub(crate) unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`; `&mut self` makes the host access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // The host frees this memory right after: every queued copy must have finished.
        self.uses.wait_all();
    }
}

#[derive(Debug)]
enum Mem {
    #[cfg_attr(not(feature = "emulate"), allow(dead_code))]
    Host(HostAlloc),
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaSlice<u8>),
    /// Memory another library owns, at this address ([`Device::borrow_memory`]).
    Borrowed(u64),
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
            Mem::Borrowed(p) => *p,
        }
    }

    /// The device address of the `T` at byte `offset`, for a kernel argument; an error past the
    /// end or at an offset not aligned for `T`.
    pub(crate) fn ptr<T>(&self, offset: usize) -> Result<DevPtr<T>> {
        if offset > self.len {
            return Err(Error::InvalidArgument(format!("offset {offset} past the end of a {}-byte buffer", self.len)));
        }
        let addr = self.device_ptr() + offset as u64;
        if !addr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(Error::InvalidArgument(format!(
                "offset {offset} is not aligned for a {}-byte aligned table",
                std::mem::align_of::<T>()
            )));
        }
        Ok(DevPtr::new(addr))
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

#[cfg(all(test, feature = "emulate"))]
mod tests {
    use super::*;

    #[allow(clippy::match_wildcard_for_single_variants)]
    fn emu(stream: &Stream) -> &std::sync::Arc<emu::EmuStream> {
        match &stream.imp {
            StreamImpl::Emu(s) => s,
            #[allow(unreachable_patterns)]
            _ => unreachable!("an emulated device has emulated streams"),
        }
    }

    /// Emulated streams run concurrently: a reader that does not wait for the writer's event
    /// sees the bytes from before the copy, one that waits sees the copy. This is what makes a
    /// missing event visible in emulated tests.
    #[test]
    fn streams_are_asynchronous_and_events_order_them() {
        let device = Device::emulated(0);
        let copy = device.new_stream().unwrap();
        let mut pinned = device.alloc_pinned(4096).unwrap();
        // SAFETY: nothing is in flight yet.
        unsafe { pinned.as_mut_slice() }.fill(7);
        let dst = device.alloc(4096).unwrap();
        // Hold the copy stream back, then queue the upload behind the pause.
        emu(&copy)
            .enqueue(Box::new(|| {
                std::thread::sleep(std::time::Duration::from_millis(50));
                Ok(())
            }))
            .unwrap();
        // SAFETY: both buffers outlive the copy (dropping synchronises) and the host does not
        // write `pinned` again.
        unsafe { copy.copy_to_device(&pinned, 0, &dst, 0, 4096).unwrap() };
        let uploaded = copy.record(true).unwrap();
        let mut early = vec![1u8; 4096];
        device.download(&dst, 0, &mut early).unwrap();
        assert!(early.iter().all(|&b| b == 0), "the default stream did not wait, so it saw the zeroed buffer");
        assert!(!uploaded.is_complete());
        device.default_stream().wait(&uploaded).unwrap();
        let mut late = vec![0u8; 4096];
        device.download(&dst, 0, &mut late).unwrap();
        assert!(late.iter().all(|&b| b == 7));
        assert!(uploaded.is_complete());
        let later = copy.record(true).unwrap();
        assert!(later.elapsed_since(&uploaded).is_ok());
    }

    #[test]
    fn a_failed_piece_of_stream_work_is_reported_by_later_events() {
        let device = Device::emulated(0);
        let s = device.new_stream().unwrap();
        emu(&s).enqueue(Box::new(|| Err("planted failure".into()))).unwrap();
        let e = s.synchronize().unwrap_err();
        assert!(e.to_string().contains("planted failure"), "{e}");
        // Sticky, as on CUDA: the stream keeps reporting it.
        assert!(s.record(false).unwrap().synchronize().is_err());
        // A stream that waits on a failed stream's event fails too.
        let other = device.new_stream().unwrap();
        other.wait(&s.record(false).unwrap()).unwrap();
        assert!(other.synchronize().is_err());
    }

    /// Dropping a buffer waits for the work that uses it and for nothing else: not for other
    /// work on the device (a context-wide synchronize would wait for `PyTorch`'s streams too).
    #[test]
    fn dropping_a_buffer_waits_for_its_own_uses_only() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let device = Device::emulated(0);
        let busy = device.new_stream().unwrap();
        let reached = Arc::new(AtomicBool::new(false));
        let flag = reached.clone();
        emu(&busy)
            .enqueue(Box::new(move || {
                std::thread::sleep(std::time::Duration::from_millis(400));
                flag.store(true, Ordering::SeqCst);
                Ok(())
            }))
            .unwrap();
        // Buffers no queued work uses are freed at once, while `busy` still sleeps.
        drop(device.alloc(4096).unwrap());
        drop(device.alloc_pinned(4096).unwrap());
        let idle = device.alloc(4096).unwrap();
        let mut host = [0u8; 16];
        device.download(&idle, 0, &mut host).unwrap();
        drop(idle);
        assert!(!reached.load(Ordering::SeqCst), "a drop waited for unrelated work");
        // A buffer that a copy queued behind the pause uses waits for that copy.
        let pinned = device.alloc_pinned(4096).unwrap();
        let dst = device.alloc(4096).unwrap();
        // SAFETY: both buffers wait for the copy when dropped; the host does not write `pinned`.
        unsafe { busy.copy_to_device(&pinned, 0, &dst, 0, 4096).unwrap() };
        drop(pinned);
        assert!(reached.load(Ordering::SeqCst), "the pinned source was freed before its copy ran");
        drop(dst);
    }

    #[test]
    fn copies_out_of_bounds_are_rejected_before_queueing() {
        let device = Device::emulated(0);
        let pinned = device.alloc_pinned(16).unwrap();
        let dst = device.alloc(8).unwrap();
        let s = device.default_stream();
        // SAFETY: the call fails its range check before queueing anything.
        let e = unsafe { s.copy_to_device(&pinned, 0, &dst, 0, 16) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // SAFETY: as above.
        let e = unsafe { s.copy_to_host(&dst, 4, &pinned, 0, 8) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
}
