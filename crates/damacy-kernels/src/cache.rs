//! The compiled-kernel cache ([`KernelCache`], whose documentation has the guarantees).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::cubin::check_cubin;
use crate::error::{Error, Result};
use crate::images::ImageOrigin;
use crate::kernel::Kernel;
use crate::nvrtc;

/// Environment variable naming the disk cache folder (highest priority).
pub(crate) const DIR_ENV: &str = "DAMACY_KERNEL_CACHE_DIR";

/// Environment variable that turns the disk layer off when set to `off` or `0` (any case).
pub(crate) const SWITCH_ENV: &str = "DAMACY_KERNEL_CACHE";

/// Files larger than this (64 MiB) are rejected without being read; damacy's CUBINs are tens of
/// kilobytes.
pub(crate) const MAX_IMAGE_BYTES: u64 = 64 << 20;

/// The default disk cache folder, from the environment: `None` when `DAMACY_KERNEL_CACHE` is
/// `off` or `0`; else `DAMACY_KERNEL_CACHE_DIR`; else `$XDG_CACHE_HOME/damacy/kernels` (when
/// that is an absolute path); else `~/.cache/damacy/kernels`; `None` when none of these is set.
/// Empty variables count as unset.
#[must_use]
pub fn default_dir() -> Option<PathBuf> {
    dir_from(|name| std::env::var_os(name))
}

/// [`default_dir`] over any variable lookup, so it can be tested without touching the
/// process environment.
fn dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    if let Some(switch) = set(SWITCH_ENV) {
        let switch = switch.to_string_lossy().trim().to_ascii_lowercase();
        if switch == "off" || switch == "0" {
            return None;
        }
    }
    if let Some(dir) = set(DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    // The XDG base directory spec: a relative value is invalid and is ignored.
    if let Some(xdg) = set("XDG_CACHE_HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(xdg.join("damacy").join("kernels"));
    }
    set("HOME").map(|home| PathBuf::from(home).join(".cache").join("damacy").join("kernels"))
}

/// Compiles `kernel` for `sm_{major}{minor}` through the process-wide cache
/// ([`KernelCache::global`]), saying which layer answered.
pub(crate) fn compiled_image(kernel: Kernel, arch: (i32, i32)) -> Result<(Arc<Vec<u8>>, ImageOrigin)> {
    KernelCache::global().image_with_origin(kernel, arch)
}

/// How often each layer of a [`KernelCache`] answered, since the instance was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Requests answered from memory (including callers that waited for a concurrent compile of
    /// the same key).
    pub memory_hits: u64,
    /// Requests answered by a valid file on disk.
    pub disk_hits: u64,
    /// NVRTC compilations that succeeded.
    pub compiles: u64,
    /// Entries found at a key's path that were not loaded: not a regular file, unreadable,
    /// larger than 64 MiB, or failing [`check_cubin`].
    pub rejected_files: u64,
    /// Images written to disk (temporary file renamed into place).
    pub disk_writes: u64,
    /// Images that could not be written (folder missing and not creatable, read-only, full).
    pub write_failures: u64,
}

#[derive(Default)]
struct Counters {
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    compiles: AtomicU64,
    rejected_files: AtomicU64,
    disk_writes: AtomicU64,
    write_failures: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// What identifies one compiled image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    kernel: Kernel,
    source_hash: u64,
    arch: (i32, i32),
    nvrtc: (i32, i32),
}

impl Key {
    /// `{entry}-{hash:016x}-sm_{XY}-nvrtc{major}.{minor}.cubin`, e.g.
    /// `dmc_memcpy-0123456789abcdef-sm_90-nvrtc13.0.cubin`.
    fn file_name(&self) -> String {
        format!(
            "{}-{:016x}-{}-nvrtc{}.{}.cubin",
            self.kernel.name(),
            self.source_hash,
            arch_name(self.arch),
            self.nvrtc.0,
            self.nvrtc.1
        )
    }
}

fn arch_name((major, minor): (i32, i32)) -> String {
    format!("sm_{major}{minor}")
}

/// One key's entry: `None` until an image is loaded or compiled. Its mutex is held while the
/// image is produced, which makes concurrent requests for the key wait instead of compiling.
type Slot = Arc<Mutex<Option<Arc<Vec<u8>>>>>;

/// A cache of compiled kernel images (CUBIN): a memory layer owned by the instance and an
/// optional disk layer in one folder.
///
/// The compiled-kernel cache: NVRTC output kept in memory for the life of the process and,
/// optionally, on disk between processes. Devices whose architecture the shipped images serve
/// ([`crate::images`]) do not use it; it holds what NVRTC compiles at run time for the others.
///
/// An image is keyed by the kernel, the 64-bit hash of its self-contained source
/// ([`Kernel::source`]), the target architecture `sm_XY` and the NVRTC version; a change to any
/// of them is a different entry. The CUDA backend goes through [`KernelCache::global`], whose
/// disk folder comes from the environment (see [`default_kernel_cache_dir`](crate::default_kernel_cache_dir)).
/// Tests and tools make their own instance with [`KernelCache::new`].
///
/// The disk layer is best effort and never trusted:
/// - a missing, unreadable or read-only folder only costs a compile, never an error;
/// - files are written to a unique temporary file in the same folder and renamed into place, so
///   a reader sees the old file or the new one, never a partial one;
/// - a file is loaded only when it passes [`check_cubin`] (an ELF64 CUDA object whose headers and
///   sections lie inside the file and that names the kernel's entry point); anything else is
///   counted as rejected, recompiled and overwritten.
///
/// Within one instance, concurrent requests for one key compile once: the first caller reads or
/// compiles while later callers wait for its result (requests for other keys go on in parallel).
///
/// ```no_run
/// use damacy_kernels::Kernel;
/// use damacy_kernels::KernelCache;
///
/// let cache = KernelCache::new(Some(std::env::temp_dir().join("my-kernel-cache")));
/// let cubin = cache.image(Kernel::Memcpy, (9, 0))?; // compiles, writes the file
/// let again = cache.image(Kernel::Memcpy, (9, 0))?; // from memory
/// assert!(std::sync::Arc::ptr_eq(&cubin, &again));
/// assert_eq!(cache.stats().compiles, 1);
/// # Ok::<(), damacy_kernels::Error>(())
/// ```
///
/// The CUDA backend uses [`KernelCache::global`]; every other instance is independent (its own
/// memory layer and statistics), which is what tests use to observe the disk layer.
pub struct KernelCache {
    dir: Option<PathBuf>,
    slots: Mutex<HashMap<Key, Slot>>,
    counters: Counters,
}

impl fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelCache").field("dir", &self.dir).field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl KernelCache {
    /// A cache with an empty memory layer and, when `dir` is `Some`, a disk layer in that folder
    /// (created on the first write; it need not exist or be writable).
    #[must_use]
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir, slots: Mutex::new(HashMap::new()), counters: Counters::default() }
    }

    /// A cache whose disk folder is [`default_dir`] (read from the environment now).
    #[must_use]
    pub fn from_env() -> Self {
        Self::new(default_dir())
    }

    /// The process-wide cache the CUDA backend uses, made by [`KernelCache::from_env`] on first
    /// use (later changes to the environment are not seen).
    pub fn global() -> &'static KernelCache {
        static GLOBAL: OnceLock<KernelCache> = OnceLock::new();
        GLOBAL.get_or_init(KernelCache::from_env)
    }

    /// The disk layer's folder, `None` when the disk layer is off.
    #[must_use]
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// A snapshot of the counters.
    #[must_use]
    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            memory_hits: get(&c.memory_hits),
            disk_hits: get(&c.disk_hits),
            compiles: get(&c.compiles),
            rejected_files: get(&c.rejected_files),
            disk_writes: get(&c.disk_writes),
            write_failures: get(&c.write_failures),
        }
    }

    /// Where the image of `kernel` for `sm_{major}{minor}` lives on disk with the NVRTC now
    /// loaded; `Ok(None)` when the disk layer is off.
    ///
    /// # Errors
    /// [`Error::NoDevice`] when NVRTC cannot be loaded (its version is part of the key),
    /// [`Error::InvalidArgument`] for a negative architecture number.
    pub fn file_path(&self, kernel: Kernel, arch: (i32, i32)) -> Result<Option<PathBuf>> {
        let key = key(kernel, arch)?;
        Ok(self.dir.as_ref().map(|d| d.join(key.file_name())))
    }

    /// The CUBIN of `kernel` for `sm_{major}{minor}`: from memory, else from a valid file on
    /// disk, else compiled by NVRTC (and then written to disk, best effort). The same `Arc` is
    /// returned for every later request of the key.
    ///
    /// # Errors
    /// [`Error::NoDevice`] when NVRTC cannot be loaded, [`Error::Compile`] (with NVRTC's log) or
    /// [`Error::Nvrtc`] when an NVRTC call fails, [`Error::InvalidArgument`] for a negative
    /// architecture number. Disk problems are never errors. A failed compile is not cached: the
    /// next request tries again.
    pub fn image(&self, kernel: Kernel, arch: (i32, i32)) -> Result<Arc<Vec<u8>>> {
        self.image_with_origin(kernel, arch).map(|(image, _)| image)
    }

    /// [`KernelCache::image`], and which layer answered: [`ImageOrigin::MemoryCache`],
    /// [`ImageOrigin::DiskCache`] or [`ImageOrigin::Compiled`].
    ///
    /// # Errors
    /// As [`KernelCache::image`].
    pub fn image_with_origin(&self, kernel: Kernel, arch: (i32, i32)) -> Result<(Arc<Vec<u8>>, ImageOrigin)> {
        let key = key(kernel, arch)?;
        let slot = {
            // A panic while this map lock is held cannot leave it inconsistent (one insert).
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key).or_default())
        };
        // Held across the disk read and the compile (single flight for this key). The slot is
        // written only with a finished image, so a poisoned lock still holds a valid state.
        let mut entry = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(image) = entry.as_ref() {
            bump(&self.counters.memory_hits);
            return Ok((Arc::clone(image), ImageOrigin::MemoryCache));
        }
        let path = self.dir.as_ref().map(|d| d.join(key.file_name()));
        let (image, origin) = if let Some(bytes) = path.as_deref().and_then(|p| self.read_valid(p, kernel)) {
            bump(&self.counters.disk_hits);
            (bytes, ImageOrigin::DiskCache)
        } else {
            let out = nvrtc::compile(kernel, &arch_name(arch), &[])?;
            bump(&self.counters.compiles);
            // An image the checker would reject on the next read is not worth writing.
            if let Some(p) = &path
                && check_cubin(&out.image, kernel).is_ok()
            {
                match write_atomically(p, &out.image) {
                    Ok(()) => bump(&self.counters.disk_writes),
                    Err(_) => bump(&self.counters.write_failures),
                }
            }
            (out.image, ImageOrigin::Compiled)
        };
        let image = Arc::new(image);
        *entry = Some(Arc::clone(&image));
        Ok((image, origin))
    }

    /// The file at `path` when it is a valid CUBIN of `kernel`; `None` when nothing can be seen
    /// there (missing, the folder missing, unsearchable or under a regular file) or what is there
    /// is rejected (counted).
    fn read_valid(&self, path: &Path, kernel: Kernel) -> Option<Vec<u8>> {
        let meta = fs::metadata(path).ok()?;
        let bytes = if meta.is_file() && meta.len() <= MAX_IMAGE_BYTES { fs::read(path).ok() } else { None };
        match bytes {
            Some(b) if check_cubin(&b, kernel).is_ok() => Some(b),
            _ => {
                bump(&self.counters.rejected_files);
                None
            }
        }
    }
}

/// The cache key of `kernel` for `arch` with the NVRTC now loaded.
fn key(kernel: Kernel, arch: (i32, i32)) -> Result<Key> {
    if arch.0 < 0 || arch.1 < 0 {
        return Err(Error::InvalidArgument(format!(
            "kernel cache: architecture ({}, {}) has a negative number; pass the device's compute capability",
            arch.0, arch.1
        )));
    }
    let nvrtc = nvrtc::version()?;
    Ok(Key { kernel, source_hash: kernel.source_hash(), arch, nvrtc })
}

/// Writes `bytes` to a temporary file next to `path` (unique by process id, a process-wide
/// counter and the time), then renames it over `path`. The temporary file is removed on
/// failure.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().ok_or_else(|| io::Error::other("cache path has no parent folder"))?;
    let name = path.file_name().ok_or_else(|| io::Error::other("cache path has no file name"))?;
    fs::create_dir_all(dir)?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}-{}-{nanos}.tmp", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let tmp = dir.join(tmp_name);
    let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    let result = written.and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_name_carries_every_part_of_the_key() {
        let key = Key { kernel: Kernel::Lz4Decode, source_hash: 0xab, arch: (9, 0), nvrtc: (13, 0) };
        assert_eq!(key.file_name(), "dmc_lz4_decode-00000000000000ab-sm_90-nvrtc13.0.cubin");
        let key = Key { kernel: Kernel::Memcpy, source_hash: u64::MAX, arch: (12, 1), nvrtc: (12, 9) };
        assert_eq!(key.file_name(), "dmc_memcpy-ffffffffffffffff-sm_121-nvrtc12.9.cubin");
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn the_default_folder_follows_the_environment_in_order() {
        let all = [(DIR_ENV, "/explicit"), ("XDG_CACHE_HOME", "/xdg"), ("HOME", "/home/u")];
        assert_eq!(dir_from(env(&all)), Some(PathBuf::from("/explicit")));
        assert_eq!(dir_from(env(&all[1..])), Some(PathBuf::from("/xdg/damacy/kernels")));
        assert_eq!(dir_from(env(&all[2..])), Some(PathBuf::from("/home/u/.cache/damacy/kernels")));
        assert_eq!(dir_from(env(&[])), None);
        // Empty values count as unset; a relative XDG_CACHE_HOME is ignored.
        let odd = [(DIR_ENV, ""), ("XDG_CACHE_HOME", "relative/cache"), ("HOME", "/home/u")];
        assert_eq!(dir_from(env(&odd)), Some(PathBuf::from("/home/u/.cache/damacy/kernels")));
    }

    #[test]
    fn the_switch_turns_the_disk_layer_off() {
        for off in ["off", "0", "OFF", " Off "] {
            let vars = [(SWITCH_ENV, off), (DIR_ENV, "/explicit"), ("HOME", "/home/u")];
            assert_eq!(dir_from(env(&vars)), None, "{off:?}");
        }
        for on in ["on", "1", ""] {
            let vars = [(SWITCH_ENV, on), (DIR_ENV, "/explicit")];
            assert_eq!(dir_from(env(&vars)), Some(PathBuf::from("/explicit")), "{on:?}");
        }
    }

    #[test]
    fn a_negative_architecture_is_an_argument_error() {
        let cache = KernelCache::new(None);
        assert!(matches!(cache.image(Kernel::Memcpy, (-1, 0)), Err(Error::InvalidArgument(_))));
        assert_eq!(cache.stats(), CacheStats::default());
    }

    #[test]
    fn an_atomic_write_leaves_only_the_final_file() {
        let dir = std::env::temp_dir().join(format!(
            "damacy-cache-unit-{}-{}",
            std::process::id(),
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
        ));
        let path = dir.join("sub").join("x.cubin");
        write_atomically(&path, b"first").unwrap();
        write_atomically(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, [OsString::from("x.cubin")]);
        // Under a regular file the folder cannot be made: an error, and nothing left behind.
        assert!(write_atomically(&path.join("y.cubin"), b"z").is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
