//! The `damacy` command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod discover;
mod inspect;

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
}

fn main() -> ExitCode {
    // Errors are one line and an exit code; a bug must not print a backtrace at users either.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("damacy: internal error: {info} (please report this)");
    }));
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect { store, array, digest, executor, device, endpoint, anonymous } => {
            let mut options = damacy::StoreOptions::default().with_anonymous(anonymous);
            options.endpoint = endpoint;
            let device = device.or_else(|| std::env::var("LOCAL_RANK").ok().and_then(|r| r.parse().ok())).unwrap_or(0);
            let executor = match executor {
                Executor::Auto => damacy::ExecutorKind::Auto,
                Executor::Cpu => damacy::ExecutorKind::Cpu,
                Executor::Gpu => damacy::ExecutorKind::Gpu,
                Executor::Emulated => damacy::ExecutorKind::Emulated,
            };
            inspect::run(&store, array.as_deref(), digest, (executor, device), &options)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("damacy: error: {e}");
            ExitCode::FAILURE
        }
    }
}
