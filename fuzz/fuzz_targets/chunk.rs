//! Chunk bytes: a sharded blosc array whose first shard holds arbitrary bytes decodes to a
//! value or an error, never a panic or an out-of-bounds access.
#![no_main]

use std::sync::Arc;

use damacy_codec::{ArrayOptions, Reader, ReaderConfig, Region, Store};
use libfuzzer_sys::fuzz_target;
use zarrs_storage::store::MemoryStore;
use zarrs_storage::{StoreKey, WritableStorageTraits};

const META: &[u8] = include_bytes!("../../fixtures/v3/sharded_blosc_index_start/zarr.json");

fuzz_target!(|data: &[u8]| {
    let mem = Arc::new(MemoryStore::new());
    let (Ok(meta), Ok(shard)) = (StoreKey::new("a/zarr.json"), StoreKey::new("a/c/0/0/0")) else { return };
    if mem.set(&meta, META.to_vec().into()).is_err() || mem.set(&shard, data.to_vec().into()).is_err() {
        return;
    }
    let store = Store::from_storage("memory://fuzz", mem);
    let Ok(reader) = Reader::new(ReaderConfig::default().with_compute_threads(1).with_io_threads(1)) else { return };
    if let Ok(info) = reader.open_array(&store, "a", ArrayOptions::default()) {
        let _ = reader.read_region(&info, &Region::new(vec![0, 0, 0], vec![16, 32, 20]));
    }
});
