//! Which executor decodes each codec of a chain: a device kernel, or the CPU (zarrs), with the
//! reason. The route is shown by `damacy inspect` and recorded in stats, never silent.

use std::fmt;

use zarrs::metadata::v3::MetadataV3;

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

/// The device kernels this build of damacy has, by codec. Codecs not listed decode on the
/// CPU. Updated as kernels land; `damacy inspect` prints the result for any store.
const DEVICE_KERNELS: &[(&str, &str)] = &[];

fn kernel_for(name: &str) -> Option<&'static str> {
    DEVICE_KERNELS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
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
        "gzip" | "zlib" => get("level").map(|v| vec![format!("level={v}")]).unwrap_or_default(),
        "bytes" => get("endian").map(|v| vec![v]).unwrap_or_default(),
        "transpose" => get("order").map(|v| vec![format!("order={v}")]).unwrap_or_default(),
        "sharding_indexed" => get("index_location").map(|v| vec![format!("index at {v}")]).unwrap_or_default(),
        _ => Vec::new(),
    };
    if parts.is_empty() { meta.name().to_owned() } else { format!("{}({})", meta.name(), parts.join(", ")) }
}

/// The route of each codec of a chain.
#[must_use]
pub fn routes(chain: &[MetadataV3]) -> Vec<CodecRoute> {
    chain
        .iter()
        .map(|meta| {
            let route = match meta.name() {
                "sharding_indexed" => Route::Cpu {
                    reason: "shard indexes are decoded on the host and cached; inner chunks follow their own chain"
                        .into(),
                },
                name => match kernel_for(name) {
                    Some(kernel) => Route::Gpu { kernel },
                    None => Route::Cpu { reason: format!("no device kernel for {name} in this build") },
                },
            };
            CodecRoute { codec: describe(meta), route }
        })
        .collect()
}
