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

/// A small generator (xorshift64*), so that a target's streams are the same on every run.
pub fn rng(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `stream` damaged by the fuzzer's `edits`: up to 16 edits of 4 bytes, each a 24-bit position
/// (scaled to the stream) and a byte, xor'ed there, or 0: the stream cut there (the last edit).
pub fn damaged(stream: &[u8], edits: &[u8]) -> Vec<u8> {
    let mut g = stream.to_vec();
    for e in edits.chunks_exact(4).take(16) {
        let at = (u32::from_le_bytes([e[0], e[1], e[2], 0]) as usize * g.len()) >> 24;
        if e[3] == 0 {
            g.truncate(at);
            break;
        }
        g[at] ^= e[3];
    }
    g
}
