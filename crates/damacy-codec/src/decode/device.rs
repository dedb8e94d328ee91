//! The device executor: damacy's own kernels (damacy-kernels) decode the units of arrays whose
//! chain classified as a [`DeviceChain`]; the same code drives a CUDA GPU or the host emulator
//! of the kernels.
//!
//! The executor owns N **lanes** (`ReaderConfig::lanes`), each with its own streams (copy,
//! compute, assemble), pinned staging ring and device scratch (decode slots, assemble table,
//! batch buffer), allocated once within an equal share of the budgets. A batch takes a free
//! lane from the pool and returns it when done, so batches read by different threads (the
//! Pipeline's workers) decode side by side; nothing is held across a batch that another lane
//! needs.
//!
//! Within a lane a batch **streams**: the host parse splits it into waves once (sized from the
//! device budget), then for each wave the upload goes through the staging ring on the copy
//! stream, the kernels run on the compute stream, and the assemble jobs (fills, then one copy
//! per unit and target) run on the assemble stream, each after an event of the one before; the
//! host queues wave k+1 while the device decodes wave k and assembles wave k−1. Statuses of
//! every wave and every assemble job are read back once, at the end of the batch.
//!
//! A batch also takes the lanes that are **free** when it starts: its units are dealt to them
//! by encoded size (largest first, each to the least loaded lane), every lane decodes its own
//! and writes their copies into one buffer — disjoint bytes — after the batch's fills, which
//! the first lane queues before the others start. So one `read_batch` in a loop keeps every
//! lane busy, and each unit is decoded once.
//!
//! Outputs: a caller's device buffer is written in place. A host output is assembled in the
//! first lane's batch buffer (or, larger, its whole-batch buffer) and copied down once; on one
//! lane, a batch larger than the batch buffer is assembled in windows of whole regions (units
//! shared by two windows decode in each). What the device cannot assemble — a strided output,
//! or a batch the device has no memory for — is decoded on the device, copied back per unit
//! and scattered on the host (counted in `StatsSnapshot::batches_host_scattered`).

use std::ops::Range;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use damacy_kernels::{AssembleJob, Assembler};
use damacy_kernels::{ChunkInput, DecodeConfig, Decoder};
use damacy_kernels::{Device, DeviceBuffer, Event, Stream};
use zarrs_storage::Bytes;

use super::Executor;
use crate::assemble::{Converter, Scatter};
use crate::codec::{ChainRoute, DeviceChain, DeviceCodec};
use crate::config::{ExecutorKind, ReaderConfig};
use crate::ctx::Ctx;
use crate::error::{Error, Result};
use crate::fetch::fetch_all;
use crate::plan::{BatchPlan, UnitSource};
use crate::region::{c_strides, meet};
use crate::stats::Stats;

/// Jobs a lane's assemble table holds; more jobs in a batch cost one extra status read-back
/// per table's worth.
const ASSEMBLE_JOBS: usize = 16 << 10;
/// Device bytes of the assemble job table and its statuses (`damacy_kernels::assemble`).
const ASSEMBLE_TABLE_BYTES: u64 = Assembler::device_bytes(ASSEMBLE_JOBS) as u64;
/// Pinned bytes of the assemble table's staging mirror and status read-back.
const ASSEMBLE_PINNED_BYTES: u64 = ASSEMBLE_TABLE_BYTES + 4 * ASSEMBLE_JOBS as u64;
/// Streams per decode wave.
const WAVE_STREAMS: u64 = 64 << 10;
/// The largest decoded wave (the decoder's wave buffers are limited to 4 GiB, and a wave of a
/// GiB already fills any device; a larger budget leaves the rest unused).
const MAX_WAVE: u64 = 1 << 30;
/// The largest staging ring of a lane: pieces of at most 8 MiB keep copies large enough to
/// run at full speed, and more pinned memory would not make the uploads faster.
const MAX_STAGING: u64 = 32 << 20;

/// How one lane spends its share of the budgets: a quarter of the device share for the batch
/// buffer (host outputs are assembled there), the assemble job table, and the rest for two
/// decode slots whose wave sizes follow from it; pinned memory for the staging ring, the status
/// area and the assemble table's mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) decode: DecodeConfig,
    pub(crate) batch_bytes: usize,
}

impl Budget {
    /// One lane's budget out of `lanes` equal shares of the device and host budgets.
    pub(crate) fn split(device_bytes: u64, host_bytes: u64, lanes: usize) -> Result<Self> {
        let too_small = |what: &str, have: u64| {
            Error::invalid(format!(
                "{what} is {have} bytes, too small for {lanes} lane(s) of the device executor (one decode wave each): raise it or lower lanes"
            ))
        };
        let (dev, host) = (device_bytes / lanes as u64, host_bytes / lanes as u64);
        let batch_bytes = dev / 4;
        let slots = 2u64;
        let status_streams = 4 * WAVE_STREAMS;
        let meta = DecodeConfig::default().with_wave_streams(WAVE_STREAMS as usize).table_bytes() as u64;
        let decode_budget = (dev - batch_bytes).saturating_sub(ASSEMBLE_TABLE_BYTES);
        let per_slot = decode_budget / slots;
        // Per slot: the encoded wave (src, half the decoded size), its tables (meta) and twice
        // the decoded wave (dst and its unshuffle scratch).
        let mib = 1u64 << 20;
        let dst = (per_slot.saturating_sub(meta) * 2 / 5).min(MAX_WAVE) / mib * mib;
        let src = dst / 2;
        let staging = host.saturating_sub(ASSEMBLE_PINNED_BYTES + status_streams * 8).min(MAX_STAGING) / mib * mib;
        if dst < 4 * mib {
            return Err(too_small("device_buffer_bytes", device_bytes));
        }
        if staging < 2 * mib {
            return Err(too_small("host_buffer_bytes", host_bytes));
        }
        let decode = DecodeConfig::default()
            .with_slots(slots as usize)
            .with_wave_streams(WAVE_STREAMS as usize)
            .with_wave_dst_bytes(dst as usize)
            .with_wave_src_bytes(src as usize)
            .with_staging_bytes(staging as usize)
            .with_staging_pieces(4)
            .with_batch_streams(status_streams as usize)
            .with_device_budget_bytes(decode_budget as usize)
            .with_host_budget_bytes(host.saturating_sub(ASSEMBLE_PINNED_BYTES) as usize);
        Ok(Self { decode, batch_bytes: batch_bytes as usize })
    }

    /// The most lanes, up to `wanted`, whose shares hold a lane each, with one lane's budget;
    /// the error of a single lane when not even one fits.
    pub(crate) fn lanes(device_bytes: u64, host_bytes: u64, wanted: usize) -> Result<(usize, Self)> {
        let mut n = wanted.max(1);
        loop {
            match Self::split(device_bytes, host_bytes, n) {
                Ok(b) => return Ok((n, b)),
                Err(e) if n == 1 => return Err(e),
                Err(_) => n -= 1,
            }
        }
    }
}

/// A device (CUDA or emulated) with its pool of lanes.
pub(crate) struct DeviceExecutor {
    device: Device,
    lanes: LanePool,
}

impl std::fmt::Debug for DeviceExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceExecutor")
            .field("device", &self.device.describe())
            .field("lanes", &self.lanes.count)
            .finish_non_exhaustive()
    }
}

/// The lanes; a batch takes a free one and gives it back when done.
struct LanePool {
    free: Mutex<Vec<Lane>>,
    returned: Condvar,
    count: usize,
}

/// A lane taken from the pool; goes back when dropped.
struct TakenLane<'a> {
    pool: &'a LanePool,
    lane: Option<Lane>,
}

impl LanePool {
    fn take(&self) -> Result<TakenLane<'_>> {
        let poisoned =
            || Error::internal("device executor: the lane pool's lock was poisoned by a batch that panicked");
        let mut free = self.free.lock().map_err(|_| poisoned())?;
        loop {
            if let Some(lane) = free.pop() {
                return Ok(TakenLane { pool: self, lane: Some(lane) });
            }
            free = self.returned.wait(free).map_err(|_| poisoned())?;
        }
    }
}

impl LanePool {
    /// A free lane, if one is free now.
    fn try_take(&self) -> Option<TakenLane<'_>> {
        let lane = self.free.lock().ok()?.pop()?;
        Some(TakenLane { pool: self, lane: Some(lane) })
    }
}

impl Drop for TakenLane<'_> {
    fn drop(&mut self) {
        if let Some(lane) = self.lane.take()
            && let Ok(mut free) = self.pool.free.lock()
        {
            free.push(lane);
            self.pool.returned.notify_one();
        }
    }
}

impl std::ops::Deref for TakenLane<'_> {
    type Target = Lane;
    fn deref(&self) -> &Lane {
        self.lane.as_ref().expect("a taken lane is held until dropped")
    }
}

impl std::ops::DerefMut for TakenLane<'_> {
    fn deref_mut(&mut self) -> &mut Lane {
        self.lane.as_mut().expect("a taken lane is held until dropped")
    }
}

/// One lane: its decode engine (streams, staging ring, decode slots, assemble table) and the
/// batch buffer host outputs are assembled in.
struct Lane {
    engine: Engine,
    batch: DeviceBuffer,
    /// A buffer of a whole host batch, for `read_host` batches larger than `batch` whose windows
    /// would decode shared units again: allocated on the first such batch (outside the budgets,
    /// like the caller's own buffer on the device route), grown when a larger one comes, kept.
    whole: Option<DeviceBuffer>,
}

/// A lane's streams and what runs on them.
struct Engine {
    /// Copy stream, compute stream, staging ring, wave slots, status area.
    decoder: Decoder,
    /// The compute stream (a clone of the decoder's).
    compute: Stream,
    /// Assemble stream and job table.
    assembler: Assembler,
}

/// The work of one pass of a lane: units to decode, and where the targets of `window` go.
struct LaneJob<'a> {
    plan: &'a BatchPlan,
    chain: DeviceChain,
    /// Plan unit of each input.
    units: Vec<usize>,
    inputs: Vec<ChunkInput<'a>>,
    /// Units whose key turned out missing (fill).
    missing: &'a [usize],
    window: Window,
    /// Whether this pass queues the window's fills (false when another lane's pass did).
    fills: bool,
    /// An event the lane's assembly waits for before its first job (the fills of another lane,
    /// the caller's prior work).
    after: Option<&'a Event>,
}

/// Which targets one pass writes and where: output byte `o` of those targets goes to byte
/// `o - lo + base` of the destination buffer.
#[derive(Clone, Debug)]
struct Window {
    targets: Range<usize>,
    lo: usize,
    base: usize,
}

impl Window {
    fn dst(&self, output_offset: usize) -> usize {
        output_offset - self.lo + self.base
    }
}

impl Lane {
    fn new(device: &Device, budget: &Budget, n_compute_threads: usize, index: usize) -> Result<Self> {
        let name = format!("lane {index}");
        let stream = |what: &str| {
            device
                .new_stream_named(&format!("{name} {what}"))
                .map_err(|e| Error::device(format!("making the streams of {name}"), e))
        };
        let compute = stream("compute")?;
        let config = budget.decode.clone().with_n_compute_threads(n_compute_threads);
        let decoder = Decoder::on_stream(device, config, compute.clone(), &name)
            .map_err(|e| Error::device(format!("allocating the decode waves of {name}"), e))?;
        let assembler = Assembler::on_stream(device, ASSEMBLE_JOBS, stream("assemble")?)
            .map_err(|e| Error::device(format!("allocating the assemble table of {name}"), e))?;
        let batch = device
            .alloc(budget.batch_bytes)
            .map_err(|e| Error::device(format!("allocating the batch buffer of {name}"), e))?;
        Ok(Self { engine: Engine { decoder, compute, assembler }, batch, whole: None })
    }
}

impl Engine {
    /// Streams `job` into `dst` (see the module docs); on an error, waits for the lane's
    /// streams so that its buffers are free again.
    fn run(&mut self, ctx: &Ctx<'_>, job: &LaneJob<'_>, dst: &mut DeviceBuffer) -> Result<()> {
        let r = self.stream_waves(ctx, job, dst).and_then(|()| self.finish(ctx, job));
        if r.is_err() {
            self.decoder.abandon_batch();
            self.assembler.abandon();
        }
        r
    }

    /// Queues the fills, then every wave and its copies; waits for nothing.
    fn stream_waves(&mut self, ctx: &Ctx<'_>, job: &LaneJob<'_>, dst: &mut DeviceBuffer) -> Result<()> {
        let plan = job.plan;
        let mut schedule = self.decoder.schedule(&job.inputs);
        ctx.stats.add_device_parse(schedule.parse_time());
        if let Some((i, e)) = schedule.take_rejected().into_iter().next() {
            return Err(Error::decode_from(plan.unit_location(job.units[i]), e));
        }
        if let Some(after) = job.after {
            let asm = self.assembler.stream();
            asm.set_label("wait for the batch's fills");
            asm.wait(after).map_err(|e| Error::device("ordering assembly after the batch's fills", e))?;
        }
        if job.fills {
            self.queue_fills(job, dst)?;
        }
        for k in 0..schedule.waves() {
            let wave =
                self.decoder.queue_wave(&job.inputs, &schedule, k).map_err(|e| Error::device("decoding a batch", e))?;
            let decoded: Vec<(usize, usize)> = wave.chunks.iter().map(|(i, r)| (job.units[*i], r.start)).collect();
            let asm = self.assembler.stream().clone();
            asm.set_label(&format!("assemble wave {}", k + 1));
            let ready = self.compute.record(false).map_err(|e| Error::device("recording a decoded wave", e))?;
            asm.wait(&ready).map_err(|e| Error::device("ordering assembly after decoding", e))?;
            let (_, copies) = assemble_jobs(job, &decoded);
            check_jobs(self.assembler.queue(wave.output, dst, &copies), plan)?;
            let read = asm.record(false).map_err(|e| Error::device("recording an assembled wave", e))?;
            self.decoder.release_wave(read);
            ctx.stats.add_device_waves(1);
        }
        Ok(())
    }

    /// Queues the fills of `job`'s window on the assemble stream.
    fn queue_fills(&mut self, job: &LaneJob<'_>, dst: &mut DeviceBuffer) -> Result<()> {
        let (fills, _) = assemble_jobs(job, &[]);
        self.assembler.stream().set_label("assemble fills");
        check_jobs(self.assembler.queue_fills(dst, &fills), job.plan)
    }

    /// Reads every wave's and every assemble job's statuses back (one wait each, at the end):
    /// the first failed unit, by plan order, is the error, with its location.
    fn finish(&mut self, ctx: &Ctx<'_>, job: &LaneJob<'_>) -> Result<()> {
        let plan = job.plan;
        let done = self.decoder.finish_batch().map_err(|e| Error::device("decoding a batch", e))?;
        ctx.stats.add_bytes_uploaded(done.stats.bytes_uploaded as u64);
        if let Some((i, e)) = done.failed.into_iter().next() {
            return Err(Error::decode_from(plan.unit_location(job.units[i]), e));
        }
        let failed = self.assembler.finish().map_err(|e| Error::device("assembling a batch", e))?;
        if let Some(e) = failed.into_iter().next() {
            return Err(Error::device(format!("assembling a batch of array {}", plan.array.path), e));
        }
        count_decoded(ctx.stats, job.units.len(), done.stats.bytes_decoded);
        Ok(())
    }
}

/// The outcome of queueing assemble jobs: an invalid job (the host's own check) is an error.
fn check_jobs(results: damacy_kernels::Result<Vec<damacy_kernels::Result<()>>>, plan: &BatchPlan) -> Result<()> {
    let results = results.map_err(|e| Error::device("assembling a batch", e))?;
    match results.into_iter().find_map(std::result::Result::err) {
        Some(e) => Err(Error::device(format!("assembling a batch of array {}", plan.array.path), e)),
        None => Ok(()),
    }
}

/// What the executor choice came to: a device, or the CPU and why.
pub(crate) enum Selected {
    Device(Box<DeviceExecutor>),
    Cpu(String),
}

/// The units of a batch that have bytes, as the decoder's inputs.
struct Encoded {
    /// Plan unit of each input.
    units: Vec<usize>,
    bytes: Vec<Bytes>,
    /// Units whose key turned out missing (fill).
    missing: Vec<usize>,
}

impl Encoded {
    fn split(plan: &BatchPlan, fetched: Vec<Option<Bytes>>) -> Self {
        let mut out = Self { units: Vec::new(), bytes: Vec::new(), missing: Vec::new() };
        for (request, bytes) in plan.requests.iter().zip(fetched) {
            match bytes {
                Some(b) => {
                    out.units.push(request.unit);
                    out.bytes.push(b);
                }
                None => out.missing.push(request.unit),
            }
        }
        out
    }

    /// The decoder's inputs of the units `keep` selects (by plan unit): every unit decodes to
    /// `expected` bytes (zstd frames without a content size, gzip and zlib streams take it from
    /// there); zstd content checksums, gzip CRC32/ISIZE and zlib Adler-32 are verified when
    /// `verify`.
    fn inputs(
        &self,
        chain: DeviceChain,
        expected: usize,
        verify: bool,
        keep: impl Fn(usize) -> bool,
    ) -> (Vec<usize>, Vec<ChunkInput<'_>>) {
        self.units
            .iter()
            .zip(&self.bytes)
            .filter(|(u, _)| keep(**u))
            .map(|(&u, b)| {
                let input = match chain.codec {
                    DeviceCodec::Blosc => ChunkInput::blosc(b),
                    DeviceCodec::Zstd => ChunkInput::zstd(b),
                    DeviceCodec::Gzip => ChunkInput::gzip(b),
                    DeviceCodec::Zlib => ChunkInput::zlib(b),
                    DeviceCodec::Raw => ChunkInput::raw(b),
                };
                let input = input.with_expected_len(expected);
                let input = if verify { input.with_checksum_verification() } else { input };
                (u, if chain.crc32c { input.with_crc32c() } else { input })
            })
            .unzip()
    }
}

/// A fetched batch, ready for the lanes.
struct Fetched<'p> {
    plan: &'p BatchPlan,
    chain: DeviceChain,
    enc: Encoded,
    expected: usize,
}

impl<'p> Fetched<'p> {
    fn new(ctx: &Ctx<'_>, plan: &'p BatchPlan) -> Result<Self> {
        let chain = DeviceExecutor::chain(plan)?;
        let enc = Encoded::split(plan, fetch_all(plan, ctx)?);
        let planned_fills = plan.units.iter().filter(|u| u.source == UnitSource::Fill).count();
        ctx.stats.add_units_filled((planned_fills + enc.missing.len()) as u64);
        let expected = plan.array.decode_shape().iter().product::<u64>() as usize * plan.array.dtype.size();
        Ok(Self { plan, chain, enc, expected })
    }

    /// The lane job of the units that meet `window`'s targets (with its fills).
    fn job(&self, window: Window) -> LaneJob<'_> {
        let units = &self.plan.units;
        let t = window.targets.clone();
        let all = t.start == 0 && t.end == self.plan.targets.len();
        self.job_of(window, |u| all || units[u].targets.iter().any(|x| t.contains(&(*x as usize))))
    }

    /// The lane job of the units `keep` selects (by plan unit), into `window` (with its fills).
    fn job_of(&self, window: Window, keep: impl Fn(usize) -> bool) -> LaneJob<'_> {
        let verify = self.plan.array.options().validate_checksums;
        let (units, inputs) = self.enc.inputs(self.chain, self.expected, verify, keep);
        LaneJob {
            plan: self.plan,
            chain: self.chain,
            units,
            inputs,
            missing: &self.enc.missing,
            window,
            fills: true,
            after: None,
        }
    }

    /// The units with bytes dealt to `lanes` lanes, largest encoded first, each to the lane
    /// with the fewest encoded bytes so far (so the lanes' decoding is even): per plan unit,
    /// its lane.
    fn deal(&self, lanes: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.enc.units.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(self.enc.bytes[k].len()));
        let mut load = vec![0usize; lanes];
        let mut lane_of = vec![usize::MAX; self.plan.units.len()];
        for k in order {
            let l = (0..lanes).min_by_key(|&l| load[l]).unwrap_or(0);
            load[l] += self.enc.bytes[k].len();
            lane_of[self.enc.units[k]] = l;
        }
        lane_of
    }
}

impl DeviceExecutor {
    /// Pick the executor the configuration asks for (see [`choose`]): the CPU with the reason
    /// when `Auto` finds no usable GPU, an error when `Gpu` does not, and an error under either
    /// when a GPU is there but the binding is wrong (ARCHITECTURE §5). Every device buffer of
    /// every lane is allocated here, within `device_buffer_bytes` and `host_buffer_bytes` (see
    /// [`Budget`]).
    pub(crate) fn select(read: &ReaderConfig) -> Result<Selected> {
        let (n_lanes, budget) = Budget::lanes(read.device_buffer_bytes, read.host_buffer_bytes, read.lanes)?;
        let device = match choose(read.executor, read.device, probe_cuda)? {
            Choice::Cpu(reason) => return Ok(Selected::Cpu(reason)),
            Choice::Emulated => emulated()?,
            // `Device::cuda` retains that device's primary context and checks once more that
            // a current context, if any, is that one.
            Choice::Cuda(ordinal) => match opened(read.executor, cuda(Some(ordinal)))? {
                Ok(device) => device,
                Err(reason) => return Ok(Selected::Cpu(reason)),
            },
        };
        // The host parse of each lane shares the reader's compute threads between the lanes.
        let threads = (read.n_compute_threads / n_lanes).max(1);
        let lanes = (0..n_lanes).map(|i| Lane::new(&device, &budget, threads, i)).collect::<Result<Vec<_>>>()?;
        let lanes = LanePool { free: Mutex::new(lanes), returned: Condvar::new(), count: n_lanes };
        Ok(Selected::Device(Box::new(Self { device, lanes })))
    }

    /// The device and its lanes, described.
    pub(crate) fn describe(&self) -> String {
        let n = self.lanes.count;
        format!("{}, {n} lane{}", self.device.describe(), if n == 1 { "" } else { "s" })
    }

    /// The device.
    pub(crate) fn device(&self) -> &Device {
        &self.device
    }

    /// Copy host bytes into a caller's device buffer, ordered before work queued on `stream`.
    pub(crate) fn upload(
        &self,
        host: &[u8],
        (buffer, offset): (&mut DeviceBuffer, usize),
        stream: &Stream,
    ) -> Result<()> {
        self.device
            .upload_on(stream, host, buffer, offset)
            .map_err(|e| Error::device("copying a batch to the device", e))
    }

    fn chain(plan: &BatchPlan) -> Result<DeviceChain> {
        match &plan.array.route {
            ChainRoute::Device(c) => Ok(*c),
            ChainRoute::Cpu { reason } => Err(Error::invalid(format!(
                "array {} decodes on the CPU ({reason}); the reader routes it there",
                plan.array.path
            ))),
        }
    }

    /// Takes windows (with their bytes of the output) from `queue` until it is empty, each
    /// streamed through `lane`, assembled in its batch buffer and copied down once. On an error
    /// the queue is emptied, so the other lanes stop too.
    fn run_windows(
        &self,
        lane: &mut Lane,
        ctx: &Ctx<'_>,
        batch: &Fetched<'_>,
        queue: &Mutex<Vec<(Window, &mut [u8])>>,
    ) -> Result<()> {
        let Lane { engine, batch: buffer, .. } = lane;
        let poisoned =
            || Error::internal("device executor: the window queue's lock was poisoned by a lane that panicked");
        loop {
            let Some((window, out)) = queue.lock().map_err(|_| poisoned())?.pop() else { return Ok(()) };
            let started = Instant::now();
            let r = engine.run(ctx, &batch.job(window), buffer).and_then(|()| {
                ctx.stats.add_decode(started.elapsed());
                self.download(engine, buffer, out, ctx)
            });
            if r.is_err() {
                queue.lock().map_err(|_| poisoned())?.clear();
                return r;
            }
        }
    }

    /// Copies the first `out.len()` bytes of `buffer` down into `out` after the lane's
    /// assembly (counted in `download` and `bytes_downloaded`).
    fn download(&self, engine: &Engine, buffer: &DeviceBuffer, out: &mut [u8], ctx: &Ctx<'_>) -> Result<()> {
        let started = Instant::now();
        self.device
            .download_on(engine.assembler.stream(), buffer, 0, out)
            .map_err(|e| Error::device("copying a batch to the host", e))?;
        ctx.stats.add_download(started.elapsed());
        ctx.stats.add_bytes_downloaded(out.len() as u64);
        Ok(())
    }

    /// A dense host batch that no window plan serves: decoded and assembled on the device in one
    /// buffer of the batch's size (each unit decoded once) and copied down once. `Ok(false)` when
    /// the device cannot hold such a buffer (the caller scatters on the host).
    fn read_whole(&self, lane: &mut Lane, ctx: &Ctx<'_>, batch: &Fetched<'_>, out: &mut [u8]) -> Result<bool> {
        let plan = batch.plan;
        if lane.whole.as_ref().is_none_or(|b| b.len() < out.len()) {
            lane.whole = None; // freed before the larger one is allocated
            match self.device.alloc(out.len()) {
                Ok(b) => lane.whole = Some(b),
                Err(_) => return Ok(false),
            }
        }
        let Lane { engine, whole, .. } = lane;
        let Some(buffer) = whole.as_mut() else { return Ok(false) };
        let started = Instant::now();
        let window = Window { targets: 0..plan.targets.len(), lo: 0, base: 0 };
        prefaulting(out, ctx.compute, || engine.run(ctx, &batch.job(window), buffer))?;
        ctx.stats.add_decode(started.elapsed());
        self.download(engine, buffer, out, ctx)?;
        Ok(true)
    }

    /// Decode every input to the host (wave by wave, on `lane`) and scatter each unit into
    /// `out`: for host outputs the device cannot assemble.
    fn decode_to_host_and_scatter(lane: &mut Lane, ctx: &Ctx<'_>, batch: &Fetched<'_>, out: &mut [u8]) -> Result<()> {
        let (plan, chain, enc) = (batch.plan, batch.chain, &batch.enc);
        ctx.stats.add_batches_host_scattered(1);
        let started = Instant::now();
        let (_, inputs) = enc.inputs(chain, batch.expected, plan.array.options().validate_checksums, |_| true);
        let decoded = lane.engine.decoder.decode_to_host(&inputs).map_err(|e| Error::device("decoding a batch", e))?;
        ctx.stats.add_decode(started.elapsed());
        ctx.stats.add_device_parse(decoded.stats.decompress_parse);
        ctx.stats.add_bytes_uploaded(decoded.stats.bytes_uploaded as u64);
        ctx.stats.add_device_waves(decoded.stats.waves as u64);
        let scatter = Scatter::new(plan, out);
        let started = Instant::now();
        ctx.compute.install(|| scatter.prefill());
        for &u in &enc.missing {
            scatter.fill(u);
        }
        let size = plan.array.dtype.size();
        let mut chunks = Vec::with_capacity(decoded.chunks.len());
        for (k, result) in decoded.chunks.into_iter().enumerate() {
            let u = enc.units[k];
            let mut bytes = result.map_err(|e| Error::decode_from(plan.unit_location(u), e))?;
            if chain.big_endian {
                for element in bytes.chunks_exact_mut(size) {
                    element.reverse();
                }
            }
            chunks.push(bytes);
        }
        {
            use rayon::prelude::*;
            ctx.compute.install(|| chunks.par_iter().enumerate().for_each(|(k, b)| scatter.unit(enc.units[k], b)));
        }
        ctx.stats.add_assemble(started.elapsed());
        count_decoded(ctx.stats, chunks.len(), chunks.iter().map(Vec::len).sum());
        Ok(())
    }
}

/// Runs `decode` on this thread while the pages of `out` are faulted in on `pool`
/// ([`prefault`]), so that the device-to-host copy after it does not fault them one at a time.
fn prefaulting<T: Send>(
    out: &mut [u8],
    pool: &rayon::ThreadPool,
    decode: impl FnOnce() -> Result<T> + Send,
) -> Result<T> {
    pool.in_place_scope(|s| {
        s.spawn(|_| prefault(out));
        decode()
    })
}

/// Faults the pages of `out` in (a read and a write back of one byte per 4 KiB, so contents are
/// kept) on the current rayon pool, in pieces of 2 MiB. A host output the reader just allocated
/// is zeroed memory the kernel maps on first touch; touched by the device-to-host copy instead,
/// its faults would run one at a time on the copying thread (a GiB takes ~0.6 s on one core).
fn prefault(out: &mut [u8]) {
    use rayon::prelude::*;
    const PAGE: usize = 4 << 10;
    out.par_chunks_mut(2 << 20).for_each(|piece| {
        for page in piece.chunks_mut(PAGE) {
            // SAFETY: `page[0]` is a valid, initialised byte of an exclusive borrow; the volatile
            // pair keeps the compiler from dropping a store of the value it read.
            unsafe {
                let p = page.as_mut_ptr();
                std::ptr::write_volatile(p, std::ptr::read_volatile(p));
            }
        }
    });
}

/// The byte range of the output each target of a dense plan covers (padding included), or
/// `None` for a target that is not a contiguous block of positive strides.
fn target_spans(plan: &BatchPlan) -> Option<Vec<Range<usize>>> {
    let size = plan.array.out_dtype().size();
    plan.targets
        .iter()
        .map(|t| {
            let b = t.fill_box();
            let mut hi = b.dst_offset + size;
            for (n, s) in b.count.iter().zip(&b.dst_strides) {
                let s = usize::try_from(*s).ok()?;
                hi += (*n as usize).checked_sub(1)? * s;
            }
            Some(b.dst_offset..hi)
        })
        .collect()
}

/// Consecutive targets grouped into windows of at most `cap` output bytes, each with the end
/// of its last byte; `None` when a target alone is larger, or the targets are not in output
/// order.
fn windows(spans: &[Range<usize>], cap: usize) -> Option<Vec<(Window, usize)>> {
    let mut out = Vec::new();
    let mut start = 0usize;
    while start < spans.len() {
        let lo = spans[start].start;
        let (mut end, mut hi) = (start, lo);
        while end < spans.len() && spans[end].start >= hi && spans[end].end - lo <= cap {
            hi = spans[end].end;
            end += 1;
        }
        if end == start {
            return None;
        }
        out.push((Window { targets: start..end, lo, base: 0 }, hi));
        start = end;
    }
    Some(out)
}

/// Windows, each with the end of its last byte in the output.
type Windows = Vec<(Window, usize)>;

/// The windows a host output of `spans` is assembled in, with the lanes to use (at most
/// `lanes`): a few windows per lane (even load) if units shared by several windows (which
/// decode in each) add at most 5 % to the decoding, else one per lane or windows of a whole
/// buffer on one lane if they add at most a quarter; failing that, the one that adds least, if that is less than
/// decoding every unit twice; else `None` (decode each unit once and scatter on the host).
fn choose_windows(
    plan: &BatchPlan,
    spans: &[Range<usize>],
    buffer_len: usize,
    lanes: usize,
) -> Option<(Windows, usize)> {
    let largest = spans.iter().map(ExactSizeIterator::len).max().unwrap_or(0);
    let split = |pieces: usize| windows(spans, buffer_len.min(plan.nbytes.div_ceil(pieces).max(largest)));
    // (windows, lanes, the most extra decoding taken at once, in twentieths of the units)
    let mut candidates = Vec::new();
    if lanes > 1 {
        candidates.push((split(4 * lanes), lanes, 1));
        candidates.push((split(lanes), lanes, 5));
    }
    candidates.push((split(1), 1, 5));
    let units = plan.units.len().max(1);
    let mut best: Option<(Windows, usize, usize)> = None;
    for (w, n, extra) in candidates {
        let Some(w) = w else { continue };
        let decodes = decodes_over(plan, &w);
        if 20 * decodes <= (20 + extra) * units {
            return Some((w, n));
        }
        if decodes < 2 * units && best.as_ref().is_none_or(|b| decodes < b.2) {
            best = Some((w, n, decodes));
        }
    }
    best.map(|(w, n, _)| (w, n))
}

/// How many unit decodes `windows` take: each unit once per window its targets fall in.
fn decodes_over(plan: &BatchPlan, windows: &[(Window, usize)]) -> usize {
    let mut window_of = vec![0usize; plan.targets.len()];
    for (k, (w, _)) in windows.iter().enumerate() {
        for t in w.targets.clone() {
            window_of[t] = k;
        }
    }
    plan.units
        .iter()
        .map(|u| {
            let mut seen: Vec<usize> = u.targets.iter().map(|&t| window_of[t as usize]).collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len()
        })
        .sum()
}

fn count_decoded(stats: &Stats, units: usize, bytes: usize) {
    stats.add_units_decoded(units as u64);
    stats.add_units_decoded_device(units as u64);
    stats.add_bytes_decoded(bytes as u64);
}

/// The bits of the fill value in the output dtype, as the assemble kernel takes them.
fn fill_bits(plan: &BatchPlan, conv: Converter) -> u64 {
    let mut bits = [0u8; 8];
    let one = conv.one(&plan.array.fill_value);
    bits[..one.len()].copy_from_slice(&one);
    u64::from_le_bytes(bits)
}

/// The assemble jobs of `job` for the `decoded` units (plan unit, byte offset in the decoder's
/// output): the fills (every target of the window that units do not wholly cover: padded, or
/// touching a unit without bytes), then one copy per (decoded unit, target of the window)
/// pair. Fills and copies go to separate calls: jobs of one call write disjoint bytes.
fn assemble_jobs(job: &LaneJob<'_>, decoded: &[(usize, usize)]) -> (Vec<AssembleJob>, Vec<AssembleJob>) {
    let (plan, w) = (job.plan, &job.window);
    let conv = Converter { from: plan.array.dtype, to: plan.array.out_dtype() };
    let (src_dtype, dst_dtype) = (conv.from, conv.to);
    let (fs, ts) = (conv.from.size(), conv.to.size() as isize);
    let unit_shape = plan.array.decode_shape();
    let unit_strides = c_strides(unit_shape);
    let mut fills = Vec::new();
    if decoded.is_empty() {
        let mut partial = vec![false; plan.targets.len()];
        for (u, unit) in plan.units.iter().enumerate() {
            if unit.source == UnitSource::Fill || job.missing.contains(&u) {
                for &t in &unit.targets {
                    partial[t as usize] = true;
                }
            }
        }
        let bits = fill_bits(plan, conv);
        for t in w.targets.clone() {
            let target = &plan.targets[t];
            if !(partial[t] || target.padded.is_some()) {
                continue;
            }
            let b = target.fill_box();
            if b.count.contains(&0) {
                continue;
            }
            fills.push(AssembleJob {
                src_offset: 0,
                dst_offset: w.dst(b.dst_offset),
                shape: b.count.clone(),
                src_strides: vec![0; b.count.len()],
                dst_strides: b.dst_strides.iter().map(|s| (*s / ts) as i64).collect(),
                src_dtype: dst_dtype,
                dst_dtype,
                big_endian: false,
                fill_bits: Some(bits),
            });
        }
    }
    let mut copies = Vec::new();
    for &(u, offset) in decoded {
        let unit = &plan.units[u];
        for &t in &unit.targets {
            if !w.targets.contains(&(t as usize)) {
                continue;
            }
            let target = &plan.targets[t as usize];
            let Some(m) = meet(target, &unit.origin, unit_shape) else { continue };
            let src_elem: u64 = m.src_start.iter().zip(&unit_strides).map(|(s, st)| s * st).sum();
            let dst: isize = target.dst_offset as isize
                + m.first.iter().zip(&target.dst_strides).map(|(i, s)| *i as isize * s).sum::<isize>();
            copies.push(AssembleJob {
                src_offset: offset + src_elem as usize * fs,
                dst_offset: w.dst(dst as usize),
                shape: m.count.to_vec(),
                src_strides: unit_strides.iter().zip(&target.step).map(|(s, step)| (s * step) as i64).collect(),
                dst_strides: target.dst_strides.iter().map(|s| (*s / ts) as i64).collect(),
                src_dtype,
                dst_dtype,
                big_endian: job.chain.big_endian,
                fill_bits: None,
            });
        }
    }
    (fills, copies)
}

impl Executor for DeviceExecutor {
    /// Decodes and assembles on the device and copies the batch down once (per window when it
    /// is assembled in windows). A batch that more than one lane can take now is split by
    /// units over those lanes ([`DeviceExecutor::read_split`]), in the first lane's batch
    /// buffer, or else its whole-batch buffer; a batch on one lane is assembled in windows of
    /// whole regions (see the module docs).
    fn read_host(&self, ctx: &Ctx<'_>, plan: &BatchPlan, out: &mut [u8]) -> Result<()> {
        let batch = Fetched::new(ctx, plan)?;
        let mut lanes = vec![self.lanes.take()?];
        let spans = if plan.dense { target_spans(plan) } else { None };
        if spans.is_some() {
            self.take_free_lanes(&mut lanes, batch.enc.units.len());
        }
        if lanes.len() > 1 && self.split_buffer(&mut lanes[0], out.len()) {
            let started = Instant::now();
            let buffer = lanes[0].whole.as_ref().filter(|_| out.len() > lanes[0].batch.len());
            let buffer = buffer.unwrap_or(&lanes[0].batch);
            let (ptr, len) = (buffer.device_ptr(), buffer.len());
            prefaulting(out, ctx.compute, || self.read_split(&mut lanes, ctx, &batch, (ptr, len, 0), None))?;
            ctx.stats.add_decode(started.elapsed());
            let Lane { engine, batch: small, whole } = &mut *lanes[0];
            let buffer = whole.as_ref().filter(|_| out.len() > small.len()).unwrap_or(small);
            return self.download(engine, buffer, out, ctx);
        }
        let buffer_len = lanes[0].batch.len();
        let Some((windows, n)) = spans.as_ref().and_then(|s| choose_windows(plan, s, buffer_len, lanes.len())) else {
            lanes.truncate(1);
            if spans.is_some() && self.read_whole(&mut lanes[0], ctx, &batch, out)? {
                return Ok(());
            }
            return Self::decode_to_host_and_scatter(&mut lanes[0], ctx, &batch, out);
        };
        lanes.truncate(n);
        // Each window with its part of `out`, the first last (popped first).
        let mut parts: Vec<(Window, &mut [u8])> = Vec::with_capacity(windows.len());
        let (mut rest, mut at) = (out, 0usize);
        for (window, hi) in windows {
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(window.lo - at);
            let (part, tail) = tail.split_at_mut(hi - window.lo);
            parts.push((window, part));
            (rest, at) = (tail, hi);
        }
        parts.reverse();
        let queue = Mutex::new(parts);
        if lanes.len() == 1 {
            self.run_windows(&mut lanes[0], ctx, &batch, &queue)?;
        } else {
            std::thread::scope(|s| {
                let runs: Vec<_> =
                    lanes.iter_mut().map(|lane| s.spawn(|| self.run_windows(lane, ctx, &batch, &queue))).collect();
                runs.into_iter().try_for_each(|r| {
                    r.join().unwrap_or_else(|_| Err(Error::internal("device executor: a lane's thread panicked")))
                })
            })?;
        }
        Ok(())
    }

    /// Decodes and assembles into the caller's buffer, stream-ordered with `stream`: the
    /// lanes' writes wait for the work queued there before the call, and work queued there
    /// after the call sees the batch. Lanes that are free now join the batch
    /// ([`DeviceExecutor::read_split`]).
    fn read_device(
        &self,
        ctx: &Ctx<'_>,
        plan: &BatchPlan,
        (buffer, offset): (&mut DeviceBuffer, usize),
        stream: &Stream,
    ) -> Result<()> {
        let batch = Fetched::new(ctx, plan)?;
        let mut lanes = vec![self.lanes.take()?];
        self.take_free_lanes(&mut lanes, batch.enc.units.len());
        let started = Instant::now();
        let before = stream.record(false).map_err(|e| Error::device("recording the caller's stream", e))?;
        let ready =
            self.read_split(&mut lanes, ctx, &batch, (buffer.device_ptr(), buffer.len(), offset), Some(&before))?;
        for event in &ready {
            stream.wait(event).map_err(|e| Error::device("ordering the caller's stream after the batch", e))?;
        }
        ctx.stats.add_decode(started.elapsed());
        Ok(())
    }
}

impl DeviceExecutor {
    /// Adds the lanes free now to `lanes`, up to one per unit to decode.
    fn take_free_lanes<'a>(&'a self, lanes: &mut Vec<TakenLane<'a>>, units: usize) {
        while lanes.len() < self.lanes.count.min(units) {
            match self.lanes.try_take() {
                Some(lane) => lanes.push(lane),
                None => break,
            }
        }
    }

    /// Whether `lane` has a buffer of `len` bytes for a split batch: its batch buffer, or its
    /// whole-batch buffer (allocated, or grown, now if the device has the memory).
    fn split_buffer(&self, lane: &mut Lane, len: usize) -> bool {
        if len <= lane.batch.len() || lane.whole.as_ref().is_some_and(|b| b.len() >= len) {
            return true;
        }
        lane.whole = None; // freed before the larger one is allocated
        lane.whole = self.device.alloc(len).ok();
        lane.whole.is_some()
    }

    /// Decodes `batch` on `lanes` side by side into the device memory `dst` = (address,
    /// length, base: where output byte 0 goes), which the caller keeps alive and does not
    /// touch until this returns. The units are dealt to the lanes by encoded size
    /// ([`Fetched::deal`]); the first lane queues the fills, and every lane's assembly waits
    /// for them (and for `before`), then writes the copies of its own units — disjoint bytes.
    /// Returns when every lane's statuses are read back, with an event per lane after its
    /// last write.
    fn read_split(
        &self,
        lanes: &mut [TakenLane<'_>],
        ctx: &Ctx<'_>,
        batch: &Fetched<'_>,
        (ptr, len, base): (u64, usize, usize),
        before: Option<&Event>,
    ) -> Result<Vec<Event>> {
        if lanes.is_empty() {
            return Err(Error::internal("device executor: a split batch was given no lane"));
        }
        let plan = batch.plan;
        let lane_of = batch.deal(lanes.len());
        let window = || Window { targets: 0..plan.targets.len(), lo: 0, base };
        // SAFETY (each view): the memory outlives the views (the caller's contract); the lanes
        // write disjoint bytes of it (one copy per unit and target; the fills before, ordered
        // by the event below), and every write is finished when the views drop (each lane's
        // statuses are read back before it returns).
        let view = || unsafe { self.device.borrow_memory(ptr, len) };
        let mut first = batch.job_of(window(), |u| lane_of[u] == 0);
        let filled = {
            let engine = &mut lanes[0].engine;
            let r = before
                .map_or(Ok(()), |e| engine.assembler.stream().wait(e))
                .map_err(|e| Error::device("ordering the batch after the caller's stream", e))
                .and_then(|()| engine.queue_fills(&first, &mut view()))
                .and_then(|()| {
                    engine.assembler.stream().record(false).map_err(|e| Error::device("recording the batch's fills", e))
                });
            if r.is_err() {
                engine.assembler.abandon();
            }
            r?
        };
        first.fills = false;
        let run = |lane: &mut Lane, job: LaneJob<'_>| -> Result<Event> {
            let engine = &mut lane.engine;
            engine.run(ctx, &job, &mut view())?;
            engine.assembler.stream().record(false).map_err(|e| Error::device("recording a lane's batch", e))
        };
        let (head, rest) = lanes.split_first_mut().ok_or_else(|| Error::internal("device executor: no lane"))?;
        if rest.is_empty() {
            return Ok(vec![run(head, first)?]);
        }
        std::thread::scope(|s| {
            let others: Vec<_> = rest
                .iter_mut()
                .enumerate()
                .map(|(k, lane)| {
                    let mut job = batch.job_of(window(), |u| lane_of[u] == k + 1);
                    (job.fills, job.after) = (false, Some(&filled));
                    s.spawn(move || run(lane, job))
                })
                .collect();
            let mut ready = vec![run(head, first)];
            ready.extend(others.into_iter().map(|r| {
                r.join().unwrap_or_else(|_| Err(Error::internal("device executor: a lane's thread panicked")))
            }));
            ready.into_iter().collect()
        })
    }
}

#[cfg(feature = "emulate")]
#[allow(clippy::unnecessary_wraps)] // one signature with the build that has no emulator
fn emulated() -> Result<Device> {
    Ok(Device::emulated(0))
}

#[cfg(not(feature = "emulate"))]
fn emulated() -> Result<Device> {
    Err(Error::Unsupported("executor emulated: this build has no kernel emulator (cargo feature `emulate`)".into()))
}

/// What a look at the machine found for a CUDA executor, before any context is retained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CudaProbe {
    /// This build has no CUDA backend (cargo feature `cuda`).
    #[cfg_attr(feature = "cuda", allow(dead_code))] // built by the probe of builds without it
    NotBuilt,
    /// No usable GPU, and why: no driver library, `cuInit` failed, no device.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // built by the CUDA probe
    Absent(String),
    /// `count` devices; `current`: the ordinal of the device whose context is current on the
    /// calling thread, if any.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Present { count: usize, current: Option<usize> },
}

/// Where decoding goes, as [`choose`] decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The CPU, and why.
    Cpu(String),
    /// The kernel emulator.
    Emulated,
    /// The CUDA device of this ordinal.
    Cuda(usize),
}

/// The executor for `executor`, `Config.device` (`requested`) and what `probe` finds (called
/// only for `Auto` and `Gpu`). A pure function of its inputs:
///
/// | machine                          | `Auto`                  | `Gpu`                     |
/// |----------------------------------|-------------------------|---------------------------|
/// | build without CUDA               | CPU, with the reason    | `Unsupported`             |
/// | no driver, or no device          | CPU, with the reason    | `Device` (no usable GPU)  |
/// | `Config.device` ≥ device count   | `InvalidArgument`       | `InvalidArgument`         |
/// | `Config.device=N`, context of M  | `InvalidArgument`       | `InvalidArgument`         |
/// | no `Config.device`, no context   | `InvalidArgument`       | `InvalidArgument`         |
/// | otherwise                        | that GPU                | that GPU                  |
///
/// With a GPU present, `Auto` binds as `Gpu` does (ARCHITECTURE §5): a binding that is wrong is
/// the caller's to fix, not a reason to decode quietly on the CPU.
pub(crate) fn choose(
    executor: ExecutorKind,
    requested: Option<usize>,
    probe: impl FnOnce() -> CudaProbe,
) -> Result<Choice> {
    let gpu = match executor {
        ExecutorKind::Cpu => return Ok(Choice::Cpu("the CPU executor was chosen".into())),
        ExecutorKind::Emulated => return Ok(Choice::Emulated),
        ExecutorKind::Gpu => true,
        ExecutorKind::Auto => false,
    };
    let absent = |reason: String| {
        if gpu {
            Err(Error::device("executor gpu", damacy_kernels::Error::NoDevice(reason)))
        } else {
            Ok(Choice::Cpu(reason))
        }
    };
    match probe() {
        CudaProbe::NotBuilt if gpu => {
            Err(Error::Unsupported("executor gpu: this build has no CUDA backend (cargo feature `cuda`)".into()))
        }
        CudaProbe::NotBuilt => Ok(Choice::Cpu("this build has no CUDA backend (cargo feature `cuda`)".into())),
        CudaProbe::Absent(reason) => absent(reason),
        CudaProbe::Present { count: 0, .. } => absent("the NVIDIA driver is present but reports no CUDA device".into()),
        CudaProbe::Present { count, current } => match (requested, current) {
            (Some(n), _) if n >= count => {
                Err(Error::invalid(format!("Config.device={n} but this machine has {count} CUDA device(s)")))
            }
            (Some(n), Some(m)) if m != n => Err(Error::invalid(format!(
                "Config.device={n} but a CUcontext of device {m} is current on this thread: call torch.cuda.set_device({n}) (or cudaSetDevice) first, or set Config.device={m}"
            ))),
            (Some(n), _) | (None, Some(n)) => Ok(Choice::Cuda(n)),
            (None, None) => Err(Error::invalid(
                "no CUcontext is current: set Config.device (e.g. to LOCAL_RANK) or make a context current on this thread (torch.cuda.set_device)",
            )),
        },
    }
}

/// The outcome of opening the device [`choose`] picked: the device, the CPU with the reason
/// (`Auto` on a device that turns out unusable, such as a driver older than NVRTC), or the
/// error: a binding the kernels crate refuses is `InvalidArgument`, anything else `Device`.
fn opened<D>(
    executor: ExecutorKind,
    result: std::result::Result<D, damacy_kernels::Error>,
) -> Result<std::result::Result<D, String>> {
    match result {
        Ok(device) => Ok(Ok(device)),
        Err(damacy_kernels::Error::NoDevice(reason)) if executor == ExecutorKind::Auto => Ok(Err(reason)),
        Err(damacy_kernels::Error::InvalidArgument(message)) => Err(Error::invalid(message)),
        Err(e) => Err(Error::device("opening the CUDA device", e)),
    }
}

#[cfg(feature = "cuda")]
fn probe_cuda() -> CudaProbe {
    use damacy_kernels::cuda;
    if let Some(reason) = cuda::unavailable_reason() {
        return CudaProbe::Absent(reason);
    }
    match (cuda::device_count(), cuda::current_context_device()) {
        (Ok(count), Ok(current)) => CudaProbe::Present { count, current },
        (Err(e), _) | (_, Err(e)) => CudaProbe::Absent(e.to_string()),
    }
}

#[cfg(not(feature = "cuda"))]
fn probe_cuda() -> CudaProbe {
    CudaProbe::NotBuilt
}

#[cfg(feature = "cuda")]
fn cuda(ordinal: Option<usize>) -> std::result::Result<Device, damacy_kernels::Error> {
    Device::cuda(ordinal)
}

#[cfg(not(feature = "cuda"))]
fn cuda(_ordinal: Option<usize>) -> std::result::Result<Device, damacy_kernels::Error> {
    Err(damacy_kernels::Error::NoDevice("this build has no CUDA backend (cargo feature `cuda`)".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_split_within_their_limits() {
        for (dev, host) in [
            (64u64 << 20, 16u64 << 20),
            (1 << 30, 256 << 20),
            (8 << 30, 1 << 30),
            (1 << 30, 16 << 20),
            (64 << 30, 1 << 30),
        ] {
            for wanted in [1, 2, 4, 8] {
                let (lanes, b) = Budget::lanes(dev, host, wanted).unwrap();
                assert!((1..=wanted).contains(&lanes));
                let used = b.decode.device_bytes() as u64 + b.batch_bytes as u64 + ASSEMBLE_TABLE_BYTES;
                assert!(used * lanes as u64 <= dev, "{lanes} × {used} > {dev}");
                let pinned = b.decode.host_bytes() as u64 + ASSEMBLE_PINNED_BYTES;
                assert!(pinned * lanes as u64 <= host, "{lanes} × {pinned} > {host}");
                assert!(b.decode.wave_dst_bytes >= 4 << 20 && b.decode.wave_src_bytes >= 2 << 20, "{b:?}");
                assert!(b.decode.wave_dst_bytes <= 1 << 30, "{b:?}");
                b.decode.validate().unwrap();
            }
        }
        // 1 GiB and 256 MiB hold 4 lanes; 64 MiB of device memory holds one.
        assert_eq!(Budget::lanes(1 << 30, 256 << 20, 4).unwrap().0, 4);
        assert_eq!(Budget::lanes(64 << 20, 256 << 20, 4).unwrap().0, 1);
        assert!(Budget::split(16 << 20, 256 << 20, 1).is_err());
        assert!(Budget::split(1 << 30, 1 << 20, 1).is_err());
    }

    #[test]
    fn windows_group_whole_targets_up_to_the_buffer() {
        let spans: Vec<Range<usize>> = (0..5).map(|i| i * 10..i * 10 + 10).collect();
        let w = windows(&spans, 25).unwrap();
        let got: Vec<(Range<usize>, usize, usize)> = w.iter().map(|(w, hi)| (w.targets.clone(), w.lo, *hi)).collect();
        assert_eq!(got, vec![(0..2, 0, 20), (2..4, 20, 40), (4..5, 40, 50)]);
        assert_eq!(windows(&spans, 50).unwrap().len(), 1);
        assert!(windows(&spans, 9).is_none(), "a target larger than the buffer");
        let shuffled = vec![10..20, 0..10];
        assert_eq!(windows(&shuffled, 100).unwrap().len(), 2, "out of order: a window per run in order");
    }

    fn never() -> CudaProbe {
        panic!("the CPU and emulated executors must not probe for a GPU")
    }

    fn present(count: usize, current: Option<usize>) -> impl FnOnce() -> CudaProbe {
        move || CudaProbe::Present { count, current }
    }

    fn invalid_message(r: Result<Choice>) -> String {
        match r {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn cpu_and_emulated_never_probe() {
        assert_eq!(
            choose(ExecutorKind::Cpu, Some(3), never).unwrap(),
            Choice::Cpu("the CPU executor was chosen".into())
        );
        assert_eq!(choose(ExecutorKind::Emulated, None, never).unwrap(), Choice::Emulated);
    }

    #[test]
    fn no_driver_falls_back_under_auto_and_is_a_device_error_under_gpu() {
        let reason = "libcuda.so not found (no NVIDIA driver on this machine)";
        for requested in [None, Some(0), Some(5)] {
            let auto = choose(ExecutorKind::Auto, requested, || CudaProbe::Absent(reason.into())).unwrap();
            assert_eq!(auto, Choice::Cpu(reason.into()));
            match choose(ExecutorKind::Gpu, requested, || CudaProbe::Absent(reason.into())) {
                Err(e @ Error::Device { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains("executor gpu") && text.contains("libcuda.so not found"), "{text}");
                }
                other => panic!("expected a Device error, got {other:?}"),
            }
        }
    }

    #[test]
    fn no_device_falls_back_under_auto_and_is_a_device_error_under_gpu() {
        let reason = "the NVIDIA driver is present but reports no CUDA device";
        assert_eq!(choose(ExecutorKind::Auto, None, present(0, None)).unwrap(), Choice::Cpu(reason.into()));
        assert_eq!(choose(ExecutorKind::Auto, Some(1), present(0, None)).unwrap(), Choice::Cpu(reason.into()));
        assert!(matches!(choose(ExecutorKind::Gpu, None, present(0, None)), Err(Error::Device { .. })));
        assert_eq!(
            choose(ExecutorKind::Auto, None, || CudaProbe::Absent(reason.into())).unwrap(),
            Choice::Cpu(reason.into())
        );
    }

    #[test]
    fn a_build_without_cuda_falls_back_under_auto_and_is_unsupported_under_gpu() {
        let auto = choose(ExecutorKind::Auto, Some(0), || CudaProbe::NotBuilt).unwrap();
        assert!(matches!(&auto, Choice::Cpu(r) if r.contains("no CUDA backend")), "{auto:?}");
        assert!(matches!(choose(ExecutorKind::Gpu, Some(0), || CudaProbe::NotBuilt), Err(Error::Unsupported(_))));
    }

    #[test]
    fn a_device_mismatch_is_invalid_under_auto_and_gpu() {
        for executor in [ExecutorKind::Auto, ExecutorKind::Gpu] {
            let m = invalid_message(choose(executor, Some(1), present(2, Some(0))));
            assert!(m.contains("Config.device=1") && m.contains("device 0 is current"), "{m}");
            let m = invalid_message(choose(executor, Some(4), present(2, None)));
            assert!(m.contains("Config.device=4") && m.contains("2 CUDA device(s)"), "{m}");
        }
    }

    #[test]
    fn no_context_and_no_config_device_is_invalid_under_auto_and_gpu() {
        for executor in [ExecutorKind::Auto, ExecutorKind::Gpu] {
            let m = invalid_message(choose(executor, None, present(2, None)));
            assert!(m.contains("no CUcontext is current") && m.contains("Config.device"), "{m}");
        }
    }

    #[test]
    fn a_consistent_binding_picks_that_device() {
        for executor in [ExecutorKind::Auto, ExecutorKind::Gpu] {
            assert_eq!(choose(executor, Some(1), present(2, None)).unwrap(), Choice::Cuda(1));
            assert_eq!(choose(executor, Some(1), present(2, Some(1))).unwrap(), Choice::Cuda(1));
            assert_eq!(choose(executor, None, present(2, Some(1))).unwrap(), Choice::Cuda(1));
            assert_eq!(choose(executor, Some(0), present(1, Some(0))).unwrap(), Choice::Cuda(0));
        }
    }

    #[test]
    fn opening_maps_the_kernels_errors_by_kind() {
        use damacy_kernels::Error as K;
        assert_eq!(opened(ExecutorKind::Auto, Ok::<u8, K>(7)).unwrap(), Ok(7));
        let too_old = || Err::<u8, K>(K::NoDevice("the driver is older than NVRTC".into()));
        assert_eq!(opened(ExecutorKind::Auto, too_old()).unwrap(), Err("the driver is older than NVRTC".into()));
        assert!(matches!(opened(ExecutorKind::Gpu, too_old()), Err(Error::Device { .. })));
        for executor in [ExecutorKind::Auto, ExecutorKind::Gpu] {
            let primary = Err::<u8, K>(K::InvalidArgument("not device 0's primary context".into()));
            assert!(matches!(opened(executor, primary), Err(Error::InvalidArgument(m)) if m.contains("primary")));
            let oom = Err::<u8, K>(K::OutOfMemory("cuMemAlloc".into()));
            assert!(matches!(opened(executor, oom), Err(Error::Device { .. })));
        }
    }
}
