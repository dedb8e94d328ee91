// memcpy.cu — raw copy of streams (blosc memcpyed frames and stored splits, zarr `bytes`).
// Mapping: one block per stream (blockIdx.x), DMC_MEMCPY_THREADS threads stride over its bytes,
// 4-byte words when source and destination share their alignment.
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
    if (!dmc_stream_ok(s, sid, src_total, dst_total, t == 0, status, actual)) return;
    const dmc_u8* src = src_base + s.src_off;
    dmc_u8* dst = dst_base + s.dst_off;
    const dmc_u32 n = dmc_min_u32(s.src_len, s.dst_len);
    const dmc_u32 mis = (dmc_u32)(((dmc_u64)src) & 3u);
    if (mis == (dmc_u32)(((dmc_u64)dst) & 3u)) {
        const dmc_u32 head = dmc_min_u32((4u - mis) & 3u, n);
        if (t < head) dst[t] = src[t];
        const dmc_u32 words = (n - head) / 4;
        const dmc_u32* sw = (const dmc_u32*)(src + head);
        dmc_u32* dw = (dmc_u32*)(dst + head);
        for (dmc_u32 i = t; i < words; i += blockDim.x) dw[i] = sw[i];
        for (dmc_u32 i = head + words * 4 + t; i < n; i += blockDim.x) dst[i] = src[i];
    } else {
        for (dmc_u32 i = t; i < n; i += blockDim.x) dst[i] = src[i];
    }
    if (t == 0) {
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
