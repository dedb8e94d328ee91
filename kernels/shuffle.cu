// shuffle.cu — blosc byte unshuffle and bitunshuffle of decoded blocks.
// Mapping: one block per blosc block (job, blockIdx.x); DMC_SHUFFLE_THREADS threads stride over
// the output bytes, each gathers its byte (byte mode) or its 8 bits (bit mode) from the input.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(DMC_SHUFFLE_THREADS)
dmc_unshuffle(const dmc_u8* __restrict__ src_base, dmc_u64 src_total, dmc_u8* __restrict__ dst_base,
              dmc_u64 dst_total, const dmc_shuffle_job* __restrict__ jobs, dmc_u32 n_jobs,
              dmc_u32* __restrict__ status) {
    if (blockIdx.x >= n_jobs) return;
    const dmc_shuffle_job j = jobs[blockIdx.x];
    const dmc_u32 t = threadIdx.x;
    if (!dmc_in_bounds(j.src_off, j.len, src_total) || !dmc_in_bounds(j.dst_off, j.len, dst_total) ||
        j.typesize == 0) {
        if (t == 0) status[j.stream] = DMC_STATUS_BAD_DESCRIPTOR;
        return;
    }
    const dmc_u8* src = src_base + j.src_off;
    dmc_u8* dst = dst_base + j.dst_off;
    const dmc_u32 ts = j.typesize;
    const dmc_u32 n = j.len / ts;        // whole elements
    const dmc_u32 body = n * ts;         // bytes that are (un)shuffled
    if (j.mode == DMC_SHUFFLE_BYTE) {
        // byte j of element i is stored at j*n + i; leftover bytes are stored as they are
        for (dmc_u32 o = t; o < body; o += blockDim.x) {
            const dmc_u32 i = o / ts;
            const dmc_u32 b = o - i * ts;
            dst[o] = src[b * n + i];
        }
        for (dmc_u32 o = body + t; o < j.len; o += blockDim.x) dst[o] = src[o];
    } else if (j.mode == DMC_SHUFFLE_BIT && (n % 8) == 0) {
        // bit b of byte k of element i is bit (i % 8) of byte (k*8+b)*(n/8) + i/8
        const dmc_u32 row = n / 8;
        for (dmc_u32 o = t; o < body; o += blockDim.x) {
            const dmc_u32 i = o / ts;
            const dmc_u32 k = o - i * ts;
            const dmc_u32 sh = i & 7u;
            const dmc_u8* p = src + (k * 8) * row + (i >> 3);
            dmc_u32 v = 0;
            for (dmc_u32 b = 0; b < 8; b++) v |= (((dmc_u32)p[b * row] >> sh) & 1u) << b;
            dst[o] = (dmc_u8)v;
        }
        for (dmc_u32 o = body + t; o < j.len; o += blockDim.x) dst[o] = src[o];
    } else {
        // bit mode with an element count that is not a multiple of 8: blosc stores the block as is
        for (dmc_u32 o = t; o < j.len; o += blockDim.x) dst[o] = src[o];
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_unshuffle,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_shuffle_job* jobs, dmc_u32 n_jobs, dmc_u32* status),
                 (src_base, src_total, dst_base, dst_total, jobs, n_jobs, status))
#endif
