//! Zstandard (RFC 8878) on the device: the host parse that splits a chunk's frames into jobs
//! with known output ranges. The [`Decoder`](crate::Decoder) turns each job into one stream of
//! its wave (codec zstd, one warp or team of `kernels/zstd.cu` per stream), beside the lz4, blosclz and
//! raw streams of the same wave.
//!
//! A chunk holds one or more zstd frames, possibly with skippable frames between them. The host
//! walks the frame and block headers (cheap: a few bytes per 128 KiB block), rejects what the
//! kernel cannot decode (dictionaries, truncated or malformed framing) with an error that names
//! the byte, and cuts the chunk into *jobs*: runs of consecutive frames whose output offset is
//! known, from the frames' content sizes or, where a frame omits its size, from the size the
//! caller expects. Each job is one [`Kernel::ZstdDecode`](crate::Kernel::ZstdDecode) warp, or in
//! a wave of few jobs a team of warps whose helpers decode the four Huffman literal streams of
//! a block side by side ([`DecodeConfig::teams`](crate::DecodeConfig::teams)); the
//! jobs of all chunks of a wave decode in one launch.
//!
//! ```no_run
//! # #[cfg(feature = "emulate")] {
//! use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device};
//! let device = Device::emulated(0);
//! let mut decoder = Decoder::new(&device, DecodeConfig::default())?;
//! let frame: Vec<u8> = std::fs::read("chunk.zst")?;
//! let plan = damacy_kernels::parse_zstd(&frame, None)?;
//! println!("{} frames, {} jobs", plan.frames.len(), plan.jobs.len());
//! let out = decoder.decode_to_host(&[ChunkInput::zstd(&frame).with_checksum_verification()])?;
//! let bytes: &Vec<u8> = out.chunks[0].as_ref().map_err(|e| e.to_string())?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ops::Range;

use crate::consts::DMC_ZSTD_TEAM_COPY_MIN;

const MAGIC: u32 = 0xFD2F_B528;
const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
const SKIPPABLE: u32 = 0x184D_2A50;
const BLOCK_MAX: u64 = 128 * 1024;

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
    /// Decoded bytes a team of warps decodes side by side ([`ZstdJob::team_bytes`]).
    pub team_bytes: u64,
}

/// One unit of device work: consecutive frames `src` of the chunk decoding to `dst` of the
/// chunk's output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZstdJob {
    /// Byte range of the frames in the chunk.
    pub src: Range<usize>,
    /// Byte range of their decoded bytes in the chunk's output.
    pub dst: Range<usize>,
    /// Of those, the bytes a team of warps decodes side by side: literals of four Huffman
    /// streams (a helper per stream) and raw blocks of `DMC_ZSTD_TEAM_COPY_MIN` bytes or more
    /// (copied by every warp), summed over the job's frames. The rest (sequences, single-stream
    /// and raw literals, RLE) is the leader's serial path whatever the launch shape; the device
    /// decoder gives a job a team in a large wave only when most of its bytes are these.
    pub team_bytes: usize,
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

/// Classifies the literal and sequence modes of one compressed block (best effort); returns the
/// bytes its literals regenerate when they are four Huffman streams (0 otherwise).
fn block_modes(b: &[u8], modes: &mut ZstdModes) -> Option<usize> {
    let c = Cursor { b };
    let b0 = c.u8(0)?;
    let (ltype, sf) = (b0 & 3, (b0 >> 2) & 3);
    let mut huf4 = 0usize;
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
        if streams == 4 {
            // the regenerated size: the header's bits 4.., 10, 14 or 18 of them
            let bits = [10, 10, 14, 18][sf as usize];
            huf4 = ((c.le(0, hs)? >> 4) & ((1u64 << bits) - 1)) as usize;
        }
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
        return Some(huf4);
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
    Some(huf4)
}

/// Walks a frame's blocks from `ip` (its first block header) to past its last block; returns
/// where the last block ends and the decoded bytes a team decodes side by side
/// ([`ZstdJob::team_bytes`]: raw blocks of `DMC_ZSTD_TEAM_COPY_MIN` bytes or more, four-stream
/// Huffman literals).
fn parse_blocks(
    bytes: &[u8],
    mut ip: usize,
    block_max: u64,
    modes: &mut ZstdModes,
) -> Result<(usize, u64), ZstdParseError> {
    let c = Cursor { b: bytes };
    let truncated = |pos: usize, what: &str| err(pos, format!("the chunk ends inside {what} (truncated frame)"));
    let mut team_bytes = 0u64;
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
            0 => {
                modes.raw_blocks += 1;
                if bsize >= u64::from(DMC_ZSTD_TEAM_COPY_MIN) {
                    team_bytes += bsize;
                }
            }
            1 => modes.rle_blocks += 1,
            _ => {
                modes.compressed_blocks += 1;
                team_bytes += block_modes(&bytes[ip..ip + stored], modes).unwrap_or(0) as u64;
            }
        }
        ip += stored;
        if last {
            break;
        }
    }
    Ok((ip, team_bytes))
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
    let (end, team_bytes) = parse_blocks(bytes, ip, block_max, modes)?;
    ip = end;
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
        team_bytes,
    })
}

/// The largest decoded chunk the host parse accepts (the kernel's 32-bit sizes).
pub(crate) const MAX_DECODED_LEN: usize = u32::MAX as usize;

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
                team_bytes: 0,
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
                "a zstd frame without a content size needs the expected decoded size (ChunkInput::with_expected_len)",
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
            let team_bytes = frames[b..e].iter().map(|f| f.team_bytes).sum::<u64>() as usize;
            jobs.push(ZstdJob {
                src: frames[b].src.start..frames[e - 1].src.end,
                dst: d0 as usize..d1 as usize,
                team_bytes,
            });
        }
        b = e;
    }
    Ok((jobs, total as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(content: Option<u64>) -> ZstdFrame {
        ZstdFrame {
            src: 0..10,
            skippable: false,
            content_size: content,
            window_size: 1024,
            checksum: false,
            team_bytes: 0,
        }
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
                ZstdJob { src: 0..10, dst: 0..5, team_bytes: 0 },
                ZstdJob { src: 10..30, dst: 5..22, team_bytes: 0 },
                ZstdJob { src: 30..40, dst: 22..29, team_bytes: 0 },
                ZstdJob { src: 40..50, dst: 29..30, team_bytes: 0 },
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
