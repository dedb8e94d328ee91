//! Compile check: every kernel through NVRTC for sm_80 and sm_90, with the options of the images
//! the crate ships (and compiles at run time) plus ptxas verbose output; an error, a warning, a
//! register spill or a stack frame above the kernel's allowance fails. Each cubin is also compared
//! with the image the build script shipped (when this NVRTC built them: its output is
//! deterministic), section by section but the toolkit note that records ptxas' options, so the
//! code checked here is the code that runs. Skips (with the reason)
//! when libnvrtc cannot be found — `make test` installs the `nvidia-cuda-nvrtc` wheel into
//! `.nvrtc/`, or point `DAMACY_NVRTC_DIR` at its `nvidia/cu13/lib` folder.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use damacy_kernels::cost::Resources;
use damacy_kernels::{Kernel, images, nvrtc};

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// ptxas options: verbose resource usage and spill warnings. Warnings NVRTC would only print
/// are promoted to errors with --diag-error (177 unused variable, 186 pointless comparison,
/// 550 set but never used). None of them changes the code (the shipped-image comparison below
/// holds that; the ptxas options are recorded in the cubin's `.note.nv.tkinfo`).
const OPTIONS: [&str; 3] = ["--ptxas-options=-v", "--ptxas-options=--warn-on-spills", "--diag-error=177,186,550"];

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

/// A cubin's ELF sections (name, type, flags, bytes) but `.note.nv.tkinfo`, the toolkit note
/// that records ptxas' options (the `-v` here): the code, its symbols, relocations and the
/// kernel's resource notes, which must equal the shipped image's.
fn sections_but_toolkit_note(elf: &[u8]) -> Vec<(String, u32, u64, &[u8])> {
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap());
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert!(elf.len() > 64 && elf[..4] == *b"\x7fELF" && elf[4] == 2, "a 64-bit ELF cubin");
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28) as usize, u16_at(0x3a) as usize, u16_at(0x3c), u16_at(0x3e));
    let header = |i: u16| shoff + usize::from(i) * shentsize;
    let names = u64_at(header(shstrndx) + 0x18) as usize;
    let name = |at: usize| {
        let s = &elf[names + at..];
        String::from_utf8_lossy(&s[..s.iter().position(|&b| b == 0).unwrap()]).into_owned()
    };
    (0..shnum)
        .map(|i| {
            let h = header(i);
            let (ty, off, size) = (u32_at(h + 4), u64_at(h + 0x18) as usize, u64_at(h + 0x20) as usize);
            let bytes: &[u8] = if ty == 8 { &[] } else { &elf[off..off + size] }; // SHT_NOBITS: none
            (name(u32_at(h) as usize), ty, u64_at(h + 8), bytes)
        })
        .filter(|(n, ..)| n != ".note.nv.tkinfo")
        .collect()
}

/// Compiles `k` for `arch`: the problems found, and the log.
fn check(k: Kernel, arch: &str) -> (Vec<String>, String) {
    let out = match nvrtc::compile(k, arch, &OPTIONS) {
        Ok(out) => out,
        Err(e) => return (vec![e.to_string()], String::new()),
    };
    assert!(!out.image.is_empty(), "{} {arch}: empty cubin", k.file());
    assert!(out.log.contains("Used"), "{} {arch}: ptxas -v printed no resource usage:\n{}", k.file(), out.log);
    let mut p = problems(&out.log);
    if let Some(r) = Resources::from_ptxas_log(&out.log, k.name())
        && r.stack_bytes > STACK_ALLOWANCE
    {
        p.push(format!("{} bytes stack frame (local memory), allowed {STACK_ALLOWANCE}", r.stack_bytes));
    }
    if images::shipped_nvrtc() == Some(nvrtc::version().unwrap()) {
        match images::shipped().iter().find(|i| i.file() == k.file() && i.target() == arch) {
            Some(i) if sections_but_toolkit_note(i.image()) == sections_but_toolkit_note(&out.image) => {}
            Some(_) => p.push("the shipped image differs from this compile".to_owned()),
            None => p.push(format!("no shipped image: {}", images::shipped_note())),
        }
    }
    (p.into_iter().map(|p| format!("{} {arch}: {p}", k.file())).collect(), out.log)
}

#[test]
fn every_kernel_compiles_cleanly_for_sm80_and_sm90() {
    if let Err(reason) = nvrtc::load() {
        eprintln!("SKIPPED nvrtc_compile: {reason}");
        return;
    }
    let (maj, min) = nvrtc::version().unwrap();
    eprintln!("NVRTC {maj}.{min}; {}", images::shipped_note());
    // The library loaded is the one chosen among those found (no driver here: the first), and
    // its soname's major version is what it reports.
    let loaded = nvrtc::loaded_libraries().unwrap();
    if let Some(i) = loaded.chosen {
        assert_eq!(loaded.found[i].major, maj, "chose {}, loaded NVRTC {maj}.{min}", loaded.describe_found());
    }
    // The compiles run side by side (NVRTC is thread-safe), the largest kernels first.
    let mut jobs: Vec<(Kernel, &str)> = Kernel::ALL.into_iter().flat_map(|k| ARCHS.map(|a| (k, a))).collect();
    jobs.sort_by_key(|(k, _)| !matches!(k, Kernel::ZstdDecode | Kernel::InflateDecode));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, std::num::NonZero::get).min(jobs.len());
    let mut results: Vec<(usize, Vec<String>, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(k, arch)) = jobs.get(at) else { break done };
                        let (p, log) = check(k, arch);
                        done.push((at, p, log));
                    }
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    results.sort_by_key(|r| r.0);
    let mut failures = Vec::new();
    for (at, p, log) in results {
        eprintln!("{} {}:\n{}", jobs[at].0.file(), jobs[at].1, log.trim());
        failures.extend(p);
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

/// The shipped-image comparison ignores the toolkit note only: memcpy's compile with ptxas' `-v`
/// equals its shipped sm_90 image in every other section, and not LZ4's or its own sm_80 one.
#[test]
fn the_comparison_ignores_the_toolkit_note_only() {
    if let Err(reason) = nvrtc::load() {
        eprintln!("SKIPPED nvrtc_compile: {reason}");
        return;
    }
    if images::shipped_nvrtc() != Some(nvrtc::version().unwrap()) {
        eprintln!("SKIPPED nvrtc_compile: {}", images::shipped_note());
        return;
    }
    let shipped = |k: Kernel, t: &str| {
        images::shipped().iter().find(|i| i.file() == k.file() && i.target() == t).unwrap().image()
    };
    let now = nvrtc::compile(Kernel::Memcpy, "sm_90", &OPTIONS).unwrap().image;
    assert_ne!(now.as_slice(), shipped(Kernel::Memcpy, "sm_90"), "ptxas' options are in the image's note");
    let sections = sections_but_toolkit_note(&now);
    assert!(sections.iter().any(|(n, ..)| n.starts_with(".text.")), "the code is compared");
    assert_eq!(sections, sections_but_toolkit_note(shipped(Kernel::Memcpy, "sm_90")));
    assert_ne!(sections, sections_but_toolkit_note(shipped(Kernel::Memcpy, "sm_80")));
    assert_ne!(sections, sections_but_toolkit_note(shipped(Kernel::Lz4Decode, "sm_90")));
}
