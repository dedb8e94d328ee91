//! Requests to a remote store (S3, GCS, Azure, HTTP): every one goes through here, under the
//! store's limits on requests and bytes in flight, with a per-request timeout, retries with
//! exponential backoff and full jitter on failures that may pass (throttling, 5xx, timeouts,
//! resets, short bodies), optional hedged requests, an overall deadline per read, and counters
//! ([`StoreStats`]). A byte range that comes back short is retried, never returned.

use std::future::Future;
use std::ops::Range;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use futures::future::{Either, select};
use opendal::{ErrorKind, Operator};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use zarrs_storage::Bytes;

/// The resolved fault and concurrency policy of one remote store (from
/// [`crate::StoreOptions`] and its defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) retries: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) deadline: Duration,
    pub(crate) backoff_base: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) hedge: bool,
    pub(crate) max_requests: usize,
    pub(crate) max_bytes: u64,
}

/// Samples the latency histogram needs before hedging starts.
const HEDGE_MIN_SAMPLES: u64 = 32;
/// Unit of the byte budget's semaphore permits.
const BYTE_UNIT: u64 = 1024;

/// Counters and the latency histogram of one store, updated by every request.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    retries: AtomicU64,
    timeouts: AtomicU64,
    hedges: AtomicU64,
    hedge_wins: AtomicU64,
    failures: AtomicU64,
    in_flight: AtomicU64,
    in_flight_max: AtomicU64,
    bytes_in_flight: AtomicU64,
    bytes_in_flight_max: AtomicU64,
    latency: Latency,
}

/// Request latencies in logarithmic buckets, eight per octave, from 1 µs to about 2^32 µs.
#[derive(Debug)]
struct Latency {
    buckets: Box<[AtomicU64; Latency::BUCKETS]>,
    max_us: AtomicU64,
}

impl Default for Latency {
    fn default() -> Self {
        Self { buckets: Box::new(std::array::from_fn(|_| AtomicU64::new(0))), max_us: AtomicU64::new(0) }
    }
}

impl Latency {
    const PER_OCTAVE: f64 = 8.0;
    const BUCKETS: usize = 256;

    fn bucket(us: u64) -> usize {
        ((us.max(1) as f64).log2() * Self::PER_OCTAVE) as usize
    }

    fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[Self::bucket(us).min(Self::BUCKETS - 1)].fetch_add(1, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// The `q` quantile (an upper bound: the top of its bucket, at most the largest sample).
    fn quantile(&self, q: f64) -> Duration {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let top = 2f64.powf((i + 1) as f64 / Self::PER_OCTAVE);
                let us = (top as u64).min(self.max_us.load(Relaxed));
                return Duration::from_micros(us);
            }
        }
        Duration::from_micros(self.max_us.load(Relaxed))
    }
}

/// What one remote store has done so far: requests, bytes, faults survived and latencies.
/// Read it with [`crate::Store::stats`] or [`crate::Reader::store_stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// The store's URL (with the endpoint it is reached at, where one was given).
    pub url: String,
    /// Requests sent: every attempt, retries and hedges included.
    pub requests: u64,
    /// Bytes received in answers that were used.
    pub bytes: u64,
    /// Requests repeated after a failure that may pass (throttling, 5xx, a timeout, a reset
    /// connection, a short body).
    pub retries: u64,
    /// Requests that got no complete answer within the per-request timeout.
    pub timeouts: u64,
    /// Duplicate requests sent because the first had taken longer than the observed p95.
    pub hedges: u64,
    /// Hedges whose answer came first.
    pub hedge_wins: u64,
    /// Reads that failed after retrying (retries or the deadline exhausted). Failures that are
    /// not retried (404, 403) are not counted here.
    pub failures: u64,
    /// The most requests in flight at once.
    pub in_flight_max: u64,
    /// The most bytes reserved for reads in flight (requested and not yet decoded) at once.
    pub bytes_in_flight_max: u64,
    /// Median request latency (time to the whole answer).
    pub latency_p50: Duration,
    /// 90th percentile request latency.
    pub latency_p90: Duration,
    /// 95th percentile request latency (where hedging starts).
    pub latency_p95: Duration,
    /// 99th percentile request latency.
    pub latency_p99: Duration,
    /// The slowest request.
    pub latency_max: Duration,
}

/// A remote store's operator with its limits, policy and counters.
pub(crate) struct Remote {
    op: Operator,
    url: String,
    policy: Policy,
    requests: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    byte_units: u32,
    counters: Arc<Counters>,
    /// The jitter of each backoff, a fraction in `[0, 1)` of its ceiling ([`jitter_unit`];
    /// fixed by tests).
    jitter: fn() -> f64,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).field("policy", &self.policy).finish_non_exhaustive()
    }
}

/// Bytes of a store's in-flight budget held by one read until its bytes are decoded.
#[derive(Debug)]
pub(crate) struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: u64,
    counters: Arc<Counters>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.counters.bytes_in_flight.fetch_sub(self.bytes, Relaxed);
    }
}

/// Counts a request in flight while it lives.
struct InFlight<'a>(&'a Counters);

impl<'a> InFlight<'a> {
    fn enter(c: &'a Counters) -> Self {
        let now = c.in_flight.fetch_add(1, Relaxed) + 1;
        c.in_flight_max.fetch_max(now, Relaxed);
        Self(c)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

/// Whether a failed request may succeed when repeated: what opendal or [`Remote`] marks
/// temporary (throttling, 5xx, timeouts, resets, short bodies), and any unexpected failure
/// (an answer shorter or longer than the range asked for, a garbled answer, an unknown status).
/// Answers that say something definite about the object or the store (404, 403, 416, a bad
/// configuration) are not retried.
fn retryable(e: &opendal::Error) -> bool {
    e.is_temporary() || matches!(e.kind(), ErrorKind::RateLimited | ErrorKind::Unexpected)
}

/// A small, fast random source for backoff jitter (splitmix64 over a shared counter).
fn jitter_unit() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(std::process::id()) << 32 ^ u64::from(nanos);
    let mut z = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed) ^ seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl Remote {
    pub(crate) fn new(op: Operator, url: &str, policy: Policy) -> Self {
        let byte_units = u32::try_from(policy.max_bytes.div_ceil(BYTE_UNIT)).unwrap_or(u32::MAX).max(1);
        Self {
            op,
            url: url.to_owned(),
            requests: Arc::new(Semaphore::new(policy.max_requests.max(1))),
            bytes: Arc::new(Semaphore::new(byte_units as usize)),
            byte_units,
            policy,
            counters: Arc::new(Counters::default()),
            jitter: jitter_unit,
        }
    }

    /// The store's operator (listing goes through it directly).
    pub(crate) fn operator(&self) -> &Operator {
        &self.op
    }

    /// Wait until `bytes` fit in the store's bytes-in-flight budget and hold them until the
    /// reservation is dropped. A read larger than the whole budget takes the whole budget.
    pub(crate) async fn reserve(&self, bytes: u64) -> Reservation {
        let units = u32::try_from(bytes.div_ceil(BYTE_UNIT)).unwrap_or(u32::MAX).clamp(1, self.byte_units);
        // The semaphore is never closed, so acquiring fails only if it were; then the read
        // goes on without a reservation rather than failing.
        let permit = self.bytes.clone().acquire_many_owned(units).await.ok();
        let now = self.counters.bytes_in_flight.fetch_add(bytes, Relaxed) + bytes;
        self.counters.bytes_in_flight_max.fetch_max(now, Relaxed);
        Reservation { _permit: permit, bytes, counters: self.counters.clone() }
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> StoreStats {
        let c = &self.counters;
        StoreStats {
            url: self.url.clone(),
            requests: c.requests.load(Relaxed),
            bytes: c.bytes.load(Relaxed),
            retries: c.retries.load(Relaxed),
            timeouts: c.timeouts.load(Relaxed),
            hedges: c.hedges.load(Relaxed),
            hedge_wins: c.hedge_wins.load(Relaxed),
            failures: c.failures.load(Relaxed),
            in_flight_max: c.in_flight_max.load(Relaxed),
            bytes_in_flight_max: c.bytes_in_flight_max.load(Relaxed),
            latency_p50: c.latency.quantile(0.50),
            latency_p90: c.latency.quantile(0.90),
            latency_p95: c.latency.quantile(0.95),
            latency_p99: c.latency.quantile(0.99),
            latency_max: Duration::from_micros(c.latency.max_us.load(Relaxed)),
        }
    }

    /// Read `range` of `path` (the whole object for `None`); `None` when the object does not
    /// exist. Retried, timed out and hedged per the policy; the answer is exactly the range
    /// asked for, or an error.
    pub(crate) async fn read(&self, path: &str, range: Option<Range<u64>>) -> Result<Option<Bytes>, opendal::Error> {
        Ok(self.read_pieces(path, range).await?.map(|b| b.to_bytes()))
    }

    /// [`Remote::read`] without joining the answer: the pieces the HTTP client received.
    pub(crate) async fn read_pieces(
        &self,
        path: &str,
        range: Option<Range<u64>>,
    ) -> Result<Option<opendal::Buffer>, opendal::Error> {
        let what = match &range {
            Some(r) => format!("{path} bytes {}..{}", r.start, r.end),
            None => path.to_owned(),
        };
        let (op, counters) = (&self.op, &self.counters);
        let call = || {
            let range = range.clone();
            async move {
                let got = match &range {
                    Some(r) => op.read_with(path).range(r.clone()).await,
                    None => op.read(path).await,
                };
                let bytes = match got {
                    Ok(b) => b,
                    Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(e),
                };
                if let Some(r) = &range
                    && bytes.len() as u64 != r.end - r.start
                {
                    return Err(opendal::Error::new(
                        ErrorKind::RangeNotSatisfied,
                        format!("{} bytes returned for range {}..{} of {path}", bytes.len(), r.start, r.end),
                    )
                    .set_temporary());
                }
                counters.bytes.fetch_add(bytes.len() as u64, Relaxed);
                Ok(Some(bytes))
            }
        };
        self.run(&what, call, self.policy.hedge).await
    }

    /// The size of `path`; `None` when it does not exist.
    pub(crate) async fn size(&self, path: &str) -> Result<Option<u64>, opendal::Error> {
        let op = &self.op;
        let call = || async move {
            match op.stat(path).await {
                Ok(m) => Ok(Some(m.content_length())),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        };
        self.run(&format!("the size of {path}"), call, false).await
    }

    /// The delay after attempt `n` (0-based) failed: full jitter over an exponential backoff.
    fn backoff(&self, n: usize) -> Duration {
        let base = self.policy.backoff_base.as_secs_f64();
        let cap = self.policy.backoff_max.as_secs_f64();
        let ceiling = (base * 2f64.powi(i32::try_from(n).unwrap_or(i32::MAX).min(60))).min(cap);
        Duration::from_secs_f64(ceiling * (self.jitter)())
    }

    /// When to send a duplicate of a request still unanswered: the observed p95, once enough
    /// requests were seen; `None` when hedging is off.
    fn hedge_after(&self) -> Option<Duration> {
        (self.policy.hedge && self.counters.latency.count() >= HEDGE_MIN_SAMPLES)
            .then(|| self.counters.latency.quantile(0.95).max(Duration::from_micros(100)))
    }

    /// One request under a request permit, bounded by `timeout`.
    async fn attempt<T, F, Fut>(
        &self,
        permit: OwnedSemaphorePermit,
        call: &F,
        timeout: Duration,
    ) -> Result<T, opendal::Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, opendal::Error>>,
    {
        let _permit = permit;
        let _gauge = InFlight::enter(&self.counters);
        self.counters.requests.fetch_add(1, Relaxed);
        let started = Instant::now();
        match tokio::time::timeout(timeout, call()).await {
            Ok(Ok(v)) => {
                self.counters.latency.record(started.elapsed());
                Ok(v)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                self.counters.timeouts.fetch_add(1, Relaxed);
                Err(opendal::Error::new(ErrorKind::Unexpected, format!("no complete answer within {timeout:?}"))
                    .set_temporary())
            }
        }
    }

    /// One request, duplicated after the observed p95 when hedging is on and a request slot is
    /// free: the first good answer wins, the other request is dropped. `sent` counts the
    /// requests sent (one or two).
    async fn attempt_hedged<T, F, Fut>(
        &self,
        permit: OwnedSemaphorePermit,
        call: &F,
        timeout: Duration,
        sent: &mut usize,
    ) -> Result<T, opendal::Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, opendal::Error>>,
    {
        *sent += 1;
        let first = self.attempt(permit, call, timeout);
        let Some(after) = self.hedge_after().filter(|a| *a < timeout) else { return first.await };
        let first = pin!(first);
        let sleep = pin!(tokio::time::sleep(after));
        let first = match select(first, sleep).await {
            Either::Left((answer, _)) => return answer,
            Either::Right(((), first)) => first,
        };
        let Ok(second_permit) = self.requests.clone().try_acquire_owned() else { return first.await };
        self.counters.hedges.fetch_add(1, Relaxed);
        *sent += 1;
        let second = self.attempt(second_permit, call, timeout.saturating_sub(after));
        match select(first, pin!(second)).await {
            Either::Left((Ok(v), _)) => Ok(v),
            Either::Left((Err(_), second)) => {
                let answer = second.await;
                if answer.is_ok() {
                    self.counters.hedge_wins.fetch_add(1, Relaxed);
                }
                answer
            }
            Either::Right((Ok(v), _)) => {
                self.counters.hedge_wins.fetch_add(1, Relaxed);
                Ok(v)
            }
            Either::Right((Err(_), first)) => first.await,
        }
    }

    /// Run `call` until it succeeds, fails for good, runs out of retries or passes the
    /// deadline (counted from the first request sent). Retries, the backoff and the deadline
    /// are this call's own: nothing is shared with the store's other reads but the request
    /// permits and the counters. The error names the requests this call sent (hedges
    /// included: `retries + 1` attempts may send more) and the time it spent backing off.
    async fn run<T, F, Fut>(&self, what: &str, call: F, hedge: bool) -> Result<T, opendal::Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, opendal::Error>>,
    {
        let mut deadline = None;
        let mut started = None;
        let mut backed_off = Duration::ZERO;
        let (mut attempt, mut sent) = (0usize, 0usize);
        loop {
            let permit = self
                .requests
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| opendal::Error::new(ErrorKind::Unexpected, "the store's request limit was closed"))?;
            let now = Instant::now();
            let started = *started.get_or_insert(now);
            let deadline = *deadline.get_or_insert(now + self.policy.deadline);
            let timeout = self.policy.request_timeout.min(deadline.saturating_duration_since(now));
            let answer = if hedge {
                self.attempt_hedged(permit, &call, timeout, &mut sent).await
            } else {
                sent += 1;
                self.attempt(permit, &call, timeout).await
            };
            let e = match answer {
                Ok(v) => return Ok(v),
                Err(e) if retryable(&e) => e,
                Err(e) => return Err(e),
            };
            let delay = self.backoff(attempt);
            let out_of_time = Instant::now() + delay >= deadline;
            if attempt >= self.policy.retries || out_of_time {
                self.counters.failures.fetch_add(1, Relaxed);
                let why = if out_of_time {
                    format!("the read deadline of {:?} passed", self.policy.deadline)
                } else {
                    format!("{} retries exhausted", self.policy.retries)
                };
                let kind = if e.kind() == ErrorKind::RangeNotSatisfied {
                    ErrorKind::RangeNotSatisfied
                } else {
                    ErrorKind::Unexpected
                };
                return Err(opendal::Error::new(
                    kind,
                    format!(
                        "{}: gave up on {what} after {sent} requests in {:.1?}, {:.1?} of it backing off ({why})",
                        self.url,
                        started.elapsed(),
                        backed_off,
                    ),
                )
                .set_source(e)
                .set_persistent());
            }
            self.counters.retries.fetch_add(1, Relaxed);
            let slept = Instant::now();
            tokio::time::sleep(delay).await;
            backed_off += slept.elapsed();
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles_are_upper_bounds() {
        let l = Latency::default();
        for ms in 1..=100u64 {
            l.record(Duration::from_millis(ms));
        }
        let p50 = l.quantile(0.5);
        let p95 = l.quantile(0.95);
        assert!(p50 >= Duration::from_millis(50) && p50 <= Duration::from_millis(55), "{p50:?}");
        assert!(p95 >= Duration::from_millis(95) && p95 <= Duration::from_millis(100), "{p95:?}");
        assert_eq!(l.quantile(1.0), Duration::from_millis(100));
        assert_eq!(l.count(), 100);
        assert_eq!(Latency::default().quantile(0.5), Duration::ZERO);
    }

    #[test]
    fn jitter_is_in_the_unit_interval_and_varies() {
        let v: Vec<f64> = (0..1000).map(|_| jitter_unit()).collect();
        assert!(v.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((0.4..0.6).contains(&mean), "{mean}");
    }

    fn memory_remote(policy: Policy) -> Remote {
        let op = Operator::new(opendal::services::Memory::default()).unwrap();
        Remote::new(op, "memory://test", policy)
    }

    fn policy() -> Policy {
        Policy {
            retries: 3,
            request_timeout: Duration::from_millis(200),
            deadline: Duration::from_secs(5),
            backoff_base: Duration::from_millis(1),
            backoff_max: Duration::from_millis(4),
            hedge: false,
            max_requests: 4,
            max_bytes: 1 << 20,
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(f)
    }

    #[test]
    fn failures_that_pass_are_retried_and_counted() {
        let remote = memory_remote(policy());
        let tries = AtomicU64::new(0);
        let got = block_on(remote.run(
            "x",
            || async { if tries.fetch_add(1, Relaxed) < 2 { Err(unavailable()) } else { Ok(7) } },
            false,
        ));
        assert_eq!(got.unwrap(), 7);
        let s = remote.stats();
        assert_eq!((s.requests, s.retries, s.failures), (3, 2, 0));
    }

    #[test]
    fn permanent_failures_are_not_retried() {
        let remote = memory_remote(policy());
        let got: Result<(), _> =
            block_on(remote.run("x", || async { Err(opendal::Error::new(ErrorKind::PermissionDenied, "403")) }, false));
        assert_eq!(got.unwrap_err().kind(), ErrorKind::PermissionDenied);
        assert_eq!(remote.stats().retries, 0);
    }

    #[test]
    fn a_store_that_stays_down_fails_within_the_deadline_naming_the_url() {
        let mut p = policy();
        p.retries = 1000;
        p.deadline = Duration::from_millis(300);
        p.request_timeout = Duration::from_millis(50);
        let remote = memory_remote(p);
        let started = Instant::now();
        let got: Result<(), _> = block_on(remote.run(
            "key",
            || async {
                tokio::time::sleep(Duration::from_hours(1)).await;
                Ok(())
            },
            false,
        ));
        let elapsed = started.elapsed();
        let err = got.unwrap_err();
        assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
        assert!(err.to_string().contains("memory://test") && err.to_string().contains("deadline"), "{err}");
        assert!(err.is_persistent());
        let s = remote.stats();
        assert!(s.timeouts >= 2 && s.failures == 1, "{s:?}");
    }

    /// A remote that hedges, its latency histogram filled with fast answers.
    fn hedging_remote(mut p: Policy) -> Remote {
        p.hedge = true;
        let remote = memory_remote(p);
        for _ in 0..HEDGE_MIN_SAMPLES {
            block_on(remote.run("x", || async { Ok(()) }, true)).unwrap();
        }
        remote
    }

    /// A failure that may pass.
    fn unavailable() -> opendal::Error {
        opendal::Error::new(ErrorKind::Unexpected, "503").set_temporary()
    }

    #[test]
    fn hedges_after_the_observed_p95() {
        let remote = hedging_remote(policy());
        // The first request hangs; its duplicate answers.
        let calls = AtomicU64::new(0);
        let got = block_on(remote.run(
            "slow",
            || async {
                if calls.fetch_add(1, Relaxed) == 0 {
                    tokio::time::sleep(Duration::from_hours(1)).await;
                }
                Ok(5)
            },
            true,
        ));
        assert_eq!(got.unwrap(), 5);
        let s = remote.stats();
        assert_eq!((s.hedges, s.hedge_wins, s.timeouts), (1, 1, 0), "{s:?}");
    }

    #[test]
    fn byte_budget_is_held_until_dropped() {
        let remote = memory_remote(policy());
        block_on(async {
            let a = remote.reserve(600 << 10).await;
            let b = remote.reserve(300 << 10).await;
            // 900 KiB of 1 MiB taken: a 200 KiB read waits until one is dropped.
            assert!(remote.bytes.available_permits() < 200);
            drop(a);
            let c = remote.reserve(200 << 10).await;
            drop((b, c));
            // A read larger than the whole budget takes the whole budget, no more.
            let big = remote.reserve(8 << 20).await;
            assert_eq!(remote.bytes.available_permits(), 0);
            drop(big);
        });
        assert_eq!(remote.stats().bytes_in_flight_max, 8 << 20);
        assert_eq!(remote.counters.bytes_in_flight.load(Relaxed), 0);
    }

    /// Reads that fail at once, concurrently, each retry by itself: every read sends exactly
    /// `retries + 1` requests and backs off the documented amount (fixed here at each
    /// ceiling: 10, 20, 40, 40 ms), however many other reads fail beside it.
    #[test]
    fn each_read_retries_and_backs_off_by_itself() {
        let (backoff_base, backoff_max) = (Duration::from_millis(10), Duration::from_millis(40));
        let mut remote = memory_remote(Policy { retries: 4, backoff_base, backoff_max, max_requests: 64, ..policy() });
        remote.jitter = || 1.0 - f64::EPSILON;
        let sent = AtomicU64::new(0);
        let reads = 16;
        let failed = block_on(futures::future::join_all((0..reads).map(|i| {
            let (remote, sent) = (&remote, &sent);
            async move {
                let started = Instant::now();
                let err = remote
                    .run(
                        &format!("read {i}"),
                        || async {
                            sent.fetch_add(1, Relaxed);
                            Err::<(), _>(unavailable())
                        },
                        false,
                    )
                    .await
                    .unwrap_err();
                (err.to_string(), started.elapsed())
            }
        })));
        for (i, (err, took)) in failed.iter().enumerate() {
            assert!(err.contains(&format!("gave up on read {i} after 5 requests")), "{err}");
            assert!(err.contains("(4 retries exhausted)"), "{err}");
            assert!(*took >= Duration::from_millis(109), "read {i} gave up after {took:?}: {err}");
        }
        assert_eq!(sent.load(Relaxed), reads * 5);
        let s = remote.stats();
        assert_eq!((s.requests, s.retries, s.failures), (reads * 5, reads * 4, reads));
    }

    /// A read's error counts the hedges it sent with its requests.
    #[test]
    fn a_failed_read_counts_its_hedges() {
        let mut p = policy();
        p.retries = 1;
        let remote = hedging_remote(p);
        // Every request fails, slowly enough to be hedged.
        let err = block_on(remote.run(
            "slow",
            || async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err::<(), _>(unavailable())
            },
            true,
        ))
        .unwrap_err();
        assert!(err.to_string().contains("gave up on slow after 4 requests"), "{err}");
        assert_eq!(remote.stats().hedges, 2);
    }
}
