//! The conformance corpus and the CPU read path validate each other: zarrs and damacy must
//! both reproduce every digest that zarr-python recorded, and agree on random regions.

mod common;

use std::sync::Arc;

use common::{SplitMix, fixtures_dir, manifest};
#[cfg(feature = "emulate")]
use damacy_codec::ExecutorKind;
use damacy_codec::{ArrayOptions, OutOfBounds, Reader, ReaderConfig, Region, Store, StoreOptions};
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
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    for e in manifest() {
        let array = reader.open_array(&store, &e.path, ArrayOptions::default()).unwrap();
        let digest = common::digest(&reader, &array).unwrap_or_else(|err| panic!("{}: {err}", e.path));
        assert_eq!(digest, e.sha256, "damacy disagrees with zarr-python on {}", e.path);
    }
}

#[test]
fn random_regions_match_zarrs() {
    let zstore = Arc::new(zarrs::filesystem::FilesystemStore::new(fixtures_dir()).unwrap());
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default().with_coalescing(256, 1 << 20)).unwrap();
    let mut rng = SplitMix(7);
    for e in manifest() {
        let array = reader.open_array(&store, &e.path, ArrayOptions::default()).unwrap();
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
            let batch = reader.read_batch(&array, &regions).unwrap();
            for (i, r) in regions.iter().enumerate() {
                assert_eq!(batch.region(i), zarrs_bytes(&zarray, r).as_slice(), "{} region {r}", e.path);
            }
        }
    }
}

#[test]
fn out_of_bounds_regions_error_or_fill() {
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let array = reader.open_array(&store, "v3/missing_chunks_fill", ArrayOptions::default()).unwrap();
    let region = Region::new(vec![25, 35], vec![10, 10]);
    let err = reader.read_batch(&array, std::slice::from_ref(&region)).unwrap_err().to_string();
    assert!(err.contains("v3/missing_chunks_fill") && err.contains("25:35"), "{err}");

    // The same reader, the same array opened with the other policy: semantics are per array.
    let padded = array.with_options(ArrayOptions::default().with_out_of_bounds(OutOfBounds::Fill)).unwrap();
    let data = reader.read_region(&padded, &region).unwrap();
    // Rows 25..30, columns 35..40 are inside (never written: fill -7); the rest is padding.
    assert!(data.as_slice::<i16>().unwrap().iter().all(|&v| v == -7), "{data:?}");
    let zarray = Array::open(
        Arc::new(zarrs::filesystem::FilesystemStore::new(fixtures_dir()).unwrap()),
        "/v3/missing_chunks_fill",
    )
    .unwrap();
    let inside = reader.read_region(&padded, &Region::new(vec![5, 5], vec![20, 30])).unwrap();
    assert_eq!(inside.bytes(), zarrs_bytes(&zarray, &Region::new(vec![5, 5], vec![20, 30])));
}

/// `read_batch_into` a caller's slice equals `read_batch`, and allocates nothing that grows
/// with the batch (the plan is reused).
#[test]
fn read_batch_into_a_caller_slice() {
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    for path in ["v3/sharded_zstd_index_end", "v3/blosc_lz4_byte_ts2_large", "v2/zlib_C"] {
        let array = reader.open_array(&store, path, ArrayOptions::default()).unwrap();
        let shape: Vec<u64> = array.shape.iter().map(|&s| s.div_ceil(2)).collect();
        let regions = vec![
            Region::new(vec![0; shape.len()], shape.clone()),
            Region::new(shape.iter().map(|s| s / 2).collect(), shape.clone()),
        ];
        let want = reader.read_batch(&array, &regions).unwrap();
        let plan = reader.plan(&array, &regions).unwrap();
        assert_eq!(plan.shape(), want.shape.as_slice());
        let mut out = vec![0xEEu8; plan.nbytes()];
        reader.read_batch_into(&plan, damacy_codec::Output::Host(&mut out)).unwrap();
        assert_eq!(out, want.bytes(), "{path}");
        let err = reader.read_batch_into(&plan, damacy_codec::Output::Host(&mut out[1..])).unwrap_err();
        assert!(err.to_string().contains("needs"), "{err}");
    }
}

/// Regions placed at chosen positions of a batch (one plan per array of a mixed batch): the
/// named positions equal a plain batch read, the others are left as they were.
#[test]
fn plans_at_positions_fill_only_their_positions() {
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default()).unwrap();
    let array = reader.open_array(&store, "v3/sharded_zstd_index_end", ArrayOptions::default()).unwrap();
    let regions = [Region::new(vec![0, 0, 0], vec![8, 16, 10]), Region::new(vec![9, 30, 4], vec![8, 16, 10])];
    let want = reader.read_batch(&array, &regions).unwrap();
    let plan = reader.plan_at(&array, &regions, &[3, 1], 4).unwrap();
    assert_eq!(plan.shape(), &[4, 8, 16, 10]);
    let mut out = vec![0xEEu8; plan.nbytes()];
    reader.read_batch_into(&plan, damacy_codec::Output::Host(&mut out)).unwrap();
    let per = plan.nbytes() / 4;
    assert_eq!(&out[3 * per..], want.region(0));
    assert_eq!(&out[per..2 * per], want.region(1));
    assert!(out[..per].iter().chain(&out[2 * per..3 * per]).all(|&b| b == 0xEE), "other positions untouched");
    for (positions, len, needle) in [
        (&[0, 0][..], 4, "given twice"),
        (&[0, 4][..], 4, "outside a batch of 4"),
        (&[0][..], 4, "1 positions for 2 regions"),
    ] {
        let err = reader.plan_at(&array, &regions, positions, len).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
}

/// Chunk-level reads (zarr-python's pipeline contract): strided selections of chunks into a
/// strided host output equal zarrs' reads of the same elements; elements outside the selection
/// stay.
#[test]
fn chunk_selections_into_a_strided_array_match_zarrs() {
    check_chunk_selections(&Reader::new(ReaderConfig::default()).unwrap(), false);
}

/// The same reads into a strided array in device memory (zarr-python's `out` under
/// `enable_gpu()`), on the emulated device: device-route chains decode and assemble on the
/// device, CPU-route chains go through the host; both leave unselected elements alone.
#[cfg(feature = "emulate")]
#[test]
fn chunk_selections_into_a_strided_device_array_match_zarrs() {
    let reader = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated)).unwrap();
    check_chunk_selections(&reader, true);
}

/// A device output needs a device executor, and one that reaches outside its buffer is refused.
#[cfg(feature = "emulate")]
#[test]
fn chunk_selections_into_a_device_array_are_checked() {
    use damacy_codec::{AxisSelection, ChunkSelection, DeviceArrayMut};
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let dev = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated)).unwrap();
    let device = dev.device().unwrap().clone();
    let array = dev.open_array(&store, "v3/blosc_lz4_byte_ts2_large", ArrayOptions::default()).unwrap();
    let sel = vec![AxisSelection::range(0, 2); array.shape.len()];
    let request = ChunkSelection { chunk: vec![0; array.shape.len()], selection: sel.clone(), out_selection: sel };
    let shape = vec![2u64; array.shape.len()];
    let size = array.out_dtype().size();
    let strides: Vec<isize> = damacy_codec::c_strides(&shape).iter().map(|s| (*s as usize * size) as isize).collect();
    let mut small = device.alloc(size).unwrap();
    let mut out = DeviceArrayMut::strided(&mut small, 0, shape.clone(), strides.clone(), array.out_dtype());
    let err = dev
        .read_chunks_into_device(&array, std::slice::from_ref(&request), &mut out, device.default_stream())
        .unwrap_err();
    assert!(err.to_string().contains("reaches outside"), "{err}");
    let cpu = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Cpu)).unwrap();
    let array = cpu.open_array(&store, "v3/blosc_lz4_byte_ts2_large", ArrayOptions::default()).unwrap();
    let mut buffer = device.alloc(shape.iter().product::<u64>() as usize * size).unwrap();
    let mut out = DeviceArrayMut::strided(&mut buffer, 0, shape, strides, array.out_dtype());
    let err = cpu.read_chunks_into_device(&array, &[request], &mut out, device.default_stream()).unwrap_err();
    assert!(err.to_string().contains("needs a device executor"), "{err}");
}

/// [`Reader::read_chunks_into_device`] into a device copy of `data` that sits 64 bytes into a
/// buffer holding `data`'s marker; `data` gets the result, and nothing before it may change.
#[cfg(feature = "emulate")]
fn read_into_device(
    reader: &Reader,
    array: &damacy_codec::ArrayHandle,
    request: &damacy_codec::ChunkSelection,
    data: &mut [u8],
    shape: &[u64],
    strides: Vec<isize>,
) {
    let device = reader.device().unwrap();
    let mut buffer = device.alloc(data.len() + 64).unwrap();
    let mut marked = vec![0xA5u8; data.len() + 64];
    device.upload(&marked, &mut buffer, 0).unwrap();
    let mut out = damacy_codec::DeviceArrayMut::strided(&mut buffer, 64, shape.to_vec(), strides, array.out_dtype());
    reader
        .read_chunks_into_device(array, std::slice::from_ref(request), &mut out, device.default_stream())
        .unwrap_or_else(|err| panic!("{}: {err}", array.path));
    device.download(&buffer, 0, &mut marked).unwrap();
    assert!(marked[..64].iter().all(|&b| b == 0xA5), "{} wrote before the array", array.path);
    data.copy_from_slice(&marked[64..]);
}

#[cfg(not(feature = "emulate"))]
fn read_into_device(
    _: &Reader,
    _: &damacy_codec::ArrayHandle,
    _: &damacy_codec::ChunkSelection,
    _: &mut [u8],
    _: &[u64],
    _: Vec<isize>,
) {
    unreachable!("device outputs are tested on the emulator")
}

#[allow(clippy::needless_range_loop)] // per-axis arithmetic over several arrays
fn check_chunk_selections(reader: &Reader, device_output: bool) {
    use damacy_codec::{AxisSelection, ChunkSelection, HostArrayMut};
    let zstore = Arc::new(zarrs::filesystem::FilesystemStore::new(fixtures_dir()).unwrap());
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let mut rng = SplitMix(21);
    let mut routes = [0usize; 2];
    let mut checked = 0;
    for e in manifest().iter().filter(|e| e.shape.len() >= 2 && e.dtype != "bool") {
        let array = reader.open_array(&store, &e.path, ArrayOptions::default()).unwrap();
        let zarray = Array::open(zstore.clone(), &format!("/{}", e.path)).unwrap();
        let whole = zarrs_bytes(&zarray, &Region::whole(&e.shape));
        let size = array.dtype.size();
        let rank = e.shape.len();
        // One chunk (shard), a random strided selection inside it.
        let chunk: Vec<u64> = array.grid_shape.iter().map(|&g| rng.below(g)).collect();
        let mut sel = Vec::new();
        for a in 0..rank {
            let origin = chunk[a] * array.chunk_shape[a];
            let extent = array.chunk_shape[a].min(e.shape[a] - origin);
            let step = 1 + rng.below(3);
            let start = rng.below(extent);
            let count = 1 + rng.below((extent - start).div_ceil(step));
            sel.push(AxisSelection { start, step, count });
        }
        // The output: twice as large as the selection along each axis, written every second
        // element of the last axis (a strided view), pre-filled with a marker.
        let out_shape: Vec<u64> = sel.iter().map(|s| s.count * 2).collect();
        let n: u64 = out_shape.iter().product();
        let mut data = vec![0xA5u8; n as usize * size];
        let c = damacy_codec::c_strides(&out_shape);
        let strides: Vec<isize> = c.iter().map(|s| (*s as usize * size) as isize).collect();
        let out_sel: Vec<AxisSelection> = sel
            .iter()
            .enumerate()
            .map(|(a, s)| AxisSelection { start: u64::from(a == 0), step: 2, count: s.count })
            .collect();
        let request = ChunkSelection { chunk: chunk.clone(), selection: sel.clone(), out_selection: out_sel.clone() };
        if device_output {
            read_into_device(reader, &array, &request, &mut data, &out_shape, strides);
            routes[usize::from(matches!(array.route, damacy_codec::ChainRoute::Device(_)))] += 1;
        } else {
            let mut out = HostArrayMut::strided(&mut data, 0, out_shape.clone(), strides, array.out_dtype());
            reader
                .read_chunks_into(&array, std::slice::from_ref(&request), &mut out)
                .unwrap_or_else(|err| panic!("{}: {err}", e.path));
        }
        // Check every output element: selected ones equal the array, others keep the marker.
        let wc = damacy_codec::c_strides(&e.shape);
        let mut idx = vec![0u64; rank];
        loop {
            let o: usize = idx.iter().zip(&c).map(|(i, s)| (i * s) as usize).sum::<usize>() * size;
            let mut hit = Some(0usize);
            for a in 0..rank {
                let k = idx[a]
                    .checked_sub(out_sel[a].start)
                    .filter(|k| k % 2 == 0)
                    .map(|k| k / 2)
                    .filter(|k| *k < sel[a].count);
                match (k, hit) {
                    (Some(k), Some(acc)) => {
                        let coord = chunk[a] * array.chunk_shape[a] + sel[a].start + k * sel[a].step;
                        hit = Some(acc + (coord * wc[a]) as usize);
                    }
                    _ => hit = None,
                }
            }
            match hit {
                Some(w) => assert_eq!(&data[o..o + size], &whole[w * size..(w + 1) * size], "{} at {idx:?}", e.path),
                None => assert!(
                    data[o..o + size].iter().all(|&b| b == 0xA5),
                    "{} wrote outside the selection at {idx:?}",
                    e.path
                ),
            }
            let mut axis = rank;
            loop {
                if axis == 0 {
                    break;
                }
                axis -= 1;
                idx[axis] += 1;
                if idx[axis] < out_shape[axis] {
                    break;
                }
                idx[axis] = 0;
            }
            if axis == 0 && idx.iter().all(|&i| i == 0) {
                break;
            }
        }
        checked += 1;
    }
    assert!(checked >= 40, "{checked}");
    if device_output {
        assert!(routes[0] > 0 && routes[1] > 0, "both routes are exercised: {routes:?} (cpu, device)");
    }
}

/// The GPU route's exact logic (host parse, stream tables, launches, statuses) on the kernel
/// emulator: every fixture's digest, with every chain that has device stages decoded by them.
#[cfg(feature = "emulate")]
#[test]
fn emulated_device_route_reproduces_every_digest() {
    use damacy_codec::ChainRoute;
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let reader = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated)).unwrap();
    assert!(reader.executor_note().contains("emulator"), "{}", reader.executor_note());
    let (mut on_device, mut zstd_on_device) = (0, 0);
    for e in manifest() {
        let array = reader.open_array(&store, &e.path, ArrayOptions::default()).unwrap();
        let before = reader.stats();
        let digest = common::digest(&reader, &array).unwrap_or_else(|err| panic!("{}: {err}", e.path));
        assert_eq!(digest, e.sha256, "emulated device route disagrees with zarr-python on {}", e.path);
        let s = reader.stats().since(&before);
        let codecs = e.codecs.to_string();
        if matches!(array.route, ChainRoute::Device(_)) {
            assert_eq!(s.units_decoded_device, s.units_decoded, "{}: every chunk on the device", e.path);
            on_device += usize::from(s.units_decoded > 0);
            zstd_on_device += usize::from(s.units_decoded > 0 && codecs.contains("zstd"));
        } else {
            assert_eq!(s.units_decoded_device, 0, "{}", e.path);
            // Every zstd and blosc-zstd chain is a device chain, alone or inside a shard,
            // unless another codec of it (transpose, v2's order F) has no device stage.
            assert!(
                !codecs.contains("zstd") || codecs.contains("transpose") || codecs.contains("\"order\":\"F\""),
                "{} stays on the CPU: {}",
                e.path,
                array.route
            );
        }
    }
    // bytes (both byte orders), crc32c, the lz4/lz4hc/blosclz/zstd blosc matrix, zstd (levels,
    // checksums, behind crc32c, inside shards, v2).
    assert!(on_device >= 132, "only {on_device} arrays decoded on the device");
    assert!(zstd_on_device >= 38, "only {zstd_on_device} zstd and blosc-zstd arrays decoded on the device");
    eprintln!("{on_device} arrays decoded on the device, {zstd_on_device} of them zstd or blosc-zstd");
}

/// Device decode and device assemble (crop, fill, out-of-bounds padding, byte order, cast)
/// give the CPU executor's bytes for random batches of every device-routable fixture.
#[cfg(feature = "emulate")]
#[test]
fn emulated_device_batches_equal_cpu_batches() {
    use damacy_codec::{ChainRoute, Dtype, OutputDtype};
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let mut rng = SplitMix(99);
    let (mut compared, mut zstd_compared) = (0, 0);
    let cpu = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Cpu)).unwrap();
    let dev = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated)).unwrap();
    for out in [OutputDtype::Native, OutputDtype::Cast(Dtype::F32)] {
        let options =
            ArrayOptions::default().with_out_of_bounds(OutOfBounds::Fill).with_output_dtype(out).with_lossy_cast(true);
        for e in manifest() {
            let array = cpu.open_array(&store, &e.path, options).unwrap();
            if !matches!(array.route, ChainRoute::Device(_))
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
            let want = cpu.read_batch(&array, &regions).unwrap();
            let got = dev.read_batch(&array, &regions).unwrap();
            assert_eq!(got, want, "{} {out:?} {regions:?}", e.path);
            let s = dev.stats().since(&before);
            assert_eq!(s.units_decoded_device, s.units_decoded, "{}", e.path);
            compared += 1;
            zstd_compared += usize::from(e.codecs.to_string().contains("zstd"));
        }
    }
    // Both output dtypes over the device-routable fixtures (int64/uint64/float64 native only).
    assert!(compared >= 235, "{compared}");
    assert!(zstd_compared >= 69, "zstd and blosc-zstd batches: {zstd_compared}");
}

/// Float outputs take every source dtype (issue 28): for one device-routable fixture of each
/// integer and float dtype, bfloat16, float16 and float32 batches come out of the CPU executor
/// and the device route (the kernel emulator) with the same bits, each element the native
/// element rounded once (`Dtype::convert_bits`), without allowing lossy casts.
#[cfg(feature = "emulate")]
#[test]
fn emulated_and_cpu_float_casts_of_every_source_dtype_agree() {
    use damacy_codec::{ChainRoute, Dtype, OutputDtype};
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let cpu = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Cpu)).unwrap();
    let dev = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated)).unwrap();
    let mut seen = Vec::new();
    for e in manifest() {
        let native = cpu.open_array(&store, &e.path, ArrayOptions::default()).unwrap();
        if seen.contains(&native.dtype) || native.dtype == Dtype::Bool || !matches!(native.route, ChainRoute::Device(_))
        {
            continue;
        }
        seen.push(native.dtype);
        let region = Region::whole(&native.shape);
        let raw = cpu.read_region(&native, &region).unwrap();
        let size = native.dtype.size();
        for to in [Dtype::BF16, Dtype::F16, Dtype::F32] {
            let options = ArrayOptions::default().with_output_dtype(OutputDtype::Cast(to));
            let array = cpu.open_array(&store, &e.path, options).unwrap();
            let want: Vec<u8> = raw
                .bytes()
                .chunks_exact(size)
                .flat_map(|c| {
                    let mut b = [0u8; 8];
                    b[..size].copy_from_slice(c);
                    native.dtype.convert_bits(to, u64::from_le_bytes(b)).to_le_bytes()[..to.size()].to_vec()
                })
                .collect();
            let got_cpu = cpu.read_region(&array, &region).unwrap();
            let before = dev.stats();
            let got_dev = dev.read_region(&array, &region).unwrap();
            assert_eq!(got_cpu.bytes(), want.as_slice(), "{} -> {to} on the CPU", e.path);
            assert_eq!(got_dev.bytes(), want.as_slice(), "{} -> {to} on the device route", e.path);
            let s = dev.stats().since(&before);
            assert_eq!(s.units_decoded_device, s.units_decoded, "{}", e.path);
        }
    }
    for d in [Dtype::U8, Dtype::U16, Dtype::I32, Dtype::I64, Dtype::F64, Dtype::F32] {
        assert!(seen.contains(&d), "no device-routable {d} fixture: {seen:?}");
    }
}

/// Missing chunks on the device route become fill jobs (no detour through the host), a batch
/// larger than the batch buffer is decoded exactly once, and a device output in a caller's
/// buffer equals the host batch.
#[cfg(feature = "emulate")]
#[test]
fn emulated_device_route_fills_missing_chunks_and_decodes_big_batches_once() {
    use damacy_codec::{Dtype, Output, OutputDtype};
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let cpu = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Cpu)).unwrap();
    let dev = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated)).unwrap();
    // Non-sharded chunks absent from the store: the keys are missing when read.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a");
    std::fs::create_dir_all(root.join("c/1")).unwrap();
    std::fs::copy(fixtures_dir().join("v3/crc32c_bytes/zarr.json"), root.join("zarr.json")).unwrap();
    for key in ["c/0/0", "c/1/2", "c/2/1"] {
        std::fs::create_dir_all(root.join(key).parent().unwrap()).unwrap();
        std::fs::copy(fixtures_dir().join("v3/crc32c_bytes").join(key), root.join(key)).unwrap();
    }
    let scratch = Store::open(dir.path().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let array = dev.open_array(&scratch, "a", ArrayOptions::default()).unwrap();
    assert!(matches!(array.route, damacy_codec::ChainRoute::Device(_)), "{:?}", array.route);
    let regions = vec![Region::whole(&array.shape), Region::new(vec![10, 10], vec![50, 40])];
    let array = array.with_options(ArrayOptions::default().with_out_of_bounds(OutOfBounds::Fill)).unwrap();
    let before = dev.stats();
    let got = dev.read_batch(&array, &regions).unwrap();
    let s = dev.stats().since(&before);
    assert_eq!(got, cpu.read_batch(&array, &regions).unwrap());
    assert_eq!((s.units_decoded, s.units_decoded_device), (3, 3), "{s:?}");
    assert!(s.units_filled >= 6, "{s:?}");

    // 64 float64 copies of a whole array: larger than the 16 MiB batch buffer of a 64 MiB
    // budget, and every window of it would decode every unit again: each unit is decoded once
    // and assembled on the device in a buffer of the batch's size (no host scatter).
    let small = Reader::new(
        ReaderConfig::default().with_executor(ExecutorKind::Emulated).with_buffer_bytes(64 << 20, 16 << 20),
    )
    .unwrap();
    let options = ArrayOptions::default().with_output_dtype(OutputDtype::Cast(Dtype::F64));
    let array = small.open_array(&store, "v3/blosc_lz4_byte_ts2_large", options).unwrap();
    let whole = Region::whole(&array.shape);
    let regions = vec![whole.clone(); (17 << 20) / (whole.num_elements() as usize * 8) + 1];
    let plan = small.plan(&array, &regions).unwrap();
    assert!(plan.nbytes() > 16 << 20, "{}", plan.nbytes());
    let before = small.stats();
    let got = small.read_batch(&array, &regions).unwrap();
    let s = small.stats().since(&before);
    assert_eq!(s.units_decoded as usize, plan.num_units(), "each unit decoded exactly once: {s:?}");
    assert_eq!(s.units_decoded_device, s.units_decoded);
    assert_eq!(s.batches_host_scattered, 0, "{s:?}");
    let want =
        cpu.read_batch(&cpu.open_array(&store, "v3/blosc_lz4_byte_ts2_large", options).unwrap(), &regions).unwrap();
    assert!(got == want);

    // Into a caller's device buffer on the caller's stream.
    let device = small.device().unwrap();
    let regions = vec![whole.clone(), whole];
    let plan = small.plan(&array, &regions).unwrap();
    let mut buffer = device.alloc(plan.nbytes() + 64).unwrap();
    let stream = device.new_stream().unwrap();
    small.read_batch_into(&plan, Output::Device { buffer: &mut buffer, offset: 64, stream: &stream }).unwrap();
    stream.synchronize().unwrap();
    let mut host = vec![0u8; plan.nbytes()];
    device.download(&buffer, 64, &mut host).unwrap();
    assert_eq!(host, small.read_batch(&array, &regions).unwrap().bytes());
}

/// gzip (v3 and v2), zlib (v2) and blosc-zlib arrays route to the device and read through the
/// emulated inflate kernel exactly as the CPU executor (zarrs) reads them, checksums validated.
#[cfg(feature = "emulate")]
#[test]
fn emulated_gzip_and_zlib_arrays_equal_cpu() {
    use damacy_codec::{ChainRoute, DeviceCodec};
    let store = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
    let cpu = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Cpu)).unwrap();
    let dev = Reader::new(ReaderConfig::default().with_executor(ExecutorKind::Emulated)).unwrap();
    let options = ArrayOptions::default().with_out_of_bounds(OutOfBounds::Fill).with_validate_checksums(true);
    for (path, codec) in [
        ("v3/gzip_l1", DeviceCodec::Gzip),
        ("v3/gzip_l6", DeviceCodec::Gzip),
        ("v2/gzip_C", DeviceCodec::Gzip),
        ("v2/zlib_C", DeviceCodec::Zlib),
        ("v2/bool_r1", DeviceCodec::Zlib),
        ("v3/blosc_zlib_bit_ts4_large", DeviceCodec::Blosc),
        ("v3/blosc_zlib_byte_ts2_small", DeviceCodec::Blosc),
    ] {
        let array = dev.open_array(&store, path, options).unwrap();
        match &array.route {
            ChainRoute::Device(c) => assert_eq!(c.codec, codec, "{path}"),
            other => panic!("{path} routes to {other}"),
        }
        let mut regions = vec![Region::whole(&array.shape)];
        regions.push(Region::new(
            array.shape.iter().map(|s| s / 3).collect(),
            array.shape.iter().map(|&s| s.div_ceil(2)).collect(),
        ));
        for r in regions {
            let before = dev.stats();
            let got = dev.read_batch(&array, std::slice::from_ref(&r)).unwrap();
            let s = dev.stats().since(&before);
            assert_eq!(got, cpu.read_batch(&array, std::slice::from_ref(&r)).unwrap(), "{path} {r}");
            assert!(s.units_decoded > 0 && s.units_decoded_device == s.units_decoded, "{path}: {s:?}");
        }
    }
}
