//! Index spaces: rows of one or more arrays, grouped into chunks of rows.

use std::ops::Range;

use super::{ChunkFootprint, ChunkRef, GroupLevel, SampleSpace};
use crate::error::SamplerError;
use crate::hash::EpochKey;

/// Options of an [`IndexSpace`]. Defaults: chunk size 1, one chunk per shard,
/// 1 byte per row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexOptions {
    chunk_size: u64,
    chunks_per_shard: u64,
    row_bytes: u64,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self { chunk_size: 1, chunks_per_shard: 1, row_bytes: 1 }
    }
}

impl IndexOptions {
    /// The defaults (chunk size 1, one chunk per shard, 1 byte per row).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Rows per chunk: row `i` of an array is in chunk `i / chunk_size`.
    /// Default 1 (every row is its own chunk).
    #[must_use]
    pub fn with_chunk_size(mut self, rows: u64) -> Self {
        self.chunk_size = rows;
        self
    }

    /// Chunks per shard. Default 1 (unsharded: a shard is a chunk).
    #[must_use]
    pub fn with_chunks_per_shard(mut self, chunks: u64) -> Self {
        self.chunks_per_shard = chunks;
        self
    }

    /// Bytes per row, for the read-amplification metric. Default 1.
    #[must_use]
    pub fn with_row_bytes(mut self, bytes: u64) -> Self {
        self.row_bytes = bytes;
        self
    }
}

/// N rows (samples), split over one or more arrays, grouped into chunks of
/// `chunk_size` rows and shards of `chunks_per_shard` chunks.
///
/// Global ids run through the arrays in order: array 0's rows first, then
/// array 1's, and so on. Chunks never span two arrays, so an array's last
/// chunk may be short.
///
/// ```
/// use damacy_sampler::{IndexOptions, IndexSpace, SampleSpace, GroupLevel, EpochKey};
/// let space = IndexSpace::with_options(&[250, 100], IndexOptions::new().with_chunk_size(100))?;
/// assert_eq!(space.len(), 350);
/// assert_eq!(space.group_count(GroupLevel::Chunk), 4); // 100 100 50 | 100
/// assert_eq!(space.group_range(GroupLevel::Chunk, 2, EpochKey::new(0, 0)), 200..250);
/// let s = space.resolve(260, EpochKey::new(0, 0));
/// assert_eq!((s.array, s.row), (1, 10));
/// # Ok::<(), damacy_sampler::SamplerError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpace {
    /// `offsets[a]..offsets[a + 1]` are array `a`'s global ids.
    offsets: Vec<u64>,
    /// `chunk_offsets[a]` is the global index of array `a`'s first chunk.
    chunk_offsets: Vec<u64>,
    /// The same for shards.
    shard_offsets: Vec<u64>,
    options: IndexOptions,
}

/// One row of an [`IndexSpace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexSample {
    /// The global sample id.
    pub id: u64,
    /// The array the row belongs to.
    pub array: usize,
    /// The row within that array.
    pub row: u64,
}

impl IndexSample {
    /// The row as a region of an array whose rows have shape `row_shape`:
    /// start `[row, 0, …]`, shape `[1, row_shape…]`.
    #[must_use]
    pub fn region(&self, row_shape: &[u64]) -> super::Region {
        let mut start = vec![self.row];
        start.extend(std::iter::repeat_n(0, row_shape.len()));
        let mut shape = vec![1];
        shape.extend_from_slice(row_shape);
        super::Region { array: self.array, start, shape }
    }
}

impl IndexSpace {
    /// `len` rows in one array, each row its own chunk.
    #[must_use]
    pub fn new(len: u64) -> Self {
        Self {
            offsets: vec![0, len],
            chunk_offsets: vec![0, len],
            shard_offsets: vec![0, len],
            options: IndexOptions::default(),
        }
    }

    /// `len` rows in one array, in chunks of `chunk_size` rows.
    pub fn chunked(len: u64, chunk_size: u64) -> Result<Self, SamplerError> {
        Self::with_options(&[len], IndexOptions::new().with_chunk_size(chunk_size))
    }

    /// Arrays of the given lengths (in rows), with `options`.
    pub fn with_options(lengths: &[u64], options: IndexOptions) -> Result<Self, SamplerError> {
        if lengths.is_empty() {
            return Err(SamplerError::EmptySpace { what: "arrays" });
        }
        if options.chunk_size == 0 {
            return Err(SamplerError::ZeroSize { what: "chunk size", location: String::new() });
        }
        if options.chunks_per_shard == 0 {
            return Err(SamplerError::ZeroSize { what: "chunks per shard", location: String::new() });
        }
        if options.row_bytes == 0 {
            return Err(SamplerError::ZeroSize { what: "row bytes", location: String::new() });
        }
        let shard_rows = options
            .chunk_size
            .checked_mul(options.chunks_per_shard)
            .ok_or(SamplerError::Overflow { what: "rows per shard" })?;
        let overflow = SamplerError::Overflow { what: "total rows" };
        let mut offsets = vec![0u64];
        let mut chunk_offsets = vec![0u64];
        let mut shard_offsets = vec![0u64];
        for &len in lengths {
            let last = |v: &Vec<u64>| v.last().copied().unwrap_or(0);
            offsets.push(last(&offsets).checked_add(len).ok_or(overflow.clone())?);
            chunk_offsets.push(last(&chunk_offsets) + len.div_ceil(options.chunk_size));
            shard_offsets.push(last(&shard_offsets) + len.div_ceil(shard_rows));
        }
        Ok(Self { offsets, chunk_offsets, shard_offsets, options })
    }

    /// The number of arrays.
    #[must_use]
    pub fn array_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The options the space was built with.
    #[must_use]
    pub fn options(&self) -> &IndexOptions {
        &self.options
    }

    /// Rows per chunk.
    #[must_use]
    pub fn chunk_size(&self) -> u64 {
        self.options.chunk_size
    }

    fn group_rows(&self, level: GroupLevel) -> u64 {
        match level {
            GroupLevel::Chunk => self.options.chunk_size,
            GroupLevel::Shard => self.options.chunk_size * self.options.chunks_per_shard,
        }
    }

    fn group_offsets(&self, level: GroupLevel) -> &[u64] {
        match level {
            GroupLevel::Chunk => &self.chunk_offsets,
            GroupLevel::Shard => &self.shard_offsets,
        }
    }

    /// The array holding global id `id` (or the last array for ids past the end).
    fn array_of(&self, id: u64) -> usize {
        if self.offsets.len() == 2 {
            return 0;
        }
        // Last array whose first id is <= id (skipping empty arrays).
        self.offsets.partition_point(|&o| o <= id).saturating_sub(1).min(self.array_count() - 1)
    }
}

impl SampleSpace for IndexSpace {
    type Sample = IndexSample;

    fn len(&self) -> u64 {
        self.offsets.last().copied().unwrap_or(0)
    }

    fn group_count(&self, level: GroupLevel) -> u64 {
        self.group_offsets(level).last().copied().unwrap_or(0)
    }

    fn group_range(&self, level: GroupLevel, group: u64, _key: EpochKey) -> Range<u64> {
        let offsets = self.group_offsets(level);
        let a = offsets.partition_point(|&o| o <= group).saturating_sub(1).min(offsets.len().saturating_sub(2));
        let rows = self.group_rows(level);
        let start = self.offsets[a] + (group - offsets[a]) * rows;
        let end = (start + rows).min(self.offsets[a + 1]);
        start..end
    }

    fn resolve(&self, id: u64, _key: EpochKey) -> IndexSample {
        let array = self.array_of(id);
        IndexSample { id, array, row: id - self.offsets[array] }
    }
}

impl ChunkFootprint for IndexSpace {
    fn sample_bytes(&self, _id: u64, _key: EpochKey) -> u64 {
        self.options.row_bytes
    }

    fn visit_chunks(&self, id: u64, key: EpochKey, visit: &mut dyn FnMut(ChunkRef)) {
        let s = self.resolve(id, key);
        visit(ChunkRef {
            array: s.array,
            chunk: s.row / self.options.chunk_size,
            shard: s.row / self.group_rows(GroupLevel::Shard),
            bytes: self.options.chunk_size * self.options.row_bytes,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> EpochKey {
        EpochKey::new(0, 0)
    }

    #[test]
    fn groups_partition_ids() {
        let space =
            IndexSpace::with_options(&[7, 0, 10, 3], IndexOptions::new().with_chunk_size(3).with_chunks_per_shard(2))
                .unwrap();
        assert_eq!(space.len(), 20);
        for level in [GroupLevel::Chunk, GroupLevel::Shard] {
            let mut next = 0;
            for g in 0..space.group_count(level) {
                let r = space.group_range(level, g, key());
                assert_eq!(r.start, next, "{level:?} group {g}");
                assert!(!r.is_empty());
                let a = space.resolve(r.start, key()).array;
                assert_eq!(space.resolve(r.end - 1, key()).array, a, "group spans arrays");
                next = r.end;
            }
            assert_eq!(next, 20);
        }
        // 7 rows -> 3 chunks (3,3,1); 10 -> 4 (3,3,3,1); 3 -> 1.
        assert_eq!(space.group_count(GroupLevel::Chunk), 8);
        assert_eq!(space.group_count(GroupLevel::Shard), 2 + 2 + 1);
        let s = space.resolve(7, key());
        assert_eq!((s.array, s.row), (2, 0));
        let s = space.resolve(19, key());
        assert_eq!((s.array, s.row), (3, 2));
    }

    #[test]
    fn chunk_larger_than_space() {
        let space = IndexSpace::chunked(5, 100).unwrap();
        assert_eq!(space.group_count(GroupLevel::Chunk), 1);
        assert_eq!(space.group_range(GroupLevel::Chunk, 0, key()), 0..5);
    }

    #[test]
    fn zero_chunk_is_an_error() {
        let err = IndexSpace::chunked(5, 0).unwrap_err();
        assert!(err.to_string().contains("chunk size is 0"), "{err}");
    }

    #[test]
    fn footprint_names_chunk_and_shard() {
        let space = IndexSpace::with_options(
            &[100],
            IndexOptions::new().with_chunk_size(10).with_chunks_per_shard(4).with_row_bytes(8),
        )
        .unwrap();
        let mut seen = vec![];
        space.visit_chunks(57, key(), &mut |c| seen.push(c));
        assert_eq!(seen, vec![ChunkRef { array: 0, chunk: 5, shard: 1, bytes: 80 }]);
        assert_eq!(space.sample_bytes(57, key()), 8);
    }

    #[test]
    fn region_of_a_row() {
        let s = IndexSample { id: 3, array: 1, row: 3 };
        let r = s.region(&[16, 4]);
        assert_eq!(r.start, vec![3, 0, 0]);
        assert_eq!(r.shape, vec![1, 16, 4]);
        assert_eq!(r.array, 1);
    }
}
