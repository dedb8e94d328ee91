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

    /// Why casting every value of `self` to `to` can lose information, or `None` when it is
    /// exact. Integer sources going to float outputs that cannot hold all their values, and
    /// integer narrowing, are lossy; float to float narrowing is an accepted rounding.
    #[must_use]
    pub fn lossy_cast_reason(self, to: Dtype) -> Option<String> {
        if self == to {
            return None;
        }
        match (self.integer_range(), to.integer_range()) {
            (Some((lo, hi)), Some((tlo, thi))) if lo < tlo || hi > thi => {
                Some(format!("{} values range over [{lo}, {hi}] but {} holds [{tlo}, {thi}]", self.name(), to.name()))
            }
            (Some((lo, hi)), None) if hi.max(-lo) > to.exact_integer_limit() => Some(format!(
                "{} holds integers exactly only up to {} but {} values reach {}",
                to.name(),
                to.exact_integer_limit(),
                self.name(),
                hi.max(-lo)
            )),
            (None, Some(_)) => Some(format!(
                "casting floating-point {} to integer {} truncates fractions and saturates",
                self.name(),
                to.name()
            )),
            _ => None,
        }
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

    /// Encode one `f64` as this type in native byte order (integers saturate, NaN → 0).
    pub fn write_f64(self, v: f64, out: &mut [u8]) {
        match self {
            Dtype::Bool => out[0] = u8::from(v != 0.0),
            Dtype::I8 => out[0] = (v as i8) as u8,
            Dtype::U8 => out[0] = v as u8,
            Dtype::I16 => out[..2].copy_from_slice(&(v as i16).to_ne_bytes()),
            Dtype::U16 => out[..2].copy_from_slice(&(v as u16).to_ne_bytes()),
            Dtype::F16 => out[..2].copy_from_slice(&f16::from_f64(v).to_ne_bytes()),
            Dtype::BF16 => out[..2].copy_from_slice(&bf16::from_f64(v).to_ne_bytes()),
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

/// The element type of a batch: the array's own type or a cast.
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
        assert!(Dtype::U16.lossy_cast_reason(Dtype::F16).is_some());
        assert!(Dtype::I32.lossy_cast_reason(Dtype::F32).is_some());
        assert!(Dtype::U16.lossy_cast_reason(Dtype::I16).is_some());
        assert!(Dtype::U8.lossy_cast_reason(Dtype::I16).is_none());
        assert!(Dtype::F32.lossy_cast_reason(Dtype::BF16).is_none());
        assert!(Dtype::F32.lossy_cast_reason(Dtype::U8).is_some());
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
