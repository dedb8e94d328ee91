//! The device executor: damacy's own kernels (damacy-kernels) decode the chunks whose whole
//! codec chain has a device stage, batched per wave; every other chain goes to the CPU
//! executor. The same code drives a CUDA GPU or the host emulator of the kernels.

use std::sync::Mutex;
use std::time::Instant;

use damacy_kernels::assemble::{AssembleJob, Assembler, DType};
use damacy_kernels::decode::{ChunkInput, DecodeConfig, Decoder};
use damacy_kernels::device::{Device, DeviceBuffer};
use zarrs::metadata::v3::MetadataV3;

use crate::array::ArrayInfo;
use crate::assemble::{Converter, Layout};
use crate::config::{Executor, ReadConfig};
use crate::cpu::EncodedUnit;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::region::Region;
use crate::stats::Stats;

/// Jobs per assemble call (its job table is allocated once, at construction).
const ASSEMBLE_JOBS: usize = 4096;
/// Device bytes of the assemble job table and its statuses (`damacy_kernels::assemble`).
const ASSEMBLE_TABLE_BYTES: u64 = ASSEMBLE_JOBS as u64 * 244;

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
        let meta = streams * 80 + 1024;
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

/// How a chain decodes on the device, when it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceChain {
    /// The chunk is one blosc1 frame (else raw `bytes`).
    pub blosc: bool,
    /// A crc32c ends the encoded bytes.
    pub crc32c: bool,
    /// The `bytes` codec stored big-endian elements (swapped after decode).
    pub big_endian: bool,
}

/// Whether a decode chain (the codec metadata of one chunk or inner chunk) runs on the device,
/// and why not.
pub fn device_chain(chain: &[MetadataV3], dtype_size: usize) -> std::result::Result<DeviceChain, String> {
    let mut out = DeviceChain { blosc: false, crc32c: false, big_endian: false };
    let mut seen_bytes = false;
    for (i, meta) in chain.iter().enumerate() {
        let config = meta.configuration();
        let get = |k: &str| config.and_then(|c| c.get(k)).and_then(|v| v.as_str().map(str::to_owned));
        match meta.name() {
            "bytes" if !seen_bytes => {
                seen_bytes = true;
                out.big_endian = get("endian").as_deref() == Some("big") && dtype_size > 1;
            }
            "blosc" if seen_bytes && !out.blosc && !out.crc32c => {
                let cname = get("cname").unwrap_or_default();
                if !matches!(cname.as_str(), "lz4" | "lz4hc" | "blosclz") {
                    return Err(format!(
                        "blosc with cname {cname} has no device kernel yet (lz4, lz4hc and blosclz do)"
                    ));
                }
                out.blosc = true;
            }
            "crc32c" if seen_bytes && i + 1 == chain.len() => out.crc32c = true,
            "crc32c" => return Err("crc32c is not the last codec; the device route verifies it only there".into()),
            "blosc" | "bytes" => return Err(format!("{} appears out of the order bytes, blosc, crc32c", meta.name())),
            "transpose" => return Err("the chain has a transpose, which the device route does not run yet".into()),
            "sharding_indexed" => return Err("nested sharding runs on the CPU".into()),
            name => return Err(format!("{name} has no device kernel yet")),
        }
    }
    if !seen_bytes {
        return Err("the chain has no bytes codec".into());
    }
    Ok(out)
}

/// A device (CUDA or emulated) with its batched decoder, assembler and batch buffer.
pub(crate) struct DeviceExecutor {
    device: Device,
    state: Mutex<DeviceState>,
}

/// What one batch at a time uses on the device; allocated once and grown only when a batch
/// needs more.
struct DeviceState {
    decoder: Decoder,
    assembler: Assembler,
    batch: DeviceBuffer,
}

fn kernel_dtype(d: Dtype) -> DType {
    match d {
        Dtype::Bool => DType::Bool,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::U8 => DType::U8,
        Dtype::U16 => DType::U16,
        Dtype::U32 => DType::U32,
        Dtype::U64 => DType::U64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
    }
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

fn kernel_error(e: &damacy_kernels::Error) -> Error {
    Error::invalid(format!("device executor: {e}"))
}

impl DeviceExecutor {
    /// Pick the executor the configuration asks for. `Gpu` without a usable device is an error;
    /// `Auto` falls back to the CPU with the reason. Every device buffer is allocated here,
    /// within `device_buffer_bytes` and `host_buffer_bytes` (see [`Budget`]).
    pub(crate) fn select(read: &ReadConfig) -> Result<Selected> {
        let budget = Budget::split(read.device_buffer_bytes, read.host_buffer_bytes)?;
        let config = budget.decode.clone().with_n_compute_threads(read.n_compute_threads);
        let (executor, device) = (read.executor, read.device);
        let device = match executor {
            Executor::Cpu => return Ok(Selected::Cpu("the CPU executor was chosen".into())),
            Executor::Emulated => emulated()?,
            Executor::Auto | Executor::Gpu => match cuda(device) {
                Ok(d) => d,
                Err(reason) if executor == Executor::Auto => return Ok(Selected::Cpu(reason)),
                Err(reason) => return Err(Error::invalid(format!("executor gpu: {reason}"))),
            },
        };
        let decoder = Decoder::new(&device, config).map_err(|e| kernel_error(&e))?;
        let assembler = Assembler::new(&device, ASSEMBLE_JOBS).map_err(|e| kernel_error(&e))?;
        let batch = device.alloc(budget.batch_bytes).map_err(|e| kernel_error(&e))?;
        Ok(Selected::Device(Box::new(Self { device, state: Mutex::new(DeviceState { decoder, assembler, batch }) })))
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, DeviceState>> {
        self.state.lock().map_err(|_| Error::invalid("device executor: a previous batch panicked"))
    }

    fn inputs<'u>(array: &ArrayInfo, chain: DeviceChain, units: &'u [EncodedUnit]) -> Vec<ChunkInput<'u>> {
        let expected = array.decode_shape().iter().product::<u64>() as usize * array.dtype.size();
        units
            .iter()
            .map(|u| {
                let input = if chain.blosc { ChunkInput::blosc(&u.bytes) } else { ChunkInput::raw(&u.bytes) };
                let input = input.with_expected_len(expected);
                if chain.crc32c { input.with_crc32c() } else { input }
            })
            .collect()
    }

    /// The whole GPU route for one batch: decode every unit in one wave, then assemble every
    /// region on the device (fill, crop, byte order, cast) into the batch buffer, and copy the
    /// batch back. Returns `None` when the batch does not fit in one wave; the caller then
    /// decodes in several waves and assembles on the host.
    pub(crate) fn read_batch(
        &self,
        array: &ArrayInfo,
        chain: DeviceChain,
        units: &[EncodedUnit],
        layout: &Layout<'_>,
        conv: Converter,
        stats: &Stats,
    ) -> Result<Option<Vec<u8>>> {
        let inputs = Self::inputs(array, chain, units);
        let (src_dtype, dst_dtype) = (kernel_dtype(conv.from), kernel_dtype(conv.to));
        let region_elems = layout.regions.first().map_or(0, Region::num_elements) as usize;
        let region_bytes = region_elems * conv.to.size();
        let total = region_bytes * layout.regions.len();
        let mut fill = vec![0u8; 8];
        conv.fill(&array.fill_value, &mut fill[..conv.to.size()]);
        let fill_bits = u64::from_le_bytes(fill.try_into().unwrap_or_default());

        let started = Instant::now();
        let mut guard = self.lock()?;
        let DeviceState { decoder, assembler, batch } = &mut *guard;
        let wave = match decoder.decode_wave(&inputs) {
            Ok(w) => w,
            Err(damacy_kernels::Error::WaveFull { .. }) => return Ok(None),
            Err(e) => return Err(kernel_error(&e)),
        };
        stats.add_device_parse(wave.stats.decompress_parse);
        let mut offsets = Vec::with_capacity(units.len());
        for (unit, result) in units.iter().zip(&wave.chunks) {
            match result {
                Ok(range) => offsets.push(range.start),
                Err(e) => return Err(Error::decode(unit.location.clone(), e)),
            }
        }
        if batch.len() < total {
            // The batch is larger than the batch buffer of the budget: assemble on the host.
            return Ok(None);
        }
        // Fills first (one call), then the copies (a second call): jobs of one call write
        // disjoint bytes.
        let (fills, copies) =
            assemble_jobs(layout, &offsets, region_bytes, fill_bits, (src_dtype, dst_dtype), chain.big_endian)?;
        for jobs in [&fills, &copies] {
            if jobs.is_empty() {
                continue;
            }
            let results = assembler.run(wave.output, batch, jobs).map_err(|e| kernel_error(&e))?;
            if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                return Err(Error::invalid(format!("device assemble of array {}: {e}", array.path)));
            }
        }
        let mut data = vec![0u8; total];
        self.device.download(batch, 0, &mut data).map_err(|e| kernel_error(&e))?;
        stats.add_decode(started.elapsed());
        let expected = array.decode_shape().iter().product::<u64>() as usize * array.dtype.size();
        stats.add_units_decoded(units.len() as u64);
        stats.add_units_decoded_device(units.len() as u64);
        stats.add_bytes_decoded((units.len() * expected) as u64);
        Ok(Some(data))
    }

    /// The device, described.
    pub(crate) fn describe(&self) -> String {
        self.device.describe()
    }

    /// Decode units of `array` on the device. Per-chunk failures are decode errors naming the
    /// unit; a device failure is an error for the whole batch.
    pub(crate) fn decode_units(
        &self,
        array: &ArrayInfo,
        chain: DeviceChain,
        units: &[EncodedUnit],
        stats: &Stats,
    ) -> Result<Vec<Vec<u8>>> {
        let expected = array.decode_shape().iter().product::<u64>() as usize * array.dtype.size();
        let inputs = Self::inputs(array, chain, units);
        let started = Instant::now();
        let decoded = self.lock()?.decoder.decode_to_host(&inputs).map_err(|e| kernel_error(&e))?;
        stats.add_decode(started.elapsed());
        stats.add_device_parse(decoded.stats.decompress_parse);
        let mut out = Vec::with_capacity(units.len());
        for (unit, result) in units.iter().zip(decoded.chunks) {
            let mut bytes = result.map_err(|e| Error::decode(unit.location.clone(), e))?;
            if chain.big_endian {
                for element in bytes.chunks_exact_mut(array.dtype.size()) {
                    element.reverse();
                }
            }
            out.push(bytes);
        }
        stats.add_units_decoded(out.len() as u64);
        stats.add_units_decoded_device(out.len() as u64);
        stats.add_bytes_decoded((out.len() * expected) as u64);
        Ok(out)
    }
}

/// The assemble jobs of a batch: fills of regions not wholly covered by decoded units, then the
/// copy of each unit's intersection with each region.
fn assemble_jobs(
    layout: &Layout<'_>,
    offsets: &[usize],
    region_bytes: usize,
    fill_bits: u64,
    (src_dtype, dst_dtype): (DType, DType),
    big_endian: bool,
) -> Result<(Vec<AssembleJob>, Vec<AssembleJob>)> {
    let mut fills = Vec::new();
    let mut copies = Vec::new();
    for (r, region) in layout.regions.iter().enumerate() {
        let out_offset = r * region_bytes;
        let zeros = vec![0u64; region.shape.len()];
        if !layout.covered(r) {
            let mut job = AssembleJob::chunk_region(
                0,
                &region.shape,
                None,
                &zeros,
                &region.shape,
                out_offset,
                &region.shape,
                &zeros,
                dst_dtype,
                dst_dtype,
                false,
            )
            .map_err(|e| kernel_error(&e))?;
            job.fill_bits = Some(fill_bits);
            fills.push(job);
        }
        for &u in &layout.region_units[r] {
            let Some(k) = layout.slot[u] else { continue };
            let origin = layout.origin(u);
            let Some((lo, hi)) = layout.intersection(r, &origin) else { continue };
            let shape: Vec<u64> = lo.iter().zip(&hi).map(|(l, h)| h - l).collect();
            let in_unit: Vec<u64> = lo.iter().zip(&origin).map(|(l, o)| l - o).collect();
            let in_region: Vec<u64> = lo.iter().zip(&region.start).map(|(l, s)| l - s).collect();
            copies.push(
                AssembleJob::chunk_region(
                    offsets[k],
                    layout.unit_shape,
                    None,
                    &in_unit,
                    &shape,
                    out_offset,
                    &region.shape,
                    &in_region,
                    src_dtype,
                    dst_dtype,
                    big_endian,
                )
                .map_err(|e| kernel_error(&e))?,
            );
        }
    }
    Ok((fills, copies))
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

    fn meta(json: &str) -> Vec<MetadataV3> {
        serde_json::from_str(json).unwrap()
    }

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

    #[test]
    fn chains_that_route_to_the_device() {
        let c = device_chain(&meta(r#"[{"name":"bytes","configuration":{"endian":"big"}}]"#), 2).unwrap();
        assert_eq!(c, DeviceChain { blosc: false, crc32c: false, big_endian: true });
        let c = device_chain(
            &meta(r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"lz4hc"}},{"name":"crc32c"}]"#),
            4,
        )
        .unwrap();
        assert!(c.blosc && c.crc32c && !c.big_endian);
    }

    #[test]
    fn chains_that_stay_on_the_cpu_say_why() {
        let e =
            device_chain(&meta(r#"[{"name":"bytes"},{"name":"zstd","configuration":{"level":0}}]"#), 2).unwrap_err();
        assert!(e.contains("zstd"), "{e}");
        let e = device_chain(&meta(r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"zlib"}}]"#), 2)
            .unwrap_err();
        assert!(e.contains("zlib"), "{e}");
        let e = device_chain(&meta(r#"[{"name":"transpose","configuration":{"order":[1,0]}},{"name":"bytes"}]"#), 2)
            .unwrap_err();
        assert!(e.contains("transpose"), "{e}");
        let e = device_chain(
            &meta(r#"[{"name":"bytes"},{"name":"crc32c"},{"name":"blosc","configuration":{"cname":"lz4"}}]"#),
            2,
        )
        .unwrap_err();
        assert!(e.contains("crc32c is not the last"), "{e}");
    }
}
