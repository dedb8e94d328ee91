//! Parsers of untrusted bytes never panic: array metadata, shard indexes and chunk bytes give
//! a value or an error whatever they hold. (The same entry points have cargo-fuzz targets in
//! `fuzz/`; these property tests run in every `make test`.)

mod common;

use std::sync::Arc;

use common::fixtures_dir;
use damacy_codec::{ArrayOptions, Reader, ReaderConfig, Region, Store, StoreOptions};
use proptest::prelude::*;
use zarrs_storage::store::MemoryStore;
use zarrs_storage::{StoreKey, WritableStorageTraits};

fn memory_store(files: &[(&str, Vec<u8>)]) -> Store {
    let mem = Arc::new(MemoryStore::new());
    for (key, value) in files {
        mem.set(&StoreKey::new(*key).unwrap(), value.clone().into()).unwrap();
    }
    Store::from_storage("memory://parsers", mem)
}

fn valid_metadata() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures_dir().join("v3/sharded_zstd_index_end/zarr.json")).unwrap())
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn metadata_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let store = memory_store(&[("a/zarr.json", bytes)]);
        let _ = damacy_codec::ArrayMeta::open(&store, "a");
    }

    #[test]
    fn mutated_metadata_never_panics(
        shape in proptest::collection::vec(0u64..1 << 40, 0..5),
        chunk in proptest::collection::vec(0u64..1 << 20, 0..5),
        inner in proptest::collection::vec(0u64..64, 0..5),
        dtype in prop::sample::select(vec!["uint16", "float32", "complex64", "string", "r24", "bogus"]),
    ) {
        let mut meta = valid_metadata();
        meta["shape"] = serde_json::json!(shape);
        meta["chunk_grid"]["configuration"]["chunk_shape"] = serde_json::json!(chunk);
        meta["codecs"][0]["configuration"]["chunk_shape"] = serde_json::json!(inner);
        meta["data_type"] = serde_json::json!(dtype);
        let store = memory_store(&[("a/zarr.json", serde_json::to_vec(&meta).unwrap())]);
        let reader = Reader::new(ReaderConfig::default()).unwrap();
        if let Ok(info) = reader.open_array(&store, "a", ArrayOptions::default()) {
            // Whatever opened must also read (all fill: there are no chunks) or error cleanly.
            let region = Region::new(vec![0; info.shape.len()], info.shape.iter().map(|&s| s.clamp(1, 3)).collect());
            let _ = reader.read_region(&info, &region);
        }
    }

    #[test]
    fn shard_index_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), exact in any::<bool>()) {
        let local = Store::open(fixtures_dir().to_str().unwrap(), &StoreOptions::default()).unwrap();
        let info = damacy_codec::ArrayMeta::open(&local, "v3/sharded_zstd_index_end").unwrap();
        let layout = info.shard.as_ref().unwrap();
        let mut bytes = bytes;
        if exact {
            bytes.resize(layout.index_encoded_size as usize, 0xAB);
        }
        let _ = layout.decode_index(&bytes);
    }

    #[test]
    fn chunk_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        array in prop::sample::select(vec![
            "v3/blosc_lz4_byte_ts2_small", "v3/blosc_zstd_bit_ts4_small", "v3/blosc_blosclz_none_ts8_large",
            "v3/zstd_l3_ck", "v3/gzip_l1", "v3/crc32c_zstd", "v2/zlib_C", "v3/sharded_blosc_index_start",
        ]),
    ) {
        // The real metadata, with one chunk (shard) replaced by arbitrary bytes.
        let dir = fixtures_dir().join(array);
        let meta_name = if array.starts_with("v2") { ".zarray" } else { "zarr.json" };
        let meta = std::fs::read(dir.join(meta_name)).unwrap();
        let zero_key = match array {
            "v3/sharded_blosc_index_start" => "c/0/0/0",
            "v2/zlib_C" => "0.0.0",
            a if a.contains("blosc") => "c/0",
            "v3/zstd_l3_ck" => "c/0/0/0",
            _ => "c/0/0",
        };
        let meta_key = format!("a/{meta_name}");
        let chunk_key = format!("a/{zero_key}");
        let store = memory_store(&[(meta_key.as_str(), meta), (chunk_key.as_str(), bytes)]);
        let reader = Reader::new(ReaderConfig::default()).unwrap();
        let info = reader.open_array(&store, "a", ArrayOptions::default()).unwrap();
        let region = Region::new(vec![0; info.shape.len()], info.shape.iter().map(|&s| s.min(4)).collect());
        let _ = reader.read_region(&info, &region);
    }
}
