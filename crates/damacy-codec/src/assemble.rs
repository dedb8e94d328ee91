//! Stage 4, assemble: each decoded unit's part of each target copied to the output (crop,
//! steps, strides, fill value, output dtype), on the host here, or on the device through the
//! assemble jobs built by [`device_jobs`].

use crate::dtype::Dtype;
use crate::plan::{BatchPlan, UnitSource};
use crate::region::{Axes, FillBox, c_strides, meet};

/// Converts runs of elements from the array's type to the output's type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Converter {
    pub(crate) from: Dtype,
    pub(crate) to: Dtype,
}

impl Converter {
    /// Convert `n` elements from `src` (native bytes of `from`) into `dst` (of `to`), each
    /// rounded once as [`Dtype::convert_bits`] (and the device's assemble kernel) rounds it.
    pub(crate) fn run(self, src: &[u8], dst: &mut [u8], n: usize) {
        let (fs, ts) = (self.from.size(), self.to.size());
        if self.from == self.to {
            dst[..n * ts].copy_from_slice(&src[..n * fs]);
            return;
        }
        match (self.from, self.to) {
            // Small integers are exact in f32: one rounding, the one to the target.
            (Dtype::U8, to @ (Dtype::F32 | Dtype::BF16 | Dtype::F16)) => {
                map(src, dst, n, |[b]: [u8; 1]| f32::from(b), to);
            }
            (Dtype::I8, to @ (Dtype::F32 | Dtype::BF16 | Dtype::F16)) => {
                map(src, dst, n, |b: [u8; 1]| f32::from(i8::from_ne_bytes(b)), to);
            }
            (Dtype::U16, to @ (Dtype::F32 | Dtype::BF16 | Dtype::F16)) => {
                map(src, dst, n, |b: [u8; 2]| f32::from(u16::from_ne_bytes(b)), to);
            }
            (Dtype::I16, to @ (Dtype::F32 | Dtype::BF16 | Dtype::F16)) => {
                map(src, dst, n, |b: [u8; 2]| f32::from(i16::from_ne_bytes(b)), to);
            }
            (Dtype::F32, to @ (Dtype::BF16 | Dtype::F16)) => map(src, dst, n, f32::from_ne_bytes, to),
            (from, to) => {
                for (s, d) in src.chunks_exact(fs).zip(dst.chunks_exact_mut(ts)).take(n) {
                    let mut b = [0u8; 8];
                    b[..fs].copy_from_slice(s);
                    let bits = from.convert_bits(to, u64::from_ne_bytes(b) >> native_shift(fs));
                    d.copy_from_slice(&(bits << native_shift(ts)).to_ne_bytes()[..ts]);
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

/// How far the `size` bytes of an element loaded into the front of a native `u64` sit from its
/// low end: 0 on little-endian machines.
const fn native_shift(size: usize) -> u32 {
    if cfg!(target_endian = "big") { (64 - 8 * size) as u32 } else { 0 }
}

/// `n` elements of `N` bytes, each exact in `f32` through `value`, to `to` (float32, bfloat16 or
/// float16), rounded once to nearest even.
fn map<const N: usize>(src: &[u8], dst: &mut [u8], n: usize, value: impl Fn([u8; N]) -> f32, to: Dtype) {
    let src = src.chunks_exact(N).take(n).map(|s| value(s.try_into().unwrap_or([0; N])));
    match to {
        Dtype::F32 => {
            for (v, d) in src.zip(dst.chunks_exact_mut(4)) {
                d.copy_from_slice(&v.to_ne_bytes());
            }
        }
        Dtype::BF16 => {
            for (v, d) in src.zip(dst.chunks_exact_mut(2)) {
                d.copy_from_slice(&f32_to_bf16(v).to_ne_bytes());
            }
        }
        _ => {
            for (v, d) in src.zip(dst.chunks_exact_mut(2)) {
                d.copy_from_slice(&(Dtype::F32.convert_bits(Dtype::F16, u64::from(v.to_bits())) as u16).to_ne_bytes());
            }
        }
    }
}

/// `f32` → bfloat16 bits, rounded to nearest even (torch's `.to(torch.bfloat16)`); NaN stays
/// a quiet NaN.
fn f32_to_bf16(v: f32) -> u16 {
    let b = v.to_bits();
    if v.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    // Adding 0x7FFF plus the lowest kept bit carries into the kept bits exactly when the
    // dropped half is past the tie, or at the tie with an odd kept part (overflow carries into
    // the exponent: infinity).
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
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
            if unit.source == UnitSource::Fill {
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

    /// The host assemble's conversions (fast paths and the general one) give the bits of
    /// `Dtype::convert_bits`, which the kernel's `dmc_convert` gives too, for every pair of dtypes:
    /// every pattern of the 1- and 2-byte types, float32 ties, overflows and NaNs, and random
    /// 4- and 8-byte patterns.
    #[test]
    fn conversions_match_convert_bits_for_every_pair() {
        let mut r = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            r
        };
        for from in Dtype::ALL {
            let mut bits: Vec<u64> = match from.size() {
                1 => (0..=0xFF).collect(),
                2 => (0..=0xFFFF).collect(),
                _ => (0..20_000).map(|_| next() >> (next() % 64)).collect(),
            };
            if from == Dtype::F32 {
                for f in [
                    1.0f32 + 2f32.powi(-8),
                    1.0 + 3.0 * 2f32.powi(-8),
                    1.0 + 2f32.powi(-8) + 2f32.powi(-23),
                    f32::MAX,
                    65_520.0,
                    65_519.99,
                    f32::NAN,
                    -f32::NAN,
                    f32::INFINITY,
                    2f32.powi(-25),
                    -0.0,
                ] {
                    bits.push(u64::from(f.to_bits()));
                }
                bits.extend((0..20_000).map(|_| next() & 0xFFFF_FFFF));
            }
            if from == Dtype::Bool {
                bits = vec![0, 1];
            }
            let (fs, n) = (from.size(), bits.len());
            let src: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()[..fs].to_vec()).collect();
            for to in Dtype::ALL {
                let ts = to.size();
                let mut dst = vec![0u8; n * ts];
                Converter { from, to }.run(&src, &mut dst, n);
                for (i, (b, d)) in bits.iter().zip(dst.chunks_exact(ts)).enumerate() {
                    let mut got = [0u8; 8];
                    got[..ts].copy_from_slice(d);
                    let want = from.convert_bits(to, *b);
                    assert_eq!(u64::from_le_bytes(got), want, "{from} {b:#x} -> {to} (element {i})");
                }
            }
        }
    }

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
