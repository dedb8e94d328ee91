//! Host parse of blosc1 frames: the 16-byte header, `bstarts`, split streams → a list of
//! streams and blocks that the decoder turns into the wave's flat stream table.
//!
//! Frame layout (c-blosc 1.x, format version 2): `version, versionlz, flags, typesize` (u8
//! each), `nbytes, blocksize, cbytes` (u32 LE); unless the frame is memcpyed, `bstarts[nblocks]`
//! (i32 LE offsets from the frame start); each block holds `nsplits` streams, each an i32 LE
//! compressed size followed by that many bytes, stored raw when the size equals the
//! uncompressed split size. Blocks split into `typesize` streams when splitting is not disabled
//! (flag 0x10), `typesize <= 16`, `blocksize / typesize >= 128` and the block is not the short
//! last one.

/// Length of the blosc1 header.
pub(crate) const HEADER_LEN: usize = 16;
/// Largest typesize that splits (c-blosc `MAX_SPLITS`).
const MAX_SPLITS: u32 = 16;
/// Smallest per-split element count that splits (c-blosc `MIN_BUFFERSIZE`).
const MIN_BUFFERSIZE: u32 = 128;

/// The compressor recorded in a frame's flags (bits 5–7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BloscCodec {
    /// `BloscLZ`.
    BloscLz,
    /// LZ4 or LZ4HC (same stream format).
    Lz4,
    /// Snappy.
    Snappy,
    /// zlib.
    Zlib,
    /// Zstandard.
    Zstd,
    /// A code this version does not know.
    Unknown(u8),
}

impl BloscCodec {
    fn from_flags(flags: u8) -> Self {
        match flags >> 5 {
            0 => Self::BloscLz,
            1 => Self::Lz4,
            2 => Self::Snappy,
            3 => Self::Zlib,
            4 => Self::Zstd,
            other => Self::Unknown(other),
        }
    }

    /// Name as blosc spells it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::BloscLz => "blosclz",
            Self::Lz4 => "lz4",
            Self::Snappy => "snappy",
            Self::Zlib => "zlib",
            Self::Zstd => "zstd",
            Self::Unknown(_) => "unknown",
        }
    }

    /// Whether this crate has a device kernel for it.
    #[must_use]
    pub fn has_kernel(self) -> bool {
        matches!(self, Self::BloscLz | Self::Lz4 | Self::Zstd)
    }
}

/// The shuffle filter recorded in a frame's flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shuffle {
    /// No shuffle.
    None,
    /// Byte shuffle (flag 0x1).
    Byte,
    /// Bit shuffle (flag 0x4).
    Bit,
}

/// A parsed blosc1 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BloscHeader {
    /// Format version (2 for c-blosc 1.x).
    pub version: u8,
    /// Compressor format version.
    pub versionlz: u8,
    /// Raw flags byte.
    pub flags: u8,
    /// Element size in bytes.
    pub typesize: u8,
    /// Decoded size.
    pub nbytes: u32,
    /// Block size (the last block may be shorter).
    pub blocksize: u32,
    /// Frame size including the header.
    pub cbytes: u32,
}

/// Why a frame could not be parsed: the byte offset in the frame, the kind and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError {
    /// Byte offset inside the frame.
    pub offset: usize,
    /// Whether the frame is malformed or well formed but beyond the GPU route.
    pub kind: FrameErrorKind,
    /// What is wrong.
    pub reason: String,
}

/// The kind of a [`FrameError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameErrorKind {
    /// The bytes are not a valid blosc1 frame.
    Malformed,
    /// A valid frame this crate has no kernel for (e.g. a zlib or snappy compressor): route the
    /// chunk to the CPU executor.
    Unsupported,
}

fn ferr(offset: usize, reason: impl Into<String>) -> FrameError {
    FrameError { offset, kind: FrameErrorKind::Malformed, reason: reason.into() }
}

fn le32(b: &[u8], at: usize) -> Result<u32, FrameError> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| ferr(at, format!("frame ends before the 4-byte field at {at}")))
}

impl BloscHeader {
    /// Parses and sanity-checks the 16-byte header of `frame`.
    pub fn parse(frame: &[u8]) -> Result<Self, FrameError> {
        if frame.len() < HEADER_LEN {
            return Err(ferr(0, format!("{} bytes is shorter than the 16-byte blosc header", frame.len())));
        }
        let h = Self {
            version: frame[0],
            versionlz: frame[1],
            flags: frame[2],
            typesize: frame[3],
            nbytes: le32(frame, 4)?,
            blocksize: le32(frame, 8)?,
            cbytes: le32(frame, 12)?,
        };
        if h.version == 0 || h.version > 2 {
            return Err(ferr(
                0,
                format!("blosc format version {} is not 1 or 2 (blosc2 frames are not supported)", h.version),
            ));
        }
        if h.typesize == 0 {
            return Err(ferr(3, "typesize 0"));
        }
        if (h.cbytes as usize) < HEADER_LEN || h.cbytes as usize > frame.len() {
            return Err(ferr(12, format!("cbytes {} outside 16..={} (the frame's length)", h.cbytes, frame.len())));
        }
        if h.nbytes > i32::MAX as u32 {
            return Err(ferr(4, format!("nbytes {} exceeds blosc's 2 GiB limit", h.nbytes)));
        }
        if h.nbytes > 0 && (h.blocksize == 0 || h.blocksize > i32::MAX as u32) {
            return Err(ferr(8, format!("blocksize {} invalid for nbytes {}", h.blocksize, h.nbytes)));
        }
        Ok(h)
    }

    /// The compressor.
    #[must_use]
    pub fn codec(&self) -> BloscCodec {
        BloscCodec::from_flags(self.flags)
    }

    /// Whether the frame stores the data uncompressed after the header (flag 0x2).
    #[must_use]
    pub fn memcpyed(&self) -> bool {
        self.flags & 0x2 != 0
    }

    /// The shuffle filter (byte shuffle wins when both flags are set, as in c-blosc).
    #[must_use]
    pub fn shuffle(&self) -> Shuffle {
        if self.flags & 0x1 != 0 {
            Shuffle::Byte
        } else if self.flags & 0x4 != 0 {
            Shuffle::Bit
        } else {
            Shuffle::None
        }
    }

    /// Number of blocks.
    #[must_use]
    pub fn nblocks(&self) -> u32 {
        if self.nbytes == 0 { 0 } else { self.nbytes.div_ceil(self.blocksize) }
    }
}

/// How a stream's bytes are decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamCodec {
    /// LZ4 block format.
    Lz4,
    /// `BloscLZ`.
    BloscLz,
    /// Zstandard: one or more zstd frames (blosc's zstd compressor writes one frame per
    /// stream). The decoder's host parse reads the frames before it hands them to the kernel.
    Zstd,
    /// zlib (RFC 1950): a deflate stream with a zlib header and Adler-32, as blosc's zlib
    /// compressor writes one per stream.
    Deflate,
    /// Stored bytes.
    Raw,
}

/// One stream of a frame, offsets relative to the frame and to the chunk's decoded bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameStream {
    /// Start of the stream's bytes in the frame.
    pub src_off: u32,
    /// Length of the stream's bytes.
    pub src_len: u32,
    /// Start of its decoded bytes in the chunk.
    pub dst_off: u32,
    /// Exact decoded length.
    pub dst_len: u32,
    /// How to decode it.
    pub codec: StreamCodec,
    /// Whether it decodes into the scratch area (its block is unshuffled afterwards).
    pub to_scratch: bool,
    /// The decoded bytes a team of warps decodes side by side: zstd streams
    /// ([`crate::zstd::ZstdJob::team_bytes`]), deflate streams (the stored blocks of 4 KiB or
    /// more before the first Huffman block); 0 for every other codec.
    pub team_bytes: u32,
}

/// One block that needs an unshuffle from scratch to the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameShuffle {
    /// Start of the block in the chunk's decoded bytes.
    pub off: u32,
    /// Block length.
    pub len: u32,
    /// Byte or bit shuffle.
    pub mode: Shuffle,
}

/// A frame's decode plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FramePlan {
    /// The header.
    pub header: BloscHeader,
    /// Streams in frame order.
    pub streams: Vec<FrameStream>,
    /// Blocks to unshuffle.
    pub shuffles: Vec<FrameShuffle>,
}

/// Parses a blosc1 frame into its decode plan. Never panics, whatever the bytes.
pub fn plan_frame(frame: &[u8]) -> Result<FramePlan, FrameError> {
    let header = BloscHeader::parse(frame)?;
    let frame = &frame[..header.cbytes as usize];
    let cbytes = header.cbytes;
    let mut plan = FramePlan { header, streams: Vec::new(), shuffles: Vec::new() };
    if header.nbytes == 0 {
        return Ok(plan);
    }
    if header.memcpyed() {
        if u64::from(cbytes) < HEADER_LEN as u64 + u64::from(header.nbytes) {
            return Err(ferr(
                12,
                format!("memcpyed frame of {} bytes holds fewer than nbytes {}", cbytes, header.nbytes),
            ));
        }
        plan.streams.push(FrameStream {
            src_off: HEADER_LEN as u32,
            src_len: header.nbytes,
            dst_off: 0,
            dst_len: header.nbytes,
            codec: StreamCodec::Raw,
            to_scratch: false,
            team_bytes: 0,
        });
        return Ok(plan);
    }
    let codec = match header.codec() {
        BloscCodec::Lz4 => StreamCodec::Lz4,
        BloscCodec::BloscLz => StreamCodec::BloscLz,
        BloscCodec::Zstd => StreamCodec::Zstd,
        BloscCodec::Zlib => StreamCodec::Deflate,
        other => {
            return Err(FrameError {
                offset: 2,
                kind: FrameErrorKind::Unsupported,
                reason: format!("compressor {} has no GPU kernel", other.name()),
            });
        }
    };
    let nblocks = header.nblocks();
    let bstarts_end = HEADER_LEN as u64 + 4 * u64::from(nblocks);
    if bstarts_end > u64::from(cbytes) {
        return Err(ferr(HEADER_LEN, format!("{nblocks} block offsets do not fit in a {cbytes}-byte frame")));
    }
    let ts = u32::from(header.typesize);
    let dont_split = header.flags & 0x10 != 0;
    let leftover = header.nbytes % header.blocksize;
    let shuffle = header.shuffle();
    plan.streams.reserve(nblocks as usize);
    for j in 0..nblocks {
        let last_short = j == nblocks - 1 && leftover > 0;
        let bsize = if last_short { leftover } else { header.blocksize };
        let dst_block = j * header.blocksize;
        let at = HEADER_LEN + 4 * j as usize;
        let mut pos = le32(frame, at)?;
        if u64::from(pos) < bstarts_end || pos >= cbytes {
            return Err(ferr(at, format!("block {j} starts at {pos}, outside {bstarts_end}..{cbytes}")));
        }
        let nsplits =
            if !dont_split && ts <= MAX_SPLITS && bsize / ts >= MIN_BUFFERSIZE && !last_short { ts } else { 1 };
        if bsize % nsplits != 0 {
            return Err(ferr(at, format!("block {j} of {bsize} bytes does not split into {nsplits} streams")));
        }
        let neblock = bsize / nsplits;
        let mode = match shuffle {
            Shuffle::Byte if ts > 1 => Shuffle::Byte,
            Shuffle::Bit if bsize >= ts => Shuffle::Bit,
            _ => Shuffle::None,
        };
        let to_scratch = mode != Shuffle::None;
        for k in 0..nsplits {
            let csize = le32(frame, pos as usize)?;
            let data = u64::from(pos) + 4;
            if csize > i32::MAX as u32 || data + u64::from(csize) > u64::from(cbytes) {
                return Err(ferr(
                    pos as usize,
                    format!("stream {k} of block {j}: {csize} bytes run past the frame end {cbytes}"),
                ));
            }
            plan.streams.push(FrameStream {
                src_off: data as u32,
                src_len: csize,
                dst_off: dst_block + k * neblock,
                dst_len: neblock,
                codec: if csize == neblock { StreamCodec::Raw } else { codec },
                to_scratch,
                team_bytes: 0,
            });
            pos = (data + u64::from(csize)) as u32;
        }
        if to_scratch {
            plan.shuffles.push(FrameShuffle { off: dst_block, len: bsize, mode });
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(flags: u8, ts: u8, nbytes: u32, blocksize: u32, cbytes: u32) -> Vec<u8> {
        let mut h = vec![2, 1, flags, ts];
        h.extend_from_slice(&nbytes.to_le_bytes());
        h.extend_from_slice(&blocksize.to_le_bytes());
        h.extend_from_slice(&cbytes.to_le_bytes());
        h
    }

    #[test]
    fn short_frame_is_an_error_at_offset_0() {
        let e = plan_frame(&[2, 1, 0]).unwrap_err();
        assert_eq!(e.offset, 0);
    }

    #[test]
    fn memcpyed_frame_is_one_raw_stream() {
        let mut f = header(0x2 | 0x1, 4, 8, 8, 24);
        f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = plan_frame(&f).unwrap();
        assert_eq!(p.streams.len(), 1);
        assert_eq!(p.streams[0].codec, StreamCodec::Raw);
        assert_eq!((p.streams[0].src_off, p.streams[0].src_len), (16, 8));
        assert!(p.shuffles.is_empty(), "memcpyed data is stored unshuffled");
    }

    #[test]
    fn memcpyed_frame_too_short_is_an_error() {
        let mut f = header(0x2, 1, 100, 100, 24);
        f.extend_from_slice(&[0; 8]);
        assert!(plan_frame(&f).is_err());
    }

    #[test]
    fn split_streams_and_raw_detection() {
        // typesize 2, one block of 512 bytes → 2 splits of 256; the first stored raw.
        let mut f = header(0x1 | (1 << 5), 2, 512, 512, 0);
        f.extend_from_slice(&20u32.to_le_bytes()); // bstarts[0]
        f.extend_from_slice(&256u32.to_le_bytes());
        f.extend_from_slice(&[7; 256]);
        f.extend_from_slice(&3u32.to_le_bytes());
        f.extend_from_slice(&[1, 2, 3]);
        let n = f.len() as u32;
        f[12..16].copy_from_slice(&n.to_le_bytes());
        let p = plan_frame(&f).unwrap();
        assert_eq!(p.streams.len(), 2);
        assert_eq!(p.streams[0].codec, StreamCodec::Raw);
        assert_eq!(p.streams[1].codec, StreamCodec::Lz4);
        assert_eq!(p.streams[1].dst_off, 256);
        assert_eq!(p.streams[1].src_off, 20 + 4 + 256 + 4);
        assert_eq!(p.shuffles, vec![FrameShuffle { off: 0, len: 512, mode: Shuffle::Byte }]);
        assert!(p.streams.iter().all(|s| s.to_scratch));
    }

    #[test]
    fn dont_split_flag_gives_one_stream() {
        let mut f = header(0x10 | (1 << 5), 2, 512, 512, 0);
        f.extend_from_slice(&20u32.to_le_bytes());
        f.extend_from_slice(&3u32.to_le_bytes());
        f.extend_from_slice(&[1, 2, 3]);
        let n = f.len() as u32;
        f[12..16].copy_from_slice(&n.to_le_bytes());
        let p = plan_frame(&f).unwrap();
        assert_eq!(p.streams.len(), 1);
        assert_eq!(p.streams[0].dst_len, 512);
        assert!(!p.streams[0].to_scratch);
    }

    #[test]
    fn block_offset_out_of_range_names_its_byte() {
        let mut f = header(1 << 5, 1, 100, 100, 0);
        f.extend_from_slice(&9999u32.to_le_bytes());
        let n = f.len() as u32;
        f[12..16].copy_from_slice(&n.to_le_bytes());
        let e = plan_frame(&f).unwrap_err();
        assert_eq!(e.offset, 16);
    }

    #[test]
    fn unsupported_compressor_is_reported() {
        let mut f = header(2 << 5, 1, 100, 100, 0);
        f.extend_from_slice(&20u32.to_le_bytes());
        let n = f.len() as u32;
        f[12..16].copy_from_slice(&n.to_le_bytes());
        let e = plan_frame(&f).unwrap_err();
        assert_eq!(e.kind, FrameErrorKind::Unsupported);
        assert!(e.reason.contains("snappy"), "{}", e.reason);
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = plan_frame(&bytes);
        }

        #[test]
        fn random_bytes_behind_a_valid_header_never_panic(
            flags in proptest::prelude::any::<u8>(),
            ts in 1u8..=32,
            nbytes in 0u32..100_000,
            blocksize in 1u32..70_000,
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
        ) {
            let mut f = header(flags & !0x2, ts, nbytes, blocksize, 0);
            f.extend_from_slice(&tail);
            let n = f.len() as u32;
            f[12..16].copy_from_slice(&n.to_le_bytes());
            if let Ok(p) = plan_frame(&f) {
                for s in &p.streams {
                    proptest::prop_assert!(u64::from(s.src_off) + u64::from(s.src_len) <= u64::from(n));
                    proptest::prop_assert!(u64::from(s.dst_off) + u64::from(s.dst_len) <= u64::from(nbytes));
                }
            }
        }
    }
}
