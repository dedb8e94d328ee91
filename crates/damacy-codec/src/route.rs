//! Which executor decodes each codec of a chain: a device kernel, or the CPU (zarrs), with the
//! reason. The route is shown by `damacy inspect`; the number of chunks each route decoded is in
//! the stats (`units_decoded`, `units_decoded_device`), never silent.

use std::fmt;

use zarrs::metadata::v3::MetadataV3;

use crate::codec::{ChainRoute, DeviceChain, DeviceCodec, classify};

/// Where a codec is decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A damacy device kernel decodes it.
    Gpu {
        /// The kernel (or stage) that runs.
        kernel: &'static str,
    },
    /// zarrs decodes it on the host.
    Cpu {
        /// Why it cannot run on the device.
        reason: String,
    },
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Gpu { kernel } => write!(f, "GPU ({kernel})"),
            Route::Cpu { reason } => write!(f, "CPU ({reason})"),
        }
    }
}

/// One codec of a chain with its route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecRoute {
    /// The codec's name and key configuration (`blosc(lz4, shuffle, clevel 5)`).
    pub codec: String,
    /// Where it is decoded.
    pub route: Route,
}

/// Describe a codec's metadata briefly: name and the configuration that matters.
#[must_use]
pub fn describe(meta: &MetadataV3) -> String {
    let config = meta.configuration();
    let get = |k: &str| config.and_then(|c| c.get(k)).map(|v| v.to_string().trim_matches('"').to_owned());
    let parts: Vec<String> = match meta.name() {
        "blosc" => ["cname", "shuffle", "clevel", "typesize", "blocksize"]
            .iter()
            .filter_map(|k| get(k).map(|v| format!("{k}={v}")))
            .collect(),
        "zstd" => ["level", "checksum"].iter().filter_map(|k| get(k).map(|v| format!("{k}={v}"))).collect(),
        "gzip" | "zlib" | "numcodecs.zlib" => get("level").map(|v| vec![format!("level={v}")]).unwrap_or_default(),
        "bytes" => get("endian").map(|v| vec![v]).unwrap_or_default(),
        "transpose" => get("order").map(|v| vec![format!("order={v}")]).unwrap_or_default(),
        "sharding_indexed" => get("index_location").map(|v| vec![format!("index at {v}")]).unwrap_or_default(),
        _ => Vec::new(),
    };
    if parts.is_empty() { meta.name().to_owned() } else { format!("{}({})", meta.name(), parts.join(", ")) }
}

/// The device stage that decodes a codec, when the chain runs on the device.
fn kernel_for(meta: &MetadataV3, chain: DeviceChain) -> &'static str {
    let cname = meta.configuration().and_then(|c| c.get("cname")).and_then(|v| v.as_str());
    match meta.name() {
        "blosc" if chain.codec == DeviceCodec::Blosc => match cname {
            Some("zstd") => "blosc parse, zstd frame parse, zstd kernel, unshuffle/bitunshuffle",
            Some("blosclz") => "blosc parse, blosclz kernel, unshuffle/bitunshuffle",
            Some("zlib") => "blosc parse, inflate kernel, unshuffle/bitunshuffle",
            _ => "blosc parse, lz4 kernel, unshuffle/bitunshuffle",
        },
        "zstd" if chain.codec == DeviceCodec::Zstd => {
            "zstd frame parse, zstd kernel (XXH64 when checksums are validated)"
        }
        "gzip" if chain.codec == DeviceCodec::Gzip => "inflate kernel (CRC32 and ISIZE when checksums are validated)",
        "zlib" | "numcodecs.zlib" if chain.codec == DeviceCodec::Zlib => {
            "inflate kernel (Adler-32 when checksums are validated)"
        }
        "crc32c" => "crc32c kernel",
        "bytes" if chain.codec != DeviceCodec::Raw => {
            if chain.big_endian {
                "the decompressor's output, byte-swapped in assemble"
            } else {
                "the decompressor's output as is"
            }
        }
        // Raw chunks without a checksum are uploaded straight into the decode output; with
        // one, the crc32c kernel reads them from the upload and a copy kernel moves them.
        "bytes" if chain.crc32c && chain.big_endian => "raw copy kernel, byte swap in assemble",
        "bytes" if chain.crc32c => "raw copy kernel",
        "bytes" if chain.big_endian => "uploaded straight into the decode output, byte swap in assemble",
        _ => "uploaded straight into the decode output (no kernel)",
    }
}

/// The route of each codec of a decode chain (the codecs of one chunk, or of one inner chunk
/// of a shard). A chain runs on the device only when every codec in it has a device stage;
/// otherwise every codec of it decodes on the CPU, with the reason. `dtype_size` is the
/// element size in bytes.
#[must_use]
pub fn routes(chain: &[MetadataV3], dtype_size: usize) -> Vec<CodecRoute> {
    let on_device = classify(chain, dtype_size);
    chain
        .iter()
        .map(|meta| {
            let route = match (&on_device, meta.name()) {
                (_, "sharding_indexed") => Route::Cpu {
                    reason: "shard indexes are decoded on the host and cached; inner chunks follow their own chain"
                        .into(),
                },
                (ChainRoute::Device(c), _) => Route::Gpu { kernel: kernel_for(meta, *c) },
                (ChainRoute::Cpu { reason }, _) => Route::Cpu { reason: reason.clone() },
            };
            CodecRoute { codec: describe(meta), route }
        })
        .collect()
}

/// The route of a shard index chain: always decoded on the host, then cached.
#[must_use]
pub fn index_routes(chain: &[MetadataV3]) -> Vec<CodecRoute> {
    chain
        .iter()
        .map(|meta| CodecRoute {
            codec: describe(meta),
            route: Route::Cpu { reason: "shard indexes are decoded on the host and cached".into() },
        })
        .collect()
}
