//! The read path from a batch of regions to a batch buffer: plan, fetch, decode, assemble.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::array::ArrayInfo;
use crate::assemble::{Converter, Layout, Scatter, prefill};
use crate::config::{OutOfBounds, ReadConfig};
use crate::cpu::{CpuDecoder, EncodedUnit, decode_each, decode_scratch};
use crate::device::{DeviceExecutor, Selected, device_chain};
use crate::dtype::Dtype;
use crate::error::{Error, Location, Result};
use crate::io::{ReadRequest, fetch_all, fetch_task, plan_reads};
use crate::region::{Region, for_each_cell};
use crate::shard_index::{ShardIndex, ShardIndexCache};
use crate::stats::{Stats, StatsSnapshot};
use crate::store::{Store, StoreKind};

/// A batch of equally shaped regions of one array, decoded on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Element bytes, native byte order (little-endian on every supported host), C order.
    pub data: Vec<u8>,
    /// `[regions, region shape...]`.
    pub shape: Vec<u64>,
    /// The element type.
    pub dtype: Dtype,
}

/// Reads regions of zarr arrays: owns the caches, the thread pools and the counters.
///
/// ```
/// use damacy_codec::{ReadConfig, Reader, Region, Store, StoreOptions};
/// # fn main() -> damacy_codec::Result<()> {
/// # let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures");
/// let store = Store::open(root, &StoreOptions::default())?;
/// let reader = Reader::new(ReadConfig::default())?;
/// let array = reader.open_array(&store, "v3/sharded_zstd_index_end")?;
/// let crops = [Region::new(vec![0, 0, 0], vec![8, 8, 8]), Region::new(vec![9, 30, 4], vec![8, 8, 8])];
/// let batch = reader.read_batch(&store, &array, &crops)?;
/// assert_eq!(batch.shape, vec![2, 8, 8, 8]);
/// assert_eq!(batch.data.len(), 2 * 8 * 8 * 8 * 2);
/// # Ok(()) }
/// ```
pub struct Reader {
    config: ReadConfig,
    stats: Arc<Stats>,
    index_cache: ShardIndexCache,
    arrays: moka::sync::Cache<(u64, String), Arc<ArrayInfo>>,
    io_pool: rayon::ThreadPool,
    compute_pool: rayon::ThreadPool,
    device: Option<Box<DeviceExecutor>>,
    executor_note: String,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("config", &self.config).finish_non_exhaustive()
    }
}

/// The decode units (chunks, or inner chunks of shards, by grid coordinates) that the clipped
/// regions touch, each once, and for each region the indexes of its units.
fn plan_units(clipped: &[Option<Region>], unit_shape: &[u64]) -> (Vec<Vec<u64>>, Vec<Vec<usize>>) {
    let mut unit_ids: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut units: Vec<Vec<u64>> = Vec::new();
    let mut region_units: Vec<Vec<usize>> = Vec::with_capacity(clipped.len());
    for c in clipped {
        let mut mine = Vec::new();
        if let Some(c) = c {
            for_each_cell(&c.start, &c.end(), unit_shape, |u| {
                let id = *unit_ids.entry(u.to_vec()).or_insert_with(|| {
                    units.push(u.to_vec());
                    units.len() - 1
                });
                mine.push(id);
            });
        }
        region_units.push(mine);
    }
    (units, region_units)
}

/// The reads of a batch: the requests, each unit's request (`None`: fill without a read), and
/// each request's unit.
fn split_requests(sources: Vec<Source>) -> (Vec<ReadRequest>, Vec<Option<usize>>, Vec<usize>) {
    let mut requests = Vec::new();
    let mut slot = vec![None; sources.len()];
    let mut request_unit = Vec::new();
    for (u, s) in sources.into_iter().enumerate() {
        if let Source::Read(r) = s {
            slot[u] = Some(requests.len());
            request_unit.push(u);
            requests.push(r);
        }
    }
    (requests, slot, request_unit)
}

/// Largest slab `digest_array` reads at once.
const DIGEST_SLAB_BYTES: u64 = 64 << 20;

/// Where one decode unit's bytes come from.
enum Source {
    Read(ReadRequest),
    Fill,
}

impl Reader {
    /// A reader with validated options.
    pub fn new(config: ReadConfig) -> Result<Self> {
        config.validate()?;
        let stats = Arc::new(Stats::default());
        let pool = |n: usize, name: &'static str| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(move |i| format!("damacy-{name}-{i}"))
                .build()
                .map_err(|e| Error::invalid(format!("cannot start {n} {name} threads: {e}")))
        };
        let (device, executor_note) = match DeviceExecutor::select(&config)? {
            Selected::Device(d) => {
                let note = format!("device kernels on {}", d.describe());
                (Some(d), note)
            }
            Selected::Cpu(reason) => (None, format!("cpu ({reason})")),
        };
        Ok(Self {
            device,
            executor_note,
            index_cache: ShardIndexCache::new(config.shard_index_cache_bytes, stats.clone()),
            arrays: moka::sync::Cache::new(config.metadata_cache_entries),
            io_pool: pool(config.n_io_threads, "io")?,
            compute_pool: pool(config.n_compute_threads, "compute")?,
            stats,
            config,
        })
    }

    /// The options the reader was built with.
    #[must_use]
    pub fn config(&self) -> &ReadConfig {
        &self.config
    }

    /// Which executor decodes, and why: `device kernels on …` or `cpu (reason)`. Chains with
    /// a codec that has no device kernel decode on the CPU either way (see
    /// [`crate::route::routes`]).
    #[must_use]
    pub fn executor_note(&self) -> &str {
        &self.executor_note
    }

    /// The counters so far.
    #[must_use]
    pub fn stats(&self) -> StatsSnapshot {
        let mut snapshot = self.stats.snapshot();
        snapshot.index_cache_bytes = self.index_cache.weighted_bytes();
        snapshot
    }

    /// The shard-index cache.
    #[must_use]
    pub fn shard_index_cache(&self) -> &ShardIndexCache {
        &self.index_cache
    }

    /// Open an array (cached by store and path). Fails when the configured output dtype would
    /// lose values of this array's type (unless lossy casts are allowed).
    pub fn open_array(&self, store: &Store, path: &str) -> Result<Arc<ArrayInfo>> {
        let key = (store.id(), crate::array::normalize_path(path));
        let info =
            self.arrays.try_get_with(key, || ArrayInfo::open(store, path).map(Arc::new)).map_err(|e| (*e).clone())?;
        // A cast that loses values is refused here, when the array is opened, not mid-epoch.
        self.output_dtype(&info)?;
        Ok(info)
    }

    /// The element type batches of `array` have, after checking the cast.
    pub fn output_dtype(&self, array: &ArrayInfo) -> Result<Dtype> {
        let to = self.config.output_dtype.resolve(array.dtype);
        if !self.config.allow_lossy_cast
            && let Some(reason) = array.dtype.lossy_cast_reason(to)
        {
            return Err(Error::invalid(format!(
                "output dtype {to} for array {}: {reason}; choose another output dtype or allow lossy casts",
                array.path
            )));
        }
        Ok(to)
    }

    /// Read one region into a buffer of the output type.
    pub fn read_region(&self, store: &Store, array: &ArrayInfo, region: &Region) -> Result<Vec<u8>> {
        self.read_batch(store, array, std::slice::from_ref(region)).map(|b| b.data)
    }

    /// Read equally shaped regions of one array into one batch buffer. Chunks shared by
    /// several regions are fetched and decoded once.
    pub fn read_batch(&self, store: &Store, array: &ArrayInfo, regions: &[Region]) -> Result<Batch> {
        let out_dtype = self.output_dtype(array)?;
        let clipped = self.clip_regions(array, regions)?;
        let Some(first) = regions.first() else {
            return Err(Error::invalid("read_batch needs at least one region"));
        };

        // Plan: the decode units every region touches, each once.
        let unit_shape = array.decode_shape().to_vec();
        let (units, region_units) = plan_units(&clipped, &unit_shape);
        let sources = self.locate_units(store, array, &units)?;

        // One request per unit that has bytes to read.
        let (requests, slot, request_unit) = split_requests(sources);
        self.stats.add_units_filled((units.len() - requests.len()) as u64);
        let conv = Converter { from: array.dtype, to: out_dtype };
        let layout = Layout {
            regions,
            clipped: &clipped,
            region_units: &region_units,
            units: &units,
            slot: &slot,
            unit_shape: &unit_shape,
        };
        let device_chain = self
            .device
            .as_ref()
            .and_then(|d| device_chain(array.decode_chain_metadata(), array.dtype.size()).ok().map(|c| (d, c)));
        let (gap, size) = (self.config.coalesce_max_gap, self.config.coalesce_max_size);
        let location = |i: usize| Self::unit_location(array, &units[request_unit[i]], &requests[i]);

        // Host assembly target: fill what no unit covers; units are scattered into it.
        let region_bytes = first.num_elements() as usize * out_dtype.size();
        let new_batch = || {
            let started = Instant::now();
            let mut data = vec![0u8; region_bytes * regions.len()];
            self.compute_pool.install(|| prefill(&layout, &array.fill_value, conv, &mut data, region_bytes));
            self.stats.add_assemble(started.elapsed());
            data
        };

        if device_chain.is_none() && store.kind() == StoreKind::Local {
            // Local CPU route, fused: each read is decoded and scattered by the thread that
            // made it, so reads of some chunks overlap the decoding of others.
            let mut data = new_batch();
            let scatter = Scatter::new(&layout, &array.fill_value, conv, region_bytes, &mut data);
            let decoder = CpuDecoder::new(array)?;
            let tasks = plan_reads(&requests, gap, size);
            self.compute_pool.install(|| {
                tasks.par_iter().try_for_each(|task| {
                    let parts = fetch_task(store, &array.path, task, &requests, &self.stats)?;
                    for (&i, bytes) in task.requests.iter().zip(parts) {
                        let u = request_unit[i];
                        let Some(bytes) = bytes else {
                            self.stats.add_units_filled(1);
                            scatter.fill(u);
                            continue;
                        };
                        let unit = EncodedUnit { bytes, location: location(i) };
                        let needed = scatter.needed_elements(u);
                        decode_scratch(&decoder, &unit, needed, &self.stats, |decoded| scatter.unit(u, decoded))?;
                    }
                    Ok::<(), Error>(())
                })
            })?;
            return Ok(self.finish(regions, first, data, out_dtype));
        }

        // Fetch everything (remote stores: n_io_threads reads in flight), then decode.
        let fetched = self.io_pool.install(|| fetch_all(store, &array.path, &requests, gap, size, &self.stats))?;
        let mut encoded = Vec::with_capacity(requests.len());
        let mut encoded_unit = Vec::with_capacity(requests.len());
        let mut missing = Vec::new();
        for (i, bytes) in fetched.into_iter().enumerate() {
            if let Some(bytes) = bytes {
                encoded_unit.push(request_unit[i]);
                encoded.push(EncodedUnit { bytes, location: location(i) });
            } else {
                missing.push(request_unit[i]);
            }
        }
        self.stats.add_units_filled(missing.len() as u64);
        if let Some((device, chain)) = device_chain
            && missing.is_empty()
            && let Some(data) = device.read_batch(array, chain, &encoded, &layout, conv, &self.stats)?
        {
            // The whole GPU route: decode and assemble on the device, one copy back.
            return Ok(self.finish(regions, first, data, out_dtype));
        }
        let mut data = new_batch();
        let scatter = Scatter::new(&layout, &array.fill_value, conv, region_bytes, &mut data);
        for &u in &missing {
            scatter.fill(u);
        }
        let place = |k: usize, bytes: &[u8]| scatter.unit(encoded_unit[k], bytes);
        match device_chain {
            // Larger than one device wave (or with missing chunks): decoded on the device,
            // scattered on the host.
            Some((device, chain)) => {
                let decoded = device.decode_units(array, chain, &encoded, &self.stats)?;
                self.compute_pool.install(|| decoded.par_iter().enumerate().for_each(|(k, b)| place(k, b)));
            }
            None => self.compute_pool.install(|| {
                decode_each(array, &encoded, &self.stats, |k| scatter.needed_elements(encoded_unit[k]), place)
            })?,
        }
        drop(scatter);
        Ok(self.finish(regions, first, data, out_dtype))
    }

    /// Check each region (rank, one shape per batch, the out-of-bounds policy) and clip it
    /// to the array.
    fn clip_regions(&self, array: &ArrayInfo, regions: &[Region]) -> Result<Vec<Option<Region>>> {
        let Some(first) = regions.first() else {
            return Err(Error::invalid("read_batch needs at least one region"));
        };
        let mut clipped = Vec::with_capacity(regions.len());
        for r in regions {
            r.validate(&array.path, &array.shape)?;
            if r.shape != first.shape {
                return Err(Error::invalid(format!(
                    "regions of one batch must have one shape: {} has shape {:?}, the first {:?}",
                    r, r.shape, first.shape
                )));
            }
            if !r.is_inside(&array.shape) && self.config.out_of_bounds == OutOfBounds::Error {
                return Err(Error::invalid(format!(
                    "region {r} is outside array {} of shape {:?} (set out_of_bounds to fill to pad with the fill value)",
                    array.path, array.shape
                )));
            }
            clipped.push(r.clip(&array.shape));
        }
        Ok(clipped)
    }

    fn finish(&self, regions: &[Region], first: &Region, data: Vec<u8>, dtype: Dtype) -> Batch {
        self.stats.add_regions(regions.len() as u64);
        self.stats.add_batches(1);
        let mut shape = vec![regions.len() as u64];
        shape.extend_from_slice(&first.shape);
        Batch { data, shape, dtype }
    }

    fn unit_location(array: &ArrayInfo, unit: &[u64], req: &ReadRequest) -> Location {
        let (chunk, inner) = match &array.shard {
            Some(l) => (
                unit.iter().zip(&l.chunks_per_shard).map(|(u, c)| u / c).collect(),
                Some(unit.iter().zip(&l.chunks_per_shard).map(|(u, c)| u % c).collect()),
            ),
            None => (unit.to_vec(), None),
        };
        Location {
            array: array.path.clone(),
            chunk: Some(chunk),
            inner_chunk: inner,
            key: Some(req.key.to_string()),
            byte_range: req.range.clone(),
        }
    }

    /// For each unit: the byte range to read, or fill. Fetches the shard indexes needed
    /// (through the cache, in parallel) and keeps them for the whole batch.
    fn locate_units(&self, store: &Store, array: &ArrayInfo, units: &[Vec<u64>]) -> Result<Vec<Source>> {
        let Some(layout) = &array.shard else {
            return Ok(units
                .iter()
                .map(|u| Source::Read(ReadRequest { key: array.chunk_key(u), range: None }))
                .collect());
        };
        let cps = &layout.chunks_per_shard;
        let mut shard_ids: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut shards: Vec<Vec<u64>> = Vec::new();
        let unit_shard: Vec<usize> = units
            .iter()
            .map(|u| {
                let s: Vec<u64> = u.iter().zip(cps).map(|(u, c)| u / c).collect();
                *shard_ids.entry(s.clone()).or_insert_with(|| {
                    shards.push(s);
                    shards.len() - 1
                })
            })
            .collect();
        let indexes: Vec<Arc<ShardIndex>> = self
            .io_pool
            .install(|| shards.par_iter().map(|s| self.index_cache.get(store, array, s)).collect::<Result<Vec<_>>>())?;
        let strides = crate::region::c_strides(cps);
        Ok(units
            .iter()
            .zip(unit_shard)
            .map(|(u, s)| {
                let Some(entries) = indexes[s].as_ref() else { return Source::Fill };
                let inner: usize =
                    u.iter().zip(cps).zip(&strides).map(|((u, c), st)| (u % c) * st).sum::<u64>() as usize;
                match entries.get(inner).copied().flatten() {
                    Some((offset, nbytes)) => Source::Read(ReadRequest {
                        key: array.chunk_key(&shards[s]),
                        range: Some(offset..offset + nbytes),
                    }),
                    None => Source::Fill,
                }
            })
            .collect())
    }

    /// SHA-256 of the whole array's bytes (C order, little-endian), read through this path
    /// in slabs along the first axis so memory stays bounded.
    pub fn digest_array(&self, store: &Store, array: &ArrayInfo) -> Result<String> {
        if !cfg!(target_endian = "little") {
            return Err(Error::Unsupported("digests are defined on little-endian hosts".into()));
        }
        let mut hasher = Sha256::new();
        if array.shape.is_empty() || array.num_elements() == 0 {
            if array.shape.is_empty() {
                let b = self.read_region(store, array, &Region::whole(&[]))?;
                hasher.update(&b);
            }
            return Ok(hex::encode(hasher.finalize()));
        }
        let row_bytes = array.shape[1..].iter().product::<u64>() * array.dtype.size() as u64;
        let chunk_rows = array.chunk_shape[0].max(1);
        let rows = (DIGEST_SLAB_BYTES / row_bytes.max(1)).max(1);
        let rows = (rows / chunk_rows).max(1) * chunk_rows;
        let mut start = 0;
        while start < array.shape[0] {
            let n = rows.min(array.shape[0] - start);
            let mut region = Region::whole(&array.shape);
            region.start[0] = start;
            region.shape[0] = n;
            hasher.update(self.read_region(store, array, &region)?);
            start += n;
        }
        Ok(hex::encode(hasher.finalize()))
    }
}
