//! Sample spaces: what a plan orders and splits.
//!
//! A space numbers its samples `0..len` (the *global sample ids*) and groups
//! them into chunk groups and shard groups, each a contiguous range of ids, so
//! that a plan can hand whole groups to one rank. Two spaces come with the
//! crate: [`IndexSpace`] (rows) and [`CropSpace`] (N-D crops); implement
//! [`SampleSpace`] for your own.

use std::ops::Range;
use std::sync::Arc;

use crate::hash::EpochKey;

mod crop;
mod index;

pub use crop::{ArrayGeometry, CropOptions, CropPlacement, CropSample, CropSampling, CropSpace, MAX_DIMS, Region};
pub use index::{IndexOptions, IndexSample, IndexSpace};

/// Which groups a group-granular plan or a two-level shuffle works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GroupLevel {
    /// Chunks: samples that decode from the same chunk. The default.
    #[default]
    Chunk,
    /// Shards: samples that read from the same shard (a shard holds whole chunks).
    Shard,
}

impl GroupLevel {
    /// The level in words, for messages and tables.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Chunk => "chunk",
            Self::Shard => "shard",
        }
    }
}

/// A set of samples numbered `0..len`, grouped by chunk and by shard.
///
/// # Contract
///
/// For each level, the ranges `group_range(level, 0, key)`,
/// `group_range(level, 1, key)`, … up to `group_count(level)` are contiguous,
/// in increasing order, and together cover `0..len` exactly once (some may be
/// empty). `len` and `group_count` do not depend on the epoch; group ranges and
/// samples may (random crops do). Every method must be cheap: plans call
/// `group_range` once per group they visit and `resolve` once per sample.
pub trait SampleSpace {
    /// What one sample resolves to (a row, a crop, …).
    type Sample;

    /// The number of samples in one epoch.
    fn len(&self) -> u64;

    /// Whether the space has no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of groups at `level`.
    fn group_count(&self, level: GroupLevel) -> u64;

    /// The ids of group `group` at `level` in the epoch keyed by `key`.
    fn group_range(&self, level: GroupLevel, group: u64, key: EpochKey) -> Range<u64>;

    /// The sample with global id `id` in the epoch keyed by `key`.
    fn resolve(&self, id: u64, key: EpochKey) -> Self::Sample;
}

/// One chunk that a sample reads, as seen by the locality metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkRef {
    /// The array index in the space.
    pub array: usize,
    /// The chunk's flat index in its array's chunk grid (C order).
    pub chunk: u64,
    /// The flat index of the shard holding the chunk (C order).
    pub shard: u64,
    /// Bytes decoded to read the chunk (a full chunk, edge chunks included).
    pub bytes: u64,
}

/// A space that knows which chunks each sample reads: what the locality
/// metrics in [`locality`](crate::locality) need.
pub trait ChunkFootprint: SampleSpace {
    /// Bytes a sample uses (crop volume × element size).
    fn sample_bytes(&self, id: u64, key: EpochKey) -> u64;

    /// Calls `visit` once for every chunk the sample reads.
    fn visit_chunks(&self, id: u64, key: EpochKey, visit: &mut dyn FnMut(ChunkRef));
}

macro_rules! forward_space {
    ($($ty:ty),*) => {$(
        impl<S: SampleSpace + ?Sized> SampleSpace for $ty {
            type Sample = S::Sample;
            fn len(&self) -> u64 {
                (**self).len()
            }
            fn group_count(&self, level: GroupLevel) -> u64 {
                (**self).group_count(level)
            }
            fn group_range(&self, level: GroupLevel, group: u64, key: EpochKey) -> Range<u64> {
                (**self).group_range(level, group, key)
            }
            fn resolve(&self, id: u64, key: EpochKey) -> Self::Sample {
                (**self).resolve(id, key)
            }
        }

        impl<S: ChunkFootprint + ?Sized> ChunkFootprint for $ty {
            fn sample_bytes(&self, id: u64, key: EpochKey) -> u64 {
                (**self).sample_bytes(id, key)
            }
            fn visit_chunks(&self, id: u64, key: EpochKey, visit: &mut dyn FnMut(ChunkRef)) {
                (**self).visit_chunks(id, key, visit);
            }
        }
    )*};
}

forward_space!(&S, Arc<S>, Box<S>);
