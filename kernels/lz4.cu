// lz4.cu — LZ4 block-format decoder (also decodes LZ4HC output: same format).
// Mapping: one warp per stream; the warp holds a 128-byte window of the input in registers
// (dmc_win, one coalesced 4-byte load per lane), every lane parses the same token from it
// redundantly with shuffles (uniform control flow), the 32 lanes copy literals (from the window;
// long runs with 4-byte stores) and matches (long ones with 16-byte stores, dmc_lz_match_copy)
// cooperatively; one __syncwarp per sequence (before its match copy, and one per round of a
// far match's copy) orders every earlier write before the match reads.
#include "common.cuh"

// Reads an LZ4 length extension (bytes of 255 continue) from the window. Returns false when the
// input ends.
__device__ __forceinline__ bool dmc_lz4_ext_len(dmc_win* w, dmc_u32 src_len, dmc_u32* ip,
                                                dmc_u32* len, dmc_u32 lane) {
    dmc_u32 b;
    do {
        if (*ip >= src_len) return false;
        b = dmc_win_byte(w, *ip, lane);
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
    dmc_win w = dmc_win_open(src, src_len, lane);
    while (st == DMC_STATUS_OK) {
        if (ip >= src_len) { st = DMC_STATUS_SRC_TRUNCATED; break; }
        const dmc_u32 token = dmc_win_byte(&w, ip++, lane);
        dmc_u32 lit = token >> 4;
        if (lit == 15 && !dmc_lz4_ext_len(&w, src_len, &ip, &lit, lane)) {
            st = DMC_STATUS_SRC_TRUNCATED;
            break;
        }
        if (lit > src_len - ip) { st = DMC_STATUS_SRC_TRUNCATED; break; }
        if (lit > dst_len - op) { st = DMC_STATUS_DST_OVERFLOW; break; }
        dmc_win_copy(&w, ip, lit, dst + op, lane);
        ip += lit;
        op += lit;
        if (ip == src_len) break;  // the last sequence has literals only
        if (src_len - ip < 2) { st = DMC_STATUS_SRC_TRUNCATED; break; }
        dmc_win_need(&w, ip, 2, lane);
        const dmc_u32 offset = dmc_win_get(w, ip) | (dmc_win_get(w, ip + 1) << 8);
        ip += 2;
        dmc_u32 mlen = token & 15;
        if (mlen == 15 && !dmc_lz4_ext_len(&w, src_len, &ip, &mlen, lane)) {
            st = DMC_STATUS_SRC_TRUNCATED;
            break;
        }
        mlen += 4;
        if (offset == 0 || offset > op) { st = DMC_STATUS_BAD_OFFSET; break; }
        if (mlen > dst_len - op) { st = DMC_STATUS_DST_OVERFLOW; break; }
        // Literals of this sequence and the previous match are read below: order them.
        __syncwarp();
        dmc_lz_match_copy(dst, op, offset, mlen, lane);
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
