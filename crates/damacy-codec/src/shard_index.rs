//! The shard-index cache: decoded shard indexes keyed by (store, array, shard coordinates),
//! weighed in bytes, fetched once however many samples ask at the same time. Indexes of a local
//! store are read by the reader's I/O threads; those of a remote store asynchronously, all the
//! indexes a batch misses at once, under the store's request limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use moka::notification::RemovalCause;
use zarrs_storage::byte_range::ByteRange;

use crate::array::{ArrayMeta, ShardLayout};
use crate::error::{Error, Location, Result, StorageErrorKind};
use crate::stats::Stats;
use crate::store::Store;

/// The decoded index of one shard: `None` for a shard that does not exist (all fill value),
/// else one `(offset, nbytes)` per inner chunk in C order, `None` for an empty inner chunk.
pub type ShardIndex = Option<Vec<Option<(u64, u64)>>>;

type Key = (u64, Arc<str>, Vec<u64>);

/// A bounded, single-flight cache of decoded shard indexes.
#[derive(Clone)]
pub struct ShardIndexCache {
    cache: moka::future::Cache<Key, Arc<ShardIndex>>,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for ShardIndexCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardIndexCache").field("entries", &self.cache.entry_count()).finish_non_exhaustive()
    }
}

fn weigh(key: &Key, value: &Arc<ShardIndex>) -> u32 {
    let entries = value.as_ref().as_ref().map_or(0, Vec::len);
    let bytes = 64 + key.1.len() + key.2.len() * 8 + entries * std::mem::size_of::<Option<(u64, u64)>>();
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

impl ShardIndexCache {
    /// A cache holding at most `capacity_bytes` of decoded indexes.
    #[must_use]
    pub fn new(capacity_bytes: u64, stats: Arc<Stats>) -> Self {
        let evictions = stats.clone();
        let cache = moka::future::Cache::builder()
            .max_capacity(capacity_bytes)
            .weigher(weigh)
            .eviction_listener(move |_k, _v, cause| {
                if cause == RemovalCause::Size {
                    evictions.add_index_evictions(1);
                }
            })
            .build();
        Self { cache, stats }
    }

    /// The index of shard `shard` of `array`, from the cache or fetched (once, however many
    /// callers ask concurrently). Blocks the calling thread while it fetches.
    pub fn get(&self, store: &Store, array: &ArrayMeta, shard: &[u64]) -> Result<Arc<ShardIndex>> {
        let index = self.get_async(store, array, shard);
        match store.remote() {
            Some(_) => crate::store::block_on(index)?,
            // A local (or caller-built) store is read synchronously inside the future, which
            // needs no I/O runtime.
            None => crate::store::park_on(index),
        }
    }

    /// The indexes of `shards`: a local store's fetched on `pool`'s threads, a remote store's
    /// all at once, asynchronously.
    pub(crate) fn get_many(
        &self,
        store: &Store,
        array: &ArrayMeta,
        shards: &[Vec<u64>],
        pool: &rayon::ThreadPool,
    ) -> Result<Vec<Arc<ShardIndex>>> {
        use rayon::prelude::*;
        match store.remote() {
            Some(_) => crate::store::block_on(futures::future::try_join_all(
                shards.iter().map(|s| self.get_async(store, array, s)),
            ))?,
            None => pool.install(|| shards.par_iter().map(|s| self.get(store, array, s)).collect()),
        }
    }

    /// [`ShardIndexCache::get`] as a future, the one path of both stores.
    async fn get_async(&self, store: &Store, array: &ArrayMeta, shard: &[u64]) -> Result<Arc<ShardIndex>> {
        // Boxed: opendal's request futures are large.
        Box::pin(self.get_with(store, array, shard, async {
            Box::pin(fetch_index(store, array, layout(array)?, shard, &self.stats)).await
        }))
        .await
    }

    /// From the cache, or from `fetch` (run once however many callers ask concurrently).
    async fn get_with(
        &self,
        store: &Store,
        array: &ArrayMeta,
        shard: &[u64],
        fetch: impl Future<Output = Result<ShardIndex>>,
    ) -> Result<Arc<ShardIndex>> {
        let key: Key = (store.id(), Arc::from(array.path.as_str()), shard.to_vec());
        let fetched = AtomicBool::new(false);
        let result = self
            .cache
            .try_get_with(key, async {
                fetched.store(true, Ordering::Relaxed);
                fetch.await.map(Arc::new)
            })
            .await;
        if fetched.load(Ordering::Relaxed) {
            self.stats.add_index_misses(1);
        } else {
            self.stats.add_index_hits(1);
        }
        result.map_err(|e| (*e).clone())
    }

    /// Bytes of decoded indexes currently held (the cache's weighed size).
    #[must_use]
    pub fn weighted_bytes(&self) -> u64 {
        self.cache.weighted_size()
    }

    /// Decoded indexes currently held.
    #[must_use]
    pub fn entry_count(&self) -> u64 {
        crate::store::park_on(self.cache.run_pending_tasks());
        self.cache.entry_count()
    }
}

fn layout(array: &ArrayMeta) -> Result<&ShardLayout> {
    array.shard.as_ref().ok_or_else(|| Error::invalid(format!("array {} is not sharded", array.path)))
}

fn index_location(store: &Store, array: &ArrayMeta, shard: &[u64], r: Option<std::ops::Range<u64>>) -> Location {
    Location {
        store: store.url().to_owned(),
        array: array.path.clone(),
        chunk: Some(shard.to_vec()),
        key: Some(array.chunk_key(shard).to_string()),
        byte_range: r,
        ..Location::default()
    }
}

fn truncated(store: &Store, array: &ArrayMeta, shard: &[u64], size: u64, source: Option<Error>) -> Error {
    Error::Decode {
        location: Box::new(index_location(store, array, shard, None)),
        message: format!("truncated shard: the object is shorter than its {size}-byte index"),
        source: source.map(|e| -> crate::error::Source { Arc::new(e) }),
    }
}

/// A shard's index: one ranged request (for a remote store's index at the end, two: its
/// position needs the object's size), asynchronous on a remote store, synchronous on the others.
async fn fetch_index(
    store: &Store,
    array: &ArrayMeta,
    layout: &ShardLayout,
    shard: &[u64],
    stats: &Stats,
) -> Result<ShardIndex> {
    let key = array.chunk_key(shard);
    let size = layout.index_encoded_size;
    let at = |r| index_location(store, array, shard, r);
    let started = Instant::now();
    stats.add_index_fetches(1);
    let got = if let Some(remote) = store.remote() {
        let range = if layout.index_at_start {
            0..size
        } else {
            stats.add_storage_requests(1);
            match remote.size(key.as_str()).await {
                Ok(Some(n)) if n >= size => n - size..n,
                Ok(Some(_)) => return Err(truncated(store, array, shard, size, None)),
                Ok(None) => return Ok(None),
                Err(e) => return Err(Error::opendal(at(None), e)),
            }
        };
        stats.add_storage_requests(1);
        remote.read(key.as_str(), Some(range.clone())).await.map_err(|e| Error::opendal(at(Some(range)), e))
    } else {
        let range = if layout.index_at_start { ByteRange::FromStart(0, Some(size)) } else { ByteRange::Suffix(size) };
        stats.add_storage_requests(1);
        store.storage().get_partial(&key, range).map_err(|e| Error::storage(at(Some(0..size)), e))
    };
    stats.add_io(started.elapsed());
    match got {
        Ok(Some(bytes)) => decode_index(store, array, layout, shard, &bytes, stats).map(Some),
        Ok(None) => Ok(None),
        // A shard smaller than its index is a truncated shard, not a storage failure.
        Err(e) if e.storage_kind() == Some(StorageErrorKind::RangeNotSatisfied) => {
            Err(truncated(store, array, shard, size, Some(e)))
        }
        Err(e) => Err(e),
    }
}

/// Check and decode the bytes of a shard index.
fn decode_index(
    store: &Store,
    array: &ArrayMeta,
    layout: &ShardLayout,
    shard: &[u64],
    bytes: &[u8],
    stats: &Stats,
) -> Result<Vec<Option<(u64, u64)>>> {
    let size = layout.index_encoded_size;
    stats.add_bytes_read(bytes.len() as u64);
    let location = |r| index_location(store, array, shard, r);
    if bytes.len() as u64 != size {
        return Err(Error::decode(
            location(None),
            format!("truncated shard: the index needs {size} bytes, the object returned {}", bytes.len()),
        ));
    }
    let index_range = if layout.index_at_start { Some(0..size) } else { None };
    let entries = layout.decode_index(bytes).map_err(|m| Error::decode(location(index_range), m))?;
    for (i, e) in entries.iter().enumerate() {
        if let Some((offset, nbytes)) = e
            && offset.checked_add(*nbytes).is_none()
        {
            return Err(Error::decode(
                location(None),
                format!("shard index entry {i} overflows: offset {offset} + {nbytes} bytes"),
            ));
        }
    }
    Ok(entries)
}
