//! `damacy demo` and `damacy bench`: random crops from a damacy-sampler plan, streamed through a
//! Pipeline with a live progress bar; throughput, the stats table, and (bench) the read engine
//! alone on the same crops for comparison.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use damacy::sampler::{ArrayGeometry, CropOptions, CropSpace, Plan, PlanConfig, RankSource};
use damacy::{
    ArrayHandle, Config, ExecutorKind, OutputDtype, Pipeline, PipelineStats, Reader, ReaderConfig, Region, Sample,
    Store, split_uri,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::dataset;

type Result<T> = std::result::Result<T, String>;

/// What to stream: the knobs `demo` and `bench` share.
#[derive(Debug, Clone)]
pub(crate) struct Knobs {
    pub(crate) crop: Vec<u64>,
    pub(crate) batch: usize,
    pub(crate) batches: usize,
    pub(crate) warmup: usize,
    pub(crate) executor: ExecutorKind,
    pub(crate) device: Option<usize>,
    pub(crate) dtype: OutputDtype,
    pub(crate) workers: usize,
    pub(crate) lanes: Option<usize>,
    /// Device and pinned host budgets of the device executor in MiB (`None`: the defaults).
    pub(crate) buffer_mib: (Option<u64>, Option<u64>),
    pub(crate) threads: usize,
    pub(crate) seed: u64,
}

impl Knobs {
    fn config(&self) -> Config {
        let mut c = Config::new(self.batch)
            .with_sample_shape(self.crop.clone())
            .with_dtype(self.dtype)
            .with_executor(self.executor)
            .with_workers(self.workers)
            .with_compute_threads(self.threads)
            .with_io_threads(self.threads);
        c.device = self.device;
        c.lanes = self.lanes;
        if let Some(mib) = self.buffer_mib.0 {
            c.device_buffer_bytes = mib << 20;
        }
        if let Some(mib) = self.buffer_mib.1 {
            c.host_buffer_bytes = mib << 20;
        }
        c
    }
}

/// Open an array by URI for its geometry (metadata only).
fn open(uri: &str) -> Result<ArrayHandle> {
    let (store, path) = split_uri(uri);
    let store = Store::open(store, &damacy::StoreOptions::default()).map_err(|e| e.to_string())?;
    let reader = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Cpu).with_compute_threads(1))
        .map_err(|e| e.to_string())?;
    reader.open_array(&store, &path, damacy::ArrayOptions::default()).map_err(|e| e.to_string())
}

fn geometry(a: &ArrayHandle) -> ArrayGeometry {
    let g = ArrayGeometry::new(a.shape.clone(), a.decode_shape().to_vec()).with_element_size(a.dtype.size() as u64);
    if a.shard.is_some() { g.with_shard_shape(a.chunk_shape.clone()) } else { g }
}

/// This rank's random crops over `uris` (one plan, seeded), as samples.
fn samples(uris: &[String], knobs: &Knobs, total: u64) -> Result<Box<dyn Iterator<Item = Sample> + Send>> {
    let mut geometries = Vec::with_capacity(uris.len());
    for u in uris {
        let a = open(u)?;
        if a.shape.len() != knobs.crop.len() {
            return Err(format!(
                "array {u} has rank {} but --crop {:?} has {}",
                a.shape.len(),
                knobs.crop,
                knobs.crop.len()
            ));
        }
        geometries.push(geometry(&a));
    }
    let space =
        CropSpace::new(geometries, CropOptions::random(knobs.crop.clone(), total)).map_err(|e| e.to_string())?;
    let rank = RankSource::from_env().map_err(|e| e.to_string())?;
    let plan =
        Plan::new(space, PlanConfig::new().with_rank(rank).with_batch_size(knobs.batch as u64).with_seed(knobs.seed))
            .map_err(|e| e.to_string())?;
    let uris = uris.to_vec();
    Ok(Box::new((0..plan.len()).filter_map(move |i| {
        let p = plan.get(i)?;
        let c = plan.resolve(p);
        Some(Sample::new(uris[c.array].clone(), Region::new(c.start, c.shape)).with_padded(p.padded).with_id(p.id))
    })))
}

/// When `main` began: the start of the cold-start clock.
static PROCESS_START: OnceLock<Instant> = OnceLock::new();

/// Starts the cold-start clock; `main` calls it first.
pub(crate) fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

/// How long the first batch took to arrive, and where the executor's kernels came from.
pub(crate) struct ColdStart {
    /// From process start to the first batch popped.
    pub(crate) first_batch_s: f64,
    /// Building the Pipeline (its reader and executor, which loads every kernel).
    pub(crate) executor_s: f64,
    /// `shipped`, `cache`, `compiled`, `mixed`, `host code`, or `none` (the CPU executor).
    pub(crate) kernels: &'static str,
    /// The device's kernel images in words (empty on the CPU executor).
    pub(crate) kernel_images: String,
}

impl ColdStart {
    fn report(&self) -> String {
        let images =
            if self.kernel_images.is_empty() { "no device kernels".to_owned() } else { self.kernel_images.clone() };
        format!(
            "cold start: first batch {:.2} s after process start (pipeline and executor built in {:.2} s); {images}",
            self.first_batch_s, self.executor_s
        )
    }
}

/// One timed run of the pipeline.
pub(crate) struct Run {
    pub(crate) crops: u64,
    pub(crate) bytes: u64,
    pub(crate) seconds: f64,
    pub(crate) stats: PipelineStats,
    pub(crate) executor: String,
    /// The reader's counters over the timed batches (the engine run).
    pub(crate) reader_stats: Option<damacy::StatsSnapshot>,
    /// The pipeline's cold start (`None` for the engine alone).
    pub(crate) cold: Option<ColdStart>,
}

impl Run {
    pub(crate) fn crops_per_s(&self) -> f64 {
        self.crops as f64 / self.seconds.max(1e-9)
    }

    pub(crate) fn gb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e9 / self.seconds.max(1e-9)
    }
}

/// Stream `knobs.warmup + knobs.batches` batches of random crops of `uris`; time the last
/// `batches`.
fn run_pipeline(uris: &[String], knobs: &Knobs, bar: bool) -> Result<Run> {
    let building = Instant::now();
    let pipeline = Pipeline::new(knobs.config()).map_err(|e| e.to_string())?;
    let executor_s = building.elapsed().as_secs_f64();
    let mut first_batch: Option<Instant> = None;
    for w in pipeline.warnings() {
        eprintln!("warning: {w}");
    }
    let total = ((knobs.warmup + knobs.batches) * knobs.batch) as u64;
    let mut all = samples(uris, knobs, total)?;
    if knobs.warmup > 0 {
        let warm: Vec<Sample> = all.by_ref().take(knobs.warmup * knobs.batch).collect();
        pipeline.push(warm).map_err(|e| e.to_string())?;
        for _ in 0..knobs.warmup {
            pipeline.pop().map_err(|e| e.to_string())?;
            first_batch.get_or_insert_with(Instant::now);
        }
    }
    pipeline.stats_reset();
    let progress = if bar {
        ProgressBar::new(knobs.batches as u64).with_style(
            ProgressStyle::with_template("  {bar:40} {pos}/{len} batches {msg}").map_err(|e| e.to_string())?,
        )
    } else {
        ProgressBar::hidden()
    };
    // The timed samples go in only now, with the clock running: pushed with the warm-up ones,
    // the pipeline's read-ahead would read and decode them during the warm-up, and the timed
    // batches (and their stage stats) would show none of that work.
    let started = Instant::now();
    pipeline.push(all).map_err(|e| e.to_string())?;
    let (mut crops, mut bytes) = (0u64, 0u64);
    for _ in 0..knobs.batches {
        let batch = pipeline.pop().map_err(|e| e.to_string())?;
        first_batch.get_or_insert_with(Instant::now);
        crops += batch.len() as u64;
        bytes += batch.stats().bytes;
        drop(batch);
        progress.inc(1);
        let s = started.elapsed().as_secs_f64().max(1e-9);
        progress.set_message(format!("{:.0} crops/s, {:.2} GB/s", crops as f64 / s, bytes as f64 / 1e9 / s));
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.finish_and_clear();
    let images = pipeline.reader().device().map(damacy::Device::kernel_images);
    let cold = first_batch.map(|at| ColdStart {
        first_batch_s: at.duration_since(*PROCESS_START.get_or_init(|| building)).as_secs_f64(),
        executor_s,
        kernels: images.as_ref().map_or("none", |i| i.source()),
        kernel_images: images.map(|i| i.to_string()).unwrap_or_default(),
    });
    let executor = pipeline.reader().executor_note().to_owned();
    Ok(Run { crops, bytes, seconds, stats: pipeline.stats(), executor, reader_stats: None, cold })
}

/// The read engine alone on the same crops: `reader.read_batch` in a loop, one batch at a time.
fn run_engine(uri: &str, knobs: &Knobs) -> Result<Run> {
    let config = knobs.config();
    let (store, path) = split_uri(uri);
    let store = Store::open(store, &config.store_options).map_err(|e| e.to_string())?;
    let reader = Reader::new(config.reader_config()).map_err(|e| e.to_string())?;
    let array = reader.open_array(&store, &path, config.array_options()).map_err(|e| e.to_string())?;
    let total = ((knobs.warmup + knobs.batches) * knobs.batch) as u64;
    let regions: Vec<Region> = samples(&[uri.to_owned()], knobs, total)?.map(|s| s.region).collect();
    let mut batches = regions.chunks(knobs.batch);
    for b in batches.by_ref().take(knobs.warmup) {
        reader.read_batch(&array, b).map_err(|e| e.to_string())?;
    }
    let before = reader.stats();
    let started = Instant::now();
    let (mut crops, mut bytes) = (0u64, 0u64);
    for b in batches {
        let batch = reader.read_batch(&array, b).map_err(|e| e.to_string())?;
        crops += b.len() as u64;
        bytes += batch.bytes().len() as u64;
    }
    Ok(Run {
        crops,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        stats: PipelineStats::default(),
        executor: reader.executor_note().to_owned(),
        reader_stats: Some(reader.stats().since(&before)),
        cold: None,
    })
}

/// `damacy demo`.
pub(crate) fn demo(dir: Option<&Path>, size: dataset::Size, knobs: &Knobs) -> Result<()> {
    let dir = dir.map_or_else(dataset::default_dir, Path::to_path_buf);
    let store = dataset::ensure(&dir, size)?;
    let uris: Vec<String> = dataset::ARRAYS.iter().map(|a| format!("{}/{a}", store.display())).collect();
    println!(
        "streaming {} batches of {} random {:?} crops from {} and {} (after {} warm-up batches)",
        knobs.batches,
        knobs.batch,
        knobs.crop,
        dataset::ARRAYS[0],
        dataset::ARRAYS[1],
        knobs.warmup
    );
    let run = run_pipeline(&uris, knobs, true)?;
    println!("executor: {}", run.executor);
    println!(
        "{} crops in {:.2} s: {:.0} crops/s, {:.3} GB/s delivered",
        run.crops,
        run.seconds,
        run.crops_per_s(),
        run.gb_per_s()
    );
    println!("{}", run.stats);
    Ok(())
}

/// `damacy bench`.
pub(crate) fn bench(uris: &[String], knobs: &Knobs, rounds: usize, compare_engine: bool, json: bool) -> Result<()> {
    let [uri] = uris else {
        if compare_engine {
            return Err(format!("--compare-engine reads one array per batch; give one array, not {}", uris.len()));
        }
        return bench_runs(uris, knobs, rounds, false, json);
    };
    bench_runs(std::slice::from_ref(uri), knobs, rounds, compare_engine, json)
}

fn bench_runs(uris: &[String], knobs: &Knobs, rounds: usize, compare_engine: bool, json: bool) -> Result<()> {
    let uri = uris.join(" ");
    let mut pipeline_runs = Vec::with_capacity(rounds);
    let mut engine_runs = Vec::with_capacity(rounds);
    // Alternate the two, so a load that comes and goes on the machine hits both alike.
    for _ in 0..rounds {
        if compare_engine {
            engine_runs.push(run_engine(&uris[0], knobs)?);
        }
        pipeline_runs.push(run_pipeline(uris, knobs, !json)?);
    }
    let median = |runs: &[Run]| -> Option<f64> {
        let mut v: Vec<f64> = runs.iter().map(Run::crops_per_s).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let p = median(&pipeline_runs).ok_or("no round ran (--rounds 0)")?;
    let e = median(&engine_runs);
    let last = pipeline_runs.last().ok_or("no round ran")?;
    // The first round's pipeline: the process's first (after the engine's, with --compare-engine).
    let cold = pipeline_runs.first().and_then(|r| r.cold.as_ref());
    let gb = last.bytes as f64 / last.crops.max(1) as f64 * p / 1e9;
    if json {
        let rounds_of = |runs: &[Run]| runs.iter().map(Run::crops_per_s).collect::<Vec<_>>();
        let s = &last.stats;
        let out = serde_json::json!({
            "uri": uri,
            "executor": last.executor,
            "crop": knobs.crop,
            "batch": knobs.batch,
            "batches": knobs.batches,
            "warmup": knobs.warmup,
            "workers": knobs.workers,
            "lanes": knobs.lanes,
            "device_buffer_mib": knobs.buffer_mib.0,
            "threads": knobs.threads,
            "dtype": format!("{:?}", knobs.dtype),
            "pipeline": {"crops_per_s": p, "gb_per_s": gb, "rounds": rounds_of(&pipeline_runs)},
            "engine": e.map(|e| serde_json::json!({
                "crops_per_s": e,
                "rounds": rounds_of(&engine_runs),
                "device_waves": engine_runs.last().and_then(|r| r.reader_stats).map(|s| s.device_waves),
                "batches_host_scattered":
                    engine_runs.last().and_then(|r| r.reader_stats).map(|s| s.batches_host_scattered),
                // Where the engine's time went (the last round; summed over threads and lanes).
                "stages_s": engine_runs.last().and_then(|r| r.reader_stats).map(|s| serde_json::json!({
                    "io": s.io.as_secs_f64(), "parse": s.decompress_parse.as_secs_f64(),
                    "decode": s.decode.as_secs_f64(), "assemble": s.assemble.as_secs_f64(),
                    "download": s.download.as_secs_f64(),
                })),
                "bytes_downloaded": engine_runs.last().and_then(|r| r.reader_stats).map(|s| s.bytes_downloaded),
                "seconds": engine_runs.last().map(|r| r.seconds),
            })),
            "ratio": e.map(|e| p / e),
            "cold_start": cold.map(|c| serde_json::json!({
                "first_batch_s": c.first_batch_s, "executor_s": c.executor_s,
                "kernels": c.kernels, "kernel_images": c.kernel_images,
            })),
            "stages_s": {
                "plan": s.plan.time.as_secs_f64(), "read": s.read.time.as_secs_f64(), "io": s.io.time.as_secs_f64(),
                "decode": s.decode.time.as_secs_f64(), "assemble": s.assemble.time.as_secs_f64(),
                "pop_wait": s.pop_wait.time.as_secs_f64(),
            },
            "bytes_read": s.io.bytes_in,
            "storage_requests": s.io.count,
            "chunks_decoded": s.decode.count,
        });
        println!("{out}");
        return Ok(());
    }
    println!("executor: {}", last.executor);
    println!(
        "pipeline: {p:.1} crops/s, {gb:.3} GB/s (median of {rounds}; rounds {:?})",
        pipeline_runs.iter().map(|r| r.crops_per_s().round()).collect::<Vec<_>>()
    );
    if let Some(c) = cold {
        println!("{}", c.report());
    }
    if let Some(e) = e {
        println!(
            "engine alone (read_batch in a loop): {e:.1} crops/s (rounds {:?}); pipeline / engine = {:.3}",
            engine_runs.iter().map(|r| r.crops_per_s().round()).collect::<Vec<_>>(),
            p / e
        );
        if let Some(s) = engine_runs.last().and_then(|r| r.reader_stats) {
            println!(
                "engine alone: {} device waves, {} of {} batches decoded to the host and scattered there (the device could not hold them)",
                s.device_waves, s.batches_host_scattered, s.batches
            );
            if s.bytes_downloaded > 0 {
                println!(
                    "engine alone, last round: {:.2} s; io {:.2} s, decode {:.2} s, device-to-host copies {:.2} s for {:.2} GB ({:.1} GB/s) (summed over threads and lanes)",
                    engine_runs.last().map_or(0.0, |r| r.seconds),
                    s.io.as_secs_f64(),
                    s.decode.as_secs_f64(),
                    s.download.as_secs_f64(),
                    s.bytes_downloaded as f64 / 1e9,
                    s.bytes_downloaded as f64 / 1e9 / s.download.as_secs_f64().max(1e-9)
                );
            }
        }
    }
    println!("{}", last.stats);
    Ok(())
}

/// A shape on the command line: `64,64,64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape(pub(crate) Vec<u64>);

impl std::str::FromStr for Shape {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let v: std::result::Result<Vec<u64>, _> = s.split(',').map(|p| p.trim().parse::<u64>()).collect();
        match v {
            Ok(v) if !v.is_empty() && !v.contains(&0) => Ok(Shape(v)),
            _ => Err(format!("{s:?} is not a shape: give extents ≥ 1 separated by commas, e.g. 64,64,64")),
        }
    }
}
