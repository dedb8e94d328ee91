//! Kernel tests through the host emulator: fixtures, random data against the blosc C library
//! and lz4_flex, corrupted and truncated streams, crc32c, assemble.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc, clippy::too_many_lines)]

mod common;

use common::{
    blosc_compress, blosc_decompress, decode_host, run_blosc_fixtures, run_bytes_fixtures, run_pipelined_waves,
    test_data,
};
use damacy_kernels::{AssembleJob, ChunkInput, DType, DecodeConfig, Decoder, Device, Error, StreamStatus};
use proptest::prelude::*;

/// Schedule seeds every test runs under: fixed order and a shuffled order.
const SEEDS: [u64; 2] = [0, 0x5EED_2026];

#[test]
fn blosc_fixtures_match_manifest_digests() {
    for seed in SEEDS {
        let (checked, unsupported) = run_blosc_fixtures(&Device::emulated(seed));
        assert_eq!(checked, 72, "lz4, lz4hc and blosclz fixtures");
        assert!(unsupported > 0, "zstd/zlib frames are reported unsupported");
    }
}

#[test]
fn bytes_fixtures_decode_and_assemble_to_manifest_digests() {
    for seed in SEEDS {
        let checked = run_bytes_fixtures(&Device::emulated(seed));
        assert!(checked >= 19, "bytes, crc32c and transpose fixtures: {checked}");
    }
}

#[test]
fn crc32c_mismatch_and_short_chunks_are_reported() {
    let device = Device::emulated(7);
    let data = test_data(10_000, 0, 1);
    let mut good = data.clone();
    good.extend_from_slice(&crc32c::crc32c(&data).to_le_bytes());
    let mut bad = good.clone();
    bad[1234] ^= 0x40;
    let empty_crc = crc32c::crc32c(&[]).to_le_bytes();
    let inputs = [
        ChunkInput::raw(&good).with_crc32c(),
        ChunkInput::raw(&bad).with_crc32c(),
        ChunkInput::raw(&good[..3]).with_crc32c(),
        ChunkInput::raw(&empty_crc).with_crc32c(),
    ];
    let r = decode_host(&device, &inputs);
    assert_eq!(r[0].as_ref().unwrap(), &data);
    match &r[1] {
        Err(Error::Stream { status: StreamStatus::CrcMismatch, codec: "crc32c", chunk: 1, .. }) => {}
        other => panic!("expected a crc mismatch, got {other:?}"),
    }
    assert!(matches!(r[2], Err(Error::Decode { chunk: 2, .. })));
    assert_eq!(r[3].as_ref().unwrap().len(), 0);
}

#[test]
fn crc32c_matches_reference_for_many_lengths() {
    let device = Device::emulated(0);
    let bufs: Vec<Vec<u8>> = [0usize, 1, 2, 3, 255, 256, 257, 1000, 4097, 65_537]
        .iter()
        .map(|&n| {
            let mut d = test_data(n, 2, n as u64);
            d.extend_from_slice(&crc32c::crc32c(&d).to_le_bytes());
            d
        })
        .collect();
    let inputs: Vec<_> = bufs.iter().map(|b| ChunkInput::raw(b).with_crc32c()).collect();
    for (r, b) in decode_host(&device, &inputs).iter().zip(&bufs) {
        assert_eq!(r.as_ref().unwrap().as_slice(), &b[..b.len() - 4]);
    }
}

/// A blosc frame around one LZ4 stream (no split, no shuffle) — exercises the LZ4 kernel on
/// lz4_flex output directly.
fn lz4_frame(data: &[u8], compressed: &[u8]) -> Vec<u8> {
    let mut f = vec![2u8, 1, 0x10 | (1 << 5), 1];
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(&(data.len().max(1) as u32).to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&20u32.to_le_bytes());
    f.extend_from_slice(&(compressed.len() as u32).to_le_bytes());
    f.extend_from_slice(compressed);
    let n = f.len() as u32;
    f[12..16].copy_from_slice(&n.to_le_bytes());
    f
}

#[test]
fn lz4_kernel_matches_lz4_flex() {
    let device = Device::emulated(0x5EED);
    let mut frames = Vec::new();
    let mut datas = Vec::new();
    for (i, n) in [1usize, 5, 12, 13, 64, 100, 1000, 65_536, 200_000].iter().enumerate() {
        for kind in 0..4u8 {
            let d = test_data(*n, kind, i as u64);
            let c = lz4_flex::block::compress(&d);
            if c.len() == d.len() {
                continue; // would be read as stored raw
            }
            frames.push(lz4_frame(&d, &c));
            datas.push(d);
        }
    }
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::blosc(f)).collect();
    for (r, d) in decode_host(&device, &inputs).iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }
}

fn corrupt_frames() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for (k, cname) in ["lz4", "blosclz"].iter().enumerate() {
        for shuffle in 0..3 {
            let d = test_data(20_000, 2 + k as u8, shuffle as u64);
            frames.push(blosc_compress(&d, 5, shuffle, 4, cname, 4096));
        }
    }
    frames
}

#[test]
fn truncated_frames_are_errors_never_crashes() {
    let device = Device::emulated(3);
    for f in corrupt_frames() {
        let cuts: Vec<Vec<u8>> = [0usize, 8, 15, 16, 20, f.len() / 3, f.len() / 2, f.len() - 1]
            .iter()
            .map(|&n| {
                let mut g = f[..n].to_vec();
                // keep cbytes consistent so the device (not the header check) meets the cut
                if g.len() >= 16 {
                    let l = g.len() as u32;
                    g[12..16].copy_from_slice(&l.to_le_bytes());
                }
                g
            })
            .collect();
        let inputs: Vec<_> = cuts.iter().map(|c| ChunkInput::blosc(c)).collect();
        for (r, c) in decode_host(&device, &inputs).iter().zip(&cuts) {
            assert!(r.is_err(), "a frame cut to {} of {} bytes decoded", c.len(), f.len());
            assert!(blosc_decompress(c).is_none());
        }
    }
}

#[test]
fn device_status_errors_for_corrupt_lz4_streams() {
    // Streams whose tokens point before the output start, or overrun the output.
    let data = test_data(5000, 1, 0);
    let mut c = lz4_flex::block::compress(&data);
    // Corrupt the first match offset (after the first literal run) to a huge distance.
    let tok = c[0];
    let lit = usize::from(tok >> 4);
    assert!(lit < 15);
    c[1 + lit] = 0xFF;
    c[2 + lit] = 0xFF;
    let f1 = lz4_frame(&data, &c);
    let device = Device::emulated(0);
    let r = decode_host(&device, &[ChunkInput::blosc(&f1)]);
    match &r[0] {
        Err(Error::Stream { status: StreamStatus::BadOffset, codec: "lz4", .. }) => {}
        other => panic!("expected a bad offset status, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random data, sizes, typesizes, clevels, shuffles, codecs and block sizes: decoded bytes
    /// equal the input (c-blosc wrote the frames).
    #[test]
    fn random_blosc_frames_roundtrip(
        len in 0usize..60_000,
        kind in 0u8..4,
        typesize in prop::sample::select(vec![1usize, 2, 3, 4, 8, 16, 17]),
        clevel in 0i32..=9,
        shuffle in 0i32..3,
        cname in prop::sample::select(vec!["lz4", "lz4hc", "blosclz"]),
        blocksize in prop::sample::select(vec![0usize, 256, 1000, 4096, 32_768]),
        seed in any::<u64>(),
    ) {
        let d = test_data(len, kind, seed);
        let f = blosc_compress(&d, clevel, shuffle, typesize, cname, blocksize);
        let device = Device::emulated(seed | 1);
        let r = decode_host(&device, &[ChunkInput::blosc(&f)]);
        prop_assert_eq!(r[0].as_ref().map_err(ToString::to_string), Ok(&d));
    }

    /// Random byte flips in valid frames: either an error, or exactly what c-blosc decodes.
    #[test]
    fn corrupted_frames_never_crash_and_agree_with_c_blosc(
        which in 0usize..6,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut f = corrupt_frames().swap_remove(which);
        for (i, v) in flips {
            let i = 16 + i.index(f.len() - 16);
            f[i] ^= v | 1;
        }
        let device = Device::emulated(11);
        let r = decode_host(&device, &[ChunkInput::blosc(&f)]);
        if let Ok(v) = &r[0] {
            // c-blosc may reject what we accept only where a stream's trailing bytes differ;
            // when both decode, they agree.
            if let Some(reference) = blosc_decompress(&f) {
                prop_assert_eq!(v, &reference);
            }
        }
    }
}

#[test]
fn many_chunks_split_into_waves() {
    let device = Device::emulated(0);
    let cfg = DecodeConfig::default()
        .with_wave_src_bytes(64 << 10)
        .with_wave_dst_bytes(128 << 10)
        .with_wave_streams(256)
        .with_device_budget_bytes(8 << 20);
    let datas: Vec<Vec<u8>> = (0..12).map(|i| test_data(30_000, (i % 4) as u8, i)).collect();
    let frames: Vec<Vec<u8>> = datas.iter().map(|d| blosc_compress(d, 5, 1, 2, "lz4", 0)).collect();
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::blosc(f)).collect();
    let mut dec = Decoder::new(&device, cfg).unwrap();
    let out = dec.decode_to_host(&inputs).unwrap();
    assert!(out.stats.waves > 1, "expected several waves, got {}", out.stats.waves);
    for (r, d) in out.chunks.iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }
}

/// Waves pipelined over 1, 2 and 3 slots, with seeded delays on every stream so the upload of
/// one wave, the kernels of another and the read-back of a third interleave differently per
/// seed: a hand-off that lacked an event would hand over stale or half-written bytes.
#[test]
fn pipelined_waves_are_correct_under_shuffled_stream_timing() {
    for seed in [3u64, 11, 29] {
        run_pipelined_waves(&Device::emulated(seed));
    }
}

#[test]
fn budget_is_enforced_at_construction() {
    let device = Device::emulated(0);
    let cfg = DecodeConfig::default().with_device_budget_bytes(1 << 20);
    let e = Decoder::new(&device, cfg).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory(ref m) if m.contains("device_budget_bytes")), "{e}");
    let cfg = DecodeConfig::default().with_host_budget_bytes(1 << 20);
    let e = Decoder::new(&device, cfg).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory(ref m) if m.contains("host_budget_bytes")), "{e}");
    // Two slots need twice the memory of one.
    let one = DecodeConfig::default().with_slots(1);
    assert_eq!(DecodeConfig::default().device_bytes(), 2 * one.device_bytes());
    assert_eq!(DecodeConfig::default().host_bytes(), 2 * one.host_bytes());
    let e = Decoder::new(&device, DecodeConfig::default().with_slots(0)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn assemble_casts_to_f32_f16_bf16() {
    let device = Device::emulated(5);
    let vals: Vec<i16> = vec![-32768, -1000, -1, 0, 1, 7, 1000, 2049, 32767];
    let src_bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_be_bytes()).collect();
    let mut src = device.alloc(src_bytes.len()).unwrap();
    device.upload(&src_bytes, &mut src, 0).unwrap();
    let n = vals.len() as u64;
    for (dt, expect) in [
        (DType::F32, vals.iter().flat_map(|&v| f32::from(v).to_le_bytes()).collect::<Vec<u8>>()),
        (DType::F16, vals.iter().flat_map(|&v| half::f16::from_f32(f32::from(v)).to_le_bytes()).collect()),
        (DType::BF16, vals.iter().flat_map(|&v| half::bf16::from_f32(f32::from(v)).to_le_bytes()).collect()),
        (DType::I64, vals.iter().flat_map(|&v| i64::from(v).to_le_bytes()).collect()),
        (DType::U8, vals.iter().map(|&v| v as u8).collect()),
    ] {
        let mut dst = device.alloc(expect.len()).unwrap();
        let job = AssembleJob {
            src_offset: 0,
            dst_offset: 0,
            shape: vec![n],
            src_strides: vec![1],
            dst_strides: vec![1],
            src_dtype: DType::I16,
            dst_dtype: dt,
            big_endian: true,
            fill_bits: None,
        };
        for r in damacy_kernels::assemble(&device, &src, &mut dst, &[job]).unwrap() {
            r.unwrap();
        }
        let mut host = vec![0u8; expect.len()];
        device.download(&dst, 0, &mut host).unwrap();
        assert_eq!(host, expect, "{dt:?}");
    }
}

#[test]
fn assemble_f32_to_f16_rounding_matches_half() {
    let device = Device::emulated(0);
    let vals: Vec<f32> = (0..4000)
        .map(|i| {
            let x = (i as f32 - 2000.0) * 0.731;
            if i % 3 == 0 {
                x * 1e-6
            } else if i % 7 == 0 {
                x * 40.0
            } else {
                x
            }
        })
        .chain([f32::INFINITY, f32::NEG_INFINITY, 65_519.0, 65_520.0, 6.0e-8, 2.9e-8, -0.0])
        .collect();
    let src_bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut src = device.alloc(src_bytes.len()).unwrap();
    device.upload(&src_bytes, &mut src, 0).unwrap();
    let mut dst = device.alloc(vals.len() * 2).unwrap();
    let job = AssembleJob {
        src_offset: 0,
        dst_offset: 0,
        shape: vec![vals.len() as u64],
        src_strides: vec![1],
        dst_strides: vec![1],
        src_dtype: DType::F32,
        dst_dtype: DType::F16,
        big_endian: false,
        fill_bits: None,
    };
    for r in damacy_kernels::assemble(&device, &src, &mut dst, &[job]).unwrap() {
        r.unwrap();
    }
    let mut host = vec![0u8; vals.len() * 2];
    device.download(&dst, 0, &mut host).unwrap();
    for (i, v) in vals.iter().enumerate() {
        let got = u16::from_le_bytes([host[2 * i], host[2 * i + 1]]);
        assert_eq!(got, half::f16::from_f32(*v).to_bits(), "{v}");
    }
}

#[test]
fn assemble_rejects_out_of_bounds_jobs() {
    let device = Device::emulated(0);
    let src = device.alloc(100).unwrap();
    let mut dst = device.alloc(100).unwrap();
    let job = AssembleJob {
        src_offset: 0,
        dst_offset: 90,
        shape: vec![4],
        src_strides: vec![1],
        dst_strides: vec![1],
        src_dtype: DType::F32,
        dst_dtype: DType::F32,
        big_endian: false,
        fill_bits: None,
    };
    let r = damacy_kernels::assemble(&device, &src, &mut dst, &[job]).unwrap();
    assert!(matches!(r[0], Err(Error::InvalidArgument(_))));
}

unsafe extern "C" {
    fn dmc_emu_dmc_selftest_neighbor(gx: u32, gy: u32, bx: u32, seed: u64, with_barrier: u32, out: *mut u32) -> i32;
    fn dmc_emu_configure(schedule: u32, dyn_smem: u32, max_dyn_smem: u32, watchdog_ms: u32) -> i32;
}

fn selftest(seed: u64, with_barrier: bool) -> bool {
    let mut out = vec![0u32; 64];
    // SAFETY: plain options of this thread's launches; the sync schedule (whatever
    // DAMACY_EMU_SCHEDULE says), which this test is about.
    assert_eq!(unsafe { dmc_emu_configure(1, 0, 0, 0) }, 0);
    // SAFETY: `out` holds the 64 values the one 64-thread block writes.
    let rc = unsafe { dmc_emu_dmc_selftest_neighbor(1, 1, 64, seed, u32::from(with_barrier), out.as_mut_ptr()) };
    assert_eq!(rc, 0);
    out.iter().enumerate().all(|(t, &v)| v == if t == 0 { 1 } else { t as u32 })
}

/// The shuffled schedule catches a missing `__syncthreads` that the fixed order hides.
#[test]
fn shuffled_schedule_catches_a_missing_barrier() {
    assert!(selftest(0, true));
    assert!(selftest(0x5EED, true));
    assert!(selftest(0, false), "fixed order runs thread t-1 before t: the race is hidden");
    assert!(!selftest(0x5EED, false), "a shuffled order must expose the missing barrier");
}
