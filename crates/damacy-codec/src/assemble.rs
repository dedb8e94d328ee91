//! Assemble: copy each region's part of each decoded chunk into its slot of the batch
//! buffer, with fill values and the output data type.

use crate::dtype::Dtype;
use crate::region::{Region, copy_box};

/// Converts runs of elements from the array's type to the batch's type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Converter {
    pub(crate) from: Dtype,
    pub(crate) to: Dtype,
}

impl Converter {
    /// Convert `n` elements from `src` (native bytes of `from`) into `dst` (of `to`).
    pub(crate) fn run(self, src: &[u8], dst: &mut [u8], n: usize) {
        let (fs, ts) = (self.from.size(), self.to.size());
        if self.from == self.to {
            dst[..n * ts].copy_from_slice(&src[..n * fs]);
            return;
        }
        match (self.from, self.to) {
            (Dtype::U16, Dtype::F32) => {
                for (s, d) in src.chunks_exact(2).zip(dst.chunks_exact_mut(4)).take(n) {
                    d.copy_from_slice(&f32::from(u16::from_ne_bytes([s[0], s[1]])).to_ne_bytes());
                }
            }
            (Dtype::U8, Dtype::F32) => {
                for (s, d) in src.iter().zip(dst.chunks_exact_mut(4)).take(n) {
                    d.copy_from_slice(&f32::from(*s).to_ne_bytes());
                }
            }
            (from, to) => {
                for (s, d) in src.chunks_exact(fs).zip(dst.chunks_exact_mut(ts)).take(n) {
                    to.write_f64(from.read_f64(s), d);
                }
            }
        }
    }

    /// Fill `dst` with copies of one element of `from` (the fill value), converted.
    pub(crate) fn fill(self, value: &[u8], dst: &mut [u8]) {
        let ts = self.to.size();
        let mut one = vec![0u8; ts];
        self.run(value, &mut one, 1);
        for d in dst.chunks_exact_mut(ts) {
            d.copy_from_slice(&one);
        }
    }
}

/// A decoded unit (chunk or inner chunk) placed in array coordinates.
pub(crate) struct Placed<'a> {
    pub(crate) origin: Vec<u64>,
    pub(crate) shape: &'a [u64],
    /// Decoded native bytes, or `None` for a missing or empty unit (fill value).
    pub(crate) data: Option<&'a [u8]>,
}

/// Write one region of the batch: fill where nothing covers it, then copy each unit's
/// intersection with the clipped region.
pub(crate) fn assemble_region(
    region: &Region,
    clipped: Option<&Region>,
    units: &[Placed<'_>],
    fill_value: &[u8],
    conv: Converter,
    out: &mut [u8],
) {
    let covered = clipped.is_some_and(|c| c == region) && units.iter().all(|u| u.data.is_some());
    if !covered {
        conv.fill(fill_value, out);
    }
    let Some(clipped) = clipped else { return };
    let (fs, ts) = (conv.from.size(), conv.to.size());
    let c_end = clipped.end();
    for unit in units {
        let Some(data) = unit.data else { continue };
        let lo: Vec<u64> = clipped.start.iter().zip(&unit.origin).map(|(a, b)| *a.max(b)).collect();
        let hi: Vec<u64> =
            c_end.iter().zip(unit.origin.iter().zip(unit.shape)).map(|(e, (o, s))| (*e).min(o + s)).collect();
        if lo.iter().zip(&hi).any(|(l, h)| l >= h) {
            continue;
        }
        copy_box(&lo, &hi, &unit.origin, unit.shape, &region.start, &region.shape, |s, d, n| {
            conv.run(&data[s * fs..(s + n) * fs], &mut out[d * ts..(d + n) * ts], n);
        });
    }
}
