//! Per-kernel throughput for the GPU report (issues 5, 13, 15): decoded GB/s of damacy's LZ4,
//! zstd and inflate kernels on batches of 64 KiB – 4 MiB chunks, with the very same streams
//! dumped so that nvCOMP's batched LZ4, Zstd and Deflate decode them too; of the copy +
//! unshuffle / bitunshuffle path; and of assemble (random crops into a batch, with and without a
//! u16 → f32 cast).
//!
//! ```text
//! cargo run --release -p damacy-kernels --example kernel_bench -- \
//!     [--device cuda|emulated] [--small] [--dump DIR] [--json FILE] \
//!     [--reps N] [--warmup N] [--cases lz4,zstd,deflate,shuffle,assemble,demo] [--sizes 64K,256K,1M,4M] \
//!     [--batch-mib N] [--zstd-levels 0,3,9] [--datasets u16-labels,noise,…] [--dataset DEMO_DIR] \
//!     [--model h200|h100] [--model-mib N] [--teams auto|on|mostly|off]
//! ```
//!
//! Every decode case is one wave (`Decoder::decode_wave`) holding a whole batch (≥ 256 MiB of
//! decoded bytes on a GPU); the decoder's device and pinned host budgets are sized from the
//! largest batch the run holds, so the defaults run as written. Two times per case, each the median of `--reps` timed runs after
//! `--warmup` untimed ones: `WaveStats::kernel_time` (the device time of the wave's kernels)
//! and the wall time of the whole call (host parse, staging, host-to-device copy, launches,
//! status read-back). GB/s is 10⁹ decoded bytes per second. Each case's output is compared once
//! with the CPU reference (the blosc C library, lz4_flex, or a host crop) before its numbers
//! count: a case whose output differs reports no number and makes the run fail. zstd chunks are
//! frames of the `zstd` crate at levels 0, 3 and 9 (`--zstd-levels`; libzstd's level 0 is its
//! default, 3, so those frames equal level 3's: both rows are kept because issue 13 names both),
//! of the label image, the smooth field and `noise` (uniformly random bytes, which libzstd
//! stores as raw blocks and deflate as stored blocks); deflate chunks are zlib streams of `flate2` at level 6,
//! which damacy decodes whole (`ChunkInput::zlib`, Adler-32 not verified) and whose raw deflate
//! body (without the 2-byte header and the 4-byte trailer) is what the dump gives nvCOMP.
//!
//! `--dataset DIR` adds the `demo` cases: real chunks of the demo volume that `damacy demo`
//! writes (`damacy demo --full`: `DIR` is its `…/full/demo.zarr`, or the folder above it) — the
//! inner zstd frames of the `sharded_zstd` array's shards (256 KiB chunks, ratio ~2.5) and the
//! blosc-lz4 frames of `blosc_lz4` (512 KiB chunks, byte shuffle, ratio ~1.9), read from disk
//! as stored, up to one batch of each. damacy decodes the frames (blosc: LZ4 and unshuffle
//! kernels); the dump gives nvCOMP the same zstd frames, and each blosc frame's raw LZ4 streams
//! (several per chunk, their own decoded sizes): rows `zstd-demo-sharded-*` and `lz4-demo-blosc-*`.
//!
//! With `--device emulated` (feature `emulate`) the kernels run on the host emulator: the
//! numbers are labelled `emulator` and say nothing about GPU speed. `--model h200` (a cost build,
//! `crates/damacy-kernels/scripts/gpu_model.sh`) adds the GPU performance model's predicted kernel
//! time and GB/s of each case (`predicted_kernel_s`, `predicted_gbps`, `model` in the JSON),
//! from the verification run alone (no timed runs); `--model-mib N` runs every k-th chunk of a
//! decode case only (assemble cases run whole: their launch shape depends on the job count) (k the smallest that keeps the chunks run within N MiB) and stands each
//! recorded launch for k (`model_sample` in the JSON; its zstd launch keeps the whole wave's
//! team choice, `teams`). `--teams on|mostly|off` forces the zstd and inflate kernels' teams of
//! warps (`DecodeConfig::teams`, `Teams`; `auto`, the default, chooses per wave). `benches/gpu/compare.py`
//! runs this and `benches/gpu/nvcomp_decode.py` on the same streams and prints the ratios.
#![allow(
    clippy::doc_markdown,
    clippy::too_many_lines,
    clippy::many_single_char_names,
    clippy::similar_names,
    clippy::too_many_arguments
)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use damacy_kernels::{
    AssembleJob, Assembler, ChunkInput, DecodeConfig, Decoder, Device, Dtype, Shuffle, Teams, WaveStats,
};
use damacy_kernels::{StreamCodec, plan_frame};
use rayon::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[path = "gpu_model/hook.rs"]
mod gpu_model;

/// The GPU model's predictions of a case's timed runs: total seconds and per-launch terms.
type Predicted = Vec<(f64, Value)>;

/// Exit code when the requested device cannot be opened (no GPU, no NVRTC, feature missing).
const EXIT_NO_DEVICE: u8 = 3;
/// Row length of the generated 2-D fields, in elements.
const WIDTH: usize = 2048;

const USAGE: &str = "usage: kernel_bench [--device cuda|emulated] [--small] [--dump DIR] [--json FILE] \
[--reps N] [--warmup N] [--cases lz4,zstd,deflate,shuffle,assemble,demo] [--sizes 64K,256K,1M,4M] [--batch-mib N] \
[--zstd-levels 0,3,9] [--datasets u16-labels,noise,...] [--dataset DEMO_DIR] [--model h200|h100] [--model-mib N] [--teams auto|on|mostly|off]";

/// Every case name `--cases` takes (`demo` runs only with `--dataset`).
const CASES: [&str; 6] = ["lz4", "zstd", "deflate", "shuffle", "assemble", "demo"];

// ---------------------------------------------------------------------------------------------
// Command line

#[derive(Debug)]
struct Args {
    device: String,
    small: bool,
    dump: Option<PathBuf>,
    json: Option<PathBuf>,
    reps: Option<usize>,
    warmup: Option<usize>,
    cases: Vec<String>,
    sizes: Option<Vec<usize>>,
    batch_mib: Option<usize>,
    zstd_levels: Vec<i32>,
    dataset: Option<PathBuf>,
    /// The synthetic datasets to run (all when `None`).
    datasets: Option<Vec<String>>,
    model: Option<String>,
    model_mib: Option<usize>,
    teams: Teams,
}

fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        _ => (t, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("{s:?} is not a size like 64K, 1M or 65536"))?;
    match n.checked_mul(mul) {
        Some(v) if v >= 1024 && v.is_multiple_of(16) => Ok(v),
        _ => Err(format!("chunk size {s:?} must be at least 1 KiB and a multiple of 16 bytes")),
    }
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        device: "cuda".into(),
        small: false,
        dump: None,
        json: None,
        reps: None,
        warmup: None,
        cases: CASES.map(str::to_owned).to_vec(),
        sizes: None,
        batch_mib: None,
        zstd_levels: vec![0, 3, 9],
        dataset: None,
        datasets: None,
        model: None,
        model_mib: None,
        teams: Teams::Auto,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--device" => a.device = value("--device")?,
            "--small" => a.small = true,
            "--dump" => a.dump = Some(PathBuf::from(value("--dump")?)),
            "--dataset" => a.dataset = Some(PathBuf::from(value("--dataset")?)),
            "--datasets" => {
                let names: Vec<String> = value("--datasets")?.split(',').map(str::to_owned).collect();
                if let Some(n) = names.iter().find(|n| !DATASETS.iter().chain([&NOISE]).any(|d| d.name == n.as_str())) {
                    return Err(format!(
                        "--datasets: {n:?} is not a dataset (u16-labels, u16-smooth, u16-noisy, f32-smooth, f32-noisy, noise)"
                    ));
                }
                a.datasets = Some(names);
            }
            "--json" => a.json = Some(PathBuf::from(value("--json")?)),
            "--reps" => a.reps = Some(value("--reps")?.parse().map_err(|e| format!("--reps: {e}"))?),
            "--warmup" => a.warmup = Some(value("--warmup")?.parse().map_err(|e| format!("--warmup: {e}"))?),
            "--cases" => a.cases = value("--cases")?.split(',').map(str::to_owned).collect(),
            "--sizes" => a.sizes = Some(value("--sizes")?.split(',').map(parse_size).collect::<Result<_, _>>()?),
            "--batch-mib" => {
                a.batch_mib = Some(value("--batch-mib")?.parse().map_err(|e| format!("--batch-mib: {e}"))?);
            }
            "--zstd-levels" => {
                a.zstd_levels = value("--zstd-levels")?
                    .split(',')
                    .map(|l| match l.trim().parse::<i32>() {
                        Ok(v) if (-7..=22).contains(&v) => Ok(v),
                        _ => Err(format!("--zstd-levels: {l:?} is not a zstd level (-7 to 22)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--model" => a.model = Some(value("--model")?),
            "--model-mib" => {
                a.model_mib = Some(value("--model-mib")?.parse().map_err(|e| format!("--model-mib: {e}"))?);
            }
            "--teams" => {
                a.teams = match value("--teams")?.as_str() {
                    "auto" => Teams::Auto,
                    "on" => Teams::All,
                    "mostly" => Teams::Mostly,
                    "off" => Teams::None,
                    v => return Err(format!("--teams: auto, on, mostly or off, not {v}")),
                };
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if let Some(bad) = a.cases.iter().find(|c| !CASES.contains(&c.as_str())) {
        return Err(format!("--cases: unknown case {bad:?} ({})", CASES.join(", ")));
    }
    if a.cases == ["demo"] && a.dataset.is_none() {
        return Err(format!("--cases demo reads the demo volume: give --dataset DIR\n{USAGE}"));
    }
    if a.reps == Some(0) {
        return Err("--reps must be at least 1".into());
    }
    Ok(a)
}

// ---------------------------------------------------------------------------------------------
// Device

fn open_device(kind: &str) -> Result<(Device, &'static str), String> {
    match kind {
        "cuda" => {
            #[cfg(feature = "cuda")]
            {
                // The kernels come from the images shipped in the binary (NVRTC only where they
                // cannot serve: the device says why).
                let d = Device::cuda(Some(0)).map_err(|e| e.to_string())?;
                d.prepare_kernels().map_err(|e| format!("loading the kernels: {e}"))?;
                Ok((d, "gpu"))
            }
            #[cfg(not(feature = "cuda"))]
            Err("built without the `cuda` feature".into())
        }
        "emulated" => {
            #[cfg(feature = "emulate")]
            {
                Ok((Device::emulated(0), "emulator"))
            }
            #[cfg(not(feature = "emulate"))]
            Err("built without the `emulate` feature (cargo ... --features emulate)".into())
        }
        other => Err(format!("--device {other:?}: expected cuda or emulated")),
    }
}

// ---------------------------------------------------------------------------------------------
// Data

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A float in [0, 1), a fixed function of (i, seed).
fn unit(i: u64, seed: u64) -> f64 {
    (splitmix64(i ^ seed.wrapping_mul(0x0100_0003)) >> 11) as f64 / (1u64 << 53) as f64
}

/// A smooth 2-D field (rows of `WIDTH` elements), roughly in [-2, 2].
fn smooth(i: usize, seed: u64) -> f64 {
    let x = (i % WIDTH) as f64;
    let y = (i / WIDTH) as f64;
    let s = seed as f64;
    (x / 97.0 + s).sin()
        + 0.6 * (y / 61.0 + 0.5 * s).sin()
        + 0.3 * ((x + y) / 23.0).sin()
        + 0.1 * (x / 7.3).sin() * (y / 5.1).sin()
}

/// A generated data set: a dtype and how much noise rides on the smooth field.
#[derive(Clone, Copy, Debug)]
struct Dataset {
    name: &'static str,
    dtype: &'static str,
    typesize: usize,
    /// Noise amplitude relative to the field's (peak-to-peak 4); `None`: a label image instead
    /// (0 outside blobs where the field is high, a blob id inside), like a segmentation mask.
    noise: Option<f64>,
    seed: u64,
}

const DATASETS: [Dataset; 5] = [
    Dataset { name: "u16-labels", dtype: "uint16", typesize: 2, noise: None, seed: 5 },
    Dataset { name: "u16-smooth", dtype: "uint16", typesize: 2, noise: Some(0.00015), seed: 1 },
    Dataset { name: "u16-noisy", dtype: "uint16", typesize: 2, noise: Some(0.003), seed: 2 },
    Dataset { name: "f32-smooth", dtype: "float32", typesize: 4, noise: Some(0.0005), seed: 3 },
    Dataset { name: "f32-noisy", dtype: "float32", typesize: 4, noise: Some(0.25), seed: 4 },
];

/// Uniformly random bytes (see [`random_bytes`]): incompressible, the zstd and deflate cases'
/// noise (raw and stored blocks).
const NOISE: Dataset = Dataset { name: "noise", dtype: "uint8", typesize: 1, noise: None, seed: 6 };

/// `len` bytes of the data set (little-endian elements, C order), generated in parallel.
fn make_dataset(ds: &Dataset, len: usize) -> Vec<u8> {
    if ds.name == NOISE.name {
        return random_bytes(len, ds.seed);
    }
    let mut out = vec![0u8; len];
    let ts = ds.typesize;
    out.par_chunks_mut(ts * 4096).enumerate().for_each(|(c, buf)| {
        for (k, e) in buf.chunks_exact_mut(ts).enumerate() {
            let i = c * 4096 + k;
            let f = smooth(i, ds.seed);
            let v = match ds.noise {
                Some(noise) => f + noise * 4.0 * (unit(i as u64, ds.seed) - 0.5),
                None if f > 1.0 => (1 + (i % WIDTH) / 192 + 11 * (i / WIDTH / 128)) as f64 % 1000.0,
                None => 0.0,
            };
            match (ts, ds.noise) {
                (2, None) => e.copy_from_slice(&(v as u16).to_le_bytes()),
                (2, Some(_)) => {
                    e.copy_from_slice(&((30_000.0 + 12_000.0 * v).round().clamp(0.0, 65_535.0) as u16).to_le_bytes());
                }
                _ => e.copy_from_slice(&((10.0 * v) as f32).to_le_bytes()),
            }
        }
    });
    out
}

/// `len` uniformly random bytes (incompressible).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; len];
    out.par_chunks_mut(1 << 16).enumerate().for_each(|(c, buf)| {
        for (k, e) in buf.chunks_mut(8).enumerate() {
            let r = splitmix64(((c as u64) << 20 | k as u64) ^ seed).to_le_bytes();
            e.copy_from_slice(&r[..e.len()]);
        }
    });
    out
}

/// Blosc's byte shuffle of one block: byte j of element i goes to plane j; a tail shorter than
/// one element stays in place.
fn byte_shuffle(d: &[u8], ts: usize) -> Vec<u8> {
    let n = d.len() / ts;
    let mut out = vec![0u8; d.len()];
    for i in 0..n {
        for j in 0..ts {
            out[j * n + i] = d[i * ts + j];
        }
    }
    out[n * ts..].copy_from_slice(&d[n * ts..]);
    out
}

// ---------------------------------------------------------------------------------------------
// CPU references

#[path = "../tests/common/blosc_ref.rs"]
mod blosc_ref;
use blosc_ref::blosc_compress;

/// Sets c-blosc's (process-wide) split mode to "never" until dropped, then back to its default.
struct SplitMode;

impl SplitMode {
    fn never() -> Self {
        // SAFETY: sets a global int of c-blosc; no compression runs concurrently with the
        // switch (callers compress inside the guard's scope only).
        unsafe { blosc_src::blosc_set_splitmode(blosc_src::BLOSC_NEVER_SPLIT as i32) };
        SplitMode
    }
}

impl Drop for SplitMode {
    fn drop(&mut self) {
        // SAFETY: as in `never`.
        unsafe { blosc_src::blosc_set_splitmode(blosc_src::BLOSC_FORWARD_COMPAT_SPLIT as i32) };
    }
}

/// The blosc C library's decode of `frame`, or why it failed.
fn blosc_decompress(frame: &[u8]) -> Result<Vec<u8>, String> {
    let mut nbytes = 0usize;
    // SAFETY: frame is valid for its length; nbytes is valid for writes.
    if unsafe { blosc_src::blosc_cbuffer_validate(frame.as_ptr().cast(), frame.len(), &raw mut nbytes) } != 0 {
        return Err("blosc_cbuffer_validate rejected the frame".into());
    }
    let mut out = vec![0u8; nbytes];
    // SAFETY: validated above; out holds nbytes bytes.
    let n = unsafe { blosc_src::blosc_decompress_ctx(frame.as_ptr().cast(), out.as_mut_ptr().cast(), out.len(), 1) };
    if n < 0 || n as usize != nbytes {
        return Err(format!("blosc_decompress_ctx returned {n}, expected {nbytes}"));
    }
    Ok(out)
}

fn first_diff(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(p) => format!("first difference at byte {p} ({} vs {})", a[p], b[p]),
        None => format!("lengths differ ({} vs {})", a.len(), b.len()),
    }
}

// ---------------------------------------------------------------------------------------------
// Timing

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn gbps(bytes: usize, secs: f64) -> Option<f64> {
    (secs.is_finite() && secs > 0.0).then(|| bytes as f64 / secs / 1e9)
}

fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}MiB", bytes >> 20)
    } else if bytes.is_multiple_of(1024) {
        format!("{}KiB", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}

/// Kernel and wall times (seconds) of the timed decode runs.
struct DecodeTimes {
    kernel: Vec<f64>,
    predicted: Predicted,
    wall: Vec<f64>,
    stats: WaveStats,
}

// ---------------------------------------------------------------------------------------------
// The demo volume's real chunks (`--dataset`)

/// The rows' data sets of the demo volume.
const DEMO_ZSTD: Dataset = Dataset { name: "demo-sharded-zstd", dtype: "uint16", typesize: 2, noise: None, seed: 0 };
const DEMO_BLOSC: Dataset = Dataset { name: "demo-blosc-lz4", dtype: "uint16", typesize: 2, noise: None, seed: 0 };

/// Chunks of the demo store as stored on disk: up to one batch of each array.
struct Demo {
    root: PathBuf,
    /// The inner chunks of the `sharded_zstd` array's shards: zstd frames.
    zstd_frames: Vec<Vec<u8>>,
    zstd_chunk: usize,
    zstd_level: i32,
    /// The chunks of the `blosc_lz4` array: blosc frames.
    blosc_frames: Vec<Vec<u8>>,
    blosc_chunk: usize,
}

/// Bytes per element of a zarr v3 data type.
fn element_size(data_type: &Value) -> Res<usize> {
    Ok(match data_type.as_str().unwrap_or_default() {
        "int8" | "uint8" | "bool" => 1,
        "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "int32" | "uint32" | "float32" => 4,
        "int64" | "uint64" | "float64" => 8,
        other => return Err(format!("data type {other:?} is not one the demo writes").into()),
    })
}

/// The product of a JSON array of extents.
fn extents(v: &Value, what: &str) -> Res<Vec<usize>> {
    let e: Option<Vec<usize>> = v.as_array().map(|a| a.iter().filter_map(|x| x.as_u64().map(|x| x as usize)).collect());
    match e {
        Some(e) if !e.is_empty() && e.iter().all(|&x| x > 0) => Ok(e),
        _ => Err(format!("{what}: not a shape").into()),
    }
}

/// Every file of an array's folder but its metadata, sorted: the chunk (shard) objects.
fn chunk_files(array: &std::path::Path) -> Res<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut todo = vec![array.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = e?.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.file_name().is_some_and(|n| n != "zarr.json") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

impl Demo {
    /// Reads up to `batch` decoded bytes of chunks of each array of the demo store at `dir`
    /// (the `demo.zarr` folder, or the folder holding it).
    fn load(dir: &std::path::Path, batch: usize) -> Res<Self> {
        let root = if dir.join("demo.zarr").is_dir() { dir.join("demo.zarr") } else { dir.to_path_buf() };
        let meta = |array: &str| -> Res<Value> {
            let path = root.join(array).join("zarr.json");
            let text = std::fs::read(&path).map_err(|e| {
                format!(
                    "{}: {e} (--dataset names the store `damacy demo --full` writes, e.g. ~/.cache/damacy/demo/full)",
                    path.display()
                )
            })?;
            Ok(serde_json::from_slice(&text)?)
        };

        // sharded_zstd: shards of inner zstd frames with the index (offset, nbytes per inner
        // chunk, little-endian u64; a CRC32C after it when the index codecs say so) at one end.
        let z = meta("sharded_zstd")?;
        let shard = extents(&z["chunk_grid"]["configuration"]["chunk_shape"], "sharded_zstd shard shape")?;
        let sharding = z["codecs"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "sharding_indexed"))
            .ok_or("sharded_zstd has no sharding_indexed codec")?;
        let cfg = &sharding["configuration"];
        let inner = extents(&cfg["chunk_shape"], "sharded_zstd inner chunk shape")?;
        let zstd = cfg["codecs"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "zstd"))
            .ok_or("sharded_zstd's inner chunks are not zstd")?;
        let zstd_level = zstd["configuration"]["level"].as_i64().unwrap_or(0) as i32;
        let n_inner: usize = shard.iter().zip(&inner).map(|(s, i)| s.div_ceil(*i)).product();
        let crc = cfg["index_codecs"].as_array().is_some_and(|c| c.iter().any(|c| c["name"] == "crc32c"));
        let at_start = cfg["index_location"] == "start";
        let zstd_chunk = inner.iter().product::<usize>() * element_size(&z["data_type"])?;
        let want = (batch / zstd_chunk).max(1);
        let index_bytes = n_inner * 16;
        let mut zstd_frames = Vec::with_capacity(want);
        'shards: for path in chunk_files(&root.join("sharded_zstd"))? {
            let bytes = std::fs::read(&path)?;
            let tail = index_bytes + if crc { 4 } else { 0 };
            if bytes.len() < tail {
                return Err(format!("{}: {} bytes, shorter than its shard index", path.display(), bytes.len()).into());
            }
            let index = if at_start { &bytes[..index_bytes] } else { &bytes[bytes.len() - tail..][..index_bytes] };
            for e in index.chunks_exact(16) {
                let off = u64::from_le_bytes(e[..8].try_into()?);
                let len = u64::from_le_bytes(e[8..].try_into()?);
                if off == u64::MAX && len == u64::MAX {
                    continue; // an inner chunk of fill value, not stored
                }
                let frame = usize::try_from(off)
                    .ok()
                    .zip(usize::try_from(len).ok())
                    .and_then(|(o, l)| bytes.get(o..o.checked_add(l)?))
                    .ok_or_else(|| format!("{}: an index entry ({off}, {len}) outside the shard", path.display()))?;
                zstd_frames.push(frame.to_vec());
                if zstd_frames.len() == want {
                    break 'shards;
                }
            }
        }

        // blosc_lz4: one blosc frame per chunk file.
        let b = meta("blosc_lz4")?;
        let blosc_chunk = extents(&b["chunk_grid"]["configuration"]["chunk_shape"], "blosc_lz4 chunk shape")?
            .iter()
            .product::<usize>()
            * element_size(&b["data_type"])?;
        let want = (batch / blosc_chunk).max(1);
        let blosc_frames: Vec<Vec<u8>> =
            chunk_files(&root.join("blosc_lz4"))?.iter().take(want).map(std::fs::read).collect::<Result<_, _>>()?;
        if zstd_frames.is_empty() || blosc_frames.is_empty() {
            return Err(format!("{}: no chunks found", root.display()).into());
        }
        Ok(Self { root, zstd_frames, zstd_chunk, zstd_level, blosc_frames, blosc_chunk })
    }

    /// The larger of the two batches, in decoded bytes.
    fn max_batch_bytes(&self) -> usize {
        (self.zstd_frames.len() * self.zstd_chunk).max(self.blosc_frames.len() * self.blosc_chunk)
    }
}

// ---------------------------------------------------------------------------------------------
// The bench

struct Bench {
    device: Device,
    label: &'static str,
    decoder: Decoder,
    sizes: Vec<usize>,
    batch: usize,
    reps: usize,
    warmup: usize,
    rows: Vec<Value>,
    failures: Vec<String>,
    dump: Option<PathBuf>,
    dump_index: Vec<Value>,
    json: Option<PathBuf>,
    small: bool,
    model: Option<gpu_model::Model>,
    model_mib: Option<usize>,
}

impl Bench {
    /// Writes the JSON report (after every case, so a run cut short keeps what it measured)
    /// and, at the end, the dump's index.
    fn save(&self, done: bool) -> Res<()> {
        if let Some(path) = &self.json {
            let report = json!({
                "tool": "kernel_bench",
                "complete": done,
                "label": self.label,
                "device": self.device.describe(),
                "small": self.small,
                "batch_bytes": self.batch,
                "chunk_sizes": self.sizes,
                "reps": self.reps,
                "warmup": self.warmup,
                "gbps_unit": "1e9 bytes/s",
                "kernel_time": "WaveStats::kernel_time: device time from the wave's first launch to the end of its last kernel",
                "rows": self.rows,
                "failures": self.failures,
                "model_constants": self.model.as_ref().map(gpu_model::Model::constants),
            });
            std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        }
        if done && let Some(dir) = &self.dump {
            let index = json!({
                "tool": "kernel_bench", "label": self.label, "device": self.device.describe(), "entries": self.dump_index,
            });
            std::fs::write(dir.join("index.json"), serde_json::to_string(&index)?)?;
        }
        Ok(())
    }

    fn n_chunks(&self, chunk: usize) -> usize {
        (self.batch / chunk).max(1)
    }

    /// Decodes once, compares every chunk with `expected`, returns the wave's stats.
    fn verify(&mut self, inputs: &[ChunkInput<'_>], expected: &[&[u8]]) -> Result<WaveStats, String> {
        let device = self.device.clone();
        let wave = self.decoder.decode_wave(inputs).map_err(|e| e.to_string())?;
        let mut ranges = Vec::with_capacity(inputs.len());
        for (i, r) in wave.chunks.iter().enumerate() {
            match r {
                Ok(r) => ranges.push(r.clone()),
                Err(e) => return Err(format!("chunk {i} failed on the device: {e}")),
            }
        }
        let end = ranges.iter().map(|r| r.end).max().unwrap_or(0);
        let mut host = vec![0u8; end];
        device.download(wave.output, 0, &mut host).map_err(|e| e.to_string())?;
        for (i, (r, exp)) in ranges.iter().zip(expected).enumerate() {
            let got = &host[r.clone()];
            if got != *exp {
                return Err(format!("chunk {i} differs from the CPU reference: {}", first_diff(got, exp)));
            }
        }
        Ok(wave.stats.clone())
    }

    /// `--model`: the verification run of every k-th chunk, recorded and predicted (each
    /// launch standing for k); no timed runs.
    fn model_decode_case(
        &mut self,
        name: &str,
        row: &mut Value,
        inputs: &[ChunkInput<'_>],
        expected: &[&[u8]],
        decoded_bytes: usize,
    ) {
        let k = self.model_mib.map_or(1, |m| decoded_bytes.div_ceil((m << 20).max(1)).max(1));
        // The stride starts where it takes the chunk with the most encoded bytes (the likeliest
        // slowest): a launch of fewer chunks than the device holds lasts as long as its
        // slowest chunk, which a sample from chunk 0 misses on uneven data (label images).
        let first = inputs.iter().enumerate().max_by_key(|(_, c)| c.bytes.len()).map_or(0, |(i, _)| i % k);
        let sub: Vec<ChunkInput<'_>> = inputs.iter().skip(first).step_by(k).copied().collect();
        let sub_expected: Vec<&[u8]> = expected.iter().skip(first).step_by(k).copied().collect();
        if let Some(m) = &self.model {
            m.reset();
        }
        // the sample's zstd or inflate launch has the whole wave's shape (a chunk is a job: one
        // frame, one zlib stream), not the one its fewer jobs would get
        let teams = self.decoder.config().teams;
        let whole = self.decoder.teams_for(inputs);
        self.decoder.set_teams(whole);
        let verified = self.verify(&sub, &sub_expected);
        self.decoder.set_teams(teams);
        row["teams"] = json!(format!("{whole:?}").to_lowercase());
        match verified {
            Ok(stats) => {
                row["verified"] = json!(true);
                row["streams"] = json!({"lz4": stats.streams[0], "blosclz": stats.streams[1], "raw": stats.streams[2], "crc32c": stats.streams[3], "zstd": stats.streams[4], "inflate": stats.streams[5]});
                row["launches"] = json!(stats.launches);
                row["model_sample"] = json!({"every": k, "first": first, "chunks": sub.len(), "of": inputs.len()});
                if let Some(m) = &self.model {
                    let p = m.collect_scaled(k);
                    gpu_model::fill_row(row, &[p], decoded_bytes);
                }
            }
            Err(e) => {
                self.fail(name, &e);
                row["verified"] = json!(false);
            }
        }
    }

    fn time_decode(&mut self, inputs: &[ChunkInput<'_>]) -> Result<DecodeTimes, String> {
        let mut t =
            DecodeTimes { kernel: Vec::new(), predicted: Vec::new(), wall: Vec::new(), stats: WaveStats::default() };
        for rep in 0..self.warmup + self.reps {
            if let Some(m) = &self.model {
                m.reset();
            }
            let started = Instant::now();
            let wave = self.decoder.decode_wave(inputs).map_err(|e| e.to_string())?;
            let wall = started.elapsed().as_secs_f64();
            if let Some((i, Err(e))) = wave.chunks.iter().enumerate().find(|(_, r)| r.is_err()) {
                return Err(format!("chunk {i} failed on the device in run {rep}: {e}"));
            }
            if rep >= self.warmup {
                t.kernel.push(wave.stats.kernel_time.as_secs_f64());
                t.wall.push(wall);
                if let Some(m) = &self.model {
                    t.predicted.push(m.collect());
                }
            }
            t.stats = wave.stats.clone();
        }
        Ok(t)
    }

    fn fail(&mut self, what: &str, why: &str) {
        eprintln!("FAILED {what}: {why}");
        self.failures.push(format!("{what}: {why}"));
    }

    // -- LZ4 ----------------------------------------------------------------------------------

    fn lz4_case(&mut self, ds: &Dataset, data: &[u8], chunk: usize) -> Res<()> {
        let n = self.n_chunks(chunk);
        let name = format!("lz4-{}-{}", ds.name, human(chunk));
        // The decoded bytes of each stream: the chunk's byte planes, as blosc's shuffle filter
        // lays them out before LZ4 sees them.
        let decoded: Vec<Vec<u8>> =
            (0..n).into_par_iter().map(|i| byte_shuffle(&data[i * chunk..(i + 1) * chunk], ds.typesize)).collect();
        // c-blosc caps the blocks of splitting codecs at 256 KiB × typesize; with splitting off,
        // the forced blocksize stands and each chunk is one block, one LZ4 stream.
        let frames: Result<Vec<Vec<u8>>, String> = {
            let _never_split = SplitMode::never();
            decoded.par_iter().map(|d| blosc_compress(d, 5, 0, 1, "lz4", chunk)).collect()
        };
        let frames = frames?;
        // Each frame must be one LZ4 stream over the whole chunk.
        let mut streams: Vec<Option<(usize, usize)>> = Vec::with_capacity(n);
        for f in &frames {
            let p = plan_frame(f).map_err(|e| format!("{name}: blosc parse: {} at byte {}", e.reason, e.offset))?;
            let one = p.streams.len() == 1
                && p.streams[0].codec == StreamCodec::Lz4
                && p.shuffles.is_empty()
                && p.streams[0].dst_len as usize == chunk;
            streams.push(one.then(|| (p.streams[0].src_off as usize, p.streams[0].src_len as usize)));
        }
        let not_lz4 = streams.iter().filter(|s| s.is_none()).count();
        // CPU references: the blosc C library for the frame, lz4_flex for the raw stream.
        let cpu_check: Result<(), String> = (0..n).into_par_iter().try_for_each(|i| {
            let c = blosc_decompress(&frames[i])?;
            if c != decoded[i] {
                return Err(format!("chunk {i}: blosc C decode differs: {}", first_diff(&c, &decoded[i])));
            }
            if let Some((off, len)) = streams[i] {
                let l = lz4_flex::block::decompress(&frames[i][off..off + len], chunk)
                    .map_err(|e| format!("chunk {i}: lz4_flex rejects the stream: {e}"))?;
                if l != decoded[i] {
                    return Err(format!("chunk {i}: lz4_flex decode differs: {}", first_diff(&l, &decoded[i])));
                }
            }
            Ok(())
        });
        let encoded: usize = frames.iter().map(Vec::len).sum();
        let stream_bytes: usize = streams.iter().flatten().map(|s| s.1).sum();
        let mut row = json!({
            "kind": "lz4", "name": name, "dataset": ds.name, "dtype": ds.dtype, "typesize": ds.typesize,
            "chunk_bytes": chunk, "n_chunks": n, "decoded_bytes": n * chunk, "encoded_bytes": encoded,
            "lz4_stream_bytes": stream_bytes, "ratio": (n * chunk) as f64 / encoded as f64,
            "not_one_lz4_stream": not_lz4, "comparable": not_lz4 == 0,
            "note": if not_lz4 == 0 { String::new() } else {
                format!("{not_lz4} of {n} chunks are not one LZ4 stream (blosc stored them raw): no nvCOMP comparison")
            },
        });
        if let Err(e) = cpu_check {
            self.fail(&name, &format!("CPU reference check: {e}"));
            row["verified"] = json!(false);
            self.rows.push(row);
            return Ok(());
        }
        let inputs: Vec<ChunkInput<'_>> =
            frames.iter().map(|f| ChunkInput::blosc(f).with_expected_len(chunk)).collect();
        let expected: Vec<&[u8]> = decoded.iter().map(Vec::as_slice).collect();
        self.finish_decode_case(&name, &mut row, &inputs, &expected);
        if row["verified"] == json!(true)
            && not_lz4 == 0
            && let Some(dir) = self.dump.clone()
        {
            let raw: Vec<&[u8]> = frames
                .iter()
                .zip(&streams)
                .map(|(f, s)| {
                    s.map(|(off, len)| &f[off..off + len]).ok_or("dump of a chunk that is not one LZ4 stream")
                })
                .collect::<Result<_, _>>()?;
            self.dump_streams(&dir, &name, ds, chunk, "LZ4", &raw, &decoded)?;
            row["dump"] = json!(name);
        }
        self.rows.push(row);
        Ok(())
    }

    /// Verifies, times, and fills the timing fields of a decode case's row.
    fn finish_decode_case(&mut self, name: &str, row: &mut Value, inputs: &[ChunkInput<'_>], expected: &[&[u8]]) {
        let decoded_bytes: usize = expected.iter().map(|e| e.len()).sum();
        if self.model.is_some() {
            self.model_decode_case(name, row, inputs, expected, decoded_bytes);
            return;
        }
        match self.verify(inputs, expected) {
            Ok(stats) => {
                row["verified"] = json!(true);
                row["streams"] = json!({"lz4": stats.streams[0], "blosclz": stats.streams[1], "raw": stats.streams[2], "crc32c": stats.streams[3], "zstd": stats.streams[4], "inflate": stats.streams[5]});
                row["launches"] = json!(stats.launches);
            }
            Err(e) => {
                self.fail(name, &e);
                row["verified"] = json!(false);
                return;
            }
        }
        match self.time_decode(inputs) {
            Ok(t) => {
                let (k, w) = (median(&t.kernel), median(&t.wall));
                row["kernel_s"] = json!(k);
                row["kernel_s_min"] = json!(min(&t.kernel));
                row["wall_s"] = json!(w);
                row["kernel_gbps"] = json!(gbps(decoded_bytes, k));
                row["wall_gbps"] = json!(gbps(decoded_bytes, w));
                row["bytes_uploaded"] = json!(t.stats.bytes_uploaded);
                row["reps"] = json!(t.kernel.len());
                gpu_model::fill_row(row, &t.predicted, decoded_bytes);
                if t.stats.bytes_decoded != decoded_bytes {
                    self.fail(name, &format!("stats.bytes_decoded {} != {decoded_bytes}", t.stats.bytes_decoded));
                }
            }
            Err(e) => self.fail(name, &e),
        }
    }

    /// Writes a batch's streams (concatenated) and its index entry: what nvCOMP decodes with
    /// `algorithm` (its name in nvCOMP's Python API), each stream's decoded size and the digests
    /// it must reproduce.
    fn dump_streams<D: AsRef<[u8]> + Sync>(
        &mut self,
        dir: &std::path::Path,
        name: &str,
        ds: &Dataset,
        chunk: usize,
        algorithm: &str,
        streams: &[&[u8]],
        decoded: &[D],
    ) -> Res<()> {
        let file = format!("{name}.bin");
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(streams.len());
        let mut sizes = Vec::with_capacity(streams.len());
        for s in streams {
            offsets.push(bytes.len());
            sizes.push(s.len());
            bytes.extend_from_slice(s);
        }
        std::fs::write(dir.join(&file), &bytes)?;
        let digests: Vec<String> = decoded.par_iter().map(|d| hex::encode(&Sha256::digest(d.as_ref())[..8])).collect();
        self.dump_index.push(json!({
            "name": name, "file": file, "algorithm": algorithm, "dataset": ds.name, "dtype": ds.dtype,
            "typesize": ds.typesize, "chunk_bytes": chunk, "n_streams": streams.len(), "offsets": offsets,
            "comp_sizes": sizes, "decoded_sizes": decoded.iter().map(|d| d.as_ref().len()).collect::<Vec<_>>(),
            "decoded_sha256_64": digests, "comp_bytes": bytes.len(),
            "decoded_bytes": decoded.iter().map(|d| d.as_ref().len()).sum::<usize>(),
        }));
        Ok(())
    }

    // -- zstd and deflate -------------------------------------------------------------------------

    /// A batch of zstd frames (at `level`, content size and no checksum, as zarr's `zstd` codec
    /// writes them): the zstd kernel.
    fn zstd_case(&mut self, ds: &Dataset, data: &[u8], chunk: usize, level: i32) -> Res<()> {
        let n = self.n_chunks(chunk);
        let name = format!("zstd-l{level}-{}-{}", ds.name, human(chunk));
        let chunks: Vec<&[u8]> = (0..n).map(|i| &data[i * chunk..(i + 1) * chunk]).collect();
        let frames: Vec<Vec<u8>> =
            chunks.par_iter().map(|c| zstd::bulk::compress(c, level)).collect::<Result<_, _>>()?;
        let cpu_check: Result<(), String> = (0..n).into_par_iter().try_for_each(|i| {
            let d =
                zstd::bulk::decompress(&frames[i], chunk).map_err(|e| format!("chunk {i}: libzstd rejects it: {e}"))?;
            if d == chunks[i] {
                Ok(())
            } else {
                Err(format!("chunk {i}: libzstd decode differs: {}", first_diff(&d, chunks[i])))
            }
        });
        let inputs: Vec<ChunkInput<'_>> = frames.iter().map(|f| ChunkInput::zstd(f).with_expected_len(chunk)).collect();
        let streams: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        self.codec_case("zstd", "Zstd", &name, ds, chunk, level, &inputs, &streams, &chunks, cpu_check)
    }

    /// A batch of zlib streams (flate2, level 6): the inflate kernel; the dump holds each
    /// stream's raw deflate body, the same bits, for nvCOMP's Deflate.
    fn deflate_case(&mut self, ds: &Dataset, data: &[u8], chunk: usize) -> Res<()> {
        use std::io::{Read as _, Write as _};
        let n = self.n_chunks(chunk);
        let name = format!("deflate-{}-{}", ds.name, human(chunk));
        let chunks: Vec<&[u8]> = (0..n).map(|i| &data[i * chunk..(i + 1) * chunk]).collect();
        let streams: Vec<Vec<u8>> = chunks
            .par_iter()
            .map(|c| {
                let mut enc =
                    flate2::write::ZlibEncoder::new(Vec::with_capacity(c.len() / 2), flate2::Compression::new(6));
                enc.write_all(c)?;
                enc.finish()
            })
            .collect::<Result<_, _>>()?;
        // 2-byte header, 4-byte Adler-32 trailer: what lies between is the raw deflate stream.
        let bodies: Vec<&[u8]> = streams.iter().map(|z| &z[2..z.len() - 4]).collect();
        let cpu_check: Result<(), String> = (0..n).into_par_iter().try_for_each(|i| {
            let mut d = Vec::with_capacity(chunk);
            flate2::read::DeflateDecoder::new(bodies[i])
                .read_to_end(&mut d)
                .map_err(|e| format!("chunk {i}: flate2 rejects the raw deflate body: {e}"))?;
            if d == chunks[i] {
                Ok(())
            } else {
                Err(format!("chunk {i}: flate2 decode differs: {}", first_diff(&d, chunks[i])))
            }
        });
        let inputs: Vec<ChunkInput<'_>> =
            streams.iter().map(|z| ChunkInput::zlib(z).with_expected_len(chunk)).collect();
        self.codec_case("deflate", "Deflate", &name, ds, chunk, 6, &inputs, &bodies, &chunks, cpu_check)
    }

    /// The row of a zstd or deflate case (compressed at `level`): verified against `expected`,
    /// timed, dumped (the dump's entry also names the level).
    fn codec_case(
        &mut self,
        kind: &str,
        algorithm: &str,
        name: &str,
        ds: &Dataset,
        chunk: usize,
        level: i32,
        inputs: &[ChunkInput<'_>],
        streams: &[&[u8]],
        expected: &[&[u8]],
        cpu_check: Result<(), String>,
    ) -> Res<()> {
        let n = inputs.len();
        let encoded: usize = streams.iter().map(|s| s.len()).sum();
        let mut row = json!({
            "kind": kind, "name": name, "dataset": ds.name, "dtype": ds.dtype, "typesize": ds.typesize,
            "level": level, "chunk_bytes": chunk, "n_chunks": n, "decoded_bytes": n * chunk, "encoded_bytes": encoded,
            "ratio": (n * chunk) as f64 / encoded as f64, "comparable": true, "note": "",
        });
        if let Err(e) = cpu_check {
            self.fail(name, &format!("CPU reference check: {e}"));
            row["verified"] = json!(false);
            self.rows.push(row);
            return Ok(());
        }
        self.finish_decode_case(name, &mut row, inputs, expected);
        if row["verified"] == json!(true)
            && let Some(dir) = self.dump.clone()
        {
            self.dump_streams(&dir, name, ds, chunk, algorithm, streams, expected)?;
            if let Some(entry) = self.dump_index.last_mut() {
                entry["level"] = json!(level);
            }
            row["dump"] = json!(name);
        }
        self.rows.push(row);
        Ok(())
    }

    // -- the demo volume ---------------------------------------------------------------------------

    /// The sharded array's inner zstd frames, as stored: decoded by the zstd kernel; libzstd is
    /// the CPU reference and nvCOMP's Zstd gets the same frames.
    fn demo_zstd_case(&mut self, demo: &Demo) -> Res<()> {
        let chunk = demo.zstd_chunk;
        let name = format!("zstd-demo-sharded-{}", human(chunk));
        let decoded: Result<Vec<Vec<u8>>, String> = demo
            .zstd_frames
            .par_iter()
            .enumerate()
            .map(|(i, f)| match zstd::bulk::decompress(f, chunk) {
                Ok(d) if d.len() == chunk => Ok(d),
                Ok(d) => Err(format!("frame {i} decodes to {} bytes, not {chunk}", d.len())),
                Err(e) => Err(format!("frame {i}: libzstd rejects it: {e}")),
            })
            .collect();
        let (decoded, cpu_check) = match decoded {
            Ok(d) => (d, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        };
        let expected: Vec<&[u8]> = decoded.iter().map(Vec::as_slice).collect();
        let inputs: Vec<ChunkInput<'_>> =
            demo.zstd_frames.iter().map(|f| ChunkInput::zstd(f).with_expected_len(chunk)).collect();
        let streams: Vec<&[u8]> = demo.zstd_frames.iter().map(Vec::as_slice).collect();
        self.codec_case(
            "zstd",
            "Zstd",
            &name,
            &DEMO_ZSTD,
            chunk,
            demo.zstd_level,
            &inputs,
            &streams,
            &expected,
            cpu_check,
        )
    }

    /// The blosc-lz4 array's frames, as stored (byte shuffle, c-blosc's own blocks and splits):
    /// damacy decodes whole frames (LZ4 and unshuffle kernels); nvCOMP's LZ4 gets every raw LZ4
    /// stream of those frames, each with its own decoded size. c-blosc is the reference for the
    /// frames, lz4_flex for the streams.
    fn demo_blosc_case(&mut self, demo: &Demo) -> Res<()> {
        let chunk = demo.blosc_chunk;
        let frames = &demo.blosc_frames;
        let n = frames.len();
        let name = format!("lz4-demo-blosc-{}", human(chunk));
        let mut lz4 = Vec::new(); // (frame, src offset, src length, decoded length)
        let mut other = 0usize;
        for (i, f) in frames.iter().enumerate() {
            let p = plan_frame(f)
                .map_err(|e| format!("{name}: frame {i}: blosc parse: {} at byte {}", e.reason, e.offset))?;
            for st in &p.streams {
                if st.codec == StreamCodec::Lz4 {
                    lz4.push((i, st.src_off as usize, st.src_len as usize, st.dst_len as usize));
                } else {
                    other += 1;
                }
            }
        }
        let decoded: Result<Vec<Vec<u8>>, String> = frames.par_iter().map(|f| blosc_decompress(f)).collect();
        let lz4_decoded: Result<Vec<Vec<u8>>, String> = lz4
            .par_iter()
            .map(|&(i, off, len, dst)| {
                lz4_flex::block::decompress(&frames[i][off..off + len], dst)
                    .map_err(|e| format!("frame {i}: lz4_flex rejects the stream at byte {off}: {e}"))
            })
            .collect();
        let cpu_check = match (&decoded, &lz4_decoded) {
            (Err(e), _) | (_, Err(e)) => Err(e.clone()),
            (Ok(d), Ok(_)) => match d.iter().position(|d| d.len() != chunk) {
                Some(i) => Err(format!("frame {i} decodes to {} bytes, not {chunk}", d[i].len())),
                None => Ok(()),
            },
        };
        let encoded: usize = frames.iter().map(Vec::len).sum();
        let stream_bytes: usize = lz4.iter().map(|s| s.2).sum();
        let mut row = json!({
            "kind": "lz4", "name": name, "dataset": DEMO_BLOSC.name, "dtype": DEMO_BLOSC.dtype,
            "typesize": DEMO_BLOSC.typesize, "chunk_bytes": chunk, "n_chunks": n, "decoded_bytes": n * chunk,
            "encoded_bytes": encoded, "lz4_stream_bytes": stream_bytes, "lz4_streams": lz4.len(),
            "other_streams": other, "ratio": (n * chunk) as f64 / encoded as f64, "comparable": true,
            "note": format!(
                "damacy decodes the whole blosc frames (LZ4 + unshuffle kernels); nvCOMP the frames' {} raw LZ4 streams{}",
                lz4.len(),
                if other == 0 { String::new() } else { format!(" ({other} streams stored raw are not in its batch)") }
            ),
        });
        let (decoded, lz4_decoded) = match (cpu_check, decoded, lz4_decoded) {
            (Ok(()), Ok(d), Ok(l)) => (d, l),
            (check, ..) => {
                self.fail(&name, &format!("CPU reference check: {}", check.err().unwrap_or_default()));
                row["verified"] = json!(false);
                self.rows.push(row);
                return Ok(());
            }
        };
        let inputs: Vec<ChunkInput<'_>> =
            frames.iter().map(|f| ChunkInput::blosc(f).with_expected_len(chunk)).collect();
        let expected: Vec<&[u8]> = decoded.iter().map(Vec::as_slice).collect();
        self.finish_decode_case(&name, &mut row, &inputs, &expected);
        if row["verified"] == json!(true)
            && !lz4.is_empty()
            && let Some(dir) = self.dump.clone()
        {
            let raw: Vec<&[u8]> = lz4.iter().map(|&(i, off, len, _)| &frames[i][off..off + len]).collect();
            self.dump_streams(&dir, &name, &DEMO_BLOSC, chunk, "LZ4", &raw, &lz4_decoded)?;
            row["dump"] = json!(name);
        }
        self.rows.push(row);
        Ok(())
    }

    // -- copy + unshuffle -------------------------------------------------------------------------

    fn shuffle_case(&mut self, data: &[u8], ts: usize, mode: i32, chunk: usize) -> Res<()> {
        let n = self.n_chunks(chunk);
        let kind = ["copy", "unshuffle", "bitunshuffle"][mode as usize];
        let name = format!("{kind}-ts{ts}-{}", human(chunk));
        let chunks: Vec<&[u8]> = (0..n).map(|i| &data[i * chunk..(i + 1) * chunk]).collect();
        // Random bytes defeat LZ4, so blosc stores every split raw: the device work is a copy
        // into scratch and the unshuffle back (or the copy alone for the baseline).
        let frames: Vec<Vec<u8>> =
            chunks.par_iter().map(|d| blosc_compress(d, 5, mode, ts, "lz4", 0)).collect::<Result<_, _>>()?;
        let want = [Shuffle::None, Shuffle::Byte, Shuffle::Bit][mode as usize];
        let mut problems = Vec::new();
        let (mut n_streams, mut n_jobs, mut blocksize) = (0usize, 0usize, 0u32);
        for (i, f) in frames.iter().enumerate() {
            let p = plan_frame(f).map_err(|e| format!("{name}: blosc parse: {} at byte {}", e.reason, e.offset))?;
            blocksize = blocksize.max(p.header.blocksize);
            n_streams += p.streams.len();
            n_jobs += p.shuffles.len();
            if p.header.memcpyed() {
                problems.push(format!("chunk {i} is memcpyed (stored unshuffled: no unshuffle work)"));
            } else if p.streams.iter().any(|s| s.codec != StreamCodec::Raw) {
                problems.push(format!("chunk {i} has compressed streams"));
            } else if want != Shuffle::None && p.shuffles.iter().any(|s| s.mode != want) {
                problems.push(format!("chunk {i} has a block without {want:?} shuffle"));
            }
            if problems.len() >= 3 {
                break;
            }
        }
        let cpu_check: Result<(), String> = (0..n).into_par_iter().try_for_each(|i| {
            let c = blosc_decompress(&frames[i])?;
            if c == chunks[i] {
                Ok(())
            } else {
                Err(format!("chunk {i}: blosc C decode differs: {}", first_diff(&c, chunks[i])))
            }
        });
        let mut row = json!({
            "kind": kind, "name": name, "typesize": ts, "chunk_bytes": chunk, "n_chunks": n,
            "decoded_bytes": n * chunk, "encoded_bytes": frames.iter().map(Vec::len).sum::<usize>(),
            "blocksize": blocksize, "n_streams": n_streams, "unshuffle_jobs": n_jobs,
            "note": problems.join("; "),
        });
        if !problems.is_empty() {
            self.fail(&name, &format!("frames are not copy+{kind}: {}", problems.join("; ")));
            row["verified"] = json!(false);
            self.rows.push(row);
            return Ok(());
        }
        if let Err(e) = cpu_check {
            self.fail(&name, &format!("CPU reference check: {e}"));
            row["verified"] = json!(false);
            self.rows.push(row);
            return Ok(());
        }
        let inputs: Vec<ChunkInput<'_>> =
            frames.iter().map(|f| ChunkInput::blosc(f).with_expected_len(chunk)).collect();
        self.finish_decode_case(&name, &mut row, &inputs, &chunks);
        self.rows.push(row);
        Ok(())
    }

    /// For each unshuffle row, the unshuffle kernel's own time estimated as the wave's kernel
    /// time minus the copy baseline's (same typesize, chunk size and stream layout).
    fn derive_unshuffle_only(&mut self) {
        let mut copy: HashMap<(u64, u64), f64> = HashMap::new();
        for r in &self.rows {
            if r["kind"] == "copy"
                && let (Some(ts), Some(c), Some(k)) =
                    (r["typesize"].as_u64(), r["chunk_bytes"].as_u64(), r["kernel_s"].as_f64())
            {
                copy.insert((ts, c), k);
            }
        }
        for r in &mut self.rows {
            if !(r["kind"] == "unshuffle" || r["kind"] == "bitunshuffle") {
                continue;
            }
            let (Some(ts), Some(c), Some(k), Some(bytes)) = (
                r["typesize"].as_u64(),
                r["chunk_bytes"].as_u64(),
                r["kernel_s"].as_f64(),
                r["decoded_bytes"].as_u64(),
            ) else {
                continue;
            };
            if let Some(base) = copy.get(&(ts, c)) {
                let only = k - base;
                r["unshuffle_only_s"] = json!(only);
                r["unshuffle_only_gbps"] = json!(gbps(bytes as usize, only));
            }
        }
    }

    // -- assemble ---------------------------------------------------------------------------------

    fn assemble_case(&mut self, data: &[u8], chunk: usize) -> Res<()> {
        let n_src = self.n_chunks(chunk);
        let elems = chunk / 2;
        let rows = ((elems / 2) as f64).sqrt() as usize;
        let cols = elems / rows;
        let (h, w) = (rows / 2, cols / 2);
        let n_crops = 4 * n_src;
        let mut src = self.device.alloc(n_src * chunk)?;
        self.device.upload(&data[..n_src * chunk], &mut src, 0)?;
        let mut rng = 0x00C0_FFEE_u64;
        let mut next = |m: usize| {
            rng = splitmix64(rng);
            (rng % m as u64) as usize
        };
        let crops: Vec<(usize, usize, usize)> =
            (0..n_crops).map(|_| (next(n_src), next(rows - h + 1), next(cols - w + 1))).collect();
        for (dst_dtype, kind) in [(Dtype::U16, "assemble"), (Dtype::F32, "assemble-cast")] {
            let name = format!("{kind}-{}", human(chunk));
            let dsz = dst_dtype.size();
            let out_len = n_crops * h * w * dsz;
            let mut dst = self.device.alloc(out_len)?;
            let job = |k: usize, c: usize, r0: usize, c0: usize, shape: [u64; 3]| {
                AssembleJob::chunk_region(
                    c * chunk,
                    &[1, rows as u64, cols as u64],
                    None,
                    &[0, r0 as u64, c0 as u64],
                    &shape,
                    0,
                    &[n_crops as u64, h as u64, w as u64],
                    &[k as u64, 0, 0],
                    Dtype::U16,
                    dst_dtype,
                    false,
                )
            };
            let jobs: Vec<AssembleJob> = crops
                .iter()
                .enumerate()
                .map(|(k, &(c, r0, c0))| job(k, c, r0, c0, [1, h as u64, w as u64]))
                .collect::<Result<_, _>>()?;
            // The same number of one-element jobs: what a call costs besides moving the bytes
            // (job table upload, launch, status read-back).
            let tiny: Vec<AssembleJob> = crops
                .iter()
                .enumerate()
                .map(|(k, &(c, r0, c0))| job(k, c, r0, c0, [1, 1, 1]))
                .collect::<Result<_, _>>()?;
            let mut asm = Assembler::new(&self.device, n_crops)?;
            let mut row = json!({
                "kind": kind, "name": name, "chunk_bytes": chunk, "chunk_shape": [rows, cols],
                "crop_shape": [h, w], "n_source_chunks": n_src, "n_crops": n_crops,
                "src_dtype": "uint16", "dst_dtype": if dsz == 2 { "uint16" } else { "float32" },
                "read_bytes": n_crops * h * w * 2, "out_bytes": out_len,
            });
            // --model: the jobs run once and predicted; no host check, no timed runs. Sampled
            // by --model-mib (of the bytes read) like the decode cases: every k-th crop runs,
            // in launches shaped for all of them (elements per thread follow the total work).
            if let Some(m) = &self.model {
                let read = n_crops * h * w * 2;
                let k = self.model_mib.map_or(1, |mib| read.div_ceil((mib << 20).max(1)).max(1));
                let sub: Vec<AssembleJob> = jobs.iter().step_by(k).cloned().collect();
                // (a model exists only in emulator builds: `--model` needs feature emulate)
                #[cfg(feature = "emulate")]
                asm.shape_as_scaled(k as u64);
                m.reset();
                let res = asm.run(&src, &mut dst, &sub).map_err(|e| e.to_string());
                match res.and_then(|r| r.into_iter().find_map(Result::err).map_or(Ok(()), |e| Err(e.to_string()))) {
                    Ok(()) => {
                        row["verified"] = json!(true);
                        row["model_sample"] = json!({"every": k, "crops": sub.len(), "of": n_crops});
                        gpu_model::fill_row(&mut row, &[m.collect_scaled(k)], out_len);
                    }
                    Err(e) => {
                        self.fail(&name, &e);
                        row["verified"] = json!(false);
                    }
                }
                self.rows.push(row);
                continue;
            }
            // Verify once against a host crop (and cast).
            let check = (|| -> Result<(), String> {
                for (i, r) in asm.run(&src, &mut dst, &jobs).map_err(|e| e.to_string())?.into_iter().enumerate() {
                    r.map_err(|e| format!("job {i}: {e}"))?;
                }
                let mut host = vec![0u8; out_len];
                self.device.download(&dst, 0, &mut host).map_err(|e| e.to_string())?;
                crops.par_iter().enumerate().try_for_each(|(k, &(c, r0, c0))| {
                    let mut want = Vec::with_capacity(h * w * dsz);
                    for r in 0..h {
                        let at = c * chunk + ((r0 + r) * cols + c0) * 2;
                        for e in data[at..at + 2 * w].chunks_exact(2) {
                            let v = u16::from_le_bytes([e[0], e[1]]);
                            if dsz == 2 {
                                want.extend_from_slice(&v.to_le_bytes());
                            } else {
                                want.extend_from_slice(&f32::from(v).to_le_bytes());
                            }
                        }
                    }
                    let got = &host[k * h * w * dsz..(k + 1) * h * w * dsz];
                    if got == want.as_slice() { Ok(()) } else { Err(format!("crop {k}: {}", first_diff(got, &want))) }
                })
            })();
            if let Err(e) = check {
                self.fail(&name, &e);
                row["verified"] = json!(false);
                self.rows.push(row);
                continue;
            }
            row["verified"] = json!(true);
            // Per rep: wall time of the call, and the device time of its kernels (timing events).
            let mut time = |jobs: &[AssembleJob]| -> Res<(Vec<f64>, Vec<f64>, Predicted)> {
                let (mut v, mut k, mut p) = (Vec::new(), Vec::new(), Vec::new());
                for rep in 0..self.warmup + self.reps {
                    if let Some(m) = &self.model {
                        m.reset();
                    }
                    let t = Instant::now();
                    let res = asm.run(&src, &mut dst, jobs)?;
                    let s = t.elapsed().as_secs_f64();
                    if let Some(e) = res.into_iter().find_map(Result::err) {
                        return Err(e.into());
                    }
                    if rep >= self.warmup {
                        v.push(s);
                        k.push(asm.kernel_time().as_secs_f64());
                        if let Some(m) = &self.model {
                            p.push(m.collect());
                        }
                    }
                }
                Ok((v, k, p))
            };
            match (time(&jobs), time(&tiny)) {
                (Ok((full, kernel, predicted)), Ok((small, _, _))) => {
                    gpu_model::fill_row(&mut row, &predicted, out_len);
                    let (wall, base) = (median(&full), median(&small));
                    let kernel = median(&kernel);
                    row["kernel_s"] = json!(kernel);
                    row["copy_equiv_gbps_kernel"] = json!(gbps((n_crops * h * w * (2 + dsz)) / 2, kernel));
                    let net = wall - base;
                    // A copy of N bytes reads N and writes N: count (read + written) / 2.
                    let equiv = (n_crops * h * w * (2 + dsz)) / 2;
                    row["wall_s"] = json!(wall);
                    row["wall_s_min"] = json!(min(&full));
                    row["overhead_s"] = json!(base);
                    row["net_s"] = json!(net);
                    row["out_gbps_wall"] = json!(gbps(out_len, wall));
                    row["copy_equiv_bytes"] = json!(equiv);
                    row["copy_equiv_gbps_wall"] = json!(gbps(equiv, wall));
                    row["copy_equiv_gbps_net"] = json!(gbps(equiv, net));
                    row["reps"] = json!(full.len());
                }
                (Err(e), _) | (_, Err(e)) => self.fail(&name, &e.to_string()),
            }
            self.rows.push(row);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Report

fn fmt_opt(v: &Value, digits: usize) -> String {
    v.as_f64().map_or_else(|| "-".into(), |x| format!("{x:.digits$}"))
}

fn table(rows: &[Value], label: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\nDecode cases ({label}; GB/s = 1e9 decoded bytes/s, medians):");
    let _ = writeln!(
        s,
        "{:<28} {:>6} {:>7} {:>6} {:>12} {:>10} {:>14}  note",
        "case", "chunks", "ratio", "verif", "kernel GB/s", "wall GB/s", "unshuf-only"
    );
    for r in rows.iter().filter(|r| !r["kind"].as_str().unwrap_or("").starts_with("assemble")) {
        let _ = writeln!(
            s,
            "{:<28} {:>6} {:>7} {:>6} {:>12} {:>10} {:>14}  {}",
            r["name"].as_str().unwrap_or("?"),
            r["n_chunks"].to_string(),
            fmt_opt(&r["ratio"], 2),
            if r["verified"] == json!(true) { "ok" } else { "FAIL" },
            fmt_opt(&r["kernel_gbps"], 2),
            fmt_opt(&r["wall_gbps"], 2),
            fmt_opt(&r["unshuffle_only_gbps"], 2),
            r["note"].as_str().unwrap_or("")
        );
    }
    let asm: Vec<&Value> = rows.iter().filter(|r| r["kind"].as_str().unwrap_or("").starts_with("assemble")).collect();
    if !asm.is_empty() {
        let _ = writeln!(
            s,
            "\nAssemble ({label}; wall time of Assembler::run incl. job upload and status read-back; \
             net = wall - the same number of 1-element jobs; kernel = timing events around the launches; \
             copy-equiv = (read + written) / 2):"
        );
        let _ = writeln!(
            s,
            "{:<22} {:>7} {:>6} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}",
            "case", "crops", "verif", "crop", "out MiB", "out GB/s", "equiv GB/s", "equiv net", "equiv kernel"
        );
        for r in asm {
            let _ = writeln!(
                s,
                "{:<22} {:>7} {:>6} {:>10} {:>10.1} {:>12} {:>12} {:>12} {:>12}",
                r["name"].as_str().unwrap_or("?"),
                r["n_crops"].to_string(),
                if r["verified"] == json!(true) { "ok" } else { "FAIL" },
                format!("{}x{}", r["crop_shape"][0], r["crop_shape"][1]),
                r["out_bytes"].as_f64().unwrap_or(0.0) / f64::from(1 << 20),
                fmt_opt(&r["out_gbps_wall"], 2),
                fmt_opt(&r["copy_equiv_gbps_wall"], 2),
                fmt_opt(&r["copy_equiv_gbps_net"], 2),
                fmt_opt(&r["copy_equiv_gbps_kernel"], 2),
            );
        }
    }
    s
}

fn run(args: &Args) -> Res<ExitCode> {
    let (device, label) = match open_device(&args.device) {
        Ok(d) => d,
        Err(reason) => {
            eprintln!("kernel_bench: SKIPPED: no usable {} device: {reason}", args.device);
            return Ok(ExitCode::from(EXIT_NO_DEVICE));
        }
    };
    let sizes = args.sizes.clone().unwrap_or_else(|| {
        if args.small { vec![64 << 10, 256 << 10] } else { vec![64 << 10, 256 << 10, 1 << 20, 4 << 20] }
    });
    let batch = args.batch_mib.map_or(if args.small { 1 << 20 } else { 256 << 20 }, |m| m << 20);
    let reps = args.reps.unwrap_or(if args.small { 3 } else { 15 });
    let warmup = args.warmup.unwrap_or(if args.small { 1 } else { 3 });
    let demo = match (&args.dataset, args.cases.iter().any(|c| c == "demo")) {
        (Some(dir), true) => Some(Demo::load(dir, batch)?),
        _ => None,
    };
    let cap = sizes.iter().map(|&s| (batch / s).max(1) * s).max().unwrap_or(batch);
    let cap = demo.as_ref().map_or(cap, |d| cap.max(d.max_batch_bytes()));
    let config = DecodeConfig::default()
        .with_wave_src_bytes(cap + cap / 8 + (1 << 20))
        .with_wave_dst_bytes(cap + (1 << 20))
        .with_wave_streams(if args.small { 1 << 16 } else { 1 << 20 })
        .with_teams(args.teams);
    // Budgets from the waves this run decodes: a 256 MiB batch needs more pinned staging than
    // DecodeConfig's default 256 MiB host budget (two slots of sources and tables).
    let (device_bytes, host_bytes) = (config.device_bytes(), config.host_bytes());
    let config = config.with_device_budget_bytes(device_bytes).with_host_budget_bytes(host_bytes);
    let decoder = Decoder::new(&device, config)?;
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir)?;
    }
    println!(
        "kernel_bench on {} [{label}]: chunk sizes {}, batch {} per case, {warmup} warm-up + {reps} timed runs; \
         decoder budgets {} device, {} pinned host",
        device.describe(),
        sizes.iter().map(|&s| human(s)).collect::<Vec<_>>().join(", "),
        human(batch),
        human(device_bytes),
        human(host_bytes)
    );
    println!("{}", device.kernel_images());
    let mut b = Bench {
        device,
        label,
        decoder,
        sizes,
        batch,
        reps,
        warmup,
        rows: Vec::new(),
        failures: Vec::new(),
        dump: args.dump.clone(),
        dump_index: Vec::new(),
        json: args.json.clone(),
        small: args.small,
        model: match &args.model {
            Some(gpu) => Some(gpu_model::Model::new(gpu)?),
            None => None,
        },
        model_mib: args.model_mib,
    };
    let started = Instant::now();
    let want = |c: &str| args.cases.iter().any(|x| x == c);
    let picked = |d: &Dataset| args.datasets.as_ref().is_none_or(|n| n.iter().any(|x| x == d.name));
    let sizes = b.sizes.clone();
    if want("lz4") || want("assemble") {
        for ds in DATASETS.iter().filter(|d| picked(d)) {
            let assemble_here = want("assemble") && ds.name == "u16-smooth";
            if !want("lz4") && !assemble_here {
                continue;
            }
            let data = make_dataset(ds, cap);
            for &chunk in &sizes {
                if want("lz4") {
                    eprintln!("[{:>6.1} s] lz4 {} {}", started.elapsed().as_secs_f64(), ds.name, human(chunk));
                    b.lz4_case(ds, &data, chunk)?;
                    b.save(false)?;
                }
                if assemble_here {
                    eprintln!("[{:>6.1} s] assemble {}", started.elapsed().as_secs_f64(), human(chunk));
                    b.assemble_case(&data, chunk)?;
                    b.save(false)?;
                }
            }
        }
    }
    if want("shuffle") {
        let data = random_bytes(cap, 0x5EED);
        for ts in [2usize, 4] {
            for mode in 0..3 {
                for &chunk in &sizes {
                    eprintln!(
                        "[{:>6.1} s] shuffle mode {mode} ts{ts} {}",
                        started.elapsed().as_secs_f64(),
                        human(chunk)
                    );
                    b.shuffle_case(&data, ts, mode, chunk)?;
                    b.save(false)?;
                }
            }
        }
        b.derive_unshuffle_only();
    }
    if let Some(demo) = &demo {
        eprintln!("[{:>6.1} s] demo volume {}", started.elapsed().as_secs_f64(), demo.root.display());
        b.demo_zstd_case(demo)?;
        b.save(false)?;
        b.demo_blosc_case(demo)?;
        b.save(false)?;
    }
    if want("zstd") || want("deflate") {
        // Last (the GPU run's time limit cuts the end first). Unshuffled, as zarr's `bytes` +
        // `zstd`/`gzip` chains store them: the label image (long matches, high ratio) and a
        // smooth field with noisy low bits (literals, short matches, ratio ~1.05), and noise
        // (raw / stored blocks: copies). zstd at each of --zstd-levels, deflate at level 6.
        let codec_sets = DATASETS
            .iter()
            .filter(|d| matches!(d.name, "u16-labels" | "u16-smooth"))
            .chain([&NOISE])
            .filter(|d| picked(d));
        for ds in codec_sets {
            let data = make_dataset(ds, cap);
            for &chunk in &sizes {
                if want("zstd") {
                    for &level in &args.zstd_levels {
                        eprintln!(
                            "[{:>6.1} s] zstd level {level} {} {}",
                            started.elapsed().as_secs_f64(),
                            ds.name,
                            human(chunk)
                        );
                        b.zstd_case(ds, &data, chunk, level)?;
                        b.save(false)?;
                    }
                }
                if want("deflate") {
                    eprintln!("[{:>6.1} s] deflate {} {}", started.elapsed().as_secs_f64(), ds.name, human(chunk));
                    b.deflate_case(ds, &data, chunk)?;
                    b.save(false)?;
                }
            }
        }
    }
    print!("{}", table(&b.rows, b.label));
    print!("{}", gpu_model::table(&b.rows));
    if !b.failures.is_empty() {
        println!("\n{} case(s) FAILED verification; they report no numbers:", b.failures.len());
        for f in &b.failures {
            println!("  {f}");
        }
    }
    println!("\n({} s in all)", started.elapsed().as_secs());
    b.save(true)?;
    if let Some(path) = &b.json {
        println!("wrote {}", path.display());
    }
    if let Some(dir) = &b.dump {
        println!("dumped {} batches (LZ4, Zstd, Deflate streams) to {}", b.dump_index.len(), dir.display());
    }
    Ok(if b.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kernel_bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
