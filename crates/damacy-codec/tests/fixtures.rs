//! The conformance corpus and the CPU read path validate each other: zarrs and damacy must
//! both reproduce every digest that zarr-python recorded, and agree on random regions.

mod common;

use std::sync::Arc;

use common::{SplitMix, fixtures_dir, manifest};
use damacy_codec::{OutOfBounds, ReadConfig, Reader, Region, Store, StoreOptions};
use sha2::{Digest, Sha256};
use zarrs::array::{Array, ArrayBytes, ArraySubset};

fn zarrs_bytes(array: &Array<zarrs::filesystem::FilesystemStore>, region: &Region) -> Vec<u8> {
    let subset = ArraySubset::new_with_start_shape(region.start.clone(), region.shape.clone()).unwrap();
    let bytes: ArrayBytes<'static> = array.retrieve_array_subset(&subset).unwrap();
    bytes.into_fixed().unwrap().into_owned()
}

#[test]
fn manifest_covers_the_matrix() {
    let entries = manifest();
    let has = |f: &dyn Fn(&common::Entry) -> bool| entries.iter().any(f);
    let codecs = |e: &common::Entry| e.codecs.to_string();
    for dtype in
        ["uint8", "int8", "uint16", "int16", "uint32", "int32", "int64", "float16", "float32", "float64", "bool"]
    {
        assert!(has(&|e| e.dtype == dtype), "no fixture of dtype {dtype}");
    }
    for rank in 1..=4 {
        assert!(has(&|e| e.shape.len() == rank), "no fixture of rank {rank}");
    }
    for cname in ["lz4", "lz4hc", "zstd", "blosclz", "zlib"] {
        for shuffle in ["noshuffle", "\"shuffle\"", "bitshuffle"] {
            assert!(
                has(&|e| {
                    let c = codecs(e);
                    c.contains(&format!("\"cname\":\"{cname}\"")) && c.contains(shuffle)
                }),
                "no blosc fixture with cname {cname} and {shuffle}"
            );
        }
    }
    for needle in [
        "\"endian\":\"big\"",
        "\"checksum\":true",
        "gzip",
        "crc32c",
        "transpose",
        "\"index_location\":\"start\"",
        "\"index_location\":\"end\"",
    ] {
        assert!(has(&|e| codecs(e).contains(needle)), "no fixture with {needle}");
    }
    assert!(has(&|e| e.zarr_format == 2 && codecs(e).contains("\"order\":\"F\"")), "no v2 order F fixture");
    assert!(has(&|e| e.shard_shape.is_some()), "no sharded fixture");
    assert!(entries.len() >= 150, "only {} fixtures", entries.len());
}

#[test]
fn zarrs_reproduces_every_digest() {
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(fixtures_dir()).unwrap());
    let mut checked = 0;
    for e in manifest() {
        let array =
            Array::open(store.clone(), &format!("/{}", e.path)).unwrap_or_else(|err| panic!("{}: {err}", e.path));
        let bytes = zarrs_bytes(&array, &Region::whole(&e.shape));
        assert_eq!(bytes.len() as u64, e.decoded_bytes, "{}", e.path);
        assert_eq!(hex::encode(Sha256::digest(&bytes)), e.sha256, "zarrs disagrees with zarr-python on {}", e.path);
        checked += 1;
    }
    assert!(checked >= 150);
}

#[test]
fn damacy_reproduces_every_digest() {
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReadConfig::default()).unwrap();
    for e in manifest() {
        let array = reader.open_array(&store, &e.path).unwrap();
        let digest = reader.digest_array(&store, &array).unwrap_or_else(|err| panic!("{}: {err}", e.path));
        assert_eq!(digest, e.sha256, "damacy disagrees with zarr-python on {}", e.path);
    }
}

#[test]
fn random_regions_match_zarrs() {
    let zstore = Arc::new(zarrs::filesystem::FilesystemStore::new(fixtures_dir()).unwrap());
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReadConfig::default().with_coalescing(256, 1 << 20)).unwrap();
    let mut rng = SplitMix(7);
    for e in manifest() {
        let array = reader.open_array(&store, &e.path).unwrap();
        let zarray = Array::open(zstore.clone(), &format!("/{}", e.path)).unwrap();
        for _ in 0..3 {
            // One shape per batch, several regions, some overlapping the same chunks.
            let shape: Vec<u64> = e.shape.iter().map(|&s| 1 + rng.below(s)).collect();
            let regions: Vec<Region> = (0..4)
                .map(|_| {
                    let start = e.shape.iter().zip(&shape).map(|(&s, &n)| rng.below(s - n + 1)).collect();
                    Region::new(start, shape.clone())
                })
                .collect();
            let batch = reader.read_batch(&store, &array, &regions).unwrap();
            let per = batch.data.len() / regions.len();
            for (i, r) in regions.iter().enumerate() {
                assert_eq!(
                    &batch.data[i * per..(i + 1) * per],
                    zarrs_bytes(&zarray, r).as_slice(),
                    "{} region {r}",
                    e.path
                );
            }
        }
    }
}

#[test]
fn out_of_bounds_regions_error_or_fill() {
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let strict = Reader::new(ReadConfig::default()).unwrap();
    let array = strict.open_array(&store, "v3/missing_chunks_fill").unwrap();
    let region = Region::new(vec![25, 35], vec![10, 10]);
    let err = strict.read_batch(&store, &array, std::slice::from_ref(&region)).unwrap_err().to_string();
    assert!(err.contains("v3/missing_chunks_fill") && err.contains("25:35"), "{err}");

    let padded = Reader::new(ReadConfig::default().with_out_of_bounds(OutOfBounds::Fill)).unwrap();
    let data = padded.read_region(&store, &array, &region).unwrap();
    let values: Vec<i16> = data.chunks_exact(2).map(|b| i16::from_ne_bytes([b[0], b[1]])).collect();
    // Rows 25..30, columns 35..40 are inside (never written: fill -7); the rest is padding.
    assert!(values.iter().all(|&v| v == -7), "{values:?}");
    let zarray = Array::open(
        Arc::new(zarrs::filesystem::FilesystemStore::new(fixtures_dir()).unwrap()),
        "/v3/missing_chunks_fill",
    )
    .unwrap();
    let inside = padded.read_region(&store, &array, &Region::new(vec![5, 5], vec![20, 30])).unwrap();
    assert_eq!(inside, zarrs_bytes(&zarray, &Region::new(vec![5, 5], vec![20, 30])));
}

/// The GPU route's exact logic (host parse, stream tables, launches, statuses) on the kernel
/// emulator: every fixture's digest, with every chain that has device stages decoded by them.
#[cfg(feature = "emulate")]
#[test]
fn emulated_device_route_reproduces_every_digest() {
    use damacy_codec::Executor;
    use damacy_codec::device::device_chain;
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReadConfig::default().with_executor(Executor::Emulated)).unwrap();
    assert!(reader.executor_note().contains("emulator"), "{}", reader.executor_note());
    let mut on_device = 0;
    for e in manifest() {
        let array = reader.open_array(&store, &e.path).unwrap();
        let before = reader.stats();
        let digest = reader.digest_array(&store, &array).unwrap_or_else(|err| panic!("{}: {err}", e.path));
        assert_eq!(digest, e.sha256, "emulated device route disagrees with zarr-python on {}", e.path);
        let s = reader.stats().since(&before);
        if device_chain(array.decode_chain_metadata(), array.dtype.size()).is_ok() {
            assert_eq!(s.units_decoded_device, s.units_decoded, "{}: every chunk on the device", e.path);
            on_device += usize::from(s.units_decoded > 0);
        } else {
            assert_eq!(s.units_decoded_device, 0, "{}", e.path);
        }
    }
    // bytes (both byte orders), crc32c and the lz4/lz4hc/blosclz blosc matrix.
    assert!(on_device >= 80, "only {on_device} arrays decoded on the device");
}

/// Device decode and device assemble (crop, fill, out-of-bounds padding, byte order, cast)
/// give the CPU executor's bytes for random batches of every device-routable fixture.
#[cfg(feature = "emulate")]
#[test]
fn emulated_device_batches_equal_cpu_batches() {
    use damacy_codec::device::device_chain;
    use damacy_codec::{Dtype, Executor, OutputDtype};
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let mut rng = SplitMix(99);
    let mut compared = 0;
    for out in [OutputDtype::Native, OutputDtype::Cast(Dtype::F32)] {
        let config =
            ReadConfig::default().with_out_of_bounds(OutOfBounds::Fill).with_output_dtype(out).with_lossy_cast(true);
        let cpu = Reader::new(config.clone().with_executor(Executor::Cpu)).unwrap();
        let dev = Reader::new(config.with_executor(Executor::Emulated)).unwrap();
        for e in manifest() {
            let array = cpu.open_array(&store, &e.path).unwrap();
            if device_chain(array.decode_chain_metadata(), array.dtype.size()).is_err()
                || (out != OutputDtype::Native && matches!(array.dtype, Dtype::I64 | Dtype::U64 | Dtype::F64))
            {
                continue;
            }
            // Regions that reach past the far edge are padded with the fill value.
            let shape: Vec<u64> = e.shape.iter().map(|&s| 1 + rng.below(s)).collect();
            let regions: Vec<Region> = (0..3)
                .map(|_| {
                    Region::new(
                        e.shape.iter().zip(&shape).map(|(&s, &n)| rng.below(s - n / 2)).collect(),
                        shape.clone(),
                    )
                })
                .collect();
            let before = dev.stats();
            let want = cpu.read_batch(&store, &array, &regions).unwrap();
            let got = dev.read_batch(&store, &array, &regions).unwrap();
            assert_eq!(got, want, "{} {out:?} {regions:?}", e.path);
            let s = dev.stats().since(&before);
            assert_eq!(s.units_decoded_device, s.units_decoded, "{}", e.path);
            compared += 1;
        }
    }
    assert!(compared >= 100, "{compared}");
}
