//! The runtime bridge: the process's I/O runtime (a tokio multi-thread runtime that runs every
//! remote request), and the two crossings between it and the synchronous engine.
//!
//! * Sync → async ([`block_on`]): the engine waits for a future on the calling thread with
//!   tokio's own facilities: [`Runtime::block_on`] from a plain thread (a caller's, a rayon
//!   worker, a thread of the blocking pool), wrapped in [`tokio::task::block_in_place`] on a
//!   thread of a multi-thread runtime (a worker hands its other tasks to another thread first;
//!   inside another `block_on` it nests). Only a thread of a current-thread runtime (where
//!   tokio forbids both) polls the future itself, parked between wake-ups, with the I/O runtime
//!   entered for its reactor and timers.
//! * Async → sync ([`off_thread`]): an `_async` entry point runs the engine on the I/O
//!   runtime's blocking pool ([`Runtime::spawn_blocking`]: threads are reused, not started per
//!   call) and awaits it without blocking the caller's executor.
//!
//! Neither waits on the I/O runtime's workers, which only run requests, so neither deadlocks.

use std::cell::Cell;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use super::options::env;
use crate::error::{Error, Result};

/// Threads of the process's I/O runtime: `DAMACY_IO_RUNTIME_THREADS` when set to a positive
/// number, else one per four CPUs, 1 to 8. Every request in flight is a task, not a thread, so
/// few are needed: one thread received 2 GB/s over loopback HTTP while the decode threads kept the
/// other core busy, and on 2 cores a second one cost 7–22 % more CPU per batch in hand-offs
/// between threads (CHANGELOG, `benches/results/remote.md`).
fn io_runtime_threads(env_value: Option<&str>, cpus: usize) -> usize {
    match env_value.and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(n) if n > 0 => n,
        _ => (cpus / 4).clamp(1, 8),
    }
}

/// The process's I/O runtime, started on first use in each process (a child forked after the
/// parent started one gets its own); failing to start it is an error, not a panic.
pub(crate) fn runtime() -> Result<&'static Runtime> {
    static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().map_err(|_| Error::internal("the I/O runtime's lock is poisoned"))?;
    if let Some((owner, rt)) = *slot
        && owner == pid
    {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_runtime_threads(
            env("DAMACY_IO_RUNTIME_THREADS").as_deref(),
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        ))
        .thread_name("damacy-io")
        .enable_all()
        .build()
        .map_err(|e| Error::internal_from("cannot start the I/O runtime for remote stores", e))?;
    // A runtime inherited from the parent of a fork has no threads here; it is left alone
    // (dropping it could wait on threads that do not exist), and this process gets its own.
    let rt: &'static Runtime = Box::leak(Box::new(rt));
    *slot = Some((pid, rt));
    Ok(rt)
}

/// Run a future to completion on the calling thread, with the I/O runtime's reactor and timers,
/// from any thread: see the [module](self). An async caller should use the `_async` entry
/// points, which do not block its executor.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output> {
    Ok(wait(Some(runtime()?), future))
}

thread_local! {
    /// Whether this thread is polling a future itself ([`park_on`]): a `block_on` nested in
    /// it must poll too, as tokio would refuse to block there.
    static POLLING: Cell<bool> = const { Cell::new(false) };
}

/// [`block_on`] with `rt` entered when there is one (`None`: a future that needs no runtime).
pub(super) fn wait<F: Future>(rt: Option<&Runtime>, future: F) -> F::Output {
    let Some(rt) = rt else { return park_on(future) };
    if POLLING.get() {
        let _context = rt.enter();
        return park_on(future);
    }
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        // A plain thread: a caller's, a rayon worker, a thread of the blocking pool.
        Err(_) => rt.block_on(future),
        // A worker of a multi-thread runtime, or inside its `block_on` (then this nests).
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| rt.block_on(future)),
        // A current-thread runtime, where tokio cannot block: poll here.
        Ok(_) => {
            let _context = rt.enter();
            park_on(future)
        }
    }
}

/// Wakes the thread that waits in [`park_on`].
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Poll `future` on this thread, parking it between wake-ups; it may nest.
pub(crate) fn park_on<F: Future>(future: F) -> F::Output {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            POLLING.set(self.0);
        }
    }
    let _reset = Reset(POLLING.replace(true));
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Run the synchronous `f` on damacy's I/O runtime's blocking pool and await its result without
/// blocking the caller's executor: the bridge from async callers to the engine (the `_async`
/// entry points of [`crate::Reader`], the zarrs extension's async reads). The pool's threads are
/// reused (no thread per call) and have the I/O runtime entered, so `f` may read remote stores.
/// A runtime that cannot start, or a panic in `f`, is an [`Error::Internal`] (as `E`).
pub async fn off_thread<T, E>(
    f: impl FnOnce() -> std::result::Result<T, E> + Send + 'static,
) -> std::result::Result<T, E>
where
    T: Send + 'static,
    E: From<Error> + Send + 'static,
{
    let runtime = runtime().map_err(E::from)?;
    match runtime.spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(E::from(Error::internal_from("an async call's blocking task failed", e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_runtime_threads_scale_with_cpus_unless_set() {
        assert_eq!([1, 2, 4, 8, 16, 64, 256].map(|c| io_runtime_threads(None, c)), [1, 1, 1, 2, 4, 8, 8]);
        assert_eq!(io_runtime_threads(Some(" 3 "), 2), 3);
        assert_eq!(io_runtime_threads(Some("0"), 16), 4);
        assert_eq!(io_runtime_threads(Some("many"), 16), 4);
    }

    async fn slept(ms: u64) -> u64 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        ms
    }

    #[test]
    fn block_on_works_from_plain_threads_rayon_and_nested() {
        assert_eq!(block_on(slept(1)).unwrap(), 1);
        // Nested: a blocking wait inside a future that another blocking wait runs.
        assert_eq!(block_on(async { block_on(slept(2)).unwrap() + slept(1).await }).unwrap(), 3);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let sum: u64 = pool.install(|| {
            use rayon::prelude::*;
            (0..16u64).into_par_iter().map(|i| block_on(slept(i % 3)).unwrap()).sum()
        });
        assert_eq!(sum, (0..16u64).map(|i| i % 3).sum::<u64>());
    }

    #[test]
    fn block_on_works_inside_other_runtimes() {
        let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        assert_eq!(multi.block_on(async { block_on(slept(1)).unwrap() }), 1);
        assert_eq!(multi.block_on(multi.spawn(async { block_on(slept(1)).unwrap() })).unwrap(), 1);
        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert_eq!(current.block_on(async { block_on(async { block_on(slept(1)).unwrap() }).unwrap() }), 1);
        // Inside the I/O runtime itself.
        let rt = runtime().unwrap();
        assert_eq!(rt.block_on(rt.spawn(async { block_on(slept(1)).unwrap() })).unwrap(), 1);
    }

    #[test]
    fn off_thread_reuses_the_blocking_pool_and_reports_panics_as_internal() {
        let current = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let threads: std::collections::HashSet<_> = current.block_on(async {
            let mut ids = std::collections::HashSet::new();
            for _ in 0..8 {
                ids.insert(off_thread(|| Ok::<_, Error>(std::thread::current().id())).await.unwrap());
            }
            ids
        });
        assert!(threads.len() < 8, "{threads:?}");
        let got: Result<()> = futures::executor::block_on(off_thread(|| panic!("boom")));
        assert!(matches!(got, Err(Error::Internal { .. })), "{got:?}");
        // The engine inside reaches the runtime: a blocking wait from the blocking pool.
        let v = futures::executor::block_on(off_thread(|| block_on(slept(1)))).unwrap();
        assert_eq!(v, 1);
    }
}
