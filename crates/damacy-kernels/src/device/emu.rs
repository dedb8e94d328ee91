//! The host emulator backend: C-ABI launchers of the kernels compiled by the build script.

use super::Arg;
use crate::error::{Error, Result};
use crate::kernel::Kernel;

// Pointer parameters are declared as u64: on the supported hosts (64-bit) a pointer and a u64
// are passed identically in the C ABI.
unsafe extern "C" {
    fn dmc_emu_dmc_lz4_decode(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_blosclz_decode(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_memcpy(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_unshuffle(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        jobs: u64,
        n_jobs: u32,
        status: u64,
    ) -> i32;
    fn dmc_emu_dmc_crc32c(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        base: u64,
        total: u64,
        streams: u64,
        ids: u64,
        n_ids: u32,
        status: u64,
        actual: u64,
    ) -> i32;
    fn dmc_emu_dmc_assemble(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        src: u64,
        src_total: u64,
        dst: u64,
        dst_total: u64,
        jobs: u64,
        n_jobs: u32,
        status: u64,
    ) -> i32;
}

const _: () = assert!(std::mem::size_of::<usize>() == 8, "the emulator needs a 64-bit host");

fn sig_error(kernel: Kernel) -> Error {
    Error::Emulator(format!("argument list does not match {}", kernel.name()))
}

/// Runs `kernel` synchronously on the calling thread.
///
/// # Safety
/// As [`super::Device::launch`]: pointer arguments address live buffers described by the sizes.
#[allow(clippy::many_single_char_names)]
pub(super) unsafe fn launch(kernel: Kernel, grid: (u32, u32), seed: u64, args: &[Arg]) -> Result<()> {
    use Arg::{Ptr as P, U32 as W, U64 as D};
    let bx = kernel.block_threads();
    let (gx, gy) = grid;
    // SAFETY (all arms): the launchers run the kernel on the given buffers, valid per the
    // caller's contract; the argument kinds are matched against the kernel's signature.
    let rc = match (kernel, args) {
        (Kernel::Lz4Decode, &[P(s), D(st), P(d), D(dt), P(t), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_lz4_decode(gx, gy, bx, seed, s, st, d, dt, t, i, n, stat, a)
        },
        (Kernel::BloscLzDecode, &[P(s), D(st), P(d), D(dt), P(t), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_blosclz_decode(gx, gy, bx, seed, s, st, d, dt, t, i, n, stat, a)
        },
        (Kernel::Memcpy, &[P(s), D(st), P(d), D(dt), P(t), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_memcpy(gx, gy, bx, seed, s, st, d, dt, t, i, n, stat, a)
        },
        (Kernel::Unshuffle, &[P(s), D(st), P(d), D(dt), P(j), W(n), P(stat)]) => unsafe {
            dmc_emu_dmc_unshuffle(gx, gy, bx, seed, s, st, d, dt, j, n, stat)
        },
        (Kernel::Crc32c, &[P(b), D(t), P(s), P(i), W(n), P(stat), P(a)]) => unsafe {
            dmc_emu_dmc_crc32c(gx, gy, bx, seed, b, t, s, i, n, stat, a)
        },
        (Kernel::Assemble, &[P(s), D(st), P(d), D(dt), P(j), W(n), P(stat)]) => unsafe {
            dmc_emu_dmc_assemble(gx, gy, bx, seed, s, st, d, dt, j, n, stat)
        },
        _ => return Err(sig_error(kernel)),
    };
    if rc == 0 { Ok(()) } else { Err(Error::Emulator(format!("launch of {} rejected (code {rc})", kernel.name()))) }
}
