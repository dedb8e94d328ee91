//! Assemble casts through the host emulator: every source dtype to every destination dtype,
//! against numpy's `astype` (every conversion rounded once; reference values built with the
//! `half` crate from a round-to-odd float32, which makes the second rounding exact), plus exact
//! reference values where a double rounding would differ.
#![allow(
    clippy::doc_markdown,
    clippy::missing_panics_doc,
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss,
    clippy::float_cmp,
    clippy::many_single_char_names
)]

use damacy_kernels::{AssembleJob, Device, Dtype};
use half::{bf16, f16};

const ALL: [Dtype; 13] = [
    Dtype::Bool,
    Dtype::U8,
    Dtype::I8,
    Dtype::U16,
    Dtype::I16,
    Dtype::U32,
    Dtype::I32,
    Dtype::U64,
    Dtype::I64,
    Dtype::F16,
    Dtype::BF16,
    Dtype::F32,
    Dtype::F64,
];

/// A source element's value: integers (and bool) exactly, floats as f64 (exact for all four).
#[derive(Clone, Copy, Debug)]
enum Val {
    Int(i128),
    Float(f64),
}

fn is_int(d: Dtype) -> bool {
    !matches!(d, Dtype::F16 | Dtype::BF16 | Dtype::F32 | Dtype::F64)
}

fn int_range(d: Dtype) -> (i128, i128) {
    match d {
        Dtype::Bool => (0, 1),
        Dtype::U8 => (0, u8::MAX.into()),
        Dtype::I8 => (i8::MIN.into(), i8::MAX.into()),
        Dtype::U16 => (0, u16::MAX.into()),
        Dtype::I16 => (i16::MIN.into(), i16::MAX.into()),
        Dtype::U32 => (0, u32::MAX.into()),
        Dtype::I32 => (i32::MIN.into(), i32::MAX.into()),
        Dtype::U64 => (0, u64::MAX.into()),
        Dtype::I64 => (i64::MIN.into(), i64::MAX.into()),
        _ => unreachable!("not an integer dtype"),
    }
}

fn mask(d: Dtype) -> u64 {
    if d.size() == 8 { u64::MAX } else { (1u64 << (8 * d.size())) - 1 }
}

fn decode(d: Dtype, bits: u64) -> Val {
    match d {
        Dtype::Bool => Val::Int(i128::from(bits != 0)),
        Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64 => Val::Int(i128::from(bits)),
        Dtype::I8 => Val::Int(i128::from(bits as u8 as i8)),
        Dtype::I16 => Val::Int(i128::from(bits as u16 as i16)),
        Dtype::I32 => Val::Int(i128::from(bits as u32 as i32)),
        Dtype::I64 => Val::Int(i128::from(bits as i64)),
        Dtype::F16 => Val::Float(f16::from_bits(bits as u16).to_f64()),
        Dtype::BF16 => Val::Float(bf16::from_bits(bits as u16).to_f64()),
        Dtype::F32 => Val::Float(f64::from(f32::from_bits(bits as u32))),
        Dtype::F64 => Val::Float(f64::from_bits(bits)),
        _ => unreachable!(),
    }
}

/// `v` rounded to float32 with round-to-odd: a later round-to-nearest-even to any format of at
/// most 22 significand bits (binary16: 11, bfloat16: 8) is then the correctly rounded result.
fn round_odd_f32(v: f64) -> f32 {
    let f = v as f32;
    if !v.is_finite() || f64::from(f) == v || f.to_bits() & 1 == 1 {
        return f;
    }
    // f is the even neighbour of v: take the other one, on v's side.
    if f64::from(f).abs() > v.abs() { f32::from_bits(f.to_bits() - 1) } else { f32::from_bits(f.to_bits() + 1) }
}

fn round_odd_f32_int(i: i128) -> f32 {
    let f = i as f32;
    if f as i128 == i || f.to_bits() & 1 == 1 {
        return f;
    }
    if (f as i128).abs() > i.abs() { f32::from_bits(f.to_bits() - 1) } else { f32::from_bits(f.to_bits() + 1) }
}

#[derive(Debug, PartialEq)]
enum Expect {
    Bits(u64),
    /// Any NaN of the destination type.
    NaN,
}

/// numpy's `src.astype(dst)` for one value; None where numpy's result is undefined (a float out
/// of the destination integer's range, or NaN/inf to an integer: C leaves those undefined).
fn reference(v: Val, dst: Dtype) -> Option<Expect> {
    let float_bits = |f32v: f32, exact: f64| -> Expect {
        match dst {
            Dtype::F16 | Dtype::BF16 if f32v.is_nan() => Expect::NaN,
            Dtype::F16 => Expect::Bits(u64::from(f16::from_f32(f32v).to_bits())),
            Dtype::BF16 => Expect::Bits(u64::from(bf16::from_f32(f32v).to_bits())),
            Dtype::F32 | Dtype::F64 if exact.is_nan() => Expect::NaN,
            Dtype::F32 => Expect::Bits(u64::from((exact as f32).to_bits())),
            Dtype::F64 => Expect::Bits(exact.to_bits()),
            _ => unreachable!(),
        }
    };
    Some(match (v, is_int(dst)) {
        (Val::Int(i), true) => {
            Expect::Bits(if dst == Dtype::Bool { u64::from(i != 0) } else { (i as u64) & mask(dst) })
        }
        (Val::Int(i), false) => match dst {
            // Rust's integer → float casts round once, to nearest even.
            Dtype::F32 => Expect::Bits(u64::from((i as f32).to_bits())),
            Dtype::F64 => Expect::Bits((i as f64).to_bits()),
            _ => float_bits(round_odd_f32_int(i), 0.0),
        },
        (Val::Float(f), false) => float_bits(round_odd_f32(f), f),
        (Val::Float(f), true) => {
            if dst == Dtype::Bool {
                return Some(Expect::Bits(u64::from(f != 0.0)));
            }
            if !f.is_finite() {
                return None;
            }
            let t = f.trunc();
            let (lo, hi) = int_range(dst);
            if t < lo as f64 || t > hi as f64 || (t == hi as f64 && (t as i128) > hi) {
                return None;
            }
            Expect::Bits((t as i128 as u64) & mask(dst))
        }
    })
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Source bit patterns for one dtype: every pattern of the 16-bit floats, edges, ties and
/// random values elsewhere.
fn source_bits(d: Dtype, rng: &mut XorShift) -> Vec<u64> {
    let mut v: Vec<u64> = Vec::new();
    match d {
        Dtype::Bool => v.extend([0, 1]),
        Dtype::F16 | Dtype::BF16 => v.extend(0..=0xFFFF),
        Dtype::F32 | Dtype::F64 => {
            let f64s: Vec<f64> = vec![
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                1.5,
                -2.5,
                1.0 + 2f64.powi(-11) + 2f64.powi(-40),
                1.0 + 2f64.powi(-11),
                1.0 + 3.0 * 2f64.powi(-11),
                1.0 + 2f64.powi(-8) + 2f64.powi(-40),
                2f64.powi(-25),
                2f64.powi(-25) + 2f64.powi(-60),
                2f64.powi(-24) * 1.5,
                2f64.powi(-14) - 2f64.powi(-30),
                65_504.0,
                65_519.99,
                65_520.0,
                1e300,
                -1e300,
                5e-324,
                f64::MAX,
                f64::MIN_POSITIVE,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                127.9,
                -128.9,
                255.5,
                -0.9,
                2_147_483_647.5,
                -2_147_483_648.5,
                4_294_967_295.9,
                9.2e18,
                -9.2e18,
                1.8e19,
            ];
            for f in f64s {
                v.push(if d == Dtype::F64 { f.to_bits() } else { u64::from((f as f32).to_bits()) });
            }
            for _ in 0..3000 {
                let r = rng.next();
                if d == Dtype::F64 {
                    // mantissas at exponents from 2^-30 to 2^70 (int and f16 ranges), and raw bits
                    let e = (r >> 52) % 101;
                    let m = f64::from_bits((r & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
                    let s = if r >> 63 == 1 { -1.0 } else { 1.0 };
                    v.push((s * m * 2f64.powi(e as i32 - 30)).to_bits());
                    v.push(rng.next());
                } else {
                    let e = ((r >> 23) % 101) as u32;
                    let bits = (r as u32 & 0x807F_FFFF) | ((127 - 30 + e) << 23);
                    v.push(u64::from(bits));
                    v.push(rng.next() & 0xFFFF_FFFF);
                }
            }
        }
        _ => {
            let (lo, hi) = int_range(d);
            let m = mask(d);
            for i in [
                0i128,
                1,
                -1,
                lo,
                hi,
                lo + 1,
                hi - 1,
                2049,
                2051,
                -2049,
                65_519,
                65_520,
                65_536,
                (1 << 24) + 1,
                (1 << 24) + 3,
                (1 << 53) + (1 << 29) + 1,
                (1 << 60) + (1 << 52) + 1,
                (1 << 63) + (1 << 39) + 1,
                -((1 << 53) + (1 << 29) + 1),
            ] {
                if (lo..=hi).contains(&i) {
                    v.push((i as u64) & m);
                }
            }
            for _ in 0..3000 {
                let r = rng.next();
                // all widths of magnitude, so every exponent of the float targets is reached
                let shift = (rng.next() % 64) as u32;
                v.push((r >> shift) & m);
                v.push(r & m);
            }
        }
    }
    v
}

fn run_cast(device: &Device, src_dtype: Dtype, dst_dtype: Dtype, bits: &[u64]) -> Vec<u64> {
    run_cast_at(device, src_dtype, dst_dtype, bits, false, 0, 0)
}

/// [`run_cast`] with the source elements stored big-endian when `big_endian`, the source placed
/// `src_offset` bytes and the destination `dst_offset` bytes into their buffers.
fn run_cast_at(
    device: &Device,
    src_dtype: Dtype,
    dst_dtype: Dtype,
    bits: &[u64],
    big_endian: bool,
    src_offset: usize,
    dst_offset: usize,
) -> Vec<u64> {
    let n = bits.len();
    let mut src_bytes = vec![0xEEu8; src_offset];
    for b in bits {
        let le = &b.to_le_bytes()[..src_dtype.size()];
        if big_endian {
            src_bytes.extend(le.iter().rev());
        } else {
            src_bytes.extend(le);
        }
    }
    let mut src = device.alloc(src_bytes.len()).unwrap();
    device.upload(&src_bytes, &mut src, 0).unwrap();
    let dsz = dst_dtype.size();
    let mut dst = device.alloc(dst_offset + n * dsz).unwrap();
    let job = AssembleJob {
        src_offset,
        dst_offset,
        shape: vec![n as u64],
        src_strides: vec![1],
        dst_strides: vec![1],
        src_dtype,
        dst_dtype,
        big_endian,
        fill_bits: None,
    };
    for r in damacy_kernels::assemble(device, &src, &mut dst, &[job]).unwrap() {
        r.unwrap();
    }
    let mut host = vec![0u8; dst_offset + n * dsz];
    device.download(&dst, 0, &mut host).unwrap();
    host[dst_offset..]
        .chunks(dsz)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..dsz].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}

fn is_nan_bits(d: Dtype, b: u64) -> bool {
    match d {
        Dtype::F16 => f16::from_bits(b as u16).is_nan(),
        Dtype::BF16 => bf16::from_bits(b as u16).is_nan(),
        Dtype::F32 => f32::from_bits(b as u32).is_nan(),
        Dtype::F64 => f64::from_bits(b).is_nan(),
        _ => false,
    }
}

#[test]
fn every_source_dtype_casts_to_every_destination_like_numpy() {
    let device = Device::emulated(0);
    let mut rng = XorShift(0x0DDC_0FFE_E5EE_D5ED);
    let mut checked = 0usize;
    for s in ALL {
        let bits = source_bits(s, &mut rng);
        for d in ALL {
            let got = run_cast(&device, s, d, &bits);
            let mut bad = Vec::new();
            for (b, g) in bits.iter().zip(&got) {
                let Some(want) = reference(decode(s, *b), d) else { continue };
                checked += 1;
                let ok = match want {
                    Expect::NaN => is_nan_bits(d, *g),
                    Expect::Bits(w) => w == *g,
                };
                if !ok && bad.len() < 8 {
                    bad.push(format!("{s:?} {b:#x} ({:?}) -> {d:?}: got {g:#x}, want {want:?}", decode(s, *b)));
                }
            }
            assert!(bad.is_empty(), "casts that differ from numpy:\n{}", bad.join("\n"));
        }
    }
    assert!(checked > 500_000, "{checked}");
}

/// The host's conversion (`Dtype::convert_bits`, what the CPU executor's assemble uses) against
/// the same numpy reference, and bit for bit against the kernel: the CPU and the device route
/// give the same batches for every pair, the pairs float outputs now accept (uint16 → bfloat16,
/// int32 → float16, (u)int64 → float32, float64 → bfloat16, …) included.
#[test]
fn host_conversion_equals_numpy_and_the_kernel_for_every_pair() {
    let device = Device::emulated(0xC0DE);
    let mut rng = XorShift(0x0DDC_0FFE_E5EE_D5ED);
    let mut checked = 0usize;
    for s in ALL {
        let bits = source_bits(s, &mut rng);
        for d in ALL {
            let kernel = run_cast(&device, s, d, &bits);
            for (b, k) in bits.iter().zip(&kernel) {
                let host = s.convert_bits(d, *b);
                assert_eq!(host, *k, "{s:?} {b:#x} -> {d:?}: host {host:#x}, kernel {k:#x}");
                if let Some(want) = reference(decode(s, *b), d) {
                    checked += 1;
                    let ok = match want {
                        Expect::NaN => is_nan_bits(d, host),
                        Expect::Bits(w) => w == host,
                    };
                    assert!(ok, "{s:?} {b:#x} ({:?}) -> {d:?}: host {host:#x}, numpy {want:?}", decode(s, *b));
                }
            }
        }
    }
    assert!(checked > 500_000, "{checked}");
}

/// Aligned elements are loaded and stored with one access of their size, unaligned ones byte by
/// byte, and big-endian ones byte-swapped after the load: for every pair of dtypes, big-endian
/// sources and sources or destinations at offsets that are not multiples of the element size give
/// the elements of the aligned little-endian cast.
#[test]
fn every_cast_is_the_same_big_endian_and_unaligned() {
    let device = Device::emulated(0xA11);
    let mut rng = XorShift(0xB16_E2D1A2);
    for s in ALL {
        let mut bits = source_bits(s, &mut rng);
        bits.truncate(300);
        for d in ALL {
            let want = run_cast(&device, s, d, &bits);
            for (be, so, dof) in [(true, 0, 0), (false, 1, 0), (false, 0, 3), (true, 5, 7), (true, 8, 8)] {
                let got = run_cast_at(&device, s, d, &bits, be, so, dof);
                assert!(got == want, "{s:?} -> {d:?}, big_endian {be}, src +{so}, dst +{dof}");
            }
        }
    }
}

/// Values where rounding twice (through f32, or through f64) gives a different answer than
/// numpy's single rounding; the expected bits are worked out by hand, not by the reference.
#[test]
fn casts_round_once_on_exact_reference_values() {
    let device = Device::emulated(0x5EED);
    let one_cast = |s: Dtype, bits: u64, d: Dtype| run_cast(&device, s, d, &[bits])[0];
    // f64 → f16: 1 + 2^-11 + 2^-40 is just above the tie between 1 and 1 + 2^-10.
    let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    assert_eq!(one_cast(Dtype::F64, x.to_bits(), Dtype::F16), 0x3C01, "numpy: 1.0009765625");
    assert_eq!(one_cast(Dtype::F64, (-x).to_bits(), Dtype::F16), 0xBC01);
    // f64 → bf16: 1 + 2^-8 + 2^-40 → 1 + 2^-7.
    let y = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    assert_eq!(one_cast(Dtype::F64, y.to_bits(), Dtype::BF16), 0x3F81);
    // f64 → f16 subnormal: 2^-25 (+ a little) rounds up to the smallest subnormal 2^-24.
    let z = 2f64.powi(-25) + 2f64.powi(-60);
    assert_eq!(one_cast(Dtype::F64, z.to_bits(), Dtype::F16), 0x0001);
    assert_eq!(one_cast(Dtype::F64, 2f64.powi(-25).to_bits(), Dtype::F16), 0x0000, "tie to even: 0");
    // i64 → f32: 2^53 + 2^29 + 1 → 2^53 + 2^30 (through f64 it would be 2^53).
    let i = (1i64 << 53) + (1 << 29) + 1;
    assert_eq!(one_cast(Dtype::I64, i as u64, Dtype::F32), u64::from(9_007_200_328_482_816f32.to_bits()));
    assert_eq!(one_cast(Dtype::I64, (-i) as u64, Dtype::F32), u64::from((-9_007_200_328_482_816f32).to_bits()));
    // u64 → f32: 2^63 + 2^39 + 1 → 2^63 + 2^40.
    let u = (1u64 << 63) + (1 << 39) + 1;
    assert_eq!(one_cast(Dtype::U64, u, Dtype::F32), 0x5F00_0001, "exponent 63, mantissa 2^-23");
    // i64 → bf16: 2^60 + 2^52 + 1 → 2^60 + 2^53 (exponent 187, mantissa 1).
    let b = (1i64 << 60) + (1 << 52) + 1;
    assert_eq!(one_cast(Dtype::I64, b as u64, Dtype::BF16), 0x5D81);
    // i32 → f16 at a tie and past the largest finite value.
    assert_eq!(one_cast(Dtype::I32, 2049, Dtype::F16), 0x6800, "2049 → 2048 (tie to even)");
    assert_eq!(one_cast(Dtype::I32, 65_519, Dtype::F16), 0x7BFF, "65519 → 65504");
    assert_eq!(one_cast(Dtype::I32, 65_520, Dtype::F16), 0x7C00, "65520 → inf");
}
