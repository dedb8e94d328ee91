//! zarrs' read-all workload through the zarrs extension: a uint16 cube (uncompressed 256³
//! chunks; zstd level 0 with 256³ chunks; 256³ shards of 64³ zstd inner chunks), read whole
//! and as a batch of 32 random 64³ subsets, with the trait and the CPU executor against zarrs'
//! own `retrieve_array_subset`, both on two threads, side by side in one run. Prints medians of
//! wall time and of process CPU time (user + system, less sensitive to other processes on the
//! cores) and their ratios (zarrs / damacy: above 1 means damacy is faster).
//!
//! ```text
//! cargo bench -p damacy --bench zarrs_ext -- [--size 512] [--reps 7] [--threads 2] [--data DIR]
//!     [--layouts raw,zstd,sharded]
//! ```
//! The arrays are written once into `--data` (default `$CARGO_TARGET_DIR/bench-data` or
//! `target/bench-data`) and reused.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use damacy::zarrs_ext::{ArrayDeviceExt, DamacyContext};
use damacy::{ExecutorKind, ReaderConfig};
use zarrs::array::codec::{ShardingCodecBuilder, ZstdCodec};
use zarrs::array::{Array, ArrayBuilder, ArrayBytes, ArraySubset, CodecOptions, data_type};
use zarrs::filesystem::FilesystemStore;

struct Args {
    size: u64,
    reps: usize,
    threads: usize,
    data: PathBuf,
    layouts: Vec<String>,
}

fn args() -> Args {
    // cargo runs benches in the crate's folder: default to the workspace's target folder
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target").into());
    let mut a = Args {
        size: 512,
        reps: 7,
        threads: 2,
        data: Path::new(&target).join("bench-data"),
        layouts: vec!["raw".into(), "zstd".into(), "sharded".into()],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--size" => a.size = value().parse().expect("--size N"),
            "--reps" => a.reps = value().parse().expect("--reps N"),
            "--threads" => a.threads = value().parse().expect("--threads N"),
            "--data" => a.data = PathBuf::from(value()),
            "--layouts" => a.layouts = value().split(',').map(str::to_owned).collect(),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// Smooth values with a few bits of noise: compressible, not trivially.
fn value(z: u64, y: u64, x: u64) -> u16 {
    let mut h = (z << 42) ^ (y << 21) ^ x;
    h = (h ^ (h >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (((x + 2 * y + 3 * z) >> 2) as u16) ^ ((h >> 58) as u16)
}

fn write_array(store: &Arc<FilesystemStore>, path: &str, size: u64, layout: &str) -> Array<FilesystemStore> {
    let shape = vec![size; 3];
    let mut builder = ArrayBuilder::new(shape, vec![256u64; 3], data_type::uint16(), 0u16);
    match layout {
        "raw" => {}
        "zstd" => {
            builder.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(0, false))]);
        }
        "sharded" => {
            let inner = vec![std::num::NonZeroU64::new(64).expect("64"); 3];
            let sharding = ShardingCodecBuilder::new(inner, &data_type::uint16())
                .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(0, false))])
                .build();
            builder.array_to_bytes_codec(Arc::new(sharding));
        }
        other => panic!("unknown layout {other}"),
    }
    let array = builder.build(store.clone(), path).expect("array metadata");
    array.store_metadata().expect("write metadata");
    let grid = array.chunk_grid_shape().to_vec();
    for cz in 0..grid[0] {
        for cy in 0..grid[1] {
            for cx in 0..grid[2] {
                let mut data = Vec::with_capacity(256 * 256 * 256);
                for z in cz * 256..(cz + 1) * 256 {
                    for y in cy * 256..(cy + 1) * 256 {
                        for x in cx * 256..(cx + 1) * 256 {
                            data.push(value(z, y, x));
                        }
                    }
                }
                array.store_chunk(&[cz, cy, cx], data).expect("write chunk");
            }
        }
    }
    array
}

/// CPU time (user + system) of the whole process so far: less sensitive than wall time to other
/// processes sharing the cores.
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &raw mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn subsets(size: u64, seed: u64) -> Vec<ArraySubset> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..32)
        .map(|_| {
            let start: Vec<u64> = (0..3).map(|_| next() % (size - 64 + 1)).collect();
            ArraySubset::new_with_start_shape(start, vec![64; 3]).expect("subset")
        })
        .collect()
}

fn main() {
    let a = args();
    assert!(a.size >= 256 && a.size.is_multiple_of(256), "--size must be a multiple of 256");
    let root = a.data.join(format!("zarrs_ext_{}", a.size));
    std::fs::create_dir_all(&root).expect("bench data folder");
    let store = Arc::new(FilesystemStore::new(&root).expect("store"));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(a.threads).build().expect("zarrs' thread pool");
    let zopts = CodecOptions::default().with_concurrent_target(a.threads);
    let config = ReaderConfig::default().with_executor(ExecutorKind::Cpu).with_compute_threads(a.threads);
    let ctx = DamacyContext::new(config).expect("damacy context");

    println!("# zarrs_ext: uint16 {0}³, {1} threads, {2} reps (medians)\n", a.size, a.threads, a.reps);
    println!("| array | read | zarrs | damacy | zarrs / damacy | zarrs CPU | damacy CPU | CPU ratio |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for layout in a.layouts.iter().map(String::as_str) {
        let path = format!("/{layout}");
        let array = if let Ok(array) = Array::open(store.clone(), &path) {
            array
        } else {
            eprintln!("writing {}{path} …", root.display());
            pool.install(|| write_array(&store, &path, a.size, layout))
        };
        for read in ["whole", "32 × 64³"] {
            let (mut tz, mut td, mut cz, mut cd) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for rep in 0..=a.reps {
                let batch = subsets(a.size, rep as u64 + 1);
                let (wall, cpu) = (Instant::now(), cpu_time());
                let ours = if read == "whole" {
                    array.retrieve_array_subset_device(&array.subset_all(), &ctx)
                } else {
                    array.retrieve_array_subsets_device(&batch, &ctx)
                }
                .expect("damacy");
                let (d, dc) = (wall.elapsed(), cpu_time().saturating_sub(cpu));
                let (wall, cpu) = (Instant::now(), cpu_time());
                let theirs: Vec<Vec<u8>> = pool.install(|| {
                    let subsets = if read == "whole" { vec![array.subset_all()] } else { batch.clone() };
                    subsets
                        .iter()
                        .map(|s| {
                            let b: ArrayBytes = array.retrieve_array_subset_opt(s, &zopts).expect("zarrs");
                            b.into_fixed().expect("fixed").into_owned()
                        })
                        .collect()
                });
                let (z, zc) = (wall.elapsed(), cpu_time().saturating_sub(cpu));
                // Compared outside the timed parts (damacy's CPU executor returns host memory).
                assert!(
                    ours.host_bytes() == Some(theirs.concat().as_slice()),
                    "damacy and zarrs disagree on {layout} {read}"
                );
                if rep > 0 {
                    // Rep 0 warms the page cache, the thread pools and damacy's caches.
                    tz.push(z);
                    td.push(d);
                    cz.push(zc);
                    cd.push(dc);
                }
            }
            let (z, d, zc, dc) = (median(tz), median(td), median(cz), median(cd));
            let ms = |t: Duration| t.as_secs_f64() * 1e3;
            println!(
                "| {layout} | {read} | {:.1} ms | {:.1} ms | {:.2} | {:.1} ms | {:.1} ms | {:.2} |",
                ms(z),
                ms(d),
                ms(z) / ms(d),
                ms(zc),
                ms(dc),
                ms(zc) / ms(dc)
            );
        }
    }
}
