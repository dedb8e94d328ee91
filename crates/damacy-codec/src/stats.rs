//! Counters of the read path, shared by every stage.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Live counters (atomics); read a consistent-enough copy with [`Stats::snapshot`].
#[derive(Debug, Default)]
pub struct Stats {
    regions: AtomicU64,
    batches: AtomicU64,
    units_decoded: AtomicU64,
    units_filled: AtomicU64,
    units_decoded_device: AtomicU64,
    storage_requests: AtomicU64,
    bytes_read: AtomicU64,
    bytes_decoded: AtomicU64,
    chunk_bytes_wanted: AtomicU64,
    chunk_bytes_read: AtomicU64,
    bytes_uploaded: AtomicU64,
    index_hits: AtomicU64,
    index_misses: AtomicU64,
    index_evictions: AtomicU64,
    index_fetches: AtomicU64,
    device_waves: AtomicU64,
    batches_host_scattered: AtomicU64,
    bytes_downloaded: AtomicU64,
    io_ns: AtomicU64,
    decode_ns: AtomicU64,
    assemble_ns: AtomicU64,
    device_parse_ns: AtomicU64,
    download_ns: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// Regions read.
    pub regions: u64,
    /// Batches read.
    pub batches: u64,
    /// Chunks (inner chunks of shards) decoded.
    pub units_decoded: u64,
    /// Chunks that were missing or empty and became fill values without a read.
    pub units_filled: u64,
    /// Of the chunks decoded, those decoded by device kernels (GPU or emulated).
    pub units_decoded_device: u64,
    /// Storage requests issued (after coalescing), shard-index reads included.
    pub storage_requests: u64,
    /// Bytes read from storage, shard indexes included.
    pub bytes_read: u64,
    /// Bytes produced by decoding.
    pub bytes_decoded: u64,
    /// Encoded bytes of the chunks (inner chunks) the batches needed, each distinct chunk of a
    /// batch once: what the chunk reads would be without coalescing.
    pub chunk_bytes_wanted: u64,
    /// Bytes the chunk reads returned (coalesced reads with their gaps; shard indexes and
    /// metadata not included). See [`StatsSnapshot::read_amplification`].
    pub chunk_bytes_read: u64,
    /// Encoded bytes copied to the device by the device route (its input transfer).
    pub bytes_uploaded: u64,
    /// Shard-index cache hits.
    pub index_hits: u64,
    /// Shard-index cache misses.
    pub index_misses: u64,
    /// Shard indexes evicted from the cache.
    pub index_evictions: u64,
    /// Shard indexes fetched from storage.
    pub index_fetches: u64,
    /// Decode waves the device executor ran (a batch streams through one or more).
    pub device_waves: u64,
    /// Host-output batches of the device executor that the device could not assemble (a
    /// strided output, or a batch larger than a lane's batch buffer when no buffer of its size
    /// could be allocated): decoded on the device, copied back per chunk and scattered on the host.
    pub batches_host_scattered: u64,
    /// Bytes the device executor copied from the device into host outputs (`read_batch`,
    /// `Output::Host`): the assembled batches, once each.
    pub bytes_downloaded: u64,
    /// Bytes of decoded shard indexes held by the cache when the snapshot was taken.
    pub index_cache_bytes: u64,
    /// Time spent waiting on storage, summed over the threads that read.
    pub io: Duration,
    /// Time spent decoding, summed over the threads that decode.
    pub decode: Duration,
    /// Time spent assembling batches.
    pub assemble: Duration,
    /// Host parse of the device route (blosc headers into stream tables),
    /// `decompress_parse`.
    pub decompress_parse: Duration,
    /// Time the device executor spent copying assembled host outputs down
    /// (`bytes_downloaded`), summed over the lanes; not part of `decode`.
    pub download: Duration,
}

macro_rules! counters {
    ($($name:ident => $add:ident),* $(,)?) => {
        impl Stats {
            $(
                #[doc = concat!("Add to `", stringify!($name), "`.")]
                pub fn $add(&self, n: u64) {
                    self.$name.fetch_add(n, Relaxed);
                }
            )*
        }
    };
}

counters!(
    regions => add_regions,
    batches => add_batches,
    units_decoded => add_units_decoded,
    units_filled => add_units_filled,
    units_decoded_device => add_units_decoded_device,
    storage_requests => add_storage_requests,
    bytes_read => add_bytes_read,
    bytes_decoded => add_bytes_decoded,
    chunk_bytes_wanted => add_chunk_bytes_wanted,
    chunk_bytes_read => add_chunk_bytes_read,
    bytes_uploaded => add_bytes_uploaded,
    index_hits => add_index_hits,
    index_misses => add_index_misses,
    index_evictions => add_index_evictions,
    index_fetches => add_index_fetches,
    device_waves => add_device_waves,
    batches_host_scattered => add_batches_host_scattered,
    bytes_downloaded => add_bytes_downloaded,
);

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Stats {
    /// Add time spent on storage.
    pub fn add_io(&self, d: Duration) {
        self.io_ns.fetch_add(nanos(d), Relaxed);
    }

    /// Add time spent decoding.
    pub fn add_decode(&self, d: Duration) {
        self.decode_ns.fetch_add(nanos(d), Relaxed);
    }

    /// Add time spent assembling.
    pub fn add_assemble(&self, d: Duration) {
        self.assemble_ns.fetch_add(nanos(d), Relaxed);
    }

    /// Add host-parse time of the device route.
    pub fn add_device_parse(&self, d: Duration) {
        self.device_parse_ns.fetch_add(nanos(d), Relaxed);
    }

    /// Add time spent copying assembled host outputs down from the device.
    pub fn add_download(&self, d: Duration) {
        self.download_ns.fetch_add(nanos(d), Relaxed);
    }

    /// Copy the counters.
    #[must_use]
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            regions: self.regions.load(Relaxed),
            batches: self.batches.load(Relaxed),
            units_decoded: self.units_decoded.load(Relaxed),
            units_filled: self.units_filled.load(Relaxed),
            units_decoded_device: self.units_decoded_device.load(Relaxed),
            storage_requests: self.storage_requests.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            bytes_decoded: self.bytes_decoded.load(Relaxed),
            chunk_bytes_wanted: self.chunk_bytes_wanted.load(Relaxed),
            chunk_bytes_read: self.chunk_bytes_read.load(Relaxed),
            bytes_uploaded: self.bytes_uploaded.load(Relaxed),
            index_hits: self.index_hits.load(Relaxed),
            index_misses: self.index_misses.load(Relaxed),
            index_evictions: self.index_evictions.load(Relaxed),
            index_fetches: self.index_fetches.load(Relaxed),
            device_waves: self.device_waves.load(Relaxed),
            batches_host_scattered: self.batches_host_scattered.load(Relaxed),
            bytes_downloaded: self.bytes_downloaded.load(Relaxed),
            index_cache_bytes: 0,
            io: Duration::from_nanos(self.io_ns.load(Relaxed)),
            decode: Duration::from_nanos(self.decode_ns.load(Relaxed)),
            assemble: Duration::from_nanos(self.assemble_ns.load(Relaxed)),
            decompress_parse: Duration::from_nanos(self.device_parse_ns.load(Relaxed)),
            download: Duration::from_nanos(self.download_ns.load(Relaxed)),
        }
    }
}

impl StatsSnapshot {
    /// Bytes read for chunks ÷ distinct chunk bytes wanted (1.0 without coalescing gaps; above
    /// 1 by the gaps coalescing read through). `NaN` before any chunk was read.
    #[must_use]
    pub fn read_amplification(&self) -> f64 {
        if self.chunk_bytes_wanted == 0 {
            return f64::NAN;
        }
        self.chunk_bytes_read as f64 / self.chunk_bytes_wanted as f64
    }

    /// The counters accumulated since an earlier snapshot.
    #[must_use]
    pub fn since(&self, earlier: &StatsSnapshot) -> StatsSnapshot {
        StatsSnapshot {
            regions: self.regions - earlier.regions,
            batches: self.batches - earlier.batches,
            units_decoded: self.units_decoded - earlier.units_decoded,
            units_filled: self.units_filled - earlier.units_filled,
            units_decoded_device: self.units_decoded_device - earlier.units_decoded_device,
            storage_requests: self.storage_requests - earlier.storage_requests,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_decoded: self.bytes_decoded - earlier.bytes_decoded,
            chunk_bytes_wanted: self.chunk_bytes_wanted - earlier.chunk_bytes_wanted,
            chunk_bytes_read: self.chunk_bytes_read - earlier.chunk_bytes_read,
            bytes_uploaded: self.bytes_uploaded - earlier.bytes_uploaded,
            index_hits: self.index_hits - earlier.index_hits,
            index_misses: self.index_misses - earlier.index_misses,
            index_evictions: self.index_evictions - earlier.index_evictions,
            index_fetches: self.index_fetches - earlier.index_fetches,
            device_waves: self.device_waves - earlier.device_waves,
            batches_host_scattered: self.batches_host_scattered - earlier.batches_host_scattered,
            bytes_downloaded: self.bytes_downloaded - earlier.bytes_downloaded,
            index_cache_bytes: self.index_cache_bytes,
            io: self.io.saturating_sub(earlier.io),
            decode: self.decode.saturating_sub(earlier.decode),
            assemble: self.assemble.saturating_sub(earlier.assemble),
            decompress_parse: self.decompress_parse.saturating_sub(earlier.decompress_parse),
            download: self.download.saturating_sub(earlier.download),
        }
    }
}
