//! The workloads of the cost model (issue 14): fixture chunks through the decode kernels, and
//! crops through assemble. Shared by `tests/kernel_cost.rs` (budgets) and `benches/cost.rs`
//! (the report), each including this file with `#[path]`.
#![allow(dead_code, unreachable_pub, clippy::missing_panics_doc, clippy::too_many_arguments)]

use damacy_kernels::cost::{self, LaunchCost};
use damacy_kernels::{AssembleJob, Assembler, ChunkInput, Decoder, Device, Dtype};

/// One workload: its launches (every kernel it ran) and the bytes it produced.
pub struct CostCase {
    /// Short name (the budget file's section prefix).
    pub name: &'static str,
    /// What it runs, for the report.
    pub what: String,
    /// Decoded (or assembled) bytes.
    pub bytes: u64,
    /// Every launch, in order.
    pub launches: Vec<LaunchCost>,
    /// The same launches with their warps, for the GPU performance model (issue 30).
    pub recorded: Vec<damacy_kernels::model::Launch>,
}

/// The launches recorded since the last reset: their memory totals and, with their warps, the
/// model's record.
fn take_recorded() -> (Vec<LaunchCost>, Vec<damacy_kernels::model::Launch>) {
    let recorded = damacy_kernels::model::take();
    (recorded.iter().map(|l| l.cost.clone()).collect(), recorded)
}

fn fixture_chunks(path: &str) -> Vec<Vec<u8>> {
    super::chunk_files(&super::fixtures_dir().join(path)).into_iter().map(|(_, b)| b).collect()
}

pub fn decode_case(device: &Device, name: &'static str, path: &str, input: fn(&[u8]) -> ChunkInput<'_>) -> CostCase {
    let chunks = fixture_chunks(path);
    assert!(!chunks.is_empty(), "fixture {path} has no chunks");
    let inputs: Vec<ChunkInput<'_>> = chunks.iter().map(|c| input(c)).collect();
    let mut dec = Decoder::new(device, super::small_config()).unwrap();
    cost::reset();
    let out = dec.decode_to_host(&inputs).unwrap();
    let (launches, recorded) = take_recorded();
    let bytes = out.chunks.iter().map(|r| r.as_ref().map_or(0, Vec::len) as u64).sum();
    for (i, r) in out.chunks.iter().enumerate() {
        assert!(r.is_ok(), "{path} chunk {i}: {:?}", r.as_ref().err());
    }
    CostCase { name, what: format!("fixture `{path}`, {} chunks", chunks.len()), bytes, launches, recorded }
}

/// `n` 300 × 300 crops at (100, 50) of a 512 × 512 u16 field, one after another into one
/// tensor, as `dst`: one job each.
fn assemble_case(device: &Device, name: &'static str, dst: Dtype, n: u64) -> CostCase {
    let (rows, cols, crop) = (512u64, 512u64, 300u64);
    let field: Vec<u8> = (0..rows * cols).flat_map(|i| ((i * 7 % 65521) as u16).to_le_bytes()).collect();
    let mut src = device.alloc(field.len()).unwrap();
    device.upload(&field, &mut src, 0).unwrap();
    let one_len = (crop * crop) as usize * dst.size();
    let out_len = one_len * n as usize;
    let mut out = device.alloc(out_len).unwrap();
    let jobs: Vec<AssembleJob> = (0..n as usize)
        .map(|k| {
            AssembleJob::chunk_region(
                0,
                &[rows, cols],
                None,
                &[100, 50],
                &[crop, crop],
                k * one_len,
                &[crop, crop],
                &[0, 0],
                Dtype::U16,
                dst,
                false,
            )
            .unwrap()
        })
        .collect();
    let mut asm = Assembler::new(device, jobs.len()).unwrap();
    cost::reset();
    for r in asm.run(&src, &mut out, &jobs).unwrap() {
        r.unwrap();
    }
    device.synchronize_all().unwrap();
    let (launches, recorded) = take_recorded();
    let mut host = vec![0u8; out_len];
    device.download(&out, 0, &mut host).unwrap();
    // every crop equals the field's crop at (100, 50), element by element
    for k in 0..n as usize {
        for (e, got) in host[k * one_len..(k + 1) * one_len].chunks_exact(dst.size()).enumerate() {
            let (r, c) = (100 + e as u64 / crop, 50 + e as u64 % crop);
            let at = 2 * (r * cols + c) as usize;
            let v = u16::from_le_bytes([field[at], field[at + 1]]);
            let (got, want) = match dst {
                Dtype::F32 => (u32::from_le_bytes(got.try_into().unwrap()), f32::from(v).to_bits()),
                Dtype::BF16 => (
                    u32::from(u16::from_le_bytes([got[0], got[1]])),
                    u32::from(half::bf16::from_f32(f32::from(v)).to_bits()),
                ),
                _ => (u32::from(u16::from_le_bytes([got[0], got[1]])), u32::from(v)),
            };
            assert_eq!(got, want, "{dst:?} element {e} of crop {k}");
        }
    }
    let what = if n == 1 { String::new() } else { format!("{n} × ") };
    CostCase {
        name,
        what: format!("{what}{crop}×{crop} crop of a {rows}×{cols} u16 field → {dst:?}"),
        bytes: out_len as u64,
        launches,
        recorded,
    }
}

/// `bytes` bytes (even) of a smooth little-endian u16 field with noise in its 3 low bits
/// (microscopy-like: a compressor finds literals and short matches); `seed` varies the noise.
pub fn smooth_u16_field(bytes: usize, seed: u64) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
    (0..bytes as u64 / 2)
        .flat_map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = ((i % 512) * 40 + (i / 512) * 3) as u16 + (x & 7) as u16;
            v.to_le_bytes()
        })
        .collect()
}

/// `bytes` bytes (even) of a label image of little-endian u16, 512 elements a row: blocks of
/// 32 × 32 elements of one label (0 in a third of them), so runs of 64 bytes and rows that
/// repeat the row above (matches 1 KiB back): what a segmentation mask stored with zstd looks
/// like, mostly long matches.
pub fn label_u16_field(bytes: usize) -> Vec<u8> {
    (0..bytes as u64 / 2)
        .flat_map(|i| {
            let (x, y) = (i % 512, i / 512);
            let v = if (x / 32 + y / 32) % 3 == 0 { 0 } else { (1 + x / 64 + 8 * (y / 64)) as u16 };
            v.to_le_bytes()
        })
        .collect()
}

/// `bytes` uniformly random bytes (incompressible: zstd stores raw blocks, deflate stored
/// blocks); `seed` picks them.
pub fn noise(bytes: usize, seed: u64) -> Vec<u8> {
    let mut x = 0x2545_F491_4F6C_DD1Du64 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A gzip member of `d` at flate2 `level`.
pub fn gzip(d: &[u8], level: u32) -> Vec<u8> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    enc.write_all(d).expect("compressing into memory");
    enc.finish().expect("compressing into memory")
}

/// Decodes `chunks` (compressed by `codec` from `fields`, one each, of the data `data`
/// describes) as one batch, checks every chunk against its field byte for byte and records the
/// launches; `note` ends the description (whether the case has a budget).
pub fn batch_case(
    device: &Device,
    name: &'static str,
    codec: &str,
    data: &str,
    note: &str,
    fields: &[Vec<u8>],
    chunks: &[Vec<u8>],
    input: fn(&[u8]) -> ChunkInput<'_>,
) -> CostCase {
    let inputs: Vec<ChunkInput<'_>> = chunks.iter().map(|c| input(c)).collect();
    let mut dec = Decoder::new(device, super::small_config()).unwrap();
    cost::reset();
    let out = dec.decode_to_host(&inputs).unwrap();
    let (launches, recorded) = take_recorded();
    for (k, r) in out.chunks.iter().enumerate() {
        assert!(r.as_ref().is_ok_and(|d| *d == fields[k]), "{name} chunk {k}: not its field");
    }
    let bytes = out.chunks.iter().map(|r| r.as_ref().map_or(0, Vec::len) as u64).sum();
    let size = fields[0].len();
    let ratio = (chunks.len() * size) as f64 / chunks.iter().map(Vec::len).sum::<usize>() as f64;
    CostCase {
        name,
        what: format!("{} {codec} chunks of {} KiB, {data} ({ratio:.2}:1; {note})", chunks.len(), size >> 10),
        bytes,
        launches,
        recorded,
    }
}

/// Report-only cases (no budget) for issue 13's benchmark sizes: two zstd level-3 chunks (the
/// `zstd` crate, content size in the header) of 64 KiB, 256 KiB and 1 MiB of
/// [`smooth_u16_field`], and one of 4 MiB (its record takes ~50 s of a core: too long for the
/// budget test), each chunk checked byte for byte against the field.
pub fn zstd_batches(device: &Device) -> Vec<CostCase> {
    [(64usize << 10, "zstd-64KiB"), (256 << 10, "zstd-256KiB"), (1 << 20, "zstd-1MiB"), (4 << 20, "zstd-4MiB-smooth")]
        .into_iter()
        .map(|(size, name)| {
            let n = if size >= 4 << 20 { 1 } else { 2 };
            let fields: Vec<Vec<u8>> = (0..n).map(|k| smooth_u16_field(size, k)).collect();
            let chunks: Vec<Vec<u8>> = fields.iter().map(|f| zstd::bulk::compress(f, 3).unwrap()).collect();
            batch_case(device, name, "zstd level 3", SMOOTH, REPORT_ONLY, &fields, &chunks, |b| ChunkInput::zstd(b))
        })
        .collect()
}

/// What [`smooth_u16_field`] is, for the report.
pub const SMOOTH: &str = "a smooth u16 field";
/// The note of a case without a budget.
pub const REPORT_ONLY: &str = "report only, no budget";
/// The note of a budgeted batch case.
const BUDGETED: &str = "budgeted";

/// Budgeted batch cases beside the fixtures (issues 13 and 15's benchmark matrix): the largest
/// zstd chunk size (one 4 MiB chunk of [`label_u16_field`], level 3: long matches, so its record
/// takes seconds; the smooth field's 4 MiB chunk is report-only in [`zstd_batches`]), zstd and
/// gzip at level 9 (two 64 KiB chunks of the smooth field) and on noise (two 256 KiB chunks:
/// raw and stored blocks), every chunk checked byte for byte against its field. They add about
/// 10 s of a core to the budget test.
pub fn budgeted_batches(device: &Device) -> Vec<CostCase> {
    let smooth = |size: usize, n: u64| -> Vec<Vec<u8>> { (0..n).map(|k| smooth_u16_field(size, k)).collect() };
    let noisy: Vec<Vec<u8>> = (0..2u64).map(|k| noise(256 << 10, k)).collect();
    let zstd_of = |fields: &[Vec<u8>], level: i32| -> Vec<Vec<u8>> {
        fields.iter().map(|f| zstd::bulk::compress(f, level).unwrap()).collect()
    };
    let gzip_of = |fields: &[Vec<u8>], level: u32| -> Vec<Vec<u8>> { fields.iter().map(|f| gzip(f, level)).collect() };
    let zstd_in: fn(&[u8]) -> ChunkInput<'_> = |b| ChunkInput::zstd(b);
    let gzip_in: fn(&[u8]) -> ChunkInput<'_> = |b| ChunkInput::gzip(b);
    let big = vec![label_u16_field(4 << 20)];
    let mid = smooth(64 << 10, 2);
    vec![
        batch_case(
            device,
            "zstd-4MiB",
            "zstd level 3",
            "a u16 label image",
            BUDGETED,
            &big,
            &zstd_of(&big, 3),
            zstd_in,
        ),
        batch_case(device, "zstd-l9", "zstd level 9", SMOOTH, BUDGETED, &mid, &zstd_of(&mid, 9), zstd_in),
        batch_case(
            device,
            "zstd-noise",
            "zstd level 3",
            "random bytes",
            BUDGETED,
            &noisy,
            &zstd_of(&noisy, 3),
            zstd_in,
        ),
        batch_case(device, "gzip-l9", "gzip (flate2 level 9)", SMOOTH, BUDGETED, &mid, &gzip_of(&mid, 9), gzip_in),
        batch_case(
            device,
            "gzip-noise",
            "gzip (flate2 level 6)",
            "random bytes",
            BUDGETED,
            &noisy,
            &gzip_of(&noisy, 6),
            gzip_in,
        ),
    ]
}

/// Every workload, on the emulated device.
pub fn cost_cases() -> Vec<CostCase> {
    let device = Device::emulated(0);
    vec![
        decode_case(&device, "lz4", "v3/blosc_lz4_byte_ts4_large", |b| ChunkInput::blosc(b)),
        decode_case(&device, "blosclz", "v3/blosc_blosclz_bit_ts4_large", |b| ChunkInput::blosc(b)),
        decode_case(&device, "blosc-zstd", "v3/blosc_zstd_byte_ts4_large", |b| ChunkInput::blosc(b)),
        // bit shuffle with blocks of 16384 elements (a multiple of 8: the bit transpose; the
        // `blosclz` case's 18501-element blocks are stored as they are)
        decode_case(&device, "lz4-bit", "v3/blosc_lz4_bit_ts4_small", |b| ChunkInput::blosc(b)),
        decode_case(&device, "zstd", "v3/zstd_l3_ck", |b| ChunkInput::zstd(b)),
        decode_case(&device, "gzip", "v3/gzip_l6", |b| ChunkInput::gzip(b)),
        decode_case(&device, "crc32c", "v3/crc32c_bytes", |b| ChunkInput::raw(b).with_crc32c()),
        assemble_case(&device, "assemble-u16", Dtype::U16, 1),
        assemble_case(&device, "assemble-f32", Dtype::F32, 1),
        // enough elements to fill an H100: several elements per thread
        assemble_case(&device, "assemble-batch-f32", Dtype::F32, 16),
        // the same batch cast to bf16, the training dtype of `damacy.Config(dtype="bf16")`
        assemble_case(&device, "assemble-batch-bf16", Dtype::BF16, 16),
        // the same batch without a cast: the wide path (rows as aligned 16-byte words)
        assemble_case(&device, "assemble-batch-u16", Dtype::U16, 16),
    ]
    .into_iter()
    .chain(budgeted_batches(&device))
    .collect()
}
