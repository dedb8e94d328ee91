// lz4.cu — LZ4 block-format decoder (also decodes LZ4HC output: same format).
// Mapping: one warp per stream; the warp holds a 128-byte window of the input in registers
// (dmc_win, one coalesced 4-byte load per lane), every lane parses the same token from it
// redundantly with shuffles (uniform control flow). Runs of short sequences (literals < 96,
// matches < 64 bytes) are parsed ahead into a batch, lane t holding sequence t, and written by
// dmc_lz_batch_copy in rounds of 32 output bytes, lane l writing byte l of a round (one
// __syncwarp per round). A stream compressed 8x or more (a label image's: runs, each a short
// sequence and one whose match is long) is decoded in runs mode (dmc_lz4_stream<true>): a
// sequence whose match alone is long ends the batch (its literals the batch's last) and its
// match is copied right after it, not parsed a second time the single way; other streams keep
// the parser loop without that exit, which is cheaper for their short sequences (the GPU model,
// benches/results/gpu-model.md). A long, final, corrupt or out-of-window sequence is done on its own:
// the 32 lanes copy its literals (from the window; long runs with 4-byte stores) and its match
// (long ones with 16-byte stores, dmc_lz_match_copy) cooperatively, one __syncwarp before the
// match copy (and one per round of a far match's copy) ordering every earlier write before the
// match reads.
#include "common.cuh"

// Extension bytes of a long match's length a batch reads (each a shuffle); more: the single way.
#define DMC_LZ4_BATCH_EXT 4

// Reads an LZ4 length extension (bytes of 255 continue) from the window, 32 bytes a step: lane
// l reads byte ip + l, a ballot finds the first byte that is not 255 (a long run's match length
// is one extension byte per 255 bytes: a byte a step took a window check and a shuffle each).
// Returns false when the input ends inside it (or the length passes any stream's: corrupt).
__device__ __forceinline__ bool dmc_lz4_ext_len(dmc_win* w, dmc_u32 src_len, dmc_u32* ip,
                                                dmc_u32* len, dmc_u32 lane) {
    for (;;) {
        if (*ip >= src_len) return false;
        dmc_win_need(w, *ip, DMC_WARP_SIZE, lane);
        const bool past = lane >= src_len - *ip;     // past the input
        const dmc_u32 b = dmc_win_get(*w, *ip + lane);  // every lane: a collective
        const unsigned stop = __ballot_sync(0xffffffffu, past || b != 255);
        if (stop == 0) {
            *ip += DMC_WARP_SIZE;
            *len += 255 * DMC_WARP_SIZE;
            if (*len > 0x7fffffffu) return false;  // no stream this long: corrupt
            continue;
        }
        const dmc_u32 f = (dmc_u32)__ffs(stop) - 1;
        if (f >= src_len - *ip) return false;  // the input ended inside the extension
        *len += 255 * f + __shfl_sync(0xffffffffu, b, (int)f);
        *ip += f + 1;
        return *len <= 0x7fffffffu;
    }
}

// A stream compressed RUNS_RATIO times or more (a label image's: long runs, each a short
// sequence and one with a long match) is decoded with dmc_lz4_stream<true>, any other with
// dmc_lz4_stream<false> (dmc_lz4_decode).
#define DMC_LZ4_RUNS_RATIO 8

// Decodes one stream (the warp's; a warp collective) from the window w on src[0, src_len) into
// dst[0, dst_len); returns its status, the bytes written in *op.
// RUNS: a sequence whose match alone is long ends a batch instead of being left for the single
// way — its literals are the batch's last, its match copied right after it (no second parse of
// it, no extension read 32 bytes a step for its one to three extension bytes). Off, the
// parser's loop has one exit fewer: the short-sequence fields, all of whose sequences are
// short, keep the loop that is cheapest for them.
template <bool RUNS>
__device__ __forceinline__ dmc_u32 dmc_lz4_stream(dmc_win& w, dmc_u32 src_len, dmc_u8* dst, dmc_u32 dst_len,
                                                  dmc_u32* op_out, dmc_u32 lane) {
    dmc_u32 ip = 0, op = 0;
    dmc_u32 st = DMC_STATUS_OK;
    if (src_len == 0) st = DMC_STATUS_SRC_TRUNCATED;
    while (st == DMC_STATUS_OK) {
        if (ip >= src_len) { st = DMC_STATUS_SRC_TRUNCATED; break; }
        // A batch of short sequences from the window (dmc_lz_batch_copy); the first one that is
        // long, the last one, corrupt or not in the window ends it, unconsumed (with RUNS, but
        // for one whose match alone is long: consumed, its match copied after the batch).
        dmc_win_need(&w, ip, DMC_LZ_BATCH_WINDOW, lane);
        const dmc_u32 op0 = op;
        dmc_u32 ntok = 0;
        dmc_u32 mdist = 0, mlen = 0;  // the match after the batch, or the single sequence's
        dmc_lz_tok tok = {0, 0, 0, 1};
        while (ntok < DMC_WARP_SIZE) {
            dmc_u32 q = ip;
            dmc_u32 lit = 0, ml = 0, b = 255, lip = 0;
            if (q >= src_len || !dmc_win_has(w, q)) break;
            const dmc_u32 tk = dmc_win_get(w, q++);
            lit = tk >> 4;
            if (lit == 15) {
                if (q >= src_len || !dmc_win_has(w, q)) break;
                b = dmc_win_get(w, q++);
                lit += b;
                if (b == 255) break;  // long
            }
            if (lit >= DMC_WIN_WIDE_COPY || lit > src_len - q || lit > dst_len - op) break;
            if (lit > 0 && !dmc_win_has(w, q + lit - 1)) break;
            lip = q;
            q += lit;
            if (src_len - q < 3 || !dmc_win_has(w, q + 1)) break;  // the last sequence, or more
            const dmc_u32 offset = dmc_win_get(w, q) | (dmc_win_get(w, q + 1) << 8);
            q += 2;
            ml = tk & 15;
            if constexpr (RUNS) b = 0;
            if (ml == 15) {
                if (q >= src_len || !dmc_win_has(w, q)) break;
                b = dmc_win_get(w, q++);
                ml += b;
            }
            ml += 4;
            if (ml >= DMC_LZ_WIDE_MATCH || offset == 0 || offset > op + lit || ml > dst_len - op - lit) {
                if constexpr (RUNS) {
                    // A long match: with up to DMC_LZ4_BATCH_EXT extension bytes, all in the window,
                    // and sound, the sequence's literals end the batch and its match follows it.
                    for (dmc_u32 e = 1; b == 255 && e < DMC_LZ4_BATCH_EXT; e++) {
                        if (q >= src_len || !dmc_win_has(w, q)) break;
                        b = dmc_win_get(w, q++);
                        ml += b;
                    }
                    if (b == 255 || offset == 0 || offset > op + lit || ml > dst_len - op - lit) break;
                    if (lit > 0) {
                        if (lane == ntok) tok = dmc_lz_tok{op - op0, lit, lip, offset};
                        ntok++;
                    }
                    op += lit;
                    ip = q;
                    mdist = offset;
                    mlen = ml;
                }
                break;
            }
            if (lane == ntok) tok = dmc_lz_tok{op - op0, lit, lip, offset};
            ntok++;
            op += lit + ml;
            ip = q;
        }
        if (ntok > 0) {
            dmc_lz_batch_copy(w, dst, op0, op - op0, ntok, tok, lane);
            if (mlen == 0) continue;
        }
        if (mlen == 0) {
            // One sequence in order: long, the last one, corrupt, or not in the window.
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
            mdist = dmc_win_get(w, ip) | (dmc_win_get(w, ip + 1) << 8);
            ip += 2;
            mlen = token & 15;
            if (mlen == 15 && !dmc_lz4_ext_len(&w, src_len, &ip, &mlen, lane)) {
                st = DMC_STATUS_SRC_TRUNCATED;
                break;
            }
            mlen += 4;
            if (mdist == 0 || mdist > op) { st = DMC_STATUS_BAD_OFFSET; break; }
            if (mlen > dst_len - op) { st = DMC_STATUS_DST_OVERFLOW; break; }
        }
        // The literals before the match and the earlier matches are read below: order them.
        __syncwarp();
        dmc_lz_match_copy(dst, op, mdist, mlen, lane);
        op += mlen;
    }
    if (st == DMC_STATUS_OK && op != dst_len) st = DMC_STATUS_SIZE_MISMATCH;
    *op_out = op;
    return st;
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
    dmc_win w = dmc_win_open(src, s.src_len, lane);
    dmc_u32 op = 0;
    const dmc_u32 st = s.dst_len / DMC_LZ4_RUNS_RATIO >= s.src_len
                           ? dmc_lz4_stream<true>(w, s.src_len, dst, s.dst_len, &op, lane)
                           : dmc_lz4_stream<false>(w, s.src_len, dst, s.dst_len, &op, lane);
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
