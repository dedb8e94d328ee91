//! The emulator's detectors against seeded bugs (`kernels/emu/seeded_bugs.cu`): each defect is
//! caught, and the same kernel without the defect is clean. Detectors that abort (divergent
//! collectives, shared-memory limits, the watchdog) and ThreadSanitizer reports are checked in
//! a child process: the test runs itself again with `DMC_EMU_CHILD` set and reads its stderr.
//! The race tests need the TSan build (`crates/damacy-kernels/scripts/tsan.sh`, run by
//! `make test`); in other builds they check what the schedules alone can show.
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use std::ffi::{c_char, c_void};
use std::process::Command;

// The emulated kernels are a native library of the crate: link it.
use damacy_kernels as _;

unsafe extern "C" {
    fn dmc_emu_configure(schedule: u32, dyn_smem: u32, max_dyn_smem: u32, watchdog_ms: u32) -> i32;
    fn dmc_emu_sanitizer() -> i32;
    fn dmc_emu_alignment_checked() -> i32;
    fn dmc_emu_last_schedule() -> i32;
    fn dmc_emu_set_resident_blocks(n: u32) -> i32;
    fn dmc_emu_last_resident() -> i32;
    fn dmc_emu_dmc_bug_block_order(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        fixed: u32,
        cell: *mut u32,
        out: *mut u32,
    ) -> i32;
    fn dmc_emu_dmc_selftest_neighbor(gx: u32, gy: u32, bx: u32, seed: u64, with_barrier: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_missing_syncwarp(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_shfl_is_no_fence(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_lost_update(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, counter: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_blocks_overlap(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, out: *mut u8) -> i32;
    fn dmc_emu_dmc_bug_blocks_apart(gx: u32, gy: u32, bx: u32, seed: u64, other: u32, out: *mut u8) -> i32;
    fn dmc_emu_dmc_bug_divergent_shfl(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_shfl_width(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_mask_mismatch(gx: u32, gy: u32, bx: u32, seed: u64, variant: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_uninit_shared(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_oob_read(gx: u32, gy: u32, bx: u32, seed: u64, fixed: u32, place: u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_misaligned(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        fixed: u32,
        width: u32,
        store: u32,
        buf: *mut u8,
        out: *mut u64,
    ) -> i32;
    fn dmc_emu_dmc_bug_big_shared(gx: u32, gy: u32, bx: u32, seed: u64, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_rounding_mode(gx: u32, gy: u32, bx: u32, seed: u64, out: *mut u32) -> i32;
    fn dmc_emu_dmc_bug_spin_wait(gx: u32, gy: u32, bx: u32, seed: u64, flag: *mut u32, out: *mut u32) -> i32;
    fn dmc_emu_dmc_emu_dynamic_shared(gx: u32, gy: u32, bx: u32, seed: u64, out: *mut u32) -> i32;
    fn dmc_emu_dmc_emu_intrinsics(gx: u32, gy: u32, bx: u32, seed: u64, out: *mut u32) -> i32;
}

// libc, for the ASan shadow check below.
unsafe extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> i32;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}
const PROT_READ_WRITE: i32 = 0x3;
const MAP_PRIVATE_ANONYMOUS_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;
const MAP_FIXED_NOREPLACE: i32 = 0x10_0000;

const SYNC: u32 = 1;
const LOCKSTEP: u32 = 2;
const PREEMPT: u32 = 3;
const MIXED: u32 = 4;

fn configure(schedule: u32, dyn_smem: u32, max_dyn_smem: u32, watchdog_ms: u32) {
    // SAFETY: sets plain options of this thread's later launches.
    assert_eq!(unsafe { dmc_emu_configure(schedule, dyn_smem, max_dyn_smem, watchdog_ms) }, 0);
}

fn tsan() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { dmc_emu_sanitizer() == 2 }
}

/// Runs `case` of `test` in a child process; its success and stderr.
fn child(test: &str, case: &str) -> (bool, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("DMC_EMU_CHILD", case)
        // the alignment sanitizer's reports name the kernel's frames too
        .env("UBSAN_OPTIONS", format!("print_stacktrace=1:{}", std::env::var("UBSAN_OPTIONS").unwrap_or_default()))
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The case this process runs as a child, if it is one.
fn child_case() -> Option<String> {
    std::env::var("DMC_EMU_CHILD").ok()
}

/// Under TSan: the defective variant is reported as a data race between CUDA threads in
/// `kernel`, the fixed one is clean.
fn assert_race_reported(test: &str, kernel: &str) {
    let (ok, err) = child(test, "bug");
    assert!(!ok && err.contains("ThreadSanitizer: data race"), "{kernel}: no race reported:\n{err}");
    assert!(err.contains(kernel) && err.contains("CUDA thread"), "{kernel}: the report names neither:\n{err}");
    let (ok, err) = child(test, "fixed");
    assert!(ok && !err.contains("ThreadSanitizer"), "{kernel} without the defect:\n{err}");
}

#[test]
fn missing_syncthreads_is_a_race() {
    let run = |with_barrier: u32, seed: u64| {
        let mut out = vec![0u32; 64];
        // SAFETY: out holds the 64 values the one 64-thread block writes.
        assert_eq!(unsafe { dmc_emu_dmc_selftest_neighbor(1, 1, 64, seed, with_barrier, out.as_mut_ptr()) }, 0);
        out.iter().enumerate().all(|(t, &v)| v == if t == 0 { 1 } else { t as u32 })
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(u32::from(case == "fixed"), 0);
        return;
    }
    if tsan() {
        // (the defective variant runs in the child only: here its report would fail the run)
        assert_race_reported("missing_syncthreads_is_a_race", "dmc_selftest_neighbor");
        return;
    }
    // Schedules: the fixed order hides it, a shuffled order and preemption show it.
    configure(SYNC, 0, 0, 0);
    assert!(run(0, 0) && run(1, 0x5EED) && !run(0, 0x5EED));
    configure(PREEMPT, 0, 0, 0);
    assert!((1..20).any(|s| !run(0, s)), "preemption exposes the missing barrier");
    assert!((1..20).all(|s| run(1, s)));
}

#[test]
fn missing_syncwarp_is_a_race() {
    let run = |fixed: u32, seed: u64| {
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        assert_eq!(unsafe { dmc_emu_dmc_bug_missing_syncwarp(1, 1, 32, seed, fixed, out.as_mut_ptr()) }, 0);
        out.iter().enumerate().all(|(l, &v)| v == (l as u32 ^ 1) + 100)
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(u32::from(case == "fixed"), 0);
        return;
    }
    if tsan() {
        assert_race_reported("missing_syncwarp_is_a_race", "dmc_bug_missing_syncwarp");
        return;
    }
    // A shuffled order lets a lane read its neighbour's cell before it was written: the
    // poisoned shared memory (0xA5A5A5A5) shows through.
    configure(SYNC, 0, 0, 0);
    assert!(run(1, 0x5EED) && run(1, 0));
    assert!(!run(0, 0x5EED), "a shuffled order exposes the missing __syncwarp");
}

#[test]
fn shared_memory_ordered_only_by_shuffles_is_a_race() {
    // Lanes 0-15 write, every lane reads another lane's cell after a shuffle and a ballot but no
    // __syncwarp: racecheck's hazard class in dmc_zstd_decode (issue 28). Shuffles and votes
    // order no memory on a GPU, so under TSan they are no synchronisation; the schedules cannot
    // show it (every lane reaches the shuffle, so every write, before any lane reads).
    let run = |fixed: u32, seed: u64| {
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        assert_eq!(unsafe { dmc_emu_dmc_bug_shfl_is_no_fence(1, 1, 32, seed, fixed, out.as_mut_ptr()) }, 0);
        out.iter().enumerate().all(|(l, &v)| v == ((l as u32 + 5) & 15) * 7 + (l as u32 ^ 3) + 16)
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(u32::from(case == "fixed"), 0x5EED);
        return;
    }
    if tsan() {
        assert_race_reported("shared_memory_ordered_only_by_shuffles_is_a_race", "dmc_bug_shfl_is_no_fence");
        return;
    }
    for schedule in [SYNC, LOCKSTEP, PREEMPT] {
        configure(schedule, 0, 0, 0);
        for seed in [0, 0x5EED, 7] {
            assert!(run(0, seed) && run(1, seed), "schedule {schedule}, seed {seed}");
        }
    }
    configure(SYNC, 0, 0, 0);
}

#[test]
fn lost_update_is_a_race() {
    let run = |fixed: u32| {
        let mut counter = 0u32;
        // SAFETY: counter is live for the launch.
        assert_eq!(unsafe { dmc_emu_dmc_bug_lost_update(4, 1, 256, 0x5EED, fixed, &raw mut counter) }, 0);
        counter
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(u32::from(case == "fixed"));
        return;
    }
    if tsan() {
        assert_race_reported("lost_update_is_a_race", "dmc_bug_lost_update");
    } else {
        eprintln!("lost_update_is_a_race: the race itself needs the TSan build (scripts/tsan.sh)");
    }
    configure(SYNC, 0, 0, 0);
    assert_eq!(run(1), 1024);
}

#[test]
fn two_blocks_writing_the_same_bytes_is_a_race() {
    let run = |fixed: u32| {
        let mut out = vec![0u8; 512];
        // SAFETY: out holds the 512 bytes two blocks write.
        assert_eq!(unsafe { dmc_emu_dmc_bug_blocks_overlap(2, 1, 64, 0, fixed, out.as_mut_ptr()) }, 0);
        out
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(u32::from(case == "fixed"));
        return;
    }
    if tsan() {
        assert_race_reported("two_blocks_writing_the_same_bytes_is_a_race", "dmc_bug_blocks_overlap");
    } else {
        eprintln!("two_blocks_writing_the_same_bytes_is_a_race: the race itself needs the TSan build");
    }
    configure(SYNC, 0, 0, 0);
    let out = run(1);
    assert!(out[..256].iter().all(|&b| b == 0) && out[256..].iter().all(|&b| b == 1));
}

#[test]
fn blocks_far_apart_writing_the_same_bytes_is_a_race() {
    // Blocks 0 and 4 (or 0 and 7) of 8, in launch order: under TSan every block of a launch this
    // size runs on TSan fibers of its own (a rotation of 4 fiber sets ran blocks 0 and 4 on the
    // same fibers, which hid this race).
    let run = |other: u32| {
        let mut out = vec![0u8; 8 * 256];
        // SAFETY: out holds the 8 * 256 bytes the blocks write.
        assert_eq!(unsafe { dmc_emu_dmc_bug_blocks_apart(8, 1, 64, 0, other, out.as_mut_ptr()) }, 0);
        out
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(case.parse().unwrap());
        return;
    }
    if tsan() {
        for other in [4, 7] {
            let (ok, err) = child("blocks_far_apart_writing_the_same_bytes_is_a_race", &other.to_string());
            assert!(
                !ok && err.contains("ThreadSanitizer: data race"),
                "blocks 0 and {other}: no race reported:\n{err}"
            );
            assert!(err.contains("dmc_bug_blocks_apart") && err.contains("of block (0,0,0)"), "{err}");
            assert!(err.contains(&format!("of block ({other},0,0)")), "blocks 0 and {other}: {err}");
        }
        let (ok, err) = child("blocks_far_apart_writing_the_same_bytes_is_a_race", "0");
        assert!(ok && !err.contains("ThreadSanitizer"), "without the overlap:\n{err}");
    } else {
        eprintln!("blocks_far_apart_writing_the_same_bytes_is_a_race: the race itself needs the TSan build");
    }
    configure(SYNC, 0, 0, 0);
    let out = run(0);
    assert!(out.chunks(256).enumerate().all(|(b, c)| c.iter().all(|&v| usize::from(v) == b + 1)));
}

#[test]
fn divergent_collective_is_reported_with_both_call_sites() {
    let run = |fixed: u32| {
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        assert_eq!(unsafe { dmc_emu_dmc_bug_divergent_shfl(1, 1, 32, 0, fixed, out.as_mut_ptr()) }, 0);
        out
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(u32::from(case == "fixed"));
        return;
    }
    let (ok, err) = child("divergent_collective_is_reported_with_both_call_sites", "bug");
    assert!(!ok, "a divergent __shfl_sync must abort");
    assert!(err.contains("deadlock") && err.contains("__shfl_sync"), "{err}");
    assert!(err.contains("lanes 0x0000ffff") && err.contains("lanes 0xffff0000"), "{err}");
    assert!(err.matches("kernels/emu/seeded_bugs.cu:").count() >= 2, "both call sites named: {err}");
    configure(SYNC, 0, 0, 0);
    assert!(run(1).iter().all(|&v| v == 0));
}

#[test]
fn mismatched_shuffle_widths_are_reported() {
    let run = |fixed: u32, schedule: u32| {
        configure(schedule, 0, 0, 0);
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        assert_eq!(unsafe { dmc_emu_dmc_bug_shfl_width(1, 1, 32, 0x5EED, fixed, out.as_mut_ptr()) }, 0);
        configure(SYNC, 0, 0, 0);
        out
    };
    if let Some(case) = child_case() {
        let (what, schedule) = case.split_once(',').unwrap();
        run(u32::from(what == "fixed"), schedule.parse().unwrap());
        return;
    }
    if tsan() {
        // the check is the scheduler's, the same in every build: its child processes are
        // dear under TSan, and the ASan run covers it
        return;
    }
    for schedule in [SYNC, LOCKSTEP, PREEMPT] {
        let (ok, err) = child("mismatched_shuffle_widths_are_reported", &format!("bug,{schedule}"));
        assert!(!ok, "schedule {schedule}: a __shfl_sync with two widths must abort");
        assert!(err.contains("lanes of one collective call site use different widths"), "schedule {schedule}: {err}");
        assert!(
            err.contains("lanes 0x0000ffff wait at __shfl_sync(mask 0xffffffff, width 16) kernels/emu/seeded_bugs.cu:")
                && err.contains("lanes 0xffff0000 wait at __shfl_sync(mask 0xffffffff, width 32)"),
            "schedule {schedule}: both groups and their widths named: {err}"
        );
        // one width: lane 1 of each group of 16
        let want: Vec<u32> = (0..32u32).map(|l| ((l & !15) + 1) * 3).collect();
        assert_eq!(run(1, schedule), want, "schedule {schedule}");
    }
}

#[test]
fn non_identical_masks_at_one_collective_are_reported() {
    let run = |variant: u32, schedule: u32| {
        configure(schedule, 0, 0, 0);
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        assert_eq!(unsafe { dmc_emu_dmc_bug_mask_mismatch(1, 1, 32, 0x5EED, variant, out.as_mut_ptr()) }, 0);
        configure(SYNC, 0, 0, 0);
        out
    };
    if let Some(case) = child_case() {
        let (variant, schedule) = case.split_once(',').unwrap();
        run(variant.parse().unwrap(), schedule.parse().unwrap());
        return;
    }
    if tsan() {
        // the check is the scheduler's, the same in every build: its child processes are
        // dear under TSan, and the ASan run covers it
        return;
    }
    // (under preemption a half may complete before a lane of the other half arrives: sync and
    // lockstep bring every lane to the call site first)
    for schedule in [SYNC, LOCKSTEP] {
        for (variant, masks) in
            [(1, ["mask 0xffffffff", "mask 0xffff0000"]), (2, ["mask 0x0000ffff", "mask 0xffffffff"])]
        {
            let (ok, err) =
                child("non_identical_masks_at_one_collective_are_reported", &format!("{variant},{schedule}"));
            assert!(!ok, "variant {variant}, schedule {schedule}: overlapping masks must abort");
            assert!(
                err.contains("__shfl_sync at kernels/emu/seeded_bugs.cu:") && err.contains("non-identical masks"),
                "variant {variant}, schedule {schedule}: {err}"
            );
            assert!(
                masks.iter().all(|m| err.contains(m)),
                "variant {variant}, schedule {schedule}: both masks named: {err}"
            );
        }
        assert_eq!(run(0, schedule), vec![60; 32], "schedule {schedule}");
    }
}

#[test]
fn uninitialised_shared_memory_reads_poison() {
    let run = |fixed: u32, seed: u64| {
        let mut out = vec![0u32; 3];
        // SAFETY: out holds one value per block.
        assert_eq!(unsafe { dmc_emu_dmc_bug_uninit_shared(3, 1, 32, seed, fixed, out.as_mut_ptr()) }, 0);
        out
    };
    configure(SYNC, 0, 0, 0);
    // Every block starts from the poison, not from the previous block's value.
    assert_eq!(run(0, 0), vec![0xA5A5_A5A5 + 32; 3]);
    assert_eq!(run(0, 7), vec![0xA5A5_A5A5 + 32; 3]);
    assert_eq!(run(1, 7), vec![32; 3]);
}

#[test]
fn out_of_bounds_reads_are_reported_under_asan() {
    // A kernel thread's stack array read one past its end after the thread has been switched out
    // and back (the fiber switch must leave its frame's redzones in place), and a read past the
    // block's static shared variables. In other builds only the fixed variant runs.
    let run = |fixed: u32, place: u32| {
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        assert_eq!(unsafe { dmc_emu_dmc_bug_oob_read(1, 1, 32, 0x5EED, fixed, place, out.as_mut_ptr()) }, 0);
        out
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        let (fixed, place) = case.split_once(',').unwrap();
        run(u32::from(fixed == "fixed"), place.parse().unwrap());
        return;
    }
    configure(SYNC, 0, 0, 0);
    let sum: u32 = (0..32).sum();
    assert_eq!(run(1, 0), (0..32).map(|l| l + 7 + sum).collect::<Vec<_>>());
    assert_eq!(run(1, 1), vec![31 + sum; 32]);
    // SAFETY: no arguments, no state.
    if unsafe { dmc_emu_sanitizer() } != 1 {
        return;
    }
    for (place, what) in [(0, "stack-buffer-overflow"), (1, "use-after-poison")] {
        let (ok, err) = child("out_of_bounds_reads_are_reported_under_asan", &format!("bug,{place}"));
        assert!(!ok && err.contains(&format!("AddressSanitizer: {what}")), "place {place}: no {what} reported:\n{err}");
        assert!(err.contains("dmc_bug_oob_read"), "place {place}: the report does not name the kernel:\n{err}");
        let (ok, err) = child("out_of_bounds_reads_are_reported_under_asan", &format!("fixed,{place}"));
        assert!(ok && !err.contains("AddressSanitizer"), "place {place} without the defect:\n{err}");
    }
}

#[test]
fn misaligned_accesses_abort_under_the_alignment_sanitizer() {
    // Lane l loads or stores a 2-, 4-, 8- or 16-byte word one byte past an aligned address. x86
    // forgives that and a GPU faults, so only the alignment-sanitizer build (scripts/ubsan.sh,
    // and scripts/asan.sh beside ASan) can catch it: the first such access aborts, naming its
    // file and line. In every build the aligned variant must move the right bytes.
    let run = |fixed: u32, width: u32, store: u32| {
        // 16-byte aligned, as device memory is
        let mut words = vec![0u128; 4 * width as usize];
        // SAFETY: the 64 * width bytes of `words`, which outlives the slice.
        let buf = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), 64 * width as usize) };
        for (i, b) in buf.iter_mut().enumerate() {
            *b = i as u8;
        }
        let mut out = vec![0u64; 32];
        // SAFETY: buf holds the 64 * width bytes the 32 lanes address (2 * width apart, plus
        // one); out holds one word per lane.
        let rc = unsafe {
            dmc_emu_dmc_bug_misaligned(1, 1, 32, 0x5EED, fixed, width, store, buf.as_mut_ptr(), out.as_mut_ptr())
        };
        assert_eq!(rc, 0);
        (buf.to_vec(), out)
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        let mut it = case.split(',');
        let fixed = u32::from(it.next() == Some("fixed"));
        let (width, store) = (it.next().unwrap().parse().unwrap(), u32::from(it.next() == Some("store")));
        run(fixed, width, store);
        return;
    }
    configure(SYNC, 0, 0, 0);
    for width in [2u32, 4, 8, 16] {
        let (_, out) = run(1, width, 0);
        for (lane, &got) in out.iter().enumerate() {
            let at = 2 * width as usize * lane;
            let want = (0..width.min(8) as usize).fold(0u64, |v, k| v | u64::from((at + k) as u8) << (8 * k));
            assert_eq!(got, want, "width {width}, lane {lane}: the aligned load");
        }
        let (buf, _) = run(1, width, 1);
        for lane in 0..32usize {
            let at = 2 * width as usize * lane;
            let word = &buf[at..at + width as usize];
            assert!(
                word.iter().all(|&b| b == lane as u8 + 1),
                "width {width}, lane {lane}: the aligned store {word:?}"
            );
        }
    }
    // SAFETY: no arguments, no state.
    if unsafe { dmc_emu_alignment_checked() } != 1 {
        eprintln!("misaligned accesses: the check itself needs the alignment-sanitizer build (scripts/ubsan.sh)");
        return;
    }
    let test = "misaligned_accesses_abort_under_the_alignment_sanitizer";
    for width in [2u32, 4, 8, 16] {
        for kind in ["load", "store"] {
            let (ok, err) = child(test, &format!("bug,{width},{kind}"));
            let what = format!("{kind} {} misaligned address", if kind == "load" { "of" } else { "to" });
            assert!(
                !ok && err.contains(&what) && err.contains(&format!("requires {width} byte alignment")),
                "{width}-byte {kind}: no misaligned access reported:\n{err}"
            );
            // The report names the access's file and line: the kernel's, or common.cuh's 16-byte
            // helper (then the stack names the kernel).
            let site = if width == 16 { "kernels/common.cuh:" } else { "kernels/emu/seeded_bugs.cu:" };
            assert!(err.contains(site) && err.contains("dmc_bug_misaligned"), "{width}-byte {kind}: no site:\n{err}");
            let (ok, err) = child(test, &format!("fixed,{width},{kind}"));
            assert!(ok && !err.contains("runtime error"), "{width}-byte {kind} without the defect:\n{err}");
        }
    }
}

/// The end of ASan's high shadow memory on x86-64.
const SHADOW_END: usize = 0x1000_7fff_8000;

#[test]
fn a_finished_thread_leaves_no_asan_poison_behind() {
    // Under ASan: an emulator thread poisons the unused part of its shared-memory arena and its
    // fibers' frames leave redzones; gcc 12's libasan keeps that shadow after munmap, so memory
    // mapped there later (another thread's fiber stacks) would be reported as poisoned. Run in
    // a child so that no other test thread maps memory in between.
    // SAFETY: no arguments, no state.
    if unsafe { dmc_emu_sanitizer() } != 1 {
        return;
    }
    if child_case().is_none() {
        let (ok, err) = child("a_finished_thread_leaves_no_asan_poison_behind", "run");
        assert!(ok, "{err}");
        return;
    }
    // The address ranges of this process's private read-write mappings.
    let mappings = || -> Vec<(usize, usize)> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|l| {
                let mut fields = l.split_whitespace();
                let (lo, hi) = fields.next()?.split_once('-')?;
                if fields.next()? != "rw-p" {
                    return None;
                }
                Some((usize::from_str_radix(lo, 16).ok()?, usize::from_str_radix(hi, 16).ok()?))
            })
            .collect()
    };
    // The emulator thread's largest new mapping is its fiber stacks and shared-memory arena. ASan
    // splits and remaps its own shadow as it poisons and clears it, which shows up as new
    // (terabyte-sized) mappings below the end of x86-64's high shadow: those are not the thread's.
    let (lo, hi) = std::thread::spawn(move || {
        let before = mappings();
        configure(SYNC, 0, 0, 0);
        let mut out = vec![0u32; 2];
        // SAFETY: out holds one value per block.
        assert_eq!(unsafe { dmc_emu_dmc_bug_uninit_shared(2, 1, 64, 0, 1, out.as_mut_ptr()) }, 0);
        mappings()
            .into_iter()
            .filter(|m| !before.contains(m) && m.0 >= SHADOW_END)
            .max_by_key(|&(lo, hi)| hi - lo)
            .unwrap()
    })
    .join()
    .unwrap();
    // SAFETY: maps only where nothing is mapped (the thread's region, unmapped at its exit);
    // the ASan query reads only shadow memory.
    unsafe {
        let m = mmap(
            lo as *mut c_void,
            hi - lo,
            PROT_READ_WRITE,
            MAP_PRIVATE_ANONYMOUS_NORESERVE | MAP_FIXED_NOREPLACE,
            -1,
            0,
        );
        assert_eq!(m as usize, lo, "the emulator thread's region {lo:#x}..{hi:#x} is still mapped");
        let query = dlsym(std::ptr::null_mut(), c"__asan_region_is_poisoned".as_ptr());
        assert!(!query.is_null(), "libasan's interface is not loaded");
        let query: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void = std::mem::transmute(query);
        let bad = query(m, hi - lo);
        assert!(bad.is_null(), "fresh memory at {bad:p} (where the region {lo:#x}..{hi:#x} was) is poisoned");
        munmap(m, hi - lo);
    }
}

#[test]
fn static_shared_memory_beyond_48_kib_aborts() {
    if child_case().is_some() {
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        unsafe { dmc_emu_dmc_bug_big_shared(1, 1, 32, 0, out.as_mut_ptr()) };
        return;
    }
    let (ok, err) = child("static_shared_memory_beyond_48_kib_aborts", "bug");
    assert!(!ok && err.contains("48 KiB static limit") && err.contains("`big`"), "{err}");
}

#[test]
fn a_kernel_changing_the_rounding_mode_aborts_its_launch() {
    if child_case().is_some() {
        let mut out = vec![0u32; 32];
        // SAFETY: out holds the 32 values of the one warp.
        unsafe { dmc_emu_dmc_bug_rounding_mode(1, 1, 32, 0, out.as_mut_ptr()) };
        return;
    }
    let (ok, err) = child("a_kernel_changing_the_rounding_mode_aborts_its_launch", "bug");
    assert!(!ok && err.contains("dmc_bug_rounding_mode changed the floating-point control state"), "{err}");
}

#[test]
fn dynamic_shared_memory_and_its_limits() {
    let run = |threads: u32| {
        let mut out = vec![0u32; threads as usize];
        // SAFETY: out holds one value per thread.
        let rc = unsafe { dmc_emu_dmc_emu_dynamic_shared(1, 1, threads, 3, out.as_mut_ptr()) };
        (rc, out)
    };
    configure(SYNC, 256 * 4, 0, 0);
    let (rc, out) = run(256);
    assert_eq!(rc, 0);
    assert!(out.iter().enumerate().all(|(t, &v)| v == (255 - t as u32) * 7));
    // Beyond 48 KiB without an opt-in, beyond the opt-in, or an opt-in beyond 227 KiB: the
    // launch fails (code -4).
    configure(SYNC, 100 << 10, 0, 0);
    assert_eq!(run(256).0, -4);
    configure(SYNC, 100 << 10, 200 << 10, 0);
    assert_eq!(run(256).0, 0);
    configure(SYNC, 210 << 10, 200 << 10, 0);
    assert_eq!(run(256).0, -4);
    configure(SYNC, 100 << 10, 228 << 10, 0);
    assert_eq!(run(256).0, -4);
    configure(SYNC, 0, 0, 0);
}

#[test]
fn launch_limits_fail_the_launch() {
    configure(SYNC, 0, 0, 0);
    let mut counter = 0u32;
    // SAFETY (all): counter is live; rejected launches run nothing.
    let launch = |gx: u32, gy: u32, bx: u32, c: &mut u32| unsafe { dmc_emu_dmc_bug_lost_update(gx, gy, bx, 0, 1, c) };
    assert_eq!(launch(1, 65_536, 32, &mut counter), -2, "grid.y above 65535");
    assert_eq!(launch(1, 1, 1025, &mut counter), -1, "more than 1024 threads per block");
    assert_eq!(launch(1, 1, 512, &mut counter), -3, "more threads than __launch_bounds__(256)");
    assert_eq!(counter, 0);
    assert_eq!(launch(2, 65_535, 1, &mut counter), 0);
    assert_eq!(counter, 2 * 65_535);
}

#[test]
fn watchdog_names_a_spinning_warp() {
    let run = |schedule: u32| {
        configure(schedule, 0, 0, 500);
        let (mut flag, mut out) = (0u32, vec![0u32; 64]);
        // SAFETY: flag and out are live for the launch.
        let rc = unsafe { dmc_emu_dmc_bug_spin_wait(1, 1, 64, 0, &raw mut flag, out.as_mut_ptr()) };
        configure(SYNC, 0, 0, 0);
        (rc, out)
    };
    if child_case().is_some() {
        run(SYNC);
        return;
    }
    let (ok, err) = child("watchdog_names_a_spinning_warp", "bug");
    assert!(!ok && err.contains("watchdog") && err.contains("warp 0 (threads 0-31)"), "{err}");
    if !tsan() {
        // Preemption lets warp 1 set the flag.
        let (rc, out) = run(PREEMPT);
        assert_eq!(rc, 0);
        assert!(out[..32].iter().all(|&v| v == 1));
    }
}

fn intrinsics_expected(lane: u32) -> [u32; 16] {
    let base = lane & !7;
    let up = if lane - base >= 3 { lane - 3 } else { lane };
    let down = if lane - base + 3 < 8 { lane + 3 } else { lane };
    let xor = if (lane ^ 16) < base + 8 { lane ^ 16 } else { lane };
    let half = if lane < 16 { 30 } else { 200 };
    let ballot = if (8..16).contains(&lane) { 0xAA00 } else { 0 };
    let group = lane / 5;
    let match_any = (0..32u32).filter(|k| k / 5 == group).fold(0, |m, k| m | 1 << k);
    let max = (0..32u32).map(|k| (k * 37) % 32).max().unwrap();
    let wide = (0x0123_4567u64 << 32) | 0x89ab_cdef;
    let xor_all = (0..32u32).fold(0, |a, k| a ^ k.wrapping_mul(0x0101_0101));
    [
        base + 1,
        up,
        down,
        xor,
        half,
        ballot,
        match_any,
        (0..32).sum(),
        max,
        (-7i32) as u32,
        ((wide << lane) >> 32) as u32,
        (wide >> lane) as u32,
        if lane.is_multiple_of(3) { 0x4924_9249 } else { 0 },
        xor_all,
        u32::MAX,
        1,
    ]
}

#[test]
fn warp_intrinsics_match_cuda_semantics_under_every_schedule() {
    for (schedule, seed) in [(SYNC, 0), (SYNC, 0x5EED), (LOCKSTEP, 0), (PREEMPT, 9)] {
        configure(schedule, 0, 0, 0);
        let mut out = vec![0u32; 32 * 16];
        // SAFETY: out holds 16 values per lane of the one warp.
        assert_eq!(unsafe { dmc_emu_dmc_emu_intrinsics(1, 1, 32, seed, out.as_mut_ptr()) }, 0);
        for lane in 0..32u32 {
            let got = &out[lane as usize * 16..][..16];
            assert_eq!(got, intrinsics_expected(lane), "lane {lane}, schedule {schedule}");
        }
    }
    configure(SYNC, 0, 0, 0);
}

#[test]
fn mixed_schedule_spreads_launches_over_every_schedule() {
    // DAMACY_EMU_SCHEDULE=mixed (scripts/asan.sh) runs each launch of the real kernels' tests
    // under sync, preempt or lockstep, chosen from (seed, kernel, grid): seed 0 keeps the fixed
    // order, the same launch always gets the same schedule, and across seeds all three occur.
    let launch = |seed: u64, gx: u32| {
        let mut counter = 0u32;
        // SAFETY: counter is live for the launch.
        assert_eq!(unsafe { dmc_emu_dmc_bug_lost_update(gx, 1, 64, seed, 1, &raw mut counter) }, 0);
        assert_eq!(counter, 64 * gx);
        // SAFETY: no arguments; reads this thread's state.
        u32::try_from(unsafe { dmc_emu_last_schedule() }).unwrap()
    };
    configure(MIXED, 0, 0, 0);
    let mut seen = [0usize; 4];
    for seed in 1..=128u64 {
        let s = launch(seed, 1 + (seed % 3) as u32);
        assert!([SYNC, LOCKSTEP, PREEMPT].contains(&s), "seed {seed}: schedule {s}");
        assert_eq!(launch(seed, 1 + (seed % 3) as u32), s, "seed {seed}: the same launch, another schedule");
        seen[s as usize] += 1;
    }
    assert_eq!(launch(0, 2), SYNC, "seed 0 keeps the fixed order");
    configure(SYNC, 0, 0, 0);
    assert_eq!(launch(9, 2), SYNC);
    // weights 10 : 5 : 1 of 16
    assert!(seen[SYNC as usize] >= 60 && seen[PREEMPT as usize] >= 25 && seen[LOCKSTEP as usize] >= 3, "{seen:?}");
}

fn resident_blocks(n: u32) {
    // SAFETY: sets a plain option of this thread's later launches.
    assert_eq!(unsafe { dmc_emu_set_resident_blocks(n) }, 0);
}

#[test]
fn concurrent_blocks_expose_a_result_that_depends_on_block_order() {
    // Block 1 reads what block 0 writes (after a barrier), with no synchronisation between the
    // blocks. Blocks one at a time in launch order (seed 0) hide it; with a seed, blocks are
    // resident together (up to 4, fibers interleaved) and block 1 reads before block 0 wrote,
    // under every schedule.
    let run = |fixed: u32, seed: u64| {
        let (mut cell, mut out) = (0u32, vec![0u32; 64]);
        // SAFETY: cell and out (one value per thread of block 1) are live for the launch.
        assert_eq!(unsafe { dmc_emu_dmc_bug_block_order(2, 1, 64, seed, fixed, &raw mut cell, out.as_mut_ptr()) }, 0);
        // SAFETY: no arguments; reads this thread's state.
        let resident = unsafe { dmc_emu_last_resident() };
        (out.iter().all(|&v| v == 42), resident)
    };
    if let Some(case) = child_case() {
        configure(SYNC, 0, 0, 0);
        run(u32::from(case == "fixed"), 0x5EED);
        return;
    }
    if tsan() {
        // blocks share no ordering: the read is a race with block 0's write
        let (ok, err) = child("concurrent_blocks_expose_a_result_that_depends_on_block_order", "bug");
        assert!(!ok && err.contains("ThreadSanitizer: data race") && err.contains("dmc_bug_block_order"), "{err}");
        let (ok, err) = child("concurrent_blocks_expose_a_result_that_depends_on_block_order", "fixed");
        assert!(ok && !err.contains("ThreadSanitizer"), "{err}");
        return;
    }
    configure(SYNC, 0, 0, 0);
    assert_eq!(run(0, 0), (true, 1), "sequential blocks in launch order hide the dependence");
    for schedule in [SYNC, LOCKSTEP, PREEMPT] {
        configure(schedule, 0, 0, 0);
        for seed in [0x5EED, 7, 1234] {
            assert_eq!(run(0, seed), (false, 2), "schedule {schedule}, seed {seed}: resident blocks expose it");
            assert_eq!(run(1, seed), (true, 2), "schedule {schedule}, seed {seed}");
        }
    }
    // one resident block: blocks one at a time again (in a seeded order)
    configure(SYNC, 0, 0, 0);
    resident_blocks(1);
    let (_, resident) = run(0, 0x5EED);
    resident_blocks(0);
    assert_eq!(resident, 1);
}
