// crc32c.cu — CRC32C (Castagnoli) verification of streams (zarr `crc32c` codec).
// Mapping: one block per stream; each of the DMC_CRC32C_THREADS threads computes the raw CRC of
// one contiguous segment with a shared-memory table, shifts it past the bytes that follow it
// (GF(2) multiply by x^(8n)), and the block XOR-reduces the parts in shared memory.
// The stream's `flags` field holds the expected CRC; `actual` receives the computed one.
#include "common.cuh"

#define DMC_CRC32C_POLY 0x82F63B78u

// Product of two polynomials in the reflected representation (bit 31 = x^0), modulo the CRC
// polynomial.
__device__ __forceinline__ dmc_u32 dmc_crc_mulmod(dmc_u32 a, dmc_u32 b) {
    dmc_u32 p = 0;
    for (int i = 0; i < 32; i++) {
        if (a & (0x80000000u >> i)) p ^= b;
        b = (b & 1u) ? ((b >> 1) ^ DMC_CRC32C_POLY) : (b >> 1);
    }
    return p;
}

// x^(8n) modulo the CRC polynomial, reflected, by square-and-multiply.
__device__ __forceinline__ dmc_u32 dmc_crc_x8n(dmc_u64 n) {
    dmc_u32 r = 0x80000000u;   // x^0
    dmc_u32 sq = 0x00800000u;  // x^8
    while (n != 0) {
        if (n & 1u) r = dmc_crc_mulmod(r, sq);
        sq = dmc_crc_mulmod(sq, sq);
        n >>= 1;
    }
    return r;
}

extern "C" __global__ void __launch_bounds__(DMC_CRC32C_THREADS)
dmc_crc32c(const dmc_u8* __restrict__ base, dmc_u64 total, const dmc_stream* __restrict__ streams,
           const dmc_u32* __restrict__ ids, dmc_u32 n_ids, dmc_u32* __restrict__ status,
           dmc_u32* __restrict__ actual) {
    __shared__ dmc_u32 table[256];
    __shared__ dmc_u32 acc;
    if (blockIdx.x >= n_ids) return;
    const dmc_u32 sid = ids[blockIdx.x];
    const dmc_stream s = streams[sid];
    const dmc_u32 t = threadIdx.x;
    if (!dmc_in_bounds(s.src_off, s.src_len, total)) {
        if (t == 0) {
            status[sid] = DMC_STATUS_BAD_DESCRIPTOR;
            actual[sid] = 0;
        }
        return;
    }
    for (dmc_u32 e = t; e < 256; e += blockDim.x) {
        dmc_u32 c = e;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? ((c >> 1) ^ DMC_CRC32C_POLY) : (c >> 1);
        table[e] = c;
    }
    if (t == 0) acc = 0;
    __syncthreads();
    const dmc_u8* p = base + s.src_off;
    // 64-bit segment arithmetic: src_len may be up to u32::MAX, where n + blockDim.x - 1 and
    // lo + seg overflow 32 bits.
    const dmc_u64 n = s.src_len;
    const dmc_u64 seg = (n + blockDim.x - 1) / blockDim.x;
    const dmc_u64 lo = dmc_min_u64((dmc_u64)t * seg, n);
    const dmc_u64 hi = dmc_min_u64(lo + seg, n);
    dmc_u32 c = 0;  // raw CRC (no initial value, no final xor) of this segment
    for (dmc_u64 i = lo; i < hi; i++) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
    if (hi > lo) atomicXor(&acc, dmc_crc_mulmod(c, dmc_crc_x8n(n - hi)));
    __syncthreads();
    if (t == 0) {
        // standard CRC32C: initial register ~0 shifted through the n bytes, final xor ~0
        const dmc_u32 crc = acc ^ dmc_crc_mulmod(0xFFFFFFFFu, dmc_crc_x8n(n)) ^ 0xFFFFFFFFu;
        actual[sid] = crc;
        status[sid] = (crc == s.flags) ? DMC_STATUS_OK : DMC_STATUS_CRC_MISMATCH;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_crc32c,
                 (const dmc_u8* base, dmc_u64 total, const dmc_stream* streams, const dmc_u32* ids,
                  dmc_u32 n_ids, dmc_u32* status, dmc_u32* actual),
                 (base, total, streams, ids, n_ids, status, actual))
#endif
