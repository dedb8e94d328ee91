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
}

/// Group requests into reads: one per whole key, and per key the ranges coalesced (gaps up to
/// `max_gap`, reads up to `max_size` bytes).
pub(crate) fn plan_reads(requests: &[ReadRequest], max_gap: u64, max_size: u64) -> Vec<ReadTask> {
    let mut by_key: HashMap<&StoreKey, (Vec<usize>, Vec<usize>)> = HashMap::new();
    for (i, r) in requests.iter().enumerate() {
        let entry = by_key.entry(&r.key).or_default();
        if r.range.is_some() { entry.1.push(i) } else { entry.0.push(i) }
    }
    let mut tasks = Vec::new();
    for (key, (whole, ranged)) in by_key {
        if !whole.is_empty() {
            tasks.push(ReadTask { key: key.clone(), range: None, requests: whole });
        }
        let ranges: Vec<Range<u64>> = ranged.iter().filter_map(|&i| requests[i].range.clone()).collect();
        let (merged, owner) = coalesce(&ranges, max_gap, max_size);
        let first = tasks.len();
        tasks.extend(merged.into_iter().map(|m| ReadTask { key: key.clone(), range: Some(m), requests: Vec::new() }));
        for (&i, &m) in ranged.iter().zip(&owner) {
            tasks[first + m].requests.push(i);
        }
    }
    tasks
}

fn location(array: &str, key: &StoreKey, range: Option<Range<u64>>) -> Location {
    Location { array: array.to_owned(), key: Some(key.to_string()), byte_range: range, ..Location::default() }
}

/// Run one read and cut out the bytes of each request it serves, in `task.requests` order. A
/// missing key gives `None`s; a range that comes back short is an error naming the key and
/// range (a truncated object).
pub(crate) fn fetch_task(
    store: &Store,
    array: &str,
    task: &ReadTask,
    requests: &[ReadRequest],
    stats: &Stats,
) -> Result<Vec<Option<Bytes>>> {
    let started = Instant::now();
    stats.add_storage_requests(1);
    let storage = store.storage();
    let got = match &task.range {
        None => storage.get(&task.key),
        Some(r) => storage.get_partial(&task.key, ByteRange::FromStart(r.start, Some(r.end - r.start))),
    }
    .map_err(|e| Error::storage(location(array, &task.key, task.range.clone()), e));
    stats.add_io(started.elapsed());
    let Some(buf) = got? else {
        return Ok(vec![None; task.requests.len()]);
    };
    stats.add_bytes_read(buf.len() as u64);
    let base = task.range.as_ref().map_or(0, |r| r.start);
    task.requests
        .iter()
        .map(|&i| {
            let Some(range) = &requests[i].range else { return Ok(Some(buf.clone())) };
            let lo = (range.start - base) as usize;
            let hi = (range.end - base) as usize;
            if hi > buf.len() {
                return Err(Error::decode(
                    location(array, &task.key, Some(range.clone())),
                    format!(
                        "truncated object: {} bytes requested, {} available",
                        range.end - range.start,
                        buf.len().saturating_sub(lo)
                    ),
                ));
            }
            Ok(Some(buf.slice(lo..hi)))
        })
        .collect()
}

/// Fetch every request (see [`plan_reads`]), reads in parallel on the calling pool. Returns
/// each request's bytes, `None` for a missing key.
pub(crate) fn fetch_all(
    store: &Store,
    array: &str,
    requests: &[ReadRequest],
    max_gap: u64,
    max_size: u64,
    stats: &Stats,
) -> Result<Vec<Option<Bytes>>> {
    let tasks = plan_reads(requests, max_gap, max_size);
    let fetched: Vec<Vec<Option<Bytes>>> =
        tasks.par_iter().map(|t| fetch_task(store, array, t, requests, stats)).collect::<Result<_>>()?;
    let mut out = vec![None; requests.len()];
    for (task, parts) in tasks.iter().zip(fetched) {
        for (&i, bytes) in task.requests.iter().zip(parts) {
            out[i] = bytes;
        }
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
    fn reads_serve_every_request_once() {
        let key = |k: &str| StoreKey::new(k).unwrap();
        let requests = vec![
            ReadRequest { key: key("a"), range: Some(0..10) },
            ReadRequest { key: key("b"), range: None },
            ReadRequest { key: key("a"), range: Some(12..20) },
            ReadRequest { key: key("a"), range: Some(5000..5010) },
            ReadRequest { key: key("b"), range: None },
        ];
        let tasks = plan_reads(&requests, 16, 1 << 20);
        assert_eq!(tasks.len(), 3, "{tasks:?}");
        let mut served: Vec<usize> = tasks.iter().flat_map(|t| t.requests.clone()).collect();
        served.sort_unstable();
        assert_eq!(served, vec![0, 1, 2, 3, 4]);
        let a0 = tasks.iter().find(|t| t.requests.contains(&0)).unwrap();
        assert_eq!(a0.range, Some(0..20));
        assert!(a0.requests.contains(&2));
    }

    #[test]
    fn coalesce_keeps_overlaps_inside() {
        let ranges = vec![0..100, 50..80];
        let (merged, owner) = coalesce(&ranges, 0, 1000);
        assert_eq!(merged, vec![0..100]);
        assert_eq!(owner, vec![0, 0]);
    }
}
