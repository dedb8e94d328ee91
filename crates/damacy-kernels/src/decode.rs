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
//! The decoder owns its buffers — a pinned staging ring, a pinned status area and device memory
//! for its wave slots — sized once from [`DecodeConfig`] against hard budgets: exceeding a
//! budget is an error at construction, never an out-of-memory in the middle of a run. A batch
//! is parsed and split into waves once ([`Decoder::schedule`]); each wave's upload streams
//! through the staging ring on the decoder's copy stream while the device decodes the previous
//! wave on the compute stream ([`Decoder::queue_wave`]), events order every hand-off, and the
//! statuses of all the batch's waves are read back at once ([`Decoder::finish_batch`]).

mod staging;
mod table;

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::blosc::{self, FrameErrorKind, FrameShuffle, FrameStream, StreamCodec};
use crate::consts as c;
use crate::device::{Device, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::error::{Error, Result, StreamStatus};
use crate::kernel::Kernel;
use crate::launch::{
    BloscLzDecodeArgs, Crc32cArgs, InflateDecodeArgs, KernelArgs, Lz4DecodeArgs, MemcpyArgs, StreamArgs, UnshuffleArgs,
    ZstdDecodeArgs, launch_streams,
};
use crate::wire::{ShuffleJobDesc, StreamDesc};
use crate::zstd;
use staging::{StagingRing, UploadTarget};
use table::{WaveLayout, WaveTables};

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
/// 2 slots (one wave decodes while the next is staged and uploaded); a pinned staging ring of
/// at most 32 MiB (never more than one wave's upload) in 4 pieces; status words for 4 waves'
/// streams; a 1 GiB device budget and a 256 MiB pinned host budget; rayon's global pool for
/// the host parse.
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
    /// Bytes of the pinned staging ring every upload streams through, piece by piece; 0: one
    /// wave's upload (encoded bytes and tables), at most 32 MiB.
    pub staging_bytes: usize,
    /// Pieces of the staging ring (at least 2): the host fills one while others are copied.
    pub staging_pieces: usize,
    /// Streams whose status words the pinned status area holds: the waves queued between two
    /// [`Decoder::finish_batch`] calls are read back at once while they fit, else in as many
    /// reads as needed; 0: four waves' worth (`4 × wave_streams`). At least `wave_streams`.
    pub batch_streams: usize,
    /// Whether the zstd and inflate kernels give a job a team of four warps (a block) or one
    /// warp (four jobs per block); see [`Teams`]. Default [`Teams::Auto`].
    pub teams: Teams,
}

/// How a wave's zstd and inflate jobs get warps ([`DecodeConfig::teams`]).
///
/// A team is a block of four warps for one job: zstd's helpers decode a block's four Huffman
/// literal streams beside the leader and its sequences a group ahead of it, and copy its raw
/// blocks of `DMC_ZSTD_TEAM_COPY_MIN` (4 KiB) or more with the leader (`DMC_ZSTD_TEAM`,
/// `kernels/common.cuh`); inflate's copy its stored blocks of 4 KiB or more with the leader
/// (`DMC_INFLATE_TEAM`). A team takes four warps' room on the SM for one job, so it pays only
/// where the helpers have work or the jobs alone would leave the device idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Teams {
    /// Per wave and kernel (the default): every job a team while the kernel's jobs fit the
    /// device's resident blocks at once ([`Device::sm_count`] × `DMC_TEAM_BLOCKS_PER_SM`, 4);
    /// in a larger wave [`Teams::Mostly`] while the jobs it would give teams number at most two
    /// such rounds of blocks, else [`Teams::None`]. (By the GPU model, a wave of 1,000 × 256 KiB
    /// zstd chunks: teams 1.5× faster than lone warps on a smooth field's literals and 1.9× on
    /// raw blocks, 0.77× on a label image's sequences; at 4,000 chunks lone warps lead on the
    /// smooth field too; deflate's stored blocks 1.7×, `benches/results/gpu-model.md`.)
    #[default]
    Auto,
    /// Every job a team.
    All,
    /// A team for each job whose decoded bytes are at least half a team's, one warp for every
    /// other, in one launch: zstd, four-stream literals and raw blocks of 4 KiB or more
    /// ([`crate::ZstdJob::team_bytes`]); inflate, the stored blocks of 4 KiB or more at the
    /// stream's start, up to its first Huffman block (whose end the host cannot find without
    /// decoding it).
    Mostly,
    /// One warp per job.
    None,
}

impl Teams {
    /// The choice for a wave of `n` jobs of one kernel, `candidates` of them a team's by
    /// [`Teams::Mostly`]'s rule, on `sms` SMs: [`Teams::Auto`] resolved, the others as set.
    #[must_use]
    pub fn resolve(self, n: usize, candidates: usize, sms: u32) -> Teams {
        let round = sms as usize * c::DMC_TEAM_BLOCKS_PER_SM as usize;
        match self {
            Teams::Auto if n <= round => Teams::All,
            Teams::Auto if candidates > 0 && candidates <= 2 * round => Teams::Mostly,
            Teams::Auto => Teams::None,
            t => t,
        }
    }
}

/// Whether a zstd job of `dst_len` decoded bytes, `team_bytes` of them a team's, gets a team
/// under [`Teams::Mostly`]: at least half of its bytes.
fn team_candidate(dst_len: u32, team_bytes: u32) -> bool {
    team_bytes > 0 && u64::from(team_bytes) * 2 >= u64::from(dst_len)
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
            staging_bytes: 0,
            staging_pieces: 4,
            batch_streams: 0,
            teams: Teams::Auto,
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

    /// Sets `staging_bytes`.
    #[must_use]
    pub fn with_staging_bytes(mut self, v: usize) -> Self {
        self.staging_bytes = v;
        self
    }
    /// Sets `staging_pieces`.
    #[must_use]
    pub fn with_staging_pieces(mut self, v: usize) -> Self {
        self.staging_pieces = v;
        self
    }
    /// Sets `batch_streams`.
    #[must_use]
    pub fn with_batch_streams(mut self, v: usize) -> Self {
        self.batch_streams = v;
        self
    }
    /// Sets `teams`.
    #[must_use]
    pub fn with_teams(mut self, v: Teams) -> Self {
        self.teams = v;
        self
    }

    /// Bytes of one piece of the staging ring.
    #[must_use]
    pub fn staging_piece_bytes(&self) -> usize {
        let ring = if self.staging_bytes > 0 {
            self.staging_bytes
        } else {
            self.wave_src_bytes.saturating_add(self.table_bytes()).min(32 << 20)
        };
        ring.div_ceil(self.staging_pieces.max(1)).max(4096)
    }

    /// Bytes of the pinned status area.
    #[must_use]
    pub fn status_bytes(&self) -> usize {
        let streams = if self.batch_streams > 0 { self.batch_streams } else { self.wave_streams.saturating_mul(4) };
        streams.saturating_mul(8)
    }

    /// Checks the sizes and the budgets ([`Decoder::new`] calls it).
    pub fn validate(&self) -> Result<()> {
        if self.wave_streams == 0 || self.wave_streams > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!("wave_streams {} out of 1..2^31", self.wave_streams)));
        }
        if self.wave_dst_bytes > u32::MAX as usize || self.wave_src_bytes > u32::MAX as usize {
            return Err(Error::InvalidArgument("wave buffers are limited to 4 GiB each".into()));
        }
        if !(1..=4).contains(&self.slots) {
            return Err(Error::InvalidArgument(format!("slots {} out of 1..=4", self.slots)));
        }
        if self.staging_pieces < 2 {
            return Err(Error::InvalidArgument(format!("staging_pieces {}: use at least 2", self.staging_pieces)));
        }
        if self.batch_streams != 0 && self.batch_streams < self.wave_streams {
            return Err(Error::InvalidArgument(format!(
                "batch_streams {} is below wave_streams {}: the status area must hold one wave",
                self.batch_streams, self.wave_streams
            )));
        }
        let need = self.device_bytes();
        if need > self.device_budget_bytes {
            return Err(Error::OutOfMemory(format!(
                "the decoder needs {need} device bytes ({} slots × (wave_src_bytes {} + tables {} + 2 × wave_dst_bytes {})) but device_budget_bytes is {}: raise the budget or shrink the waves",
                self.slots,
                self.wave_src_bytes,
                self.table_bytes(),
                self.wave_dst_bytes,
                self.device_budget_bytes
            )));
        }
        let host = self.host_bytes();
        if host > self.host_budget_bytes {
            return Err(Error::OutOfMemory(format!(
                "the decoder needs {host} bytes of pinned host memory (staging ring {} × {} + status area {}) but host_budget_bytes is {}: raise the budget or shrink the ring (staging_bytes) or the status area (batch_streams)",
                self.staging_pieces,
                self.staging_piece_bytes(),
                self.status_bytes(),
                self.host_budget_bytes
            )));
        }
        Ok(())
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

    /// Pinned host bytes this configuration allocates: the staging ring and the status area,
    /// whatever the wave size and the number of slots.
    #[must_use]
    pub fn host_bytes(&self) -> usize {
        self.staging_piece_bytes().saturating_mul(self.staging_pieces).saturating_add(self.status_bytes())
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
    let (payload, crc) = split_crc(index, input)?;
    let zstd_flags = if input.verify_checksums { c::DMC_ZSTD_VERIFY_CHECKSUM } else { 0 };
    let verify_inflate = if input.verify_checksums { c::DMC_INFLATE_VERIFY_CHECKSUM } else { 0 };
    let inflate_flags = verify_inflate
        | match input.encoding {
            ChunkEncoding::Gzip => c::DMC_INFLATE_FMT_GZIP,
            _ => c::DMC_INFLATE_FMT_ZLIB,
        };
    // The streams, the shuffle jobs, the typesize and the decoded size, per encoding.
    let one = |codec: StreamCodec, decoded_len: usize| {
        let stream = FrameStream {
            src_off: 0,
            src_len: payload.len() as u32,
            dst_off: 0,
            dst_len: decoded_len as u32,
            codec,
            to_scratch: false,
            team_bytes: 0,
        };
        (vec![stream], Vec::new(), 1, decoded_len)
    };
    let (mut streams, shuffles, typesize, decoded_len) = match input.encoding {
        ChunkEncoding::Raw => one(StreamCodec::Raw, payload.len()),
        ChunkEncoding::Gzip | ChunkEncoding::Zlib => {
            one(StreamCodec::Deflate, deflate_decoded_len(index, input, payload)?)
        }
        ChunkEncoding::Zstd => {
            let p = zstd::parse(payload, input.expected_len).map_err(|e| zstd_error(index, "zstd frame", 0, e))?;
            (p.jobs.iter().map(|j| zstd_stream(j, 0, 0, false)).collect(), Vec::new(), 1, p.decoded_len)
        }
        ChunkEncoding::Blosc => plan_blosc(index, payload)?,
    };
    if let Some(exp) = input.expected_len
        && exp != decoded_len
    {
        return Err(Error::Decode {
            chunk: index,
            what: "chunk",
            offset: 0,
            reason: format!("decodes to {decoded_len} bytes but the chunk shape needs {exp}"),
        });
    }
    // a deflate stream's stored blocks at its start: what a team copies side by side
    let fmt = inflate_flags & c::DMC_INFLATE_FMT_MASK;
    for st in streams.iter_mut().filter(|st| st.codec == StreamCodec::Deflate) {
        let at = st.src_off as usize;
        st.team_bytes = payload.get(at..at + st.src_len as usize).map_or(0, |b| deflate_stored_prefix(b, fmt));
    }
    let payload_len = payload.len();
    Ok(ChunkPlan { streams, shuffles, typesize, decoded_len, payload_len, crc, zstd_flags, inflate_flags })
}

/// The decoded bytes of the stored blocks of `DMC_INF_TEAM_COPY_MIN` bytes or more at the start
/// of deflate stream `b` (wrapper `fmt`: `DMC_INFLATE_FMT_*`), up to its first Huffman block,
/// whose end the host cannot find without decoding it, or the end of its first gzip member: the
/// bytes a team of warps copies side by side. 0 where the stream is not as expected (the kernel
/// reports what is wrong with it).
fn deflate_stored_prefix(b: &[u8], fmt: u32) -> u32 {
    let u16_at = |at: usize| b.get(at..at + 2).map(|v| u32::from(u16::from_le_bytes([v[0], v[1]])));
    let mut pos = match fmt {
        c::DMC_INFLATE_FMT_ZLIB => 2,
        c::DMC_INFLATE_FMT_GZIP => {
            // ID1 ID2 CM FLG MTIME XFL OS, then FEXTRA, FNAME, FCOMMENT, FHCRC as FLG says
            let Some(&flg) = b.get(3) else { return 0 };
            let mut at = 10usize;
            if flg & 4 != 0 {
                let Some(xlen) = u16_at(at) else { return 0 };
                at += 2 + xlen as usize;
            }
            for bit in [8u8, 16] {
                if flg & bit != 0 {
                    let Some(n) = b.get(at..).and_then(|r| r.iter().position(|&v| v == 0)) else { return 0 };
                    at += n + 1;
                }
            }
            at + if flg & 2 != 0 { 2 } else { 0 }
        }
        _ => 0,
    };
    let mut total = 0u32;
    // a stored block: BFINAL, BTYPE 00 at the byte's low bits (the stream is byte-aligned at
    // its start and after each stored block), LEN, NLEN at the next byte boundary
    while let Some(&h) = b.get(pos) {
        if (h >> 1) & 3 != 0 {
            break;
        }
        let (Some(len), Some(nlen)) = (u16_at(pos + 1), u16_at(pos + 3)) else { break };
        if len != !nlen & 0xFFFF || pos + 5 + len as usize > b.len() {
            break;
        }
        if len >= c::DMC_INF_TEAM_COPY_MIN {
            total = total.saturating_add(len);
        }
        pos += 5 + len as usize;
        if h & 1 != 0 {
            break;
        }
    }
    total
}

/// The chunk's payload and, for a crc32c chunk, the checksum its last 4 bytes hold.
fn split_crc<'a>(index: usize, input: &ChunkInput<'a>) -> Result<(&'a [u8], Option<u32>)> {
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
    Ok((payload, crc))
}

/// A blosc1 frame's streams (zstd streams split into their jobs), shuffle jobs, typesize and
/// decoded size.
fn plan_blosc(index: usize, payload: &[u8]) -> Result<(Vec<FrameStream>, Vec<FrameShuffle>, u32, usize)> {
    let p = blosc::plan_frame(payload).map_err(|e| match e.kind {
        FrameErrorKind::Unsupported => Error::Unsupported { chunk: index, what: format!("blosc {}", e.reason) },
        _ => Error::Decode { chunk: index, what: "blosc frame", offset: e.offset, reason: e.reason },
    })?;
    let streams = if p.streams.iter().any(|s| s.codec == StreamCodec::Zstd) {
        blosc_zstd_streams(index, payload, p.streams)?
    } else {
        p.streams
    };
    Ok((streams, p.shuffles, u32::from(p.header.typesize), p.header.nbytes as usize))
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
        team_bytes: u32::try_from(job.team_bytes).unwrap_or(u32::MAX),
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

/// The device buffers of one wave in flight: the encoded input (payloads and tables) and the
/// decoded output (plus unshuffle scratch).
#[derive(Debug)]
struct Slot {
    input: DeviceBuffer,
    output: DeviceBuffer,
    /// Complete when the kernels of the slot's last wave finished (the last reads of `input`).
    decoded: Option<Arc<Event>>,
    /// Complete when what reads the slot's last wave's output finished: given by the caller
    /// ([`Decoder::release_wave`]), or recorded on the compute stream when the decoder is next
    /// called. Copies into the output and the next wave's kernels wait on it.
    released: Option<Event>,
}

/// A wave submitted to the device whose statuses the host has not read yet.
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
    /// Where its status and size words land in the status area.
    status_at: usize,
    /// Complete when its kernels and its status copy finished.
    decoded: Arc<Event>,
    /// Its results, once read.
    parsed: Option<(WaveResults, WaveStats)>,
}

/// A batch's chunks parsed once and split into waves once ([`Decoder::schedule`]): what
/// [`Decoder::queue_wave`] queues, wave by wave.
#[derive(Debug)]
pub struct WaveSchedule {
    waves: Vec<Vec<(usize, ChunkPlan)>>,
    rejected: Vec<(usize, Error)>,
    total: WaveFootprint,
    parse_time: Duration,
}

impl WaveSchedule {
    /// Waves the decodable chunks take.
    #[must_use]
    pub fn waves(&self) -> usize {
        self.waves.len()
    }

    /// The chunks that go in no wave, by index, with the error a decode reports for them
    /// (see [`WavePlan::rejected`]).
    #[must_use]
    pub fn rejected(&self) -> &[(usize, Error)] {
        &self.rejected
    }

    /// Takes [`WaveSchedule::rejected`] out of the schedule.
    pub fn take_rejected(&mut self) -> Vec<(usize, Error)> {
        std::mem::take(&mut self.rejected)
    }

    /// What the decodable chunks need together.
    #[must_use]
    pub fn total(&self) -> WaveFootprint {
        self.total
    }

    /// Host parse time.
    #[must_use]
    pub fn parse_time(&self) -> Duration {
        self.parse_time
    }
}

/// A wave queued on the device ([`Decoder::queue_wave`]): where each chunk's decoded bytes will
/// be once the work queued on [`Decoder::stream`] so far is done. Whether they decoded is told
/// by [`Decoder::finish_batch`].
#[derive(Debug)]
pub struct QueuedWave<'d> {
    /// Per chunk of the wave: its index in the batch and its byte range in `output`.
    pub chunks: Vec<(usize, Range<usize>)>,
    /// The device buffer the wave decodes into.
    pub output: &'d DeviceBuffer,
}

/// What the waves of a batch came to ([`Decoder::finish_batch`]).
#[derive(Debug, Default)]
pub struct BatchDecoded {
    /// The chunks that failed, by index (ascending), with why.
    pub failed: Vec<(usize, Error)>,
    /// Counters and timings of the batch's waves.
    pub stats: WaveStats,
}

/// The stream-decoding launches of a wave, in order: codec slot, streams per block, bytes per
/// block along grid.y (0: one block per stream group, grid.y = 1; else [`parts_per_job`]),
/// launcher.
type StreamLauncher = unsafe fn(&Device, &Stream, StreamArgs, (u32, u32), &[&DeviceBuffer]) -> Result<()>;
const STREAM_LAUNCHES: [(usize, u32, u32, StreamLauncher); 5] = [
    (SLOT_LZ4, c::DMC_LZ4_WARPS_PER_BLOCK, 0, launch_streams::<Lz4DecodeArgs>),
    (SLOT_BLOSCLZ, c::DMC_BLOSCLZ_WARPS_PER_BLOCK, 0, launch_streams::<BloscLzDecodeArgs>),
    (SLOT_ZSTD, c::DMC_ZSTD_WARPS_PER_BLOCK, 0, launch_streams::<ZstdDecodeArgs>),
    (SLOT_INFLATE, c::DMC_INFLATE_WARPS_PER_BLOCK, 0, launch_streams::<InflateDecodeArgs>),
    (SLOT_RAW, 1, c::DMC_MEMCPY_PART_BYTES, launch_streams::<MemcpyArgs>),
];

/// The most blocks a memory-bound launch of a wave (memcpy, unshuffle) gets: ~31 waves of
/// 256-thread blocks on 132 SMs; past it, blocks take several rounds each.
const MAX_WAVE_BLOCKS: u32 = 1 << 15;

/// grid.y of a launch whose `n` jobs (streams or shuffle jobs) each spread over blocks: one per
/// `part_bytes` of the longest job (`longest` bytes), at most [`c::DMC_MAX_BLOCKS_PER_JOB`] and at
/// most [`MAX_WAVE_BLOCKS`] in all (at least one); 1 when `part_bytes` is 0. The kernels take
/// any grid.y: a part with nothing to do returns.
fn parts_per_job(longest: u32, part_bytes: u32, n: u32) -> u32 {
    if part_bytes == 0 {
        return 1;
    }
    let cap = (MAX_WAVE_BLOCKS / n.max(1)).clamp(1, c::DMC_MAX_BLOCKS_PER_JOB);
    longest.div_ceil(part_bytes).clamp(1, cap)
}

/// Blocks of a zstd or inflate launch of `n` jobs whose first `n_team` get a team of warps (a
/// block each; `dmc_zstd_decode` and `dmc_inflate_decode` take the rest `per_block` to a block,
/// a warp each).
fn team_blocks(n: u32, n_team: u32, per_block: u32) -> u32 {
    n_team + (n - n_team).div_ceil(per_block)
}

/// A batched decoder bound to one device; owns its wave buffers.
///
/// Three streams: a copy stream uploads (through a pinned staging ring, piece by piece), the
/// compute stream runs the kernels and copies the status words back, and a read-back stream
/// serves [`Decoder::decode_to_host`]. Waves rotate over [`DecodeConfig::slots`] sets of
/// device buffers, and every hand-off is an event on the device: upload → kernels, kernels →
/// the next upload into the slot, the caller's reads of a slot's output → the next wave that
/// writes it. The host blocks only to reuse a piece of the staging ring and to read statuses.
///
/// A batch streams: [`Decoder::schedule`] parses and splits it once, [`Decoder::queue_wave`]
/// queues each wave without waiting for the previous one, and [`Decoder::finish_batch`] reads
/// every wave's statuses back at once.
#[derive(Debug)]
pub struct Decoder {
    device: Device,
    config: DecodeConfig,
    /// Host-to-device copies.
    copy: Stream,
    /// The kernels and the status copies.
    compute: Stream,
    /// Device-to-host copies of decoded bytes ([`Decoder::decode_to_host`]).
    readback: Stream,
    slots: Vec<Slot>,
    next_slot: usize,
    /// The slot of the last submitted wave.
    last_slot: Option<usize>,
    /// Whether the caller released the last submitted wave ([`Decoder::release_wave`]).
    released_explicitly: bool,
    ring: StagingRing,
    /// Status and size words of the waves not yet read, each wave at its own offset.
    status: PinnedBuffer,
    status_cursor: usize,
    pending: std::collections::VecDeque<Pending>,
    /// Waves submitted so far (labels in the emulator's schedule log).
    waves_submitted: usize,
    pool: Option<rayon::ThreadPool>,
}

impl Decoder {
    /// Allocates the wave buffers on `device`; the kernels run on its default stream. Fails
    /// with [`Error::OutOfMemory`] when the configuration needs more than `device_budget_bytes`
    /// of device memory or more than `host_budget_bytes` of pinned host memory.
    pub fn new(device: &Device, config: DecodeConfig) -> Result<Self> {
        Self::on_stream(device, config, device.default_stream().clone(), "decoder")
    }

    /// [`Decoder::new`] with the kernels on `compute` and the decoder's own copy streams named
    /// after `name` (in the emulator's schedule log).
    pub fn on_stream(device: &Device, config: DecodeConfig, compute: Stream, name: &str) -> Result<Self> {
        config.validate()?;
        // Compile (or load from the kernel caches) what the decoder launches now, so that the
        // first batch does not pay NVRTC.
        device.prepare(&DECODE_KERNELS)?;
        let mut slots = Vec::with_capacity(config.slots);
        for _ in 0..config.slots {
            slots.push(Slot {
                input: device.alloc(config.wave_src_bytes + config.table_bytes())?,
                output: device.alloc(config.wave_dst_bytes * 2)?,
                decoded: None,
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
            copy: device.new_stream_named(&format!("{name} copy"))?,
            readback: device.new_stream_named(&format!("{name} readback"))?,
            compute,
            ring: StagingRing::new(device, config.staging_piece_bytes(), config.staging_pieces)?,
            status: device.alloc_pinned(config.status_bytes())?,
            status_cursor: 0,
            pending: std::collections::VecDeque::new(),
            device: device.clone(),
            config,
            slots,
            next_slot: 0,
            last_slot: None,
            released_explicitly: false,
            waves_submitted: 0,
            pool,
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &DecodeConfig {
        &self.config
    }

    /// How a wave of `chunks` would give its zstd jobs teams of warps (or its inflate jobs,
    /// when it has no zstd job): [`DecodeConfig::teams`] resolved for the wave
    /// ([`Teams::resolve`]). A benchmark that decodes a sample of a wave sets it
    /// ([`Decoder::set_teams`]) to keep the whole wave's choice.
    #[must_use]
    pub fn teams_for(&self, chunks: &[ChunkInput<'_>]) -> Teams {
        let (mut zstd, mut candidates, mut inflate, mut inflate_candidates) = (0usize, 0usize, 0usize, 0usize);
        for (i, chunk) in chunks.iter().enumerate() {
            if let Ok(p) = plan_chunk(i, chunk) {
                for st in &p.streams {
                    match st.codec {
                        StreamCodec::Zstd => {
                            zstd += 1;
                            candidates += usize::from(team_candidate(st.dst_len, st.team_bytes));
                        }
                        StreamCodec::Deflate => {
                            inflate += 1;
                            inflate_candidates += usize::from(team_candidate(st.dst_len, st.team_bytes));
                        }
                        _ => {}
                    }
                }
            }
        }
        let sms = self.device.sm_count();
        if zstd > 0 {
            self.config.teams.resolve(zstd, candidates, sms)
        } else {
            self.config.teams.resolve(inflate, inflate_candidates, sms)
        }
    }

    /// Sets [`DecodeConfig::teams`] for the waves queued from now on (a benchmark that decodes
    /// a sample of a wave keeps the whole wave's choice).
    pub fn set_teams(&mut self, teams: Teams) {
        self.config.teams = teams;
    }

    /// The stream the kernels run on: work queued on it after a `decode_wave` or `queue_wave`
    /// call sees the decoded bytes.
    #[must_use]
    pub fn stream(&self) -> &Stream {
        &self.compute
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

    /// Parses `chunks` on the host (blosc headers and block offsets, zstd frame and block
    /// headers) and splits them into waves, once: the schedule [`Decoder::queue_wave`] follows.
    #[must_use]
    pub fn schedule(&self, chunks: &[ChunkInput<'_>]) -> WaveSchedule {
        let (plans, parse_time) = self.parse(chunks);
        let Partition { waves, rejected, total } = self.partition(plans);
        WaveSchedule { waves, rejected, total, parse_time }
    }

    /// Decides, from the host parse alone (nothing is copied or launched), how `chunks` would
    /// be decoded: how many waves they need, whether [`Decoder::decode_wave`] takes them in
    /// one, and which chunks the device route cannot take at all. Lets a caller choose its
    /// route before it decodes anything.
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
        let s = self.schedule(chunks);
        WavePlan { waves: s.waves.len(), total: s.total, capacity: self.config.wave_capacity(), rejected: s.rejected }
    }

    /// Queues wave `k` of `schedule` (made by [`Decoder::schedule`] from these `chunks`): its
    /// upload on the copy stream, its kernels and status copy on [`Decoder::stream`]; returns
    /// without waiting for the device. Queue the work that reads the wave's output on the
    /// decoder's stream, or on another stream after an event of it, and then hand an event
    /// recorded after that work to [`Decoder::release_wave`]. Statuses are read by
    /// [`Decoder::finish_batch`].
    pub fn queue_wave(
        &mut self,
        chunks: &[ChunkInput<'_>],
        schedule: &WaveSchedule,
        k: usize,
    ) -> Result<QueuedWave<'_>> {
        let wave = schedule
            .waves
            .get(k)
            .ok_or_else(|| Error::InvalidArgument(format!("wave {k} of a {}-wave schedule", schedule.waves.len())))?;
        let slot = self.submit(chunks, wave)?;
        let members = self.pending.back().map(|p| p.members.as_slice()).unwrap_or_default();
        let chunks = members.iter().map(|&(idx, len, at)| (idx, at..at + len)).collect();
        Ok(QueuedWave { chunks, output: &self.slots[slot].output })
    }

    /// Tells the decoder that the output of the last queued wave is read only by work that
    /// is complete when `event` is: the next wave that reuses its buffers waits for it (on the
    /// device; the host does not block).
    pub fn release_wave(&mut self, event: Event) {
        if let Some(s) = self.last_slot {
            self.slots[s].released = Some(event);
            self.released_explicitly = true;
        }
    }

    /// Waits once for every wave queued since the last call and reads all their statuses:
    /// the chunks that failed, and the batch's counters.
    pub fn finish_batch(&mut self) -> Result<BatchDecoded> {
        let mut out = BatchDecoded::default();
        while let Some((_, results, stats)) = self.finish_front()? {
            merge_stats(&mut out.stats, &stats);
            out.failed.extend(results.into_iter().filter_map(|(i, r)| r.err().map(|e| (i, e))));
        }
        out.failed.sort_by_key(|f| f.0);
        Ok(out)
    }

    /// Drops the waves queued since the last [`Decoder::finish_batch`] after an error: waits
    /// for the decoder's streams (ignoring their errors, which the failed call reported) so
    /// that its buffers are free again.
    pub fn abandon_batch(&mut self) {
        let _ = self.copy.synchronize();
        let _ = self.compute.synchronize();
        let _ = self.ring.quiesce();
        self.pending.clear();
        self.status_cursor = 0;
    }

    /// Decodes `chunks` and copies the results back to the host, in as many waves as needed;
    /// up to [`DecodeConfig::slots`] waves are in flight at once. The decoded bytes come back
    /// through pinned memory (two pieces of the staging ring), in pieces that overlap the
    /// device-to-host copy of one with the host copy of the previous.
    pub fn decode_to_host(&mut self, chunks: &[ChunkInput<'_>]) -> Result<HostDecoded> {
        if !self.pending.is_empty() {
            self.abandon_batch();
        }
        let schedule = self.schedule(chunks);
        let mut stats = WaveStats { decompress_parse: schedule.parse_time, ..WaveStats::default() };
        let mut out: Vec<Result<Vec<u8>>> = (0..chunks.len()).map(|_| Ok(Vec::new())).collect();
        for (i, e) in schedule.rejected {
            out[i] = Err(e);
        }
        for wave in &schedule.waves {
            if self.pending.len() == self.slots.len() {
                self.collect_to_host(&mut out, &mut stats)?;
            }
            self.submit(chunks, wave)?;
        }
        while !self.pending.is_empty() {
            self.collect_to_host(&mut out, &mut stats)?;
        }
        Ok(HostDecoded { chunks: out, stats })
    }

    /// Waits for the oldest submitted wave, then copies its decoded bytes to the host through
    /// two pieces of the staging ring (idle once the uploads queued so far finished). Piece k+1
    /// is copied down on the read-back stream while the host copies piece k out into the
    /// chunks' vectors.
    fn collect_to_host(&mut self, out: &mut [Result<Vec<u8>>], stats: &mut WaveStats) -> Result<()> {
        let Some((slot_index, results, wstats)) = self.finish_front()? else { return Ok(()) };
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
        self.ring.quiesce()?;
        let Some(bounce) = self.ring.bounce() else {
            return Err(Error::InvalidArgument("the staging ring needs two pieces".into()));
        };
        let output = &self.slots[slot_index].output;
        if let Err(e) = copy_out(&self.readback, output, bounce, &mut targets) {
            // Pieces still queued write into the ring: let them finish before it is staged
            // again (this stream only; its error, if any, is `e` again).
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
        if !self.pending.is_empty() {
            self.abandon_batch();
        }
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
            self.submit(chunks, &wave)?;
            if let Some((s, results, wstats)) = self.finish_front()? {
                slot = s;
                merge_stats(&mut stats, &wstats);
                for (idx, r) in results {
                    out[idx] = r;
                }
            }
        }
        Ok(DecodedWave { chunks: out, output: &self.slots[slot].output, stats })
    }

    /// Lays one wave out, builds its tables, streams its upload through the staging ring on
    /// the copy stream and queues its kernels and status copy on the compute stream; returns
    /// the slot without waiting.
    fn submit(&mut self, chunks: &[ChunkInput<'_>], wave: &[(usize, ChunkPlan)]) -> Result<usize> {
        let layout = WaveLayout::new(wave);
        let tables =
            table::build(wave, &layout, self.config.wave_dst_bytes as u64, self.config.teams, self.device.sm_count());
        let n_streams = tables.n_streams();
        let upload_len = layout.src_total + tables.bytes.len();
        let input_len = self.config.wave_src_bytes + self.config.table_bytes();
        if upload_len > input_len
            || n_streams > self.config.wave_streams
            || layout.dst_total > self.config.wave_dst_bytes
        {
            return Err(Error::WaveFull {
                chunk: None,
                needed: WaveFootprint { src_bytes: upload_len, dst_bytes: layout.dst_total, streams: n_streams },
                capacity: WaveFootprint {
                    src_bytes: input_len,
                    dst_bytes: self.config.wave_dst_bytes,
                    streams: self.config.wave_streams,
                },
            });
        }
        let status_at = self.reserve_status(n_streams)?;
        let slot = self.take_slot()?;
        self.waves_submitted += 1;
        self.copy.set_label(&format!("upload wave {}", self.waves_submitted));
        self.compute.set_label(&format!("decode wave {}", self.waves_submitted));
        self.upload(chunks, wave, &layout, &tables, slot)?;
        let (timing, launches) = self.launch(slot, &layout, &tables)?;
        let status_len = 8 * n_streams;
        // SAFETY: the host reads this range of the status area only after `decoded`, recorded
        // below, and no other wave's statuses go there before this one's are read.
        unsafe {
            self.compute.copy_to_host(
                &self.slots[slot].input,
                tables.status_at,
                &self.status,
                status_at,
                status_len,
            )?;
        }
        let decoded = Arc::new(self.compute.record(false)?);
        self.slots[slot].decoded = Some(decoded.clone());
        let stats = WaveStats {
            waves: 1,
            launches,
            bytes_uploaded: layout.src_total,
            bytes_direct: layout.direct_total,
            streams: tables.per_codec,
            ..WaveStats::default()
        };
        let members = wave.iter().enumerate().map(|(w, (idx, p))| (*idx, p.decoded_len, layout.chunk_dst[w])).collect();
        let WaveTables { infos, first_stream, .. } = tables;
        self.pending.push_back(Pending {
            slot,
            infos,
            first_stream,
            members,
            stats,
            timing,
            status_at,
            decoded,
            parsed: None,
        });
        Ok(slot)
    }

    /// The next slot; the previous wave's slot is released by the work queued on the compute
    /// stream so far unless the caller released it.
    fn take_slot(&mut self) -> Result<usize> {
        let s = self.next_slot;
        self.next_slot = (s + 1) % self.slots.len();
        if let Some(prev) = self.last_slot.replace(s)
            && !std::mem::take(&mut self.released_explicitly)
        {
            self.slots[prev].released = Some(self.compute.record(false)?);
        }
        Ok(s)
    }

    /// A range of the status area for `n_streams` streams; when it is full, every pending
    /// wave's statuses are read first (one wait).
    fn reserve_status(&mut self, n_streams: usize) -> Result<usize> {
        let need = 8 * n_streams;
        if self.status_cursor + need > self.status.len() {
            if let Some(last) = self.pending.back() {
                last.decoded.synchronize()?;
            }
            for p in &mut self.pending {
                read_statuses(&self.status, p)?;
            }
            self.status_cursor = 0;
        }
        let at = self.status_cursor;
        self.status_cursor += need;
        Ok(at)
    }

    /// Streams the wave's payloads and tables through the staging ring on the copy stream:
    /// direct chunks straight into the output, the rest into the input. The input is written
    /// after the slot's last kernels, the output after its last reader.
    fn upload(
        &mut self,
        chunks: &[ChunkInput<'_>],
        wave: &[(usize, ChunkPlan)],
        layout: &WaveLayout,
        tables: &WaveTables,
        s: usize,
    ) -> Result<()> {
        let slot = &self.slots[s];
        if let Some(decoded) = &slot.decoded {
            self.copy.wait(decoded)?;
        }
        if layout.direct_total > 0
            && let Some(released) = &slot.released
        {
            self.copy.wait(released)?;
        }
        let mut segments: Vec<(usize, &[u8])> = wave
            .iter()
            .enumerate()
            .map(|(w, (idx, p))| (layout.chunk_src[w], &chunks[*idx].bytes[..p.payload_len]))
            .collect();
        segments.sort_by_key(|seg| seg.0);
        segments.push((layout.src_total, &tables.bytes));
        let target = UploadTarget { dst: &slot.input, direct: layout.direct_total, direct_dst: &slot.output };
        let len = layout.src_total + tables.bytes.len();
        self.ring.upload(&self.copy, &segments, len, &target, self.pool.as_ref())
    }

    /// Queues the wave's kernels on the compute stream after its upload and after the slot's
    /// last reader: crc32c checks, one launch per codec (the launch table), unshuffle. Returns
    /// the timing events around them and the launch count.
    fn launch(&self, s: usize, layout: &WaveLayout, tables: &WaveTables) -> Result<((Event, Event), usize)> {
        let compute = &self.compute;
        compute.wait(&self.copy.record(false)?)?;
        let slot = &self.slots[s];
        if let Some(released) = &slot.released {
            compute.wait(released)?;
        }
        let started = compute.record(true)?;
        let (inp, outp) = (&slot.input, &slot.output);
        let uses = [inp, outp];
        let n_streams = tables.n_streams();
        let args = StreamArgs {
            src_base: inp.ptr(0)?,
            src_total: layout.src_total as u64,
            dst_base: outp.ptr(0)?,
            dst_total: outp.len() as u64,
            streams: inp.ptr(tables.descs_at)?,
            ids: inp.ptr(0)?,
            n_ids: 0,
            status: inp.ptr(tables.status_at)?,
            actual: inp.ptr(tables.status_at + 4 * n_streams)?,
            half: self.config.wave_dst_bytes as u64,
            n_team: 0,
        };
        let mut launches = 0;
        let (crc_at, n_crc) = tables.ids[SLOT_CRC];
        if n_crc > 0 {
            let crc = Crc32cArgs {
                base: args.src_base,
                total: args.src_total,
                streams: args.streams,
                ids: inp.ptr(crc_at)?,
                n_ids: n_crc,
                status: args.status,
                actual: args.actual,
            };
            // SAFETY: every pointer addresses the slot's input, passed as the use; each
            // stream's range lies inside `src_total` by construction, and the kernel re-checks
            // each descriptor against it.
            unsafe { crc.launch(&self.device, compute, (n_crc, 1), &uses[..1])? };
            launches += 1;
        }
        for &(codec, per_block, part_bytes, launcher) in &STREAM_LAUNCHES {
            let (at, n_ids) = tables.ids[codec];
            if n_ids == 0 {
                continue;
            }
            let n_team = tables.n_team[codec];
            let a = StreamArgs { ids: inp.ptr(at)?, n_ids, n_team, ..args };
            let gx = team_blocks(n_ids, n_team, per_block);
            let gy = parts_per_job(tables.longest[codec], part_bytes, gx);
            // SAFETY: all pointers address the slot's input and output, passed as `uses` (so
            // they outlive the launch); every stream's range lies inside `src_total` and the
            // output by construction, and the kernels re-check each descriptor against them.
            unsafe { launcher(&self.device, compute, a, (gx, gy), &uses)? };
            launches += 1;
        }
        let (jobs_at, n_jobs) = tables.jobs;
        if n_jobs > 0 {
            // Jobs read the scratch half and write the output half of the same buffer: disjoint
            // ranges by construction.
            let unshuffle = UnshuffleArgs {
                src_base: args.dst_base,
                src_total: args.dst_total,
                dst_base: args.dst_base,
                dst_total: args.dst_total,
                jobs: inp.ptr(jobs_at)?,
                n_jobs,
                status: args.status,
            };
            let gy = parts_per_job(tables.longest_job, c::DMC_UNSHUFFLE_PART_BYTES, n_jobs);
            // SAFETY: the job table and the output are the slot's buffers, passed as `uses`;
            // each job's ranges lie inside the output, and the kernel re-checks them.
            unsafe { unshuffle.launch(&self.device, compute, (n_jobs, gy), &uses)? };
            launches += 1;
        }
        Ok(((started, compute.record(true)?), launches))
    }

    /// Waits for the oldest submitted wave and reads its statuses: its slot, per-chunk
    /// results and counters; `None` when no wave is pending.
    fn finish_front(&mut self) -> Result<Option<(usize, WaveResults, WaveStats)>> {
        let Some(mut p) = self.pending.pop_front() else { return Ok(None) };
        if self.pending.is_empty() {
            self.status_cursor = 0;
        }
        read_statuses(&self.status, &mut p)?;
        let (results, stats) = p.parsed.take().unwrap_or_default();
        Ok(Some((p.slot, results, stats)))
    }
}

/// Waits for a submitted wave (unless its statuses were read before) and turns its status
/// words into per-chunk results.
fn read_statuses(area: &PinnedBuffer, p: &mut Pending) -> Result<()> {
    if p.parsed.is_some() {
        return Ok(());
    }
    p.decoded.synchronize()?;
    let mut stats = std::mem::take(&mut p.stats);
    stats.kernel_time = p.timing.1.elapsed_since(&p.timing.0)?;
    let n_streams = p.infos.len();
    // SAFETY: the status copy into this range finished (`decoded` above), and the range is
    // not written again before the wave is read.
    let sa = unsafe { area.range(p.status_at, 8 * n_streams) }?;
    let word = |i: usize| -> u32 {
        sa.get(4 * i..4 * i + 4).and_then(|b| b.try_into().ok()).map_or(c::DMC_STATUS_PENDING, u32::from_le_bytes)
    };
    let mut failed: Vec<Option<Error>> = (0..p.members.len()).map(|_| None).collect();
    let mut w = 0usize;
    for (sid, info) in p.infos.iter().enumerate() {
        while w + 1 < p.members.len() && p.first_stream[w + 1] as usize <= sid {
            w += 1;
        }
        let st = StreamStatus::from_code(word(sid));
        if st != StreamStatus::Ok && failed[w].is_none() {
            failed[w] = Some(Error::Stream {
                chunk: info.chunk,
                codec: SLOT_NAMES[info.slot],
                src_start: info.src.0 as usize,
                src_end: info.src.1 as usize,
                status: st,
                actual: word(n_streams + sid),
                expected: info.expected,
            });
        }
    }
    let mut results: WaveResults = Vec::with_capacity(p.members.len());
    for (w, &(idx, len, at)) in p.members.iter().enumerate() {
        if let Some(e) = failed[w].take() {
            results.push((idx, Err(e)));
        } else {
            stats.bytes_decoded += len;
            results.push((idx, Ok(at..at + len)));
        }
    }
    p.parsed = Some((results, stats));
    Ok(())
}

/// Copies the decoded `targets` (ranges of `output`, sorted) to their vectors through the two
/// pinned `bounce` buffers, piece k+1 coming down on `stream` while the host copies piece k.
fn copy_out(
    stream: &Stream,
    output: &DeviceBuffer,
    bounce: (&PinnedBuffer, &PinnedBuffer),
    targets: &mut [(usize, Range<usize>, Vec<u8>)],
) -> Result<()> {
    let half = bounce.0.len().min(bounce.1.len()).max(1);
    let total = targets.iter().map(|t| t.1.end).max().unwrap_or(0);
    let pieces = total.div_ceil(half);
    let piece = |k: usize| (k * half)..((k + 1) * half).min(total);
    let buf = |k: usize| if k.is_multiple_of(2) { bounce.0 } else { bounce.1 };
    let queue = |k: usize| -> Result<Event> {
        let r = piece(k);
        // SAFETY: the host reads this bounce buffer only after the event recorded below; the
        // other one is not touched by this copy.
        unsafe { stream.copy_to_host(output, r.start, buf(k), 0, r.len())? };
        stream.record(false)
    };
    let mut pending: std::collections::VecDeque<Event> = std::collections::VecDeque::with_capacity(2);
    for k in 0..pieces.min(2) {
        pending.push_back(queue(k)?);
    }
    let mut first = 0usize; // first target that may still overlap the current piece
    for k in 0..pieces {
        let Some(ready) = pending.pop_front() else { break };
        ready.synchronize()?;
        let r = piece(k);
        // SAFETY: the copy into this buffer finished (`ready`); the next piece's copy writes
        // the other one.
        let bytes = unsafe { buf(k).range(0, r.len()) }?;
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
}

fn merge_stats(a: &mut WaveStats, b: &WaveStats) {
    a.waves += b.waves;
    a.launches += b.launches;
    a.bytes_uploaded += b.bytes_uploaded;
    a.bytes_direct += b.bytes_direct;
    a.bytes_decoded += b.bytes_decoded;
    a.kernel_time += b.kernel_time;
    a.decompress_parse += b.decompress_parse;
    for k in 0..N_SLOTS {
        a.streams[k] += b.streams[k];
    }
}

#[cfg(test)]
mod launch_shape_tests {
    use super::*;

    #[test]
    fn memory_bound_launches_spread_long_jobs_over_blocks() {
        let part = c::DMC_MEMCPY_PART_BYTES;
        // one-warp-per-stream kernels: grid.y 1
        assert_eq!(parts_per_job(1 << 20, 0, 32), 1);
        // 32 streams of 1 MiB: 64 parts each (2048 blocks); 1024 of 32 KiB: 2 each
        assert_eq!(parts_per_job(1 << 20, part, 32), (1 << 20) / part);
        assert_eq!(parts_per_job(32 << 10, part, 1024), 2);
        // short and empty streams: one block; a part per started 16 KiB
        assert_eq!(parts_per_job(100, part, 7), 1);
        assert_eq!(parts_per_job(0, part, 7), 1);
        assert_eq!(parts_per_job(part + 1, part, 7), 2);
        // capped per job and in all, never below one
        assert_eq!(parts_per_job(u32::MAX, part, 1), c::DMC_MAX_BLOCKS_PER_JOB);
        assert_eq!(parts_per_job(u32::MAX, part, 1024), MAX_WAVE_BLOCKS / 1024);
        assert_eq!(parts_per_job(u32::MAX, part, 1 << 20), 1);
    }
}
