// lz4.cu — LZ4 block-format decoder (also decodes LZ4HC output: same format).
// Mapping: one warp per stream; the warp holds a 128-byte window of the input in registers
// (dmc_win, one coalesced 4-byte load per lane). Runs of short sequences (literals < 96, matches
// < 64 bytes) are parsed ahead into a batch, lane t holding sequence t, and written by
// dmc_lz_batch_copy in rounds of 32 output bytes, lane l writing byte l of a round (one
// __syncwarp per round). Most streams' batches are parsed by dmc_lz4_parse_batch: every window
// byte is parsed as if a sequence started there (lane l the bytes it holds), then the batch
// follows the chain of real sequences from the stream position, one shuffle per sequence. A
// stream compressed 8x or more (a label image's: runs, each a short sequence and one whose match
// is long) is decoded in runs mode (dmc_lz4_stream<true>): its batches are parsed one sequence
// after another, every lane the same with shuffles (a label image's batches hold one or two
// sequences: parsing all 128 bytes would not pay), and a sequence whose match alone is long ends
// the batch (its literals the batch's last) and its match is copied right after it, not parsed a
// second time the single way (the GPU model, benches/results/gpu-model.md); and in runs mode
// every output byte is also written to the warp's ring in shared memory (dmc_ring, 4 KiB a
// warp), from which the matches read the bytes just written (a label image's runs and rows:
// from the output they were L2 accesses). A long, final,
// corrupt or out-of-window sequence is done on its own: the 32 lanes copy its literals (from the
// window; long runs with 4-byte stores) and its match (long ones with 16-byte stores,
// dmc_lz_match_copy) cooperatively, one __syncwarp before the match copy (and one per round of a
// far match's copy) ordering every earlier write before the match reads.
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

// A batch of short sequences parsed from the window at once (the short-sequence fields' parser,
// dmc_lz4_stream<false>): lane l first parses a sequence at each of the 4 window bytes it holds
// as if one started there (candidates: the window's 128 positions, 9 shuffles for all), keeping
// two words per candidate (dmc_lz4_cand); then the batch follows the chain from ip, one shuffle
// per sequence (the chain word of the candidate at the next sequence's window byte), where the
// serial parse took four or five shuffles, each depending on the one before, and their checks.
// What depends on the output position (the match's distance and both lengths against the
// output) is checked on the chain. Stops, unconsumed, at the first sequence that is not a short
// one wholly in the window (with the byte after it) or does not fit the output: where the serial
// parse's batch would, or one sequence earlier at the window's end.
struct dmc_lz4_cand {
    // 0 where no short sequence can start (long, corrupt, the stream's last, not wholly in the
    // window); else bit 31 set, bits 24-30 the sequence's input bytes, 16-23 its output bytes
    // (literals + match), 0-15 how far the match distance reaches before the literals
    // (distance - literals, 0 when the literals cover it): the output before the sequence must be
    // at least that long.
    dmc_u32 chain;
    dmc_u32 info;  // bits 0-15 the match distance, 16-22 the literal bytes
};

// The candidate at window byte r (lane r / 4's byte r % 4; stream position r + start - mis).
// `pair`: the lane's window word and the next lane's (its bytes r % 4 .. r % 4 + 4 from bit
// 8 (r % 4)). Stricter than the serial parse at the window's end (a sequence whose next byte
// is past the window is left to the next batch, whose window holds it).
__device__ __forceinline__ dmc_lz4_cand dmc_lz4_candidate(const dmc_win& w, dmc_u32 src_len, dmc_u32 r,
                                                          dmc_u64 pair) {
    const dmc_u32 P = r + w.start - w.mis;  // wraps below the stream's start: >= src_len
    // The bytes from r on that are both in the input and in the window.
    const dmc_u32 avail = dmc_min_u32(P < src_len ? src_len - P : 0u, DMC_WIN_BYTES - r);
    const dmc_u32 tk = (dmc_u32)(pair >> (8 * (r & 3u))) & 0xffu;
    const dmc_u32 e = (tk >> 4) == 15 ? 1u : 0u;  // one extension byte (255: long literals)
    dmc_u32 lit = (tk >> 4) + (e != 0 ? (dmc_u32)(pair >> (8 * (r & 3u) + 8)) & 0xffu : 0u);
    // the token, literals, offset and one more byte (the match length's extension byte, or the
    // next token: the last sequence has no match) all available
    bool ok = lit < DMC_WIN_WIDE_COPY && avail >= 4 + e + lit;
    lit = ok ? lit : 0;
    // The offset's bytes and the match length's extension byte (every lane: collectives).
    const dmc_u32 x = dmc_win_get32(w, P + 1 + e + lit);
    const dmc_u32 offset = x & 0xffffu;
    const dmc_u32 em = (tk & 15) == 15 ? 1u : 0u;
    const dmc_u32 ml = (tk & 15) + 4 + (em != 0 ? (x >> 16) & 0xffu : 0u);
    ok = ok && offset != 0 && ml < DMC_LZ_WIDE_MATCH;
    const dmc_u32 reach = offset > lit ? offset - lit : 0;
    const dmc_u32 seq = 3 + e + lit + em;
    return dmc_lz4_cand{ok ? 1u << 31 | seq << 24 | (lit + ml) << 16 | reach : 0u, offset | lit << 16};
}

// The batch at *ip_io (in the window), its output from *op_io: returns its sequences (up to 32;
// 0 when the first is not a short one), lane t < that count holding sequence t in *tok; moves
// *ip_io and *op_io past them. A warp collective (uniform arguments).
__device__ __forceinline__ dmc_u32 dmc_lz4_parse_batch(const dmc_win& w, dmc_u32 src_len, dmc_u32 dst_len,
                                                       dmc_u32* ip_io, dmc_u32* op_io, dmc_lz_tok* tok,
                                                       dmc_u32 lane) {
    // The first sequence's literals first (one or two shuffles): a batch that would stop at once
    // (long literals, the window's end: a third of an f32 field's batches) computes no candidates.
    {
        const dmc_u32 r0 = *ip_io + w.mis - w.start;
        const dmc_u32 tk0 = dmc_win_get(w, *ip_io);
        const dmc_u32 e0 = (tk0 >> 4) == 15 ? 1u : 0u;
        const dmc_u32 lit0 = (tk0 >> 4) + (e0 != 0 ? dmc_win_get(w, *ip_io + 1) : 0u);
        if (lit0 >= DMC_WIN_WIDE_COPY || r0 + e0 + lit0 + 2 >= DMC_WIN_BYTES) return 0;
    }
    const dmc_u32 nw = __shfl_down_sync(0xffffffffu, w.word, 1);  // lane 31's: beyond the window
    const dmc_u64 pair = (dmc_u64)w.word | (dmc_u64)nw << 32;
    dmc_lz4_cand c[4];
DMC_UNROLL
    for (dmc_u32 j = 0; j < 4; j++) c[j] = dmc_lz4_candidate(w, src_len, 4 * lane + j, pair);
    // The chain from ip, by window byte; the selects are uniform (rel is).
    const dmc_u32 op0 = *op_io;
    dmc_u32 rel = *ip_io + w.mis - w.start, op = op0;
    dmc_u32 ntok = 0, mine_rel = 0, mine_start = 0;
    while (ntok < DMC_WARP_SIZE && rel < DMC_WIN_BYTES) {
        const dmc_u32 lo = (rel & 1u) ? c[1].chain : c[0].chain, hi = (rel & 1u) ? c[3].chain : c[2].chain;
        const dmc_u32 v = __shfl_sync(0xffffffffu, (rel & 2u) ? hi : lo, (int)(rel >> 2));
        const dmc_u32 out = (v >> 16) & 0xffu;
        if (v == 0 || out > dst_len - op || (v & 0xffffu) > op) break;
        if (lane == ntok) {
            mine_rel = rel;
            mine_start = op - op0;
        }
        ntok++;
        op += out;
        rel += (v >> 24) & 0x7fu;
    }
    // Lane t < ntok: its sequence's literals and distance, from the candidate's second word.
    const int from = (int)((mine_rel >> 2) & (DMC_WARP_SIZE - 1));
    const dmc_u32 i0 = __shfl_sync(0xffffffffu, c[0].info, from), i1 = __shfl_sync(0xffffffffu, c[1].info, from);
    const dmc_u32 i2 = __shfl_sync(0xffffffffu, c[2].info, from), i3 = __shfl_sync(0xffffffffu, c[3].info, from);
    const dmc_u32 k = mine_rel & 3u;
    const dmc_u32 info = k == 0 ? i0 : k == 1 ? i1 : k == 2 ? i2 : i3;
    if (lane < ntok) {
        const dmc_u32 lit = (info >> 16) & 0x7fu;
        *tok = dmc_lz_tok{mine_start, lit, mine_rel + w.start - w.mis + 1 + (lit >= 15 ? 1u : 0u), info & 0xffffu};
    }
    *ip_io = rel + w.start - w.mis;
    *op_io = op;
    return ntok;
}

// A stream compressed RUNS_RATIO times or more (a label image's: long runs, each a short
// sequence and one with a long match) is decoded with dmc_lz4_stream<true>, any other with
// dmc_lz4_stream<false> (dmc_lz4_decode).
#define DMC_LZ4_RUNS_RATIO 8

// Decodes one stream (the warp's; a warp collective) from the window w on src[0, src_len) into
// dst[0, dst_len); returns its status, the bytes written in *op.
// RUNS: batches parsed one sequence after another, and a sequence whose match alone is long ends
// a batch instead of being left for the single way — its literals are the batch's last, its
// match copied right after it (no second parse of it, no extension read 32 bytes a step for its
// one to three extension bytes). Off: batches parsed by dmc_lz4_parse_batch (all of a
// short-sequence field's sequences are short, a batch holds up to 32 of them).
// RUNS also reads the match bytes just written from the warp's ring (dmc_ring: a label image's
// runs and rows re-read the output moments after storing it); without RUNS the ring is
// dmc_ring<false> (no ring: a smooth field's matches reach farther back than the ring holds,
// and its stores would only cost).
template <bool RUNS>
__device__ __forceinline__ dmc_u32 dmc_lz4_stream(dmc_win& w, dmc_u32 src_len, dmc_u8* dst, dmc_u32 dst_len,
                                                  dmc_u32* op_out, const dmc_ring<RUNS>& ring, dmc_u32 lane) {
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
        if constexpr (!RUNS) {
            ntok = dmc_lz4_parse_batch(w, src_len, dst_len, &ip, &op, &tok, lane);
        } else {
            while (ntok < DMC_WARP_SIZE) {
                dmc_u32 q = ip;
                dmc_u32 lit = 0, ml = 0, b = 255, lip = 0, offset = 0;
                if (q >= src_len || !dmc_win_has(w, q)) break;
                // The token and the three bytes after it in one read. A sequence without
                // literals (a label image's, nearly all) has its offset and its match length's
                // first extension byte there: one pair of independent shuffles, not a chain of
                // the token's shuffle and then the offset's.
                const bool four = src_len - q >= 4 && dmc_win_has(w, q + 3);
                const dmc_u32 x = dmc_win_get32(w, q++);
                const dmc_u32 tk = x & 0xffu;
                lit = tk >> 4;
                ml = tk & 15;
                if (lit == 0 && four) {
                    lip = q;
                    offset = (x >> 8) & 0xffffu;
                    q += 2;
                    b = 0;
                    if (ml == 15) {
                        b = x >> 24;
                        q++;
                        ml += b;
                    }
                } else {
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
                    offset = dmc_win_get(w, q) | (dmc_win_get(w, q + 1) << 8);
                    q += 2;
                    b = 0;
                    if (ml == 15) {
                        if (q >= src_len || !dmc_win_has(w, q)) break;
                        b = dmc_win_get(w, q++);
                        ml += b;
                    }
                }
                ml += 4;
                if (ml >= DMC_LZ_WIDE_MATCH || offset == 0 || offset > op + lit || ml > dst_len - op - lit) {
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
                    break;
                }
                if (lane == ntok) tok = dmc_lz_tok{op - op0, lit, lip, offset};
                ntok++;
                op += lit + ml;
                ip = q;
            }
        }
        if (ntok > 0) {
            dmc_lz_batch_copy(w, dst, op0, op - op0, ntok, tok, lane, ring);
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
            dmc_win_copy(&w, ip, lit, dst + op, lane, ring);
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
        dmc_lz_match_copy(dst, op, mdist, mlen, lane, true, ring);
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
    // each warp's ring of its latest output (dmc_ring: its matches read the bytes just written
    // from shared memory)
    __shared__ __align__(16) dmc_u8 rings[DMC_LZ4_WARPS_PER_BLOCK][DMC_LZ_RING];
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
                           ? dmc_lz4_stream<true>(w, s.src_len, dst, s.dst_len, &op,
                                                  dmc_ring<true>{rings[threadIdx.x / DMC_WARP_SIZE]}, lane)
                           : dmc_lz4_stream<false>(w, s.src_len, dst, s.dst_len, &op, dmc_ring<false>{}, lane);
    if (lane == 0) {
        // read again (volatile: not the value loaded above): sid held through the decode spilled
        const dmc_u32 id = *(const volatile dmc_u32*)&ids[warp];
        status[id] = st;
        actual[id] = op;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_lz4_decode,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_stream* streams, const dmc_u32* ids, dmc_u32 n_ids, dmc_u32* status,
                  dmc_u32* actual),
                 (src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual))
#endif
