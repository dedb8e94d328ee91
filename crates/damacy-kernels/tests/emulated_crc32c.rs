//! The crc32c kernel through the host emulator, launched directly: every short length at every
//! start alignment (the kernel loads aligned 16-byte words and takes the unaligned head and the
//! tail byte by byte), longer streams where a thread takes several words, and a stream of
//! `u32::MAX` bytes (its length arithmetic must not overflow 32 bits; the 4 GiB input is a sparse
//! anonymous mapping, zero pages and a few bytes set, so the test needs no real memory; it reads
//! every byte).
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

/// Launches `dmc_crc32c` on `streams` of `base` (one block each), returns (status, actual) per
/// stream.
fn crc32c_streams(seed: u64, base: &[u8], streams: &[Stream]) -> Vec<(u32, u32)> {
    let ids: Vec<u32> = (0..streams.len() as u32).collect();
    let mut status = vec![255u32; streams.len()];
    let mut actual = vec![0u32; streams.len()];
    let threads = damacy_kernels::consts::DMC_CRC32C_THREADS;
    // SAFETY: every stream lies inside `base` (the kernel checks it too); ids, status and actual
    // hold one entry per stream and are live for the call.
    let rc = unsafe {
        dmc_emu_dmc_crc32c(
            ids.len() as u32,
            1,
            threads,
            seed,
            base.as_ptr(),
            base.len() as u64,
            streams.as_ptr(),
            ids.as_ptr(),
            ids.len() as u32,
            status.as_mut_ptr(),
            actual.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0);
    status.into_iter().zip(actual).collect()
}

/// Pseudo-random bytes (xorshift).
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// Lengths 0..=64 at every start alignment 0..16 (absolute addresses), and longer streams (a
/// thread takes several 16-byte words, so it skips the other threads' words in between) at every
/// alignment; every other stream carries a wrong expected CRC and must be reported as a mismatch
/// with the right actual CRC.
#[test]
fn crc32c_of_every_short_length_at_every_alignment() {
    const SLOT: usize = 96; // a multiple of 16, above 64 + 15
    let threads = damacy_kernels::consts::DMC_CRC32C_THREADS as usize;
    let long = [16 * threads - 1, 16 * threads + 17, 16 * (2 * threads + 1) + 5, 100_003];
    let short_bytes = 16 * 65 * SLOT;
    let long_slot = (long.iter().max().copied().unwrap_or(0) + 16).next_multiple_of(16);
    let data = random_bytes(16 + short_bytes + 16 * long.len() * long_slot, 14);
    // the offset of the first 16-byte aligned address of `data`
    let pad = data.as_ptr().align_offset(16);
    let mut spans = Vec::new();
    for align in 0..16 {
        for len in 0..=64 {
            spans.push((pad + (align * 65 + len) * SLOT + align, len));
        }
        for (k, &len) in long.iter().enumerate() {
            spans.push((pad + short_bytes + (align * long.len() + k) * long_slot + align, len));
        }
    }
    let expected: Vec<u32> = spans.iter().map(|&(off, len)| crc32c::crc32c(&data[off..off + len])).collect();
    let streams: Vec<Stream> = spans
        .iter()
        .zip(&expected)
        .enumerate()
        .map(|(i, (&(off, len), &crc))| Stream {
            src_off: off as u64,
            dst_off: 0,
            src_len: len as u32,
            dst_len: len as u32,
            codec: 0,
            flags: if i % 2 == 0 { crc } else { crc ^ 0x0100_0000 },
        })
        .collect();
    for seed in [0u64, 0x5EED_2026] {
        let results = crc32c_streams(seed, &data, &streams);
        for (i, ((&(off, len), &crc), &(status, actual))) in spans.iter().zip(&expected).zip(&results).enumerate() {
            let at = (data.as_ptr() as usize + off) % 16;
            assert_eq!(actual, crc, "length {len} at alignment {at} (seed {seed:#x})");
            let want = if i % 2 == 0 {
                damacy_kernels::consts::DMC_STATUS_OK
            } else {
                damacy_kernels::consts::DMC_STATUS_CRC_MISMATCH
            };
            assert_eq!(status, want, "length {len} at alignment {at} (seed {seed:#x})");
        }
    }
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
