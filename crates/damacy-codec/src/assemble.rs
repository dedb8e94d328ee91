//! Stage 4, assemble: each decoded unit's part of each target copied to the output (crop,
//! steps, strides, fill value, output dtype), on the host here, or on the device through the
//! assemble jobs built by [`device_jobs`].

use crate::dtype::Dtype;
use crate::plan::{Axes, BatchPlan, FillBox, meet};
use crate::region::c_strides;

/// Converts runs of elements from the array's type to the output's type.
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

    /// One element of `from` (the fill value), converted to `to`.
    pub(crate) fn one(self, value: &[u8]) -> Vec<u8> {
        let mut one = vec![0u8; self.to.size()];
        self.run(value, &mut one, 1);
        one
    }
}

/// The output, written concurrently by the threads that assemble units: a base pointer and a
/// length. Distinct units cover disjoint elements of the array, and targets of one plan write
/// disjoint bytes of the output, so concurrent writes never overlap.
pub(crate) struct OutPtr {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `OutPtr` is only used to write disjoint byte ranges (see `Scatter`), and the buffer
// it points into outlives every use (it is built from a `&mut [u8]` borrowed for the whole
// parallel pass).
unsafe impl Send for OutPtr {}
// SAFETY: as above: concurrent users write disjoint ranges.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    fn new(data: &mut [u8]) -> Self {
        Self { ptr: data.as_mut_ptr(), len: data.len() }
    }

    /// The bytes `start..start + len` of the output.
    #[allow(clippy::mut_from_ref)] // disjoint ranges of a buffer shared by the scatter threads
    fn bytes(&self, start: usize, len: usize) -> &mut [u8] {
        assert!(start.checked_add(len).is_some_and(|end| end <= self.len), "assemble writes inside the output");
        // SAFETY: the range lies inside the buffer (checked above), which outlives `self`. It
        // belongs to one element run of one target that one unit covers; distinct units cover
        // disjoint elements and each unit is handled by one thread at a time, so no other
        // reference to these bytes exists while this one is used.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// Visit every element run of a box: `count` elements per axis, output byte offset
/// `base + Σ i·strides`, source element `src_base + Σ i·src_strides`. Calls
/// `run(src_element, dst_byte, n, contiguous)` once per run along the last axis, where
/// `contiguous` says both sides are dense along it.
fn for_each_run(
    count: &[u64],
    (src_base, src_strides): (usize, &[usize]),
    (dst_base, dst_strides): (isize, &[isize]),
    dst_elem: isize,
    mut run: impl FnMut(usize, isize, usize, bool),
) {
    let rank = count.len();
    if rank == 0 {
        run(src_base, dst_base, 1, true);
        return;
    }
    if count.contains(&0) {
        return;
    }
    let last = rank - 1;
    let contiguous = src_strides[last] == 1 && dst_strides[last] == dst_elem;
    let n = count[last] as usize;
    let mut idx: Axes<u64> = smallvec::smallvec![0; rank];
    loop {
        let mut s = src_base;
        let mut d = dst_base;
        for a in 0..last {
            s += idx[a] as usize * src_strides[a];
            d += idx[a] as isize * dst_strides[a];
        }
        if contiguous {
            run(s, d, n, true);
        } else {
            for i in 0..n {
                run(s + i * src_strides[last], d + i as isize * dst_strides[last], 1, false);
            }
        }
        let mut axis = last;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            idx[axis] += 1;
            if idx[axis] < count[axis] {
                break;
            }
            idx[axis] = 0;
        }
    }
}

/// Write `value` (one element of the output type) to every element of an output box.
fn fill_with(out: &OutPtr, b: &FillBox, value: &[u8]) {
    let ts = value.len();
    let zeros: Axes<usize> = smallvec::smallvec![0; b.count.len()];
    for_each_run(&b.count, (0, &zeros), (b.dst_offset as isize, &b.dst_strides), ts as isize, |_, d, n, _| {
        for chunk in out.bytes(d as usize, n * ts).chunks_exact_mut(ts) {
            chunk.copy_from_slice(value);
        }
    });
}

/// Scatters decoded units (or fill, for units found missing) into the output, from any number
/// of threads at once.
pub(crate) struct Scatter<'a> {
    plan: &'a BatchPlan,
    conv: Converter,
    fill: Vec<u8>,
    unit_strides: Vec<u64>,
    out: OutPtr,
}

impl<'a> Scatter<'a> {
    /// Scatter into `out` (the plan's output, [`BatchPlan::nbytes`] long), which must outlive
    /// every use of the returned value.
    pub(crate) fn new(plan: &'a BatchPlan, out: &mut [u8]) -> Self {
        let conv = Converter { from: plan.array.dtype, to: plan.array.out_dtype() };
        Self {
            plan,
            conv,
            fill: conv.one(&plan.array.fill_value),
            unit_strides: c_strides(&plan.unit_shape),
            out: OutPtr::new(out),
        }
    }

    /// Fill every target that decoded units will not cover entirely (clipped targets and
    /// targets touching a unit without bytes) with the fill value.
    pub(crate) fn prefill(&self) {
        use rayon::prelude::*;
        let mut partial = vec![false; self.plan.targets.len()];
        for unit in &self.plan.units {
            if unit.source == crate::plan::UnitSource::Fill {
                for &t in &unit.targets {
                    partial[t as usize] = true;
                }
            }
        }
        self.plan.targets.par_iter().zip(partial).for_each(|(t, partial)| {
            if partial || t.padded.is_some() {
                fill_with(&self.out, &t.fill_box(), &self.fill);
            }
        });
    }

    /// Copy decoded unit `u` (native bytes of the array's type, C order) into every target it
    /// meets.
    pub(crate) fn unit(&self, u: usize, data: &[u8]) {
        let (fs, ts) = (self.conv.from.size(), self.conv.to.size());
        self.each_run(u, |s, d, n| self.conv.run(&data[s * fs..(s + n) * fs], self.out.bytes(d, n * ts), n));
    }

    /// Write the fill value where unit `u` (a chunk found missing when read) meets each target.
    pub(crate) fn fill(&self, u: usize) {
        let ts = self.conv.to.size();
        self.each_run(u, |_, d, n| {
            for chunk in self.out.bytes(d, n * ts).chunks_exact_mut(ts) {
                chunk.copy_from_slice(&self.fill);
            }
        });
    }

    /// How many leading elements of unit `u` (C order) the targets read: a decoder may stop
    /// there.
    pub(crate) fn needed_elements(&self, u: usize) -> usize {
        let unit = &self.plan.units[u];
        let shape = &self.plan.unit_shape;
        let mut needed = 0u64;
        for &t in &unit.targets {
            let target = &self.plan.targets[t as usize];
            let Some(m) = meet(target, &unit.origin, shape) else { continue };
            let last: u64 = m
                .src_start
                .iter()
                .zip(&m.count)
                .zip(&target.step)
                .zip(&self.unit_strides)
                .map(|(((s, n), step), stride)| (s + (n - 1) * step) * stride)
                .sum();
            needed = needed.max(last + 1);
        }
        needed as usize
    }

    /// Visit each element run where unit `u` meets a target: (element offset in the unit, byte
    /// offset in the output, elements).
    fn each_run(&self, u: usize, mut row: impl FnMut(usize, usize, usize)) {
        let unit = &self.plan.units[u];
        let shape = &self.plan.unit_shape;
        let ts = self.conv.to.size() as isize;
        for &t in &unit.targets {
            let target = &self.plan.targets[t as usize];
            let Some(m) = meet(target, &unit.origin, shape) else { continue };
            let src_strides: Axes<usize> =
                self.unit_strides.iter().zip(&target.step).map(|(s, step)| (s * step) as usize).collect();
            let src_base: usize = m.src_start.iter().zip(&self.unit_strides).map(|(s, st)| (s * st) as usize).sum();
            let dst_base: isize = target.dst_offset as isize
                + m.first.iter().zip(&target.dst_strides).map(|(i, s)| *i as isize * s).sum::<isize>();
            for_each_run(&m.count, (src_base, &src_strides), (dst_base, &target.dst_strides), ts, |s, d, n, _| {
                row(s, d as usize, n);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_a_strided_box() {
        let mut runs = Vec::new();
        for_each_run(&[2, 3], (5, &[10, 1]), (100, &[30, 4]), 4, |s, d, n, c| runs.push((s, d, n, c)));
        assert_eq!(runs, vec![(5, 100, 3, true), (15, 130, 3, true)]);
        runs.clear();
        // Every second source element: element by element.
        for_each_run(&[1, 2], (0, &[10, 2]), (0, &[8, 4]), 4, |s, d, n, c| runs.push((s, d, n, c)));
        assert_eq!(runs, vec![(0, 0, 1, false), (2, 4, 1, false)]);
    }

    #[test]
    fn fill_box_writes_only_the_box() {
        let mut out = vec![0u8; 12];
        fill_with(&OutPtr::new(&mut out), &FillBox { dst_offset: 1, count: vec![2, 2], dst_strides: vec![6, 2] }, &[7]);
        assert_eq!(out, vec![0, 7, 0, 7, 0, 0, 0, 7, 0, 7, 0, 0]);
    }
}
