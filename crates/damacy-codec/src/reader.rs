//! The reader: owns the resources (threads, caches, the executor and its device buffers) and
//! composes the stages — [`crate::plan`] → [`crate::fetch`] → [`crate::decode`] →
//! [`crate::assemble`] — into a batch read.

use std::sync::Arc;

use crate::array::{ArrayHandle, ArrayMeta, ArrayOptions, normalize_path};
use crate::codec::ChainRoute;
use crate::config::ReaderConfig;
use crate::ctx::Ctx;
use crate::decode::Executor;
use crate::decode::cpu::CpuExecutor;
use crate::decode::device::{DeviceExecutor, Selected};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::output::{AlignedBytes, Batch, DeviceArrayMut, HostArrayMut, Output, reach};
use crate::plan::{self, BatchPlan};
use crate::region::{Region, Target};
use crate::remote::{Remote, StoreStats};
use crate::shard_index::ShardIndexCache;
use crate::stats::{Stats, StatsSnapshot};
use crate::store::Store;
use damacy_kernels::Stream;

/// Reads batches of regions of zarr arrays: owns the caches, the thread pools, the executor
/// (and its device buffers) and the counters. Cheap to clone (clones share everything).
///
/// ```
/// use damacy_codec::{ArrayOptions, ReaderConfig, Reader, Region, Store, StoreOptions};
/// # fn main() -> damacy_codec::Result<()> {
/// # let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
/// let store = Store::open(root, &StoreOptions::default())?;
/// let reader = Reader::new(ReaderConfig::default())?;
/// let array = reader.open_array(&store, "v3/sharded_zstd_index_end", ArrayOptions::default())?;
/// let crops = [Region::new(vec![0, 0, 0], vec![8, 8, 8]), Region::new(vec![9, 30, 4], vec![8, 8, 8])];
/// let batch = reader.read_batch(&array, &crops)?;
/// assert_eq!(batch.shape, vec![2, 8, 8, 8]);
/// assert_eq!(batch.as_slice::<u16>()?.len(), 2 * 8 * 8 * 8);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Reader {
    inner: Arc<Inner>,
}

struct Inner {
    config: ReaderConfig,
    stats: Arc<Stats>,
    index_cache: ShardIndexCache,
    arrays: moka::sync::Cache<(u64, String), Arc<ArrayMeta>>,
    io_pool: rayon::ThreadPool,
    compute_pool: rayon::ThreadPool,
    /// [`Ctx::decoding`]: remote reads handed to `compute_pool` or decoded by batch threads.
    decoding: std::sync::atomic::AtomicUsize,
    device: Option<Box<DeviceExecutor>>,
    executor_note: String,
    /// The remote stores arrays were opened from, for [`Reader::store_stats`].
    stores: std::sync::Mutex<Vec<(u64, std::sync::Weak<Remote>)>>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("config", &self.inner.config)
            .field("executor", &self.inner.executor_note)
            .finish_non_exhaustive()
    }
}

/// One selected axis of a chunk-level read: `count` elements from `start`, `step` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AxisSelection {
    /// The first element.
    pub start: u64,
    /// Distance between selected elements (at least 1).
    pub step: u64,
    /// How many elements.
    pub count: u64,
}

impl AxisSelection {
    /// `count` consecutive elements from `start`.
    #[must_use]
    pub fn range(start: u64, count: u64) -> Self {
        Self { start, step: 1, count }
    }

    fn end(&self) -> u64 {
        if self.count == 0 { self.start } else { self.start + (self.count - 1) * self.step + 1 }
    }
}

/// Part of one chunk (a shard, for a sharded array) and where it goes in a caller's array:
/// zarr-python's `(chunk_selection, out_selection)` pair of a codec pipeline's `read`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkSelection {
    /// The chunk's grid coordinates.
    pub chunk: Vec<u64>,
    /// Per axis, the elements of the chunk to read (chunk coordinates).
    pub selection: Vec<AxisSelection>,
    /// Per axis, where they go in the output array (its coordinates); the same counts.
    pub out_selection: Vec<AxisSelection>,
}

impl Reader {
    /// A reader with validated resources: thread pools, caches, and the executor the
    /// configuration asks for, with every device buffer allocated (and every kernel compiled)
    /// now rather than at the first batch.
    pub fn new(config: ReaderConfig) -> Result<Self> {
        config.validate()?;
        let stats = Arc::new(Stats::default());
        let pool = |n: usize, name: &'static str| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(move |i| format!("damacy-{name}-{i}"))
                .build()
                .map_err(|e| Error::internal_from(format!("reader: cannot start {n} {name} threads"), e))
        };
        let (device, executor_note) = match DeviceExecutor::select(&config)? {
            Selected::Device(d) => {
                // The decoder and assembler loaded their kernels in `select`: say from where.
                let note = format!("device kernels on {}; {}", d.describe(), d.device().kernel_images());
                (Some(d), note)
            }
            Selected::Cpu(reason) => (None, format!("cpu ({reason})")),
        };
        let inner = Inner {
            device,
            executor_note,
            index_cache: ShardIndexCache::new(config.shard_index_cache_bytes, stats.clone()),
            arrays: moka::sync::Cache::new(config.metadata_cache_entries),
            io_pool: pool(config.n_io_threads, "io")?,
            compute_pool: pool(config.n_compute_threads, "compute")?,
            decoding: std::sync::atomic::AtomicUsize::new(0),
            stores: std::sync::Mutex::new(Vec::new()),
            stats,
            config,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The resources the reader was built with.
    #[must_use]
    pub fn config(&self) -> &ReaderConfig {
        &self.inner.config
    }

    /// Which executor decodes, and why: `device kernels on …; kernels: 8 from shipped images
    /// (sm_90), …` (where the kernel images came from, see
    /// [`damacy_kernels::Device::kernel_images`]) or `cpu (reason)`. Arrays whose
    /// chain has a codec without a device kernel decode on the CPU either way (see
    /// [`ArrayMeta::route`]).
    #[must_use]
    pub fn executor_note(&self) -> &str {
        &self.inner.executor_note
    }

    /// The device the reader decodes on, if any.
    #[must_use]
    pub fn device(&self) -> Option<&damacy_kernels::Device> {
        self.inner.device.as_deref().map(DeviceExecutor::device)
    }

    /// The counters so far.
    #[must_use]
    pub fn stats(&self) -> StatsSnapshot {
        let mut snapshot = self.inner.stats.snapshot();
        snapshot.index_cache_bytes = self.inner.index_cache.weighted_bytes();
        snapshot
    }

    /// What each remote store this reader opened arrays of has done so far (requests, bytes,
    /// retries, timeouts, hedges, in-flight high-water marks, latency percentiles), in the order
    /// they were first opened. A store's counters cover every reader that uses it.
    #[must_use]
    pub fn store_stats(&self) -> Vec<StoreStats> {
        let Ok(stores) = self.inner.stores.lock() else { return Vec::new() };
        stores.iter().filter_map(|(_, s)| s.upgrade()).map(|r| r.stats()).collect()
    }

    /// The shard-index cache.
    #[must_use]
    pub fn shard_index_cache(&self) -> &ShardIndexCache {
        &self.inner.index_cache
    }

    /// Open an array of `store` with per-array `options` (its metadata is cached by store and
    /// path, so opening it again with other options reads nothing). Fails when the output dtype
    /// is an integer type that cannot hold the array's values, unless lossy casts are allowed
    /// (floating-point outputs take every type, rounded to nearest even).
    pub fn open_array(&self, store: &Store, path: &str, options: ArrayOptions) -> Result<ArrayHandle> {
        if let Some(remote) = store.remote()
            && let Ok(mut stores) = self.inner.stores.lock()
            && !stores.iter().any(|(id, s)| *id == store.id() && s.strong_count() > 0)
        {
            stores.retain(|(_, s)| s.strong_count() > 0);
            stores.push((store.id(), Arc::downgrade(remote)));
        }
        let key = (store.id(), normalize_path(path));
        let meta = self
            .inner
            .arrays
            .try_get_with(key, || ArrayMeta::open(store, path).map(Arc::new))
            .map_err(|e| (*e).clone())?;
        ArrayHandle::new(store.clone(), (*meta).clone(), options)
    }

    /// [`Reader::open_array`] for async callers: runs on the I/O runtime's blocking pool, so a tokio
    /// worker is never blocked.
    pub async fn open_array_async(&self, store: &Store, path: &str, options: ArrayOptions) -> Result<ArrayHandle> {
        let (reader, store, path) = (self.clone(), store.clone(), path.to_owned());
        crate::store::off_thread(move || reader.open_array(&store, &path, options)).await
    }

    /// Plan a batch of equally shaped regions: the units they touch (each once), the shard
    /// indexes (through the cache) and the coalesced reads. Read it with
    /// [`Reader::read_batch_into`] (as often as wanted).
    pub fn plan(&self, array: &ArrayHandle, regions: &[Region]) -> Result<BatchPlan> {
        let (targets, shape) = plan::region_targets(array, regions, None)?;
        let nbytes = shape.iter().product::<u64>() as usize * array.out_dtype().size();
        self.build(array, targets, shape, nbytes, true)
    }

    /// Plan equally shaped regions placed at chosen positions of a batch of `batch_len`
    /// regions: region `i` fills position `positions[i]` (distinct, below `batch_len`) of an
    /// output of shape `[batch_len, region shape…]`, and positions no region names are left as
    /// they are. Several plans (one per array) can so fill one batch whose samples come from
    /// different arrays, in the caller's order, without a copy.
    pub fn plan_at(
        &self,
        array: &ArrayHandle,
        regions: &[Region],
        positions: &[usize],
        batch_len: usize,
    ) -> Result<BatchPlan> {
        if positions.len() != regions.len() {
            return Err(Error::invalid(format!(
                "{} positions for {} regions: give one position per region",
                positions.len(),
                regions.len()
            )));
        }
        let mut taken = vec![false; batch_len];
        for &p in positions {
            match taken.get_mut(p) {
                Some(t) if !*t => *t = true,
                Some(_) => {
                    return Err(Error::invalid(format!("position {p} is given twice; positions must be distinct")));
                }
                None => {
                    return Err(Error::invalid(format!("position {p} is outside a batch of {batch_len} regions")));
                }
            }
        }
        let (targets, shape) = plan::region_targets(array, regions, Some((positions, batch_len)))?;
        let nbytes = shape.iter().product::<u64>() as usize * array.out_dtype().size();
        self.build(array, targets, shape, nbytes, regions.len() == batch_len)
    }

    fn build(
        &self,
        array: &ArrayHandle,
        targets: Vec<Target>,
        shape: Vec<u64>,
        nbytes: usize,
        dense: bool,
    ) -> Result<BatchPlan> {
        let c = &self.inner.config;
        let policy = array.store().coalescing();
        // Plain `bytes` chunks may be read by slabs on the CPU (the device reads whole chunks).
        let split_raw = self.inner.device.is_none() || !matches!(array.route, ChainRoute::Device(_));
        let mut plan = plan::build(
            array,
            targets,
            shape,
            nbytes,
            &self.inner.index_cache,
            &self.inner.io_pool,
            plan::BuildOptions {
                max_gap: c.coalesce_max_gap.unwrap_or(policy.max_gap),
                max_size: c.coalesce_max_size.unwrap_or(policy.max_size),
                split_raw,
            },
        )?;
        plan.dense = dense;
        Ok(plan)
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            stats: &self.inner.stats,
            compute: &self.inner.compute_pool,
            in_flight: self.inner.config.reads_in_flight,
            decoding: &self.inner.decoding,
        }
    }

    /// The executor for `plan`: the device for arrays whose chain it decodes, else the CPU.
    fn executor(&self, plan: &BatchPlan) -> &dyn Executor {
        match (&self.inner.device, &plan.array.route) {
            (Some(d), ChainRoute::Device(_)) => d.as_ref(),
            _ => &CpuExecutor,
        }
    }

    /// Read a planned batch into a caller's output: a host slice or a device buffer, exactly
    /// [`BatchPlan::nbytes`] long (C order, the plan's dtype). Nothing is allocated that grows
    /// with the batch on the host route.
    pub fn read_batch_into(&self, plan: &BatchPlan, out: Output<'_>) -> Result<()> {
        let ctx = self.ctx();
        match out {
            Output::Host(host) => {
                if host.len() != plan.nbytes {
                    return Err(Error::invalid(format!(
                        "output holds {} bytes; the batch of shape {:?} ({}) needs {}",
                        host.len(),
                        plan.shape,
                        plan.dtype(),
                        plan.nbytes
                    )));
                }
                self.executor(plan).read_host(&ctx, plan, host)?;
            }
            Output::Device { buffer, offset, stream } => {
                let Some(device) = &self.inner.device else {
                    return Err(Error::invalid(format!(
                        "a device output needs a device executor; this reader runs {}",
                        self.inner.executor_note
                    )));
                };
                if offset.checked_add(plan.nbytes).is_none_or(|end| end > buffer.len()) {
                    return Err(Error::invalid(format!(
                        "device output of {} bytes has no room for {} bytes at offset {offset}",
                        buffer.len(),
                        plan.nbytes
                    )));
                }
                if matches!(plan.array.route, ChainRoute::Device(_)) {
                    device.read_device(&ctx, plan, (buffer, offset), stream)?;
                } else {
                    // The CPU decodes; the batch is copied up once.
                    let mut staging = AlignedBytes::zeroed(plan.nbytes)?;
                    CpuExecutor.read_host(&ctx, plan, staging.as_mut_slice())?;
                    device.upload(staging.as_slice(), (buffer, offset), stream)?;
                }
            }
        }
        self.inner.stats.add_regions(plan.targets.len() as u64);
        self.inner.stats.add_batches(1);
        Ok(())
    }

    /// Read equally shaped regions of one array into a batch the reader allocates (aligned,
    /// viewable as its element type). Chunks shared by several regions are fetched and decoded
    /// once.
    pub fn read_batch(&self, array: &ArrayHandle, regions: &[Region]) -> Result<Batch> {
        let plan = self.plan(array, regions)?;
        let mut data = AlignedBytes::zeroed(plan.nbytes)?;
        self.read_batch_into(&plan, Output::Host(data.as_mut_slice()))?;
        Ok(Batch::new(data, plan.shape, array.out_dtype()))
    }

    /// [`Reader::read_batch`] for async callers: runs on the I/O runtime's blocking pool, so a tokio worker
    /// is never blocked.
    pub async fn read_batch_async(&self, array: &ArrayHandle, regions: Vec<Region>) -> Result<Batch> {
        let (reader, array) = (self.clone(), array.clone());
        crate::store::off_thread(move || reader.read_batch(&array, &regions)).await
    }

    /// Read one region (a batch of one).
    pub fn read_region(&self, array: &ArrayHandle, region: &Region) -> Result<Batch> {
        self.read_batch(array, std::slice::from_ref(region))
    }

    /// Decode parts of chunks into a caller's strided host array (zarr-python's codec pipeline
    /// contract: for each chunk, a selection of it and where it goes in `out`). Missing chunks
    /// and empty inner chunks become the fill value; elements of `out` outside every
    /// `out_selection` are left as they are.
    pub fn read_chunks_into(
        &self,
        array: &ArrayHandle,
        chunks: &[ChunkSelection],
        out: &mut HostArrayMut<'_>,
    ) -> Result<()> {
        out.validate()?;
        let targets = chunk_targets(array, chunks, out.dtype, out.offset, &out.shape, &out.strides)?;
        let plan = self.build(array, targets, out.shape.clone(), out.data.len(), false)?;
        self.executor(&plan).read_host(&self.ctx(), &plan, &mut *out.data)
    }

    /// [`Reader::read_chunks_into`] for an array in device memory (zarr-python's `out` under
    /// `zarr.config.enable_gpu()`). Stream-ordered on `stream`: the read waits for the work
    /// queued there before the call, and work queued there after the call sees the data.
    /// Chunks whose chain the device decodes are decoded and assembled on the device, straight
    /// into `out`; other chains decode on the CPU, and the bytes `out` spans go down, are
    /// written and go back up.
    pub fn read_chunks_into_device(
        &self,
        array: &ArrayHandle,
        chunks: &[ChunkSelection],
        out: &mut DeviceArrayMut<'_>,
        stream: &Stream,
    ) -> Result<()> {
        let Some(device) = &self.inner.device else {
            return Err(Error::invalid(format!(
                "a device output needs a device executor; this reader runs {}",
                self.inner.executor_note
            )));
        };
        out.validate()?;
        let mut targets = chunk_targets(array, chunks, out.dtype, out.offset, &out.shape, &out.strides)?;
        if matches!(array.route, ChainRoute::Device(_)) {
            // `read_device` orders its writes after the work queued on `stream` before the call.
            let plan = self.build(array, targets, out.shape.clone(), out.buffer.len(), false)?;
            return device.read_device(&self.ctx(), &plan, (&mut *out.buffer, 0), stream);
        }
        // The CPU decodes: the span `out` reaches comes down (after the stream's earlier work),
        // is written, and goes back up, both copies on `stream`.
        let (lo, hi) = reach(out.offset, &out.shape, &out.strides, out.dtype);
        let (lo, len) = (lo as usize, (hi - lo) as usize);
        for t in &mut targets {
            t.dst_offset -= lo;
        }
        let mut staging = AlignedBytes::zeroed(len)?;
        let dev = device.device();
        dev.download_on(stream, out.buffer, lo, staging.as_mut_slice())
            .map_err(|e| Error::device("copying the output array down", e))?;
        let plan = self.build(array, targets, out.shape.clone(), len, false)?;
        CpuExecutor.read_host(&self.ctx(), &plan, staging.as_mut_slice())?;
        device.upload(staging.as_slice(), (&mut *out.buffer, lo), stream)
    }
}

/// The targets of a chunk-level read into an array of `shape` and byte `strides` whose
/// element `[0, …]` is at byte `offset`: one per chunk, checked against the array and the
/// output.
fn chunk_targets(
    array: &ArrayHandle,
    chunks: &[ChunkSelection],
    dtype: Dtype,
    offset: usize,
    shape: &[u64],
    strides: &[isize],
) -> Result<Vec<Target>> {
    if dtype != array.out_dtype() {
        return Err(Error::invalid(format!(
            "output array holds {dtype}; array {} reads as {}",
            array.path,
            array.out_dtype()
        )));
    }
    let rank = array.shape.len();
    if shape.len() != rank {
        return Err(Error::invalid(format!(
            "output of rank {} for array {} of rank {rank}: give dropped axes as extent-1 axes",
            shape.len(),
            array.path
        )));
    }
    let mut targets = Vec::with_capacity(chunks.len());
    for c in chunks {
        if c.chunk.len() != rank || c.selection.len() != rank || c.out_selection.len() != rank {
            return Err(Error::invalid(format!(
                "chunk selection {c:?} does not match array {} of rank {rank} or an output of rank {}",
                array.path,
                shape.len()
            )));
        }
        let mut start = Vec::with_capacity(rank);
        let mut dst = offset as isize;
        let mut dst_strides = Vec::with_capacity(rank);
        for a in 0..rank {
            let (s, o) = (c.selection[a], c.out_selection[a]);
            let origin = c.chunk[a].checked_mul(array.chunk_shape[a]);
            let inside_chunk = s.end() <= array.chunk_shape[a];
            let inside_array = origin.is_some_and(|o| o + s.end() <= array.shape[a]);
            if s.step == 0 || o.step == 0 || s.count != o.count || !inside_chunk || !inside_array || o.end() > shape[a]
            {
                return Err(Error::invalid(format!(
                    "chunk {:?} of array {} (chunk shape {:?}, shape {:?}): selection {s:?} → output {o:?} on axis {a} is out of range or mismatched",
                    c.chunk, array.path, array.chunk_shape, array.shape
                )));
            }
            start.push(origin.unwrap_or(0) + s.start);
            dst += o.start as isize * strides[a];
            dst_strides.push(o.step as isize * strides[a]);
        }
        targets.push(Target {
            start,
            step: c.selection.iter().map(|s| s.step).collect(),
            count: c.selection.iter().map(|s| s.count).collect(),
            dst_offset: dst as usize,
            dst_strides,
            padded: None,
        });
    }
    Ok(targets)
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Reader>();
    send_sync::<ArrayHandle>();
    send_sync::<BatchPlan>();
    send_sync::<Batch>();
    send_sync::<Store>();
};
