//! Remote reads under faults: a fault-injecting proxy (`tests/proxy`, loopback only) sits
//! between the reader and nginx (HTTP) or moto (S3) and adds latency, caps bandwidth, answers
//! a share of requests with 503 `SlowDown`, resets connections mid-body, truncates bodies or
//! delays a few answers a lot. Under each, every fixture read over HTTP and S3 equals its
//! manifest digest and the store's counters show what it survived; a store that stays down
//! gives an error naming its URL within the configured deadline. `make test` starts the
//! servers (`tests/services/services.sh`); without them these tests say why they skip.

mod common;
mod proxy;

use std::time::{Duration, Instant};

use common::manifest;
use damacy_codec::{ArrayOptions, Reader, ReaderConfig, Store, StoreOptions, StoreStats};
use proxy::{Faults, Mode, Proxy};

/// A service's upstream (`http://127.0.0.1:PORT`) and how to open a store through a proxy in
/// front of it.
#[derive(Clone, Copy, Debug)]
enum Service {
    Http,
    S3,
}

impl Service {
    /// The server's address, or why the test skips.
    fn upstream(self) -> Result<String, String> {
        let (var, skip) = match self {
            Self::Http => ("DAMACY_TEST_HTTP_URL", "DAMACY_TEST_HTTP_SKIP"),
            Self::S3 => ("DAMACY_TEST_S3_ENDPOINT", "DAMACY_TEST_S3_SKIP"),
        };
        std::env::var(var).map_err(|_| {
            std::env::var(skip).unwrap_or_else(|_| {
                format!("{var} is not set: run `make test` or `tests/services/services.sh start` first")
            })
        })
    }

    /// Open the fixture store through `proxy_url`.
    fn open(self, proxy_url: &str, options: StoreOptions) -> Store {
        match self {
            Self::Http => Store::open(proxy_url, &options).unwrap(),
            Self::S3 => {
                let bucket = std::env::var("DAMACY_TEST_S3_URL").unwrap_or_else(|_| "s3://damacy-fixtures".into());
                let options =
                    options.with_endpoint(proxy_url).with_region("us-east-1").with_credentials("testing", "testing");
                Store::open(&bucket, &options).unwrap()
            }
        }
    }
}

/// Fault tolerance for the tests: quick backoff, so a test spends its time reading.
fn options() -> StoreOptions {
    StoreOptions::default()
        .with_retries(12)
        .with_backoff(Duration::from_millis(2), Duration::from_millis(40))
        .with_request_timeout(Duration::from_secs(5))
        .with_deadline(Duration::from_secs(30))
}

/// Every fixture's digest through a proxy with `faults` in front of `service`; the store's
/// counters afterwards. `None` when the service is not running.
fn digests_through(service: Service, faults: Faults, options: StoreOptions) -> Option<(StoreStats, Proxy)> {
    let upstream = match service.upstream() {
        Ok(u) => u,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return None;
        }
    };
    let proxy = Proxy::start(&upstream, faults);
    let store = service.open(&proxy.url(), options);
    let reader = Reader::new(ReaderConfig::default().with_compute_threads(2)).unwrap();
    for e in &manifest() {
        let array = reader
            .open_array(&store, &e.path, ArrayOptions::default())
            .unwrap_or_else(|err| panic!("{service:?} {}: {err}", e.path));
        let digest = common::digest(&reader, &array).unwrap_or_else(|err| panic!("{service:?} {}: {err}", e.path));
        assert_eq!(digest, e.sha256, "{} over {service:?} through the proxy ({faults:?})", e.path);
    }
    let stats = store.stats().expect("a remote store has counters");
    assert_eq!(reader.store_stats(), vec![stats.clone()], "the reader reports the store it read");
    assert_eq!(stats.failures, 0, "{stats:?}");
    Some((stats, proxy))
}

fn both(faults: Faults, check: impl Fn(Service, &StoreStats, &Proxy)) {
    for service in [Service::Http, Service::S3] {
        if let Some((stats, proxy)) = digests_through(service, faults, options()) {
            eprintln!("{service:?}: {stats:?}");
            check(service, &stats, &proxy);
        }
    }
}

#[test]
fn added_latency_and_a_bandwidth_cap() {
    let faults = Faults { latency: Duration::from_millis(5), bytes_per_sec: Some(64 << 20), ..Faults::default() };
    both(faults, |service, s, _| {
        assert!(s.latency_p50 >= Duration::from_millis(5), "{service:?}: {s:?}");
        assert!(s.in_flight_max > 1, "{service:?}: reads overlap: {s:?}");
        assert_eq!((s.retries, s.timeouts), (0, 0), "{service:?}: {s:?}");
    });
}

#[test]
fn a_share_of_503_slow_down() {
    let faults = Faults { unavailable_share: 0.15, seed: 3, ..Faults::default() };
    both(faults, |service, s, proxy| {
        let refused = proxy.counts().unavailable.load(std::sync::atomic::Ordering::Relaxed);
        assert!(refused > 0, "{service:?}");
        assert!(s.retries >= refused, "{service:?}: every 503 is retried: {s:?}, {refused} refused");
    });
}

#[test]
fn connections_reset_mid_body() {
    let faults = Faults { reset_share: 0.1, seed: 5, ..Faults::default() };
    both(faults, |service, s, proxy| {
        let resets = proxy.counts().resets.load(std::sync::atomic::Ordering::Relaxed);
        assert!(resets > 0, "{service:?}");
        assert!(s.retries >= resets, "{service:?}: every reset is retried: {s:?}, {resets} resets");
    });
}

#[test]
fn truncated_bodies() {
    let faults = Faults { truncate_share: 0.1, seed: 7, ..Faults::default() };
    both(faults, |service, s, proxy| {
        let cut = proxy.counts().truncations.load(std::sync::atomic::Ordering::Relaxed);
        assert!(cut > 0, "{service:?}");
        // Ranged reads (shard indexes, inner chunks) get well-framed short answers, which only
        // a length check catches; others a body cut short of its Content-Length.
        assert!(s.retries >= cut, "{service:?}: every short body is retried: {s:?}, {cut} cut");
    });
}

/// A few answers delayed by a second: with hedging on, a duplicate goes out after the observed
/// p95 and wins.
#[test]
fn hedged_reads_beat_slow_answers() {
    let faults = Faults { slow_share: 0.01, slow_extra: Duration::from_secs(1), seed: 11, ..Faults::default() };
    let Some((s, proxy)) = digests_through(Service::Http, faults, options().with_hedge(true)) else { return };
    let slowed = proxy.counts().slowed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(slowed > 0);
    assert!(s.hedges > 0 && s.hedge_wins > 0, "{s:?}, {slowed} slowed");
    assert_eq!(s.timeouts, 0, "{s:?}");
}

/// A store that stays down: a clear error naming its URL, within the configured deadline.
#[test]
fn a_store_that_stays_down_fails_within_the_deadline() {
    let Ok(upstream) = Service::Http.upstream() else {
        eprintln!("skipped: DAMACY_TEST_HTTP_URL is not set (run `tests/services/services.sh start`)");
        return;
    };
    let deadline = Duration::from_millis(1500);
    let options = StoreOptions::default()
        .with_request_timeout(Duration::from_millis(300))
        .with_deadline(deadline)
        .with_backoff(Duration::from_millis(10), Duration::from_millis(100))
        .with_retries(1000);
    let hang = Proxy::start(&upstream, Faults { mode: Mode::Hang, ..Faults::default() });
    let unavailable = Proxy::start(&upstream, Faults { mode: Mode::Unavailable, ..Faults::default() });
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    for (what, url) in [("hangs", hang.url()), ("answers 503", unavailable.url()), ("refuses", Proxy::refused_url())] {
        for service in [Service::Http, Service::S3] {
            if service.upstream().is_err() {
                continue;
            }
            let store = service.open(&url, options.clone());
            let started = Instant::now();
            let err = reader.open_array(&store, "v3/zstd_l3_ck", ArrayOptions::default()).unwrap_err();
            let took = started.elapsed();
            assert!(took < deadline + Duration::from_secs(2), "{service:?}, a store that {what}: {took:?}: {err}");
            let text = err.to_string();
            let port = url.rsplit(':').next().unwrap();
            assert!(text.contains(&format!("127.0.0.1:{port}")), "{service:?}, a store that {what}: {text}");
            assert!(text.contains("deadline"), "{service:?}, a store that {what}: {text}");
            let s = store.stats().unwrap();
            assert!(s.retries > 0 && s.failures > 0, "{service:?}, a store that {what}: {s:?}");
            if what == "hangs" {
                assert!(s.timeouts > 0, "{s:?}");
            }
        }
    }
}

/// Retries are each read's own: reads failing at once through one store (a proxy answering
/// every request 503) each send exactly `retries + 1` requests and say so, and the store's
/// counters and the proxy agree; no read is cut short by the others' retries.
#[test]
fn each_read_retries_by_itself() {
    let Ok(upstream) = Service::Http.upstream() else {
        eprintln!("skipped: DAMACY_TEST_HTTP_URL is not set (run `tests/services/services.sh start`)");
        return;
    };
    let retries = 3;
    let base = Duration::from_millis(5);
    let options = StoreOptions::default().with_retries(retries).with_backoff(base, Duration::from_millis(20));
    let unavailable = Proxy::start(&upstream, Faults { mode: Mode::Unavailable, ..Faults::default() });
    let store = Service::Http.open(&unavailable.url(), options);
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let paths: Vec<String> = manifest().into_iter().take(8).map(|e| e.path).collect();
    let errors: Vec<String> = std::thread::scope(|s| {
        let opened: Vec<_> = paths
            .iter()
            .map(|p| s.spawn(|| reader.open_array(&store, p, ArrayOptions::default()).unwrap_err().to_string()))
            .collect();
        opened.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let n = paths.len() as u64;
    for err in &errors {
        assert!(err.contains(&format!("after {} requests", retries + 1)), "{err}");
        assert!(err.contains(&format!("({retries} retries exhausted)")), "{err}");
    }
    let s = store.stats().unwrap();
    let per_read = retries as u64 + 1;
    assert_eq!((s.requests, s.retries, s.failures), (n * per_read, n * retries as u64, n), "{s:?}");
    assert_eq!(unavailable.counts().requests.load(std::sync::atomic::Ordering::Relaxed), n * per_read);
}
