//! The host emulator backend: emulated streams (worker threads) and events. The kernels' C-ABI
//! launchers, compiled by the build script, are declared and called by the typed launchers in
//! `crate::launch`.

use crate::error::{Error, Result};
use crate::launch::KernelArgs;

const _: () = assert!(std::mem::size_of::<usize>() == 8, "the emulator needs a 64-bit host");

/// Runs `args`' kernel synchronously on the calling thread.
///
/// # Safety
/// As [`super::Device::launch_on`]: pointer arguments address live buffers described by the sizes.
pub(super) unsafe fn launch<A: KernelArgs>(args: &A, grid: (u32, u32), seed: u64) -> Result<()> {
    let kernel = A::KERNEL;
    // SAFETY: forwarded contract.
    let rc = unsafe { args.run_emulated(grid, kernel.block_threads(), seed) };
    if rc == 0 { Ok(()) } else { Err(Error::Emulator(format!("launch of {} rejected (code {rc})", kernel.name()))) }
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
pub(crate) struct ScheduleLog {
    enabled: std::sync::atomic::AtomicBool,
    entries: std::sync::Mutex<Vec<ScheduleEntry>>,
}

impl ScheduleLog {
    pub(super) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    fn enabled(&self) -> bool {
        self.enabled.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The entries so far (and clears them).
    pub(super) fn take(&self) -> Vec<ScheduleEntry> {
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
pub(crate) struct EmuStream {
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
pub(crate) struct Signal {
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
    pub(super) fn wait_done(&self) -> Result<std::time::Instant> {
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

    pub(super) fn is_done(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.is_some())
    }
}

impl EmuStream {
    pub(super) fn new(seed: u64, name: String, log: std::sync::Arc<ScheduleLog>) -> std::sync::Arc<Self> {
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

    /// Sets the label the work queued from now on carries in the schedule log.
    pub(super) fn set_label(&self, label: &str) {
        if self.log.enabled()
            && let Ok(mut l) = self.label.lock()
        {
            label.clone_into(&mut l);
        }
    }

    #[cfg(test)]
    pub(super) fn enqueue(&self, op: Op) -> Result<()> {
        self.enqueue_as("work", op)
    }

    /// Queues `op`; while the device's schedule log is enabled, its run is logged as `kind`.
    pub(super) fn enqueue_as(&self, kind: &'static str, op: Op) -> Result<()> {
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
    pub(super) unsafe fn enqueue_copy(&self, from: u64, to: u64, len: usize) -> Result<()> {
        // SAFETY: the caller's contract.
        self.enqueue_as("copy", Box::new(move || unsafe {
            std::ptr::copy_nonoverlapping(from as usize as *const u8, to as usize as *mut u8, len);
            Ok(())
        }))
    }

    pub(super) fn record(&self) -> Result<std::sync::Arc<Signal>> {
        let signal = std::sync::Arc::new(Signal::default());
        let (s, err) = (signal.clone(), self.error.clone());
        self.enqueue_as("record", Box::new(move || {
            s.set(err.lock().ok().and_then(|e| e.clone()));
            Ok(())
        }))?;
        Ok(signal)
    }

    pub(super) fn wait(&self, signal: std::sync::Arc<Signal>) -> Result<()> {
        self.enqueue_as("wait", Box::new(move || signal.wait_done().map(|_| ()).map_err(|e| e.to_string())))
    }

    pub(super) fn synchronize(&self) -> Result<()> {
        self.record()?.wait_done().map(|_| ())
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
