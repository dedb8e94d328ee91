//! The host emulator backend: C-ABI launchers of the kernels compiled by the build script.

use super::Arg;
use crate::error::{Error, Result};
use crate::kernel::Kernel;

// Pointer parameters are declared as u64: on the supported hosts (64-bit) a pointer and a u64
// are passed identically in the C ABI.
unsafe extern "C" {
    fn dmc_emu_dmc_lz4_decode(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_blosclz_decode(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_zstd_decode(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_memcpy(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_unshuffle(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        jobs: u64,
        n_jobs: u32,
        status: u64,
    ) -> i32;
    fn dmc_emu_dmc_crc32c(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        base: u64,
        total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_assemble(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        jobs: u64,
        n_jobs: u32,
        status: u64,
    ) -> i32;
}

const _: () = assert!(std::mem::size_of::<usize>() == 8, "the emulator needs a 64-bit host");

fn sig_error(kernel: Kernel) -> Error {
    Error::Emulator(format!("argument list does not match {}", kernel.name()))
}

/// Runs `kernel` synchronously on the calling thread.
///
/// # Safety
/// As [`super::Device::launch`]: pointer arguments address live buffers described by the sizes.
#[allow(clippy::many_single_char_names)]
pub(super) unsafe fn launch(kernel: Kernel, grid: (u32, u32), seed: u64, args: &[Arg]) -> Result<()> {
    use Arg::{Ptr as P, U32 as W, U64 as D};
    let bx = kernel.block_threads();
    let (gx, gy) = grid;
    // SAFETY (all arms): the launchers run the kernel on the given buffers, valid per the
    // caller's contract; the argument kinds are matched against the kernel's signature.
    let rc = match (kernel, args) {
        (Kernel::Lz4Decode, &[P(s), D(st), P(d), D(dt), P(t), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_lz4_decode(gx, gy, bx, seed, s, st, d, dt, t, i, n, stat, a)
        },
        (Kernel::BloscLzDecode, &[P(s), D(st), P(d), D(dt), P(t), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_blosclz_decode(gx, gy, bx, seed, s, st, d, dt, t, i, n, stat, a)
        },
        (Kernel::ZstdDecode, &[P(s), D(st), P(d), D(dt), P(t), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_zstd_decode(gx, gy, bx, seed, s, st, d, dt, t, i, n, stat, a)
        },
        (Kernel::Memcpy, &[P(s), D(st), P(d), D(dt), P(t), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_memcpy(gx, gy, bx, seed, s, st, d, dt, t, i, n, stat, a)
        },
        (Kernel::Unshuffle, &[P(s), D(st), P(d), D(dt), P(j), W(n), P(stat)]) => unsafe {
            dmc_emu_dmc_unshuffle(gx, gy, bx, seed, s, st, d, dt, j, n, stat)
        },
        (Kernel::Crc32c, &[P(b), D(t), P(s), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_crc32c(gx, gy, bx, seed, b, t, s, i, n, stat, a)
        },
        (Kernel::Assemble, &[P(s), D(st), P(d), D(dt), P(j), W(n), P(stat)]) => unsafe {
            dmc_emu_dmc_assemble(gx, gy, bx, seed, s, st, d, dt, j, n, stat)
        },
        _ => return Err(sig_error(kernel)),
    };
    if rc == 0 { Ok(()) } else { Err(Error::Emulator(format!("launch of {} rejected (code {rc})", kernel.name()))) }
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
                    None => Ok(*at),
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
        let worker = std::thread::Builder::new()
            .name("damacy-emu-stream".into())
            .spawn(move || {
                let mut rng = seed;
                while let Ok(op) = rx.recv() {
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
        })
    }

    pub(super) fn enqueue(&self, op: Op) -> Result<()> {
        let tx = self.tx.lock().map_err(|_| Error::Emulator("stream queue poisoned".into()))?;
        match tx.as_ref() {
            Some(tx) => tx.send(op).map_err(|_| Error::Emulator("the stream's worker thread is gone".into())),
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
