//! Decoded GB/s per codec and shuffle for batches of 64 KiB – 4 MiB blosc chunks, one wave per
//! iteration (host parse + one H2D copy + the launches + status read-back).
//!
//! Runs on the first CUDA device. Without one it prints why and measures nothing on the GPU;
//! with the `emulate` feature it then times the host emulator instead, labelled as such
//! (functional sanity only — emulator numbers say nothing about GPU speed).
//!
//! nvCOMP's batched LZ4 side by side and event-timed kernel throughput on a GPU are in
//! `benches/gpu/` (the `kernel_bench` example).
#![allow(missing_docs, clippy::doc_markdown, clippy::many_single_char_names)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device};

#[path = "../tests/common/blosc_ref.rs"]
mod blosc_ref;
use blosc_ref::blosc_compress;

fn data(len: usize) -> Vec<u8> {
    // smooth u16 ramp with noise: compresses ~2-4x, like typical image data
    let mut s = 0x1234_5678_u32;
    (0..len / 2)
        .flat_map(|i| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let v = ((i as f32 * 0.01).sin() * 2000.0 + 3000.0) as u16 + (s % 16) as u16;
            v.to_le_bytes()
        })
        .collect()
}

fn device() -> Option<(Device, &'static str)> {
    #[cfg(feature = "cuda")]
    {
        let reason = match damacy_kernels::nvrtc::load() {
            Err(r) => r,
            Ok(()) => match Device::cuda(Some(0)) {
                Ok(d) => {
                    println!("benchmarking on {}", d.describe());
                    return Some((d, "gpu"));
                }
                Err(e) => e.to_string(),
            },
        };
        println!("SKIPPED GPU benchmark: {reason}");
    }
    #[cfg(not(feature = "cuda"))]
    println!("SKIPPED GPU benchmark: built without the `cuda` feature");
    #[cfg(feature = "emulate")]
    {
        println!("timing the HOST EMULATOR instead (not GPU numbers)");
        return Some((Device::emulated(0), "emulator"));
    }
    #[allow(unreachable_code)]
    None
}

fn bench(c: &mut Criterion) {
    let Some((dev, label)) = device() else { return };
    let gpu = label == "gpu";
    let sizes: &[usize] = if gpu { &[64 << 10, 256 << 10, 1 << 20, 4 << 20] } else { &[64 << 10] };
    let batch_bytes: usize = if gpu { 256 << 20 } else { 1 << 20 };
    let cfg = DecodeConfig::default()
        .with_wave_src_bytes(batch_bytes + (16 << 20))
        .with_wave_dst_bytes(batch_bytes)
        .with_device_budget_bytes(4 << 30);
    let Ok(mut dec) = Decoder::new(&dev, cfg) else {
        println!("SKIPPED: cannot allocate the decoder's buffers");
        return;
    };
    let mut g = c.benchmark_group(format!("blosc_decode_{label}"));
    g.sample_size(10);
    for &chunk in sizes {
        let n = (batch_bytes / chunk).max(1);
        let d = data(chunk);
        for (cname, shuffle, tag) in [
            ("lz4", 0, "lz4"),
            ("lz4", 1, "lz4+shuffle"),
            ("lz4", 2, "lz4+bitshuffle"),
            ("blosclz", 1, "blosclz+shuffle"),
        ] {
            let Ok(frame) = blosc_compress(&d, 5, shuffle, 2, cname, 0) else { continue };
            let inputs: Vec<ChunkInput<'_>> = (0..n).map(|_| ChunkInput::blosc(&frame)).collect();
            g.throughput(Throughput::Bytes((n * chunk) as u64));
            g.bench_with_input(BenchmarkId::new(tag, format!("{}KiB", chunk >> 10)), &inputs, |b, inputs| {
                b.iter(|| {
                    let w = dec.decode_wave(inputs).map(|w| w.stats.bytes_decoded);
                    std::hint::black_box(w.ok());
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
