//! [`Config`]: every knob of a [`crate::Pipeline`], validated once, with the sizes derived from
//! them ([`Sizes`], printed by [`Config::describe`]).

use std::fmt::Write as _;
use std::time::Duration;

use damacy_codec::{ArrayOptions, ExecutorKind, OutOfBounds, OutputDtype, ReaderConfig, StoreOptions};

use crate::Error;

/// What a pipeline does with a sample it cannot read (missing store or array, corrupt chunk,
/// region outside the array, a shape that does not match the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OnError {
    /// The pop of the batch that holds the sample returns the error, naming the sample; the
    /// pipeline stays usable and later batches come as usual. The default.
    #[default]
    Raise,
    /// The sample is left out of its batch (which is then shorter), counted and named in
    /// [`crate::PipelineStats::skipped`].
    Skip,
}

impl std::str::FromStr for OnError {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "raise" => Ok(Self::Raise),
            "skip" => Ok(Self::Skip),
            other => Err(Error::invalid(format!("on_error {other:?}: use \"raise\" or \"skip\""))),
        }
    }
}

/// Shard indexes one sample may need: a crop of a 3-D array can cross a shard boundary along
/// each axis. Used for the floor of the shard-index cache.
const SHARDS_PER_SAMPLE: u64 = 8;
/// The largest shard index the floor assumes: 4096 inner chunks of 16 bytes.
const INDEX_BYTES: u64 = 64 << 10;

/// The configuration of a [`crate::Pipeline`]: the batch, the reader's resources, the
/// per-array semantics and the error policy. Every field has a documented default; build with
/// `Config::new(batch_size).with_*(…)`. Validated once, by [`crate::Pipeline::new`] (or
/// [`Config::validate`]), with messages that name the field and the value to use.
///
/// ```
/// use damacy::{Config, Dtype, OutputDtype};
/// let config = Config::new(32)
///     .with_sample_shape(vec![64, 64, 64])
///     .with_dtype(OutputDtype::Cast(Dtype::F32))
///     .with_arrays_per_sample(1);
/// let sizes = config.validate()?;
/// assert_eq!(sizes.batch_bytes(), Some(vec![32 * 64 * 64 * 64 * 4]));
/// println!("{}", config.describe());
/// # Ok::<(), damacy::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Samples per batch. Default 32.
    pub batch_size: usize,
    /// The shape of every sample's region. Default `None`: taken from the first sample; a
    /// sample of another shape later is an error naming both.
    pub sample_shape: Option<Vec<u64>>,
    /// How many arrays each sample names (one tensor each). Default `None`: taken from the
    /// first sample.
    pub arrays_per_sample: Option<usize>,
    /// Element type of the batches. Default [`OutputDtype::Native`] (each array's own type).
    pub dtype: OutputDtype,
    /// Allow casts to integer types that cannot hold the source's values (`uint16` to `int16`,
    /// `float32` to `uint8`). Default false: refused when an array is opened. Floating-point
    /// `dtype`s take every source without it, rounded to nearest even (`uint16` to `bfloat16`).
    pub allow_lossy_cast: bool,
    /// Which executor decodes. Default [`ExecutorKind::Auto`]: the GPU when one is usable, else
    /// the CPU. With a device executor the batches are device memory.
    pub executor: ExecutorKind,
    /// The CUDA device ordinal (the rank's `LOCAL_RANK`). Default `None`: the context current
    /// on the calling thread (ARCHITECTURE §5).
    pub device: Option<usize>,
    /// Pinned host memory of the device executor's upload staging. Default 256 MiB.
    pub host_buffer_bytes: u64,
    /// Device memory of the device executor's decode waves and tables (the batch buffers come
    /// on top). Default 1 GiB.
    pub device_buffer_bytes: u64,
    /// A cap on all the device memory the pipeline holds: `device_buffer_bytes` plus the batch
    /// buffers. Default `None`: no cap.
    pub max_gpu_memory_bytes: Option<u64>,
    /// Threads fetching shard indexes. Default 8.
    pub n_io_threads: usize,
    /// Threads decoding and assembling. Default: the number of CPUs.
    pub n_compute_threads: usize,
    /// Chunk reads a remote store keeps in flight per batch. Default 64.
    pub reads_in_flight: usize,
    /// Batches read at the same time (one worker thread each): while one batch decodes, the
    /// next is planned and read. Default 2.
    pub n_workers: usize,
    /// Device lanes: batches the device executor decodes side by side, each with its own
    /// streams, pinned staging and device scratch (an equal share of `device_buffer_bytes` and
    /// `host_buffer_bytes`). Default `None`: one per worker.
    pub lanes: Option<usize>,
    /// Samples pulled from the pushed iterator ahead of the reads. Default `None`:
    /// `(n_workers + 1) × batch_size`. At least `batch_size`.
    pub lookahead: Option<usize>,
    /// Batches the consumer may hold at once (popped and not yet released). Default 2.
    pub depth: usize,
    /// Verify checksums (crc32c, zstd content checksums). Default true.
    pub validate_checksums: bool,
    /// Regions reaching outside their array: an error, or padded with the fill value. Default
    /// [`OutOfBounds::Error`].
    pub out_of_bounds: OutOfBounds,
    /// What a sample that cannot be read does. Default [`OnError::Raise`].
    pub on_error: OnError,
    /// Drop the last batch of a push when it is short. Default false: a short last batch with
    /// its real length.
    pub drop_last: bool,
    /// How long [`crate::Pipeline::pop`] waits before it reports what starves. Default 60 s.
    pub pop_timeout: Duration,
    /// Bytes of decoded shard indexes cached. Default `None`: 256 MiB, never below the floor
    /// that the batches being read need (see [`Sizes::shard_index_cache_bytes`]).
    pub shard_index_cache_bytes: Option<u64>,
    /// How remote stores are reached (endpoint, credentials, retries).
    pub store_options: StoreOptions,
}

impl Default for Config {
    fn default() -> Self {
        let reader = ReaderConfig::default();
        Self {
            batch_size: 32,
            sample_shape: None,
            arrays_per_sample: None,
            dtype: OutputDtype::Native,
            allow_lossy_cast: false,
            executor: ExecutorKind::Auto,
            device: None,
            host_buffer_bytes: reader.host_buffer_bytes,
            device_buffer_bytes: reader.device_buffer_bytes,
            max_gpu_memory_bytes: None,
            n_io_threads: reader.n_io_threads,
            n_compute_threads: reader.n_compute_threads,
            reads_in_flight: reader.reads_in_flight,
            n_workers: 2,
            lanes: None,
            lookahead: None,
            depth: 2,
            validate_checksums: true,
            out_of_bounds: OutOfBounds::Error,
            on_error: OnError::Raise,
            drop_last: false,
            pop_timeout: Duration::from_mins(1),
            shard_index_cache_bytes: None,
            store_options: StoreOptions::default(),
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $field:ident: $ty:ty),* $(,)?) => {$(
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, value: $ty) -> Self {
            self.$field = value;
            self
        }
    )*};
}

impl Config {
    /// The defaults with `batch_size` samples per batch.
    #[must_use]
    pub fn new(batch_size: usize) -> Self {
        Self { batch_size, ..Self::default() }
    }

    setters! {
        /// Set the samples per batch.
        with_batch_size: batch_size: usize,
        /// Set the element type of the batches.
        with_dtype: dtype: OutputDtype,
        /// Allow casts to integer types that cannot hold the source's values.
        with_lossy_cast: allow_lossy_cast: bool,
        /// Set the executor.
        with_executor: executor: ExecutorKind,
        /// Set the device executor's pinned staging bytes.
        with_host_buffer_bytes: host_buffer_bytes: u64,
        /// Set the device executor's working device memory.
        with_device_buffer_bytes: device_buffer_bytes: u64,
        /// Set the shard-index fetch threads.
        with_io_threads: n_io_threads: usize,
        /// Set the decode threads.
        with_compute_threads: n_compute_threads: usize,
        /// Set the reads a remote store keeps in flight.
        with_reads_in_flight: reads_in_flight: usize,
        /// Set the batches read at once.
        with_workers: n_workers: usize,
        /// Set the batches the consumer may hold at once.
        with_depth: depth: usize,
        /// Verify checksums (or not).
        with_validate_checksums: validate_checksums: bool,
        /// Set the out-of-bounds policy.
        with_out_of_bounds: out_of_bounds: OutOfBounds,
        /// Set the error policy.
        with_on_error: on_error: OnError,
        /// Drop a short last batch (or not).
        with_drop_last: drop_last: bool,
        /// Set how long a pop waits.
        with_pop_timeout: pop_timeout: Duration,
        /// Set how remote stores are reached.
        with_store_options: store_options: StoreOptions,
    }

    /// Set the shape of every sample's region.
    #[must_use]
    pub fn with_sample_shape(mut self, shape: Vec<u64>) -> Self {
        self.sample_shape = Some(shape);
        self
    }

    /// Set how many arrays each sample names.
    #[must_use]
    pub fn with_arrays_per_sample(mut self, n: usize) -> Self {
        self.arrays_per_sample = Some(n);
        self
    }

    /// Set the CUDA device ordinal.
    #[must_use]
    pub fn with_device(mut self, device: usize) -> Self {
        self.device = Some(device);
        self
    }

    /// Cap the device memory the pipeline holds.
    #[must_use]
    pub fn with_max_gpu_memory_bytes(mut self, bytes: u64) -> Self {
        self.max_gpu_memory_bytes = Some(bytes);
        self
    }

    /// Set the samples pulled ahead of the reads.
    #[must_use]
    pub fn with_lookahead(mut self, samples: usize) -> Self {
        self.lookahead = Some(samples);
        self
    }

    /// Set the shard-index cache size.
    #[must_use]
    pub fn with_shard_index_cache_bytes(mut self, bytes: u64) -> Self {
        self.shard_index_cache_bytes = Some(bytes);
        self
    }

    /// Check every value and derive the sizes. Messages name the field and what to use.
    pub fn validate(&self) -> Result<Sizes, Error> {
        let invalid = |m: String| Err(Error::invalid(m));
        if self.batch_size == 0 {
            return invalid("Config.batch_size is 0: use at least 1 (e.g. 32)".into());
        }
        if self.depth == 0 {
            return invalid(
                "Config.depth is 0: use at least 1 (the batches you hold at once; 2 lets one train while the next waits)"
                    .into(),
            );
        }
        if self.n_workers == 0 {
            return invalid(
                "Config.n_workers is 0: use at least 1 (2 overlaps the reads of one batch with the decode of the next)"
                    .into(),
            );
        }
        if self.lanes == Some(0) {
            return invalid("Config.lanes is 0: use at least 1 (or leave it unset: one per worker)".into());
        }
        let derived_lookahead = (self.n_workers + 1) * self.batch_size;
        let lookahead = self.lookahead.unwrap_or(derived_lookahead);
        if lookahead < self.batch_size {
            return invalid(format!(
                "Config.lookahead is {lookahead} samples, fewer than one batch (batch_size {}): use at least {}, or leave it unset for {derived_lookahead}",
                self.batch_size, self.batch_size
            ));
        }
        if let Some(shape) = &self.sample_shape
            && (shape.is_empty() || shape.contains(&0))
        {
            return invalid(format!(
                "Config.sample_shape {shape:?} has no elements: give every axis an extent of at least 1, or leave it unset to take the shape of the first sample"
            ));
        }
        if self.arrays_per_sample == Some(0) {
            return invalid(
                "Config.arrays_per_sample is 0: use at least 1, or leave it unset to take it from the first sample"
                    .into(),
            );
        }
        if self.pop_timeout.is_zero() {
            return invalid("Config.pop_timeout is 0: use at least 1 ms (default 60 s)".into());
        }
        self.reader_config().validate().map_err(Error::from)?;
        let slots = self.depth + self.n_workers;
        let batch_bytes = self.batch_bytes();
        let floor = (self.n_workers as u64 + 1) * self.batch_size as u64 * SHARDS_PER_SAMPLE * INDEX_BYTES;
        let shard_index_cache_bytes = self.shard_index_cache_bytes.unwrap_or(256 << 20).max(floor);
        let sizes = Sizes {
            lookahead,
            slots,
            batch_bytes,
            shard_index_cache_bytes,
            shard_index_floor: floor,
            metadata_cache_entries: 1024,
        };
        if let Some(cap) = self.max_gpu_memory_bytes {
            let pool = sizes.pool_bytes().unwrap_or(0);
            let need = self.device_buffer_bytes + pool;
            if cap < need {
                let pool_part = match sizes.pool_bytes() {
                    Some(p) => format!(" + {slots} batch buffers ({})", bytes(p)),
                    None => String::new(),
                };
                return invalid(format!(
                    "Config.max_gpu_memory_bytes is {cap} ({}) but the pipeline needs {need} ({}: device_buffer_bytes {}{pool_part}): raise max_gpu_memory_bytes to {need}, or lower device_buffer_bytes, batch_size or depth",
                    bytes(cap),
                    bytes(need),
                    bytes(self.device_buffer_bytes),
                ));
            }
        }
        Ok(sizes)
    }

    /// Bytes of one batch of each array, when the configuration fixes them (sample shape, a cast
    /// dtype, and the arrays per sample).
    fn batch_bytes(&self) -> Option<Vec<u64>> {
        let shape = self.sample_shape.as_ref()?;
        let OutputDtype::Cast(dtype) = self.dtype else { return None };
        let n = self.arrays_per_sample?;
        let one = self.batch_size as u64 * shape.iter().product::<u64>() * dtype.size() as u64;
        Some(vec![one; n])
    }

    /// Set the device lanes (default: one per worker).
    #[must_use]
    pub fn with_lanes(mut self, lanes: usize) -> Self {
        self.lanes = Some(lanes);
        self
    }

    /// The reader's resources: threads, caches, the executor and its device budgets and lanes.
    #[must_use]
    pub fn reader_config(&self) -> ReaderConfig {
        let floor = (self.n_workers as u64 + 1) * self.batch_size as u64 * SHARDS_PER_SAMPLE * INDEX_BYTES;
        let mut c = ReaderConfig::default()
            .with_io_threads(self.n_io_threads)
            .with_compute_threads(self.n_compute_threads)
            .with_reads_in_flight(self.reads_in_flight)
            .with_executor(self.executor)
            .with_buffer_bytes(self.device_buffer_bytes, self.host_buffer_bytes)
            .with_lanes(self.lanes.unwrap_or(self.n_workers))
            .with_shard_index_cache_bytes(self.shard_index_cache_bytes.unwrap_or(256 << 20).max(floor));
        c.device = self.device;
        c
    }

    /// The per-array semantics every array is opened with.
    #[must_use]
    pub fn array_options(&self) -> ArrayOptions {
        ArrayOptions::default()
            .with_output_dtype(self.dtype)
            .with_out_of_bounds(self.out_of_bounds)
            .with_lossy_cast(self.allow_lossy_cast)
            .with_validate_checksums(self.validate_checksums)
    }

    /// Every size derived from the configuration, one per line (what a user of nclack/damacy
    /// had to find in its C sources); the validation error instead when it is invalid.
    #[must_use]
    pub fn describe(&self) -> String {
        match self.validate() {
            Ok(sizes) => sizes.describe(self),
            Err(e) => format!("invalid configuration: {e}"),
        }
    }
}

/// The sizes a [`Config`] implies, derived once by [`Config::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sizes {
    /// Samples pulled from the iterator ahead of the reads.
    pub lookahead: usize,
    /// Batch buffers in the pool: `depth + n_workers` (the batches you hold plus those being
    /// read).
    pub slots: usize,
    /// Shard-index cache bytes given to the reader.
    pub shard_index_cache_bytes: u64,
    /// The least the shard-index cache is given: the indexes of the batches being read,
    /// `(n_workers + 1) × batch_size × 8` shards (a 3-D crop can cross a shard boundary on each
    /// axis) of up to 64 KiB each (4096 inner chunks).
    pub shard_index_floor: u64,
    /// Arrays whose metadata the reader keeps open.
    pub metadata_cache_entries: u64,
    batch_bytes: Option<Vec<u64>>,
}

impl Sizes {
    /// Bytes of one batch of each array, when the configuration fixes them; otherwise the
    /// first sample does (see [`crate::Pipeline::describe`]).
    #[must_use]
    pub fn batch_bytes(&self) -> Option<Vec<u64>> {
        self.batch_bytes.clone()
    }

    /// Bytes of all batch buffers, when known.
    #[must_use]
    pub fn pool_bytes(&self) -> Option<u64> {
        self.batch_bytes.as_ref().map(|b| b.iter().sum::<u64>() * self.slots as u64)
    }

    fn describe(&self, c: &Config) -> String {
        let mut s = String::new();
        let shape = c.sample_shape.as_ref().map_or_else(|| "the first sample's shape".to_owned(), |s| format!("{s:?}"));
        let dtype = match c.dtype {
            OutputDtype::Native => "each array's own dtype".to_owned(),
            OutputDtype::Cast(d) => d.to_string(),
        };
        let arrays = c.arrays_per_sample.map_or_else(|| "the first sample's".to_owned(), |n| n.to_string());
        let _ =
            writeln!(s, "batch          {} samples of {shape} as {dtype}; arrays per sample: {arrays}", c.batch_size);
        match (&self.batch_bytes, self.pool_bytes()) {
            (Some(b), Some(p)) => {
                let _ = writeln!(
                    s,
                    "batch buffers  {} slots (depth {} + {} workers) × {} = {}, allocated at construction (device memory with a device executor)",
                    self.slots,
                    c.depth,
                    c.n_workers,
                    b.iter().map(|b| bytes(*b)).collect::<Vec<_>>().join(" + "),
                    bytes(p)
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "batch buffers  {} slots (depth {} + {} workers), sized and allocated once, when the first sample fixes the layout",
                    self.slots, c.depth, c.n_workers
                );
            }
        }
        let _ = writeln!(
            s,
            "lookahead      {} samples ({:.1} batches) pulled ahead of the reads",
            self.lookahead,
            self.lookahead as f64 / c.batch_size as f64
        );
        let _ = writeln!(
            s,
            "threads        {} workers (batches read at once), {} io, {} compute; {} reads in flight per batch",
            c.n_workers, c.n_io_threads, c.n_compute_threads, c.reads_in_flight
        );
        let _ = writeln!(
            s,
            "caches         shard indexes {} (floor {}), array metadata {} arrays",
            bytes(self.shard_index_cache_bytes),
            bytes(self.shard_index_floor),
            self.metadata_cache_entries
        );
        let cap = c.max_gpu_memory_bytes.map_or_else(|| "no cap".to_owned(), |b| format!("cap {}", bytes(b)));
        let _ = writeln!(
            s,
            "device         executor {:?}, device {}; decode memory {} + pinned staging {} ({cap})",
            c.executor,
            c.device.map_or_else(|| "from the current context".to_owned(), |d| d.to_string()),
            bytes(c.device_buffer_bytes),
            bytes(c.host_buffer_bytes)
        );
        let _ = write!(
            s,
            "policy         on_error {:?}, out_of_bounds {:?}, drop_last {}, checksums {}, pop_timeout {:?}",
            c.on_error, c.out_of_bounds, c.drop_last, c.validate_checksums, c.pop_timeout
        );
        s
    }
}

/// Bytes with a binary unit.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use damacy_codec::Dtype;

    fn message(c: &Config) -> String {
        c.validate().map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn every_invalid_value_names_its_knob_and_the_fix() {
        let cases: Vec<(Config, &[&str])> = vec![
            (Config::new(0), &["Config.batch_size is 0", "use at least 1"]),
            (Config::new(4).with_depth(0), &["Config.depth is 0", "use at least 1"]),
            (Config::new(4).with_workers(0), &["Config.n_workers is 0", "use at least 1"]),
            (Config::new(8).with_lookahead(3), &["Config.lookahead is 3", "use at least 8", "unset for 24"]),
            (Config::new(4).with_sample_shape(vec![8, 0]), &["Config.sample_shape [8, 0]", "at least 1"]),
            (Config::new(4).with_sample_shape(vec![]), &["Config.sample_shape []"]),
            (Config::new(4).with_arrays_per_sample(0), &["Config.arrays_per_sample is 0"]),
            (Config::new(4).with_pop_timeout(Duration::ZERO), &["Config.pop_timeout is 0", "at least 1 ms"]),
            (Config::new(4).with_io_threads(0), &["n_io_threads is 0", "use at least 1"]),
            (Config::new(4).with_compute_threads(0), &["n_compute_threads is 0", "use at least 1"]),
            (Config::new(4).with_device_buffer_bytes(1 << 20), &["device_buffer_bytes is 1048576", "at least"]),
            (Config::new(4).with_host_buffer_bytes(1 << 10), &["host_buffer_bytes is 1024", "at least"]),
            (
                Config::new(32)
                    .with_sample_shape(vec![64, 64, 64])
                    .with_dtype(OutputDtype::Cast(Dtype::F32))
                    .with_arrays_per_sample(1)
                    .with_max_gpu_memory_bytes(1 << 30),
                &[
                    "Config.max_gpu_memory_bytes is 1073741824",
                    "4 batch buffers (128.0 MiB)",
                    "raise max_gpu_memory_bytes to 1207959552",
                ],
            ),
        ];
        for (config, needles) in cases {
            let m = message(&config);
            for n in needles {
                assert!(m.contains(n), "{m:?} lacks {n:?}");
            }
        }
    }

    #[test]
    fn sizes_follow_from_the_knobs() {
        let c = Config::new(16)
            .with_sample_shape(vec![32, 32])
            .with_dtype(OutputDtype::Cast(Dtype::U16))
            .with_arrays_per_sample(2)
            .with_depth(3)
            .with_workers(2);
        let s = c.validate().unwrap();
        assert_eq!(s.slots, 5);
        assert_eq!(s.lookahead, 48);
        assert_eq!(s.batch_bytes(), Some(vec![16 * 32 * 32 * 2; 2]));
        assert_eq!(s.pool_bytes(), Some(5 * 2 * 16 * 32 * 32 * 2));
        assert_eq!(s.shard_index_cache_bytes, 256 << 20);
        let d = c.describe();
        for needle in ["5 slots (depth 3 + 2 workers)", "32.0 KiB + 32.0 KiB = 320.0 KiB", "48 samples (3.0 batches)"] {
            assert!(d.contains(needle), "{d}");
        }
        // Unknown until the first sample: said so.
        assert!(Config::new(4).describe().contains("when the first sample fixes the layout"));
        // The shard-index cache never goes below what the batches being read need.
        let small = Config::new(1024).with_shard_index_cache_bytes(1 << 20).validate().unwrap();
        assert_eq!(small.shard_index_cache_bytes, 3 * 1024 * 8 * (64 << 10));
        assert_eq!(
            Config::new(1024).with_shard_index_cache_bytes(1 << 20).reader_config().shard_index_cache_bytes,
            small.shard_index_cache_bytes
        );
    }

    #[test]
    fn on_error_parses() {
        assert_eq!("skip".parse::<OnError>().unwrap(), OnError::Skip);
        assert!("ignore".parse::<OnError>().unwrap_err().to_string().contains("use \"raise\" or \"skip\""));
    }
}
