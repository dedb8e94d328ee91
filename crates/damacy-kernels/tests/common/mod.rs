//! Shared helpers of the integration tests: the blosc C library as reference, fixtures.
#![allow(dead_code, unreachable_pub, clippy::missing_panics_doc)]

use damacy_kernels::{AssembleJob, Assembler, ChunkInput, DecodeConfig, Decoder, Device, Dtype, Error};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

#[path = "blosc_ref.rs"]
mod blosc_ref;

#[cfg(feature = "emulate")]
#[path = "cost_cases.rs"]
pub mod cost_cases;

/// Compresses with the blosc C library (the reference writer numcodecs uses); panics on failure.
pub fn blosc_compress(
    data: &[u8],
    clevel: i32,
    shuffle: i32,
    typesize: usize,
    cname: &str,
    blocksize: usize,
) -> Vec<u8> {
    blosc_ref::blosc_compress(data, clevel, shuffle, typesize, cname, blocksize).unwrap()
}

/// Decompresses with the blosc C library; None when it reports an error.
pub fn blosc_decompress(frame: &[u8]) -> Option<Vec<u8>> {
    if frame.len() < 16 {
        return None;
    }
    let mut nbytes = 0usize;
    // SAFETY: frame is valid for its length.
    if unsafe { blosc_src::blosc_cbuffer_validate(frame.as_ptr().cast(), frame.len(), &raw mut nbytes) } != 0 {
        return None;
    }
    let mut out = vec![0u8; nbytes];
    // SAFETY: validated above; out has nbytes bytes.
    let n = unsafe { blosc_src::blosc_decompress_ctx(frame.as_ptr().cast(), out.as_mut_ptr().cast(), out.len(), 1) };
    if n < 0 || n as usize != nbytes {
        return None;
    }
    Some(out)
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

pub fn manifest() -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures_dir().join("manifest.json")).expect("fixtures/manifest.json");
    serde_json::from_str(&text).expect("manifest is JSON")
}

/// Deterministic test data of a few kinds (compressible and not).
pub fn test_data(len: usize, kind: u8, seed: u64) -> Vec<u8> {
    let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    match kind % 4 {
        0 => (0..len).map(|_| next() as u8).collect(),
        1 => (0..len).map(|i| ((i / 7) as u8).wrapping_mul(3)).collect(),
        2 => (0..len).map(|i| if next() % 5 == 0 { next() as u8 } else { (i % 13) as u8 }).collect(),
        _ => (0..len).map(|i| ((i as f32 * 0.01).sin() * 1000.0) as i16 as u8).collect(),
    }
}

pub fn decode_host(device: &Device, inputs: &[ChunkInput<'_>]) -> Vec<Result<Vec<u8>, Error>> {
    let mut dec = Decoder::new(device, small_config()).unwrap();
    dec.decode_to_host(inputs).unwrap().chunks
}

pub fn chunk_files(dir: &std::path::Path) -> Vec<(Vec<u64>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join("c")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir.join("c")).unwrap();
                let coords =
                    rel.components().map(|c| c.as_os_str().to_str().unwrap().parse::<u64>().unwrap()).collect();
                out.push((coords, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Whether this run's emulated kernels are built under `AddressSanitizer` (`scripts/asan.sh`).
pub fn under_asan() -> bool {
    std::env::var("DAMACY_EMU_ASAN").is_ok_and(|v| v == "1")
}

/// The v3 `bytes` + `blosc` fixtures of the manifest, in its order.
pub fn blosc_fixtures(m: &serde_json::Value) -> Vec<&serde_json::Value> {
    m["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| {
            a["zarr_format"] == 3 && a["codecs"].as_array().is_some_and(|c| c.len() == 2 && c[1]["name"] == "blosc")
        })
        .collect()
}

/// Which blosc fixtures a run decodes: all of them, or under `ASan` one of each pair that
/// differs only in the blosc block size (`_small`: 1000 bytes, `_large`: blosc's own), the two
/// taken in turn over the (compressor, shuffle, typesize) combinations — every combination, and
/// both block sizes for every compressor and shuffle, at half the instrumented emulator's time
/// (minutes). Every blosc fixture is decoded whole, through these kernels, on the emulated device
/// in `crates/damacy/tests/zarrs_ext.rs` (the plain build, checked against zarr-python's digest
/// and zarrs).
pub fn blosc_fixture_in_run(a: &serde_json::Value) -> bool {
    if !under_asan() {
        return true;
    }
    let c = &a["codecs"][1]["configuration"];
    let shuffle = ["noshuffle", "shuffle", "bitshuffle"].iter().position(|s| c["shuffle"] == *s).unwrap_or(0);
    let ts = c["typesize"].as_u64().unwrap_or(1).trailing_zeros() as usize;
    let small = a["path"].as_str().unwrap_or("").ends_with("_small");
    small == (shuffle + ts).is_multiple_of(2)
}

/// Decodes the blosc fixtures on `device` that [`blosc_fixture_in_run`] keeps and whose
/// compressor (`cname`) `select` accepts; returns (arrays checked, unsupported chunks).
pub fn run_blosc_fixtures(device: &Device, select: impl Fn(&str) -> bool) -> (usize, usize) {
    let m = manifest();
    let mut checked = 0;
    let mut unsupported = 0;
    let seed = device.describe();
    // One decoder for every array, its buffers reused as the engine's are.
    let mut dec = Decoder::new(device, small_config()).unwrap();
    {
        for a in m["arrays"].as_array().unwrap() {
            if a["zarr_format"] != 3 {
                continue;
            }
            let codecs = a["codecs"].as_array().unwrap();
            let path = a["path"].as_str().unwrap();
            if codecs.len() != 2 || codecs[1]["name"] != "blosc" {
                continue;
            }
            let cname = codecs[1]["configuration"]["cname"].as_str().unwrap();
            if !select(cname) || !blosc_fixture_in_run(a) {
                continue;
            }
            let dir = fixtures_dir().join(path);
            let files = chunk_files(&dir);
            assert!(!files.is_empty(), "{path}: no chunks");
            let inputs: Vec<ChunkInput<'_>> = files.iter().map(|(_, b)| ChunkInput::blosc(b)).collect();
            let results = dec.decode_to_host(&inputs).unwrap().chunks;
            if !matches!(cname, "lz4" | "lz4hc" | "blosclz" | "zstd" | "zlib") {
                // Frames whose compressor has no kernel (snappy) are reported as such, unless
                // blosc stored them memcpyed.
                for (r, (_, b)) in results.iter().zip(&files) {
                    match r {
                        Err(Error::Unsupported { .. }) => unsupported += 1,
                        Ok(v) => assert_eq!(Some(v.clone()), blosc_decompress(b), "{path}"),
                        Err(e) => panic!("{path}: {e}"),
                    }
                }
                continue;
            }
            let mut all = Vec::new();
            for (r, (coords, b)) in results.into_iter().zip(&files) {
                let v = r.unwrap_or_else(|e| panic!("{path} chunk {coords:?} (seed {seed}): {e}"));
                // The test build of c-blosc has no zlib: those chunks are held to the digest only.
                if cname != "zlib" {
                    assert_eq!(Some(&v), blosc_decompress(b).as_ref(), "{path} chunk {coords:?} differs from c-blosc");
                }
                all.extend_from_slice(&v);
            }
            all.truncate(a["decoded_bytes"].as_u64().unwrap() as usize);
            assert_eq!(hex::encode(Sha256::digest(&all)), a["sha256"].as_str().unwrap(), "{path}");
            checked += 1;
        }
    }
    (checked, unsupported)
}

pub fn dtype_of(name: &str) -> Option<Dtype> {
    Some(match name {
        "bool" => Dtype::Bool,
        "uint8" => Dtype::U8,
        "int8" => Dtype::I8,
        "uint16" => Dtype::U16,
        "int16" => Dtype::I16,
        "uint32" => Dtype::U32,
        "int32" => Dtype::I32,
        "uint64" => Dtype::U64,
        "int64" => Dtype::I64,
        "float16" => Dtype::F16,
        "float32" => Dtype::F32,
        "float64" => Dtype::F64,
        _ => return None,
    })
}

/// Decodes every chunk of a `bytes` (+ crc32c, + transpose) fixture and assembles the whole
/// array on the device (crop of edge chunks, byte order, transpose, fill of missing chunks).
pub fn run_bytes_fixtures(device: &Device) -> usize {
    let m = manifest();
    let mut checked = 0;
    let seed = device.describe();
    let mut dec = Decoder::new(device, small_config()).unwrap();
    {
        for a in m["arrays"].as_array().unwrap() {
            if a["zarr_format"] != 3 || a["shard_shape"] != serde_json::Value::Null {
                continue;
            }
            let path = a["path"].as_str().unwrap();
            let codecs = a["codecs"].as_array().unwrap();
            let names: Vec<&str> = codecs.iter().map(|c| c["name"].as_str().unwrap()).collect();
            let (transpose, crc) = match names.as_slice() {
                ["bytes"] => (None, false),
                ["bytes", "crc32c"] => (None, true),
                ["transpose", "bytes"] => (Some(&codecs[0]), false),
                _ => continue,
            };
            let Some(dtype) = dtype_of(a["dtype"].as_str().unwrap()) else { continue };
            let bytes_cfg = codecs.iter().find(|c| c["name"] == "bytes").unwrap();
            let big = bytes_cfg["configuration"]["endian"] == "big";
            let order: Option<Vec<usize>> = transpose.map(|t| {
                t["configuration"]["order"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect()
            });
            let shape: Vec<u64> = a["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
            let cshape: Vec<u64> = a["chunk_shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
            let files = chunk_files(&fixtures_dir().join(path));
            let inputs: Vec<ChunkInput<'_>> = files
                .iter()
                .map(|(_, b)| if crc { ChunkInput::raw(b).with_crc32c() } else { ChunkInput::raw(b) })
                .collect();
            let wave = dec.decode_wave(&inputs).unwrap();
            let esz = dtype.size();
            let out_len = shape.iter().product::<u64>() as usize * esz;
            let mut out = device.alloc(out_len).unwrap();
            let mut jobs = Vec::new();
            // Fill everything first (missing chunks), then copy present chunks.
            jobs.push(AssembleJob {
                src_offset: 0,
                dst_offset: 0,
                shape: vec![shape.iter().product()],
                src_strides: vec![1],
                dst_strides: vec![1],
                src_dtype: dtype,
                dst_dtype: dtype,
                big_endian: false,
                fill_bits: Some(0),
            });
            for ((coords, _), r) in files.iter().zip(&wave.chunks) {
                let range = r.as_ref().unwrap_or_else(|e| panic!("{path} {coords:?}: {e}"));
                let start: Vec<u64> = coords.iter().zip(&cshape).map(|(c, s)| c * s).collect();
                let region: Vec<u64> =
                    start.iter().zip(&cshape).zip(&shape).map(|((s, c), n)| (*c).min(n - s)).collect();
                jobs.push(
                    AssembleJob::chunk_region(
                        range.start,
                        &cshape,
                        order.as_deref(),
                        &vec![0; cshape.len()],
                        &region,
                        0,
                        &shape,
                        &start,
                        dtype,
                        dtype,
                        big,
                    )
                    .unwrap(),
                );
            }
            let mut asm = Assembler::new(device, jobs.len()).unwrap();
            // Fill must land before the copies: run it as its own call.
            for r in asm.run(wave.output, &mut out, &jobs[..1]).unwrap() {
                r.unwrap();
            }
            for r in asm.run(wave.output, &mut out, &jobs[1..]).unwrap() {
                r.unwrap();
            }
            let mut host = vec![0u8; out_len];
            device.download(&out, 0, &mut host).unwrap();
            assert_eq!(hex::encode(Sha256::digest(&host)), a["sha256"].as_str().unwrap(), "{path} (seed {seed})");
            checked += 1;
        }
    }
    checked
}

/// Decodes the chunks through the wave decoder on the emulator under schedule `seed`, twice:
/// each job a team of warps (the zstd and inflate kernels' block per job) and each job one warp
/// (`DecodeConfig::teams` forced each way, on `config()`); the two must agree (bytes, or the
/// error), and the team's results are returned. Each test thread keeps one decoder per seed and
/// mode, its buffers reused from call to call as the engine's are.
#[cfg(feature = "emulate")]
pub fn decode_teams_and_alone(
    seed: u64,
    inputs: &[ChunkInput<'_>],
    config: fn() -> DecodeConfig,
) -> Vec<Result<Vec<u8>, Error>> {
    thread_local! {
        static DECODERS: std::cell::RefCell<Vec<(u64, bool, Decoder)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    DECODERS.with_borrow_mut(|decoders| {
        let mut run = |teams: bool| {
            let at = decoders.iter().position(|(s, t, _)| *s == seed && *t == teams).unwrap_or_else(|| {
                let config =
                    config().with_teams(if teams { damacy_kernels::Teams::All } else { damacy_kernels::Teams::None });
                decoders.push((seed, teams, Decoder::new(&Device::emulated(seed), config).unwrap()));
                decoders.len() - 1
            });
            decoders[at].2.decode_to_host(inputs).unwrap().chunks
        };
        let team = run(true);
        let alone = run(false);
        for (i, (a, b)) in team.iter().zip(&alone).enumerate() {
            assert!(
                format!("{a:?}") == format!("{b:?}"),
                "chunk {i} of {}: decoded by a team of warps it is {}, by one warp {}",
                inputs.len(),
                describe(a),
                describe(b)
            );
        }
        team
    })
}

/// A decode result in a few words (the bytes' length, or the error).
pub fn describe(r: &Result<Vec<u8>, Error>) -> String {
    match r {
        Ok(v) => format!("{} bytes", v.len()),
        Err(e) => e.to_string(),
    }
}

pub fn small_config() -> DecodeConfig {
    DecodeConfig::default()
        .with_wave_src_bytes(8 << 20)
        .with_wave_dst_bytes(8 << 20)
        .with_wave_streams(1 << 16)
        .with_device_budget_bytes(64 << 20)
}

/// Decodes many chunks in many waves over 1, 2 and 3 slots (`decode_to_host`, then single
/// `decode_wave`s that alternate slots) and checks every byte against the input.
pub fn run_pipelined_waves(device: &Device) {
    let datas: Vec<Vec<u8>> = (0..24).map(|i| test_data(20_000 + 97 * i as usize, (i % 4) as u8, i)).collect();
    let frames: Vec<Vec<u8>> = datas
        .iter()
        .enumerate()
        .map(|(i, d)| blosc_compress(d, 5, (i % 3) as i32, [1, 2, 4][i % 3], ["lz4", "blosclz"][i % 2], 0))
        .collect();
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::blosc(f)).collect();
    for slots in 1..=3 {
        let cfg = DecodeConfig::default()
            .with_wave_src_bytes(48 << 10)
            .with_wave_dst_bytes(64 << 10)
            .with_wave_streams(256)
            .with_slots(slots)
            .with_device_budget_bytes(8 << 20)
            .with_host_budget_bytes(4 << 20);
        let mut dec = Decoder::new(device, cfg).unwrap();
        let out = dec.decode_to_host(&inputs).unwrap();
        assert!(out.stats.waves >= 6, "expected many waves, got {}", out.stats.waves);
        for (i, (r, d)) in out.chunks.iter().zip(&datas).enumerate() {
            assert_eq!(r.as_ref().unwrap(), d, "chunk {i}, slots {slots}, {}", device.describe());
        }
        for k in 0..4 {
            let w = dec.decode_wave(&inputs[k * 2..k * 2 + 2]).unwrap();
            for (j, r) in w.chunks.iter().enumerate() {
                let range = r.as_ref().unwrap().clone();
                let mut host = vec![0u8; range.len()];
                device.download(w.output, range.start, &mut host).unwrap();
                assert_eq!(host, datas[k * 2 + j], "decode_wave {k}, chunk {j}, slots {slots}");
            }
            assert!(w.stats.kernel_time > std::time::Duration::ZERO);
        }
    }
}

/// One chunk of [`mixed_codec_chunks`]: encoded bytes, decoded bytes, how to describe it, and
/// whether it needs its expected length (a zstd frame without content size, a zlib stream).
pub type MixedChunk = (Vec<u8>, Vec<u8>, fn(&[u8]) -> ChunkInput<'_>, bool);

/// Chunks of every codec the decoder has a kernel for — blosc lz4, blosclz and zstd (every
/// shuffle), zstd frames (with and without content size and checksum, several frames, behind a
/// crc32c), gzip and zlib, raw — with their decoded bytes.
pub fn mixed_codec_chunks() -> Vec<MixedChunk> {
    use zstd::zstd_safe::CParameter;
    let mut out: Vec<MixedChunk> = Vec::new();
    for (i, cname) in ["lz4", "blosclz", "zstd"].iter().enumerate() {
        for shuffle in 0..3 {
            let ts = [1usize, 2, 4, 8][(i + shuffle as usize) % 4];
            let d = test_data(20_000 + 977 * i + 31 * shuffle as usize, (i + shuffle as usize) as u8, i as u64);
            out.push((blosc_compress(&d, 5, shuffle, ts, cname, 0), d, |b| ChunkInput::blosc(b), false));
        }
    }
    for (k, level) in [-3, 1, 3, 9, 19].into_iter().enumerate() {
        let d = test_data(30_000 + 4_099 * k, k as u8, 100 + k as u64);
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        c.set_parameter(CParameter::ChecksumFlag(k % 2 == 0)).unwrap();
        c.set_parameter(CParameter::ContentSizeFlag(k != 1)).unwrap();
        out.push((c.compress(&d).unwrap(), d, |b| ChunkInput::zstd(b), k == 1));
    }
    // Two frames in one chunk, then a crc32c over both.
    let (a, b) = (test_data(5_000, 1, 7), test_data(7_000, 2, 8));
    let mut two = zstd::bulk::compress(&a, 3).unwrap();
    two.extend(zstd::bulk::compress(&b, 5).unwrap());
    two.extend_from_slice(&crc32c::crc32c(&two).to_le_bytes());
    out.push((two, [a, b].concat(), |b| ChunkInput::zstd(b).with_crc32c(), false));
    let raw = test_data(3_000, 3, 9);
    out.push((raw.clone(), raw, |b| ChunkInput::raw(b), false));
    // gzip (sized by its ISIZE) and zlib (sized by the caller), for the inflate kernel.
    for (k, level) in [1u32, 6].into_iter().enumerate() {
        use std::io::Write;
        let data = test_data(25_000 + 3_001 * k, 2 + k as u8, 200 + k as u64);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        gz.write_all(&data).unwrap();
        out.push((gz.finish().unwrap(), data.clone(), |b| ChunkInput::gzip(b), false));
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
        zl.write_all(&data).unwrap();
        out.push((zl.finish().unwrap(), data, |b| ChunkInput::zlib(b), true));
    }
    out
}

/// Every codec in one wave (one launch per codec, blosc-zstd unshuffled after), then, with
/// `small_waves`, the same chunks in many small waves; every chunk must equal its input.
pub fn run_mixed_codec_waves(device: &Device, small_waves: bool) {
    let chunks = mixed_codec_chunks();
    let inputs: Vec<ChunkInput<'_>> = chunks
        .iter()
        .map(|(enc, d, make, needs_len)| {
            let i = make(enc).with_checksum_verification();
            if *needs_len { i.with_expected_len(d.len()) } else { i }
        })
        .collect();
    let mut dec = Decoder::new(device, small_config()).unwrap();
    let plan = dec.plan_waves(&inputs);
    assert_eq!((plan.waves, plan.rejected.len()), (1, 0), "{:?}", plan.rejected);
    let w = dec.decode_wave(&inputs).unwrap();
    // crc32c, lz4, blosclz, zstd, inflate, raw, unshuffle.
    assert_eq!(w.stats.launches, 7, "one launch per codec: {:?}", w.stats);
    assert_eq!(w.stats.streams[5], 4, "gzip and zlib streams {:?}", w.stats.streams);
    assert_eq!(w.stats.streams.iter().sum::<usize>(), plan.total.streams);
    // 5 + 2 frames of zstd chunks, and blosc-zstd blocks (those zstd could not shrink are raw).
    assert!(w.stats.streams[4] > 5 + 2, "zstd streams {:?}", w.stats.streams);
    for (k, (r, (_, d, _, _))) in w.chunks.iter().zip(&chunks).enumerate() {
        let range = r.as_ref().unwrap_or_else(|e| panic!("chunk {k}: {e}")).clone();
        let mut host = vec![0u8; range.len()];
        device.download(w.output, range.start, &mut host).unwrap();
        assert!(host == *d, "chunk {k} differs ({})", device.describe());
    }
    if !small_waves {
        return;
    }
    let cfg = DecodeConfig::default()
        .with_wave_src_bytes(64 << 10)
        .with_wave_dst_bytes(96 << 10)
        .with_wave_streams(512)
        .with_slots(2)
        .with_device_budget_bytes(8 << 20)
        .with_host_budget_bytes(4 << 20);
    let mut small = Decoder::new(device, cfg).unwrap();
    assert!(small.plan_waves(&inputs).waves >= 4);
    let out = small.decode_to_host(&inputs).unwrap();
    assert!(out.stats.waves >= 4, "waves {}", out.stats.waves);
    for (k, (r, (_, d, _, _))) in out.chunks.iter().zip(&chunks).enumerate() {
        assert!(r.as_ref().unwrap_or_else(|e| panic!("chunk {k}: {e}")) == d, "chunk {k} differs in small waves");
    }
}

/// `d` as one gzip member compressed by flate2 at `level`.
pub fn gzip(d: &[u8], level: u32) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(d).unwrap();
    e.finish().unwrap()
}

/// `d` as a zlib stream compressed by flate2 at `level`.
pub fn zlib(d: &[u8], level: u32) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(d).unwrap();
    e.finish().unwrap()
}

/// gzip and zlib streams through the inflate kernel on `device` (the gated GPU test, and the
/// emulator in `tests/inflate.rs` so that the same checks are known to pass and to fail): flate2's
/// output at levels 0 to 9 (stored, fixed and dynamic blocks), gzip and zlib alternating, 1 byte to
/// about `largest` bytes, and a gzip chunk of two members, the first with every optional header field (FEXTRA,
/// FNAME, FCOMMENT, FHCRC), decode to their bytes with checksums verified. Corrupt streams end in
/// the status that names the fault: a bad CRC32, ISIZE, header CRC or Adler-32 → checksum
/// mismatch; a reserved block type or a zlib header whose check bits are wrong → corrupt; a
/// stream cut in half → truncated; an output one byte short → overflow; a zlib preset
/// dictionary → unsupported. Without verification the checksums are not read.
#[allow(clippy::too_many_lines, clippy::similar_names, clippy::many_single_char_names)]
pub fn run_inflate_checks(device: &Device, largest: usize) {
    use damacy_kernels::StreamStatus;
    use flate2::Compression;
    use std::io::Write as _;

    fn crc32(d: &[u8]) -> u32 {
        let mut c = flate2::Crc::new();
        c.update(d);
        c.sum()
    }
    /// A member with FEXTRA, FNAME, FCOMMENT and FHCRC; the index of its header CRC's first byte.
    fn gzip_with_every_field(d: &[u8]) -> (Vec<u8>, usize) {
        let mut e = flate2::GzBuilder::new()
            .extra(b"ab\x02\x00xy".to_vec())
            .filename("chunk.bin")
            .comment("damacy")
            .write(Vec::new(), Compression::new(6));
        e.write_all(d).unwrap();
        let mut g = e.finish().unwrap();
        let xlen = usize::from(u16::from_le_bytes([g[10], g[11]]));
        let mut end = 12 + xlen;
        for _ in 0..2 {
            end += g[end..].iter().position(|&b| b == 0).unwrap() + 1;
        }
        g[3] |= 2;
        let h = (crc32(&g[..end]) & 0xFFFF) as u16;
        g.splice(end..end, h.to_le_bytes());
        (g, end)
    }
    let status_of = |r: &Result<Vec<u8>, Error>| match r {
        Err(Error::Stream { status, codec, .. }) => {
            assert_eq!(*codec, "inflate", "{r:?}");
            Some(*status)
        }
        _ => None,
    };

    // Every level, both wrappers, sizes from 1 byte to about `largest`.
    let mut streams: Vec<(Vec<u8>, bool, Vec<u8>)> = Vec::new(); // stream, gzip, decoded
    for level in 0..=9u32 {
        for (k, n) in [1usize, 3000, largest / 4, largest].into_iter().enumerate() {
            let d = test_data(n + level as usize * 131, (k + level as usize) as u8, u64::from(level));
            let gz = (k + level as usize).is_multiple_of(2);
            streams.push((if gz { gzip(&d, level) } else { zlib(&d, level) }, gz, d));
        }
    }
    let a = test_data(5000, 3, 7);
    let b = test_data(20_000, 2, 8);
    let (mut two, _) = gzip_with_every_field(&a);
    two.extend(gzip(&b, 1));
    streams.push((two, true, [a.clone(), b].concat()));
    let inputs: Vec<ChunkInput<'_>> = streams
        .iter()
        .map(|(s, gz, d)| {
            let i = if *gz { ChunkInput::gzip(s) } else { ChunkInput::zlib(s) };
            i.with_expected_len(d.len()).with_checksum_verification()
        })
        .collect();
    for (k, (r, (_, gz, d))) in decode_host(device, &inputs).iter().zip(&streams).enumerate() {
        let v = r.as_ref().unwrap_or_else(|e| panic!("stream {k} (gzip {gz}, {} bytes): {e}", d.len()));
        assert!(v == d, "stream {k} (gzip {gz}, {} bytes) decoded to other bytes", d.len());
    }

    // Corrupt streams: each fault its status.
    let d = test_data(40_000, 3, 11);
    let g = gzip(&d, 6);
    let z = zlib(&d, 6);
    let (n, m) = (g.len(), z.len());
    let mut bad_crc = g.clone();
    bad_crc[n - 6] ^= 1; // CRC32: bytes n-8..n-4
    let mut bad_isize = g.clone();
    bad_isize[n - 1] ^= 1;
    let mut bad_adler = z.clone();
    bad_adler[m - 1] ^= 0x40;
    let (mut bad_hcrc, at) = gzip_with_every_field(&d);
    bad_hcrc[at] ^= 0xFF;
    let mut reserved = z.clone();
    reserved[2] |= 6; // the first block's type: 3, reserved
    let mut reserved_gz = g.clone();
    reserved_gz[10] |= 6;
    let mut bad_header = z.clone();
    bad_header[1] ^= 1; // CMF·256 + FLG no longer a multiple of 31
    let mut dict = z.clone();
    let flg = 0xA0u32; // FDICT, with a valid header check
    dict[1] = (flg + (31 - ((0x78 << 8 | flg) % 31)) % 31) as u8;
    let cases: Vec<(&str, ChunkInput<'_>, StreamStatus)> = vec![
        ("crc32", ChunkInput::gzip(&bad_crc), StreamStatus::ChecksumMismatch),
        ("isize", ChunkInput::gzip(&bad_isize), StreamStatus::ChecksumMismatch),
        ("adler32", ChunkInput::zlib(&bad_adler), StreamStatus::ChecksumMismatch),
        ("header crc", ChunkInput::gzip(&bad_hcrc), StreamStatus::ChecksumMismatch),
        ("reserved block (zlib)", ChunkInput::zlib(&reserved), StreamStatus::Corrupt),
        ("reserved block (gzip)", ChunkInput::gzip(&reserved_gz), StreamStatus::Corrupt),
        ("truncated", ChunkInput::zlib(&z[..m / 2]), StreamStatus::SrcTruncated),
        ("no trailer", ChunkInput::gzip(&g[..n - 3]), StreamStatus::SrcTruncated),
        ("overflow", ChunkInput::gzip(&g).with_expected_len(d.len() - 1), StreamStatus::DstOverflow),
        ("dictionary", ChunkInput::zlib(&dict), StreamStatus::Unsupported),
        ("zlib header check", ChunkInput::zlib(&bad_header), StreamStatus::Corrupt),
    ];
    let inputs: Vec<ChunkInput<'_>> = cases
        .iter()
        .map(|(_, i, _)| if i.expected_len.is_none() { i.with_expected_len(d.len()) } else { *i })
        .map(ChunkInput::with_checksum_verification)
        .collect();
    for (r, (what, _, want)) in decode_host(device, &inputs).iter().zip(&cases) {
        assert_eq!(status_of(r), Some(*want), "{what}: {r:?}");
    }
    // Without verification the trailers and the header CRC are not read.
    let lax: Vec<ChunkInput<'_>> =
        [ChunkInput::gzip(&bad_crc), ChunkInput::zlib(&bad_adler), ChunkInput::gzip(&bad_hcrc)]
            .into_iter()
            .map(|i| i.with_expected_len(d.len()))
            .collect();
    for r in decode_host(device, &lax) {
        assert!(r.as_ref().is_ok_and(|v| *v == d), "{r:?}");
    }
}
