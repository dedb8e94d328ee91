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

/// A batch laid out for assembly: the regions, the units (chunks or inner chunks, by grid
/// coordinates) each one touches, and where each unit's decoded bytes are (`slot`, an index
/// into the decoded units; `None` for a missing or empty unit, which reads as fill).
pub(crate) struct Layout<'a> {
    pub(crate) regions: &'a [Region],
    pub(crate) clipped: &'a [Option<Region>],
    pub(crate) region_units: &'a [Vec<usize>],
    pub(crate) units: &'a [Vec<u64>],
    pub(crate) slot: &'a [Option<usize>],
    pub(crate) unit_shape: &'a [u64],
}

impl Layout<'_> {
    /// Whether decoded units cover region `r` entirely (no fill needed).
    pub(crate) fn covered(&self, r: usize) -> bool {
        self.clipped[r].as_ref().is_some_and(|c| c == &self.regions[r])
            && self.region_units[r].iter().all(|&u| self.slot[u].is_some())
    }

    /// Array coordinates of unit `u`'s first element.
    pub(crate) fn origin(&self, u: usize) -> Vec<u64> {
        self.units[u].iter().zip(self.unit_shape).map(|(i, s)| i * s).collect()
    }

    /// The box `[lo, hi)` where unit `u` meets region `r`, if they meet.
    pub(crate) fn intersection(&self, r: usize, origin: &[u64]) -> Option<(Vec<u64>, Vec<u64>)> {
        let clipped = self.clipped[r].as_ref()?;
        let end = clipped.end();
        let lo: Vec<u64> = clipped.start.iter().zip(origin).map(|(a, b)| *a.max(b)).collect();
        let hi: Vec<u64> =
            end.iter().zip(origin.iter().zip(self.unit_shape)).map(|(e, (o, s))| (*e).min(o + s)).collect();
        lo.iter().zip(&hi).all(|(l, h)| l < h).then_some((lo, hi))
    }

    /// For each unit, the regions that touch it.
    pub(crate) fn unit_regions(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.units.len()];
        for (r, units) in self.region_units.iter().enumerate() {
            for &u in units {
                out[u].push(r);
            }
        }
        out
    }
}

/// The batch buffer, written concurrently by the threads that assemble units. Distinct units
/// cover disjoint parts of the array, so their writes into any region never overlap.
pub(crate) struct BatchOut {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `BatchOut` only hands out disjoint byte ranges (see `scatter_unit`), and the buffer
// it points into outlives every use (it is created from a `&mut [u8]` borrowed for the scope of
// the parallel pass).
unsafe impl Send for BatchOut {}
// SAFETY: as above: concurrent users write disjoint ranges.
unsafe impl Sync for BatchOut {}

impl BatchOut {
    pub(crate) fn new(data: &mut [u8]) -> Self {
        Self { ptr: data.as_mut_ptr(), len: data.len() }
    }

    /// The bytes `start..start + len` of the batch, for one row of one unit's part of one
    /// region. Callers only ask for rows inside the part of a region that their unit covers.
    #[allow(clippy::mut_from_ref)] // disjoint rows of a buffer shared by the scatter threads
    fn row(&self, start: usize, len: usize) -> &mut [u8] {
        assert!(start.checked_add(len).is_some_and(|end| end <= self.len), "assemble writes inside the batch");
        // SAFETY: `start..start + len` lies inside the buffer (checked above), which outlives
        // `self`. The row belongs to the part of one region that one unit covers; distinct
        // units cover disjoint elements and each unit is handled by one thread, so no other
        // reference to these bytes exists while this one is used.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// Fill every region of the batch that decoded units do not cover with the fill value.
pub(crate) fn prefill(layout: &Layout<'_>, fill_value: &[u8], conv: Converter, data: &mut [u8], region_bytes: usize) {
    use rayon::prelude::*;
    data.par_chunks_mut(region_bytes.max(1)).enumerate().for_each(|(r, out)| {
        if !layout.covered(r) {
            conv.fill(fill_value, out);
        }
    });
}

/// Scatters decoded units (or fill, for units found missing) into the batch buffer, from any
/// number of threads at once.
pub(crate) struct Scatter<'a> {
    layout: &'a Layout<'a>,
    unit_regions: Vec<Vec<usize>>,
    fill_value: &'a [u8],
    conv: Converter,
    region_bytes: usize,
    out: BatchOut,
}

impl<'a> Scatter<'a> {
    /// Scatter into `data` (one region of `region_bytes` after another), which must outlive
    /// every use of the returned value.
    pub(crate) fn new(
        layout: &'a Layout<'a>,
        fill_value: &'a [u8],
        conv: Converter,
        region_bytes: usize,
        data: &mut [u8],
    ) -> Self {
        Self { layout, unit_regions: layout.unit_regions(), fill_value, conv, region_bytes, out: BatchOut::new(data) }
    }

    /// Copy decoded unit `u` into every region that touches it.
    pub(crate) fn unit(&self, u: usize, data: &[u8]) {
        let (fs, ts) = (self.conv.from.size(), self.conv.to.size());
        self.each_row(u, |s, dst, n| self.conv.run(&data[s * fs..(s + n) * fs], self.out.row(dst, n * ts), n));
    }

    /// Write the fill value where unit `u` (a chunk found missing when read) meets each region.
    pub(crate) fn fill(&self, u: usize) {
        let ts = self.conv.to.size();
        self.each_row(u, |_, dst, n| self.conv.fill(self.fill_value, self.out.row(dst, n * ts)));
    }

    /// How many leading elements of unit `u` (C order) the regions read: a decoder may stop
    /// there.
    pub(crate) fn needed_elements(&self, u: usize) -> usize {
        let mut needed = 0;
        self.each_row(u, |s, _, n| needed = needed.max(s + n));
        needed
    }

    /// Visit each row where unit `u` meets a region: (element offset in the unit, byte offset in
    /// the batch, elements).
    fn each_row(&self, u: usize, mut row: impl FnMut(usize, usize, usize)) {
        let layout = self.layout;
        let ts = self.conv.to.size();
        let origin = layout.origin(u);
        for &r in &self.unit_regions[u] {
            let Some((lo, hi)) = layout.intersection(r, &origin) else { continue };
            let region = &layout.regions[r];
            let base = r * self.region_bytes;
            copy_box(&lo, &hi, &origin, layout.unit_shape, &region.start, &region.shape, |s, d, n| {
                row(s, base + d * ts, n);
            });
        }
    }
}
