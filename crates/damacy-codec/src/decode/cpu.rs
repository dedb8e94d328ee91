//! The CPU executor: zarrs' own codec chains decode each chunk (or inner chunk), in parallel
//! over chunks. Its strategy is fused: each read is decoded and scattered into the output by the
//! thread it is handed to as soon as its bytes arrive, so reads of some chunks overlap the
//! decoding of others and decoded bytes stay in one reused buffer per thread. The most common
//! chains of zarr data, `bytes` + `zstd` and `bytes` + `blosc`, take fast paths that decode into
//! that buffer with one reused zstd context per thread (zarrs creates one per chunk) and c-blosc
//! (zarrs allocates each decoded chunk).

use std::cell::RefCell;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Instant;

use zarrs::array::{ArrayToBytesCodecTraits, CodecOptions};

use super::Executor;
use crate::array::ArrayMeta;
use crate::assemble::Scatter;
use crate::ctx::Ctx;
use crate::error::{Error, Result, Source};
use crate::fetch::for_each_request;
use crate::plan::{BatchPlan, UnitSource};
use crate::stats::Stats;

/// A chain the CPU executor decodes without zarrs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FastPath {
    /// `bytes` (either byte order) then `zstd`.
    Zstd { big_endian: bool },
    /// `bytes` (either byte order) then `blosc` (any of its compressors and shuffles), decoded
    /// by c-blosc straight into the thread's buffer.
    Blosc { big_endian: bool },
    /// `bytes` alone, in the host's byte order (or one-byte elements): the stored bytes are the
    /// decoded bytes, scattered straight from the read without a copy.
    Raw,
}

fn fast_path(array: &ArrayMeta) -> Option<FastPath> {
    match array.decode_chain_metadata() {
        [bytes] if bytes.name() == "bytes" => {
            let endian = bytes.configuration().and_then(|c| c.get("endian")).and_then(|v| v.as_str());
            let host = if cfg!(target_endian = "big") { "big" } else { "little" };
            (array.dtype.size() == 1 || endian == Some(host)).then_some(FastPath::Raw)
        }
        [bytes, codec] if bytes.name() == "bytes" && matches!(codec.name(), "zstd" | "blosc") => {
            let endian = bytes.configuration().and_then(|c| c.get("endian")).and_then(|v| v.as_str());
            let big_endian = endian == Some("big") && array.dtype.size() > 1;
            Some(if codec.name() == "zstd" { FastPath::Zstd { big_endian } } else { FastPath::Blosc { big_endian } })
        }
        _ => None,
    }
}

thread_local! {
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    static ZSTD_STREAM: RefCell<Option<zstd::stream::raw::Decoder<'static>>> = const { RefCell::new(None) };
}

/// Whether a zstd frame carries a content checksum (then it is decoded whole, to check it).
fn zstd_has_checksum(frame: &[u8]) -> bool {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    // Anything that is not a plain zstd frame goes the whole-frame way too.
    frame.len() < 5 || frame[..4] != MAGIC || frame[4] & 0x04 != 0
}

/// The largest decoded size of a zstd block (`ZSTD_BLOCKSIZE_MAX`): a prefix decode can only
/// skip whole blocks, so it pays off when at least this much of a frame is not needed.
const ZSTD_BLOCK_MAX: usize = 128 * 1024;

/// The longest zstd frame header (`ZSTD_FRAMEHEADERSIZE_MAX`).
const ZSTD_FRAME_HEADER_MAX: usize = 18;

/// Decode at least the first `want` bytes of one zstd frame of `expected` decoded bytes into
/// `out` and stop: the blocks after them are never decoded. libzstd writes straight into `out`
/// (a stable output buffer: no copy through its window, no zeroing); it requires room for the
/// whole frame, which is reserved, not written. A frame shorter than `want` is an error.
fn zstd_decode_prefix(src: &[u8], want: usize, expected: usize, out: &mut Vec<u8>) -> Result<(), String> {
    use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};
    use zstd::zstd_safe::DParameter;
    ZSTD_STREAM.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut decoder = Decoder::new().map_err(|e| format!("zstd context: {e}"))?;
            decoder.set_parameter(DParameter::StableOutBuffer(true)).map_err(|e| format!("zstd context: {e}"))?;
            *slot = Some(decoder);
        }
        let decoder = slot.as_mut().ok_or("zstd context")?;
        decoder.reinit().map_err(|e| format!("zstd: {e}"))?;
        out.clear();
        out.reserve_exact(expected);
        // The same buffer (start, size) for every call, as a stable output buffer requires.
        let mut output = OutBuffer::around_pos(out, 0);
        // Input is handed over as libzstd asks for it (its hint: the next block and the header
        // after it), so each call decodes one block and decoding stops at the block that
        // reaches `want`. (Given the whole frame at once, with room for all of it, libzstd
        // would decode it in one pass.)
        let mut end = src.len().min(ZSTD_FRAME_HEADER_MAX);
        let mut consumed = 0;
        while output.pos() < want {
            let mut input = InBuffer::around(&src[..end]);
            input.set_pos(consumed);
            let before = (consumed, output.pos());
            let hint = decoder.run(&mut input, &mut output).map_err(|e| format!("zstd: {e}"))?;
            consumed = input.pos();
            if output.pos() >= want {
                break;
            }
            let progressed = (consumed, output.pos()) != before;
            if hint == 0 || (!progressed && end == src.len()) {
                return Err(format!("zstd frame ends after {} bytes, the chunk holds at least {want}", output.pos()));
            }
            end = if progressed { src.len().min(consumed.saturating_add(hint).max(end)) } else { src.len() };
        }
        Ok(())
    })
}

/// Decompress one zstd frame of exactly `expected` decoded bytes into `out` with this
/// thread's context. libzstd checks the frame's content checksum when it has one.
fn zstd_decode(src: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), String> {
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd context: {e}"))?);
        }
        let decompressor = slot.as_mut().ok_or("zstd context")?;
        // One byte of slack tells an oversized frame from an exact one.
        out.clear();
        out.reserve(expected + 1);
        let n = decompressor.decompress_to_buffer(src, out).map_err(|e| format!("zstd: {e}"))?;
        if n != expected {
            return Err(format!("zstd frame decodes to {n} bytes, the chunk holds {expected}"));
        }
        Ok(())
    })
}

/// Decompress one blosc buffer of exactly `expected` decoded bytes into `out` with c-blosc (one
/// internal thread: parallelism is across units). The header is validated against the buffer's
/// length before anything is decoded.
fn blosc_decode(src: &[u8], expected: usize, out: &mut Vec<u8>) -> Result<(), String> {
    use std::ffi::c_void;
    let mut nbytes = 0usize;
    // SAFETY: c-blosc reads at most `src.len()` bytes of `src` and writes one usize.
    let invalid =
        unsafe { blosc_src::blosc_cbuffer_validate(src.as_ptr().cast::<c_void>(), src.len(), &raw mut nbytes) };
    if invalid != 0 {
        return Err(format!("blosc: not a valid blosc buffer ({} bytes)", src.len()));
    }
    if nbytes != expected {
        return Err(format!("blosc buffer decodes to {nbytes} bytes, the chunk holds {expected}"));
    }
    out.clear();
    out.reserve(expected);
    // SAFETY: `src` was validated above (its header's compressed size fits in `src`); c-blosc
    // writes at most `expected` bytes to `out`'s spare capacity, which holds at least that many.
    let n = unsafe {
        blosc_src::blosc_decompress_ctx(src.as_ptr().cast::<c_void>(), out.as_mut_ptr().cast::<c_void>(), expected, 1)
    };
    if usize::try_from(n).ok() != Some(expected) {
        return Err(format!("blosc: decompression failed ({n}) for a buffer of {} bytes", src.len()));
    }
    // SAFETY: c-blosc initialised exactly `expected` bytes (its return value).
    unsafe { out.set_len(expected) };
    Ok(())
}

/// Decodes units of one array on the host: the zstd and blosc fast paths, else zarrs' codec chain.
pub(crate) struct CpuDecoder {
    chain: std::sync::Arc<zarrs::array::CodecChain>,
    shape: Vec<NonZeroU64>,
    data_type: zarrs::array::DataType,
    fill_value: zarrs::array::FillValue,
    options: CodecOptions,
    expected: usize,
    fast: Option<FastPath>,
    size: usize,
}

impl CpuDecoder {
    /// A decoder of `array`'s units of `unit_shape` (its decode shape, or slabs of plain `bytes`
    /// chunks).
    pub(crate) fn new(array: &ArrayMeta, unit_shape: &[u64], validate_checksums: bool) -> Result<Self> {
        let mut shape = Vec::with_capacity(unit_shape.len());
        for &s in unit_shape {
            shape.push(NonZeroU64::new(s).ok_or_else(|| Error::metadata(&array.path, "zero-sized chunk"))?);
        }
        Ok(Self {
            chain: array.decode_chain(),
            shape,
            data_type: array.zarrs().data_type().clone(),
            fill_value: array.zarrs().fill_value().clone(),
            // Parallelism is across units; each decode runs on one thread.
            options: CodecOptions::default().with_concurrent_target(1).with_validate_checksums(validate_checksums),
            expected: unit_shape.iter().product::<u64>() as usize * array.dtype.size(),
            fast: fast_path(array),
            size: array.dtype.size(),
        })
    }

    /// Decode one unit into `out` (native-endian, C order of the decode shape), reusing its
    /// allocation where the codec allows. `needed` elements are all the caller reads: a zstd
    /// frame without a content checksum whose unneeded tail holds a whole block or more is
    /// decoded only that far (later blocks are skipped); any other unit is decoded whole.
    pub(crate) fn decode(&self, bytes: &[u8], out: &mut Vec<u8>, needed: usize) -> Result<(), Source> {
        let expected = self.expected;
        let fast = match self.fast {
            Some(FastPath::Zstd { big_endian }) => {
                let want = (needed * self.size).min(expected);
                let result = if want.saturating_add(ZSTD_BLOCK_MAX) < expected && !zstd_has_checksum(bytes) {
                    zstd_decode_prefix(bytes, want, expected, out)
                } else {
                    zstd_decode(bytes, expected, out)
                };
                Some((result, big_endian))
            }
            Some(FastPath::Blosc { big_endian }) => Some((blosc_decode(bytes, expected, out), big_endian)),
            _ => None,
        };
        if let Some((result, big_endian)) = fast {
            result.map_err(|e| -> Source { Arc::new(Message(e)) })?;
            if big_endian {
                for element in out.chunks_exact_mut(self.size) {
                    element.reverse();
                }
            }
            return Ok(());
        }
        let decoded = self
            .chain
            .decode(std::borrow::Cow::Borrowed(bytes), &self.shape, &self.data_type, &self.fill_value, &self.options)
            .map_err(|e| -> Source { Arc::new(e) })?;
        let raw = decoded.into_fixed().map_err(|e| -> Source { Arc::new(e) })?;
        if raw.len() != expected {
            return Err(Arc::new(Message(format!("decoded {} bytes, expected {expected}", raw.len()))));
        }
        *out = raw.into_owned();
        Ok(())
    }
}

thread_local! {
    /// Each compute thread's decode buffer, reused from unit to unit.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A decode failure that is only a message (the fast paths').
#[derive(Debug)]
struct Message(String);

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

/// Decode one unit into this thread's reused buffer and hand the bytes to `consume` while they
/// are hot; counts the unit and its decode time. A failure is a decode error at the unit's
/// location (built only then).
pub(crate) fn decode_scratch(
    decoder: &CpuDecoder,
    plan: &BatchPlan,
    u: usize,
    bytes: &[u8],
    needed: usize,
    stats: &Stats,
    consume: impl FnOnce(&[u8]),
) -> Result<()> {
    SCRATCH.with(|cell| {
        let mut buf = cell.borrow_mut();
        let started = Instant::now();
        if decoder.fast == Some(FastPath::Raw) && bytes.len() == decoder.expected {
            stats.add_decode(started.elapsed());
            stats.add_units_decoded(1);
            stats.add_bytes_decoded(bytes.len() as u64);
            consume(bytes);
            return Ok(());
        }
        decoder.decode(bytes, &mut buf, needed).map_err(|source| Error::Decode {
            location: Box::new(plan.unit_location(u)),
            message: source.to_string(),
            source: Some(source),
        })?;
        stats.add_decode(started.elapsed());
        stats.add_units_decoded(1);
        stats.add_bytes_decoded(buf.len() as u64);
        consume(&buf);
        Ok(())
    })
}

/// The CPU executor (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct CpuExecutor;

impl Executor for CpuExecutor {
    fn read_host(&self, ctx: &Ctx<'_>, plan: &BatchPlan, out: &mut [u8]) -> Result<()> {
        let stats = ctx.stats;
        let decoder = CpuDecoder::new(&plan.array, &plan.unit_shape, plan.array.options().validate_checksums)?;
        let scatter = Scatter::new(plan, out);
        let started = Instant::now();
        ctx.compute.install(|| scatter.prefill());
        stats.add_assemble(started.elapsed());
        stats.add_units_filled(plan.units.iter().filter(|u| u.source == UnitSource::Fill).count() as u64);
        for_each_request(plan, ctx, |u, bytes| match bytes {
            None => {
                stats.add_units_filled(1);
                scatter.fill(u);
                Ok(())
            }
            Some(bytes) => {
                let needed = scatter.needed_elements(u);
                decode_scratch(&decoder, plan, u, bytes, needed, stats, |decoded| scatter.unit(u, decoded))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize, checksum: bool) -> (Vec<u8>, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| ((i * 7) ^ (i >> 9)) as u8).collect();
        let mut c = zstd::bulk::Compressor::new(1).unwrap();
        c.include_checksum(checksum).unwrap();
        // Several blocks: zstd blocks hold at most 128 KiB.
        (data.clone(), c.compress(&data).unwrap())
    }

    #[test]
    fn prefix_decode_equals_the_head_of_a_full_decode() {
        let (data, z) = frame(300_000, false);
        assert!(!zstd_has_checksum(&z));
        let mut out = Vec::new();
        for want in [1, 1000, 131_072, 131_073, 299_999, 300_000] {
            zstd_decode_prefix(&z, want, data.len(), &mut out).unwrap();
            assert!(out.len() >= want && out.len() <= data.len(), "want {want}: {} bytes", out.len());
            assert_eq!(out, data[..out.len()], "want {want}");
        }
        // Only the blocks up to `want` are decoded.
        zstd_decode_prefix(&z, 1000, data.len(), &mut out).unwrap();
        assert!(out.len() <= ZSTD_BLOCK_MAX, "{} bytes decoded for 1000", out.len());
        let err = zstd_decode_prefix(&z, 300_001, 400_000, &mut out).unwrap_err();
        assert!(err.contains("ends after 300000"), "{err}");
        let err = zstd_decode_prefix(&z[..z.len() / 2], 299_000, data.len(), &mut out).unwrap_err();
        assert!(err.contains("zstd"), "{err}");
    }

    #[test]
    fn blosc_buffers_decode_exactly_or_fail_clearly() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect();
        let mut z = vec![0u8; data.len() + 16];
        // SAFETY: `z` has room for the data plus blosc's maximum overhead (16 bytes).
        let n = unsafe {
            blosc_src::blosc_compress_ctx(
                5,
                1,
                4,
                data.len(),
                data.as_ptr().cast(),
                z.as_mut_ptr().cast(),
                z.len(),
                c"lz4".as_ptr(),
                0,
                1,
            )
        };
        z.truncate(usize::try_from(n).unwrap());
        let mut out = Vec::new();
        blosc_decode(&z, data.len(), &mut out).unwrap();
        assert_eq!(out, data);
        let err = blosc_decode(&z, data.len() + 4, &mut out).unwrap_err();
        assert!(err.contains("decodes to 100000 bytes"), "{err}");
        let err = blosc_decode(&z[..z.len() / 2], data.len(), &mut out).unwrap_err();
        assert!(err.contains("not a valid blosc buffer"), "{err}");
        let err = blosc_decode(b"short", data.len(), &mut out).unwrap_err();
        assert!(err.contains("blosc"), "{err}");
    }

    #[test]
    fn checksummed_frames_are_decoded_whole() {
        let (data, z) = frame(10_000, true);
        assert!(zstd_has_checksum(&z));
        assert!(zstd_has_checksum(b"not zstd"));
        let mut out = Vec::new();
        zstd_decode(&z, data.len(), &mut out).unwrap();
        assert_eq!(out, data);
        assert!(zstd_decode(&z, data.len() + 1, &mut out).is_err());
    }
}
