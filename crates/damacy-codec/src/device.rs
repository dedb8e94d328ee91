//! The device executor: damacy's own kernels (damacy-kernels) decode the chunks whose whole
//! codec chain has a device stage, batched per wave; every other chain goes to the CPU
//! executor. The same code drives a CUDA GPU or the host emulator of the kernels.

use std::sync::Mutex;
use std::time::Instant;

use damacy_kernels::decode::{ChunkInput, DecodeConfig, Decoder};
use damacy_kernels::device::Device;
use zarrs::metadata::v3::MetadataV3;

use crate::array::ArrayInfo;
use crate::config::Executor;
use crate::cpu::EncodedUnit;
use crate::error::{Error, Result};
use crate::stats::Stats;

/// How a chain decodes on the device, when it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceChain {
    /// The chunk is one blosc1 frame (else raw `bytes`).
    pub blosc: bool,
    /// A crc32c ends the encoded bytes.
    pub crc32c: bool,
    /// The `bytes` codec stored big-endian elements (swapped after decode).
    pub big_endian: bool,
}

/// Whether a decode chain (the codec metadata of one chunk or inner chunk) runs on the device,
/// and why not.
pub fn device_chain(chain: &[MetadataV3], dtype_size: usize) -> std::result::Result<DeviceChain, String> {
    let mut out = DeviceChain { blosc: false, crc32c: false, big_endian: false };
    let mut seen_bytes = false;
    for (i, meta) in chain.iter().enumerate() {
        let config = meta.configuration();
        let get = |k: &str| config.and_then(|c| c.get(k)).and_then(|v| v.as_str().map(str::to_owned));
        match meta.name() {
            "bytes" if !seen_bytes => {
                seen_bytes = true;
                out.big_endian = get("endian").as_deref() == Some("big") && dtype_size > 1;
            }
            "blosc" if seen_bytes && !out.blosc && !out.crc32c => {
                let cname = get("cname").unwrap_or_default();
                if !matches!(cname.as_str(), "lz4" | "lz4hc" | "blosclz") {
                    return Err(format!(
                        "blosc with cname {cname} has no device kernel yet (lz4, lz4hc and blosclz do)"
                    ));
                }
                out.blosc = true;
            }
            "crc32c" if seen_bytes && i + 1 == chain.len() => out.crc32c = true,
            "crc32c" => return Err("crc32c is not the last codec; the device route verifies it only there".into()),
            "blosc" | "bytes" => return Err(format!("{} appears out of the order bytes, blosc, crc32c", meta.name())),
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

/// A device (CUDA or emulated) with its batched decoder.
pub(crate) struct DeviceExecutor {
    device: Device,
    decoder: Mutex<Decoder>,
}

impl std::fmt::Debug for DeviceExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceExecutor").field("device", &self.device.describe()).finish_non_exhaustive()
    }
}

/// What the executor choice came to: a device, or the CPU and why.
pub(crate) enum Selected {
    Device(DeviceExecutor),
    Cpu(String),
}

fn kernel_error(e: &damacy_kernels::Error) -> Error {
    Error::invalid(format!("device executor: {e}"))
}

impl DeviceExecutor {
    /// Pick the executor the configuration asks for. `Gpu` without a usable device is an error;
    /// `Auto` falls back to the CPU with the reason.
    pub(crate) fn select(executor: Executor, device: Option<usize>, threads: usize) -> Result<Selected> {
        let config = DecodeConfig::default().with_n_compute_threads(threads);
        let device = match executor {
            Executor::Cpu => return Ok(Selected::Cpu("the CPU executor was chosen".into())),
            Executor::Emulated => emulated()?,
            Executor::Auto | Executor::Gpu => match cuda(device) {
                Ok(d) => d,
                Err(reason) if executor == Executor::Auto => return Ok(Selected::Cpu(reason)),
                Err(reason) => return Err(Error::invalid(format!("executor gpu: {reason}"))),
            },
        };
        let decoder = Decoder::new(&device, config).map_err(|e| kernel_error(&e))?;
        Ok(Selected::Device(Self { device, decoder: Mutex::new(decoder) }))
    }

    /// The device, described.
    pub(crate) fn describe(&self) -> String {
        self.device.describe()
    }

    /// Decode units of `array` on the device. Per-chunk failures are decode errors naming the
    /// unit; a device failure is an error for the whole batch.
    pub(crate) fn decode_units(
        &self,
        array: &ArrayInfo,
        chain: DeviceChain,
        units: &[EncodedUnit],
        stats: &Stats,
    ) -> Result<Vec<Vec<u8>>> {
        let expected = array.decode_shape().iter().product::<u64>() as usize * array.dtype.size();
        let inputs: Vec<ChunkInput<'_>> = units
            .iter()
            .map(|u| {
                let input = if chain.blosc { ChunkInput::blosc(&u.bytes) } else { ChunkInput::raw(&u.bytes) };
                let input = input.with_expected_len(expected);
                if chain.crc32c { input.with_crc32c() } else { input }
            })
            .collect();
        let started = Instant::now();
        let decoded = {
            let mut decoder =
                self.decoder.lock().map_err(|_| Error::invalid("device executor: a previous batch panicked"))?;
            decoder.decode_to_host(&inputs).map_err(|e| kernel_error(&e))?
        };
        stats.add_decode(started.elapsed());
        stats.add_device_parse(decoded.stats.decompress_parse);
        let mut out = Vec::with_capacity(units.len());
        for (unit, result) in units.iter().zip(decoded.chunks) {
            let mut bytes = result.map_err(|e| Error::decode(unit.location.clone(), e))?;
            if chain.big_endian {
                for element in bytes.chunks_exact_mut(array.dtype.size()) {
                    element.reverse();
                }
            }
            out.push(bytes);
        }
        stats.add_units_decoded(out.len() as u64);
        stats.add_units_decoded_device(out.len() as u64);
        stats.add_bytes_decoded((out.len() * expected) as u64);
        Ok(out)
    }
}

#[cfg(feature = "emulate")]
#[allow(clippy::unnecessary_wraps)] // one signature with the build that has no emulator
fn emulated() -> Result<Device> {
    Ok(Device::emulated(0))
}

#[cfg(not(feature = "emulate"))]
fn emulated() -> Result<Device> {
    Err(Error::Unsupported("executor emulated: this build has no kernel emulator (cargo feature `emulate`)".into()))
}

#[cfg(feature = "cuda")]
fn cuda(ordinal: Option<usize>) -> std::result::Result<Device, String> {
    Device::cuda(ordinal).map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda(_ordinal: Option<usize>) -> std::result::Result<Device, String> {
    Err("this build has no CUDA backend (cargo feature `cuda`)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(json: &str) -> Vec<MetadataV3> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn chains_that_route_to_the_device() {
        let c = device_chain(&meta(r#"[{"name":"bytes","configuration":{"endian":"big"}}]"#), 2).unwrap();
        assert_eq!(c, DeviceChain { blosc: false, crc32c: false, big_endian: true });
        let c = device_chain(
            &meta(r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"lz4hc"}},{"name":"crc32c"}]"#),
            4,
        )
        .unwrap();
        assert!(c.blosc && c.crc32c && !c.big_endian);
    }

    #[test]
    fn chains_that_stay_on_the_cpu_say_why() {
        let e =
            device_chain(&meta(r#"[{"name":"bytes"},{"name":"zstd","configuration":{"level":0}}]"#), 2).unwrap_err();
        assert!(e.contains("zstd"), "{e}");
        let e = device_chain(&meta(r#"[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"zlib"}}]"#), 2)
            .unwrap_err();
        assert!(e.contains("zlib"), "{e}");
        let e = device_chain(&meta(r#"[{"name":"transpose","configuration":{"order":[1,0]}},{"name":"bytes"}]"#), 2)
            .unwrap_err();
        assert!(e.contains("transpose"), "{e}");
        let e = device_chain(
            &meta(r#"[{"name":"bytes"},{"name":"crc32c"},{"name":"blosc","configuration":{"cname":"lz4"}}]"#),
            2,
        )
        .unwrap_err();
        assert!(e.contains("crc32c is not the last"), "{e}");
    }
}
