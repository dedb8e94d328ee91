//! Array metadata (zarr.json or .zarray) of arbitrary bytes: opening and a small read give a
//! value or an error, never a panic.
#![no_main]

use std::sync::Arc;

use damacy_codec::{ArrayOptions, Reader, ReaderConfig, Region, Store};
use libfuzzer_sys::fuzz_target;
use zarrs_storage::store::MemoryStore;
use zarrs_storage::{StoreKey, WritableStorageTraits};

fuzz_target!(|data: &[u8]| {
    let (name, body) = match data.split_first() {
        Some((flag, rest)) if flag % 2 == 0 => ("a/zarr.json", rest),
        Some((_, rest)) => ("a/.zarray", rest),
        None => return,
    };
    let mem = Arc::new(MemoryStore::new());
    let Ok(key) = StoreKey::new(name) else { return };
    if mem.set(&key, body.to_vec().into()).is_err() {
        return;
    }
    let store = Store::from_storage("memory://fuzz", mem);
    if let Ok(reader) = Reader::new(ReaderConfig::default().with_compute_threads(1).with_io_threads(1))
        && let Ok(info) = reader.open_array(&store, "a", ArrayOptions::default())
    {
        let region = Region::new(vec![0; info.shape.len()], info.shape.iter().map(|&s| s.clamp(1, 2)).collect());
        let _ = reader.read_region(&info, &region);
    }
});
