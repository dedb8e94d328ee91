//! What makes a kernel image: the self-contained source, its hash, the NVRTC options, and where
//! NVRTC libraries are looked for. Shared word for word by the build script (which compiles the
//! shipped images, `#[path]`-included there) and the crate (which compiles at run time), so an
//! image made at build time is exactly what a run-time compile of the same source makes.
// Without the CUDA backend nothing compiles at run time; the build script uses it all.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use std::path::{Path, PathBuf};

/// The line of every kernel file that [`self_contained`] replaces with `common.cuh`.
pub(crate) const COMMON_INCLUDE: &str = "#include \"common.cuh\"";

/// The NVRTC options of every kernel image besides `--gpu-architecture` (run-time compiles
/// and the shipped images alike).
pub(crate) const NVRTC_OPTIONS: &[&str] = &["--std=c++17"];

/// The targets the build compiles into the binary: cubins for `sm_80` (A100; runs on every 8.x
/// device) and `sm_90` (H100/H200), and PTX for `compute_90` that the driver compiles for later
/// architectures (`sm_100`, `sm_120`).
#[cfg_attr(not(test), allow(dead_code))] // the build script and the tests use it
pub(crate) const SHIPPED_TARGETS: &[&str] = &["sm_80", "sm_90", "compute_90"];

/// The source NVRTC compiles: `common.cuh` inlined in place of its `#include`.
pub(crate) fn self_contained(raw: &str, common: &str) -> String {
    raw.replace(COMMON_INCLUDE, common)
}

/// 64-bit FNV-1a of a source text: what identifies a compiled image's source.
pub(crate) fn source_hash(src: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in src.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The full NVRTC option list for `target` (`sm_90`, `compute_90`, …).
pub(crate) fn nvrtc_options(target: &str) -> Vec<String> {
    let mut opts = vec![format!("--gpu-architecture={target}")];
    opts.extend(NVRTC_OPTIONS.iter().map(|s| (*s).to_string()));
    opts
}

/// The folders where NVRTC libraries are looked for, in order: `env_dir` (`DAMACY_NVRTC_DIR`),
/// then under the workspace's `.nvrtc/` folder the layouts of the `nvidia-cuda-nvrtc` wheels —
/// CUDA 13 (`nvidia/cu13/lib`) and CUDA 12 (`nvidia/cuda_nvrtc/lib`) — installed straight into
/// `.nvrtc/` or into a versioned subfolder (`.nvrtc/13.0.88/`, as `make nvrtc` does; the
/// highest version first).
pub(crate) fn nvrtc_dirs(env_dir: Option<PathBuf>, workspace_nvrtc: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = env_dir.into_iter().collect();
    let layouts = |root: &Path| [root.join("nvidia/cu13/lib"), root.join("nvidia/cuda_nvrtc/lib")];
    dirs.extend(layouts(workspace_nvrtc));
    let mut versions: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(workspace_nvrtc)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version: Option<Vec<u64>> = name.split('.').map(|p| p.parse().ok()).collect();
            Some((version?, e.path()))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    for (_, root) in versions {
        dirs.extend(layouts(&root));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvrtc_folders_come_env_first_then_the_wheel_layouts_newest_version_first() {
        let root = std::env::temp_dir().join(format!("damacy-nvrtc-dirs-{}", std::process::id()));
        for v in ["12.9.86", "13.0.88", "13.0.9", "not-a-version"] {
            std::fs::create_dir_all(root.join(v)).unwrap();
        }
        let dirs = nvrtc_dirs(Some(PathBuf::from("/env")), &root);
        let want: Vec<PathBuf> = [PathBuf::from("/env")]
            .into_iter()
            .chain(["", "13.0.88", "13.0.9", "12.9.86"].into_iter().flat_map(|v| {
                let r = if v.is_empty() { root.clone() } else { root.join(v) };
                [r.join("nvidia/cu13/lib"), r.join("nvidia/cuda_nvrtc/lib")]
            }))
            .collect();
        assert_eq!(dirs, want);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_options_and_the_source_are_those_of_every_image() {
        assert_eq!(nvrtc_options("sm_90"), ["--gpu-architecture=sm_90", "--std=c++17"]);
        assert_eq!(self_contained("a\n#include \"common.cuh\"\nb", "C"), "a\nC\nb");
        assert_ne!(source_hash("a"), source_hash("b"));
    }
}
