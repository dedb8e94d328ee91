//! damacy as a zarrs feature: extension traits on [`zarrs::array::Array`] that read subsets,
//! batches of subsets and chunks through damacy's engine into a [`DeviceArray`] (device memory
//! when the context has a device, host memory with the CPU executor) or into a caller's buffer.
//!
//! The zarrs array is used as it is: its storage, its metadata and its codec chain (nothing is
//! opened a second time). A [`DamacyContext`], made once, holds the reader (threads, caches, the
//! executor and its device buffers) and remembers the arrays it has seen, so shard indexes stay
//! cached between calls. Chains without a device kernel decode on the CPU with zarrs' own
//! chain, and the copy goes up once; [`ArrayDeviceExt::damacy_route`] says which route an array
//! takes and why.
//!
//! ```
//! use std::sync::Arc;
//! use damacy::zarrs_ext::{ArrayDeviceExt, DamacyContext, RetrieveOptions};
//! use damacy::{ExecutorKind, ReaderConfig};
//! use zarrs::array::{Array, ArraySubset};
//! use zarrs::filesystem::FilesystemStore;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
//! let store = Arc::new(FilesystemStore::new(root)?);
//! let array = Array::open(store, "/v3/sharded_zstd_index_end")?;
//!
//! // Once per process (or per rank): the executor, threads and caches.
//! let ctx = DamacyContext::new(ReaderConfig::default().with_executor(ExecutorKind::Auto))?;
//!
//! // One subset: a GPU array with a GPU, host memory without one.
//! let subset = ArraySubset::new_with_ranges(&[0..16, 8..40, 0..20]);
//! let tile = array.retrieve_array_subset_device(&subset, &ctx)?;
//! assert_eq!(tile.shape(), &[16, 32, 20]);
//! let ours: Vec<u16> = tile.to_vec()?;
//! let theirs: Vec<u16> = array.retrieve_array_subset(&subset)?;
//! assert_eq!(ours, theirs);
//!
//! // A batch: chunks shared by the crops are read and decoded once.
//! let crops = [ArraySubset::new_with_ranges(&[0..8, 0..8, 0..8]), ArraySubset::new_with_ranges(&[4..12, 4..12, 4..12])];
//! let batch = array.retrieve_array_subsets_device(&crops, &ctx)?;
//! assert_eq!(batch.shape(), &[2, 8, 8, 8]);
//!
//! // Per call options: the CPU executor, two threads, no checksum checks.
//! let opts = RetrieveOptions::default().with_executor(ExecutorKind::Cpu).with_concurrency(2).with_validate_checksums(false);
//! let host = array.retrieve_array_subset_device_opt(&subset, &ctx, &opts)?;
//! assert_eq!(host.to_vec::<u16>()?, theirs);
//!
//! // Hand it to PyTorch, CuPy or NumPy through DLPack.
//! let exported = host.into_dlpack_versioned(None)?;
//! assert_eq!(exported.managed().dl_tensor.ndim, 3);
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use zarrs::array::{Array, ArrayMetadata, ArraySubset, ArraySubsetTraits, CodecChain, CodecOptions};
use zarrs::storage::{
    AsyncReadableListableStorageTraits, AsyncReadableStorageTraits, AsyncReadableWritableListableStorageTraits,
    AsyncReadableWritableStorageTraits, ReadableListableStorageTraits, ReadableStorageTraits,
    ReadableWritableListableStorageTraits, ReadableWritableStorageTraits,
};

use crate::{
    ArrayHandle, ArrayMeta, ArrayOptions, ChainRoute, CodecError, Device, DeviceArray, Error, ExecutorKind, Output,
    Reader, ReaderConfig, Region, StatsSnapshot, Store, Stream,
};

/// Arrays a context remembers (their metadata, route and shard indexes stay warm).
const CACHED_ARRAYS: usize = 64;

/// A zarrs synchronous storage handle damacy can read through: any `Sized` readable storage
/// (e.g. `FilesystemStore`), and the `dyn` readable storage types zarrs uses
/// (`ReadableStorage`, `ReadableListableStorage`, `ReadableWritableStorage`,
/// `ReadableWritableListableStorage`).
pub trait ReadableStorageHandle {
    /// The storage as zarrs' readable trait object (the same storage, not a copy).
    fn into_readable(self: Arc<Self>) -> Arc<dyn ReadableStorageTraits>;
}

impl<T: ReadableStorageTraits + 'static> ReadableStorageHandle for T {
    fn into_readable(self: Arc<Self>) -> Arc<dyn ReadableStorageTraits> {
        self
    }
}

macro_rules! readable_dyn {
    ($handle:ident, $target:ident: $($t:ident),*) => {$(
        impl $handle for dyn $t {
            fn into_readable(self: Arc<Self>) -> Arc<dyn $target> {
                self
            }
        }
    )*};
}

readable_dyn!(ReadableStorageHandle, ReadableStorageTraits: ReadableStorageTraits, ReadableListableStorageTraits,
    ReadableWritableStorageTraits, ReadableWritableListableStorageTraits);

/// A zarrs async storage handle damacy can read through (e.g. `zarrs_opendal`'s
/// `AsyncOpendalStore`, and the `dyn` async readable storage types).
pub trait AsyncReadableStorageHandle {
    /// The storage as zarrs' async readable trait object (the same storage, not a copy).
    fn into_readable(self: Arc<Self>) -> Arc<dyn AsyncReadableStorageTraits>;
}

impl<T: AsyncReadableStorageTraits + 'static> AsyncReadableStorageHandle for T {
    fn into_readable(self: Arc<Self>) -> Arc<dyn AsyncReadableStorageTraits> {
        self
    }
}

readable_dyn!(AsyncReadableStorageHandle, AsyncReadableStorageTraits: AsyncReadableStorageTraits,
    AsyncReadableListableStorageTraits, AsyncReadableWritableStorageTraits, AsyncReadableWritableListableStorageTraits);

/// Per-call options of the `_opt` methods. Build with `RetrieveOptions::default().with_*(…)`,
/// or from zarrs' [`CodecOptions`] (`validate_checksums`, `concurrent_target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RetrieveOptions {
    /// Which executor decodes. Default `None`: the context's. Another executor (or another
    /// concurrency) gets a reader of its own, made on first use and kept by the context.
    pub executor: Option<ExecutorKind>,
    /// Verify checksums (crc32c codecs, zstd content checksums) while decoding. Default true.
    pub validate_checksums: bool,
    /// Decode threads. Default `None`: the context's `n_compute_threads`.
    pub concurrency: Option<usize>,
}

impl Default for RetrieveOptions {
    fn default() -> Self {
        Self { executor: None, validate_checksums: true, concurrency: None }
    }
}

impl RetrieveOptions {
    /// Set the executor.
    #[must_use]
    pub fn with_executor(mut self, executor: ExecutorKind) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Verify checksums while decoding (or not).
    #[must_use]
    pub fn with_validate_checksums(mut self, validate: bool) -> Self {
        self.validate_checksums = validate;
        self
    }

    /// Set the decode threads.
    #[must_use]
    pub fn with_concurrency(mut self, threads: usize) -> Self {
        self.concurrency = Some(threads);
        self
    }
}

impl From<&CodecOptions> for RetrieveOptions {
    fn from(options: &CodecOptions) -> Self {
        Self {
            executor: None,
            validate_checksums: options.validate_checksums(),
            concurrency: Some(options.concurrent_target().max(1)),
        }
    }
}

/// One reader and the stream its device arrays are written on.
#[derive(Clone)]
struct Slot {
    executor: ExecutorKind,
    threads: usize,
    reader: Reader,
    stream: Option<Stream>,
}

impl Slot {
    fn new(reader: Reader) -> Result<Self, Error> {
        let stream = match reader.device() {
            Some(d) => Some(d.new_stream().map_err(|e| device_err("creating the context's output stream", e))?),
            None => None,
        };
        let config = reader.config();
        Ok(Self { executor: config.executor, threads: config.n_compute_threads, reader, stream })
    }
}

/// An array the context has seen: the zarrs array's storage (by address), path, codec chain
/// (by address, kept alive so the address stays its own) and shape, and the engine's handle.
struct Cached {
    storage: usize,
    path: String,
    codecs: Arc<CodecChain>,
    shape: Vec<u64>,
    handle: ArrayHandle,
}

struct ContextInner {
    default: Slot,
    others: Mutex<Vec<Slot>>,
    arrays: Mutex<VecDeque<Cached>>,
}

/// What the zarrs extension reads with: a [`Reader`] (executor, threads, caches, device
/// buffers) and the arrays it has seen. Make one per process (or per rank) and pass it to every
/// call; cheap to clone (clones share everything).
#[derive(Clone)]
pub struct DamacyContext {
    inner: Arc<ContextInner>,
}

impl std::fmt::Debug for DamacyContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DamacyContext").field("reader", &self.inner.default.reader).finish_non_exhaustive()
    }
}

impl DamacyContext {
    /// A context with a reader of `config` (its executor decides where arrays land: a device
    /// executor gives device memory, the CPU executor host memory).
    pub fn new(config: ReaderConfig) -> Result<Self, Error> {
        Self::from_reader(Reader::new(config)?)
    }

    /// A context around an existing reader (sharing its caches with its other users).
    pub fn from_reader(reader: Reader) -> Result<Self, Error> {
        let inner = ContextInner {
            default: Slot::new(reader)?,
            others: Mutex::new(Vec::new()),
            arrays: Mutex::new(VecDeque::new()),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The context's reader.
    #[must_use]
    pub fn reader(&self) -> &Reader {
        &self.inner.default.reader
    }

    /// The device device arrays land on, if the reader has one (use it to allocate buffers for
    /// [`ArrayDeviceExt::retrieve_array_subset_device_into`]).
    #[must_use]
    pub fn device(&self) -> Option<&Device> {
        self.inner.default.reader.device()
    }

    /// Which executor decodes, and why (see [`Reader::executor_note`]).
    #[must_use]
    pub fn executor_note(&self) -> &str {
        self.inner.default.reader.executor_note()
    }

    /// The counters of the context's reader (readers made for other options count apart).
    #[must_use]
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.default.reader.stats()
    }

    /// The reader for `options`: the context's own, or one made (once) for another executor or
    /// concurrency.
    fn slot(&self, options: &RetrieveOptions) -> Result<Slot, Error> {
        let d = &self.inner.default;
        let executor = options.executor.unwrap_or(d.executor);
        let threads = options.concurrency.unwrap_or(d.threads);
        if executor == d.executor && threads == d.threads {
            return Ok(d.clone());
        }
        let mut others = self.inner.others.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = others.iter().find(|s| s.executor == executor && s.threads == threads) {
            return Ok(s.clone());
        }
        let config = d.reader.config().clone().with_executor(executor).with_compute_threads(threads);
        let slot = Slot::new(Reader::new(config)?)?;
        others.push(slot.clone());
        Ok(slot)
    }

    /// The engine's handle of a zarrs array: from the cache when the same storage, path, codec
    /// chain and shape were seen, else built from the array's own metadata and chain (nothing
    /// is read).
    fn handle<S: ?Sized>(
        &self,
        array: &Array<S>,
        make_store: impl FnOnce(&str) -> Store,
    ) -> Result<ArrayHandle, Error> {
        let storage = Arc::as_ptr(&array.storage()).cast::<()>() as usize;
        let path = array.path().as_str();
        let codecs = array.codecs();
        let found = |c: &Cached| {
            c.storage == storage && c.path == path && Arc::ptr_eq(&c.codecs, &codecs) && c.shape == array.shape()
        };
        if let Some(c) = self.inner.arrays.lock().unwrap_or_else(PoisonError::into_inner).iter().find(|c| found(c)) {
            return Ok(c.handle.clone());
        }
        if let ArrayMetadata::V3(m) = array.metadata()
            && !m.storage_transformers.is_empty()
        {
            let names: Vec<&str> = m.storage_transformers.iter().map(zarrs::metadata::v3::MetadataV3::name).collect();
            return Err(CodecError::Unsupported(format!(
                "array {path} has storage transformers {names:?}; damacy reads chunks from the store directly (read it with zarrs)"
            ))
            .into());
        }
        let store = make_store(&format!("zarrs {}", std::any::type_name::<S>()));
        let readable: Arc<dyn ReadableStorageTraits> = store.storage().clone();
        let meta = ArrayMeta::from_zarrs(array.with_storage(readable))?;
        let handle = ArrayHandle::from_meta(store, meta, ArrayOptions::default())?;
        let mut arrays = self.inner.arrays.lock().unwrap_or_else(PoisonError::into_inner);
        if arrays.len() >= CACHED_ARRAYS {
            arrays.pop_front();
        }
        arrays.push_back(Cached {
            storage,
            path: path.to_owned(),
            codecs,
            shape: array.shape().to_vec(),
            handle: handle.clone(),
        });
        Ok(handle)
    }

    fn prepare<S: ?Sized>(
        &self,
        array: &Array<S>,
        options: &RetrieveOptions,
        make_store: impl FnOnce(&str) -> Store,
    ) -> Result<Prepared, Error> {
        let mut handle = self.handle(array, make_store)?;
        if handle.options().validate_checksums != options.validate_checksums {
            handle =
                handle.with_options(ArrayOptions::default().with_validate_checksums(options.validate_checksums))?;
        }
        Ok(Prepared { slot: self.slot(options)?, handle })
    }
}

fn device_err(context: &str, source: crate::DeviceError) -> Error {
    Error::Codec(CodecError::Device { context: context.to_owned(), source: Arc::new(source) })
}

fn invalid(message: String) -> Error {
    Error::Codec(CodecError::InvalidArgument(message))
}

/// A zarrs array bound to the reader that reads it.
struct Prepared {
    slot: Slot,
    handle: ArrayHandle,
}

fn region(subset: &dyn ArraySubsetTraits) -> Region {
    Region::new(subset.start().into_owned(), subset.shape().into_owned())
}

impl Prepared {
    /// Read `regions` (equally shaped) as an array of `shape` (the batch shape, or one region's).
    fn read(&self, regions: &[Region], squeeze: bool) -> Result<DeviceArray, Error> {
        let Some(first) = regions.first() else {
            return Err(invalid(format!("a batch of array {} needs at least one subset", self.handle.path)));
        };
        let mut shape = if squeeze { Vec::new() } else { vec![regions.len() as u64] };
        shape.extend_from_slice(&first.shape);
        if first.shape.contains(&0) {
            self.check_empty(regions)?;
            return Ok(DeviceArray::empty(shape, self.handle.out_dtype()));
        }
        let reader = &self.slot.reader;
        match (&self.slot.stream, reader.device()) {
            (Some(stream), Some(device)) => {
                let plan = reader.plan(&self.handle, regions)?;
                let mut buffer =
                    device.alloc(plan.nbytes()).map_err(|e| device_err("allocating the array's device memory", e))?;
                reader.read_batch_into(&plan, Output::Device { buffer: &mut buffer, offset: 0, stream })?;
                DeviceArray::from_device_buffer(device.clone(), buffer, stream.clone(), shape, plan.dtype())
            }
            _ => DeviceArray::from_batch(reader.read_batch(&self.handle, regions)?, shape),
        }
    }

    /// Subsets without elements read nothing, but must still fit the array and each other.
    fn check_empty(&self, regions: &[Region]) -> Result<(), Error> {
        let shape = &self.handle.shape;
        for r in regions {
            let fits = r.start.len() == shape.len()
                && r.shape.len() == shape.len()
                && r.start
                    .iter()
                    .zip(&r.shape)
                    .zip(shape)
                    .all(|((s, n), a)| s.checked_add(*n).is_some_and(|e| e <= *a));
            if !fits || r.shape != regions[0].shape {
                return Err(invalid(format!(
                    "subset {r} does not fit array {} of shape {shape:?} (or differs in shape from {})",
                    self.handle.path, regions[0]
                )));
            }
        }
        Ok(())
    }

    fn read_into(&self, region: &Region, out: Output<'_>) -> Result<(), Error> {
        if region.shape.contains(&0) {
            self.check_empty(std::slice::from_ref(region))?;
            return match out {
                Output::Host(h) if !h.is_empty() => {
                    Err(invalid(format!("output holds {} bytes; the empty subset {region} needs 0", h.len())))
                }
                _ => Ok(()),
            };
        }
        let plan = self.slot.reader.plan(&self.handle, std::slice::from_ref(region))?;
        self.slot.reader.read_batch_into(&plan, out)?;
        Ok(())
    }
}

/// The region of `chunks` (grid coordinates; shards for a sharded array), clipped to the
/// array: edge chunks are partial, as zarrs stores them.
fn chunks_region<S: ?Sized>(array: &Array<S>, chunks: &dyn ArraySubsetTraits) -> Result<Region, Error> {
    let grid = array.chunk_grid_shape();
    let path = array.path().as_str();
    let end = chunks.end_exc();
    if chunks.dimensionality() != grid.len() || end.iter().zip(grid).any(|(e, g)| e > g) {
        return Err(invalid(format!("chunks {} are outside the chunk grid {grid:?} of array {path}", region(chunks))));
    }
    let subset = array.chunks_subset_bounded(chunks).map_err(|e| invalid(format!("chunks of array {path}: {e}")))?;
    Ok(region(&subset))
}

/// Reads of a zarrs array (synchronous storage) through damacy: into device memory (or host
/// memory with the CPU executor), in batches, or into a caller's buffer. See the
/// [module documentation](self) for an example.
///
/// Every method equals zarrs' `retrieve_array_subset` of the same elements (C order, native
/// byte order, the array's data type), and fails with a clear error where zarrs would (a subset
/// outside the array, a storage failure) or where damacy cannot read the array (a data type
/// without a fixed size, an irregular chunk grid, storage transformers).
pub trait ArrayDeviceExt {
    /// Read `subset` into a [`DeviceArray`] of the subset's shape.
    fn retrieve_array_subset_device(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
    ) -> Result<DeviceArray, Error> {
        self.retrieve_array_subset_device_opt(subset, ctx, &RetrieveOptions::default())
    }

    /// [`ArrayDeviceExt::retrieve_array_subset_device`] with explicit options.
    fn retrieve_array_subset_device_opt(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> Result<DeviceArray, Error>;

    /// Read equally shaped `subsets` into one [`DeviceArray`] of shape `[n, subset shape…]`
    /// (one batch: chunks shared by several subsets are read and decoded once).
    fn retrieve_array_subsets_device(
        &self,
        subsets: &[ArraySubset],
        ctx: &DamacyContext,
    ) -> Result<DeviceArray, Error> {
        self.retrieve_array_subsets_device_opt(subsets, ctx, &RetrieveOptions::default())
    }

    /// [`ArrayDeviceExt::retrieve_array_subsets_device`] with explicit options.
    fn retrieve_array_subsets_device_opt(
        &self,
        subsets: &[ArraySubset],
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> Result<DeviceArray, Error>;

    /// Read the chunks `chunks` (a box of chunk-grid coordinates; shards for a sharded array)
    /// into a [`DeviceArray`] of the elements they hold (edge chunks clipped to the array).
    fn retrieve_chunks_device(
        &self,
        chunks: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
    ) -> Result<DeviceArray, Error> {
        self.retrieve_chunks_device_opt(chunks, ctx, &RetrieveOptions::default())
    }

    /// [`ArrayDeviceExt::retrieve_chunks_device`] with explicit options.
    fn retrieve_chunks_device_opt(
        &self,
        chunks: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> Result<DeviceArray, Error>;

    /// Read `subset` into a caller's memory: [`Output::Host`] (exactly the subset's bytes) or
    /// [`Output::Device`] (a buffer of [`DamacyContext::device`], written in the order of the
    /// caller's stream). Named `_device_into` because zarrs' inherent `retrieve_array_subset_into`
    /// would shadow a trait method of that name.
    fn retrieve_array_subset_device_into(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        out: Output<'_>,
    ) -> Result<(), Error> {
        self.retrieve_array_subset_device_into_opt(subset, ctx, out, &RetrieveOptions::default())
    }

    /// [`ArrayDeviceExt::retrieve_array_subset_device_into`] with explicit options.
    fn retrieve_array_subset_device_into_opt(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        out: Output<'_>,
        options: &RetrieveOptions,
    ) -> Result<(), Error>;

    /// How the array's chunks decode: [`ChainRoute::Device`] (damacy's kernels, when the
    /// context has a device) or [`ChainRoute::Cpu`] with the reason (zarrs' own chain on the
    /// host, then one copy up). An array damacy cannot read at all is an error with the reason.
    fn damacy_route(&self, ctx: &DamacyContext) -> Result<ChainRoute, Error>;
}

impl<S: ?Sized + ReadableStorageHandle> ArrayDeviceExt for Array<S> {
    fn retrieve_array_subset_device_opt(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> Result<DeviceArray, Error> {
        sync_prepare(self, ctx, options)?.read(&[region(subset)], true)
    }

    fn retrieve_array_subsets_device_opt(
        &self,
        subsets: &[ArraySubset],
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> Result<DeviceArray, Error> {
        let regions: Vec<Region> = subsets.iter().map(|s| region(s)).collect();
        sync_prepare(self, ctx, options)?.read(&regions, false)
    }

    fn retrieve_chunks_device_opt(
        &self,
        chunks: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> Result<DeviceArray, Error> {
        let region = chunks_region(self, chunks)?;
        sync_prepare(self, ctx, options)?.read(&[region], true)
    }

    fn retrieve_array_subset_device_into_opt(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        out: Output<'_>,
        options: &RetrieveOptions,
    ) -> Result<(), Error> {
        sync_prepare(self, ctx, options)?.read_into(&region(subset), out)
    }

    fn damacy_route(&self, ctx: &DamacyContext) -> Result<ChainRoute, Error> {
        Ok(sync_prepare(self, ctx, &RetrieveOptions::default())?.handle.route.clone())
    }
}

fn sync_prepare<S: ?Sized + ReadableStorageHandle>(
    array: &Array<S>,
    ctx: &DamacyContext,
    options: &RetrieveOptions,
) -> Result<Prepared, Error> {
    ctx.prepare(array, options, |name| Store::from_readable(name, array.storage().into_readable()))
}

fn async_prepare<S: ?Sized + AsyncReadableStorageHandle>(
    array: &Array<S>,
    ctx: &DamacyContext,
    options: &RetrieveOptions,
) -> Result<Prepared, Error> {
    ctx.prepare(array, options, |name| Store::from_async_readable(name, array.storage().into_readable()))
}

/// The future of an async read: owns what it needs, so it can be spawned.
pub type DeviceArrayFuture = Pin<Box<dyn Future<Output = Result<DeviceArray, Error>> + Send + 'static>>;

/// The async forms of [`ArrayDeviceExt`] for arrays over zarrs' async storages (opendal, object
/// stores). The read runs on damacy's I/O runtime's blocking pool ([`damacy_codec::off_thread`]:
/// the store's futures are driven there, with that runtime entered), so the caller's runtime is
/// never blocked. The returned futures
/// ([`DeviceArrayFuture`]) own what they need, so they can be spawned.
///
/// There is no async `retrieve_array_subset_device_into`: a caller's buffer cannot be lent to a task
/// that outlives a dropped future; read into a [`DeviceArray`] instead.
pub trait AsyncArrayDeviceExt {
    /// [`ArrayDeviceExt::retrieve_array_subset_device`] for an async storage.
    fn async_retrieve_array_subset_device(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
    ) -> DeviceArrayFuture {
        self.async_retrieve_array_subset_device_opt(subset, ctx, &RetrieveOptions::default())
    }

    /// [`AsyncArrayDeviceExt::async_retrieve_array_subset_device`] with explicit options.
    fn async_retrieve_array_subset_device_opt(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> DeviceArrayFuture;

    /// [`ArrayDeviceExt::retrieve_array_subsets_device`] for an async storage.
    fn async_retrieve_array_subsets_device(&self, subsets: &[ArraySubset], ctx: &DamacyContext) -> DeviceArrayFuture {
        self.async_retrieve_array_subsets_device_opt(subsets, ctx, &RetrieveOptions::default())
    }

    /// [`AsyncArrayDeviceExt::async_retrieve_array_subsets_device`] with explicit options.
    fn async_retrieve_array_subsets_device_opt(
        &self,
        subsets: &[ArraySubset],
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> DeviceArrayFuture;

    /// [`ArrayDeviceExt::retrieve_chunks_device`] for an async storage.
    fn async_retrieve_chunks_device(&self, chunks: &dyn ArraySubsetTraits, ctx: &DamacyContext) -> DeviceArrayFuture {
        self.async_retrieve_chunks_device_opt(chunks, ctx, &RetrieveOptions::default())
    }

    /// [`AsyncArrayDeviceExt::async_retrieve_chunks_device`] with explicit options.
    fn async_retrieve_chunks_device_opt(
        &self,
        chunks: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> DeviceArrayFuture;

    /// [`ArrayDeviceExt::damacy_route`] for an async storage (reads nothing).
    fn damacy_route(&self, ctx: &DamacyContext) -> Result<ChainRoute, Error>;
}

impl<S: ?Sized + AsyncReadableStorageHandle> AsyncArrayDeviceExt for Array<S> {
    fn async_retrieve_array_subset_device_opt(
        &self,
        subset: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> DeviceArrayFuture {
        let prepared = async_prepare(self, ctx, options);
        let region = region(subset);
        Box::pin(async move {
            let prepared = prepared?;
            damacy_codec::off_thread(move || prepared.read(&[region], true)).await
        })
    }

    fn async_retrieve_array_subsets_device_opt(
        &self,
        subsets: &[ArraySubset],
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> DeviceArrayFuture {
        let prepared = async_prepare(self, ctx, options);
        let regions: Vec<Region> = subsets.iter().map(|s| region(s)).collect();
        Box::pin(async move {
            let prepared = prepared?;
            damacy_codec::off_thread(move || prepared.read(&regions, false)).await
        })
    }

    fn async_retrieve_chunks_device_opt(
        &self,
        chunks: &dyn ArraySubsetTraits,
        ctx: &DamacyContext,
        options: &RetrieveOptions,
    ) -> DeviceArrayFuture {
        let prepared = chunks_region(self, chunks).and_then(|r| Ok((async_prepare(self, ctx, options)?, r)));
        Box::pin(async move {
            let (prepared, region) = prepared?;
            damacy_codec::off_thread(move || prepared.read(&[region], true)).await
        })
    }

    fn damacy_route(&self, ctx: &DamacyContext) -> Result<ChainRoute, Error> {
        Ok(async_prepare(self, ctx, &RetrieveOptions::default())?.handle.route.clone())
    }
}
