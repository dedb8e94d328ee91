//! zstd kernel tests through the host emulator, held byte for byte to the `zstd` crate
//! (libzstd) as reference: every level from -5 to 22, with and without checksum and content
//! size, 1 byte to 4 MiB, multi-frame and skippable chunks, frames built here on purpose for the
//! modes libzstd does not emit on its own (raw and RLE literals, RLE and repeat sequence tables,
//! treeless literals, direct Huffman weights), corrupt and truncated frames, and proptests.
//!
//! Every mode is shown decoded: the host parse counts block, literal and table modes per chunk
//! (`ZstdPlan::modes`), and `every_mode_is_decoded` sums them over chunks that decoded equal to
//! the reference and asserts each count is non-zero.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc, clippy::too_many_lines, clippy::cast_lossless)]

mod common;

use damacy_kernels::parse_zstd as parse;
use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device, Error, StreamStatus, Teams, ZstdModes};
use proptest::prelude::*;
use zstd::zstd_safe::CParameter;

/// Schedule seeds: launch order and a shuffled order of the lanes between synchronisations.
const SEEDS: [u64; 2] = [0, 0x5EED_2026];

/// Whether this run is the AddressSanitizer build (`scripts/asan.sh` sets `DAMACY_EMU_ASAN=1`
/// for the build and the run). It checks every access of the same cases, under the shuffled
/// schedule only and without the multi-MiB chunks, whose bounds checks are those of the smaller
/// ones: instrumented, they take minutes. The plain run covers both seeds and every size.
fn under_asan() -> bool {
    std::env::var("DAMACY_EMU_ASAN").is_ok_and(|v| v == "1")
}

/// Whether this run is the ThreadSanitizer build (`scripts/tsan.sh` sets `DAMACY_EMU_TSAN=1`
/// for the build and the run). gcc 12's libtsan makes every warp collective slow (vector-clock
/// updates per fiber), so there the checked cases run under the shuffled schedule only and the
/// corrupt and truncated sweeps on a smaller corpus with fewer cuts and flips: a race needs the
/// accesses of every frame kind, not of every cut.
fn under_tsan() -> bool {
    std::env::var("DAMACY_EMU_TSAN").is_ok_and(|v| v == "1")
}

/// The schedule seeds of this run.
fn seeds() -> &'static [u64] {
    if under_asan() || under_tsan() { &SEEDS[1..] } else { &SEEDS }
}

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// Test data of a few kinds: noise, runs, sparse noise on a pattern, a smooth field, text-like
/// letters, noisy 16-bit samples.
fn data(len: usize, kind: u8, seed: u64) -> Vec<u8> {
    let mut next = rng(seed);
    match kind % 6 {
        0 => (0..len).map(|_| next() as u8).collect(),
        1 => (0..len).map(|i| ((i / 7) as u8).wrapping_mul(3)).collect(),
        2 => (0..len).map(|i| if next().is_multiple_of(5) { next() as u8 } else { (i % 13) as u8 }).collect(),
        3 => (0..len).map(|i| ((i as f32 * 0.01).sin() * 1000.0) as i16 as u8).collect(),
        4 => (0..len).map(|_| b"the quick brown fox jumps "[(next() % 26) as usize]).collect(),
        _ => {
            let mut v: Vec<u8> = (0..len.div_ceil(2))
                .flat_map(|i| (((i as f32 * 0.003).sin() * 3000.0) as i16 + (next() % 7) as i16).to_le_bytes())
                .collect();
            v.truncate(len);
            v
        }
    }
}

fn compress(d: &[u8], level: i32, checksum: bool, content_size: bool) -> Vec<u8> {
    let mut c = zstd::bulk::Compressor::new(level).unwrap();
    c.set_parameter(CParameter::ChecksumFlag(checksum)).unwrap();
    c.set_parameter(CParameter::ContentSizeFlag(content_size)).unwrap();
    c.compress(d).unwrap()
}

fn reference_err(frame: &[u8]) -> String {
    match zstd::bulk::decompress(frame, 64 << 20) {
        Ok(v) => format!("ok, {} bytes", v.len()),
        Err(e) => e.to_string(),
    }
}

fn reference(frame: &[u8], cap: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut dec = zstd::stream::read::Decoder::new(frame).ok()?;
    let r = std::io::Read::read_to_end(&mut std::io::Read::take(&mut dec, cap as u64 + 1), &mut out);
    r.ok().map(|_| out)
}

/// Waves large enough for the 10 MiB chunk of `windows_past_8_mib`, one slot.
fn config() -> DecodeConfig {
    DecodeConfig::default()
        .with_wave_src_bytes(16 << 20)
        .with_wave_dst_bytes(16 << 20)
        .with_wave_streams(1 << 14)
        .with_slots(1)
}

/// Decodes the chunks (zstd streams of the wave's stream table) on the emulator under schedule
/// `seed`, by teams of warps (a block's four Huffman streams side by side) and by one warp a
/// job, which must agree (`common::decode_teams_and_alone`).
fn decode(seed: u64, inputs: &[ChunkInput<'_>]) -> Vec<Result<Vec<u8>, Error>> {
    common::decode_teams_and_alone(seed, inputs, config)
}

/// One chunk and the bytes it must decode to.
struct Case {
    frame: Vec<u8>,
    expect: Vec<u8>,
    give_len: bool,
    verify: bool,
    what: String,
}

/// Decodes the cases in one batch under every schedule seed, checks every result against the
/// expected bytes and against the reference decoder, and returns the modes the chunks used.
fn check(cases: &[Case]) -> ZstdModes {
    let mut modes = ZstdModes::default();
    for c in cases {
        let r = reference(&c.frame, c.expect.len())
            .unwrap_or_else(|| panic!("{}: libzstd rejects the frame: {}", c.what, reference_err(&c.frame)));
        assert!(r == c.expect, "{}: libzstd decodes to other bytes than expected", c.what);
        let p = parse(&c.frame, c.give_len.then_some(c.expect.len())).unwrap_or_else(|e| panic!("{}: {e}", c.what));
        modes.add(&p.modes);
    }
    let inputs: Vec<ChunkInput<'_>> = cases
        .iter()
        .map(|c| {
            let mut i = ChunkInput::zstd(&c.frame);
            if c.give_len {
                i = i.with_expected_len(c.expect.len());
            }
            if c.verify {
                i = i.with_checksum_verification();
            }
            i
        })
        .collect();
    for &seed in seeds() {
        let out = decode(seed, &inputs);
        for (c, r) in cases.iter().zip(out) {
            match r {
                Ok(v) => assert!(v == c.expect, "{} (seed {seed}): decoded bytes differ from libzstd's", c.what),
                Err(e) => panic!("{} (seed {seed}): {e}", c.what),
            }
        }
    }
    modes
}

fn natural_case(n: usize, kind: u8, level: i32, checksum: bool, content_size: bool) -> Case {
    let d = data(n, kind, ((n as u64) * 31 + u64::from(kind)).wrapping_add(level as u64));
    Case {
        frame: compress(&d, level, checksum, content_size),
        expect: d,
        give_len: !content_size,
        verify: checksum,
        what: format!("{n} bytes of kind {kind} at level {level}, checksum {checksum}, content size {content_size}"),
    }
}

/// Levels -5..=22, each with a spread of sizes, data kinds, checksum and content-size flags.
fn level_cases() -> Vec<Case> {
    let sizes = [1usize, 2, 7, 31, 100, 255, 256, 1000, 4096, 20_000, 65_536, 70_000, 140_000];
    let mut cases = Vec::new();
    for level in -5..=22 {
        for (k, &n) in sizes.iter().enumerate() {
            let i = k + (level + 5) as usize;
            cases.push(natural_case(n, (i % 6) as u8, level, i.is_multiple_of(2), !i.is_multiple_of(3)));
        }
    }
    cases
}

#[test]
fn every_level_matches_libzstd() {
    let m = check(&level_cases());
    assert!(m.frames >= 28 * 13);
    assert!(m.checksums > 0 && m.unknown_sizes > 0);
}

#[test]
fn large_chunks_match_libzstd() {
    let mut cases = Vec::new();
    if under_asan() {
        eprintln!("SKIPPED under ASan: the 4 MiB chunks (the 1 MiB and 256 KiB ones run)");
    } else {
        cases.push(natural_case(4 << 20, 5, 3, true, true));
        cases.push(natural_case(4 << 20, 3, 1, false, false));
    }
    cases.extend([
        natural_case(1 << 20, 4, 19, true, true),
        natural_case(1 << 20, 2, -5, true, false),
        natural_case(1 << 20, 0, 22, false, true),
        natural_case(256 << 10, 5, 9, true, true),
    ]);
    check(&cases);
}

/// Matches 9 MiB back: the window must reach past 8 MiB.
#[test]
fn windows_past_8_mib() {
    let mut next = rng(99);
    let head: Vec<u8> = (0..(1 << 20)).map(|_| next() as u8).collect();
    let mut d = head.clone();
    d.extend((0..(8 << 20)).map(|_| next() as u8));
    d.extend_from_slice(&head);
    let mut c = zstd::bulk::Compressor::new(19).unwrap();
    c.set_parameter(CParameter::WindowLog(24)).unwrap();
    c.set_parameter(CParameter::EnableLongDistanceMatching(true)).unwrap();
    c.set_parameter(CParameter::ChecksumFlag(true)).unwrap();
    let frame = c.compress(&d).unwrap();
    assert!(frame.len() < d.len() - (1 << 19), "the compressor found the far match ({} bytes)", frame.len());
    let p = parse(&frame, None).unwrap();
    assert!(p.frames[0].window_size >= 9 << 20, "window {}", p.frames[0].window_size);
    check(&[Case { frame, expect: d, give_len: false, verify: true, what: "9 MiB match distance".into() }]);
}

/// Files under `dir`, recursively, skipping metadata.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if !name.starts_with('.') && name != "zarr.json" {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The zstd frames of the fixture corpus written by zarr-python/numcodecs: v3 `zstd` chunks
/// (alone, after `transpose`, before `crc32c`), inner chunks of sharded zstd arrays, v2 zstd.
fn fixture_frames() -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut frames = Vec::new();
    for version in ["v2", "v3"] {
        let Ok(rd) = std::fs::read_dir(root.join(version)) else { continue };
        let mut dirs: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let name = format!("{version}/{}", dir.file_name().unwrap().to_string_lossy());
            if version == "v2" {
                let Ok(meta) = std::fs::read_to_string(dir.join(".zarray")) else { continue };
                let m: serde_json::Value = serde_json::from_str(&meta).unwrap();
                if m["compressor"]["id"] == "zstd" && m["filters"].is_null() {
                    frames.extend(files(&dir).into_iter().map(|f| (name.clone(), std::fs::read(f).unwrap())));
                }
                continue;
            }
            let Ok(meta) = std::fs::read_to_string(dir.join("zarr.json")) else { continue };
            let m: serde_json::Value = serde_json::from_str(&meta).unwrap();
            let codecs = m["codecs"].as_array().unwrap();
            let names: Vec<&str> = codecs.iter().map(|c| c["name"].as_str().unwrap()).collect();
            if names == ["sharding_indexed"] {
                let cfg = &codecs[0]["configuration"];
                let inner: Vec<&str> =
                    cfg["codecs"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
                if inner != ["bytes", "zstd"] {
                    continue;
                }
                let outer = m["chunk_grid"]["configuration"]["chunk_shape"].as_array().unwrap();
                let n: u64 = outer
                    .iter()
                    .zip(cfg["chunk_shape"].as_array().unwrap())
                    .map(|(o, i)| o.as_u64().unwrap().div_ceil(i.as_u64().unwrap()))
                    .product();
                let index_len = 16 * n as usize + 4;
                for f in files(&dir.join("c")) {
                    let shard = std::fs::read(f).unwrap();
                    let index = if cfg["index_location"] == "start" {
                        &shard[..index_len]
                    } else {
                        &shard[shard.len() - index_len..]
                    };
                    for e in index[..16 * n as usize].chunks(16) {
                        let off = u64::from_le_bytes(e[..8].try_into().unwrap());
                        let len = u64::from_le_bytes(e[8..].try_into().unwrap());
                        if off != u64::MAX {
                            frames.push((name.clone(), shard[off as usize..(off + len) as usize].to_vec()));
                        }
                    }
                }
            } else if let Some(z) = names.iter().position(|&c| c == "zstd") {
                let strip = if names[z + 1..] == ["crc32c"] {
                    4
                } else if z + 1 == names.len() {
                    0
                } else {
                    continue;
                };
                for f in files(&dir.join("c")) {
                    let b = std::fs::read(f).unwrap();
                    frames.push((name.clone(), b[..b.len() - strip].to_vec()));
                }
            }
        }
    }
    frames
}

#[test]
fn zstd_fixtures_match_libzstd() {
    let frames = fixture_frames();
    let arrays: std::collections::BTreeSet<&str> = frames.iter().map(|f| f.0.as_str()).collect();
    assert!(arrays.len() >= 11, "zstd fixtures found: {arrays:?}");
    eprintln!("{} zstd frames from {} fixture arrays: {arrays:?}", frames.len(), arrays.len());
    let cases: Vec<Case> = frames
        .iter()
        .map(|(name, f)| {
            let expect = zstd::bulk::decompress(f, 64 << 20).unwrap();
            Case {
                give_len: parse(f, None).is_err(),
                frame: f.clone(),
                expect,
                verify: true,
                what: format!("fixture {name}"),
            }
        })
        .collect();
    check(&cases);
}

// ---------------------------------------------------------------------------------------------
// A small zstd writer for frames libzstd does not produce on its own.

/// Appends bits least significant first; a backward reader reads them last-written first.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, v: u32, bits: u32) {
        assert!(bits <= 32 && (bits == 32 || v >> bits == 0));
        self.acc |= u64::from(v) << self.n;
        self.n += bits;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }
    /// The end marker bit, then padding.
    fn finish(mut self) -> Vec<u8> {
        self.put(1, 1);
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

const LL_BASE: [u32; 36] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024,
    2048, 4096, 8192, 16384, 32768, 65536,
];
const LL_BITS: [u32; 36] =
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
const ML_BASE_32: [u32; 21] =
    [35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539];
const ML_BITS_32: [u32; 21] = [1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

fn ml_code(code: usize) -> (u32, u32) {
    if code < 32 { (code as u32 + 3, 0) } else { (ML_BASE_32[code - 32], ML_BITS_32[code - 32]) }
}

/// A sequence as coded: literal length, offset value (offset + 3, or a repeat code 1..=3),
/// match length.
#[derive(Clone, Copy)]
struct Seq {
    ll: u32,
    ofv: u32,
    ml: u32,
}

fn codes(s: Seq) -> (usize, usize, usize) {
    let llc = (0..36).rev().find(|&c| LL_BASE[c] <= s.ll).unwrap();
    let mlc = (0..53).rev().find(|&c| ml_code(c).0 <= s.ml).unwrap();
    let ofc = 31 - s.ofv.leading_zeros() as usize;
    (llc, ofc, mlc)
}

enum Lits<'a> {
    Raw(&'a [u8]),
    Rle(u8, usize),
    /// Huffman with direct weights (written as a tree description unless `treeless`), 1 or 4
    /// streams.
    Huffman {
        lits: &'a [u8],
        weights: &'a [(u8, u8)],
        streams: usize,
        treeless: bool,
    },
}

/// Huffman codes (value, length) per symbol from (symbol, weight) pairs, plus the direct
/// tree description (the highest symbol's weight is implied).
fn huffman(weights: &[(u8, u8)]) -> (Vec<Option<(u32, u32)>>, Vec<u8>) {
    let mut w = [0u8; 256];
    for &(s, wt) in weights {
        w[s as usize] = wt;
    }
    let last = weights.iter().map(|p| p.0).max().unwrap() as usize;
    let sum: u32 = w.iter().map(|&x| if x > 0 { 1u32 << (x - 1) } else { 0 }).sum();
    let log = sum.ilog2();
    assert_eq!(sum, 1 << log, "weights must sum to a power of two");
    let mut codes = vec![None; 256];
    let mut idx = 0u32;
    for wt in 1..=log as u8 {
        for s in 0..256 {
            if w[s] == wt {
                let nb = log + 1 - u32::from(wt);
                codes[s] = Some((idx >> (log - nb), nb));
                idx += 1 << (wt - 1);
            }
        }
    }
    // Direct description: weights of symbols 0..last, two per byte, high nibble first.
    let mut desc = vec![(127 + last) as u8];
    for pair in w[..last].chunks(2) {
        desc.push((pair[0] << 4) | pair.get(1).copied().unwrap_or(0));
    }
    (codes, desc)
}

fn huffman_stream(lits: &[u8], codes: &[Option<(u32, u32)>]) -> Vec<u8> {
    let mut b = Bits::default();
    for &l in lits.iter().rev() {
        let (v, nb) = codes[l as usize].expect("symbol has a code");
        b.put(v, nb);
    }
    b.finish()
}

fn literals_section(l: &Lits<'_>) -> Vec<u8> {
    fn raw_rle_header(t: u8, n: usize) -> Vec<u8> {
        if n < 32 {
            vec![t | (n as u8) << 3]
        } else if n < 4096 {
            vec![t | 1 << 2 | ((n & 15) as u8) << 4, (n >> 4) as u8]
        } else {
            vec![t | 3 << 2 | ((n & 15) as u8) << 4, (n >> 4) as u8, (n >> 12) as u8]
        }
    }
    match l {
        Lits::Raw(d) => {
            let mut v = raw_rle_header(0, d.len());
            v.extend_from_slice(d);
            v
        }
        Lits::Rle(b, n) => {
            let mut v = raw_rle_header(1, *n);
            v.push(*b);
            v
        }
        Lits::Huffman { lits, weights, streams, treeless } => {
            let (codes, desc) = huffman(weights);
            let mut body = if *treeless { Vec::new() } else { desc };
            if *streams == 1 {
                body.extend(huffman_stream(lits, &codes));
            } else {
                // Segments of ceil(n / 4) literals, the last one the rest (possibly empty).
                let seg = lits.len().div_ceil(4);
                assert!(3 * seg <= lits.len(), "4 streams of {} literals", lits.len());
                let n = lits.len();
                let parts: Vec<Vec<u8>> =
                    (0..4).map(|k| huffman_stream(&lits[(k * seg).min(n)..((k + 1) * seg).min(n)], &codes)).collect();
                for p in &parts[..3] {
                    body.extend_from_slice(&(p.len() as u16).to_le_bytes());
                }
                for p in &parts {
                    body.extend_from_slice(p);
                }
            }
            let t = if *treeless { 3u64 } else { 2 };
            let (regen, csize) = (lits.len() as u64, body.len() as u64);
            let mut v = if *streams == 1 {
                assert!(regen < 1024 && csize < 1024);
                (t | (regen << 4) | (csize << 14)).to_le_bytes()[..3].to_vec()
            } else if regen < 1024 && csize < 1024 {
                (t | 1 << 2 | (regen << 4) | (csize << 14)).to_le_bytes()[..3].to_vec()
            } else {
                assert!(regen < 16384 && csize < 16384);
                (t | 2 << 2 | (regen << 4) | (csize << 18)).to_le_bytes()[..4].to_vec()
            };
            v.extend(body);
            v
        }
    }
}

/// Table mode of all three sequence tables in a crafted block.
#[derive(Clone, Copy, PartialEq)]
enum Tables {
    Rle,
    Repeat,
}

/// A compressed block: literals, then sequences whose three codes are the same for every
/// sequence (RLE tables, or the previous block's tables repeated).
fn compressed_block(l: &Lits<'_>, seqs: &[Seq], tables: Tables) -> Vec<u8> {
    let mut v = literals_section(l);
    let n = seqs.len();
    if n < 128 {
        v.push(n as u8);
    } else if n < 0x7F00 {
        v.extend_from_slice(&[(n >> 8) as u8 + 128, n as u8]);
    } else {
        v.push(255);
        v.extend_from_slice(&((n - 0x7F00) as u16).to_le_bytes());
    }
    if n == 0 {
        return v;
    }
    let (llc, ofc, mlc) = codes(seqs[0]);
    for s in seqs {
        assert!(codes(*s) == (llc, ofc, mlc), "one code per table in RLE/repeat blocks");
    }
    match tables {
        Tables::Rle => v.extend_from_slice(&[0b0101_0100, llc as u8, ofc as u8, mlc as u8]),
        Tables::Repeat => v.push(0b1111_1100),
    }
    // States take no bits; per sequence the reader takes offset, match, literal extra bits.
    let mut b = Bits::default();
    for s in seqs.iter().rev() {
        b.put(s.ll - LL_BASE[llc], LL_BITS[llc]);
        let (mb, mbits) = ml_code(mlc);
        b.put(s.ml - mb, mbits);
        b.put(s.ofv - (1 << ofc), ofc as u32);
    }
    v.extend(b.finish());
    v
}

fn block(kind: u32, content: &[u8], size: usize, last: bool) -> Vec<u8> {
    let h = u32::from(last) | kind << 1 | (size as u32) << 3;
    let mut v = h.to_le_bytes()[..3].to_vec();
    v.extend_from_slice(content);
    v
}
fn raw_block(d: &[u8], last: bool) -> Vec<u8> {
    block(0, d, d.len(), last)
}
fn rle_block(b: u8, n: usize, last: bool) -> Vec<u8> {
    block(1, &[b], n, last)
}
fn comp_block(content: &[u8], last: bool) -> Vec<u8> {
    block(2, content, content.len(), last)
}

fn xxh64(d: &[u8]) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    const P5: u64 = 0x27D4_EB2F_1656_67C5;
    let round = |acc: u64, x: u64| acc.wrapping_add(x.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1);
    let rd = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().unwrap());
    let mut i = 0;
    let mut h = if d.len() >= 32 {
        let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
        while i + 32 <= d.len() {
            for (k, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, rd(i + 8 * k));
            }
            i += 32;
        }
        let mut h = v[0].rotate_left(1).wrapping_add(v[1].rotate_left(7)).wrapping_add(v[2].rotate_left(12));
        h = h.wrapping_add(v[3].rotate_left(18));
        for x in v {
            h = (h ^ round(0, x)).wrapping_mul(P1).wrapping_add(P4);
        }
        h
    } else {
        P5
    };
    h = h.wrapping_add(d.len() as u64);
    while i + 8 <= d.len() {
        h = (h ^ round(0, rd(i))).rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        i += 8;
    }
    if i + 4 <= d.len() {
        let x = u64::from(u32::from_le_bytes(d[i..i + 4].try_into().unwrap()));
        h = (h ^ x.wrapping_mul(P1)).rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        i += 4;
    }
    for &b in &d[i..] {
        h = (h ^ u64::from(b).wrapping_mul(P5)).rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// Frame header options.
#[derive(Clone, Copy)]
struct Header {
    /// Content size field bytes: 0 (absent), 1 (single segment only), 2, 4 or 8.
    fcs_bytes: usize,
    single: bool,
    checksum: bool,
    /// Dictionary id field bytes (0, 1, 2, 4) holding the value `dict`.
    did_bytes: usize,
    dict: u32,
}

const PLAIN: Header = Header { fcs_bytes: 4, single: false, checksum: false, did_bytes: 0, dict: 0 };

fn frame(h: Header, blocks: &[Vec<u8>], content: &[u8]) -> Vec<u8> {
    let fcs_flag = match h.fcs_bytes {
        0 | 1 => 0u8,
        2 => 1,
        4 => 2,
        _ => 3,
    };
    assert!(h.fcs_bytes != 1 || h.single);
    let did_flag = match h.did_bytes {
        0 => 0u8,
        1 => 1,
        2 => 2,
        _ => 3,
    };
    let mut v = 0xFD2F_B528u32.to_le_bytes().to_vec();
    v.push(fcs_flag << 6 | u8::from(h.single) << 5 | u8::from(h.checksum) << 2 | did_flag);
    if !h.single {
        v.push(10 << 3); // 1 MiB window
    }
    v.extend_from_slice(&h.dict.to_le_bytes()[..h.did_bytes]);
    let n = content.len() as u64;
    let fcs = if h.fcs_bytes == 2 { n - 256 } else { n };
    v.extend_from_slice(&fcs.to_le_bytes()[..h.fcs_bytes]);
    for b in blocks {
        v.extend_from_slice(b);
    }
    if h.checksum {
        v.extend_from_slice(&(xxh64(content) as u32).to_le_bytes());
    }
    v
}

fn skippable(n: usize, magic_low: u32) -> Vec<u8> {
    let mut v = (0x184D_2A50u32 | magic_low).to_le_bytes().to_vec();
    v.extend_from_slice(&(n as u32).to_le_bytes());
    v.extend((0..n).map(|i| (i * 7) as u8));
    v
}

/// Executes sequences on `out` as the format says (the expected bytes of crafted blocks).
fn execute(out: &mut Vec<u8>, lits: &[u8], seqs: &[Seq], rep: &mut [u32; 3]) {
    let mut lp = 0;
    for s in seqs {
        out.extend_from_slice(&lits[lp..lp + s.ll as usize]);
        lp += s.ll as usize;
        let off = if s.ofv > 3 {
            *rep = [s.ofv - 3, rep[0], rep[1]];
            s.ofv - 3
        } else {
            let idx = s.ofv - 1 + u32::from(s.ll == 0);
            match idx {
                0 => rep[0],
                1 => {
                    *rep = [rep[1], rep[0], rep[2]];
                    rep[0]
                }
                2 => {
                    *rep = [rep[2], rep[0], rep[1]];
                    rep[0]
                }
                _ => {
                    *rep = [rep[0] - 1, rep[0], rep[1]];
                    rep[0]
                }
            }
        };
        let start = out.len() - off as usize;
        for k in 0..s.ml as usize {
            out.push(out[start + k]);
        }
    }
    out.extend_from_slice(&lits[lp..]);
}

/// Crafted frames: raw and RLE literals, RLE and repeat sequence tables with new and repeat
/// offsets (literal length zero too), treeless Huffman literals in 1 and 4 streams, direct
/// Huffman weights, blocks without sequences, raw and RLE blocks, every content-size field
/// width, single-segment frames, checksums, a zero dictionary id.
fn crafted_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut next = rng(5);
    let history: Vec<u8> = (0..1000).map(|_| next() as u8).collect();

    // Block 1: raw history. Block 2: raw literals, RLE tables, new offsets 509..=1020.
    // Block 3: RLE literals, repeated tables. Block 4: RLE literals, RLE tables with repeat
    // offsets and literal length zero (repeat codes 2 and 3: rep[2] and rep[0] - 1).
    // Block 5: Huffman literals (direct weights, 4 streams), no sequences. Block 6: treeless
    // 1 stream, RLE tables. Block 7: treeless 4 streams, repeated tables. Then an RLE block.
    let mut out = history.clone();
    let mut rep = [1u32, 4, 8];
    let mut blocks = vec![raw_block(&history, false)];
    let lits2: Vec<u8> = (0..50 * 17 + 9).map(|_| next() as u8).collect();
    let seqs2: Vec<Seq> = (0..50)
        .map(|_| Seq { ll: 16 + (next() % 2) as u32, ofv: 512 + (next() % 512) as u32, ml: 41 + (next() % 2) as u32 })
        .collect();
    let used: u32 = seqs2.iter().map(|s| s.ll).sum();
    let lits2 = &lits2[..used as usize + 9];
    blocks.push(comp_block(&compressed_block(&Lits::Raw(lits2), &seqs2, Tables::Rle), false));
    execute(&mut out, lits2, &seqs2, &mut rep);
    let seqs3: Vec<Seq> = (0..300)
        .map(|_| Seq { ll: 16 + (next() % 2) as u32, ofv: 512 + (next() % 512) as u32, ml: 41 + (next() % 2) as u32 })
        .collect();
    let n3: u32 = seqs3.iter().map(|s| s.ll).sum::<u32>() + 3;
    let lits3 = vec![0xAB; n3 as usize];
    blocks.push(comp_block(&compressed_block(&Lits::Rle(0xAB, n3 as usize), &seqs3, Tables::Repeat), false));
    execute(&mut out, &lits3, &seqs3, &mut rep);
    let seqs4: Vec<Seq> = (0..40).map(|_| Seq { ll: 0, ofv: 2 + (next() % 2) as u32, ml: 4 }).collect();
    blocks.push(comp_block(&compressed_block(&Lits::Rle(0x11, 5), &seqs4, Tables::Rle), false));
    execute(&mut out, &[0x11; 5], &seqs4, &mut rep);
    let weights: [(u8, u8); 4] = [(b'a', 2), (b'b', 1), (b'c', 1), (b'd', 3)];
    let alphabet = b"abcdddd";
    let lits5: Vec<u8> = (0..3000).map(|_| alphabet[(next() % 7) as usize]).collect();
    blocks.push(comp_block(
        &compressed_block(
            &Lits::Huffman { lits: &lits5, weights: &weights, streams: 4, treeless: false },
            &[],
            Tables::Rle,
        ),
        false,
    ));
    execute(&mut out, &lits5, &[], &mut rep);
    let lits6: Vec<u8> = (0..700).map(|_| alphabet[(next() % 7) as usize]).collect();
    let seqs6: Vec<Seq> =
        (0..20).map(|_| Seq { ll: 24 + (next() % 4) as u32, ofv: 600 + (next() % 400) as u32, ml: 35 }).collect();
    let n6: u32 = seqs6.iter().map(|s| s.ll).sum::<u32>() + 11;
    let lits6 = &lits6[..n6 as usize];
    blocks.push(comp_block(
        &compressed_block(
            &Lits::Huffman { lits: lits6, weights: &weights, streams: 1, treeless: true },
            &seqs6,
            Tables::Rle,
        ),
        false,
    ));
    execute(&mut out, lits6, &seqs6, &mut rep);
    let lits7: Vec<u8> = (0..2000).map(|_| alphabet[(next() % 7) as usize]).collect();
    let seqs7: Vec<Seq> =
        (0..60).map(|_| Seq { ll: 24 + (next() % 4) as u32, ofv: 600 + (next() % 400) as u32, ml: 35 }).collect();
    let n7: u32 = seqs7.iter().map(|s| s.ll).sum::<u32>() + 1;
    let lits7 = &lits7[..n7 as usize];
    blocks.push(comp_block(
        &compressed_block(
            &Lits::Huffman { lits: lits7, weights: &weights, streams: 4, treeless: true },
            &seqs7,
            Tables::Repeat,
        ),
        false,
    ));
    execute(&mut out, lits7, &seqs7, &mut rep);
    blocks.push(rle_block(0x5A, 5000, true));
    out.extend(std::iter::repeat_n(0x5A, 5000));
    for (h, what) in [
        (PLAIN, "crafted modes, 4-byte content size"),
        (Header { checksum: true, fcs_bytes: 0, ..PLAIN }, "crafted modes, checksum, no content size"),
        (
            Header { fcs_bytes: 8, did_bytes: 2, dict: 0, ..PLAIN },
            "crafted modes, 8-byte content size, zero dictionary id",
        ),
    ] {
        cases.push(Case {
            frame: frame(h, &blocks, &out),
            expect: out.clone(),
            give_len: h.fcs_bytes == 0,
            verify: h.checksum,
            what: what.into(),
        });
    }
    // Content size field widths on small single-segment and multi-segment frames.
    for (n, fcs_bytes, single) in
        [(0usize, 1usize, true), (200, 1, true), (300, 2, true), (70_000, 4, true), (700, 2, false)]
    {
        let d = data(n, 2, n as u64);
        let blocks: Vec<Vec<u8>> = if n == 0 {
            vec![raw_block(&[], true)]
        } else {
            let parts: Vec<&[u8]> = d.chunks(60_000).collect();
            parts.iter().enumerate().map(|(i, p)| raw_block(p, i + 1 == parts.len())).collect()
        };
        let h = Header { fcs_bytes, single, checksum: true, ..PLAIN };
        cases.push(Case {
            frame: frame(h, &blocks, &d),
            expect: d,
            give_len: false,
            verify: true,
            what: format!("{n} bytes, {fcs_bytes}-byte content size, single segment {single}"),
        });
    }
    // Multi-frame chunks with skippable frames, sizes known and unknown.
    let a = data(5000, 4, 1);
    let b = data(70_000, 3, 2);
    let cc = data(300, 0, 3);
    let mut chunk = skippable(10, 0);
    chunk.extend(compress(&a, 3, true, true));
    chunk.extend(compress(&b, 7, false, false));
    chunk.extend(skippable(0, 15));
    chunk.extend(compress(&cc, 1, true, false));
    chunk.extend(compress(&a, -3, false, true));
    chunk.extend(skippable(3, 7));
    let mut expect = [a.clone(), b.clone(), cc.clone(), a.clone()].concat();
    cases.push(Case {
        frame: chunk,
        expect: expect.clone(),
        give_len: true,
        verify: true,
        what: "4 frames, 3 skippable".into(),
    });
    let mut chunk = Vec::new();
    for part in [&a, &b, &cc] {
        chunk.extend(compress(part, 5, true, true));
    }
    expect = [a, b, cc].concat();
    cases.push(Case {
        frame: chunk,
        expect,
        give_len: false,
        verify: true,
        what: "3 frames with content sizes".into(),
    });
    cases
}

#[test]
fn crafted_frames_match_libzstd() {
    let m = check(&crafted_cases());
    assert!(m.raw_literals > 0 && m.rle_literals > 0 && m.treeless_1_stream > 0 && m.treeless_4_streams > 0);
    assert!(m.rle.iter().all(|&n| n > 0) && m.repeat.iter().all(|&n| n > 0));
}

/// Appends a compressed block of `seqs` (RLE tables: one code per table) whose raw literals,
/// drawn from `next`, are the sequences' and 3 last ones, and executes it on `out`.
fn push_rle_block(
    blocks: &mut Vec<Vec<u8>>,
    out: &mut Vec<u8>,
    rep: &mut [u32; 3],
    seqs: &[Seq],
    next: &mut dyn FnMut() -> u64,
    last: bool,
) {
    let n: u32 = seqs.iter().map(|s| s.ll).sum::<u32>() + 3;
    let lits: Vec<u8> = (0..n).map(|_| next() as u8).collect();
    blocks.push(comp_block(&compressed_block(&Lits::Raw(&lits), seqs, Tables::Rle), last));
    execute(out, &lits, seqs, rep);
}

/// Every repeat-offset rule on distinct bytes (the crafted frames' repeat offsets copy runs of
/// one byte value, where a wrong offset reads the same bytes): after new offsets set three
/// different repeat offsets, blocks of sequences with literals (repeat codes 1, 2 and 3: rep[0],
/// rep[1], rep[2]) and without (repeat codes 1, 2 and 3: rep[1], rep[2], rep[0] - 1), each
/// copying 4 bytes of random history.
#[test]
fn repeat_offsets_of_every_kind_match_libzstd() {
    let mut next = rng(13);
    let history: Vec<u8> = (0..3000).map(|_| next() as u8).collect();
    let mut out = history.clone();
    let mut rep = [1u32, 4, 8];
    let mut blocks = vec![raw_block(&history, false)];
    // new offsets 512..=1020 (offset code 9), so the three repeat offsets differ
    let seqs: Vec<Seq> = (0..3).map(|_| Seq { ll: 1, ofv: 515 + (next() % 500) as u32, ml: 4 }).collect();
    push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    // literals before the match: offset values 1 (rep[0]); 2 and 3 (rep[1], rep[2])
    let seqs: Vec<Seq> = (0..8).map(|_| Seq { ll: 1, ofv: 1, ml: 4 }).collect();
    push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    let seqs: Vec<Seq> = (0..40).map(|_| Seq { ll: 1, ofv: 2 + (next() % 2) as u32, ml: 4 }).collect();
    push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    // no literals: offset values 1 and 2 (rep[1], rep[2]) and 3 (rep[0] - 1)
    let seqs: Vec<Seq> = (0..40).map(|_| Seq { ll: 0, ofv: 1, ml: 4 }).collect();
    push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    let seqs: Vec<Seq> = (0..40).map(|_| Seq { ll: 0, ofv: 2 + (next() % 2) as u32, ml: 4 }).collect();
    push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    blocks.push(raw_block(&[], true));
    check(&[Case {
        frame: frame(PLAIN, &blocks, &out),
        expect: out,
        give_len: false,
        verify: false,
        what: "repeat offsets".into(),
    }]);
}

/// Sequences whose extra bits outrun the sequence reader's 64-bit container (more than the 33
/// to 64 bits it holds between refills, so the reader is placed anew past them): crafted blocks
/// of offset code 20 with literals length codes 32 and 33 and match length codes 47 and 50 (45
/// and 48 extra bits a sequence; RLE tables) after 1.25 MiB of history (a single-segment frame:
/// its window is its size), and the same frame cut inside the last block's bitstream, where
/// libzstd fails too; then libzstd's own frame of such data (8 to 16 KiB of new bytes, then 4 to
/// 8 KiB copied from about 1 MiB back, over and over), whose FSE states are read from the
/// reader after it was placed anew.
#[test]
fn extra_bits_past_the_reader_match_libzstd() {
    let mut next = rng(21);
    let history: Vec<u8> = (0..1_310_720).map(|_| next() as u8).collect();
    let mut out = history.clone();
    let mut rep = [1u32, 4, 8];
    let mut blocks: Vec<Vec<u8>> = history.chunks(128 << 10).map(|c| raw_block(c, false)).collect();
    for round in 0..4 {
        let (n, ll, ml) =
            if round % 2 == 0 { (6, (8192, 2000), (4099, 4000)) } else { (2, (16384, 16000), (16387, 16000)) };
        let seqs: Vec<Seq> = (0..n)
            .map(|_| Seq {
                ll: ll.0 + (next() % ll.1) as u32,
                ofv: (1 << 20) + (next() % 200_000) as u32,
                ml: ml.0 + (next() % ml.1) as u32,
            })
            .collect();
        let extra = {
            let (llc, ofc, mlc) = codes(seqs[0]);
            LL_BITS[llc] + ofc as u32 + ml_code(mlc).1
        };
        assert!(extra >= 45, "{extra} extra bits a sequence");
        push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, round == 3);
    }
    let single = Header { fcs_bytes: 4, single: true, checksum: false, did_bytes: 0, dict: 0 };
    let whole = frame(single, &blocks, &out);
    check(&[Case {
        frame: whole.clone(),
        expect: out.clone(),
        give_len: false,
        verify: false,
        what: "45 and 48 extra bits a sequence".into(),
    }]);
    // cut 5 bytes before the end: inside the last block's sequence bitstream
    let cut = &whole[..whole.len() - 5];
    assert!(reference(cut, out.len()).is_none(), "libzstd decodes the cut frame");
    for &seed in seeds() {
        let r = decode(seed, &[ChunkInput::zstd(cut)]);
        assert!(r[0].is_err(), "seed {seed}: the cut frame decoded to {}", common::describe(&r[0]));
    }
    let mut d = history;
    while d.len() < 3 << 20 {
        let new = 8192 + (next() % 8192) as usize;
        d.extend((0..new).map(|_| next() as u8));
        let len = 4096 + (next() % 4096) as usize;
        let from = d.len() - (1 << 20) - (next() % 100_000) as usize;
        d.extend_from_within(from..from + len);
    }
    let mut c = zstd::bulk::Compressor::new(19).unwrap();
    c.set_parameter(CParameter::WindowLog(22)).unwrap();
    c.set_parameter(CParameter::ChecksumFlag(true)).unwrap();
    let frame = c.compress(&d).unwrap();
    assert!(frame.len() < d.len() - 500_000, "the compressor found the far matches ({} bytes)", frame.len());
    check(&[Case {
        frame,
        expect: d,
        give_len: false,
        verify: true,
        what: "far matches between long literal runs".into(),
    }]);
}

/// Code lengths (in bits) of the literals of a Huffman stream.
fn stream_bits(lits: &[u8], codes: &[Option<(u32, u32)>]) -> u32 {
    lits.iter().map(|&l| codes[l as usize].expect("symbol has a code").1).sum()
}

/// Two weight sets with 11-bit codes (the longest zstd allows): a geometric one (code lengths
/// 1 to 11) and a mixed one of 95 symbols (lengths 1, 7, 10, 11).
fn long_code_weights() -> [Vec<(u8, u8)>; 2] {
    let geometric: Vec<(u8, u8)> = (0..12).map(|s| (s * 3 + 1, if s == 11 { 1 } else { 11 - s })).collect();
    let mut mixed = vec![(94u8, 11u8)];
    mixed.extend((0..60).map(|s| (s, 5)));
    mixed.extend((60..90).map(|s| (s, 2)));
    mixed.extend((90..94).map(|s| (s, 1)));
    [geometric, mixed]
}

/// Frames of one raw block of `pre` bytes (0..4: the literals land at every alignment of the
/// output) and one compressed block of Huffman literals without sequences.
fn huffman_frame(pre: usize, lits: &[u8], weights: &[(u8, u8)], streams: usize) -> (Vec<u8>, Vec<u8>) {
    let prefix: Vec<u8> = (0..pre).map(|i| (i * 37 + 5) as u8).collect();
    let mut blocks = Vec::new();
    if pre > 0 {
        blocks.push(raw_block(&prefix, false));
    }
    let lit = Lits::Huffman { lits, weights, streams, treeless: false };
    blocks.push(comp_block(&compressed_block(&lit, &[], Tables::Rle), true));
    let content = [prefix, lits.to_vec()].concat();
    (frame(PLAIN, &blocks, &content), content)
}

/// Huffman literals decoded by the whole warp (pointer doubling over 32 candidate codes,
/// 128-byte output runs, a 128-byte input window): 1 and 4 streams, every literal count from 1
/// up past two output runs and window reloads, streams ending at every bit alignment, literals
/// at every output alignment, 11-bit codes, and a few long streams.
#[test]
fn huffman_streams_at_every_alignment() {
    let mut next = rng(13);
    let mut cases = Vec::new();
    let mut ends = [[false; 8]; 2];
    for (wi, weights) in long_code_weights().iter().enumerate() {
        let (codes, _) = huffman(weights);
        let symbols: Vec<u8> = weights.iter().map(|w| w.0).collect();
        let counts = (1..=260usize).chain([700, 1000, 4000, 16_000]);
        for n in counts {
            let lits: Vec<u8> = (0..n).map(|_| symbols[(next() as usize) % symbols.len()]).collect();
            let pre = (n + wi) % 4;
            for streams in [1usize, 4] {
                if streams == 1 && n >= 1000 || streams == 4 && (n < 6 || 3 * n.div_ceil(4) > n) {
                    // too long for the 1-stream header; libzstd wants 6 literals for 4 streams
                    // and the format a non-negative last segment
                    continue;
                }
                let seg = n.div_ceil(4);
                let parts: Vec<&[u8]> = if streams == 1 {
                    vec![&lits[..]]
                } else {
                    (0..4).map(|k| &lits[(k * seg).min(n)..((k + 1) * seg).min(n)]).collect()
                };
                for p in parts {
                    ends[streams / 4][(stream_bits(p, &codes) % 8) as usize] = true;
                }
                let (f, content) = huffman_frame(pre, &lits, weights, streams);
                cases.push(Case {
                    frame: f,
                    expect: content,
                    give_len: false,
                    verify: false,
                    what: format!("{n} literals, weights {wi}, {streams} streams, {pre} bytes before"),
                });
            }
        }
    }
    assert!(ends.iter().all(|e| e.iter().all(|&b| b)), "streams end at every bit alignment: {ends:?}");
    let m = check(&cases);
    assert!(m.huffman_1_stream > 0 && m.huffman_4_streams > 0 && m.huffman_direct_weights > 0);
}

/// Weights of a Huffman table of `log` bits: `ones` symbols of weight 1, the rest of 2^log in
/// symbols of weights from its binary digits; symbols spread over 0..=128 (the direct
/// description's range) in a scattered order.
fn weights_for(log: u32, ones: u32) -> Vec<(u8, u8)> {
    let rest = (1u32 << log) - ones;
    let mut w: Vec<u8> = (0..32).rev().filter(|b| rest >> b & 1 == 1).map(|b| (b + 1) as u8).collect();
    w.extend(std::iter::repeat_n(1u8, ones as usize));
    assert!(w.len() <= 129);
    w.iter().enumerate().map(|(i, &wt)| (((i * 37) % 129) as u8, wt)).collect()
}

/// Huffman tables built by the whole warp (a ballot per weight and 32 symbols, each symbol's
/// entries filled by the lanes together): every maximum code length 1..=11, with few symbols
/// (one per weight), with many symbols of one weight (over several ballots of 32), and mixed;
/// 1 and 4 streams. Compared with libzstd.
#[test]
fn huffman_tables_at_every_max_code_length() {
    let mut next = rng(29);
    let mut cases = Vec::new();
    for log in 1..=11u32 {
        let full = 1u32 << log;
        let mut sets = vec![weights_for(log, 1), weights_for(log, full.min(120))];
        if full > 40 {
            sets.push(weights_for(log, 40));
        }
        for (si, weights) in sets.iter().enumerate() {
            let symbols: Vec<u8> = weights.iter().map(|w| w.0).collect();
            let lits: Vec<u8> = (0..300).map(|_| symbols[(next() as usize) % symbols.len()]).collect();
            for streams in [1usize, 4] {
                let (f, content) = huffman_frame(0, &lits, weights, streams);
                cases.push(Case {
                    frame: f,
                    expect: content,
                    give_len: false,
                    verify: false,
                    what: format!("table log {log}, weight set {si}, {streams} streams"),
                });
            }
        }
    }
    let m = check(&cases);
    assert!(m.huffman_1_stream > 0 && m.huffman_4_streams > 0 && m.huffman_direct_weights > 0);
}

/// Huffman tables over all 256 byte values (the first 256 bytes are 0..=255; half the rest are
/// 0..16, half any value, so libzstd codes the literals with Huffman, FSE-compressed weights
/// and 4 streams, both asserted): the canonical code's list of symbols by weight holds up to
/// 256 symbols (the other Huffman tests, with direct weights, reach 129).
#[test]
fn huffman_tables_of_256_symbols() {
    let mut next = rng(31);
    let mut cases = Vec::new();
    for (n, level) in [(3000usize, 1), (60_000, 3), (300_000, 1)] {
        let d: Vec<u8> = (0..n)
            .map(|i| {
                let r = next();
                if i < 256 {
                    i as u8
                } else if r & 1 == 0 {
                    (r >> 8) as u8 & 15
                } else {
                    (r >> 16) as u8
                }
            })
            .collect();
        cases.push(Case {
            frame: compress(&d, level, false, true),
            expect: d,
            give_len: false,
            verify: false,
            what: format!("{n} bytes of 256 skewed values at level {level}"),
        });
    }
    let m = check(&cases);
    assert!(m.huffman_fse_weights > 0 && m.huffman_4_streams > 0, "{m:?}");
}

/// A Huffman literals header that claims one literal more or fewer than its stream codes: the
/// last code then reads below the stream's first bit, or the stream has bits left over. Both
/// are corrupt, whatever the stream's length and alignment.
#[test]
fn huffman_stream_count_mismatch_is_corrupt() {
    let mut next = rng(17);
    let weights = &long_code_weights()[0];
    let symbols: Vec<u8> = weights.iter().map(|w| w.0).collect();
    let mut frames = Vec::new();
    for n in [1usize, 2, 7, 31, 32, 33, 100, 127, 128, 129, 500, 900] {
        let lits: Vec<u8> = (0..n).map(|_| symbols[(next() as usize) % symbols.len()]).collect();
        for delta in [-1i64, 1] {
            let claimed = (n as i64 + delta) as usize;
            if claimed == 0 {
                continue;
            }
            let mut sec = literals_section(&Lits::Huffman { lits: &lits, weights, streams: 1, treeless: false });
            let h = u32::from_le_bytes([sec[0], sec[1], sec[2], 0]);
            let h = (h & !(0x3FF << 4)) | ((claimed as u32) << 4);
            sec[..3].copy_from_slice(&h.to_le_bytes()[..3]);
            sec.push(0); // no sequences
            let blocks = vec![comp_block(&sec, true)];
            let f = frame(Header { fcs_bytes: 0, ..PLAIN }, &blocks, &[]);
            frames.push((f, claimed));
        }
    }
    let inputs: Vec<ChunkInput<'_>> = frames.iter().map(|(f, n)| ChunkInput::zstd(f).with_expected_len(*n)).collect();
    for &seed in seeds() {
        for (r, (f, n)) in decode(seed, &inputs).iter().zip(&frames) {
            assert!(reference(f, *n).is_none(), "libzstd accepts a miscounted stream");
            assert_eq!(status_of(r), Some(StreamStatus::Corrupt), "{n} literals claimed: {:?}", r.as_ref().err());
        }
    }
}

/// A 4-stream jump table whose first, second or third size reaches past the literals section
/// (by one byte, or as far as 16 bits go) is corrupt: each size is checked against the bytes
/// left when it is read (the streams run from one call site, the sizes loaded one at a time).
#[test]
fn huffman_jump_table_past_the_section_is_corrupt() {
    let mut next = rng(37);
    let weights = &long_code_weights()[1];
    let symbols: Vec<u8> = weights.iter().map(|w| w.0).collect();
    let (_, desc) = huffman(weights);
    let mut frames = Vec::new();
    for n in [40usize, 300, 900] {
        let lits: Vec<u8> = (0..n).map(|_| symbols[(next() as usize) % symbols.len()]).collect();
        let sec = literals_section(&Lits::Huffman { lits: &lits, weights, streams: 4, treeless: false });
        let hs = match (sec[0] >> 2) & 3 {
            0 | 1 => 3,
            2 => 4,
            _ => 5,
        };
        let jt = hs + desc.len();
        let size = |k: usize, s: &[u8]| usize::from(u16::from_le_bytes([s[jt + 2 * k], s[jt + 2 * k + 1]]));
        let total = sec.len() - jt - 6; // the four streams' bytes
        for k in 0..3 {
            let before: usize = (0..k).map(|i| size(i, &sec)).sum();
            for bad in [total - before + 1, 0xFFFF] {
                let mut c = sec.clone();
                c[jt + 2 * k..jt + 2 * k + 2].copy_from_slice(&(bad as u16).to_le_bytes());
                c.push(0); // no sequences
                let f = frame(Header { fcs_bytes: 0, ..PLAIN }, &[comp_block(&c, true)], &[]);
                frames.push((f, n, k, bad));
            }
        }
    }
    let inputs: Vec<ChunkInput<'_>> =
        frames.iter().map(|(f, n, ..)| ChunkInput::zstd(f).with_expected_len(*n)).collect();
    for &seed in seeds() {
        for (r, (f, n, k, bad)) in decode(seed, &inputs).iter().zip(&frames) {
            assert!(reference(f, *n).is_none(), "libzstd accepts stream {k} of {bad} bytes");
            assert_eq!(
                status_of(r),
                Some(StreamStatus::Corrupt),
                "{n} literals, stream {k} of {bad} bytes: {:?}",
                r.as_ref().err()
            );
        }
    }
}

/// Literal runs, matches (longer than 64 bytes, the match not overlapping its source), last
/// literals and raw/RLE blocks, copied with aligned 4-byte stores (last literals and raw blocks
/// of 256 bytes or more with 16-byte ones): raw and RLE literals, every
/// alignment of destination and source (a raw block of 0..4 bytes first, literal lengths and
/// offsets of every residue mod 4), against the format's own execution.
#[test]
fn long_copies_at_every_alignment() {
    let mut next = rng(23);
    let mut cases = Vec::new();
    for pre in 0..4usize {
        for raw in [true, false] {
            let history: Vec<u8> = (0..1100 + pre).map(|_| next() as u8).collect();
            let mut out = history.clone();
            let mut rep = [1u32, 4, 8];
            let mut blocks = vec![raw_block(&history, false)];
            // ll in [64, 128) (one literals length code), ml in [67, 83) (one match length
            // code), offset values in [512, 1024) (one offset code): offsets 509..=1020 > ml
            let seqs: Vec<Seq> = (0..40)
                .map(|_| Seq {
                    ll: 64 + (next() % 64) as u32,
                    ofv: 512 + (next() % 512) as u32,
                    ml: 67 + (next() % 16) as u32,
                })
                .collect();
            // last literals of 64..79 bytes, or 320..335 (the 16-byte copy of long ones)
            let nl = seqs.iter().map(|s| s.ll).sum::<u32>() as usize + 64 + 256 * (pre % 2) + pre * 5;
            let lits: Vec<u8> = if raw { (0..nl).map(|_| next() as u8).collect() } else { vec![0xC3; nl] };
            let l = if raw { Lits::Raw(&lits) } else { Lits::Rle(0xC3, nl) };
            blocks.push(comp_block(&compressed_block(&l, &seqs, Tables::Rle), false));
            execute(&mut out, &lits, &seqs, &mut rep);
            // raw and RLE blocks of a few sizes at the alignment this leaves
            for n in [1usize, 3, 64, 65, 66, 67, 200, 256, 777, 2053] {
                let d: Vec<u8> = (0..n).map(|_| next() as u8).collect();
                blocks.push(raw_block(&d, false));
                out.extend_from_slice(&d);
                blocks.push(rle_block(0x77, n + pre, false));
                out.extend(std::iter::repeat_n(0x77, n + pre));
            }
            blocks.push(raw_block(&[1, 2, 3], true));
            out.extend_from_slice(&[1, 2, 3]);
            cases.push(Case {
                frame: frame(PLAIN, &blocks, &out),
                expect: out,
                give_len: false,
                verify: false,
                what: format!("long copies, {pre} bytes first, raw literals {raw}"),
            });
        }
    }
    let m = check(&cases);
    assert!(m.raw_literals > 0 && m.rle_literals > 0 && m.raw_blocks > 0 && m.rle_blocks > 0);
}

/// One launch of teams and lone warps (`Teams::Mostly`): chunks whose bytes are mostly a
/// team's (four-stream Huffman literals: text-like letters; raw blocks: noise) get a block each,
/// the others (runs, a pattern with sparse noise: sequences) a warp each, four to a block after
/// the team blocks. The parse's `team_bytes` must split the wave both ways, so the launch is
/// mixed; every chunk must decode to its bytes under every schedule, and `Teams::Auto` must
/// choose this launch for a wave too large for teams alone (2,000 jobs on the emulated device's
/// SMs) and teams for all in a small one.
#[test]
fn one_launch_of_teams_and_lone_warps_matches_libzstd() {
    let mut cases = Vec::new();
    for (k, &(n, kind)) in
        [(70_000usize, 4u8), (20_000, 1), (140_000, 0), (65_536, 2), (9000, 4), (4096, 1), (30_000, 0), (100, 4)]
            .iter()
            .enumerate()
    {
        cases.push(natural_case(n, kind, [3, 1, 9, 3][k % 4], k % 2 == 0, k % 3 != 0));
    }
    let team: Vec<bool> = cases
        .iter()
        .map(|c| {
            let p = parse(&c.frame, Some(c.expect.len())).unwrap();
            let j = &p.jobs[0];
            j.team_bytes > 0 && 2 * j.team_bytes >= j.dst.len()
        })
        .collect();
    assert_eq!(team, [true, false, true, false, true, false, true, false], "the parse's team bytes");
    let inputs: Vec<ChunkInput<'_>> = cases
        .iter()
        .map(|c| {
            let i = ChunkInput::zstd(&c.frame).with_expected_len(c.expect.len());
            if c.verify { i.with_checksum_verification() } else { i }
        })
        .collect();
    for &seed in seeds() {
        let mut dec = Decoder::new(&Device::emulated(seed), config().with_teams(Teams::Mostly)).unwrap();
        let out = dec.decode_to_host(&inputs).unwrap().chunks;
        for (c, r) in cases.iter().zip(out) {
            match r {
                Ok(v) => assert!(v == c.expect, "{} (seed {seed}): decoded bytes differ from libzstd's", c.what),
                Err(e) => panic!("{} (seed {seed}): {e}", c.what),
            }
        }
    }
    let dec = Decoder::new(&Device::emulated(0), config()).unwrap();
    let sms = Device::emulated(0).sm_count() as usize;
    let big: Vec<ChunkInput<'_>> = inputs.iter().copied().cycle().take(sms * 4 + 1).collect();
    assert_eq!(dec.teams_for(&big), Teams::Mostly);
    assert_eq!(dec.teams_for(&inputs), Teams::All);
    // a large wave of sequences only: lone warps; of literals only: teams up to two rounds of
    // the device's blocks, lone warps past them
    let only = |t: bool, n: usize| -> Vec<ChunkInput<'_>> {
        inputs.iter().zip(&team).filter(|(_, k)| **k == t).map(|(i, _)| *i).cycle().take(n).collect()
    };
    assert_eq!(dec.teams_for(&only(false, sms * 4 + 1)), Teams::None);
    assert_eq!(dec.teams_for(&only(true, sms * 8)), Teams::Mostly);
    assert_eq!(dec.teams_for(&only(true, sms * 8 + 1)), Teams::None);
}

/// Raw blocks a team copies (4 KiB or more: all four warps, in a round of their own) between
/// ones the leader copies alone: sizes at the threshold and past it up to a whole 128 KiB block,
/// at every output alignment (a raw block of 0..15 bytes first) and source offset; then a
/// compressed block whose matches reach back into the team's bytes (which the leader reads only
/// after the round that follows the copy), a raw block after it and a checksum verified. Then the
/// same frames cut inside a team's block and decoded into an output that ends at one: errors,
/// teams and lone warps alike (`decode`).
#[test]
fn raw_blocks_copied_by_a_team_match_reference() {
    let mut next = rng(41);
    let sizes = [4095usize, 4096, 4097, 5003, 16384, 16397, 131_072, 100, 8191, 12289];
    let mut cases = Vec::new();
    for pre in [0usize, 1, 3, 7, 13] {
        let mut out: Vec<u8> = (0..pre).map(|_| next() as u8).collect();
        let mut blocks = vec![raw_block(&out.clone(), false)];
        for &n in &sizes {
            let d: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            blocks.push(raw_block(&d, false));
            out.extend_from_slice(&d);
        }
        // matches into the raw bytes: near (offsets 509..=1020: the last raw block) and far
        // (65,533..=131,068: the 128 KiB one), one block each (RLE tables: one code per field)
        let mut rep = [1u32, 4, 8];
        for base in [512u32, 65_536] {
            let seqs: Vec<Seq> = (0..40)
                .map(|_| Seq { ll: 1, ofv: base + (next() % u64::from(base)) as u32, ml: 67 + (next() % 16) as u32 })
                .collect();
            let lits: Vec<u8> = (0..45).map(|_| next() as u8).collect();
            blocks.push(comp_block(&compressed_block(&Lits::Raw(&lits), &seqs, Tables::Rle), false));
            execute(&mut out, &lits, &seqs, &mut rep);
        }
        let tail: Vec<u8> = (0..20000).map(|_| next() as u8).collect();
        blocks.push(raw_block(&tail, true));
        out.extend_from_slice(&tail);
        let h = Header { checksum: true, ..PLAIN };
        cases.push(Case {
            frame: frame(h, &blocks, &out),
            expect: out,
            give_len: false,
            verify: true,
            what: format!("raw blocks after {pre} bytes"),
        });
    }
    let m = check(&cases);
    assert!(m.raw_blocks > 0);
    // cut inside the 128 KiB block, and an output ending at the 4,097-byte one
    for c in &cases {
        let cut = &c.frame[..c.frame.len() - 4 - 20003 - 30000];
        let small = 4095 + 4096 + 2000;
        for &seed in seeds() {
            let r = decode(seed, &[ChunkInput::zstd(cut).with_expected_len(c.expect.len())]);
            assert!(r[0].is_err(), "{} cut (seed {seed}): {}", c.what, common::describe(&r[0]));
            let r = decode(seed, &[ChunkInput::zstd(&c.frame).with_expected_len(small)]);
            assert!(r[0].is_err(), "{} into {small} bytes (seed {seed}): {}", c.what, common::describe(&r[0]));
        }
    }
}

/// Long matches that overlap their source (runs: a label image's constant regions): runs under
/// 128 bytes (executed in short-sequence batches) and longer ones, whose periods divide 128
/// (stored from a pattern word per lane, no loads) or do not (copied by doubling), match lengths
/// from 67 to 514 at every output alignment (0..3 literals before each match, raw and RLE),
/// against the format's own execution.
#[test]
fn long_runs_of_every_period_match_reference() {
    let mut next = rng(37);
    let history: Vec<u8> = (0..700).map(|_| next() as u8).collect();
    let mut out = history.clone();
    let mut rep = [1u32, 4, 8];
    let mut blocks = vec![raw_block(&history, false)];
    for dist in [1u32, 2, 3, 4, 5, 8, 12, 16, 31, 32, 33, 64, 100, 128, 129, 256, 300] {
        for ll in 0..4u32 {
            for raw in [true, false] {
                // one match length code per block (the sequence tables are RLE): 67..=82 (runs
                // a batch executes), 131..=258 or 259..=514 (runs on their own), every length
                // above the period
                let ranges: &[(u32, u32)] = match dist {
                    0..=66 => &[(67, 16), (131, 128)],
                    67..=130 => &[(131, 128)],
                    _ => &[(dist.max(259) + 1, 514 - dist.max(259))],
                };
                for &(lo, span) in ranges {
                    let seqs: Vec<Seq> =
                        (0..7).map(|_| Seq { ll, ofv: dist + 3, ml: lo + (next() % u64::from(span)) as u32 }).collect();
                    let n = (ll * 7) as usize + 3;
                    let lits: Vec<u8> = if raw { (0..n).map(|_| next() as u8).collect() } else { vec![0x5A; n] };
                    let l = if raw { Lits::Raw(&lits) } else { Lits::Rle(0x5A, n) };
                    blocks.push(comp_block(&compressed_block(&l, &seqs, Tables::Rle), false));
                    execute(&mut out, &lits, &seqs, &mut rep);
                }
            }
        }
    }
    blocks.push(raw_block(&[4, 5, 6], true));
    out.extend_from_slice(&[4, 5, 6]);
    let case = Case {
        frame: frame(PLAIN, &blocks, &out),
        expect: out,
        give_len: false,
        verify: false,
        what: "long runs of every period".into(),
    };
    let m = check(&[case]);
    assert!(m.raw_literals > 0 && m.rle_literals > 0);
}

/// A team leader's ring of its latest output (`DMC_ZSTD_RING` bytes of its block's shared memory:
/// `dmc_zstd_ring_of`), which its copies fill and its matches read: after literals longer than the
/// ring, matches whose sources lie just inside and just outside what it still holds (each copy's
/// rule: a batch byte's `DMC_ZSTD_RING` before the batch's end, a short match's `DMC_ZSTD_RING -
/// 64`, a long match's head and tail `DMC_ZSTD_RING - 16` and rounds `DMC_ZSTD_RING - 512`), in
/// short-sequence batches, alone after long literals, near (67..=82 bytes) and far (259..=514);
/// batches just past its reach; runs longer than the ring (periods 2, 300 and 5,000); an RLE and a
/// raw block and a block's long last literals, whose bytes do not go into the ring, with matches
/// reaching into and across them; in-tail literals close behind the output front (copied in rounds,
/// not into the ring) with matches into them — decoded by teams and by lone warps (`decode`)
/// against the format's own execution.
#[test]
fn matches_around_the_team_leader_s_ring_match_reference() {
    use damacy_kernels::consts::DMC_ZSTD_RING as RING;
    let mut next = rng(53);
    let mut rep = [1u32, 4, 8];
    // literals only, more than twice the ring, in blocks without sequences whose literals (1,000
    // each, under DMC_ZSTD_RING_LITS_MAX) all go into the ring
    let mut out: Vec<u8> = Vec::new();
    let mut blocks = Vec::new();
    for _ in 0..2 * RING / 1000 + 2 {
        let lits: Vec<u8> = (0..1000).map(|_| next() as u8).collect();
        blocks.push(comp_block(&compressed_block(&Lits::Raw(&lits), &[], Tables::Rle), false));
        out.extend_from_slice(&lits);
    }
    let dists = [RING - 528, RING - 512, RING - 511, RING - 496, RING - 64, RING - 63, RING - 17, RING - 16, RING - 15];
    for d in dists.into_iter().chain([RING - 1, RING, RING + 1, RING + 700, 4096, 300, 40]) {
        let ofv = d + 3;
        // a batch (60 short sequences), then short matches alone after long literals
        push_rle_block(&mut blocks, &mut out, &mut rep, &[Seq { ll: 1, ofv, ml: 20 }; 60], &mut next, false);
        let seqs: Vec<Seq> = (0..6).map(|_| Seq { ll: 64 + (next() % 64) as u32, ofv, ml: 20 }).collect();
        push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
        // near and far matches (overlapping their source where d is shorter)
        let seqs: Vec<Seq> = (0..8).map(|_| Seq { ll: 2, ofv, ml: 67 + (next() % 16) as u32 }).collect();
        push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
        let seqs: Vec<Seq> = (0..8).map(|_| Seq { ll: 0, ofv, ml: 259 + (next() % 256) as u32 }).collect();
        push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    }
    // batches just past the ring's reach (their first bytes' sources are the slots the batch's
    // earlier rounds rewrote), at every output alignment
    for d in [RING + 1, RING + 2, RING + 3, RING + 5] {
        for ll in 0..4u32 {
            let seqs = [Seq { ll, ofv: d + 3, ml: 17 + ll }; 64];
            push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
        }
    }
    // runs longer than the ring
    for d in [2u32, 300, 5000] {
        let seqs = [Seq { ll: 3, ofv: d + 3, ml: 65_539 + (next() % 4000) as u32 }];
        push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    }
    // an RLE block, then a batch reading across it (7,000 back) and inside it (100 back), long
    // literals and matches reaching across it; a raw block, then the same
    blocks.push(rle_block(0xA7, 5000, false));
    out.extend(std::iter::repeat_n(0xA7, 5000));
    push_rle_block(&mut blocks, &mut out, &mut rep, &[Seq { ll: 1, ofv: 7003, ml: 20 }; 40], &mut next, false);
    push_rle_block(&mut blocks, &mut out, &mut rep, &[Seq { ll: 1, ofv: 103, ml: 20 }; 40], &mut next, false);
    let raw: Vec<u8> = (0..3000).map(|_| next() as u8).collect();
    blocks.push(raw_block(&raw, false));
    out.extend_from_slice(&raw);
    for ofv in [6003u32, 1003, 9003] {
        let seqs: Vec<Seq> = (0..5).map(|_| Seq { ll: 64 + (next() % 64) as u32, ofv, ml: 20 }).collect();
        push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
        let seqs: Vec<Seq> = (0..5).map(|_| Seq { ll: 0, ofv, ml: 259 + (next() % 256) as u32 }).collect();
        push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
        push_rle_block(&mut blocks, &mut out, &mut rep, &[Seq { ll: 2, ofv, ml: 30 }; 40], &mut next, false);
    }
    // a block's last literals over DMC_ZSTD_RING_LITS_MAX (not into the ring), then matches into them
    let lits: Vec<u8> = (0..3000).map(|_| next() as u8).collect();
    blocks.push(comp_block(&compressed_block(&Lits::Raw(&lits), &[], Tables::Rle), false));
    out.extend_from_slice(&lits);
    push_rle_block(&mut blocks, &mut out, &mut rep, &[Seq { ll: 1, ofv: 1003, ml: 20 }; 40], &mut next, false);
    let seqs: Vec<Seq> = (0..5).map(|_| Seq { ll: 0, ofv: 2003, ml: 259 + (next() % 256) as u32 }).collect();
    push_rle_block(&mut blocks, &mut out, &mut rep, &seqs, &mut next, false);
    // In-tail (Huffman) literal runs of 70..=90 alone, then 4-byte matches 10 back (into them):
    // the output front soon runs close behind the literals still to read, whose copies then go
    // in rounds and move the ring's start past them
    let weights: [(u8, u8); 4] = [(b'a', 2), (b'b', 1), (b'c', 1), (b'd', 3)];
    let seqs: Vec<Seq> = (0..40).map(|_| Seq { ll: 70 + (next() % 21) as u32, ofv: 13, ml: 4 }).collect();
    let n = seqs.iter().map(|s| s.ll).sum::<u32>() as usize + 5;
    let lits: Vec<u8> = (0..n).map(|_| b"abcdddd"[(next() % 7) as usize]).collect();
    let l = Lits::Huffman { lits: &lits, weights: &weights, streams: 4, treeless: false };
    blocks.push(comp_block(&compressed_block(&l, &seqs, Tables::Rle), false));
    execute(&mut out, &lits, &seqs, &mut rep);
    blocks.push(raw_block(&[1, 2, 3], true));
    out.extend_from_slice(&[1, 2, 3]);
    let case = Case {
        frame: frame(Header { checksum: true, ..PLAIN }, &blocks, &out),
        expect: out,
        give_len: false,
        verify: true,
        what: "matches around the team leader's ring".into(),
    };
    let m = check(&[case]);
    assert!(m.raw_literals > 0 && m.huffman_4_streams > 0 && m.raw_blocks > 0 && m.rle_blocks > 0);
}

/// Runs of short sequences, which the kernel executes up to 32 at a time: matches whose
/// sources are match bytes of the sequences just before them (one, a few or many sequences back,
/// so a byte's source is found through several earlier bytes of the same batch), offsets 1 to
/// 60 that are shorter and longer than the match, literal lengths 0 to 3 from raw and RLE
/// literals, repeat offsets, and in-tail Huffman literals read up to the output front, across
/// batch boundaries (hundreds of sequences per block).
#[test]
fn short_sequence_runs_match_reference() {
    let mut next = rng(31);
    let history: Vec<u8> = (0..300).map(|_| next() as u8).collect();
    let mut out = history.clone();
    let mut rep = [1u32, 4, 8];
    let mut blocks = vec![raw_block(&history, false)];
    // (literals length, offset values ofv_lo + [0, ofv_n), match length, sequences, RLE literals)
    let runs: [(u32, u32, u32, u32, usize, bool); 5] = [
        (1, 4, 4, 5, 200, false),   // offsets 1..=4: sources one or two sequences back
        (0, 32, 32, 7, 150, false), // offsets 29..=60, no literals: chains of match bytes
        (3, 4, 4, 3, 100, true),    // RLE literals, offsets 1..=4
        (2, 2, 2, 4, 90, false),    // repeat offsets rep[1] and rep[2] (swapping)
        (17, 4, 1, 40, 70, false),  // offset 1 over 40 bytes after 17 literals (two rounds)
    ];
    for &(ll, ofv_lo, ofv_n, ml, count, rle) in &runs {
        let seqs: Vec<Seq> =
            (0..count).map(|_| Seq { ll, ofv: ofv_lo + (next() % u64::from(ofv_n)) as u32, ml }).collect();
        let n = ll as usize * count + 2;
        let lits: Vec<u8> = if rle { vec![0x3C; n] } else { (0..n).map(|_| next() as u8).collect() };
        let l = if rle { Lits::Rle(0x3C, n) } else { Lits::Raw(&lits) };
        blocks.push(comp_block(&compressed_block(&l, &seqs, Tables::Rle), false));
        execute(&mut out, &lits, &seqs, &mut rep);
    }
    // In-tail (Huffman) literals: 24 to 27 literals and 35 match bytes per sequence, offsets
    // 5..=12, so the output front reaches the literals still to read near the block's end.
    let weights: [(u8, u8); 4] = [(b'a', 2), (b'b', 1), (b'c', 1), (b'd', 3)];
    let alphabet = b"abcdddd";
    let seqs: Vec<Seq> =
        (0..35).map(|_| Seq { ll: 24 + (next() % 4) as u32, ofv: 8 + (next() % 8) as u32, ml: 35 }).collect();
    let n = seqs.iter().map(|s| s.ll).sum::<u32>() as usize + 5;
    let lits: Vec<u8> = (0..n).map(|_| alphabet[(next() % 7) as usize]).collect();
    blocks.push(comp_block(
        &compressed_block(
            &Lits::Huffman { lits: &lits, weights: &weights, streams: 1, treeless: false },
            &seqs,
            Tables::Rle,
        ),
        false,
    ));
    execute(&mut out, &lits, &seqs, &mut rep);
    blocks.push(raw_block(&[9, 8, 7], true));
    out.extend_from_slice(&[9, 8, 7]);
    let case = Case {
        frame: frame(PLAIN, &blocks, &out),
        expect: out,
        give_len: false,
        verify: false,
        what: "runs of short sequences".into(),
    };
    let m = check(&[case]);
    assert!(m.raw_literals > 0 && m.rle_literals > 0 && m.huffman_1_stream > 0 && m.rle.iter().all(|&n| n > 0));
}

/// Natural frames that exercise the modes libzstd chooses itself: Huffman 1 and 4 streams,
/// FSE-compressed weights, predefined and FSE tables, repeated tables across blocks.
fn natural_mode_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (n, kind, level) in [
        (300_000, 4u8, 19),
        (300_000, 5, 3),
        (600, 4, 3),
        (40, 2, 3),
        (900_000, 2, 12),
        (200_000, 4, 1),
        (300, 4, 3),
        (200, 4, 9),
    ] {
        cases.push(natural_case(n, kind, level, true, true));
    }
    cases
}

#[test]
fn every_mode_is_decoded() {
    let mut m = check(&crafted_cases());
    m.add(&check(&natural_mode_cases()));
    eprintln!("{m:#?}");
    let counts = [
        ("raw blocks", m.raw_blocks),
        ("RLE blocks", m.rle_blocks),
        ("compressed blocks", m.compressed_blocks),
        ("raw literals", m.raw_literals),
        ("RLE literals", m.rle_literals),
        ("Huffman 1 stream", m.huffman_1_stream),
        ("Huffman 4 streams", m.huffman_4_streams),
        ("treeless 1 stream", m.treeless_1_stream),
        ("treeless 4 streams", m.treeless_4_streams),
        ("FSE-compressed Huffman weights", m.huffman_fse_weights),
        ("direct Huffman weights", m.huffman_direct_weights),
        ("blocks without sequences", m.no_sequences),
        ("skippable frames", m.skippable_frames),
        ("checksums", m.checksums),
        ("frames without content size", m.unknown_sizes),
    ];
    for (what, n) in counts {
        assert!(n > 0, "no chunk used {what}");
    }
    for (k, table) in ["literal lengths", "offsets", "match lengths"].iter().enumerate() {
        assert!(m.predefined[k] > 0, "no predefined {table} table");
        assert!(m.rle[k] > 0, "no RLE {table} table");
        assert!(m.fse[k] > 0, "no FSE {table} table");
        assert!(m.repeat[k] > 0, "no repeated {table} table");
    }
}

// ---------------------------------------------------------------------------------------------
// Errors.

fn status_of(r: &Result<Vec<u8>, Error>) -> Option<StreamStatus> {
    match r {
        Err(Error::Stream { status, codec: "zstd", .. }) => Some(*status),
        _ => None,
    }
}

#[test]
fn dictionaries_are_a_clear_error() {
    let samples: Vec<Vec<u8>> = (0..300).map(|i| data(1000, 4, i)).collect();
    let dict = zstd::dict::from_samples(&samples, 4096).unwrap();
    let d = data(3000, 4, 1000);
    let f = zstd::bulk::Compressor::with_dictionary(3, &dict).unwrap().compress(&d).unwrap();
    let r = decode(0, &[ChunkInput::zstd(&f)]);
    match &r[0] {
        Err(Error::Unsupported { chunk: 0, what }) => {
            assert!(what.contains("zstd dictionaries are not supported"), "{what}");
        }
        other => panic!("expected the dictionary error, got {other:?}"),
    }
}

#[test]
fn checksum_mismatch_is_reported_when_verified() {
    let d = data(50_000, 3, 1);
    let mut f = compress(&d, 3, true, true);
    let n = f.len();
    f[n - 2] ^= 0x10;
    let seed = 0;
    let r = decode(seed, &[ChunkInput::zstd(&f).with_checksum_verification(), ChunkInput::zstd(&f)]);
    assert_eq!(status_of(&r[0]), Some(StreamStatus::ChecksumMismatch), "{:?}", r[0].as_ref().err());
    assert_eq!(r[1].as_ref().unwrap(), &d, "unverified checksums are skipped");
}

#[test]
fn size_disagreements_are_errors() {
    let d = data(10_000, 2, 1);
    let with = compress(&d, 3, false, true);
    let without = compress(&d, 3, false, false);
    let r = decode(
        0,
        &[
            ChunkInput::zstd(&with).with_expected_len(9_999),
            ChunkInput::zstd(&without),
            ChunkInput::zstd(&without).with_expected_len(10_001),
            ChunkInput::zstd(&without).with_expected_len(9_000),
        ],
    );
    assert!(matches!(&r[0], Err(Error::Decode { chunk: 0, .. })), "{:?}", r[0]);
    assert!(matches!(&r[1], Err(Error::Decode { chunk: 1, reason, .. }) if reason.contains("expected decoded size")));
    assert_eq!(status_of(&r[2]), Some(StreamStatus::SizeMismatch), "{:?}", r[2]);
    assert!(status_of(&r[3]).is_some(), "{:?}", r[3]);
}

/// Frames to cut and corrupt: libzstd's at five levels (three under TSan: the 140 KB one and the
/// 20 KB one are left out there) and two crafted frames (raw/RLE literals, RLE and repeat tables).
fn corpus() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = Vec::new();
    for (n, kind, level) in [(3000usize, 4u8, 3), (20_000, 5, 9), (140_000, 2, 1), (500, 0, -2), (8000, 4, 19)] {
        if under_tsan() && n > 10_000 {
            continue;
        }
        let d = data(n, kind, n as u64);
        v.push((compress(&d, level, true, true), d));
    }
    for c in crafted_cases().into_iter().take(2) {
        v.push((c.frame, c.expect));
    }
    v
}

#[test]
fn truncated_frames_are_errors() {
    let seed = 3;
    for (f, d) in corpus() {
        let steps = if under_tsan() { 8 } else { 40 };
        let cuts: Vec<usize> =
            (0..steps).map(|k| k * f.len() / steps).chain([f.len() - 1, f.len() - 4, 1, 5]).collect();
        let inputs: Vec<ChunkInput<'_>> =
            cuts.iter().map(|&n| ChunkInput::zstd(&f[..n]).with_expected_len(d.len())).collect();
        for (r, n) in decode(seed, &inputs).iter().zip(&cuts) {
            assert!(r.is_err(), "a frame cut to {n} of {} bytes decoded", f.len());
        }
    }
}

/// Flipped bits anywhere: an error or, where libzstd also accepts the frame, its bytes; never
/// a crash or an access out of bounds (the ASan run checks the latter).
#[test]
fn corrupt_frames_never_crash() {
    let seed = 11;
    let mut next = rng(77);
    for (f, d) in corpus() {
        let mut bad = Vec::new();
        for _ in 0..if under_tsan() { 6 } else { 60 } {
            let mut g = f.clone();
            for _ in 0..=(next() % 3) {
                let at = (next() as usize) % g.len();
                g[at] ^= 1 << (next() % 8);
            }
            bad.push(g);
        }
        let inputs: Vec<ChunkInput<'_>> =
            bad.iter().map(|g| ChunkInput::zstd(g).with_expected_len(d.len()).with_checksum_verification()).collect();
        for (r, g) in decode(seed, &inputs).iter().zip(&bad) {
            if let Ok(v) = r {
                let reference = reference(g, d.len());
                assert!(reference.as_ref() == Some(v), "a corrupt frame decoded to bytes libzstd does not produce");
            }
        }
    }
}

/// Frames of many small compressed blocks (a 1 KiB window: blocks of at most 1 KiB), so that a
/// team decodes each odd block's sequences ahead, beside the block before it (helper 2, into the
/// job's sequence scratch; its tables in the second set, its repeat offsets resolved when it is
/// executed): they must decode as libzstd does, and their corrupt and truncated variants (bits
/// flipped and cuts past the first block) end as the one-warp decode ends (`decode` compares
/// every result of the team with the warp alone's).
#[test]
fn blocks_decoded_side_by_side_match_libzstd_and_fail_alike() {
    let small_window = |d: &[u8], level: i32| {
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        c.set_parameter(CParameter::WindowLog(10)).unwrap();
        c.set_parameter(CParameter::ChecksumFlag(true)).unwrap();
        c.compress(d).unwrap()
    };
    let mut cases = Vec::new();
    for (n, kind, level) in [(6000usize, 4u8, 3), (9000, 5, 19), (5000, 0, 1), (7000, 3, 9)] {
        let d = data(n, kind, 5 + n as u64);
        let frame = small_window(&d, level);
        cases.push(Case {
            frame,
            expect: d,
            give_len: false,
            verify: true,
            what: format!("{n} bytes of kind {kind}, 1 KiB window"),
        });
    }
    let modes = check(&cases);
    assert!(modes.compressed_blocks >= 16, "the frames have many compressed blocks: {modes:?}");
    let mut next = rng(91);
    for c in &cases {
        let f = &c.frame;
        // past the frame header and the first block's first bytes
        let bad = damaged(f, 40.min(f.len() - 1), if under_tsan() { 6 } else { 40 }, 4, 2, &mut next);
        check_damaged(c, &bad);
    }
}

/// `n` damaged copies of frame `f`, each changed from byte `from` on: every `cut`-th one cut
/// short there, the others with 1 to `flips` bits flipped.
fn damaged(f: &[u8], from: usize, n: usize, cut: usize, flips: u64, next: &mut dyn FnMut() -> u64) -> Vec<Vec<u8>> {
    (0..n)
        .map(|k| {
            let mut g = f.to_vec();
            if k % cut == cut - 1 {
                g.truncate(from + (next() as usize) % (f.len() - from));
            } else {
                for _ in 0..=(next() % flips) {
                    let at = from + (next() as usize) % (g.len() - from);
                    g[at] ^= 1 << (next() % 8);
                }
            }
            g
        })
        .collect()
}

/// Decodes damaged copies of `c`'s frame under every schedule seed: one that decodes must give
/// the bytes libzstd gives it.
fn check_damaged(c: &Case, bad: &[Vec<u8>]) {
    let inputs: Vec<ChunkInput<'_>> = bad
        .iter()
        .map(|g| ChunkInput::zstd(g).with_expected_len(c.expect.len()).with_checksum_verification())
        .collect();
    for &seed in seeds() {
        for (r, g) in decode(seed, &inputs).iter().zip(bad) {
            if let Ok(v) = r {
                assert!(
                    reference(g, c.expect.len()).as_ref() == Some(v),
                    "{}: a corrupt frame decoded to bytes libzstd does not produce",
                    c.what
                );
            }
        }
    }
}

/// Text-like bytes whose later parts copy stretches from 17 to 67 KB back with one byte in ~24
/// changed (the changed byte a literal, the copy going on with a repeat offset): far matches,
/// farther back than a team leader's ring, many of them repeats.
fn far_copies(len: usize, seed: u64) -> Vec<u8> {
    let mut next = rng(seed);
    let mut v = data(24_000, 4, seed);
    while v.len() < len {
        let d = (17_000 + (next() % 50_000) as usize).min(v.len());
        for _ in 0..200 + next() % 2000 {
            let b = v[v.len() - d];
            v.push(if next().is_multiple_of(24) { b"XYZ"[(next() % 3) as usize] } else { b });
        }
    }
    v.truncate(len);
    v
}

/// Blocks a team executes from its sequence scratch (the second of each pair, its sequences
/// decoded ahead by helper 2), where helper 1 loads each next round's groups, literals and far
/// match sources into L1 (`dmc_zstd_exec_prefetch`) while the leader executes this round's:
/// libzstd's frames of far copies (Huffman literals, repeat offsets, matches 17-67 KB back,
/// the last block's front close behind its in-tail literals) and crafted block pairs of 300
/// sequences each whose second block has raw, RLE or Huffman literals and matches 16-31 KB back
/// (below); then bit flips and cuts in each frame's second half, so that the walk meets corrupt
/// groups. The loads change no byte, so what this guards is under ASan (every load in bounds)
/// and TSan (none of a byte the leader writes in that round).
#[test]
fn blocks_executed_from_the_scratch_match_libzstd_and_fail_alike() {
    let mut next = rng(77);
    let mut cases = Vec::new();
    let sizes: &[(usize, i32)] =
        if under_tsan() { &[(256 << 10, 3)] } else { &[(256 << 10, 3), (512 << 10, 1), (384 << 10, 7)] };
    for &(n, level) in sizes {
        let d = far_copies(n, n as u64 + level as u64);
        cases.push(Case {
            frame: compress(&d, level, true, true),
            expect: d,
            give_len: false,
            verify: true,
            what: format!("{n} bytes of far copies, level {level}"),
        });
    }
    // crafted: 40,000 bytes of history, then pairs of blocks of 300 sequences (10 groups: helper
    // 1's walk loads the groups from the third on) with matches 16-31 KB back; the second block
    // of a pair with RLE, raw or Huffman literals. With matches of 259-514 bytes a round's output
    // (64 sequences) reaches past the next round's sources (the walk loads none of this round's
    // output); in the last block (Huffman literals, 3-byte matches) the output front ends the
    // last rounds a few hundred bytes behind the literals the next round copies.
    let mut out: Vec<u8> = (0..40_000).map(|_| next() as u8).collect();
    let mut blocks = vec![raw_block(&out, false)];
    let mut rep = [1u32, 4, 8];
    let weights: [(u8, u8); 4] = [(b'a', 2), (b'b', 1), (b'c', 1), (b'd', 3)];
    for pair in 0..4 {
        for k in 0..2 {
            let last = pair == 3 && k == 1;
            let seqs: Vec<Seq> = (0..300)
                .map(|_| {
                    let ofv = 16_390 + (next() % 15_000) as u32;
                    match (pair, k) {
                        (2, 1) => Seq { ll: 2, ofv, ml: 259 + (next() % 256) as u32 },
                        (3, 1) => Seq { ll: 20 + (next() % 2) as u32, ofv, ml: 3 },
                        _ => Seq { ll: 2, ofv, ml: 43 + (next() % 4) as u32 },
                    }
                })
                .collect();
            let n = seqs.iter().map(|s| s.ll as usize).sum::<usize>() + 5;
            let lits: Vec<u8> = match (pair, k) {
                (0, 1) => vec![0x5A; n],
                (3, 1) => (0..n).map(|_| b"abcdddd"[(next() % 7) as usize]).collect(),
                _ => (0..n).map(|_| next() as u8).collect(),
            };
            let l = match (pair, k) {
                (0, 1) => Lits::Rle(0x5A, n),
                (3, 1) => Lits::Huffman { lits: &lits, weights: &weights, streams: 4, treeless: false },
                _ => Lits::Raw(&lits),
            };
            blocks.push(comp_block(&compressed_block(&l, &seqs, Tables::Rle), last));
            execute(&mut out, &lits, &seqs, &mut rep);
        }
    }
    cases.push(Case {
        frame: frame(Header { checksum: true, ..PLAIN }, &blocks, &out),
        expect: out,
        give_len: false,
        verify: true,
        what: "crafted block pairs with far matches".into(),
    });
    let m = check(&cases);
    assert!(m.raw_literals > 0 && m.rle_literals > 0 && m.huffman_4_streams > 0, "{m:?}");
    for c in &cases {
        // in the second half: mostly the blocks executed from the scratch
        let bad = damaged(&c.frame, c.frame.len() / 2, if under_tsan() { 3 } else { 12 }, 3, 1, &mut next);
        check_damaged(c, &bad);
    }
}

/// Structured data: runs of fresh bytes and copies of earlier bytes (near and far).
fn structured() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec((0u8..4, 1usize..3000, any::<u64>()), 1..40).prop_map(|parts| {
        let mut v: Vec<u8> = Vec::new();
        for (kind, len, seed) in parts {
            let mut next = rng(seed);
            match kind {
                0 => v.extend((0..len).map(|_| next() as u8)),
                1 if !v.is_empty() => {
                    let start = (seed as usize) % v.len();
                    for k in 0..len {
                        v.push(v[start + k % (v.len() - start)]);
                    }
                }
                2 => v.extend(std::iter::repeat_n(seed as u8, len)),
                _ => v.extend((0..len).map(|_| b"ACGT"[(next() % 4) as usize])),
            }
        }
        v
    })
}

/// The proptest's inputs, 0 bytes to 4 MiB: mostly small ones (random bytes up to 5000, or
/// [`structured`] data up to ~120 KB), and one case in 25 (about two of a run's 48) a large one
/// of one of [`data`]'s kinds: half of those exactly the largest size, the others 128 KiB up to
/// it. The emulator decodes a 4 MiB chunk in 5–30 s on a loaded 2-core machine (the Huffman
/// literals of text-like and sparse data are the slow ones; noise is raw blocks, milliseconds),
/// hence the weight (the proptest took 22–72 s in four runs here, 2 s before). The largest size
/// is 4 MiB, 1 MiB under ASan, which `make test` runs: instrumented, the emulator is slower still
/// (with the 1 MiB cap the proptest took 4–23 s in four runs, 2.7 s before), and the 1 MiB
/// inputs already take the paths the bounds checks guard (multi-block frames, windows past the
/// 128 KiB block size); `large_chunks_match_libzstd` and `windows_past_8_mib` hold the 4 MiB and
/// 10 MiB chunks in the plain run.
fn proptest_input() -> impl Strategy<Value = Vec<u8>> {
    let max = if under_asan() { 1usize << 20 } else { 4 << 20 };
    let large = (prop_oneof![Just(max), (128usize << 10)..max], any::<u8>(), any::<u64>())
        .prop_map(|(n, kind, seed)| data(n, kind, seed));
    prop_oneof![12 => prop::collection::vec(any::<u8>(), 0..5000), 12 => structured(), 1 => large]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn proptest_random_and_structured_data(
        d in proptest_input(),
        level in -5i32..=22,
        checksum in any::<bool>(),
        content_size in any::<bool>(),
    ) {
        let frame = compress(&d, level, checksum, content_size);
        let mut input = ChunkInput::zstd(&frame);
        if !content_size { input = input.with_expected_len(d.len()); }
        if checksum { input = input.with_checksum_verification(); }
        let r = decode(0x5EED, &[input]);
        match &r[0] {
            Ok(v) => prop_assert_eq!(v, &d),
            Err(e) => prop_assert!(false, "{}", e),
        }
    }

    #[test]
    fn proptest_mutated_frames_are_safe(seed in any::<u64>(), flips in 1usize..6) {
        let d = data(4000 + (seed % 3000) as usize, (seed % 6) as u8, seed);
        let mut f = compress(&d, (seed % 20) as i32 - 2, seed % 2 == 0, true);
        let mut next = rng(seed);
        for _ in 0..flips {
            let at = (next() as usize) % f.len();
            f[at] = next() as u8;
        }
        let r = decode(0, &[ChunkInput::zstd(&f).with_expected_len(d.len()).with_checksum_verification()]);
        if let Ok(v) = &r[0] {
            let reference = reference(&f, d.len());
            prop_assert_eq!(Some(v), reference.as_ref());
        }
    }
}

/// A block's sequences fail at the first one that breaks a rule, and the status is that
/// sequence's first broken rule in the format's order (literals left, output range, offset),
/// wherever the sequences sit in the kernel's groups of 32 (it checks a group's sequences at
/// once): offsets past the frame's start, literals past the block's literals and output past
/// the expected size, alone and two at once in either order, in one group and across two, and
/// two in one sequence.
#[test]
fn the_first_failing_sequence_decides_the_status() {
    type FailCase = (Option<usize>, Option<usize>, Option<usize>, Option<StreamStatus>);
    let mut next = rng(11);
    let history: Vec<u8> = (0..4100).map(|_| next() as u8).collect();
    // offset code 12 for all: valid offsets 4093..=4112 (the output is 4116 bytes or more),
    // the bad one 8188 (past the frame's start until sequence 70)
    let seqs: Vec<Seq> = (0..80)
        .map(|_| Seq { ll: 16 + (next() % 2) as u32, ofv: 4096 + (next() % 20) as u32, ml: 41 + (next() % 2) as u32 })
        .collect();
    let lits_all: Vec<u8> = (0..80 * 17 + 9).map(|_| next() as u8).collect();
    let h = Header { fcs_bytes: 0, ..PLAIN };
    // (bad offset at, literals run out at, output ends at, expected status)
    let bad = Some(StreamStatus::BadOffset);
    let corrupt = Some(StreamStatus::Corrupt);
    let over = Some(StreamStatus::DstOverflow);
    let cases: [FailCase; 15] = [
        (Some(0), None, None, bad),
        (Some(5), None, None, bad),
        (Some(31), None, None, bad),
        (Some(32), None, None, bad),
        (Some(45), None, None, bad),
        (None, Some(7), None, corrupt),
        (None, None, Some(33), over),
        (Some(10), Some(20), None, bad),
        (Some(20), Some(10), None, corrupt),
        (Some(40), Some(33), None, corrupt),
        (Some(31), Some(32), None, bad),
        (Some(20), None, Some(12), over),
        (Some(12), None, Some(20), bad),
        // one sequence breaking two rules: the earlier rule's status
        (Some(20), Some(20), None, corrupt),
        (Some(20), None, Some(20), over),
    ];
    let before = |k: usize, f: fn(&Seq) -> u32| seqs[..k].iter().map(f).sum::<u32>() as usize;
    let mut frames = Vec::new();
    let mut lens = Vec::new();
    for &(kb, kl, ko, _) in &cases {
        let mut s = seqs.clone();
        if let Some(k) = kb {
            s[k].ofv = 8191;
        }
        let nl = kl.map_or(before(80, |q| q.ll) + 9, |k| before(k, |q| q.ll) + 5);
        let block = compressed_block(&Lits::Raw(&lits_all[..nl]), &s, Tables::Rle);
        frames.push(frame(h, &[raw_block(&history, false), comp_block(&block, true)], &[]));
        lens.push(ko.map(|k| history.len() + before(k, |q| q.ll + q.ml) + 3));
    }
    let inputs: Vec<ChunkInput<'_>> = frames
        .iter()
        .zip(&lens)
        .map(|(f, n)| match n {
            Some(n) => ChunkInput::zstd(f).with_expected_len(*n),
            None => ChunkInput::zstd(f).with_expected_len(history.len() + 80 * 60),
        })
        .collect();
    for &seed in seeds() {
        let out = decode(seed, &inputs);
        for (i, (r, c)) in out.iter().zip(&cases).enumerate() {
            assert_eq!(status_of(r), c.3, "case {i} {:?} (seed {seed}): {:?}", &c, r.as_ref().err());
        }
    }
}
