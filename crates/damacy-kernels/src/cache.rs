//! The compiled-kernel cache: NVRTC output kept in memory for the life of the process and,
//! optionally, on disk between processes.
//!
//! An image is keyed by the kernel, the 64-bit hash of its self-contained source
//! ([`Kernel::source`]), the target architecture `sm_XY` and the NVRTC version; a change to any
//! of them is a different entry. The CUDA backend goes through [`KernelCache::global`], whose
//! disk folder comes from the environment (see [`default_dir`]). Tests and tools make their own
//! instance with [`KernelCache::new`].
//!
//! The disk layer is best effort and never trusted:
//! - a missing, unreadable or read-only folder only costs a compile, never an error;
//! - files are written to a unique temporary file in the same folder and renamed into place, so
//!   a reader sees the old file or the new one, never a partial one;
//! - a file is loaded only when it passes [`check_cubin`] (an ELF64 CUDA object whose headers and
//!   sections lie inside the file and that names the kernel's entry point); anything else is
//!   counted as rejected, recompiled and overwritten.
//!
//! Within one instance, concurrent requests for one key compile once: the first caller reads or
//! compiles while later callers wait for its result (requests for other keys go on in parallel).
//!
//! ```no_run
//! use damacy_kernels::Kernel;
//! use damacy_kernels::cache::KernelCache;
//!
//! let cache = KernelCache::new(Some(std::env::temp_dir().join("my-kernel-cache")));
//! let cubin = cache.image(Kernel::Memcpy, (9, 0))?; // compiles, writes the file
//! let again = cache.image(Kernel::Memcpy, (9, 0))?; // from memory
//! assert!(std::sync::Arc::ptr_eq(&cubin, &again));
//! assert_eq!(cache.stats().compiles, 1);
//! # Ok::<(), damacy_kernels::Error>(())
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::kernel::{Kernel, source_hash};
use crate::nvrtc;

/// Environment variable naming the disk cache folder (highest priority).
pub const DIR_ENV: &str = "DAMACY_KERNEL_CACHE_DIR";

/// Environment variable that turns the disk layer off when set to `off` or `0` (any case).
pub const SWITCH_ENV: &str = "DAMACY_KERNEL_CACHE";

/// Files larger than this (64 MiB) are rejected without being read; damacy's CUBINs are tens of
/// kilobytes.
pub const MAX_IMAGE_BYTES: u64 = 64 << 20;

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
/// ([`KernelCache::global`]).
pub(crate) fn compiled_image(kernel: Kernel, arch: (i32, i32)) -> Result<Arc<Vec<u8>>> {
    KernelCache::global().image(kernel, arch)
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
    /// larger than [`MAX_IMAGE_BYTES`], or failing [`check_cubin`].
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
/// optional disk layer in one folder. See the [module documentation](self) for the guarantees.
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
            return Ok(Arc::clone(image));
        }
        let path = self.dir.as_ref().map(|d| d.join(key.file_name()));
        let image = if let Some(bytes) = path.as_deref().and_then(|p| self.read_valid(p, kernel)) {
            bump(&self.counters.disk_hits);
            bytes
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
            out.image
        };
        let image = Arc::new(image);
        *entry = Some(Arc::clone(&image));
        Ok(image)
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
    Ok(Key { kernel, source_hash: source_hash(&kernel.source()), arch, nvrtc })
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

/// ELF `e_machine` of NVIDIA CUDA objects.
pub const EM_CUDA: u16 = 190;

const ELF64_EHDR: usize = 64;
const ELF64_PHDR: usize = 56;
const ELF64_SHDR: usize = 64;
const SHT_NOBITS: u32 = 8;

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Whether `[offset, offset + count * entry)` lies inside a file of `len` bytes.
fn table_inside(offset: u64, count: u64, entry: u64, len: usize) -> bool {
    count.checked_mul(entry).and_then(|n| n.checked_add(offset)).is_some_and(|end| end <= len as u64)
}

/// Checks that `image` looks like a complete CUBIN of `kernel`: an ELF64 little-endian object
/// with `e_machine` `EM_CUDA` (190); its program and section header tables and the contents of
/// every section lie inside the image; and the kernel's entry point name appears as a
/// NUL-terminated symbol or section name. This catches truncated, overwritten and misplaced
/// files; it does not prove the code is loadable (the driver decides that).
///
/// # Errors
/// What is wrong, in words.
pub fn check_cubin(image: &[u8], kernel: Kernel) -> std::result::Result<(), &'static str> {
    if image.len() < ELF64_EHDR {
        return Err("shorter than an ELF64 header");
    }
    if image[..4] != *b"\x7fELF" {
        return Err("no ELF magic");
    }
    if image[4] != 2 {
        return Err("not a 64-bit ELF object");
    }
    if image[5] != 1 {
        return Err("not a little-endian ELF object");
    }
    let field16 = |at| le_u16(image, at).ok_or("ELF header cut short");
    let field64 = |at| le_u64(image, at).ok_or("ELF header cut short");
    if field16(18)? != EM_CUDA {
        return Err("ELF machine is not EM_CUDA (190)");
    }
    let (phoff, phentsize, phnum) = (field64(0x20)?, field16(0x36)?, field16(0x38)?);
    let (shoff, shentsize, shnum, shstrndx) = (field64(0x28)?, field16(0x3a)?, field16(0x3c)?, field16(0x3e)?);
    if phnum > 0
        && (usize::from(phentsize) != ELF64_PHDR || !table_inside(phoff, phnum.into(), ELF64_PHDR as u64, image.len()))
    {
        return Err("program header table outside the file");
    }
    if shnum == 0 || usize::from(shentsize) != ELF64_SHDR || shstrndx >= shnum {
        return Err("no usable section header table");
    }
    if !table_inside(shoff, shnum.into(), ELF64_SHDR as u64, image.len()) {
        return Err("section header table outside the file");
    }
    for i in 0..u64::from(shnum) {
        // In range: the whole table was checked to lie inside the image.
        let at = usize::try_from(shoff + i * ELF64_SHDR as u64).map_err(|_| "section header table outside the file")?;
        let kind = le_u32(image, at + 4).ok_or("section header cut short")?;
        let (offset, size) = (
            le_u64(image, at + 0x18).ok_or("section header cut short")?,
            le_u64(image, at + 0x20).ok_or("section header cut short")?,
        );
        if kind != SHT_NOBITS && !table_inside(offset, size, 1, image.len()) {
            return Err("a section's contents lie outside the file");
        }
    }
    let mut name = kernel.name().as_bytes().to_vec();
    name.push(0);
    let named = image.windows(name.len() + 1).any(|w| (w[0] == 0 || w[0] == b'.') && w[1..] == *name.as_slice());
    if !named {
        return Err("the kernel's entry point name is missing");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 CUDA object: header, a NULL section, a string table section holding
    /// `.text.dmc_memcpy\0`, then the section header table.
    fn fake_cubin() -> Vec<u8> {
        let strtab = b"\0.shstrtab\0.text.dmc_memcpy\0";
        let mut b = vec![0u8; ELF64_EHDR];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        let str_off = b.len() as u64;
        b.extend_from_slice(strtab);
        let shoff = b.len() as u64;
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        b[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[0u8; 64]); // SHT_NULL
        let mut sh = [0u8; 64];
        sh[4..8].copy_from_slice(&3u32.to_le_bytes()); // SHT_STRTAB
        sh[0x18..0x20].copy_from_slice(&str_off.to_le_bytes());
        sh[0x20..0x28].copy_from_slice(&(strtab.len() as u64).to_le_bytes());
        b.extend_from_slice(&sh);
        b
    }

    #[test]
    fn check_cubin_accepts_a_well_formed_object_and_names_each_defect() {
        let good = fake_cubin();
        assert_eq!(check_cubin(&good, Kernel::Memcpy), Ok(()));
        assert_eq!(check_cubin(&good, Kernel::Lz4Decode), Err("the kernel's entry point name is missing"));
        assert_eq!(check_cubin(&good[..good.len() - 1], Kernel::Memcpy), Err("section header table outside the file"));
        assert_eq!(check_cubin(&good[..40], Kernel::Memcpy), Err("shorter than an ELF64 header"));
        assert_eq!(check_cubin(&[], Kernel::Memcpy), Err("shorter than an ELF64 header"));

        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("no ELF magic"));
        let mut bad = good.clone();
        bad[4] = 1;
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("not a 64-bit ELF object"));
        let mut bad = good.clone();
        bad[5] = 2;
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("not a little-endian ELF object"));
        let mut bad = good.clone();
        bad[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("ELF machine is not EM_CUDA (190)"));
        let mut bad = good.clone();
        bad[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes()); // offset overflows
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("section header table outside the file"));
        let mut bad = good.clone();
        bad[0x3c..0x3e].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("no usable section header table"));
        let mut bad = good.clone();
        bad[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // one program header at offset 0 of size 0
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("program header table outside the file"));
        // A section whose contents run past the end of the file.
        let mut bad = good.clone();
        let sh1 = bad.len() - 64;
        bad[sh1 + 0x20..sh1 + 0x28].copy_from_slice(&4096u64.to_le_bytes());
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("a section's contents lie outside the file"));
        // ... which is fine for SHT_NOBITS (.bss-like) sections, which have no file contents.
        bad[sh1 + 4..sh1 + 8].copy_from_slice(&SHT_NOBITS.to_le_bytes());
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Ok(()));
    }

    #[test]
    fn the_entry_name_must_be_a_whole_name() {
        // `dmc_memcpyX` or `xdmc_memcpy` is not the entry point `dmc_memcpy`.
        let mut image = fake_cubin();
        let at = image.windows(11).position(|w| w == b"dmc_memcpy\0").unwrap();
        image[at + 10] = b'X';
        assert!(check_cubin(&image, Kernel::Memcpy).is_err());
        let mut image = fake_cubin();
        image[at - 1] = b'x';
        assert!(check_cubin(&image, Kernel::Memcpy).is_err());
    }

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
