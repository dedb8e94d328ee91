//! crc32c of a stream of `u32::MAX` bytes through the host emulator: the kernel's segment
//! arithmetic must not overflow 32 bits. The 4 GiB input is a sparse anonymous mapping (zero
//! pages, a few bytes set), so the test needs no real memory; it reads every byte (~10 s).
#![allow(clippy::doc_markdown, clippy::missing_panics_doc)]

use std::ffi::c_void;

unsafe extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> i32;
    fn dmc_emu_dmc_crc32c(
        gx: u32,
        gy: u32,
        bx: u32,
        seed: u64,
        base: *const u8,
        total: u64,
        streams: *const Stream,
        ids: *const u32,
        n_ids: u32,
        status: *mut u32,
        actual: *mut u32,
    ) -> i32;
}

/// `struct dmc_stream` of `kernels/common.cuh`.
#[repr(C)]
struct Stream {
    src_off: u64,
    dst_off: u64,
    src_len: u32,
    dst_len: u32,
    codec: u32,
    flags: u32,
}

const PROT_READ_WRITE: i32 = 0x1 | 0x2;
const MAP_PRIVATE_ANON_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;

#[test]
fn crc32c_of_a_stream_of_u32_max_bytes() {
    let n = u32::MAX as usize;
    // SAFETY: a fresh private anonymous mapping; checked for failure below.
    let base = unsafe { mmap(std::ptr::null_mut(), n, PROT_READ_WRITE, MAP_PRIVATE_ANON_NORESERVE, -1, 0) };
    assert_ne!(base as isize, -1, "cannot map 4 GiB of address space");
    // SAFETY: the mapping is n bytes, readable and writable, and only this test uses it.
    let data = unsafe { std::slice::from_raw_parts_mut(base.cast::<u8>(), n) };
    // A few bytes around the 256 threads' segment edges (segments of 2^24 bytes) and the ends.
    for (k, at) in [0usize, 1, 12_345, (1 << 24) - 1, 1 << 24, 1 << 31, (255 << 24) - 1, 255 << 24, n - 2, n - 1]
        .into_iter()
        .enumerate()
    {
        data[at] = 0x5A ^ (k as u8).wrapping_mul(37);
    }
    let expected = crc32c::crc32c(data);
    let stream = Stream { src_off: 0, dst_off: 0, src_len: u32::MAX, dst_len: u32::MAX, codec: 0, flags: expected };
    let ids = [0u32];
    let (mut status, mut actual) = (255u32, 0u32);
    let threads = damacy_kernels::consts::DMC_CRC32C_THREADS;
    // SAFETY: base holds n bytes; stream, ids, status and actual are live for the call.
    let rc = unsafe {
        dmc_emu_dmc_crc32c(
            1,
            1,
            threads,
            0,
            base.cast(),
            n as u64,
            &raw const stream,
            ids.as_ptr(),
            1,
            &raw mut status,
            &raw mut actual,
        )
    };
    // SAFETY: the mapping made above, no longer used.
    unsafe { munmap(base, n) };
    assert_eq!(rc, 0);
    assert_eq!(actual, expected, "crc32c of u32::MAX bytes: {actual:#010x}, want {expected:#010x}");
    assert_eq!(status, damacy_kernels::consts::DMC_STATUS_OK);
}
