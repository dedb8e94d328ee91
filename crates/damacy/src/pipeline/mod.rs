//! The [`Pipeline`]: push samples, pop batches. One per rank.
//!
//! Stages overlap on threads: a feeder pulls the pushed iterator lazily and forms batches;
//! `n_workers` threads each plan and read a whole batch (I/O, decode and assemble through the
//! one [`Reader`] of the pipeline) into a batch buffer from a pool allocated once; batches come
//! out of [`Pipeline::pop`] in push order. See `worker.rs` for the flow and its bounds.

mod batch;
mod config;
mod sample;
mod stats;
mod worker;

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use damacy_codec::{OutputDtype, Reader};

pub use batch::{Batch, BatchStats, Place};
pub use config::{Config, OnError, Sizes};
pub use sample::{Sample, split_uri};
pub use stats::{PipelineStats, StageStats};

use crate::Error;
use batch::{Layout, Slot};
use sample::ArrayCache;
use stats::Collector;
use worker::{Outcome, Shared, State};

/// Streams batches of samples: [`Pipeline::push`] an iterator of [`Sample`]s (pulled lazily, so
/// an endless one is fine), [`Pipeline::pop`] batches in the same order. On a machine with a
/// usable GPU (or with [`crate::ExecutorKind::Emulated`]) the batches are device memory, else
/// host memory.
///
/// ```
/// use damacy::{Config, ExecutorKind, Pipeline, Region, Sample};
/// # fn main() -> Result<(), damacy::Error> {
/// # let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
/// let uri = format!("{root}/v3/sharded_zstd_index_end"); // a store whose root is the array
/// let pipeline = Pipeline::new(Config::new(4).with_executor(ExecutorKind::Cpu))?;
/// pipeline.push((0..10).map(move |i| Sample::new(uri.clone(), Region::new(vec![i, 0, 0], vec![8, 8, 8]))))?;
/// let mut seen = 0;
/// while pipeline.pending() > 0 {
///     match pipeline.pop() {
///         Ok(batch) => {
///             assert_eq!(batch.shape()[1..], [8, 8, 8]);
///             seen += batch.len(); // 4, 4, then a short last batch of 2
///         }
///         Err(e) if e.is_exhausted() => break,
///         Err(e) => return Err(e),
///     }
/// }
/// assert_eq!(seen, 10);
/// println!("{}", pipeline.stats());
/// # Ok(()) }
/// ```
pub struct Pipeline {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    feeder: Mutex<Option<JoinHandle<()>>>,
    warnings: Vec<String>,
    /// The process that started the threads (a child forked later has none of them).
    pid: u32,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("config", &self.shared.config)
            .field("executor", &self.shared.reader.executor_note())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// Validate `config` once, build the reader (threads, caches, the executor and its device
    /// memory), allocate the batch buffers when the configuration fixes their size (else the
    /// first batch does, once), and start the threads.
    pub fn new(config: Config) -> Result<Self, Error> {
        let sizes = config.validate()?;
        let reader = Reader::new(config.reader_config())?;
        let device = reader.device().cloned();
        let arrays = ArrayCache::new(reader.clone(), config.array_options(), config.store_options.clone());
        let mut state = State::default();
        if let (Some(shape), OutputDtype::Cast(dtype), Some(n)) =
            (&config.sample_shape, config.dtype, config.arrays_per_sample)
        {
            let layout = Layout { sample_shape: shape.clone(), dtypes: vec![dtype; n] };
            state.free = Slot::allocate(sizes.slots, &layout, config.batch_size, device.as_ref())?;
            state.layout = Some(Arc::new(layout));
        }
        let mut warnings = Vec::new();
        let local_rank = std::env::var("LOCAL_RANK").ok();
        if let Some(w) =
            local_rank_warning(local_rank.as_deref(), device.as_ref().and_then(damacy_codec::Device::cuda_ordinal))
        {
            warnings.push(w);
        }
        let collector = Collector::new(reader.stats(), 0, 0);
        let shared = Arc::new(Shared {
            sizes,
            reader,
            arrays,
            device,
            state: Mutex::new(state),
            closed: std::sync::atomic::AtomicBool::new(false),
            feed_cv: Condvar::new(),
            work_cv: Condvar::new(),
            ready_cv: Condvar::new(),
            stats: Mutex::new(collector),
            config,
        });
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name).spawn(f).map_err(|e| {
                Error::internal_from("pipeline: cannot start a pipeline thread; lower Config.n_workers", e)
            })
        };
        let mut pipeline = Self {
            shared: shared.clone(),
            workers: Mutex::new(Vec::new()),
            feeder: Mutex::new(None),
            warnings,
            pid: std::process::id(),
        };
        let s = shared.clone();
        let feeder = spawn("damacy-feeder".into(), Box::new(move || s.run_feeder()))?;
        *pipeline
            .feeder
            .get_mut()
            .map_err(|_| Error::internal("pipeline: the feeder thread's handle was poisoned"))? = Some(feeder);
        for i in 0..shared.config.n_workers {
            let s = shared.clone();
            let h = spawn(format!("damacy-worker-{i}"), Box::new(move || s.run_worker()))?;
            pipeline
                .workers
                .get_mut()
                .map_err(|_| Error::internal("pipeline: the worker threads' handles were poisoned"))?
                .push(h);
        }
        Ok(pipeline)
    }

    /// The configuration the pipeline runs with.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The reader that reads every batch (its own stats, executor, device).
    #[must_use]
    pub fn reader(&self) -> &Reader {
        &self.shared.reader
    }

    /// Warnings about the setup, for the caller to show (Python raises them as `UserWarning`):
    /// e.g. `LOCAL_RANK` names another device than the one the pipeline is bound to.
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// [`Config::describe`] plus what the pipeline decided: the executor and, once known, the
    /// batch layout and its buffers.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut s = self.shared.config.describe();
        let _ = write!(s, "\nexecutor       {}", self.shared.reader.executor_note());
        if let Ok(st) = self.shared.lock()
            && let Some(l) = &st.layout
        {
            let per: Vec<String> = (0..l.dtypes.len())
                .map(|t| {
                    format!(
                        "{} {}",
                        l.dtypes[t],
                        config::bytes((l.sample_bytes(t) * self.shared.config.batch_size) as u64)
                    )
                })
                .collect();
            let total: usize = (0..l.dtypes.len()).map(|t| l.sample_bytes(t) * self.shared.config.batch_size).sum();
            let _ = write!(
                s,
                "\nlayout         samples {:?}; per batch {}; {} slots = {} in {} memory",
                l.sample_shape,
                per.join(" + "),
                self.shared.sizes.slots,
                config::bytes((total * self.shared.sizes.slots) as u64),
                if self.shared.device.is_some() { "device" } else { "host" }
            );
        }
        s
    }

    /// Queue samples. The iterator is pulled lazily, on a thread of the pipeline, as batches
    /// are read and popped (never more than `lookahead` samples ahead), so an endless iterator
    /// is fine. Pushes are read one after another; each push ends with its own (possibly short)
    /// last batch.
    pub fn push<I>(&self, samples: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = Sample>,
        I::IntoIter: Send + 'static,
    {
        let mut st = self.shared.lock()?;
        if st.closed {
            return Err(Error::Closed);
        }
        st.iters.push_back(Box::new(samples.into_iter()));
        st.pushed = true;
        drop(st);
        self.shared.feed_cv.notify_all();
        Ok(())
    }

    /// Batches still to come: those formed and not yet popped, plus one while a push may yield
    /// more samples. `0` means every pushed sample was popped.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.shared.lock().map_or(0, |st| st.pending())
    }

    /// The next batch, in push order. Blocks until it is read, up to [`Config::pop_timeout`];
    /// then an [`Error::Timeout`] that says what starves (nothing pushed, the iterator, I/O or
    /// decode). A batch whose sample could not be read is that sample's [`Error::Sample`] (under
    /// [`OnError::Raise`]); later pops go on with the next batches. [`Error::Exhausted`] at once
    /// when nothing pushed is left.
    pub fn pop(&self) -> Result<Batch, Error> {
        self.pop_with(self.shared.config.pop_timeout, &mut || false)
    }

    /// [`Pipeline::pop`] waiting at most `timeout` (instead of [`Config::pop_timeout`]), and
    /// asking `interrupted` at least every 50 ms while it waits (with none of the pipeline's
    /// locks held): when it says `true` the pop returns [`Error::Interrupted`] and the batch it
    /// waited for stays queued for the next pop. Bindings use it to honour Ctrl-C.
    pub fn pop_with(&self, timeout: Duration, interrupted: &mut dyn FnMut() -> bool) -> Result<Batch, Error> {
        const POLL: Duration = Duration::from_millis(50);
        let started = Instant::now();
        let deadline = started + timeout;
        let engine_before = self.shared.reader.stats();
        let mut st = self.shared.lock()?;
        if st.held >= self.shared.config.depth {
            return Err(Error::PoolStarved(format!(
                "you hold {} batches, Config.depth: release or drop one before popping another, or raise Config.depth",
                st.held
            )));
        }
        loop {
            let seq = st.next_pop;
            if let Some(outcome) = st.done.remove(&seq) {
                st.next_pop += 1;
                self.shared.work_cv.notify_all();
                match outcome {
                    Outcome::Empty => continue,
                    Outcome::Failed(e) => {
                        drop(st);
                        let mut c = self.shared.collector()?;
                        c.failed_batches += 1;
                        c.pop_wait.add(started.elapsed(), 0, 0);
                        return Err(e);
                    }
                    Outcome::Ready(ready) => {
                        st.held += 1;
                        let layout = st.layout.clone().ok_or_else(|| Error::invalid("a batch without a layout"))?;
                        drop(st);
                        let batch = self.shared.to_batch(seq, ready, layout);
                        let mut c = self.shared.collector()?;
                        c.pop_wait.add(started.elapsed(), 0, 0);
                        c.batches += 1;
                        c.samples += batch.len() as u64;
                        c.bytes += batch.stats().bytes;
                        return Ok(batch);
                    }
                }
            }
            if st.closed {
                return Err(Error::Closed);
            }
            if st.pushed && st.drained() {
                return Err(Error::Exhausted(format!(
                    "every pushed sample was popped ({} batches); push more samples",
                    st.next_pop
                )));
            }
            let now = Instant::now();
            if now >= deadline {
                let engine = self.shared.reader.stats().since(&engine_before);
                return Err(Error::Timeout(starving(&st, seq, timeout, &engine)));
            }
            st = self
                .shared
                .ready_cv
                .wait_timeout(st, (deadline - now).min(POLL))
                .map_err(|_| {
                    Error::internal(
                        "pipeline: the pipeline's state was poisoned by a panic in one of its threads while pop waited",
                    )
                })?
                .0;
            drop(st);
            if interrupted() {
                return Err(Error::Interrupted);
            }
            st = self.shared.lock()?;
        }
    }

    /// What the pipeline did since it was built or since [`Pipeline::stats_reset`].
    #[must_use]
    pub fn stats(&self) -> PipelineStats {
        let a = &self.shared.arrays;
        let (opens, hits) = (a.opens.load(Relaxed), a.hits.load(Relaxed));
        self.shared
            .collector()
            .map(|c| c.snapshot(self.shared.reader.stats(), opens, hits, a.routes()))
            .unwrap_or_default()
    }

    /// Start the counters of [`Pipeline::stats`] afresh.
    pub fn stats_reset(&self) {
        let a = &self.shared.arrays;
        let fresh = Collector::new(self.shared.reader.stats(), a.opens.load(Relaxed), a.hits.load(Relaxed));
        if let Ok(mut c) = self.shared.collector() {
            *c = fresh;
        }
    }

    /// Cancel: stop pulling, let each worker finish the batch it is reading (no new one starts),
    /// free the queued batches and buffers, and join the threads. A feeder inside the user's
    /// iterator's `next()` is not waited for: it exits when `next()` returns. Batches the
    /// caller still holds stay valid. Idempotent; [`Drop`] calls it. In a child forked after
    /// the pipeline started, it only marks the pipeline closed (its threads are the parent's).
    pub fn close(&self) {
        if std::process::id() != self.pid {
            // A child forked after the pipeline started: the threads to join are the parent's.
            self.shared.closed.store(true, Relaxed);
            return;
        }
        self.shared.closed.store(true, Relaxed);
        let (feeding, dropped) = match self.shared.state.lock() {
            Ok(mut st) => {
                st.closed = true;
                let dropped = (
                    std::mem::take(&mut st.iters),
                    std::mem::take(&mut st.jobs),
                    std::mem::take(&mut st.done),
                    std::mem::take(&mut st.free),
                );
                (st.feeding.is_some(), Some(dropped))
            }
            Err(_) => (true, None),
        };
        drop(dropped);
        self.shared.feed_cv.notify_all();
        self.shared.work_cv.notify_all();
        self.shared.ready_cv.notify_all();
        if let Ok(mut w) = self.workers.lock() {
            for h in w.drain(..) {
                let _ = h.join();
            }
        }
        if let Ok(mut f) = self.feeder.lock()
            && let Some(h) = f.take()
            && !feeding
        {
            let _ = h.join();
        }
        if let Ok(mut st) = self.shared.state.lock() {
            st.done.clear();
            st.free.clear();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            // Dropped in a child forked from the process that started the pipeline: its
            // threads are not in this process (joining them panics), their locks may have
            // been held at the fork, and its buffers may be device memory of the parent's
            // context. Everything is left to the parent; nothing here is touched.
            let workers = std::mem::take(self.workers.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
            let feeder = std::mem::take(self.feeder.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
            std::mem::forget((workers, feeder, self.shared.clone()));
            return;
        }
        self.close();
    }
}

/// What a pop that timed out waited for.
fn starving(st: &State, seq: u64, timeout: Duration, engine: &damacy_codec::StatsSnapshot) -> String {
    let waited = format!("pop waited {timeout:?} for batch {seq}");
    if !st.pushed {
        return format!("{waited}: no samples were pushed; call push() with an iterator of samples first");
    }
    if let Some((_, since)) = st.in_flight.iter().find(|(s, _)| *s == seq) {
        let reading = format!("{waited}, which has been reading for {:.1?}", since.elapsed());
        if engine.storage_requests == 0 && engine.units_decoded == 0 {
            return format!(
                "{reading}: no storage read completed in that time: I/O starves (check that the store answers)"
            );
        }
        return format!(
            "{reading}: in that time the engine completed {} storage reads ({} bytes) and decoded {} chunks: {} is the bottleneck; raise Config.pop_timeout or add threads",
            engine.storage_requests,
            engine.bytes_read,
            engine.units_decoded,
            if engine.decode >= engine.io { "decode" } else { "I/O" }
        );
    }
    if let Some(since) = st.feeding {
        return format!(
            "{waited}: the pushed iterator has not yielded its next sample for {:.1?}: the sample source starves",
            since.elapsed()
        );
    }
    if !st.jobs.is_empty() {
        return format!(
            "{waited}: batches are formed but no buffer is free ({} held by the consumer): release or drop popped batches",
            st.held
        );
    }
    format!("{waited}: waiting for samples from the pushed iterator")
}

/// The warning when `LOCAL_RANK` names another device than the one the pipeline is bound to
/// (ARCHITECTURE §5), or is not a device ordinal.
fn local_rank_warning(local_rank: Option<&str>, bound: Option<usize>) -> Option<String> {
    let (lr, bound) = (local_rank?, bound?);
    match lr.trim().parse::<usize>() {
        Ok(r) if r == bound => None,
        Ok(r) => Some(format!(
            "LOCAL_RANK={r} but the pipeline is bound to CUDA device {bound}: set Config.device = LOCAL_RANK (or call torch.cuda.set_device(LOCAL_RANK) first) so each rank uses its own GPU"
        )),
        Err(_) => {
            Some(format!("LOCAL_RANK={lr:?} is not a device ordinal; the pipeline is bound to CUDA device {bound}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_rank_warns_only_on_a_mismatch() {
        assert_eq!(local_rank_warning(None, Some(1)), None);
        assert_eq!(local_rank_warning(Some("1"), None), None, "no CUDA device: nothing to warn about");
        assert_eq!(local_rank_warning(Some("1"), Some(1)), None);
        let w = local_rank_warning(Some("2"), Some(0)).unwrap();
        assert!(w.contains("LOCAL_RANK=2") && w.contains("device 0") && w.contains("Config.device"), "{w}");
        assert!(local_rank_warning(Some("x"), Some(0)).unwrap().contains("not a device ordinal"));
    }

    #[test]
    fn starving_says_nothing_was_pushed() {
        let st = State::default();
        let m = starving(&st, 0, Duration::from_millis(5), &damacy_codec::StatsSnapshot::default());
        assert!(m.contains("no samples were pushed"), "{m}");
    }
}
