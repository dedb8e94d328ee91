// shuffle.cu — blosc byte unshuffle and bitunshuffle of decoded blocks.
// Mapping: grid (jobs, parts per job): block (x, y) takes job x's tiles y, y + gridDim.y, …
// (DMC_SHUFFLE_THREADS threads; the launcher sizes grid.y from the wave's longest job, one part
// per DMC_UNSHUFFLE_PART_BYTES, capped, so 64 jobs of 512 KiB run as 2048 blocks, not 64), and
// part y of its copies (dmc_range_copy). Block (x, 0) reports a bad descriptor.
//
// Byte mode (issue 14: through shared memory, wide loads and stores). Byte b of element i is
// stored at b*n + i: the block is `ts` byte planes of n bytes. The block walks the elements in
// tiles of T elements (T a multiple of 16, as many as DMC_UNSHUFFLE_TILE_WORDS words of static
// shared memory hold: `ts` rows of T bytes, plus padding in the generic case). Per tile:
//   1. load: the tile's segment of every plane goes to its shared row. When the planes are
//      16-byte aligned (block and n a multiple of 16) and the rows unpadded, as aligned 16-byte
//      words, DMC_UNSHUFFLE_UNROLL loads in flight per thread. Else a flat (row, word)
//      index strides over the threads, so a warp reads 128 contiguous global bytes as aligned
//      4-byte words (a plane that does not start 4-byte aligned, n % 4 != 0 or an unaligned
//      block, takes two aligned loads per word, shifted together; only the words at the two
//      ends of the block load single bytes) and writes 32 consecutive shared words: no bank
//      conflicts;
//   2. assemble and store: for ts 2 and 4 with a 16-byte-aligned destination, a thread builds
//      16 output bytes with byte permutes and stores one 16-byte word (dmc_unshuffle_store16);
//      for ts 2, 4 and 8 with an 8-byte-aligned destination, a thread
//      builds 8 output bytes (8/ts whole elements) from ts shared reads of 8/ts bytes each (a
//      warp request reads one row, contiguous: conflict-free) and stores them as one 8-byte word
//      (a warp writes 256 contiguous bytes). Other typesizes (or a destination that is not
//      8-byte aligned): a thread builds a 4-byte output word from 4 shared byte reads and stores
//      it as one word (single bytes when the destination is not 4-byte aligned); rows are then
//      a multiple of 32 words plus ceil(32/ts) words of padding, so that the ~32/ts words one
//      warp request reads from each of the ts rows lie in different banks.
//   A __syncthreads separates the phases and the tiles. Leftover bytes (len % ts) are copied
//   as they are. A typesize too large for a 16-element tile falls back to a direct gather.
// Bit mode (n a multiple of 8; issue 14: a bit transpose into the same tile). Byte k of element
// i holds, as bit b, bit i of bit row 8k + b (rows of n/8 bytes). Phase 1 fills the tile's byte
// planes instead: thread f takes 32 elements of one plane, loads the word of each of the
// plane's 8 bit rows that holds them (consecutive threads, consecutive words of a row:
// coalesced; dmc_load_word_any when the rows are not 4-byte aligned), transposes the four 8×8
// bit matrices in registers (delta swaps) and writes the plane's 32 bytes into its shared row
// (two 16-byte stores, their order swapped for every other 4 groups so that a warp request hits
// every bank equally, or 8 words when the padded rows are not 16-byte aligned); phase 2 is the
// byte mode's. Bit mode with n not a multiple of 8 copies the block as it is.
// Copies as they are (leftover bytes, blocks stored as they are): dmc_range_copy (common.cuh),
// aligned 16-byte stores from pairs of aligned 16-byte loads.
#include "common.cuh"

// Static shared memory of the byte unshuffle tile: 16 KiB (8 blocks of 256 threads fit an SM).
#define DMC_UNSHUFFLE_TILE_WORDS 4096
// 16-byte loads in flight per thread in the load phase (the launch bounds leave 32 registers:
// 8 blocks of 256 threads per SM, 64 KiB of loads in flight per SM).
#define DMC_UNSHUFFLE_UNROLL 2

// The 4 bytes at p (any alignment) as a little-endian word, from aligned 4-byte loads that stay
// inside [lo, hi): one load when p is aligned, two (shifted together) when not; bytes at or past
// `hi` read as 0, and near either end single bytes are loaded.
__device__ __forceinline__ dmc_u32 dmc_load_word_any(const dmc_u8* p, const dmc_u8* lo, const dmc_u8* hi) {
    const dmc_u32 sh = (dmc_u32)(((dmc_u64)p) & 3u);
    const dmc_u8* a = p - sh;
    if (sh == 0 && p + 4 <= hi) return *(const dmc_u32*)p;
    if (sh != 0 && a >= lo && a + 8 <= hi) {
        const dmc_u32* w = (const dmc_u32*)a;
        return (w[0] >> (8 * sh)) | (w[1] << (32 - 8 * sh));
    }
    dmc_u32 v = 0;
    for (dmc_u32 q = 0; q < 4; q++)
        if (p + q < hi) v |= (dmc_u32)p[q] << (8 * q);
    return v;
}

// The transpose of an 8×8 bit matrix held row r in byte r (bit c of byte r moves to bit r of
// byte c): three delta swaps (2×2, then 2×2 blocks of 2×2, then 4×4 blocks).
__device__ __forceinline__ dmc_u64 dmc_transpose8x8(dmc_u64 x) {
    dmc_u64 t = (x ^ (x >> 7)) & 0x00aa00aa00aa00aaull;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000cccc0000ccccull;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000f0f0f0f0ull;
    return x ^ t ^ (t << 28);
}

// The 8 output bytes of group g (elements g*8/TS ..) from the TS shared rows (`row_words` apart);
// the bytes of one row a group needs lie in one word.
template <dmc_u32 TS>
__device__ __forceinline__ dmc_u64 dmc_unshuffle_group8(const dmc_u32* row, dmc_u32 row_words, dmc_u32 g) {
    constexpr dmc_u32 E = 8 / TS;  // elements per group = bytes read per row
    dmc_u64 o = 0;
DMC_UNROLL
    for (dmc_u32 b = 0; b < TS; b++) {
        // the E bytes of row b at byte offset g*E: inside one word (E divides 4)
        const dmc_u32 byte = g * E;
        const dmc_u32 w = row[b * row_words + byte / 4] >> (8 * (byte % 4));
DMC_UNROLL
        for (dmc_u32 k = 0; k < E; k++) o |= (dmc_u64)((w >> (8 * k)) & 0xffu) << (8 * (k * TS + b));
    }
    return o;
}

// Phase 2 for TS in {2, 4, 8}: `out` (8-byte aligned) receives the tile's cnt elements.
template <dmc_u32 TS>
__device__ __forceinline__ void dmc_unshuffle_store8(const dmc_u32* tile, dmc_u32 row_words, dmc_u32 cnt,
                                                     dmc_u8* out, dmc_u32 t, dmc_u32 nt) {
    constexpr dmc_u32 E = 8 / TS;
    const dmc_u32 groups = cnt / E;
    dmc_u64* out8 = (dmc_u64*)out;
    for (dmc_u32 g = t; g < groups; g += nt) out8[g] = dmc_unshuffle_group8<TS>(tile, row_words, g);
    const dmc_u8* tb = (const dmc_u8*)tile;
    for (dmc_u32 i = groups * E + t; i < cnt; i += nt)
        for (dmc_u32 b = 0; b < TS; b++) out[i * TS + b] = tb[b * row_words * 4 + i];
}

// Phase 2 for TS in {2, 4} with a 16-byte aligned `out`: a thread builds 16 output bytes
// (16/TS whole elements) from TS shared reads (TS 2: two 8-byte reads, one per row, words 2g and
// 2g + 1; TS 4: one word of each of the 4 rows: a warp request reads contiguous words of one row,
// conflict-free) interleaved with byte permutes, and stores them as one aligned 16-byte word
// (a warp writes 512 contiguous bytes).
template <dmc_u32 TS>
__device__ __forceinline__ void dmc_unshuffle_store16(const dmc_u32* tile, dmc_u32 row_words, dmc_u32 cnt,
                                                      dmc_u8* out, dmc_u32 t, dmc_u32 nt) {
    constexpr dmc_u32 E = 16 / TS;
    const dmc_u32 groups = cnt / E;
    for (dmc_u32 g = t; g < groups; g += nt) {
        dmc_u32x4 o;
        if (TS == 2) {
            // out bytes 2i + b = row b's byte i
            const dmc_u32 a0 = tile[2 * g], a1 = tile[2 * g + 1];
            const dmc_u32 b0 = tile[row_words + 2 * g], b1 = tile[row_words + 2 * g + 1];
            o.w[0] = __byte_perm(a0, b0, 0x5140u);
            o.w[1] = __byte_perm(a0, b0, 0x7362u);
            o.w[2] = __byte_perm(a1, b1, 0x5140u);
            o.w[3] = __byte_perm(a1, b1, 0x7362u);
        } else {
            // out word i = byte i of rows 0..3 (a 4×4 byte transpose)
            const dmc_u32 r0 = tile[g], r1 = tile[row_words + g];
            const dmc_u32 r2 = tile[2 * row_words + g], r3 = tile[3 * row_words + g];
            const dmc_u32 t0 = __byte_perm(r0, r1, 0x5140u), t1 = __byte_perm(r2, r3, 0x5140u);
            const dmc_u32 u0 = __byte_perm(r0, r1, 0x7362u), u1 = __byte_perm(r2, r3, 0x7362u);
            o.w[0] = __byte_perm(t0, t1, 0x5410u);
            o.w[1] = __byte_perm(t0, t1, 0x7632u);
            o.w[2] = __byte_perm(u0, u1, 0x5410u);
            o.w[3] = __byte_perm(u0, u1, 0x7632u);
        }
        dmc_store16(out + 16 * g, o);
    }
    const dmc_u8* tb = (const dmc_u8*)tile;
    for (dmc_u32 i = groups * E + t; i < cnt; i += nt)
        for (dmc_u32 b = 0; b < TS; b++) out[i * TS + b] = tb[b * row_words * 4 + i];
}

__device__ __forceinline__ void dmc_unshuffle_tiled(const dmc_u8* __restrict__ src, const dmc_u8* src_end,
                                                    dmc_u8* __restrict__ dst, dmc_u32 ts, dmc_u32 n, bool bits,
                                                    dmc_u32 part, dmc_u32 parts) {
    __shared__ __align__(16) dmc_u32 tile[DMC_UNSHUFFLE_TILE_WORDS];
    const dmc_u32 t = threadIdx.x, nt = blockDim.x;
    const bool fast8 = (ts == 2 || ts == 4 || ts == 8) && (((dmc_u64)dst) & 7u) == 0;
    const dmc_u32 pad = fast8 ? 0 : (32 + ts - 1) / ts;  // words after each row
    const dmc_u32 per_row = DMC_UNSHUFFLE_TILE_WORDS / ts;
    const dmc_u32 cap = per_row > pad ? per_row - pad : 0;
    // generic case: rows of a multiple of 32 words plus the pad, so row b starts at bank b*pad
    // (bit mode: a multiple of 8 words, so that tiles start at whole bytes of the bit rows)
    const dmc_u32 align = (!fast8 && cap >= 32) ? 32 : bits ? 8 : 4;
    const dmc_u32 tile_words = cap & ~(align - 1);  // T / 4
    if (tile_words == 0) {
        // typesize too large for a tile: direct gather
        for (dmc_u32 o = part * nt + t; o < n * ts; o += parts * nt) {
            const dmc_u32 i = o / ts, k = o - i * ts;
            if (bits) {
                const dmc_u8* p = src + (dmc_u64)(k * 8) * (n / 8) + (i >> 3);
                dmc_u32 v = 0;
                for (dmc_u32 b = 0; b < 8; b++) v |= (((dmc_u32)p[(dmc_u64)b * (n / 8)] >> (i & 7u)) & 1u) << b;
                dst[o] = (dmc_u8)v;
            } else {
                dst[o] = src[k * n + i];
            }
        }
        return;
    }
    const dmc_u32 tile_elems = tile_words * 4;
    const dmc_u8* tb = (const dmc_u8*)tile;
    const bool fast16 = (ts == 2 || ts == 4) && (((dmc_u64)dst) & 15u) == 0;
    // byte mode, 16-byte aligned planes: the load phase moves aligned 16-byte words
    const bool vec16 = !bits && ((((dmc_u64)src) | n) & 15u) == 0;
    for (dmc_u32 e0 = part * tile_elems; e0 < n; e0 += parts * tile_elems) {
        const dmc_u32 cnt = dmc_min_u32(tile_elems, n - e0);
        const dmc_u32 row_words = ((cnt + 3) / 4 + align - 1) / align * align + pad;
        if (bits) {
            // 1. bit mode: thread f takes 32 elements (group u) of byte plane r: a word of each of
            // the plane's 8 bit rows (a warp reads 128 contiguous bytes of a row per request),
            // four 8×8 bit transposes, 32 bytes of the plane into its shared row
            const dmc_u32 groups = (cnt + 31) / 32, rb = n / 8;
            const bool vec = (row_words & 3u) == 0;
            for (dmc_u32 f = t; f < ts * groups; f += nt) {
                const dmc_u32 r = f / groups, u = f - r * groups;
                const dmc_u8* p = src + (dmc_u64)(8 * r) * rb + (e0 + 32 * u) / 8;
                dmc_u32 x[8];
DMC_UNROLL
                for (dmc_u32 b = 0; b < 8; b++) x[b] = dmc_load_word_any(p + (dmc_u64)b * rb, src, src_end);
                // the two 16-byte halves in the order (u >> 2) & 1 picks: a warp request's 32
                // stores then cover every bank 4 times (eight consecutive groups u write words
                // 8u + 4h at 8 different 4-bank offsets)
                dmc_u32* row = tile + r * row_words + 8 * u;  // 16-byte aligned when vec
                DMC_UNROLL
                for (dmc_u32 s = 0; s < 2; s++) {
                    const dmc_u32 h = s ^ ((u >> 2) & 1u);
                    dmc_u32x4 o;
DMC_UNROLL
                    for (dmc_u32 jj = 0; jj < 2; jj++) {
                        const dmc_u32 j = 2 * h + jj;  // byte j of the row words: elements 8j..8j+7
                        dmc_u64 m = 0;
DMC_UNROLL
                        for (dmc_u32 b = 0; b < 8; b++) m |= (dmc_u64)((x[b] >> (8 * j)) & 0xffu) << (8 * b);
                        m = dmc_transpose8x8(m);
                        o.w[2 * jj] = (dmc_u32)m;
                        o.w[2 * jj + 1] = (dmc_u32)(m >> 32);
                    }
                    if (vec) {
                        dmc_store16(row + 4 * h, o);
                    } else {
                        for (dmc_u32 q = 0; q < 4; q++) row[4 * h + q] = o.w[q];
                    }
                }
            }
        } else {
            // 1. load the tile's segment of every plane into its row, a word per thread
            const dmc_u32 cw = (cnt + 3) / 4;
            if (vec16 && (row_words & 3u) == 0) {
                // cnt is a multiple of 16 (n and e0 are): cw / 4 whole 16-byte words per row,
                // DMC_UNSHUFFLE_UNROLL loads in flight per thread before their shared stores
                const dmc_u32 rq = row_words / 4, cq = cw / 4, all = ts * rq;
                for (dmc_u32 f0 = 0; f0 < all; f0 += DMC_UNSHUFFLE_UNROLL * nt) {
                    dmc_u32x4 v[DMC_UNSHUFFLE_UNROLL];
DMC_UNROLL
                    for (dmc_u32 k = 0; k < DMC_UNSHUFFLE_UNROLL; k++) {
                        const dmc_u32 f = f0 + k * nt + t, r = f / rq, q = f - r * rq;
                        v[k] = dmc_u32x4{{0, 0, 0, 0}};
                        if (f < all && q < cq) v[k] = dmc_load16(src + (dmc_u64)r * n + e0 + 16 * q);
                    }
DMC_UNROLL
                    for (dmc_u32 k = 0; k < DMC_UNSHUFFLE_UNROLL; k++) {
                        const dmc_u32 f = f0 + k * nt + t, r = f / rq, q = f - r * rq;
                        if (f < all && q < cq) dmc_store16(tile + 4 * f, v[k]);
                    }
                }
            } else {
                for (dmc_u32 f = t; f < ts * row_words; f += nt) {
                    const dmc_u32 r = f / row_words, w = f - r * row_words;
                    if (w < cw) tile[f] = dmc_load_word_any(src + r * n + e0 + 4 * w, src, src_end);
                }
            }
        }
        __syncthreads();
        // 2. assemble whole elements, store words
        dmc_u8* out = dst + (dmc_u64)e0 * ts;
        if (fast16) {
            if (ts == 2) dmc_unshuffle_store16<2>(tile, row_words, cnt, out, t, nt);
            else dmc_unshuffle_store16<4>(tile, row_words, cnt, out, t, nt);
        } else if (fast8) {
            if (ts == 2) dmc_unshuffle_store8<2>(tile, row_words, cnt, out, t, nt);
            else if (ts == 4) dmc_unshuffle_store8<4>(tile, row_words, cnt, out, t, nt);
            else dmc_unshuffle_store8<8>(tile, row_words, cnt, out, t, nt);
        } else {
            const dmc_u32 row_bytes = row_words * 4, nb = cnt * ts;
            dmc_u32 done = 0;
            if ((((dmc_u64)out) & 3u) == 0) {
                done = nb / 4 * 4;
                for (dmc_u32 w = t; w < nb / 4; w += nt) {
                    dmc_u32 v = 0;
                    DMC_UNROLL
                    for (dmc_u32 q = 0; q < 4; q++) {
                        const dmc_u32 p = w * 4 + q, i = p / ts;
                        v |= (dmc_u32)tb[(p - i * ts) * row_bytes + i] << (8 * q);
                    }
                    ((dmc_u32*)out)[w] = v;
                }
            }
            for (dmc_u32 p = done + t; p < nb; p += nt) {
                const dmc_u32 i = p / ts;
                out[p] = tb[(p - i * ts) * row_bytes + i];
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(DMC_SHUFFLE_THREADS, 8)
dmc_unshuffle(const dmc_u8* __restrict__ src_base, dmc_u64 src_total, dmc_u8* __restrict__ dst_base,
              dmc_u64 dst_total, const dmc_shuffle_job* __restrict__ jobs, dmc_u32 n_jobs,
              dmc_u32* __restrict__ status) {
    if (blockIdx.x >= n_jobs) return;
    const dmc_shuffle_job j = jobs[blockIdx.x];
    const dmc_u32 t = threadIdx.x;
    const dmc_u32 part = blockIdx.y, parts = gridDim.y;
    if (!dmc_in_bounds(j.src_off, j.len, src_total) || !dmc_in_bounds(j.dst_off, j.len, dst_total) ||
        j.typesize == 0) {
        if (t == 0 && part == 0) status[j.stream] = DMC_STATUS_BAD_DESCRIPTOR;
        return;
    }
    const dmc_u8* src = src_base + j.src_off;
    dmc_u8* dst = dst_base + j.dst_off;
    const dmc_u32 ts = j.typesize;
    const dmc_u32 n = j.len / ts;        // whole elements
    const dmc_u32 body = n * ts;         // bytes that are (un)shuffled
    if (j.mode == DMC_SHUFFLE_BYTE || (j.mode == DMC_SHUFFLE_BIT && (n % 8) == 0)) {
        // byte mode: byte b of element i is stored at b*n + i; bit mode: bit b of byte k of
        // element i is bit (i % 8) of byte (k*8+b)*(n/8) + i/8. Leftover bytes are stored as
        // they are.
        dmc_unshuffle_tiled(src, src + j.len, dst, ts, n, j.mode == DMC_SHUFFLE_BIT, part, parts);
        dmc_range_copy<1>(dst + body, src + body, j.len - body, part, parts, t, blockDim.x);
    } else {
        // bit mode with an element count that is not a multiple of 8: blosc stores the block as is
        dmc_range_copy<1>(dst, src, j.len, part, parts, t, blockDim.x);
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_unshuffle,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_shuffle_job* jobs, dmc_u32 n_jobs, dmc_u32* status),
                 (src_base, src_total, dst_base, dst_total, jobs, n_jobs, status))
#endif
