//! One device interface, two backends: CUDA (cudarc) and the host emulator.
//!
//! Everything above this module — stream tables, launches, status handling, assemble — is the
//! same code on both backends: buffers are typed handles with a device address, uploads and
//! downloads are explicit, and a launch names a [`Kernel`] with its grid and arguments.
//!
//! A backend is three traits: [`Backend`] (the device: streams, allocations, launches, kernel
//! images), [`StreamBackend`] (a queue: copies, events) and [`EventBackend`]; its memory is a
//! [`Memory`]. [`Device`], [`Stream`], [`Event`], [`DeviceBuffer`] and [`PinnedBuffer`] hold
//! them as trait objects and add what both backends share: range checks and the per-buffer use
//! tracking that orders every free after the work that uses the memory.

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "emulate")]
mod emu;

#[cfg(feature = "emulate")]
pub use emu::ScheduleEntry;

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::images::KernelImages;
use crate::kernel::Kernel;
use crate::launch::{DevPtr, DynKernelArgs, KernelArgs};

/// Which backend a [`Device`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceKind {
    /// The host emulator (feature `emulate`).
    Emulated,
    /// A CUDA device (feature `cuda`).
    Cuda,
}

/// A device backend: what [`Device`] forwards to. Implemented by the emulator (`emu.rs`) and
/// CUDA (`cuda.rs`).
pub(crate) trait Backend: Send + Sync + std::fmt::Debug {
    fn kind(&self) -> DeviceKind;
    /// The CUDA device ordinal; `None` on the emulator.
    fn cuda_ordinal(&self) -> Option<usize>;
    fn describe(&self) -> String;
    /// Streaming multiprocessors.
    fn sm_count(&self) -> u32;
    /// A new stream, named `name` in the emulator's schedule log ("stream N" when empty).
    fn new_stream(&self, name: &str) -> Result<Stream>;
    /// An event recorded on a foreign `CUstream`; `default` is the device's default stream.
    ///
    /// # Safety
    /// As [`Device::record_raw_stream`].
    unsafe fn record_raw_stream(&self, stream: u64, default: &Stream) -> Result<Event>;
    fn set_schedule_log(&self, on: bool);
    #[cfg(feature = "emulate")]
    fn schedule_log(&self) -> Vec<ScheduleEntry> {
        Vec::new()
    }
    fn synchronize_all(&self) -> Result<()>;
    fn alloc(&self, len: usize) -> Result<Box<dyn Memory>>;
    /// `len` zeroed bytes of page-locked memory: their address and the allocation's owner.
    fn alloc_pinned(&self, len: usize) -> Result<(*mut u8, Box<dyn PinnedMemory>)>;
    /// Queues `args`' kernel on `stream`.
    ///
    /// # Safety
    /// As [`Device::launch_on`].
    unsafe fn launch(&self, stream: &Stream, grid: (u32, u32), args: &dyn DynKernelArgs) -> Result<()>;
    fn prepare(&self, kernels: &[Kernel]) -> Result<()>;
    fn kernel_images(&self) -> KernelImages;
}

/// A backend's stream or event as `&dyn Any`, so that a backend can tell its own from
/// another's ([`Stream::downcast`], [`Event::downcast`]).
pub(crate) trait AsAny: Any {
    #[cfg(any(feature = "emulate", feature = "cuda"))]
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    #[cfg(any(feature = "emulate", feature = "cuda"))]
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A backend's queue of device work (see [`Stream`]).
pub(crate) trait StreamBackend: Send + Sync + std::fmt::Debug + AsAny {
    fn kind(&self) -> DeviceKind;
    fn record(&self, timed: bool) -> Result<Event>;
    /// An error when `event` is another backend's.
    fn wait(&self, event: &Event) -> Result<()>;
    /// # Safety
    /// As [`Stream::wait_raw_event`].
    unsafe fn wait_raw_event(&self, event: u64) -> Result<()>;
    fn synchronize(&self) -> Result<()>;
    /// Queues a copy of `len` bytes from pinned host memory at `from` to device address `to`.
    ///
    /// # Safety
    /// Both ranges are live and untouched by the host until the copy finished.
    unsafe fn copy_to_device(&self, from: *const u8, len: usize, to: u64) -> Result<()>;
    /// Queues a copy of `len` bytes from device address `from` to pinned host memory at `to`.
    ///
    /// # Safety
    /// As [`StreamBackend::copy_to_device`].
    unsafe fn copy_to_host(&self, from: u64, to: *mut u8, len: usize) -> Result<()>;
    /// Copies `src` to device address `to`; returns when the copy finished.
    fn upload(&self, src: &[u8], to: u64) -> Result<()>;
    /// Copies device address `from` to `dst`; returns when the bytes are in `dst`.
    fn download(&self, from: u64, dst: &mut [u8]) -> Result<()>;
    fn set_label(&self, label: &str);
    fn raw_handle(&self) -> u64;
}

/// A backend's event (see [`Event`]).
pub(crate) trait EventBackend: Send + Sync + std::fmt::Debug + AsAny {
    /// # Safety
    /// As [`Event::make_raw_stream_wait`].
    unsafe fn make_raw_stream_wait(&self, stream: u64) -> Result<()>;
    fn raw_handle(&self) -> u64;
    fn synchronize(&self) -> Result<()>;
    fn is_complete(&self) -> bool;
    /// An error when `start` is another backend's.
    fn elapsed_since(&self, start: &Event) -> Result<std::time::Duration>;
}

/// The memory behind a [`DeviceBuffer`]; freed when dropped.
pub(crate) trait Memory: Send + Sync + std::fmt::Debug {
    /// The device address of byte 0.
    fn ptr(&self) -> u64;
    /// The backend the memory belongs to; `None` for memory it does not own (borrowed).
    fn kind(&self) -> Option<DeviceKind>;
    /// Orders the free (when this is dropped) after `uses`: by default the host waits for them.
    fn free_after(&self, uses: Vec<Arc<Event>>) {
        wait_all(uses);
    }
}

/// Owns a [`PinnedBuffer`]'s allocation; freed when dropped.
pub(crate) trait PinnedMemory: Send + Sync + std::fmt::Debug {}

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
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    backend: Box<dyn Backend>,
    default: Stream,
}

/// A queue of device work: a non-blocking CUDA stream, or a worker thread on the emulator.
/// Work on one stream runs in order; work on two streams is ordered only by an [`Event`] that
/// one records and the other waits for. Cloning shares the queue.
#[derive(Debug, Clone)]
pub struct Stream {
    imp: Arc<dyn StreamBackend>,
}

/// A point in a stream's queue: complete once everything queued before it finished.
#[derive(Debug)]
pub struct Event {
    imp: Box<dyn EventBackend>,
}

impl Stream {
    /// Records an event after the work queued so far. `timed` events can measure the time
    /// between two of them ([`Event::elapsed_since`]); untimed ones are cheaper.
    pub fn record(&self, timed: bool) -> Result<Event> {
        self.imp.record(timed)
    }

    /// Makes work queued on this stream from now on wait until `event` is complete. Does not
    /// block the calling thread.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.imp.wait(event)
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
        // SAFETY: forwarded contract.
        unsafe { self.imp.wait_raw_event(event) }
    }

    /// Blocks until all work queued on this stream finished; reports an error raised by that work.
    pub fn synchronize(&self) -> Result<()> {
        self.imp.synchronize()
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
        // SAFETY: both ranges were checked; the caller keeps them alive and unwritten.
        unsafe { self.imp.copy_to_device(src.ptr.add(src_offset), len, dst.device_ptr() + dst_offset as u64) }?;
        self.record_use([&src.uses, &dst.uses])
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
        // SAFETY: both ranges were checked; the caller keeps them alive and untouched.
        unsafe { self.imp.copy_to_host(src.device_ptr() + src_offset as u64, dst.ptr.add(dst_offset), len) }?;
        self.record_use([&src.uses, &dst.uses])
    }

    /// Records an event after the work queued so far and makes it each of `uses`' latest use
    /// on this stream.
    fn record_use<'a>(&self, uses: impl IntoIterator<Item = &'a Uses>) -> Result<()> {
        let event = Arc::new(self.record(false)?);
        for u in uses {
            u.add(self.key(), &event);
        }
        Ok(())
    }

    /// Labels the work queued on this stream from now on, for the emulator's schedule log
    /// ([`Device::schedule_log`]); a no-op on CUDA and while the log is off.
    pub fn set_label(&self, label: &str) {
        self.imp.set_label(label);
    }

    /// The backend's stream, when it is a `T`.
    #[cfg(any(feature = "emulate", feature = "cuda"))]
    fn downcast<T: 'static>(&self) -> Option<&T> {
        // `*`: the stream itself, not the `Arc` (which is `Any` too).
        (*self.imp).as_any().downcast_ref()
    }

    /// Identifies the queue (clones share it) for per-buffer use tracking.
    fn key(&self) -> usize {
        Arc::as_ptr(&self.imp).cast::<()>() as usize
    }

    /// The `CUstream` handle for consumers that order their own work after damacy's (`DLPack`'s
    /// `stream` argument, `BatchInfo.ready_stream`); 0 on the emulator.
    #[must_use]
    pub fn raw_handle(&self) -> u64 {
        self.imp.raw_handle()
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
        // SAFETY: forwarded contract.
        unsafe { self.imp.make_raw_stream_wait(stream) }
    }

    /// The `CUevent` handle, for consumers that order their own work after it; 0 on the
    /// emulator.
    #[must_use]
    pub fn raw_handle(&self) -> u64 {
        self.imp.raw_handle()
    }

    /// Blocks until the event is complete; reports an error raised by the work before it.
    pub fn synchronize(&self) -> Result<()> {
        self.imp.synchronize()
    }

    /// Whether the event is complete, without blocking.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.imp.is_complete()
    }

    /// Device time from `start` to this event, both recorded `timed`; waits for both. On the
    /// emulator, the wall time between the worker reaching them.
    pub fn elapsed_since(&self, start: &Event) -> Result<std::time::Duration> {
        self.imp.elapsed_since(start)
    }

    /// The backend's event, when it is a `T`.
    #[cfg(any(feature = "emulate", feature = "cuda"))]
    fn downcast<T: 'static>(&self) -> Option<&T> {
        // `*`: the event itself, not the box (which is `Any` too).
        (*self.imp).as_any().downcast_ref()
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
        let (backend, default) = emu::EmuBackend::new(seed);
        Self { inner: Arc::new(Inner { backend: Box::new(backend), default }) }
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
        let default = backend.default_stream();
        Ok(Self { inner: Arc::new(Inner { backend: Box::new(backend), default }) })
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
        // SAFETY: forwarded contract.
        unsafe { self.inner.backend.record_raw_stream(stream, &self.inner.default) }
    }

    /// Which backend this device runs on.
    #[must_use]
    pub fn kind(&self) -> DeviceKind {
        self.inner.backend.kind()
    }

    /// The CUDA device ordinal (`DLPack`'s `device_id`); 0 on the emulator.
    #[must_use]
    pub fn ordinal(&self) -> usize {
        self.cuda_ordinal().unwrap_or(0)
    }

    /// A human-readable description (device name and architecture, or "host emulator").
    #[must_use]
    pub fn describe(&self) -> String {
        self.inner.backend.describe()
    }

    /// The device's streaming multiprocessors: what a launch needs to fill it (the zstd kernel's
    /// launch shape is chosen from it). The emulator reports the GPU its performance model
    /// predicts by default, an H200's 132.
    #[must_use]
    pub fn sm_count(&self) -> u32 {
        self.inner.backend.sm_count()
    }

    /// The CUDA device ordinal this device is bound to; `None` on the emulator.
    #[must_use]
    pub fn cuda_ordinal(&self) -> Option<usize> {
        self.inner.backend.cuda_ordinal()
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
        self.inner.backend.new_stream(name)
    }

    /// Turns the emulator's schedule log on or off: while on, every piece of work on this
    /// device's streams (copies, launches, event records and waits) is logged with its stream,
    /// label and start and end times. A no-op on CUDA (use Nsight Systems there).
    pub fn set_schedule_log(&self, on: bool) {
        self.inner.backend.set_schedule_log(on);
    }

    /// The schedule log's entries since the last call, in the order the work finished (see
    /// [`Device::set_schedule_log`]).
    #[cfg(feature = "emulate")]
    #[must_use]
    pub fn schedule_log(&self) -> Vec<ScheduleEntry> {
        self.inner.backend.schedule_log()
    }

    /// Waits until the work on every stream of this device finished: the default stream and
    /// every live stream made by [`Device::new_stream`]. Other work in the CUDA context (other
    /// libraries' streams, e.g. `PyTorch`'s on the shared primary context) is not waited for.
    pub fn synchronize_all(&self) -> Result<()> {
        self.inner.backend.synchronize_all()
    }

    /// Allocates `len` zeroed bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer> {
        let mem = self.inner.backend.alloc(len)?;
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
        DeviceBuffer { mem: Box::new(Borrowed(ptr)), len, uses: Uses::default() }
    }

    /// Allocates `len` zeroed bytes of page-locked host memory (an aligned host allocation on
    /// the emulator): the source and target of asynchronous copies.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedBuffer> {
        let (ptr, mem) = self.inner.backend.alloc_pinned(len)?;
        Ok(PinnedBuffer { ptr, len, _mem: mem, uses: Uses::default() })
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
        check_backend(stream, dst)?;
        stream.imp.upload(src, dst.device_ptr() + offset as u64)
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
        check_backend(stream, src)?;
        stream.imp.download(src.device_ptr() + offset as u64, dst)
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
        // SAFETY: forwarded contract of this function: the buffers outlive the launch (their
        // drop waits for the event recorded below).
        unsafe { self.inner.backend.launch(stream, grid, &args) }?;
        stream.record_use(uses.iter().map(|b| &b.uses))
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
    pub(crate) fn prepare(&self, kernels: &[Kernel]) -> Result<()> {
        self.inner.backend.prepare(kernels)
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
    pub fn kernel_images(&self) -> KernelImages {
        self.inner.backend.kernel_images()
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

/// An error when `buffer` is memory of another backend than `stream`'s.
fn check_backend(stream: &Stream, buffer: &DeviceBuffer) -> Result<()> {
    match buffer.mem.kind() {
        Some(kind) if kind != stream.imp.kind() => {
            Err(Error::InvalidArgument("buffer belongs to another backend".into()))
        }
        _ => Ok(()),
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
}

/// Blocks until every one of `events` is complete.
fn wait_all(events: Vec<Arc<Event>>) {
    for e in events {
        // An error here belongs to the work that failed and was (or will be) reported to
        // whoever waits on it; the memory is freed either way.
        let _ = e.synchronize();
    }
}

/// A device allocation (host memory on the emulator), freed on drop. The buffer tracks the
/// device work queued on it (one event per stream that used it) and its free is ordered after
/// that work: on CUDA the stream-ordered free waits for those events on the device without
/// blocking the host; on the emulator the drop waits for them.
#[derive(Debug)]
pub struct DeviceBuffer {
    mem: Box<dyn Memory>,
    len: usize,
    uses: Uses,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.mem.free_after(self.uses.take());
    }
}

/// Memory another library owns, at this address ([`Device::borrow_memory`]): the owner may
/// free or reuse it as soon as the wrapper is gone, so the drop waits for its uses.
#[derive(Debug)]
struct Borrowed(u64);

impl Memory for Borrowed {
    fn ptr(&self) -> u64 {
        self.0
    }

    fn kind(&self) -> Option<DeviceKind> {
        None
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
    _mem: Box<dyn PinnedMemory>,
    uses: Uses,
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
        wait_all(self.uses.take());
    }
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
        self.mem.ptr()
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

#[cfg(all(test, feature = "emulate"))]
mod tests {
    use super::*;

    fn emu(stream: &Stream) -> &emu::EmuStream {
        stream.downcast().expect("an emulated device has emulated streams")
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
