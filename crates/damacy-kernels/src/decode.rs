//! Batched decode of chunks on a [`Device`]: host parse (rayon) → one host-to-device copy per
//! wave → one launch per codec per wave (crc32c, lz4, blosclz, zstd, inflate, raw copy), each
//! over its streams longest first → unshuffle. Raw chunks without a checksum (zarr `bytes`) are
//! not launched at all: they are laid out first, at the same offsets in the upload and the
//! output, and a second copy puts them straight into the output.
//!
//! Why one launch per codec rather than one launch for every codec of a wave: the chunks of an
//! array share one codec chain, and a batch reads one array, so a wave nearly always holds one
//! codec (plus crc32c and unshuffle, which must follow or precede it anyway); a fused kernel
//! would run every codec at the block size, registers and shared memory of the most demanding
//! one (zstd and inflate: 80 registers and ~10–20 KiB of shared memory per warp, against 32–39
//! registers and none for lz4), cutting lz4's occupancy to theirs, to save a launch (~3 µs in
//! the cost model) only in the rare mixed wave.
//!
//! The decoder owns its buffers — pinned host staging and device memory — sized once from
//! [`DecodeConfig`] against hard budgets: exceeding a budget is an error at construction, never
//! an out-of-memory in the middle of a run. Batches larger than one wave are split into several
//! waves, pipelined over the decoder's slots (the next wave is staged and uploaded on a copy
//! stream while the device decodes the current one; events order every hand-off).

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::blosc::{self, FrameErrorKind, FrameShuffle, FrameStream, Shuffle, StreamCodec};
use crate::consts as c;
use crate::device::{Device, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::error::{Error, Result, StreamStatus};
use crate::kernel::Kernel;
use crate::launch::{
    BloscLzDecodeArgs, Crc32cArgs, InflateDecodeArgs, KernelArgs, Lz4DecodeArgs, MemcpyArgs, UnshuffleArgs,
    ZstdDecodeArgs,
};
use crate::wire::{ShuffleJobDesc, StreamDesc};
use crate::zstd;

/// The kernels a decoder launches; [`Decoder::new`] prepares them.
const DECODE_KERNELS: [Kernel; 7] = [
    Kernel::Crc32c,
    Kernel::Lz4Decode,
    Kernel::BloscLzDecode,
    Kernel::ZstdDecode,
    Kernel::InflateDecode,
    Kernel::Memcpy,
    Kernel::Unshuffle,
];

/// How a chunk's bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkEncoding {
    /// One blosc1 frame (lz4, lz4hc, blosclz, zstd, zlib or memcpyed; any shuffle).
    Blosc,
    /// One or more zstd frames (skippable frames allowed), as the zarr `zstd` codec writes
    /// them. A frame without a content size needs [`ChunkInput::expected_len`].
    Zstd,
    /// One or more gzip members (RFC 1952), as the zarr `gzip` codec and numcodecs' `gzip`
    /// write them. Without [`ChunkInput::expected_len`] the output size is the last member's
    /// ISIZE.
    Gzip,
    /// One zlib stream (RFC 1950), as numcodecs' `zlib` writes it. Needs
    /// [`ChunkInput::expected_len`].
    Zlib,
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
    /// decode error. `None` accepts what the encoding declares. zstd frames that omit their
    /// content size take their output size from it (a decode error when it is `None`).
    pub expected_len: Option<usize>,
    /// Verify the XXH64 content checksum of every zstd frame that carries one (zstd chunks and
    /// blosc-zstd streams), the CRC32 and ISIZE of gzip members and the Adler-32 of zlib streams
    /// (zlib chunks and blosc-zlib streams); a mismatch is a decode error. Off, they are skipped.
    pub verify_checksums: bool,
}

impl<'a> ChunkInput<'a> {
    /// A blosc1 frame.
    #[must_use]
    pub fn blosc(bytes: &'a [u8]) -> Self {
        Self { bytes, encoding: ChunkEncoding::Blosc, crc32c: false, expected_len: None, verify_checksums: false }
    }

    /// One or more zstd frames.
    #[must_use]
    pub fn zstd(bytes: &'a [u8]) -> Self {
        Self { bytes, encoding: ChunkEncoding::Zstd, crc32c: false, expected_len: None, verify_checksums: false }
    }

    /// One or more gzip members.
    #[must_use]
    pub fn gzip(bytes: &'a [u8]) -> Self {
        Self { bytes, encoding: ChunkEncoding::Gzip, crc32c: false, expected_len: None, verify_checksums: false }
    }

    /// One zlib stream.
    #[must_use]
    pub fn zlib(bytes: &'a [u8]) -> Self {
        Self { bytes, encoding: ChunkEncoding::Zlib, crc32c: false, expected_len: None, verify_checksums: false }
    }

    /// Raw bytes.
    #[must_use]
    pub fn raw(bytes: &'a [u8]) -> Self {
        Self { bytes, encoding: ChunkEncoding::Raw, crc32c: false, expected_len: None, verify_checksums: false }
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

    /// Verifies the chunk's checksums: zstd XXH64, gzip CRC32 and ISIZE, zlib Adler-32.
    #[must_use]
    pub fn with_checksum_verification(mut self) -> Self {
        self.verify_checksums = true;
        self
    }
}

/// Sizes of a [`Decoder`]'s buffers, allocated once at construction against hard budgets.
///
/// Defaults: per wave 32 MiB of encoded bytes, 128 MiB of decoded bytes and 256 Ki streams;
/// 2 slots (one wave decodes while the next is staged and uploaded); a 1 GiB device budget and
/// a 256 MiB pinned host budget; rayon's global pool for the host parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeConfig {
    /// Encoded bytes per wave (one host-to-device copy).
    pub wave_src_bytes: usize,
    /// Decoded bytes per wave (the device also holds as much again as unshuffle scratch).
    pub wave_dst_bytes: usize,
    /// Streams (blosc splits, raw chunks, zstd frame runs, crc checks) per wave.
    pub wave_streams: usize,
    /// Sets of wave buffers (1 to 4): how many waves can be in flight at once. 1 runs waves
    /// strictly one after another; 2 overlaps the host staging and upload of a wave with the
    /// decoding of the previous one.
    pub slots: usize,
    /// Hard budget of device memory for this decoder.
    pub device_budget_bytes: usize,
    /// Hard budget of pinned (page-locked) host memory for this decoder.
    pub host_budget_bytes: usize,
    /// Host parse threads; 0 uses rayon's global pool.
    pub n_compute_threads: usize,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            wave_src_bytes: 32 << 20,
            wave_dst_bytes: 128 << 20,
            wave_streams: 256 << 10,
            slots: 2,
            device_budget_bytes: 1 << 30,
            host_budget_bytes: 256 << 20,
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
    /// Sets `slots`.
    #[must_use]
    pub fn with_slots(mut self, v: usize) -> Self {
        self.slots = v;
        self
    }
    /// Sets `device_budget_bytes`.
    #[must_use]
    pub fn with_device_budget_bytes(mut self, v: usize) -> Self {
        self.device_budget_bytes = v;
        self
    }
    /// Sets `host_budget_bytes`.
    #[must_use]
    pub fn with_host_budget_bytes(mut self, v: usize) -> Self {
        self.host_budget_bytes = v;
        self
    }
    /// Sets `n_compute_threads`.
    #[must_use]
    pub fn with_n_compute_threads(mut self, v: usize) -> Self {
        self.n_compute_threads = v;
        self
    }

    /// Bytes of one wave's tables (uploaded with the encoded bytes, so counted in both the
    /// device and the pinned host footprint): per stream a stream descriptor, an id, a status
    /// word, an actual-size word and at most one shuffle job, plus alignment padding. Computed
    /// from the wire structs' sizes; budget planners should use this rather than a copy of it.
    #[must_use]
    pub fn table_bytes(&self) -> usize {
        const PER_STREAM: usize = size_of::<StreamDesc>() + 3 * size_of::<u32>() + size_of::<ShuffleJobDesc>();
        self.wave_streams.saturating_mul(PER_STREAM).saturating_add(1024)
    }

    /// What one wave of this configuration holds.
    #[must_use]
    pub fn wave_capacity(&self) -> WaveFootprint {
        WaveFootprint { src_bytes: self.wave_src_bytes, dst_bytes: self.wave_dst_bytes, streams: self.wave_streams }
    }

    /// Device bytes this configuration allocates: per slot, the encoded wave with its tables and
    /// the decoded wave with its unshuffle scratch.
    #[must_use]
    pub fn device_bytes(&self) -> usize {
        self.wave_src_bytes
            .saturating_add(self.table_bytes())
            .saturating_add(self.wave_dst_bytes.saturating_mul(2))
            .saturating_mul(self.slots)
    }

    /// Pinned host bytes this configuration allocates: per slot, the staging buffer of one
    /// upload and the status read-back.
    #[must_use]
    pub fn host_bytes(&self) -> usize {
        self.wave_src_bytes
            .saturating_add(self.table_bytes())
            .saturating_add(self.wave_streams.saturating_mul(8))
            .saturating_mul(self.slots)
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
    /// Of `bytes_uploaded`, raw chunks' bytes copied straight into the decoded output (zarr
    /// `bytes` chunks without a checksum: no kernel touches them).
    pub bytes_direct: usize,
    /// Decoded bytes produced.
    pub bytes_decoded: usize,
    /// Streams per codec: lz4, blosclz, raw, crc32c, zstd, inflate (a zstd stream is a run of
    /// frames with a known output range: usually one frame, one blosc split; an inflate stream
    /// is a gzip or zlib chunk or one blosc-zlib split).
    pub streams: [usize; 6],
    /// Device time of the kernels: from the first launch of a wave to the end of its last
    /// kernel, summed over waves (timing events on CUDA; wall clock on the emulator).
    pub kernel_time: Duration,
}

/// What chunks need of a wave's buffers: encoded bytes, decoded bytes and streams (each chunk's
/// bytes are counted 16-byte aligned, as they are laid out in the wave).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaveFootprint {
    /// Encoded bytes uploaded.
    pub src_bytes: usize,
    /// Decoded bytes produced.
    pub dst_bytes: usize,
    /// Streams (blosc splits, raw chunks, zstd frame runs, crc32c checks).
    pub streams: usize,
}

impl WaveFootprint {
    /// Whether this footprint fits in `capacity`.
    #[must_use]
    pub fn fits_in(&self, capacity: &WaveFootprint) -> bool {
        self.src_bytes <= capacity.src_bytes && self.dst_bytes <= capacity.dst_bytes && self.streams <= capacity.streams
    }

    fn plus(self, o: WaveFootprint) -> WaveFootprint {
        WaveFootprint {
            src_bytes: self.src_bytes.saturating_add(o.src_bytes),
            dst_bytes: self.dst_bytes.saturating_add(o.dst_bytes),
            streams: self.streams.saturating_add(o.streams),
        }
    }
}

/// How a list of chunks would be decoded, from the host parse alone (no device work): see
/// [`Decoder::plan_waves`].
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct WavePlan {
    /// Waves [`Decoder::decode_to_host`] would run for the chunks that can be decoded (0 when
    /// none can).
    pub waves: usize,
    /// What the decodable chunks need together.
    pub total: WaveFootprint,
    /// What one wave of the decoder holds.
    pub capacity: WaveFootprint,
    /// The chunks that cannot be decoded on the device, by index, with the error a decode would
    /// report for them: malformed ([`Error::Decode`]), without a kernel ([`Error::Unsupported`]),
    /// or larger than a wave alone ([`Error::WaveFull`] with `chunk: Some(i)`).
    pub rejected: Vec<(usize, Error)>,
}

impl WavePlan {
    /// Whether [`Decoder::decode_wave`] takes these chunks in one wave (it fails with
    /// [`Error::WaveFull`] otherwise): the decodable chunks fit together and none is rejected
    /// for its size.
    #[must_use]
    pub fn fits_in_one_wave(&self) -> bool {
        self.total.fits_in(&self.capacity) && !self.rejected.iter().any(|(_, e)| matches!(e, Error::WaveFull { .. }))
    }
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
    /// `dmc_stream.flags` of the chunk's zstd streams.
    zstd_flags: u32,
    /// `dmc_stream.flags` of the chunk's inflate streams (wrapper format and verification).
    inflate_flags: u32,
}

impl ChunkPlan {
    /// A chunk whose decoded bytes are its payload as is (zarr `bytes`, no checksum): its
    /// upload goes straight to its place in the output, with no kernel.
    fn is_direct(&self) -> bool {
        self.crc.is_none()
            && self.shuffles.is_empty()
            && self.decoded_len == self.payload_len
            && matches!(
                self.streams.as_slice(),
                [FrameStream { codec: StreamCodec::Raw, src_off: 0, dst_off: 0, to_scratch: false, .. }]
            )
    }
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
    let zstd_flags = if input.verify_checksums { c::DMC_ZSTD_VERIFY_CHECKSUM } else { 0 };
    let verify_inflate = if input.verify_checksums { c::DMC_INFLATE_VERIFY_CHECKSUM } else { 0 };
    let inflate_flags = verify_inflate
        | match input.encoding {
            ChunkEncoding::Gzip => c::DMC_INFLATE_FMT_GZIP,
            _ => c::DMC_INFLATE_FMT_ZLIB,
        };
    // A chunk that is one stream of `codec` decoding to `decoded_len` bytes.
    let single = |codec: StreamCodec, decoded_len: usize| ChunkPlan {
        streams: vec![FrameStream {
            src_off: 0,
            src_len: payload.len() as u32,
            dst_off: 0,
            dst_len: decoded_len as u32,
            codec,
            to_scratch: false,
        }],
        shuffles: Vec::new(),
        typesize: 1,
        decoded_len,
        payload_len: payload.len(),
        crc,
        zstd_flags,
        inflate_flags,
    };
    let plan = match input.encoding {
        ChunkEncoding::Raw => single(StreamCodec::Raw, payload.len()),
        ChunkEncoding::Gzip | ChunkEncoding::Zlib => {
            single(StreamCodec::Deflate, deflate_decoded_len(index, input, payload)?)
        }
        ChunkEncoding::Zstd => {
            let p = zstd::parse(payload, input.expected_len).map_err(|e| zstd_error(index, "zstd frame", 0, e))?;
            ChunkPlan {
                streams: p.jobs.iter().map(|j| zstd_stream(j, 0, 0, false)).collect(),
                shuffles: Vec::new(),
                typesize: 1,
                decoded_len: p.decoded_len,
                payload_len: payload.len(),
                crc,
                zstd_flags,
                inflate_flags,
            }
        }
        ChunkEncoding::Blosc => {
            let p = blosc::plan_frame(payload).map_err(|e| match e.kind {
                FrameErrorKind::Unsupported => Error::Unsupported { chunk: index, what: format!("blosc {}", e.reason) },
                _ => Error::Decode { chunk: index, what: "blosc frame", offset: e.offset, reason: e.reason },
            })?;
            let streams = if p.streams.iter().any(|s| s.codec == StreamCodec::Zstd) {
                blosc_zstd_streams(index, payload, p.streams)?
            } else {
                p.streams
            };
            ChunkPlan {
                typesize: u32::from(p.header.typesize),
                decoded_len: p.header.nbytes as usize,
                payload_len: payload.len(),
                streams,
                shuffles: p.shuffles,
                crc,
                zstd_flags,
                inflate_flags,
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

/// The decoded size of a gzip or zlib chunk: the caller's expected size, else (gzip) the last
/// member's ISIZE (the size modulo 2^32; a wrong guess is a size-mismatch status).
fn deflate_decoded_len(index: usize, input: &ChunkInput<'_>, payload: &[u8]) -> Result<usize> {
    if let Some(e) = input.expected_len {
        if e > u32::MAX as usize {
            return Err(Error::Unsupported { chunk: index, what: format!("{e} decoded bytes (4 GiB limit)") });
        }
        return Ok(e);
    }
    let what = if input.encoding == ChunkEncoding::Gzip { "gzip member" } else { "zlib stream" };
    match (input.encoding, payload.len().checked_sub(4)) {
        (ChunkEncoding::Gzip, Some(at)) if payload.len() >= 18 => {
            Ok(payload[at..].iter().rev().fold(0usize, |a, &b| (a << 8) | usize::from(b)))
        }
        (ChunkEncoding::Gzip, _) => Err(Error::Decode {
            chunk: index,
            what,
            offset: 0,
            reason: format!("{} bytes cannot hold a gzip member (18 bytes at least)", payload.len()),
        }),
        _ => Err(Error::Decode {
            chunk: index,
            what,
            offset: 0,
            reason: "a zlib stream does not record its decoded size: give the expected size \
                     (ChunkInput::with_expected_len)"
                .into(),
        }),
    }
}

/// A zstd parse error of chunk `index` as the decoder reports it; `base` is the byte of the
/// chunk where the parsed bytes start.
fn zstd_error(index: usize, what: &'static str, base: usize, e: zstd::ZstdParseError) -> Error {
    if e.unsupported {
        Error::Unsupported { chunk: index, what: e.reason }
    } else {
        Error::Decode { chunk: index, what, offset: base + e.offset, reason: e.reason }
    }
}

/// The stream of one zstd job whose frames start at byte `src_base` of the chunk and decode to
/// byte `dst_base` of the chunk's output. Offsets fit in `u32`: the chunk (and so each frame)
/// is below 4 GiB, checked before, and so is the decoded size (`zstd::MAX_DECODED_LEN`).
fn zstd_stream(job: &zstd::ZstdJob, src_base: u32, dst_base: u32, to_scratch: bool) -> FrameStream {
    FrameStream {
        src_off: src_base + job.src.start as u32,
        src_len: job.src.len() as u32,
        dst_off: dst_base + job.dst.start as u32,
        dst_len: job.dst.len() as u32,
        codec: StreamCodec::Zstd,
        to_scratch,
    }
}

/// Replaces each zstd stream of a blosc frame (one split of one block, holding its own zstd
/// frame) by the zstd jobs the host parse finds in it, sized by the split's decoded length.
fn blosc_zstd_streams(index: usize, payload: &[u8], streams: Vec<FrameStream>) -> Result<Vec<FrameStream>> {
    let mut out = Vec::with_capacity(streams.len());
    for s in streams {
        if s.codec != StreamCodec::Zstd {
            out.push(s);
            continue;
        }
        let at = s.src_off as usize;
        // `plan_frame` keeps every stream inside the frame.
        let bytes = payload.get(at..at + s.src_len as usize).ok_or_else(|| Error::Decode {
            chunk: index,
            what: "blosc frame",
            offset: at,
            reason: format!("a {}-byte stream runs past the frame's end", s.src_len),
        })?;
        let p = zstd::parse(bytes, Some(s.dst_len as usize))
            .map_err(|e| zstd_error(index, "zstd frame of a blosc stream", at, e))?;
        out.extend(p.jobs.iter().map(|j| zstd_stream(j, s.src_off, s.dst_off, s.to_scratch)));
    }
    Ok(out)
}

const ALIGN: usize = 16;

/// Per chunk of a wave: its index in the batch and its decoded range or error.
type WaveResults = Vec<(usize, Result<Range<usize>>)>;

/// Parsed chunks split into waves, and the chunks that go in none.
#[derive(Debug, Default)]
struct Partition {
    waves: Vec<Vec<(usize, ChunkPlan)>>,
    rejected: Vec<(usize, Error)>,
    total: WaveFootprint,
}

fn align_up(v: usize) -> usize {
    v.div_ceil(ALIGN) * ALIGN
}

/// Which id list (and launch) a stream belongs to; also `WaveStats::streams`' index.
const SLOT_LZ4: usize = 0;
const SLOT_BLOSCLZ: usize = 1;
const SLOT_RAW: usize = 2;
const SLOT_CRC: usize = 3;
const SLOT_ZSTD: usize = 4;
const SLOT_INFLATE: usize = 5;
/// Codec slots.
const N_SLOTS: usize = 6;

fn codec_slot(codec: StreamCodec) -> usize {
    match codec {
        StreamCodec::Lz4 => SLOT_LZ4,
        StreamCodec::BloscLz => SLOT_BLOSCLZ,
        StreamCodec::Zstd => SLOT_ZSTD,
        StreamCodec::Deflate => SLOT_INFLATE,
        StreamCodec::Raw => SLOT_RAW,
    }
}

const SLOT_NAMES: [&str; N_SLOTS] = ["lz4", "blosclz", "raw", "crc32c", "zstd", "inflate"];

/// Appends `items` to `tables` as bytes, starting at a 16-byte aligned offset; returns that
/// offset.
fn push_table<T: bytemuck::Pod>(tables: &mut Vec<u8>, items: &[T]) -> usize {
    tables.resize(align_up(tables.len()), 0);
    let at = tables.len();
    tables.extend_from_slice(bytemuck::cast_slice(items));
    at
}

/// Book-keeping of one stream for error reports.
#[derive(Clone, Copy, Debug)]
struct StreamInfo {
    chunk: usize,
    slot: usize,
    src: (u32, u32),
    expected: u32,
}

/// The buffers of one wave in flight: pinned staging and status read-back on the host, the
/// encoded input and the decoded output (plus unshuffle scratch) on the device.
#[derive(Debug)]
struct Slot {
    staging: PinnedBuffer,
    readback: PinnedBuffer,
    input: DeviceBuffer,
    output: DeviceBuffer,
    /// Complete when the last wave submitted to this slot finished (kernels and status copy).
    done: Option<Event>,
    /// Recorded on the compute stream when the decoder was next called after this slot's last
    /// wave: the work queued by then that reads the slot's output (the caller's, e.g.
    /// assembling a batch) precedes it. Copies into the output from the copy stream wait on it.
    released: Option<Event>,
}

/// A wave submitted to the device and not yet collected.
#[derive(Debug)]
struct Pending {
    slot: usize,
    infos: Vec<StreamInfo>,
    first_stream: Vec<u32>,
    /// Per chunk of the wave: its index in the batch, its decoded length and its offset in the
    /// slot's output.
    members: Vec<(usize, usize, usize)>,
    stats: WaveStats,
    /// Timing events around the wave's kernels.
    timing: (Event, Event),
}

/// A batched decoder bound to one device; owns its wave buffers.
///
/// Waves are pipelined over [`DecodeConfig::slots`] sets of buffers: while the device decodes
/// one wave, the host parses and stages the next into pinned memory and a second stream copies
/// it up. Every hand-off is an event: upload → kernels (the compute stream waits for the copy
/// stream), kernels → status read-back, and a slot's previous wave → its reuse.
#[derive(Debug)]
pub struct Decoder {
    device: Device,
    config: DecodeConfig,
    /// Host-to-device copies.
    copy: Stream,
    /// Device-to-host copies of decoded bytes ([`Decoder::decode_to_host`]).
    readback: Stream,
    slots: Vec<Slot>,
    next_slot: usize,
    /// The slot of the last submitted wave.
    last_slot: Option<usize>,
    pool: Option<rayon::ThreadPool>,
}

impl Decoder {
    /// Allocates the wave buffers on `device`. Fails with [`Error::OutOfMemory`] when the
    /// configuration needs more than `device_budget_bytes` of device memory or more than
    /// `host_budget_bytes` of pinned host memory.
    pub fn new(device: &Device, config: DecodeConfig) -> Result<Self> {
        if config.wave_streams == 0 || config.wave_streams > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!("wave_streams {} out of 1..2^31", config.wave_streams)));
        }
        if config.wave_dst_bytes > u32::MAX as usize || config.wave_src_bytes > u32::MAX as usize {
            return Err(Error::InvalidArgument("wave buffers are limited to 4 GiB each".into()));
        }
        if !(1..=4).contains(&config.slots) {
            return Err(Error::InvalidArgument(format!("slots {} out of 1..=4", config.slots)));
        }
        let need = config.device_bytes();
        if need > config.device_budget_bytes {
            return Err(Error::OutOfMemory(format!(
                "the decoder needs {need} device bytes ({} slots × (wave_src_bytes {} + tables {} + 2 × wave_dst_bytes {})) but device_budget_bytes is {}: raise the budget or shrink the waves",
                config.slots,
                config.wave_src_bytes,
                config.table_bytes(),
                config.wave_dst_bytes,
                config.device_budget_bytes
            )));
        }
        let host = config.host_bytes();
        if host > config.host_budget_bytes {
            return Err(Error::OutOfMemory(format!(
                "the decoder needs {host} bytes of pinned host memory ({} slots × (wave_src_bytes {} + tables {} + status {})) but host_budget_bytes is {}: raise the budget or shrink the waves",
                config.slots,
                config.wave_src_bytes,
                config.table_bytes(),
                config.wave_streams * 8,
                config.host_budget_bytes
            )));
        }
        // Compile (or load from the kernel caches) what the decoder launches now, so that the
        // first batch does not pay NVRTC.
        device.prepare(&DECODE_KERNELS)?;
        let mut slots = Vec::with_capacity(config.slots);
        for _ in 0..config.slots {
            slots.push(Slot {
                staging: device.alloc_pinned(config.wave_src_bytes + config.table_bytes())?,
                readback: device.alloc_pinned(config.wave_streams * 8)?,
                input: device.alloc(config.wave_src_bytes + config.table_bytes())?,
                output: device.alloc(config.wave_dst_bytes * 2)?,
                done: None,
                released: None,
            });
        }
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
        Ok(Self {
            copy: device.new_stream()?,
            readback: device.new_stream()?,
            device: device.clone(),
            config,
            slots,
            next_slot: 0,
            last_slot: None,
            pool,
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &DecodeConfig {
        &self.config
    }

    /// The stream the kernels run on (the device's default stream): work queued on it after a
    /// `decode_wave` call sees the decoded bytes.
    #[must_use]
    pub fn stream(&self) -> &Stream {
        self.device.default_stream()
    }

    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    fn parse(&self, chunks: &[ChunkInput<'_>]) -> (Vec<Result<ChunkPlan>>, Duration) {
        use rayon::prelude::*;
        let t = Instant::now();
        let plans = self.install(|| chunks.par_iter().enumerate().map(|(i, c)| plan_chunk(i, c)).collect::<Vec<_>>());
        (plans, t.elapsed())
    }

    /// A chunk's footprint in a wave.
    fn footprint(p: &ChunkPlan) -> WaveFootprint {
        WaveFootprint {
            src_bytes: align_up(p.payload_len),
            dst_bytes: align_up(p.decoded_len),
            streams: p.streams.len() + usize::from(p.crc.is_some()),
        }
    }

    /// Splits the parsed chunks into waves (greedy, in order). Chunks that failed to parse or
    /// cannot fit in any wave are returned with their error; the total footprint counts the
    /// chunks that can be decoded.
    fn partition(&self, plans: Vec<Result<ChunkPlan>>) -> Partition {
        let capacity = self.config.wave_capacity();
        let mut part = Partition::default();
        let mut wave: Vec<(usize, ChunkPlan)> = Vec::new();
        let mut used = WaveFootprint::default();
        for (i, plan) in plans.into_iter().enumerate() {
            let p = match plan {
                Ok(p) => p,
                Err(e) => {
                    part.rejected.push((i, e));
                    continue;
                }
            };
            let need = Self::footprint(&p);
            if !need.fits_in(&capacity) {
                part.rejected.push((i, Error::WaveFull { chunk: Some(i), needed: need, capacity }));
                continue;
            }
            part.total = part.total.plus(need);
            if !used.plus(need).fits_in(&capacity) {
                part.waves.push(std::mem::take(&mut wave));
                used = WaveFootprint::default();
            }
            used = used.plus(need);
            wave.push((i, p));
        }
        if !wave.is_empty() {
            part.waves.push(wave);
        }
        part
    }

    /// Decides, from the host parse alone (blosc headers and block offsets, zstd frame and block
    /// headers; nothing is copied or launched), how `chunks` would be decoded: how many waves
    /// they need, whether [`Decoder::decode_wave`] takes them in one, and which chunks the
    /// device route cannot take at all. Lets a caller choose its route before it decodes
    /// anything.
    ///
    /// ```
    /// # #[cfg(feature = "emulate")] {
    /// use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device};
    /// let device = Device::emulated(0);
    /// let decoder = Decoder::new(&device, DecodeConfig::default().with_wave_dst_bytes(1 << 20).with_slots(1))?;
    /// let chunk = vec![7u8; 768 << 10];
    /// let plan = decoder.plan_waves(&[ChunkInput::raw(&chunk), ChunkInput::raw(&chunk)]);
    /// assert_eq!(plan.waves, 2);
    /// assert!(!plan.fits_in_one_wave());
    /// # }
    /// # Ok::<(), damacy_kernels::Error>(())
    /// ```
    #[must_use]
    pub fn plan_waves(&self, chunks: &[ChunkInput<'_>]) -> WavePlan {
        let (plans, _) = self.parse(chunks);
        let part = self.partition(plans);
        WavePlan {
            waves: part.waves.len(),
            total: part.total,
            capacity: self.config.wave_capacity(),
            rejected: part.rejected,
        }
    }

    /// Decodes `chunks` and copies the results back to the host, in as many waves as needed;
    /// up to [`DecodeConfig::slots`] waves are in flight at once. The decoded bytes come back
    /// through pinned memory (the idle staging buffer of the wave's slot), in pieces that
    /// overlap the device-to-host copy of one with the host copy of the previous.
    pub fn decode_to_host(&mut self, chunks: &[ChunkInput<'_>]) -> Result<HostDecoded> {
        let (plans, parse_time) = self.parse(chunks);
        let mut stats = WaveStats { decompress_parse: parse_time, ..WaveStats::default() };
        let mut out: Vec<Result<Vec<u8>>> = (0..chunks.len()).map(|_| Ok(Vec::new())).collect();
        let part = self.partition(plans);
        for (i, e) in part.rejected {
            out[i] = Err(e);
        }
        let mut in_flight: std::collections::VecDeque<Pending> = std::collections::VecDeque::new();
        for wave in &part.waves {
            if in_flight.len() == self.slots.len()
                && let Some(p) = in_flight.pop_front()
            {
                self.collect_to_host(p, &mut out, &mut stats)?;
            }
            in_flight.push_back(self.submit(chunks, wave)?);
        }
        while let Some(p) = in_flight.pop_front() {
            self.collect_to_host(p, &mut out, &mut stats)?;
        }
        Ok(HostDecoded { chunks: out, stats })
    }

    /// Waits for a submitted wave, then copies its decoded bytes to the host through pinned
    /// memory: the slot's staging buffer is idle once its wave finished (its upload completed
    /// before the kernels ran, and the slot is not reused before this returns), so its two
    /// halves serve as bounce buffers. Piece k+1 is copied down on the read-back stream while
    /// the host copies piece k out into the chunks' vectors.
    fn collect_to_host(&mut self, p: Pending, out: &mut [Result<Vec<u8>>], stats: &mut WaveStats) -> Result<()> {
        let slot_index = p.slot;
        let (results, wstats) = self.finish(p)?;
        merge_stats(stats, &wstats);
        // Decoded chunks in output order, each with the vector it is copied into.
        let mut targets: Vec<(usize, Range<usize>, Vec<u8>)> = Vec::with_capacity(results.len());
        for (idx, r) in results {
            match r {
                Ok(range) => targets.push((idx, range.clone(), vec![0u8; range.len()])),
                Err(e) => out[idx] = Err(e),
            }
        }
        targets.sort_by_key(|t| t.1.start);
        let total = targets.iter().map(|t| t.1.end).max().unwrap_or(0);
        let slot = &self.slots[slot_index];
        let half = (slot.staging.len() / 2).max(1);
        let pieces = total.div_ceil(half);
        let piece = |k: usize| (k * half)..((k + 1) * half).min(total);
        let queue = |k: usize| -> Result<Event> {
            let r = piece(k);
            // SAFETY: the host reads this half of the staging buffer only after the event
            // recorded below; the other half is not touched by this copy.
            unsafe { self.readback.copy_to_host(&slot.output, r.start, &slot.staging, (k % 2) * half, r.len())? };
            self.readback.record(false)
        };
        let mut copy_out = || -> Result<()> {
            let mut pending: std::collections::VecDeque<Event> = std::collections::VecDeque::with_capacity(2);
            for k in 0..pieces.min(2) {
                pending.push_back(queue(k)?);
            }
            let mut first = 0usize; // first target that may still overlap the current piece
            for k in 0..pieces {
                let Some(ready) = pending.pop_front() else { break };
                ready.synchronize()?;
                let r = piece(k);
                // SAFETY: the copy into this half finished (`ready`); the copy of the next piece
                // writes the other half.
                let bytes = unsafe { slot.staging.range((k % 2) * half, r.len()) }?;
                for (_, range, dst) in &mut targets[first..] {
                    if range.start >= r.end {
                        break;
                    }
                    let (a, b) = (range.start.max(r.start), range.end.min(r.end));
                    if a < b {
                        dst[a - range.start..b - range.start].copy_from_slice(&bytes[a - r.start..b - r.start]);
                    }
                }
                while first < targets.len() && targets[first].1.end <= r.end {
                    first += 1;
                }
                if k + 2 < pieces {
                    pending.push_back(queue(k + 2)?);
                }
            }
            Ok(())
        };
        if let Err(e) = copy_out() {
            // Pieces still queued write into the staging buffer: let them finish before the
            // slot can be staged again (this stream only; its error, if any, is `e` again).
            let _ = self.readback.synchronize();
            return Err(e);
        }
        for (idx, _, bytes) in targets {
            out[idx] = Ok(bytes);
        }
        Ok(())
    }

    /// Decodes `chunks` as one wave and leaves the bytes on the device. Fails with
    /// [`Error::WaveFull`] when they do not fit in one wave (see [`DecodeConfig`];
    /// [`Decoder::plan_waves`] tells beforehand); chunks that cannot be decoded get their error
    /// in [`DecodedWave::chunks`].
    pub fn decode_wave(&mut self, chunks: &[ChunkInput<'_>]) -> Result<DecodedWave<'_>> {
        let (plans, parse_time) = self.parse(chunks);
        let mut stats = WaveStats { decompress_parse: parse_time, ..WaveStats::default() };
        let capacity = self.config.wave_capacity();
        let mut out: Vec<Result<Range<usize>>> = Vec::with_capacity(chunks.len());
        let mut wave = Vec::new();
        let mut need = WaveFootprint::default();
        for (i, p) in plans.into_iter().enumerate() {
            match p {
                Ok(p) => {
                    need = need.plus(Self::footprint(&p));
                    wave.push((i, p));
                    out.push(Ok(0..0));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        if !need.fits_in(&capacity) {
            return Err(Error::WaveFull { chunk: None, needed: need, capacity });
        }
        let mut slot = self.next_slot;
        if !wave.is_empty() {
            let pending = self.submit(chunks, &wave)?;
            slot = pending.slot;
            let (results, wstats) = self.finish(pending)?;
            merge_stats(&mut stats, &wstats);
            for (idx, r) in results {
                out[idx] = r;
            }
        }
        Ok(DecodedWave { chunks: out, output: &self.slots[slot].output, stats })
    }

    /// Stages one wave in the next slot's pinned buffer (chunk payloads, then the stream table,
    /// id lists, shuffle jobs, status and size words), queues its upload on the copy stream and
    /// its kernels and status read-back on the compute stream, and returns without waiting.
    #[allow(clippy::too_many_lines)]
    fn submit(&mut self, chunks: &[ChunkInput<'_>], wave: &[(usize, ChunkPlan)]) -> Result<Pending> {
        let slot_index = self.next_slot;
        self.next_slot = (self.next_slot + 1) % self.slots.len();
        let compute = self.device.default_stream();
        // Whatever reads the previous wave's output was queued before this call.
        if let Some(prev) = self.last_slot.replace(slot_index) {
            self.slots[prev].released = Some(compute.record(false)?);
        }
        if let Some(done) = self.slots[slot_index].done.take() {
            done.synchronize()?;
        }
        let mut stats = WaveStats { waves: 1, ..WaveStats::default() };
        let scratch_base = self.config.wave_dst_bytes as u64;
        // Layout: every chunk's payload in the source region and its decoded bytes in the
        // output, 16-byte aligned. Direct chunks come first, at the same offsets in both, so
        // one copy puts them straight into the output; the others follow.
        let mut chunk_src = vec![0usize; wave.len()];
        let mut chunk_dst = vec![0usize; wave.len()];
        let (mut src_cursor, mut dst_cursor) = (0usize, 0usize);
        for direct_pass in [true, false] {
            for (w, (_, p)) in wave.iter().enumerate() {
                if p.is_direct() == direct_pass {
                    chunk_src[w] = src_cursor;
                    src_cursor += align_up(p.payload_len);
                    chunk_dst[w] = dst_cursor;
                    dst_cursor += align_up(p.decoded_len);
                }
            }
            if direct_pass {
                stats.bytes_direct = src_cursor;
                debug_assert_eq!(src_cursor, dst_cursor);
            }
        }
        let direct_total = stats.bytes_direct;
        let src_total = src_cursor;
        stats.bytes_uploaded = src_total;
        // Stream table, id lists per codec, shuffle jobs.
        let mut descs: Vec<StreamDesc> = Vec::new();
        let mut ids: [Vec<u32>; N_SLOTS] = Default::default();
        let mut infos: Vec<StreamInfo> = Vec::new();
        let mut jobs: Vec<ShuffleJobDesc> = Vec::new();
        let mut first_stream: Vec<u32> = Vec::with_capacity(wave.len());
        // Streams whose status the host knows: direct chunks, copied whole.
        let mut known: Vec<(usize, u32)> = Vec::new();
        for (w, (idx, p)) in wave.iter().enumerate() {
            first_stream.push(infos.len() as u32);
            if p.is_direct() {
                stats.streams[SLOT_RAW] += 1;
                known.push((infos.len(), p.payload_len as u32));
                descs.push(StreamDesc {
                    src_off: chunk_src[w] as u64,
                    dst_off: chunk_dst[w] as u64,
                    src_len: p.payload_len as u32,
                    dst_len: p.decoded_len as u32,
                    codec: SLOT_RAW as u32,
                    flags: 0,
                });
                infos.push(StreamInfo {
                    chunk: *idx,
                    slot: SLOT_RAW,
                    src: (0, p.payload_len as u32),
                    expected: p.decoded_len as u32,
                });
                continue;
            }
            let (cs, cd) = (chunk_src[w] as u64, chunk_dst[w] as u64);
            if let Some(crc) = p.crc {
                ids[SLOT_CRC].push(infos.len() as u32);
                descs.push(StreamDesc {
                    src_off: cs,
                    dst_off: 0,
                    src_len: p.payload_len as u32,
                    dst_len: 0,
                    codec: SLOT_CRC as u32,
                    flags: crc,
                });
                infos.push(StreamInfo { chunk: *idx, slot: SLOT_CRC, src: (0, p.payload_len as u32), expected: crc });
            }
            for s in &p.streams {
                let slot = codec_slot(s.codec);
                ids[slot].push(infos.len() as u32);
                descs.push(StreamDesc {
                    src_off: cs + u64::from(s.src_off),
                    dst_off: cd + u64::from(s.dst_off) + if s.to_scratch { scratch_base } else { 0 },
                    src_len: s.src_len,
                    dst_len: s.dst_len,
                    codec: slot as u32,
                    flags: match slot {
                        SLOT_ZSTD => p.zstd_flags,
                        SLOT_INFLATE => p.inflate_flags,
                        _ => 0,
                    },
                });
                infos.push(StreamInfo {
                    chunk: *idx,
                    slot,
                    src: (s.src_off, s.src_off + s.src_len),
                    expected: s.dst_len,
                });
            }
            for sh in &p.shuffles {
                let off = cd + u64::from(sh.off);
                jobs.push(ShuffleJobDesc {
                    src_off: scratch_base + off,
                    dst_off: off,
                    len: sh.len,
                    typesize: p.typesize,
                    mode: if sh.mode == Shuffle::Bit { c::DMC_SHUFFLE_BIT } else { c::DMC_SHUFFLE_BYTE },
                    stream: first_stream[w],
                });
            }
        }
        let n_streams = infos.len();
        for (k, v) in ids.iter_mut().enumerate() {
            stats.streams[k] += v.len();
            // Longest first: one warp (or block) per stream, so the long ones start at once
            // and the short ones fill in behind them.
            v.sort_by_key(|&sid| std::cmp::Reverse(descs[sid as usize].dst_len));
        }
        let mut status_init = vec![c::DMC_STATUS_PENDING; n_streams];
        let mut sizes = vec![0u32; n_streams];
        for &(sid, len) in &known {
            status_init[sid] = c::DMC_STATUS_OK;
            sizes[sid] = len;
        }
        // Tables follow the source region in the same upload; offsets below are relative to
        // the start of the tables, then moved past the source region.
        let mut tables: Vec<u8> = Vec::with_capacity(
            n_streams * (size_of::<StreamDesc>() + 3 * size_of::<u32>())
                + jobs.len() * size_of::<ShuffleJobDesc>()
                + 128,
        );
        let descs_at = src_total + push_table(&mut tables, &descs);
        let mut ids_at = [0usize; N_SLOTS];
        for (k, v) in ids.iter().enumerate() {
            ids_at[k] = src_total + push_table(&mut tables, v);
        }
        let jobs_at = src_total + push_table(&mut tables, &jobs);
        let status_at = src_total + push_table(&mut tables, &status_init);
        let actual_at = src_total + push_table(&mut tables, &sizes);
        let upload_len = src_total + tables.len();
        let slot = &mut self.slots[slot_index];
        if upload_len > slot.staging.len() || 8 * n_streams > slot.readback.len() {
            return Err(Error::WaveFull {
                chunk: None,
                needed: WaveFootprint { src_bytes: upload_len, dst_bytes: dst_cursor, streams: n_streams },
                capacity: WaveFootprint {
                    src_bytes: slot.staging.len(),
                    dst_bytes: self.config.wave_dst_bytes,
                    streams: slot.readback.len() / 8,
                },
            });
        }
        // Stage: chunk payloads (in parallel, into disjoint ranges of pinned memory), then tables.
        // SAFETY: the slot's previous wave finished (its `done` event was synchronised above),
        // so no device copy reads this staging buffer.
        let stage = unsafe { slot.staging.as_mut_slice() };
        let (payloads, rest) = stage.split_at_mut(src_total);
        rest[..tables.len()].copy_from_slice(&tables);
        let mut regions: Vec<(&mut [u8], &[u8])> = Vec::with_capacity(wave.len());
        let mut tail = payloads;
        // In layout order (direct chunks first), each chunk's range up to the next one's.
        let mut order: Vec<usize> = (0..wave.len()).collect();
        order.sort_by_key(|&w| chunk_src[w]);
        for (k, &w) in order.iter().enumerate() {
            let (idx, p) = &wave[w];
            let size = order.get(k + 1).map_or(src_total, |&next| chunk_src[next]) - chunk_src[w];
            let (head, next) = tail.split_at_mut(size);
            regions.push((&mut head[..p.payload_len], &chunks[*idx].bytes[..p.payload_len]));
            tail = next;
        }
        {
            use rayon::prelude::*;
            let pool = self.pool.as_ref();
            let copy = move || regions.into_par_iter().with_min_len(8).for_each(|(d, s)| d.copy_from_slice(s));
            match pool {
                Some(p) => p.install(copy),
                None => copy(),
            }
        }
        let slot = &self.slots[slot_index];
        // SAFETY (both copies): the buffers record each copy as a use (their drop waits for
        // it), and the host writes the staging buffer again only after this slot's `done`
        // event. The input is free (the slot's last wave is done); the output is written only
        // after what reads the slot's last wave (`released`).
        unsafe {
            self.copy.copy_to_device(
                &slot.staging,
                direct_total,
                &slot.input,
                direct_total,
                upload_len - direct_total,
            )?;
        }
        if direct_total > 0 {
            if let Some(released) = &slot.released {
                self.copy.wait(released)?;
            }
            // SAFETY: see above.
            unsafe { self.copy.copy_to_device(&slot.staging, 0, &slot.output, 0, direct_total)? };
        }
        let uploaded = self.copy.record(false)?;
        compute.wait(&uploaded)?;
        let started = compute.record(true)?;

        let (inp, outp) = (&slot.input, &slot.output);
        let uses = [inp, outp];
        let src_base = inp.ptr::<u8>(0)?;
        let dst_base = outp.ptr::<u8>(0)?;
        let src_total = src_total as u64;
        let dst_total = outp.len() as u64;
        let streams = inp.ptr::<StreamDesc>(descs_at)?;
        let status_words = inp.ptr::<u32>(status_at)?;
        let actual = inp.ptr::<u32>(actual_at)?;
        let dev = &self.device;
        // SAFETY (every launch below): all pointers address the slot's input and output
        // buffers, which are passed as `uses` (so they outlive the launches); every stream's
        // range lies inside `src_total` and the output by construction, and the kernels re-check
        // each descriptor against the totals.
        let n = ids[SLOT_CRC].len() as u32;
        if n > 0 {
            let args = Crc32cArgs {
                base: src_base,
                total: src_total,
                streams,
                ids: inp.ptr(ids_at[SLOT_CRC])?,
                n_ids: n,
                status: status_words,
                actual,
            };
            unsafe { args.launch(dev, compute, (n, 1), &uses[..1])? };
            stats.launches += 1;
        }
        for slot_k in [SLOT_LZ4, SLOT_BLOSCLZ, SLOT_ZSTD, SLOT_INFLATE, SLOT_RAW] {
            let n_ids = ids[slot_k].len() as u32;
            if n_ids == 0 {
                continue;
            }
            let ids = inp.ptr::<u32>(ids_at[slot_k])?;
            match slot_k {
                SLOT_LZ4 => {
                    let args = Lz4DecodeArgs {
                        src_base,
                        src_total,
                        dst_base,
                        dst_total,
                        streams,
                        ids,
                        n_ids,
                        status: status_words,
                        actual,
                    };
                    unsafe { args.launch(dev, compute, (n_ids.div_ceil(c::DMC_LZ4_WARPS_PER_BLOCK), 1), &uses)? };
                }
                SLOT_BLOSCLZ => {
                    let args = BloscLzDecodeArgs {
                        src_base,
                        src_total,
                        dst_base,
                        dst_total,
                        streams,
                        ids,
                        n_ids,
                        status: status_words,
                        actual,
                    };
                    unsafe { args.launch(dev, compute, (n_ids.div_ceil(c::DMC_BLOSCLZ_WARPS_PER_BLOCK), 1), &uses)? };
                }
                SLOT_ZSTD => {
                    let args = ZstdDecodeArgs {
                        src_base,
                        src_total,
                        dst_base,
                        dst_total,
                        streams,
                        ids,
                        n_ids,
                        status: status_words,
                        actual,
                    };
                    unsafe { args.launch(dev, compute, (n_ids.div_ceil(c::DMC_ZSTD_WARPS_PER_BLOCK), 1), &uses)? };
                }
                SLOT_INFLATE => {
                    let args = InflateDecodeArgs {
                        src_base,
                        src_total,
                        dst_base,
                        dst_total,
                        streams,
                        ids,
                        n_ids,
                        status: status_words,
                        actual,
                    };
                    unsafe { args.launch(dev, compute, (n_ids.div_ceil(c::DMC_INFLATE_WARPS_PER_BLOCK), 1), &uses)? };
                }
                _ => {
                    let args = MemcpyArgs {
                        src_base,
                        src_total,
                        dst_base,
                        dst_total,
                        streams,
                        ids,
                        n_ids,
                        status: status_words,
                        actual,
                    };
                    unsafe { args.launch(dev, compute, (n_ids, 1), &uses)? };
                }
            }
            stats.launches += 1;
        }
        if !jobs.is_empty() {
            let n_jobs = jobs.len() as u32;
            // Jobs read the scratch half and write the output half of the same buffer: disjoint
            // ranges by construction.
            let args = UnshuffleArgs {
                src_base: dst_base,
                src_total: dst_total,
                dst_base,
                dst_total,
                jobs: inp.ptr(jobs_at)?,
                n_jobs,
                status: status_words,
            };
            unsafe { args.launch(dev, compute, (n_jobs, 1), &uses)? };
            stats.launches += 1;
        }
        let ended = compute.record(true)?;
        // Status and size words back to pinned memory, on the compute stream after the kernels.
        // SAFETY: the host reads `readback` only after `done`.
        unsafe { compute.copy_to_host(inp, status_at, &slot.readback, 0, 8 * n_streams)? };
        let done = compute.record(false)?;
        self.slots[slot_index].done = Some(done);
        let members =
            wave.iter().enumerate().map(|(w, (idx, p))| (*idx, p.decoded_len, chunk_dst[w])).collect::<Vec<_>>();
        Ok(Pending { slot: slot_index, infos, first_stream, members, stats, timing: (started, ended) })
    }

    /// Waits for a submitted wave and turns its status words into per-chunk results.
    fn finish(&mut self, p: Pending) -> Result<(WaveResults, WaveStats)> {
        let Pending { slot, infos, first_stream, members, mut stats, timing } = p;
        let slot = &self.slots[slot];
        if let Some(done) = &slot.done {
            done.synchronize()?;
        }
        stats.kernel_time = timing.1.elapsed_since(&timing.0)?;
        let n_streams = infos.len();
        // SAFETY: the status copy into `readback` finished (`done` above).
        let sa = unsafe { slot.readback.as_slice() };
        let word = |i: usize| -> u32 {
            sa.get(4 * i..4 * i + 4).and_then(|b| b.try_into().ok()).map_or(c::DMC_STATUS_PENDING, u32::from_le_bytes)
        };
        let mut failed: Vec<Option<Error>> = (0..members.len()).map(|_| None).collect();
        let mut w = 0usize;
        for (sid, info) in infos.iter().enumerate() {
            while w + 1 < members.len() && first_stream[w + 1] as usize <= sid {
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
        let mut results: WaveResults = Vec::with_capacity(members.len());
        for (w, (idx, len, at)) in members.into_iter().enumerate() {
            if let Some(e) = failed[w].take() {
                results.push((idx, Err(e)));
            } else {
                stats.bytes_decoded += len;
                results.push((idx, Ok(at..at + len)));
            }
        }
        Ok((results, stats))
    }
}

fn merge_stats(a: &mut WaveStats, b: &WaveStats) {
    a.waves += b.waves;
    a.launches += b.launches;
    a.bytes_uploaded += b.bytes_uploaded;
    a.bytes_direct += b.bytes_direct;
    a.bytes_decoded += b.bytes_decoded;
    a.kernel_time += b.kernel_time;
    for k in 0..N_SLOTS {
        a.streams[k] += b.streams[k];
    }
}
