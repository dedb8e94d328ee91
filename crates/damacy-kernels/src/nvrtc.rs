//! NVRTC: locating the library, compiling a kernel for an architecture, and keeping the log.
//!
//! The kernels for `sm_80` and `sm_90` (and PTX for later architectures) are compiled when the crate
//! is built and carried in the binary ([`crate::images`]); NVRTC runs in the process only for
//! other architectures, or when the driver refuses a shipped image.
//!
//! cudarc opens `libnvrtc.so*` by name only. [`load`] first preloads it by absolute path from
//! `DAMACY_NVRTC_DIR` (the `nvidia/cu13/lib` folder of the `nvidia-cuda-nvrtc` wheel, or the
//! `nvidia/cuda_nvrtc/lib` folder of the CUDA 12 wheel) or from the workspace's `.nvrtc/` folder
//! that `make nvrtc` fills (straight in it or in a versioned subfolder such as
//! `.nvrtc/13.0.88/`), so no `LD_LIBRARY_PATH` is needed. Of the libraries found it loads the
//! newest one whose cubins the installed driver can load (`choose`).

use std::ffi::{CString, c_char, c_int};
use std::path::PathBuf;
use std::sync::OnceLock;

use cudarc::nvrtc::{result, sys};

use crate::error::{Error, Result};
use crate::kernel::Kernel;

/// The output of one NVRTC compilation.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// CUBIN for `sm_XY` targets, PTX (NUL-terminated text) for `compute_XY` targets.
    pub image: Vec<u8>,
    /// NVRTC's log (includes ptxas output with `--ptxas-options=-v`).
    pub log: String,
}

fn candidate_dirs() -> Vec<PathBuf> {
    crate::source::nvrtc_dirs(
        std::env::var_os("DAMACY_NVRTC_DIR").map(PathBuf::from),
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.nvrtc"),
    )
}

/// One NVRTC library on disk: its path and the CUDA major version of its soname
/// (`libnvrtc.so.13` → 13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Library {
    /// The library file.
    pub path: PathBuf,
    /// Its CUDA major version.
    pub major: i32,
}

/// The NVRTC libraries in the candidate folders (`DAMACY_NVRTC_DIR` first, then the
/// workspace's `.nvrtc/`), in preference order: folder by folder, the newest first in each.
fn find_libraries(dirs: &[PathBuf]) -> Vec<Library> {
    let mut found = Vec::new();
    for dir in dirs {
        let mut here: Vec<Library> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let major = name.strip_prefix("libnvrtc.so.")?.split('.').next()?.parse().ok()?;
                Some(Library { path: e.path(), major })
            })
            .collect();
        here.sort_by(|a, b| b.major.cmp(&a.major).then_with(|| a.path.cmp(&b.path)));
        here.dedup_by_key(|l| l.major);
        found.extend(here);
    }
    found
}

/// Which of `majors` (the CUDA major versions of the NVRTC libraries found, in preference
/// order) to load for a driver reporting `driver` from `cuDriverGetVersion`: the first whose
/// cubins the driver loads (see [`driver_accepts`]); with no driver (nothing to load cubins
/// into: compile checks, the emulator) or when none qualifies, the first. `None` when nothing
/// was found.
#[must_use]
pub(crate) fn choose(majors: &[i32], driver: Option<i32>) -> Option<usize> {
    if majors.is_empty() {
        return None;
    }
    let accepted = driver.and_then(|d| majors.iter().position(|&m| driver_accepts(d, (m, 0)).is_ok()));
    Some(accepted.unwrap_or(0))
}

/// The CUDA version of the installed driver (`cuDriverGetVersion`, 1000 × major + 10 × minor),
/// when there is a driver; it needs no `cuInit`.
fn driver_version() -> Option<i32> {
    // SAFETY: only probes whether libcuda can be opened; no symbol is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    let mut v: c_int = 0;
    // SAFETY: cuDriverGetVersion may be called before cuInit; `v` is valid for writes.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&raw mut v) }.result().ok()?;
    Some(v)
}

/// What [`load`] found and chose.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Every NVRTC library found, in preference order.
    pub found: Vec<Library>,
    /// The one loaded (an index into `found`); `None` when NVRTC comes from the system's
    /// library path instead.
    pub chosen: Option<usize>,
    /// The driver's `cuDriverGetVersion`, when there is a driver.
    pub driver: Option<i32>,
}

impl Loaded {
    /// The libraries found, for messages: `13 (/path/libnvrtc.so.13), 12 (…)`, or "none".
    #[must_use]
    pub fn describe_found(&self) -> String {
        if self.found.is_empty() {
            return "none".to_owned();
        }
        self.found.iter().map(|l| format!("{} ({})", l.major, l.path.display())).collect::<Vec<_>>().join(", ")
    }
}

fn loaded() -> &'static std::result::Result<Loaded, String> {
    static LOADED: OnceLock<std::result::Result<Loaded, String>> = OnceLock::new();
    LOADED.get_or_init(|| {
        let found = find_libraries(&candidate_dirs());
        let driver = driver_version();
        let chosen = choose(&found.iter().map(|l| l.major).collect::<Vec<_>>(), driver);
        let mut tried = Vec::new();
        if let Some(lib) = chosen.map(|i| &found[i]) {
            let dir = lib.path.parent().map(PathBuf::from).unwrap_or_default();
            // libnvrtc dlopens its builtins library by soname at compile time; loading it
            // first by absolute path lets that lookup succeed without LD_LIBRARY_PATH.
            let mut builtins: Vec<PathBuf> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
                })
                .collect();
            builtins.sort();
            for path in builtins {
                // SAFETY: loading the builtins library runs only its initialisers.
                if let Ok(l) = unsafe { libloading::Library::new(&path) } {
                    std::mem::forget(l);
                }
            }
            // SAFETY: loading NVRTC runs only its library initialisers, which have no
            // preconditions.
            match unsafe { libloading::Library::new(&lib.path) } {
                // Keep it loaded for the life of the process: cudarc then finds it by its
                // soname (and, only this one being loaded, not another version).
                Ok(l) => std::mem::forget(l),
                Err(e) => tried.push(format!("{}: {e}", lib.path.display())),
            }
        }
        // SAFETY: only probes whether the library can be opened; no symbol is called.
        if unsafe { sys::is_culib_present() } {
            Ok(Loaded { chosen: if tried.is_empty() { chosen } else { None }, found, driver })
        } else {
            Err(format!(
                "libnvrtc not found: install the PyPI wheel (`pip install --target .nvrtc \"nvidia-cuda-nvrtc>=13,<14\"`, or `nvidia-cuda-nvrtc-cu12` for a CUDA 12 driver) or set DAMACY_NVRTC_DIR to its lib folder{}",
                if tried.is_empty() { String::new() } else { format!(" ({})", tried.join("; ")) }
            ))
        }
    })
}

/// Makes libnvrtc loadable by cudarc, choosing among the NVRTC libraries found (in
/// `DAMACY_NVRTC_DIR`, then the workspace's `.nvrtc/`) the newest one whose cubins the
/// installed driver loads: with a CUDA 12 driver and both the CUDA 13 and the CUDA 12 wheels
/// installed, NVRTC 12 (`choose`). Returns the reason when none can be found.
pub fn load() -> std::result::Result<(), String> {
    loaded().as_ref().map(|_| ()).map_err(Clone::clone)
}

/// What [`load`] found and chose (the reason when NVRTC cannot be loaded).
pub fn loaded_libraries() -> std::result::Result<&'static Loaded, String> {
    loaded().as_ref().map_err(Clone::clone)
}

/// NVRTC's version, e.g. (13, 0).
pub fn version() -> Result<(i32, i32)> {
    load().map_err(Error::NoDevice)?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is loaded (checked above); both pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&raw mut major, &raw mut minor) }
        .result()
        .map_err(|e| Error::nvrtc("nvrtcVersion", e))?;
    Ok((major, minor))
}

/// Whether a driver that reports `driver` from `cuDriverGetVersion` (1000 × major + 10 × minor)
/// loads what NVRTC `nvrtc` (major, minor) builds: the kernels are compiled to `sm_XY` cubins,
/// which a driver of the same CUDA major version loads (minor version compatibility) and a
/// driver of an older major version does not. The error says what to install instead.
pub(crate) fn driver_accepts(driver: i32, nvrtc: (i32, i32)) -> std::result::Result<(), String> {
    let (major, minor) = (driver / 1000, (driver % 1000) / 10);
    if nvrtc.0 <= major {
        return Ok(());
    }
    Err(format!(
        "NVRTC {}.{} builds cubins for CUDA {}, which this driver (CUDA {major}.{minor}, cuDriverGetVersion {driver}) \
         cannot load: update the driver (CUDA {} needs R{}+), or install the NVRTC of the driver's CUDA version \
         (`pip install --target .nvrtc \"nvidia-cuda-nvrtc-cu{major}\"`) and set DAMACY_NVRTC_DIR to its lib folder",
        nvrtc.0,
        nvrtc.1,
        nvrtc.0,
        nvrtc.0,
        if nvrtc.0 >= 13 { 580 } else { 525 },
    ))
}

fn chars_to_string(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// An NVRTC program, destroyed on drop: on success and on every error path.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `self.0` was created by `nvrtcCreateProgram`, is destroyed only here, and is
        // not used afterwards. A failure to destroy leaves nothing to do.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

/// Compiles `kernel` for `arch` (`sm_90`, `compute_90`, …) with extra NVRTC options; the log is
/// returned on success too. The NVRTC program is freed on every path.
pub fn compile(kernel: Kernel, arch: &str, extra_options: &[&str]) -> Result<Compiled> {
    load().map_err(Error::NoDevice)?;
    let src = CString::new(kernel.source())
        .map_err(|_| Error::InvalidArgument(format!("{} contains a NUL byte", kernel.file())))?;
    let name = CString::new(kernel.file()).map_err(|_| Error::InvalidArgument("kernel file name".into()))?;
    let prog = Program(
        result::create_program(src.as_c_str(), Some(name.as_c_str()))
            .map_err(|e| Error::nvrtc("nvrtcCreateProgram", e))?,
    );
    // The options of the shipped images (`crate::source`), then the caller's.
    let mut opts = crate::source::nvrtc_options(arch);
    opts.extend(extra_options.iter().map(|s| (*s).to_string()));
    crate::images::count_nvrtc_compile();
    // SAFETY: `prog` is a live program; the options contain no NUL bytes (built above).
    let compiled = unsafe { result::compile_program(prog.0, &opts) };
    // SAFETY: `prog` is live.
    let log = unsafe { result::get_program_log(prog.0) }.map(|l| chars_to_string(&l)).unwrap_or_default();
    match compiled {
        Err(_) => Err(Error::Compile { kernel: kernel.file(), arch: arch.to_string(), log }),
        Ok(()) if arch.starts_with("sm_") => {
            let mut size = 0usize;
            // SAFETY: `prog` compiled successfully; `size` is valid for writes.
            unsafe { sys::nvrtcGetCUBINSize(prog.0, &raw mut size) }
                .result()
                .map_err(|e| Error::nvrtc("nvrtcGetCUBINSize", e))?;
            let mut image = vec![0u8; size];
            // SAFETY: `image` has the size NVRTC reported.
            unsafe { sys::nvrtcGetCUBIN(prog.0, image.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| Error::nvrtc("nvrtcGetCUBIN", e))?;
            Ok(Compiled { image, log })
        }
        Ok(()) => {
            // SAFETY: `prog` compiled successfully.
            let ptx = unsafe { result::get_ptx(prog.0) }.map_err(|e| Error::nvrtc("nvrtcGetPTX", e))?;
            Ok(Compiled { image: ptx.iter().map(|&c| c as u8).collect(), log })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{choose, driver_accepts, find_libraries};

    #[test]
    fn libraries_are_found_folder_by_folder_newest_first() {
        let root = std::env::temp_dir().join(format!("damacy-nvrtc-find-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        for (dir, names) in [
            (&a, &["libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc-builtins.so.13.0"][..]),
            (&b, &["libnvrtc.so.12.8.93", "libnvrtc.alt.so.12"][..]),
        ] {
            std::fs::create_dir_all(dir).unwrap();
            for n in names {
                std::fs::write(dir.join(n), b"").unwrap();
            }
        }
        let found = find_libraries(&[a.clone(), root.join("missing"), b.clone()]);
        let got: Vec<_> = found.iter().map(|l| (l.path.clone(), l.major)).collect();
        assert_eq!(
            got,
            [(a.join("libnvrtc.so.13"), 13), (a.join("libnvrtc.so.12"), 12), (b.join("libnvrtc.so.12.8.93"), 12)]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_newest_nvrtc_the_driver_loads_is_chosen() {
        // nothing found
        assert_eq!(choose(&[], Some(13_000)), None);
        // no driver (compile checks, the emulator): the first in preference order
        assert_eq!(choose(&[13, 12], None), Some(0));
        // an R580 driver (CUDA 13.0) takes NVRTC 13
        assert_eq!(choose(&[13, 12], Some(13_000)), Some(0));
        // an R570 driver (CUDA 12.8) cannot load NVRTC 13's cubins: NVRTC 12, wherever it is
        assert_eq!(choose(&[13, 12], Some(12_080)), Some(1));
        assert_eq!(choose(&[13, 13, 12], Some(12_080)), Some(2));
        // none qualifies: the first, and opening the device then says what to install
        assert_eq!(choose(&[13], Some(12_080)), Some(0));
        // DAMACY_NVRTC_DIR's library comes first when the driver takes it
        assert_eq!(choose(&[12, 13], Some(13_000)), Some(0));
    }

    #[test]
    fn the_driver_must_be_of_nvrtcs_cuda_major_version_or_newer() {
        // R580 reports CUDA 13.0; minor version compatibility covers NVRTC 13.1 cubins
        assert!(driver_accepts(13_000, (13, 0)).is_ok());
        assert!(driver_accepts(13_000, (13, 1)).is_ok());
        assert!(driver_accepts(13_010, (12, 8)).is_ok());
        // an R570 driver (CUDA 12.8) cannot load NVRTC 13's cubins: the message says what to do
        let e = driver_accepts(12_080, (13, 0)).unwrap_err();
        assert!(e.contains("CUDA 12.8") && e.contains("R580") && e.contains("nvidia-cuda-nvrtc-cu12"), "{e}");
    }
}
