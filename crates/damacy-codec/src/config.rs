//! The reader's resources (threads, caches, budgets, executor), validated once when a
//! [`crate::Reader`] is built. Per-array semantics (output dtype, out-of-bounds policy) are
//! [`crate::ArrayOptions`], given when an array is opened.

use crate::error::{Error, Result};

/// Which executor decodes chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ExecutorKind {
    /// damacy's kernels on a CUDA GPU when the machine has one, else the CPU (a build without
    /// CUDA, no driver, no device: the reason is kept in [`crate::Reader::executor_note`]). The
    /// default. With a GPU present the device is bound as under [`ExecutorKind::Gpu`]: a
    /// `device` that disagrees with the context current on the calling thread, or no `device`
    /// and no current context, is [`crate::Error::InvalidArgument`], not a quiet fall back.
    #[default]
    Auto,
    /// zarrs' codec chains on the host.
    Cpu,
    /// damacy's kernels on a CUDA GPU. No usable GPU is [`crate::Error::Device`] at
    /// construction (a build without the `cuda` feature: [`crate::Error::Unsupported`]); a
    /// wrong binding is [`crate::Error::InvalidArgument`], as under [`ExecutorKind::Auto`].
    Gpu,
    /// damacy's kernels on the host emulator (cargo feature `emulate`): the GPU route's exact
    /// logic on a machine with no GPU.
    Emulated,
}

impl std::str::FromStr for ExecutorKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            "emulated" => Ok(Self::Emulated),
            other => Err(Error::invalid(format!("executor {other:?}: use auto, cpu, gpu or emulated"))),
        }
    }
}

/// The smallest [`ReaderConfig::device_buffer_bytes`].
pub const MIN_DEVICE_BUFFER_BYTES: u64 = 64 << 20;
/// The smallest [`ReaderConfig::host_buffer_bytes`].
pub const MIN_HOST_BUFFER_BYTES: u64 = 16 << 20;

/// The resources of a [`crate::Reader`]. Every field has a documented default; build with
/// `ReaderConfig::default().with_*(…)`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReaderConfig {
    /// Threads that fetch shard indexes of local stores. Default 8: they wait on storage, not
    /// on the CPU. (Remote stores fetch shard indexes asynchronously, all at once.)
    pub n_io_threads: usize,
    /// The most reads one batch keeps in flight on a remote store. Default 1024: the store's
    /// own limits on requests and bytes in flight ([`crate::StoreOptions`], shared by every
    /// batch and reader using the store) are what usually bind.
    pub reads_in_flight: usize,
    /// Threads decoding and assembling. Default: the number of CPUs.
    pub n_compute_threads: usize,
    /// Two byte ranges of one key merge into one read when the gap between them is at most
    /// this many bytes. Default `None`: the store's policy ([`crate::Store::coalescing`]: 64 KiB
    /// for local files, 256 KiB for HTTP and object stores).
    pub coalesce_max_gap: Option<u64>,
    /// A merged read never grows beyond this many bytes. Default `None`: the store's policy
    /// (16 MiB for local files, 8 MiB for HTTP and object stores).
    pub coalesce_max_size: Option<u64>,
    /// Bytes of decoded shard indexes kept in the cache. Default 256 MiB. A batch always keeps
    /// the indexes it needs while it is read, so a small cache costs refetches, never errors.
    pub shard_index_cache_bytes: u64,
    /// Arrays whose metadata is kept open. Default 1024.
    pub metadata_cache_entries: u64,
    /// Which executor decodes. Default [`ExecutorKind::Auto`].
    pub executor: ExecutorKind,
    /// The CUDA device ordinal (a rank's `LOCAL_RANK`). Default `None`: the context current on
    /// the calling thread, else device 0.
    pub device: Option<usize>,
    /// Hard budget of device memory for the device executor, shared equally by its lanes: each
    /// lane's decode waves (two in flight), assemble table and batch buffer (a quarter of its
    /// share, where host outputs are assembled) are allocated from it when the reader is built,
    /// and nothing on the hot path allocates device memory. Default 1 GiB; at least 64 MiB.
    pub device_buffer_bytes: u64,
    /// Hard budget of pinned (page-locked) host memory for the device executor, shared equally by
    /// its lanes (staging rings, status areas, assemble tables' mirrors). Default 256 MiB; at
    /// least 16 MiB.
    pub host_buffer_bytes: u64,
    /// Device lanes: batches the device executor decodes side by side, each lane with its own
    /// streams, pinned staging and device scratch, taking an equal share of
    /// `device_buffer_bytes` and `host_buffer_bytes` (fewer when the budgets cannot hold that
    /// many; [`crate::Reader::executor_note`] says how many). A batch takes a free lane and
    /// returns it when done; more batches than lanes wait for one. Default 2 (a `damacy`
    /// `Pipeline` uses one per worker).
    pub lanes: usize,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            n_io_threads: 8,
            reads_in_flight: 1024,
            n_compute_threads: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            coalesce_max_gap: None,
            coalesce_max_size: None,
            shard_index_cache_bytes: 256 << 20,
            metadata_cache_entries: 1024,
            executor: ExecutorKind::Auto,
            device: None,
            device_buffer_bytes: 1 << 30,
            host_buffer_bytes: 256 << 20,
            lanes: 2,
        }
    }
}

impl ReaderConfig {
    /// Set the reads a remote store keeps in flight.
    #[must_use]
    pub fn with_reads_in_flight(mut self, n: usize) -> Self {
        self.reads_in_flight = n;
        self
    }

    /// Set the shard-index fetch threads.
    #[must_use]
    pub fn with_io_threads(mut self, n: usize) -> Self {
        self.n_io_threads = n;
        self
    }

    /// Set the decode threads.
    #[must_use]
    pub fn with_compute_threads(mut self, n: usize) -> Self {
        self.n_compute_threads = n;
        self
    }

    /// Set the coalescing caps for every store this reader reads: the largest gap merged and
    /// the largest merged read (instead of each store's own policy).
    #[must_use]
    pub fn with_coalescing(mut self, max_gap: u64, max_size: u64) -> Self {
        self.coalesce_max_gap = Some(max_gap);
        self.coalesce_max_size = Some(max_size);
        self
    }

    /// Set the shard-index cache size in bytes.
    #[must_use]
    pub fn with_shard_index_cache_bytes(mut self, bytes: u64) -> Self {
        self.shard_index_cache_bytes = bytes;
        self
    }

    /// Set the executor.
    #[must_use]
    pub fn with_executor(mut self, executor: ExecutorKind) -> Self {
        self.executor = executor;
        self
    }

    /// Set the CUDA device ordinal.
    #[must_use]
    pub fn with_device(mut self, device: usize) -> Self {
        self.device = Some(device);
        self
    }

    /// Set the device and pinned host memory budgets of the device executor.
    #[must_use]
    pub fn with_buffer_bytes(mut self, device_bytes: u64, host_bytes: u64) -> Self {
        self.device_buffer_bytes = device_bytes;
        self.host_buffer_bytes = host_bytes;
        self
    }

    /// Set the device lanes.
    #[must_use]
    pub fn with_lanes(mut self, lanes: usize) -> Self {
        self.lanes = lanes;
        self
    }

    /// Check every value; called once by [`crate::Reader::new`].
    pub fn validate(&self) -> Result<()> {
        if self.n_io_threads == 0 {
            return Err(Error::invalid("n_io_threads is 0; use at least 1"));
        }
        if self.reads_in_flight == 0 {
            return Err(Error::invalid("reads_in_flight is 0; use at least 1"));
        }
        if self.n_compute_threads == 0 {
            return Err(Error::invalid("n_compute_threads is 0; use at least 1"));
        }
        if self.coalesce_max_size == Some(0) {
            return Err(Error::invalid("coalesce_max_size is 0; use at least 1 byte (no merging beyond one range)"));
        }
        if self.device_buffer_bytes < MIN_DEVICE_BUFFER_BYTES {
            return Err(Error::invalid(format!(
                "device_buffer_bytes is {}; the device executor needs at least {MIN_DEVICE_BUFFER_BYTES} (64 MiB)",
                self.device_buffer_bytes
            )));
        }
        if self.host_buffer_bytes < MIN_HOST_BUFFER_BYTES {
            return Err(Error::invalid(format!(
                "host_buffer_bytes is {}; the device executor needs at least {MIN_HOST_BUFFER_BYTES} (16 MiB)",
                self.host_buffer_bytes
            )));
        }
        if self.lanes == 0 {
            return Err(Error::invalid("lanes is 0; use at least 1 (one per thread that reads batches at once)"));
        }
        if self.metadata_cache_entries == 0 {
            return Err(Error::invalid("metadata_cache_entries is 0; use at least 1"));
        }
        Ok(())
    }
}
