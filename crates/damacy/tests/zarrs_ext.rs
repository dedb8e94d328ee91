//! The zarrs extension traits against zarrs itself: every fixture, whole, through random
//! subsets and batches of subsets, with the CPU executor and (feature `emulate`) the emulated
//! device executor, equals zarrs' own `retrieve_array_subset`; errors name what is wrong; device
//! arrays export through `DLPack`.

#[path = "../../damacy-codec/tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{SplitMix, fixtures_dir, manifest};
use damacy::dlpack::{DLDataTypeCode, DLDeviceType, DLManagedTensor};
use damacy::zarrs_ext::{ArrayDeviceExt, AsyncArrayDeviceExt, DamacyContext, RetrieveOptions};
use damacy::{ChainRoute, DeviceArray, Dtype, ExecutorKind, Output, ReaderConfig, StorageErrorKind};
use sha2::{Digest, Sha256};
use zarrs::array::{Array, ArrayBytes, ArraySubset, CodecOptions};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::{MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey};

type FsArray = Array<FilesystemStore>;

fn fs_store() -> Arc<FilesystemStore> {
    Arc::new(FilesystemStore::new(fixtures_dir()).unwrap())
}

fn open(path: &str) -> FsArray {
    Array::open(fs_store(), &format!("/{}", path.trim_start_matches('/'))).unwrap()
}

fn zarrs_bytes(array: &FsArray, subset: &ArraySubset) -> Vec<u8> {
    let bytes: ArrayBytes<'static> = array.retrieve_array_subset(subset).unwrap();
    bytes.into_fixed().unwrap().into_owned()
}

fn context(executor: ExecutorKind) -> DamacyContext {
    // Small device budgets: the fixtures are small, and tests run side by side.
    let config = ReaderConfig::default().with_executor(executor).with_buffer_bytes(64 << 20, 16 << 20);
    DamacyContext::new(config).unwrap()
}

fn random_subset(rng: &mut SplitMix, array_shape: &[u64], shape: &[u64]) -> ArraySubset {
    let start: Vec<u64> = array_shape.iter().zip(shape).map(|(&s, &n)| rng.below(s - n + 1)).collect();
    ArraySubset::new_with_start_shape(start, shape.to_vec()).unwrap()
}

/// Every fixture through `ctx`: whole (against zarr-python's digest and zarrs), two random
/// subsets, and a batch of three equally shaped random subsets.
fn every_fixture_matches_zarrs(executor: ExecutorKind, device: bool) {
    let ctx = context(executor);
    let mut rng = SplitMix(0x2a77);
    let mut checked = 0;
    for e in manifest() {
        let array = open(&e.path);
        let whole = array.retrieve_array_subset_device(&array.subset_all(), &ctx).unwrap();
        assert_eq!(whole.device_kind().is_some(), device, "{}", e.path);
        assert_eq!(whole.shape(), e.shape.as_slice(), "{}", e.path);
        let bytes = whole.to_host().unwrap();
        assert_eq!(hex::encode(Sha256::digest(&bytes)), e.sha256, "{} (whole, {executor:?})", e.path);
        assert_eq!(bytes, zarrs_bytes(&array, &array.subset_all()), "{}", e.path);
        for _ in 0..2 {
            let shape: Vec<u64> = e.shape.iter().map(|&s| 1 + rng.below(s)).collect();
            let subset = random_subset(&mut rng, &e.shape, &shape);
            let got = array.retrieve_array_subset_device(&subset, &ctx).unwrap();
            assert_eq!(got.to_host().unwrap(), zarrs_bytes(&array, &subset), "{} {subset:?} ({executor:?})", e.path);
        }
        let shape: Vec<u64> = e.shape.iter().map(|&s| 1 + rng.below(s.div_ceil(2))).collect();
        let subsets: Vec<ArraySubset> = (0..3).map(|_| random_subset(&mut rng, &e.shape, &shape)).collect();
        let batch = array.retrieve_array_subsets_device(&subsets, &ctx).unwrap();
        assert_eq!(batch.shape()[0], 3);
        let bytes = batch.to_host().unwrap();
        let per = bytes.len() / 3;
        for (i, s) in subsets.iter().enumerate() {
            assert_eq!(&bytes[i * per..(i + 1) * per], zarrs_bytes(&array, s).as_slice(), "{} batch {i} {s:?}", e.path);
        }
        checked += 1;
    }
    assert!(checked >= 150, "only {checked} fixtures");
}

#[test]
fn every_fixture_matches_zarrs_with_the_cpu_executor() {
    every_fixture_matches_zarrs(ExecutorKind::Cpu, false);
}

#[cfg(feature = "emulate")]
#[test]
fn every_fixture_matches_zarrs_with_the_emulated_device() {
    every_fixture_matches_zarrs(ExecutorKind::Emulated, true);
}

fn executors() -> Vec<ExecutorKind> {
    let mut kinds = vec![ExecutorKind::Cpu];
    if cfg!(feature = "emulate") {
        kinds.push(ExecutorKind::Emulated);
    }
    kinds
}

/// Subsets across shard boundaries, partial edge shards, never-written shards and chunks.
#[test]
fn subsets_spanning_shards_edges_and_missing_chunks() {
    let cases: [(&str, ArraySubset); 4] = [
        // Shards of rows 32..64 were never written: fill value; the subset crosses into them.
        ("v3/sharded_missing_shards", ArraySubset::new_with_ranges(&[20..64, 10..64])),
        // Shards 16×32×20 of a 40×72×20 array: the last shards along both axes are partial.
        ("v3/sharded_blosc_index_end", ArraySubset::new_with_ranges(&[10..40, 20..72, 5..20])),
        ("v3/sharded_zstd_index_start", ArraySubset::new_with_ranges(&[0..33, 30..70, 0..20])),
        // Unsharded with chunks never written, and a partial edge chunk.
        ("v3/missing_chunks_fill", ArraySubset::new_with_ranges(&[5..30, 3..40])),
    ];
    for executor in executors() {
        let ctx = context(executor);
        for (path, subset) in &cases {
            let array = open(path);
            let before = ctx.stats();
            let got = array.retrieve_array_subset_device(subset, &ctx).unwrap();
            assert_eq!(got.to_host().unwrap(), zarrs_bytes(&array, subset), "{path} {subset:?} ({executor:?})");
            let stats = ctx.stats().since(&before);
            if path.contains("missing") {
                assert!(stats.units_filled > 0, "{path}: missing chunks are filled, not read: {stats:?}");
            }
        }
    }
}

/// A batch reads and decodes each chunk once, however many subsets share it.
#[test]
fn a_batch_decodes_shared_chunks_once() {
    let ctx = context(ExecutorKind::Cpu);
    let array = open("v3/sharded_zstd_index_end");
    // Away from the empty first inner chunks, across shard boundaries.
    let a = ArraySubset::new_with_ranges(&[10..30, 20..50, 3..17]);
    let before = ctx.stats();
    array.retrieve_array_subset_device(&a, &ctx).unwrap();
    let one = ctx.stats().since(&before).units_decoded;
    let before = ctx.stats();
    let batch = array.retrieve_array_subsets_device(&[a.clone(), a.clone(), a.clone()], &ctx).unwrap();
    let three = ctx.stats().since(&before).units_decoded;
    assert!(one > 0);
    assert_eq!(three, one, "three copies of one subset decode its chunks once");
    let bytes = batch.to_host().unwrap();
    let want = zarrs_bytes(&array, &a);
    assert_eq!(bytes, [want.clone(), want.clone(), want].concat());
}

/// Plain `bytes` chunks touched sparsely are read by slabs on the CPU (byte ranges of the
/// chunk), in either byte order, with missing chunks and partial edge chunks; the emulated device
/// reads whole chunks. Both equal zarrs.
#[test]
fn sparse_reads_of_plain_bytes_chunks() {
    use zarrs::array::ArrayBuilder;
    use zarrs::array::codec::BytesCodec;
    use zarrs::metadata::Endianness;
    let store = Arc::new(zarrs::storage::store::MemoryStore::new());
    let shape = vec![150u64, 130, 70];
    for (path, endian) in [("/le", Endianness::Little), ("/be", Endianness::Big)] {
        let mut builder =
            ArrayBuilder::new(shape.clone(), vec![64u64, 64, 64], zarrs::array::data_type::uint16(), 7u16);
        builder.array_to_bytes_codec(Arc::new(BytesCodec::new(Some(endian))));
        let array = builder.build(store.clone(), path).unwrap();
        array.store_metadata().unwrap();
        let grid = array.chunk_grid_shape().to_vec();
        for chunk in ArraySubset::new_with_shape(grid).indices() {
            if chunk[0] == 1 && chunk[1] == 1 {
                continue; // never written: the fill value
            }
            let n = 64 * 64 * 64;
            let data: Vec<u16> =
                (0..n).map(|i| (i as u16).wrapping_mul(31) ^ (chunk[2] as u16 * 7 + chunk[0] as u16)).collect();
            array.store_chunk(&chunk, data).unwrap();
        }
        let mut rng = SplitMix(5);
        let subsets: Vec<ArraySubset> = (0..6).map(|_| random_subset(&mut rng, &shape, &[20, 33, 9])).collect();
        for executor in executors() {
            let ctx = context(executor);
            let before = ctx.stats();
            let got = array.retrieve_array_subsets_device(&subsets, &ctx).unwrap().to_host().unwrap();
            let stats = ctx.stats().since(&before);
            let want: Vec<u8> = subsets
                .iter()
                .flat_map(|s| {
                    let b: ArrayBytes<'static> = array.retrieve_array_subset(s).unwrap();
                    b.into_fixed().unwrap().into_owned()
                })
                .collect();
            assert_eq!(got, want, "{path} ({executor:?})");
            if executor == ExecutorKind::Cpu {
                // The whole chunks these crops touch (the written ones) hold more than twice the
                // bytes the slabs read.
                let mut whole = std::collections::BTreeSet::new();
                for s in &subsets {
                    let chunks = array.chunks_in_array_subset(s).unwrap().unwrap();
                    whole.extend(chunks.indices().into_iter().filter(|c| !(c[0] == 1 && c[1] == 1)));
                }
                let whole_bytes = whole.len() as u64 * 64 * 64 * 64 * 2;
                assert!(stats.bytes_read * 2 < whole_bytes, "{path}: {stats:?}, whole chunks {whole_bytes} bytes");
            }
            let edge = ArraySubset::new_with_ranges(&[60..150, 120..130, 0..70]);
            let got = array.retrieve_array_subset_device(&edge, &ctx).unwrap().to_host().unwrap();
            let want: ArrayBytes<'static> = array.retrieve_array_subset(&edge).unwrap();
            assert_eq!(got, want.into_fixed().unwrap().into_owned(), "{path} edge ({executor:?})");
        }
    }
}

/// Chunks (shards for a sharded array) by grid coordinates, edge chunks clipped to the array.
#[test]
fn chunks_by_grid_coordinates() {
    for executor in executors() {
        let ctx = context(executor);
        for path in ["v3/sharded_blosc_index_end", "v3/blosc_lz4_byte_ts2_large", "v2/zlib_F"] {
            let array = open(path);
            let grid = array.chunk_grid_shape().to_vec();
            // An interior box of chunks: exactly zarrs' retrieve_chunks.
            let interior = ArraySubset::new_with_start_shape(vec![0; grid.len()], vec![1; grid.len()]).unwrap();
            let got = array.retrieve_chunks_device(&interior, &ctx).unwrap();
            let want: ArrayBytes<'static> = array.retrieve_chunks(&interior).unwrap();
            assert_eq!(got.to_host().unwrap(), want.into_fixed().unwrap().into_owned(), "{path}");
            // Every chunk, edge chunks included: the whole array.
            let all = ArraySubset::new_with_shape(grid.clone());
            let got = array.retrieve_chunks_device(&all, &ctx).unwrap();
            assert_eq!(got.shape(), array.shape());
            assert_eq!(got.to_host().unwrap(), zarrs_bytes(&array, &array.subset_all()), "{path}");
            // Past the grid: an error naming the grid.
            let past = ArraySubset::new_with_start_shape(grid.clone(), vec![1; grid.len()]).unwrap();
            let err = array.retrieve_chunks_device(&past, &ctx).unwrap_err().to_string();
            assert!(err.contains("chunk grid") && err.contains(path), "{err}");
        }
    }
}

/// Into a caller's host slice, and (emulated) into a caller's device buffer on its stream.
#[test]
fn into_a_callers_memory() {
    for executor in executors() {
        let ctx = context(executor);
        let array = open("v3/blosc_lz4_bit_ts4_large");
        let subset = ArraySubset::new_with_start_shape(vec![1000], vec![20000]).unwrap();
        let want = zarrs_bytes(&array, &subset);
        let mut out = vec![0xEEu8; want.len()];
        array.retrieve_array_subset_device_into(&subset, &ctx, Output::Host(&mut out)).unwrap();
        assert_eq!(out, want, "{executor:?}");
        let err = array.retrieve_array_subset_device_into(&subset, &ctx, Output::Host(&mut out[4..])).unwrap_err();
        assert!(err.to_string().contains("needs"), "{err}");
        if let Some(device) = ctx.device() {
            let stream = device.new_stream().unwrap();
            let mut buffer = device.alloc(want.len() + 64).unwrap();
            let out = Output::Device { buffer: &mut buffer, offset: 64, stream: &stream };
            array.retrieve_array_subset_device_into(&subset, &ctx, out).unwrap();
            let mut host = vec![0u8; want.len()];
            device.download_on(&stream, &buffer, 64, &mut host).unwrap();
            assert_eq!(host, want);
        }
    }
}

/// Per-call options give the same bytes: another executor and concurrency (a reader of their
/// own), no checksum checks, and options taken from zarrs' `CodecOptions`.
#[test]
fn options_per_call() {
    let ctx = context(ExecutorKind::Cpu);
    let array = open("v3/crc32c_zstd");
    let subset = ArraySubset::new_with_ranges(&[3..47, 5..39]);
    let want = zarrs_bytes(&array, &subset);
    let mut options = vec![
        RetrieveOptions::default().with_concurrency(1),
        RetrieveOptions::default().with_validate_checksums(false),
        RetrieveOptions::from(&CodecOptions::default().with_concurrent_target(3)),
    ];
    if cfg!(feature = "emulate") {
        options.push(RetrieveOptions::default().with_executor(ExecutorKind::Emulated));
    }
    for o in &options {
        let got = array.retrieve_array_subset_device_opt(&subset, &ctx, o).unwrap();
        assert_eq!(got.to_host().unwrap(), want, "{o:?}");
        assert_eq!(got.device_kind().is_some(), o.executor == Some(ExecutorKind::Emulated), "{o:?}");
    }
    let from_zarrs = RetrieveOptions::from(&CodecOptions::default().with_validate_checksums(false));
    assert!(!from_zarrs.validate_checksums);
}

/// Subsets without elements read nothing and give empty arrays, as zarrs does.
#[test]
fn empty_subsets() {
    let ctx = context(ExecutorKind::Cpu);
    let array = open("v3/zstd_l3_ck");
    let subset = ArraySubset::new_with_ranges(&[4..4, 0..10, 0..8]);
    let got = array.retrieve_array_subset_device(&subset, &ctx).unwrap();
    assert_eq!(got.shape(), &[0, 10, 8]);
    assert_eq!(got.to_host().unwrap(), zarrs_bytes(&array, &subset));
    let outside = ArraySubset::new_with_ranges(&[70..70, 0..10, 0..8]);
    let err = array.retrieve_array_subset_device(&outside, &ctx).unwrap_err().to_string();
    assert!(err.contains("does not fit") && err.contains("zstd_l3_ck"), "{err}");
}

/// The route each chain takes is visible, with the reason for the CPU.
#[test]
fn routes_with_reasons() {
    let ctx = context(ExecutorKind::Cpu);
    let ChainRoute::Cpu { reason } = open("v2/zlib_F").damacy_route(&ctx).unwrap() else {
        panic!("order F (a transpose) has no device stage");
    };
    assert!(reason.contains("transpose"), "{reason}");
    assert!(matches!(open("v3/gzip_l6").damacy_route(&ctx).unwrap(), ChainRoute::Device(_)));
    assert!(matches!(open("v3/blosc_lz4_none_ts1_small").damacy_route(&ctx).unwrap(), ChainRoute::Device(_)));
    assert!(matches!(open("v3/sharded_blosc_index_end").damacy_route(&ctx).unwrap(), ChainRoute::Device(_)));
}

#[test]
fn unsupported_data_types_are_named() {
    use zarrs::array::{ArrayBuilder, data_type};
    let ctx = context(ExecutorKind::Cpu);
    let store = Arc::new(zarrs::storage::store::MemoryStore::new());
    for (dtype, name, fill) in [
        (data_type::complex64(), "complex64", zarrs::array::FillValue::from(&[0u8; 8])),
        (data_type::string(), "string", zarrs::array::FillValue::from("")),
    ] {
        let array = ArrayBuilder::new(vec![8, 8], vec![4, 4], dtype, fill).build(store.clone(), "/a").unwrap();
        let err = array.retrieve_array_subset_device(&array.subset_all(), &ctx).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(name) && text.contains("/a"), "{text}");
        assert!(matches!(err, damacy::Error::Codec(damacy::CodecError::Unsupported(_))), "{err:?}");
    }
}

#[test]
fn subsets_outside_the_array_are_errors() {
    let ctx = context(ExecutorKind::Cpu);
    let array = open("v3/missing_chunks_fill");
    let subset = ArraySubset::new_with_ranges(&[25..35, 0..10]);
    let err = array.retrieve_array_subset_device(&subset, &ctx).unwrap_err().to_string();
    assert!(err.contains("v3/missing_chunks_fill") && err.contains("25:35") && err.contains("outside"), "{err}");
    let rank = ArraySubset::new_with_shape(vec![5]);
    let err = array.retrieve_array_subset_device(&rank, &ctx).unwrap_err().to_string();
    assert!(err.contains("rank"), "{err}");
    let mixed = [ArraySubset::new_with_ranges(&[0..5, 0..5]), ArraySubset::new_with_ranges(&[0..6, 0..5])];
    let err = array.retrieve_array_subsets_device(&mixed, &ctx).unwrap_err().to_string();
    assert!(err.contains("one shape"), "{err}");
    let err = array.retrieve_array_subsets_device(&[], &ctx).unwrap_err().to_string();
    assert!(err.contains("at least one"), "{err}");
}

/// A storage that refuses every chunk read (metadata reads pass, so zarrs can open the array).
struct Refusing(Arc<FilesystemStore>);

impl ReadableStorageTraits for Refusing {
    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        if key.as_str().ends_with("zarr.json") {
            return self.0.get_partial_many(key, byte_ranges);
        }
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "refused by the test storage");
        Err(StorageError::IOError(Arc::new(io)))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.0.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[test]
fn storage_failures_keep_their_kind_and_location() {
    let ctx = context(ExecutorKind::Cpu);
    for path in ["/v3/zstd_l0_ck", "/v3/sharded_zstd_index_end"] {
        let array = Array::open(Arc::new(Refusing(fs_store())), path).unwrap();
        let err = array.retrieve_array_subset_device(&array.subset_all(), &ctx).unwrap_err();
        assert_eq!(err.storage_kind(), Some(StorageErrorKind::PermissionDenied), "{err}");
        let text = err.to_string();
        assert!(text.contains(path) && text.contains("refused"), "{text}");
    }
}

/// Arrays over zarrs' `dyn` storage handles use the storage as it is.
#[test]
fn dyn_storage_handles() {
    let ctx = context(ExecutorKind::Cpu);
    let store: zarrs::storage::ReadableWritableListableStorage =
        Arc::new(FilesystemStore::new(fixtures_dir()).unwrap());
    let array = Array::open(store, "/v2/zstd_F").unwrap();
    let subset = ArraySubset::new_with_ranges(&[3..40, 2..30, 1..5]);
    let got = array.retrieve_array_subset_device(&subset, &ctx).unwrap();
    let want: ArrayBytes<'static> = array.retrieve_array_subset(&subset).unwrap();
    assert_eq!(got.to_host().unwrap(), want.into_fixed().unwrap().into_owned());
    let store: zarrs::storage::ReadableStorage = Arc::new(FilesystemStore::new(fixtures_dir()).unwrap());
    let array = Array::open(store, "/v2/zstd_F").unwrap();
    assert_eq!(array.retrieve_array_subset_device(&subset, &ctx).unwrap().to_host().unwrap(), got.to_host().unwrap());
}

static DELETES: AtomicUsize = AtomicUsize::new(0);
static ORIGINAL: std::sync::Mutex<Option<unsafe extern "C" fn(*mut DLManagedTensor)>> = std::sync::Mutex::new(None);

/// Counts deletes and forwards to damacy's deleter.
unsafe extern "C" fn counting_deleter(m: *mut DLManagedTensor) {
    DELETES.fetch_add(1, Ordering::SeqCst);
    let original = ORIGINAL.lock().unwrap().expect("the original deleter");
    // SAFETY: forwarded from the consumer's single call of the export's deleter.
    unsafe { original(m) }
}

fn check_tensor(t: &damacy::dlpack::DLTensor, array_shape: &[u64], want: &[u8], device: DLDeviceType) {
    assert_eq!(t.ndim as usize, array_shape.len());
    assert_eq!(t.device.device_type, device);
    assert_eq!(t.device.device_id, 0);
    assert_eq!(t.byte_offset, 0);
    assert_eq!((t.dtype.code, t.dtype.bits, t.dtype.lanes), (DLDataTypeCode::UINT, 16, 1));
    // SAFETY: the export's shape and strides hold ndim entries and live as long as it.
    let (shape, strides) = unsafe {
        (
            std::slice::from_raw_parts(t.shape, array_shape.len()),
            std::slice::from_raw_parts(t.strides, array_shape.len()),
        )
    };
    let want_shape: Vec<i64> = array_shape.iter().map(|&s| s as i64).collect();
    assert_eq!(shape, want_shape.as_slice());
    assert_eq!(strides, &[array_shape[1] as i64 * array_shape[2] as i64, array_shape[2] as i64, 1]);
    // SAFETY: a kDLCPU export of exactly `want.len()` bytes, ready (exports without a consumer
    // stream wait for the data).
    let data = unsafe { std::slice::from_raw_parts(t.data.cast::<u8>(), want.len()) };
    assert_eq!(data, want);
}

/// `DLPack` round trip: the fields describe the array, the data reads back, and the deleter runs
/// exactly once (when the Rust-side holder drops, or when the consumer calls it).
#[test]
fn dlpack_export_round_trip() {
    let _serial = ORIGINAL.lock().map(drop);
    for executor in executors() {
        let ctx = context(executor);
        let array = open("v3/sharded_blosc_index_start");
        let subset = ArraySubset::new_with_ranges(&[3..19, 5..37, 0..20]);
        let want = zarrs_bytes(&array, &subset);
        let got = array.retrieve_array_subset_device(&subset, &ctx).unwrap();
        assert_eq!(got.dtype(), Dtype::U16);
        assert_eq!(got.dl_device().device_type, DLDeviceType::CPU, "host and emulator memory are kDLCPU");
        let mut exported = got.into_dlpack(None).unwrap();
        check_tensor(&exported.managed().dl_tensor, &[16, 32, 20], &want, DLDeviceType::CPU);
        let raw = exported.into_raw();
        // SAFETY: a live export; its deleter is swapped for a counting one that forwards to it.
        unsafe {
            let m = &mut *raw.as_ptr();
            *ORIGINAL.lock().unwrap() = m.deleter;
            m.deleter = Some(counting_deleter);
        }
        DELETES.store(0, Ordering::SeqCst);
        // SAFETY: taken back from `into_raw` of the same type; nobody else deletes it.
        exported = unsafe { damacy::dlpack::DlpackTensor::from_raw(raw) };
        drop(exported);
        assert_eq!(DELETES.load(Ordering::SeqCst), 1, "the deleter runs once ({executor:?})");

        let got = array.retrieve_array_subset_device(&subset, &ctx).unwrap();
        let versioned = got.into_dlpack_versioned(None).unwrap();
        let m = versioned.managed();
        assert_eq!((m.version.major, m.version.minor), (1, 0));
        assert_eq!(m.flags, 0);
        check_tensor(&m.dl_tensor, &[16, 32, 20], &want, DLDeviceType::CPU);
        let raw = versioned.into_raw();
        // SAFETY: the consumer's one call of the deleter of a live export.
        unsafe { (raw.as_ref().deleter.unwrap())(raw.as_ptr()) };
    }
}

/// On a CUDA GPU: device arrays in device memory (kDLCUDA), equal to zarrs after a copy back,
/// and exported with the consumer's stream ordered after them. Skips (saying why) without one.
#[test]
fn gpu_device_arrays() {
    // Device 0 named: with no device and no CUDA context current the binding is an error.
    let config = ReaderConfig::default().with_executor(ExecutorKind::Gpu).with_device(0);
    let ctx = match DamacyContext::new(config) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("skipped: this test needs a CUDA GPU: {e}");
            return;
        }
    };
    let device = ctx.device().expect("a GPU context has a device").clone();
    for path in ["v3/sharded_blosc_index_end", "v3/zstd_l3_ck", "v3/bytes_le_uint16_r3"] {
        let array = open(path);
        let subset = array.subset_all();
        let got = array.retrieve_array_subset_device(&subset, &ctx).unwrap();
        assert_eq!(got.device_kind(), Some(damacy::DeviceKind::Cuda));
        assert_eq!(got.dl_device().device_type, DLDeviceType::CUDA);
        assert_eq!(got.to_host().unwrap(), zarrs_bytes(&array, &subset), "{path}");
        let consumer = device.new_stream().unwrap();
        let exported = got.into_dlpack_versioned(Some(&consumer)).unwrap();
        assert_eq!(exported.managed().dl_tensor.device.device_type, DLDeviceType::CUDA);
        drop(exported);
    }
}

/// Host arrays view their batch; `to_vec` checks the element type.
#[test]
fn device_array_views() {
    let ctx = context(ExecutorKind::Cpu);
    let array = open("v3/bytes_le_float32_r1");
    let got = array
        .retrieve_array_subset_device(&ArraySubset::new_with_start_shape(vec![10], vec![10]).unwrap(), &ctx)
        .unwrap();
    assert_eq!(got.nbytes(), 40);
    assert_eq!(got.host_bytes().map(<[u8]>::len), Some(40));
    let err = got.to_vec::<u16>().unwrap_err().to_string();
    assert!(err.contains("float32") && err.contains("uint16"), "{err}");
    let floats: Vec<f32> = got.to_vec().unwrap();
    let want: Vec<f32> =
        array.retrieve_array_subset(&ArraySubset::new_with_start_shape(vec![10], vec![10]).unwrap()).unwrap();
    assert_eq!(floats, want);
    assert!(format!("{got:?}").contains("DeviceArray"));
    let _: &DeviceArray = &got;
}

/// An async storage that takes its time, to show the caller's runtime keeps running.
struct Slow(zarrs_opendal::AsyncOpendalStore);

#[async_trait::async_trait]
impl zarrs::storage::AsyncReadableStorageTraits for Slow {
    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<zarrs::storage::AsyncMaybeBytesIterator<'a>, StorageError> {
        if !key.as_str().ends_with("zarr.json") {
            // Blocks the thread it runs on: damacy's, never the caller's runtime.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.0.get_partial_many(key, byte_ranges).await
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.0.size_key(key).await
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

fn opendal_store() -> zarrs_opendal::AsyncOpendalStore {
    let builder = opendal::services::Fs::default().root(fixtures_dir().to_str().unwrap());
    zarrs_opendal::AsyncOpendalStore::new(opendal::Operator::new(builder).unwrap())
}

/// zarrs' async storages (opendal): the async forms equal zarrs' sync reads, and a
/// single-threaded runtime keeps running other tasks while a read is in flight.
#[tokio::test(flavor = "current_thread")]
async fn async_storages_do_not_block_the_runtime() {
    let ctx = context(ExecutorKind::Cpu);
    let store = Arc::new(opendal_store());
    for path in ["/v3/sharded_zstd_index_end", "/v2/blosc_lz4_default_F", "/v3/missing_chunks_fill"] {
        let array = Array::async_open(store.clone(), path).await.unwrap();
        let sync = open(path);
        let subset = ArraySubset::new_with_start_shape(vec![1; sync.dimensionality()], {
            sync.shape().iter().map(|s| s - 1).collect()
        })
        .unwrap();
        let got = array.async_retrieve_array_subset_device(&subset, &ctx).await.unwrap();
        assert_eq!(got.to_host().unwrap(), zarrs_bytes(&sync, &subset), "{path}");
        let chunks = ArraySubset::new_with_shape(vec![1; sync.dimensionality()]);
        let got = array.async_retrieve_chunks_device(&chunks, &ctx).await.unwrap();
        let want: ArrayBytes<'static> = sync.retrieve_chunks(&chunks).unwrap();
        assert_eq!(got.to_host().unwrap(), want.into_fixed().unwrap().into_owned(), "{path}");
    }

    let array = Array::async_open(Arc::new(Slow(opendal_store())), "/v3/zstd_l3_ck").await.unwrap();
    // zstd routes to the device kernels (decoded here by the CPU executor of the context).
    assert!(matches!(array.damacy_route(&ctx).unwrap(), ChainRoute::Device(_)));
    let subsets =
        [ArraySubset::new_with_ranges(&[0..32, 0..32, 0..8]), ArraySubset::new_with_ranges(&[32..64, 0..32, 0..8])];
    let read = tokio::spawn(array.async_retrieve_array_subsets_device(&subsets, &ctx));
    let mut ticks = 0;
    while !read.is_finished() {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        ticks += 1;
    }
    let batch = read.await.unwrap().unwrap();
    assert_eq!(batch.shape(), &[2, 32, 32, 8]);
    assert!(ticks >= 3, "the runtime ran only {ticks} ticks during a read of at least 20 ms");
    let sync = open("/v3/zstd_l3_ck");
    let want = [zarrs_bytes(&sync, &subsets[0]), zarrs_bytes(&sync, &subsets[1])].concat();
    assert_eq!(batch.to_host().unwrap(), want);
}
