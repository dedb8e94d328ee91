// blosclz.cu — BloscLZ decoder (c-blosc 1.x format, FastLZ level-1 derived).
// Mapping: one warp per stream; the warp holds a 128-byte window of the input in registers
// (dmc_win, one coalesced 4-byte load per lane), every lane parses the same control bytes from
// it redundantly with shuffles (uniform control flow). Runs of short controls (literal runs,
// matches < 64 bytes) are parsed ahead into a batch, lane t holding control t, and written by
// dmc_lz_batch_copy in rounds of 32 output bytes, lane l writing byte l of a round (one
// __syncwarp per round); a long, final, corrupt or out-of-window control is done on its own:
// the 32 lanes copy a literal run (from the window) or a match (long ones with 16-byte stores,
// dmc_lz_match_copy) cooperatively, one __syncwarp before each match copy (and one per round of
// a far match's copy) ordering every earlier write before the match reads.
#include "common.cuh"

#define DMC_BLOSCLZ_MAX_DISTANCE 8191

extern "C" __global__ void __launch_bounds__(DMC_BLOSCLZ_WARPS_PER_BLOCK * DMC_WARP_SIZE)
dmc_blosclz_decode(const dmc_u8* __restrict__ src_base, dmc_u64 src_total,
                   dmc_u8* __restrict__ dst_base, dmc_u64 dst_total,
                   const dmc_stream* __restrict__ streams, const dmc_u32* __restrict__ ids,
                   dmc_u32 n_ids, dmc_u32* __restrict__ status, dmc_u32* __restrict__ actual) {
    const dmc_u32 warp = blockIdx.x * DMC_BLOSCLZ_WARPS_PER_BLOCK + (threadIdx.x / DMC_WARP_SIZE);
    const dmc_u32 lane = dmc_lane();
    if (warp >= n_ids) return;  // whole warp leaves together
    const dmc_u32 sid = ids[warp];
    const dmc_stream s = streams[sid];
    if (!dmc_stream_ok(s, sid, src_total, dst_total, lane == 0, status, actual)) return;
    const dmc_u8* src = src_base + s.src_off;
    dmc_u8* dst = dst_base + s.dst_off;
    const dmc_u32 src_len = s.src_len;
    const dmc_u32 dst_len = s.dst_len;
    dmc_u32 st = DMC_STATUS_OK;
    dmc_u32 ip = 0, op = 0;
    dmc_win w = dmc_win_open(src, src_len, lane);
    if (src_len > 0) {
        dmc_u32 ctrl = dmc_win_byte(&w, ip++, lane) & 31u;
        for (;;) {
            // A batch of short controls from the window (dmc_lz_batch_copy); the first one that
            // is long, the last one, corrupt or not in the window ends it, unconsumed.
            dmc_win_need(&w, ip, DMC_LZ_BATCH_WINDOW, lane);
            const dmc_u32 op0 = op;
            dmc_u32 ntok = 0;
            dmc_lz_tok tok = {0, 0, 0, 1};
            while (ntok < DMC_WARP_SIZE) {
                dmc_u32 q = ip;
                dmc_u32 len, lit = 0, lip = 0, dist = 1;
                if (ctrl >= 32) {
                    len = (ctrl >> 5) - 1;
                    dmc_u32 ofs = (ctrl & 31u) << 8;
                    if (len == 6) {
                        if (q + 1 >= src_len || !dmc_win_has(w, q)) break;
                        const dmc_u32 code = dmc_win_get(w, q++);
                        if (code == 255) break;  // long
                        len += code;
                    }
                    if (q + 1 >= src_len || !dmc_win_has(w, q)) break;
                    const dmc_u32 code = dmc_win_get(w, q++);
                    len += 3;
                    dist = ofs + code + 1;
                    if (code == 255 && ofs == (31u << 8)) {
                        if (q + 1 >= src_len || !dmc_win_has(w, q + 1)) break;
                        ofs = (dmc_win_get(w, q) << 8) | dmc_win_get(w, q + 1);
                        q += 2;
                        dist = ofs + DMC_BLOSCLZ_MAX_DISTANCE + 1;
                    }
                    if (len >= DMC_LZ_WIDE_MATCH || len > dst_len - op || dist > op) break;
                } else {
                    len = lit = ctrl + 1;
                    if (len > dst_len - op || len > src_len - q || !dmc_win_has(w, q + len - 1)) break;
                    lip = q;
                    q += len;
                }
                // the last control (the reference decoder does not copy a match that ends the
                // input) or the next one outside the window
                if (q >= src_len || !dmc_win_has(w, q)) break;
                if (lane == ntok) tok = dmc_lz_tok{op - op0, lit, lip, dist};
                ntok++;
                op += len;
                ctrl = dmc_win_get(w, q);
                ip = q + 1;
            }
            if (ntok > 0) {
                dmc_lz_batch_copy(w, dst, op0, op - op0, ntok, tok, lane);
                continue;
            }
            // One control in order: long, the last one, corrupt, or not in the window.
            if (ctrl >= 32) {
                // match: length in the top 3 bits (7 = extended), distance high bits in the low 5
                dmc_u32 len = (ctrl >> 5) - 1;
                dmc_u32 ofs = (ctrl & 31u) << 8;
                if (len == 6) {
                    dmc_u32 code;
                    do {
                        if (ip + 1 >= src_len) { st = DMC_STATUS_SRC_TRUNCATED; break; }
                        code = dmc_win_byte(&w, ip++, lane);
                        len += code;
                    } while (code == 255 && len < 0x7fffffffu);
                    if (st != DMC_STATUS_OK) break;
                } else if (ip + 1 >= src_len) {
                    st = DMC_STATUS_SRC_TRUNCATED;
                    break;
                }
                const dmc_u32 code = dmc_win_byte(&w, ip++, lane);
                len += 3;
                dmc_u32 dist = ofs + code + 1;
                if (code == 255 && ofs == (31u << 8)) {
                    if (ip + 1 >= src_len) { st = DMC_STATUS_SRC_TRUNCATED; break; }
                    dmc_win_need(&w, ip, 2, lane);
                    ofs = (dmc_win_get(w, ip) << 8) | dmc_win_get(w, ip + 1);
                    ip += 2;
                    dist = ofs + DMC_BLOSCLZ_MAX_DISTANCE + 1;
                }
                if (len > dst_len - op) { st = DMC_STATUS_DST_OVERFLOW; break; }
                if (dist > op) { st = DMC_STATUS_BAD_OFFSET; break; }
                // The reference decoder stops here, without copying, when the input ends.
                if (ip >= src_len) break;
                __syncwarp();
                dmc_lz_match_copy(dst, op, dist, len, lane);
                op += len;
                ctrl = dmc_win_byte(&w, ip++, lane);
            } else {
                // literal run of ctrl+1 bytes
                const dmc_u32 run = ctrl + 1;
                if (run > dst_len - op) { st = DMC_STATUS_DST_OVERFLOW; break; }
                if (run > src_len - ip) { st = DMC_STATUS_SRC_TRUNCATED; break; }
                dmc_win_copy(&w, ip, run, dst + op, lane);
                op += run;
                ip += run;
                if (ip >= src_len) break;
                ctrl = dmc_win_byte(&w, ip++, lane);
            }
        }
    }
    if (st == DMC_STATUS_OK && op != dst_len) st = DMC_STATUS_SIZE_MISMATCH;
    if (lane == 0) {
        status[sid] = st;
        actual[sid] = op;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_blosclz_decode,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_stream* streams, const dmc_u32* ids, dmc_u32 n_ids, dmc_u32* status,
                  dmc_u32* actual),
                 (src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual))
#endif
