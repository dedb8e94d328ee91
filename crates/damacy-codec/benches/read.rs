//! CPU read benchmark: random unaligned crops of the arrays `benches/read/make_data.py` writes,
//! read by damacy's [`Reader::read_batch`] (one call per batch) beside zarrs'
//! `retrieve_array_subset` (one call per crop), with the same number of threads.
//!
//! `benches/read/compare.py` drives it (and runs tensorstore and zarr-python beside it). It
//! reads the crop list the driver wrote, so every reader sees the same crops:
//!
//! ```text
//! DAMACY_BENCH_DATA=/tmp/damacy-bench-data cargo bench -p damacy-codec --bench read
//! ```
//!
//! Environment: `DAMACY_BENCH_DATA` (the data folder, default `/tmp/damacy-bench-data`),
//! `DAMACY_BENCH_CROPS` (the crop list, default `$DAMACY_BENCH_DATA/crops.json`),
//! `DAMACY_BENCH_THREADS` (default 2), `DAMACY_BENCH_STORE_URL` (damacy reads the arrays from
//! this `http://` or `s3://` copy of the data folder instead; `DAMACY_BENCH_S3_ENDPOINT` for an
//! S3-compatible server; used by `benches/remote/compare.py`), `DAMACY_BENCH_READERS` (a comma list of readers to run,
//! default all; e.g. `damacy` alone to profile it). One JSON object per line goes to stdout per (array,
//! reader), plus one `distinct` line per array; a readable summary goes to stderr.
//!
//! Readers:
//! - `damacy`: one plan and one `read_batch_into` per batch, into one output buffer the
//!   bench owns and reuses; I/O threads = compute threads = N. Heap allocations per batch are
//!   counted by a counting global allocator, apart for the plan and for the read.
//! - `zarrs`: `retrieve_array_subset_opt` for each crop in turn, on a rayon pool of N threads
//!   with `CodecOptions::concurrent_target(N)` (zarrs parallelises across the chunks of a crop).
//! - `zarrs-par`: the same call for the crops of a batch in parallel on the N-thread pool,
//!   `concurrent_target(1)` each: a stronger use of zarrs for many small crops.
//! - `decode-probe` (a `probe` line, not a reader): the distinct chunks of the first timed
//!   batch decoded with the array's codec chain on the N-thread pool, twice: keeping every
//!   decoded chunk until all are done (what `read_batch` does before it assembles) and dropping
//!   each as soon as it is decoded (what a fused decode-then-scatter would do). The gap is the
//!   cost of the retained buffers: fresh pages, page faults, cache misses.
//!
//! "Distinct chunk bytes" of a batch: the encoded sizes of the distinct chunks (inner chunks
//! of shards) that its crops touch, each counted once: for a sharded array the lengths of the
//! byte ranges zarrs reads from the shard indexes (`subchunk_byte_range`), for an unsharded
//! one the sizes of the chunk objects (`size_key`). Shard-index bytes are reported apart.

use std::collections::BTreeSet;
use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use damacy_codec::{
    ArrayHandle, ArrayOptions, ExecutorKind, Output, Reader, ReaderConfig, Region, StatsSnapshot, Store, StoreOptions,
};
use rayon::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use zarrs::array::{
    Array, ArrayBytes, ArrayShardedReadableExt, ArrayShardedReadableExtCache, ArraySubset, ArrayToBytesCodecTraits,
    CodecOptions,
};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::ReadableStorageTraits;
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::storage_adapter::performance_metrics::PerformanceMetricsStorageAdapter;

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Counts heap allocations (calls and bytes) of the whole process.
struct Counting;

static ALLOCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static ALLOC_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are atomics.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ALLOC_BYTES.fetch_add(layout.size() as u64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on as it is.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ALLOC_BYTES.fetch_add(new_size as u64, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// (allocations, bytes) so far.
fn allocations() -> (u64, u64) {
    (ALLOCS.load(std::sync::atomic::Ordering::Relaxed), ALLOC_BYTES.load(std::sync::atomic::Ordering::Relaxed))
}
type Metered = PerformanceMetricsStorageAdapter<FilesystemStore>;

/// The crop list `compare.py` writes.
#[derive(Debug, Deserialize)]
struct Crops {
    /// Crop shape.
    crop: Vec<u64>,
    /// Arrays (paths in the data folder) to read.
    arrays: Vec<String>,
    /// Leading batches read once before timing.
    warmup_batches: usize,
    /// Crop origins, batch by batch.
    batches: Vec<Vec<Vec<u64>>>,
}

/// What one timed batch cost.
#[derive(Debug, Default, Clone)]
struct BatchCost {
    seconds: f64,
    storage_requests: u64,
    bytes_read: u64,
    os_read_bytes: u64,
    os_read_calls: u64,
    cpu_seconds: f64,
    damacy: Option<StatsSnapshot>,
    /// Heap allocations (calls, bytes) while planning and while reading into the output.
    allocs: Option<[(u64, u64); 2]>,
}

/// The process's read counters (`rchar`, `syscr` of `/proc/self/io`: every byte read through
/// `read`/`pread`, page cache hits included) and CPU time (`utime + stime` of `/proc/self/stat`,
/// in clock ticks).
#[derive(Debug, Clone, Copy, Default)]
struct OsIo {
    rchar: u64,
    syscr: u64,
    cpu_ticks: u64,
}

/// Clock ticks per second of `/proc/self/stat` (`USER_HZ`, 100 on Linux x86 and arm64).
const USER_HZ: f64 = 100.0;

impl OsIo {
    fn now() -> Self {
        let Ok(text) = std::fs::read_to_string("/proc/self/io") else { return Self::default() };
        let field = |name: &str| {
            text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0)
        };
        let cpu_ticks = std::fs::read_to_string("/proc/self/stat").ok().map_or(0, |stat| {
            // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            rest.split_whitespace().skip(11).take(2).filter_map(|v| v.parse::<u64>().ok()).sum()
        });
        Self { rchar: field("rchar:"), syscr: field("syscr:"), cpu_ticks }
    }

    fn cpu_seconds_since(self, earlier: Self) -> f64 {
        self.cpu_ticks.saturating_sub(earlier.cpu_ticks) as f64 / USER_HZ
    }

    /// Counters since `earlier`, less the cost of reading `/proc/self/io` itself (`probe`).
    fn since(self, earlier: Self, probe: Self) -> Self {
        Self {
            rchar: self.rchar.saturating_sub(earlier.rchar).saturating_sub(probe.rchar),
            syscr: self.syscr.saturating_sub(earlier.syscr).saturating_sub(probe.syscr),
            cpu_ticks: self.cpu_ticks.saturating_sub(earlier.cpu_ticks),
        }
    }

    /// What one `now()` adds to the counters.
    fn probe_cost() -> Self {
        let a = Self::now();
        let b = Self::now();
        Self { rchar: b.rchar - a.rchar, syscr: b.syscr - a.syscr, cpu_ticks: 0 }
    }
}

/// CPU that other processes use while a reader runs: the machine's busy time (`/proc/stat`)
/// less this process's, over the wall time.
struct LoadWindow {
    machine: u64,
    own: u64,
    started: Instant,
}

impl LoadWindow {
    fn machine_busy_ticks() -> u64 {
        let Ok(text) = std::fs::read_to_string("/proc/stat") else { return 0 };
        let Some(cpu) = text.lines().next() else { return 0 };
        let v: Vec<u64> = cpu.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal: everything but idle and iowait.
        v.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, x)| x).sum()
    }

    fn start() -> Self {
        Self { machine: Self::machine_busy_ticks(), own: OsIo::now().cpu_ticks, started: Instant::now() }
    }

    /// Cores' worth of CPU other processes used since `start`.
    fn other_cores(&self) -> f64 {
        let machine = Self::machine_busy_ticks().saturating_sub(self.machine);
        let own = OsIo::now().cpu_ticks.saturating_sub(self.own);
        machine.saturating_sub(own) as f64 / USER_HZ / self.started.elapsed().as_secs_f64()
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_owned())
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { f64::midpoint(values[n / 2 - 1], values[n / 2]) }
}

fn median_of(costs: &[BatchCost], f: impl Fn(&BatchCost) -> f64) -> f64 {
    let mut v: Vec<f64> = costs.iter().map(f).collect();
    median(&mut v)
}

/// Grid cells (of `cell` elements) that the box `start + shape` touches, in C order.
fn cells(start: &[u64], shape: &[u64], cell: &[u64]) -> Vec<Vec<u64>> {
    let lo: Vec<u64> = start.iter().zip(cell).map(|(s, c)| s / c).collect();
    let hi: Vec<u64> = start.iter().zip(shape).zip(cell).map(|((s, n), c)| (s + n - 1) / c).collect();
    let mut out = Vec::new();
    let mut idx = lo.clone();
    loop {
        out.push(idx.clone());
        let mut axis = idx.len();
        loop {
            if axis == 0 {
                return out;
            }
            axis -= 1;
            if idx[axis] < hi[axis] {
                idx[axis] += 1;
                break;
            }
            idx[axis] = lo[axis];
        }
    }
}

/// Encoded bytes of the distinct chunks one batch touches, and of the shard indexes it needs.
struct Distinct {
    touches: usize,
    chunks: usize,
    chunk_bytes: u64,
    shards: usize,
    index_bytes: u64,
}

fn distinct(
    info: &ArrayHandle,
    zarrs_array: &Array<Metered>,
    cache: &ArrayShardedReadableExtCache,
    storage: &FilesystemStore,
    crop: &[u64],
    batch: &[Vec<u64>],
) -> BenchResult<Distinct> {
    let unit = info.decode_shape().to_vec();
    let all: Vec<Vec<u64>> = batch.iter().flat_map(|o| cells(o, crop, &unit)).collect();
    let touches = all.len();
    let unique: BTreeSet<Vec<u64>> = all.into_iter().collect();
    let mut d = Distinct { touches, chunks: unique.len(), chunk_bytes: 0, shards: 0, index_bytes: 0 };
    if let Some(layout) = &info.shard {
        for c in &unique {
            match zarrs_array.subchunk_byte_range(cache, c)? {
                Some(ByteRange::FromStart(_, Some(n)) | ByteRange::Suffix(n)) => d.chunk_bytes += n,
                Some(other) => return Err(format!("unexpected byte range {other:?} for inner chunk {c:?}").into()),
                None => {}
            }
        }
        let shards: BTreeSet<Vec<u64>> =
            unique.iter().map(|c| c.iter().zip(&layout.chunks_per_shard).map(|(i, n)| i / n).collect()).collect();
        d.shards = shards.len();
        d.index_bytes = shards.len() as u64 * layout.index_encoded_size;
    } else {
        for c in &unique {
            d.chunk_bytes += storage.size_key(&zarrs_array.chunk_key(c))?.unwrap_or(0);
        }
    }
    Ok(d)
}

/// Decode the distinct chunks of one batch with the array's chain, keeping all outputs or
/// dropping each at once; decoded MB/s (median of 5) for each.
fn decode_probe(
    info: &ArrayHandle,
    zarrs_array: &Array<Metered>,
    cache: &ArrayShardedReadableExtCache,
    pool: &rayon::ThreadPool,
    crop: &[u64],
    batch: &[Vec<u64>],
) -> BenchResult<Value> {
    let unit = info.decode_shape().to_vec();
    let touched: BTreeSet<Vec<u64>> = batch.iter().flat_map(|o| cells(o, crop, &unit)).collect();
    let mut encoded = Vec::with_capacity(touched.len());
    for c in &touched {
        let bytes = if info.shard.is_some() {
            zarrs_array.retrieve_encoded_subchunk(cache, c)?
        } else {
            zarrs_array.retrieve_encoded_chunk(c)?
        };
        encoded.extend(bytes);
    }
    let chain = info.decode_chain();
    let shape: Vec<std::num::NonZeroU64> =
        unit.iter().map(|&u| std::num::NonZeroU64::new(u).ok_or("zero-sized chunk")).collect::<Result<_, _>>()?;
    let (data_type, fill_value) = (zarrs_array.data_type().clone(), zarrs_array.fill_value().clone());
    let options = CodecOptions::default().with_concurrent_target(1);
    let decode = |b: &Vec<u8>| -> BenchResult<Vec<u8>> {
        let d = chain.decode(std::borrow::Cow::Borrowed(b.as_slice()), &shape, &data_type, &fill_value, &options)?;
        Ok(d.into_fixed()?.into_owned())
    };
    let decoded_bytes = (encoded.len() as u64 * unit.iter().product::<u64>() * info.dtype.size() as u64) as f64;
    let (mut keep, mut drop_each) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let outs: Vec<Vec<u8>> = pool.install(|| encoded.par_iter().map(decode).collect::<BenchResult<_>>())?;
        keep.push(decoded_bytes / t.elapsed().as_secs_f64() / 1e6);
        drop(outs);
        let t = Instant::now();
        pool.install(|| {
            encoded.par_iter().try_for_each(|b| {
                std::hint::black_box(decode(b)?);
                BenchResult::Ok(())
            })
        })?;
        drop_each.push(decoded_bytes / t.elapsed().as_secs_f64() / 1e6);
    }
    let (keep, drop_each) = (median(&mut keep), median(&mut drop_each));
    eprintln!(
        "{:>14} decode probe: {} chunks, {keep:.0} MB/s keeping outputs, {drop_each:.0} MB/s dropping each",
        info.path.trim_start_matches('/'),
        encoded.len()
    );
    Ok(json!({
        "kind": "probe",
        "array": info.path.trim_start_matches('/'),
        "chunks": encoded.len(),
        "decoded_mb": decoded_bytes / 1e6,
        "decode_keep_mb_per_s": keep,
        "decode_drop_each_mb_per_s": drop_each,
    }))
}

fn regions(crop: &[u64], batch: &[Vec<u64>]) -> Vec<Region> {
    batch.iter().map(|o| Region::new(o.clone(), crop.to_vec())).collect()
}

/// damacy: one plan and one `read_batch_into` per batch, into a buffer the bench owns.
fn run_damacy(
    reader: &Reader,
    info: &ArrayHandle,
    crops: &Crops,
    probe: OsIo,
) -> BenchResult<(Vec<BatchCost>, StatsSnapshot, String)> {
    let start = reader.stats();
    let mut digest = String::new();
    for batch in &crops.batches[..crops.warmup_batches] {
        std::hint::black_box(reader.read_batch(info, &regions(&crops.crop, batch))?);
    }
    let mut out = Vec::new();
    let mut costs = Vec::new();
    for batch in &crops.batches[crops.warmup_batches..] {
        let regions = regions(&crops.crop, batch);
        let before = reader.stats();
        let os0 = OsIo::now();
        let t = Instant::now();
        let a0 = allocations();
        let plan = reader.plan(info, &regions)?;
        let a1 = allocations();
        out.resize(plan.nbytes(), 0);
        let a2 = allocations();
        reader.read_batch_into(&plan, Output::Host(&mut out))?;
        let a3 = allocations();
        let seconds = t.elapsed().as_secs_f64();
        let allocs = [(a1.0 - a0.0, a1.1 - a0.1), (a3.0 - a2.0, a3.1 - a2.1)];
        let os1 = OsIo::now();
        let os = os1.since(os0, probe);
        if digest.is_empty() {
            digest = hex::encode(Sha256::digest(&out));
        }
        std::hint::black_box(&out);
        let d = reader.stats().since(&before);
        costs.push(BatchCost {
            seconds,
            storage_requests: d.storage_requests,
            bytes_read: d.bytes_read,
            os_read_bytes: os.rchar,
            os_read_calls: os.syscr,
            cpu_seconds: os1.cpu_seconds_since(os0),
            damacy: Some(d),
            allocs: Some(allocs),
        });
    }
    Ok((costs, reader.stats().since(&start), digest))
}

/// zarrs: `retrieve_array_subset_opt` per crop, in turn (`parallel == false`) or the crops of
/// a batch in parallel.
fn run_zarrs(
    pool: &rayon::ThreadPool,
    array: &Array<Metered>,
    metrics: &Metered,
    threads: usize,
    parallel: bool,
    crops: &Crops,
    probe: OsIo,
) -> BenchResult<Vec<BatchCost>> {
    let options = CodecOptions::default().with_concurrent_target(if parallel { 1 } else { threads });
    let read_batch = |batch: &[Vec<u64>]| -> BenchResult<Vec<Vec<u8>>> {
        let one = |o: &Vec<u64>| -> BenchResult<Vec<u8>> {
            let subset = ArraySubset::new_with_start_shape(o.clone(), crops.crop.clone())?;
            let bytes: ArrayBytes<'static> = array.retrieve_array_subset_opt(&subset, &options)?;
            Ok(bytes.into_fixed()?.into_owned())
        };
        pool.install(|| if parallel { batch.par_iter().map(one).collect() } else { batch.iter().map(one).collect() })
    };
    for batch in &crops.batches[..crops.warmup_batches] {
        std::hint::black_box(read_batch(batch)?);
    }
    let mut costs = Vec::new();
    for batch in &crops.batches[crops.warmup_batches..] {
        let (reads, bytes) = (metrics.reads(), metrics.bytes_read());
        let os0 = OsIo::now();
        let t = Instant::now();
        let out = read_batch(batch)?;
        let seconds = t.elapsed().as_secs_f64();
        let os1 = OsIo::now();
        let os = os1.since(os0, probe);
        std::hint::black_box(&out);
        costs.push(BatchCost {
            seconds,
            storage_requests: (metrics.reads() - reads) as u64,
            bytes_read: (metrics.bytes_read() - bytes) as u64,
            os_read_bytes: os.rchar,
            os_read_calls: os.syscr,
            cpu_seconds: os1.cpu_seconds_since(os0),
            damacy: None,
            allocs: None,
        });
    }
    Ok(costs)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn report(array: &str, reader: &str, threads: usize, batch_size: usize, costs: &[BatchCost], extra: Value) -> Value {
    let crops_per_s = median_of(costs, |c| batch_size as f64 / c.seconds);
    let mut v = json!({
        "kind": "result",
        "array": array,
        "reader": reader,
        "threads": threads,
        "batch_size": batch_size,
        "timed_batches": costs.len(),
        "crops_per_s": crops_per_s,
        "crops_per_s_min": costs.iter().map(|c| batch_size as f64 / c.seconds).fold(f64::INFINITY, f64::min),
        "crops_per_s_max": costs.iter().map(|c| batch_size as f64 / c.seconds).fold(0.0, f64::max),
        "batch_ms": median_of(costs, |c| c.seconds * 1e3),
        "storage_requests_per_batch": median_of(costs, |c| c.storage_requests as f64),
        "bytes_read_per_batch": median_of(costs, |c| c.bytes_read as f64),
        "os_read_bytes_per_batch": median_of(costs, |c| c.os_read_bytes as f64),
        "os_read_calls_per_batch": median_of(costs, |c| c.os_read_calls as f64),
        "cores_used": costs.iter().map(|c| c.cpu_seconds).sum::<f64>() / costs.iter().map(|c| c.seconds).sum::<f64>(),
        // A mean, not a median: /proc's 10 ms ticks are coarse against one batch.
        "cpu_ms_per_batch": costs.iter().map(|c| c.cpu_seconds).sum::<f64>() * 1e3 / costs.len().max(1) as f64,
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    eprintln!(
        "{array:>14} {reader:<10} {crops_per_s:8.1} crops/s  {:7.1} ms/batch  {:6.0} requests  {:6.2} MiB read per batch",
        v["batch_ms"].as_f64().unwrap_or(f64::NAN),
        v["storage_requests_per_batch"].as_f64().unwrap_or(f64::NAN),
        v["bytes_read_per_batch"].as_f64().unwrap_or(f64::NAN) / f64::from(1 << 20),
    );
    v
}

/// What one run measures: the thread count, the readers to run (all when empty) and the cost of
/// reading `/proc/self/io`.
struct Setup {
    threads: usize,
    readers: Vec<String>,
    probe: OsIo,
}

impl Setup {
    fn wants(&self, reader: &str) -> bool {
        self.readers.is_empty() || self.readers.iter().any(|r| r == reader)
    }
}

fn bench_array(data: &std::path::Path, name: &str, crops: &Crops, setup: &Setup) -> BenchResult<()> {
    let (threads, probe) = (setup.threads, setup.probe);
    let batch_size = crops.batches.first().map_or(0, Vec::len);
    let timed = &crops.batches[crops.warmup_batches..];

    // The comparison readers share one metered zarrs store.
    let fs = Arc::new(FilesystemStore::new(data)?);
    let metered = Arc::new(PerformanceMetricsStorageAdapter::new(fs.clone()));
    let zarrs_array = Array::open(metered.clone(), &format!("/{name}"))?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("zarrs-{i}")).build()?;

    let store = Store::open(data.to_str().ok_or("data path is not UTF-8")?, &StoreOptions::default())?;
    let reader = Reader::new(
        ReaderConfig::default().with_executor(ExecutorKind::Cpu).with_io_threads(threads).with_compute_threads(threads),
    )?;
    let info = reader.open_array(&store, name, ArrayOptions::default())?;

    // Check once that both read the same values before timing anything.
    if let Some(batch) = timed.first() {
        let ours = reader.read_batch(&info, &regions(&crops.crop, batch))?;
        for (i, o) in batch.iter().enumerate() {
            let subset = ArraySubset::new_with_start_shape(o.clone(), crops.crop.clone())?;
            let theirs: ArrayBytes<'static> = zarrs_array.retrieve_array_subset(&subset)?;
            if theirs.into_fixed()?.as_ref() != ours.region(i) {
                return Err(format!("{name}: damacy and zarrs disagree on crop {o:?}").into());
            }
        }
    }

    // Distinct chunk bytes per batch, from zarrs' own view of the shard indexes.
    let cache = ArrayShardedReadableExtCache::new(&zarrs_array);
    let mut per_batch = Vec::with_capacity(timed.len());
    for batch in timed {
        per_batch.push(distinct(&info, &zarrs_array, &cache, &fs, &crops.crop, batch)?);
    }
    let shards_all: BTreeSet<Vec<u64>> = info.shard.as_ref().map_or_else(BTreeSet::new, |l| {
        crops
            .batches
            .iter()
            .flatten()
            .flat_map(|o| cells(o, &crops.crop, &l.inner_shape))
            .map(|c| c.iter().zip(&l.chunks_per_shard).map(|(i, n)| i / n).collect())
            .collect()
    });
    let med = |f: &dyn Fn(&Distinct) -> f64| {
        let mut v: Vec<f64> = per_batch.iter().map(f).collect();
        median(&mut v)
    };
    let distinct_line = json!({
        "kind": "distinct",
        "array": name,
        "chunk_shape": info.chunk_shape,
        "decode_shape": info.decode_shape(),
        "sharded": info.shard.is_some(),
        "distinct_chunks_per_batch": med(&|d| d.chunks as f64),
        "chunk_touches_per_batch": med(&|d| d.touches as f64),
        "distinct_chunk_bytes_per_batch": med(&|d| d.chunk_bytes as f64),
        "distinct_shards_per_batch": med(&|d| d.shards as f64),
        "shard_index_bytes_per_batch": med(&|d| d.index_bytes as f64),
        "shards_in_crop_list": shards_all.len(),
        "crop_bytes_per_batch": (batch_size as u64 * crops.crop.iter().product::<u64>() * info.dtype.size() as u64),
    });
    println!("{distinct_line}");

    // Fresh reader for the timed run, so the warm-up is what fills its shard-index cache.
    drop(reader);
    if setup.wants("damacy") {
        match remote_store()? {
            // The same arrays served by a remote store: damacy reads them there; the distinct
            // bytes above come from the local copy.
            Some(remote) => bench_damacy(&remote, name, crops, setup, &per_batch)?,
            None => bench_damacy(&store, name, crops, setup, &per_batch)?,
        }
    }
    if setup.wants("decode-probe")
        && let Some(batch) = timed.first()
    {
        println!("{}", decode_probe(&info, &zarrs_array, &cache, &pool, &crops.crop, batch)?);
    }
    for (label, parallel) in [("zarrs", false), ("zarrs-par", true)] {
        if !setup.wants(label) {
            continue;
        }
        let load = LoadWindow::start();
        let costs = run_zarrs(&pool, &zarrs_array, &metered, threads, parallel, crops, probe)?;
        let other_cores = load.other_cores();
        let ratios: Vec<f64> =
            costs.iter().zip(&per_batch).map(|(c, d)| c.bytes_read as f64 / d.chunk_bytes.max(1) as f64).collect();
        let extra =
            json!({ "bytes_read_over_distinct_median": median(&mut ratios.clone()), "other_cores": other_cores });
        println!("{}", report(name, label, threads, batch_size, &costs, extra));
    }
    Ok(())
}

/// The store `DAMACY_BENCH_STORE_URL` names (an `http://` or `s3://` copy of the data folder;
/// `DAMACY_BENCH_S3_ENDPOINT` for an S3-compatible server, credentials from the environment),
/// opened with default options; `None` to read the local folder.
fn remote_store() -> BenchResult<Option<Store>> {
    let Some(url) = std::env::var("DAMACY_BENCH_STORE_URL").ok().filter(|u| !u.is_empty()) else { return Ok(None) };
    let mut options = StoreOptions::default();
    if let Some(ep) = std::env::var("DAMACY_BENCH_S3_ENDPOINT").ok().filter(|u| !u.is_empty()) {
        options = options.with_endpoint(ep);
    }
    Ok(Some(Store::open(&url, &options)?))
}

/// The timed damacy run of one array, with its counters and stage times.
fn bench_damacy(store: &Store, name: &str, crops: &Crops, setup: &Setup, per_batch: &[Distinct]) -> BenchResult<()> {
    let (threads, probe) = (setup.threads, setup.probe);
    let batch_size = crops.batches.first().map_or(0, Vec::len);
    let reader = Reader::new(
        ReaderConfig::default().with_executor(ExecutorKind::Cpu).with_io_threads(threads).with_compute_threads(threads),
    )?;
    let info = reader.open_array(store, name, ArrayOptions::default())?;
    let store_before = store.stats();
    let load = LoadWindow::start();
    let (costs, whole, digest) = run_damacy(&reader, &info, crops, probe)?;
    let ratios: Vec<f64> =
        costs.iter().zip(per_batch).map(|(c, d)| c.bytes_read as f64 / d.chunk_bytes.max(1) as f64).collect();
    let stage = |f: &dyn Fn(&StatsSnapshot) -> Duration| {
        median_of(&costs, |c| c.damacy.as_ref().map_or(f64::NAN, |d| secs(f(d)) * 1e3))
    };
    let extra = json!({
        "first_batch_sha256": digest,
        "other_cores": load.other_cores(),
        "bytes_read_over_distinct_median": median(&mut ratios.clone()),
        "bytes_read_over_distinct_max": ratios.iter().copied().fold(0.0, f64::max),
        "units_decoded_per_batch": median_of(&costs, |c| c.damacy.map_or(f64::NAN, |d| d.units_decoded as f64)),
        "index_fetches_timed": costs.iter().filter_map(|c| c.damacy.map(|d| d.index_fetches)).sum::<u64>(),
        "index_fetches_total": whole.index_fetches,
        "index_hits_total": whole.index_hits,
        "plan_allocs_per_batch": median_of(&costs, |c| c.allocs.map_or(f64::NAN, |a| a[0].0 as f64)),
        "plan_alloc_bytes_per_batch": median_of(&costs, |c| c.allocs.map_or(f64::NAN, |a| a[0].1 as f64)),
        "read_allocs_per_batch": median_of(&costs, |c| c.allocs.map_or(f64::NAN, |a| a[1].0 as f64)),
        "read_alloc_bytes_per_batch": median_of(&costs, |c| c.allocs.map_or(f64::NAN, |a| a[1].1 as f64)),
        "read_amplification": whole.read_amplification(),
        "store": store.url(),
        "store_stats": store.stats().map(|s| json!({
            "requests": s.requests - store_before.as_ref().map_or(0, |b| b.requests),
            "retries": s.retries,
            "timeouts": s.timeouts,
            "in_flight_max": s.in_flight_max,
            "bytes_in_flight_max": s.bytes_in_flight_max,
            "latency_p50_ms": secs(s.latency_p50) * 1e3,
            "latency_p95_ms": secs(s.latency_p95) * 1e3,
        })),
        "io_ms": stage(&|d| d.io),
        "decode_ms": stage(&|d| d.decode),
        "assemble_ms": stage(&|d| d.assemble),
    });
    println!("{}", report(name, "damacy", threads, batch_size, &costs, extra));
    Ok(())
}

fn main() -> BenchResult<()> {
    // `cargo bench` passes `--bench`; a filter argument (not starting with `-`) picks arrays.
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let data = PathBuf::from(env_or("DAMACY_BENCH_DATA", "/tmp/damacy-bench-data"));
    let crops_path = std::env::var("DAMACY_BENCH_CROPS")
        .ok()
        .filter(|v| !v.is_empty())
        .map_or_else(|| data.join("crops.json"), PathBuf::from);
    let threads: usize = env_or("DAMACY_BENCH_THREADS", "2").parse()?;
    if !crops_path.exists() && std::env::var_os("DAMACY_BENCH_DATA").is_none() {
        // A plain `cargo bench` with no data: say how to get it instead of failing the run.
        eprintln!(
            "read bench skipped: no crop list at {}; run `.venv/bin/python benches/read/compare.py`, which writes \
             the data and the crop list and runs this bench",
            crops_path.display()
        );
        return Ok(());
    }
    let text = std::fs::read_to_string(&crops_path).map_err(|e| {
        format!(
            "cannot read the crop list {} ({e}); run benches/read/compare.py, which writes it",
            crops_path.display()
        )
    })?;
    let crops: Crops = serde_json::from_str(&text)?;
    if crops.batches.len() <= crops.warmup_batches {
        return Err("the crop list has no timed batches".into());
    }
    let readers: Vec<String> = env_or("DAMACY_BENCH_READERS", "")
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(String::from)
        .collect();
    let setup = Setup { threads, readers, probe: OsIo::probe_cost() };
    for name in &crops.arrays {
        if filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())) {
            bench_array(&data, name, &crops, &setup)?;
        }
    }
    Ok(())
}
