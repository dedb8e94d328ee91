//! The `damacy` command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod dataset;
mod discover;
mod inspect;
mod stream;

#[derive(Parser)]
#[command(name = "damacy", version, about = "Stream regions of zarr arrays into batched tensors")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which executor decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Executor {
    /// The GPU when one is usable, else the CPU.
    Auto,
    /// zarrs' codec chains on the host (rayon).
    Cpu,
    /// damacy's device kernels on a CUDA GPU.
    Gpu,
    /// damacy's device kernels on the host emulator (builds with the `emulate` feature).
    Emulated,
}

impl Executor {
    fn kind(self) -> damacy::ExecutorKind {
        match self {
            Executor::Auto => damacy::ExecutorKind::Auto,
            Executor::Cpu => damacy::ExecutorKind::Cpu,
            Executor::Gpu => damacy::ExecutorKind::Gpu,
            Executor::Emulated => damacy::ExecutorKind::Emulated,
        }
    }
}

/// The stream's knobs, shared by `demo` and `bench`.
#[derive(clap::Args)]
struct StreamArgs {
    /// The crop (sample) shape.
    #[arg(long, default_value = "64,64,64")]
    crop: stream::Shape,
    /// Crops per batch.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Which executor decodes: the GPU when one is usable, else the CPU (auto).
    #[arg(long, value_enum, default_value_t = Executor::Auto)]
    executor: Executor,
    /// CUDA device ordinal (default: `LOCAL_RANK`, else 0; a CLI process has no current
    /// context to bind instead).
    #[arg(long)]
    device: Option<usize>,
    /// Element type of the batches: native, float32, bfloat16, uint8, …
    #[arg(long, default_value = "native")]
    dtype: String,
    /// Batches read at once (pipeline workers).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Device lanes: batches the GPU (or emulated) executor decodes side by side, each with
    /// its own streams and buffers (default: one per worker).
    #[arg(long)]
    lanes: Option<usize>,
    /// Device memory of the GPU executor's lanes in MiB, shared equally between them (decode
    /// waves, assemble tables, batch buffers; default 1024).
    #[arg(long)]
    device_buffer_mib: Option<u64>,
    /// Pinned host memory of the GPU executor's lanes in MiB (staging rings; default 256).
    #[arg(long)]
    host_buffer_mib: Option<u64>,
    /// I/O and decode threads of the reader (default: the number of CPUs).
    #[arg(long)]
    threads: Option<usize>,
    /// Batches before timing starts.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Seed of the crop plan.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

impl StreamArgs {
    fn knobs(&self, batches: usize) -> Result<stream::Knobs, String> {
        Ok(stream::Knobs {
            crop: self.crop.0.clone(),
            batch: self.batch,
            batches,
            warmup: self.warmup,
            executor: self.executor.kind(),
            device: Some(self.device.unwrap_or_else(local_rank_or_zero)),
            dtype: self.dtype.parse().map_err(|e: damacy::UnknownDtype| e.to_string())?,
            workers: self.workers,
            lanes: self.lanes,
            buffer_mib: (self.device_buffer_mib, self.host_buffer_mib),
            threads: self
                .threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)),
            seed: self.seed,
        })
    }
}

// Doc comments here are `--help` text, where backticks would show.
#[allow(clippy::doc_markdown)]
#[derive(Subcommand)]
enum Command {
    /// Describe the arrays of a store: shape, dtype, chunks, shards, codecs and their routes,
    /// stored and decoded sizes; with --digest, the SHA-256 of each array's decoded bytes.
    Inspect {
        /// A local path, file://, s3://, gs://, az://, http(s):// or memory:// URL.
        store: String,
        /// One array's path inside the store (default: every array the store lists).
        array: Option<String>,
        /// Decode each array whole through damacy's read path and print the SHA-256 of its
        /// bytes (C order, little-endian).
        #[arg(long)]
        digest: bool,
        /// Which executor decodes for --digest.
        #[arg(long, value_enum, default_value_t = Executor::Auto)]
        executor: Executor,
        /// CUDA device ordinal for the GPU executor (default: `LOCAL_RANK`, else 0).
        #[arg(long)]
        device: Option<usize>,
        /// Remote store endpoint (e.g. an S3-compatible server); default from the environment.
        #[arg(long)]
        endpoint: Option<String>,
        /// Send unsigned requests (public buckets).
        #[arg(long)]
        anonymous: bool,
    },
    /// Write a synthetic microscopy-like dataset on first use (a sharded zstd array and a
    /// blosc-lz4 array), then stream random crops from a damacy-sampler plan through a Pipeline:
    /// live progress, crops/s, GB/s and the per-stage stats table.
    Demo {
        /// Where the dataset is kept (default: $DAMACY_DEMO_DIR, else ~/.cache/damacy/demo).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// The full-size dataset (two 512³ uint16 arrays, 1 GiB decoded) instead of the quick one
        /// (two 256³ arrays).
        #[arg(long)]
        full: bool,
        /// A tiny dataset (two 64×128×128 arrays), for tests.
        #[arg(long, hide = true, conflicts_with = "full")]
        tiny: bool,
        /// Batches to stream (after the warm-up).
        #[arg(long, default_value_t = 40)]
        batches: usize,
        #[command(flatten)]
        stream: StreamArgs,
    },
    /// Stream random crops of one array through a Pipeline and report crops/s and GB/s; with
    /// --compare-engine also the read engine alone (read_batch in a loop) on the same crops.
    Bench {
        /// The arrays: store URIs whose last `.zarr` component ends the store (see
        /// `damacy::split_uri`), e.g. /data/vol.zarr/raw, or store#path. With several, the
        /// crops are drawn from all of them (one plan) and batches mix them.
        #[arg(required = true, num_args = 1..)]
        arrays: Vec<String>,
        /// Batches to time (after the warm-up).
        #[arg(long, default_value_t = 20)]
        batches: usize,
        /// Timed runs; the median is reported.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// Also time the read engine alone on the same crops, and print the ratio.
        #[arg(long)]
        compare_engine: bool,
        /// One JSON object on stdout instead of the report.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        stream: StreamArgs,
    },
}

/// The device a command binds when `--device` is not given: `LOCAL_RANK` (a torchrun rank),
/// else 0. The GPU route needs a device named (ARCHITECTURE §5: without one, only a context
/// current on the thread would do, and a fresh process has none); on a machine without a GPU the
/// CPU executor ignores it.
fn local_rank_or_zero() -> usize {
    std::env::var("LOCAL_RANK").ok().and_then(|r| r.parse().ok()).unwrap_or(0)
}

fn main() -> ExitCode {
    stream::mark_process_start();
    // Errors are one line and an exit code; a bug must not print a backtrace at users either.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("damacy: internal error: {info} (please report this)");
    }));
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect { store, array, digest, executor, device, endpoint, anonymous } => {
            let mut options = damacy::StoreOptions::default().with_anonymous(anonymous);
            options.endpoint = endpoint;
            let device = device.unwrap_or_else(local_rank_or_zero);
            inspect::run(&store, array.as_deref(), digest, (executor.kind(), device), &options)
        }
        Command::Demo { dir, full, tiny, batches, stream } => stream
            .knobs(batches)
            .and_then(|k| {
                let size = match (full, tiny) {
                    (true, _) => dataset::Size::Full,
                    (_, true) => dataset::Size::Tiny,
                    _ => dataset::Size::Small,
                };
                stream::demo(dir.as_deref(), size, &k)
            })
            .map_err(Into::into),
        Command::Bench { arrays, batches, rounds, compare_engine, json, stream } => stream
            .knobs(batches)
            .and_then(|k| stream::bench(&arrays, &k, rounds, compare_engine, json))
            .map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("damacy: error: {e}");
            ExitCode::FAILURE
        }
    }
}
