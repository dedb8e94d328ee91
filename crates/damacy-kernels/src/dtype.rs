//! Data types damacy reads, and the output types it can cast to: one `Dtype` shared by the
//! kernels (which read and write it on the device) and the read engine.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};

/// A data type name damacy does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("data type {name:?} (damacy reads {known})")]
pub struct UnknownDtype {
    /// The name given.
    pub name: String,
    /// The names damacy reads.
    pub known: String,
}

type Result<T, E = UnknownDtype> = std::result::Result<T, E>;

/// A fixed-size zarr data type that damacy decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dtype {
    /// `bool`, one byte per element (0 or 1).
    Bool,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// `float16` (IEEE half).
    F16,
    /// `bfloat16`.
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl Dtype {
    /// Every supported data type.
    pub const ALL: [Dtype; 13] = [
        Dtype::Bool,
        Dtype::I8,
        Dtype::I16,
        Dtype::I32,
        Dtype::I64,
        Dtype::U8,
        Dtype::U16,
        Dtype::U32,
        Dtype::U64,
        Dtype::F16,
        Dtype::BF16,
        Dtype::F32,
        Dtype::F64,
    ];

    /// Bytes per element.
    #[must_use]
    pub const fn size(self) -> usize {
        match self {
            Dtype::Bool | Dtype::I8 | Dtype::U8 => 1,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    /// The zarr v3 name (`uint16`, `float32`, …).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "bool",
            Dtype::I8 => "int8",
            Dtype::I16 => "int16",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
            Dtype::U32 => "uint32",
            Dtype::U64 => "uint64",
            Dtype::F16 => "float16",
            Dtype::BF16 => "bfloat16",
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
        }
    }

    /// Whether the type is a floating-point type.
    #[must_use]
    pub const fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::BF16 | Dtype::F32 | Dtype::F64)
    }

    /// The range of integers this type holds exactly, as (min, max) in `f64`, or `None` for
    /// floating-point types.
    #[must_use]
    fn integer_range(self) -> Option<(f64, f64)> {
        Some(match self {
            Dtype::Bool => (0.0, 1.0),
            Dtype::I8 => (-128.0, 127.0),
            Dtype::I16 => (-32768.0, 32767.0),
            Dtype::I32 => (-2_147_483_648.0, 2_147_483_647.0),
            Dtype::I64 => (-9.223_372_036_854_776e18, 9.223_372_036_854_776e18),
            Dtype::U8 => (0.0, 255.0),
            Dtype::U16 => (0.0, 65535.0),
            Dtype::U32 => (0.0, 4_294_967_295.0),
            Dtype::U64 => (0.0, 1.844_674_407_370_955_2e19),
            _ => return None,
        })
    }

    /// The largest magnitude below which every integer is represented exactly.
    fn exact_integer_limit(self) -> f64 {
        match self {
            Dtype::F16 => 2048.0,
            Dtype::BF16 => 256.0,
            Dtype::F32 => 16_777_216.0,
            Dtype::F64 => 9_007_199_254_740_992.0,
            other => other.integer_range().map_or(0.0, |(lo, hi)| hi.max(-lo)),
        }
    }

    /// How a cast of every value of `self` to `to` behaves: [`CastKind::Exact`],
    /// [`CastKind::Rounded`] (a floating-point target, rounded to nearest even like numpy's
    /// `astype` and torch's `.to(dtype)`) or [`CastKind::Refused`] (an integer target that
    /// cannot hold the source's range, or a floating-point source going to an integer: refused
    /// when an array is opened unless lossy casts are allowed). The table on [`OutputDtype`]
    /// lists every pair.
    #[must_use]
    pub fn cast_kind(self, to: Dtype) -> CastKind {
        if self.lossy_cast_reason(to).is_some() {
            CastKind::Refused
        } else if self == to || self.is_exact_in(to) {
            CastKind::Exact
        } else {
            CastKind::Rounded
        }
    }

    /// Whether every value of `self` is a value of `to` (`to` a floating-point type, or an
    /// integer type holding `self`'s range).
    fn is_exact_in(self, to: Dtype) -> bool {
        match (self.integer_range(), to.integer_range()) {
            (Some((lo, hi)), Some((tlo, thi))) => lo >= tlo && hi <= thi,
            (Some((lo, hi)), None) => hi.max(-lo) <= to.exact_integer_limit(),
            (None, Some(_)) => false,
            (None, None) => {
                // (significand bits, largest exponent, smallest normal exponent)
                let fmt = |d: Dtype| match d {
                    Dtype::F16 => (11, 15, -14),
                    Dtype::BF16 => (8, 127, -126),
                    Dtype::F32 => (24, 127, -126),
                    _ => (53, 1023, -1022),
                };
                let ((p, emax, emin), (tp, temax, temin)) = (fmt(self), fmt(to));
                // Subnormals of `self` reach down to 2^(emin - p + 1).
                tp >= p && temax >= emax && temin - tp <= emin - p
            }
        }
    }

    /// Why casting every value of `self` to `to` can lose information silently, or `None` when
    /// it cannot: an integer target (or `bool`) that does not hold the source's range, or a
    /// floating-point source going to an integer target (fractions truncated, values
    /// saturated). Floating-point targets accept every source: naming one asks for rounding
    /// to nearest even, as numpy's `astype` and torch's `.to(dtype)` do.
    #[must_use]
    pub fn lossy_cast_reason(self, to: Dtype) -> Option<String> {
        if self == to {
            return None;
        }
        match (self.integer_range(), to.integer_range()) {
            (Some((lo, hi)), Some((tlo, thi))) if lo < tlo || hi > thi => {
                Some(format!("{} values range over [{lo}, {hi}] but {} holds [{tlo}, {thi}]", self.name(), to.name()))
            }
            (None, Some(_)) => Some(format!(
                "casting floating-point {} to integer {} truncates fractions and saturates",
                self.name(),
                to.name()
            )),
            _ => None,
        }
    }

    /// Converts one element from `self` to `to`, as the device's assemble kernel does
    /// (`dmc_convert` in `kernels/assemble.cu`), bit for bit: `bits` holds the element's value
    /// in its low `self.size()` bytes (as a little-endian load puts it), and the result the
    /// converted element's in its low `to.size()` bytes, the rest zero.
    ///
    /// numpy's `astype` semantics, every conversion rounded once: to a floating-point type to
    /// nearest even (overflow gives infinity, NaN stays NaN), integers to integers wrap, floats
    /// to integers truncate toward zero and saturate (NaN gives 0), anything to `bool` is
    /// `!= 0`.
    ///
    /// ```
    /// use damacy_kernels::Dtype;
    /// // uint16 2^15 + 129 is past bfloat16's tie between 2^15 + 0 and 2^15 + 256: rounds up.
    /// assert_eq!(Dtype::U16.convert_bits(Dtype::BF16, 32_897), 0x4701);
    /// // 2049 lies halfway between float16's 2048 and 2050: ties to even.
    /// assert_eq!(Dtype::I32.convert_bits(Dtype::F16, 2049), 0x6800);
    /// ```
    #[must_use]
    pub fn convert_bits(self, to: Dtype, bits: u64) -> u64 {
        let bits = bits & self.mask();
        if self == to {
            return bits;
        }
        let out = if self.is_float() {
            // f16, bf16 and f32 are exact in f64: the only rounding is the one to `to`.
            let v = float_bits_to_f64(bits, self);
            if to.is_float() {
                f64_to_float_bits(v, to)
            } else if to == Dtype::Bool {
                u64::from(v != 0.0)
            } else if v.is_nan() {
                0
            } else if to.is_signed() {
                // `as` saturates at the i64 range; the store below keeps the low bytes.
                (v as i64).cast_unsigned()
            } else {
                v as u64
            }
        } else {
            // integer or bool source: sign-extend signed values to 64 bits
            let u = if self.is_signed() && self.size() < 8 {
                let m = 1u64 << (self.size() * 8 - 1);
                (bits ^ m).wrapping_sub(m)
            } else {
                bits
            };
            if to.is_float() {
                int_to_float_bits(u, self.is_signed(), to)
            } else if to == Dtype::Bool {
                u64::from(u != 0)
            } else {
                u
            }
        };
        out & to.mask()
    }

    /// Whether the type is a signed integer type.
    const fn is_signed(self) -> bool {
        matches!(self, Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64)
    }

    /// The bits of one element in the low bytes of a `u64`.
    const fn mask(self) -> u64 {
        if self.size() == 8 { u64::MAX } else { (1u64 << (8 * self.size())) - 1 }
    }

    /// Decode one little- or native-endian element to `f64` (exact for every type but the
    /// 64-bit integers beyond 2^53).
    #[must_use]
    pub fn read_f64(self, b: &[u8]) -> f64 {
        match self {
            Dtype::Bool => f64::from(u8::from(b[0] != 0)),
            Dtype::I8 => f64::from(b[0] as i8),
            Dtype::U8 => f64::from(b[0]),
            Dtype::I16 => f64::from(i16::from_ne_bytes([b[0], b[1]])),
            Dtype::U16 => f64::from(u16::from_ne_bytes([b[0], b[1]])),
            Dtype::F16 => f16::from_ne_bytes([b[0], b[1]]).to_f64(),
            Dtype::BF16 => bf16::from_ne_bytes([b[0], b[1]]).to_f64(),
            Dtype::I32 => f64::from(i32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::U32 => f64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::F32 => f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            Dtype::I64 => i64::from_ne_bytes(b[..8].try_into().unwrap_or_default()) as f64,
            Dtype::U64 => u64::from_ne_bytes(b[..8].try_into().unwrap_or_default()) as f64,
            Dtype::F64 => f64::from_ne_bytes(b[..8].try_into().unwrap_or_default()),
        }
    }

    /// Encode one `f64` as this type in native byte order (rounded once to nearest even;
    /// integers saturate, NaN → 0).
    pub fn write_f64(self, v: f64, out: &mut [u8]) {
        match self {
            Dtype::Bool => out[0] = u8::from(v != 0.0),
            Dtype::I8 => out[0] = (v as i8) as u8,
            Dtype::U8 => out[0] = v as u8,
            Dtype::I16 => out[..2].copy_from_slice(&(v as i16).to_ne_bytes()),
            Dtype::U16 => out[..2].copy_from_slice(&(v as u16).to_ne_bytes()),
            Dtype::F16 | Dtype::BF16 => {
                let h = f64_to_float_bits(v, self) as u16;
                out[..2].copy_from_slice(&h.to_ne_bytes());
            }
            Dtype::I32 => out[..4].copy_from_slice(&(v as i32).to_ne_bytes()),
            Dtype::U32 => out[..4].copy_from_slice(&(v as u32).to_ne_bytes()),
            Dtype::F32 => out[..4].copy_from_slice(&(v as f32).to_ne_bytes()),
            Dtype::I64 => out[..8].copy_from_slice(&(v as i64).to_ne_bytes()),
            Dtype::U64 => out[..8].copy_from_slice(&(v as u64).to_ne_bytes()),
            Dtype::F64 => out[..8].copy_from_slice(&v.to_ne_bytes()),
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = UnknownDtype;

    fn from_str(s: &str) -> Result<Self> {
        let alias = match s {
            "u1" | "|u1" | "<u1" => "uint8",
            "i1" | "|i1" | "<i1" => "int8",
            "b1" | "|b1" | "?" => "bool",
            "f2" => "float16",
            "f4" => "float32",
            "f8" => "float64",
            "bf16" => "bfloat16",
            other => other,
        };
        Dtype::ALL
            .into_iter()
            .find(|d| d.name() == alias)
            .ok_or_else(|| UnknownDtype { name: s.to_owned(), known: Self::names() })
    }
}

impl Dtype {
    fn names() -> String {
        Dtype::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
    }
}

/// How a cast from one dtype to another behaves ([`Dtype::cast_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CastKind {
    /// Every value is kept exactly.
    Exact,
    /// A floating-point target: values it cannot hold are rounded to nearest even (beyond its
    /// largest finite value: infinity). Always allowed: naming a floating-point output type asks
    /// for this, as numpy's `astype` and torch's `.to(dtype)` do.
    Rounded,
    /// An integer (or `bool`) target that cannot hold the source's range, or a floating-point
    /// source going to an integer: values would change silently. Refused when an array is opened
    /// unless lossy casts are allowed (`allow_lossy_cast`); then integers wrap and floats
    /// truncate toward zero and saturate.
    Refused,
}

impl CastKind {
    /// One character for tables: `=` exact, `~` rounded, `x` refused.
    #[must_use]
    pub const fn symbol(self) -> char {
        match self {
            CastKind::Exact => '=',
            CastKind::Rounded => '~',
            CastKind::Refused => 'x',
        }
    }
}

/// The value of a floating-point element's bits, exactly (every type damacy reads is exact in
/// `f64`).
fn float_bits_to_f64(bits: u64, d: Dtype) -> f64 {
    match d {
        Dtype::F16 => f16::from_bits(bits as u16).to_f64(),
        Dtype::BF16 => bf16::from_bits(bits as u16).to_f64(),
        Dtype::F32 => f64::from(f32::from_bits(bits as u32)),
        _ => f64::from_bits(bits),
    }
}

/// Rounds `m`·2^`e` (`m` > 0) once, to nearest even, into a binary format with `mb` mantissa
/// bits and `eb` exponent bits (binary16: 10, 5; bfloat16: 7, 8), subnormals included;
/// overflow gives infinity. Returns the exponent and mantissa bits (no sign). The host twin of
/// `dmc_round_to_small_float` in `kernels/assemble.cu`.
fn round_to_small_float(m: u64, e: i32, mb: i32, eb: i32) -> u32 {
    let bias = (1 << (eb - 1)) - 1;
    let p = 63 - m.leading_zeros() as i32; // m = 1.f · 2^p
    let mut be = p + e + bias; // biased exponent of the result
    let mut shift = p - mb; // low bits of m below the result's ulp
    if be <= 0 {
        // subnormal: the ulp is that of exponent 1
        shift += 1 - be;
        be = 0;
    }
    let mut q = if shift <= 0 {
        m << (-shift) as u32 // exact: m has at most mb + 1 bits here
    } else if shift > 64 {
        0 // below half the smallest subnormal
    } else {
        let rem = if shift == 64 { m } else { m & ((1u64 << shift) - 1) };
        let half = 1u64 << (shift - 1);
        let q = if shift == 64 { 0 } else { m >> shift };
        if rem > half || (rem == half && q & 1 == 1) { q + 1 } else { q }
    };
    if be == 0 {
        return q as u32; // a subnormal that rounds up to 2^mb is the smallest normal
    }
    if q == 1u64 << (mb + 1) {
        q >>= 1;
        be += 1;
    }
    let inf = ((1u32 << eb) - 1) << mb;
    if be >= (1 << eb) - 1 {
        return inf;
    }
    ((be as u32) << mb) | (q as u32 & ((1u32 << mb) - 1))
}

/// `f64` → binary16 or bfloat16 bits, rounded once (not through `f32`, which rounds twice:
/// 1 + 2^-11 + 2^-40 must give 1 + 2^-10, not 1). NaN stays NaN (quiet).
fn f64_to_small_float(v: f64, mb: i32, eb: i32) -> u32 {
    let x = v.to_bits();
    let sign = ((x >> 63) as u32) << (mb + eb);
    let exp = ((x >> 52) & 0x7FF) as i32;
    let man = x & 0x000F_FFFF_FFFF_FFFF;
    let inf = ((1u32 << eb) - 1) << mb;
    if exp == 0x7FF {
        if man == 0 {
            return sign | inf;
        }
        return sign | inf | (1u32 << (mb - 1)) | (man >> (52 - mb)) as u32;
    }
    if exp == 0 && man == 0 {
        return sign;
    }
    if exp == 0 {
        return sign | round_to_small_float(man, -1074, mb, eb);
    }
    sign | round_to_small_float(man | (1u64 << 52), exp - 1075, mb, eb)
}

/// An exact `f64` → the bits of floating-point type `d`, rounded once.
fn f64_to_float_bits(v: f64, d: Dtype) -> u64 {
    match d {
        Dtype::F16 => u64::from(f64_to_small_float(v, 10, 5)),
        Dtype::BF16 => u64::from(f64_to_small_float(v, 7, 8)),
        Dtype::F32 => u64::from((v as f32).to_bits()),
        _ => v.to_bits(),
    }
}

/// A 64-bit integer (`u`, read as signed when `signed`) → the bits of floating-point type `d`,
/// rounded once (numpy casts int64 → float32 directly, not through float64; Rust's `as`
/// rounds once, to nearest even).
fn int_to_float_bits(u: u64, signed: bool, d: Dtype) -> u64 {
    match d {
        Dtype::F32 => u64::from(if signed { (u as i64) as f32 } else { u as f32 }.to_bits()),
        Dtype::F64 => (if signed { (u as i64) as f64 } else { u as f64 }).to_bits(),
        _ => {
            let neg = signed && (u as i64) < 0;
            let mag = if neg { u.wrapping_neg() } else { u };
            let (mb, eb) = if d == Dtype::F16 { (10, 5) } else { (7, 8) };
            let sign = if neg { 1u32 << (mb + eb) } else { 0 };
            if mag == 0 { 0 } else { u64::from(sign | round_to_small_float(mag, 0, mb, eb)) }
        }
    }
}

/// The element type of a batch: the array's own type or a cast.
///
/// Floating-point outputs (`float16`, `bfloat16`, `float32`, `float64`) accept every source
/// type and round to nearest even, as numpy's `astype` and torch's `.to(dtype)` do (a value
/// beyond the largest finite one becomes infinity). Integer outputs accept the sources whose
/// whole range they hold; the other casts to integers (narrower integers, floating-point
/// sources) would change values silently and are refused when the array is opened unless lossy
/// casts are allowed (`ArrayOptions::with_lossy_cast`; then integers wrap and floats truncate
/// toward zero and saturate). Every pair ([`Dtype::cast_kind`]); rows are the array's type,
/// columns the output type; `=` exact, `~` rounded to nearest even, `x` refused unless lossy
/// casts are allowed:
///
/// | from \ to | bool | i8 | i16 | i32 | i64 | u8 | u16 | u32 | u64 | f16 | bf16 | f32 | f64 |
/// |---|---|---|---|---|---|---|---|---|---|---|---|---|---|
/// | **bool** | = | = | = | = | = | = | = | = | = | = | = | = | = |
/// | **i8** | x | = | = | = | = | x | x | x | x | = | = | = | = |
/// | **i16** | x | x | = | = | = | x | x | x | x | ~ | ~ | = | = |
/// | **i32** | x | x | x | = | = | x | x | x | x | ~ | ~ | ~ | = |
/// | **i64** | x | x | x | x | = | x | x | x | x | ~ | ~ | ~ | ~ |
/// | **u8** | x | x | = | = | = | = | = | = | = | = | = | = | = |
/// | **u16** | x | x | x | = | = | x | = | = | = | ~ | ~ | = | = |
/// | **u32** | x | x | x | x | = | x | x | = | = | ~ | ~ | ~ | = |
/// | **u64** | x | x | x | x | x | x | x | x | = | ~ | ~ | ~ | ~ |
/// | **f16** | x | x | x | x | x | x | x | x | x | = | ~ | = | = |
/// | **bf16** | x | x | x | x | x | x | x | x | x | ~ | = | = | = |
/// | **f32** | x | x | x | x | x | x | x | x | x | ~ | ~ | = | = |
/// | **f64** | x | x | x | x | x | x | x | x | x | ~ | ~ | ~ | = |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputDtype {
    /// The array's data type, unchanged (the default).
    #[default]
    Native,
    /// Cast every element to this type.
    Cast(Dtype),
}

impl OutputDtype {
    /// The concrete type a batch of an array of type `source` has.
    #[must_use]
    pub fn resolve(self, source: Dtype) -> Dtype {
        match self {
            OutputDtype::Native => source,
            OutputDtype::Cast(d) => d,
        }
    }
}

impl FromStr for OutputDtype {
    type Err = UnknownDtype;

    fn from_str(s: &str) -> Result<Self> {
        if s == "native" { Ok(OutputDtype::Native) } else { s.parse().map(OutputDtype::Cast) }
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp, clippy::many_single_char_names)] // exact values are the point here
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Dtype::ALL {
            assert_eq!(d.name().parse::<Dtype>().unwrap(), d);
        }
        assert!("complex64".parse::<Dtype>().is_err());
    }

    #[test]
    fn lossy_casts_are_named() {
        assert!(Dtype::U16.lossy_cast_reason(Dtype::F32).is_none());
        assert!(Dtype::U8.lossy_cast_reason(Dtype::F16).is_none());
        // Float targets accept every source (rounded to nearest even).
        for (s, t) in
            [(Dtype::U16, Dtype::F16), (Dtype::U16, Dtype::BF16), (Dtype::I32, Dtype::F32), (Dtype::U64, Dtype::F32)]
        {
            assert!(s.lossy_cast_reason(t).is_none(), "{s} -> {t}");
            assert_eq!(s.cast_kind(t), CastKind::Rounded, "{s} -> {t}");
        }
        assert_eq!(Dtype::F64.cast_kind(Dtype::BF16), CastKind::Rounded);
        assert_eq!(Dtype::U8.cast_kind(Dtype::BF16), CastKind::Exact);
        assert_eq!(Dtype::BF16.cast_kind(Dtype::F32), CastKind::Exact);
        assert_eq!(Dtype::F16.cast_kind(Dtype::BF16), CastKind::Rounded, "bfloat16 has fewer significand bits");
        assert_eq!(Dtype::BF16.cast_kind(Dtype::F16), CastKind::Rounded, "float16 has a smaller range");
        // Integer targets that cannot hold the source's range stay refused.
        let narrow = Dtype::U16.lossy_cast_reason(Dtype::I16).unwrap();
        assert!(narrow.contains("uint16") && narrow.contains("int16"), "{narrow}");
        assert_eq!(Dtype::U16.cast_kind(Dtype::I16), CastKind::Refused);
        assert!(Dtype::U8.lossy_cast_reason(Dtype::I16).is_none());
        assert!(Dtype::F32.lossy_cast_reason(Dtype::BF16).is_none());
        assert!(Dtype::F32.lossy_cast_reason(Dtype::U8).is_some());
        assert_eq!(Dtype::F16.cast_kind(Dtype::I64), CastKind::Refused, "fractions are truncated");
        assert_eq!(Dtype::I8.cast_kind(Dtype::Bool), CastKind::Refused);
        assert_eq!(Dtype::Bool.cast_kind(Dtype::U8), CastKind::Exact);
    }

    fn short(d: Dtype) -> &'static str {
        match d {
            Dtype::Bool => "bool",
            Dtype::I8 => "i8",
            Dtype::I16 => "i16",
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::U8 => "u8",
            Dtype::U16 => "u16",
            Dtype::U32 => "u32",
            Dtype::U64 => "u64",
            Dtype::F16 => "f16",
            Dtype::BF16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }

    /// The cast table, as the README and [`OutputDtype`]'s rustdoc show it.
    fn cast_table() -> Vec<String> {
        let mut lines = vec![
            format!("| from \\ to | {} |", Dtype::ALL.map(short).join(" | ")),
            format!("{}|", "|---".repeat(Dtype::ALL.len() + 1)),
        ];
        for s in Dtype::ALL {
            let row: Vec<String> = Dtype::ALL.iter().map(|&t| s.cast_kind(t).symbol().to_string()).collect();
            lines.push(format!("| **{}** | {} |", short(s), row.join(" | ")));
        }
        lines
    }

    #[test]
    fn the_cast_table_is_documented_as_the_code_decides() {
        let table = cast_table();
        let doc = table.iter().map(|l| format!("/// {l}\n")).collect::<Vec<_>>().concat();
        assert!(include_str!("dtype.rs").contains(&doc), "OutputDtype's rustdoc table differs from cast_kind:\n{doc}");
        let readme = include_str!("../../../README.md");
        let md = table.iter().map(|l| format!("{l}\n")).collect::<Vec<_>>().concat();
        assert!(readme.contains(&md), "the README's cast table differs from cast_kind:\n{md}");
        // Spot checks of the table itself (a row per source, a column per target).
        assert!(table.contains(&"| **u16** | x | x | x | = | = | x | = | = | = | ~ | ~ | = | = |".to_owned()));
        assert!(table.contains(&"| **f64** | x | x | x | x | x | x | x | x | x | ~ | ~ | ~ | = |".to_owned()));
    }

    /// Every finite non-negative value of binary16 (`mb` 10, `eb` 5) or bfloat16 (7, 8), with
    /// its bits, in increasing order, and infinity at 2^(emax + 1): where rounding past the
    /// largest finite value goes.
    fn small_float_values(mb: u32, eb: u32) -> Vec<(f64, u16)> {
        let inf = ((1u16 << eb) - 1) << mb;
        let bias = (1i32 << (eb - 1)) - 1;
        let mut v: Vec<(f64, u16)> = (0..inf)
            .map(|b| {
                let (e, m) = (i32::from(b >> mb), f64::from(b & ((1 << mb) - 1)));
                let x = if e == 0 {
                    m * 2f64.powi(1 - bias - mb as i32)
                } else {
                    (1.0 + m / f64::from(1u32 << mb)) * 2f64.powi(e - bias)
                };
                (x, b)
            })
            .collect();
        v.push((2f64.powi(bias + 1), inf));
        v
    }

    /// The nearest of `values` to the integer `x` (|x| < 2^53), ties to the even bit pattern:
    /// round to nearest even by its definition, independent of the conversion code.
    fn nearest_even(values: &[(f64, u16)], x: i64, sign_bit: u16) -> u16 {
        let a = x.unsigned_abs() as f64; // exact below 2^53
        let sign = if x < 0 { sign_bit } else { 0 };
        let i = values.partition_point(|&(v, _)| v < a);
        if i == values.len() {
            return sign | values[i - 1].1; // beyond 2^(emax + 1): infinity
        }
        if values[i].0 == a || i == 0 {
            return sign | values[i].1;
        }
        let ((lo, lb), (hi, hb)) = (values[i - 1], values[i]);
        // a, lo and hi are integers (or 0) below 2^53 here: the differences are exact.
        let b = match (a - lo).total_cmp(&(hi - a)) {
            std::cmp::Ordering::Less => lb,
            std::cmp::Ordering::Greater => hb,
            std::cmp::Ordering::Equal => {
                if lb & 1 == 0 {
                    lb
                } else {
                    hb
                }
            }
        };
        sign | b
    }

    #[test]
    fn integers_round_to_the_nearest_even_half_and_bfloat() {
        let f16s = small_float_values(10, 5);
        let bf16s = small_float_values(7, 8);
        // Every uint16 and int16.
        for x in 0..=u16::MAX {
            let b = u64::from(x);
            assert_eq!(
                Dtype::U16.convert_bits(Dtype::BF16, b),
                u64::from(nearest_even(&bf16s, x.into(), 0x8000)),
                "u16 {x} -> bf16"
            );
            assert_eq!(
                Dtype::U16.convert_bits(Dtype::F16, b),
                u64::from(nearest_even(&f16s, x.into(), 0x8000)),
                "u16 {x} -> f16"
            );
            let i = i64::from(x as i16);
            assert_eq!(
                Dtype::I16.convert_bits(Dtype::BF16, b),
                u64::from(nearest_even(&bf16s, i, 0x8000)),
                "i16 {i} -> bf16"
            );
            assert_eq!(
                Dtype::I16.convert_bits(Dtype::F16, b),
                u64::from(nearest_even(&f16s, i, 0x8000)),
                "i16 {i} -> f16"
            );
        }
        // int32 and uint32 at every magnitude.
        let mut r = 0x9E37_79B9_7F4A_7C15u64;
        for k in 0..200_000u32 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            let i = ((r as u32) >> (k % 32)) as i32 * if k % 2 == 0 { 1 } else { -1 };
            let b = u64::from(i as u32);
            assert_eq!(
                Dtype::I32.convert_bits(Dtype::F16, b),
                u64::from(nearest_even(&f16s, i.into(), 0x8000)),
                "i32 {i} -> f16"
            );
            assert_eq!(
                Dtype::I32.convert_bits(Dtype::BF16, b),
                u64::from(nearest_even(&bf16s, i.into(), 0x8000)),
                "i32 {i} -> bf16"
            );
            let u = (r as u32) >> (k % 32);
            assert_eq!(
                Dtype::U32.convert_bits(Dtype::BF16, u.into()),
                u64::from(nearest_even(&bf16s, u.into(), 0x8000)),
                "u32 {u} -> bf16"
            );
        }
    }

    /// Values where rounding twice (through f32, or through f64) gives another answer than
    /// rounding once; the expected bits are worked out by hand (the same values as the
    /// kernel's `casts_round_once_on_exact_reference_values`).
    #[test]
    fn casts_round_once_on_exact_reference_values() {
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(Dtype::F64.convert_bits(Dtype::F16, x.to_bits()), 0x3C01, "numpy: 1.0009765625");
        assert_eq!(Dtype::F64.convert_bits(Dtype::F16, (-x).to_bits()), 0xBC01);
        let y = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(Dtype::F64.convert_bits(Dtype::BF16, y.to_bits()), 0x3F81, "f64 -> bf16: 1 + 2^-7");
        assert_eq!(Dtype::F64.convert_bits(Dtype::BF16, (1.0 + 2f64.powi(-8)).to_bits()), 0x3F80, "a tie: to even");
        let z = 2f64.powi(-25) + 2f64.powi(-60);
        assert_eq!(Dtype::F64.convert_bits(Dtype::F16, z.to_bits()), 0x0001);
        assert_eq!(Dtype::F64.convert_bits(Dtype::F16, 2f64.powi(-25).to_bits()), 0x0000, "tie to even: 0");
        assert_eq!(Dtype::F64.convert_bits(Dtype::BF16, 1e300f64.to_bits()), 0x7F80, "overflow: infinity");
        assert_eq!(Dtype::F64.convert_bits(Dtype::BF16, f64::NAN.to_bits()) & 0x7FC0, 0x7FC0, "NaN stays a quiet NaN");
        assert_eq!(Dtype::F32.convert_bits(Dtype::BF16, u64::from(1.5f32.to_bits())), 0x3FC0);
        let i = (1i64 << 53) + (1 << 29) + 1;
        assert_eq!(Dtype::I64.convert_bits(Dtype::F32, i as u64), u64::from(9_007_200_328_482_816f32.to_bits()));
        assert_eq!(Dtype::I64.convert_bits(Dtype::F32, (-i) as u64), u64::from((-9_007_200_328_482_816f32).to_bits()));
        let u = (1u64 << 63) + (1 << 39) + 1;
        assert_eq!(Dtype::U64.convert_bits(Dtype::F32, u), 0x5F00_0001, "exponent 63, mantissa 2^-23");
        let b = (1i64 << 60) + (1 << 52) + 1;
        assert_eq!(Dtype::I64.convert_bits(Dtype::BF16, b as u64), 0x5D81);
        assert_eq!(Dtype::I32.convert_bits(Dtype::F16, 2049), 0x6800, "2049 -> 2048 (tie to even)");
        assert_eq!(Dtype::I32.convert_bits(Dtype::F16, 65_519), 0x7BFF, "65519 -> 65504");
        assert_eq!(Dtype::I32.convert_bits(Dtype::F16, 65_520), 0x7C00, "65520 -> inf");
        assert_eq!(Dtype::U16.convert_bits(Dtype::F16, 65_535), 0x7C00, "numpy: uint16 65535 -> float16 inf");
        // What the old path (f64, then half's from_f64, which drops the low 32 bits before
        // rounding) got wrong: int32 2^30 + 2^22 + 1 is past the tie, so it rounds up.
        assert_eq!(Dtype::I32.convert_bits(Dtype::BF16, (1u64 << 30) + (1 << 22) + 1), 0x4E81);
        // Integers wrap, floats truncate and saturate, anything to bool is != 0.
        assert_eq!(Dtype::U16.convert_bits(Dtype::I8, 300), 44);
        assert_eq!(Dtype::I8.convert_bits(Dtype::I32, 0xFF), 0xFFFF_FFFF);
        assert_eq!(Dtype::F32.convert_bits(Dtype::U8, u64::from((-3.7f32).to_bits())), 0);
        assert_eq!(Dtype::F32.convert_bits(Dtype::I16, u64::from((-3.7f32).to_bits())), 0xFFFD);
        assert_eq!(Dtype::F64.convert_bits(Dtype::Bool, 0.5f64.to_bits()), 1);
    }

    #[test]
    fn write_f64_rounds_once() {
        let mut buf = [0u8; 2];
        Dtype::BF16.write_f64(1.0 + 2f64.powi(-8) + 2f64.powi(-40), &mut buf);
        assert_eq!(u16::from_ne_bytes(buf), 0x3F81);
        Dtype::F16.write_f64(1.0 + 2f64.powi(-11) + 2f64.powi(-40), &mut buf);
        assert_eq!(u16::from_ne_bytes(buf), 0x3C01);
    }

    #[test]
    fn f64_round_trip() {
        let mut buf = [0u8; 8];
        for d in Dtype::ALL {
            d.write_f64(1.0, &mut buf);
            assert!((d.read_f64(&buf) - 1.0).abs() < f64::EPSILON, "{d}");
        }
        Dtype::U8.write_f64(300.0, &mut buf);
        assert_eq!(buf[0], 255, "integers saturate");
    }
}
