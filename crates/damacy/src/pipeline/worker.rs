//! The threads of a pipeline and the state they share.
//!
//! ```text
//! push(iter) ─▶ feeder thread ── pulls lazily while fewer than `lookahead` samples wait,
//!                  │             forms batches (a short last one per push, or drop_last)
//!                  ▼
//!              jobs (formed batches, in order)
//!                  │  a worker takes the next job together with a free slot
//!                  ▼
//!   n_workers ── open arrays (cached) → check the layout → plan per array → read into the
//!   threads      slot's buffers (host slice, or device buffer + the slot's stream)
//!                  ▼
//!              done (by sequence number; at most `slots` outstanding)
//!                  ▼
//!   pop() ──── the next sequence number, in push order ─▶ Batch (owns the slot until released)
//! ```
//!
//! Every slot is allocated once; a slot moves from the free list to a worker, to `done`, to a
//! [`Batch`] and back. A worker takes a job only while fewer than `slots` batches are being
//! read or wait to be popped, so an endless iterator, or a consumer that stops popping, holds
//! at most `lookahead` samples and `slots` batches.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use damacy_codec::{ArrayHandle, Device, Reader};

use crate::pipeline::batch::{Batch, BatchStats, Layout, Slot, device_error};
use crate::pipeline::config::{Config, OnError, Sizes};
use crate::pipeline::sample::{ArrayCache, Sample};
use crate::pipeline::stats::Collector;
use crate::{CodecError, Error};

/// What the user pushed: samples, pulled lazily.
pub(crate) type SampleIter = Box<dyn Iterator<Item = Sample> + Send>;

/// A formed batch waiting for a worker.
pub(crate) struct Job {
    seq: u64,
    samples: Vec<Sample>,
}

/// A batch read and waiting to be popped.
pub(crate) struct Ready {
    slot: Slot,
    samples: Vec<Sample>,
    stats: BatchStats,
    at: Instant,
}

/// What became of a job.
pub(crate) enum Outcome {
    Ready(Ready),
    Failed(Error),
    /// Every sample was skipped, or the pipeline closed mid-read: nothing to pop.
    Empty,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) iters: VecDeque<SampleIter>,
    /// The feeder holds an iterator outside the lock (inside `next()`), since when.
    pub(crate) feeding: Option<Instant>,
    pub(crate) pushed: bool,
    partial: Vec<Sample>,
    pub(crate) jobs: VecDeque<Job>,
    queued_samples: usize,
    next_seq: u64,
    /// Jobs being read: sequence number and start.
    pub(crate) in_flight: Vec<(u64, Instant)>,
    pub(crate) done: BTreeMap<u64, Outcome>,
    pub(crate) next_pop: u64,
    pub(crate) held: usize,
    pub(crate) free: Vec<Slot>,
    pub(crate) layout: Option<Arc<Layout>>,
    allocating: bool,
    pub(crate) closed: bool,
}

impl State {
    /// Whether no batch can come any more from what was pushed.
    pub(crate) fn drained(&self) -> bool {
        self.feeding.is_none()
            && self.iters.is_empty()
            && self.partial.is_empty()
            && self.jobs.is_empty()
            && self.in_flight.is_empty()
            && self.done.is_empty()
    }

    /// Batches formed and not yet popped, plus one for samples still to come from an unfinished
    /// push (which may form further batches).
    pub(crate) fn pending(&self) -> usize {
        let formed = self.jobs.len() + self.in_flight.len() + self.done.len();
        let more = self.feeding.is_some() || !self.iters.is_empty() || !self.partial.is_empty();
        formed + usize::from(more)
    }
}

/// Everything the threads of one pipeline share.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) sizes: Sizes,
    pub(crate) reader: Reader,
    pub(crate) arrays: ArrayCache,
    /// The device the batch buffers live on (a device executor), else `None`.
    pub(crate) device: Option<Device>,
    pub(crate) state: Mutex<State>,
    pub(crate) closed: AtomicBool,
    /// The feeder waits here for a push or for room in the lookahead.
    pub(crate) feed_cv: Condvar,
    /// Workers wait here for a job and a free slot.
    pub(crate) work_cv: Condvar,
    /// `pop` waits here for the next batch.
    pub(crate) ready_cv: Condvar,
    pub(crate) stats: Mutex<Collector>,
}

fn poisoned() -> Error {
    Error::internal(
        "pipeline: the pipeline's state was poisoned by a panic in one of its threads; build a new pipeline",
    )
}

impl Shared {
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, State>, Error> {
        self.state.lock().map_err(|_| poisoned())
    }

    pub(crate) fn collector(&self) -> Result<MutexGuard<'_, Collector>, Error> {
        self.stats.lock().map_err(|_| poisoned())
    }

    fn notify_all(&self) {
        self.feed_cv.notify_all();
        self.work_cv.notify_all();
        self.ready_cv.notify_all();
    }

    /// A batch's slot comes back from the consumer.
    pub(crate) fn return_slot(&self, slot: Slot) {
        if let Ok(mut st) = self.state.lock() {
            st.held = st.held.saturating_sub(1);
            if !st.closed {
                st.free.push(slot);
            }
        }
        self.work_cv.notify_all();
        self.ready_cv.notify_all();
    }

    /// Hand a popped outcome to the consumer as a [`Batch`].
    pub(crate) fn to_batch(self: &Arc<Self>, index: u64, ready: Ready, layout: Arc<Layout>) -> Batch {
        let mask = ready.samples.iter().any(|s| s.padded).then(|| ready.samples.iter().map(|s| !s.padded).collect());
        let mut stats = ready.stats;
        stats.queued = ready.at.elapsed();
        Batch {
            slot: Some(ready.slot),
            index,
            layout,
            samples: ready.samples,
            mask,
            stats,
            device: self.device.clone(),
            home: Arc::downgrade(self),
        }
    }

    // ---------------------------------------------------------------- the feeder

    pub(crate) fn run_feeder(&self) {
        while let Some((mut iter, want)) = self.next_pull() {
            let mut got = Vec::with_capacity(want);
            let mut ended = false;
            while got.len() < want && !self.closed.load(Relaxed) {
                if let Some(s) = iter.next() {
                    got.push(s);
                } else {
                    ended = true;
                    break;
                }
            }
            let Ok(mut st) = self.state.lock() else { return };
            st.feeding = None;
            if st.closed {
                return;
            }
            if let Ok(mut c) = self.stats.lock() {
                c.pulled += got.len() as u64;
            }
            st.partial.append(&mut got);
            let batch_size = self.config.batch_size;
            while st.partial.len() >= batch_size {
                let samples: Vec<Sample> = st.partial.drain(..batch_size).collect();
                form(&mut st, samples);
            }
            if ended {
                if !st.partial.is_empty() {
                    let rest = std::mem::take(&mut st.partial);
                    if self.config.drop_last {
                        if let Ok(mut c) = self.stats.lock() {
                            c.dropped_last += rest.len() as u64;
                        }
                    } else {
                        form(&mut st, rest);
                    }
                }
            } else {
                st.iters.push_front(iter);
            }
            drop(st);
            self.notify_all();
        }
    }

    /// Wait for an iterator and room in the lookahead; take the iterator and say how many samples
    /// to pull. `None` once the pipeline closed.
    fn next_pull(&self) -> Option<(SampleIter, usize)> {
        let mut st = self.state.lock().ok()?;
        loop {
            if st.closed {
                return None;
            }
            let waiting = st.partial.len() + st.queued_samples;
            let room = self.sizes.lookahead.saturating_sub(waiting);
            if room > 0
                && let Some(iter) = st.iters.pop_front()
            {
                st.feeding = Some(Instant::now());
                let want = room.min(self.config.batch_size - st.partial.len() % self.config.batch_size);
                return Some((iter, want));
            }
            st = self.feed_cv.wait(st).ok()?;
        }
    }

    // ---------------------------------------------------------------- the workers

    pub(crate) fn run_worker(&self) {
        while let Some((job, slot)) = self.take_job() {
            let seq = job.seq;
            let mut slot = slot;
            let outcome = self.process(job, &mut slot);
            let Ok(mut st) = self.state.lock() else { return };
            st.in_flight.retain(|(s, _)| *s != seq);
            if let Some(slot) = slot
                && !st.closed
            {
                st.free.push(slot);
            }
            if !st.closed {
                st.done.insert(seq, outcome);
            }
            drop(st);
            self.notify_all();
        }
    }

    /// The next job, with a free slot, or without one (and the duty to allocate the pool) when
    /// the layout is not known yet. `None` once the pipeline closed.
    fn take_job(&self) -> Option<(Job, Option<Slot>)> {
        let mut st = self.state.lock().ok()?;
        loop {
            if st.closed {
                return None;
            }
            let outstanding = st.in_flight.len() + st.done.len();
            if !st.jobs.is_empty() && outstanding < self.sizes.slots {
                let slot = if st.layout.is_some() {
                    st.free.pop()
                } else if !st.allocating {
                    st.allocating = true;
                    None
                } else {
                    st = self.work_cv.wait(st).ok()?;
                    continue;
                };
                if st.layout.is_none() || slot.is_some() {
                    let job = st.jobs.pop_front()?;
                    st.queued_samples -= job.samples.len();
                    st.in_flight.push((job.seq, Instant::now()));
                    self.feed_cv.notify_all();
                    return Some((job, slot));
                }
            }
            st = self.work_cv.wait(st).ok()?;
        }
    }

    /// Read one job into `slot` (allocating the pool first if this is the first job).
    fn process(&self, job: Job, slot: &mut Option<Slot>) -> Outcome {
        let Job { seq, samples } = job;
        let first = slot.is_none();
        let handles: Vec<Result<Vec<ArrayHandle>, CodecError>> = samples.iter().map(|s| self.open(s)).collect();
        let layout = match self.layout_for(first, &samples, &handles) {
            Ok(l) => l,
            Err(e) => {
                self.allocation_done(first);
                return Outcome::Failed(e);
            }
        };
        // Per sample: its handles, or the reason it cannot be read.
        let mut entries: Vec<(Sample, Result<Vec<ArrayHandle>, CodecError>)> = Vec::with_capacity(samples.len());
        for (s, h) in samples.into_iter().zip(handles) {
            let checked = h.and_then(|h| layout.as_ref().map_or(Ok(()), |l| self.check(&s, &h, l)).map(|()| h));
            entries.push((s, checked));
        }
        let Some(layout) = layout else {
            // No sample of the first job could be read: the layout stays unknown.
            self.allocation_done(first);
            return self.reject(seq, entries).err().map_or(Outcome::Empty, Outcome::Failed);
        };
        if first {
            match self.install_pool(&layout) {
                Ok(s) => *slot = Some(s),
                Err(e) => return Outcome::Failed(e),
            }
        }
        let good = match self.reject(seq, entries) {
            Ok(g) => g,
            Err(e) => return Outcome::Failed(e),
        };
        let Some(s) = slot.as_mut() else { return Outcome::Failed(Error::invalid("a worker lost its batch buffer")) };
        match self.read_into(seq, good, &layout, s) {
            Ok(Some((samples, stats))) => match slot.take() {
                Some(slot) => Outcome::Ready(Ready { slot, samples, stats, at: Instant::now() }),
                None => Outcome::Failed(Error::invalid("a worker lost its batch buffer")),
            },
            Ok(None) => Outcome::Empty,
            Err(e) => Outcome::Failed(e),
        }
    }

    fn open(&self, s: &Sample) -> Result<Vec<ArrayHandle>, CodecError> {
        if s.uris.is_empty() {
            return Err(CodecError::InvalidArgument("the sample names no array".into()));
        }
        s.uris
            .iter()
            .map(|u| {
                self.arrays.open(u).map_err(|e| match e {
                    Error::Codec(c) => c,
                    other => CodecError::InvalidArgument(other.to_string()),
                })
            })
            .collect()
    }

    /// The layout of the pipeline's batches: the known one, or (for the first job) the one the
    /// configuration and the first readable sample fix. `None` when nothing fixes it yet.
    fn layout_for(
        &self,
        first: bool,
        samples: &[Sample],
        handles: &[Result<Vec<ArrayHandle>, CodecError>],
    ) -> Result<Option<Arc<Layout>>, Error> {
        if !first {
            return self.lock()?.layout.clone().map(Some).ok_or_else(|| Error::invalid("the batch layout is unknown"));
        }
        let Some((s, h)) = samples.iter().zip(handles).find_map(|(s, h)| h.as_ref().ok().map(|h| (s, h))) else {
            return Ok(None);
        };
        let sample_shape = self.config.sample_shape.clone().unwrap_or_else(|| s.region.shape.clone());
        let mut dtypes: Vec<_> = h.iter().map(ArrayHandle::out_dtype).collect();
        if let Some(n) = self.config.arrays_per_sample {
            dtypes.resize(n, dtypes[0]);
        }
        Ok(Some(Arc::new(Layout { sample_shape, dtypes })))
    }

    /// Whether sample `s` with its arrays fits the layout.
    fn check(&self, s: &Sample, handles: &[ArrayHandle], layout: &Layout) -> Result<(), CodecError> {
        let from = |configured: bool, knob: &str| {
            if configured { format!("Config.{knob}") } else { "the first sample".to_owned() }
        };
        if handles.len() != layout.dtypes.len() {
            return Err(CodecError::InvalidArgument(format!(
                "the sample names {} arrays but the batches hold {} tensors (from {}); give every sample the same number of arrays",
                handles.len(),
                layout.dtypes.len(),
                from(self.config.arrays_per_sample.is_some(), "arrays_per_sample")
            )));
        }
        if s.region.shape != layout.sample_shape {
            return Err(CodecError::InvalidArgument(format!(
                "the sample has shape {:?} but the batches have shape {:?} (from {}); crop every sample to one shape",
                s.region.shape,
                layout.sample_shape,
                from(self.config.sample_shape.is_some(), "sample_shape")
            )));
        }
        for (t, (h, want)) in handles.iter().zip(&layout.dtypes).enumerate() {
            if h.out_dtype() != *want {
                return Err(CodecError::InvalidArgument(format!(
                    "array {} reads as {} but tensor {t} of the batches is {want} (from the first sample); set Config.dtype to cast every array to one type",
                    s.uris[t],
                    h.out_dtype()
                )));
            }
        }
        Ok(())
    }

    /// Apply the error policy to the samples that cannot be read: under `Raise` the first one's
    /// error; under `Skip` the readable ones, the others counted and named.
    fn reject(
        &self,
        seq: u64,
        entries: Vec<(Sample, Result<Vec<ArrayHandle>, CodecError>)>,
    ) -> Result<Vec<(Sample, Vec<ArrayHandle>)>, Error> {
        let mut good = Vec::with_capacity(entries.len());
        for (position, (s, h)) in entries.into_iter().enumerate() {
            match h {
                Ok(h) => good.push((s, h)),
                Err(e) => self.sample_failed(seq, position, &s, e)?,
            }
        }
        Ok(good)
    }

    /// One sample failed: an error under `Raise`, counted and named under `Skip`.
    fn sample_failed(&self, seq: u64, position: usize, s: &Sample, e: CodecError) -> Result<(), Error> {
        match self.config.on_error {
            OnError::Raise => Err(Error::Sample { sample: s.to_string(), batch: seq, position, source: e }),
            OnError::Skip => {
                if let Ok(mut c) = self.stats.lock() {
                    c.skip(format!("{s} (batch {seq}): {e}"));
                }
                Ok(())
            }
        }
    }

    fn allocation_done(&self, first: bool) {
        if first {
            if let Ok(mut st) = self.state.lock() {
                st.allocating = false;
            }
            self.work_cv.notify_all();
        }
    }

    /// Allocate every slot for `layout`, keep one for the caller and free the rest.
    fn install_pool(&self, layout: &Arc<Layout>) -> Result<Slot, Error> {
        let allocated = self
            .check_device_budget(layout)
            .and_then(|()| Slot::allocate(self.sizes.slots, layout, self.config.batch_size, self.device.as_ref()));
        let mut st = self.lock()?;
        st.allocating = false;
        let result = allocated.and_then(|mut slots| {
            let mine = slots.pop().ok_or_else(|| Error::invalid("no batch buffer was allocated"))?;
            st.layout = Some(layout.clone());
            st.free.extend(slots);
            Ok(mine)
        });
        drop(st);
        self.work_cv.notify_all();
        result
    }

    /// The batch buffers of `layout` on the device must fit `max_gpu_memory_bytes` beside the
    /// executor's own budget (checked by [`Config::validate`] when the configuration fixes the
    /// layout, here when the first batch does).
    fn check_device_budget(&self, layout: &Layout) -> Result<(), Error> {
        let (Some(cap), Some(_)) = (self.config.max_gpu_memory_bytes, &self.device) else { return Ok(()) };
        let per_batch: usize = (0..layout.dtypes.len()).map(|t| layout.sample_bytes(t) * self.config.batch_size).sum();
        let pool = (per_batch * self.sizes.slots) as u64;
        let need = self.config.device_buffer_bytes + pool;
        if need > cap {
            return Err(Error::invalid(format!(
                "Config.max_gpu_memory_bytes is {cap} but the pipeline needs {need}: device_buffer_bytes {} + {} batch buffers of {per_batch} bytes (samples {:?} of {} arrays); raise max_gpu_memory_bytes to {need}, or lower device_buffer_bytes, batch_size or depth",
                self.config.device_buffer_bytes,
                self.sizes.slots,
                layout.sample_shape,
                layout.dtypes.len()
            )));
        }
        Ok(())
    }

    /// Read the readable samples into `slot`: per tensor, one plan per array the samples name
    /// (each region at its place in the batch). If a read fails, each sample is read alone to
    /// find the one at fault. `None` when no sample is left (all skipped, or closed mid-read).
    fn read_into(
        &self,
        seq: u64,
        good: Vec<(Sample, Vec<ArrayHandle>)>,
        layout: &Layout,
        slot: &mut Slot,
    ) -> Result<Option<(Vec<Sample>, BatchStats)>, Error> {
        if good.is_empty() {
            return Ok(None);
        }
        self.wait_for_release(slot)?;
        let (mut plan_time, mut read_time) = (Duration::ZERO, Duration::ZERO);
        let n = good.len();
        let mut whole = Ok(());
        'tensors: for t in 0..layout.dtypes.len() {
            // The samples grouped by the array they name, each keeping its batch position.
            let mut groups: Vec<(&str, &ArrayHandle, Vec<usize>)> = Vec::new();
            for (i, (s, h)) in good.iter().enumerate() {
                let uri = s.uris[t].as_str();
                match groups.iter_mut().find(|g| g.0 == uri) {
                    Some(g) => g.2.push(i),
                    None => groups.push((uri, &h[t], vec![i])),
                }
            }
            for (_, array, positions) in groups {
                if self.closed.load(Relaxed) {
                    return Ok(None);
                }
                let regions: Vec<_> = positions.iter().map(|&i| good[i].0.region.clone()).collect();
                let times = (&mut plan_time, &mut read_time);
                if let Err(e) = self.read_group(array, &regions, &positions, n, t, layout, slot, times) {
                    whole = Err(e);
                    break 'tensors;
                }
            }
        }
        let (samples, skipped) = match whole {
            Ok(()) => (good.into_iter().map(|(s, _)| s).collect::<Vec<_>>(), 0),
            Err(_) => self.read_one_by_one(seq, good, layout, slot, (&mut plan_time, &mut read_time))?,
        };
        if samples.is_empty() {
            return Ok(None);
        }
        if let (Some(stream), Some(_)) = (&slot.stream, &self.device) {
            let ready = stream.record(false).map_err(|e| device_error("recording a batch's ready event", e))?;
            slot.ready = Some(ready);
        }
        let bytes: u64 = (0..layout.dtypes.len()).map(|t| (layout.sample_bytes(t) * samples.len()) as u64).sum();
        if let Ok(mut c) = self.stats.lock() {
            c.plan.add(plan_time, 0, 0);
            c.read.add(read_time, 0, bytes);
        }
        Ok(Some((samples, BatchStats { plan: plan_time, read: read_time, queued: Duration::ZERO, bytes, skipped })))
    }

    /// Order the next write into `slot` after the consumer's release event: on the device, the
    /// slot's stream waits for it (the engine's lane orders its writes after that stream);
    /// a host batch waits on the host (in this worker thread, never the consumer's).
    fn wait_for_release(&self, slot: &mut Slot) -> Result<(), Error> {
        let Some(event) = slot.release.take() else { return Ok(()) };
        match (&self.device, &slot.stream) {
            (Some(_), Some(s)) => {
                s.wait(&event).map_err(|e| device_error("ordering a batch write after its release", e))
            }
            _ => event.synchronize().map_err(|e| device_error("waiting for a released batch", e)),
        }
    }

    /// Plan and read one group of regions of one array into tensor `t` of `slot`, at their
    /// positions of a batch of `n`.
    #[allow(clippy::too_many_arguments)]
    fn read_group(
        &self,
        array: &ArrayHandle,
        regions: &[damacy_codec::Region],
        positions: &[usize],
        n: usize,
        t: usize,
        layout: &Layout,
        slot: &mut Slot,
        (plan_time, read_time): (&mut Duration, &mut Duration),
    ) -> Result<(), CodecError> {
        let started = Instant::now();
        let plan = self.reader.plan_at(array, regions, positions, n)?;
        *plan_time += started.elapsed();
        let started = Instant::now();
        let out = slot.output(t, layout.sample_bytes(t) * n)?;
        let r = self.reader.read_batch_into(&plan, out);
        *read_time += started.elapsed();
        r
    }

    /// After a failed batch read: each sample alone, in order, the readable ones packed at the
    /// front. Returns the samples kept and how many were skipped (or the error under `Raise`).
    fn read_one_by_one(
        &self,
        seq: u64,
        good: Vec<(Sample, Vec<ArrayHandle>)>,
        layout: &Layout,
        slot: &mut Slot,
        times: (&mut Duration, &mut Duration),
    ) -> Result<(Vec<Sample>, u64), Error> {
        let n = good.len();
        let (plan_time, read_time) = times;
        let mut kept = Vec::with_capacity(n);
        let mut skipped = 0;
        for (position, (s, handles)) in good.into_iter().enumerate() {
            if self.closed.load(Relaxed) {
                return Ok((Vec::new(), skipped));
            }
            let k = kept.len();
            let mut failed = None;
            for (t, h) in handles.iter().enumerate() {
                let r = self.read_group(
                    h,
                    std::slice::from_ref(&s.region),
                    &[k],
                    n,
                    t,
                    layout,
                    slot,
                    (plan_time, read_time),
                );
                if let Err(e) = r {
                    failed = Some(e);
                    break;
                }
            }
            match failed {
                None => kept.push(s),
                Some(e) => {
                    self.sample_failed(seq, position, &s, e)?;
                    skipped += 1;
                }
            }
        }
        Ok((kept, skipped))
    }
}

/// Queue a formed batch.
fn form(st: &mut State, samples: Vec<Sample>) {
    let seq = st.next_seq;
    st.next_seq += 1;
    st.queued_samples += samples.len();
    st.jobs.push_back(Job { seq, samples });
}
