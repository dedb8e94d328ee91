//! A fresh process's first batch on the emulated device: every kernel it launches is looked up
//! in the images shipped in the binary, as an `sm_90` GPU would load them, and NVRTC is never
//! called. This file holds one test so that the process is fresh when it runs (the counters are
//! process-wide). In a build without shipped images (no NVRTC at build time) the lookup finds
//! none: the test then checks only that nothing was compiled, and says so.
#![allow(clippy::missing_panics_doc)]

use damacy_kernels::images::{self, ImageOrigin};
use damacy_kernels::{ChunkInput, DecodeConfig, Decoder, Device, Kernel};

#[test]
fn the_first_batch_of_a_fresh_process_loads_shipped_images_and_compiles_nothing() {
    assert_eq!(images::nvrtc_compiles(), 0, "nothing ran before this test");
    let started = std::time::Instant::now();
    let device = Device::emulated(0);
    let mut decoder = Decoder::new(&device, DecodeConfig::default()).unwrap();
    let plain: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
    let frame = zstd::bulk::compress(&plain, 3).unwrap();
    let inputs = [
        ChunkInput::zstd(&frame).with_expected_len(plain.len()),
        ChunkInput::raw(&plain).with_expected_len(plain.len()),
    ];
    let out = decoder.decode_to_host(&inputs).unwrap();
    for chunk in &out.chunks {
        assert_eq!(chunk.as_ref().unwrap(), &plain);
    }
    let first_batch = started.elapsed();

    let loaded = device.kernel_images();
    eprintln!("first batch after {first_batch:?}; {loaded}");
    assert_eq!(images::nvrtc_compiles(), 0, "{loaded}");
    assert_eq!((loaded.compiled(), loaded.cached()), (0, 0), "{loaded}");
    // The decoder looked up what it launches when it was made, the zstd and memcpy kernels
    // among them.
    for k in [Kernel::ZstdDecode, Kernel::Memcpy] {
        assert!(loaded.loaded.iter().any(|(l, _)| *l == k), "{k:?} was not looked up: {loaded}");
    }
    if images::shipped().is_empty() {
        eprintln!("SKIPPED the shipped-image part: {}", images::shipped_note());
        assert!(loaded.loaded.iter().all(|(_, o)| *o == ImageOrigin::HostOnly), "{loaded}");
        assert!(loaded.fallback.as_deref().is_some_and(|f| f.contains("no kernel images")), "{loaded}");
        return;
    }
    assert!(
        loaded.loaded.iter().all(|(_, o)| *o == ImageOrigin::Shipped("sm_90")),
        "every kernel from the sm_90 cubins: {loaded}"
    );
    assert_eq!(loaded.fallback, None);
    assert_eq!(loaded.source(), "shipped");
}
