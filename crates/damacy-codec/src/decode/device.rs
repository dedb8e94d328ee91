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
    /// Pick the executor the configuration asks for. `Gpu` without a usable device is an error;
    /// `Auto` falls back to the CPU with the reason. Every device buffer is allocated here,
    /// within `device_buffer_bytes` and `host_buffer_bytes` (see [`Budget`]).
    pub(crate) fn select(read: &ReaderConfig) -> Result<Selected> {
        let budget = Budget::split(read.device_buffer_bytes, read.host_buffer_bytes)?;
        let config = budget.decode.clone().with_n_compute_threads(read.n_compute_threads);
        let (executor, device) = (read.executor, read.device);
        let device = match executor {
            ExecutorKind::Cpu => return Ok(Selected::Cpu("the CPU executor was chosen".into())),
            ExecutorKind::Emulated => emulated()?,
            ExecutorKind::Auto | ExecutorKind::Gpu => match cuda(device) {
                Ok(d) => d,
                Err(reason) if executor == ExecutorKind::Auto => return Ok(Selected::Cpu(reason)),
                Err(reason) => return Err(Error::invalid(format!("executor gpu: {reason}"))),
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
        let fetched = fetch_all(plan, ctx.stats, ctx.compute, ctx.in_flight)?;
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
        let fetched = fetch_all(plan, ctx.stats, ctx.compute, ctx.in_flight)?;
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

#[cfg(feature = "cuda")]
fn cuda(ordinal: Option<usize>) -> std::result::Result<Device, String> {
    Device::cuda(ordinal).map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda(_ordinal: Option<usize>) -> std::result::Result<Device, String> {
    Err("this build has no CUDA backend (cargo feature `cuda`)".into())
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
}
