//! The read path over real servers on loopback: nginx (HTTP range requests) and moto's S3
//! server, both serving the fixture corpus. `make test` starts them
//! (`tests/services/services.sh`); without them these tests say why they skip.

mod common;

use common::{SplitMix, fixtures_dir, manifest};
use damacy_codec::{ArrayOptions, Reader, ReaderConfig, Region, Store, StoreOptions};

/// The store URL and options of a service, or the reason it is not available.
fn service(url_var: &str, skip_var: &str) -> Result<String, String> {
    if let Ok(url) = std::env::var(url_var) {
        return Ok(url);
    }
    Err(std::env::var(skip_var).unwrap_or_else(|_| {
        format!("{url_var} is not set: run `make test` or `tests/services/services.sh start` first")
    }))
}

fn s3_options() -> StoreOptions {
    let endpoint = std::env::var("DAMACY_TEST_S3_ENDPOINT").unwrap_or_default();
    StoreOptions::default().with_endpoint(endpoint).with_region("us-east-1").with_credentials("testing", "testing")
}

/// Every fixture's digest over the remote store, and random batches equal to the local read.
fn check_store(remote: &Store) {
    let local = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let mut rng = SplitMix(11);
    let entries = manifest();
    for e in &entries {
        let array = reader
            .open_array(remote, &e.path, ArrayOptions::default())
            .unwrap_or_else(|err| panic!("{}: {err}", e.path));
        assert_eq!(common::digest(&reader, &array).unwrap(), e.sha256, "{} over {}", e.path, remote.url());
    }
    for e in entries.iter().filter(|e| e.shard_shape.is_some() || e.path.contains("blosc_lz4")) {
        let remote_array = reader.open_array(remote, &e.path, ArrayOptions::default()).unwrap();
        let local_array = reader.open_array(&local, &e.path, ArrayOptions::default()).unwrap();
        let shape: Vec<u64> = e.shape.iter().map(|&s| 1 + rng.below(s)).collect();
        let regions: Vec<Region> = (0..4)
            .map(|_| {
                Region::new(e.shape.iter().zip(&shape).map(|(&s, &n)| rng.below(s - n + 1)).collect(), shape.clone())
            })
            .collect();
        assert_eq!(
            reader.read_batch(&remote_array, &regions).unwrap(),
            reader.read_batch(&local_array, &regions).unwrap(),
            "{}",
            e.path
        );
    }
    let s = reader.stats();
    assert!(s.storage_requests > 0 && s.bytes_read > 0, "{s:?}");
}

#[test]
fn http_store_reproduces_every_digest() {
    match service("DAMACY_TEST_HTTP_URL", "DAMACY_TEST_HTTP_SKIP") {
        Ok(url) => check_store(&Store::open(&url, &StoreOptions::default()).unwrap()),
        Err(reason) => eprintln!("skipped: {reason}"),
    }
}

#[test]
fn s3_store_reproduces_every_digest() {
    match service("DAMACY_TEST_S3_URL", "DAMACY_TEST_S3_SKIP") {
        Ok(url) => check_store(&Store::open(&url, &s3_options()).unwrap()),
        Err(reason) => eprintln!("skipped: {reason}"),
    }
}

#[test]
fn remote_errors_name_the_store() {
    let Ok(url) = service("DAMACY_TEST_S3_URL", "DAMACY_TEST_S3_SKIP") else { return };
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let store = Store::open(&url, &s3_options()).unwrap();
    let err = reader.open_array(&store, "v3/no_such_array", ArrayOptions::default()).unwrap_err().to_string();
    assert!(err.contains("/v3/no_such_array") && err.contains("not found"), "{err}");
    // A bucket that does not exist.
    let missing = Store::open("s3://no-such-bucket-here", &s3_options().with_retries(0)).unwrap();
    let err = reader.open_array(&missing, "v3/zstd_l3_ck", ArrayOptions::default()).unwrap_err().to_string();
    assert!(err.contains("/v3/zstd_l3_ck"), "{err}");
}

/// A 404 and a 403 are different kinds of failure, decided from the store's error kinds (not
/// message text), with the store's own error kept as the source.
#[test]
fn not_found_and_permission_denied_are_different_kinds() {
    use damacy_codec::{Error, StorageErrorKind};
    let Ok(url) = service("DAMACY_TEST_HTTP_URL", "DAMACY_TEST_HTTP_SKIP") else { return };
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let store = Store::open(&url, &StoreOptions::default()).unwrap();
    // nginx answers 404: no array there.
    let err = reader.open_array(&store, "v3/no_such_array", ArrayOptions::default()).unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err}");
    // nginx answers 403 for everything under /forbidden/.
    let forbidden = Store::open(&format!("{url}/forbidden"), &StoreOptions::default().with_retries(0)).unwrap();
    let err = reader.open_array(&forbidden, "v3/zstd_l3_ck", ArrayOptions::default()).unwrap_err();
    assert_eq!(err.storage_kind(), Some(StorageErrorKind::PermissionDenied), "{err}");
    let source = std::error::Error::source(&err).expect("the store's error is kept");
    assert!(err.to_string().contains("/v3/zstd_l3_ck"), "{err}");
    assert!(source.to_string().contains("403") || source.to_string().to_lowercase().contains("permission"), "{source}");
    // S3: a bucket that does not exist (moto answers 404 NoSuchBucket) is a misconfigured
    // store, not a missing array.
    if service("DAMACY_TEST_S3_URL", "DAMACY_TEST_S3_SKIP").is_ok() {
        let missing = Store::open("s3://no-such-bucket-here", &s3_options().with_retries(0)).unwrap();
        let err = reader.open_array(&missing, "v3/zstd_l3_ck", ArrayOptions::default()).unwrap_err();
        assert_eq!(err.storage_kind(), Some(StorageErrorKind::Config), "{err}");
    }
}

/// Opening and reading a remote array works from inside a tokio runtime (a sync call on a
/// worker thread, and the async variants from a task), as well as from plain threads.
#[test]
fn remote_reads_inside_a_tokio_runtime() {
    let Ok(url) = service("DAMACY_TEST_HTTP_URL", "DAMACY_TEST_HTTP_SKIP") else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let entry = manifest().into_iter().find(|e| e.path == "v3/sharded_zstd_index_end").unwrap();
    let (url2, sha) = (url.clone(), entry.sha256.clone());
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let r = reader.clone();
    // Synchronous calls made on a runtime worker.
    let digest = rt
        .block_on(async move {
            tokio::task::spawn(async move {
                let store = Store::open(&url2, &StoreOptions::default()).unwrap();
                let array = r.open_array(&store, "v3/sharded_zstd_index_end", ArrayOptions::default()).unwrap();
                common::digest(&r, &array).unwrap()
            })
            .await
        })
        .unwrap();
    assert_eq!(digest, sha);
    // The async variants from a current-thread runtime: the worker is never blocked.
    let local = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let batch = local.block_on(async {
        let store = Store::open(&url, &StoreOptions::default()).unwrap();
        let array =
            reader.open_array_async(&store, "v3/sharded_zstd_index_end", ArrayOptions::default()).await.unwrap();
        let whole = Region::whole(&array.shape);
        reader.read_batch_async(&array, vec![whole]).await.unwrap()
    });
    assert_eq!(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(batch.bytes())), entry.sha256);
}

/// A reader built in a forked child works, although the parent had started its I/O runtime and
/// thread pools before the fork (they do not survive a fork; the child starts its own).
#[test]
fn a_reader_in_a_forked_child() {
    let url = service("DAMACY_TEST_HTTP_URL", "DAMACY_TEST_HTTP_SKIP")
        .unwrap_or_else(|_| fixtures_dir().to_str().unwrap().to_owned());
    let entry = manifest().into_iter().find(|e| e.path == "v3/blosc_lz4_byte_ts2_large").unwrap();
    let read = |url: &str| -> String {
        let reader = Reader::new(ReaderConfig::default()).unwrap();
        let store = Store::open(url, &StoreOptions::default()).unwrap();
        let array = reader.open_array(&store, &entry.path, ArrayOptions::default()).unwrap();
        common::digest(&reader, &array).unwrap()
    };
    // The parent reads first: its runtime and pools exist when it forks.
    assert_eq!(read(&url), entry.sha256);
    // SAFETY: the child only runs Rust code that starts its own threads and then `_exit`s; it
    // never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(|| read(&url) == entry.sha256).unwrap_or(false);
        // SAFETY: ends the child at once, without running the parent's atexit handlers.
        unsafe { libc::_exit(i32::from(!ok)) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child's read failed: status {status}");
}
