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
    pub(super) fn new(seed: u64) -> std::sync::Arc<Self> {
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
        })
    }

    pub(super) fn enqueue(&self, op: Op) -> Result<()> {
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
        self.enqueue(Box::new(move || unsafe {
            std::ptr::copy_nonoverlapping(from as usize as *const u8, to as usize as *mut u8, len);
            Ok(())
        }))
    }

    pub(super) fn record(&self) -> Result<std::sync::Arc<Signal>> {
        let signal = std::sync::Arc::new(Signal::default());
        let (s, err) = (signal.clone(), self.error.clone());
        self.enqueue(Box::new(move || {
            s.set(err.lock().ok().and_then(|e| e.clone()));
            Ok(())
        }))?;
        Ok(signal)
    }

    pub(super) fn wait(&self, signal: std::sync::Arc<Signal>) -> Result<()> {
        self.enqueue(Box::new(move || signal.wait_done().map(|_| ()).map_err(|e| e.to_string())))
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
