//! The workloads of the cost model (issue 14): fixture chunks through the decode kernels, and
//! crops through assemble. Shared by `tests/kernel_cost.rs` (budgets) and `benches/cost.rs`
//! (the report), each including this file with `#[path]`.
#![allow(dead_code, unreachable_pub, clippy::missing_panics_doc)]

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
}

fn fixture_chunks(path: &str) -> Vec<Vec<u8>> {
    super::chunk_files(&super::fixtures_dir().join(path)).into_iter().map(|(_, b)| b).collect()
}

fn decode_case(device: &Device, name: &'static str, path: &str, input: fn(&[u8]) -> ChunkInput<'_>) -> CostCase {
    let chunks = fixture_chunks(path);
    assert!(!chunks.is_empty(), "fixture {path} has no chunks");
    let inputs: Vec<ChunkInput<'_>> = chunks.iter().map(|c| input(c)).collect();
    let mut dec = Decoder::new(device, super::small_config()).unwrap();
    cost::reset();
    let out = dec.decode_to_host(&inputs).unwrap();
    let launches = cost::take();
    let bytes = out.chunks.iter().map(|r| r.as_ref().map_or(0, Vec::len) as u64).sum();
    for (i, r) in out.chunks.iter().enumerate() {
        assert!(r.is_ok(), "{path} chunk {i}: {:?}", r.as_ref().err());
    }
    CostCase { name, what: format!("fixture `{path}`, {} chunks", chunks.len()), bytes, launches }
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
    let launches = cost::take();
    let mut host = vec![0u8; out_len];
    device.download(&out, 0, &mut host).unwrap();
    // every crop equals the field's crop at (100, 50), element by element
    for k in 0..n as usize {
        for (e, got) in host[k * one_len..(k + 1) * one_len].chunks_exact(dst.size()).enumerate() {
            let (r, c) = (100 + e as u64 / crop, 50 + e as u64 % crop);
            let at = 2 * (r * cols + c) as usize;
            let v = u16::from_le_bytes([field[at], field[at + 1]]);
            match dst {
                Dtype::F32 => assert_eq!(f32::from_le_bytes(got.try_into().unwrap()).to_bits(), f32::from(v).to_bits()),
                _ => assert_eq!(u16::from_le_bytes([got[0], got[1]]), v),
            }
        }
    }
    let what = if n == 1 { String::new() } else { format!("{n} × ") };
    CostCase {
        name,
        what: format!("{what}{crop}×{crop} crop of a {rows}×{cols} u16 field → {dst:?}"),
        bytes: out_len as u64,
        launches,
    }
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
    ]
}
