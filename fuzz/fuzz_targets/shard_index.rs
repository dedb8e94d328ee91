//! Shard-index decoding of arbitrary bytes: a value or an error, never a panic.
#![no_main]

use std::sync::OnceLock;

use damacy_codec::{ArrayMeta, Store, StoreOptions};
use libfuzzer_sys::fuzz_target;

fn layout() -> &'static ArrayMeta {
    static INFO: OnceLock<ArrayMeta> = OnceLock::new();
    INFO.get_or_init(|| {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");
        let store = Store::open(root, &StoreOptions::default()).expect("fixtures");
        ArrayMeta::open(&store, "v3/sharded_zstd_index_end").expect("fixture array")
    })
}

fuzz_target!(|data: &[u8]| {
    if let Some(layout) = &layout().shard {
        let _ = layout.decode_index(data);
    }
});
