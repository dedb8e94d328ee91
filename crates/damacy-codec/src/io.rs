//! Byte-range reads: coalescing close ranges of one key and issuing them with bounded
//! concurrency.

use std::collections::HashMap;
use std::ops::Range;
use std::time::Instant;

use rayon::prelude::*;
use zarrs_storage::byte_range::ByteRange;
use zarrs_storage::{Bytes, StoreKey};

use crate::error::{Error, Location, Result};
use crate::stats::Stats;
use crate::store::Store;

/// One requested read: a whole key (`range == None`) or a byte range of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ReadRequest {
    pub(crate) key: StoreKey,
    pub(crate) range: Option<Range<u64>>,
}

/// Reads of one key: each request with its bytes (`None` for a missing key).
type Fetched = Vec<(ReadRequest, Option<Bytes>)>;

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

/// Fetch every request: whole keys with one `get`, ranges of one key coalesced into few
/// reads. Keys are read in parallel on the calling pool. A missing key yields `None`; a range
/// that comes back short is an error naming the key and range (a truncated object).
pub(crate) fn fetch_all(
    store: &Store,
    array: &str,
    requests: &[ReadRequest],
    max_gap: u64,
    max_size: u64,
    stats: &Stats,
) -> Result<HashMap<ReadRequest, Option<Bytes>>> {
    let mut by_key: HashMap<&StoreKey, Vec<&ReadRequest>> = HashMap::new();
    for r in requests {
        by_key.entry(&r.key).or_default().push(r);
    }
    let groups: Vec<(&StoreKey, Vec<&ReadRequest>)> = by_key.into_iter().collect();
    let started = Instant::now();
    let results: Vec<Result<Fetched>> =
        groups.par_iter().map(|(key, reqs)| fetch_key(store, array, key, reqs, max_gap, max_size, stats)).collect();
    stats.add_io(started.elapsed());
    let mut out = HashMap::with_capacity(requests.len());
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

fn location(array: &str, key: &StoreKey, range: Option<Range<u64>>) -> Location {
    Location { array: array.to_owned(), key: Some(key.to_string()), byte_range: range, ..Location::default() }
}

fn fetch_key(
    store: &Store,
    array: &str,
    key: &StoreKey,
    reqs: &[&ReadRequest],
    max_gap: u64,
    max_size: u64,
    stats: &Stats,
) -> Result<Fetched> {
    let storage = store.storage();
    let mut out = Vec::with_capacity(reqs.len());
    let (whole, ranged): (Vec<&ReadRequest>, Vec<&ReadRequest>) = reqs.iter().partition(|r| r.range.is_none());
    if !whole.is_empty() {
        stats.add_storage_requests(1);
        let bytes = storage.get(key).map_err(|e| Error::storage(location(array, key, None), e))?;
        if let Some(b) = &bytes {
            stats.add_bytes_read(b.len() as u64);
        }
        for r in whole {
            out.push(((*r).clone(), bytes.clone()));
        }
    }
    if ranged.is_empty() {
        return Ok(out);
    }
    let wanted: Vec<Range<u64>> = ranged.iter().filter_map(|r| r.range.clone()).collect();
    let (merged, owner) = coalesce(&wanted, max_gap, max_size);
    stats.add_storage_requests(merged.len() as u64);
    let byte_ranges: Vec<ByteRange> =
        merged.iter().map(|r| ByteRange::FromStart(r.start, Some(r.end - r.start))).collect();
    let got = storage
        .get_partial_many(key, Box::new(byte_ranges.into_iter()))
        .map_err(|e| Error::storage(location(array, key, merged.first().cloned()), e))?;
    let Some(iter) = got else {
        for r in ranged {
            out.push(((*r).clone(), None));
        }
        return Ok(out);
    };
    let mut buffers = Vec::with_capacity(merged.len());
    for (bytes, range) in iter.zip(&merged) {
        let bytes = bytes.map_err(|e| Error::storage(location(array, key, Some(range.clone())), e))?;
        stats.add_bytes_read(bytes.len() as u64);
        buffers.push(bytes);
    }
    for ((req, range), &m) in ranged.iter().zip(&wanted).zip(&owner) {
        let (Some(buf), Some(mrange)) = (buffers.get(m), merged.get(m)) else {
            return Err(Error::storage(
                location(array, key, Some(range.clone())),
                "the store returned fewer ranges than requested",
            ));
        };
        let lo = (range.start - mrange.start) as usize;
        let hi = (range.end - mrange.start) as usize;
        if hi > buf.len() {
            return Err(Error::decode(
                location(array, key, Some(range.clone())),
                format!(
                    "truncated object: {} bytes requested, {} available",
                    range.end - range.start,
                    buf.len().saturating_sub(lo)
                ),
            ));
        }
        out.push(((*req).clone(), Some(buf.slice(lo..hi))));
    }
    Ok(out)
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
    fn coalesce_keeps_overlaps_inside() {
        let ranges = vec![0..100, 50..80];
        let (merged, owner) = coalesce(&ranges, 0, 1000);
        assert_eq!(merged, vec![0..100]);
        assert_eq!(owner, vec![0, 0]);
    }
}
