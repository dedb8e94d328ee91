//! The CPU executor: zarrs' own codec chains decode each chunk (or inner chunk), in parallel
//! over chunks. The most common chain of zarr-python data, `bytes` + `zstd`, takes a fast path
//! with one reused zstd decompression context per thread (zarrs creates one per chunk).

use std::cell::RefCell;
use std::num::NonZeroU64;
use std::time::Instant;

use rayon::prelude::*;
use zarrs::array::{ArrayToBytesCodecTraits, CodecOptions};
use zarrs_storage::Bytes;

use crate::array::ArrayInfo;
use crate::error::{Error, Location, Result};
use crate::stats::Stats;

/// One unit to decode: its encoded bytes and where they came from (for errors).
pub(crate) struct EncodedUnit {
    pub(crate) bytes: Bytes,
    pub(crate) location: Location,
}

/// A chain the CPU executor decodes without zarrs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FastPath {
    /// `bytes` (either byte order) then `zstd`.
    Zstd { big_endian: bool },
}

fn fast_path(array: &ArrayInfo) -> Option<FastPath> {
    match array.decode_chain_metadata() {
        [bytes, zstd] if bytes.name() == "bytes" && zstd.name() == "zstd" => {
            let endian = bytes.configuration().and_then(|c| c.get("endian")).and_then(|v| v.as_str());
            Some(FastPath::Zstd { big_endian: endian == Some("big") && array.dtype.size() > 1 })
        }
        _ => None,
    }
}

thread_local! {
    static ZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
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

/// Decodes units of one array on the host: the zstd fast path, else zarrs' codec chain.
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
    pub(crate) fn new(array: &ArrayInfo) -> Result<Self> {
        let mut shape = Vec::with_capacity(array.decode_shape().len());
        for &s in array.decode_shape() {
            shape.push(
                NonZeroU64::new(s)
                    .ok_or_else(|| Error::Metadata { path: array.path.clone(), message: "zero-sized chunk".into() })?,
            );
        }
        Ok(Self {
            chain: array.decode_chain(),
            shape,
            data_type: array.zarrs().data_type().clone(),
            fill_value: array.zarrs().fill_value().clone(),
            // Parallelism is across units; each decode runs on one thread.
            options: CodecOptions::default().with_concurrent_target(1),
            expected: array.decode_shape().iter().product::<u64>() as usize * array.dtype.size(),
            fast: fast_path(array),
            size: array.dtype.size(),
        })
    }

    /// Decoded bytes of one unit.
    pub(crate) fn unit_bytes(&self) -> usize {
        self.expected
    }

    /// Decode one unit into `out` (native-endian, C order of the decode shape), reusing its
    /// allocation where the codec allows.
    pub(crate) fn decode(&self, unit: &EncodedUnit, out: &mut Vec<u8>) -> Result<()> {
        let expected = self.expected;
        if let Some(FastPath::Zstd { big_endian }) = self.fast {
            zstd_decode(&unit.bytes, expected, out).map_err(|e| Error::decode(unit.location.clone(), e))?;
            if big_endian {
                for element in out.chunks_exact_mut(self.size) {
                    element.reverse();
                }
            }
            return Ok(());
        }
        let decoded = self
            .chain
            .decode(
                std::borrow::Cow::Borrowed(&unit.bytes),
                &self.shape,
                &self.data_type,
                &self.fill_value,
                &self.options,
            )
            .map_err(|e| Error::decode(unit.location.clone(), e))?;
        let raw = decoded.into_fixed().map_err(|e| Error::decode(unit.location.clone(), e))?;
        if raw.len() != expected {
            return Err(Error::decode(
                unit.location.clone(),
                format!("decoded {} bytes, expected {expected}", raw.len()),
            ));
        }
        *out = raw.into_owned();
        Ok(())
    }
}

thread_local! {
    /// Each compute thread's decode buffer, reused from unit to unit.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Decode one unit into this thread's reused buffer and hand the bytes to `consume` while they
/// are hot; counts the unit and its decode time.
pub(crate) fn decode_scratch(
    decoder: &CpuDecoder,
    unit: &EncodedUnit,
    stats: &Stats,
    consume: impl FnOnce(&[u8]),
) -> Result<()> {
    SCRATCH.with(|cell| {
        let mut buf = cell.borrow_mut();
        let started = Instant::now();
        decoder.decode(unit, &mut buf)?;
        stats.add_decode(started.elapsed());
        stats.add_units_decoded(1);
        stats.add_bytes_decoded(decoder.unit_bytes() as u64);
        consume(&buf);
        Ok(())
    })
}

/// Decode every unit on the current rayon pool and hand each decoded unit, while it is still
/// in this thread's reused buffer, to `consume(unit index, bytes)`. Nothing decoded is kept:
/// a batch never holds all of its chunks' decoded bytes at once.
pub(crate) fn decode_each(
    array: &ArrayInfo,
    units: &[EncodedUnit],
    stats: &Stats,
    consume: impl Fn(usize, &[u8]) + Sync,
) -> Result<()> {
    let decoder = CpuDecoder::new(array)?;
    units.par_iter().enumerate().try_for_each(|(k, unit)| decode_scratch(&decoder, unit, stats, |b| consume(k, b)))
}
