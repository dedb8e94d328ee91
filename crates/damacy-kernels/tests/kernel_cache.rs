//! The compiled-kernel cache ([`damacy_kernels::KernelCache`]) against real NVRTC output,
//! no GPU needed: which layer answers (memory, disk, compile), that files on disk are written
//! atomically, keyed by architecture, never loaded when corrupt, and that an unwritable folder
//! only costs a compile. Each test uses its own instance and its own scratch folder, so the
//! process environment is never touched. Skips (with the reason) when libnvrtc cannot be found —
//! `make test` installs the `nvidia-cuda-nvrtc` wheel into `.nvrtc/`, or point
//! `DAMACY_NVRTC_DIR` at its `nvidia/cu13/lib` folder.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{SystemTime, UNIX_EPOCH};

use damacy_kernels::images::check_cubin;
use damacy_kernels::{CacheStats, Kernel, KernelCache, nvrtc};

/// The smallest kernel: the tests compile it a dozen times.
const KERNEL: Kernel = Kernel::Memcpy;
const SM80: (i32, i32) = (8, 0);
const SM90: (i32, i32) = (9, 0);
/// Threads racing for one key in the single-flight test.
const THREADS: usize = 8;

fn nvrtc_or_skip(test: &str) -> bool {
    match nvrtc::load() {
        Ok(()) => true,
        Err(reason) => {
            eprintln!("SKIPPED kernel_cache::{test}: {reason}");
            false
        }
    }
}

/// A scratch folder under the system temp folder, unique to the test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let dir = std::env::temp_dir().join(format!("damacy-kernel-cache-{test}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The cache folder: a child that does not exist yet, so the first write must create it.
    fn cache_dir(&self) -> PathBuf {
        self.0.join("kernels")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stats(memory_hits: u64, disk_hits: u64, compiles: u64, rejected_files: u64, disk_writes: u64) -> CacheStats {
    let mut s = CacheStats::default();
    s.memory_hits = memory_hits;
    s.disk_hits = disk_hits;
    s.compiles = compiles;
    s.rejected_files = rejected_files;
    s.disk_writes = disk_writes;
    s
}

/// Every file name in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn the_first_request_compiles_and_writes_one_file_then_memory_answers() {
    if !nvrtc_or_skip("the_first_request_compiles_and_writes_one_file_then_memory_answers") {
        return;
    }
    let scratch = Scratch::new("first");
    let cache = KernelCache::new(Some(scratch.cache_dir()));
    assert_eq!(cache.dir(), Some(scratch.cache_dir().as_path()));

    let image = cache.image(KERNEL, SM90).unwrap();
    assert_eq!(cache.stats(), stats(0, 0, 1, 0, 1));
    assert_eq!(check_cubin(&image, KERNEL), Ok(()));

    // One file, no temporary left, named after every part of the key, holding the image.
    let path = cache.file_path(KERNEL, SM90).unwrap().unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(files_in(&scratch.cache_dir()), std::slice::from_ref(&name));
    let (major, minor) = nvrtc::version().unwrap();
    let hash = name.strip_prefix("dmc_memcpy-").unwrap().split('-').next().unwrap();
    assert!(hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
    assert!(name.ends_with(&format!("-sm_90-nvrtc{major}.{minor}.cubin")), "{name}");
    assert_eq!(std::fs::read(&path).unwrap(), *image);

    // The second request is the same allocation, from memory.
    let again = cache.image(KERNEL, SM90).unwrap();
    assert!(Arc::ptr_eq(&image, &again));
    assert_eq!(cache.stats(), stats(1, 0, 1, 0, 1));
}

#[test]
fn a_fresh_instance_loads_from_disk_without_compiling() {
    if !nvrtc_or_skip("a_fresh_instance_loads_from_disk_without_compiling") {
        return;
    }
    let scratch = Scratch::new("fresh");
    let first = KernelCache::new(Some(scratch.cache_dir()));
    let compiled = first.image(KERNEL, SM80).unwrap();
    assert_eq!(first.stats(), stats(0, 0, 1, 0, 1));

    let second = KernelCache::new(Some(scratch.cache_dir()));
    let loaded = second.image(KERNEL, SM80).unwrap();
    assert_eq!(second.stats(), stats(0, 1, 0, 0, 0));
    assert_eq!(*loaded, *compiled);
    // Then from the second instance's memory.
    second.image(KERNEL, SM80).unwrap();
    assert_eq!(second.stats(), stats(1, 1, 0, 0, 0));
}

#[test]
fn corrupt_files_are_rejected_recompiled_and_replaced() {
    if !nvrtc_or_skip("corrupt_files_are_rejected_recompiled_and_replaced") {
        return;
    }
    let scratch = Scratch::new("corrupt");
    let good = KernelCache::new(Some(scratch.cache_dir())).image(KERNEL, SM90).unwrap();
    let path = KernelCache::new(Some(scratch.cache_dir())).file_path(KERNEL, SM90).unwrap().unwrap();
    // Another kernel's valid CUBIN, for the misplaced-file case.
    let other = KernelCache::new(None).image(Kernel::Crc32c, SM90).unwrap();
    assert_eq!(check_cubin(&other, Kernel::Crc32c), Ok(()));

    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("truncated to half", good[..good.len() / 2].to_vec()),
        ("last byte cut", good[..good.len() - 1].to_vec()),
        ("another kernel's cubin", other.to_vec()),
        ("text", b"not a cubin at all\n".to_vec()),
    ];
    let mut flipped = good.to_vec();
    flipped[1] ^= 0x20; // "ELF" -> "eLF"
    cases.push(("magic flipped", flipped));
    let mut machine = good.to_vec();
    machine[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    cases.push(("x86-64 machine", machine));
    let mut class32 = good.to_vec();
    class32[4] = 1;
    cases.push(("32-bit class", class32));

    for (what, bytes) in cases {
        assert!(check_cubin(&bytes, KERNEL).is_err(), "{what}: the checker accepts it");
        std::fs::write(&path, &bytes).unwrap();
        let cache = KernelCache::new(Some(scratch.cache_dir()));
        let image = cache.image(KERNEL, SM90).unwrap();
        assert_eq!(cache.stats(), stats(0, 0, 1, 1, 1), "{what}");
        assert_eq!(*image, *good, "{what}: the returned image is not the compiled one");
        assert_eq!(std::fs::read(&path).unwrap(), *good, "{what}: the file was not replaced");
        // The replacement is loaded by the next process.
        let next = KernelCache::new(Some(scratch.cache_dir()));
        next.image(KERNEL, SM90).unwrap();
        assert_eq!(next.stats(), stats(0, 1, 0, 0, 0), "{what}");
    }
    assert_eq!(files_in(&scratch.cache_dir()).len(), 1, "temporary files were left behind");

    // A folder where the file should be: rejected, and it cannot be replaced (rename fails).
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let cache = KernelCache::new(Some(scratch.cache_dir()));
    assert_eq!(*cache.image(KERNEL, SM90).unwrap(), *good);
    let s = cache.stats();
    assert_eq!((s.compiles, s.disk_hits, s.rejected_files, s.disk_writes, s.write_failures), (1, 0, 1, 0, 1));
    assert!(path.is_dir());
    assert_eq!(files_in(&scratch.cache_dir()).len(), 1, "the failed write left a temporary file");
}

#[test]
fn a_different_arch_gives_a_different_file() {
    if !nvrtc_or_skip("a_different_arch_gives_a_different_file") {
        return;
    }
    let scratch = Scratch::new("arch");
    let cache = KernelCache::new(Some(scratch.cache_dir()));
    let sm80 = cache.image(KERNEL, SM80).unwrap();
    let sm90 = cache.image(KERNEL, SM90).unwrap();
    assert_eq!(cache.stats(), stats(0, 0, 2, 0, 2));
    assert_ne!(*sm80, *sm90, "the two architectures compiled to the same bytes");

    let p80 = cache.file_path(KERNEL, SM80).unwrap().unwrap();
    let p90 = cache.file_path(KERNEL, SM90).unwrap().unwrap();
    assert_ne!(p80, p90);
    assert!(p80.to_string_lossy().contains("-sm_80-"));
    assert!(p90.to_string_lossy().contains("-sm_90-"));
    assert_eq!(files_in(&scratch.cache_dir()).len(), 2);
    assert_eq!(std::fs::read(&p80).unwrap(), *sm80);
    assert_eq!(std::fs::read(&p90).unwrap(), *sm90);
}

#[test]
fn a_folder_that_cannot_be_written_still_gives_an_image() {
    if !nvrtc_or_skip("a_folder_that_cannot_be_written_still_gives_an_image") {
        return;
    }
    let scratch = Scratch::new("unwritable");
    // A folder under a regular file can be neither created nor read (root or not).
    let file = scratch.0.join("a-regular-file");
    std::fs::write(&file, b"x").unwrap();
    let dir = file.join("kernels");
    for _ in 0..2 {
        let cache = KernelCache::new(Some(dir.clone()));
        let image = cache.image(KERNEL, SM80).unwrap();
        assert_eq!(check_cubin(&image, KERNEL), Ok(()));
        let s = cache.stats();
        assert_eq!((s.compiles, s.disk_hits, s.disk_writes, s.write_failures, s.rejected_files), (1, 0, 0, 1, 0));
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn without_a_disk_layer_every_instance_compiles_and_nothing_is_written() {
    if !nvrtc_or_skip("without_a_disk_layer_every_instance_compiles_and_nothing_is_written") {
        return;
    }
    let cache = KernelCache::new(None);
    assert_eq!(cache.dir(), None);
    assert_eq!(cache.file_path(KERNEL, SM80).unwrap(), None);
    cache.image(KERNEL, SM80).unwrap();
    cache.image(KERNEL, SM80).unwrap();
    assert_eq!(cache.stats(), stats(1, 0, 1, 0, 0));
}

#[test]
fn concurrent_requests_for_one_key_compile_once() {
    if !nvrtc_or_skip("concurrent_requests_for_one_key_compile_once") {
        return;
    }
    let scratch = Scratch::new("concurrent");
    let cache = KernelCache::new(Some(scratch.cache_dir()));
    let start = Barrier::new(THREADS);
    let images: Vec<Arc<Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    cache.image(KERNEL, SM90).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(images.iter().all(|i| Arc::ptr_eq(i, &images[0])), "threads got different images");
    assert_eq!(cache.stats(), stats(THREADS as u64 - 1, 0, 1, 0, 1));
    assert_eq!(files_in(&scratch.cache_dir()).len(), 1);
}

#[test]
fn the_global_cache_uses_the_folder_from_the_environment() {
    // No NVRTC needed: only the configuration is compared.
    assert_eq!(KernelCache::global().dir(), damacy_kernels::default_kernel_cache_dir().as_deref());
    assert!(std::ptr::eq(KernelCache::global(), KernelCache::global()));
}
