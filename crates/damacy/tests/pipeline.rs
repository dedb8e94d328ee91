//! The Pipeline end to end: batches equal zarrs' reads of the same regions, in push order, on
//! the CPU executor for every fixture and through the emulated device route; backpressure,
//! cancellation, timeouts, error policies, held batches and multi-array samples.

#![allow(clippy::many_single_char_names)] // short names for samples, batches and pipelines

#[path = "../../damacy-codec/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{SplitMix, fixtures_dir, manifest};
use damacy::{Batch, Config, Dtype, Error, ExecutorKind, OnError, OutputDtype, Pipeline, Place, Region, Sample};
use zarrs::array::{Array, ArrayBytes, ArraySubset};

fn uri(path: &str) -> String {
    fixtures_dir().join(path).to_str().unwrap().to_owned()
}

fn zarrs_bytes(store_root: &Path, path: &str, region: &Region) -> Vec<u8> {
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(store_root).unwrap());
    let array = Array::open(store, &format!("/{path}")).unwrap();
    let subset = ArraySubset::new_with_start_shape(region.start.clone(), region.shape.clone()).unwrap();
    let bytes: ArrayBytes<'static> = array.retrieve_array_subset(&subset).unwrap();
    bytes.into_fixed().unwrap().into_owned()
}

/// A small CPU pipeline (few threads: the tests run in parallel on small machines).
fn config(batch: usize) -> Config {
    Config::new(batch).with_executor(ExecutorKind::Cpu).with_io_threads(1).with_compute_threads(1)
}

/// `n` random regions of `shape` (each axis a random extent) inside an array of `array_shape`.
fn regions(rng: &mut SplitMix, array_shape: &[u64], n: usize) -> Vec<Region> {
    let shape: Vec<u64> = array_shape.iter().map(|&s| 1 + rng.below(s.min(24))).collect();
    (0..n)
        .map(|_| {
            Region::new(array_shape.iter().zip(&shape).map(|(&a, &s)| rng.below(a - s + 1)).collect(), shape.clone())
        })
        .collect()
}

/// What a test keeps of a popped batch (the batch itself goes back to the pipeline at once).
#[derive(Debug)]
struct Got {
    len: usize,
    shape: Vec<u64>,
    samples: Vec<Sample>,
    tensors: Vec<Vec<u8>>,
    dtypes: Vec<Dtype>,
    mask: Option<Vec<bool>>,
    place: Place,
    /// The address of tensor 0 (host or device).
    ptr: u64,
    skipped: u64,
}

fn got(b: &Batch) -> Got {
    if let Place::Device { .. } = b.place() {
        assert!(b.host_bytes(0).is_none() && b.ready_event().is_some() && b.stream().is_some());
        b.ready_event().unwrap().synchronize().unwrap();
    }
    Got {
        len: b.len(),
        shape: b.shape(),
        samples: b.samples().to_vec(),
        tensors: (0..b.num_tensors()).map(|t| tensor(b, t)).collect(),
        dtypes: (0..b.num_tensors()).map(|t| b.dtype(t)).collect(),
        mask: b.mask().map(<[bool]>::to_vec),
        place: b.place(),
        ptr: b.device_ptr(0).unwrap_or_else(|| b.host_bytes(0).unwrap().as_ptr() as u64),
        skipped: b.stats().skipped,
    }
}

/// Pop until the pipeline says nothing is left.
fn drain(p: &Pipeline) -> Vec<Got> {
    let mut out = Vec::new();
    loop {
        match p.pop() {
            Ok(b) => out.push(got(&b)),
            Err(e) if e.is_exhausted() => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

fn tensor(b: &Batch, t: usize) -> Vec<u8> {
    b.to_vec(t).unwrap()
}

#[test]
fn every_fixture_end_to_end_on_the_cpu() {
    let mut rng = SplitMix(7);
    let entries = manifest();
    for e in &entries {
        let rs = regions(&mut rng, &e.shape, 5);
        let p = Pipeline::new(config(2).with_depth(8)).unwrap();
        p.push(rs.clone().into_iter().map({
            let u = uri(&e.path);
            move |r| Sample::new(u.clone(), r)
        }))
        .unwrap();
        let batches = drain(&p);
        assert_eq!(batches.iter().map(|b| b.len).collect::<Vec<_>>(), [2, 2, 1], "{}", e.path);
        let mut i = 0;
        for b in &batches {
            assert_eq!(b.place, Place::Host);
            assert_eq!(b.dtypes[0].name(), e.dtype, "{}", e.path);
            let bytes = &b.tensors[0];
            let per = bytes.len() / b.len;
            for k in 0..b.len {
                assert_eq!(b.samples[k].region, rs[i]);
                assert_eq!(
                    &bytes[k * per..(k + 1) * per],
                    zarrs_bytes(&fixtures_dir(), &e.path, &rs[i]),
                    "{} {}",
                    e.path,
                    rs[i]
                );
                i += 1;
            }
        }
        assert_eq!(p.stats().samples, 5);
    }
}

#[test]
fn dtype_casts_match_zarrs_values() {
    let mut rng = SplitMix(11);
    let mut checked = 0;
    for e in manifest().iter().filter(|e| !matches!(e.dtype.as_str(), "int64" | "uint64" | "float64" | "bool")) {
        let rs = regions(&mut rng, &e.shape, 3);
        let p = Pipeline::new(config(3).with_dtype(OutputDtype::Cast(Dtype::F32)).with_lossy_cast(true)).unwrap();
        let u = uri(&e.path);
        p.push(rs.clone().into_iter().map(move |r| Sample::new(u.clone(), r))).unwrap();
        let b = p.pop().unwrap();
        let got = b.as_slice::<f32>(0).unwrap();
        let src: Dtype = e.dtype.parse().unwrap();
        let mut want = Vec::new();
        for r in &rs {
            let raw = zarrs_bytes(&fixtures_dir(), &e.path, r);
            want.extend(raw.chunks_exact(src.size()).map(|c| src.read_f64(c) as f32));
        }
        assert_eq!(got.len(), want.len());
        assert!(
            got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())),
            "{}",
            e.path
        );
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
}

/// The GPU route's exact logic on the kernel emulator: device batches (read back) equal zarrs.
#[cfg(feature = "emulate")]
#[test]
fn emulated_device_route_end_to_end() {
    let mut rng = SplitMix(3);
    let mut on_device = 0;
    // Every fourth fixture keeps the test short; the engine's own tests cover every one.
    for e in manifest().iter().step_by(4) {
        let rs = regions(&mut rng, &e.shape, 4);
        let p = Pipeline::new(
            config(2)
                .with_executor(ExecutorKind::Emulated)
                .with_device_buffer_bytes(64 << 20)
                .with_host_buffer_bytes(16 << 20),
        )
        .unwrap();
        let u = uri(&e.path);
        p.push(rs.clone().into_iter().map(move |r| Sample::new(u.clone(), r))).unwrap();
        let batches = drain(&p);
        let mut i = 0;
        for b in &batches {
            assert_eq!(b.place, Place::Device { ordinal: None });
            let bytes = &b.tensors[0];
            let per = bytes.len() / b.len;
            for k in 0..b.len {
                assert_eq!(
                    &bytes[k * per..(k + 1) * per],
                    zarrs_bytes(&fixtures_dir(), &e.path, &rs[i]),
                    "{} {}",
                    e.path,
                    rs[i]
                );
                i += 1;
            }
        }
        let s = p.stats();
        if s.routes[0].1.starts_with("device") {
            assert_eq!(s.units_decoded_device, s.decode.count, "{}: every chunk on the device", e.path);
            on_device += 1;
        } else {
            assert_eq!(s.units_decoded_device, 0, "{}: {:?}", e.path, s.routes);
        }
    }
    assert!(on_device >= 15, "{on_device}");
}

#[test]
fn close_cancels_mid_epoch_and_held_batches_stay_valid() {
    let u = uri("v3/sharded_zstd_index_end");
    let p = Pipeline::new(config(4)).unwrap();
    let u2 = u.clone();
    p.push((0u64..).map(move |i| Sample::new(u2.clone(), Region::new(vec![i % 30, 0, 0], vec![8, 16, 10])))).unwrap();
    let held = p.pop().unwrap();
    let want = tensor(&held, 0);
    let started = Instant::now();
    p.close();
    assert!(started.elapsed() < Duration::from_secs(5), "close took {:?}", started.elapsed());
    assert!(matches!(p.pop(), Err(Error::Closed)));
    assert!(matches!(p.push(std::iter::empty()), Err(Error::Closed)));
    assert_eq!(tensor(&held, 0), want, "a held batch outlives close");
    let first = zarrs_bytes(&fixtures_dir(), "v3/sharded_zstd_index_end", &Region::new(vec![0, 0, 0], vec![8, 16, 10]));
    assert_eq!(&want[..first.len()], first);
    drop(p);
    drop(held);
    // Dropping a busy pipeline returns promptly too.
    let p = Pipeline::new(config(4)).unwrap();
    p.push((0u64..).map(move |i| Sample::new(u.clone(), Region::new(vec![i % 30, 0, 0], vec![8, 16, 10])))).unwrap();
    let _b = p.pop().unwrap();
    let started = Instant::now();
    drop(p);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn pop_timeouts_say_what_starves() {
    let p = Pipeline::new(config(2).with_pop_timeout(Duration::from_millis(100))).unwrap();
    let m = p.pop().unwrap_err();
    assert!(matches!(m, Error::Timeout(_)) && m.to_string().contains("no samples were pushed"), "{m}");
    // A sample source that stalls.
    let u = uri("v3/bytes_le_uint16_r3");
    p.push((0..4).map(move |i| {
        if i == 2 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        Sample::new(u.clone(), Region::new(vec![0, 0, 0], vec![1, 1, 1]))
    }))
    .unwrap();
    assert_eq!(p.pop().unwrap().len(), 2);
    let m = p.pop().unwrap_err().to_string();
    assert!(m.contains("the sample source starves"), "{m}");
    // Closing while the feeder is inside the iterator does not wait for it.
    let started = Instant::now();
    p.close();
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    // Everything popped: exhausted at once, not after the timeout.
    let p = Pipeline::new(config(2)).unwrap();
    let u = uri("v3/bytes_le_uint16_r3");
    p.push((0..3).map(move |_| Sample::new(u.clone(), Region::new(vec![0, 0, 0], vec![1, 1, 1])))).unwrap();
    assert_eq!(drain(&p).len(), 2);
    assert_eq!(p.pending(), 0);
    let started = Instant::now();
    assert!(p.pop().unwrap_err().is_exhausted());
    assert!(started.elapsed() < Duration::from_secs(1));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A copy of `v3/zstd_l3_ck` (64×64×8 uint16, chunks 32×32×8, zstd with checksums) whose
/// chunk `c/1/0/0` is corrupt.
fn corrupt_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let array = dir.path().join("corrupt.zarr");
    copy_dir(&fixtures_dir().join("v3/zstd_l3_ck"), &array);
    let chunk = array.join("c/1/0/0");
    let mut bytes = std::fs::read(&chunk).unwrap();
    bytes[20] ^= 0x5A;
    std::fs::write(&chunk, bytes).unwrap();
    (dir, array)
}

/// Samples `0..6`, sample 3 reads the corrupt chunk (rows 32..64), the others rows 0..32.
fn corrupt_samples(array: &Path) -> Vec<Sample> {
    let u = array.to_str().unwrap().to_owned();
    (0..6)
        .map(|i| {
            let row = if i == 3 { 40 } else { i * 4 };
            Sample::new(u.clone(), Region::new(vec![row, 0, 0], vec![4, 8, 8])).with_id(i)
        })
        .collect()
}

#[test]
fn raise_names_the_sample_and_the_pipeline_stays_usable() {
    let (_dir, array) = corrupt_store();
    let p = Pipeline::new(config(2)).unwrap();
    p.push(corrupt_samples(&array)).unwrap();
    assert_eq!(p.pop().unwrap().len(), 2);
    let err = p.pop().unwrap_err();
    let m = err.to_string();
    assert!(matches!(&err, Error::Sample { batch: 1, position: 1, .. }), "{m}");
    assert!(
        m.contains("#3 ") && m.contains("c/1/0/0") && m.contains("[40:44, 0:8, 0:8]"),
        "names the sample and the chunk: {m}"
    );
    assert!(matches!(err.codec(), Some(damacy::CodecError::Decode { .. })), "{m}");
    // The next batch, and a new push, come as usual.
    let b = p.pop().unwrap();
    assert_eq!(b.samples()[0].id, Some(4));
    let good = fixtures_dir().join("v3/zstd_l3_ck");
    assert_eq!(tensor(&b, 0)[..4 * 8 * 8 * 2], zarrs_bytes(&good, "", &Region::new(vec![16, 0, 0], vec![4, 8, 8]))[..]);
    p.push(corrupt_samples(&array).into_iter().take(2)).unwrap();
    assert_eq!(drain(&p).len(), 1);
    assert_eq!(p.stats().failed_batches, 1);
}

#[test]
fn skip_leaves_the_sample_out_and_names_it() {
    let (_dir, array) = corrupt_store();
    let p = Pipeline::new(config(3).with_on_error(OnError::Skip)).unwrap();
    let mut samples = corrupt_samples(&array);
    // A sample whose store does not exist is skipped too.
    samples.push(Sample::new("/nonexistent/x.zarr/raw", Region::new(vec![0, 0, 0], vec![4, 8, 8])).with_id(99));
    p.push(samples).unwrap();
    let batches = drain(&p);
    let ids: Vec<Vec<u64>> = batches.iter().map(|b| b.samples.iter().map(|s| s.id.unwrap()).collect()).collect();
    assert_eq!(ids, [vec![0, 1, 2], vec![4, 5]]);
    assert_eq!(batches[1].skipped, 1);
    let good = fixtures_dir().join("v3/zstd_l3_ck");
    let want: Vec<u8> = [4u64, 5]
        .iter()
        .flat_map(|&i| zarrs_bytes(&good, "", &Region::new(vec![i * 4, 0, 0], vec![4, 8, 8])))
        .collect();
    assert_eq!(batches[1].tensors[0], want, "the good samples are packed in order");
    let s = p.stats();
    assert_eq!(s.skipped, 2);
    // Batches are read concurrently: the order of the names is the order they were found.
    let named = |id: &str, what: &str| s.skipped_samples.iter().any(|n| n.starts_with(id) && n.contains(what));
    assert!(named("#3 ", "c/1/0/0") && named("#99 ", "nonexistent"), "{:?}", s.skipped_samples);
    assert!(s.to_string().contains("skipped 2 samples"));
}

#[test]
fn invalid_configs_and_samples_are_named() {
    let err = |c: Config| Pipeline::new(c).unwrap_err().to_string();
    assert!(err(config(0)).contains("Config.batch_size is 0: use at least 1"));
    assert!(err(config(4).with_depth(0)).contains("Config.depth is 0"));
    assert!(err(config(4).with_lookahead(2)).contains("Config.lookahead is 2 samples"));
    assert!(err(config(4).with_io_threads(0)).contains("n_io_threads is 0; use at least 1"));
    // A GPU that is not there.
    if std::env::var_os("DAMACY_TEST_GPU").is_none() {
        let m = err(config(4).with_executor(ExecutorKind::Gpu));
        assert!(m.to_lowercase().contains("gpu") || m.contains("CUDA") || m.contains("cuda"), "{m}");
    }
    // A sample of another shape, of another arity, of another dtype: errors naming both.
    let p = Pipeline::new(config(1).with_sample_shape(vec![2, 2, 2])).unwrap();
    let u = uri("v3/bytes_le_uint16_r3");
    p.push([
        Sample::new(u.clone(), Region::new(vec![0, 0, 0], vec![2, 2, 2])),
        Sample::new(u.clone(), Region::new(vec![0, 0, 0], vec![2, 2, 3])),
        Sample::multi([u.clone(), u.clone()], Region::new(vec![0, 0, 0], vec![2, 2, 2])),
        Sample::new(uri("v2/zlib_C"), Region::new(vec![0, 0, 0], vec![2, 2, 2])),
    ])
    .unwrap();
    assert_eq!(p.pop().unwrap().shape(), [1, 2, 2, 2]);
    let m = p.pop().unwrap_err().to_string();
    assert!(m.contains("shape [2, 2, 3]") && m.contains("shape [2, 2, 2] (from Config.sample_shape)"), "{m}");
    let m = p.pop().unwrap_err().to_string();
    assert!(m.contains("names 2 arrays") && m.contains("hold 1 tensors"), "{m}");
    let m = p.pop().unwrap_err().to_string();
    assert!(m.contains("reads as int32") && m.contains("is uint16") && m.contains("Config.dtype"), "{m}");
    // Holding more than depth batches is refused at once.
    let p = Pipeline::new(config(1).with_depth(1)).unwrap();
    let u2 = u.clone();
    p.push((0..3).map(move |_| Sample::new(u2.clone(), Region::new(vec![0, 0, 0], vec![1, 1, 1])))).unwrap();
    let _held = p.pop().unwrap();
    let m = p.pop().unwrap_err();
    assert!(matches!(m, Error::PoolStarved(_)) && m.to_string().contains("you hold 1 batches, Config.depth"), "{m}");
}

/// `pop_with`: its own timeout, and an interruption that leaves the awaited batch queued.
#[test]
fn pop_with_times_out_and_is_interruptible() {
    let p = Pipeline::new(config(2)).unwrap();
    let started = Instant::now();
    let m = p.pop_with(Duration::from_millis(120), &mut || false).unwrap_err();
    assert!(matches!(m, Error::Timeout(_)) && m.to_string().contains("pop waited 120ms"), "{m}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The interruption is asked while the pop waits, at least every 50 ms.
    let mut asked = 0;
    let started = Instant::now();
    let m = p
        .pop_with(Duration::from_secs(30), &mut || {
            asked += 1;
            asked == 3
        })
        .unwrap_err();
    assert!(matches!(m, Error::Interrupted), "{m}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // A stalled source, interrupted; the batch still comes to the next pop.
    let u = uri("v3/bytes_le_uint16_r3");
    p.push((0..2).map(move |i| {
        if i == 1 {
            std::thread::sleep(Duration::from_millis(300));
        }
        Sample::new(u.clone(), Region::new(vec![0, 0, 0], vec![1, 1, 1]))
    }))
    .unwrap();
    assert!(matches!(p.pop_with(Duration::from_secs(30), &mut || true), Err(Error::Interrupted)));
    assert_eq!(p.pop_with(Duration::from_secs(30), &mut || false).unwrap().len(), 2);
}

/// The device budget is checked when the first batch fixes the buffer sizes, too.
#[cfg(feature = "emulate")]
#[test]
fn the_device_memory_cap_covers_buffers_sized_by_the_first_batch() {
    let p = Pipeline::new(
        config(64)
            .with_executor(ExecutorKind::Emulated)
            .with_device_buffer_bytes(64 << 20)
            .with_host_buffer_bytes(16 << 20)
            .with_max_gpu_memory_bytes((64 << 20) + 1000),
    )
    .unwrap();
    let u = uri("v3/sharded_zstd_index_end");
    p.push((0..64).map(move |_| Sample::new(u.clone(), Region::new(vec![0, 0, 0], vec![8, 16, 10])))).unwrap();
    let m = p.pop().unwrap_err().to_string();
    assert!(
        m.contains("Config.max_gpu_memory_bytes is 67109864") && m.contains("raise max_gpu_memory_bytes to"),
        "{m}"
    );
}

#[test]
fn two_pipelines_in_one_process() {
    let run = |path: &'static str, seed: u64| {
        std::thread::spawn(move || {
            let e = manifest().into_iter().find(|e| e.path == path).unwrap();
            let rs = regions(&mut SplitMix(seed), &e.shape, 12);
            let p = Pipeline::new(config(4)).unwrap();
            let u = uri(path);
            p.push(rs.clone().into_iter().map(move |r| Sample::new(u.clone(), r))).unwrap();
            let got: Vec<u8> = drain(&p).into_iter().flat_map(|mut b| b.tensors.swap_remove(0)).collect();
            let want: Vec<u8> = rs.iter().flat_map(|r| zarrs_bytes(&fixtures_dir(), path, r)).collect();
            assert_eq!(got, want, "{path}");
        })
    };
    let a = run("v3/sharded_zstd_index_end", 1);
    let b = run("v3/blosc_lz4_bit_ts2_large", 2);
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
fn a_held_host_batch_is_not_overwritten() {
    let u = uri("v3/sharded_blosc_index_end");
    let p = Pipeline::new(config(2).with_depth(2)).unwrap();
    p.push((0u64..40).map(move |i| Sample::new(u.clone(), Region::new(vec![i % 32, i % 56, 0], vec![8, 16, 20]))))
        .unwrap();
    let held = p.pop().unwrap();
    let before = held.host_bytes(0).unwrap().to_vec();
    let ptr = held.host_bytes(0).unwrap().as_ptr() as u64;
    let others = drain(&p);
    assert_eq!(others.len(), 19);
    assert!(others.iter().all(|b| b.ptr != ptr));
    assert_eq!(held.host_bytes(0).unwrap(), before);
}

/// Device batches: a held batch keeps its memory; a released one is rewritten only after the
/// consumer's event completed (an event on a slow emulated stream).
#[cfg(feature = "emulate")]
#[test]
fn a_released_device_batch_waits_for_the_consumer_event() {
    let u = uri("v3/sharded_blosc_index_end");
    let p = Pipeline::new(
        config(2)
            .with_depth(2)
            .with_workers(1)
            .with_executor(ExecutorKind::Emulated)
            .with_device_buffer_bytes(64 << 20)
            .with_host_buffer_bytes(16 << 20),
    )
    .unwrap();
    p.push((0u64..200).map(move |i| Sample::new(u.clone(), Region::new(vec![i % 32, i % 56, 0], vec![8, 16, 20]))))
        .unwrap();
    let held = p.pop().unwrap();
    let want = tensor(&held, 0);
    let ptr = held.device_ptr(0).unwrap();
    for _ in 0..5 {
        let b = p.pop().unwrap();
        assert_ne!(b.device_ptr(0), Some(ptr), "a held batch's buffer is not reused");
    }
    assert_eq!(tensor(&held, 0), want, "a held batch is not overwritten");
    // The consumer's stream: many queued steps on a seeded emulated stream (each pauses up to
    // 255 µs), then the release event.
    let consumer = damacy::Device::emulated(42);
    let stream = consumer.new_stream().unwrap();
    let ready = held.ready_event().unwrap();
    stream.wait(ready).unwrap();
    for _ in 0..800 {
        stream.wait(ready).unwrap();
    }
    let mark = stream.record(false).unwrap();
    let release = stream.record(false).unwrap();
    assert!(!mark.is_complete(), "the consumer's stream is still busy");
    held.release(Some(release));
    let mut reused = false;
    for _ in 0..12 {
        let b = p.pop().unwrap();
        if b.device_ptr(0) == Some(ptr) {
            // Written only after the consumer's release event (which follows `mark`).
            assert!(mark.is_complete(), "the released buffer was rewritten before the consumer's event");
            let want: Vec<u8> = b
                .samples()
                .iter()
                .flat_map(|s| zarrs_bytes(&fixtures_dir(), "v3/sharded_blosc_index_end", &s.region))
                .collect();
            assert_eq!(tensor(&b, 0), want);
            reused = true;
            break;
        }
    }
    assert!(reused, "the released buffer came back");
}

#[test]
fn multi_array_samples_and_batches_mixing_arrays() {
    let a = uri("v3/sharded_blosc_index_end");
    let b = uri("v3/sharded_zstd_index_end");
    let rs = regions(&mut SplitMix(5), &[40, 72, 20], 7);
    let p = Pipeline::new(config(3)).unwrap();
    // Each sample names both arrays; in odd samples the order is swapped, so each tensor's
    // samples come from two arrays in turn.
    let samples: Vec<Sample> = rs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i % 2 == 0 {
                Sample::multi([a.clone(), b.clone()], r.clone())
            } else {
                Sample::multi([b.clone(), a.clone()], r.clone())
            }
        })
        .collect();
    p.push(samples.clone()).unwrap();
    let batches = drain(&p);
    assert_eq!(batches.iter().map(|b| b.len).collect::<Vec<_>>(), [3, 3, 1]);
    let mut i = 0;
    for batch in &batches {
        assert_eq!(batch.tensors.len(), 2);
        let (t0, t1) = (&batch.tensors[0], &batch.tensors[1]);
        let per = t0.len() / batch.len;
        for k in 0..batch.len {
            let s = &samples[i];
            let path = |u: &str| if u == a { "v3/sharded_blosc_index_end" } else { "v3/sharded_zstd_index_end" };
            assert_eq!(
                &t0[k * per..(k + 1) * per],
                zarrs_bytes(&fixtures_dir(), path(&s.uris[0]), &s.region),
                "sample {i} tensor 0"
            );
            assert_eq!(
                &t1[k * per..(k + 1) * per],
                zarrs_bytes(&fixtures_dir(), path(&s.uris[1]), &s.region),
                "sample {i} tensor 1"
            );
            i += 1;
        }
    }
    let st = p.stats();
    assert_eq!(st.array_opens, 2);
    assert_eq!(st.routes.len(), 2);
}

#[test]
fn short_last_batches_drop_last_and_padding_masks() {
    let u = uri("v3/bytes_le_uint16_r3");
    let s = move |i: u64| Sample::new(u.clone(), Region::new(vec![0, 0, 0], vec![1, 2, 2])).with_padded(i >= 9);
    let p = Pipeline::new(config(4)).unwrap();
    p.push((0..10).map(s.clone())).unwrap();
    let batches = drain(&p);
    assert_eq!(batches.iter().map(|b| b.shape[0]).collect::<Vec<_>>(), [4, 4, 2]);
    assert_eq!(batches[0].mask, None);
    assert_eq!(batches[2].mask.as_deref(), Some(&[true, false][..]));
    let p = Pipeline::new(config(4).with_drop_last(true)).unwrap();
    p.push((0..10).map(s.clone())).unwrap();
    p.push((0..5).map(s)).unwrap();
    assert_eq!(drain(&p).iter().map(|b| b.len).collect::<Vec<_>>(), [4, 4, 4]);
    assert_eq!(p.stats().dropped_last, 3);
}

#[test]
fn stats_cover_every_stage_and_reset() {
    let u = uri("v3/sharded_zstd_index_end");
    let p = Pipeline::new(config(4)).unwrap();
    p.push((0u64..16).map(move |i| Sample::new(u.clone(), Region::new(vec![i, 0, 0], vec![8, 16, 10])))).unwrap();
    let n = drain(&p).len();
    let s = p.stats();
    assert_eq!((s.batches, s.samples, n), (4, 16, 4));
    assert_eq!(s.plan.count, 4);
    assert!(s.read.best.unwrap() <= s.read.time / 4 + Duration::from_nanos(1));
    assert!(s.io.count > 0 && s.io.bytes_in > 0 && s.decode.count > 0 && s.decode.bytes_out > 0);
    assert_eq!(s.bytes_delivered, 16 * 8 * 16 * 10 * 2);
    assert_eq!(s.pop_wait.count, 4, "pops that returned a batch");
    assert!(s.index_hits + s.index_misses > 0);
    let table = s.to_string();
    assert!(table.contains("pop wait") && table.contains("delivered: 4 batches, 16 samples"), "{table}");
    p.stats_reset();
    let r = p.stats();
    assert_eq!((r.batches, r.io.count, r.array_opens), (0, 0, 0));
    assert!(p.describe().contains("executor       cpu"), "{}", p.describe());
}
