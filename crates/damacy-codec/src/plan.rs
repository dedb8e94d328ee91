//! Stage 1, plan: what a batch reads and where each element goes, built once per batch.
//!
//! A [`BatchPlan`] holds named parts: the *targets* (the boxes of the array the caller asked
//! for, each with where its elements go in the output: a byte offset and byte strides), the
//! *units* (chunks, or inner chunks of shards, each decoded once however many targets touch
//! it), and the *requests* (the byte range of each unit that has bytes), coalesced into
//! *reads*. Planning also owns the coalescing of byte ranges ([`coalesce`], [`plan_reads`]) and
//! each read's [`Location`], built once here and carried to every error of that read; a unit's
//! location ([`BatchPlan::unit_location`]) is built from the plan only when a decode fails.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use zarrs_storage::StoreKey;

use crate::array::{ArrayHandle, OutOfBounds};
use crate::dtype::Dtype;
use crate::error::{Error, Location, Result};
use crate::region::{FillBox, Region, Target, c_strides, meet};
use crate::shard_index::{ShardIndex, ShardIndexCache};

/// Where a unit's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnitSource {
    /// Request `n` of the plan.
    Read(usize),
    /// A missing shard or an empty inner chunk: the fill value, without a read.
    Fill,
}

/// One decode unit: a chunk, or an inner chunk of a shard.
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    /// Grid coordinates of the unit (inner-chunk coordinates across the whole array, for a
    /// sharded array).
    pub(crate) coords: Vec<u64>,
    /// Array coordinates of its first element.
    pub(crate) origin: Vec<u64>,
    pub(crate) source: UnitSource,
    /// The targets it meets.
    pub(crate) targets: Vec<u32>,
}

/// One byte range of one key that a unit needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ReadRequest {
    pub(crate) key: StoreKey,
    /// `None`: the whole key.
    pub(crate) range: Option<Range<u64>>,
    /// The unit the bytes belong to.
    pub(crate) unit: usize,
}

/// Everything one batch reads and writes, planned before any chunk byte is read. Build one with
/// [`crate::Reader::plan`]; read it with [`crate::Reader::read_batch_into`].
#[derive(Debug, Clone)]
pub struct BatchPlan {
    pub(crate) array: ArrayHandle,
    pub(crate) targets: Vec<Target>,
    pub(crate) units: Vec<Unit>,
    pub(crate) requests: Vec<ReadRequest>,
    pub(crate) reads: Vec<ReadTask>,
    pub(crate) shape: Vec<u64>,
    pub(crate) nbytes: usize,
    /// The shape of one decode unit: the array's decode shape, or (CPU reads of plain `bytes`
    /// chunks that the batch touches sparsely) a contiguous slab of a chunk, read as a byte range.
    pub(crate) unit_shape: Vec<u64>,
    /// Whether the targets cover every byte of a contiguous output (a batch of regions), so
    /// the output may be assembled elsewhere and copied whole.
    pub(crate) dense: bool,
    /// The shard indexes of the batch, kept for its whole read.
    pub(crate) _indexes: Vec<Arc<ShardIndex>>,
}

impl BatchPlan {
    /// The array read.
    #[must_use]
    pub fn array(&self) -> &ArrayHandle {
        &self.array
    }

    /// The output's shape: `[regions, region shape…]` for a batch of regions.
    #[must_use]
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The output's element type.
    #[must_use]
    pub fn dtype(&self) -> Dtype {
        self.array.out_dtype()
    }

    /// Bytes the output holds.
    #[must_use]
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// Decode units (chunks or inner chunks) the batch touches, each counted once.
    #[must_use]
    pub fn num_units(&self) -> usize {
        self.units.len()
    }

    /// Units with bytes to read (the rest are fill).
    #[must_use]
    pub fn num_requests(&self) -> usize {
        self.requests.len()
    }

    /// Storage reads after coalescing.
    #[must_use]
    pub fn num_reads(&self) -> usize {
        self.reads.len()
    }

    /// Where unit `u` lives, for error messages (built only when one happens).
    pub(crate) fn unit_location(&self, u: usize) -> Location {
        let array = &self.array;
        let unit = &self.units[u].coords;
        // Units per chunk (inner chunks per shard, or slabs per chunk) along each axis.
        let per: Vec<u64> = array.chunk_shape.iter().zip(&self.unit_shape).map(|(c, u)| c / u).collect();
        let (chunk, inner) = if per.iter().all(|&p| p == 1) {
            (unit.clone(), None)
        } else {
            (
                unit.iter().zip(&per).map(|(u, c)| u / c).collect(),
                Some(unit.iter().zip(&per).map(|(u, c)| u % c).collect()),
            )
        };
        let request = match self.units[u].source {
            UnitSource::Read(r) => Some(&self.requests[r]),
            UnitSource::Fill => None,
        };
        Location {
            store: array.store().url().to_owned(),
            array: array.path.clone(),
            chunk: Some(chunk),
            inner_chunk: inner,
            key: request.map(|r| r.key.to_string()),
            byte_range: request.and_then(|r| r.range.clone()),
        }
    }
}

/// Where the regions of a batch go: region `r` to position `positions[r]` of a batch of
/// `len` regions; `None` places region `r` at position `r` of a batch of `regions.len()`.
pub(crate) type Positions<'a> = Option<(&'a [usize], usize)>;

/// The targets of a batch of equally shaped regions: region `r` goes to bytes
/// `p·region_bytes…` of a C-order output, `p` its position (see [`Positions`]). Applies the
/// array's out-of-bounds policy.
pub(crate) fn region_targets(
    array: &ArrayHandle,
    regions: &[Region],
    positions: Positions<'_>,
) -> Result<(Vec<Target>, Vec<u64>)> {
    let Some(first) = regions.first() else {
        return Err(Error::invalid("a batch needs at least one region"));
    };
    let size = array.out_dtype().size();
    let strides: Vec<isize> = c_strides(&first.shape).iter().map(|s| (s * size as u64) as isize).collect();
    let region_bytes = first.num_elements() as usize * size;
    let mut targets = Vec::with_capacity(regions.len());
    for (r, region) in regions.iter().enumerate() {
        region.validate(&array.path, &array.shape)?;
        if region.shape != first.shape {
            return Err(Error::invalid(format!(
                "regions of one batch must have one shape: {region} has shape {:?}, the first {:?}",
                region.shape, first.shape
            )));
        }
        let position = positions.map_or(r, |(p, _)| p[r]);
        let whole =
            FillBox { dst_offset: position * region_bytes, count: region.shape.clone(), dst_strides: strides.clone() };
        if region.is_inside(&array.shape) {
            targets.push(Target {
                start: region.start.clone(),
                step: vec![1; region.shape.len()],
                count: region.shape.clone(),
                dst_offset: whole.dst_offset,
                dst_strides: strides.clone(),
                padded: None,
            });
            continue;
        }
        if array.options().out_of_bounds == OutOfBounds::Error {
            return Err(Error::invalid(format!(
                "region {region} is outside array {} of shape {:?} (open the array with out_of_bounds Fill to pad with the fill value)",
                array.path, array.shape
            )));
        }
        let inside = region.clip(&array.shape);
        let (start, count, offset) = match inside {
            Some(c) => {
                let skip: isize =
                    c.start.iter().zip(&region.start).zip(&strides).map(|((c, r), s)| (c - r) as isize * s).sum();
                (c.start, c.shape, whole.dst_offset as isize + skip)
            }
            // Wholly outside: nothing to read, everything to fill.
            None => (region.start.clone(), vec![0; region.shape.len()], whole.dst_offset as isize),
        };
        targets.push(Target {
            start,
            step: vec![1; region.shape.len()],
            count,
            dst_offset: offset as usize,
            dst_strides: strides.clone(),
            padded: Some(whole),
        });
    }
    let mut shape = vec![positions.map_or(regions.len(), |(_, len)| len) as u64];
    shape.extend_from_slice(&first.shape);
    Ok((targets, shape))
}

/// How [`build`] plans reads: the coalescing caps, and whether plain `bytes` chunks may be read
/// by slabs (the CPU executor reads them so; the device reads whole chunks).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BuildOptions {
    pub(crate) max_gap: u64,
    pub(crate) max_size: u64,
    pub(crate) split_raw: bool,
}

/// Build the plan of `targets`: the units each touches (each once), their sources (through the
/// shard-index cache: a local store's fetched in parallel on `pool`, a remote store's
/// concurrently on the I/O runtime), the requests and the coalesced reads.
pub(crate) fn build(
    array: &ArrayHandle,
    targets: Vec<Target>,
    shape: Vec<u64>,
    nbytes: usize,
    index_cache: &ShardIndexCache,
    pool: &rayon::ThreadPool,
    options: BuildOptions,
) -> Result<BatchPlan> {
    let BuildOptions { max_gap, max_size, split_raw } = options;
    let unit_shape =
        split_raw.then(|| raw_slabs(array, &targets)).flatten().unwrap_or_else(|| array.decode_shape().to_vec());
    let mut ids: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut units: Vec<Unit> = Vec::new();
    for (t, target) in targets.iter().enumerate() {
        if target.count.contains(&0) {
            continue;
        }
        let lo = &target.start;
        let hi: Vec<u64> =
            target.start.iter().zip(&target.step).zip(&target.count).map(|((s, st), n)| s + (n - 1) * st + 1).collect();
        crate::region::for_each_cell(lo, &hi, &unit_shape, |cell| {
            let origin: Vec<u64> = cell.iter().zip(&unit_shape).map(|(c, s)| c * s).collect();
            if meet(target, &origin, &unit_shape).is_none() {
                return;
            }
            let id = *ids.entry(cell.to_vec()).or_insert_with(|| {
                units.push(Unit { coords: cell.to_vec(), origin, source: UnitSource::Fill, targets: Vec::new() });
                units.len() - 1
            });
            units[id].targets.push(t as u32);
        });
    }
    let (requests, indexes) = locate(array, &unit_shape, &mut units, index_cache, pool)?;
    let reads = plan_reads(&Location::array(array.store().url(), &array.path), &requests, max_gap, max_size);
    Ok(BatchPlan {
        array: array.clone(),
        targets,
        units,
        requests,
        reads,
        shape,
        nbytes,
        unit_shape,
        dense: true,
        _indexes: indexes,
    })
}

/// Merge sorted ranges whose gaps are at most `max_gap`, never beyond `max_size` bytes.
/// Returns the merged ranges and, for each input range, the merged range it falls in.
#[must_use]
pub fn coalesce(ranges: &[Range<u64>], max_gap: u64, max_size: u64) -> (Vec<Range<u64>>, Vec<usize>) {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&i| (ranges[i].start, ranges[i].end));
    let mut merged: Vec<Range<u64>> = Vec::new();
    let mut owner = vec![0usize; ranges.len()];
    for i in order {
        let r = &ranges[i];
        if let Some(last) = merged.last_mut() {
            let gap_ok = r.start <= last.end.saturating_add(max_gap);
            let new_end = last.end.max(r.end);
            if gap_ok && new_end - last.start <= max_size {
                last.end = new_end;
                owner[i] = merged.len() - 1;
                continue;
            }
        }
        merged.push(r.clone());
        owner[i] = merged.len() - 1;
    }
    (merged, owner)
}

/// One storage read: a whole key, or one coalesced byte range of it, and the requests it
/// serves.
#[derive(Debug, Clone)]
pub(crate) struct ReadTask {
    pub(crate) key: StoreKey,
    /// The range read, `None` for the whole key.
    pub(crate) range: Option<Range<u64>>,
    /// Indexes (into the planned requests) of the requests this read serves.
    pub(crate) requests: Vec<usize>,
    /// Where the read lies (store, array, key, range), built once with the plan: every error of
    /// the read (a failed read, a truncated object) names it.
    pub(crate) location: Location,
}

impl ReadTask {
    fn new(array: &Location, key: &StoreKey, range: Option<Range<u64>>, requests: Vec<usize>) -> Self {
        let location = Location { key: Some(key.to_string()), byte_range: range.clone(), ..array.clone() };
        Self { key: key.clone(), range, requests, location }
    }
}

/// Group requests into reads: one per whole key, and per key the ranges coalesced (gaps up to
/// `max_gap`, reads up to `max_size` bytes). `array` locates the array read (store and path).
pub(crate) fn plan_reads(array: &Location, requests: &[ReadRequest], max_gap: u64, max_size: u64) -> Vec<ReadTask> {
    let mut by_key: HashMap<&StoreKey, (Vec<usize>, Vec<usize>)> = HashMap::new();
    for (i, r) in requests.iter().enumerate() {
        let entry = by_key.entry(&r.key).or_default();
        if r.range.is_some() { entry.1.push(i) } else { entry.0.push(i) }
    }
    let mut tasks = Vec::new();
    for (key, (whole, ranged)) in by_key {
        if !whole.is_empty() {
            tasks.push(ReadTask::new(array, key, None, whole));
        }
        let ranges: Vec<Range<u64>> = ranged.iter().filter_map(|&i| requests[i].range.clone()).collect();
        let (merged, owner) = coalesce(&ranges, max_gap, max_size);
        let first = tasks.len();
        tasks.extend(merged.into_iter().map(|m| ReadTask::new(array, key, Some(m), Vec::new())));
        for (&i, &m) in ranged.iter().zip(&owner) {
            tasks[first + m].requests.push(i);
        }
    }
    tasks
}

/// Bytes of one slab of a plain `bytes` chunk ([`raw_slabs`]).
const SLAB_BYTES: u64 = 32 << 10;

/// The slab shape that splits the chunks of an unsharded array stored as plain `bytes` into
/// contiguous byte ranges of about [`SLAB_BYTES`] (`[1, …, 1, k, full extents…]`), when the
/// targets touch their chunks sparsely (under half of the touched chunks' elements): then a
/// batch reads the slabs it needs instead of whole chunks. `None`: read whole chunks.
fn raw_slabs(array: &ArrayHandle, targets: &[Target]) -> Option<Vec<u64>> {
    let plain = matches!(array.decode_chain_metadata(), [bytes] if bytes.name() == "bytes");
    if array.shard.is_some() || !plain {
        return None;
    }
    let chunk = &array.chunk_shape;
    let mut slab = chunk.clone();
    let mut tail = array.dtype.size() as u64;
    for a in (0..chunk.len()).rev() {
        if tail * chunk[a] <= SLAB_BYTES {
            tail *= chunk[a];
            continue;
        }
        let k = (1..=(SLAB_BYTES / tail).max(1)).rev().find(|&k| chunk[a].is_multiple_of(k)).unwrap_or(1);
        slab[a] = k;
        for s in &mut slab[..a] {
            *s = 1;
        }
        break;
    }
    if &slab == chunk {
        return None;
    }
    let mut touched = std::collections::HashSet::new();
    let mut wanted = 0u64;
    for t in targets.iter().filter(|t| !t.count.contains(&0)) {
        wanted += t.count.iter().product::<u64>();
        let hi: Vec<u64> = t.start.iter().zip(&t.step).zip(&t.count).map(|((s, st), n)| s + (n - 1) * st + 1).collect();
        crate::region::for_each_cell(&t.start, &hi, chunk, |c| {
            touched.insert(c.to_vec());
        });
    }
    let chunk_elements: u64 = chunk.iter().product();
    (wanted.saturating_mul(2) < touched.len() as u64 * chunk_elements).then_some(slab)
}

/// Set each unit's source and return the requests: one whole-key read per chunk of an
/// unsharded array (or one byte range per slab of a chunk, see [`raw_slabs`]); for a sharded
/// array, the inner chunk's byte range from the shard index.
fn locate(
    array: &ArrayHandle,
    unit_shape: &[u64],
    units: &mut [Unit],
    index_cache: &ShardIndexCache,
    pool: &rayon::ThreadPool,
) -> Result<(Vec<ReadRequest>, Vec<Arc<ShardIndex>>)> {
    let mut requests = Vec::with_capacity(units.len());
    let Some(layout) = &array.shard else {
        let per: Vec<u64> = array.chunk_shape.iter().zip(unit_shape).map(|(c, u)| c / u).collect();
        let strides = c_strides(&per);
        let slab_bytes = unit_shape.iter().product::<u64>() * array.dtype.size() as u64;
        for (u, unit) in units.iter_mut().enumerate() {
            unit.source = UnitSource::Read(requests.len());
            let chunk: Vec<u64> = unit.coords.iter().zip(&per).map(|(c, p)| c / p).collect();
            let range = (unit_shape != array.chunk_shape.as_slice()).then(|| {
                let slab: u64 = unit.coords.iter().zip(&per).zip(&strides).map(|((c, p), s)| (c % p) * s).sum();
                slab * slab_bytes..(slab + 1) * slab_bytes
            });
            requests.push(ReadRequest { key: array.chunk_key(&chunk), range, unit: u });
        }
        return Ok((requests, Vec::new()));
    };
    let cps = &layout.chunks_per_shard;
    let mut shard_ids: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut shards: Vec<Vec<u64>> = Vec::new();
    let unit_shard: Vec<usize> = units
        .iter()
        .map(|u| {
            let s: Vec<u64> = u.coords.iter().zip(cps).map(|(u, c)| u / c).collect();
            *shard_ids.entry(s.clone()).or_insert_with(|| {
                shards.push(s);
                shards.len() - 1
            })
        })
        .collect();
    let indexes: Vec<Arc<ShardIndex>> = index_cache.get_many(array.store(), array, &shards, pool)?;
    let strides = c_strides(cps);
    for (u, (unit, s)) in units.iter_mut().zip(unit_shard).enumerate() {
        let Some(entries) = indexes[s].as_ref() else { continue };
        let inner: u64 = unit.coords.iter().zip(cps).zip(&strides).map(|((u, c), st)| (u % c) * st).sum();
        if let Some((offset, nbytes)) = entries.get(inner as usize).copied().flatten() {
            unit.source = UnitSource::Read(requests.len());
            requests.push(ReadRequest {
                key: array.chunk_key(&shards[s]),
                range: Some(offset..offset + nbytes),
                unit: u,
            });
        }
    }
    Ok((requests, indexes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_close_ranges() {
        let ranges = vec![100..200, 0..50, 60..90, 1000..1100];
        let (merged, owner) = coalesce(&ranges, 20, 1 << 20);
        assert_eq!(merged, vec![0..200, 1000..1100]);
        assert_eq!(owner, vec![0, 0, 0, 1]);
    }

    #[test]
    fn coalesce_respects_size_cap() {
        let ranges = vec![0..100, 100..200, 200..300];
        let (merged, owner) = coalesce(&ranges, 0, 200);
        assert_eq!(merged, vec![0..200, 200..300]);
        assert_eq!(owner, vec![0, 0, 1]);
    }

    #[test]
    fn reads_serve_every_request_once() {
        let key = |k: &str| StoreKey::new(k).unwrap();
        let requests = vec![
            ReadRequest { key: key("a"), range: Some(0..10), unit: 0 },
            ReadRequest { key: key("b"), range: None, unit: 0 },
            ReadRequest { key: key("a"), range: Some(12..20), unit: 0 },
            ReadRequest { key: key("a"), range: Some(5000..5010), unit: 0 },
            ReadRequest { key: key("b"), range: None, unit: 0 },
        ];
        let array = Location::array("file:///s", "/a");
        let tasks = plan_reads(&array, &requests, 16, 1 << 20);
        assert_eq!(tasks.len(), 3, "{tasks:?}");
        let mut served: Vec<usize> = tasks.iter().flat_map(|t| t.requests.clone()).collect();
        served.sort_unstable();
        assert_eq!(served, vec![0, 1, 2, 3, 4]);
        let a0 = tasks.iter().find(|t| t.requests.contains(&0)).unwrap();
        assert_eq!(a0.range, Some(0..20));
        assert!(a0.requests.contains(&2));
        assert_eq!(a0.location, Location { key: Some("a".into()), byte_range: Some(0..20), ..array.clone() });
    }

    proptest::proptest! {
        /// A merged read holds every range it serves, is at most `max_size` long unless it is a
        /// single range, and reads no unwanted gap wider than `max_gap`.
        #[test]
        fn coalescing_never_reads_more_than_the_policy_allows(
            raw in proptest::collection::vec((0u64..1 << 20, 1u64..1 << 16), 1..60),
            max_gap in 0u64..1 << 17,
            max_size in 1u64..1 << 20,
        ) {
            let ranges: Vec<Range<u64>> = raw.iter().map(|&(s, n)| s..s + n).collect();
            let (merged, owner) = coalesce(&ranges, max_gap, max_size);
            for (r, &m) in ranges.iter().zip(&owner) {
                proptest::prop_assert!(merged[m].start <= r.start && r.end <= merged[m].end);
            }
            for (m, read) in merged.iter().enumerate() {
                let mut mine: Vec<&Range<u64>> = ranges.iter().zip(&owner).filter(|(_, o)| **o == m).map(|(r, _)| r).collect();
                mine.sort_by_key(|r| r.start);
                proptest::prop_assert!(mine.len() == 1 || read.end - read.start <= max_size);
                proptest::prop_assert_eq!(read.start, mine[0].start);
                let mut covered = mine[0].end;
                for r in &mine[1..] {
                    proptest::prop_assert!(r.start <= covered + max_gap, "a gap wider than {}", max_gap);
                    covered = covered.max(r.end);
                }
                proptest::prop_assert_eq!(read.end, covered);
            }
        }
    }

    #[test]
    fn coalesce_keeps_overlaps_inside() {
        let ranges = vec![0..100, 50..80];
        let (merged, owner) = coalesce(&ranges, 0, 1000);
        assert_eq!(merged, vec![0..100]);
        assert_eq!(owner, vec![0, 0]);
    }
}
