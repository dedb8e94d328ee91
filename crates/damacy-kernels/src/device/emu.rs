//! The host emulator backend: emulated streams (worker threads) and events. The kernels' C-ABI
//! launchers, compiled by the build script, are declared and called by the typed launchers in
//! `crate::launch`.

use std::sync::{Arc, Mutex, Weak};

use super::{Backend, DeviceKind, Event, EventBackend, Memory, PinnedMemory, Stream, StreamBackend};
use crate::error::{Error, Result};
use crate::images::{ImageLog, KernelImages};
use crate::kernel::Kernel;
use crate::launch::DynKernelArgs;

const _: () = assert!(std::mem::size_of::<usize>() == 8, "the emulator needs a 64-bit host");

/// Runs `args`' kernel synchronously on the calling thread.
///
/// # Safety
/// As [`super::Device::launch_on`]: pointer arguments address live buffers described by the sizes.
unsafe fn launch(args: &dyn DynKernelArgs, grid: (u32, u32), seed: u64) -> Result<()> {
    let kernel = args.kernel();
    // SAFETY: forwarded contract.
    let rc = unsafe { args.run_emulated(grid, kernel.block_threads(), seed) };
    if rc == 0 { Ok(()) } else { Err(Error::Emulator(format!("launch of {} rejected (code {rc})", kernel.name()))) }
}

/// The host emulator as a device backend: emulated streams, host memory, kernels run on the
/// stream workers.
#[derive(Debug)]
pub(super) struct EmuBackend {
    seed: u64,
    streams: Mutex<Vec<Weak<EmuStream>>>,
    log: Arc<ScheduleLog>,
    /// The shipped image each kernel would load on an `sm_90` device (`crate::images`).
    images: ImageLog,
}

impl EmuBackend {
    /// The backend and its default stream.
    pub(super) fn new(seed: u64) -> (Self, Stream) {
        let log = Arc::new(ScheduleLog::default());
        let default = EmuStream::new(seed, "default".into(), log.clone());
        let streams = Mutex::new(vec![Arc::downgrade(&default)]);
        (Self { seed, streams, log, images: ImageLog::default() }, Stream { imp: default })
    }

    /// The emulator's lookup of `kernel`'s shipped image, once per device.
    fn look_up(&self, kernel: Kernel) {
        if !self.images.has(kernel) {
            let (origin, why) = crate::images::emulated_lookup(kernel);
            if let Some(why) = why {
                self.images.fall_back(why);
            }
            self.images.record(kernel, origin);
        }
    }
}

impl Backend for EmuBackend {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Emulated
    }

    fn cuda_ordinal(&self) -> Option<usize> {
        None
    }

    fn sm_count(&self) -> u32 {
        crate::model::Gpu::h200().sms
    }

    fn describe(&self) -> String {
        format!("host emulator (schedule seed {})", self.seed)
    }

    fn new_stream(&self, name: &str) -> Result<Stream> {
        // Each stream gets its own delay sequence, derived from the device's seed.
        let mut list = self.streams.lock().map_err(|_| Error::Emulator("stream list poisoned".into()))?;
        list.retain(|w| w.strong_count() > 0);
        let name = if name.is_empty() { format!("stream {}", list.len()) } else { name.to_owned() };
        let seed = self.seed;
        let s = EmuStream::new(
            if seed == 0 { 0 } else { seed ^ ((list.len() as u64 + 1) * 0x9e37) },
            name,
            self.log.clone(),
        );
        list.push(Arc::downgrade(&s));
        Ok(Stream { imp: s })
    }

    unsafe fn record_raw_stream(&self, _stream: u64, default: &Stream) -> Result<Event> {
        default.record(false)
    }

    fn set_schedule_log(&self, on: bool) {
        self.log.set_enabled(on);
    }

    fn schedule_log(&self) -> Vec<ScheduleEntry> {
        self.log.take()
    }

    fn synchronize_all(&self) -> Result<()> {
        let live: Vec<_> = self
            .streams
            .lock()
            .map_err(|_| Error::Emulator("stream list poisoned".into()))?
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        live.iter().try_for_each(|s| s.synchronize())
    }

    fn alloc(&self, len: usize) -> Result<Box<dyn Memory>> {
        Ok(Box::new(HostAlloc::zeroed(len)?))
    }

    fn alloc_pinned(&self, len: usize) -> Result<(*mut u8, Box<dyn PinnedMemory>)> {
        let h = HostAlloc::zeroed(len)?;
        Ok((h.ptr, Box::new(h)))
    }

    unsafe fn launch(&self, stream: &Stream, grid: (u32, u32), args: &dyn DynKernelArgs) -> Result<()> {
        let Some(s) = stream.downcast::<EmuStream>() else {
            return Err(Error::InvalidArgument("the stream belongs to another backend".into()));
        };
        self.look_up(args.kernel());
        let (seed, args) = (self.seed, args.boxed());
        // SAFETY: forwarded contract of this function: the buffers outlive the launch (their
        // drop waits for the event recorded after it).
        s.enqueue_as("launch", Box::new(move || unsafe { launch(&*args, grid, seed) }.map_err(|e| e.to_string())))
    }

    fn prepare(&self, kernels: &[Kernel]) -> Result<()> {
        for &k in kernels {
            self.look_up(k);
        }
        Ok(())
    }

    fn kernel_images(&self) -> KernelImages {
        self.images.snapshot()
    }
}

unsafe extern "C" {
    /// Tells `ThreadSanitizer` (in `DAMACY_EMU_TSAN` builds; a no-op otherwise) about a hand-off
    /// between OS threads through Rust synchronisation it cannot see: `release` 1 on the
    /// sending side, 0 on the receiving side, same address.
    fn dmc_emu_handoff(addr: *const std::ffi::c_void, release: i32);
}

/// A hand-off keyed by the address `key` (only compared, never dereferenced).
fn handoff(key: usize, release: bool) {
    // SAFETY: the C side uses the address as a key only.
    unsafe { dmc_emu_handoff(key as *const std::ffi::c_void, i32::from(release)) }
}

/// A piece of queued stream work; an `Err` is the stream's (sticky) error.
pub(super) type Op = Box<dyn FnOnce() -> std::result::Result<(), String> + Send>;

/// One piece of emulated stream work as it ran: which stream, what it was, the label the
/// stream carried when it was queued ([`super::Stream::set_label`]) and when it started and
/// ended on the stream's worker.
#[derive(Clone, Debug)]
pub struct ScheduleEntry {
    /// The stream's name ([`super::Device::new_stream_named`]).
    pub stream: String,
    /// `copy`, `launch`, `record`, `wait` or `work`.
    pub kind: &'static str,
    /// The stream's label when the work was queued ("" when none was set).
    pub label: String,
    /// When the worker started it.
    pub start: std::time::Instant,
    /// When it returned.
    pub end: std::time::Instant,
}

impl ScheduleEntry {
    /// Whether this entry's run and `other`'s overlapped in time.
    #[must_use]
    pub fn overlaps(&self, other: &ScheduleEntry) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// The schedule log of one emulated device: every piece of stream work, timed, while enabled.
#[derive(Debug, Default)]
struct ScheduleLog {
    enabled: std::sync::atomic::AtomicBool,
    entries: std::sync::Mutex<Vec<ScheduleEntry>>,
}

impl ScheduleLog {
    fn set_enabled(&self, on: bool) {
        self.enabled.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    fn enabled(&self) -> bool {
        self.enabled.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The entries so far (and clears them).
    fn take(&self) -> Vec<ScheduleEntry> {
        self.entries.lock().map(|mut e| std::mem::take(&mut *e)).unwrap_or_default()
    }

    fn push(&self, entry: ScheduleEntry) {
        if let Ok(mut e) = self.entries.lock() {
            e.push(entry);
        }
    }
}

/// An emulated stream: a worker thread that runs its queue in order.
///
/// With a non-zero seed the worker pauses a seeded random 0–255 µs before each piece of work,
/// so work on two streams interleaves differently from run to run of different seeds, and a
/// hand-off that lacks an event shows up as wrong bytes.
#[derive(Debug)]
pub(super) struct EmuStream {
    tx: std::sync::Mutex<Option<std::sync::mpsc::Sender<Op>>>,
    worker: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The first error any queued work returned; every later event reports it too.
    error: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// The process that started the worker (a child forked later has no worker thread).
    pid: u32,
    /// The stream's name and its current label, for the schedule log.
    name: String,
    label: std::sync::Mutex<String>,
    log: std::sync::Arc<ScheduleLog>,
}

/// An emulated event: set by the worker when it reaches it, with the time and the stream's
/// error at that point.
#[derive(Debug, Default)]
struct Signal {
    state: std::sync::Mutex<Option<(std::time::Instant, Option<String>)>>,
    cv: std::sync::Condvar,
}

impl Signal {
    fn set(&self, error: Option<String>) {
        handoff(std::ptr::from_ref(self) as usize, true);
        if let Ok(mut s) = self.state.lock() {
            *s = Some((std::time::Instant::now(), error));
        }
        self.cv.notify_all();
    }

    /// Blocks until the worker reached the event; the time it did, or the stream's error.
    fn wait_done(&self) -> Result<std::time::Instant> {
        let poisoned = || Error::Emulator("event state poisoned".into());
        let mut s = self.state.lock().map_err(|_| poisoned())?;
        loop {
            if let Some((at, err)) = &*s {
                return match err {
                    None => {
                        handoff(std::ptr::from_ref(self) as usize, false);
                        Ok(*at)
                    }
                    Some(e) => Err(Error::Emulator(format!("earlier stream work failed: {e}"))),
                };
            }
            s = self.cv.wait(s).map_err(|_| poisoned())?;
        }
    }

    fn is_done(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.is_some())
    }
}

impl EmuStream {
    fn new(seed: u64, name: String, log: std::sync::Arc<ScheduleLog>) -> std::sync::Arc<Self> {
        let (tx, rx) = std::sync::mpsc::channel::<Op>();
        let error = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
        let err = error.clone();
        // the address the queue's hand-offs are keyed by (the error slot lives as long as both ends)
        let key = std::sync::Arc::as_ptr(&error) as usize;
        let worker = std::thread::Builder::new()
            .name("damacy-emu-stream".into())
            .spawn(move || {
                let mut rng = seed;
                while let Ok(op) = rx.recv() {
                    handoff(key, false);
                    if seed != 0 {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        std::thread::sleep(std::time::Duration::from_micros(rng & 0xff));
                    }
                    if let Err(e) = op()
                        && let Ok(mut slot) = err.lock()
                        && slot.is_none()
                    {
                        *slot = Some(e);
                    }
                }
            })
            .ok();
        std::sync::Arc::new(Self {
            tx: std::sync::Mutex::new(worker.as_ref().map(|_| tx)),
            worker: std::sync::Mutex::new(worker),
            error,
            pid: std::process::id(),
            name,
            label: std::sync::Mutex::new(String::new()),
            log,
        })
    }

    #[cfg(test)]
    pub(super) fn enqueue(&self, op: Op) -> Result<()> {
        self.enqueue_as("work", op)
    }

    /// Queues `op`; while the device's schedule log is enabled, its run is logged as `kind`.
    fn enqueue_as(&self, kind: &'static str, op: Op) -> Result<()> {
        let op: Op = if self.log.enabled() {
            let (log, stream) = (self.log.clone(), self.name.clone());
            let label = self.label.lock().map(|l| l.clone()).unwrap_or_default();
            Box::new(move || {
                let start = std::time::Instant::now();
                let r = op();
                log.push(ScheduleEntry { stream, kind, label, start, end: std::time::Instant::now() });
                r
            })
        } else {
            op
        };
        let tx = self.tx.lock().map_err(|_| Error::Emulator("stream queue poisoned".into()))?;
        match tx.as_ref() {
            Some(tx) => {
                handoff(std::sync::Arc::as_ptr(&self.error) as usize, true);
                tx.send(op).map_err(|_| Error::Emulator("the stream's worker thread is gone".into()))
            }
            None => Err(Error::Emulator("could not start the stream's worker thread".into())),
        }
    }

    /// Queues a copy of `len` bytes from host address `from` to host address `to`.
    ///
    /// # Safety
    /// Both ranges stay valid, and untouched by anyone else, until the copy ran.
    unsafe fn enqueue_copy(&self, from: u64, to: u64, len: usize) -> Result<()> {
        // SAFETY: the caller's contract.
        self.enqueue_as(
            "copy",
            Box::new(move || unsafe {
                std::ptr::copy_nonoverlapping(from as usize as *const u8, to as usize as *mut u8, len);
                Ok(())
            }),
        )
    }

    /// Queues a signal, set when the worker reaches it.
    fn signal(&self) -> Result<std::sync::Arc<Signal>> {
        let signal = std::sync::Arc::new(Signal::default());
        let (s, err) = (signal.clone(), self.error.clone());
        self.enqueue_as(
            "record",
            Box::new(move || {
                s.set(err.lock().ok().and_then(|e| e.clone()));
                Ok(())
            }),
        )?;
        Ok(signal)
    }
}

impl StreamBackend for EmuStream {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Emulated
    }

    fn record(&self, _timed: bool) -> Result<Event> {
        Ok(Event { imp: Box::new(EmuEvent(self.signal()?)) })
    }

    fn wait(&self, event: &Event) -> Result<()> {
        let Some(EmuEvent(signal)) = event.downcast::<EmuEvent>() else {
            return Err(Error::InvalidArgument("the event belongs to another backend".into()));
        };
        let signal = signal.clone();
        self.enqueue_as("wait", Box::new(move || signal.wait_done().map(|_| ()).map_err(|e| e.to_string())))
    }

    unsafe fn wait_raw_event(&self, _event: u64) -> Result<()> {
        Err(Error::InvalidArgument("the emulator has no foreign CUDA events to wait for".into()))
    }

    fn synchronize(&self) -> Result<()> {
        self.signal()?.wait_done().map(|_| ())
    }

    unsafe fn copy_to_device(&self, from: *const u8, len: usize, to: u64) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.enqueue_copy(from as u64, to, len) }
    }

    unsafe fn copy_to_host(&self, from: u64, to: *mut u8, len: usize) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.enqueue_copy(from, to as u64, len) }
    }

    fn upload(&self, src: &[u8], to: u64) -> Result<()> {
        // SAFETY: `src` outlives the copy (we synchronise before returning) and the caller
        // checked the destination range against the allocation.
        unsafe { self.enqueue_copy(src.as_ptr() as u64, to, src.len()) }?;
        self.synchronize()
    }

    fn download(&self, from: u64, dst: &mut [u8]) -> Result<()> {
        // SAFETY: `dst` outlives the copy (we synchronise before returning); the caller checked
        // the source range.
        unsafe { self.enqueue_copy(from, dst.as_mut_ptr() as u64, dst.len()) }?;
        self.synchronize()
    }

    /// Sets the label the work queued from now on carries in the schedule log.
    fn set_label(&self, label: &str) {
        if self.log.enabled()
            && let Ok(mut l) = self.label.lock()
        {
            label.clone_into(&mut l);
        }
    }

    fn raw_handle(&self) -> u64 {
        0
    }
}

/// An emulated event: the signal its stream's worker sets when it reaches it.
#[derive(Debug)]
struct EmuEvent(Arc<Signal>);

impl EventBackend for EmuEvent {
    /// The emulator's device memory is host memory: this waits on the host.
    unsafe fn make_raw_stream_wait(&self, _stream: u64) -> Result<()> {
        self.0.wait_done().map(|_| ())
    }

    fn raw_handle(&self) -> u64 {
        0
    }

    fn synchronize(&self) -> Result<()> {
        self.0.wait_done().map(|_| ())
    }

    fn is_complete(&self) -> bool {
        self.0.is_done()
    }

    fn elapsed_since(&self, start: &Event) -> Result<std::time::Duration> {
        let Some(start) = start.downcast::<EmuEvent>() else {
            return Err(Error::InvalidArgument("events of two backends".into()));
        };
        let (b, a) = (self.0.wait_done()?, start.0.wait_done()?);
        Ok(b.saturating_duration_since(a))
    }
}

impl Drop for EmuStream {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            // Dropped in a child forked from the process that made the stream: the worker is
            // not in this process (joining it panics) and the parent's threads may have held
            // the locks at the fork, so the queue and the handle are left alone.
            let tx = std::mem::take(self.tx.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
            let worker = std::mem::take(self.worker.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
            std::mem::forget((tx, worker));
            return;
        }
        // Closing the queue lets the worker finish what was queued and exit.
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Ok(mut w) = self.worker.lock()
            && let Some(h) = w.take()
        {
            let _ = h.join();
        }
    }
}

/// A zeroed, 256-byte aligned host allocation standing in for device (and pinned) memory.
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

/// The emulator's device memory: freed once the drop waited for its uses.
impl Memory for HostAlloc {
    fn ptr(&self) -> u64 {
        self.ptr as u64
    }

    fn kind(&self) -> Option<DeviceKind> {
        Some(DeviceKind::Emulated)
    }
}

impl PinnedMemory for HostAlloc {}
