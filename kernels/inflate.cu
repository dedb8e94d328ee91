// inflate.cu — DEFLATE (RFC 1951) decoder: stored, fixed-Huffman and dynamic-Huffman blocks, in
// a raw stream, a zlib wrapper (RFC 1950: header, Adler-32) or a gzip wrapper (RFC 1952: header
// with FEXTRA/FNAME/FCOMMENT/FHCRC, one or more members, CRC32 + ISIZE). No preset dictionaries.
//
// Mapping: one warp per stream (a whole gzip/zlib/raw chunk, or one zlib stream of a blosc
// split); streams of all chunks decode at once. A wave of few streams gives each a block of
// DMC_INFLATE_TEAM warps whose helpers join the stream's warp for its long stored blocks (see
// dmc_inflate_decode). Blocks and symbols are inherently sequential, so:
//   - HEADERS ON LANE 0: lane 0 owns a bit reader (a 64-bit LSB-first window refilled with
//     aligned 4-byte loads, single bytes up to the alignment and at the end, bounds-checked;
//     bits past the end read as zeros and consuming one is DMC_STATUS_SRC_TRUNCATED) and parses
//     wrapper headers/trailers and block headers (the dynamic block's code-length code, decoded
//     from registers by per-length limits, and its lengths, stored into shared memory four per
//     store as they come); each time it needs the warp (a table
//     build, a block's symbols, a stored block, a checksum) it posts one command in this warp's
//     shared memory and all lanes run it after a __syncwarp;
//   - SYMBOLS ON ALL 32 LANES (dmc_inf_huff): the warp holds a 256-byte window of the input in
//     registers (common.cuh's dmc_win8: one 8-byte word per lane, refilled with one aligned
//     coalesced 8-byte load per lane, 32 bits read with three shuffles and a funnel shift). Each round lane i decodes, speculatively,
//     the literal/length symbol that would start at bit pos + i (one shared root-table lookup
//     for the warp); a walk over those 32 candidates (successor = offset + code length, a
//     non-literal or a subtable pointer ending the chain; one shuffle a symbol, every lane
//     following the same offset) gives lane k the offset of the chain's k-th real symbol; a
//     subtable pointer ending the chain is looked
//     up for that symbol alone (one broadcast request, only when the real chain meets a long
//     code, not whenever one of the 32 speculative candidates does). The chain's literals join a run of up to 128 output bytes held
//     in registers, 4 per lane (placed by shuffles from the chain's k-th lane at the run's
//     length + k), stored with ONE aligned 4-byte store per lane when the run is full (plus one
//     byte-store request for partial words when it is not), before a match of 64 bytes or more
//     longer than its room and at the block's end. A length symbol ending the chain is decoded by all lanes
//     alike (extra bits, distance code, extra bits: one 64-bit read of the window); a match
//     that fits the run is gathered
//     into it: bytes of the run by shuffle, older bytes left PENDING (the slot keeps the
//     distance to its source; a match copying a pending byte inherits its source), and the
//     flush loads all of the run's pending bytes together, 32 per load request whatever
//     matches they belong to (compacted by a warp prefix sum: ~1 request per 128 output bytes
//     where there was one per match; more than 32 pending bytes, a label image's runs, are
//     loaded lane by lane, one request per slot of the four, without the search); a match
//     shorter than 64 bytes that does not fit goes in
//     pieces (the first fills the run, which is stored whole, the rest starts the next run:
//     no partial words, no separate copy); a longer one is copied by the overlap-safe
//     cooperative copy of the LZ4 kernel (byte j of a match of distance d comes from
//     op-d+(j mod d)), together with its REPEATS: the same bits again right after a long
//     match are the same match (a prefix code decodes equal bits to equal symbols), which is
//     what zlib writes for a label image's regions (258-byte matches at one distance, one
//     after another); lane k compares the bits of the k-th candidate with the match's (31 a
//     step, for matches of up to 32 bits), and the run of equal ones joins one copy, where each
//     match cost a round, a flush and a copy of its own. Statuses follow the serial decode's
//     order exactly.
//     Each round covers 32 candidate bits, so ~3-4 symbols of 8-9 bits: the model charges one
//     shared request per round, where the serial decode paid one per symbol plus a global
//     request per input byte and per literal. After a round whose chain held two literals or
//     more the next covers 64 (lane i also decodes the symbol at pos + 32 + i, and the chain's
//     first 16 symbols are found by pointer doubling over the 64 offsets: three doubling steps
//     and four lifting steps, each shuffling both halves, dmc_inf_chain<true>): a smooth
//     field's literal runs in about half the rounds, while a label image's rounds (a match, at
//     most a literal before it) stay at 32 and walk a chain of one or two symbols;
//   - TABLE BUILDS ON ALL 32 LANES (dmc_inf_build; literal/length: 10-bit root, distance: 8-bit
//     root, two-level libdeflate-style tables, subtables up to 15 bits): lane i holds the code
//     lengths of symbols i, i + 32, ... in one register; four bit-plane ballots per 32 symbols
//     count each length (lane l holds the count of length l) and rank each symbol among its
//     length; the checks (over-subscribed or incomplete sets are corrupt, as zlib), first codes
//     and canonical positions come from the counts on every lane; the symbols go into
//     canonical order in shared memory; the root is filled 32 entries a step (entry i by lane
//     i mod 32: it finds the short code covering it, no replication loop per symbol); long
//     codes, 32 at a time in canonical order, place their subtables by a warp prefix sum over
//     the sizes the last code under each root prefix gives, then fill them. An entry holds the
//     symbol's kind, total code length, extra-bit count and base (length, distance) or byte
//     (literal): no base/extra lookup per symbol;
//   - stored blocks are a 32-lane wide copy (dmc_warp_copy_long: from 256 bytes aligned 16-byte
//     loads and stores, 2 KiB per round, four loads in flight per lane; shorter ones
//     dmc_warp_copy_wide's aligned 4-byte stores); in a team, one of 4 KiB or more is copied by
//     all its warps, the rounds of 2 KiB taken in turn;
//   - CHECKSUMS read the member's output 512 bytes a step, 16 per lane (one coalesced aligned
//     16-byte load; single bytes only in the first and last groups). CRC32 (gzip): word k of
//     lane L's group belongs to sub-stream 4L + k, whose words lie 512 bytes apart; a
//     sub-stream's CRC steps a word and the 508 zero bytes after it with four lookups in shift
//     tables built for the member in the (then unused) literal/length table; the sub-streams'
//     CRCs, shifted by GF(2) multiplication, XOR together across the warp. Adler-32 (zlib): per
//     lane sums of the bytes and of position × byte (mod 65521 each step), a warp reduction.
// No spin-waits between warps: a team's warps share only the leader's command, read between
// two block barriers; other warps never share state. No per-thread array is indexed at run
// time (ptxas would put it in local memory: a 0-byte stack frame, checked by nvrtc_compile's log).
//
// Shared memory: DMC_INFLATE_WARPS_PER_BLOCK × sizeof(dmc_inflate_smem) (≈ 8.7 KiB per warp).
// Every load is checked against the stream's source length and every store against its output
// length; a match reaching before the start of its member is DMC_STATUS_BAD_OFFSET, output past
// dst_len DMC_STATUS_DST_OVERFLOW, a stream ending short of dst_len DMC_STATUS_SIZE_MISMATCH.
#include "common.cuh"

#define DMC_INF_LITLEN_BITS 10
#define DMC_INF_DIST_BITS 8
#define DMC_INF_PRE_BITS 7
// Largest two-level tables for 288 codes (10-bit root) and 32 codes (8-bit root) of <= 15 bits.
#define DMC_INF_LITLEN_ENOUGH 1334
#define DMC_INF_DIST_ENOUGH 402
#define DMC_INF_MAX_LEN 15

// Table entries: a symbol (bit 31), a pointer to a subtable (bit 30, subtable offset in bits
// 0-15, its index bits in 16-23), or 0 (no code). A symbol entry carries everything the decode
// needs, so no per-symbol lookup of base/extra tables remains: the code's whole length (bits
// 16-20, root and subtable bits together), the extra bits that follow it (bits 24-27), its kind
// (bits 28-29) and a value (bits 0-15): a literal's byte, a length's or a distance's base.
#define DMC_INF_ENT_SYM 0x80000000u
#define DMC_INF_ENT_SUB 0x40000000u
#define DMC_INF_KIND_LIT 0u  // literal/length table: a literal; distance table: a distance
#define DMC_INF_KIND_LEN 1u  // a length (symbols 257-285)
#define DMC_INF_KIND_EOB 2u  // end of block (256)
#define DMC_INF_KIND_BAD 3u  // a coded but invalid symbol (286, 287; distances 30, 31): corrupt

// Commands lane 0 posts to the warp.
#define DMC_INF_CMD_DONE 0
#define DMC_INF_CMD_BUILD 1
#define DMC_INF_CMD_STORED 3
#define DMC_INF_CMD_CRC32 4
#define DMC_INF_CMD_ADLER 5
#define DMC_INF_CMD_HUFF 6

struct dmc_inflate_smem {
    dmc_u32 litlen[DMC_INF_LITLEN_ENOUGH];
    dmc_u32 dist[DMC_INF_DIST_ENOUGH];
    dmc_u32 crc[256];
    dmc_u16 sorted[288];     // a table build's symbols in canonical order (length, then symbol)
    dmc_u8 lens[288 + 32];  // code lengths: literal/length (288), then distance (32)
    dmc_u32 cmd[5];
    dmc_u32 res[2];  // table build status (literal/length, distance)
};

// The order of the code-length code's lengths (RFC 1951: 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11,
// 4, 12, 3, 13, 2, 14, 1, 15), five bits each in two immediates: no memory read per length.
__device__ __forceinline__ dmc_u32 dmc_inf_pre_order(dmc_u32 i) {
    const dmc_u64 lo = 0x22caa324e804a30ull, hi = 0x3c2e1346cull;  // entries 0-11, 12-18
    return (dmc_u32)((i < 12 ? lo >> (5 * i) : hi >> (5 * (i - 12))) & 31u);
}

#define DMC_INF_CRC_POLY 0xEDB88320u
#define DMC_INF_ADLER_MOD 65521u

__device__ __forceinline__ dmc_u32 dmc_inf_rev(dmc_u32 code, dmc_u32 len) {
    return __brev(code) >> (32 - len);
}

// ---- Table build (all lanes) ----

// Lanes whose 4-bit value equals c, from the four bit-plane ballots of the values.
// (Four scalars, not an array: an array ptxas does not keep in registers is a stack frame.)
struct dmc_inf_planes {
    dmc_u32 p0, p1, p2, p3;
};

__device__ __forceinline__ dmc_inf_planes dmc_inf_ballot4(dmc_u32 l) {
    dmc_inf_planes p;
    p.p0 = __ballot_sync(0xFFFFFFFFu, l & 1u);
    p.p1 = __ballot_sync(0xFFFFFFFFu, (l >> 1) & 1u);
    p.p2 = __ballot_sync(0xFFFFFFFFu, (l >> 2) & 1u);
    p.p3 = __ballot_sync(0xFFFFFFFFu, (l >> 3) & 1u);
    return p;
}

__device__ __forceinline__ dmc_u32 dmc_inf_eq(const dmc_inf_planes& p, dmc_u32 c) {
    return ((c & 1u) ? p.p0 : ~p.p0) & ((c & 2u) ? p.p1 : ~p.p1) & ((c & 4u) ? p.p2 : ~p.p2) &
           ((c & 8u) ? p.p3 : ~p.p3);
}

// The table entry of symbol `s` (code length `l`) of the literal/length (`which` 0) or the
// distance (`which` 1) code. Length and distance bases follow RFC 1951's tables: from the fourth
// group on, each group of four (lengths) or two (distances) doubles the step.
__device__ __forceinline__ dmc_u32 dmc_inf_entry(dmc_u32 which, dmc_u32 s, dmc_u32 l) {
    dmc_u32 kind = DMC_INF_KIND_BAD, extra = 0, value = 0;
    if (which == 0) {
        if (s < 256) {
            kind = DMC_INF_KIND_LIT;
            value = s;
        } else if (s == 256) {
            kind = DMC_INF_KIND_EOB;
        } else if (s == 285) {
            kind = DMC_INF_KIND_LEN;
            value = 258;
        } else if (s < 285) {
            const dmc_u32 li = s - 257;
            kind = DMC_INF_KIND_LEN;
            extra = li < 8 ? 0 : (li - 4) >> 2;
            value = li < 8 ? 3 + li : ((4 + (li & 3)) << extra) + 3;
        }
    } else if (s < 30) {
        kind = DMC_INF_KIND_LIT;
        extra = s < 4 ? 0 : (s - 2) >> 1;
        value = s < 4 ? 1 + s : ((2 + (s & 1)) << extra) + 1;
    }
    return DMC_INF_ENT_SYM | (kind << 28) | (extra << 24) | (l << 16) | value;
}

// A long code (longer than the root's `tb` bits) at canonical position `idx`: its length (the
// l > tb whose positions [first_idx_l, first_idx_l + count_l) hold idx; lane l holds those) and
// its code. All lanes call it (shuffles); a lane's idx past the codes gets length 0.
__device__ __forceinline__ dmc_u32 dmc_inf_long(dmc_u32 idx, dmc_u32 tb, dmc_u32 cnt, dmc_u32 first_idx,
                                                dmc_u32 first_code, dmc_u32* code) {
    dmc_u32 l = 0;
    for (dmc_u32 k = tb + 1; k <= DMC_INF_MAX_LEN; k++) {
        const dmc_u32 fi = __shfl_sync(0xFFFFFFFFu, first_idx, (int)k);
        const dmc_u32 c = __shfl_sync(0xFFFFFFFFu, cnt, (int)k);
        if (idx >= fi && idx < fi + c) l = k;
    }
    const dmc_u32 fc = __shfl_sync(0xFFFFFFFFu, first_code, (int)(l & 31));
    const dmc_u32 fi = __shfl_sync(0xFFFFFFFFu, first_idx, (int)(l & 31));
    *code = fc + (idx - fi);
    return l;
}

// All lanes: builds `table` (root `tb` bits, `enough` entries) from the code lengths
// sm->lens[first, first + 32 * nreg) (0: no code). Returns the status (the same on every lane):
// an over-subscribed or an incomplete code is DMC_STATUS_CORRUPT (zlib's rule: incomplete only
// as a single code of one bit, or no code at all). Canonical codes, libdeflate-style:
//   1. the lengths in registers (symbol 32j + lane in bits 4j..4j+3 of `lens`); per register,
//      four bit-plane ballots give every lane the lanes of any one length, so lane c counts the
//      codes of length c;
//   2. lane l gets the first code of length l (the canonical recurrence over the counts) and
//      its first position in canonical order (the prefix sum of the counts);
//   3. each symbol's rank among the codes of its length (the earlier registers' counts, held by
//      lane l, plus the lanes below it in its register with its length) places it in `sorted`;
//   4. the root entries are filled 32 at a time, entry i by lane i mod 32 (a conflict-free
//      store): entry i is the bit-reversed prefix u; the short code covering u is the one of
//      the smallest length l whose codes end above u (left-aligned to tb bits), its symbol
//      sorted[first_idx_l + (u >> (tb - l)) - first_code_l];
//   5. long codes, 32 at a time in canonical order: the last code under each root prefix (its
//      bits past the root all ones) has the longest length under that prefix and sizes its
//      subtable; a warp prefix sum of those sizes places the subtables (in canonical order, as
//      zlib's), the last code writes the root's pointer, then every long code fills its
//      replicated entries in its subtable.
__device__ dmc_u32 dmc_inf_build(dmc_inflate_smem* sm, dmc_u32 first, dmc_u32 nreg, dmc_u32* table, dmc_u32 tb,
                                 dmc_u32 enough, dmc_u32 which, dmc_u32 lane) {
    const dmc_u32 below = (1u << lane) - 1u;
    dmc_u64 lens = 0;
    dmc_u32 cnt = 0;  // lane c (1..15): codes of length c
    for (dmc_u32 j = 0; j < nreg; j++) {
        const dmc_u32 l = sm->lens[first + DMC_WARP_SIZE * j + lane];
        lens |= (dmc_u64)l << (4 * j);
        const dmc_inf_planes plane = dmc_inf_ballot4(l);
        cnt += (dmc_u32)__popc(dmc_inf_eq(plane, lane & 15u));
    }
    // 2. the counts' checks, the first code and first position of each length
    dmc_i32 left = 1;
    dmc_u32 code = 0, pos = 0, max = 0, first_code = 0, first_idx = 0, nshort = 0, ushort = 0;
    bool bad = false;
    for (dmc_u32 l = 1; l <= DMC_INF_MAX_LEN; l++) {
        const dmc_u32 c = __shfl_sync(0xFFFFFFFFu, cnt, (int)l);
        left = (left << 1) - (dmc_i32)c;
        if (left < 0) {  // over-subscribed (the same on every lane)
            bad = true;
            break;
        }
        if (lane == l) {
            first_code = code;
            first_idx = pos;
        }
        if (c) max = l;
        if (l <= tb) nshort += c;
        if (l == tb) ushort = code + c;  // root prefixes from here on are long codes' (or none)
        code = (code + c) << 1;
        pos += c;
    }
    if (bad || (left > 0 && max > 1)) return DMC_STATUS_CORRUPT;
    const dmc_u32 nlong = pos - nshort;
    if (lane == 0) cnt = 0;  // lane 0 counted the unused symbols
    // 3. canonical order
    dmc_u32 seen = 0;  // lane c: codes of length c in the registers before
    for (dmc_u32 j = 0; j < nreg; j++) {
        const dmc_u32 l = (dmc_u32)(lens >> (4 * j)) & 15u;
        const dmc_inf_planes plane = dmc_inf_ballot4(l);
        const dmc_u32 rank = __shfl_sync(0xFFFFFFFFu, seen, (int)l) + (dmc_u32)__popc(dmc_inf_eq(plane, l) & below);
        const dmc_u32 at = __shfl_sync(0xFFFFFFFFu, first_idx, (int)l) + rank;
        if (l != 0) sm->sorted[at] = (dmc_u16)(DMC_WARP_SIZE * j + lane);
        seen += (dmc_u32)__popc(dmc_inf_eq(plane, lane & 15u));
    }
    __syncwarp();
    // 4. the root: short codes' entries; no code at all (an incomplete code) is 0; long codes'
    // prefixes are left to step 5
    const dmc_u32 hi = lane >= 1 && lane <= tb ? (first_code + cnt) << (tb - lane) : 0;
    for (dmc_u32 i = lane; i < (1u << tb); i += DMC_WARP_SIZE) {
        const dmc_u32 u = __brev(i) >> (32 - tb);
        dmc_u32 l = 0;
        for (dmc_u32 k = tb; k >= 1; k--) {
            if (u < (dmc_u32)__shfl_sync(0xFFFFFFFFu, hi, (int)k)) l = k;
        }
        const dmc_u32 fc = __shfl_sync(0xFFFFFFFFu, first_code, (int)l);
        const dmc_u32 fi = __shfl_sync(0xFFFFFFFFu, first_idx, (int)l);
        if (l != 0) {
            table[i] = dmc_inf_entry(which, sm->sorted[fi + (u >> (tb - l)) - fc], l);
        } else if (u >= ushort && nlong == 0) {
            table[i] = 0;
        }
    }
    if (nlong == 0) {
        __syncwarp();
        return DMC_STATUS_OK;
    }
    // 5. long codes: subtables placed, root pointers written
    dmc_u32 next = 1u << tb;  // the next subtable's offset
    for (dmc_u32 p0 = 0; p0 < nlong; p0 += DMC_WARP_SIZE) {
        dmc_u32 c;
        const dmc_u32 l = dmc_inf_long(nshort + p0 + lane, tb, cnt, first_idx, first_code, &c);
        const dmc_u32 sub = l - tb, ones = (1u << (sub & 31)) - 1u;
        const bool last = l != 0 && (c & ones) == ones;
        const dmc_u32 w = last ? 1u << sub : 0;
        dmc_u32 incl = w;
        for (int o = 1; o < DMC_WARP_SIZE; o <<= 1) {
            const dmc_u32 t = __shfl_up_sync(0xFFFFFFFFu, incl, o);
            if (lane >= (dmc_u32)o) incl += t;
        }
        const dmc_u32 base = next + incl - w;
        if (last && base + w <= enough) table[__brev(c >> sub) >> (32 - tb)] = DMC_INF_ENT_SUB | base | (sub << 16);
        next += __shfl_sync(0xFFFFFFFFu, incl, DMC_WARP_SIZE - 1);
    }
    if (next > enough) return DMC_STATUS_CORRUPT;  // cannot happen for a complete code
    __syncwarp();
    for (dmc_u32 p0 = 0; p0 < nlong; p0 += DMC_WARP_SIZE) {
        dmc_u32 c;
        const dmc_u32 idx = nshort + p0 + lane;
        const dmc_u32 l = dmc_inf_long(idx, tb, cnt, first_idx, first_code, &c);
        if (l == 0) continue;
        const dmc_u32 sub = l - tb;
        const dmc_u32 ptr = table[__brev(c >> sub) >> (32 - tb)];
        const dmc_u32 base = ptr & 0xFFFFu, sb = (ptr >> 16) & 0xFFu;
        const dmc_u32 e = dmc_inf_entry(which, sm->sorted[idx], l);
        for (dmc_u32 i = dmc_inf_rev(c, l) >> tb; i < (1u << sb); i += 1u << sub) table[base + i] = e;
    }
    __syncwarp();
    return DMC_STATUS_OK;
}

// ---- Lane 0's decoder state ----

#define DMC_INF_PH_MEMBER 0
#define DMC_INF_PH_BLOCK 1
#define DMC_INF_PH_BUILT 2
#define DMC_INF_PH_HUFF 3
#define DMC_INF_PH_TRAILER 4
#define DMC_INF_PH_CHECKED 5
#define DMC_INF_PH_END 6

struct dmc_inf_state {
    const dmc_u8* in;
    dmc_u64 in_len;
    dmc_u64 ip;  // next byte to load into the window (may pass in_len by phantom zero bytes)
    dmc_u64 bitbuf;
    dmc_u32 bitcnt;
    bool trunc;  // a phantom bit was consumed
    dmc_u32 out_len;
    dmc_u32 op;
    dmc_u32 fmt;
    bool verify;
    dmc_u32 phase;
    bool final_block;
    bool fixed_tables;  // the shared tables hold the fixed code (built without error)
    dmc_u32 member_start;
    dmc_u32 members;
    dmc_u32 check;  // checksum computed by the warp
};

// Fills the window to at least 32 bits: single bytes up to a 4-byte aligned address, then an
// aligned 4-byte load (one request for four bytes) where the input holds one; single bytes (or
// phantom zeros) at its end.
__device__ __forceinline__ void dmc_inf_refill(dmc_inf_state* s) {
    while (s->bitcnt < 32) {
        if (s->ip + 4 <= s->in_len && (((dmc_u64)(s->in + s->ip)) & 3u) == 0) {
            s->bitbuf |= (dmc_u64)(*(const dmc_u32*)(s->in + s->ip)) << s->bitcnt;
            s->bitcnt += 32;
            s->ip += 4;
            continue;
        }
        const dmc_u64 b = s->ip < s->in_len ? (dmc_u64)s->in[s->ip] : 0;
        s->bitbuf |= b << s->bitcnt;
        s->bitcnt += 8;
        s->ip++;
    }
}

__device__ __forceinline__ void dmc_inf_consume(dmc_inf_state* s, dmc_u32 n) {
    s->bitbuf >>= n;
    s->bitcnt -= n;
    const dmc_u64 phantom = s->ip > s->in_len ? 8 * (s->ip - s->in_len) : 0;
    if ((dmc_u64)s->bitcnt < phantom) s->trunc = true;
}

// Reads n (<= 16) bits, first bit in bit 0.
__device__ __forceinline__ dmc_u32 dmc_inf_bits(dmc_inf_state* s, dmc_u32 n) {
    if (s->bitcnt < 32) dmc_inf_refill(s);
    const dmc_u32 v = (dmc_u32)(s->bitbuf & ((1ull << n) - 1));
    dmc_inf_consume(s, n);
    return v;
}

// Drops the bits up to the next byte boundary and restarts the reader there; returns that byte.
__device__ __forceinline__ dmc_u64 dmc_inf_align(dmc_inf_state* s) {
    dmc_u64 pos = s->ip - (s->bitcnt >> 3);
    if (pos > s->in_len) {  // only after a consumed phantom bit, already flagged
        s->trunc = true;
        pos = s->in_len;
    }
    s->ip = pos;
    s->bitbuf = 0;
    s->bitcnt = 0;
    return pos;
}

// Restarts the reader at stream bit `pos` (<= 8 * in_len): the warp's decode hands it back.
__device__ __forceinline__ void dmc_inf_seek(dmc_inf_state* s, dmc_u64 pos) {
    s->ip = pos >> 3;
    s->bitbuf = 0;
    s->bitcnt = 0;
    if (pos & 7) {
        dmc_inf_refill(s);
        dmc_inf_consume(s, (dmc_u32)(pos & 7));
    }
}

__device__ __forceinline__ dmc_u32 dmc_inf_crc_bytes(const dmc_inflate_smem* sm, dmc_u32 c, const dmc_u8* p,
                                                     dmc_u64 n) {
    for (dmc_u64 i = 0; i < n; i++) c = sm->crc[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
    return c;
}

// Lane 0: parses a gzip member header at s->ip. Returns the status.
__device__ dmc_u32 dmc_inf_gzip_header(dmc_inf_state* s, const dmc_inflate_smem* sm) {
    const dmc_u8* in = s->in;
    const dmc_u64 len = s->in_len;
    dmc_u64 p = s->ip;
    const dmc_u64 start = p;
    if (len - p < 10) return DMC_STATUS_SRC_TRUNCATED;
    if (in[p] != 0x1f || in[p + 1] != 0x8b || in[p + 2] != 8) return DMC_STATUS_CORRUPT;
    const dmc_u32 flg = in[p + 3];
    if (flg & 0xE0) return DMC_STATUS_CORRUPT;
    p += 10;
    if (flg & 4) {  // FEXTRA
        if (len - p < 2) return DMC_STATUS_SRC_TRUNCATED;
        const dmc_u32 xlen = dmc_load_le16(in + p);
        p += 2;
        if (len - p < xlen) return DMC_STATUS_SRC_TRUNCATED;
        p += xlen;
    }
    for (dmc_u32 bit = 8; bit <= 16; bit <<= 1) {  // FNAME, FCOMMENT: zero-terminated
        if (!(flg & bit)) continue;
        for (;;) {
            if (p >= len) return DMC_STATUS_SRC_TRUNCATED;
            if (in[p++] == 0) break;
        }
    }
    if (flg & 2) {  // FHCRC: low 16 bits of the CRC32 of the header so far
        if (len - p < 2) return DMC_STATUS_SRC_TRUNCATED;
        if (s->verify) {
            const dmc_u32 c = dmc_inf_crc_bytes(sm, 0xFFFFFFFFu, in + start, p - start) ^ 0xFFFFFFFFu;
            if ((c & 0xFFFF) != dmc_load_le16(in + p)) return DMC_STATUS_CHECKSUM_MISMATCH;
        }
        p += 2;
    }
    s->ip = p;
    return DMC_STATUS_OK;
}

// Lane 0: the code lengths of a dynamic block go into sm->lens (literal/length at 0..287,
// distance at 288..319, missing ones 0) four per 4-byte store, built in `word` as position `q`
// advances; past the last literal/length code the rest of the first part is zeroed.
struct dmc_inf_lens_out {
    dmc_u32 q, word, hlit;
};

__device__ __forceinline__ void dmc_inf_lens_zero(dmc_inflate_smem* sm, dmc_inf_lens_out* o, dmc_u32 end) {
    if (o->q & 3u) *(dmc_u32*)(sm->lens + (o->q & ~3u)) = o->word;
    for (dmc_u32 k = (o->q + 3) & ~3u; k < end; k += 4) *(dmc_u32*)(sm->lens + k) = 0;
    o->word = 0;
    o->q = end;
}

__device__ __forceinline__ void dmc_inf_lens_put(dmc_inflate_smem* sm, dmc_inf_lens_out* o, dmc_u32 v) {
    o->word |= v << (8 * (o->q & 3u));
    if ((o->q & 3u) == 3u) {
        *(dmc_u32*)(sm->lens + (o->q & ~3u)) = o->word;
        o->word = 0;
    }
    if (++o->q == o->hlit) dmc_inf_lens_zero(sm, o, 288);
}

// Lane 0: reads a dynamic block's header into sm->lens. Returns the status. No per-thread array
// (one indexed at run time would live in local memory): the code-length code's 19 lengths are
// 3-bit fields of one register, its per-length counts, first positions and limits fields of
// others, its symbols in canonical order 5-bit fields of two; a code-length code is decoded by
// comparing its next 7 bits (most significant first) with each length's limit (the end of that
// length's codes, left-aligned to 7 bits); the lengths it gives are stored as they come.
__device__ dmc_u32 dmc_inf_dynamic_header(dmc_inf_state* s, dmc_inflate_smem* sm) {
    const dmc_u32 hlit = dmc_inf_bits(s, 5) + 257;
    const dmc_u32 hdist = dmc_inf_bits(s, 5) + 1;
    const dmc_u32 hclen = dmc_inf_bits(s, 4) + 4;
    if (hlit > 286 || hdist > 30) return DMC_STATUS_CORRUPT;
    dmc_u64 pl = 0;  // symbol k's length in bits 3k..3k+2
    for (dmc_u32 i = 0; i < hclen; i++) pl |= (dmc_u64)dmc_inf_bits(s, 3) << (3 * dmc_inf_pre_order(i));
    if (s->trunc) return DMC_STATUS_SRC_TRUNCATED;
    // The code-length code (at most 7 bits) must be complete. Per length l (1..7): its count
    // and first canonical position (5-bit fields at 5l), its first position minus its first
    // code modulo 32 (5-bit field at 5l), its limit (8-bit field at 8l).
    dmc_u64 cnt = 0;
    for (dmc_u32 sym = 0; sym < 19; sym++) cnt += 1ull << (5 * ((pl >> (3 * sym)) & 7u));
    dmc_i32 left = 1;
    dmc_u64 offs = 0, base = 0, lim = 0;
    dmc_u32 code = 0, idx = 0;
    for (dmc_u32 l = 1; l <= 7; l++) {
        const dmc_u32 c = (dmc_u32)(cnt >> (5 * l)) & 31u;
        left = (left << 1) - (dmc_i32)c;
        if (left < 0) return DMC_STATUS_CORRUPT;
        offs |= (dmc_u64)idx << (5 * l);
        base |= (dmc_u64)((idx - code) & 31u) << (5 * l);
        lim |= (dmc_u64)((code + c) << (7 - l)) << (8 * l);
        idx += c;
        code = (code + c) << 1;
    }
    if (left > 0) return DMC_STATUS_CORRUPT;
    dmc_u64 slo = 0, shi = 0;  // canonical position k's symbol: bits 5k.. of slo (k < 12), 5(k-12).. of shi
    for (dmc_u32 sym = 0; sym < 19; sym++) {
        const dmc_u32 l = (dmc_u32)(pl >> (3 * sym)) & 7u;
        if (l == 0) continue;
        const dmc_u32 k = (dmc_u32)(offs >> (5 * l)) & 31u;
        offs += 1ull << (5 * l);
        if (k < 12) {
            slo |= (dmc_u64)sym << (5 * k);
        } else {
            shi |= (dmc_u64)sym << (5 * (k - 12));
        }
    }
    // The literal/length and distance code lengths, one run.
    const dmc_u32 total = hlit + hdist;
    dmc_inf_lens_out o;
    o.q = 0;
    o.word = 0;
    o.hlit = hlit;
    dmc_u32 i = 0, prev = 0, eob = 0;
    while (i < total) {
        if (s->bitcnt < 32) dmc_inf_refill(s);
        const dmc_u32 v7 = __brev((dmc_u32)s->bitbuf) >> 25;  // the next 7 bits, first bit highest
        dmc_u32 l = 7;
        for (dmc_u32 m = 7; m >= 1; m--) {
            if (v7 < ((dmc_u32)(lim >> (8 * m)) & 0xFFu)) l = m;
        }
        const dmc_u32 k = ((v7 >> (7 - l)) + (dmc_u32)(base >> (5 * l))) & 31u;  // canonical position
        const dmc_u32 sym = (dmc_u32)((k < 12 ? slo >> (5 * k) : shi >> (5 * (k - 12))) & 31u);
        dmc_inf_consume(s, l);
        if (sym < 16) {
            if (i == 256) eob = sym;
            dmc_inf_lens_put(sm, &o, sym);
            prev = sym;
            i++;
            continue;
        }
        dmc_u32 rep;
        dmc_u32 v = 0;
        if (sym == 16) {
            if (i == 0) return DMC_STATUS_CORRUPT;
            v = prev;
            rep = 3 + dmc_inf_bits(s, 2);
        } else if (sym == 17) {
            rep = 3 + dmc_inf_bits(s, 3);
        } else {
            rep = 11 + dmc_inf_bits(s, 7);
        }
        if (rep > total - i) return DMC_STATUS_CORRUPT;
        if (i <= 256 && i + rep > 256) eob = v;
        for (dmc_u32 r = 0; r < rep; r++) dmc_inf_lens_put(sm, &o, v);
        i += rep;
        prev = v;
        if (s->trunc) return DMC_STATUS_SRC_TRUNCATED;
    }
    if (s->trunc) return DMC_STATUS_SRC_TRUNCATED;
    if (eob == 0) return DMC_STATUS_CORRUPT;  // no end-of-block code
    dmc_inf_lens_zero(sm, &o, 288 + 32);
    return DMC_STATUS_OK;
}

__device__ __forceinline__ void dmc_inf_post(dmc_inflate_smem* sm, dmc_u32 kind, dmc_u32 a, dmc_u32 b, dmc_u32 c) {
    sm->cmd[0] = kind;
    sm->cmd[1] = a;
    sm->cmd[2] = b;
    sm->cmd[3] = c;
}

// Lane 0: runs the decoder until it needs the warp, and posts that command (DONE with a status
// when the stream ends or fails).
__device__ void dmc_inf_step(dmc_inf_state* s, dmc_inflate_smem* sm) {
    for (;;) {
        switch (s->phase) {
            case DMC_INF_PH_MEMBER: {
                if (s->fmt == DMC_INFLATE_FMT_GZIP) {
                    if (s->members > 0) {
                        while (s->ip < s->in_len && s->in[s->ip] == 0) s->ip++;  // zero padding
                        if (s->ip == s->in_len) {
                            s->phase = DMC_INF_PH_END;
                            break;
                        }
                    }
                    const dmc_u32 st = dmc_inf_gzip_header(s, sm);
                    if (st != DMC_STATUS_OK) return dmc_inf_post(sm, DMC_INF_CMD_DONE, st, 0, 0);
                } else if (s->fmt == DMC_INFLATE_FMT_ZLIB) {
                    if (s->in_len - s->ip < 2) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_SRC_TRUNCATED, 0, 0);
                    const dmc_u32 cmf = s->in[s->ip], flg = s->in[s->ip + 1];
                    if ((cmf & 0x0F) != 8 || (cmf >> 4) > 7 || ((cmf << 8) | flg) % 31 != 0) {
                        return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_CORRUPT, 0, 0);
                    }
                    if (flg & 0x20) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_UNSUPPORTED, 0, 0);
                    s->ip += 2;
                }
                s->bitbuf = 0;
                s->bitcnt = 0;
                s->member_start = s->op;
                s->final_block = false;
                s->phase = DMC_INF_PH_BLOCK;
                break;
            }
            case DMC_INF_PH_BLOCK: {
                if (s->final_block) {
                    dmc_inf_align(s);
                    if (s->trunc) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_SRC_TRUNCATED, 0, 0);
                    s->phase = DMC_INF_PH_TRAILER;
                    break;
                }
                const dmc_u32 h = dmc_inf_bits(s, 3);
                if (s->trunc) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_SRC_TRUNCATED, 0, 0);
                s->final_block = (h & 1) != 0;
                const dmc_u32 type = h >> 1;
                if (type == 0) {
                    const dmc_u64 p = dmc_inf_align(s);
                    if (s->trunc || s->in_len - p < 4) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_SRC_TRUNCATED, 0, 0);
                    const dmc_u32 n = dmc_load_le16(s->in + p);
                    if ((n ^ dmc_load_le16(s->in + p + 2)) != 0xFFFF) {
                        return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_CORRUPT, 0, 0);
                    }
                    if (s->in_len - (p + 4) < n) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_SRC_TRUNCATED, 0, 0);
                    if (n > s->out_len - s->op) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_DST_OVERFLOW, 0, 0);
                    s->ip = p + 4 + n;
                    const dmc_u32 at = s->op;
                    s->op += n;
                    if (n == 0) break;
                    return dmc_inf_post(sm, DMC_INF_CMD_STORED, (dmc_u32)(p + 4), at, n);
                }
                if (type == 1 && s->fixed_tables) {  // the tables of the last block still hold
                    s->phase = DMC_INF_PH_HUFF;
                    break;
                }
                s->fixed_tables = type == 1;
                if (type == 1) {
                    s->phase = DMC_INF_PH_BUILT;
                    return dmc_inf_post(sm, DMC_INF_CMD_BUILD, 1, 0, 0);  // the warp writes the fixed lengths
                } else if (type == 2) {
                    const dmc_u32 st = dmc_inf_dynamic_header(s, sm);
                    if (st != DMC_STATUS_OK) return dmc_inf_post(sm, DMC_INF_CMD_DONE, st, 0, 0);
                } else {
                    return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_CORRUPT, 0, 0);
                }
                s->phase = DMC_INF_PH_BUILT;
                return dmc_inf_post(sm, DMC_INF_CMD_BUILD, 0, 0, 0);
            }
            case DMC_INF_PH_BUILT: {
                const dmc_u32 st = sm->res[0] != DMC_STATUS_OK ? sm->res[0] : sm->res[1];
                if (st != DMC_STATUS_OK) return dmc_inf_post(sm, DMC_INF_CMD_DONE, st, 0, 0);
                s->phase = DMC_INF_PH_HUFF;
                break;
            }
            case DMC_INF_PH_HUFF: {
                // The block's symbols: the whole warp decodes them (dmc_inf_huff) from bit `pos`
                // and hands the reader back at the end of the block (or ends the stream).
                const dmc_u64 pos = 8 * s->ip - s->bitcnt;
                s->phase = DMC_INF_PH_BLOCK;
                sm->cmd[4] = s->member_start;
                return dmc_inf_post(sm, DMC_INF_CMD_HUFF, (dmc_u32)pos, (dmc_u32)(pos >> 32), s->op);
            }
            case DMC_INF_PH_TRAILER: {
                if (s->fmt == DMC_INFLATE_FMT_RAW) {
                    s->phase = DMC_INF_PH_END;
                    break;
                }
                const dmc_u64 need = s->fmt == DMC_INFLATE_FMT_GZIP ? 8 : 4;
                if (s->in_len - s->ip < need) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_SRC_TRUNCATED, 0, 0);
                s->phase = DMC_INF_PH_CHECKED;
                if (s->verify) {
                    const dmc_u32 kind = s->fmt == DMC_INFLATE_FMT_GZIP ? DMC_INF_CMD_CRC32 : DMC_INF_CMD_ADLER;
                    if (kind == DMC_INF_CMD_CRC32) s->fixed_tables = false;  // its shift tables overwrite them
                    return dmc_inf_post(sm, kind, s->member_start, s->op - s->member_start, 0);
                }
                break;
            }
            case DMC_INF_PH_CHECKED: {
                const dmc_u8* t = s->in + s->ip;
                if (s->fmt == DMC_INFLATE_FMT_GZIP) {
                    if (s->verify && (dmc_load_le32(t) != s->check || dmc_load_le32(t + 4) != s->op - s->member_start)) {
                        return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_CHECKSUM_MISMATCH, 0, 0);
                    }
                    s->ip += 8;
                    s->members++;
                    s->phase = DMC_INF_PH_MEMBER;
                } else {
                    const dmc_u32 want = ((dmc_u32)t[0] << 24) | ((dmc_u32)t[1] << 16) | ((dmc_u32)t[2] << 8) | t[3];
                    if (s->verify && want != s->check) {
                        return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_CHECKSUM_MISMATCH, 0, 0);
                    }
                    s->ip += 4;
                    if (s->ip != s->in_len) return dmc_inf_post(sm, DMC_INF_CMD_DONE, DMC_STATUS_CORRUPT, 0, 0);
                    s->phase = DMC_INF_PH_END;
                }
                break;
            }
            default: {
                const dmc_u32 st = s->op == s->out_len ? DMC_STATUS_OK : DMC_STATUS_SIZE_MISMATCH;
                return dmc_inf_post(sm, DMC_INF_CMD_DONE, st, 0, 0);
            }
        }
    }
}

// ---- Checksums (all lanes) ----

// Product of two polynomials (reflected, bit 31 = x^0) modulo the CRC32 polynomial.
__device__ __forceinline__ dmc_u32 dmc_inf_mulmod(dmc_u32 a, dmc_u32 b) {
    dmc_u32 p = 0;
    for (int i = 0; i < 32; i++) {
        if (a & (0x80000000u >> i)) p ^= b;
        b = (b & 1u) ? ((b >> 1) ^ DMC_INF_CRC_POLY) : (b >> 1);
    }
    return p;
}

__device__ __forceinline__ dmc_u32 dmc_inf_x8n(dmc_u64 n) {
    dmc_u32 r = 0x80000000u, sq = 0x00800000u;
    while (n != 0) {
        if (n & 1u) r = dmc_inf_mulmod(r, sq);
        sq = dmc_inf_mulmod(sq, sq);
        n >>= 1;
    }
    return r;
}

// The 4 bytes at A + q as a little-endian word, those outside [S, E) as 0: single bytes.
__device__ __forceinline__ dmc_u32 dmc_inf_group_word(const dmc_u8* A, dmc_u64 q, dmc_u64 S, dmc_u64 E) {
    dmc_u32 v = 0;
    DMC_UNROLL
    for (dmc_u32 b = 0; b < 4; b++) {
        if (q + b >= S && q + b < E) v |= (dmc_u32)A[q + b] << (8 * b);
    }
    return v;
}

// The 16 bytes at A + g (A 16-aligned) as four little-endian words, bytes outside the span
// [S, E) as 0: one aligned 16-byte load when the group lies inside the span (no other lane's
// bytes, none outside the stream's output), single bytes in the span's first and last groups.
__device__ __forceinline__ void dmc_inf_group(const dmc_u8* A, dmc_u64 g, dmc_u64 S, dmc_u64 E, dmc_u32 w[4]) {
    if (g >= S && g + 16 <= E) {
        const dmc_u32x4 v = dmc_load16(A + g);
        for (int k = 0; k < 4; k++) w[k] = v.w[k];
        return;
    }
    for (int k = 0; k < 4; k++) w[k] = dmc_inf_group_word(A, g + 4 * k, S, E);
}

// Span of n bytes at p: A = p rounded down to 16 bytes, S = p - A, E = S + n.
#define DMC_INF_CK_CHUNK (16 * DMC_WARP_SIZE)

// One sub-stream's CRC `acc` past its word `v` at span position q: the word and the 508 zero
// bytes after it with the shift tables `z` where the span goes on that far, else its bytes in
// the span with the byte table.
__device__ __forceinline__ dmc_u32 dmc_inf_crc_word(const dmc_inflate_smem* sm, const dmc_u32* z, dmc_u32 acc,
                                                    dmc_u32 v, dmc_u64 q, dmc_u64 E) {
    if (q + DMC_INF_CK_CHUNK <= E) {
        const dmc_u32 x = acc ^ v;
        return z[x & 0xFFu] ^ z[256 + ((x >> 8) & 0xFFu)] ^ z[512 + ((x >> 16) & 0xFFu)] ^ z[768 + (x >> 24)];
    }
    if (q < E) {
        const dmc_u32 r = (dmc_u32)dmc_min_u64(4, E - q);
        for (dmc_u32 j = 0; j < r; j++) acc = sm->crc[(acc ^ (v >> (8 * j))) & 0xFFu] ^ (acc >> 8);
    }
    return acc;
}

// A sub-stream's CRC (its first word at span position q0) shifted to the span's end E.
__device__ __forceinline__ dmc_u32 dmc_inf_crc_end(dmc_u32 acc, dmc_u64 q0, dmc_u64 E) {
    if (acc == 0 || q0 >= E) return 0;  // a zero CRC shifts to zero
    const dmc_u64 q = q0 + (E - 1 - q0) / DMC_INF_CK_CHUNK * DMC_INF_CK_CHUNK;
    const dmc_u64 at = q + DMC_INF_CK_CHUNK == E ? E : q + dmc_min_u64(4, E - q);
    return at < E ? dmc_inf_mulmod(acc, dmc_inf_x8n(E - at)) : acc;
}

// CRC32 (gzip) of p[0, n), all lanes. The warp reads 512 bytes a step, 16 per lane (one
// coalesced request); word k of lane L's group belongs to sub-stream 4L + k, whose words lie 512
// bytes apart. Each sub-stream's CRC (with the other sub-streams' bytes as zeros) steps a whole
// word and the 508 zero bytes after it with four lookups in the shift tables `z` (built here,
// 4 × 256 entries over the literal/length table, which no block needs any more: the member
// ended): z[j][v] = T[v] · x^(8 (511 - j)) mod P, byte v at byte j of a word. A word too close to
// the end steps its bytes with the byte table instead. The sub-streams' CRCs, each shifted by
// the bytes that follow its last one (GF(2) multiplication), XOR to the stream's raw CRC; the
// leading bytes below the 16-byte alignment read as zeros, which a raw CRC ignores.
__device__ dmc_u32 dmc_inf_crc32(dmc_inflate_smem* sm, const dmc_u8* p, dmc_u64 n, dmc_u32 lane) {
    dmc_u32* z = sm->litlen;
    {
        for (dmc_u32 j = 0; j < 4; j++) {
            const dmc_u32 shift = dmc_inf_x8n(511 - j);
            for (dmc_u32 e = lane; e < 256; e += DMC_WARP_SIZE) {
                dmc_u32 c = e;
                for (int k = 0; k < 8; k++) c = (c & 1u) ? ((c >> 1) ^ DMC_INF_CRC_POLY) : (c >> 1);
                z[256 * j + e] = dmc_inf_mulmod(c, shift);
            }
        }
    }
    __syncwarp();
    const dmc_u64 S = (dmc_u64)p & 15u, E = S + n;
    const dmc_u8* A = p - S;
    dmc_u32 acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;  // sub-streams 4 lane + k (scalars: no local array)
    for (dmc_u64 c0 = 0; c0 < E; c0 += DMC_INF_CK_CHUNK) {
        const dmc_u64 g = c0 + 16ull * lane;
        dmc_u32 w[4];
        dmc_inf_group(A, g, S, E, w);
        acc0 = dmc_inf_crc_word(sm, z, acc0, w[0], g, E);
        acc1 = dmc_inf_crc_word(sm, z, acc1, w[1], g + 4, E);
        acc2 = dmc_inf_crc_word(sm, z, acc2, w[2], g + 8, E);
        acc3 = dmc_inf_crc_word(sm, z, acc3, w[3], g + 12, E);
    }
    // Each sub-stream's CRC stands at the end of its last word q (the last below E): at E when
    // that word was stepped with the zeros after it (q + 512 == E), else after its bytes.
    const dmc_u64 l16 = 16ull * lane;
    dmc_u32 part = dmc_inf_crc_end(acc0, l16, E) ^ dmc_inf_crc_end(acc1, l16 + 4, E) ^
                   dmc_inf_crc_end(acc2, l16 + 8, E) ^ dmc_inf_crc_end(acc3, l16 + 12, E);
    for (int o = 16; o > 0; o >>= 1) part ^= __shfl_xor_sync(0xFFFFFFFFu, part, o);
    return part ^ dmc_inf_mulmod(0xFFFFFFFFu, dmc_inf_x8n(n)) ^ 0xFFFFFFFFu;
}

// Adler-32 (zlib) of p[0, n), all lanes: the same 16-byte coalesced groups; each lane sums its
// bytes b_i and the products q_i b_i with their span positions q_i (mod 65521, reduced once a
// step), a warp reduction adds the lanes' sums; with i = q_i - S the stream position,
// a = 1 + sum b_i and b = n + sum (n - i) b_i = n + (n + S) sum b_i - sum q_i b_i (mod 65521).
__device__ dmc_u32 dmc_inf_adler32(const dmc_u8* p, dmc_u64 n, dmc_u32 lane) {
    const dmc_u64 S = (dmc_u64)p & 15u, E = S + n;
    const dmc_u8* A = p - S;
    dmc_u64 s1 = 0, sq = 0;
    for (dmc_u64 c0 = 0; c0 < E; c0 += DMC_INF_CK_CHUNK) {
        const dmc_u64 g = c0 + 16ull * lane;
        dmc_u32 w[4];
        dmc_inf_group(A, g, S, E, w);
        dmc_u32 sb = 0, sj = 0;  // sum of the group's bytes, and of j * byte j
        for (dmc_u32 k = 0; k < 4; k++) {
            for (dmc_u32 i = 0; i < 4; i++) {
                const dmc_u32 b = (w[k] >> (8 * i)) & 0xFFu;
                sb += b;
                sj += (4 * k + i) * b;
            }
        }
        s1 = (s1 + sb) % DMC_INF_ADLER_MOD;
        sq = (sq + (g % DMC_INF_ADLER_MOD) * sb + sj) % DMC_INF_ADLER_MOD;
    }
    dmc_u32 a = (dmc_u32)s1, b = (dmc_u32)sq;
    for (int o = 16; o > 0; o >>= 1) {
        a = (a + __shfl_xor_sync(0xFFFFFFFFu, a, o)) % DMC_INF_ADLER_MOD;
        b = (b + __shfl_xor_sync(0xFFFFFFFFu, b, o)) % DMC_INF_ADLER_MOD;
    }
    const dmc_u64 nm = n % DMC_INF_ADLER_MOD;
    const dmc_u64 bb = (nm + ((nm + S) % DMC_INF_ADLER_MOD) * a + (DMC_INF_ADLER_MOD - b)) % DMC_INF_ADLER_MOD;
    return ((dmc_u32)bb << 16) | ((a + 1) % DMC_INF_ADLER_MOD);
}

// ---- The block's symbols (all lanes) ----

#define DMC_INF_FULL 0xFFFFFFFFu

// The stream bits at the decode position, the same in every lane: three consecutive 4-byte
// words of the input (96 bits) from stream bit 32 aw - 8 mis (a 4-byte word of the window's
// grid, so one shuffle of the window fetches each). The Huffman decode reads a round's
// candidates (lane i: the 32 bits at pos + i) and a match's header from it with funnel shifts,
// where each read of the window took three or four shuffles; moving it to a later position
// drops the words before pos's and fetches as many new ones, one shuffle each (a label image's
// round and match, ~10 bits: mostly none). A round of 64 candidates reads the window.
struct dmc_inf_rd {
    dmc_u32 b0, b1, b2;  // stream bits [32 aw - 8 mis, + 96)
    dmc_u32 aw;          // b0's word of the grid
};

// Word q of the stream's 4-byte grid (its bytes at stream position 4 q - mis): the window moved
// to hold it, one shuffle. A warp collective (uniform q).
__device__ __forceinline__ dmc_u32 dmc_inf_bits_word(dmc_win8* w, dmc_u32 q, dmc_u32 lane) {
    dmc_win_need(w, 4 * q - w->mis, 4, lane);
    const dmc_u32 o = q - (w->start >> 2);  // its word in the window (start: a multiple of 8)
    const dmc_u32 v = (o & 1) ? (dmc_u32)(w->word >> 32) : (dmc_u32)w->word;
    return __shfl_sync(DMC_INF_FULL, v, (int)((o >> 1) & 31));
}

// Moves the reader to stream bit pos (uniform): afterwards pos lies in its first word and bits
// pos .. pos + 63 are readable. A move forward by one or two words keeps the words it has; any
// other (a jump, or back: a continuation that was not one) fetches all three.
__device__ __forceinline__ void dmc_inf_bits_to(dmc_inf_rd* r, dmc_win8* w, dmc_u64 pos, dmc_u32 lane) {
    const dmc_u32 q = ((dmc_u32)(pos >> 3) + w->mis) >> 2;  // pos's word (32-bit: as the window's positions)
    const dmc_u32 k = q - r->aw;                              // words to drop
    if (k == 0) return;
    if (k == 1) {
        r->b0 = r->b1;
        r->b1 = r->b2;
    } else if (k == 2) {
        r->b0 = r->b2;
        r->b1 = dmc_inf_bits_word(w, q + 1, lane);
    } else {
        r->b0 = dmc_inf_bits_word(w, q, lane);
        r->b1 = dmc_inf_bits_word(w, q + 1, lane);
    }
    r->b2 = dmc_inf_bits_word(w, q + 2, lane);
    r->aw = q;
}

// A reader at stream bit pos.
__device__ __forceinline__ dmc_inf_rd dmc_inf_bits_open(dmc_win8* w, dmc_u64 pos, dmc_u32 lane) {
    dmc_inf_rd r;
    r.aw = (((dmc_u32)(pos >> 3) + w->mis) >> 2) - 3u;  // none of its words is kept
    dmc_inf_bits_to(&r, w, pos, lane);
    return r;
}

// Stream bit pos's bit in the reader's words (the reader moved to pos or to a position at most
// 63 - s bits before it).
__device__ __forceinline__ dmc_u32 dmc_inf_bits_rel(const dmc_inf_rd& r, const dmc_win8& w, dmc_u64 pos) {
    return (dmc_u32)pos + 8u * w.mis - 32u * r.aw;
}

// The 32 bits from stream bit pos + s (s + pos's bit in the reader's words < 64).
__device__ __forceinline__ dmc_u32 dmc_inf_bits32(const dmc_inf_rd& r, const dmc_win8& w, dmc_u64 pos, dmc_u32 s) {
    const dmc_u32 t = dmc_inf_bits_rel(r, w, pos) + s;
    return t < 32 ? __funnelshift_r(r.b0, r.b1, t) : __funnelshift_r(r.b1, r.b2, t);
}

// The 96 - t bits from stream bit pos, t its bit in the reader's words (< 64), in the low bits
// of a 64-bit value (bits past the reader's read as 0).
__device__ __forceinline__ dmc_u64 dmc_inf_bits64(const dmc_inf_rd& r, const dmc_win8& w, dmc_u64 pos) {
    const dmc_u32 t = dmc_inf_bits_rel(r, w, pos);
    const dmc_u32 lo = t < 32 ? __funnelshift_r(r.b0, r.b1, t) : __funnelshift_r(r.b1, r.b2, t);
    const dmc_u32 hi = t < 32 ? __funnelshift_r(r.b1, r.b2, t) : r.b2 >> (t & 31);
    return (dmc_u64)lo | ((dmc_u64)hi << 32);
}

// One step of pointer doubling over 64 offsets, lane l holding offsets l (ja) and 32 + l (jb):
// offset p's jump, where offsets >= 64 (255: the run ends) stay where they are.
__device__ __forceinline__ dmc_u32 dmc_inf_jump64(dmc_u32 ja, dmc_u32 jb, dmc_u32 p) {
    const dmc_u32 ta = __shfl_sync(DMC_INF_FULL, ja, (int)(p & 31));
    const dmc_u32 tb = __shfl_sync(DMC_INF_FULL, jb, (int)(p & 31));
    return p < 32 ? ta : p < 64 ? tb : p;
}

// The run: up to 128 decoded bytes held in registers, 4 per lane (lane L holds slots 4L..4L+3,
// slot b of a lane in bits 8b..8b+7 of `mine`). Slot 0 lies at output position base - head,
// a 4-byte aligned address; slots [head, head + len) hold out[base, base + len). A match byte
// whose source was stored before the run is PENDING: its slot holds no byte yet but the
// distance back to that source (16 bits: slot b of a lane in bits 16(b&1).. of `pd01` for
// b < 2, of `pd23` else; 0: the byte is in `mine`). A match reading a pending byte of the run
// inherits its source, so every pending byte's source lies before the run (< 32768 + 128
// back); the flush loads them all at once (dmc_inf_resolve). `last` holds the 4 output bytes
// before base (byte base - 1 in bits 24-31), the `known` last of them known (0-4): a long match
// of period 1, 2 or 4 takes its pattern from it (dmc_lz_fill4), where loading the bytes the
// flush or the copy before it has just stored waits on the L2.
struct dmc_inf_run {
    dmc_u32 base, head, len, mine, pd01, pd23, last, known;
};

#define DMC_INF_RUN_BYTES (4 * DMC_WARP_SIZE)
// A long match's repeats (dmc_inf_huff): matches of at most this many bits are looked for, 31
// candidates a step; the window holds the match and the candidates' bits (32 x 32 bits from the
// match's first byte, plus the bytes a 32-bit read spans).
#define DMC_INF_REPEAT_BITS 32u
#define DMC_INF_REPEAT_WINDOW (4u * DMC_WARP_SIZE + 5u)

// Puts byte `v` (a value of this lane) into slot `slot` of this lane's word when `put`.
__device__ __forceinline__ void dmc_inf_put(dmc_inf_run* r, dmc_u32 b, bool put, dmc_u32 v) {
    if (put) r->mine = (r->mine & ~(0xFFu << (8 * b))) | ((v & 0xFFu) << (8 * b));
}

// Byte of slot `slot` (any lane's; `slot` may differ between lanes). A warp collective.
__device__ __forceinline__ dmc_u32 dmc_inf_slot(const dmc_inf_run& r, dmc_u32 slot) {
    return (__shfl_sync(DMC_INF_FULL, r.mine, (int)((slot >> 2) & 31)) >> (8 * (slot & 3))) & 0xFFu;
}

// Puts a match byte into slot b of this lane's word when `put`: pv holds the byte (bits 0-7)
// and the distance back to its pending source (bits 8-23; 0: the byte is final).
__device__ __forceinline__ void dmc_inf_put_match(dmc_inf_run* r, dmc_u32 b, bool put, dmc_u32 pv) {
    if (!put) return;
    r->mine = (r->mine & ~(0xFFu << (8 * b))) | ((pv & 0xFFu) << (8 * b));
    const dmc_u32 sh = 16 * (b & 1), d = (pv >> 8) << sh, keep = ~(0xFFFFu << sh);
    if (b < 2) {
        r->pd01 = (r->pd01 & keep) | d;
    } else {
        r->pd23 = (r->pd23 & keep) | d;
    }
}

// The pending distance of slot `slot` (any lane's; 0: its byte is final). A warp collective.
__device__ __forceinline__ dmc_u32 dmc_inf_slot_pend(const dmc_inf_run& r, dmc_u32 slot) {
    const dmc_u32 a = __shfl_sync(DMC_INF_FULL, r.pd01, (int)((slot >> 2) & 31));
    const dmc_u32 c = __shfl_sync(DMC_INF_FULL, r.pd23, (int)((slot >> 2) & 31));
    return (((slot & 2) ? c : a) >> (16 * (slot & 1))) & 0xFFFFu;
}

// Loads the run's pending bytes. The sources lie before the run: stored by earlier flushes and
// copies, which a __syncwarp ordered before this. Up to 32 pending bytes (one request): the
// pending slots are numbered in slot order (a warp prefix sum of the lanes' counts); lane j finds
// the j-th (a binary search over the lanes' sums, then its rank among its lane's four slots) and
// loads its source; each slot's owner takes its byte back by shuffle. More than 32 (a run made
// of matches whose sources lie before it: a label image's constant regions, where the whole run
// is pending): each lane loads its own pending slots' sources, one request per slot of the four
// that any lane has pending (at most four requests, as the numbered way's four rounds, without
// its search: ~14 dependent shuffles per round of 32).
__device__ __forceinline__ void dmc_inf_resolve(const dmc_u8* out, dmc_inf_run* r, dmc_u32 lane) {
    const dmc_u32 pm = ((r->pd01 & 0xFFFFu) ? 1u : 0u) | ((r->pd01 >> 16) ? 2u : 0u) |
                       ((r->pd23 & 0xFFFFu) ? 4u : 0u) | ((r->pd23 >> 16) ? 8u : 0u);
    if (__ballot_sync(DMC_INF_FULL, pm != 0) == 0) return;
    const dmc_u32 pos0 = r->base - r->head;  // output position of slot 0
    const dmc_u32 cnt = (dmc_u32)__popc(pm);
    const dmc_u32 total = __reduce_add_sync(DMC_INF_FULL, cnt);  // pending bytes
    if (total > DMC_WARP_SIZE) {
        DMC_UNROLL
        for (dmc_u32 k = 0; k < 4; k++) {
            if ((pm >> k) & 1u) {
                const dmc_u32 d = (((k & 2) ? r->pd23 : r->pd01) >> (16 * (k & 1))) & 0xFFFFu;
                const dmc_u32 got = out[pos0 + 4 * lane + k - d];
                r->mine = (r->mine & ~(0xFFu << (8 * k))) | (got << (8 * k));
            }
        }
        r->pd01 = 0;
        r->pd23 = 0;
        return;
    }
    dmc_u32 incl = cnt;
    for (int o = 1; o < DMC_WARP_SIZE; o <<= 1) {
        const dmc_u32 t = __shfl_up_sync(DMC_INF_FULL, incl, o);
        if (lane >= (dmc_u32)o) incl += t;
    }
    const dmc_u32 excl = incl - cnt;
    // total <= 32: lane j loads pending byte j
    const dmc_u32 j = lane;
    dmc_u32 L = 0;  // the lane holding pending byte j: the lanes whose sums are <= j
    for (dmc_u32 s = DMC_WARP_SIZE / 2; s > 0; s >>= 1) {
        if (__shfl_sync(DMC_INF_FULL, incl, (int)(L + s - 1)) <= j) L += s;
    }
    const dmc_u32 m = __shfl_sync(DMC_INF_FULL, pm, (int)L);
    const dmc_u32 rk = j - __shfl_sync(DMC_INF_FULL, excl, (int)L);
    const dmc_u32 a01 = __shfl_sync(DMC_INF_FULL, r->pd01, (int)L);
    const dmc_u32 a23 = __shfl_sync(DMC_INF_FULL, r->pd23, (int)L);
    dmc_u32 b = 0, seen = 0;  // the rk-th pending slot of lane L
    for (dmc_u32 k = 0; k < 4; k++) {
        if ((m >> k) & 1u) {
            if (seen == rk) b = k;
            seen++;
        }
    }
    const dmc_u32 d = (((b & 2) ? a23 : a01) >> (16 * (b & 1))) & 0xFFFFu;
    dmc_u32 v = 0;
    if (j < total) v = out[pos0 + 4 * L + b - d];
    for (dmc_u32 k = 0; k < 4; k++) {
        const dmc_u32 idx = excl + (dmc_u32)__popc(pm & ((1u << k) - 1u));
        const dmc_u32 got = __shfl_sync(DMC_INF_FULL, v, (int)(idx & 31));
        if ((pm >> k) & 1u) r->mine = (r->mine & ~(0xFFu << (8 * k))) | (got << (8 * k));
    }
    r->pd01 = 0;
    r->pd23 = 0;
}

// Stores the run: whole words with one aligned 4-byte store per lane (one request), the
// partial first and last words byte by byte (lanes 0-2 and 4-6, one more request); orders the
// stores before the warp's next reads of the output and starts an empty run at `op`.
__device__ __forceinline__ void dmc_inf_flush(dmc_u8* out, dmc_inf_run* r, dmc_u32 op, dmc_u32 mis, dmc_u32 lane) {
    if (r->len == 0) {  // an empty run (before a long match that follows another): nothing to store
        __syncwarp();
        r->base = op;
        r->head = (mis + op) & 3;
        return;
    }
    dmc_inf_resolve(out, r, lane);
    const dmc_u32 end = r->head + r->len;
    {
        // the run's last 4 bytes (fewer: after the 4 - len last before it) become `last`
        const dmc_u32 s0 = r->len >= 4 ? end - 4 : r->head;
        const dmc_u32 wa = __shfl_sync(DMC_INF_FULL, r->mine, (int)((s0 >> 2) & 31));
        const dmc_u32 wb = __shfl_sync(DMC_INF_FULL, r->mine, (int)(((s0 >> 2) + 1) & 31));
        const dmc_u32 t = __funnelshift_r(wa, wb, 8 * (s0 & 3));
        r->last = r->len >= 4 ? t : __funnelshift_r(r->last, t, 8 * r->len);
        r->known = dmc_min_u32(4, r->known + r->len);
    }
    const dmc_u32 lo = (r->head + 3) & ~3u;  // first whole word's slot
    const dmc_u32 hi = end & ~3u;            // end of the whole words
    dmc_u8* slot0 = out + r->base;           // slot s lies at slot0 + s - head
    if (4 * lane >= lo && 4 * lane + 4 <= hi) *(dmc_u32*)(slot0 + (4 * lane - r->head)) = r->mine;  // aligned
    const dmc_u32 tail = hi > lo ? hi : lo;  // the last word's slots [tail, end), when tail < end
    const dmc_u32 s = lane < 4 ? r->head + lane : tail + (lane - 4);
    const bool part = lane < 3 ? s < dmc_min_u32(lo, end) : (lane >= 4 && lane < 7 && s < end);
    const dmc_u32 v = dmc_inf_slot(*r, s);
    if (part) slot0[s - r->head] = (dmc_u8)v;
    __syncwarp();
    r->base = op;
    r->head = (mis + op) & 3;
    r->len = 0;
}

// A round's chain of symbols from stream bit pos (all lanes): lane i looks up the root entry of
// the symbol that would start at bit pos + i (and, WIDE, pos + 32 + i: two shared requests), the
// real chain from pos is found (WIDE: by pointer doubling over the 64 candidate offsets; else by
// a walk over the 32, one symbol a step) (successor = offset + code length for a literal; the
// chain ends at any other symbol, a subtable pointer included) and lane k learns the offset of
// the chain's k-th symbol (*at; >= 32 (64): not in the round) and its root entry (*ek); *va / *vb: the 32 stream bits at pos + i and
// pos + 32 + i (WIDE only) for a subtable lookup. Moves the window to hold the bits read.
template <bool WIDE>
__device__ __forceinline__ void dmc_inf_chain(const dmc_inflate_smem* sm, dmc_win8* win, dmc_inf_rd* br, dmc_u64 pos,
                                              dmc_u32 lane, dmc_u32* at_o, dmc_u32* ek_o, dmc_u32* va_o,
                                              dmc_u32* vb_o) {
    const dmc_u32 mask = (1u << DMC_INF_LITLEN_BITS) - 1;
    dmc_u32 at = 0;
    if (WIDE) {
        dmc_u32 t;
        dmc_win_need(win, (dmc_u32)(pos >> 3), 13, lane);  // bits pos .. pos + 63 + 32
        const dmc_u64 v2 = dmc_win8_bits64(*win, pos + lane);
        const dmc_u32 va = (dmc_u32)v2, vb = (dmc_u32)(v2 >> 32);
        const dmc_u32 ea = sm->litlen[va & mask], eb = sm->litlen[vb & mask];
        const dmc_u32 ja0 =
            (ea & DMC_INF_ENT_SYM) && ((ea >> 28) & 3) == DMC_INF_KIND_LIT ? lane + ((ea >> 16) & 31) : 255;
        const dmc_u32 jb0 =
            (eb & DMC_INF_ENT_SYM) && ((eb >> 28) & 3) == DMC_INF_KIND_LIT ? 32 + lane + ((eb >> 16) & 31) : 255;
        const dmc_u32 ja1 = dmc_inf_jump64(ja0, jb0, ja0), jb1 = dmc_inf_jump64(ja0, jb0, jb0);
        const dmc_u32 ja2 = dmc_inf_jump64(ja1, jb1, ja1), jb2 = dmc_inf_jump64(ja1, jb1, jb1);
        const dmc_u32 ja3 = dmc_inf_jump64(ja2, jb2, ja2), jb3 = dmc_inf_jump64(ja2, jb2, jb2);
        t = dmc_inf_jump64(ja0, jb0, at);
        if ((lane & 1) && at < 64) at = t;
        t = dmc_inf_jump64(ja1, jb1, at);
        if ((lane & 2) && at < 64) at = t;
        t = dmc_inf_jump64(ja2, jb2, at);
        if ((lane & 4) && at < 64) at = t;
        t = dmc_inf_jump64(ja3, jb3, at);
        if ((lane & 8) && at < 64) at = t;
        // the chain's first 16 symbols: lanes 16 and up are out of the round, which then ends
        // after 16 literals at most (a chain of more, codes of 4 bits or fewer, goes on in the
        // next round); one doubling level and one step fewer than 32 would take
        if (lane >= 16) at = 255;
        const dmc_u32 eka = __shfl_sync(DMC_INF_FULL, ea, (int)(at & 31));
        const dmc_u32 ekb = __shfl_sync(DMC_INF_FULL, eb, (int)(at & 31));
        *ek_o = at < 32 ? eka : ekb;
        *va_o = va;
        *vb_o = vb;
    } else {
        dmc_inf_bits_to(br, win, pos, lane);  // bits pos .. pos + 31 + 32: the reader's, no shuffle
        const dmc_u32 v = dmc_inf_bits32(*br, *win, pos, lane);
        const dmc_u32 e = sm->litlen[v & mask];
        const dmc_u32 j0 = (e & DMC_INF_ENT_SYM) && ((e >> 28) & 3) == DMC_INF_KIND_LIT ? lane + ((e >> 16) & 31) : 255;
        // The chain walked one symbol a step: every lane follows the same offset (a uniform
        // loop), lanes k and up take the k-th; it ends at the first offset out of the round (or
        // a symbol that is not a literal: 255). A round after one of at most one literal (a
        // label image's: a match, a literal before it at most) has a chain of one or two
        // symbols: one or two dependent shuffles, where the doubling took nine whatever the
        // chain. (A longer chain walks up to 31 steps in this round; the next one is WIDE.)
        for (dmc_u32 k = 1, cur = 0; k < DMC_WARP_SIZE && cur < 32; k++) {
            cur = __shfl_sync(DMC_INF_FULL, j0, (int)(cur & 31));
            if (lane >= k) at = cur;
        }
        *ek_o = __shfl_sync(DMC_INF_FULL, e, (int)(at & 31));
        *va_o = v;
        *vb_o = 0;
    }
    *at_o = at;
}

struct dmc_inf_huff_res {
    dmc_u64 pos;  // the bit after the end-of-block code (or where the error was found)
    dmc_u32 op;   // output bytes written
    dmc_u32 st;   // DMC_STATUS_OK at the end of the block
};

// The match whose length symbol's entry is x (its code consumed: *pos is after it): the
// length's extra bits, the distance code and its extra bits, at most 5 + 15 + 13 bits, from the
// bit reader moved to the code's start (*pos at most 31 + 15 bits into its words: 50 bits or
// more readable; no shuffle, where a 64-bit read of the window took four).
// DMC_STATUS_SRC_TRUNCATED when they reach past `limit`, DMC_STATUS_CORRUPT for a distance code
// that is not one; *pos moves past them. A warp collective (uniform arguments).
__device__ __forceinline__ dmc_u32 dmc_inf_match(const dmc_inflate_smem* sm, dmc_win8* win, dmc_inf_rd* br,
                                                 dmc_u64* pos, dmc_u64 limit, dmc_u32 x, dmc_u32* len,
                                                 dmc_u32* dist, dmc_u32 lane) {
    dmc_u64 bits = dmc_inf_bits64(*br, *win, *pos);
    const dmc_u32 lb = (x >> 24) & 15;
    *len = (x & 0xFFFF) + ((dmc_u32)bits & ((1u << lb) - 1));
    bits >>= lb;
    const dmc_u32 dv = (dmc_u32)bits;
    dmc_u32 d = sm->dist[dv & ((1u << DMC_INF_DIST_BITS) - 1)];
    if (d & DMC_INF_ENT_SUB) {
        d = sm->dist[(d & 0xFFFF) + ((dv >> DMC_INF_DIST_BITS) & ((1u << ((d >> 16) & 0xFF)) - 1))];
    }
    const dmc_u32 dl = (d & DMC_INF_ENT_SYM) ? (d >> 16) & 31 : 0;
    bits >>= dl;
    if (*pos + lb + dl > limit) return DMC_STATUS_SRC_TRUNCATED;
    if (!(d & DMC_INF_ENT_SYM) || ((d >> 28) & 3) == DMC_INF_KIND_BAD) return DMC_STATUS_CORRUPT;
    const dmc_u32 db = (d >> 24) & 15;
    *dist = (d & 0xFFFF) + ((dmc_u32)bits & ((1u << db) - 1));
    *pos += lb + dl + db;
    if (*pos > limit) return DMC_STATUS_SRC_TRUNCATED;
    return DMC_STATUS_OK;
}

// All lanes: decodes one Huffman block's symbols from stream bit `pos` (<= 8 * in_len) through
// the shared tables, writing out[op, ...). Each round:
//   1. lane i looks up the root entry of the symbol that would start at bit pos + i (one
//      shared request for the warp), and of the one at pos + 32 + i when the round before
//      held two literals or more (a second request: a round then covers 64 bits, a smooth
//      field's literal runs in half the rounds, where a label image's rounds, a match after
//      at most one literal, keep the cheaper 32; dmc_inf_chain);
//   2. the real chain of symbols from pos is found by a walk over the 32 candidate offsets,
//      one shuffle a symbol (64: its first 16 symbols by pointer doubling) (successor = offset
//      + code length for a literal; a run ends at any other symbol, a subtable pointer
//      included): lane k learns the offset of the chain's k-th symbol; a subtable pointer after the chain's literals is looked up for that symbol
//      alone (a literal of a long code joins the run and the next round starts after it);
//   3. the chain's literals join a run of up to 128 decoded bytes held in registers (4 per
//      lane, placed by shuffles), stored with one aligned 4-byte store per lane when the run
//      is full, before a match of 64 bytes or more longer than its room, and at the end;
//   4. a length code at the end of the literals is decoded uniformly (length extra bits, the
//      distance code through its table, distance extra bits: from the bit reader, dmc_inf_rd);
//      a match shorter than 64 bytes is gathered into the run (bytes still in registers by
//      shuffle, older ones pending until the flush loads them, dmc_inf_resolve), in pieces of
//      the run's room; a longer one goes through the overlap-safe cooperative copy after a
//      flush (gathered, 32 bytes a step took eight shuffles), a period of 1, 2 or 4 bytes
//      written from its pattern word (dmc_lz_fill4).
// Statuses come in the order of the serial decode: a code that reads past the input
// (SRC_TRUNCATED) before a literal past the output (DST_OVERFLOW); a missing code or an invalid
// symbol is CORRUPT; a distance before the member BAD_OFFSET; a match past the output
// DST_OVERFLOW.
__device__ dmc_inf_huff_res dmc_inf_huff(const dmc_inflate_smem* sm, dmc_win8* w, dmc_u8* out, dmc_u64 pos,
                                         dmc_u32 op, dmc_u32 out_len, dmc_u32 member_start, dmc_u32 lane) {
    dmc_win8 win = *w;  // in registers while the block decodes
    dmc_inf_rd br = dmc_inf_bits_open(&win, pos, lane);
    const dmc_u64 limit = 8ull * win.len;
    const dmc_u32 mis = (dmc_u32)((dmc_u64)out & 3u);
    dmc_inf_run run;
    run.base = op;
    run.head = (mis + op) & 3;
    run.len = 0;
    run.mine = 0;
    run.pd01 = 0;
    run.pd23 = 0;
    run.last = 0;
    run.known = 0;  // the bytes before the block: not in registers
    dmc_u32 st = DMC_STATUS_OK;
    bool wide = false;
    dmc_u32 cnb = 0, clen = 0, cdist = 0;  // a match decoded ahead: its bits (0: none), len, dist
    for (;;) {
        // A match the last long match's continuation check decoded (a length at another
        // distance: its len, dist and bits, the reader at its first bit) is this pass's; else a
        // round of symbols decodes what comes next.
        dmc_u64 p0;
        dmc_u32 len, dist;
        if (cnb != 0) {
            p0 = pos;
            pos += cnb;
            len = clen;
            dist = cdist;
            cnb = 0;
            wide = false;  // as the round it replaces, of no literal, would have set
        } else {
            // the chain of symbols from pos over the round's 32 bits, or 64 after a round whose
            // chain held two literals or more
            dmc_u32 at, ek, va, vb;
            if (wide) {
                dmc_inf_chain<true>(sm, &win, &br, pos, lane, &at, &ek, &va, &vb);
            } else {
                dmc_inf_chain<false>(sm, &win, &br, pos, lane, &at, &ek, &va, &vb);
            }
            const bool in = at < (wide ? 64u : 32u);
            const dmc_u32 after = at + ((ek & DMC_INF_ENT_SYM) ? (ek >> 16) & 31 : 0);  // offset after it
            const bool litk = in && (ek & DMC_INF_ENT_SYM) && ((ek >> 28) & 3) == DMC_INF_KIND_LIT;
            // The chain's literals are a prefix of it; then one other symbol, or the window's end.
            const dmc_u32 nlit = (dmc_u32)__popc(__ballot_sync(DMC_INF_FULL, litk));
            const dmc_u32 nin = (dmc_u32)__popc(__ballot_sync(DMC_INF_FULL, in));
            const dmc_u32 trunc = __ballot_sync(DMC_INF_FULL, in && pos + after > limit);
            const dmc_u32 ovf = __ballot_sync(DMC_INF_FULL, litk && (dmc_u64)op + lane >= out_len);
            const dmc_u32 first_tr = trunc ? (dmc_u32)__ffs(trunc) - 1 : 32;
            const dmc_u32 first_ov = ovf ? (dmc_u32)__ffs(ovf) - 1 : 32;
            const dmc_u32 at0 = run.head + run.len;  // the run's next slot
            const dmc_u32 take = dmc_min_u32(dmc_min_u32(nlit, DMC_INF_RUN_BYTES - at0), dmc_min_u32(first_tr, first_ov));
            // literals [0, take) of the chain join the run: slot at0 + k takes the k-th (none: no
            // shuffle, a label image's round of a match after a match; one, a label image's before
            // its match: its byte and the offset after it in one, where the four slots' shuffles
            // and the offset's took five whatever the count)
            if (take == 1) {
                const dmc_u32 v = __shfl_sync(DMC_INF_FULL, (after << 8) | (ek & 0xFFu), 0);
                dmc_inf_put(&run, at0 & 3, lane == at0 >> 2, v);
                pos += v >> 8;
                op += 1;
                run.len += 1;
            } else if (take > 1) {
                DMC_UNROLL
                for (dmc_u32 b = 0; b < 4; b++) {
                    const dmc_u32 k = 4 * lane + b - at0;
                    const dmc_u32 byte = __shfl_sync(DMC_INF_FULL, ek, (int)(k & 31));
                    dmc_inf_put(&run, b, k < take, byte);
                }
                pos += __shfl_sync(DMC_INF_FULL, after, (int)((take - 1) & 31));
                op += take;
                run.len += take;
            }
            if (trunc && take == first_tr) {
                st = DMC_STATUS_SRC_TRUNCATED;
                break;
            }
            if (ovf && take == first_ov) {
                st = DMC_STATUS_DST_OVERFLOW;
                break;
            }
            if (run.head + run.len == DMC_INF_RUN_BYTES) dmc_inf_flush(out, &run, op, mis, lane);
            wide = nlit >= 2;  // literals in the chain: the next round reads 64 bits (a label image, none)
            if (take < nlit || nlit == nin) continue;  // the run filled up, or the round's bits ended
            // The chain's symbol after its literals is not a literal in the root: a length, the
            // end of the block, a bad symbol, no code, or a subtable pointer, looked up here (the
            // same address on every lane: one request) from the 32 bits at the symbol's offset.
            dmc_u32 x = __shfl_sync(DMC_INF_FULL, ek, (int)(nlit & 31));
            if (x & DMC_INF_ENT_SUB) {
                const dmc_u32 ax = __shfl_sync(DMC_INF_FULL, at, (int)(nlit & 31));
                const dmc_u32 xva = __shfl_sync(DMC_INF_FULL, va, (int)(ax & 31));
                const dmc_u32 xvb = __shfl_sync(DMC_INF_FULL, vb, (int)(ax & 31));
                const dmc_u32 xv = ax < 32 ? xva : xvb;
                x = sm->litlen[(x & 0xFFFF) + ((xv >> DMC_INF_LITLEN_BITS) & ((1u << ((x >> 16) & 0xFF)) - 1))];
            }
            const dmc_u32 xl = (x & DMC_INF_ENT_SYM) ? (x >> 16) & 31 : 0;
            if ((x & DMC_INF_ENT_SYM) && pos + xl > limit) {
                st = DMC_STATUS_SRC_TRUNCATED;
                break;
            }
            const dmc_u32 kind = (x >> 28) & 3;
            if ((x & DMC_INF_ENT_SYM) && kind == DMC_INF_KIND_LIT) {  // a literal of a long code
                if (op >= out_len) {
                    st = DMC_STATUS_DST_OVERFLOW;
                    break;
                }
                const dmc_u32 slot = run.head + run.len;
                dmc_inf_put(&run, slot & 3, lane == slot >> 2, x);
                pos += xl;
                op++;
                run.len++;
                if (run.head + run.len == DMC_INF_RUN_BYTES) dmc_inf_flush(out, &run, op, mis, lane);
                continue;
            }
            if (!(x & DMC_INF_ENT_SYM) || kind == DMC_INF_KIND_BAD) {
                st = DMC_STATUS_CORRUPT;
                break;
            }
            p0 = pos;  // where the symbol starts
            pos += xl;
            if (kind == DMC_INF_KIND_EOB) break;
            // A length: its extra bits, then the distance code and its extra bits (dmc_inf_match,
            // from the bit reader at the code's start).
            dmc_inf_bits_to(&br, &win, p0, lane);
            st = dmc_inf_match(sm, &win, &br, &pos, limit, x, &len, &dist, lane);
            if (st != DMC_STATUS_OK) break;
        }
        if (dist > op - member_start) {
            st = DMC_STATUS_BAD_OFFSET;
            break;
        }
        if (len > out_len - op) {
            st = DMC_STATUS_DST_OVERFLOW;
            break;
        }
        if (len < DMC_LZ_WIDE_MATCH) {
            // Into the run, in pieces of its room (a piece that fills the run flushes it whole:
            // no partial words, no separate copy for a short match that does not fit), 32
            // match bytes a step: byte k of the match is output byte op - dist + (k mod dist),
            // before the match: in the run (a shuffle: its byte, or its pending source) or
            // stored before it (pending: the flush loads it); then it moves to slot at1 + k -
            // done with the distance to its pending source.
            for (dmc_u32 done = 0; done < len;) {
                const dmc_u32 at1 = run.head + run.len;
                const dmc_u32 n = dmc_min_u32(len - done, DMC_INF_RUN_BYTES - at1);
                for (dmc_u32 c = 0; c < n; c += DMC_WARP_SIZE) {
                    const dmc_u32 k = done + c + lane;
                    const dmc_u32 q = op - dist + (k < len ? k % dist : 0);
                    const dmc_u32 sq = q - run.base + run.head;  // its slot, when in the run
                    const dmc_u32 r = dmc_inf_slot(run, sq);
                    const dmc_u32 rd = dmc_inf_slot_pend(run, sq);
                    const dmc_u32 back = op + k - q;  // the byte's distance to its source
                    const dmc_u32 mv = q < run.base ? back << 8 : rd != 0 ? (back + rd) << 8 : r;
                    DMC_UNROLL
                    for (dmc_u32 b = 0; b < 4; b++) {
                        const dmc_u32 kk = 4 * lane + b - at1 - c;
                        const dmc_u32 pv = __shfl_sync(DMC_INF_FULL, mv, (int)(kk & 31));
                        dmc_inf_put_match(&run, b, kk < DMC_WARP_SIZE && c + kk < n, pv);
                    }
                }
                run.len += n;
                done += n;
                if (run.head + run.len == DMC_INF_RUN_BYTES) dmc_inf_flush(out, &run, op + done, mis, lane);
            }
            op += len;
        } else {
            // A long match whose very bits come again right after it (a label image's region:
            // zlib's 258-byte matches at the same distance, one after another) is that match
            // again: a prefix code decodes the same bits to the same symbol, extra bits and
            // distance. So the repeats join this match's copy, one copy for all of them: lane k
            // compares the sb bits at p0 + k sb with lane 0's (the match's own), the first
            // mismatch, a repeat reaching past the input or the output ending the run of them.
            // Those left are decoded as before, in order (statuses as the serial decode's).
            // The bit reader, still at p0, holds the match's bits and the first candidate's: the
            // search runs only when they are the same (most long matches have no repeat).
            const dmc_u32 sb = (dmc_u32)(pos - p0);  // the match's bits: code, extra, distance
            const dmc_u32 mask = sb >= 32 ? 0xFFFFFFFFu : (1u << sb) - 1;
            dmc_u32 reps = 0;
            if (sb <= DMC_INF_REPEAT_BITS &&
                ((dmc_inf_bits32(br, win, p0, 0) ^ dmc_inf_bits32(br, win, p0, sb)) & mask) == 0) {
                for (;;) {
                    const dmc_u64 q0 = p0 + (dmc_u64)(reps + 1) * sb;  // candidate k = lane at q0 + (lane - 1) sb
                    dmc_win_need(&win, (dmc_u32)((q0 - sb) >> 3), DMC_INF_REPEAT_WINDOW, lane);
                    const dmc_u64 qk = q0 + (dmc_u64)lane * sb - sb;  // lane 0: the match itself
                    const dmc_u32 vk = dmc_win8_bits32(win, qk) & mask;
                    const dmc_u32 v0 = __shfl_sync(DMC_INF_FULL, vk, 0);
                    const dmc_u32 k = reps + lane;  // repeats before this lane's candidate
                    const bool same = lane == 0 || (vk == v0 && qk + sb <= limit &&
                                                    (dmc_u64)len * (k + 1) <= (dmc_u64)(out_len - op));
                    const dmc_u32 run_of = (dmc_u32)__ffs(~__ballot_sync(DMC_INF_FULL, same));  // first mismatch + 1, or 0
                    const dmc_u32 got = run_of == 0 ? DMC_WARP_SIZE - 1 : run_of - 2;
                    reps += got;
                    if (got < DMC_WARP_SIZE - 1) break;
                }
                pos = p0 + (dmc_u64)(reps + 1) * sb;
            }
            dmc_u32 total = len * (reps + 1);
            // Matches at the same distance right after it continue it (a region's last, shorter
            // match at its distance): byte j of the whole comes from op - dist + (j mod dist)
            // as well, so they join the copy too. One root lookup at pos (one request) finds the
            // next symbol; anything but a length whose match has the same distance and fits (a
            // literal, another distance, a match that does not decode: its status in order) is
            // left to the next pass, as before.
            for (;;) {
                dmc_inf_bits_to(&br, &win, pos, lane);
                const dmc_u32 e = sm->litlen[dmc_inf_bits32(br, win, pos, 0) & ((1u << DMC_INF_LITLEN_BITS) - 1)];
                if (!(e & DMC_INF_ENT_SYM) || ((e >> 28) & 3) != DMC_INF_KIND_LEN) break;
                dmc_u64 p1 = pos + ((e >> 16) & 31);
                dmc_u32 len1, dist1;
                if (p1 > limit || dmc_inf_match(sm, &win, &br, &p1, limit, e, &len1, &dist1, lane) != DMC_STATUS_OK)
                    break;
                if (dist1 != dist) {  // the next pass's match, decoded: its checks are made there
                    cnb = (dmc_u32)(p1 - pos);
                    clen = len1;
                    cdist = dist1;
                    break;
                }
                if (len1 > out_len - op - total) break;
                total += len1;
                pos = p1;
            }
            dmc_inf_flush(out, &run, op, mis, lane);
            if (dist == 1 || dist == 2 || dist == 4) {
                // a period of 1, 2 or 4 bytes: its pattern from the dist bytes before op, in
                // `last` (registers) or else loaded (lane l < 4: pattern byte l, one request),
                // and the match's last 4 bytes the next `last`
                dmc_u32 P;
                if (run.known >= dist) {
                    const dmc_u32 src = run.last >> (8 * (4 - dist));
                    P = dist == 1 ? src * 0x01010101u : dist == 2 ? src * 0x00010001u : src;
                } else {
                    const dmc_u32 b = lane < 4 ? (dmc_u32)out[op - dist + (lane & (dist - 1))] << (8 * lane) : 0u;
                    P = __reduce_or_sync(DMC_INF_FULL, b);
                }
                dmc_lz_fill4(out + op, P, total, lane);
                run.last = __funnelshift_r(P, P, 8 * (total & 3));
                run.known = 4;
            } else {
                dmc_lz_match_copy(out, op, dist, total, lane);
                run.known = 0;
            }
            __syncwarp();  // the copy's bytes are visible to the warp's next reads
            op += total;
            run.base = op;
            run.head = (mis + op) & 3;
        }
    }
    dmc_inf_flush(out, &run, op, mis, lane);
    *w = win;
    dmc_inf_huff_res res;
    res.pos = pos;
    res.op = op;
    res.st = st;
    return res;
}

// Blocks per SM for ptxas's register target. sm_80: 4 (what its 164 KiB of shared memory holds at
// ~36 KiB a block of 4 warps; 128 registers). sm_90: 5 (96 registers; its 228 KiB would hold 6,
// but 6 blocks' 80 registers spilled 4 bytes of the leader's state once teams landed, as they
// had with 12 blocks of 2 warps before whenever the decode grew: so 20 warps per SM, not 24,
// for a wave of one warp per stream). The launcher's team rule (DMC_TEAM_BLOCKS_PER_SM, 4:
// common.cuh) holds on both.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define DMC_INF_MIN_BLOCKS 4
#else
#define DMC_INF_MIN_BLOCKS 5
#endif

// A team's helper (warp w > 0 of a job's block): waits at the team's barrier for the leader's
// command; copies its parts of a stored block with the leader (dmc_range_copy's rounds of
// 2 KiB, round k to warp k mod DMC_INFLATE_TEAM); leaves on anything else (the leader posts
// DONE when the job ends).
__device__ void dmc_inf_helper(const dmc_inflate_smem* sm, const dmc_u8* in, dmc_u8* out, dmc_u32 w, dmc_u32 lane) {
    for (;;) {
        dmc_team_sync();  // the leader posted a command
        const dmc_u32 kind = sm->cmd[0], a = sm->cmd[1], b = sm->cmd[2], c = sm->cmd[3];
        if (kind != DMC_INF_CMD_STORED) return;
        dmc_range_copy<DMC_COPY_UNROLL>(out + b, in + a, c, w, DMC_INFLATE_TEAM, lane, DMC_WARP_SIZE);
        dmc_team_sync();  // the copy is done; the leader may post the next command
    }
}

// Jobs and warps: a block has DMC_INFLATE_WARPS_PER_BLOCK (= DMC_INFLATE_TEAM) warps. The first
// n_team jobs of ids get a block each, whose warps are the job's team (the launcher's choice per
// wave, see decode.rs: every job while they fit the device's resident blocks, else the streams
// that open with stored blocks): warp 0 (the leader) decodes the stream as below, and the
// helpers (dmc_inf_helper) join it for each stored block of DMC_INF_TEAM_COPY_MIN bytes or more,
// a stored block's copy being the one step of a stream whose work does not depend on the bits
// before it (a Huffman block's symbols do, and its end is where its last symbol ends). Each later block holds DMC_INFLATE_WARPS_PER_BLOCK jobs of
// the rest, a warp each (no barriers).
extern "C" __global__ void __launch_bounds__(DMC_INFLATE_WARPS_PER_BLOCK * DMC_WARP_SIZE, DMC_INF_MIN_BLOCKS)
dmc_inflate_decode(const dmc_u8* __restrict__ src_base, dmc_u64 src_total, dmc_u8* __restrict__ dst_base,
                   dmc_u64 dst_total, const dmc_stream* __restrict__ streams, const dmc_u32* __restrict__ ids,
                   dmc_u32 n_ids, dmc_u32* __restrict__ status, dmc_u32* __restrict__ actual, dmc_u32 n_team) {
    __shared__ dmc_inflate_smem smem[DMC_INFLATE_WARPS_PER_BLOCK];
    const dmc_u32 wib = threadIdx.x / DMC_WARP_SIZE;  // warp of the block
    const bool team = blockIdx.x < n_team;            // uniform over the block
    const dmc_u32 job = team ? blockIdx.x : n_team + (blockIdx.x - n_team) * DMC_INFLATE_WARPS_PER_BLOCK + wib;
    const dmc_u32 w = team ? wib : 0;  // warp of the job's team (0: the leader)
    const dmc_u32 lane = dmc_lane();
    if (job >= n_ids) return;  // the whole warp (team: block) leaves together
    const dmc_u32 sid = ids[job];
    const dmc_stream sd = streams[sid];
    // every warp of a team checks the same descriptor: all leave here, or none
    if (!dmc_stream_ok(sd, sid, src_total, dst_total, lane == 0 && w == 0, status, actual)) return;
    dmc_inflate_smem* sm = &smem[team ? 0 : wib];
    const dmc_u8* in = src_base + sd.src_off;
    dmc_u8* out = dst_base + sd.dst_off;
    if (w > 0) {
        dmc_inf_helper(sm, in, out, w, lane);
        return;
    }
    for (dmc_u32 e = lane; e < 256; e += DMC_WARP_SIZE) {
        dmc_u32 c = e;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? ((c >> 1) ^ DMC_INF_CRC_POLY) : (c >> 1);
        sm->crc[e] = c;
    }
    // The warp's window on the input (the Huffman decode's bit window), two words per lane.
    dmc_win8 win = dmc_win_open<dmc_u64>(in, sd.src_len, lane);
    dmc_inf_state s;
    s.in = in;
    s.in_len = sd.src_len;
    s.ip = 0;
    s.bitbuf = 0;
    s.bitcnt = 0;
    s.trunc = false;
    s.out_len = sd.dst_len;
    s.op = 0;
    s.fmt = sd.flags & DMC_INFLATE_FMT_MASK;
    s.verify = (sd.flags & DMC_INFLATE_VERIFY_CHECKSUM) != 0;
    s.phase = DMC_INF_PH_MEMBER;
    s.final_block = false;
    s.fixed_tables = false;
    s.member_start = 0;
    s.members = 0;
    s.check = 0;
    dmc_u32 st = DMC_STATUS_OK;
    if (sd.src_len == 0) {
        st = DMC_STATUS_SRC_TRUNCATED;
    } else if (s.fmt == 3) {
        st = DMC_STATUS_UNSUPPORTED;
    }
    __syncwarp();  // the CRC table is complete
    while (st == DMC_STATUS_OK) {
        if (lane == 0) dmc_inf_step(&s, sm);
        __syncwarp();
        const dmc_u32 kind = sm->cmd[0], a = sm->cmd[1], b = sm->cmd[2], c = sm->cmd[3];
        __syncwarp();  // every lane read the command before lane 0 posts the next
        if (kind == DMC_INF_CMD_DONE) {
            st = a;
            break;
        }
        if (kind == DMC_INF_CMD_BUILD) {
            if (a == 1) {  // the fixed code's lengths
                for (dmc_u32 k = lane; k < 288 + 32; k += DMC_WARP_SIZE) {
                    sm->lens[k] = (dmc_u8)(k < 144 ? 8 : k < 256 ? 9 : k < 280 ? 7 : k < 288 ? 8 : 5);
                }
                __syncwarp();
            }
            const dmc_u32 r0 = dmc_inf_build(sm, 0, 9, sm->litlen, DMC_INF_LITLEN_BITS, DMC_INF_LITLEN_ENOUGH, 0, lane);
            const dmc_u32 r1 = dmc_inf_build(sm, 288, 1, sm->dist, DMC_INF_DIST_BITS, DMC_INF_DIST_ENOUGH, 1, lane);
            if (lane == 0) {
                sm->res[0] = r0;
                sm->res[1] = r1;
            }
        } else if (kind == DMC_INF_CMD_HUFF) {
            const dmc_inf_huff_res r =
                dmc_inf_huff(sm, &win, out, ((dmc_u64)b << 32) | a, c, sd.dst_len, sm->cmd[4], lane);
            if (lane == 0) {
                s.op = r.op;
                dmc_inf_seek(&s, r.pos);
            }
            if (r.st != DMC_STATUS_OK) {
                st = r.st;
                break;
            }
        } else if (kind == DMC_INF_CMD_STORED) {
            // 16-byte loads and stores, four in flight per lane; a long one by the whole team:
            // the helpers read the command after the barrier, and lane 0 posts no other before
            // the barrier after the copy, which makes the helpers' bytes visible to the leader
            if (team && c >= DMC_INF_TEAM_COPY_MIN) {
                dmc_team_sync();
                dmc_range_copy<DMC_COPY_UNROLL>(out + b, in + a, c, 0, DMC_INFLATE_TEAM, lane, DMC_WARP_SIZE);
                dmc_team_sync();
            } else {
                dmc_warp_copy_long(out + b, in + a, c, lane);
            }
        } else if (kind == DMC_INF_CMD_CRC32) {
            const dmc_u32 v = dmc_inf_crc32(sm, out + a, b, lane);
            if (lane == 0) s.check = v;
        } else if (kind == DMC_INF_CMD_ADLER) {
            const dmc_u32 v = dmc_inf_adler32(out + a, b, lane);
            if (lane == 0) s.check = v;
        }
        __syncwarp();  // the warp's writes are visible to lane 0's next step
    }
    if (team) {  // the helpers leave
        if (lane == 0) sm->cmd[0] = DMC_INF_CMD_DONE;
        __syncwarp();
        dmc_team_sync();
    }
    if (lane == 0) {
        status[sid] = st;
        actual[sid] = s.op;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_inflate_decode,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_stream* streams, const dmc_u32* ids, dmc_u32 n_ids, dmc_u32* status,
                  dmc_u32* actual, dmc_u32 n_team),
                 (src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual, n_team))
#endif
