//! Damaged zlib streams that open with stored blocks of 4 KiB or more, through the inflate kernel
//! on the host emulator. The `inflate` target's inputs (at most a few KiB) hold no such block, so
//! a one-chunk wave's team never copies one; these streams (stored blocks of 8-64 KiB, then
//! flate2's compressed blocks) make the team copy the stored bytes with all four warps before its
//! leader decodes on. The fuzzer's bytes pick a stream and damage it: byte 0 the stream, then 4
//! bytes per edit (a 24-bit position, scaled to the stream, and a byte: xor'ed there, or 0: the
//! stream cut there). The decode is a value or an error, never a panic, a hang or an access out
//! of bounds, and a value is flate2's (the Adler-32 is verified).
#![no_main]

use std::io::{Read, Write};
use std::sync::{Mutex, OnceLock};

use damacy_fuzz::{damaged, emulated_decoder as decoder, rng};
use damacy_kernels::ChunkInput;
use libfuzzer_sys::fuzz_target;

/// Adler-32 of `d` (RFC 1950).
fn adler32(d: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in d.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

/// A zlib stream of `stored` (stored blocks of at most 65,535 bytes each, none final) and then
/// `rest` compressed by flate2 at `level` (its last block final), and the bytes it decodes to.
fn stream(stored: &[u8], rest: &[u8], level: u32) -> (Vec<u8>, Vec<u8>) {
    let mut z = vec![0x78, 0x01];
    for b in stored.chunks(65_535) {
        let n = b.len() as u16;
        z.push(0); // BFINAL 0, BTYPE 00, then the byte boundary
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(!n).to_le_bytes());
        z.extend_from_slice(b);
    }
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(rest).expect("flate2 compresses");
    z.extend_from_slice(&e.finish().expect("flate2 compresses"));
    let all = [stored, rest].concat();
    z.extend_from_slice(&adler32(&all).to_be_bytes());
    (z, all)
}

/// The streams and their decoded lengths: stored parts of noise (8, 40 and 150 KiB: one, one and
/// three blocks), then a smooth uint16 field at level 6, a label image at 9 or text at 1.
fn streams() -> &'static [(Vec<u8>, usize)] {
    static STREAMS: OnceLock<Vec<(Vec<u8>, usize)>> = OnceLock::new();
    STREAMS.get_or_init(|| {
        let mut next = rng(0x5DEE_CE66_D1CE_4E5B);
        let noise: Vec<u8> = (0..150 << 10).map(|_| (next() % 251) as u8).collect();
        let smooth: Vec<u8> = (0..40 << 10)
            .flat_map(|i| ((((i as f32) * 0.003).sin() * 3000.0) as i16 + (next() % 7) as i16).to_le_bytes())
            .collect();
        let labels: Vec<u8> = (0..96 << 10)
            .flat_map(|i: u32| ((i / 4096) as u16 * 3 + u16::from(i % 2048 > 700)).to_le_bytes())
            .collect();
        let text: Vec<u8> = (0..60 << 10).map(|_| b"the quick brown fox jumps "[(next() % 26) as usize]).collect();
        [(&noise[..8 << 10], &smooth, 6), (&noise[..40 << 10], &labels, 9), (&noise[..], &text, 1)]
            .into_iter()
            .map(|(stored, rest, level)| {
                let (z, all) = stream(stored, rest, level);
                (z, all.len())
            })
            .collect()
    })
}

/// flate2's bytes for a zlib stream, at most `cap` + 1 of them, or none when it rejects it.
fn reference(z: &[u8], cap: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(z).take(cap as u64 + 1).read_to_end(&mut out).ok().map(|_| out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, edits)) = data.split_first() else { return };
    let streams = streams();
    let (z, len) = &streams[usize::from(pick) % streams.len()];
    let g = damaged(z, edits);
    let Some(Ok(mut decoder)) = decoder().map(Mutex::lock) else { return };
    let input = ChunkInput::zlib(&g).with_expected_len(*len).with_checksum_verification();
    if let Ok(out) = decoder.decode_to_host(&[input])
        && let Some(Ok(v)) = out.chunks.first()
    {
        assert!(reference(&g, *len).as_ref() == Some(v), "a damaged stream decoded to bytes flate2 does not produce");
    }
});
