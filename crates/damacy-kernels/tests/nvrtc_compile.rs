//! Compile check: every kernel through NVRTC for sm_80 and sm_90 with ptxas verbose output;
//! an error, a warning, a register spill or a stack frame above the kernel's allowance fails. Skips (with the reason) when libnvrtc cannot
//! be found — `make test` installs the `nvidia-cuda-nvrtc` wheel into `.nvrtc/`, or point
//! `DAMACY_NVRTC_DIR` at its `nvidia/cu13/lib` folder.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use damacy_kernels::cost::Resources;
use damacy_kernels::{Kernel, nvrtc};

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// ptxas options: verbose resource usage and spill warnings. Warnings NVRTC would only print
/// are promoted to errors with --diag-error (177 unused variable, 186 pointless comparison,
/// 550 set but never used).
const OPTIONS: [&str; 4] =
    ["--ptxas-options=-v", "--ptxas-options=--warn-on-spills", "--diag-error=177,186,550", "--restrict"];

/// Bytes of stack frame (local memory: per-thread arrays indexed at run time) a kernel may
/// have: none. The emulator's cost model cannot see local memory, so a per-thread array that
/// ptxas puts there must fail here rather than hide.
const STACK_ALLOWANCE: u32 = 0;

fn problems(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("warning") || l.contains("error") || (l.contains("spill") && !l.contains(" 0 bytes spill"))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_kernel_compiles_cleanly_for_sm80_and_sm90() {
    if let Err(reason) = nvrtc::load() {
        eprintln!("SKIPPED nvrtc_compile: {reason}");
        return;
    }
    let (maj, min) = nvrtc::version().unwrap();
    eprintln!("NVRTC {maj}.{min}");
    // The library loaded is the one chosen among those found (no driver here: the first), and
    // its soname's major version is what it reports.
    let loaded = nvrtc::loaded_libraries().unwrap();
    if let Some(i) = loaded.chosen {
        assert_eq!(loaded.found[i].major, maj, "chose {}, loaded NVRTC {maj}.{min}", loaded.describe_found());
    }
    let mut failures = Vec::new();
    for k in Kernel::ALL {
        for arch in ARCHS {
            match nvrtc::compile(k, arch, &OPTIONS) {
                Ok(out) => {
                    eprintln!("{} {arch}:\n{}", k.file(), out.log.trim());
                    assert!(!out.image.is_empty(), "{} {arch}: empty cubin", k.file());
                    let mut p = problems(&out.log);
                    if let Some(r) = Resources::from_ptxas_log(&out.log, k.name())
                        && r.stack_bytes > STACK_ALLOWANCE
                    {
                        p.push(format!(
                            "{} bytes stack frame (local memory), allowed {STACK_ALLOWANCE}",
                            r.stack_bytes
                        ));
                    }
                    if !p.is_empty() {
                        failures.push(format!("{} {arch}: {}", k.file(), p.join(" | ")));
                    }
                    assert!(
                        out.log.contains("Used"),
                        "{} {arch}: ptxas -v printed no resource usage:\n{}",
                        k.file(),
                        out.log
                    );
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    assert!(failures.is_empty(), "kernel compile problems:\n{}", failures.join("\n"));
}

#[test]
fn the_log_reports_a_broken_kernel() {
    if let Err(reason) = nvrtc::load() {
        eprintln!("SKIPPED nvrtc_compile: {reason}");
        return;
    }
    // The checker must see NVRTC's diagnostics: compile with an unknown option.
    let r = nvrtc::compile(Kernel::Memcpy, "sm_90", &["--no-such-option"]);
    assert!(r.is_err());
}
