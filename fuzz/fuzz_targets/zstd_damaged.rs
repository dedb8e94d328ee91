//! Damaged multi-block zstd frames through the zstd kernel on the host emulator. The `zstd`
//! target's inputs (at most a few KiB) hold one block, which a team decodes alone; this one's
//! frames are libzstd's of 256 KiB (two or three blocks), so a one-chunk wave's team runs every
//! path: the helpers' literal streams and sequence groups, the block decoded ahead into the
//! sequence scratch and executed from there, helper 1's and helper 3's loads ahead. The fuzzer's
//! bytes pick a frame and damage it: byte 0 the frame, then 4 bytes per edit (a 24-bit position,
//! scaled to the frame, and a byte: xor'ed there, or 0: the frame cut there). The decode is a
//! value or an error, never a panic, a hang or an access out of bounds, and a value is libzstd's
//! (the content checksum is verified).
#![no_main]

use std::io::Read;
use std::sync::{Mutex, OnceLock};

use damacy_fuzz::{damaged, emulated_decoder as decoder, rng};
use damacy_kernels::ChunkInput;
use libfuzzer_sys::fuzz_target;

const LEN: usize = 256 << 10;

/// The frames: a smooth uint16 field with noise (the demo volume's kind: short sequences, Huffman
/// literals), a label image (uint16 regions: long matches and runs, rows copied from 4 KiB back),
/// text whose later parts copy stretches from 17-67 KB back with changes (far matches, repeat
/// offsets); levels 1, 3 and 7, each with its content checksum.
fn frames() -> &'static [Vec<u8>] {
    static FRAMES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    FRAMES.get_or_init(|| {
        let mut next = rng(0x9E37_79B9_7F4A_7C15);
        let smooth: Vec<u8> = (0..LEN / 2)
            .flat_map(|i| ((((i as f32) * 0.003).sin() * 3000.0) as i16 + (next() % 7) as i16).to_le_bytes())
            .collect();
        let mut labels = Vec::with_capacity(LEN);
        while labels.len() < LEN {
            let row = labels.len() / 4096;
            let label = (row / 9) as u16 * 3 + u16::from(labels.len() % 4096 > 1500 + (row % 40) * 20);
            labels.extend_from_slice(&label.to_le_bytes());
        }
        let mut text: Vec<u8> = (0..24_000).map(|_| b"the quick brown fox jumps "[(next() % 26) as usize]).collect();
        while text.len() < LEN {
            let d = (17_000 + (next() % 50_000) as usize).min(text.len());
            for _ in 0..200 + next() % 2000 {
                let b = text[text.len() - d];
                text.push(if next().is_multiple_of(24) { b'X' } else { b });
            }
        }
        text.truncate(LEN);
        let mut out = Vec::new();
        for (d, level) in [(&smooth, 3), (&labels, 3), (&text, 1), (&text, 7)] {
            let mut c = zstd::bulk::Compressor::new(level).expect("a zstd compressor");
            c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).expect("the checksum flag");
            out.push(c.compress(d).expect("libzstd compresses"));
        }
        out
    })
}

/// libzstd's bytes for a frame, at most `cap` + 1 of them, or none when it rejects the frame.
fn reference(frame: &[u8], cap: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let dec = zstd::stream::read::Decoder::new(frame).ok()?;
    dec.take(cap as u64 + 1).read_to_end(&mut out).ok().map(|_| out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, edits)) = data.split_first() else { return };
    let frames = frames();
    let g = damaged(&frames[usize::from(pick) % frames.len()], edits);
    let Some(Ok(mut decoder)) = decoder().map(Mutex::lock) else { return };
    let input = ChunkInput::zstd(&g).with_expected_len(LEN).with_checksum_verification();
    if let Ok(out) = decoder.decode_to_host(&[input])
        && let Some(Ok(v)) = out.chunks.first()
    {
        assert!(reference(&g, LEN).as_ref() == Some(v), "a damaged frame decoded to bytes libzstd does not produce");
    }
});
