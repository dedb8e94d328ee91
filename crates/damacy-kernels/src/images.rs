//! Kernel images carried in the binary, and where each loaded kernel's image came from.
//!
//! When the crate is built with NVRTC at hand (found the way [`crate::nvrtc`] finds it:
//! `DAMACY_NVRTC_DIR`, the workspace's `.nvrtc/` wheel folder, a CUDA toolkit, the system's
//! library path), the build script compiles every kernel to a cubin for `sm_80` and `sm_90` and to
//! PTX for `compute_90` — the same source and the same options as a run-time compile
//! ([`crate::nvrtc::compile`] with no extra options) — and embeds them ([`shipped`]). A CUDA
//! device loads its kernels from them with `cuModuleLoadData`: no NVRTC call, no NVRTC library
//! needed on the machine. An `sm_8`x device takes the `sm_80` cubin, `sm_90` its own, a newer
//! architecture the `compute_90` PTX (compiled by the driver). NVRTC runs at run time (through the
//! kernel cache, `KernelCache`) only
//! - for an architecture no shipped image serves (below `sm_80`),
//! - when the driver is older than the NVRTC that built the images (a CUDA 12 driver cannot load
//!   NVRTC 13's cubins),
//! - when the driver refuses a shipped image (`cuModuleLoadData` fails),
//! - in a build without images (no NVRTC found at build time: the build says so in a cargo
//!   warning; `DAMACY_SHIPPED_KERNELS=off` skips them on purpose),
//!
//! and [`KernelImages::fallback`] says which.
//!
//! The emulator runs host code, yet goes through the same lookup: it stands in for an `sm_90`
//! device and records the shipped image each kernel would load, so a fresh process's first batch
//! on `Device::emulated` shows what a GPU's would (and that no NVRTC compile ran:
//! [`nvrtc_compiles`]).
//!
//! ```
//! use damacy_kernels::Kernel;
//! use damacy_kernels::images;
//! match images::select(Kernel::Memcpy, (9, 0)) {
//!     Ok(image) => assert_eq!((image.target(), image.file()), ("sm_90", "memcpy.cu")),
//!     Err(why) => println!("no shipped image: {why}"),
//! }
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
// The image log is a backend's (built with neither, there is none).
#[cfg(any(feature = "emulate", feature = "cuda"))]
use std::sync::{Mutex, PoisonError};

pub use crate::cubin::{check_cubin, cubin_sm};
use crate::kernel::Kernel;

include!(concat!(env!("OUT_DIR"), "/shipped_images.rs"));

/// The compute capability the emulator stands in for when it looks its kernels up.
pub const EMULATED_ARCH: (i32, i32) = (9, 0);

/// One kernel image compiled when the crate was built.
#[derive(Clone, Copy, Debug)]
pub struct ShippedImage {
    file: &'static str,
    target: &'static str,
    source_hash: u64,
    image: &'static [u8],
}

impl ShippedImage {
    /// The kernel source file in `kernels/` (`zstd.cu`).
    #[must_use]
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// The NVRTC target: `sm_XY` (a cubin) or `compute_XY` (PTX).
    #[must_use]
    pub fn target(&self) -> &'static str {
        self.target
    }

    /// Whether the image is PTX text (NUL-terminated) rather than a cubin.
    #[must_use]
    pub fn is_ptx(&self) -> bool {
        self.target.starts_with("compute_")
    }

    /// The architecture of the target as (major, minor): `sm_90` → (9, 0), `sm_120` → (12, 0).
    #[must_use]
    pub fn arch(&self) -> (i32, i32) {
        parse_arch(self.target).unwrap_or((0, 0))
    }

    /// The hash ([`Kernel::source_hash`]) of the source the image was compiled from.
    #[must_use]
    pub fn source_hash(&self) -> u64 {
        self.source_hash
    }

    /// The bytes handed to `cuModuleLoadData`.
    #[must_use]
    pub fn image(&self) -> &'static [u8] {
        self.image
    }
}

/// `sm_90`/`compute_90` → (9, 0); the last digit is the minor version.
fn parse_arch(target: &str) -> Option<(i32, i32)> {
    let digits = target.strip_prefix("sm_").or_else(|| target.strip_prefix("compute_"))?;
    let n: i32 = digits.parse().ok()?;
    Some((n / 10, n % 10))
}

/// Every image this build carries (empty in a build without them; see [`shipped_note`]).
#[must_use]
pub fn shipped() -> &'static [ShippedImage] {
    SHIPPED
}

/// The NVRTC version (major, minor) that compiled the shipped images; `None` without images.
#[must_use]
pub fn shipped_nvrtc() -> Option<(i32, i32)> {
    SHIPPED_NVRTC
}

/// One line about the shipped images, `damacy shipped kernel images: NVRTC 13.0, 24 images
/// (sm_80 sm_90 compute_90)`, or why there are none.
/// `benches/gpu/bundle.sh` looks for this line in the binaries it packs.
#[must_use]
pub fn shipped_note() -> &'static str {
    SHIPPED_NOTE
}

static NVRTC_COMPILES: AtomicU64 = AtomicU64::new(0);

/// NVRTC compilations started in this process (run-time compiles: the kernel cache's, and
/// direct [`crate::nvrtc::compile`] calls). 0 while every kernel came from a shipped image, the
/// cache's disk layer or the emulator.
#[must_use]
pub fn nvrtc_compiles() -> u64 {
    NVRTC_COMPILES.load(Ordering::Relaxed)
}

#[cfg(feature = "cuda")]
pub(crate) fn count_nvrtc_compile() {
    NVRTC_COMPILES.fetch_add(1, Ordering::Relaxed);
}

/// The shipped image that serves `kernel` on a device of compute capability `arch`, or why
/// none does. The image must have been compiled from this build's source of the kernel (its
/// hash is checked, so a stale image is never used); of those, a cubin for `arch` itself, else
/// a cubin of the same major version and a lower minor one (binary compatible: `sm_80` on `sm_86`),
/// else PTX of the highest architecture not above `arch` (the driver compiles it: `compute_90` on
/// `sm_100`).
pub fn select(kernel: Kernel, arch: (i32, i32)) -> Result<&'static ShippedImage, String> {
    select_from(SHIPPED, kernel.file(), kernel.source_hash(), arch)
}

/// [`select`] over any table, for tests.
pub(crate) fn select_from<'a>(
    table: &'a [ShippedImage],
    file: &str,
    source_hash: u64,
    arch: (i32, i32),
) -> Result<&'a ShippedImage, String> {
    if table.is_empty() {
        return Err(SHIPPED_NOTE.to_owned());
    }
    let mine: Vec<&ShippedImage> = table.iter().filter(|i| i.file == file).collect();
    if mine.is_empty() {
        return Err(format!("this build carries no image of {file}"));
    }
    let fresh: Vec<&ShippedImage> = mine.iter().copied().filter(|i| i.source_hash == source_hash).collect();
    if fresh.is_empty() {
        return Err(format!(
            "the shipped images of {file} were compiled from another source (hash {:016x}, this build's {source_hash:016x})",
            mine[0].source_hash
        ));
    }
    let cubin =
        fresh.iter().filter(|i| !i.is_ptx() && i.arch().0 == arch.0 && i.arch().1 <= arch.1).max_by_key(|i| i.arch().1);
    let ptx = fresh.iter().filter(|i| i.is_ptx() && i.arch() <= arch).max_by_key(|i| i.arch());
    cubin.or(ptx).copied().ok_or_else(|| {
        let targets: Vec<&str> = fresh.iter().map(|i| i.target).collect();
        format!("no shipped image of {file} serves sm_{}{} (shipped: {})", arch.0, arch.1, targets.join(", "))
    })
}

/// Where a loaded kernel's image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageOrigin {
    /// A shipped image of this target (`sm_90`, `compute_90`).
    Shipped(&'static str),
    /// The kernel cache's memory layer (compiled or read earlier in this process).
    MemoryCache,
    /// A valid file of the kernel cache's disk layer.
    DiskCache,
    /// Compiled by NVRTC now.
    Compiled,
    /// The emulator's host code, with no shipped image to stand for it.
    HostOnly,
}

/// Which kernels a device has loaded and where their images came from ([`crate::Device::kernel_images`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KernelImages {
    /// Each kernel loaded so far, in load order, with where its image came from.
    pub loaded: Vec<(Kernel, ImageOrigin)>,
    /// Why some kernels did not come from shipped images (no image for the architecture, a
    /// driver too old for them, an image the driver refused, a build without images); `None`
    /// when nothing fell back.
    pub fallback: Option<String>,
}

impl KernelImages {
    /// Kernels loaded from shipped images.
    #[must_use]
    pub fn shipped(&self) -> usize {
        self.loaded.iter().filter(|(_, o)| matches!(o, ImageOrigin::Shipped(_))).count()
    }

    /// Kernels loaded from the kernel cache (memory or disk).
    #[must_use]
    pub fn cached(&self) -> usize {
        self.loaded.iter().filter(|(_, o)| matches!(o, ImageOrigin::MemoryCache | ImageOrigin::DiskCache)).count()
    }

    /// Kernels compiled by NVRTC when they were loaded.
    #[must_use]
    pub fn compiled(&self) -> usize {
        self.loaded.iter().filter(|(_, o)| *o == ImageOrigin::Compiled).count()
    }

    /// One word for the whole: `shipped`, `cache`, `compiled`, `mixed`, `host code` or `none`.
    #[must_use]
    pub fn source(&self) -> &'static str {
        let n = self.loaded.len();
        match (self.shipped(), self.cached(), self.compiled()) {
            _ if n == 0 => "none",
            (s, _, _) if s == n => "shipped",
            (_, c, _) if c == n => "cache",
            (_, _, c) if c == n => "compiled",
            (0, 0, 0) => "host code",
            _ => "mixed",
        }
    }
}

impl fmt::Display for KernelImages {
    /// `kernels: 8 from shipped images (sm_90), 0 from the kernel cache, 0 compiled by NVRTC`,
    /// then why some fell back, if any did.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut targets: Vec<&str> = self
            .loaded
            .iter()
            .filter_map(|(_, o)| if let ImageOrigin::Shipped(t) = o { Some(*t) } else { None })
            .collect();
        targets.sort_unstable();
        targets.dedup();
        write!(f, "kernels: {} from shipped images", self.shipped())?;
        if !targets.is_empty() {
            write!(f, " ({})", targets.join(", "))?;
        }
        write!(f, ", {} from the kernel cache, {} compiled by NVRTC", self.cached(), self.compiled())?;
        let host = self.loaded.iter().filter(|(_, o)| *o == ImageOrigin::HostOnly).count();
        if host > 0 {
            write!(f, ", {host} host code only")?;
        }
        if let Some(why) = &self.fallback {
            write!(f, " (not shipped: {why})")?;
        }
        Ok(())
    }
}

/// A device's record of its loaded kernels.
#[cfg(any(feature = "emulate", feature = "cuda"))]
#[derive(Debug, Default)]
pub(crate) struct ImageLog(Mutex<KernelImages>);

#[cfg(any(feature = "emulate", feature = "cuda"))]
impl ImageLog {
    /// A log that starts with `fallback` as the reason shipped images are not used.
    #[cfg(feature = "cuda")]
    pub(crate) fn with_fallback(fallback: Option<String>) -> Self {
        Self(Mutex::new(KernelImages { loaded: Vec::new(), fallback }))
    }

    /// Whether `kernel` was loaded already.
    #[cfg(feature = "emulate")]
    pub(crate) fn has(&self, kernel: Kernel) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).loaded.iter().any(|(k, _)| *k == kernel)
    }

    /// Records that `kernel` was loaded from `origin` (once per kernel).
    pub(crate) fn record(&self, kernel: Kernel, origin: ImageOrigin) {
        let mut log = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !log.loaded.iter().any(|(k, _)| *k == kernel) {
            log.loaded.push((kernel, origin));
        }
    }

    /// Adds a reason some kernel did not come from a shipped image (once per distinct reason).
    pub(crate) fn fall_back(&self, why: String) {
        let mut log = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        log.fallback = Some(match log.fallback.take() {
            Some(before) if before.split("; ").any(|r| r == why) => before,
            Some(before) => format!("{before}; {why}"),
            None => why,
        });
    }

    pub(crate) fn snapshot(&self) -> KernelImages {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The emulator's lookup of `kernel`: the shipped image an `sm_90` device would load, checked
/// like a file of the kernel cache (a whole ELF CUDA object for `sm_90` naming the kernel's entry
/// point); host code only when there is none.
#[cfg(feature = "emulate")]
pub(crate) fn emulated_lookup(kernel: Kernel) -> (ImageOrigin, Option<String>) {
    match select(kernel, EMULATED_ARCH) {
        Ok(image) => match check_shipped(image, kernel) {
            Ok(()) => (ImageOrigin::Shipped(image.target), None),
            Err(why) => (ImageOrigin::HostOnly, Some(why)),
        },
        Err(why) => (ImageOrigin::HostOnly, Some(why)),
    }
}

/// Checks a shipped image before it is handed to the driver: a cubin must pass
/// [`crate::cubin::check_cubin`] and be for its target's architecture; PTX must be NUL-terminated
/// text that defines the kernel's entry point.
#[cfg(any(feature = "emulate", feature = "cuda", test))]
pub(crate) fn check_shipped(image: &ShippedImage, kernel: Kernel) -> Result<(), String> {
    let bytes = image.image;
    let what = || format!("the shipped {} image of {}", image.target, image.file);
    if image.is_ptx() {
        let text = bytes.strip_suffix(&[0]).ok_or_else(|| format!("{} is not NUL-terminated", what()))?;
        let entry = format!(".entry {}(", kernel.name());
        let text = std::str::from_utf8(text).map_err(|_| format!("{} is not text", what()))?;
        return if text.contains(&entry) { Ok(()) } else { Err(format!("{} has no `{entry}`", what())) };
    }
    check_cubin(bytes, kernel).map_err(|e| format!("{}: {e}", what()))?;
    let (major, minor) = image.arch();
    match cubin_sm(bytes) {
        Some(sm) if sm == (major * 10 + minor) as u32 => Ok(()),
        sm => Err(format!("{} is for sm_{} instead", what(), sm.map_or_else(|| "?".to_owned(), |s| s.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn image(file: &'static str, target: &'static str, source_hash: u64) -> ShippedImage {
        ShippedImage { file, target, source_hash, image: b"" }
    }

    const TABLE: &[ShippedImage] = &[
        image("lz4.cu", "sm_80", 7),
        image("lz4.cu", "sm_90", 7),
        image("lz4.cu", "compute_90", 7),
        image("zstd.cu", "sm_90", 9),
    ];

    fn pick(file: &str, hash: u64, arch: (i32, i32)) -> Result<&'static str, String> {
        select_from(TABLE, file, hash, arch).map(|i| i.target)
    }

    #[test]
    fn each_architecture_takes_its_cubin_a_compatible_one_or_ptx() {
        assert_eq!(pick("lz4.cu", 7, (9, 0)), Ok("sm_90"));
        assert_eq!(pick("lz4.cu", 7, (8, 0)), Ok("sm_80"));
        // sm_86/sm_89 run the sm_80 cubin
        assert_eq!(pick("lz4.cu", 7, (8, 9)), Ok("sm_80"));
        // Blackwell: the driver compiles the compute_90 PTX
        assert_eq!(pick("lz4.cu", 7, (10, 0)), Ok("compute_90"));
        assert_eq!(pick("lz4.cu", 7, (12, 0)), Ok("compute_90"));
        // older than every image: run-time NVRTC, and the reason names what is shipped
        let e = pick("lz4.cu", 7, (7, 5)).unwrap_err();
        assert!(e.contains("sm_75") && e.contains("sm_80, sm_90, compute_90"), "{e}");
        // zstd.cu ships only an sm_90 cubin: nothing serves sm_100
        assert_eq!(pick("zstd.cu", 9, (9, 0)), Ok("sm_90"));
        assert!(pick("zstd.cu", 9, (10, 0)).is_err());
        assert!(pick("memcpy.cu", 1, (9, 0)).unwrap_err().contains("no image of memcpy.cu"));
    }

    #[test]
    fn a_stale_image_is_never_used() {
        // The images of lz4.cu were compiled from source hash 7; this build's source is 8.
        let e = pick("lz4.cu", 8, (9, 0)).unwrap_err();
        assert!(e.contains("another source") && e.contains(&format!("{:016x}", 8)), "{e}");
        // and the real table: a hash that is not this build's finds nothing
        if let Some(i) = shipped().first() {
            let k = Kernel::ALL.into_iter().find(|k| k.file() == i.file()).unwrap();
            assert!(select_from(shipped(), k.file(), !k.source_hash(), i.arch()).is_err());
        }
    }

    #[test]
    fn the_shipped_table_matches_this_builds_sources() {
        // Every shipped image names a kernel file and was compiled from its current source,
        // and every image passes the check a device applies before loading it.
        for i in shipped() {
            let k = Kernel::ALL.into_iter().find(|k| k.file() == i.file()).expect("a kernel file");
            assert_eq!(i.source_hash(), k.source_hash(), "{} {}", i.file(), i.target());
            check_shipped(i, k).unwrap();
        }
        if shipped().is_empty() {
            eprintln!("no shipped images in this build: {}", shipped_note());
        } else {
            assert_eq!(shipped().len(), Kernel::ALL.len() * crate::source::SHIPPED_TARGETS.len(), "{}", shipped_note());
        }
    }

    #[test]
    fn the_summary_counts_each_origin() {
        let mut k = KernelImages::default();
        assert_eq!(k.source(), "none");
        k.loaded =
            vec![(Kernel::Memcpy, ImageOrigin::Shipped("sm_90")), (Kernel::Lz4Decode, ImageOrigin::Shipped("sm_90"))];
        assert_eq!(k.source(), "shipped");
        assert_eq!(
            k.to_string(),
            "kernels: 2 from shipped images (sm_90), 0 from the kernel cache, 0 compiled by NVRTC"
        );
        k.loaded.push((Kernel::Crc32c, ImageOrigin::Compiled));
        k.fallback = Some("the driver refused it".into());
        assert_eq!(k.source(), "mixed");
        assert_eq!(
            k.to_string(),
            "kernels: 2 from shipped images (sm_90), 0 from the kernel cache, 1 compiled by NVRTC (not shipped: the driver refused it)"
        );
    }
}
