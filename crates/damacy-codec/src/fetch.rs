//! Stage 2, fetch: the plan's coalesced byte ranges, read from the store. Local stores are read
//! synchronously by the thread that will decode the bytes; remote stores asynchronously on the
//! I/O runtime with many reads in flight, each read handed to a decode thread as it arrives.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Instant;

use futures::StreamExt;
use rayon::prelude::*;
use zarrs_storage::Bytes;
use zarrs_storage::byte_range::ByteRange;

use crate::ctx::Ctx;
use crate::error::{Error, Location, Result};
use crate::plan::{BatchPlan, ReadRequest, ReadTask};
use crate::remote::Reservation;
use crate::stats::Stats;
use crate::store::Store;

/// The largest read (bytes) the thread receiving remote reads decodes itself rather than hands
/// to the compute pool, which bounds how long later arrivals wait for it (decoding 1 MiB of
/// encoded bytes takes a few milliseconds at most on one core).
const INLINE_DECODE_MAX_BYTES: usize = 1 << 20;

/// One read counted in [`Ctx::decoding`], counted out when dropped (also on a panic).
struct Decoding<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Decoding<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What one read returned: the bytes of the key or range, `None` for a missing key.
enum Got<'a> {
    Missing,
    /// A buffer the reading thread reuses (local reads of the CPU executor).
    Borrowed(&'a [u8]),
    Owned(Bytes),
    /// A remote answer as the HTTP client received it, in pieces, never joined whole: each
    /// request's bytes are lent where they lie in one piece, and otherwise gathered (only
    /// those bytes) by the thread that decodes them, into a buffer it keeps.
    Pieces(Pieces),
}

/// A remote answer's pieces and where each ends in the answer.
pub(crate) struct Pieces {
    parts: Vec<Bytes>,
    ends: Vec<usize>,
}

impl Pieces {
    pub(crate) fn new(answer: opendal::Buffer) -> Self {
        let parts: Vec<Bytes> = Iterator::filter(answer, |b| !b.is_empty()).collect();
        let ends = parts
            .iter()
            .scan(0usize, |end, b| {
                *end += b.len();
                Some(*end)
            })
            .collect();
        Self { parts, ends }
    }

    fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    /// The piece holding byte `at` and where that piece starts.
    fn piece(&self, at: usize) -> (usize, usize) {
        let i = self.ends.partition_point(|&end| end <= at);
        (i, if i == 0 { 0 } else { self.ends[i - 1] })
    }

    /// Bytes `r` (within the answer) when they lie in one piece.
    fn contiguous(&self, r: &Range<usize>) -> Option<(&Bytes, Range<usize>)> {
        if r.is_empty() {
            return None;
        }
        let (i, start) = self.piece(r.start);
        (r.end <= self.ends[i]).then(|| (&self.parts[i], r.start - start..r.end - start))
    }

    /// Append bytes `r` (within the answer) to `out`.
    fn gather(&self, r: Range<usize>, out: &mut Vec<u8>) {
        let (mut i, mut start) = self.piece(r.start);
        let mut at = r.start;
        while at < r.end {
            let end = self.ends[i].min(r.end);
            out.extend_from_slice(&self.parts[i][at - start..end - start]);
            at = end;
            start = self.ends[i];
            i += 1;
        }
    }

    /// Bytes `r` (within the answer), owned: a slice of a piece, or a copy when they span pieces.
    fn bytes(&self, r: Range<usize>) -> Bytes {
        if let Some((piece, within)) = self.contiguous(&r) {
            return piece.slice(within);
        }
        let mut out = Vec::with_capacity(r.len());
        self.gather(r, &mut out);
        out.into()
    }
}

/// The bytes of each request one read serves, cut out of what the read returned on demand.
pub(crate) struct Parts<'a> {
    task: &'a ReadTask,
    requests: &'a [ReadRequest],
    got: Got<'a>,
}

impl Parts<'_> {
    /// How many bytes the read returned; `None` for a missing key.
    fn len(&self) -> Option<usize> {
        match &self.got {
            Got::Missing => None,
            Got::Borrowed(b) => Some(b.len()),
            Got::Owned(b) => Some(b.len()),
            Got::Pieces(p) => Some(p.len()),
        }
    }

    /// The range of the read that the `k`-th request of the task (`task.requests[k]`) asked
    /// for; `None` for a missing key. A range that came back short is an error naming the key
    /// and range (a truncated object).
    fn range(&self, k: usize) -> Result<Option<Range<usize>>> {
        let Some(len) = self.len() else { return Ok(None) };
        let Some(range) = &self.requests[self.task.requests[k]].range else { return Ok(Some(0..len)) };
        let base = self.task.range.as_ref().map_or(0, |r| r.start);
        let lo = (range.start - base) as usize;
        let hi = (range.end - base) as usize;
        if hi > len {
            return Err(Error::decode(
                Location { byte_range: Some(range.clone()), ..self.task.location.clone() },
                format!(
                    "truncated object: {} bytes requested, {} available",
                    range.end - range.start,
                    len.saturating_sub(lo)
                ),
            ));
        }
        Ok(Some(lo..hi))
    }

    /// Call `f` with the bytes of the `k`-th request of the task (`None` for a missing key),
    /// borrowed where they lie in one buffer, else gathered into this thread's scratch buffer.
    pub(crate) fn with_slice<R>(&self, k: usize, f: impl FnOnce(Option<&[u8]>) -> Result<R>) -> Result<R> {
        let Some(r) = self.range(k)? else { return f(None) };
        match &self.got {
            Got::Missing => f(None),
            Got::Borrowed(b) => f(Some(&b[r])),
            Got::Owned(b) => f(Some(&b[r])),
            Got::Pieces(p) => {
                if let Some((piece, within)) = p.contiguous(&r) {
                    return f(Some(&piece[within]));
                }
                // Taken out of the cell (not borrowed), so a nested gather gets its own.
                let mut scratch = GATHER_BUF.take();
                scratch.clear();
                p.gather(r, &mut scratch);
                let result = f(Some(&scratch));
                if scratch.capacity() <= READ_BUF_KEEP {
                    GATHER_BUF.set(scratch);
                }
                result
            }
        }
    }

    /// The bytes of the `k`-th request of the task, owned (a slice of the read's buffer, or a
    /// copy when the buffer is the reading thread's or the bytes span an answer's pieces).
    pub(crate) fn bytes(&self, k: usize) -> Result<Option<Bytes>> {
        let Some(r) = self.range(k)? else { return Ok(None) };
        Ok(Some(match &self.got {
            Got::Owned(b) => b.slice(r),
            Got::Borrowed(b) => Bytes::copy_from_slice(&b[r]),
            Got::Pieces(p) => p.bytes(r),
            Got::Missing => return Ok(None),
        }))
    }
}

/// Count what a read returned: every byte as read, and as wanted the ranges its requests asked
/// for (the whole object for a whole-key read).
fn account(stats: &Stats, task: &ReadTask, requests: &[ReadRequest], got: Option<usize>) {
    let Some(len) = got else { return };
    let len = len as u64;
    stats.add_bytes_read(len);
    stats.add_chunk_bytes_read(len);
    let wanted = match task.range {
        None => len,
        Some(_) => task.requests.iter().filter_map(|&i| requests[i].range.as_ref()).map(|r| r.end - r.start).sum(),
    };
    stats.add_chunk_bytes_wanted(wanted);
}

/// One read through the store's synchronous interface.
fn read_sync(store: &Store, task: &ReadTask, requests: &[ReadRequest], stats: &Stats) -> Result<Option<Bytes>> {
    let started = Instant::now();
    stats.add_storage_requests(1);
    let storage = store.storage();
    let got = match &task.range {
        None => storage.get(&task.key),
        Some(r) => storage.get_partial(&task.key, ByteRange::FromStart(r.start, Some(r.end - r.start))),
    }
    .map_err(|e| Error::storage(task.location.clone(), e));
    stats.add_io(started.elapsed());
    let got = got?;
    account(stats, task, requests, got.as_ref().map(Bytes::len));
    Ok(got)
}

/// The largest read buffer a thread keeps between reads (bigger ones are freed after use).
const READ_BUF_KEEP: usize = 64 << 20;

thread_local! {
    /// Each reading thread's buffer for local reads of the CPU executor, and the path of the file.
    static READ_BUF: std::cell::Cell<(Vec<u8>, std::path::PathBuf)> = const { std::cell::Cell::new((Vec::new(), std::path::PathBuf::new())) };
    /// Each decoding thread's buffer for a request's bytes that span a remote answer's pieces.
    static GATHER_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Read a task's key (or range of it) from the local folder `root` into `buf` (which keeps its
/// length between reads, so its bytes are zeroed once, not per read); `path` is scratch for the
/// file's path. Returns how many bytes were read (fewer than the range when the file is shorter:
/// [`Parts`] reports that as a truncated object), or `None` for a missing file.
fn read_local(
    root: &std::path::Path,
    task: &ReadTask,
    buf: &mut Vec<u8>,
    path: &mut std::path::PathBuf,
) -> std::io::Result<Option<usize>> {
    use std::os::unix::fs::FileExt;
    path.clear();
    path.push(root);
    let key = task.key.as_str();
    if !key.is_empty() {
        path.push(key.strip_prefix('/').unwrap_or(key));
    }
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let (offset, len) = match &task.range {
        Some(r) => (r.start, r.end - r.start),
        None => (0, file.metadata()?.len()),
    };
    let len = usize::try_from(len).map_err(|_| std::io::Error::other("read larger than the address space"))?;
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..len], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(done))
}

/// One read of a local store into the reading thread's buffer, handed to `on_read` while the
/// buffer is borrowed.
fn read_local_reused(
    root: &std::path::Path,
    task: &ReadTask,
    requests: &[ReadRequest],
    stats: &Stats,
    on_read: impl FnOnce(&Parts<'_>) -> Result<()>,
) -> Result<()> {
    // Taken out of the cell (not borrowed), so a nested read on this thread gets its own.
    let (mut buf, mut path) = READ_BUF.take();
    let started = Instant::now();
    stats.add_storage_requests(1);
    let got = read_local(root, task, &mut buf, &mut path);
    stats.add_io(started.elapsed());
    let result = match got {
        Err(e) => Err(Error::storage(task.location.clone(), e.into())),
        Ok(n) => {
            account(stats, task, requests, n);
            let got = n.map_or(Got::Missing, |n| Got::Borrowed(&buf[..n]));
            on_read(&Parts { task, requests, got })
        }
    };
    if buf.capacity() > READ_BUF_KEEP {
        buf = Vec::new(); // a rare huge read: do not hold its memory for the thread's lifetime
    }
    READ_BUF.set((buf, path));
    result
}

/// Run every read of `plan` and call `on_read(task, parts)` for each as soon as its bytes are
/// there, on a thread of the compute pool (for a remote store, also on the calling thread while
/// a compute thread is idle: see [`for_each_remote_read`]). `parts` gives
/// the bytes of each request the read serves, in `task.requests` order (`None` for a missing
/// key). With `reuse`, a local store is read into a buffer each thread keeps (no allocation
/// per read), which `parts` only lends. The first error stops the batch and is returned.
pub(crate) fn for_each_read(
    plan: &BatchPlan,
    ctx: &Ctx<'_>,
    reuse: bool,
    on_read: impl Fn(&ReadTask, &Parts<'_>) -> Result<()> + Sync,
) -> Result<()> {
    let (store, stats) = (plan.array.store(), ctx.stats);
    let requests = &plan.requests;
    if let Some(remote) = store.remote() {
        return for_each_remote_read(plan, ctx, remote, on_read);
    }
    ctx.compute.install(|| {
        plan.reads.par_iter().try_for_each(|task| match store.local_root() {
            Some(root) if reuse => read_local_reused(root, task, requests, stats, |parts| on_read(task, parts)),
            _ => {
                let got = read_sync(store, task, requests, stats)?.map_or(Got::Missing, Got::Owned);
                on_read(task, &Parts { task, requests, got })
            }
        })
    })
}

/// [`for_each_read`] for a remote store: every read is issued at once on the I/O runtime (at
/// most `in_flight` of them per batch) and waits for room under the store's limits on requests
/// and bytes in flight; a read's bytes stay counted against the store's budget until `on_read`
/// is done with them. What arrives is handed to the calling thread, which decodes a small read
/// itself while a compute thread is idle ([`Ctx::decoding`]; I/O-bound stretches then wake no
/// compute thread) and queues the rest on the compute pool, so a long decode on this thread
/// never holds back reads arriving meanwhile for long.
fn for_each_remote_read(
    plan: &BatchPlan,
    ctx: &Ctx<'_>,
    remote: &std::sync::Arc<crate::remote::Remote>,
    on_read: impl Fn(&ReadTask, &Parts<'_>) -> Result<()> + Sync,
) -> Result<()> {
    let (stats, pool, in_flight) = (ctx.stats, ctx.compute, ctx.in_flight);
    let requests = &plan.requests;
    let runtime = crate::store::runtime()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let jobs: Vec<(usize, String, Option<Range<u64>>)> =
        plan.reads.iter().enumerate().map(|(i, t)| (i, t.key.as_str().to_owned(), t.range.clone())).collect();
    // A whole-key read of unknown size reserves a decoded chunk's bytes (encoded chunks are
    // rarely larger).
    let unit_bytes = (plan.array.decode_shape().iter().product::<u64>() * plan.array.dtype.size() as u64).max(1);
    let remote = std::sync::Arc::clone(remote);
    let driver = runtime.spawn(async move {
        let remote = &remote;
        let mut results = futures::stream::iter(jobs)
            .map(|(i, key, range)| async move {
                let reservation = remote.reserve(range.as_ref().map_or(unit_bytes, |r| r.end - r.start)).await;
                let started = Instant::now();
                let got = remote.read_pieces(&key, range).await;
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
    let (decoding, threads) = (ctx.decoding, pool.current_num_threads());
    let decode = |i: usize, got: Option<Pieces>, reservation: Reservation| {
        let task = &plan.reads[i];
        let got = got.map_or(Got::Missing, Got::Pieces);
        if let Err(e) = on_read(task, &Parts { task, requests, got }) {
            fail(e);
        }
        drop(reservation);
    };
    let mut answered = vec![false; plan.reads.len()];
    pool.in_place_scope(|scope| {
        let mut left = plan.reads.len();
        let mut arrived = Vec::new();
        while left > 0 {
            let Ok(first) = rx.recv() else { break };
            for (i, got, took, reservation) in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                left -= 1;
                answered[i] = true;
                let task = &plan.reads[i];
                stats.add_storage_requests(1);
                stats.add_io(took);
                match got {
                    Ok(got) => {
                        let got = got.map(Pieces::new);
                        account(stats, task, requests, got.as_ref().map(Pieces::len));
                        arrived.push((i, got, reservation));
                    }
                    Err(e) => {
                        fail(Error::opendal(task.location.clone(), e));
                        left = 0;
                    }
                }
                if left == 0 {
                    break;
                }
            }
            // Count what arrived as decoding first, so batches deciding at once never both
            // take the last idle compute thread.
            let before = decoding.fetch_add(arrived.len(), Ordering::AcqRel);
            let small = arrived.iter().position(|(_, got, _): &(usize, Option<Pieces>, _)| {
                got.as_ref().is_none_or(|p| p.len() <= INLINE_DECODE_MAX_BYTES)
            });
            let mine = small.filter(|_| before + arrived.len() <= threads).map(|k| arrived.swap_remove(k));
            for (i, got, reservation) in arrived.drain(..) {
                let decode = &decode;
                scope.spawn(move |_| {
                    let _done = Decoding(decoding);
                    decode(i, got, reservation);
                });
            }
            if let Some((i, got, reservation)) = mine {
                let _done = Decoding(decoding);
                decode(i, got, reservation);
            }
        }
    });
    // A read left unanswered: after a failed read the rest are not waited for (that error, the
    // first, is kept); otherwise the driver's task died (a panic in the HTTP stack), and the
    // batch must not come back silently unfilled.
    if let Some(i) = answered.iter().position(|a| !a) {
        fail(Error::io_driver_stopped(plan.reads[i].location.clone()));
    }
    driver.abort();
    let poisoned =
        |_| Error::internal("fetch: the batch's first-error slot was poisoned by a read thread that panicked");
    match first_error.into_inner().map_err(poisoned)? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// [`for_each_read`] request by request, for the CPU executor: `on_request(unit, bytes)` for
/// each request of each read as soon as the read's bytes are there (`None` for a missing key),
/// the bytes lent from the thread's reused buffer (a local store) or the remote answer's pieces.
pub(crate) fn for_each_request(
    plan: &BatchPlan,
    ctx: &Ctx<'_>,
    on_request: impl Fn(usize, Option<&[u8]>) -> Result<()> + Sync,
) -> Result<()> {
    for_each_read(plan, ctx, true, |task, parts| {
        for (k, &i) in task.requests.iter().enumerate() {
            parts.with_slice(k, |bytes| on_request(plan.requests[i].unit, bytes))?;
        }
        Ok(())
    })
}

/// Every request's bytes (`None` for a missing key), in request order.
pub(crate) fn fetch_all(plan: &BatchPlan, ctx: &Ctx<'_>) -> Result<Vec<Option<Bytes>>> {
    let out: Vec<Mutex<Option<Bytes>>> = (0..plan.requests.len()).map(|_| Mutex::new(None)).collect();
    for_each_read(plan, ctx, false, |task, parts| {
        for (k, &i) in task.requests.iter().enumerate() {
            let bytes = parts.bytes(k)?;
            if let Ok(mut slot) = out[i].lock() {
                *slot = bytes;
            }
        }
        Ok(())
    })?;
    let poisoned = |_| Error::internal("fetch: a request's bytes slot was poisoned by a read thread that panicked");
    out.into_iter().map(|m| m.into_inner().map_err(poisoned)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_reads_reuse_the_buffer_and_report_short_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("c/0")).unwrap();
        std::fs::write(dir.path().join("c/0/1"), (0u8..100).collect::<Vec<u8>>()).unwrap();
        let task = |key: &str, range: Option<Range<u64>>| ReadTask {
            key: zarrs_storage::StoreKey::new(key).unwrap(),
            range,
            requests: Vec::new(),
            location: Location::default(),
        };
        let (mut buf, mut path) = (Vec::new(), std::path::PathBuf::new());
        assert_eq!(read_local(dir.path(), &task("c/0/1", None), &mut buf, &mut path).unwrap(), Some(100));
        assert_eq!(buf[..100], (0u8..100).collect::<Vec<u8>>());
        let ptr = buf.as_ptr();
        assert_eq!(read_local(dir.path(), &task("c/0/1", Some(10..30)), &mut buf, &mut path).unwrap(), Some(20));
        assert_eq!(buf[..20], (10u8..30).collect::<Vec<u8>>());
        assert_eq!(buf.as_ptr(), ptr, "a smaller read reuses the buffer");
        // A range past the end comes back short (the caller reports a truncated object).
        assert_eq!(read_local(dir.path(), &task("c/0/1", Some(90..120)), &mut buf, &mut path).unwrap(), Some(10));
        assert_eq!(read_local(dir.path(), &task("c/0/2", None), &mut buf, &mut path).unwrap(), None);
        let err = read_local(dir.path(), &task("c/0", None), &mut buf, &mut path).unwrap_err();
        assert!(err.kind() != std::io::ErrorKind::NotFound, "a folder is not a missing chunk: {err}");
    }

    #[test]
    fn remote_reads_are_decoded_as_they_arrive_never_more_at_once_than_the_pool_has_threads() {
        use std::sync::atomic::AtomicUsize;
        let store = Store::open("memory://fetch-test", &crate::StoreOptions::default()).unwrap();
        let op = store.remote().expect("memory:// is read like a remote store").operator().clone();
        let meta = r#"{"zarr_format":3,"node_type":"array","shape":[64],"data_type":"uint8",
            "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},
            "chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},
            "fill_value":0,"codecs":[{"name":"bytes"}]}"#;
        crate::store::block_on(async {
            op.write("a/zarr.json", meta.as_bytes().to_vec()).await.unwrap();
            for c in 0..32u8 {
                op.write(&format!("a/c/{c}"), vec![2 * c, 2 * c + 1]).await.unwrap();
            }
        })
        .unwrap();
        let reader = crate::Reader::new(crate::ReaderConfig::default()).unwrap();
        let array = reader.open_array(&store, "a", crate::ArrayOptions::default()).unwrap();
        let plan = reader.plan(&array, &[crate::Region::new(vec![0], vec![64])]).unwrap();
        assert_eq!(plan.reads.len(), 32, "one read per chunk");
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let (now, most, seen) = (AtomicUsize::new(0), AtomicUsize::new(0), Mutex::new(Vec::new()));
            let (stats, decoding) = (Stats::default(), AtomicUsize::new(0));
            let ctx = Ctx { stats: &stats, compute: &pool, in_flight: 64, decoding: &decoding };
            for_each_read(&plan, &ctx, false, |task, parts| {
                most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(2));
                let bytes = parts.bytes(0)?.expect("every chunk was written");
                seen.lock().unwrap().push((task.key.as_str().to_owned(), bytes.to_vec()));
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
            let mut seen = seen.into_inner().unwrap();
            seen.sort();
            let mut want: Vec<(String, Vec<u8>)> =
                (0..32u8).map(|c| (format!("a/c/{c}"), vec![2 * c, 2 * c + 1])).collect();
            want.sort();
            assert_eq!(seen, want, "every read decoded once, with its own bytes");
            assert!(
                most.load(Ordering::SeqCst) <= threads,
                "{} reads decoded at once on {threads} threads",
                most.load(Ordering::SeqCst)
            );
            assert_eq!(stats.snapshot().storage_requests, 32);
            assert_eq!(decoding.load(Ordering::SeqCst), 0, "every read decoded is counted out again");
        }
    }

    proptest::proptest! {
        /// Any range of an answer received in any pieces reads as the same range of the whole:
        /// lent from one piece where it lies in one, gathered otherwise.
        #[test]
        fn an_answers_pieces_read_as_the_whole(
            cuts in proptest::collection::vec(0usize..600, 0..8),
            lo in 0usize..600,
            n in 0usize..600,
        ) {
            let whole: Vec<u8> = (0..600u32).map(|i| (i * 7 % 251) as u8).collect();
            let mut cuts = cuts;
            cuts.extend([0, whole.len()]);
            cuts.sort_unstable();
            let parts: Vec<Bytes> = cuts.windows(2).map(|w| Bytes::copy_from_slice(&whole[w[0]..w[1]])).collect();
            let pieces = Pieces::new(opendal::Buffer::from(parts));
            proptest::prop_assert_eq!(pieces.len(), whole.len());
            let r = lo.min(whole.len())..(lo + n).min(whole.len());
            proptest::prop_assert_eq!(&pieces.bytes(r.clone())[..], &whole[r.clone()]);
            let mut gathered = vec![9u8];
            pieces.gather(r.clone(), &mut gathered);
            proptest::prop_assert_eq!(&gathered[1..], &whole[r.clone()]);
            if let Some((piece, within)) = pieces.contiguous(&r) {
                proptest::prop_assert_eq!(&piece[within], &whole[r.clone()]);
                proptest::prop_assert!(cuts.iter().all(|&c| c <= r.start || c >= r.end), "lent across a cut");
            }
        }
    }
}
