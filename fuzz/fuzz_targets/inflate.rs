//! gzip and zlib chunks: arbitrary bytes through the inflate kernel on the host emulator: a
//! value or an error, never a panic, a hang or an access out of bounds. The first byte picks the
//! wrapper (bit 0: gzip or zlib) and checksum verification (bit 1); the next two bytes the
//! expected decoded size.
#![no_main]

use std::sync::Mutex;

use damacy_fuzz::emulated_decoder as decoder;
use damacy_kernels::ChunkInput;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, bytes)) = data.split_first_chunk::<3>() else { return };
    let expected = usize::from(u16::from_le_bytes([head[1], head[2]])) * 4;
    let input = if head[0] & 1 == 1 { ChunkInput::gzip(bytes) } else { ChunkInput::zlib(bytes) };
    let input = input.with_expected_len(expected);
    let input = if head[0] & 2 == 2 { input.with_checksum_verification() } else { input };
    let Some(Ok(mut decoder)) = decoder().map(Mutex::lock) else { return };
    if let Ok(out) = decoder.decode_to_host(&[input]) {
        if let Some(Ok(v)) = out.chunks.first() {
            assert_eq!(v.len(), expected);
        }
    }
});
