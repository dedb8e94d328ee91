//! Codec chains classified once, when an array is opened: a chain whose every codec has a device
//! stage becomes a [`DeviceChain`] (one [`DeviceCodec`] variant plus byte order and checksum);
//! anything else decodes on the CPU with zarrs' own chain, and [`ChainRoute::Cpu`] says why.
//! Classification reads zarrs' typed codec configurations, never JSON by hand.

use std::fmt;

use zarrs::metadata::Endianness;
use zarrs::metadata::v3::MetadataV3;
use zarrs::metadata_ext::codec::blosc::{BloscCodecConfiguration, BloscCompressor};
use zarrs::metadata_ext::codec::bytes::BytesCodecConfiguration;
use zarrs::metadata_ext::codec::gzip::GzipCodecConfiguration;
use zarrs::metadata_ext::codec::zlib::ZlibCodecConfiguration;
use zarrs::metadata_ext::codec::zstd::ZstdCodecConfiguration;

/// The bytes-to-bytes codec a device chain decodes with a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceCodec {
    /// No compression: the chunk's bytes are its elements (a copy kernel).
    Raw,
    /// blosc with lz4, lz4hc, blosclz, zstd, zlib or memcpyed blocks and any shuffle.
    Blosc,
    /// zstd: one or more frames per chunk, the XXH64 content checksum verified when the array's
    /// options validate checksums.
    Zstd,
    /// gzip (zarr v3 `gzip`, numcodecs `gzip`): one or more members per chunk, CRC32 and ISIZE
    /// verified when the array's options validate checksums.
    Gzip,
    /// zlib (numcodecs `zlib`, zarrs `numcodecs.zlib`), Adler-32 verified when the array's
    /// options validate checksums.
    Zlib,
}

/// A chain the device decodes: `bytes`, then at most one compressor (blosc, zstd, gzip or
/// zlib), then at most a crc32c.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DeviceChain {
    /// The compressor.
    pub codec: DeviceCodec,
    /// A final crc32c, checked by a kernel.
    pub crc32c: bool,
    /// Stored elements are big-endian (and wider than one byte).
    pub big_endian: bool,
}

/// How the chunks of an array decode.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChainRoute {
    /// Device kernels (on a GPU, or the host emulator).
    Device(DeviceChain),
    /// zarrs' codec chain on the host, for this reason.
    Cpu {
        /// Why the device cannot decode this chain.
        reason: String,
    },
}

impl fmt::Display for ChainRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainRoute::Device(c) => write!(f, "device ({:?}{})", c.codec, if c.crc32c { " + crc32c" } else { "" }),
            ChainRoute::Cpu { reason } => write!(f, "cpu ({reason})"),
        }
    }
}

fn bytes_big_endian(meta: &MetadataV3, dtype_size: usize) -> Result<bool, String> {
    let Some(_) = meta.configuration() else { return Ok(false) };
    let BytesCodecConfiguration::V1(config) =
        meta.to_typed_configuration::<BytesCodecConfiguration>().map_err(|e| format!("bytes configuration: {e}"))?
    else {
        return Err("unknown bytes configuration version".into());
    };
    Ok(config.endian == Some(Endianness::Big) && dtype_size > 1)
}

fn blosc_has_kernel(meta: &MetadataV3) -> Result<(), String> {
    let cname = match meta.to_typed_configuration::<BloscCodecConfiguration>() {
        Ok(BloscCodecConfiguration::V1(c)) => c.cname,
        Ok(BloscCodecConfiguration::Numcodecs(c)) => c.cname,
        Ok(_) => return Err("unknown blosc configuration version".into()),
        Err(e) => return Err(format!("blosc configuration: {e}")),
    };
    match cname {
        BloscCompressor::LZ4
        | BloscCompressor::LZ4HC
        | BloscCompressor::BloscLZ
        | BloscCompressor::Zstd
        | BloscCompressor::Zlib => Ok(()),
        BloscCompressor::Snappy => {
            Err("blosc with cname snappy has no device kernel yet (lz4, lz4hc, blosclz, zstd and zlib do)".into())
        }
    }
}

/// Checks that a zstd codec's configuration is one zarrs knows (its level does not matter to
/// decoding; whether frames carry a checksum is read from each frame).
fn zstd_config(meta: &MetadataV3) -> Result<(), String> {
    match meta.to_typed_configuration::<ZstdCodecConfiguration>() {
        Ok(ZstdCodecConfiguration::V1(_) | ZstdCodecConfiguration::Numcodecs(_)) => Ok(()),
        Ok(_) => Err("unknown zstd configuration version".into()),
        Err(e) => Err(format!("zstd configuration: {e}")),
    }
}

/// Checks that a gzip or zlib codec's configuration is one zarrs knows (the level does not
/// matter to decoding).
fn deflate_config(meta: &MetadataV3) -> Result<DeviceCodec, String> {
    if meta.name() == "gzip" {
        match meta.to_typed_configuration::<GzipCodecConfiguration>() {
            Ok(GzipCodecConfiguration::V1(_)) => Ok(DeviceCodec::Gzip),
            Ok(_) => Err("unknown gzip configuration version".into()),
            Err(e) => Err(format!("gzip configuration: {e}")),
        }
    } else {
        match meta.to_typed_configuration::<ZlibCodecConfiguration>() {
            Ok(ZlibCodecConfiguration::V1(_)) => Ok(DeviceCodec::Zlib),
            Ok(_) => Err("unknown zlib configuration version".into()),
            Err(e) => Err(format!("zlib configuration: {e}")),
        }
    }
}

/// Classify the codec chain of one decode unit (a chunk, or an inner chunk of a shard).
/// `dtype_size` is the element size in bytes.
#[must_use]
pub fn classify(chain: &[MetadataV3], dtype_size: usize) -> ChainRoute {
    match device_chain(chain, dtype_size) {
        Ok(c) => ChainRoute::Device(c),
        Err(reason) => ChainRoute::Cpu { reason },
    }
}

fn device_chain(chain: &[MetadataV3], dtype_size: usize) -> Result<DeviceChain, String> {
    let mut out = DeviceChain { codec: DeviceCodec::Raw, crc32c: false, big_endian: false };
    let mut seen_bytes = false;
    for (i, meta) in chain.iter().enumerate() {
        match meta.name() {
            "bytes" if !seen_bytes => {
                seen_bytes = true;
                out.big_endian = bytes_big_endian(meta, dtype_size)?;
            }
            "blosc" if seen_bytes && out.codec == DeviceCodec::Raw && !out.crc32c => {
                blosc_has_kernel(meta)?;
                out.codec = DeviceCodec::Blosc;
            }
            "zstd" if seen_bytes && out.codec == DeviceCodec::Raw && !out.crc32c => {
                zstd_config(meta)?;
                out.codec = DeviceCodec::Zstd;
            }
            "gzip" | "zlib" | "numcodecs.zlib" if seen_bytes && out.codec == DeviceCodec::Raw && !out.crc32c => {
                out.codec = deflate_config(meta)?;
            }
            "crc32c" if seen_bytes && i + 1 == chain.len() => out.crc32c = true,
            "crc32c" => return Err("crc32c is not the last codec; the device route verifies it only there".into()),
            "blosc" | "zstd" | "gzip" | "zlib" | "numcodecs.zlib" | "bytes" => {
                return Err(format!(
                    "{} appears out of the order bytes, a compressor (blosc, zstd, gzip or zlib), crc32c",
                    meta.name()
                ));
            }
            "transpose" => return Err("the chain has a transpose, which the device route does not run yet".into()),
            "sharding_indexed" => return Err("nested sharding runs on the CPU".into()),
            name => return Err(format!("{name} has no device kernel yet")),
        }
    }
    if !seen_bytes {
        return Err("the chain has no bytes codec".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(json: &str) -> Vec<MetadataV3> {
        serde_json::from_str(json).unwrap()
    }

    fn device(json: &str, size: usize) -> DeviceChain {
        match classify(&meta(json), size) {
            ChainRoute::Device(c) => c,
            ChainRoute::Cpu { reason } => panic!("{json}: {reason}"),
        }
    }

    fn cpu(json: &str) -> String {
        match classify(&meta(json), 2) {
            ChainRoute::Cpu { reason } => reason,
            ChainRoute::Device(c) => panic!("{json}: {c:?}"),
        }
    }

    #[test]
    fn chains_that_route_to_the_device() {
        let c = device(r#"[{"name":"bytes","configuration":{"endian":"big"}}]"#, 2);
        assert_eq!(c, DeviceChain { codec: DeviceCodec::Raw, crc32c: false, big_endian: true });
        let c = device(r#"[{"name":"bytes","configuration":{"endian":"big"}}]"#, 1);
        assert!(!c.big_endian, "one-byte elements have no byte order");
        let c = device(
            r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"lz4hc","clevel":5,"shuffle":"shuffle","typesize":4,"blocksize":0}},{"name":"crc32c"}]"#,
            4,
        );
        assert!(c.codec == DeviceCodec::Blosc && c.crc32c && !c.big_endian);
        let c = device(r#"[{"name":"bytes"},{"name":"zstd","configuration":{"level":0,"checksum":false}}]"#, 2);
        assert_eq!(c, DeviceChain { codec: DeviceCodec::Zstd, crc32c: false, big_endian: false });
        let c = device(
            r#"[{"name":"bytes","configuration":{"endian":"big"}},{"name":"zstd","configuration":{"level":3,"checksum":true}},{"name":"crc32c"}]"#,
            4,
        );
        assert_eq!(c, DeviceChain { codec: DeviceCodec::Zstd, crc32c: true, big_endian: true });
        let c = device(
            r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"zstd","clevel":5,"shuffle":"bitshuffle","typesize":2,"blocksize":0}}]"#,
            2,
        );
        assert_eq!(c.codec, DeviceCodec::Blosc);
        let c = device(r#"[{"name":"bytes"},{"name":"gzip","configuration":{"level":5}},{"name":"crc32c"}]"#, 2);
        assert_eq!(c, DeviceChain { codec: DeviceCodec::Gzip, crc32c: true, big_endian: false });
        let c = device(r#"[{"name":"bytes"},{"name":"numcodecs.zlib","configuration":{"level":1}}]"#, 4);
        assert_eq!(c.codec, DeviceCodec::Zlib);
        let c = device(
            r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"zlib","clevel":5,"shuffle":"noshuffle","blocksize":0}}]"#,
            2,
        );
        assert_eq!(c.codec, DeviceCodec::Blosc);
    }

    #[test]
    fn chains_that_stay_on_the_cpu_say_why() {
        let e = cpu(
            r#"[{"name":"bytes"},{"name":"zstd","configuration":{"level":0,"checksum":false}},{"name":"zstd","configuration":{"level":0,"checksum":false}}]"#,
        );
        assert!(e.contains("zstd appears out of the order"), "{e}");
        let e = cpu(r#"[{"name":"bytes"},{"name":"zstd","configuration":{"level":0,"checksum":false,"dict":1}}]"#);
        assert!(e.contains("zstd configuration"), "{e}");
        let e = cpu(
            r#"[{"name":"bytes"},{"name":"gzip","configuration":{"level":5}},{"name":"zstd","configuration":{"level":0,"checksum":false}}]"#,
        );
        assert!(e.contains("zstd appears out of the order"), "{e}");
        assert!(
            cpu(r#"[{"name":"bytes"},{"name":"gzip","configuration":{"level":50}}]"#).contains("gzip configuration")
        );
        let e = cpu(
            r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"snappy","clevel":5,"shuffle":"noshuffle","blocksize":0}}]"#,
        );
        assert!(e.contains("snappy"), "{e}");
        assert!(
            cpu(r#"[{"name":"transpose","configuration":{"order":[1,0]}},{"name":"bytes"}]"#).contains("transpose")
        );
        let e = cpu(
            r#"[{"name":"bytes"},{"name":"crc32c"},{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"noshuffle","blocksize":0}}]"#,
        );
        assert!(e.contains("crc32c is not the last"), "{e}");
    }
}
