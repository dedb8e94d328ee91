//! The `damacy` binary: inspect output, digests, and one-line errors.

use std::path::PathBuf;
use std::process::Command;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn damacy(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_damacy")).args(args).output().expect("the damacy binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The arrays of the fixtures' manifest.
fn manifest_arrays() -> Vec<serde_json::Value> {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("manifest.json")).unwrap()).unwrap();
    manifest["arrays"].as_array().unwrap().clone()
}

fn manifest_digest(path: &str) -> String {
    manifest_arrays().iter().find(|a| a["path"] == path).map(|a| a["sha256"].as_str().unwrap().to_owned()).unwrap()
}

#[test]
fn inspect_digest_matches_the_manifest() {
    for path in ["v3/sharded_zstd_index_start", "v2/blosc_lz4_default_F", "v3/blosc_lz4_bit_ts2_small"] {
        let (ok, stdout, stderr) =
            damacy(&["inspect", fixtures().to_str().unwrap(), path, "--digest", "--executor", "cpu"]);
        assert!(ok, "{stderr}");
        assert!(stdout.contains(&format!("sha256 {}", manifest_digest(path))), "{path}: {stdout}");
    }
}

#[test]
fn inspect_lists_every_array_with_routes() {
    let (ok, stdout, stderr) = damacy(&["inspect", fixtures().to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("/v3/sharded_blosc_index_end"));
    assert!(stdout.contains("shards [16, 32, 20]"));
    assert!(stdout.contains("blosc(cname=lz4"));
    assert!(stdout.contains("CPU ("), "every codec states its route: {stdout}");
    let arrays = stdout.lines().filter(|l| l.starts_with('/')).count();
    assert!(stdout.contains(&format!("{arrays} arrays")), "{stdout}");
    assert!(arrays >= 150);
}

fn assert_one_line_error(args: &[&str], needle: &str) {
    let (ok, _, stderr) = damacy(args);
    assert!(!ok, "{args:?} should fail");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains(needle), "{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
}

#[test]
fn bad_input_is_one_clear_line() {
    assert_one_line_error(&["inspect", "/no/such/store"], "no folder at /no/such/store");
    assert_one_line_error(
        &["inspect", fixtures().to_str().unwrap(), "v3/not_an_array"],
        "no zarr array at /v3/not_an_array",
    );
    assert_one_line_error(&["inspect", "ftp://example/x"], "unsupported store scheme");

    let dir = tempfile::tempdir().unwrap();
    assert_one_line_error(&["inspect", dir.path().to_str().unwrap()], "no zarr arrays");
    std::fs::create_dir(dir.path().join("broken")).unwrap();
    std::fs::write(dir.path().join("broken/zarr.json"), b"{ this is not json").unwrap();
    assert_one_line_error(&["inspect", dir.path().to_str().unwrap(), "broken"], "/broken");
}

#[test]
fn inspect_digest_over_http_and_s3() {
    let path = "v3/sharded_blosc_index_end";
    let expected = format!("sha256 {}", manifest_digest(path));
    match std::env::var("DAMACY_TEST_HTTP_URL") {
        Ok(url) => {
            let (ok, stdout, stderr) = damacy(&["inspect", &url, path, "--digest", "--executor", "cpu"]);
            assert!(ok && stdout.contains(&expected), "{stdout}{stderr}");
        }
        Err(_) => eprintln!("skipped http: DAMACY_TEST_HTTP_URL is not set (run `make test`)"),
    }
    match (std::env::var("DAMACY_TEST_S3_URL"), std::env::var("DAMACY_TEST_S3_ENDPOINT")) {
        (Ok(url), Ok(endpoint)) => {
            let out = Command::new(env!("CARGO_BIN_EXE_damacy"))
                .args(["inspect", &url, path, "--digest", "--endpoint", &endpoint])
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .env("AWS_REGION", "us-east-1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains(&expected),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // Listing a bucket works too.
            let out = Command::new(env!("CARGO_BIN_EXE_damacy"))
                .args(["inspect", &url, "--endpoint", &endpoint])
                .env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .output()
                .unwrap();
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("/v2/zstd_F"),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        _ => eprintln!("skipped s3: DAMACY_TEST_S3_URL is not set (run `make test`)"),
    }
}

/// A URL that points at an array inspects that array: on a local folder (which can list) and
/// over HTTP (which cannot).
#[test]
fn inspect_a_url_that_points_at_an_array() {
    let path = "v3/sharded_zstd_index_end";
    let expected = format!("sha256 {}", manifest_digest(path));
    let local = fixtures().join(path);
    let (ok, stdout, stderr) = damacy(&["inspect", local.to_str().unwrap(), "--digest", "--executor", "cpu"]);
    assert!(ok && stdout.contains(&expected) && stdout.starts_with("executor"), "{stdout}{stderr}");
    assert!(stdout.contains("1 arrays"), "{stdout}");
    match std::env::var("DAMACY_TEST_HTTP_URL") {
        Ok(url) => {
            let (ok, stdout, stderr) = damacy(&["inspect", &format!("{url}/{path}"), "--digest", "--executor", "cpu"]);
            assert!(ok && stdout.contains(&expected), "{stdout}{stderr}");
            // A URL at no array over a store that cannot list: one clear line.
            let (ok, _, stderr) = damacy(&["inspect", &format!("{url}/v3")]);
            assert!(!ok && stderr.contains("cannot list"), "{stderr}");
        }
        Err(_) => eprintln!("skipped http: DAMACY_TEST_HTTP_URL is not set (run `make test`)"),
    }
}

#[cfg(feature = "emulate")]
#[test]
fn inspect_digest_through_the_emulated_device_route() {
    for path in ["v3/blosc_blosclz_bit_ts8_small", "v3/bytes_be_float64", "v3/sharded_blosc_index_end"] {
        let (ok, stdout, stderr) =
            damacy(&["inspect", fixtures().to_str().unwrap(), path, "--digest", "--executor", "emulated"]);
        assert!(ok, "{stderr}");
        assert!(stdout.contains("executor: device kernels on host emulator"), "{stdout}");
        assert!(stdout.contains(&format!("sha256 {}", manifest_digest(path))), "{path}: {stdout}");
        assert!(stdout.contains("by device kernels"), "{path}: {stdout}");
    }
}

/// The manifest's sharded arrays whose inner chain has a zstd codec (or blosc with cname zstd).
fn sharded_zstd_fixtures() -> Vec<String> {
    manifest_arrays()
        .iter()
        .filter(|a| !a["shard_shape"].is_null() && a["codecs"].to_string().contains("\"zstd\""))
        .map(|a| a["path"].as_str().unwrap().to_owned())
        .collect()
}

/// zstd inside shards (every sharded zstd fixture of the manifest: index at the start and at the
/// end), zstd behind a crc32c and blosc-zstd: every chunk by the zstd kernel.
#[cfg(feature = "emulate")]
#[test]
fn inspect_digest_of_zstd_arrays_through_the_emulated_device_route() {
    let sharded = sharded_zstd_fixtures();
    for path in ["v3/sharded_zstd_index_end", "v3/sharded_zstd_index_start"] {
        assert!(sharded.iter().any(|p| p == path), "{path} is a sharded zstd fixture: {sharded:?}");
    }
    let paths = sharded.iter().map(String::as_str).chain(["v3/crc32c_zstd", "v3/blosc_zstd_bit_ts2_large"]);
    for path in paths {
        let (ok, stdout, stderr) =
            damacy(&["inspect", fixtures().to_str().unwrap(), path, "--digest", "--executor", "emulated"]);
        assert!(ok, "{stderr}");
        assert!(stdout.contains(&format!("sha256 {}", manifest_digest(path))), "{path}: {stdout}");
        assert!(stdout.contains("zstd kernel"), "{path}: the route names the kernel: {stdout}");
        let decoded = stdout.split(" chunks decoded").next().and_then(|s| s.rsplit(' ').next()).unwrap_or("?");
        assert!(
            stdout.contains(&format!("({decoded} chunks by device kernels)")),
            "{path}: every decoded chunk on the device: {stdout}"
        );
    }
}

#[test]
fn demo_writes_its_dataset_once_and_streams_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args =
        ["demo", "--tiny", "--dir", d, "--batches", "3", "--batch", "4", "--crop", "16,32,32", "--executor", "cpu"];
    let (ok, stdout, stderr) = damacy(&args);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("dataset: writing") && stdout.contains("tiny/demo.zarr"), "{stdout}");
    assert!(stdout.contains("12 crops in") && stdout.contains("crops/s") && stdout.contains("GB/s"), "{stdout}");
    for stage in ["plan", "read", "io", "decode", "assemble", "pop wait", "route: "] {
        assert!(stdout.contains(stage), "{stage}: {stdout}");
    }
    // The second run reads the dataset written by the first.
    let (ok, stdout, stderr) = damacy(&args);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("(written earlier)"), "{stdout}");
}

#[test]
fn bench_reports_json_with_the_engine_alone() {
    let array = format!("{}#v3/sharded_zstd_index_end", fixtures().display());
    let (ok, stdout, stderr) = damacy(&[
        "bench",
        &array,
        "--crop",
        "8,8,8",
        "--batch",
        "4",
        "--batches",
        "3",
        "--executor",
        "cpu",
        "--compare-engine",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(v["pipeline"]["crops_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["engine"]["crops_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["ratio"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["batch"], 4);
    assert!(v["chunks_decoded"].as_u64().unwrap() > 0, "{v}");
    // Several arrays: batches mix them; the engine-alone comparison needs one.
    let other = format!("{}#v3/sharded_blosc_index_end", fixtures().display());
    let two = ["bench", &array, &other, "--crop", "8,8,8", "--batch", "4", "--batches", "2", "--executor", "cpu"];
    let (ok, stdout, stderr) = damacy(&[&two[..], &["--json"]].concat());
    assert!(ok, "{stderr}");
    assert!(stdout.contains("sharded_blosc_index_end") && stdout.contains("\"engine\":null"), "{stdout}");
    let (ok, _, stderr) = damacy(&[&two[..], &["--compare-engine"]].concat());
    assert!(!ok && stderr.contains("give one array"), "{stderr}");
    // A crop of the wrong rank is a one-line error.
    let (ok, _, stderr) = damacy(&["bench", &array, "--crop", "8,8", "--executor", "cpu"]);
    assert!(!ok && stderr.contains("has rank 3") && stderr.contains("--crop"), "{stderr}");
}

/// `--dtype bfloat16` (and float16) on a uint16 array: a float output takes every source,
/// rounded to nearest even, with no flag to allow it (issue 28); an integer output that cannot
/// hold uint16 is still a one-line error naming both types.
#[test]
fn bench_casts_uint16_to_bfloat16() {
    let array = format!("{}#v3/sharded_zstd_index_end", fixtures().display());
    for dtype in ["bfloat16", "bf16", "float16"] {
        let args = [
            "bench",
            &array,
            "--crop",
            "8,8,8",
            "--batch",
            "4",
            "--batches",
            "2",
            "--executor",
            "cpu",
            "--dtype",
            dtype,
            "--json",
        ];
        let (ok, stdout, stderr) = damacy(&args);
        assert!(ok, "--dtype {dtype}: {stderr}");
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(v["dtype"], if dtype == "float16" { "Cast(F16)" } else { "Cast(BF16)" }, "{v}");
        assert!(v["chunks_decoded"].as_u64().unwrap() > 0, "{v}");
    }
    let (ok, _, stderr) =
        damacy(&["bench", &array, "--crop", "8,8,8", "--batches", "1", "--executor", "cpu", "--dtype", "int8"]);
    assert!(!ok && stderr.contains("int8") && stderr.contains("uint16") && stderr.contains("allow lossy"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn bench_reports_the_cold_start_and_where_the_kernels_came_from() {
    let array = format!("{}#v3/sharded_zstd_index_end", fixtures().display());
    let args =
        ["bench", &array, "--crop", "8,8,8", "--batch", "4", "--batches", "2", "--warmup", "1", "--threads", "1"];
    let (ok, stdout, stderr) = damacy(&[&args[..], &["--executor", "emulated", "--json"]].concat());
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let cold = &v["cold_start"];
    let (first, built) = (cold["first_batch_s"].as_f64().unwrap(), cold["executor_s"].as_f64().unwrap());
    assert!(first > 0.0 && built > 0.0 && first >= built, "{cold}");
    // A fresh process: every kernel from the images shipped in the binary, none compiled (a
    // build without NVRTC ships none, and says so).
    let images = cold["kernel_images"].as_str().unwrap();
    assert!(images.contains(", 0 compiled by NVRTC"), "{cold}");
    assert!(
        cold["kernels"] == "shipped" || (cold["kernels"] == "host code" && images.contains("ships no kernel images")),
        "{cold}"
    );
    assert!(v["executor"].as_str().unwrap().ends_with(images), "the executor note names them too: {v}");
    // The report's line; the CPU executor has no device kernels.
    let (ok, stdout, stderr) = damacy(&[&args[..], &["--executor", "cpu"]].concat());
    assert!(ok, "{stderr}");
    assert!(stdout.contains("cold start: first batch ") && stdout.contains("no device kernels"), "{stdout}");
}
