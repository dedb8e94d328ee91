//! The device executor: damacy's own kernels (damacy-kernels) decode the units of arrays whose
//! chain classified as a [`DeviceChain`], batched per wave; the same code drives a CUDA GPU or
//! the host emulator of the kernels.
//!
//! Whether a batch is assembled on the device is decided before anything is decoded, from the
//! host parse: a batch that fits one decode wave and the batch buffer is decoded, assembled
//! (fill jobs for padding and missing units, then one copy job per unit and target) and copied
//! back once; a larger batch is decoded wave by wave to the host and assembled there. Either
//! way every unit is decoded exactly once.

use std::sync::Mutex;
use std::time::Instant;

use damacy_kernels::assemble::{AssembleJob, Assembler};
use damacy_kernels::decode::{ChunkInput, DecodeConfig, Decoder};
use damacy_kernels::device::{Device, DeviceBuffer, Stream};
use zarrs_storage::Bytes;

use super::{Ctx, Executor};
use crate::assemble::{Converter, Scatter};
use crate::codec::{ChainRoute, DeviceChain, DeviceCodec};
use crate::config::{ExecutorKind, ReaderConfig};
use crate::error::{Error, Result};
use crate::fetch::fetch_all;
use crate::plan::{BatchPlan, UnitSource, meet};
use crate::region::c_strides;
use crate::stats::Stats;

/// Jobs per assemble call (its job table is allocated once, at construction).
const ASSEMBLE_JOBS: usize = 4096;
/// Device bytes of the assemble job table and its statuses (`damacy_kernels::assemble`).
const ASSEMBLE_TABLE_BYTES: u64 = Assembler::device_bytes(ASSEMBLE_JOBS) as u64;

/// How the device executor spends its budgets: a quarter of the device budget for the batch
/// buffer (larger batches are assembled on the host), the assemble job table, and the rest for
/// two decode slots whose wave sizes follow from what is left of both budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) decode: DecodeConfig,
    pub(crate) batch_bytes: usize,
}

impl Budget {
    pub(crate) fn split(device_bytes: u64, host_bytes: u64) -> Result<Self> {
        let too_small = |what: &str, have: u64| {
            Error::invalid(format!("{what} is {have} bytes, too small for one decode wave of the device executor"))
        };
        let batch_bytes = device_bytes / 4;
        let slots = 2u64;
        let streams = 64u64 << 10;
        let meta = DecodeConfig::default().with_wave_streams(streams as usize).table_bytes() as u64;
        let per_slot = (device_bytes - batch_bytes).saturating_sub(ASSEMBLE_TABLE_BYTES) / slots;
        // Per slot: the encoded wave (src), its tables (meta) and twice the decoded wave (dst and
        // its unshuffle scratch); encoded waves get a quarter of the decoded size.
        let mib = 1u64 << 20;
        let dst = (per_slot.saturating_sub(meta) * 4 / 9) / mib * mib;
        let host_src = (host_bytes / slots).saturating_sub(meta + streams * 8) / mib * mib;
        let src = (dst / 4).min(host_src);
        if dst < 4 * mib {
            return Err(too_small("device_buffer_bytes", device_bytes));
        }
        if src < mib {
            return Err(too_small("host_buffer_bytes", host_bytes));
        }
        let decode = DecodeConfig::default()
            .with_slots(slots as usize)
            .with_wave_streams(streams as usize)
            .with_wave_dst_bytes(dst as usize)
            .with_wave_src_bytes(src as usize)
            .with_device_budget_bytes((device_bytes - batch_bytes).saturating_sub(ASSEMBLE_TABLE_BYTES) as usize)
            .with_host_budget_bytes(host_bytes as usize);
        Ok(Self { decode, batch_bytes: batch_bytes as usize })
    }
}

/// A device (CUDA or emulated) with its batched decoder, assembler and batch buffer.
pub(crate) struct DeviceExecutor {
    device: Device,
    state: Mutex<DeviceState>,
}

/// What one batch at a time uses on the device; allocated once, when the reader is built.
struct DeviceState {
    decoder: Decoder,
    assembler: Assembler,
    batch: DeviceBuffer,
}

impl std::fmt::Debug for DeviceExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceExecutor").field("device", &self.device.describe()).finish_non_exhaustive()
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

    /// The decoder's inputs: every unit decodes to `expected` bytes (zstd frames without a
    /// content size, gzip and zlib streams take it from there); zstd content checksums, gzip
    /// CRC32/ISIZE and zlib Adler-32 are verified when `verify`.
    fn inputs(&self, chain: DeviceChain, expected: usize, verify: bool) -> Vec<ChunkInput<'_>> {
        self.bytes
            .iter()
            .map(|b| {
                let input = match chain.codec {
                    DeviceCodec::Blosc => ChunkInput::blosc(b),
                    DeviceCodec::Zstd => ChunkInput::zstd(b),
                    DeviceCodec::Gzip => ChunkInput::gzip(b),
                    DeviceCodec::Zlib => ChunkInput::zlib(b),
                    DeviceCodec::Raw => ChunkInput::raw(b),
                };
                let input = input.with_expected_len(expected);
                let input = if verify { input.with_checksum_verification() } else { input };
                if chain.crc32c { input.with_crc32c() } else { input }
            })
            .collect()
    }
}

impl DeviceExecutor {
    /// Pick the executor the configuration asks for (see [`choose`]): the CPU with the reason
    /// when `Auto` finds no usable GPU, an error when `Gpu` does not, and an error under either
    /// when a GPU is there but the binding is wrong (ARCHITECTURE §5). Every device buffer is
    /// allocated here, within `device_buffer_bytes` and `host_buffer_bytes` (see [`Budget`]).
    pub(crate) fn select(read: &ReaderConfig) -> Result<Selected> {
        let budget = Budget::split(read.device_buffer_bytes, read.host_buffer_bytes)?;
        let config = budget.decode.clone().with_n_compute_threads(read.n_compute_threads);
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
        let decoder = Decoder::new(&device, config).map_err(|e| Error::device("allocating the decode waves", e))?;
        let assembler =
            Assembler::new(&device, ASSEMBLE_JOBS).map_err(|e| Error::device("allocating the assemble table", e))?;
        let batch = device.alloc(budget.batch_bytes).map_err(|e| Error::device("allocating the batch buffer", e))?;
        Ok(Selected::Device(Box::new(Self { device, state: Mutex::new(DeviceState { decoder, assembler, batch }) })))
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, DeviceState>> {
        self.state.lock().map_err(|_| Error::invalid("device executor: a previous batch panicked"))
    }

    /// The device, described.
    pub(crate) fn describe(&self) -> String {
        self.device.describe()
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

    /// Decode every input wave by wave to the host and scatter each unit into `out`.
    fn decode_to_host_and_scatter(
        state: &mut DeviceState,
        ctx: &Ctx<'_>,
        plan: &BatchPlan,
        enc: &Encoded,
        inputs: &[ChunkInput<'_>],
        chain: DeviceChain,
        out: &mut [u8],
    ) -> Result<()> {
        let started = Instant::now();
        let decoded = state.decoder.decode_to_host(inputs).map_err(|e| Error::device("decoding a batch", e))?;
        ctx.stats.add_decode(started.elapsed());
        ctx.stats.add_device_parse(decoded.stats.decompress_parse);
        ctx.stats.add_bytes_uploaded(decoded.stats.bytes_uploaded as u64);
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

/// The assemble jobs of a batch, for `dst_base` bytes into the destination: first the fills
/// (every target that units do not wholly cover: padded, or touching a unit without bytes),
/// then one copy per (decoded unit, target) pair. `decoded` maps plan units to their byte
/// offset in the decoder's output. Fills and copies go to separate calls: jobs of one call
/// write disjoint bytes.
fn assemble_jobs(
    plan: &BatchPlan,
    decoded: &[(usize, usize)],
    missing: &[usize],
    chain: DeviceChain,
    dst_base: usize,
) -> (Vec<AssembleJob>, Vec<AssembleJob>) {
    let conv = Converter { from: plan.array.dtype, to: plan.array.out_dtype() };
    let (src_dtype, dst_dtype) = (conv.from, conv.to);
    let (fs, ts) = (conv.from.size(), conv.to.size() as isize);
    let unit_shape = plan.array.decode_shape();
    let unit_strides = c_strides(unit_shape);
    let mut partial = vec![false; plan.targets.len()];
    for (u, unit) in plan.units.iter().enumerate() {
        if unit.source == UnitSource::Fill || missing.contains(&u) {
            for &t in &unit.targets {
                partial[t as usize] = true;
            }
        }
    }
    let bits = fill_bits(plan, conv);
    let mut fills = Vec::new();
    for (t, target) in plan.targets.iter().enumerate() {
        if !(partial[t] || target.padded.is_some()) {
            continue;
        }
        let b = target.fill_box();
        if b.count.contains(&0) {
            continue;
        }
        fills.push(AssembleJob {
            src_offset: 0,
            dst_offset: dst_base + b.dst_offset,
            shape: b.count.clone(),
            src_strides: vec![0; b.count.len()],
            dst_strides: b.dst_strides.iter().map(|s| (*s / ts) as i64).collect(),
            src_dtype: dst_dtype,
            dst_dtype,
            big_endian: false,
            fill_bits: Some(bits),
        });
    }
    let mut copies = Vec::new();
    for &(u, offset) in decoded {
        let unit = &plan.units[u];
        for &t in &unit.targets {
            let target = &plan.targets[t as usize];
            let Some(m) = meet(target, &unit.origin, unit_shape) else { continue };
            let src_elem: u64 = m.src_start.iter().zip(&unit_strides).map(|(s, st)| s * st).sum();
            let dst: isize = target.dst_offset as isize
                + m.first.iter().zip(&target.dst_strides).map(|(i, s)| *i as isize * s).sum::<isize>();
            copies.push(AssembleJob {
                src_offset: offset + src_elem as usize * fs,
                dst_offset: dst_base + dst as usize,
                shape: m.count.to_vec(),
                src_strides: unit_strides.iter().zip(&target.step).map(|(s, step)| (s * step) as i64).collect(),
                dst_strides: target.dst_strides.iter().map(|s| (*s / ts) as i64).collect(),
                src_dtype,
                dst_dtype,
                big_endian: chain.big_endian,
                fill_bits: None,
            });
        }
    }
    (fills, copies)
}

/// Run assemble jobs in calls of at most [`ASSEMBLE_JOBS`]; any failed job is an error.
fn run_jobs(
    assembler: &mut Assembler,
    src: &DeviceBuffer,
    dst: &mut DeviceBuffer,
    jobs: &[AssembleJob],
    plan: &BatchPlan,
) -> Result<()> {
    for part in jobs.chunks(ASSEMBLE_JOBS) {
        let results = assembler.run(src, dst, part).map_err(|e| Error::device("assembling a batch", e))?;
        if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
            return Err(Error::device(format!("assembling a batch of array {}", plan.array.path), e));
        }
    }
    Ok(())
}

impl Executor for DeviceExecutor {
    fn read_host(&self, ctx: &Ctx<'_>, plan: &BatchPlan, out: &mut [u8]) -> Result<()> {
        let chain = Self::chain(plan)?;
        let fetched = fetch_all(plan, ctx)?;
        let enc = Encoded::split(plan, fetched);
        let planned_fills = plan.units.iter().filter(|u| u.source == UnitSource::Fill).count();
        ctx.stats.add_units_filled((planned_fills + enc.missing.len()) as u64);
        let expected = plan.array.decode_shape().iter().product::<u64>() as usize * plan.array.dtype.size();
        let inputs = enc.inputs(chain, expected, plan.array.options().validate_checksums);

        let mut guard = self.lock()?;
        let state = &mut *guard;
        // Decided before decoding: assemble on the device only when the whole batch fits one
        // wave and the batch buffer.
        if !plan.dense || plan.nbytes > state.batch.len() || !state.decoder.plan_waves(&inputs).fits_in_one_wave() {
            return Self::decode_to_host_and_scatter(state, ctx, plan, &enc, &inputs, chain, out);
        }
        let started = Instant::now();
        let DeviceState { decoder, assembler, batch } = state;
        let wave = decoder.decode_wave(&inputs).map_err(|e| Error::device("decoding a batch", e))?;
        ctx.stats.add_device_parse(wave.stats.decompress_parse);
        ctx.stats.add_bytes_uploaded(wave.stats.bytes_uploaded as u64);
        let mut decoded = Vec::with_capacity(enc.units.len());
        for (k, result) in wave.chunks.iter().enumerate() {
            let u = enc.units[k];
            match result {
                Ok(range) => decoded.push((u, range.start)),
                Err(e) => return Err(Error::decode(plan.unit_location(u), e)),
            }
        }
        let (fills, copies) = assemble_jobs(plan, &decoded, &enc.missing, chain, 0);
        run_jobs(assembler, wave.output, batch, &fills, plan)?;
        run_jobs(assembler, wave.output, batch, &copies, plan)?;
        self.device.download(batch, 0, out).map_err(|e| Error::device("copying a batch to the host", e))?;
        ctx.stats.add_decode(started.elapsed());
        count_decoded(ctx.stats, decoded.len(), decoded.len() * expected);
        Ok(())
    }

    fn read_device(
        &self,
        ctx: &Ctx<'_>,
        plan: &BatchPlan,
        (buffer, offset): (&mut DeviceBuffer, usize),
        stream: &Stream,
    ) -> Result<()> {
        let chain = Self::chain(plan)?;
        let fetched = fetch_all(plan, ctx)?;
        let enc = Encoded::split(plan, fetched);
        let planned_fills = plan.units.iter().filter(|u| u.source == UnitSource::Fill).count();
        ctx.stats.add_units_filled((planned_fills + enc.missing.len()) as u64);
        let expected = plan.array.decode_shape().iter().product::<u64>() as usize * plan.array.dtype.size();
        let started = Instant::now();
        let mut guard = self.lock()?;
        let DeviceState { decoder, assembler, .. } = &mut *guard;
        // Fills first, then each wave's copies, straight into the caller's buffer. Waves are the
        // longest runs of units that fit one wave, judged by the host parse before decoding.
        let (fills, _) = assemble_jobs(plan, &[], &enc.missing, chain, offset);
        let inputs = enc.inputs(chain, expected, plan.array.options().validate_checksums);
        let (mut start, mut first) = (0usize, true);
        while first || start < inputs.len() {
            let mut end = inputs.len();
            while end > start + 1 && !decoder.plan_waves(&inputs[start..end]).fits_in_one_wave() {
                end = start + (end - start) / 2;
            }
            let wave = decoder.decode_wave(&inputs[start..end]).map_err(|e| Error::device("decoding a batch", e))?;
            ctx.stats.add_device_parse(wave.stats.decompress_parse);
            ctx.stats.add_bytes_uploaded(wave.stats.bytes_uploaded as u64);
            let mut decoded = Vec::with_capacity(end - start);
            for (result, &u) in wave.chunks.iter().zip(&enc.units[start..end]) {
                match result {
                    Ok(range) => decoded.push((u, range.start)),
                    Err(e) => return Err(Error::decode(plan.unit_location(u), e)),
                }
            }
            if first {
                run_jobs(assembler, wave.output, buffer, &fills, plan)?;
                first = false;
            }
            let (_, copies) = assemble_jobs(plan, &decoded, &[], chain, offset);
            run_jobs(assembler, wave.output, buffer, &copies, plan)?;
            count_decoded(ctx.stats, decoded.len(), decoded.len() * expected);
            start = end;
        }
        let ready =
            self.device.default_stream().record(false).map_err(|e| Error::device("recording a batch event", e))?;
        stream.wait(&ready).map_err(|e| Error::device("ordering the caller's stream after the batch", e))?;
        ctx.stats.add_decode(started.elapsed());
        Ok(())
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
    use damacy_kernels::device::cuda;
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
        for (dev, host) in [(64u64 << 20, 16u64 << 20), (1 << 30, 256 << 20), (8 << 30, 1 << 30), (1 << 30, 16 << 20)] {
            let b = Budget::split(dev, host).unwrap();
            let used = b.decode.device_bytes() as u64 + b.batch_bytes as u64 + ASSEMBLE_TABLE_BYTES;
            assert!(used <= dev, "{used} > {dev}");
            assert!(b.decode.host_bytes() as u64 <= host, "{} > {host}", b.decode.host_bytes());
            assert!(b.decode.wave_dst_bytes >= 4 << 20 && b.decode.wave_src_bytes >= 1 << 20, "{b:?}");
        }
        assert!(Budget::split(16 << 20, 256 << 20).is_err());
        assert!(Budget::split(1 << 30, 1 << 20).is_err());
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
