//! The Pipeline over real servers on loopback (nginx for HTTP, moto for S3), both serving the
//! fixture corpus: sample URIs that name remote stores. `make test` starts the servers
//! (`tests/services/services.sh`); without them these tests say why they skip.

#[path = "../../damacy-codec/tests/common/mod.rs"]
mod common;

use damacy::{Config, ExecutorKind, Pipeline, Region, Sample, StoreOptions};

fn service(url_var: &str, skip_var: &str) -> Result<String, String> {
    if let Ok(url) = std::env::var(url_var) {
        return Ok(url);
    }
    Err(std::env::var(skip_var).unwrap_or_else(|_| {
        format!("{url_var} is not set: run `make test` or `tests/services/services.sh start` first")
    }))
}

/// Batches of crops of two fixtures named through `root` equal the same crops read locally.
fn check(root: &str, options: StoreOptions) {
    let local = common::fixtures_dir().to_str().unwrap().to_owned();
    let regions: Vec<Region> = (0..6).map(|i| Region::new(vec![i * 5, i * 7, 0], vec![8, 16, 20])).collect();
    let read = |root: &str, options: StoreOptions| {
        let p = Pipeline::new(
            Config::new(4)
                .with_executor(ExecutorKind::Cpu)
                .with_io_threads(2)
                .with_compute_threads(1)
                .with_store_options(options),
        )
        .unwrap();
        // `store#path` names the array inside the served corpus; the second array's URI is the
        // array's own folder (a store whose root is the array).
        let (a, b) = (format!("{root}#v3/sharded_zstd_index_end"), format!("{root}/v3/sharded_blosc_index_end"));
        p.push(regions.clone().into_iter().map(move |r| Sample::multi([a.clone(), b.clone()], r))).unwrap();
        let mut out = Vec::new();
        loop {
            match p.pop() {
                Ok(batch) => out.push((batch.to_vec(0).unwrap(), batch.to_vec(1).unwrap())),
                Err(e) if e.is_exhausted() => return out,
                Err(e) => panic!("{root}: {e}"),
            }
        }
    };
    let remote = read(root, options);
    assert_eq!(remote.len(), 2);
    assert_eq!(remote, read(&local, StoreOptions::default()), "{root}");
}

#[test]
fn samples_over_http() {
    match service("DAMACY_TEST_HTTP_URL", "DAMACY_TEST_HTTP_SKIP") {
        Ok(url) => check(url.trim_end_matches('/'), StoreOptions::default()),
        Err(why) => eprintln!("skipped: {why}"),
    }
}

#[test]
fn samples_over_s3() {
    match service("DAMACY_TEST_S3_URL", "DAMACY_TEST_S3_SKIP") {
        Ok(url) => {
            let endpoint = std::env::var("DAMACY_TEST_S3_ENDPOINT").unwrap_or_default();
            let options = StoreOptions::default()
                .with_endpoint(endpoint)
                .with_region("us-east-1")
                .with_credentials("testing", "testing");
            check(url.trim_end_matches('/'), options);
        }
        Err(why) => eprintln!("skipped: {why}"),
    }
}
