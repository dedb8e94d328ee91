//! Zstandard (RFC 8878) on the device: the host parse that splits a chunk's frames into jobs
//! with known output ranges, and a batched decoder that runs `kernels/zstd.cu` on them.
//!
//! A chunk holds one or more zstd frames, possibly with skippable frames between them. The host
//! walks the frame and block headers (cheap: a few bytes per 128 KiB block), rejects what the
//! kernel cannot decode (dictionaries, truncated or malformed framing) with an error that names
//! the byte, and cuts the chunk into *jobs*: runs of consecutive frames whose output offset is
//! known, from the frames' content sizes or, where a frame omits its size, from the size the
//! caller expects. Each job is one [`Kernel::ZstdDecode`] warp; jobs of all chunks of a batch
//! decode in one launch.
//!
//! ```no_run
//! # #[cfg(feature = "emulate")] {
//! use damacy_kernels::{Device, ZstdDecoder, ZstdInput};
//! let device = Device::emulated(0);
//! let mut decoder = ZstdDecoder::new(&device)?;
//! let frame: Vec<u8> = std::fs::read("chunk.zst")?;
//! let out = decoder.decode_to_host(&[ZstdInput::new(&frame).with_checksum_verification()])?;
//! let bytes: &Vec<u8> = out[0].as_ref().map_err(|e| e.to_string())?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ops::Range;

use crate::consts as c;
use crate::device::Device;
use crate::error::{Error, Result, StreamStatus};
use crate::launch::{KernelArgs, ZstdDecodeArgs};
use crate::wire::StreamDesc;

const MAGIC: u32 = 0xFD2F_B528;
const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
const SKIPPABLE: u32 = 0x184D_2A50;
const BLOCK_MAX: u64 = 128 * 1024;

/// One zstd chunk to decode.
#[derive(Clone, Copy, Debug)]
pub struct ZstdInput<'a> {
    /// The chunk's bytes: one or more zstd frames, skippable frames allowed.
    pub bytes: &'a [u8],
    /// The decoded size the caller expects (from the chunk shape and dtype, or blosc's header).
    /// Required when a frame omits its content size; otherwise a mismatch is an error.
    pub expected_len: Option<usize>,
    /// Verify the XXH64 content checksum of every frame that carries one.
    pub verify_checksum: bool,
}

impl<'a> ZstdInput<'a> {
    /// A chunk with no expected size and no checksum verification.
    #[must_use]
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, expected_len: None, verify_checksum: false }
    }

    /// Sets the expected decoded size.
    #[must_use]
    pub fn with_expected_len(mut self, len: usize) -> Self {
        self.expected_len = Some(len);
        self
    }

    /// Verifies the frames' content checksums.
    #[must_use]
    pub fn with_checksum_verification(mut self) -> Self {
        self.verify_checksum = true;
        self
    }
}

/// Why the host parse rejected a chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdParseError {
    /// Byte offset in the chunk where the problem was found.
    pub offset: usize,
    /// What is wrong.
    pub reason: String,
    /// The input is valid zstd that this decoder does not support (dictionaries).
    pub unsupported: bool,
}

impl std::fmt::Display for ZstdParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for ZstdParseError {}

fn err(offset: usize, reason: impl Into<String>) -> ZstdParseError {
    ZstdParseError { offset, reason: reason.into(), unsupported: false }
}

/// How often each block, literal and table mode occurs in a chunk, as read by the host parse
/// (best effort: a block whose inner headers do not parse is counted as compressed only; the
/// kernel reports it). Sequence table counts are indexed `[literal lengths, offsets, match
/// lengths]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZstdModes {
    /// Raw (stored) blocks.
    pub raw_blocks: usize,
    /// RLE blocks.
    pub rle_blocks: usize,
    /// Compressed blocks.
    pub compressed_blocks: usize,
    /// Raw literals sections.
    pub raw_literals: usize,
    /// RLE literals sections.
    pub rle_literals: usize,
    /// Huffman literals in one stream, with a tree description.
    pub huffman_1_stream: usize,
    /// Huffman literals in four streams, with a tree description.
    pub huffman_4_streams: usize,
    /// Treeless literals (the previous Huffman table), one stream.
    pub treeless_1_stream: usize,
    /// Treeless literals, four streams.
    pub treeless_4_streams: usize,
    /// Huffman tree descriptions with FSE-compressed weights.
    pub huffman_fse_weights: usize,
    /// Huffman tree descriptions with direct (4-bit) weights.
    pub huffman_direct_weights: usize,
    /// Compressed blocks without sequences.
    pub no_sequences: usize,
    /// Predefined sequence tables.
    pub predefined: [usize; 3],
    /// RLE sequence tables.
    pub rle: [usize; 3],
    /// FSE-compressed sequence tables.
    pub fse: [usize; 3],
    /// Repeated sequence tables.
    pub repeat: [usize; 3],
    /// Frames (not skippable).
    pub frames: usize,
    /// Skippable frames.
    pub skippable_frames: usize,
    /// Frames with a content checksum.
    pub checksums: usize,
    /// Frames without a content size.
    pub unknown_sizes: usize,
}

impl ZstdModes {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &ZstdModes) {
        let s = [
            (&mut self.raw_blocks, other.raw_blocks),
            (&mut self.rle_blocks, other.rle_blocks),
            (&mut self.compressed_blocks, other.compressed_blocks),
            (&mut self.raw_literals, other.raw_literals),
            (&mut self.rle_literals, other.rle_literals),
            (&mut self.huffman_1_stream, other.huffman_1_stream),
            (&mut self.huffman_4_streams, other.huffman_4_streams),
            (&mut self.treeless_1_stream, other.treeless_1_stream),
            (&mut self.treeless_4_streams, other.treeless_4_streams),
            (&mut self.huffman_fse_weights, other.huffman_fse_weights),
            (&mut self.huffman_direct_weights, other.huffman_direct_weights),
            (&mut self.no_sequences, other.no_sequences),
            (&mut self.frames, other.frames),
            (&mut self.skippable_frames, other.skippable_frames),
            (&mut self.checksums, other.checksums),
            (&mut self.unknown_sizes, other.unknown_sizes),
        ];
        for (a, b) in s {
            *a += b;
        }
        for k in 0..3 {
            self.predefined[k] += other.predefined[k];
            self.rle[k] += other.rle[k];
            self.fse[k] += other.fse[k];
            self.repeat[k] += other.repeat[k];
        }
    }
}

/// One frame as the host parse read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdFrame {
    /// The frame's bytes in the chunk (magic number to checksum).
    pub src: Range<usize>,
    /// A skippable frame (decodes to nothing).
    pub skippable: bool,
    /// The declared content size, if any (0 for skippable frames).
    pub content_size: Option<u64>,
    /// The window size (the content size for single-segment frames).
    pub window_size: u64,
    /// Whether the frame ends in an XXH64 content checksum.
    pub checksum: bool,
}

/// One unit of device work: consecutive frames `src` of the chunk decoding to `dst` of the
/// chunk's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdJob {
    /// Byte range of the frames in the chunk.
    pub src: Range<usize>,
    /// Byte range of their decoded bytes in the chunk's output.
    pub dst: Range<usize>,
}

/// The host parse of one chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdPlan {
    /// Every frame, in order.
    pub frames: Vec<ZstdFrame>,
    /// The device jobs, in order; together they produce the whole output.
    pub jobs: Vec<ZstdJob>,
    /// The chunk's decoded size.
    pub decoded_len: usize,
    /// Block, literal and table modes seen.
    pub modes: ZstdModes,
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl Cursor<'_> {
    fn u8(&self, at: usize) -> Option<u32> {
        self.b.get(at).map(|&v| u32::from(v))
    }
    fn le(&self, at: usize, n: usize) -> Option<u64> {
        let s = self.b.get(at..at.checked_add(n)?)?;
        Some(s.iter().rev().fold(0u64, |acc, &v| (acc << 8) | u64::from(v)))
    }
}

/// Classifies the literal and sequence modes of one compressed block (best effort).
fn block_modes(b: &[u8], modes: &mut ZstdModes) -> Option<()> {
    let c = Cursor { b };
    let b0 = c.u8(0)?;
    let (ltype, sf) = (b0 & 3, (b0 >> 2) & 3);
    let bp: usize = if ltype <= 1 {
        let (hs, regen) = match sf {
            0 | 2 => (1, b0 >> 3),
            1 => (2, (b0 >> 4) + (c.u8(1)? << 4)),
            _ => (3, (b0 >> 4) + (c.u8(1)? << 4) + (c.u8(2)? << 12)),
        };
        if ltype == 0 {
            modes.raw_literals += 1;
            hs + regen as usize
        } else {
            modes.rle_literals += 1;
            hs + 1
        }
    } else {
        let (hs, csize, streams) = match sf {
            0 | 1 => (3, (c.le(0, 3)? >> 14) & 0x3FF, if sf == 0 { 1 } else { 4 }),
            2 => (4, c.le(0, 4)? >> 18, 4),
            _ => (5, (c.le(0, 4)? >> 22) + (c.le(4, 1)? << 10), 4),
        };
        match (ltype, streams) {
            (2, 1) => modes.huffman_1_stream += 1,
            (2, _) => modes.huffman_4_streams += 1,
            (_, 1) => modes.treeless_1_stream += 1,
            _ => modes.treeless_4_streams += 1,
        }
        if ltype == 2 {
            if c.u8(hs)? < 128 {
                modes.huffman_fse_weights += 1;
            } else {
                modes.huffman_direct_weights += 1;
            }
        }
        hs + csize as usize
    };
    let mut bp = bp;
    let n0 = c.u8(bp)?;
    bp += 1;
    let nseq = match n0 {
        0..=127 => n0,
        128..=254 => ((n0 - 128) << 8) + c.u8(bp)?,
        _ => c.u8(bp)? + (c.u8(bp + 1)? << 8) + 0x7F00,
    };
    if n0 >= 128 {
        bp += if n0 == 255 { 2 } else { 1 };
    }
    if nseq == 0 {
        modes.no_sequences += 1;
        return Some(());
    }
    let m = c.u8(bp)?;
    for (k, shift) in [6u32, 4, 2].into_iter().enumerate() {
        match (m >> shift) & 3 {
            0 => modes.predefined[k] += 1,
            1 => modes.rle[k] += 1,
            2 => modes.fse[k] += 1,
            _ => modes.repeat[k] += 1,
        }
    }
    Some(())
}

/// Parses the frame at `at` (its magic number already checked to be a zstd frame's).
fn parse_frame(bytes: &[u8], at: usize, modes: &mut ZstdModes) -> Result<ZstdFrame, ZstdParseError> {
    let c = Cursor { b: bytes };
    let truncated = |pos: usize, what: &str| err(pos, format!("the chunk ends inside {what} (truncated frame)"));
    let mut ip = at + 4;
    let fhd = c.u8(ip).ok_or_else(|| truncated(ip, "a frame header"))?;
    ip += 1;
    if fhd & 0x08 != 0 {
        return Err(err(ip - 1, "reserved bit of the frame header descriptor is set"));
    }
    let fcs_flag = fhd >> 6;
    let single = (fhd >> 5) & 1 == 1;
    let checksum = (fhd >> 2) & 1 == 1;
    let did_size = match fhd & 3 {
        3 => 4,
        d => d as usize,
    };
    let fcs_size = match fcs_flag {
        0 => usize::from(single),
        f => 1usize << f,
    };
    let mut window = 0u64;
    if !single {
        let wd = c.u8(ip).ok_or_else(|| truncated(ip, "a frame header"))?;
        let wlog = 10 + (wd >> 3);
        let base = 1u64 << wlog;
        window = base + (base >> 3) * u64::from(wd & 7);
        ip += 1;
    }
    let did = c.le(ip, did_size).ok_or_else(|| truncated(ip, "a frame header"))?;
    if did != 0 {
        return Err(ZstdParseError {
            offset: ip,
            reason: format!("zstd dictionaries are not supported (the frame at byte {at} needs dictionary {did})"),
            unsupported: true,
        });
    }
    ip += did_size;
    let mut fcs = c.le(ip, fcs_size).ok_or_else(|| truncated(ip, "a frame header"))?;
    if fcs_size == 2 {
        fcs += 256;
    }
    ip += fcs_size;
    if single {
        window = fcs;
    }
    let block_max = window.min(BLOCK_MAX);
    loop {
        let bh = c.le(ip, 3).ok_or_else(|| truncated(ip, "a block header"))?;
        let last = bh & 1 == 1;
        let btype = (bh >> 1) & 3;
        let bsize = bh >> 3;
        if btype == 3 {
            return Err(err(ip, "reserved block type"));
        }
        if bsize > block_max {
            return Err(err(
                ip,
                format!("a block of {bsize} bytes exceeds the frame's maximum block size {block_max}"),
            ));
        }
        ip += 3;
        let stored = if btype == 1 { 1 } else { bsize as usize };
        if stored > bytes.len() - ip {
            return Err(truncated(ip, "a block"));
        }
        match btype {
            0 => modes.raw_blocks += 1,
            1 => modes.rle_blocks += 1,
            _ => {
                modes.compressed_blocks += 1;
                let _ = block_modes(&bytes[ip..ip + stored], modes);
            }
        }
        ip += stored;
        if last {
            break;
        }
    }
    if checksum {
        if bytes.len() - ip < 4 {
            return Err(truncated(ip, "the content checksum"));
        }
        ip += 4;
        modes.checksums += 1;
    }
    modes.frames += 1;
    if fcs_size == 0 {
        modes.unknown_sizes += 1;
    }
    Ok(ZstdFrame {
        src: at..ip,
        skippable: false,
        content_size: (fcs_size > 0).then_some(fcs),
        window_size: window,
        checksum,
    })
}

/// The largest decoded chunk the host parse accepts (the kernel's 32-bit sizes).
pub const MAX_DECODED_LEN: usize = u32::MAX as usize;

/// Parses a chunk of zstd frames into frames and device jobs. `expected_len` is the decoded
/// size the caller expects; it is required when a frame omits its content size.
pub fn parse(bytes: &[u8], expected_len: Option<usize>) -> Result<ZstdPlan, ZstdParseError> {
    let mut frames = Vec::new();
    let mut modes = ZstdModes::default();
    let mut ip = 0usize;
    if bytes.is_empty() {
        return Err(err(0, "an empty chunk holds no zstd frame"));
    }
    if bytes.len() > u32::MAX as usize {
        return Err(err(0, format!("a {}-byte chunk exceeds the kernel's 4 GiB limit", bytes.len())));
    }
    while ip < bytes.len() {
        let magic = Cursor { b: bytes }
            .le(ip, 4)
            .ok_or_else(|| err(ip, "the chunk ends inside a frame's magic number (truncated frame)"))?
            as u32;
        if magic & SKIPPABLE_MASK == SKIPPABLE {
            let size = Cursor { b: bytes }
                .le(ip + 4, 4)
                .ok_or_else(|| err(ip + 4, "the chunk ends inside a skippable frame header"))?
                as usize;
            if size > bytes.len() - ip - 8 {
                return Err(err(ip, format!("a skippable frame of {size} bytes runs past the chunk's end")));
            }
            frames.push(ZstdFrame {
                src: ip..ip + 8 + size,
                skippable: true,
                content_size: Some(0),
                window_size: 0,
                checksum: false,
            });
            modes.skippable_frames += 1;
            ip += 8 + size;
            continue;
        }
        if magic != MAGIC {
            return Err(err(ip, format!("{magic:#010x} is not a zstd frame's magic number")));
        }
        let f = parse_frame(bytes, ip, &mut modes)?;
        ip = f.src.end;
        frames.push(f);
    }
    if frames.iter().all(|f| f.skippable) {
        return Err(err(0, "the chunk holds only skippable frames"));
    }
    let jobs_and_len = plan_jobs(&frames, expected_len)?;
    Ok(ZstdPlan { frames, jobs: jobs_and_len.0, decoded_len: jobs_and_len.1, modes })
}

/// Cuts frames into jobs at every frame whose output offset is known, from the front (sums of
/// content sizes) or from the back (the expected size minus the sizes after it).
fn plan_jobs(frames: &[ZstdFrame], expected: Option<usize>) -> Result<(Vec<ZstdJob>, usize), ZstdParseError> {
    let known: Option<u64> = frames.iter().try_fold(0u64, |a, f| f.content_size.and_then(|s| a.checked_add(s)));
    let total = match (expected, known) {
        (Some(e), Some(k)) if e as u64 != k => {
            return Err(err(0, format!("the frames declare {k} decoded bytes but {e} are expected")));
        }
        (Some(e), _) => e as u64,
        (None, Some(k)) => k,
        (None, None) => {
            return Err(err(
                0,
                "a zstd frame without a content size needs the expected decoded size (ZstdInput::with_expected_len)",
            ));
        }
    };
    if total > MAX_DECODED_LEN as u64 {
        return Err(err(0, format!("{total} decoded bytes exceed the kernel's 4 GiB limit")));
    }
    let n = frames.len();
    let mut start: Vec<Option<u64>> = vec![None; n + 1];
    start[0] = Some(0);
    start[n] = Some(total);
    for i in 0..n {
        if let (Some(s), Some(len)) = (start[i], frames[i].content_size) {
            let e = s.checked_add(len).filter(|&e| e <= total).ok_or_else(|| {
                err(frames[i].src.start, format!("the frames declare more than the {total} expected decoded bytes"))
            })?;
            start[i + 1] = Some(e);
        } else {
            break;
        }
    }
    for i in (0..n).rev() {
        if let (Some(e), Some(len)) = (start[i + 1], frames[i].content_size) {
            let s = e.checked_sub(len).ok_or_else(|| {
                err(frames[i].src.start, format!("the frames declare more than the {total} expected decoded bytes"))
            })?;
            if start[i].is_some_and(|v| v != s) {
                return Err(err(frames[i].src.start, "the frames' content sizes contradict the expected size"));
            }
            start[i] = Some(s);
        } else {
            break;
        }
    }
    let mut jobs = Vec::new();
    let mut b = 0usize;
    while b < n {
        let mut e = b + 1;
        while e < n && start[e].is_none() {
            e += 1;
        }
        let (Some(d0), Some(d1)) = (start[b], start[e]) else {
            return Err(err(frames[b].src.start, "cannot place the frame's output"));
        };
        if d1 < d0 {
            return Err(err(frames[b].src.start, "the frames' content sizes contradict the expected size"));
        }
        if !frames[b..e].iter().all(|f| f.skippable) {
            jobs.push(ZstdJob { src: frames[b].src.start..frames[e - 1].src.end, dst: d0 as usize..d1 as usize });
        }
        b = e;
    }
    Ok((jobs, total as usize))
}

/// A batched zstd decoder on one device.
///
/// Each call stages the batch's frames and job table in one upload, runs one
/// [`Kernel::ZstdDecode`] launch over every job of every chunk, and reads back the status words
/// and the decoded bytes. Buffers are allocated per call (a wave decoder will pool them).
#[derive(Debug)]
pub struct ZstdDecoder {
    device: Device,
    max_chunk_len: usize,
    last_modes: ZstdModes,
}

/// Per-chunk results of [`ZstdDecoder::decode_to_host`].
pub type ZstdResults = Vec<Result<Vec<u8>>>;

impl ZstdDecoder {
    /// A decoder on `device` accepting chunks that decode to at most 1 GiB each.
    pub fn new(device: &Device) -> Result<Self> {
        device.prepare(&[crate::kernel::Kernel::ZstdDecode])?;
        Ok(Self { device: device.clone(), max_chunk_len: 1 << 30, last_modes: ZstdModes::default() })
    }

    /// Sets the largest decoded size per chunk (default 1 GiB, at most 4 GiB − 1); larger
    /// chunks are per-chunk errors instead of allocations.
    #[must_use]
    pub fn with_max_chunk_len(mut self, len: usize) -> Self {
        self.max_chunk_len = len.min(MAX_DECODED_LEN);
        self
    }

    /// Block, literal and table modes of the chunks of the last call that parsed.
    #[must_use]
    pub fn last_modes(&self) -> ZstdModes {
        self.last_modes
    }

    /// Decodes a batch of zstd chunks; per chunk its bytes or an error naming the chunk and
    /// why. The outer error is a device failure.
    pub fn decode_to_host(&mut self, inputs: &[ZstdInput<'_>]) -> Result<ZstdResults> {
        let plans = self.plan_batch(inputs);
        let mut modes = ZstdModes::default();
        for p in plans.iter().flatten() {
            modes.add(&p.modes);
        }
        self.last_modes = modes;
        let batch = Batch::new(inputs, &plans);
        if batch.owner.is_empty() {
            return Ok(plans.into_iter().map(|p| p.map(|p| vec![0u8; p.decoded_len])).collect());
        }
        let (words, decoded) = self.run(inputs, &plans, &batch)?;
        let n = batch.owner.len();
        let word = |k: usize| u32::from_le_bytes([words[4 * k], words[4 * k + 1], words[4 * k + 2], words[4 * k + 3]]);
        let mut failed: Vec<Option<Error>> = (0..inputs.len()).map(|_| None).collect();
        for (k, (chunk, src, expected)) in batch.owner.iter().enumerate() {
            let st = StreamStatus::from_code(word(k));
            if st != StreamStatus::Ok && failed[*chunk].is_none() {
                failed[*chunk] = Some(Error::Stream {
                    chunk: *chunk,
                    codec: "zstd",
                    src_start: src.start,
                    src_end: src.end,
                    status: st,
                    actual: word(n + k),
                    expected: *expected,
                });
            }
        }
        Ok(plans
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let p = p?;
                if let Some(e) = failed[i].take() {
                    return Err(e);
                }
                let (_, d0) =
                    batch.placed[i].ok_or_else(|| Error::InvalidArgument("chunk lost its placement".into()))?;
                Ok(decoded[d0..d0 + p.decoded_len].to_vec())
            })
            .collect())
    }

    /// The host parse of every chunk (rayon), with the decoder's size limit applied.
    fn plan_batch(&self, inputs: &[ZstdInput<'_>]) -> Vec<Result<ZstdPlan>> {
        use rayon::prelude::*;
        let max = self.max_chunk_len;
        inputs
            .par_iter()
            .enumerate()
            .map(|(i, inp)| {
                let p = parse(inp.bytes, inp.expected_len).map_err(|e| {
                    if e.unsupported {
                        Error::Unsupported { chunk: i, what: e.reason }
                    } else {
                        Error::Decode { chunk: i, what: "zstd frame", offset: e.offset, reason: e.reason }
                    }
                })?;
                if p.decoded_len > max {
                    return Err(Error::Decode {
                        chunk: i,
                        what: "zstd frame",
                        offset: 0,
                        reason: format!("decodes to {} bytes, over the decoder's limit of {max}", p.decoded_len),
                    });
                }
                Ok(p)
            })
            .collect()
    }

    /// Uploads payloads and tables, launches the kernel over every job, and returns the status
    /// and size words and the decoded bytes.
    fn run(&self, inputs: &[ZstdInput<'_>], plans: &[Result<ZstdPlan>], batch: &Batch) -> Result<(Vec<u8>, Vec<u8>)> {
        let n = batch.owner.len();
        if n > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!("{n} zstd jobs in one batch")));
        }
        let descs_at = batch.src_total;
        let desc_bytes: &[u8] = bytemuck::cast_slice(&batch.descs);
        let ids_at = (descs_at + desc_bytes.len()).div_ceil(16) * 16;
        let status_at = ids_at + 4 * n;
        let actual_at = status_at + 4 * n;
        let mut stage = vec![0u8; actual_at + 4 * n];
        for ((inp, at), p) in inputs.iter().zip(&batch.placed).zip(plans) {
            if let (Some((s0, _)), Ok(_)) = (at, p) {
                stage[*s0..*s0 + inp.bytes.len()].copy_from_slice(inp.bytes);
            }
        }
        stage[descs_at..descs_at + desc_bytes.len()].copy_from_slice(desc_bytes);
        for k in 0..n {
            stage[ids_at + 4 * k..ids_at + 4 * k + 4].copy_from_slice(&(k as u32).to_le_bytes());
            stage[status_at + 4 * k..status_at + 4 * k + 4].copy_from_slice(&c::DMC_STATUS_PENDING.to_le_bytes());
        }
        let mut input = self.device.alloc(stage.len())?;
        self.device.upload(&stage, &mut input, 0)?;
        let output = self.device.alloc(batch.dst_total.max(1))?;
        let args = ZstdDecodeArgs {
            src_base: input.ptr(0)?,
            src_total: batch.src_total as u64,
            dst_base: output.ptr(0)?,
            dst_total: batch.dst_total as u64,
            streams: input.ptr(descs_at)?,
            ids: input.ptr(ids_at)?,
            n_ids: n as u32,
            status: input.ptr(status_at)?,
            actual: input.ptr(actual_at)?,
        };
        let grid = (n as u32).div_ceil(c::DMC_ZSTD_WARPS_PER_BLOCK);
        // SAFETY: every pointer addresses `input` or `output`, which the launch records as uses
        // (their drop waits for it); the job table places every job inside `src_total` and
        // `dst_total` by construction, and the kernel re-checks each descriptor against them.
        unsafe { args.launch(&self.device, self.device.default_stream(), (grid, 1), &[&input, &output])? };
        let mut words = vec![0u8; 8 * n];
        self.device.download(&input, status_at, &mut words)?;
        let mut decoded = vec![0u8; batch.dst_total];
        self.device.download(&output, 0, &mut decoded)?;
        Ok((words, decoded))
    }
}

/// Where a batch's chunks and jobs go: per chunk its (source, output) offsets, the job table
/// (`dmc_stream` records) and per job its chunk, source range and expected size.
struct Batch {
    placed: Vec<Option<(usize, usize)>>,
    descs: Vec<StreamDesc>,
    owner: Vec<(usize, Range<usize>, u32)>,
    src_total: usize,
    dst_total: usize,
}

impl Batch {
    fn new(inputs: &[ZstdInput<'_>], plans: &[Result<ZstdPlan>]) -> Self {
        let align = |v: usize| v.div_ceil(16) * 16;
        let (mut src_total, mut dst_total) = (0usize, 0usize);
        let mut placed = Vec::with_capacity(inputs.len());
        let mut descs: Vec<StreamDesc> = Vec::new();
        let mut owner = Vec::new();
        for (i, (inp, p)) in inputs.iter().zip(plans).enumerate() {
            let Ok(p) = p else {
                placed.push(None);
                continue;
            };
            let (s0, d0) = (src_total, dst_total);
            placed.push(Some((s0, d0)));
            src_total += align(inp.bytes.len());
            dst_total += align(p.decoded_len);
            let flags = if inp.verify_checksum { c::DMC_ZSTD_VERIFY_CHECKSUM } else { 0 };
            for j in &p.jobs {
                let d = StreamDesc {
                    src_off: (s0 + j.src.start) as u64,
                    dst_off: (d0 + j.dst.start) as u64,
                    src_len: j.src.len() as u32,
                    dst_len: j.dst.len() as u32,
                    codec: 0,
                    flags,
                };
                descs.push(d);
                owner.push((i, j.src.clone(), j.dst.len() as u32));
            }
        }
        Self { placed, descs, owner, src_total, dst_total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(content: Option<u64>) -> ZstdFrame {
        ZstdFrame { src: 0..10, skippable: false, content_size: content, window_size: 1024, checksum: false }
    }

    #[test]
    fn jobs_split_where_offsets_are_known() {
        let mut fs = vec![frame(Some(5)), frame(None), frame(None), frame(Some(7)), frame(Some(1))];
        for (i, f) in fs.iter_mut().enumerate() {
            f.src = i * 10..i * 10 + 10;
        }
        let (jobs, total) = plan_jobs(&fs, Some(30)).unwrap();
        assert_eq!(total, 30);
        assert_eq!(
            jobs,
            vec![
                ZstdJob { src: 0..10, dst: 0..5 },
                ZstdJob { src: 10..30, dst: 5..22 },
                ZstdJob { src: 30..40, dst: 22..29 },
                ZstdJob { src: 40..50, dst: 29..30 },
            ]
        );
        assert!(plan_jobs(&fs, None).is_err(), "unknown sizes need the expected size");
        assert!(plan_jobs(&fs, Some(10)).is_err(), "sizes larger than expected");
        let all = vec![frame(Some(3)), frame(Some(4))];
        assert!(plan_jobs(&all, Some(8)).is_err(), "declared sizes contradict the expected size");
        assert_eq!(plan_jobs(&all, None).unwrap().1, 7);
    }

    #[test]
    fn framing_errors_name_the_byte() {
        assert!(parse(&[], None).is_err());
        assert!(parse(&[1, 2, 3, 4, 5], None).unwrap_err().reason.contains("magic"));
        // A frame whose header needs a dictionary.
        let f = [0x28, 0xB5, 0x2F, 0xFD, 0x01, 0x00, 0x07];
        let e = parse(&f, None).unwrap_err();
        assert!(e.unsupported && e.reason.contains("zstd dictionaries are not supported"), "{e}");
        // Truncated header.
        let e = parse(&f[..5], None).unwrap_err();
        assert!(e.reason.contains("truncated"), "{e}");
    }
}
