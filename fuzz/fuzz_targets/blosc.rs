//! blosc-zstd and blosc-zlib chunks: a blosc1 frame built around arbitrary stream bytes (or,
//! with the first byte's top bit set, arbitrary bytes as the whole frame) through the blosc
//! host parse and the zstd or inflate kernel, then the unshuffle, on the host emulator: a value
//! or an error, never a panic, a hang or an access out of bounds.
//!
//! The first byte picks the frame: bit 0 the codec (zstd or zlib), bits 1-2 the shuffle (none,
//! byte, bit), bits 3-4 the typesize (1, 2, 4, 8), bit 5 split blocks (one stream per byte of
//! the typesize), bit 6 small blocks (4 KiB, else one block); the next two bytes the decoded
//! size. The rest is cut into the frame's streams, each behind its 4-byte compressed size.
#![no_main]

use std::sync::Mutex;

use damacy_fuzz::emulated_decoder as decoder;
use damacy_kernels::ChunkInput;
use libfuzzer_sys::fuzz_target;

/// A blosc1 frame (version 2, lz version 1) of `nbytes` decoded bytes whose streams are the
/// pieces of `payload`.
fn frame(sel: u8, nbytes: usize, payload: &[u8]) -> Vec<u8> {
    let compressor: u8 = if sel & 1 == 0 { 4 } else { 3 }; // zstd, zlib
    let shuffle: u8 = [0, 0x01, 0x04][usize::from((sel >> 1) & 3) % 3];
    let typesize = [1usize, 2, 4, 8][usize::from((sel >> 3) & 3)];
    let split = sel & 0x20 != 0;
    let blocksize = if sel & 0x40 != 0 { nbytes.min(4096) } else { nbytes };
    let nblocks = nbytes.div_ceil(blocksize);
    let per_block = if split { typesize } else { 1 };
    let flags = shuffle | (compressor << 5) | if split { 0 } else { 0x10 };
    let mut f = vec![2, 1, flags, typesize as u8];
    for v in [nbytes, blocksize, 0] {
        f.extend_from_slice(&(v as u32).to_le_bytes());
    }
    let starts = f.len();
    f.resize(starts + 4 * nblocks, 0);
    let pieces = nblocks * per_block;
    let step = payload.len().div_ceil(pieces).max(1);
    let mut chunks = payload.chunks(step);
    for b in 0..nblocks {
        let at = f.len() as u32;
        f[starts + 4 * b..starts + 4 * b + 4].copy_from_slice(&at.to_le_bytes());
        for _ in 0..per_block {
            let piece = chunks.next().unwrap_or(&[]);
            f.extend_from_slice(&(piece.len() as u32).to_le_bytes());
            f.extend_from_slice(piece);
        }
    }
    let cbytes = f.len() as u32;
    f[12..16].copy_from_slice(&cbytes.to_le_bytes());
    f
}

fuzz_target!(|data: &[u8]| {
    let Some((&[sel, lo, hi], rest)) = data.split_first_chunk::<3>() else { return };
    let built;
    let (bytes, nbytes) = if sel & 0x80 != 0 {
        (&data[1..], None)
    } else {
        let nbytes = usize::from(u16::from_le_bytes([lo, hi])) + 1;
        built = frame(sel, nbytes, rest);
        (&built[..], Some(nbytes))
    };
    let Some(Ok(mut decoder)) = decoder().map(Mutex::lock) else { return };
    if let Ok(out) = decoder.decode_to_host(&[ChunkInput::blosc(bytes)]) {
        if let (Some(Ok(v)), Some(n)) = (out.chunks.first(), nbytes) {
            assert_eq!(v.len(), n);
        }
    }
});
