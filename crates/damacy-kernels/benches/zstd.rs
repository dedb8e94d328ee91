//! zstd decode of the same frames on two sides, in one run: the GPU route's zstd kernel through
//! the wave decoder, and the CPU decode zarrs' zstd codec performs (`zstd::bulk::decompress`,
//! libzstd), for batches of 64 KiB, 256 KiB, 1 MiB and 4 MiB chunks at levels 0, 3 and 9, of a
//! smooth 16-bit field and of noise.
//!
//! Without a GPU (the usual case here) the device side is the HOST EMULATOR: its times say how
//! long the emulator takes to run the kernel's logic on the CPU, not how fast a GPU would be.
//! Each row prints, per chunk, the median wall time of one `decode_to_host` call of the whole
//! batch (host parse, staging, the launches, read-back) divided by the chunks, the median of
//! the wave's kernel time (`WaveStats::kernel_time`; wall clock on the emulator), and the
//! median single-thread libzstd time, with libzstd's rate. Every decode is checked against the
//! input before anything is timed.
//!
//! `DAMACY_BENCH_REPS` (default 3) sets the repetitions; `DAMACY_BENCH_BATCH_MIB` (default 4)
//! the decoded size of each batch.
#![allow(missing_docs, clippy::cast_precision_loss)]

use std::time::{Duration, Instant};

use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device};

/// A smooth u16 field with a little noise (compresses like image or simulation data), or noise.
fn data(len: usize, smooth: bool, seed: u32) -> Vec<u8> {
    let mut s = 0x1234_5678_u32 ^ seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    };
    if !smooth {
        return (0..len).map(|_| next() as u8).collect();
    }
    (0..len / 2)
        .flat_map(|i| {
            let v = ((i as f32 * 0.002).sin() * 2000.0 + 3000.0) as u16 + (next() % 8) as u16;
            v.to_le_bytes()
        })
        .collect()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn device() -> (Device, &'static str) {
    #[cfg(feature = "cuda")]
    {
        let reason = match damacy_kernels::nvrtc::load() {
            Err(r) => r,
            Ok(()) => match Device::cuda(Some(0)) {
                Ok(d) => {
                    println!("device side: {}", d.describe());
                    return (d, "GPU");
                }
                Err(e) => e.to_string(),
            },
        };
        println!("no GPU: {reason}");
    }
    #[cfg(not(feature = "cuda"))]
    println!("no GPU: built without the `cuda` feature");
    println!("device side: the HOST EMULATOR (emulator time is not GPU time)");
    (Device::emulated(0), "emulator")
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let reps = env_usize("DAMACY_BENCH_REPS", 3).max(1);
    let batch = env_usize("DAMACY_BENCH_BATCH_MIB", 4).max(1) << 20;
    let (dev, side) = device();
    let cfg = DecodeConfig::default()
        .with_wave_src_bytes(batch + (4 << 20))
        .with_wave_dst_bytes(batch)
        .with_wave_streams(1 << 14)
        .with_slots(1);
    let mut dec = match Decoder::new(&dev, cfg) {
        Ok(d) => d,
        Err(e) => {
            println!("SKIPPED: cannot allocate the decoder's buffers: {e}");
            return;
        }
    };
    println!(
        "batches of {} MiB decoded; medians of {reps} runs; libzstd: single thread, zstd::bulk::decompress per frame",
        batch >> 20
    );
    println!(
        "{:>8} {:>6} {:>5} {:>6} {:>6} | {:>14} {:>14} {:>11} | {:>12} {:>10} | {:>9}",
        "chunk",
        "data",
        "level",
        "ratio",
        "chunks",
        format!("{side} ms/chunk"),
        "kernel ms/chk",
        format!("{side} MB/s"),
        "CPU µs/chunk",
        "CPU MB/s",
        format!("{side}÷CPU")
    );
    for chunk in [64usize << 10, 256 << 10, 1 << 20, 4 << 20] {
        let n = (batch / chunk).max(1);
        for smooth in [true, false] {
            for level in [0, 3, 9] {
                let datas: Vec<Vec<u8>> = (0..n).map(|i| data(chunk, smooth, i as u32)).collect();
                let frames: Vec<Vec<u8>> =
                    datas.iter().map(|d| zstd::bulk::compress(d, level).expect("libzstd compresses")).collect();
                let ratio = (n * chunk) as f64 / frames.iter().map(Vec::len).sum::<usize>() as f64;
                let inputs: Vec<ChunkInput<'_>> = frames.iter().map(|f| ChunkInput::zstd(f)).collect();
                // Correctness first: both sides must give the input back.
                let out = match dec.decode_to_host(&inputs) {
                    Ok(o) => o,
                    Err(e) => {
                        println!("{chunk}: decoder failed: {e}");
                        return;
                    }
                };
                for (k, (r, d)) in out.chunks.iter().zip(&datas).enumerate() {
                    assert!(r.as_ref().is_ok_and(|v| v == d), "{side} decode of chunk {k} differs from the input");
                }
                for (f, d) in frames.iter().zip(&datas) {
                    assert!(zstd::bulk::decompress(f, chunk).is_ok_and(|v| &v == d), "libzstd round trip");
                }
                let (mut wall, mut kernel, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..reps {
                    let t = Instant::now();
                    let o = dec.decode_to_host(&inputs).expect("decoded once already");
                    wall.push(t.elapsed());
                    kernel.push(o.stats.kernel_time);
                    std::hint::black_box(o);
                    let t = Instant::now();
                    for f in &frames {
                        std::hint::black_box(zstd::bulk::decompress(f, chunk).expect("decoded once already"));
                    }
                    cpu.push(t.elapsed());
                }
                let (wall, kernel, cpu) = (median(wall), median(kernel), median(cpu));
                let per = |d: Duration| d.as_secs_f64() / n as f64;
                let rate = |d: Duration| (n * chunk) as f64 / d.as_secs_f64() / 1e6;
                println!(
                    "{:>7}K {:>6} {:>5} {:>6.2} {:>6} | {:>14.2} {:>14.2} {:>11.1} | {:>12.1} {:>10.0} | {:>8.0}x",
                    chunk >> 10,
                    if smooth { "smooth" } else { "noise" },
                    level,
                    ratio,
                    n,
                    per(wall) * 1e3,
                    per(kernel) * 1e3,
                    rate(wall),
                    per(cpu) * 1e6,
                    rate(cpu),
                    wall.as_secs_f64() / cpu.as_secs_f64(),
                );
            }
        }
    }
    println!("notes:");
    println!("- level 0 is libzstd's default level (3): the level-0 and level-3 rows decode identical frames,");
    println!("  so their differences are run-to-run noise (the load average above says how busy the machine was).");
    if side == "emulator" {
        println!("- {side} ÷ CPU: how many times longer the host emulator takes than one CPU core running libzstd");
        println!("  on the same frames. It measures the emulator (one fiber per CUDA thread, one block at a time,");
        println!("  on one core), not a GPU: no GPU was available for this run.");
        println!("- noise is stored by libzstd as raw blocks: those rows time copies, not entropy decoding.");
    }
}
