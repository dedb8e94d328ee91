//! zstd chunks: arbitrary bytes through the host parse (frames, blocks, jobs) and, when they
//! parse, through the zstd kernel on the host emulator: a value or an error, never a panic, a
//! hang or an access out of bounds. The first two bytes pick the expected decoded size.
#![no_main]

use std::sync::Mutex;

use damacy_fuzz::emulated_decoder as decoder;
use damacy_kernels::ChunkInput;
use damacy_kernels::parse_zstd as parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, bytes)) = data.split_first_chunk::<2>() else { return };
    let hint = u16::from_le_bytes(*head);
    let expected = (hint & 1 == 1).then_some(usize::from(hint >> 1) * 8);
    let Ok(plan) = parse(bytes, expected) else { return };
    // The jobs tile the output in order and lie inside the chunk.
    let mut at = 0;
    for j in &plan.jobs {
        assert!(j.dst.start >= at && j.dst.start <= j.dst.end && j.src.end <= bytes.len());
        at = j.dst.end;
    }
    assert!(at <= plan.decoded_len);
    if plan.decoded_len > 1 << 20 {
        return; // keep iterations fast: the kernel's bounds do not depend on the size
    }
    let Some(Ok(mut decoder)) = decoder().map(Mutex::lock) else { return };
    let mut input = ChunkInput::zstd(bytes).with_checksum_verification();
    if let Some(e) = expected {
        input = input.with_expected_len(e);
    }
    if let Ok(out) = decoder.decode_to_host(&[input]) {
        if let Some(Ok(v)) = out.chunks.first() {
            assert_eq!(v.len(), plan.decoded_len);
        }
    }
});
