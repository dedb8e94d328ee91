//! Kernel tests through the host emulator: fixtures, random data against the blosc C library
//! and lz4_flex, corrupted and truncated streams, crc32c, assemble.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc, clippy::too_many_lines)]

mod common;

use common::{blosc_compress, blosc_decompress, decode_host, run_pipelined_waves, test_data};
use damacy_kernels::{AssembleJob, Assembler, ChunkInput, DecodeConfig, Decoder, Device, Dtype, Error, StreamStatus};
use proptest::prelude::*;

/// Schedule seeds every test runs under: fixed order and a shuffled order.
const SEEDS: [u64; 2] = [0, 0x5EED_2026];

// The blosc and bytes fixtures, random blosc frames, zstd, inflate, pipelined waves and every
// codec in one wave run on the emulator and on a GPU from one source: tests/gpu.rs.

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
    for (k, cname) in ["lz4", "blosclz", "zstd"].iter().enumerate() {
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
        cname in prop::sample::select(vec!["lz4", "lz4hc", "blosclz", "zstd"]),
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
        which in 0usize..9,
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

/// blosc-zstd: a split stream that is not a zstd frame, or whose frame declares another size
/// than the split's, is a decode error naming the chunk and the byte; a corrupt frame inside a
/// split is a device status of the zstd stream at its byte range; the other chunks decode.
#[test]
fn blosc_zstd_errors_name_the_chunk_and_the_stream() {
    let d = test_data(40_000, 3, 5);
    let good = blosc_compress(&d, 5, 1, 4, "zstd", 8192);
    let plan = damacy_kernels::plan_frame(&good).unwrap();
    let first = plan.streams[0];
    assert_eq!(first.codec, damacy_kernels::StreamCodec::Zstd);
    let at = first.src_off as usize;
    // Not a zstd frame: the magic number of the first split is broken.
    let mut magic = good.clone();
    magic[at] ^= 0xff;
    // The frame's content size no longer matches the block's size (no dictionary id: the
    // field follows the descriptor, and the window byte when not single-segment).
    let mut size = good.clone();
    let fhd = size[at + 4];
    assert!(fhd >> 6 != 0 || fhd & 0x20 != 0, "c-blosc's frames declare their content size");
    size[at + 5 + usize::from(fhd & 0x20 == 0)] ^= 1;
    // Corrupt the compressed block of the last split: the kernel reports it.
    let last = plan.streams.last().unwrap();
    let mut body = good.clone();
    let mid = last.src_off as usize + last.src_len as usize - 3;
    body[mid] ^= 0x5a;
    body[mid - 1] ^= 0xa5;
    let inputs =
        [ChunkInput::blosc(&magic), ChunkInput::blosc(&size), ChunkInput::blosc(&good), ChunkInput::blosc(&body)];
    let r = decode_host(&Device::emulated(0), &inputs);
    match &r[0] {
        Err(Error::Decode { chunk: 0, offset, reason, .. }) => {
            assert_eq!(*offset, at, "{reason}");
            assert!(reason.contains("magic"), "{reason}");
        }
        other => panic!("expected a decode error at byte {at}, got {other:?}"),
    }
    assert!(matches!(&r[1], Err(Error::Decode { chunk: 1, .. })), "{:?}", r[1]);
    assert_eq!(r[2].as_ref().unwrap(), &d);
    match &r[3] {
        Ok(v) => assert_eq!(Some(v), blosc_decompress(&body).as_ref(), "accepted: must agree with c-blosc"),
        Err(Error::Stream { chunk: 3, codec: "zstd", src_start, src_end, .. }) => {
            assert_eq!((*src_start, *src_end), (last.src_off as usize, (last.src_off + last.src_len) as usize));
        }
        Err(other) => panic!("expected a zstd stream status, got {other}"),
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
    // Two slots need twice the device memory of one; the pinned staging ring and status area
    // do not grow with the slots, and the ring holds at most 32 MiB whatever the wave size.
    let one = DecodeConfig::default().with_slots(1);
    assert_eq!(DecodeConfig::default().device_bytes(), 2 * one.device_bytes());
    assert_eq!(DecodeConfig::default().host_bytes(), one.host_bytes());
    let huge = DecodeConfig::default().with_wave_src_bytes(1 << 30).with_wave_dst_bytes(1 << 30);
    assert_eq!(huge.host_bytes(), (32 << 20) + huge.status_bytes());
    let e = Decoder::new(&device, DecodeConfig::default().with_staging_pieces(1)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("staging_pieces")), "{e}");
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
        (Dtype::F32, vals.iter().flat_map(|&v| f32::from(v).to_le_bytes()).collect::<Vec<u8>>()),
        (Dtype::F16, vals.iter().flat_map(|&v| half::f16::from_f32(f32::from(v)).to_le_bytes()).collect()),
        (Dtype::BF16, vals.iter().flat_map(|&v| half::bf16::from_f32(f32::from(v)).to_le_bytes()).collect()),
        (Dtype::I64, vals.iter().flat_map(|&v| i64::from(v).to_le_bytes()).collect()),
        (Dtype::U8, vals.iter().map(|&v| v as u8).collect()),
    ] {
        let mut dst = device.alloc(expect.len()).unwrap();
        let job = AssembleJob {
            src_offset: 0,
            dst_offset: 0,
            shape: vec![n],
            src_strides: vec![1],
            dst_strides: vec![1],
            src_dtype: Dtype::I16,
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

/// Element loads and stores take one access of the element's size when the address is aligned
/// to it, single bytes otherwise: every source and destination byte offset (aligned or not, in
/// both byte orders) gives the same elements, and no byte outside the destination run changes.
#[test]
fn assemble_at_unaligned_offsets_matches_aligned() {
    let device = Device::emulated(0x5EED);
    let vals: Vec<i16> = (0..37).map(|i| (i * 1777 - 30_000) as i16).collect();
    let n = vals.len() as u64;
    for big_endian in [false, true] {
        for (dst_dtype, expect) in [
            (Dtype::I16, vals.iter().flat_map(|&v| v.to_le_bytes()).collect::<Vec<u8>>()),
            (Dtype::F32, vals.iter().flat_map(|&v| f32::from(v).to_le_bytes()).collect()),
            (Dtype::I64, vals.iter().flat_map(|&v| i64::from(v).to_le_bytes()).collect()),
        ] {
            for src_offset in [0usize, 1, 2, 3, 5] {
                for dst_offset in [0usize, 1, 2, 4, 6, 7] {
                    let mut src_bytes = vec![0xEEu8; src_offset];
                    src_bytes
                        .extend(vals.iter().flat_map(|v| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() }));
                    let mut src = device.alloc(src_bytes.len()).unwrap();
                    device.upload(&src_bytes, &mut src, 0).unwrap();
                    let sentinel = vec![0x5Au8; dst_offset + expect.len() + 3];
                    let mut dst = device.alloc(sentinel.len()).unwrap();
                    device.upload(&sentinel, &mut dst, 0).unwrap();
                    let job = AssembleJob {
                        src_offset,
                        dst_offset,
                        shape: vec![n],
                        src_strides: vec![1],
                        dst_strides: vec![1],
                        src_dtype: Dtype::I16,
                        dst_dtype,
                        big_endian,
                        fill_bits: None,
                    };
                    for r in damacy_kernels::assemble(&device, &src, &mut dst, &[job]).unwrap() {
                        r.unwrap();
                    }
                    let mut host = vec![0u8; sentinel.len()];
                    device.download(&dst, 0, &mut host).unwrap();
                    let what = format!("{dst_dtype:?} big_endian {big_endian} src +{src_offset} dst +{dst_offset}");
                    assert_eq!(&host[dst_offset..dst_offset + expect.len()], &expect[..], "{what}");
                    assert!(host[..dst_offset].iter().all(|&b| b == 0x5A), "{what}: bytes before the run");
                    assert!(
                        host[dst_offset + expect.len()..].iter().all(|&b| b == 0x5A),
                        "{what}: bytes after the run"
                    );
                }
            }
        }
    }
}

/// One crop of [`assemble_wide_rows_match_the_reference_at_every_offset`]: a `rows` × `w` crop
/// at column `c0` of a field of `cols` columns (placed `src_pad` bytes into a source buffer that
/// ends with the field), into rows of `w + 3` elements placed `dst_pad` bytes into a destination
/// filled with 0xA5, as two jobs (columns [0, `split`) and [`split`, w)) in one launch.
#[derive(Clone, Copy)]
struct WideCase {
    dtype: Dtype,
    out: Dtype,
    cols: u64,
    rows: u64,
    c0: u64,
    w: u64,
    split: u64,
    src_pad: usize,
    dst_pad: usize,
    big_endian: bool,
    fill: Option<u64>,
    /// Destination rows a multiple of 16 elements apart (so of 16 bytes, and of 8 elements):
    /// every row starts at the same offset in its word and group, and the kernel counts a row's
    /// items from that offset (else for the worst offset) where its threads take more than one
    /// trip (`full`).
    in_step: bool,
    /// The launch shaped as for a full device (one block a job, several items a thread), so
    /// that the job's threads take more than one trip when it has more items than 256.
    full: bool,
}

impl WideCase {
    /// Runs the case; returns the destination buffer and the expected one.
    fn run(&self, device: &Device) -> (Vec<u8>, Vec<u8>) {
        let (sz, osz) = (self.dtype.size(), self.out.size());
        let field_len = (self.rows * self.cols) as usize * sz;
        let mut src_bytes: Vec<u8> = vec![0xEE; self.src_pad];
        src_bytes.extend((0..field_len).map(|i| (i * 37 % 251) as u8 + 1));
        let ow = if self.in_step { (self.w + 3).next_multiple_of(16) } else { self.w + 3 };
        let mut expect = vec![0xA5u8; self.dst_pad + (self.rows * ow) as usize * osz + 5];
        for r in 0..self.rows as usize {
            for c in 0..self.w as usize {
                let s = self.src_pad + (r * self.cols as usize + self.c0 as usize + c) * sz;
                let mut e: Vec<u8> = src_bytes[s..s + sz].to_vec();
                if self.big_endian {
                    e.reverse();
                }
                if self.dtype != self.out {
                    let mut b = [0u8; 8];
                    b[..sz].copy_from_slice(&e);
                    let bits = self.dtype.convert_bits(self.out, u64::from_le_bytes(b));
                    e = bits.to_le_bytes()[..osz].to_vec();
                }
                if let Some(f) = self.fill {
                    e = f.to_le_bytes()[..osz].to_vec();
                }
                let d = self.dst_pad + (r * ow as usize + c) * osz;
                expect[d..d + osz].copy_from_slice(&e);
            }
        }
        let mut src = device.alloc(src_bytes.len()).unwrap();
        device.upload(&src_bytes, &mut src, 0).unwrap();
        let mut dst = device.alloc(expect.len()).unwrap();
        device.upload(&vec![0xA5u8; expect.len()], &mut dst, 0).unwrap();
        let job = |c: u64, w: u64| AssembleJob {
            src_offset: self.src_pad + (self.c0 + c) as usize * sz,
            dst_offset: self.dst_pad + c as usize * osz,
            shape: vec![self.rows, w],
            src_strides: vec![self.cols as i64, 1],
            dst_strides: vec![ow as i64, 1],
            src_dtype: self.dtype,
            dst_dtype: self.out,
            big_endian: self.big_endian,
            fill_bits: self.fill,
        };
        let jobs = [job(0, self.split), job(self.split, self.w - self.split)];
        let mut asm = Assembler::new(device, jobs.len()).unwrap();
        if self.full {
            asm.shape_as_scaled(1 << 20);
        }
        for r in asm.run(&src, &mut dst, &jobs).unwrap() {
            r.unwrap();
        }
        let mut host = vec![0u8; expect.len()];
        device.download(&dst, 0, &mut host).unwrap();
        (host, expect)
    }
}

/// The wide path of assemble (16-byte words for rows without a cast) at the heads and tails of
/// its rows: every element width, source and destination at odd byte offsets (so that the two
/// differ in alignment, and elements are not aligned), rows whose length is no multiple of 16
/// bytes, two jobs meeting inside a 16-byte word, rows that end with the source buffer and the
/// destination's 0xA5 between and around the rows untouched. Fills (aligned: wide; unaligned:
/// the element path), byte swaps and casts (the vector cast path for 1- and 2-byte integers to
/// f32/bf16/f16 and 2-byte swaps, else the element path) in the same harness.
#[test]
fn assemble_wide_rows_match_the_reference_at_every_offset() {
    let device = Device::emulated(0x71DE);
    let mut cases = Vec::new();
    for dtype in [Dtype::U8, Dtype::I16, Dtype::U16, Dtype::F32, Dtype::U64] {
        let sz = dtype.size() as u64;
        let cols = 160 / sz + 3; // rows of 163 .. 184 bytes
        // (c0, w): a crop inside the row, rows just longer than 32 and 64 bytes, and full rows
        // (the field's last bytes end the source buffer)
        for (c0, w) in [(1, 32 / sz + 1), (2, 64 / sz + 3), (0, cols)] {
            for src_pad in [0usize, 1, 7, 15] {
                for dst_pad in [0usize, 1, 6, 13] {
                    let split = w / 2 + 1;
                    let base = WideCase {
                        dtype,
                        out: dtype,
                        cols,
                        rows: 3,
                        c0,
                        w,
                        split,
                        src_pad,
                        dst_pad,
                        big_endian: false,
                        fill: None,
                        in_step: false,
                        full: false,
                    };
                    cases.push(base);
                    // the vector cast path (8 elements per item) at every source and
                    // destination offset, big-endian too
                    if matches!(dtype, Dtype::U8 | Dtype::I16 | Dtype::U16) {
                        for out in [Dtype::F32, Dtype::BF16, Dtype::F16] {
                            cases.push(WideCase { out, ..base });
                            cases.push(WideCase { out, big_endian: true, ..base });
                        }
                    }
                    if dtype == Dtype::U16 {
                        cases.push(WideCase { big_endian: true, ..base });
                    }
                    if src_pad == 0 {
                        cases.push(WideCase { fill: Some(0x1122_3344_5566_7788), ..base });
                        cases.push(WideCase { big_endian: true, ..base });
                        if dtype == Dtype::U8 {
                            cases.push(WideCase { out: Dtype::U16, ..base });
                            cases.push(WideCase { out: Dtype::U64, ..base });
                        }
                    }
                }
            }
        }
    }
    // every case again with enough rows that a job's items outnumber its block's 256 threads in
    // a launch shaped for a full device, rows in step (the kernel counts a row's items from
    // their offset) and not
    let cases: Vec<WideCase> = cases
        .into_iter()
        .flat_map(|c| {
            let full = WideCase { rows: 160, full: true, ..c };
            [c, full, WideCase { in_step: true, ..full }]
        })
        .collect();
    for case in &cases {
        let (got, expect) = case.run(&device);
        if got != expect {
            let at = got.iter().zip(&expect).position(|(a, b)| a != b).unwrap_or(0);
            panic!(
                "{:?} -> {:?} crop at column {} of width {} (split {}) src +{} dst +{} big_endian {} fill {:?} \
                 in step {} full {}: first difference at byte {at} (got {:#04x}, expected {:#04x})",
                case.dtype,
                case.out,
                case.c0,
                case.w,
                case.split,
                case.src_pad,
                case.dst_pad,
                case.big_endian,
                case.fill,
                case.in_step,
                case.full,
                got[at],
                expect[at]
            );
        }
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
        src_dtype: Dtype::F32,
        dst_dtype: Dtype::F16,
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
        src_dtype: Dtype::F32,
        dst_dtype: Dtype::F32,
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

/// The route is decided before anything is decoded: `plan_waves` (host parse only) says how many
/// waves `decode_to_host` runs and whether `decode_wave` takes the chunks, and a batch larger
/// than a wave is `Error::WaveFull`, not `OutOfMemory`.
#[test]
fn plan_waves_decides_the_route_before_decoding() {
    let device = Device::emulated(0);
    let cfg = DecodeConfig::default()
        .with_wave_src_bytes(64 << 10)
        .with_wave_dst_bytes(64 << 10)
        .with_wave_streams(64)
        .with_slots(2)
        .with_device_budget_bytes(8 << 20)
        .with_host_budget_bytes(4 << 20);
    let mut dec = Decoder::new(&device, cfg).unwrap();
    let datas: Vec<Vec<u8>> = (0..5).map(|i| test_data(40_000, (i % 4) as u8, i)).collect();
    let raw: Vec<_> = datas.iter().map(|d| ChunkInput::raw(d)).collect();

    // One chunk fits in a wave.
    let one = dec.plan_waves(&raw[..1]);
    assert_eq!(one.waves, 1);
    assert!(one.fits_in_one_wave());
    assert!(one.rejected.is_empty());
    assert_eq!(one.total.dst_bytes, 40_000);
    assert_eq!(one.capacity.dst_bytes, 64 << 10);

    // Two 40 kB chunks do not share a 64 KiB wave: five need five waves.
    let plan = dec.plan_waves(&raw);
    assert_eq!(plan.waves, 5);
    assert!(!plan.fits_in_one_wave());
    assert_eq!(plan.total.dst_bytes, 5 * 40_000);
    match dec.decode_wave(&raw) {
        Err(Error::WaveFull { chunk: None, needed, capacity }) => {
            assert_eq!(needed.dst_bytes, 5 * 40_000);
            assert_eq!(capacity.dst_bytes, 64 << 10);
        }
        other => panic!("expected WaveFull, got {other:?}"),
    }
    let out = dec.decode_to_host(&raw).unwrap();
    assert_eq!(out.stats.waves, plan.waves);
    for (r, d) in out.chunks.iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }

    // A chunk larger than a wave, a malformed frame and an unsupported codec are rejected up
    // front with the errors a decode reports; the others still plan and decode.
    let big = test_data(100_000, 1, 9);
    // An lz4 frame relabelled as snappy (compressor code 2 in the flags' top bits).
    let mut zlib = blosc_compress(&datas[0], 5, 1, 4, "lz4", 0);
    zlib[2] = (zlib[2] & 0x1f) | (2 << 5);
    let junk = vec![0xffu8; 64];
    let inputs = [ChunkInput::raw(&big), ChunkInput::blosc(&junk), ChunkInput::blosc(&zlib), raw[1]];
    let plan = dec.plan_waves(&inputs);
    assert_eq!(plan.waves, 1);
    let kinds: Vec<(usize, &str)> = plan
        .rejected
        .iter()
        .map(|(i, e)| {
            (
                *i,
                match e {
                    Error::WaveFull { chunk: Some(c), .. } if c == i => "full",
                    Error::Decode { .. } => "decode",
                    Error::Unsupported { .. } => "unsupported",
                    other => panic!("unexpected rejection {other:?}"),
                },
            )
        })
        .collect();
    assert_eq!(kinds, [(0, "full"), (1, "decode"), (2, "unsupported")]);
    assert!(!plan.fits_in_one_wave(), "a chunk larger than a wave never fits");
    let out = dec.decode_to_host(&inputs).unwrap();
    assert!(matches!(out.chunks[0], Err(Error::WaveFull { chunk: Some(0), .. })));
    assert!(matches!(out.chunks[1], Err(Error::Decode { chunk: 1, .. })));
    assert!(matches!(out.chunks[2], Err(Error::Unsupported { chunk: 2, .. })));
    assert_eq!(out.chunks[3].as_ref().unwrap(), &datas[1]);
}

/// `decode_to_host` reads back through pinned bounce buffers in pieces: a wave whose decoded
/// bytes span many pieces (a tiny staging buffer, chunks straddling piece boundaries) comes back
/// intact under shuffled stream timing.
#[test]
fn read_back_in_many_pieces_is_exact() {
    for seed in SEEDS {
        let device = Device::emulated(seed);
        let cfg = DecodeConfig::default()
            .with_wave_src_bytes(4 << 10)
            .with_wave_dst_bytes(256 << 10)
            .with_wave_streams(8)
            .with_slots(2)
            .with_device_budget_bytes(8 << 20)
            .with_host_budget_bytes(4 << 20);
        let mut dec = Decoder::new(&device, cfg).unwrap();
        let datas: Vec<Vec<u8>> = (0..6).map(|i| test_data(30_001 + 17 * i, 1, i as u64)).collect();
        let frames: Vec<Vec<u8>> = datas.iter().map(|d| blosc_compress(d, 9, 1, 1, "lz4", 0)).collect();
        let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::blosc(f)).collect();
        let plan = dec.plan_waves(&inputs);
        assert!(plan.rejected.is_empty(), "{:?}", plan.rejected);
        let out = dec.decode_to_host(&inputs).unwrap();
        assert_eq!(out.stats.waves, plan.waves);
        // Each wave decodes far more bytes than half the ~6 KiB staging buffer holds.
        assert!(plan.total.dst_bytes / plan.waves > 8 << 10, "{plan:?}");
        for (i, (r, d)) in out.chunks.iter().zip(&datas).enumerate() {
            assert_eq!(r.as_ref().unwrap(), d, "chunk {i}, seed {seed}");
        }
    }
}

/// Budget planners read the sizes from the crate rather than copying them.
#[test]
fn footprints_are_published_for_budget_planners() {
    let cfg = DecodeConfig::default().with_wave_streams(1000).with_slots(1);
    // 32-byte stream descriptor, three u32 words and a 32-byte shuffle job per stream.
    assert_eq!(cfg.table_bytes(), 1000 * 76 + 1024);
    assert_eq!(cfg.device_bytes(), cfg.wave_src_bytes + cfg.table_bytes() + 2 * cfg.wave_dst_bytes);
    // A 240-byte job descriptor and a status word per job.
    assert_eq!(damacy_kernels::Assembler::device_bytes(4096), 4096 * 244);
}

unsafe extern "C" {
    fn dmc_emu_dmc_unshuffle(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src_base: *const u8,
        src_total: u64,
        dst_base: *mut u8,
        dst_total: u64,
        jobs: *const [u64; 4],
        n_jobs: u32,
        status: *mut u32,
    ) -> i32;
}

/// Byte unshuffle of `len` bytes with typesize `ts` (leftover bytes stored as they are).
fn unshuffle_reference(src: &[u8], ts: usize) -> Vec<u8> {
    let n = src.len() / ts;
    let mut out = src.to_vec();
    for i in 0..n {
        for b in 0..ts {
            out[i * ts + b] = src[b * n + i];
        }
    }
    out
}

/// Bit unshuffle of `len` bytes with typesize `ts` as blosc does it: with n = len / ts elements a
/// multiple of 8, bit b of byte k of element i is bit i % 8 of byte (8 k + b) n/8 + i/8 (the
/// leftover bytes stored as they are); otherwise the block is stored as it is.
fn bit_unshuffle_reference(src: &[u8], ts: usize) -> Vec<u8> {
    let n = src.len() / ts;
    let mut out = src.to_vec();
    if !n.is_multiple_of(8) {
        return out;
    }
    for i in 0..n {
        for k in 0..ts {
            out[i * ts + k] =
                (0..8).map(|b| ((src[(8 * k + b) * (n / 8) + i / 8] >> (i % 8)) & 1) << b).fold(0, |a, v| a | v);
        }
    }
    out
}

/// Launches `dmc_unshuffle` on one block `data` (mode 1 byte, 2 bit) placed `src_mis` bytes into
/// a source buffer of exactly its size (under ASan a read past it fails), into a destination
/// with a u64 backing (8-byte aligned) at `dst_mis`; returns the block's bytes and whether the
/// zeros around it stayed.
/// The job runs on a grid of `parts` blocks (grid.y): every part takes its tiles and its share
/// of the copies.
fn launch_unshuffle_parts(
    data: &[u8],
    ts: usize,
    mode: u64,
    src_mis: usize,
    dst_mis: usize,
    sched: u64,
    parts: u32,
) -> (Vec<u8>, bool) {
    let len = data.len();
    let mut src = vec![0u8; src_mis + len];
    src[src_mis..].copy_from_slice(data);
    let mut dst_buf = vec![0u64; (len + dst_mis) / 8 + 2];
    // SAFETY: the u64 vector is viewed as its bytes, which it owns.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst_buf.as_mut_ptr().cast::<u8>(), dst_buf.len() * 8) };
    // struct dmc_shuffle_job: src_off, dst_off, {len, typesize}, {mode, stream}
    let job = [src_mis as u64, dst_mis as u64, len as u64 | (ts as u64) << 32, mode];
    let mut status = [0u32; 1];
    // SAFETY: the job's ranges lie inside the buffers (sizes passed as the totals).
    let rc = unsafe {
        dmc_emu_dmc_unshuffle(
            1,
            parts,
            256,
            sched,
            src.as_ptr(),
            src.len() as u64,
            dst.as_mut_ptr(),
            dst.len() as u64,
            &raw const job,
            1,
            status.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "launch failed");
    assert_eq!(status[0], 0, "status");
    let outside = dst[..dst_mis].iter().chain(&dst[dst_mis + len..]).all(|&b| b == 0);
    (dst[dst_mis..dst_mis + len].to_vec(), outside)
}

/// Blocks of whole 16-element tiles (the 16-byte load phase and, for typesizes 2 and 4, the
/// 16-byte permute stores) split over 1 to 9 parts, byte and bit mode, at aligned and unaligned
/// destinations: equal to the reference.
#[test]
fn unshuffle_of_aligned_blocks_split_over_parts_matches_reference() {
    for (i, &(ts, len)) in
        [(2usize, 65_536usize), (4, 65_536), (8, 40_960), (2, 16_384 + 32), (4, 48_000), (3, 30_000)].iter().enumerate()
    {
        let data = test_data(len, 0, i as u64 + 11);
        for parts in [1u32, 2, 5, 9] {
            for dst_mis in [0usize, 8, 3] {
                let (got, outside) = launch_unshuffle_parts(&data, ts, 1, 0, dst_mis, 0, parts);
                assert!(got == unshuffle_reference(&data, ts), "byte ts {ts} len {len} parts {parts} dst+{dst_mis}");
                assert!(outside, "byte ts {ts} len {len} parts {parts}: wrote outside the block");
                let (got, outside) = launch_unshuffle_parts(&data, ts, 2, 0, dst_mis, 0, parts);
                assert!(got == bit_unshuffle_reference(&data, ts), "bit ts {ts} len {len} parts {parts} dst+{dst_mis}");
                assert!(outside, "bit ts {ts} len {len} parts {parts}: wrote outside the block");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// `dmc_unshuffle` in byte mode, launched directly: every path of the shared-memory tile
    /// (ts 2/4/8 with 8-byte stores, the generic word path, byte loads when the planes are not
    /// 4-byte aligned, byte stores to an unaligned destination, several tiles per block, the
    /// gather for typesizes too large for a tile) equals the reference, under both schedules.
    #[test]
    fn byte_unshuffle_kernel_matches_reference(
        ts in prop::sample::select(vec![1usize, 2, 3, 4, 5, 8, 12, 16, 17, 255, 2000]),
        len in 0usize..40_000,
        src_mis in 0usize..8,
        dst_mis in 0usize..8,
        seed in any::<u64>(),
    ) {
        let data = test_data(len, 0, seed);
        let want = unshuffle_reference(&data, ts);
        let src_mis = if seed & 1 == 0 { 0 } else { src_mis };
        let dst_mis = if seed & 2 == 0 { 0 } else { dst_mis };
        let sched = if seed & 4 == 0 { 0 } else { seed | 1 };
        let parts = 1 + ((seed >> 8) % 4) as u32;
        let (got, outside) = launch_unshuffle_parts(&data, ts, 1, src_mis, dst_mis, sched, parts);
        prop_assert!(got == want, "ts {} len {} src+{} dst+{} parts {}", ts, len, src_mis, dst_mis, parts);
        prop_assert!(outside, "wrote outside the block");
    }

    /// `dmc_unshuffle` in bit mode, launched directly: the bit transpose into the shared tile
    /// (element counts a multiple of 8: whole and partial 32-element groups, bit rows at every
    /// alignment, several tiles, padded generic rows, the gather for huge typesizes) and the
    /// 16-byte block copy (other counts, leftover bytes) at every source and destination
    /// misalignment equal blosc's bit unshuffle, under both schedules.
    #[test]
    fn bit_unshuffle_kernel_matches_reference(
        ts in prop::sample::select(vec![1usize, 2, 3, 4, 5, 8, 12, 16, 17, 600, 2000]),
        elems in 0usize..6_000,
        extra in 0usize..8,
        src_mis in 0usize..16,
        dst_mis in 0usize..16,
        seed in any::<u64>(),
    ) {
        let elems = elems.min(120_000 / ts);
        let elems = if seed & 8 == 0 { elems & !7 } else { elems };
        let len = elems * ts + extra % ts;
        let data = test_data(len, 0, seed);
        let want = bit_unshuffle_reference(&data, ts);
        let sched = if seed & 4 == 0 { 0 } else { seed | 1 };
        let parts = 1 + ((seed >> 8) % 4) as u32;
        let (got, outside) = launch_unshuffle_parts(&data, ts, 2, src_mis, dst_mis, sched, parts);
        prop_assert!(got == want, "ts {} len {} src+{} dst+{} parts {}", ts, len, src_mis, dst_mis, parts);
        prop_assert!(outside, "wrote outside the block");
    }
}

unsafe extern "C" {
    fn dmc_emu_dmc_lz4_decode(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src_base: *const u8,
        src_total: u64,
        dst_base: *mut u8,
        dst_total: u64,
        streams: *const [u64; 4],
        ids: *const u32,
        n_ids: u32,
        status: *mut u32,
        actual: *mut u32,
    ) -> i32;
    fn dmc_emu_dmc_blosclz_decode(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src_base: *const u8,
        src_total: u64,
        dst_base: *mut u8,
        dst_total: u64,
        streams: *const [u64; 4],
        ids: *const u32,
        n_ids: u32,
        status: *mut u32,
        actual: *mut u32,
    ) -> i32;
}

/// The kernels' status codes (kernels/common.cuh, generated into `damacy_kernels::consts`).
use damacy_kernels::consts::{
    DMC_STATUS_BAD_OFFSET as ST_BAD_OFFSET, DMC_STATUS_DST_OVERFLOW as ST_OVERFLOW, DMC_STATUS_OK as ST_OK,
    DMC_STATUS_SIZE_MISMATCH as ST_SIZE_MISMATCH, DMC_STATUS_SRC_TRUNCATED as ST_TRUNCATED,
};

/// What a decoder reports for one stream: status, bytes written, and those bytes.
type Decoded = (u32, usize, Vec<u8>);

/// Launches `kernel` on one stream `src` placed `src_mis` bytes into a source buffer of exactly
/// `src_mis + src.len()` bytes (under ASan a read past the stream fails), decoding into the last
/// `dst_len` bytes of a destination of `dst_mis + dst_len` bytes (the 16-byte match copies align
/// to the output's addresses, not the stream's positions); the `dst_mis` bytes before the stream
/// must stay as they were.
fn launch_lz_kernel(lz4: bool, src: &[u8], src_mis: usize, dst_mis: usize, dst_len: usize, sched: u64) -> Decoded {
    let mut buf = vec![0u8; src_mis + src.len()];
    buf[src_mis..].copy_from_slice(src);
    let mut dst = vec![0xa5u8; dst_mis + dst_len];
    // struct dmc_stream: src_off, dst_off, {src_len, dst_len}, {codec, flags}
    let stream = [src_mis as u64, dst_mis as u64, src.len() as u64 | (dst_len as u64) << 32, 0];
    let ids = [0u32];
    let (mut status, mut actual) = ([255u32], [0u32]);
    let f = if lz4 { dmc_emu_dmc_lz4_decode } else { dmc_emu_dmc_blosclz_decode };
    // SAFETY: the stream's ranges lie inside the buffers (their sizes passed as the totals); one
    // id, one status and one actual slot.
    let rc = unsafe {
        f(
            1,
            1,
            128,
            sched,
            buf.as_ptr(),
            buf.len() as u64,
            dst.as_mut_ptr(),
            dst.len() as u64,
            &raw const stream,
            ids.as_ptr(),
            1,
            status.as_mut_ptr(),
            actual.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "launch failed");
    assert!(dst[..dst_mis].iter().all(|&b| b == 0xa5), "a write before the stream's output");
    let n = actual[0] as usize;
    let mut dst = dst.split_off(dst_mis);
    dst.truncate(n);
    (status[0], n, dst)
}

/// Appends the bytes of an LZ4 length extension for `n` (a length minus 15).
fn push_lz4_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 255 {
        out.push(255);
        n -= 255;
    }
    out.push(n as u8);
}

/// An LZ4 block from (literals, offset, match length) sequences and the final literals.
fn lz4_encode(seqs: &[(Vec<u8>, u16, usize)], last: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let lits = |out: &mut Vec<u8>, lit: &[u8], m: usize| {
        out.push((lit.len().min(15) as u8) << 4 | m.min(15) as u8);
        if lit.len() >= 15 {
            push_lz4_len(out, lit.len() - 15);
        }
        out.extend_from_slice(lit);
    };
    for (lit, offset, mlen) in seqs {
        lits(&mut out, lit, mlen - 4);
        out.extend_from_slice(&offset.to_le_bytes());
        if mlen - 4 >= 15 {
            push_lz4_len(&mut out, mlen - 4 - 15);
        }
    }
    lits(&mut out, last, 0);
    out
}

/// One LZ77 sequence: its literals, the match distance and the match length.
type Sequence = (Vec<u8>, usize, usize);

/// A sequential LZ4 block decoder with the kernel's error rules (status, bytes written).
fn lz4_reference(src: &[u8], dst_len: usize) -> Decoded {
    fn ext(src: &[u8], ip: &mut usize, len: &mut usize) -> bool {
        loop {
            let Some(&b) = src.get(*ip) else { return false };
            *ip += 1;
            *len += usize::from(b);
            if *len > 0x7fff_ffff {
                return false;
            }
            if b != 255 {
                return true;
            }
        }
    }
    let mut out = Vec::new();
    let mut ip = 0;
    let st = loop {
        let Some(&token) = src.get(ip) else { break ST_TRUNCATED };
        ip += 1;
        let mut lit = usize::from(token >> 4);
        if lit == 15 && !ext(src, &mut ip, &mut lit) {
            break ST_TRUNCATED;
        }
        if lit > src.len() - ip {
            break ST_TRUNCATED;
        }
        if lit > dst_len - out.len() {
            break ST_OVERFLOW;
        }
        out.extend_from_slice(&src[ip..ip + lit]);
        ip += lit;
        if ip == src.len() {
            break ST_OK;
        }
        if src.len() - ip < 2 {
            break ST_TRUNCATED;
        }
        let offset = usize::from(u16::from_le_bytes([src[ip], src[ip + 1]]));
        ip += 2;
        let mut mlen = usize::from(token & 15);
        if mlen == 15 && !ext(src, &mut ip, &mut mlen) {
            break ST_TRUNCATED;
        }
        mlen += 4;
        if offset == 0 || offset > out.len() {
            break ST_BAD_OFFSET;
        }
        if mlen > dst_len - out.len() {
            break ST_OVERFLOW;
        }
        for _ in 0..mlen {
            out.push(out[out.len() - offset]);
        }
    };
    let st = if st == ST_OK && out.len() != dst_len { ST_SIZE_MISMATCH } else { st };
    (st, out.len(), out)
}

/// A BloscLZ stream from (literals, distance, match length) sequences and the final literals
/// (literal runs of at most 32 bytes; distances past 8191 use the far form).
fn blosclz_encode(seqs: &[Sequence], last: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let lits = |out: &mut Vec<u8>, lit: &[u8]| {
        for run in lit.chunks(32) {
            out.push(run.len() as u8 - 1);
            out.extend_from_slice(run);
        }
    };
    for (lit, dist, len) in seqs {
        lits(&mut out, lit);
        let d = dist - 1;
        let (hi, code) = if d < 8191 { ((d >> 8) as u8, (d & 255) as u8) } else { (31, 255) };
        if *len <= 8 {
            out.push(((len - 2) as u8) << 5 | hi);
        } else {
            out.push(7 << 5 | hi);
            let mut n = len - 9;
            while n >= 255 {
                out.push(255);
                n -= 255;
            }
            out.push(n as u8);
        }
        out.push(code);
        if d >= 8191 {
            out.extend_from_slice(&((dist - 8192) as u16).to_be_bytes());
        }
    }
    lits(&mut out, last);
    out
}

/// A sequential BloscLZ decoder with the kernel's error rules (status, bytes written).
fn blosclz_reference(src: &[u8], dst_len: usize) -> Decoded {
    let n = src.len();
    let mut out: Vec<u8> = Vec::new();
    let mut st = ST_OK;
    if n > 0 {
        let mut ctrl = usize::from(src[0] & 31);
        let mut ip = 1;
        loop {
            if ctrl >= 32 {
                let mut len = (ctrl >> 5) - 1;
                let mut ofs = (ctrl & 31) << 8;
                if len == 6 {
                    loop {
                        if ip + 1 >= n {
                            st = ST_TRUNCATED;
                            break;
                        }
                        let code = usize::from(src[ip]);
                        ip += 1;
                        len += code;
                        if !(code == 255 && len < 0x7fff_ffff) {
                            break;
                        }
                    }
                    if st != ST_OK {
                        break;
                    }
                } else if ip + 1 >= n {
                    st = ST_TRUNCATED;
                    break;
                }
                let code = usize::from(src[ip]);
                ip += 1;
                len += 3;
                let mut dist = ofs + code + 1;
                if code == 255 && ofs == 31 << 8 {
                    if ip + 1 >= n {
                        st = ST_TRUNCATED;
                        break;
                    }
                    ofs = usize::from(src[ip]) << 8 | usize::from(src[ip + 1]);
                    ip += 2;
                    dist = ofs + 8191 + 1;
                }
                if len > dst_len - out.len() {
                    st = ST_OVERFLOW;
                    break;
                }
                if dist > out.len() {
                    st = ST_BAD_OFFSET;
                    break;
                }
                if ip >= n {
                    break;
                }
                ctrl = usize::from(src[ip]);
                ip += 1;
                for _ in 0..len {
                    out.push(out[out.len() - dist]);
                }
            } else {
                let run = ctrl + 1;
                if run > dst_len - out.len() {
                    st = ST_OVERFLOW;
                    break;
                }
                if run > n - ip {
                    st = ST_TRUNCATED;
                    break;
                }
                out.extend_from_slice(&src[ip..ip + run]);
                ip += run;
                if ip >= n {
                    break;
                }
                ctrl = usize::from(src[ip]);
                ip += 1;
            }
        }
    }
    let st = if st == ST_OK && out.len() != dst_len { ST_SIZE_MISMATCH } else { st };
    (st, out.len(), out)
}

/// Long matches whose source starts within the first 16 bytes of the stream's output, at every
/// alignment of the output: the 16-byte match copy's first aligned load would begin before the
/// stream (another stream's output) and must read single bytes there instead. Distances on both
/// sides of the pattern copy's limit (128) and of the 16-byte rounds' sizes, lengths on both
/// sides of the wide copy's threshold (64), literal runs on both sides of 96; runs of several
/// 512-byte rounds at power-of-two distances (each lane's 16 bytes the same every round) and at
/// others (built again every round).
#[test]
fn lz_wide_copies_at_the_start_of_an_unaligned_output() {
    for dst_mis in 0..16 {
        for (lit_len, dist, mlen) in [
            (130, 130, 300),
            (140, 129, 1000),
            (127, 127, 700),
            (600, 513, 2000),
            (96, 96, 64),
            (95, 17, 63),
            (5, 1, 1500),
            (9, 2, 1300),
            (70, 4, 1100),
            (100, 64, 1200),
            (3, 3, 900),
            (120, 100, 1700),
        ] {
            let lit: Vec<u8> = (0..lit_len).map(|i| (i * 7 + dst_mis) as u8).collect();
            let last: Vec<u8> = (0..40u8).collect();
            let seqs = vec![(lit.clone(), dist, mlen)];
            let block = lz4_encode(&[(lit, dist as u16, mlen)], &last);
            let want = lz4_reference(&block, lit_len + mlen + last.len());
            assert_eq!(want.0, ST_OK);
            assert_eq!(launch_lz_kernel(true, &block, 0, dst_mis, want.1, 0), want, "lz4 at {dst_mis}");
            let stream = blosclz_encode(&seqs, &last);
            let want = blosclz_reference(&stream, lit_len + mlen + last.len());
            assert_eq!(want.0, ST_OK);
            assert_eq!(launch_lz_kernel(false, &stream, 1, dst_mis, want.1, 0), want, "blosclz at {dst_mis}");
        }
    }
}

/// A xorshift generator of numbers below its argument, for the sequence generators.
fn below(seed: u64) -> impl FnMut(usize) -> usize {
    let mut x = seed | 1;
    move |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    }
}

/// Random sequences for the LZ/BloscLZ generators: literal runs around the window's 128 bytes
/// and its refill points, matches with distances 1..=16 (overlapping any copy width), near (to
/// 200: the pattern copies), around the 16-byte rounds' sizes (to 1100) and far, lengths with
/// long extensions. Distances never exceed the output so far.
fn random_sequences(seed: u64, n_seq: usize, max_dist: usize) -> (Vec<Sequence>, Vec<u8>) {
    let mut next = below(seed);
    let mut seqs = Vec::new();
    let mut op = 0usize;
    for _ in 0..n_seq {
        let lit_len = match next(6) {
            0 => 0,
            1 => next(16),
            2 => 14 + next(4),
            3 => 120 + next(20),
            4 => 250 + next(300),
            _ => next(64),
        };
        let lit: Vec<u8> = (0..lit_len).map(|_| next(256) as u8).collect();
        op += lit.len();
        if op == 0 {
            seqs.push((lit, 0, 0));
            continue;
        }
        let dist = match next(5) {
            0 | 1 => 1 + next(16.min(op)),
            2 => 1 + next(op.min(200)),
            3 => 1 + next(op.min(1100)),
            _ => 1 + next(op.min(max_dist)),
        };
        let len = match next(4) {
            0 => 4 + next(8),
            1 => 16 + next(40),
            2 => 260 + next(600),
            _ => 4 + next(128),
        };
        op += len;
        seqs.push((lit, dist, len));
    }
    // a first sequence with no output before it carries no match: fold its literals forward
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for (lit, dist, len) in seqs {
        pending.extend(lit);
        if dist > 0 {
            out.push((std::mem::take(&mut pending), dist, len));
        }
    }
    let last_len = 1 + next(200);
    pending.extend((0..last_len).map(|_| next(256) as u8));
    (out, pending)
}

/// Runs of short sequences, as in microscopy chunks (the decoders' batches): literal runs of
/// 0 to 40 bytes, matches of 4 to 63 bytes at distances 1..=8 (overlapping), inside the last 64
/// bytes (inside a batch) or far, and now and then a long match or literal run that ends a
/// batch. Distances never exceed the output so far.
fn short_sequences(seed: u64, n_seq: usize, max_dist: usize) -> (Vec<Sequence>, Vec<u8>) {
    let mut next = below(seed);
    let mut seqs = Vec::new();
    let mut op = 0usize;
    for _ in 0..n_seq {
        let lit_len = match next(8) {
            0..=2 => 0,
            3..=5 => 1 + next(8),
            6 => 8 + next(33),
            _ if next(4) == 0 => 90 + next(40),
            _ => 1 + next(3),
        };
        let lit: Vec<u8> = (0..lit_len).map(|_| next(256) as u8).collect();
        op += lit.len();
        if op == 0 {
            continue;
        }
        let dist = match next(4) {
            0 => 1 + next(8.min(op)),
            1 | 2 => 1 + next(op.min(64)),
            _ => 1 + next(op.min(max_dist)),
        };
        let len = if next(16) == 0 { 64 + next(200) } else { 4 + next(60) };
        op += len;
        seqs.push((lit, dist, len));
    }
    let last_len = 1 + next(40);
    let last = (0..last_len).map(|_| next(256) as u8).collect();
    (seqs, last)
}

/// Runs, as in a label image's LZ4 streams (compressed 8 times or more: `dmc_lz4_decode`'s
/// batches that end at a long match): mostly no literals, short matches at distance 1 or 2 or
/// farther, and long matches of 64 bytes to ~4 KiB (one to 16 length-extension bytes: up to four
/// read in a batch, more the single way), at distances up to 65,535.
fn run_sequences(seed: u64, n_seq: usize) -> (Vec<Sequence>, Vec<u8>) {
    let mut next = below(seed);
    let mut seqs = Vec::new();
    let mut op = 0usize;
    for i in 0..n_seq {
        let lit_len = if i == 0 {
            1 + next(4)
        } else if next(8) == 0 {
            1 + next(20)
        } else {
            0
        };
        let lit: Vec<u8> = (0..lit_len).map(|_| next(256) as u8).collect();
        op += lit.len();
        let far = op.min(65_535);
        let dist = match next(4) {
            0 | 1 => 1 + next(2.min(far)),
            2 => 1 + next(far.min(64)),
            _ => 1 + next(far),
        };
        // every fourth match is a long one, so that any four sequences in a row expand
        // at least 8 times (the runs mode's threshold) whatever the other draws
        let class = if i % 4 == 0 { 7 } else { next(8) };
        let len = match class {
            0..=2 => 4 + next(12),
            3..=6 => 64 + next(1100),
            _ => 1100 + next(3000),
        };
        op += len;
        seqs.push((lit, dist, len));
    }
    let last_len = 1 + next(8);
    let last = (0..last_len).map(|_| next(256) as u8).collect();
    (seqs, last)
}

/// A damaged copy of `s`: cut short, a byte flipped, or as it is.
fn damage(s: &[u8], how: u8, at: usize, v: u8) -> Vec<u8> {
    let mut s = s.to_vec();
    if s.is_empty() {
        return s;
    }
    match how {
        0 => s.truncate(at % s.len()),
        1 => {
            let i = at % s.len();
            s[i] ^= v | 1;
        }
        _ => {}
    }
    s
}

/// One generated LZ4 block (`lz4`) or BloscLZ stream, damaged by `how`/`at`/`v` (see
/// [`damage`]) and decoded into its full size plus `size_delta` by the kernel launched
/// directly at the given misalignments, under a fixed (seed bit 3 clear) or shuffled schedule:
/// its status, bytes written and their values must equal the sequential reference's.
#[allow(clippy::too_many_arguments)]
fn lz_kernel_agrees(
    lz4: bool,
    enc: &[u8],
    how: u8,
    at: usize,
    v: u8,
    size_delta: i64,
    src_mis: usize,
    dst_mis: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let reference = if lz4 { lz4_reference } else { blosclz_reference };
    let (_, full, _) = reference(enc, usize::MAX / 2);
    let src = damage(enc, how, at, v);
    let dst_len = (full as i64 + size_delta).max(0) as usize;
    let want = reference(&src, dst_len);
    if how == 3 && size_delta == 0 {
        prop_assert_eq!(want.0, ST_OK);
    }
    let sched = if seed & 8 == 0 { 0 } else { seed | 1 };
    prop_assert_eq!(launch_lz_kernel(lz4, &src, src_mis, dst_mis, dst_len, sched), want, "lz4 {}", lz4);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// `dmc_lz4_decode` launched directly on generated blocks (long literals across the input
    /// window's end, matches with offsets 1..16 and longer, long length extensions), placed at
    /// every misalignment of input and output, intact or cut or with a flipped byte, with an exact or a wrong output
    /// size: status, bytes written and their values equal the sequential reference's, under
    /// fixed and shuffled schedules.
    #[test]
    fn lz4_kernel_matches_reference_on_generated_blocks(
        seed in any::<u64>(),
        n_seq in 1usize..40,
        src_mis in 0usize..4,
        dst_mis in 0usize..16,
        how in 0u8..4,
        at in any::<usize>(),
        v in any::<u8>(),
        size_delta in prop::sample::select(vec![0i64, 0, 0, -1, 1, -100]),
    ) {
        let (seqs, last) = random_sequences(seed, n_seq, 65_535);
        let seqs: Vec<_> = seqs.into_iter().map(|(l, d, m)| (l, d as u16, m)).collect();
        let block = lz4_encode(&seqs, &last);
        lz_kernel_agrees(true, &block, how, at, v, size_delta, src_mis, dst_mis, seed)?;
    }

    /// `dmc_blosclz_decode` the same way: literal runs, near, far (past 8191) and overlapping
    /// matches with long extensions, every misalignment of input and output, damaged copies, wrong output sizes.
    #[test]
    fn blosclz_kernel_matches_reference_on_generated_streams(
        seed in any::<u64>(),
        n_seq in 1usize..40,
        src_mis in 0usize..4,
        dst_mis in 0usize..16,
        how in 0u8..4,
        at in any::<usize>(),
        v in any::<u8>(),
        size_delta in prop::sample::select(vec![0i64, 0, 0, -1, 1, -100]),
    ) {
        let (seqs, last) = random_sequences(seed, n_seq, 8191 + 65_535);
        let stream = blosclz_encode(&seqs, &last);
        lz_kernel_agrees(false, &stream, how, at, v, size_delta, src_mis, dst_mis, seed)?;
    }

    /// `dmc_lz4_decode` on label-image runs (streams compressed 8 times or more: its batches
    /// end at a long match, whose literals are the batch's last and whose match is copied right
    /// after it; longer extensions and corrupt ones the single way), intact, cut or with a
    /// flipped byte, with an exact or a wrong output size, every misalignment: equal to the
    /// sequential reference under fixed and shuffled schedules.
    #[test]
    fn lz4_kernel_matches_reference_on_label_runs(
        seed in any::<u64>(),
        n_seq in 4usize..200,
        src_mis in 0usize..4,
        dst_mis in 0usize..16,
        how in 0u8..4,
        at in any::<usize>(),
        v in any::<u8>(),
        size_delta in prop::sample::select(vec![0i64, 0, 0, -1, 1, -100]),
    ) {
        let (seqs, last) = run_sequences(seed, n_seq);
        let seqs: Vec<_> = seqs.into_iter().map(|(l, d, m)| (l, d as u16, m)).collect();
        let block = lz4_encode(&seqs, &last);
        let (_, full, _) = lz4_reference(&block, usize::MAX / 2);
        // the kernel's runs mode (a ratio of 8 or more) is the one under test
        prop_assert!(full >= 8 * block.len(), "{} bytes from {}", full, block.len());
        lz_kernel_agrees(true, &block, how, at, v, size_delta, src_mis, dst_mis, seed)?;
    }

    /// Both decoders on runs of short sequences (their batches of up to 32 tokens, rounds of 32
    /// bytes whose match bytes come from earlier rounds or from lower lanes of the same round),
    /// intact, cut or with a flipped byte, with an exact or a wrong output size: equal to the
    /// sequential references under fixed and shuffled schedules.
    #[test]
    fn lz_kernels_match_reference_on_short_sequence_runs(
        seed in any::<u64>(),
        n_seq in 1usize..300,
        src_mis in 0usize..4,
        dst_mis in 0usize..16,
        how in 0u8..4,
        at in any::<usize>(),
        v in any::<u8>(),
        size_delta in prop::sample::select(vec![0i64, 0, 0, -1, 1, -100]),
    ) {
        let (seqs, last) = short_sequences(seed, n_seq, 9000);
        let lz4_seqs: Vec<_> = seqs.iter().map(|(l, d, m)| (l.clone(), *d as u16, *m)).collect();
        let block = lz4_encode(&lz4_seqs, &last);
        let stream = blosclz_encode(&seqs, &last);
        for (lz4, enc) in [(true, &block), (false, &stream)] {
            lz_kernel_agrees(lz4, enc, how, at, v, size_delta, src_mis, dst_mis, seed)?;
        }
    }
}

/// `dmc_lz4_decode`'s batches (each window byte parsed as a candidate sequence, then the chain
/// of real ones followed) stop exactly where the sequential parse says the stream goes wrong:
/// short-sequence blocks cut at every byte (a sequence's literals, offset or length extension
/// byte cut off), at every misalignment; the same blocks with the farthest valid match distances
/// (the whole output so far), and with one of them a byte farther (a bad offset: the first, a
/// middle or the last sequence of a batch), decoded into the intact block's size; and output
/// sizes one off. Status, bytes written and their values equal the reference's under
/// fixed and shuffled schedules.
#[test]
fn lz4_batches_stop_where_the_sequential_parse_does() {
    for seed in 0..4u64 {
        let (seqs, last) = short_sequences(seed * 7 + 1, 40, 9000);
        let lz4_seqs: Vec<_> = seqs.iter().map(|(l, d, m)| (l.clone(), *d as u16, *m)).collect();
        let block = lz4_encode(&lz4_seqs, &last);
        for cut in 0..block.len() {
            let mis = (cut + seed as usize) % 4;
            lz_kernel_agrees(true, &block, 0, cut, 0, 0, mis, (cut * 5) % 16, seed << 4 | (cut as u64 & 8)).unwrap();
        }
        for delta in [-1i64, 1] {
            lz_kernel_agrees(true, &block, 3, 0, 0, delta, seed as usize % 4, 3, seed | 8).unwrap();
        }
        // Every distance the farthest it may be: the whole output before the match.
        let mut far = Vec::new();
        let mut op = 0usize;
        for (lit, _, len) in &seqs {
            op += lit.len();
            if op == 0 || op >= 65_535 {
                break;
            }
            far.push((lit.clone(), op as u16, *len));
            op += len;
        }
        let block = lz4_encode(&far, &last);
        lz_kernel_agrees(true, &block, 3, 0, 0, 0, 1, 7, seed | 8).unwrap();
        let whole = lz4_reference(&block, usize::MAX / 2).1;
        for i in 0..far.len() {
            let mut bad = far.clone();
            bad[i].1 += 1;
            let block = lz4_encode(&bad, &last);
            let (st, upto, _) = lz4_reference(&block, usize::MAX / 2);
            assert_eq!(st, ST_BAD_OFFSET, "sequence {i}: a distance one too far");
            // decoded into the intact block's whole size: room for the bad sequence's match
            let delta = whole as i64 - upto as i64;
            lz_kernel_agrees(true, &block, 2, 0, 0, delta, i % 4, i % 16, (seed << 4) | (i as u64 & 8)).unwrap();
        }
    }
}

/// `dmc_lz4_decode` reads match bytes from its warp's ring of the latest output (a
/// `dmc_ring`, `DMC_LZ_RING` bytes of shared memory) only while the ring still holds them:
/// matches at distances on both sides of each read rule's edge (a short match's
/// `DMC_LZ_RING - DMC_LZ_WIDE_MATCH`, in a batch and alone; a batch byte's `DMC_LZ_RING - 32`
/// before its round; a long match's head and tail at `DMC_LZ_RING - 16`, its rounds' vectors at
/// `DMC_LZ_RING - 512`; the ring size itself), long matches whose tails land in the ring before
/// their bodies would, patterns whose copies wrap the ring several times or end more than a
/// ring after their source and literal runs of 300 bytes (the 16-byte copy), in a block decoded
/// in runs mode (a ratio of 8 or more: the
/// mode that keeps a ring) and the same edges in one decoded by batches (no ring), at every
/// output misalignment (the ring's slots follow the output's addresses) and two input ones,
/// under fixed and shuffled schedules: equal to the sequential reference (random literals: a
/// byte read from a slot a later one reused, or a copy that leaves an older byte in a slot,
/// gives a wrong byte). The rules are sufficient, not all tight: a read of the ring and the
/// writes of the same round are ordered by the collectives between them. Under TSan
/// (`make kernel-tsan`) it also checks the `__syncwarp`s that order one lane's ring accesses
/// before another lane's write of the same slot (a literal copy's first, a pattern's after its
/// load when the match ends more than a ring after its source).
#[test]
fn lz4_ring_reads_stay_within_the_bytes_it_holds() {
    use damacy_kernels::consts::{DMC_LZ_RING as RING, DMC_LZ_WIDE_MATCH as WIDE};
    let (ring, wide) = (RING as usize, WIDE as usize);
    let mut next = below(0x5eed);
    let mut lits = |n: usize| -> Vec<u8> { (0..n).map(|_| next(256) as u8).collect() };
    // (literals before the match, distance, match length)
    let mut edges: Vec<(usize, usize, usize)> = Vec::new();
    for d in [ring - wide - 1, ring - wide, ring - wide + 1, ring - 33, ring - 32, ring - 31, ring - 1, ring, ring + 1]
    {
        edges.push((1, d, 20)); // short: in a batch
        edges.push((0, d, wide - 1));
        edges.push((300, d, 40)); // short, alone (after literals too long for a batch)
    }
    for (d, len) in [(ring - 17, 700), (ring - 16, 700), (ring - 15, 700), (200, ring), (1000, 2 * ring + 9)] {
        edges.push((2, d, len)); // a long match's head and tail; its tail past a ring's length
    }
    for d in [ring - 513, ring - 512, ring - 511, ring - 496, ring - 16, ring, ring + 5] {
        edges.push((3, d, 700)); // rounds of 16-byte vectors
    }
    for d in [ring - 516, ring - 512] {
        edges.push((3, d, 1000)); // two full rounds of 496 bytes, then the tail
    }
    for (d, len) in [(1, 9000), (2, 2 * ring + 3), (4, ring + 77), (3, 5000), (100, 3 * ring), (127, ring + 1)] {
        edges.push((1, d, len)); // patterns whose copy wraps the ring
    }
    for (d, len) in [(100, ring - 50), (3, ring - 1), (4, ring - 2)] {
        edges.push((1, d, len)); // patterns that end past a ring from their source, not past a ring from their start
    }
    for (lit_first, runs) in [(12_000usize, false), (300, true)] {
        let mut seqs: Vec<(Vec<u8>, u16, usize)> = vec![(lits(lit_first), 1, 5000 - lit_first.min(4000))];
        let mut op = lit_first + seqs[0].2;
        for &(l, d, len) in &edges {
            op += l;
            let d = d.min(op);
            seqs.push((lits(l), d as u16, len));
            op += len;
        }
        let block = lz4_encode(&seqs, &lits(7));
        let full = lz4_reference(&block, usize::MAX / 2).1;
        let want = lz4_reference(&block, full);
        assert_eq!(want.0, ST_OK);
        assert_eq!(want.1 >= 8 * block.len(), runs, "{} bytes from {}: runs mode {runs}", want.1, block.len());
        for dst_mis in 0..16 {
            for (src_mis, sched) in [(0, 0u64), (3, 0x9e37 | 1)] {
                let got = launch_lz_kernel(true, &block, src_mis, dst_mis, want.1, sched ^ dst_mis as u64);
                assert!(got == want, "runs {runs} dst+{dst_mis} src+{src_mis}: status {} bytes {}", got.0, got.1);
            }
        }
    }
}

/// Raw chunks without a checksum go straight from the upload into the output, with no kernel:
/// a wave of them launches nothing, a wave mixing them with other chunks launches only for the
/// others, and every chunk comes back whole, whatever the order of the chunks.
#[test]
fn raw_chunks_are_copied_straight_into_the_output() {
    let device = Device::emulated(0);
    let cfg = DecodeConfig::default()
        .with_wave_src_bytes(256 << 10)
        .with_wave_dst_bytes(256 << 10)
        .with_wave_streams(64)
        .with_slots(2)
        .with_device_budget_bytes(8 << 20)
        .with_host_budget_bytes(4 << 20);
    let mut dec = Decoder::new(&device, cfg).unwrap();
    let datas: Vec<Vec<u8>> = (0..6).map(|i| test_data(1000 + 3333 * i, (i % 4) as u8, i as u64)).collect();
    let raw: Vec<_> = datas.iter().map(|d| ChunkInput::raw(d)).collect();
    let out = dec.decode_to_host(&raw).unwrap();
    assert_eq!(out.stats.launches, 0, "{:?}", out.stats);
    assert_eq!(out.stats.streams[2], raw.len());
    assert_eq!(out.stats.bytes_direct, out.stats.bytes_uploaded);
    for (r, d) in out.chunks.iter().zip(&datas) {
        assert_eq!(r.as_ref().unwrap(), d);
    }
    // Mixed: blosc chunks and checksummed raw chunks between the direct ones, several waves
    // in flight over both slots, and through decode_wave.
    let lz4 = blosc_compress(&datas[3], 5, 1, 4, "lz4", 0);
    let mut with_crc = datas[2].clone();
    with_crc.extend_from_slice(&crc32c::crc32c(&datas[2]).to_le_bytes());
    let mixed = [raw[0], ChunkInput::blosc(&lz4), raw[1], ChunkInput::raw(&with_crc).with_crc32c(), raw[5]];
    let want = [&datas[0], &datas[3], &datas[1], &datas[2], &datas[5]];
    for _ in 0..3 {
        let out = dec.decode_to_host(&mixed).unwrap();
        assert_eq!(out.stats.launches, 4, "lz4, unshuffle, crc32c and one copy: {:?}", out.stats);
        let direct: usize = [0, 1, 5].iter().map(|&i| datas[i].len().div_ceil(16) * 16).sum();
        assert_eq!(out.stats.bytes_direct, direct);
        for (r, d) in out.chunks.iter().zip(want) {
            assert_eq!(r.as_ref().unwrap(), d);
        }
        let wave = dec.decode_wave(&mixed).unwrap();
        let mut bytes = vec![0u8; wave.output.len()];
        device.download(wave.output, 0, &mut bytes).unwrap();
        for (r, d) in wave.chunks.iter().zip(want) {
            assert_eq!(&bytes[r.as_ref().unwrap().clone()], d.as_slice());
        }
    }
}

/// The streaming API on its own streams: a batch scheduled once and queued wave by wave, each
/// wave copied by the assembler on a third stream while the next one uploads, every status read
/// once at the end; a corrupt chunk in the last wave is reported by `finish_batch` with its
/// index, and the other chunks' bytes are right.
#[test]
fn streamed_waves_report_a_corrupt_chunk_of_the_last_wave() {
    let device = Device::emulated(7);
    let cfg = DecodeConfig::default()
        .with_wave_src_bytes(64 << 10)
        .with_wave_dst_bytes(96 << 10)
        .with_wave_streams(256)
        .with_staging_bytes(48 << 10)
        .with_device_budget_bytes(8 << 20)
        .with_host_budget_bytes(4 << 20);
    let compute = device.new_stream().unwrap();
    let mut dec = Decoder::on_stream(&device, cfg, compute.clone(), "test").unwrap();
    let mut asm = damacy_kernels::Assembler::on_stream(&device, 4, device.new_stream().unwrap()).unwrap();
    let mut datas: Vec<Vec<u8>> = (0..12).map(|i| test_data(30_000, (i % 4) as u8, i)).collect();
    let mut frames: Vec<Vec<u8>> = datas.iter().map(|d| blosc_compress(d, 5, 1, 2, "lz4", 0)).collect();
    // The last chunk: an lz4 stream whose first match offset points before the output (the host
    // parse accepts it; the kernel reports it).
    let last = frames.len() - 1;
    let data = test_data(5000, 1, 0);
    let mut c = lz4_flex::block::compress(&data);
    let lit = usize::from(c[0] >> 4);
    c[1 + lit] = 0xFF;
    c[2 + lit] = 0xFF;
    frames[last] = lz4_frame(&data, &c);
    datas[last] = data;
    let inputs: Vec<_> = frames.iter().map(|f| ChunkInput::blosc(f)).collect();
    let schedule = dec.schedule(&inputs);
    assert!(schedule.waves() >= 4 && schedule.rejected().is_empty(), "waves {}", schedule.waves());
    let total: usize = datas.iter().map(Vec::len).sum();
    let mut out = device.alloc(total).unwrap();
    let offset = |i: usize| datas[..i].iter().map(Vec::len).sum::<usize>();
    for k in 0..schedule.waves() {
        let wave = dec.queue_wave(&inputs, &schedule, k).unwrap();
        let jobs: Vec<AssembleJob> = wave
            .chunks
            .iter()
            .map(|(i, r)| AssembleJob {
                src_offset: r.start,
                dst_offset: offset(*i),
                shape: vec![r.len() as u64],
                src_strides: vec![1],
                dst_strides: vec![1],
                src_dtype: Dtype::U8,
                dst_dtype: Dtype::U8,
                big_endian: false,
                fill_bits: None,
            })
            .collect();
        asm.stream().wait(&compute.record(false).unwrap()).unwrap();
        // More jobs than the 4-job table over the batch: the table is read back and reused.
        for r in asm.queue(wave.output, &mut out, &jobs).unwrap() {
            r.unwrap();
        }
        let read = asm.stream().record(false).unwrap();
        dec.release_wave(read);
    }
    let done = dec.finish_batch().unwrap();
    assert!(asm.finish().unwrap().is_empty());
    assert_eq!(done.stats.waves, schedule.waves());
    match done.failed.as_slice() {
        [(i, Error::Stream { chunk, status: StreamStatus::BadOffset, .. })] => assert_eq!((*i, *chunk), (last, last)),
        other => panic!("expected the last chunk to fail, got {other:?}"),
    }
    let mut host = vec![0u8; total];
    device.download(&out, 0, &mut host).unwrap();
    for (i, d) in datas.iter().enumerate().take(last) {
        assert_eq!(&host[offset(i)..offset(i) + d.len()], d.as_slice(), "chunk {i}");
    }
}
