//! The kernel images shipped in the binary (compiled by the build script) against what NVRTC
//! makes now from the same source with the same options: byte for byte when the NVRTC here is
//! the one that built them (NVRTC output is deterministic), else a whole cubin for the same
//! architecture that names the kernel. No GPU needed. Skips (with the reason) in a build without
//! shipped images or when libnvrtc cannot be found — `make nvrtc` installs the wheel into
//! `.nvrtc/`, or point `DAMACY_NVRTC_DIR` at its `nvidia/cu13/lib` folder.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use damacy_kernels::images::{self, cubin_sm};
use damacy_kernels::{Kernel, nvrtc};

fn ready(test: &str) -> bool {
    if images::shipped().is_empty() {
        eprintln!("SKIPPED shipped_images::{test}: {}", images::shipped_note());
        return false;
    }
    if let Err(reason) = nvrtc::load() {
        eprintln!("SKIPPED shipped_images::{test}: {reason}");
        return false;
    }
    true
}

/// Compares the shipped image of `kernel` for `target` with a compile now.
fn compare(kernel: Kernel, target: &str) {
    let shipped = images::shipped()
        .iter()
        .find(|i| i.file() == kernel.file() && i.target() == target)
        .unwrap_or_else(|| panic!("no shipped {target} image of {}: {}", kernel.file(), images::shipped_note()));
    assert_eq!(shipped.source_hash(), kernel.source_hash(), "{} {target}", kernel.file());
    let before = images::nvrtc_compiles();
    let now = nvrtc::compile(kernel, target, &[]).unwrap();
    assert!(images::nvrtc_compiles() > before, "a run-time compile is counted");
    if Some(nvrtc::version().unwrap()) == images::shipped_nvrtc() {
        assert!(
            shipped.image() == now.image.as_slice(),
            "{} {target}: the shipped image differs from NVRTC's",
            kernel.file()
        );
    } else if let Some(sm) = target.strip_prefix("sm_") {
        eprintln!(
            "NVRTC {:?} here, {:?} built the images: comparing structure only",
            nvrtc::version().unwrap(),
            images::shipped_nvrtc()
        );
        images::check_cubin(shipped.image(), kernel).unwrap();
        assert_eq!(cubin_sm(shipped.image()).map(|s| s.to_string()).as_deref(), Some(sm));
        assert_eq!(cubin_sm(&now.image), cubin_sm(shipped.image()));
    } else {
        let text = String::from_utf8_lossy(shipped.image());
        assert!(text.contains(&format!(".entry {}(", kernel.name())), "{}", kernel.file());
    }
}

/// Every kernel's sm_90 image is the one a 9.0 device selects. (That every sm_80 and sm_90 image
/// is byte for byte what NVRTC makes now is held by `tests/nvrtc_compile.rs`, which compiles them
/// all with ptxas' resource report; here one of each target, through a run-time compile.)
#[test]
fn every_kernel_selects_its_sm90_image() {
    if !ready("every_kernel_selects_its_sm90_image") {
        return;
    }
    for k in Kernel::ALL {
        let selected = images::select(k, (9, 0)).unwrap();
        assert_eq!((selected.file(), selected.target()), (k.file(), "sm_90"));
        assert_eq!(cubin_sm(selected.image()), Some(90));
        assert_eq!(selected.source_hash(), k.source_hash(), "{}", k.file());
    }
}

#[test]
fn cubins_and_the_ptx_are_what_nvrtc_makes_now() {
    if !ready("cubins_and_the_ptx_are_what_nvrtc_makes_now") {
        return;
    }
    for k in [Kernel::Memcpy, Kernel::Lz4Decode] {
        compare(k, "sm_80");
        compare(k, "sm_90");
        compare(k, "compute_90");
    }
    // Ampere and Ada take the sm_80 cubin, Blackwell the PTX; Turing is compiled at run time.
    assert_eq!(images::select(Kernel::Memcpy, (8, 9)).unwrap().target(), "sm_80");
    assert_eq!(images::select(Kernel::Memcpy, (12, 0)).unwrap().target(), "compute_90");
    assert!(images::select(Kernel::Memcpy, (7, 5)).is_err());
}
