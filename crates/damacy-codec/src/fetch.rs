//! Stage 2, fetch: the plan's coalesced byte ranges, read from the store. Local stores are read
//! synchronously by the thread that will decode the bytes; remote stores asynchronously on the
//! I/O runtime with many reads in flight, each read handed to a decode thread as it arrives.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;
use std::time::Instant;

use futures::StreamExt;
use rayon::prelude::*;
use zarrs_storage::byte_range::ByteRange;
use zarrs_storage::{Bytes, StoreKey};

use crate::error::{Error, Location, Result};
use crate::plan::{BatchPlan, ReadRequest};
use crate::stats::Stats;
use crate::store::Store;

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

fn location(store: &Store, array: &str, key: &StoreKey, range: Option<Range<u64>>) -> Location {
    Location {
        store: store.url().to_owned(),
        array: array.to_owned(),
        key: Some(key.to_string()),
        byte_range: range,
        ..Location::default()
    }
}

/// Cut the bytes of each request a read serves out of what the read returned, in
/// `task.requests` order. A missing key gives `None`s; a range that comes back short is an
/// error naming the key and range (a truncated object).
fn split(
    store: &Store,
    array: &str,
    task: &ReadTask,
    requests: &[ReadRequest],
    got: Option<Bytes>,
) -> Result<Vec<Option<Bytes>>> {
    let Some(buf) = got else {
        return Ok(vec![None; task.requests.len()]);
    };
    let base = task.range.as_ref().map_or(0, |r| r.start);
    task.requests
        .iter()
        .map(|&i| {
            let Some(range) = &requests[i].range else { return Ok(Some(buf.clone())) };
            let lo = (range.start - base) as usize;
            let hi = (range.end - base) as usize;
            if hi > buf.len() {
                return Err(Error::decode(
                    location(store, array, &task.key, Some(range.clone())),
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

/// Count what a read returned: every byte as read, and as wanted the ranges its requests asked
/// for (the whole object for a whole-key read).
fn account(stats: &Stats, task: &ReadTask, requests: &[ReadRequest], got: Option<&Bytes>) {
    let Some(bytes) = got else { return };
    let len = bytes.len() as u64;
    stats.add_bytes_read(len);
    stats.add_chunk_bytes_read(len);
    let wanted = match task.range {
        None => len,
        Some(_) => task.requests.iter().filter_map(|&i| requests[i].range.as_ref()).map(|r| r.end - r.start).sum(),
    };
    stats.add_chunk_bytes_wanted(wanted);
}

/// One read through the store's synchronous interface.
fn read_sync(
    store: &Store,
    array: &str,
    task: &ReadTask,
    requests: &[ReadRequest],
    stats: &Stats,
) -> Result<Option<Bytes>> {
    let started = Instant::now();
    stats.add_storage_requests(1);
    let storage = store.storage();
    let got = match &task.range {
        None => storage.get(&task.key),
        Some(r) => storage.get_partial(&task.key, ByteRange::FromStart(r.start, Some(r.end - r.start))),
    }
    .map_err(|e| Error::storage(location(store, array, &task.key, task.range.clone()), e));
    stats.add_io(started.elapsed());
    let got = got?;
    account(stats, task, requests, got.as_ref());
    Ok(got)
}

/// Run every read of `plan` and call `on_read(task, parts)` for each, on a thread of `pool`,
/// as soon as its bytes are there: `parts` holds the bytes of each request the read serves, in
/// `task.requests` order (`None` for a missing key). A remote store's reads are issued at once
/// (at most `in_flight` of them per batch) and wait for room under the store's limits on
/// requests and bytes in flight; a read's bytes stay counted against the store's budget until
/// `on_read` is done with them. The first error stops the batch and is returned.
pub(crate) fn for_each_read(
    plan: &BatchPlan,
    stats: &Stats,
    pool: &rayon::ThreadPool,
    in_flight: usize,
    on_read: impl Fn(&ReadTask, Vec<Option<Bytes>>) -> Result<()> + Sync,
) -> Result<()> {
    let store = plan.array.store();
    let array = plan.array.path.as_str();
    let requests = &plan.requests;
    let Some(remote) = store.remote() else {
        return pool.install(|| {
            plan.reads.par_iter().try_for_each(|task| {
                let got = read_sync(store, array, task, requests, stats)?;
                on_read(task, split(store, array, task, requests, got)?)
            })
        });
    };
    let runtime = crate::store::runtime()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let jobs: Vec<(usize, String, Option<Range<u64>>)> =
        plan.reads.iter().enumerate().map(|(i, t)| (i, t.key.as_str().to_owned(), t.range.clone())).collect();
    // A whole-key read of unknown size reserves a decoded chunk's bytes (encoded chunks are
    // rarely larger).
    let unit_bytes = (plan.array.decode_shape().iter().product::<u64>() * plan.array.dtype.size() as u64).max(1);
    let remote = remote.clone();
    let driver = runtime.spawn(async move {
        let remote = &remote;
        let mut results = futures::stream::iter(jobs)
            .map(|(i, key, range)| async move {
                let reservation = remote.reserve(range.as_ref().map_or(unit_bytes, |r| r.end - r.start)).await;
                let started = Instant::now();
                let got = remote.read(&key, range).await;
                (i, got, started.elapsed(), reservation)
            })
            .buffer_unordered(in_flight.max(1));
        while let Some(r) = results.next().await {
            if tx.send(r).is_err() {
                break;
            }
        }
    });
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let fail = |e: Error| {
        if let Ok(mut slot) = first_error.lock() {
            slot.get_or_insert(e);
        }
    };
    pool.in_place_scope(|scope| {
        for (i, got, took, reservation) in rx.iter().take(plan.reads.len()) {
            let task = &plan.reads[i];
            stats.add_storage_requests(1);
            stats.add_io(took);
            let got = match got {
                Ok(g) => g,
                Err(e) => {
                    fail(Error::opendal(location(store, array, &task.key, task.range.clone()), e));
                    break;
                }
            };
            account(stats, task, requests, got.as_ref());
            let (on_read, fail) = (&on_read, &fail);
            scope.spawn(move |_| {
                if let Err(e) = split(store, array, task, requests, got).and_then(|parts| on_read(task, parts)) {
                    fail(e);
                }
                drop(reservation);
            });
        }
    });
    driver.abort();
    match first_error.into_inner().map_err(|_| Error::invalid("a read thread panicked"))? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every request's bytes (`None` for a missing key), in request order.
pub(crate) fn fetch_all(
    plan: &BatchPlan,
    stats: &Stats,
    pool: &rayon::ThreadPool,
    in_flight: usize,
) -> Result<Vec<Option<Bytes>>> {
    let out: Vec<Mutex<Option<Bytes>>> = (0..plan.requests.len()).map(|_| Mutex::new(None)).collect();
    for_each_read(plan, stats, pool, in_flight, |task, parts| {
        for (&i, bytes) in task.requests.iter().zip(parts) {
            if let Ok(mut slot) = out[i].lock() {
                *slot = bytes;
            }
        }
        Ok(())
    })?;
    out.into_iter().map(|m| m.into_inner().map_err(|_| Error::invalid("a read thread panicked"))).collect()
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
        let tasks = plan_reads(&requests, 16, 1 << 20);
        assert_eq!(tasks.len(), 3, "{tasks:?}");
        let mut served: Vec<usize> = tasks.iter().flat_map(|t| t.requests.clone()).collect();
        served.sort_unstable();
        assert_eq!(served, vec![0, 1, 2, 3, 4]);
        let a0 = tasks.iter().find(|t| t.requests.contains(&0)).unwrap();
        assert_eq!(a0.range, Some(0..20));
        assert!(a0.requests.contains(&2));
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
