//! The CPU executor: zarrs' own codec chains decode each chunk (or inner chunk), in parallel
//! over chunks.

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

/// Decode units with the array's chain into native-endian C-order element bytes of the
/// decode shape. Runs on the current rayon pool.
pub(crate) fn decode_units(array: &ArrayInfo, units: Vec<EncodedUnit>, stats: &Stats) -> Result<Vec<Vec<u8>>> {
    let chain = array.decode_chain();
    let mut shape = Vec::with_capacity(array.decode_shape().len());
    for &s in array.decode_shape() {
        shape.push(
            NonZeroU64::new(s)
                .ok_or_else(|| Error::Metadata { path: array.path.clone(), message: "zero-sized chunk".into() })?,
        );
    }
    let data_type = array.zarrs().data_type().clone();
    let fill_value = array.zarrs().fill_value().clone();
    // Parallelism is across units; each decode runs on one thread.
    let options = CodecOptions::default().with_concurrent_target(1);
    let expected = array.decode_shape().iter().product::<u64>() as usize * array.dtype.size();
    let started = Instant::now();
    let out: Result<Vec<Vec<u8>>> = units
        .into_par_iter()
        .map(|unit| {
            let decoded = chain
                .decode(std::borrow::Cow::Borrowed(&unit.bytes), &shape, &data_type, &fill_value, &options)
                .map_err(|e| Error::decode(unit.location.clone(), e))?;
            let raw = decoded.into_fixed().map_err(|e| Error::decode(unit.location.clone(), e))?;
            if raw.len() != expected {
                return Err(Error::decode(unit.location, format!("decoded {} bytes, expected {expected}", raw.len())));
            }
            Ok(raw.into_owned())
        })
        .collect();
    stats.add_decode(started.elapsed());
    let out = out?;
    stats.add_units_decoded(out.len() as u64);
    stats.add_bytes_decoded((out.len() * expected) as u64);
    Ok(out)
}
