// memcpy.cu — raw copy of streams (blosc memcpyed frames and stored splits, zarr `bytes`).
// Mapping: grid (streams of `ids`, parts per stream): block (x, y) copies part y of stream
// ids[x] with dmc_range_copy (common.cuh): rounds of DMC_MEMCPY_PART_BYTES (DMC_MEMCPY_THREADS
// threads × DMC_COPY_UNROLL aligned 16-byte words each, all loaded before any is stored), round k
// of a stream to part k mod gridDim.y. The launcher sizes grid.y from the wave's longest stream
// (one part per DMC_MEMCPY_PART_BYTES, capped), so a few long streams still spread over the SMs
// (32 streams of 1 MiB: 2048 blocks, not 32). Block (x, 0)'s thread 0 writes the status.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(DMC_MEMCPY_THREADS)
dmc_memcpy(const dmc_u8* __restrict__ src_base, dmc_u64 src_total, dmc_u8* __restrict__ dst_base,
           dmc_u64 dst_total, const dmc_stream* __restrict__ streams,
           const dmc_u32* __restrict__ ids, dmc_u32 n_ids, dmc_u32* __restrict__ status,
           dmc_u32* __restrict__ actual) {
    if (blockIdx.x >= n_ids) return;
    const dmc_u32 sid = ids[blockIdx.x];
    const dmc_stream s = streams[sid];
    const dmc_u32 t = threadIdx.x;
    const bool lead = blockIdx.y == 0 && t == 0;
    if (!dmc_stream_ok(s, sid, src_total, dst_total, lead, status, actual)) return;
    const dmc_u32 n = dmc_min_u32(s.src_len, s.dst_len);
    dmc_range_copy(dst_base + s.dst_off, src_base + s.src_off, n, blockIdx.y, gridDim.y, t, blockDim.x);
    if (lead) {
        status[sid] = (s.src_len == s.dst_len) ? DMC_STATUS_OK
                      : (s.src_len > s.dst_len) ? DMC_STATUS_DST_OVERFLOW
                                                : DMC_STATUS_SRC_TRUNCATED;
        actual[sid] = n;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_memcpy,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_stream* streams, const dmc_u32* ids, dmc_u32 n_ids, dmc_u32* status,
                  dmc_u32* actual),
                 (src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual))
#endif
