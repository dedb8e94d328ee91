// lz4.cu — LZ4 block-format decoder (also decodes LZ4HC output: same format).
// Mapping: one warp per stream; every lane parses the same token redundantly (uniform control
// flow, broadcast loads), the 32 lanes copy literals and matches cooperatively; one __syncwarp
// per sequence (before its match copy) orders every earlier write before the match reads.
#include "common.cuh"

// Reads an LZ4 length extension (bytes of 255 continue). Returns false when the input ends.
__device__ __forceinline__ bool dmc_lz4_ext_len(const dmc_u8* src, dmc_u32 src_len, dmc_u32* ip,
                                                dmc_u32* len) {
    dmc_u32 b;
    do {
        if (*ip >= src_len) return false;
        b = src[*ip];
        *ip += 1;
        *len += b;
        if (*len > 0x7fffffffu) return false;  // no stream this long: corrupt
    } while (b == 255);
    return true;
}

extern "C" __global__ void __launch_bounds__(DMC_LZ4_WARPS_PER_BLOCK * DMC_WARP_SIZE)
dmc_lz4_decode(const dmc_u8* __restrict__ src_base, dmc_u64 src_total, dmc_u8* __restrict__ dst_base,
               dmc_u64 dst_total, const dmc_stream* __restrict__ streams,
               const dmc_u32* __restrict__ ids, dmc_u32 n_ids, dmc_u32* __restrict__ status,
               dmc_u32* __restrict__ actual) {
    const dmc_u32 warp = blockIdx.x * DMC_LZ4_WARPS_PER_BLOCK + (threadIdx.x / DMC_WARP_SIZE);
    const dmc_u32 lane = dmc_lane();
    if (warp >= n_ids) return;  // whole warp leaves together
    const dmc_u32 sid = ids[warp];
    const dmc_stream s = streams[sid];
    if (!dmc_stream_ok(s, sid, src_total, dst_total, lane == 0, status, actual)) return;
    const dmc_u8* src = src_base + s.src_off;
    dmc_u8* dst = dst_base + s.dst_off;
    const dmc_u32 src_len = s.src_len;
    const dmc_u32 dst_len = s.dst_len;
    dmc_u32 ip = 0, op = 0;
    dmc_u32 st = DMC_STATUS_OK;
    if (src_len == 0) st = DMC_STATUS_SRC_TRUNCATED;
    while (st == DMC_STATUS_OK) {
        if (ip >= src_len) { st = DMC_STATUS_SRC_TRUNCATED; break; }
        const dmc_u32 token = src[ip++];
        dmc_u32 lit = token >> 4;
        if (lit == 15 && !dmc_lz4_ext_len(src, src_len, &ip, &lit)) {
            st = DMC_STATUS_SRC_TRUNCATED;
            break;
        }
        if (lit > src_len - ip) { st = DMC_STATUS_SRC_TRUNCATED; break; }
        if (lit > dst_len - op) { st = DMC_STATUS_DST_OVERFLOW; break; }
        for (dmc_u32 j = lane; j < lit; j += DMC_WARP_SIZE) dst[op + j] = src[ip + j];
        ip += lit;
        op += lit;
        if (ip == src_len) break;  // the last sequence has literals only
        if (src_len - ip < 2) { st = DMC_STATUS_SRC_TRUNCATED; break; }
        const dmc_u32 offset = dmc_load_le16(src + ip);
        ip += 2;
        dmc_u32 mlen = token & 15;
        if (mlen == 15 && !dmc_lz4_ext_len(src, src_len, &ip, &mlen)) {
            st = DMC_STATUS_SRC_TRUNCATED;
            break;
        }
        mlen += 4;
        if (offset == 0 || offset > op) { st = DMC_STATUS_BAD_OFFSET; break; }
        if (mlen > dst_len - op) { st = DMC_STATUS_DST_OVERFLOW; break; }
        // Literals of this sequence and the previous match are read below: order them.
        __syncwarp();
        // A match of distance d repeats the d bytes before it: byte j comes from op-d+(j mod d),
        // which always lies before op, so all lanes copy at once.
        const dmc_u32 base = op - offset;
        for (dmc_u32 j = lane; j < mlen; j += DMC_WARP_SIZE) {
            const dmc_u32 k = j < offset ? j : j % offset;
            dst[op + j] = dst[base + k];
        }
        op += mlen;
    }
    if (st == DMC_STATUS_OK && op != dst_len) st = DMC_STATUS_SIZE_MISMATCH;
    if (lane == 0) {
        status[sid] = st;
        actual[sid] = op;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_lz4_decode,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_stream* streams, const dmc_u32* ids, dmc_u32 n_ids, dmc_u32* status,
                  dmc_u32* actual),
                 (src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual))
#endif
