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
