//! Inflate kernel tests through the host emulator, held byte for byte to `flate2` as reference:
//! every gzip, zlib and blosc-zlib fixture against the manifest digests, flate2's output at levels
//! 0–9 (gzip, zlib), stored, fixed-Huffman and dynamic-Huffman blocks built here bit by bit (with
//! every code-length repeat code), gzip members with every optional header field and several
//! members per chunk, and corrupt and truncated streams, which must end in a stream status (never
//! a crash; `scripts/asan.sh` runs this file under `AddressSanitizer`).
#![allow(
    clippy::missing_panics_doc,
    clippy::too_many_lines,
    clippy::cast_lossless,
    clippy::many_single_char_names,
    clippy::similar_names
)]

mod common;

use std::io::Write;

use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device, Error, StreamStatus, Teams};
use flate2::Compression;
use proptest::prelude::*;
use sha2::{Digest, Sha256};

/// Schedule seeds: launch order and a shuffled order of the lanes between synchronisations.
const SEEDS: [u64; 2] = [0, 0x5EED_2026];

fn under_asan() -> bool {
    std::env::var("DAMACY_EMU_ASAN").is_ok_and(|v| v == "1")
}

/// Whether this run is the `ThreadSanitizer` build (`scripts/tsan.sh` sets `DAMACY_EMU_TSAN=1`):
/// the corrupt and truncated sweep runs fewer variants of each stream there.
fn under_tsan() -> bool {
    std::env::var("DAMACY_EMU_TSAN").is_ok_and(|v| v == "1")
}

/// The schedule seeds of this run (the shuffled one only under `ASan`).
fn seeds() -> &'static [u64] {
    if under_asan() { &SEEDS[1..] } else { &SEEDS }
}

fn config() -> DecodeConfig {
    DecodeConfig::default()
        .with_wave_src_bytes(8 << 20)
        .with_wave_dst_bytes(8 << 20)
        .with_wave_streams(1 << 12)
        .with_slots(1)
}

/// Decodes the chunks on the emulator under schedule `seed`, by teams of warps (the helpers copy
/// stored blocks of 4 KiB or more with the leader) and by one warp a stream, which must agree
/// (`common::decode_teams_and_alone`).
fn decode(seed: u64, inputs: &[ChunkInput<'_>]) -> Vec<Result<Vec<u8>, Error>> {
    common::decode_teams_and_alone(seed, inputs, config)
}

fn data(len: usize, kind: u8, seed: u64) -> Vec<u8> {
    match kind % 5 {
        4 => {
            let words: [&[u8]; 6] = [b"zarr ", b"chunk ", b"deflate ", b"gpu ", b"warp ", b"\n"];
            let mut s = seed | 1;
            let mut v = Vec::with_capacity(len + 8);
            while v.len() < len {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                v.extend_from_slice(words[(s % 6) as usize]);
            }
            v.truncate(len);
            v
        }
        k => common::test_data(len, k, seed),
    }
}

use common::{gzip, zlib};

fn ref_gunzip(c: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(c), &mut out).ok().map(|_| out)
}

fn ref_unzlib(c: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(c), &mut out).ok().map(|_| out)
}

/// The bytes flate2 decodes from a zlib stream cut short: those of its whole symbols.
fn ref_unzlib_prefix(c: &[u8]) -> usize {
    let mut out = vec![0u8; 1 << 24];
    let mut z = flate2::Decompress::new(true);
    let _ = z.decompress(c, &mut out, flate2::FlushDecompress::None);
    usize::try_from(z.total_out()).unwrap()
}

fn status_of(r: &Result<Vec<u8>, Error>) -> Option<StreamStatus> {
    match r {
        Err(Error::Stream { status, codec, .. }) => {
            assert_eq!(*codec, "inflate");
            Some(*status)
        }
        _ => None,
    }
}

/// The type (0 stored, 1 fixed, 2 dynamic) of the first deflate block after `header` bytes.
fn first_block_type(c: &[u8], header: usize) -> u8 {
    (c[header] >> 1) & 3
}

// ---- Fixtures ----

/// Assembles decoded chunks (C or F order within the chunk) into the array, C order.
fn assemble(shape: &[usize], chunk: &[usize], fortran: bool, size: usize, chunks: &[(Vec<u64>, Vec<u8>)]) -> Vec<u8> {
    let n: usize = shape.iter().product();
    let mut out = vec![0u8; n * size];
    let per: usize = chunk.iter().product();
    for (coords, bytes) in chunks {
        assert_eq!(bytes.len(), per * size);
        for e in 0..per {
            // the chunk-local index of element e
            let mut idx = vec![0usize; chunk.len()];
            let mut r = e;
            if fortran {
                for d in 0..chunk.len() {
                    idx[d] = r % chunk[d];
                    r /= chunk[d];
                }
            } else {
                for d in (0..chunk.len()).rev() {
                    idx[d] = r % chunk[d];
                    r /= chunk[d];
                }
            }
            let mut g = 0usize;
            let mut inside = true;
            for d in 0..chunk.len() {
                let x = coords[d] as usize * chunk[d] + idx[d];
                inside &= x < shape[d];
                g = g * shape[d] + x;
            }
            if inside {
                out[g * size..(g + 1) * size].copy_from_slice(&bytes[e * size..(e + 1) * size]);
            }
        }
    }
    out
}

fn v2_chunks(dir: &std::path::Path) -> Vec<(Vec<u64>, Vec<u8>)> {
    let mut out: Vec<(Vec<u64>, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let coords = name.split('.').map(|p| p.parse::<u64>().ok()).collect::<Option<Vec<_>>>()?;
            Some((coords, std::fs::read(e.path()).ok()?))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn gzip_and_zlib_fixtures_match_manifest_digests() {
    let m = common::manifest();
    let mut checked = Vec::new();
    for a in m["arrays"].as_array().unwrap() {
        let path = a["path"].as_str().unwrap();
        let v2 = a["zarr_format"] == 2;
        let id = if v2 {
            a["codecs"]["compressor"]["id"].as_str().unwrap_or("").to_string()
        } else {
            let c = a["codecs"].as_array().unwrap();
            if c.len() == 2 { c[1]["name"].as_str().unwrap().to_string() } else { String::new() }
        };
        if !(id == "gzip" || id == "zlib") || (v2 && a["codecs"]["filters"] != serde_json::Value::Null) {
            continue;
        }
        assert!(a["shard_shape"].is_null(), "{path}");
        let shape: Vec<usize> = a["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        let chunk: Vec<usize> =
            a["chunk_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        let dtype = common::dtype_of(a["dtype"].as_str().unwrap()).unwrap();
        let size = dtype.size();
        let dir = common::fixtures_dir().join(path);
        let files = if v2 { v2_chunks(&dir) } else { common::chunk_files(&dir) };
        let per: usize = chunk.iter().product::<usize>() * size;
        let grid: usize = shape.iter().zip(&chunk).map(|(s, c)| s.div_ceil(*c)).product();
        assert_eq!(files.len(), grid, "{path}: every chunk is stored");
        let fortran = v2 && a["codecs"]["order"] == "F";
        for &seed in seeds() {
            let inputs: Vec<ChunkInput<'_>> = files
                .iter()
                .map(|(_, b)| {
                    let i = if id == "gzip" { ChunkInput::gzip(b) } else { ChunkInput::zlib(b) };
                    i.with_expected_len(per).with_checksum_verification()
                })
                .collect();
            let out = decode(seed, &inputs);
            let mut decoded = Vec::new();
            for (r, (coords, b)) in out.into_iter().zip(&files) {
                let v = r.unwrap_or_else(|e| panic!("{path} chunk {coords:?} (seed {seed}): {e}"));
                let reference = if id == "gzip" { ref_gunzip(b) } else { ref_unzlib(b) };
                assert_eq!(Some(&v), reference.as_ref(), "{path} chunk {coords:?}");
                decoded.push((coords.clone(), v));
            }
            let all = assemble(&shape, &chunk, fortran, size, &decoded);
            assert_eq!(all.len(), a["decoded_bytes"].as_u64().unwrap() as usize, "{path}");
            assert_eq!(hex::encode(Sha256::digest(&all)), a["sha256"].as_str().unwrap(), "{path}");
        }
        checked.push(path.to_string());
    }
    checked.sort();
    assert_eq!(
        checked,
        ["v2/bool_r1", "v2/gzip_C", "v2/gzip_F", "v2/zlib_C", "v2/zlib_F", "v3/gzip_l1", "v3/gzip_l6"],
        "every gzip and zlib fixture"
    );
}

/// The blosc fixtures compressed with zlib (their splits through the inflate kernel), under each
/// schedule seed of the run (under `ASan` half of them: `common::blosc_fixture_in_run`).
/// `tests/gpu.rs` decodes all of the blosc fixtures, these among them.
#[test]
fn blosc_zlib_fixtures_match_manifest_digests() {
    let m = common::manifest();
    let zlib: Vec<_> =
        common::blosc_fixtures(&m).into_iter().filter(|a| a["codecs"][1]["configuration"]["cname"] == "zlib").collect();
    assert_eq!(zlib.len(), 24, "the manifest's blosc-zlib fixtures");
    let expected = zlib.iter().filter(|a| common::blosc_fixture_in_run(a)).count();
    assert!(expected >= 12, "{expected} blosc-zlib fixtures in this run");
    for &seed in seeds() {
        let (checked, unsupported) = common::run_blosc_fixtures(&Device::emulated(seed), |c| c == "zlib");
        assert_eq!((checked, unsupported), (expected, 0), "blosc-zlib fixtures (seed {seed})");
    }
}

/// A blosc1 frame (cname zlib, no shuffle, typesize 1) of `len` decoded bytes in blocks of
/// `blocksize`, one split per block: `(padding, body, compressed)` puts the split's size and
/// `body` after `padding` zero bytes (a body as long as its block is stored raw). Each compressed
/// split's start alignment mod 8 is counted in `starts`.
fn blosc_zlib_frame(
    len: usize,
    blocksize: usize,
    splits: Vec<(usize, Vec<u8>, bool)>,
    starts: &mut [usize; 8],
) -> Vec<u8> {
    let mut f = vec![2u8, 1, 0x10 | (3 << 5), 1];
    for v in [len, blocksize, 0] {
        f.extend_from_slice(&(v as u32).to_le_bytes());
    }
    f.resize(16 + 4 * splits.len(), 0);
    for (j, (padding, body, compressed)) in splits.into_iter().enumerate() {
        f.resize(f.len() + padding, 0);
        let at = f.len();
        f[16 + 4 * j..20 + 4 * j].copy_from_slice(&(at as u32).to_le_bytes());
        if compressed {
            starts[(at + 4) % 8] += 1;
        }
        f.extend_from_slice(&(body.len() as u32).to_le_bytes());
        f.extend_from_slice(&body);
    }
    let n = f.len() as u32;
    f[12..16].copy_from_slice(&n.to_le_bytes());
    f
}

/// Every `(what, decoded, frame)` decodes to `decoded` under every schedule seed.
fn assert_blosc_frames_decode(frames: &[(String, Vec<u8>, Vec<u8>)]) {
    for &seed in seeds() {
        let inputs: Vec<ChunkInput<'_>> = frames.iter().map(|(_, _, f)| ChunkInput::blosc(f)).collect();
        for (r, (what, d, _)) in decode(seed, &inputs).into_iter().zip(frames) {
            let v = r.unwrap_or_else(|e| panic!("{what} (seed {seed}): {e}"));
            assert!(v == *d, "{what} (seed {seed}) differs");
        }
    }
}

/// blosc-zlib streams start at any address inside their frame (after the header, block starts
/// and 4-byte split sizes), so the symbol decode's input window (aligned 8-byte loads; single
/// bytes before a stream's first and after its last 8-byte boundary) meets every alignment of
/// a stream's start and end. Frames built here (the test build of c-blosc has no zlib): blocks
/// of 1 KiB, each its own zlib stream, block j placed after j mod 8 bytes of padding; every
/// start alignment mod 8 asserted.
#[test]
fn blosc_zlib_streams_at_every_alignment_decode() {
    let mut frames = Vec::new();
    let mut starts = [0usize; 8];
    for (k, len) in [3000usize, 5000, 7919, 12000].into_iter().enumerate() {
        for kind in [1u8, 2, 4] {
            let d = data(len, kind, k as u64 + 1);
            let splits = d
                .chunks(1024)
                .enumerate()
                .map(|(j, block)| {
                    let z = zlib(block, 6);
                    if z.len() < block.len() { (j % 8, z, true) } else { (j % 8, block.to_vec(), false) }
                })
                .collect();
            let f = blosc_zlib_frame(len, 1024, splits, &mut starts);
            frames.push((format!("{len} bytes, kind {kind}"), d, f));
        }
    }
    assert!(starts.iter().all(|&c| c > 0), "zlib streams at every start alignment mod 8: {starts:?}");
    assert_blosc_frames_decode(&frames);
}

/// zlib streams of one fixed-Huffman block, in blosc frames at every start alignment
/// mod 8: the symbols begin in the stream's third byte, so the symbol decode reads the bytes
/// of the input window's first word, which a misaligned stream fills byte by byte (the window's
/// edge path; the dynamic blocks above begin with headers lane 0 reads on its own).
#[test]
fn blosc_zlib_fixed_blocks_at_every_alignment_decode() {
    let mut frames = Vec::new();
    let mut starts = [0usize; 8];
    for (k, len) in [600usize, 1500, 2500, 4096].into_iter().enumerate() {
        let d: Vec<u8> = (0..len).map(|i| b"fixed huffman "[(i + k) % 14]).collect();
        let splits = d
            .chunks(256)
            .enumerate()
            .map(|(j, block)| {
                // a fixed block built here (flate2 picks dynamic blocks even for these): the
                // first 14 bytes as literals, then matches of distance 14
                let mut ops: Vec<Op> = block.iter().take(14).map(|&b| Op::Lit(b)).collect();
                let mut done = block.len().min(14);
                while done < block.len() {
                    let n = (block.len() - done).min(258);
                    ops.push(if n >= 3 { Op::Match(n as u32, 14) } else { Op::Lit(block[done]) });
                    done += if n >= 3 { n } else { 1 };
                }
                let mut w = Bits::default();
                fixed_block(&mut w, &ops, true);
                let z = zlib_wrap(&w.finish(), block);
                assert_eq!(first_block_type(&z, 2), 1);
                assert_eq!(ref_unzlib(&z).as_deref(), Some(block));
                ((j + k) % 8, z, true)
            })
            .collect();
        let f = blosc_zlib_frame(len, 256, splits, &mut starts);
        frames.push((format!("{len} bytes"), d, f));
    }
    assert!(starts.iter().all(|&c| c > 0), "zlib streams at every start alignment mod 8: {starts:?}");
    assert_blosc_frames_decode(&frames);
}

// ---- flate2 at every level ----

#[test]
fn every_level_matches_flate2() {
    let mut types = [0usize; 3];
    let sizes: &[usize] = if under_asan() { &[0, 1, 100, 5000, 70_000] } else { &[0, 1, 100, 5000, 70_000, 300_000] };
    let mut chunks = Vec::new();
    for level in 0..=9u32 {
        for (k, &n) in sizes.iter().enumerate() {
            let d = data(n, (level as u8 + k as u8) % 5, u64::from(level) * 31 + k as u64);
            let g = gzip(&d, level);
            let z = zlib(&d, level);
            types[first_block_type(&g, 10) as usize] += 1;
            types[first_block_type(&z, 2) as usize] += 1;
            chunks.push((g, d.clone(), true));
            chunks.push((z, d, false));
        }
    }
    for &seed in seeds() {
        let inputs: Vec<ChunkInput<'_>> = chunks
            .iter()
            .map(|(c, d, gz)| {
                let i = if *gz { ChunkInput::gzip(c) } else { ChunkInput::zlib(c).with_expected_len(d.len()) };
                i.with_checksum_verification()
            })
            .collect();
        for (i, (r, (_, d, gz))) in decode(seed, &inputs).into_iter().zip(&chunks).enumerate() {
            let v = r.unwrap_or_else(|e| panic!("case {i} (gzip {gz}, {} bytes, seed {seed}): {e}", d.len()));
            assert!(v == *d, "case {i} (gzip {gz}, {} bytes, seed {seed}) differs", d.len());
        }
    }
    assert!(types.iter().all(|&t| t > 0), "stored, fixed and dynamic first blocks all occur: {types:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if under_asan() { 8 } else { 32 }, ..ProptestConfig::default() })]
    #[test]
    fn random_inputs_match_flate2(len in 0usize..40_000, kind in 0u8..5, level in 0u32..10, seed in any::<u64>(), gz in any::<bool>()) {
        let d = data(len, kind, seed);
        let c = if gz { gzip(&d, level) } else { zlib(&d, level) };
        let input = if gz { ChunkInput::gzip(&c) } else { ChunkInput::zlib(&c) };
        let out = decode(SEEDS[1], &[input.with_expected_len(d.len()).with_checksum_verification()]);
        let v = out[0].as_ref().map_err(ToString::to_string);
        prop_assert!(v == Ok(&d), "{len} bytes, kind {kind}, level {level}, gzip {gz}: {:?}", v.map(Vec::len));
    }
}

// ---- Blocks built bit by bit ----

/// The order of the code-length code's lengths in a dynamic block header.
const ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/// LSB-first bit writer (deflate's bit order).
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, v: u32, bits: u32) {
        self.acc |= u64::from(v) << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }
    /// A Huffman code: its bits go first-bit-first, i.e. reversed.
    fn code(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }
    fn align(&mut self) {
        if self.n > 0 {
            self.put(0, 8 - self.n);
        }
    }
    fn finish(mut self) -> Vec<u8> {
        self.align();
        self.out
    }
}

/// Canonical codes of a list of lengths.
fn canonical(lens: &[u32]) -> Vec<u32> {
    let mut count = [0u32; 16];
    for &l in lens {
        count[l as usize] += 1;
    }
    count[0] = 0;
    let mut next = [0u32; 17];
    for l in 1..16 {
        next[l + 1] = (next[l] + count[l]) << 1;
    }
    lens.iter()
        .map(|&l| {
            if l == 0 {
                0
            } else {
                let c = next[l as usize];
                next[l as usize] += 1;
                c
            }
        })
        .collect()
}

const LEN_BASE: [u32; 29] =
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA: [u32; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE: [u32; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
    8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u32; 30] =
    [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

#[derive(Clone, Copy, Debug)]
enum Op {
    Lit(u8),
    Match(u32, u32),
}

fn execute(out: &mut Vec<u8>, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Lit(b) => out.push(b),
            Op::Match(len, dist) => {
                for _ in 0..len {
                    out.push(out[out.len() - dist as usize]);
                }
            }
        }
    }
}

/// Writes the symbols of `ops` and end-of-block with the given literal/length and distance codes.
fn write_symbols(w: &mut Bits, ops: &[Op], ll: (&[u32], &[u32]), dd: (&[u32], &[u32])) {
    for op in ops {
        match *op {
            Op::Lit(b) => {
                assert!(ll.1[b as usize] > 0, "literal {b} has no code");
                w.code(ll.0[b as usize], ll.1[b as usize]);
            }
            Op::Match(len, dist) => {
                let li = LEN_BASE.iter().rposition(|&b| b <= len).unwrap();
                let li = if len == 258 { 28 } else { li.min(27) };
                w.code(ll.0[257 + li], ll.1[257 + li]);
                w.put(len - LEN_BASE[li], LEN_EXTRA[li]);
                let di = DIST_BASE.iter().rposition(|&b| b <= dist).unwrap();
                assert!(dd.1[di] > 0, "distance code {di} has no code");
                w.code(dd.0[di], dd.1[di]);
                w.put(dist - DIST_BASE[di], DIST_EXTRA[di]);
            }
        }
    }
    w.code(ll.0[256], ll.1[256]);
}

fn fixed_block(w: &mut Bits, ops: &[Op], last: bool) {
    w.put(u32::from(last), 1);
    w.put(1, 2);
    let ll: Vec<u32> = (0..288)
        .map(|s| {
            if s < 144 {
                8
            } else if s < 256 {
                9
            } else if s < 280 {
                7
            } else {
                8
            }
        })
        .collect();
    let dl = vec![5u32; 30];
    write_symbols(w, ops, (&canonical(&ll), &ll), (&canonical(&dl), &dl));
}

fn stored_block(w: &mut Bits, d: &[u8], last: bool) {
    w.put(u32::from(last), 1);
    w.put(0, 2);
    w.align();
    let n = d.len() as u16;
    w.out.extend_from_slice(&n.to_le_bytes());
    w.out.extend_from_slice(&(!n).to_le_bytes());
    w.out.extend_from_slice(d);
}

/// A dynamic block: literals/lengths 128..=191 unused (a run of 18s), 34 codes of 7 bits and
/// 188 of 8 bits; distance codes 0..=7 of 3 bits, 8..=29 unused (17s); equal runs as 16s.
fn dynamic_block(w: &mut Bits, ops: &[Op], last: bool) {
    let mut ll = vec![0u32; 286];
    let mut k = 0;
    for (s, l) in ll.iter_mut().enumerate() {
        if (128..192).contains(&s) {
            continue;
        }
        *l = if k < 34 { 7 } else { 8 };
        k += 1;
    }
    let mut dl = vec![0u32; 30];
    dl[..8].fill(3);
    // code-length symbols: run-length coded with 16 (repeat), 17 (3-10 zeros), 18 (11-138 zeros)
    let all: Vec<u32> = ll.iter().chain(&dl).copied().collect();
    let mut syms: Vec<(u32, u32, u32)> = Vec::new(); // (symbol, extra value, extra bits)
    let mut i = 0;
    while i < all.len() {
        let v = all[i];
        let mut run = 1;
        while i + run < all.len() && all[i + run] == v {
            run += 1;
        }
        if v == 0 && run >= 11 {
            let r = run.min(138);
            syms.push((18, r as u32 - 11, 7));
            i += r;
        } else if v == 0 && run >= 3 {
            let r = run.min(10);
            syms.push((17, r as u32 - 3, 3));
            i += r;
        } else if v != 0 && run >= 4 {
            syms.push((v, 0, 0));
            let r = (run - 1).min(6);
            syms.push((16, r as u32 - 3, 2));
            i += 1 + r;
        } else {
            syms.push((v, 0, 0));
            i += 1;
        }
    }
    // the code-length code: symbols 0, 3, 7, 8, 16, 17, 18 used; lengths 3,3,3,3,2,3,3 (complete)
    let mut pl = [0u32; 19];
    for (s, l) in [(0, 3), (3, 3), (7, 3), (8, 3), (16, 2), (17, 3), (18, 3)] {
        pl[s] = l;
    }
    let pc = canonical(&pl);
    let hclen = ORDER.iter().rposition(|&s| pl[s] > 0).unwrap() + 1;
    w.put(u32::from(last), 1);
    w.put(2, 2);
    w.put(286 - 257, 5);
    w.put(30 - 1, 5);
    w.put(hclen as u32 - 4, 4);
    for &s in &ORDER[..hclen] {
        w.put(pl[s], 3);
    }
    for (s, e, eb) in syms {
        w.code(pc[s as usize], pl[s as usize]);
        w.put(e, eb);
    }
    write_symbols(w, ops, (&canonical(&ll), &ll), (&canonical(&dl), &dl));
}

fn adler32(d: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in d {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

fn zlib_wrap(deflate: &[u8], d: &[u8]) -> Vec<u8> {
    let mut v = vec![0x78, 0x9c];
    v.extend_from_slice(deflate);
    v.extend_from_slice(&adler32(d).to_be_bytes());
    v
}

/// Ops of a random mix of literals (avoiding 128..=191) and matches of distance <= 16.
fn random_ops(n: usize, seed: u64) -> Vec<Op> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut ops = Vec::new();
    let mut produced = 0u32;
    while ops.len() < n {
        let r = next();
        if produced >= 24 && r % 3 == 0 {
            let len = if r % 11 == 0 { 258 } else { 3 + (next() % 200) as u32 };
            let dist = 1 + (next() % 16) as u32;
            ops.push(Op::Match(len, dist));
            produced += len;
        } else {
            let b = (next() % 192) as u8;
            ops.push(Op::Lit(if (128..192).contains(&b) { b - 64 } else { b }));
            produced += 1;
        }
    }
    ops
}

#[test]
fn hand_built_blocks_decode() {
    let mut cases: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    for seed in 1..6u64 {
        let ops = random_ops(300 * seed as usize, seed);
        let mut d = Vec::new();
        execute(&mut d, &ops);
        let mut w = Bits::default();
        fixed_block(&mut w, &ops, true);
        cases.push((format!("fixed {seed}"), zlib_wrap(&w.finish(), &d), d.clone()));
        let mut w = Bits::default();
        dynamic_block(&mut w, &ops, true);
        cases.push((format!("dynamic {seed}"), zlib_wrap(&w.finish(), &d), d.clone()));
        // stored, fixed, fixed (the tables kept), dynamic, fixed (rebuilt), empty stored
        let raw = data(1000 * seed as usize, 0, seed);
        let mut w = Bits::default();
        stored_block(&mut w, &raw, false);
        fixed_block(&mut w, &ops, false);
        fixed_block(&mut w, &ops, false);
        dynamic_block(&mut w, &ops, false);
        fixed_block(&mut w, &ops, false);
        stored_block(&mut w, &[], true);
        let mut all = raw.clone();
        for _ in 0..4 {
            all.extend_from_slice(&d);
        }
        cases.push((format!("mixed {seed}"), zlib_wrap(&w.finish(), &all), all));
    }
    check_hand_built_zlib(&cases);
}

/// A dynamic block with the given literal/length (286) and distance (30) code lengths, each
/// length sent as itself (a code-length code of 16 four-bit codes for 0..=15).
fn dynamic_block_with(w: &mut Bits, ops: &[Op], ll: &[u32], dl: &[u32], last: bool) {
    let mut pl = [0u32; 19];
    pl[..16].fill(4);
    let pc = canonical(&pl);
    w.put(u32::from(last), 1);
    w.put(2, 2);
    w.put(286 - 257, 5);
    w.put(30 - 1, 5);
    w.put(19 - 4, 4);
    for &s in &ORDER {
        w.put(pl[s], 3);
    }
    for &l in ll.iter().chain(dl) {
        w.code(pc[l as usize], 4);
    }
    write_symbols(w, ops, (&canonical(ll), ll), (&canonical(dl), dl));
}

/// Codes of 1 and 2 bits put up to 32 symbols in one round of the warp's decode (each lane's
/// candidate offset starts a real symbol), fill the 128-byte run of decoded bytes through its
/// capacity limit, and mix matches gathered into the run (3, 11-12 and 35-42 bytes, distances 1
/// and 33-48) with ones copied past it (227-257 bytes); a stored block of 0-7 bytes first
/// shifts the output's alignment under the run.
#[test]
fn short_codes_and_long_runs_decode() {
    let mut ll = vec![0u32; 286];
    for (s, l) in [(97, 1), (98, 2), (256, 4), (257, 5), (265, 5), (273, 4), (284, 4)] {
        ll[s] = l;
    }
    let mut dl = vec![0u32; 30];
    dl[0] = 1;
    dl[10] = 1;
    let mut cases: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    for seed in 1..9u64 {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut ops = Vec::new();
        let mut produced = 0u32;
        while ops.len() < 3000 {
            let r = next() % 64;
            if produced >= 48 && r < 6 {
                let len = match r {
                    0 => 3,
                    1 => 11 + (next() % 2) as u32,
                    2 | 3 => 35 + (next() % 8) as u32,
                    _ => 227 + (next() % 31) as u32,
                };
                let dist = if next() % 2 == 0 { 1 } else { 33 + (next() % 16) as u32 };
                ops.push(Op::Match(len, dist));
                produced += len;
            } else {
                ops.push(Op::Lit(if next() % 3 == 0 { b'b' } else { b'a' }));
                produced += 1;
            }
        }
        let lead = data((seed % 8) as usize, 0, seed);
        let mut d = lead.clone();
        execute(&mut d, &ops);
        let mut w = Bits::default();
        stored_block(&mut w, &lead, false);
        dynamic_block_with(&mut w, &ops, &ll, &dl, false);
        fixed_block(&mut w, &ops[..200], false);
        dynamic_block_with(&mut w, &ops, &ll, &dl, true);
        let mut all = d.clone();
        execute(&mut all, &ops[..200]);
        execute(&mut all, &ops);
        cases.push((format!("short codes {seed}"), zlib_wrap(&w.finish(), &all), all));
    }
    check_hand_built_zlib(&cases);
}

/// Short matches (3-10 bytes) at every distance 1..=300 and 32700..=32768 after 32768 random
/// literals, 0-5 literals apart, so that their bytes land at every slot of the 128-byte run of
/// decoded bytes: sources inside the run (by shuffle) and before it (pending bytes the flush
/// loads); runs of 40 back-to-back 3-byte matches from far back (more pending bytes than
/// lanes: several load rounds in one flush; a run made only of pending bytes); and chains, a
/// match copying the still-pending bytes of the matches just before it (distance 1..=12 after
/// a far one, overlapping itself when shorter than its length). In fixed and dynamic blocks,
/// several lead lengths (the output's alignment under the run).
#[test]
fn short_matches_at_every_distance_decode() {
    fn lit(next: &mut impl FnMut() -> u64) -> Op {
        let b = (next() % 192) as u8;
        Op::Lit(if (128..192).contains(&b) { b - 64 } else { b })
    }
    let mut next = xorshift(0x5A17);
    let mut ops: Vec<Op> = (0..32768).map(|_| lit(&mut next)).collect();
    let dists: Vec<u32> = (1..=300).chain(32700..=32768).collect();
    for (i, &d) in dists.iter().enumerate() {
        for _ in 0..next() % 6 {
            ops.push(lit(&mut next));
        }
        ops.push(Op::Match(3 + (i % 8) as u32, d));
        if i % 5 == 0 {
            ops.push(Op::Match(3 + (next() % 8) as u32, 1 + (next() % 12) as u32));
        }
        if i % 60 == 0 {
            for _ in 0..40 {
                ops.push(Op::Match(3, 1000 + (next() % 30000) as u32));
            }
            ops.push(Op::Match(10, 1 + (next() % 40) as u32));
        }
    }
    check_hand_built_zlib(&blocks_after_leads(&[&ops], &[0, 1, 3], 5));
}

/// Matches of 3-63 bytes that start at every slot of the 128-byte run of decoded bytes, so
/// that many straddle its end (their first bytes fill the run, which is stored whole, the rest
/// start the next run): distances 1-4 (overlapping themselves across the run's end), 31-33, 64,
/// 127-129 and 200 (sources in the run, in the run just stored, and before it), 383-641 and
/// 1000-32768 (pending bytes loaded at the flush, across two runs); long matches copied past
/// the run now and then (later sources behind and inside them); a second block whose first
/// matches reach back into the first. Fixed and dynamic blocks after leads of 0-3 bytes (the
/// output's alignment under the run).
#[test]
fn short_matches_across_the_runs_end_decode() {
    let mut next = xorshift(0x7E57);
    let lit = |next: &mut dyn FnMut() -> u64| {
        let b = (next() % 192) as u8;
        Op::Lit(if (128..192).contains(&b) { b - 64 } else { b })
    };
    let mut ops: Vec<Op> = (0..32768).map(|_| lit(&mut next)).collect();
    let mut produced = 32768u32;
    let dists = [
        1u32, 2, 3, 4, 31, 32, 33, 64, 127, 128, 129, 200, 383, 384, 385, 447, 448, 511, 512, 513, 575, 576, 640, 641,
        1000, 32768,
    ];
    for (i, &d) in dists.iter().cycle().take(1300).enumerate() {
        // literals up to output position i mod 128 (mod 128): every slot of a run
        let want = (i % 128) as u32;
        while produced % 128 != want {
            ops.push(lit(&mut next));
            produced += 1;
        }
        let len = 3 + ((i * 7) % 61) as u32;
        ops.push(Op::Match(len, d));
        produced += len;
        if i % 97 == 0 {
            let long = 130 + (i % 129) as u32;
            ops.push(Op::Match(long, 700 + i as u32));
            produced += long;
        }
    }
    let second: Vec<Op> =
        (0..90u32).map(|k| Op::Match(3 + k % 20, 1 + 7 * k)).chain((0..300).map(|_| lit(&mut next))).collect();
    check_hand_built_zlib(&blocks_after_leads(&[&ops, &second], &[0, 1, 2, 3], 9));
}

/// Stored blocks a team copies (4 KiB or more: the leader and three helpers, one barrier before
/// and one after) between ones the leader copies alone: lengths at the threshold and past it,
/// at every output alignment (leads of 0-15 bytes) and source offset, in runs of several, the
/// largest a block holds (65,535 bytes); then a fixed block whose matches reach back into the
/// team's bytes (which the leader reads only after the barrier after the copy) and a last stored
/// block; checksums verified. `decode` holds the team's output to the lone warp's. Then the same
/// streams cut inside a team's block (`SrcTruncated`) and decoded into an output that ends inside
/// one (`DstOverflow`): statuses and output sizes as the lone warp's.
#[test]
fn stored_blocks_copied_by_a_team_decode() {
    let lens = [4095usize, 4096, 4097, 5000, 16384, 16397, 65535, 100, 8191, 12289];
    let mut cases = Vec::new();
    for lead_len in [0usize, 1, 3, 7, 13] {
        let mut w = Bits::default();
        let mut all = data(lead_len, 0, 1);
        stored_block(&mut w, &all.clone(), false);
        for (i, &n) in lens.iter().enumerate() {
            let d = data(n, (i % 4) as u8, 17 + i as u64);
            stored_block(&mut w, &d, false);
            all.extend_from_slice(&d);
        }
        // matches into the stored bytes: near (the last block) and far (32 KiB back)
        let ops: Vec<Op> = (0..40u32)
            .map(|k| if k % 2 == 0 { Op::Match(3 + k * 6, 1 + k * 97) } else { Op::Match(258, 32768 - k * 11) })
            .collect();
        execute(&mut all, &ops);
        fixed_block(&mut w, &ops, false);
        let tail = data(20000, 2, 99);
        stored_block(&mut w, &tail, true);
        all.extend_from_slice(&tail);
        let what = format!("stored blocks after a lead of {lead_len}");
        cases.push((what, zlib_wrap(&w.finish(), &all), all));
    }
    check_hand_built_zlib(&cases);
    // cut inside the 65,535-byte block, and an output ending at the 4,097-byte one
    for (what, c, d) in &cases {
        let cut = &c[..c.len() - 20000 - 5 - 30000];
        for &seed in seeds() {
            let r = decode(seed, &[ChunkInput::zlib(cut).with_expected_len(d.len())]);
            assert_eq!(status_of(&r[0]), Some(StreamStatus::SrcTruncated), "{what} cut (seed {seed})");
            let small = 4096 + 4095 + 2000;
            let r = decode(seed, &[ChunkInput::zlib(c).with_expected_len(small)]);
            assert_eq!(status_of(&r[0]), Some(StreamStatus::DstOverflow), "{what} into {small} bytes (seed {seed})");
        }
    }
}

/// Runs of one long match repeated — the same length and distance, so the same bits one after
/// another, what zlib makes of a label image's constant regions — which the decoder copies as
/// one match (31 candidates compared a step), and a match at the same distance after them (a
/// continuation, also joined): runs of 1-100 repeats, lengths 64-258 with and without extra
/// bits, distances 1-24577 (symbols of up to 32 bits with dynamic codes, 31 with fixed),
/// literals or a match at another distance between runs, after leads of 0-3 bytes. Then the
/// statuses where a run is cut short: the stream cut inside runs (`SrcTruncated`) and outputs
/// ending inside them or their continuations (`DstOverflow`), in the serial decode's order and at
/// its output byte — also for a match whose bits are all zeros (a 1-bit length code and a 1-bit
/// distance code, both code 0), which the zero bits read past a stream's end repeat.
#[test]
fn repeated_long_matches_decode() {
    let mut next = xorshift(0xC0DE);
    let mut ops: Vec<Op> = (0..300).map(|_| Op::Lit((next() % 200) as u8)).collect();
    let mut produced = 300u32;
    let reps = [1u32, 2, 3, 5, 30, 31, 32, 33, 62, 63, 64, 100];
    let lens = [64u32, 100, 130, 227, 257, 258];
    let dists = [1u32, 2, 4, 7, 33, 300, 2048, 24577];
    // output positions inside runs of repeats, for the outputs cut short below
    let mut inside = Vec::new();
    for (i, &n) in reps.iter().cycle().take(72).enumerate() {
        for _ in 0..i % 3 {
            ops.push(Op::Lit((next() % 200) as u8));
            produced += 1;
        }
        let len = lens[i % lens.len()];
        let dist = dists[(i / 2) % dists.len()].min(produced);
        if n > 2 {
            // (the output's end, where the serial decode stops: the repeat that overflows it)
            inside.push((produced + len * (n / 2) + (i as u32 % 7), produced + len * (n / 2)));
        }
        for _ in 0..n {
            ops.push(Op::Match(len, dist));
        }
        produced += len * n;
        if i % 4 == 1 {
            ops.push(Op::Match(len, dist + 1)); // the same length, another distance
            produced += len;
        }
        if i % 4 == 3 {
            ops.push(Op::Match(len - 1, dist)); // the same distance, another length
            inside.push((produced + len / 2, produced));
            produced += len - 1;
        }
    }
    let cases = blocks_after_leads(&[&ops], &[0, 1, 3], 11);
    check_hand_built_zlib(&cases);
    let (_, z, d) = &cases.iter().find(|(what, ..)| what.contains("dynamic") && what.ends_with("lead 0")).unwrap();
    // (what, input, status, the bytes produced when it stops: checked for outputs cut short)
    let mut inputs: Vec<(String, ChunkInput<'_>, StreamStatus, Option<u32>)> = Vec::new();
    // length 258 (symbol 285) the only 1-bit code, end of block 2 bits, literals 0..128 9 bits;
    // distances 1 and 2 1 bit each: Match(258, 1) is two zero bits
    let mut ll = vec![0u32; 286];
    ll[..128].fill(9);
    ll[256] = 2;
    ll[285] = 1;
    let mut zero_ops: Vec<Op> = (0..50).map(|_| Op::Lit((next() % 128) as u8)).collect();
    zero_ops.extend([Op::Match(258, 1)].repeat(500));
    zero_ops.extend((0..9).map(|_| Op::Lit((next() % 128) as u8)));
    zero_ops.extend([Op::Match(258, 1)].repeat(200));
    let mut zd = Vec::new();
    execute(&mut zd, &zero_ops);
    let mut w = Bits::default();
    let mut dl = vec![0u32; 30];
    dl[..2].fill(1);
    dynamic_block_with(&mut w, &zero_ops, &ll, &dl, true);
    let zz = zlib_wrap(&w.finish(), &zd);
    check_hand_built_zlib(&[("zero-bit matches".to_string(), zz.clone(), zd.clone())]);
    for (c, len) in [(z, d.len()), (&zz, zd.len())] {
        for k in 1..24 {
            let cut = 2 + (c.len() - 6) * k / 24; // inside the deflate data (2-byte header, 4-byte trailer)
            let stop = u32::try_from(ref_unzlib_prefix(&c[..cut])).unwrap();
            let input = ChunkInput::zlib(&c[..cut]).with_expected_len(len);
            inputs.push((format!("cut at {cut} of {}", c.len()), input, StreamStatus::SrcTruncated, Some(stop)));
        }
    }
    for &(end, stop) in &inside {
        let what = format!("output of {end} bytes");
        inputs.push((what, ChunkInput::zlib(z).with_expected_len(end as usize), StreamStatus::DstOverflow, Some(stop)));
    }
    for &seed in seeds() {
        let chunks: Vec<ChunkInput<'_>> = inputs.iter().map(|(_, i, ..)| *i).collect();
        for (r, (what, _, want, stop)) in decode(seed, &chunks).iter().zip(&inputs) {
            assert_eq!(status_of(r), Some(*want), "{what} (seed {seed}): {r:?}");
            if let (Some(stop), Err(Error::Stream { actual, .. })) = (stop, r) {
                assert_eq!(actual, stop, "{what} (seed {seed}): stopped at output byte {actual}");
            }
        }
    }
}

/// Zlib streams of a stored block of `lead_len` bytes (the output's alignment) followed by one
/// block per entry of `blocks`, once all fixed and once all dynamic (every symbol coded: 226
/// literal/length codes of 8 bits and 60 of 9; distances 2 of 4, 28 of 5), with what each decodes to.
fn blocks_after_leads(blocks: &[&[Op]], lead_lens: &[usize], seed: u64) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut d = Vec::new();
    for ops in blocks {
        execute(&mut d, ops);
    }
    let ll: Vec<u32> = (0..286).map(|s| if s < 226 { 8 } else { 9 }).collect();
    let dl: Vec<u32> = (0..30).map(|s| if s < 2 { 4 } else { 5 }).collect();
    let mut cases = Vec::new();
    for &lead_len in lead_lens {
        let lead = data(lead_len, 0, seed);
        let mut all = lead.clone();
        all.extend_from_slice(&d);
        for dynamic in [false, true] {
            let mut w = Bits::default();
            stored_block(&mut w, &lead, false);
            for (i, ops) in blocks.iter().enumerate() {
                let last = i + 1 == blocks.len();
                if dynamic {
                    dynamic_block_with(&mut w, ops, &ll, &dl, last);
                } else {
                    fixed_block(&mut w, ops, last);
                }
            }
            let kind = if dynamic { "dynamic" } else { "fixed" };
            let what = format!("{} {kind} block(s), lead {lead_len}", blocks.len());
            cases.push((what, zlib_wrap(&w.finish(), &all), all.clone()));
        }
    }
    cases
}

// ---- gzip members ----

fn crc32(d: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(d);
    c.sum()
}

/// One launch of teams and lone warps (`Teams::Mostly`): streams that open with stored blocks of
/// 4 KiB or more (zlib level 0; a gzip member at level 0 with FEXTRA, FNAME, FCOMMENT and
/// FHCRC before them) get a block each, the others (Huffman blocks; stored blocks under 4 KiB)
/// a warp each, four to a block after the team blocks. Each stream's class is checked through
/// `Teams::Auto`'s choice for a wave of its copies too large for teams alone (`Mostly` when it
/// is a team's, `None` when not); every chunk must decode to its bytes under every schedule.
#[test]
fn one_launch_of_teams_and_lone_warps_matches_flate2() {
    let noise = data(150_000, 0, 7);
    let text = data(90_000, 4, 8);
    let runs = data(70_000, 1, 9);
    let small = data(3000, 0, 10);
    let chunks: Vec<(Vec<u8>, &[u8], bool, bool)> = vec![
        (zlib(&noise, 0), &noise, false, true),
        (zlib(&text, 6), &text, false, false),
        (gzip_with_header(&noise, 0, true), &noise, true, true),
        (gzip(&runs, 9), &runs, true, false),
        (zlib(&small, 0), &small, false, false),
    ];
    let inputs: Vec<ChunkInput<'_>> = chunks
        .iter()
        .map(|(c, d, gz, _)| if *gz { ChunkInput::gzip(c) } else { ChunkInput::zlib(c).with_expected_len(d.len()) })
        .collect();
    let dec = Decoder::new(&Device::emulated(0), config().with_wave_streams(1 << 12)).unwrap();
    let wave = Device::emulated(0).sm_count() as usize * 4 + 1;
    for (i, (_, _, _, team)) in chunks.iter().enumerate() {
        let copies: Vec<ChunkInput<'_>> = std::iter::repeat_n(inputs[i], wave).collect();
        let want = if *team { Teams::Mostly } else { Teams::None };
        assert_eq!(dec.teams_for(&copies), want, "chunk {i}");
    }
    assert_eq!(dec.teams_for(&inputs), Teams::All);
    for &seed in seeds() {
        let mut d = Decoder::new(&Device::emulated(seed), config().with_teams(Teams::Mostly)).unwrap();
        let out = d.decode_to_host(&inputs).unwrap().chunks;
        for (i, (r, (_, want, _, _))) in out.into_iter().zip(&chunks).enumerate() {
            let got = r.unwrap_or_else(|e| panic!("chunk {i} (seed {seed}): {e}"));
            assert!(got == *want, "chunk {i} (seed {seed}): decoded bytes differ from flate2's");
        }
    }
}

/// A gzip member with FEXTRA, FNAME, FCOMMENT and (optionally) FHCRC.
fn gzip_with_header(d: &[u8], level: u32, hcrc: bool) -> Vec<u8> {
    let mut e = flate2::GzBuilder::new()
        .extra(b"xy\x04\x00data".to_vec())
        .filename("chunk.bin")
        .comment("made by damacy's tests")
        .write(Vec::new(), Compression::new(level));
    e.write_all(d).unwrap();
    let mut g = e.finish().unwrap();
    if hcrc {
        // the header ends after the comment's zero byte
        let xlen = u16::from_le_bytes([g[10], g[11]]) as usize;
        let mut end = 12 + xlen;
        for _ in 0..2 {
            end += g[end..].iter().position(|&b| b == 0).unwrap() + 1;
        }
        g[3] |= 2;
        let h = (crc32(&g[..end]) & 0xFFFF) as u16;
        g.splice(end..end, h.to_le_bytes());
    }
    g
}

#[test]
fn gzip_members_and_header_fields() {
    let a = data(3000, 4, 1);
    let b = data(50_000, 2, 2);
    let c = data(0, 0, 3);
    let mut multi = gzip(&a, 6);
    multi.extend(gzip_with_header(&b, 1, true));
    multi.extend(gzip(&c, 9));
    multi.extend(gzip_with_header(&a, 0, false));
    let mut padded = gzip(&b, 5);
    padded.extend([0u8; 7]);
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("header fields", gzip_with_header(&a, 6, false), a.clone()),
        ("header crc", gzip_with_header(&b, 9, true), b.clone()),
        ("four members", multi, [a.clone(), b.clone(), c, a.clone()].concat()),
        ("zero padding", padded, b.clone()),
    ];
    for (what, g, d) in &cases {
        // flate2 reads no zero padding after a member (gzip(1) and Python's gzip skip it)
        let g = if *what == "zero padding" { &g[..g.len() - 7] } else { &g[..] };
        assert!(ref_gunzip(g).as_ref() == Some(d), "{what}: flate2 agrees");
    }
    for &seed in seeds() {
        let inputs: Vec<ChunkInput<'_>> = cases
            .iter()
            .map(|(_, g, d)| ChunkInput::gzip(g).with_expected_len(d.len()).with_checksum_verification())
            .collect();
        for (r, (what, _, d)) in decode(seed, &inputs).into_iter().zip(&cases) {
            let v = r.unwrap_or_else(|e| panic!("{what} (seed {seed}): {e}"));
            assert!(v == *d, "{what} (seed {seed}) differs");
        }
    }
    // Without an expected size, a single member's size comes from its ISIZE.
    let g = gzip(&b, 6);
    assert_eq!(decode(0, &[ChunkInput::gzip(&g)])[0].as_ref().unwrap(), &b);
}

// ---- Corrupt and truncated input ----

#[test]
fn statuses_name_what_is_wrong() {
    let d = data(20_000, 4, 7);
    let g = gzip(&d, 6);
    let z = zlib(&d, 6);
    let mut bad_crc = g.clone();
    let n = bad_crc.len();
    bad_crc[n - 6] ^= 1;
    let mut bad_isize = g.clone();
    bad_isize[n - 1] ^= 1;
    let mut bad_adler = z.clone();
    let m = bad_adler.len();
    bad_adler[m - 1] ^= 0x40;
    let mut bad_hcrc = gzip_with_header(&d, 6, true);
    let hc = bad_hcrc.len();
    // flip the header CRC (the two bytes before the deflate data, which match `plain`'s)
    let plain = gzip_with_header(&d, 6, false);
    let header_end = hc - (plain.len() - header_len(&plain));
    bad_hcrc[header_end - 1] ^= 0xFF;
    // a match before the start of the output
    let mut w = Bits::default();
    fixed_block(&mut w, &[Op::Lit(1), Op::Match(5, 2)], true);
    let bad_dist = zlib_wrap(&w.finish(), &[1, 1, 1, 1, 1, 1]);
    let mut reserved = z.clone();
    reserved[2] |= 6; // block type 3
    let mut dict = z.clone();
    let flg = 0xA0u32; // FDICT set, the header check made valid
    dict[1] = (flg + (31 - ((0x78 << 8 | flg) % 31)) % 31) as u8;
    let cases: Vec<(&str, ChunkInput<'_>, StreamStatus)> = vec![
        ("crc32", ChunkInput::gzip(&bad_crc), StreamStatus::ChecksumMismatch),
        ("isize", ChunkInput::gzip(&bad_isize).with_expected_len(d.len()), StreamStatus::ChecksumMismatch),
        ("adler32", ChunkInput::zlib(&bad_adler), StreamStatus::ChecksumMismatch),
        ("header crc", ChunkInput::gzip(&bad_hcrc), StreamStatus::ChecksumMismatch),
        ("distance", ChunkInput::zlib(&bad_dist), StreamStatus::BadOffset),
        ("overflow", ChunkInput::gzip(&g).with_expected_len(d.len() - 1), StreamStatus::DstOverflow),
        ("short", ChunkInput::zlib(&z).with_expected_len(d.len() + 1), StreamStatus::SizeMismatch),
        ("truncated", ChunkInput::zlib(&z[..z.len() / 2]), StreamStatus::SrcTruncated),
        ("no trailer", ChunkInput::gzip(&g[..g.len() - 3]).with_expected_len(d.len()), StreamStatus::SrcTruncated),
        ("reserved block", ChunkInput::zlib(&reserved), StreamStatus::Corrupt),
        ("dictionary", ChunkInput::zlib(&dict), StreamStatus::Unsupported),
    ];
    let inputs: Vec<ChunkInput<'_>> = cases
        .iter()
        .map(|(_, i, _)| {
            let i = if i.expected_len.is_none() { i.with_expected_len(d.len()) } else { *i };
            if i.bytes == bad_dist.as_slice() { i.with_expected_len(6) } else { i }
        })
        .map(ChunkInput::with_checksum_verification)
        .collect();
    for &seed in seeds() {
        for (r, (what, _, want)) in decode(seed, &inputs).iter().zip(&cases) {
            assert_eq!(status_of(r), Some(*want), "{what} (seed {seed}): {r:?}");
        }
    }
    // Without verification, checksums are not read.
    let lax: Vec<ChunkInput<'_>> =
        [ChunkInput::gzip(&bad_crc), ChunkInput::zlib(&bad_adler), ChunkInput::gzip(&bad_hcrc)]
            .into_iter()
            .map(|i| i.with_expected_len(d.len()))
            .collect();
    for r in decode(0, &lax) {
        assert_eq!(r.unwrap(), d);
    }
}

// `run_inflate_checks` (flate2's streams at every level, a two-member gzip chunk, each fault's
// status) runs on the emulator and on a GPU from one source: `tests/gpu.rs`
// (`emulated_inflate_matches_flate2_and_corruption_is_a_status`).

/// Bytes of a gzip member's header (FEXTRA, FNAME, FCOMMENT, no FHCRC).
fn header_len(g: &[u8]) -> usize {
    let xlen = u16::from_le_bytes([g[10], g[11]]) as usize;
    let mut end = 12 + xlen;
    for _ in 0..2 {
        end += g[end..].iter().position(|&b| b == 0).unwrap() + 1;
    }
    end
}

#[test]
fn corrupt_and_truncated_streams_end_in_a_status() {
    let d = data(6000, 4, 11);
    let mut originals = vec![(gzip(&d, 6), true), (zlib(&d, 1), false), (zlib(&d, 0), false)];
    let mut w = Bits::default();
    let ops = random_ops(400, 5);
    let mut dd = Vec::new();
    execute(&mut dd, &ops);
    dynamic_block(&mut w, &ops, true);
    originals.push((zlib_wrap(&w.finish(), &dd), false));
    let mut s = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let per = if under_tsan() {
        9
    } else if under_asan() {
        40
    } else {
        120
    };
    let mut variants: Vec<(Vec<u8>, bool, usize, bool)> = Vec::new(); // bytes, gzip, expected, truncated
    for (c, gz) in &originals {
        let expect = if *gz { d.len() } else { ref_unzlib(c).unwrap().len() };
        for k in 0..per {
            if k % 3 == 0 {
                let cut = (next() as usize) % c.len();
                variants.push((c[..cut].to_vec(), *gz, expect, true));
            } else {
                let mut v = c.clone();
                for _ in 0..=k % 4 {
                    let at = (next() as usize) % v.len();
                    v[at] ^= 1 << (next() % 8);
                }
                variants.push((v, *gz, expect, false));
            }
        }
    }
    for verify in [true, false] {
        let inputs: Vec<ChunkInput<'_>> = variants
            .iter()
            .map(|(v, gz, n, _)| {
                let i = if *gz { ChunkInput::gzip(v) } else { ChunkInput::zlib(v) }.with_expected_len(*n);
                if verify { i.with_checksum_verification() } else { i }
            })
            .collect();
        for (r, (v, gz, _, truncated)) in decode(SEEDS[1], &inputs).iter().zip(&variants) {
            match r {
                Ok(out) => {
                    assert!(!truncated, "a truncated stream decoded");
                    if verify {
                        let reference = if *gz { ref_gunzip(v) } else { ref_unzlib(v) };
                        assert_eq!(reference.as_ref(), Some(out), "a verified corrupt stream decoded unlike flate2");
                    }
                }
                Err(e) => assert!(status_of(r).is_some() || matches!(e, Error::Decode { .. }), "{e}"),
            }
        }
    }
}

// ---- Table builds and checksums on all lanes ----

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// Random complete code lengths (Kraft sum exactly 1, at most 15 bits) for `m >= 2` symbols:
/// leaves split one at a time, the deepest one a third of the time, so that codes of 11-15
/// bits (subtables of several sizes) come up under several root prefixes.
fn random_complete(m: usize, next: &mut impl FnMut() -> u64) -> Vec<u32> {
    let mut leaves = vec![1u32, 1];
    while leaves.len() < m {
        let splittable: Vec<usize> = (0..leaves.len()).filter(|&i| leaves[i] < 15).collect();
        let deepest = splittable.iter().copied().max_by_key(|&i| leaves[i]).unwrap();
        let i = if next().is_multiple_of(3) { deepest } else { splittable[(next() as usize) % splittable.len()] };
        leaves[i] += 1;
        leaves.push(leaves[i]);
    }
    leaves
}

/// Code-length symbols: (symbol, extra value, extra bits).
type Syms = Vec<(u32, u32, u32)>;

/// A checksum case: what, the stream, gzip (else zlib), the output, whether its checksum is right.
type CheckCase = (String, Vec<u8>, bool, Vec<u8>, bool);

/// How the code lengths are run-length coded: the most zeros per 18 and per 17, the most
/// repeats per 16, and whether a zero after a zero may be repeated by a 16.
#[derive(Clone, Copy, Debug)]
struct Rle(usize, usize, usize, bool);

const RLES: [Rle; 4] = [Rle(138, 10, 6, false), Rle(11, 3, 3, false), Rle(40, 7, 4, true), Rle(138, 10, 6, true)];

/// Code-length symbols (symbol, extra value, extra bits) for `all` under `cap`. Runs cross the
/// literal/length and distance boundary wherever the lengths continue.
fn rle(all: &[u32], cap: Rle) -> Syms {
    let mut syms = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let v = all[i];
        let mut run = 1;
        while i + run < all.len() && all[i + run] == v {
            run += 1;
        }
        let after = i > 0 && all[i - 1] == v;
        if v == 0 && run >= 11 && cap.0 >= 11 && !(cap.3 && after) {
            let r = run.min(cap.0);
            syms.push((18, r as u32 - 11, 7));
            i += r;
        } else if v == 0 && run >= 3 && !(cap.3 && after) {
            let r = run.min(cap.1);
            syms.push((17, r as u32 - 3, 3));
            i += r;
        } else if after && run >= 3 && (v != 0 || cap.3) {
            let r = run.min(cap.2);
            syms.push((16, r as u32 - 3, 2));
            i += r;
        } else {
            syms.push((v, 0, 0));
            i += 1;
        }
    }
    syms
}

/// A complete code-length code over the symbols `syms` uses.
fn pre_code(syms: &[(u32, u32, u32)]) -> [u32; 19] {
    let mut used: Vec<usize> = syms.iter().map(|s| s.0 as usize).collect();
    used.sort_unstable();
    used.dedup();
    if used.len() == 1 {
        used.push(usize::from(used[0] == 0));
    }
    let m = used.len();
    let k = usize::BITS - 1 - m.leading_zeros();
    let short = (1usize << (k + 1)) - m; // codes of k bits (all of them when m is 2^k)
    let mut pl = [0u32; 19];
    for (j, &s) in used.iter().enumerate() {
        pl[s] = if j < short { k } else { k + 1 };
    }
    pl
}

/// A dynamic block's header: `hlit` and `hdist` lengths, the code-length code `pl` and
/// the code-length symbols `syms`.
fn dynamic_header(w: &mut Bits, hlit: usize, hdist: usize, pl: &[u32; 19], syms: &[(u32, u32, u32)], last: bool) {
    let pc = canonical(pl);
    let hclen = (ORDER.iter().rposition(|&s| pl[s] > 0).unwrap() + 1).max(4);
    w.put(u32::from(last), 1);
    w.put(2, 2);
    w.put(hlit as u32 - 257, 5);
    w.put(hdist as u32 - 1, 5);
    w.put(hclen as u32 - 4, 4);
    for &s in &ORDER[..hclen] {
        w.put(pl[s], 3);
    }
    for &(s, e, eb) in syms {
        w.code(pc[s as usize], pl[s as usize]);
        w.put(e, eb);
    }
}

/// Random ops that use only symbols with a code in `ll` and `dl`.
fn ops_for(ll: &[u32], dl: &[u32], n: usize, next: &mut impl FnMut() -> u64) -> Vec<Op> {
    let lits: Vec<u8> = (0..256usize).filter(|&s| ll[s] > 0).map(|s| s as u8).collect();
    let lens: Vec<usize> = (0..29).filter(|&i| ll.get(257 + i).is_some_and(|&l| l > 0)).collect();
    let dists: Vec<usize> = (0..dl.len().min(30)).filter(|&i| dl[i] > 0).collect();
    let mut ops = Vec::new();
    let mut produced = 0u32;
    while ops.len() < n {
        let fits: Vec<usize> = dists.iter().copied().filter(|&d| DIST_BASE[d] <= produced).collect();
        if !next().is_multiple_of(4) || lens.is_empty() || fits.is_empty() {
            ops.push(Op::Lit(lits[(next() as usize) % lits.len()]));
            produced += 1;
        } else {
            let li = lens[(next() as usize) % lens.len()];
            let span = if li == 27 { 31 } else { 1u64 << LEN_EXTRA[li] };
            let len = if li == 28 { 258 } else { LEN_BASE[li] + (next() % span) as u32 };
            let di = fits[(next() as usize) % fits.len()];
            let dist = (DIST_BASE[di] + (next() % (1u64 << DIST_EXTRA[di])) as u32).min(produced);
            ops.push(Op::Match(len, dist));
            produced += len;
        }
    }
    ops
}

/// Code lengths `lens` for the symbols `used` (in that order), 0 elsewhere, `n` symbols.
fn place(n: usize, used: &[usize], lens: &[u32]) -> Vec<u32> {
    let mut v = vec![0u32; n];
    for (&s, &l) in used.iter().zip(lens) {
        v[s] = l;
    }
    v
}

/// Dynamic blocks whose code lengths exercise the table build and the header decode: every
/// code-length repeat code (16 after a length and after a zero, 17, 18 of 11 and of 138) at
/// the start, across the literal/length–distance boundary and ending exactly at HLIT + HDIST;
/// codes of 15 bits in both tables (subtables of 5 and 7 bits); random complete codes with
/// long codes under several root prefixes; HLIT and HDIST below their maxima; a distance code
/// of one 1-bit code and of none, and a literal/length code of the end-of-block code alone.
#[test]
fn dynamic_tables_decode() {
    let mut codes: Vec<(String, Vec<u32>, Vec<u32>)> = Vec::new();
    // every literal/length symbol: 226 codes of 8 bits, 60 of 9 (226..=285); distances of 9 bits
    // first, so the 9s run on across the boundary (a 16 crosses it); 20 zeros end the lengths
    let all: Vec<usize> = (0..286).collect();
    let ll = place(286, &all, &[[8u32; 226].as_slice(), &[9u32; 60]].concat());
    let mut dl = vec![9u32, 9, 8, 7, 6, 5, 4, 3, 2, 1];
    dl.resize(30, 0);
    codes.push(("nines across the boundary".into(), ll, dl));
    // 20 leading zeros (an 18 first), length codes 280..=285 and distances 0..=2 unused (zeros
    // across the boundary)
    let used: Vec<usize> = (20..280).collect();
    let ll = place(286, &used, &random_complete(used.len(), &mut xorshift(1)));
    let dused: Vec<usize> = (3..30).collect();
    let dl = place(30, &dused, &random_complete(dused.len(), &mut xorshift(2)));
    codes.push(("zeros across the boundary".into(), ll, dl));
    // 15-bit codes: 14 literals of 1..=14 bits, end-of-block and length 3 of 15; distance codes
    // 0..=15 of 1..=15 bits and 15 again
    let used: Vec<usize> = (b'a'..b'a' + 14).map(usize::from).chain([256, 257]).collect();
    let ll = place(258, &used, &(1..=15).chain([15]).collect::<Vec<u32>>());
    let dl: Vec<u32> = (1..=15).chain([15]).collect();
    codes.push(("15-bit codes".into(), ll, dl));
    // one distance code of one bit; no distance code; the end-of-block code alone (1 bit)
    let used: Vec<usize> = (0..=256).collect();
    let ll = place(257, &used, &random_complete(used.len(), &mut xorshift(3)));
    codes.push(("one 1-bit distance code".into(), ll.clone(), vec![0, 0, 0, 1]));
    codes.push(("no distance code".into(), ll, vec![0]));
    codes.push(("end-of-block alone".into(), place(257, &[256], &[1]), vec![0]));
    for seed in 1..=6u64 {
        let mut next = xorshift(seed + 100);
        let hlit = 257 + (next() % 30) as usize;
        let hdist = 1 + (next() % 30) as usize;
        let used: Vec<usize> = (0..hlit).filter(|&s| s == 256 || s == 97 || !next().is_multiple_of(3)).collect();
        let ll = place(hlit, &used, &random_complete(used.len(), &mut next));
        let dused: Vec<usize> = (0..hdist).filter(|_| !next().is_multiple_of(4)).collect();
        let dl = if dused.len() >= 2 {
            place(hdist, &dused, &random_complete(dused.len(), &mut next))
        } else {
            vec![0; hdist]
        };
        codes.push((format!("random {seed} (HLIT {hlit}, HDIST {hdist})"), ll, dl));
    }
    let mut cases: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    for (k, (what, ll, dl)) in codes.iter().enumerate() {
        assert!(ll.iter().chain(dl).all(|&l| l <= 15));
        let mut next = xorshift(k as u64 + 7);
        let ops = if ll.iter().take(256).any(|&l| l > 0) { ops_for(ll, dl, 2000, &mut next) } else { Vec::new() };
        let mut d = Vec::new();
        execute(&mut d, &ops);
        for cap in RLES {
            let all: Vec<u32> = ll.iter().chain(dl).copied().collect();
            let syms = rle(&all, cap);
            let mut w = Bits::default();
            dynamic_header(&mut w, ll.len(), dl.len(), &pre_code(&syms), &syms, true);
            write_symbols(&mut w, &ops, (&canonical(ll), ll), (&canonical(dl), dl));
            cases.push((format!("{what}, {cap:?}"), zlib_wrap(&w.finish(), &d), d.clone()));
        }
    }
    check_hand_built_zlib(&cases);
}

/// Code sets the table build must refuse (over-subscribed or incomplete, early or only at 15
/// bits, in either table), a missing end-of-block code, bad code-length codes and code-length
/// sequences: each a CORRUPT status.
#[test]
fn bad_code_sets_are_corrupt() {
    let used: Vec<usize> = (0..=256).collect();
    let good = random_complete(used.len(), &mut xorshift(9));
    assert!(good.contains(&15), "the random code has 15-bit codes");
    let ll_good = place(257, &used, &good);
    let dl_good = vec![1u32, 1];
    let mut extra = ll_good.clone();
    extra.push(15); // symbol 257 of 15 bits more: over-subscribed at 15 bits only
    let mut short15 = ll_good.clone();
    short15[good.iter().position(|&l| l == 15).unwrap()] = 0; // one 15-bit code fewer: incomplete
    let no_eob_used: Vec<usize> = (0..256).chain([257]).collect();
    let no_eob = place(258, &no_eob_used, &random_complete(no_eob_used.len(), &mut xorshift(10)));
    let code_sets: Vec<(&str, Vec<u32>, Vec<u32>)> = vec![
        ("literal/length over-subscribed", place(257, &[0, 1, 256], &[1, 1, 1]), dl_good.clone()),
        ("literal/length over-subscribed at 15 bits", extra, dl_good.clone()),
        ("literal/length incomplete at 15 bits", short15, dl_good.clone()),
        ("literal/length incomplete", place(257, &[0, 1, 256], &[2, 2, 2]), dl_good.clone()),
        ("distance incomplete", ll_good.clone(), vec![2, 2]),
        ("distance over-subscribed", ll_good.clone(), vec![1, 1, 1]),
        ("no end-of-block code", no_eob, dl_good.clone()),
    ];
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for (what, ll, dl) in &code_sets {
        let all: Vec<u32> = ll.iter().chain(dl).copied().collect();
        let syms = rle(&all, RLES[0]);
        let mut w = Bits::default();
        dynamic_header(&mut w, ll.len(), dl.len(), &pre_code(&syms), &syms, true);
        w.put(0, 32);
        cases.push(((*what).to_string(), zlib_wrap(&w.finish(), &[])));
    }
    let all: Vec<u32> = ll_good.iter().chain(&dl_good).copied().collect();
    let syms = rle(&all, RLES[0]);
    let pl = pre_code(&syms);
    let mut pre_bad: Vec<(&str, [u32; 19])> = Vec::new();
    let mut p = pl;
    let longest = (0..19).max_by_key(|&s| pl[s]).unwrap();
    p[longest] = 0; // one code fewer
    pre_bad.push(("code-length code incomplete", p));
    let mut p = pl;
    let unused = (0..19).find(|&s| pl[s] == 0).unwrap();
    p[unused] = 1; // one more code
    pre_bad.push(("code-length code over-subscribed", p));
    for (what, p) in pre_bad {
        let mut w = Bits::default();
        dynamic_header(&mut w, ll_good.len(), dl_good.len(), &p, &[], true);
        w.put(0, 32);
        cases.push((what.to_string(), zlib_wrap(&w.finish(), &[])));
    }
    let mut seqs: Vec<(&str, Syms)> = Vec::new();
    seqs.push(("a 16 first", [vec![(16, 0, 2)], syms.clone()].concat()));
    let mut past = syms.clone();
    past.pop();
    past.push((18, 127, 7)); // 138 zeros past HLIT + HDIST
    seqs.push(("a repeat past the lengths", past));
    for (what, s) in seqs {
        let mut both = s.clone();
        both.push((16, 0, 2));
        let p = pre_code(&both);
        let mut w = Bits::default();
        dynamic_header(&mut w, ll_good.len(), dl_good.len(), &p, &s, true);
        w.put(0, 32);
        cases.push((what.to_string(), zlib_wrap(&w.finish(), &[])));
    }
    for (hlit, hdist) in [(287, 30), (288, 1), (286, 31), (257, 32)] {
        let mut w = Bits::default();
        w.put(1, 1);
        w.put(2, 2);
        w.put(hlit - 257, 5);
        w.put(hdist - 1, 5);
        w.put(0, 4 + 32);
        cases.push((format!("HLIT {hlit}, HDIST {hdist}"), zlib_wrap(&w.finish(), &[])));
    }
    for (what, c) in &cases {
        assert!(ref_unzlib(c).is_none(), "{what}: flate2 refuses it too");
    }
    for &seed in seeds() {
        let inputs: Vec<ChunkInput<'_>> =
            cases.iter().map(|(_, c)| ChunkInput::zlib(c).with_expected_len(16)).collect();
        for (r, (what, _)) in decode(seed, &inputs).iter().zip(&cases) {
            assert_eq!(status_of(r), Some(StreamStatus::Corrupt), "{what} (seed {seed}): {r:?}");
        }
    }
}

/// A gzip member of one stored block of `d` whose trailer holds the CRC32 of `crc_of`.
fn stored_member(d: &[u8], crc_of: &[u8]) -> Vec<u8> {
    let mut w = Bits::default();
    stored_block(&mut w, d, true);
    let mut g = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    g.extend(w.finish());
    g.extend(crc32(crc_of).to_le_bytes());
    g.extend((d.len() as u32).to_le_bytes());
    g
}

/// CRC32 and Adler-32 over lengths around the warp's 4-byte words and 512-byte steps, members
/// starting at every offset modulo 16 (after a first member of 0-15 bytes): the right checksum
/// passes, and a checksum of the data with any one byte changed (every position of a word, the
/// start, the end and around the steps) is a `ChecksumMismatch`.
#[test]
fn checksums_cover_every_byte() {
    let lengths = [
        0usize, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129, 511, 512, 513, 1023, 1025, 2051, 4097,
    ];
    let mut cases: Vec<CheckCase> = Vec::new();
    for &n in &lengths {
        let d = data(n, 0, n as u64);
        for lead in 0..16usize {
            if lead % 4 != 0 && n > 600 && lead != 3 {
                continue;
            }
            let first = data(lead, 0, 99);
            let mut g = stored_member(&first, &first);
            g.extend(stored_member(&d, &d));
            cases.push((format!("gzip {lead}+{n}"), g, true, [first, d.clone()].concat(), true));
        }
        let mut w = Bits::default();
        stored_block(&mut w, &d, true);
        cases.push((format!("zlib {n}"), zlib_wrap(&w.finish(), &d), false, d.clone(), true));
        let positions: Vec<usize> = if n <= 33 {
            (0..n).collect()
        } else {
            (0..5).chain(n - 5..n).chain(506..518).chain(1020..1030).filter(|&p| p < n).collect()
        };
        for p in positions {
            let mut bad = d.clone();
            bad[p] ^= 1 << (p % 8);
            for lead in [0usize, 3] {
                let first = data(lead, 0, 99);
                let mut g = stored_member(&first, &first);
                g.extend(stored_member(&d, &bad));
                cases.push((format!("gzip {lead}+{n}, byte {p}"), g, true, [first, d.clone()].concat(), false));
            }
            let mut w = Bits::default();
            stored_block(&mut w, &d, true);
            cases.push((format!("zlib {n}, byte {p}"), zlib_wrap(&w.finish(), &bad), false, d.clone(), false));
        }
    }
    for &seed in seeds() {
        let inputs: Vec<ChunkInput<'_>> = cases
            .iter()
            .map(|(_, c, gz, d, _)| {
                let i = if *gz { ChunkInput::gzip(c) } else { ChunkInput::zlib(c) };
                i.with_expected_len(d.len()).with_checksum_verification()
            })
            .collect();
        for (r, (what, _, _, d, good)) in decode(seed, &inputs).iter().zip(&cases) {
            if *good {
                assert_eq!(r.as_ref().ok(), Some(d), "{what} (seed {seed}): {r:?}");
            } else {
                assert_eq!(status_of(r), Some(StreamStatus::ChecksumMismatch), "{what} (seed {seed}): {r:?}");
            }
        }
    }
}

/// Hand-built zlib streams `(what, stream, decoded)`: flate2 must agree with each, then the
/// emulated kernel must decode all of them, checksums verified, under every schedule seed.
fn check_hand_built_zlib(cases: &[(String, Vec<u8>, Vec<u8>)]) {
    for (what, c, d) in cases {
        assert_eq!(ref_unzlib(c).as_ref(), Some(d), "{what}: flate2 agrees with the hand-built stream");
    }
    for &seed in seeds() {
        let inputs: Vec<ChunkInput<'_>> = cases
            .iter()
            .map(|(_, c, d)| ChunkInput::zlib(c).with_expected_len(d.len()).with_checksum_verification())
            .collect();
        for (r, (what, _, d)) in decode(seed, &inputs).into_iter().zip(cases) {
            let v = r.unwrap_or_else(|e| panic!("{what} (seed {seed}): {e}"));
            assert!(v == *d, "{what} (seed {seed}) differs");
        }
    }
}

/// A complete code of at most `max` bits over `m >= 2` symbols (leaves split one at a time,
/// the deepest splittable one a third of the time).
fn random_complete_upto(m: usize, max: u32, next: &mut impl FnMut() -> u64) -> Vec<u32> {
    let mut leaves = vec![1u32, 1];
    while leaves.len() < m {
        let splittable: Vec<usize> = (0..leaves.len()).filter(|&i| leaves[i] < max).collect();
        let deepest = splittable.iter().copied().max_by_key(|&i| leaves[i]).unwrap();
        let i = if next().is_multiple_of(3) { deepest } else { splittable[(next() as usize) % splittable.len()] };
        leaves[i] += 1;
        leaves.push(leaves[i]);
    }
    leaves
}

/// Code-length codes of every shape the header decode meets (it decodes them from registers
/// by per-length limits, no table): codes of 1 to 7 bits with lengths skipped in between (a
/// chain 1, 2, .., 7, 7), all 19 symbols coded (HCLEN 19, the canonical positions past 12),
/// random complete codes of at most 6 and 7 bits over the symbols used and over unused ones
/// too; then a second dynamic block with fewer lengths after one with HLIT 286 and HDIST 30
/// (the stored lengths past the new HLIT and HDIST must read as 0), and an end-of-block code
/// missing inside a run of zeros (CORRUPT).
#[test]
fn code_length_codes_of_every_shape_decode() {
    // code sets: few distinct lengths (a chain fits), and many
    let used: Vec<usize> = (0..=256).collect();
    let ll_few = place(257, &used, &random_complete(used.len(), &mut xorshift(21)));
    let all_ll: Vec<usize> = (0..286).collect();
    let ll_full = place(286, &all_ll, &[[8u32; 226].as_slice(), &[9u32; 60]].concat());
    let mut dl_full = vec![9u32, 9, 8, 7, 6, 5, 4, 3, 2, 1];
    dl_full.resize(30, 0);
    let sets: Vec<(&str, Vec<u32>, Vec<u32>)> =
        vec![("random literal/length", ll_few.clone(), vec![1, 1]), ("every symbol", ll_full.clone(), dl_full.clone())];
    let mut cases: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    for (k, (what, ll, dl)) in sets.iter().enumerate() {
        let mut next = xorshift(k as u64 + 31);
        let ops = ops_for(ll, dl, 1500, &mut next);
        let mut d = Vec::new();
        execute(&mut d, &ops);
        let all: Vec<u32> = ll.iter().chain(dl).copied().collect();
        for cap in RLES {
            let syms = rle(&all, cap);
            let mut sused: Vec<usize> = syms.iter().map(|s| s.0 as usize).collect();
            sused.sort_unstable();
            sused.dedup();
            let mut pres: Vec<(String, [u32; 19])> = Vec::new();
            if sused.len() <= 8 {
                // a chain: one code of each length 1..=m-2 and two of m-1
                let mut p = [0u32; 19];
                let m = sused.len();
                for (j, &s) in sused.iter().rev().enumerate() {
                    p[s] = (j as u32 + 1).min(m as u32 - 1);
                }
                pres.push(("chain".into(), p));
            }
            for (seed, max, everyone) in [(1u64, 7u32, false), (2, 7, true), (3, 6, false), (4, 7, true), (5, 6, true)]
            {
                let syms_of: Vec<usize> = if everyone { (0..19).collect() } else { sused.clone() };
                let mut next = xorshift(seed * 17 + k as u64);
                let mut lens = random_complete_upto(syms_of.len(), max, &mut next);
                // shuffle which symbol gets which length
                for i in (1..lens.len()).rev() {
                    lens.swap(i, (next() as usize) % (i + 1));
                }
                let mut p = [0u32; 19];
                for (&s, &l) in syms_of.iter().zip(&lens) {
                    p[s] = l;
                }
                pres.push((format!("random ≤ {max} bits{}", if everyone { ", all 19" } else { "" }), p));
            }
            for (pw, p) in pres {
                let mut w = Bits::default();
                dynamic_header(&mut w, ll.len(), dl.len(), &p, &syms, true);
                write_symbols(&mut w, &ops, (&canonical(ll), ll), (&canonical(dl), dl));
                cases.push((format!("{what}, {cap:?}, {pw}"), zlib_wrap(&w.finish(), &d), d.clone()));
            }
        }
    }
    // a block of every length (HLIT 286, HDIST 30), then a block of 257 and 2 lengths
    {
        let mut next = xorshift(41);
        let ops1 = ops_for(&ll_full, &dl_full, 800, &mut next);
        let mut d = Vec::new();
        execute(&mut d, &ops1);
        let dl2 = vec![1u32, 1];
        let ops2: Vec<Op> = ops_for(&ll_few, &dl2, 800, &mut next)
            .into_iter()
            .map(|o| match o {
                Op::Match(l, dist) => Op::Match(l, dist.min(2)),
                o @ Op::Lit(_) => o,
            })
            .collect();
        execute(&mut d, &ops2);
        let mut w = Bits::default();
        let all1: Vec<u32> = ll_full.iter().chain(&dl_full).copied().collect();
        let s1 = rle(&all1, RLES[0]);
        dynamic_header(&mut w, 286, 30, &pre_code(&s1), &s1, false);
        write_symbols(&mut w, &ops1, (&canonical(&ll_full), &ll_full), (&canonical(&dl_full), &dl_full));
        let all2: Vec<u32> = ll_few.iter().chain(&dl2).copied().collect();
        let s2 = rle(&all2, RLES[0]);
        dynamic_header(&mut w, 257, 2, &pre_code(&s2), &s2, true);
        write_symbols(&mut w, &ops2, (&canonical(&ll_few), &ll_few), (&canonical(&dl2), &dl2));
        cases.push(("fewer lengths after every length".into(), zlib_wrap(&w.finish(), &d), d));
    }
    check_hand_built_zlib(&cases);
    // no end-of-block code: symbol 256 inside a run of zeros (a 17), and inside an 18
    let mut bad: Vec<(String, Vec<u8>)> = Vec::new();
    for (lo, hi) in [(251usize, 260usize), (240, 270)] {
        let used: Vec<usize> = (0..lo).chain(hi..286).collect();
        let ll = place(286, &used, &random_complete(used.len(), &mut xorshift(lo as u64)));
        let all: Vec<u32> = ll.iter().chain(&[1u32, 1]).copied().collect();
        let syms = rle(&all, RLES[0]);
        assert!(syms.iter().any(|s| s.0 == 17 || s.0 == 18));
        let mut w = Bits::default();
        dynamic_header(&mut w, 286, 2, &pre_code(&syms), &syms, true);
        w.put(0, 32);
        bad.push((format!("zeros {lo}..{hi}"), zlib_wrap(&w.finish(), &[])));
    }
    for (what, c) in &bad {
        assert!(ref_unzlib(c).is_none(), "{what}: flate2 refuses it too");
    }
    for &seed in seeds() {
        let inputs: Vec<ChunkInput<'_>> = bad.iter().map(|(_, c)| ChunkInput::zlib(c).with_expected_len(16)).collect();
        for (r, (what, _)) in decode(seed, &inputs).iter().zip(&bad) {
            assert_eq!(status_of(r), Some(StreamStatus::Corrupt), "{what} (seed {seed}): {r:?}");
        }
    }
}
