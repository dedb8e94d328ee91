//! What the fuzz targets share: one emulated decoder, its buffers pooled across iterations.

use std::sync::{Mutex, OnceLock};

use damacy_kernels::{DecodeConfig, Decoder, Device};

/// Waves of 2 MiB: every chunk a target decodes fits in one.
fn config() -> DecodeConfig {
    DecodeConfig::default()
        .with_wave_src_bytes(2 << 20)
        .with_wave_dst_bytes(2 << 20)
        .with_wave_streams(1 << 12)
        .with_slots(1)
}

/// The decoder on the host emulator that every iteration of a target uses, `None` if it could
/// not be made.
pub fn emulated_decoder() -> Option<&'static Mutex<Decoder>> {
    static DECODER: OnceLock<Option<Mutex<Decoder>>> = OnceLock::new();
    DECODER.get_or_init(|| Decoder::new(&Device::emulated(0), config()).ok().map(Mutex::new)).as_ref()
}
