//! Batched decode of chunks on a [`Device`]: host parse (rayon) → one host-to-device copy per
//! wave → one launch per codec per wave (crc32c, lz4, blosclz, raw copy) → unshuffle.
//!
//! The decoder owns its device buffers, sized once from [`DecodeConfig`] against a hard budget:
//! exceeding the budget is an error at construction, never an out-of-memory in the middle of a
//! run. Batches larger than one wave are split into several waves.

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::blosc::{self, FrameShuffle, FrameStream, Shuffle, StreamCodec};
use crate::consts as c;
use crate::device::{Arg, Device, DeviceBuffer};
use crate::error::{Error, Result, StreamStatus};
use crate::kernel::Kernel;

/// How a chunk's bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkEncoding {
    /// One blosc1 frame (lz4, lz4hc, blosclz or memcpyed; any shuffle).
    Blosc,
    /// Raw bytes (zarr `bytes` codec); the decoded bytes are the encoded bytes.
    Raw,
}

/// One chunk to decode.
#[derive(Clone, Copy, Debug)]
pub struct ChunkInput<'a> {
    /// The encoded bytes as stored.
    pub bytes: &'a [u8],
    /// Their encoding.
    pub encoding: ChunkEncoding,
    /// Whether a 4-byte little-endian CRC32C of the preceding bytes ends `bytes` (zarr
    /// `crc32c` codec, applied last); it is verified on the device and stripped.
    pub crc32c: bool,
    /// The decoded size the caller expects (from the chunk shape and dtype); a mismatch is a
    /// decode error. `None` accepts what the encoding declares.
    pub expected_len: Option<usize>,
}

impl<'a> ChunkInput<'a> {
    /// A blosc1 frame.
    #[must_use]
    pub fn blosc(bytes: &'a [u8]) -> Self {
        Self { bytes, encoding: ChunkEncoding::Blosc, crc32c: false, expected_len: None }
    }

    /// Raw bytes.
    #[must_use]
    pub fn raw(bytes: &'a [u8]) -> Self {
        Self { bytes, encoding: ChunkEncoding::Raw, crc32c: false, expected_len: None }
    }

    /// Marks the chunk as ending in a CRC32C to verify.
    #[must_use]
    pub fn with_crc32c(mut self) -> Self {
        self.crc32c = true;
        self
    }

    /// Sets the expected decoded size.
    #[must_use]
    pub fn with_expected_len(mut self, len: usize) -> Self {
        self.expected_len = Some(len);
        self
    }
}

/// Sizes of a [`Decoder`]'s buffers. Defaults: 64 MiB of encoded bytes, 256 MiB of decoded
/// bytes and 1 Mi streams per wave, a 1 GiB device budget, rayon's default thread count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeConfig {
    /// Encoded bytes per wave (one host-to-device copy).
    pub wave_src_bytes: usize,
    /// Decoded bytes per wave (the device also holds as much again as unshuffle scratch).
    pub wave_dst_bytes: usize,
    /// Streams (blosc splits, raw chunks, crc checks) per wave.
    pub wave_streams: usize,
    /// Hard budget of device memory for this decoder.
    pub device_budget_bytes: usize,
    /// Host parse threads; 0 uses rayon's global pool.
    pub n_compute_threads: usize,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            wave_src_bytes: 64 << 20,
            wave_dst_bytes: 256 << 20,
            wave_streams: 1 << 20,
            device_budget_bytes: 1 << 30,
            n_compute_threads: 0,
        }
    }
}

impl DecodeConfig {
    /// Sets `wave_src_bytes`.
    #[must_use]
    pub fn with_wave_src_bytes(mut self, v: usize) -> Self {
        self.wave_src_bytes = v;
        self
    }
    /// Sets `wave_dst_bytes`.
    #[must_use]
    pub fn with_wave_dst_bytes(mut self, v: usize) -> Self {
        self.wave_dst_bytes = v;
        self
    }
    /// Sets `wave_streams`.
    #[must_use]
    pub fn with_wave_streams(mut self, v: usize) -> Self {
        self.wave_streams = v;
        self
    }
    /// Sets `device_budget_bytes`.
    #[must_use]
    pub fn with_device_budget_bytes(mut self, v: usize) -> Self {
        self.device_budget_bytes = v;
        self
    }
    /// Sets `n_compute_threads`.
    #[must_use]
    pub fn with_n_compute_threads(mut self, v: usize) -> Self {
        self.n_compute_threads = v;
        self
    }

    /// Bytes of per-stream tables: descriptor 32, id 4, status 4, actual 4, shuffle job 32.
    fn meta_bytes(&self) -> usize {
        self.wave_streams.saturating_mul(80).saturating_add(1024)
    }

    /// Device bytes this configuration allocates.
    #[must_use]
    pub fn device_bytes(&self) -> usize {
        self.wave_src_bytes.saturating_add(self.meta_bytes()).saturating_add(self.wave_dst_bytes.saturating_mul(2))
    }
}

/// Counters and timings of one `decode_*` call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaveStats {
    /// Host parse time (stats `decompress_parse`).
    pub decompress_parse: Duration,
    /// Waves run.
    pub waves: usize,
    /// Kernel launches issued.
    pub launches: usize,
    /// Encoded bytes copied to the device.
    pub bytes_uploaded: usize,
    /// Decoded bytes produced.
    pub bytes_decoded: usize,
    /// Streams per codec: lz4, blosclz, raw, crc32c.
    pub streams: [usize; 4],
    /// Device time of the kernels: from the first launch of a wave to the end of its last
    /// kernel, summed over waves (timing events on CUDA; wall clock on the emulator).
    pub kernel_time: Duration,
}

/// Decoded chunks copied back to the host.
#[derive(Debug)]
pub struct HostDecoded {
    /// Per chunk, its decoded bytes or why it failed.
    pub chunks: Vec<Result<Vec<u8>>>,
    /// Counters and timings.
    pub stats: WaveStats,
}

/// One decoded wave left on the device: chunk `i`'s bytes are `output[ranges[i]]`.
#[derive(Debug)]
pub struct DecodedWave<'d> {
    /// Per chunk, the byte range of its decoded bytes in `output`, or why it failed.
    pub chunks: Vec<Result<Range<usize>>>,
    /// The device buffer holding the decoded bytes (valid until the decoder's next call).
    pub output: &'d DeviceBuffer,
    /// Counters and timings.
    pub stats: WaveStats,
}

/// What the host parse produced for one chunk.
#[derive(Debug)]
struct ChunkPlan {
    streams: Vec<FrameStream>,
    shuffles: Vec<FrameShuffle>,
    typesize: u32,
    decoded_len: usize,
    /// Bytes the streams read (the chunk minus its CRC).
    payload_len: usize,
    crc: Option<u32>,
}

fn plan_chunk(index: usize, input: &ChunkInput<'_>) -> Result<ChunkPlan> {
    let mut payload = input.bytes;
    let mut crc = None;
    if input.crc32c {
        let Some(split) = payload.len().checked_sub(4) else {
            return Err(Error::Decode {
                chunk: index,
                what: "crc32c chunk",
                offset: 0,
                reason: format!("{} bytes cannot hold a 4-byte checksum", payload.len()),
            });
        };
        let (data, tail) = payload.split_at(split);
        crc = tail.try_into().ok().map(u32::from_le_bytes);
        payload = data;
    }
    if payload.len() > u32::MAX as usize {
        return Err(Error::Unsupported { chunk: index, what: format!("a {}-byte chunk (4 GiB limit)", payload.len()) });
    }
    let plan = match input.encoding {
        ChunkEncoding::Raw => ChunkPlan {
            streams: vec![FrameStream {
                src_off: 0,
                src_len: payload.len() as u32,
                dst_off: 0,
                dst_len: payload.len() as u32,
                codec: StreamCodec::Raw,
                to_scratch: false,
            }],
            shuffles: Vec::new(),
            typesize: 1,
            decoded_len: payload.len(),
            payload_len: payload.len(),
            crc,
        },
        ChunkEncoding::Blosc => {
            let p = blosc::plan_frame(payload).map_err(|e| {
                if e.reason.contains("has no GPU kernel") {
                    Error::Unsupported { chunk: index, what: format!("blosc {}", e.reason) }
                } else {
                    Error::Decode { chunk: index, what: "blosc frame", offset: e.offset, reason: e.reason }
                }
            })?;
            ChunkPlan {
                typesize: u32::from(p.header.typesize),
                decoded_len: p.header.nbytes as usize,
                payload_len: payload.len(),
                streams: p.streams,
                shuffles: p.shuffles,
                crc,
            }
        }
    };
    if let Some(exp) = input.expected_len
        && exp != plan.decoded_len
    {
        return Err(Error::Decode {
            chunk: index,
            what: "chunk",
            offset: 0,
            reason: format!("decodes to {} bytes but the chunk shape needs {exp}", plan.decoded_len),
        });
    }
    Ok(plan)
}

const ALIGN: usize = 16;

/// Per chunk of a wave: its index in the batch and its decoded range or error.
type WaveResults = Vec<(usize, Result<Range<usize>>)>;

fn align_up(v: usize) -> usize {
    v.div_ceil(ALIGN) * ALIGN
}

fn codec_slot(codec: StreamCodec) -> usize {
    match codec {
        StreamCodec::Lz4 => 0,
        StreamCodec::BloscLz => 1,
        StreamCodec::Raw => 2,
    }
}

const SLOT_CRC: usize = 3;
const SLOT_NAMES: [&str; 4] = ["lz4", "blosclz", "raw", "crc32c"];

fn push_u64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn push_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// Book-keeping of one stream for error reports.
#[derive(Clone, Copy, Debug)]
struct StreamInfo {
    chunk: usize,
    slot: usize,
    src: (u32, u32),
    expected: u32,
}

/// A batched decoder bound to one device; owns its wave buffers.
#[derive(Debug)]
pub struct Decoder {
    device: Device,
    config: DecodeConfig,
    input: DeviceBuffer,
    output: DeviceBuffer,
    pool: Option<rayon::ThreadPool>,
}

impl Decoder {
    /// Allocates the wave buffers on `device`. Fails with [`Error::OutOfMemory`] when the
    /// configuration needs more than `device_budget_bytes`.
    pub fn new(device: &Device, config: DecodeConfig) -> Result<Self> {
        if config.wave_streams == 0 || config.wave_streams > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!("wave_streams {} out of 1..2^31", config.wave_streams)));
        }
        if config.wave_dst_bytes > u32::MAX as usize || config.wave_src_bytes > u32::MAX as usize {
            return Err(Error::InvalidArgument("wave buffers are limited to 4 GiB each".into()));
        }
        let need = config.device_bytes();
        if need > config.device_budget_bytes {
            return Err(Error::OutOfMemory(format!(
                "the decoder needs {need} device bytes (wave_src_bytes {} + tables {} + 2 × wave_dst_bytes {}) but device_budget_bytes is {}: raise the budget or shrink the waves",
                config.wave_src_bytes,
                config.meta_bytes(),
                config.wave_dst_bytes,
                config.device_budget_bytes
            )));
        }
        let input = device.alloc(config.wave_src_bytes + config.meta_bytes())?;
        let output = device.alloc(config.wave_dst_bytes * 2)?;
        let pool = if config.n_compute_threads > 0 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(config.n_compute_threads)
                    .build()
                    .map_err(|e| Error::InvalidArgument(format!("n_compute_threads: {e}")))?,
            )
        } else {
            None
        };
        Ok(Self { device: device.clone(), config, input, output, pool })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &DecodeConfig {
        &self.config
    }

    fn parse(&self, chunks: &[ChunkInput<'_>]) -> (Vec<Result<ChunkPlan>>, Duration) {
        use rayon::prelude::*;
        let t = Instant::now();
        let run = || chunks.par_iter().enumerate().map(|(i, c)| plan_chunk(i, c)).collect::<Vec<_>>();
        let plans = match &self.pool {
            Some(p) => p.install(run),
            None => run(),
        };
        (plans, t.elapsed())
    }

    /// Per-chunk footprint in a wave: (src bytes, dst bytes, streams).
    fn footprint(p: &ChunkPlan) -> (usize, usize, usize) {
        (align_up(p.payload_len), align_up(p.decoded_len), p.streams.len() + usize::from(p.crc.is_some()))
    }

    fn fits_alone(&self, p: &ChunkPlan) -> bool {
        let (s, d, n) = Self::footprint(p);
        s <= self.config.wave_src_bytes && d <= self.config.wave_dst_bytes && n <= self.config.wave_streams
    }

    /// Decodes `chunks` and copies the results back to the host, in as many waves as needed.
    #[allow(clippy::many_single_char_names)]
    pub fn decode_to_host(&mut self, chunks: &[ChunkInput<'_>]) -> Result<HostDecoded> {
        let (plans, parse_time) = self.parse(chunks);
        let mut stats = WaveStats { decompress_parse: parse_time, ..WaveStats::default() };
        let mut out: Vec<Result<Vec<u8>>> = Vec::with_capacity(chunks.len());
        let mut plans: Vec<Option<Result<ChunkPlan>>> = plans.into_iter().map(Some).collect();
        for _ in 0..chunks.len() {
            out.push(Ok(Vec::new()));
        }
        // Greedy partition into waves.
        let mut i = 0;
        while i < chunks.len() {
            let mut wave: Vec<(usize, ChunkPlan)> = Vec::new();
            let (mut s, mut d, mut n) = (0usize, 0usize, 0usize);
            while i < chunks.len() {
                let ok = matches!(plans[i], Some(Ok(_)));
                if !ok {
                    if let Some(Err(e)) = plans[i].take() {
                        out[i] = Err(e);
                    }
                    i += 1;
                    continue;
                }
                let Some(Ok(p)) = plans[i].as_ref() else { break };
                if !self.fits_alone(p) {
                    let (ps, pd, pn) = Self::footprint(p);
                    out[i] = Err(Error::OutOfMemory(format!(
                        "chunk {i} needs {ps} encoded bytes, {pd} decoded bytes and {pn} streams; a wave holds {}, {} and {}: raise DecodeConfig's wave sizes",
                        self.config.wave_src_bytes, self.config.wave_dst_bytes, self.config.wave_streams
                    )));
                    plans[i] = None;
                    i += 1;
                    continue;
                }
                let (ps, pd, pn) = Self::footprint(p);
                if s + ps > self.config.wave_src_bytes
                    || d + pd > self.config.wave_dst_bytes
                    || n + pn > self.config.wave_streams
                {
                    break;
                }
                s += ps;
                d += pd;
                n += pn;
                if let Some(Ok(p)) = plans[i].take() {
                    wave.push((i, p));
                }
                i += 1;
            }
            if wave.is_empty() {
                continue;
            }
            let (results, wstats) = self.run_wave(chunks, &wave)?;
            merge_stats(&mut stats, &wstats);
            // One device-to-host copy of the wave's decoded region.
            let total: usize = results.iter().filter_map(|r| r.1.as_ref().ok().map(|r| r.end)).max().unwrap_or(0);
            let mut host = vec![0u8; total];
            self.device.download(&self.output, 0, &mut host)?;
            for (idx, r) in results {
                out[idx] = r.map(|range| host[range].to_vec());
            }
        }
        Ok(HostDecoded { chunks: out, stats })
    }

    /// Decodes `chunks` as one wave and leaves the bytes on the device. Fails with
    /// [`Error::OutOfMemory`] when they do not fit in one wave (see [`DecodeConfig`]).
    pub fn decode_wave(&mut self, chunks: &[ChunkInput<'_>]) -> Result<DecodedWave<'_>> {
        let (plans, parse_time) = self.parse(chunks);
        let mut stats = WaveStats { decompress_parse: parse_time, ..WaveStats::default() };
        let mut out: Vec<Result<Range<usize>>> = Vec::with_capacity(chunks.len());
        let mut wave = Vec::new();
        let (mut s, mut d, mut n) = (0usize, 0usize, 0usize);
        for (i, p) in plans.into_iter().enumerate() {
            match p {
                Ok(p) => {
                    let (ps, pd, pn) = Self::footprint(&p);
                    s += ps;
                    d += pd;
                    n += pn;
                    wave.push((i, p));
                    out.push(Ok(0..0));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        if s > self.config.wave_src_bytes || d > self.config.wave_dst_bytes || n > self.config.wave_streams {
            return Err(Error::OutOfMemory(format!(
                "the batch needs {s} encoded bytes, {d} decoded bytes and {n} streams; a wave holds {}, {} and {}: use decode_to_host or raise the wave sizes",
                self.config.wave_src_bytes, self.config.wave_dst_bytes, self.config.wave_streams
            )));
        }
        if !wave.is_empty() {
            let (results, wstats) = self.run_wave(chunks, &wave)?;
            merge_stats(&mut stats, &wstats);
            for (idx, r) in results {
                out[idx] = r;
            }
        }
        Ok(DecodedWave { chunks: out, output: &self.output, stats })
    }

    /// Runs one wave: layout, one upload, the launches, one status download.
    #[allow(clippy::too_many_lines)]
    fn run_wave(&mut self, chunks: &[ChunkInput<'_>], wave: &[(usize, ChunkPlan)]) -> Result<(WaveResults, WaveStats)> {
        let mut stats = WaveStats { waves: 1, ..WaveStats::default() };
        let scratch_base = self.config.wave_dst_bytes as u64;
        // Layout of the source region: every chunk's payload, 16-byte aligned.
        let mut staging: Vec<u8> = Vec::new();
        let mut chunk_src = Vec::with_capacity(wave.len());
        let mut chunk_dst = Vec::with_capacity(wave.len());
        let mut dst_cursor = 0usize;
        for (idx, p) in wave {
            chunk_src.push(staging.len());
            staging.extend_from_slice(&chunks[*idx].bytes[..p.payload_len]);
            staging.resize(align_up(staging.len()), 0);
            chunk_dst.push(dst_cursor);
            dst_cursor += align_up(p.decoded_len);
        }
        let src_total = staging.len();
        stats.bytes_uploaded = src_total;
        // Stream table, id lists per codec, shuffle jobs.
        let mut descs: Vec<u8> = Vec::new();
        let mut ids: [Vec<u32>; 4] = Default::default();
        let mut infos: Vec<StreamInfo> = Vec::new();
        let mut jobs: Vec<u8> = Vec::new();
        let mut n_jobs = 0u32;
        let mut first_stream: Vec<u32> = Vec::with_capacity(wave.len());
        for (w, (idx, p)) in wave.iter().enumerate() {
            first_stream.push(infos.len() as u32);
            let (cs, cd) = (chunk_src[w] as u64, chunk_dst[w] as u64);
            if let Some(crc) = p.crc {
                let sid = infos.len() as u32;
                push_u64(&mut descs, cs);
                push_u64(&mut descs, 0);
                push_u32(&mut descs, p.payload_len as u32);
                push_u32(&mut descs, 0);
                push_u32(&mut descs, SLOT_CRC as u32);
                push_u32(&mut descs, crc);
                ids[SLOT_CRC].push(sid);
                infos.push(StreamInfo { chunk: *idx, slot: SLOT_CRC, src: (0, p.payload_len as u32), expected: crc });
            }
            for s in &p.streams {
                let sid = infos.len() as u32;
                let slot = codec_slot(s.codec);
                let dst = cd + u64::from(s.dst_off) + if s.to_scratch { scratch_base } else { 0 };
                push_u64(&mut descs, cs + u64::from(s.src_off));
                push_u64(&mut descs, dst);
                push_u32(&mut descs, s.src_len);
                push_u32(&mut descs, s.dst_len);
                push_u32(&mut descs, slot as u32);
                push_u32(&mut descs, 0);
                ids[slot].push(sid);
                infos.push(StreamInfo {
                    chunk: *idx,
                    slot,
                    src: (s.src_off, s.src_off + s.src_len),
                    expected: s.dst_len,
                });
            }
            for sh in &p.shuffles {
                let off = cd + u64::from(sh.off);
                push_u64(&mut jobs, scratch_base + off);
                push_u64(&mut jobs, off);
                push_u32(&mut jobs, sh.len);
                push_u32(&mut jobs, p.typesize);
                push_u32(&mut jobs, if sh.mode == Shuffle::Bit { c::DMC_SHUFFLE_BIT } else { c::DMC_SHUFFLE_BYTE });
                push_u32(&mut jobs, first_stream[w]);
                n_jobs += 1;
            }
        }
        let n_streams = infos.len();
        for (k, v) in ids.iter().enumerate() {
            stats.streams[k] += v.len();
        }
        // Tables follow the source region in the same upload.
        let tables_at = staging.len();
        let descs_at = tables_at;
        staging.extend_from_slice(&descs);
        let mut ids_at = [0usize; 4];
        for (k, v) in ids.iter().enumerate() {
            staging.resize(align_up(staging.len()), 0);
            ids_at[k] = staging.len();
            for id in v {
                push_u32(&mut staging, *id);
            }
        }
        staging.resize(align_up(staging.len()), 0);
        let jobs_at = staging.len();
        staging.extend_from_slice(&jobs);
        staging.resize(align_up(staging.len()), 0);
        let status_at = staging.len();
        for _ in 0..n_streams {
            push_u32(&mut staging, c::DMC_STATUS_PENDING);
        }
        let actual_at = staging.len();
        staging.resize(staging.len() + 4 * n_streams, 0);
        if staging.len() > self.input.len() {
            return Err(Error::OutOfMemory(format!(
                "wave tables need {} bytes, the input buffer holds {}",
                staging.len(),
                self.input.len()
            )));
        }
        self.device.upload(&staging, &mut self.input, 0)?;

        let inp = &self.input;
        let outp = &self.output;
        let src = inp.ptr_at(0)?;
        let dst = outp.ptr_at(0)?;
        let out_total = Arg::U64(outp.len() as u64);
        let streams = inp.ptr_at(descs_at)?;
        let status_ptr = inp.ptr_at(status_at)?;
        let actual = inp.ptr_at(actual_at)?;
        let kernels = [Kernel::Lz4Decode, Kernel::BloscLzDecode, Kernel::Memcpy];
        let launched = Instant::now();
        if !ids[SLOT_CRC].is_empty() {
            let n = ids[SLOT_CRC].len() as u32;
            let args = [
                src,
                Arg::U64(src_total as u64),
                streams,
                inp.ptr_at(ids_at[SLOT_CRC])?,
                Arg::U32(n),
                status_ptr,
                actual,
            ];
            // SAFETY: all pointers address the wave buffers; the streams' ranges lie inside
            // `src_total` by construction (and the kernel re-checks them).
            unsafe { self.device.launch(Kernel::Crc32c, (n, 1), &args)? };
            stats.launches += 1;
        }
        for (slot, k) in kernels.iter().enumerate() {
            let n = ids[slot].len() as u32;
            if n == 0 {
                continue;
            }
            let grid = match k {
                Kernel::Lz4Decode => n.div_ceil(c::DMC_LZ4_WARPS_PER_BLOCK),
                Kernel::BloscLzDecode => n.div_ceil(c::DMC_BLOSCLZ_WARPS_PER_BLOCK),
                _ => n,
            };
            let args = [
                src,
                Arg::U64(src_total as u64),
                dst,
                out_total,
                streams,
                inp.ptr_at(ids_at[slot])?,
                Arg::U32(n),
                status_ptr,
                actual,
            ];
            // SAFETY: as above; destinations lie inside the output buffer by construction.
            unsafe { self.device.launch(*k, (grid, 1), &args)? };
            stats.launches += 1;
        }
        if n_jobs > 0 {
            let args = [dst, out_total, dst, out_total, inp.ptr_at(jobs_at)?, Arg::U32(n_jobs), status_ptr];
            // SAFETY: jobs read the scratch half and write the output half of the same buffer,
            // disjoint ranges by construction.
            unsafe { self.device.launch(Kernel::Unshuffle, (n_jobs, 1), &args)? };
            stats.launches += 1;
        }
        // One download of status + actual.
        let mut sa = vec![0u8; 8 * n_streams];
        self.device.download(&self.input, status_at, &mut sa)?;
        stats.kernel_time = launched.elapsed();
        let word = |i: usize| -> u32 {
            sa.get(4 * i..4 * i + 4).and_then(|b| b.try_into().ok()).map_or(c::DMC_STATUS_PENDING, u32::from_le_bytes)
        };
        let mut results: WaveResults = Vec::with_capacity(wave.len());
        let mut failed: Vec<Option<Error>> = (0..wave.len()).map(|_| None).collect();
        let mut w = 0usize;
        for (sid, info) in infos.iter().enumerate() {
            while w + 1 < wave.len() && first_stream[w + 1] as usize <= sid {
                w += 1;
            }
            let st = StreamStatus::from_code(word(sid));
            let act = word(n_streams + sid);
            if st != StreamStatus::Ok && failed[w].is_none() {
                failed[w] = Some(Error::Stream {
                    chunk: info.chunk,
                    codec: SLOT_NAMES[info.slot],
                    src_start: info.src.0 as usize,
                    src_end: info.src.1 as usize,
                    status: st,
                    actual: act,
                    expected: info.expected,
                });
            }
        }
        for (w, (idx, p)) in wave.iter().enumerate() {
            if let Some(e) = failed[w].take() {
                results.push((*idx, Err(e)));
            } else {
                stats.bytes_decoded += p.decoded_len;
                results.push((*idx, Ok(chunk_dst[w]..chunk_dst[w] + p.decoded_len)));
            }
        }
        Ok((results, stats))
    }
}

fn merge_stats(a: &mut WaveStats, b: &WaveStats) {
    a.waves += b.waves;
    a.launches += b.launches;
    a.bytes_uploaded += b.bytes_uploaded;
    a.bytes_decoded += b.bytes_decoded;
    a.kernel_time += b.kernel_time;
    for k in 0..4 {
        a.streams[k] += b.streams[k];
    }
}
