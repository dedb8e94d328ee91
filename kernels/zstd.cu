// zstd.cu — Zstandard (RFC 8878) decoder: frames, raw/RLE/compressed blocks, raw/RLE/Huffman
// (1 and 4 streams, treeless) literals, predefined/RLE/FSE/repeat sequence tables, the three
// repeat offsets, skippable frames and the optional XXH64 content checksum. No dictionaries.
//
// Mapping: one warp per job, a job being one or more consecutive frames of a chunk whose output
// range the host knows (content sizes or the caller's expected size); jobs of all chunks decode
// at once. A wave of few jobs (no more than the device's resident blocks) gives each job a
// block of DMC_ZSTD_TEAM warps, a team (struct dmc_zstd_team): the leader (warp 0) walks the
// job as below; the helpers decode a block's four Huffman literal streams beside it, one stream
// each, and helper 1 decodes the block's sequences a group of 32 ahead of the leader, which
// executes them from shared memory (dmc_zstd_helper; the rounds are one block barrier apart).
// Meanwhile helper 2 decodes the next block's sequences side by side with helper 1 (the leader
// reads that block's headers and builds its tables ahead, in a second set of tables:
// dmc_zstd_look_ahead), into the job's sequence scratch (its output range mirrored into the
// other half of the wave's output buffer), so that the next block's sequences are mostly
// decoded when its turn comes and the leader executes them from there at its own pace; the
// block after that is the leader's again, and so on in pairs. Helper 3, free in those rounds,
// loads the input bytes the two sequence readers take next into L1 (dmc_zstd_prefetch), so
// that their chains do not wait on the input's first touches. While the leader executes a block
// from the scratch it ends a round every DMC_ZSTD_AHEAD_RUN groups, and in each helper 1 walks
// the block's groups as the leader will and loads the next round's scratch lines, literals and
// far match sources into L1 (dmc_zstd_exec_prefetch): the leader's loads of what other warps
// stored are then L1 hits, not L2 accesses. A raw block of 4 KiB or more is
// copied by all four warps in a round of its own (DMC_ZSTD_TASK_COPY: dmc_range_copy's rounds of
// 2 KiB, round k to warp k mod 4; the next round's barrier orders the helpers' bytes before the
// leader's next reads). The repeat offsets are resolved
// where the sequences are executed (dmc_zstd_rep_resolve), which frees a block's sequence
// decode from the blocks before it. A larger wave fills the device with its jobs, a warp each,
// four per block. Inside a job, frames and blocks are otherwise sequential (a block's matches
// reach into earlier blocks, its treeless/repeat tables come from earlier blocks), so the warp
// walks them in order:
//   - headers and the sequence bitstream are decoded redundantly by all 32 lanes (uniform
//     control flow, broadcast loads, no shared state to order), as the LZ4 kernel parses tokens:
//     every lane keeps the three FSE states and reads their entries itself (three broadcast
//     shared loads issued together), so a sequence's dependent chain has no shuffle;
//   - an FSE table's description parse and the Huffman weights' decode run on lane 0 into this
//     warp's shared-memory tables, published with one __syncwarp; a sequence table's symbols are
//     then spread by the whole warp in closed form, 32 cells per round (each lane finds the
//     symbol of its cell by a binary search over the counts' prefix sums in registers:
//     dmc_zstd_spread_warp), its states set 32 cells per round (__match_any_sync ranks the
//     cells of a symbol: dmc_zstd_fse_states), and the Huffman code is built by the whole
//     warp in canonical form: per weight w the first code prefix T_w and the first index R_w
//     in a list of the symbols by weight (hsym, 256 bytes), from ballots and a warp scan, with
//     one store request per 32 symbols, then its decode table of 2^log entries (symbol and
//     length per log-bit prefix), 32 entries per round (dmc_zstd_build_huffman), published with
//     one __syncwarp (shuffles and ballots order no shared memory);
//   - the sequence bitstream is read by every lane through a reader of its own (dmc_zlr: a
//     64-bit container refilled from aligned 4-byte words, the next one loaded ahead; the lanes
//     load the same words) in two phases per group of 32 sequences (dmc_zstd_seq_group): the
//     FSE chain alone (per sequence three table entries whose sum gives the bits to pass over
//     and the state updates' bits, read at once), then every lane reads its own sequence's
//     extra bits from the position the chain left it; the
//     Huffman weights' bitstream (lane 0 alone) through a 128-bit cache of two aligned 8-byte
//     words (one load per 64 bits: dmc_zbr), and so are the FSE table descriptions (lane 0,
//     forward: dmc_zstd_read_ncount);
//   - Huffman literals decode one stream at a time (1 or 4 per block), each cut into up to 32
//     segments of bits, one per lane: every lane decodes its segment from its top bit (a guess;
//     Huffman codes resynchronise within a few codes), the lanes whose guess missed the real
//     chain's entry (the previous segment's exit) walk it in lockstep with their guessed chain
//     until the two meet, and a warp scan of the counts places each segment's literals, which
//     its lane decodes again and stores (dmc_zstd_huf_stream: a decode-table lookup and a few
//     ALU operations per code per lane, no shuffles; on an H200 the smooth field's zstd went
//     from 5.0 to 26.4 GB/s at 64 KiB chunks). They go straight into the tail of the job's output range: the
//     literals of a block are always consumed before the output front
//     reaches them (the output still to come is at least the literals still to copy), so no
//     scratch buffer is needed, and a front that would overrun them is corrupt input;
//   - literal and match copies and raw/RLE blocks are cooperative over the 32 lanes, with the
//     overlap-safe match copy of the LZ4 kernel (byte j of a match of distance d comes from
//     op-d+(j mod d)); a block's sequences go in groups of 32, lane j holding sequence j, each
//     group checked at once (dmc_zstd_seq_exec: warp scans give every sequence its output start
//     and literal index, each lane checks its own, the first failing sequence's first broken
//     rule is the status), then executed: a run of consecutive short sequences (no part of 64
//     bytes or more, except runs under 128) goes out in one pass, in rounds of 128 bytes
//     (dmc_zstd_seq_batch: four times per round each lane resolves one byte's source, through
//     earlier bytes of the run, to a literal or to output written before it, and loads it;
//     shuffles gather each lane's 4 bytes into one aligned 4-byte store), one __syncwarp per
//     run; a sequence with a long part, or whose stores would reach the in-tail literals the
//     run reads, goes alone: literals and match (a __syncwarp between), when the
//     output front is close behind the in-tail literals in rounds; runs of 64 bytes or more
//     (literal runs, matches that do not overlap their source, a block's last literals, raw
//     and RLE blocks) go out as aligned 4-byte stores, 512 bytes per round with four loads in
//     flight per lane, each word shifted together from the two aligned source words it spans
//     (dmc_warp_copy_wide; raw blocks and last literals of 256 bytes or more as 16-byte loads
//     and stores, 2 KiB per round: dmc_warp_copy_long; matches of 256 bytes or more that do
//     not overlap their source in rounds of 496 bytes, one 16-byte load per lane, each word
//     shifted together with the next lane's: dmc_zstd_far_match), the literals before the match with a
//     __syncwarp between; a match of 128 bytes or more that overlaps its source (a run: a label
//     image's constant regions) never joins a batch (there each of its bytes would be resolved
//     through the batch's sequences, a binary search of shuffles per step): a period under 128
//     is stored as 16-byte words built from the pattern loaded once (dmc_lz_match_copy), a
//     longer one grows by doubling, each step a disjoint wide copy (dmc_zstd_match); a block's last
//     literals already in place (the front reached them) are not copied;
//   - the three repeat offsets are three registers, moved by selects (an array indexed by the
//     offset code lived in local memory: a 64-byte stack frame on sm_90); no per-thread array
//     is indexed dynamically;
//   - the XXH64 checksum runs its four accumulators on lanes 0..3.
// Why a block ahead and not a two-kernel split (a warp per block decoding sequences, a warp per
// frame executing them): the split needs a sequence buffer of up to ~43 K sequences per 128
// KiB block and a literal buffer per block in global memory for every block at once; the team
// decodes one block ahead, whose sequences (12 bytes each) fit in its chunk's mirror range
// when they average 12 bytes of output or more (the demo volume's 256 KiB chunks: ~17 k
// sequences a block, ~210 KB of the 256 KiB; a block that does not fit is decoded in turn).
// The GPU model says the serial sequence decode dominated those chunks (helper 1's chain was
// 74 % of the launch's instructions); with the second block ahead the leader's execution of
// the second block is what follows the first block's decode.
//
// Shared memory: DMC_ZSTD_WARPS_PER_BLOCK × sizeof(dmc_zstd_smem) (~10.2 KB per job: the
// Huffman decode table's 4 KiB, the job's table of the literal and match length codes that
// have extra bits, which its lanes copy from constant memory at the start) and one dmc_zstd_team
// (~1 KB: a team's tasks and sequence groups); 4 blocks of 4 warps per SM (the register limit,
// DMC_ZSTD_MIN_BLOCKS) take ~165 KiB of the 228 (a team uses two jobs' shares of its block's:
// the second for the block ahead's tables).
// Every load is checked against the job's source length and every store against its output
// length; corrupt input ends the job with a DMC_STATUS_* code.
#include "common.cuh"

#ifdef DMC_EMULATE
#ifndef __constant__
#define __constant__
#endif
#endif

#define DMC_ZSTD_MAGIC 0xFD2FB528u
#define DMC_ZSTD_BLOCK_MAX (128u * 1024u)
#define DMC_ZSTD_HUF_LOG_MAX 11
#define DMC_ZSTD_LL_LOG_MAX 9
#define DMC_ZSTD_ML_LOG_MAX 9
#define DMC_ZSTD_OF_LOG_MAX 8
#define DMC_ZSTD_LL_MAX_SYM 35
#define DMC_ZSTD_ML_MAX_SYM 52
#define DMC_ZSTD_OF_MAX_SYM 31

// Literals length codes 16..35 then match length codes 32..52 (the codes with extra bits; a
// smaller literals length code is its own baseline, a smaller match length code is 3 below it)
// as baseline | extra bits << 24: the warp's shared copy of the constant tables below, where a
// group's lanes look their sequences' baselines up (dmc_zstd_seq_group).
#define DMC_ZSTD_CODES (20 + 21)

// Per-warp tables. The Huffman weights' FSE entries pack symbol (bits 0-7), bits to read (8-15),
// baseline (16-31); the sequence tables' entries are dmc_zstd_seq_entry's; Huffman entries pack
// symbol (bits 0-7) and code length (8-15).
// A job's team (DMC_ZSTD_TEAM warps, one block; see dmc_zstd_decode), in the block's shared
// memory. The team works in rounds, one block barrier apart (dmc_team_sync): before each
// barrier the leader's lane 0 posts the next round's task (task[round & 1]: a helper reads it
// after the barrier while the leader may already write the one after); what a round's work
// wrote is read after the next barrier.
#define DMC_ZSTD_TASK_IDLE 0u
#define DMC_ZSTD_TASK_HUF 1u   // the four Huffman streams below, warp w on stream w
#define DMC_ZSTD_TASK_SEQ0 2u  // helper 1: start a block's sequences (below), decode group 0
#define DMC_ZSTD_TASK_SEQ 3u   // helper 1: decode the next group of 32 sequences
#define DMC_ZSTD_TASK_DONE 4u  // the job is done: the helpers leave
#define DMC_ZSTD_TASK_COPY 5u  // every warp: its parts of a raw block's copy (cdst, csrc, clen below)
// Or'ed into a round's task: helper 2 starts the block ahead (below) this round.
#define DMC_ZSTD_TASK_AHEAD 8u
// Or'ed into a round's task by a leader executing a block from the scratch: helper 1 loads into
// L1 what the leader's next groups will read (xp below, dmc_zstd_exec_prefetch).
#define DMC_ZSTD_TASK_XP 16u
// A group of 32 decoded sequences in memory: literals lengths, match lengths, offset values
// (lane j of the decoding warp stores sequence j of each).
#define DMC_ZSTD_GROUP_WORDS (3 * DMC_WARP_SIZE)
struct dmc_zstd_team {
    dmc_u32 task[2];
    dmc_u32 round;  // the leader's rounds so far (its lane 0's)
    // DMC_ZSTD_TASK_HUF: the streams' bytes, lengths, destinations, literal counts and (written
    // by the warp that decoded it) statuses; the Huffman code's table log (the table: the
    // job's sm->hdec)
    const dmc_u8* p[4];
    dmc_u8* dst[4];
    dmc_u32 len[4], cnt[4], st[4];
    dmc_u32 log;
    // DMC_ZSTD_TASK_SEQ0: the block's sequence bitstream, its sequences and the table state
    // (dmc_zstd_frame_state::tabs: the FSE tables are the job's sm->ll/of/ml or the second set)
    const dmc_u8* sp;
    dmc_u32 slen, nseq, tabs;
    // helper 1's output: groups of 32 sequences, two buffers (group g in g & 1), the index in
    // the group of a sequence the bitstream could not give (32: none); after the block's last
    // sequence, the bitstream's end check
    dmc_u32 seq[2][DMC_ZSTD_GROUP_WORDS];
    dmc_u32 bad[2];
    dmc_u32 end_st;
    // DMC_ZSTD_TASK_AHEAD: the next block of the frame, decoded ahead by helper 2 while the
    // leader executes this one: its sequence bitstream, sequences and table state, and where its
    // groups go (the job's sequence scratch: group g at ahead + g * DMC_ZSTD_GROUP_WORDS). Helper
    // 2 decodes one group a round (Huffman rounds aside) and posts in every round r, in
    // aprog[r & 1] (the leader reads the last round's while helper 2 writes this one's): the
    // groups done, the index in the block of a sequence the bitstream could not give (nseq:
    // none) and, once done, the bitstream's end check.
    const dmc_u8* asp;
    dmc_u32 aslen, anseq, atabs;
    dmc_u32 aprog[2][3];
    // The job's sequence scratch (dmc_zstd_decode; null: none) and its size in groups.
    dmc_u32* scratch;
    dmc_u32 scratch_groups;
    // The leader's (lane 0 writes, the warp reads after a __syncwarp): 1 + the round that
    // started helper 2 on the frame's next block (asp..atabs above); 0: none.
    dmc_u32 ahead_at;
    // DMC_ZSTD_TASK_COPY: a raw block, copied by the whole team (dmc_zstd_team_copy)
    dmc_u8* cdst;
    const dmc_u8* csrc;
    dmc_u32 clen;
    // The sequence readers' places, for helper 3's loads ahead of them (dmc_zstd_prefetch): in
    // round r helper 1 (k = 0) and helper 2 (k = 1) post in pf[r & 1][k] their bitstream's first
    // byte and the byte their reader reached in it (p null: nothing posted yet); helper 3 reads
    // the last round's. pfsink: helper 3's lanes' sums of what they loaded (kept, never read).
    struct {
        const dmc_u8* p;
        dmc_i32 at;
    } pf[2][2];
    dmc_u32 pfsink[DMC_WARP_SIZE];
    // DMC_ZSTD_TASK_XP: a leader executing a block from the scratch posts with each round
    // (xp[r & 1], as task) the next group it executes and the groups it may read (those helper 2
    // had posted done, at most the block's); before group 0's, the block's start (xs: its
    // sequences, output front and repeat offsets, its literals: lsrc null for RLE ones, lsize of
    // them). xh: helper 1's walk of the block (dmc_zstd_exec_prefetch): the group it reached,
    // the output front, literal cursor and repeat offsets there; the first group it loaded in
    // its last round and the output front there, and the front it took for the leader's. out: the job's output (set
    // before the first round). xsink: helper 1's lanes' sums of what it loaded (never read).
    struct {
        dmc_u32 g, lim;
    } xp[2];
    struct {
        const dmc_u8* lsrc;
        dmc_u32 lsize, nseq, op, rep[3];
    } xs;
    struct {
        dmc_u32 h, op, used, rep[3], tg, top, front;
    } xh;
    const dmc_u8* out;
    dmc_u32 xsink[DMC_WARP_SIZE];
};

struct dmc_zstd_smem {
    // ll, ml and of first, in this order (the sequence loop indexes them as one array)
    dmc_u32 ll[1 << DMC_ZSTD_LL_LOG_MAX];
    dmc_u32 ml[1 << DMC_ZSTD_ML_LOG_MAX];
    dmc_u32 of[1 << DMC_ZSTD_OF_LOG_MAX];
    dmc_u32 wt[64];  // FSE table of Huffman weights (accuracy log <= 6)
    // The Huffman code in canonical form (dmc_zstd_build_huffman): entry w < 16 of hrank is
    // T_w | R_w << 16, T_w the first of the 2^log code prefixes of the symbols of weight w (their
    // codes, in symbol order, take 2^(w-1) prefixes each) and R_w the index in hsym of the first
    // of them; hsym lists the symbols by weight, then symbol.
    dmc_u32 hrank[16];
    dmc_u8 hsym[256];
    // The decode table: entry i (i < 2^log) is the symbol | length << 8 of the code that the
    // log-bit prefix i starts (dmc_zstd_build_huffman; read by dmc_zstd_huf_stream's lanes).
    dmc_u16 hdec[1 << DMC_ZSTD_HUF_LOG_MAX];
    union {
        struct {
            dmc_i16 norm[64];
            dmc_u16 next[64];
        } f;                  // an FSE table build's distribution and its next-state counters
        dmc_u8 weights[256];  // Huffman weights (decoded after their FSE table is built)
    } t;
    dmc_u32 codes[DMC_ZSTD_CODES];  // length codes with extra bits (see DMC_ZSTD_CODES)
    dmc_u32 res[4];  // lane 0's results for the warp: status, bytes used, log, last symbol
    // lane 0's copy of the frame header's content size and flags (bit 0: a checksum follows,
    // bit 1: the content size is given), read after the frame's blocks (kept in registers
    // through the block loop, they spilled)
    dmc_u64 fcs;
    dmc_u32 fflags;
    struct dmc_zstd_team* tm;  // the job's team (dmc_zstd_team); null: the warp is alone
};

// Literals length and match length codes: baseline and extra bits (RFC 8878 3.1.1.3.2.1.1).
__constant__ dmc_u32 dmc_zstd_ll_base[36] = {0,  1,  2,   3,   4,   5,    6,    7,    8,    9,     10,    11,
                                             12, 13, 14,  15,  16,  18,   20,   22,   24,   28,    32,    40,
                                             48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
__constant__ dmc_u8 dmc_zstd_ll_bits[36] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  0,  0,  0,  0,  1,  1,
                                            1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
__constant__ dmc_u32 dmc_zstd_ml_base[53] = {
    3,  4,  5,  6,  7,  8,  9,  10, 11, 12,  13,  14,  15,  16,   17,   18,   19,   20,
    21, 22, 23, 24, 25, 26, 27, 28, 29, 30,  31,  32,  33,  34,   35,   37,   39,   41,
    43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539};
__constant__ dmc_u8 dmc_zstd_ml_bits[53] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1,
                                            2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
// Predefined distributions (RFC 8878 3.1.1.3.2.2).
__constant__ dmc_i16 dmc_zstd_ll_default[36] = {4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2,  2,
                                                2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1};
__constant__ dmc_i16 dmc_zstd_ml_default[53] = {1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1,  1,
                                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  1,
                                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1};
__constant__ dmc_i16 dmc_zstd_of_default[29] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1,
                                                1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1};


__device__ __forceinline__ dmc_u32 dmc_zstd_highbit(dmc_u32 x) { return 31u - (dmc_u32)__clz(x); }

// ---- Backward bit reader (FSE and Huffman bitstreams) ----
// Bits are numbered from the first byte's least significant bit; reading n bits takes bits
// [pos-n, pos) as a number (the first bit read is its most significant) and lowers pos. Bits
// below 0 read as zeros, so a reader may overrun; callers check `pos` at the end. The cache is
// two 8-byte words at 8-byte aligned addresses, `hi` (address bytes [8w, 8w+8) of the stream's
// aligned base) and `lo` (the 8 bytes before it): one aligned 8-byte load per 64 bits read.
// A word that lies wholly inside the stream is loaded at once; one that straddles the stream's
// first or last byte (at most two per stream) is assembled from bounds-checked byte loads,
// bytes outside the stream reading as zeros.
struct dmc_zbr {
    const dmc_u8* p;
    dmc_u32 len;
    dmc_u32 mis;  // the address of p modulo 8
    dmc_i32 pos;  // a block's streams are under 2^20 bits
    dmc_i32 w;    // index of `hi` among the aligned words from p - mis
    dmc_u64 hi, lo;
};

// Aligned word k (address bytes [8k, 8k+8) from p - mis) of the stream.
__device__ __forceinline__ dmc_u64 dmc_zbr_word(const dmc_zbr* r, dmc_i32 k) {
    const dmc_i32 first = 8 * k - (dmc_i32)r->mis;  // stream position of its first byte
    if (first >= 0 && first + 8 <= (dmc_i32)r->len) return *(const dmc_u64*)(r->p + first);  // aligned
    dmc_u64 v = 0;
    for (dmc_i32 q = 0; q < 8; q++) {
        const dmc_i32 i = first + q;
        if (i >= 0 && i < (dmc_i32)r->len) v |= (dmc_u64)r->p[i] << (8 * q);
    }
    return v;
}

// Starts a reader on [p, p+len): the last byte's highest set bit marks the end. False when the
// stream is empty or its last byte is zero.
__device__ __forceinline__ bool dmc_zbr_init(dmc_zbr* r, const dmc_u8* p, dmc_u32 len) {
    r->p = p;
    r->len = len;
    r->mis = (dmc_u32)((dmc_u64)p & 7u);
    r->pos = 0;
    r->w = 0;
    r->hi = 0;
    r->lo = 0;
    if (len == 0) return false;
    const dmc_u32 last = p[len - 1];
    if (last == 0) return false;
    r->pos = (dmc_i32)(len - 1) * 8 + (dmc_i32)dmc_zstd_highbit(last);
    // hi holds the bit below pos (address bit pos - 1 + 8 mis)
    r->w = (r->pos - 1 + 8 * (dmc_i32)r->mis) >> 6;
    r->hi = dmc_zbr_word(r, r->w);
    r->lo = dmc_zbr_word(r, r->w - 1);
    return true;
}

// The n (<= 32) bits below pos, without consuming them.
__device__ __forceinline__ dmc_u32 dmc_zbr_peek(dmc_zbr* r, dmc_u32 n) {
    if (r->pos <= 0 || n == 0) return 0;
    const dmc_i32 at = r->pos - (dmc_i32)n + 8 * (dmc_i32)r->mis;  // address bit of the lowest bit
    // Slide down a word at a time (a read lowers pos by at most 32, so once per read at most;
    // at >= -32 > 64 * (w - 1) ends the loop at w = 0 at the latest).
    while (at < 64 * (r->w - 1)) {
        r->w--;
        r->hi = r->lo;
        r->lo = dmc_zbr_word(r, r->w - 1);
    }
    const dmc_u32 off = (dmc_u32)(at - 64 * (r->w - 1));  // in [0, 128 - n]
    dmc_u64 v;
    if (off >= 64) v = r->hi >> (off - 64);
    else if (off == 0) v = r->lo;
    else v = (r->lo >> off) | (r->hi << (64 - off));
    return (dmc_u32)(v & ((1ull << n) - 1));
}

__device__ __forceinline__ dmc_u32 dmc_zbr_read(dmc_zbr* r, dmc_u32 n) {
    const dmc_u32 v = dmc_zbr_peek(r, n);
    r->pos -= (dmc_i32)n;
    return v;
}

// Aligned word k (address bytes [8k, 8k+8) from p - mis) of the stream [p, p+len): one load
// when it lies wholly inside the stream, else bounds-checked byte loads (bytes outside the
// stream read as zeros; at most the two words at the stream's ends).
__device__ __forceinline__ dmc_u64 dmc_zstd_word8(const dmc_u8* p, dmc_u32 len, dmc_u32 mis, dmc_i32 k) {
    const dmc_i32 first = 8 * k - (dmc_i32)mis;  // stream position of its first byte
    if (first >= 0 && first + 8 <= (dmc_i32)len) return *(const dmc_u64*)(p + first);  // aligned
    dmc_u64 v = 0;
    if (first + 8 <= 0 || first >= (dmc_i32)len) return v;  // wholly outside: no loads
    for (dmc_i32 q = 0; q < 8; q++) {
        const dmc_i32 i = first + q;
        if (i >= 0 && i < (dmc_i32)len) v |= (dmc_u64)p[i] << (8 * q);
    }
    return v;
}

// ---- FSE ----

// Reads an FSE table description (RFC 8878 4.1.1) from [p, p+avail) into sm->t.f.norm.
// Returns the status; on success *used is the bytes consumed, *log the accuracy log and
// *max_sym the last symbol described.
__device__ dmc_u32 dmc_zstd_read_ncount(dmc_zstd_smem* sm, const dmc_u8* p, dmc_u32 avail, dmc_u32 log_max,
                                        dmc_u32 sym_max, dmc_u32* used, dmc_u32* log_out,
                                        dmc_u32* max_sym) {
    // Forward bit reader: bits past `avail` read as zeros; the used size is checked at the end.
    // Two aligned 8-byte words (c0, c1: words cw and cw + 1 from p - mis, dmc_zstd_word8) hold
    // the bits of a field (n <= 10 bits), one load per 8 bytes of the description (a field's
    // 1 to 3 byte loads were ~8 % of the fixture chunk's model time).
    dmc_u64 bitpos = 0;
    const dmc_u64 total_bits = (dmc_u64)avail * 8;
    const dmc_u32 mis = (dmc_u32)((dmc_u64)p & 7u);
    dmc_i32 cw = -2;  // no words yet
    dmc_u64 c0 = 0, c1 = 0;
#define DMC_ZFWD(n, out)                                                                     \
    do {                                                                                     \
        const dmc_u64 a_ = bitpos + 8 * mis;  /* address bit from p - mis */                 \
        const dmc_i32 k_ = (dmc_i32)(a_ >> 6);                                               \
        if (k_ != cw) { /* fields move forward by at most 10 bits: usually the next word */  \
            c0 = k_ == cw + 1 ? c1 : dmc_zstd_word8(p, avail, mis, k_);                      \
            c1 = dmc_zstd_word8(p, avail, mis, k_ + 1);                                      \
            cw = k_;                                                                         \
        }                                                                                    \
        const dmc_u32 s_ = (dmc_u32)(a_ & 63u);                                              \
        const dmc_u64 v_ = s_ == 0 ? c0 : (c0 >> s_) | (c1 << (64 - s_));                    \
        (out) = (dmc_u32)v_ & ((1u << (n)) - 1u);                                            \
    } while (0)
    dmc_u32 v;
    DMC_ZFWD(4, v);
    bitpos += 4;
    const dmc_u32 log = v + 5;
    if (log > log_max) return DMC_STATUS_CORRUPT;
    dmc_i32 remaining = (1 << log) + 1;
    dmc_i32 threshold = 1 << log;
    dmc_u32 nbits = log + 1;
    dmc_u32 sym = 0;
    while (remaining > 1) {
        if (sym > sym_max) return DMC_STATUS_CORRUPT;
        const dmc_i32 maxv = (2 * threshold - 1) - remaining;
        dmc_u32 low;
        DMC_ZFWD(nbits - 1, low);
        dmc_i32 value;
        if ((dmc_i32)low < maxv) {
            value = (dmc_i32)low;
            bitpos += nbits - 1;
        } else {
            dmc_u32 full;
            DMC_ZFWD(nbits, full);
            value = (dmc_i32)full;
            if (value >= threshold) value -= maxv;
            bitpos += nbits;
        }
        const dmc_i32 count = value - 1;
        sm->t.f.norm[sym++] = (dmc_i16)count;
        remaining -= count < 0 ? -count : count;
        if (remaining < 1) return DMC_STATUS_CORRUPT;
        if (count == 0) {
            // Repeat flags: 2-bit fields, 3 means "3 more zeros and another field".
            for (;;) {
                dmc_u32 rep;
                DMC_ZFWD(2, rep);
                bitpos += 2;
                if (sym + rep > sym_max + 1) return DMC_STATUS_CORRUPT;
                for (dmc_u32 k = 0; k < rep; k++) sm->t.f.norm[sym++] = 0;
                if (rep != 3) break;
                if (bitpos > total_bits) return DMC_STATUS_CORRUPT;
            }
        }
        while (remaining < threshold) {
            nbits--;
            threshold >>= 1;
        }
        if (bitpos > total_bits) return DMC_STATUS_CORRUPT;
    }
#undef DMC_ZFWD
    if (remaining != 1 || bitpos > total_bits) return DMC_STATUS_CORRUPT;
    *used = (dmc_u32)((bitpos + 7) >> 3);
    *log_out = log;
    *max_sym = sym - 1;
    return DMC_STATUS_OK;
}

// All lanes: inclusive scans over the lanes of two values at once (one shuffle round for both).
__device__ __forceinline__ void dmc_zstd_scan2(dmc_u32* x, dmc_u32* y, dmc_u32 lane) {
    for (dmc_u32 d = 1; d < DMC_WARP_SIZE; d <<= 1) {
        const dmc_u32 a = __shfl_up_sync(0xffffffffu, *x, d);
        const dmc_u32 b = __shfl_up_sync(0xffffffffu, *y, d);
        if (lane >= d) {
            *x += a;
            *y += b;
        }
    }
}

// Lane 0: spreads the symbols of sm->t.f.norm[0..=max_sym] (sum 1 << log) over `table` (each
// cell its symbol) and sets sm->t.f.next to each symbol's first state. Returns the status. Only
// for the Huffman weights' table (64 cells at most, built by lane 0 inside the weights' decode);
// the sequence tables are spread by the whole warp (dmc_zstd_spread_warp).
__device__ dmc_u32 dmc_zstd_spread_fse(dmc_zstd_smem* sm, dmc_u32* table, dmc_u32 log, dmc_u32 max_sym) {
    const dmc_u32 size = 1u << log;
    const dmc_u32 mask = size - 1;
    dmc_u32 high = size - 1;
    for (dmc_u32 s = 0; s <= max_sym; s++) {
        if (sm->t.f.norm[s] == -1) {
            table[high] = s;
            high--;
            sm->t.f.next[s] = 1;
        } else {
            sm->t.f.next[s] = (dmc_u16)sm->t.f.norm[s];
        }
    }
    const dmc_u32 step = (size >> 1) + (size >> 3) + 3;
    dmc_u32 pos = 0;
    for (dmc_u32 s = 0; s <= max_sym; s++) {
        const dmc_i32 n = sm->t.f.norm[s];
        for (dmc_i32 i = 0; i < n; i++) {
            table[pos] = s;
            do {
                pos = (pos + step) & mask;
            } while (pos > high);
        }
    }
    return pos == 0 ? DMC_STATUS_OK : DMC_STATUS_CORRUPT;
}

// All lanes: spreads a sequence table's symbols over `table` (each cell its symbol) and sets
// sm->t.f.next to each symbol's first state, in closed form instead of lane 0's walk. Lane l
// brings the normalized counts n0 of symbol l and n1 of symbol l + 32 (0 past the last symbol,
// -1 for "less than 1"). The "less than 1" symbols take the last cells, one each in symbol order;
// the walk visits cell p_j = j * step mod size for j = 0, 1, ... (step is odd, so every cell
// once), skips those, and gives the k-th cell it keeps to the symbol whose run of counts holds k:
// the first symbol whose inclusive prefix sum of counts exceeds k, found by a binary search over
// the lanes' sums with shuffles. 32 cells a round, one store request each (step is odd, so 32
// consecutive j fall in 32 different banks). Returns the status, the same on every lane:
// corrupt when the counts do not fill the table. Ends with a __syncwarp; the caller has one
// before it (the previous table's readers are done). log >= 5.
__device__ dmc_u32 dmc_zstd_spread_warp(dmc_zstd_smem* sm, dmc_u32* table, dmc_u32 log, dmc_i32 n0, dmc_i32 n1,
                                        dmc_u32 lane) {
    const dmc_u32 size = 1u << log;
    const dmc_u32 below = (1u << lane) - 1u;
    const dmc_u32 low0 = __ballot_sync(0xffffffffu, n0 == -1);
    const dmc_u32 low1 = __ballot_sync(0xffffffffu, n1 == -1);
    const dmc_u32 n_low = (dmc_u32)(__popc(low0) + __popc(low1));
    // Inclusive prefix sums of the positive counts: e0 for symbols 0..31, e1 for 32..63.
    dmc_u32 e0 = n0 > 0 ? (dmc_u32)n0 : 0u;
    dmc_u32 e1 = n1 > 0 ? (dmc_u32)n1 : 0u;
    dmc_zstd_scan2(&e0, &e1, lane);
    e1 += __shfl_sync(0xffffffffu, e0, DMC_WARP_SIZE - 1);
    const dmc_u32 total = __shfl_sync(0xffffffffu, e1, DMC_WARP_SIZE - 1);
    if (total + n_low != size) return DMC_STATUS_CORRUPT;
    if (n0 == -1) table[size - 1 - (dmc_u32)__popc(low0 & below)] = lane;
    if (n1 == -1) table[size - 1 - (dmc_u32)__popc(low0) - (dmc_u32)__popc(low1 & below)] = lane + 32;
    sm->t.f.next[lane] = (dmc_u16)(n0 == -1 ? 1 : n0);
    sm->t.f.next[lane + 32] = (dmc_u16)(n1 == -1 ? 1 : n1);
    const dmc_u32 kept_cells = size - n_low;
    const dmc_u32 step = (size >> 1) + (size >> 3) + 3;
    dmc_u32 kept = 0;
    for (dmc_u32 j0 = 0; j0 < size; j0 += DMC_WARP_SIZE) {
        const dmc_u32 p = ((j0 + lane) * step) & (size - 1);
        const bool keep = p < kept_cells;
        const dmc_u32 ballot = __ballot_sync(0xffffffffu, keep);
        const dmc_u32 k = kept + (dmc_u32)__popc(ballot & below);
        kept += (dmc_u32)__popc(ballot);
        // The number of symbols whose run ends at or before cell k: the symbol of cell k.
        dmc_u32 sym = 0;
        for (dmc_u32 half = DMC_WARP_SIZE; half > 0; half >>= 1) {
            const dmc_u32 idx = sym + half - 1;
            const dmc_u32 a = __shfl_sync(0xffffffffu, e0, (int)(idx & (DMC_WARP_SIZE - 1)));
            const dmc_u32 b = __shfl_sync(0xffffffffu, e1, (int)(idx & (DMC_WARP_SIZE - 1)));
            if ((idx < DMC_WARP_SIZE ? a : b) <= k) sym += half;
        }
        if (keep) table[p] = sym;
    }
    __syncwarp();
    return DMC_STATUS_OK;
}

// Lane 0: builds the FSE decoding table of sm->t.f.norm[0..=max_sym] (sum 1 << log) into
// `table` (the Huffman weights' table, 64 cells at most).
__device__ dmc_u32 dmc_zstd_build_fse(dmc_zstd_smem* sm, dmc_u32* table, dmc_u32 log, dmc_u32 max_sym) {
    const dmc_u32 st = dmc_zstd_spread_fse(sm, table, log, max_sym);
    if (st != DMC_STATUS_OK) return st;
    const dmc_u32 size = 1u << log;
    for (dmc_u32 u = 0; u < size; u++) {
        const dmc_u32 s = table[u] & 0xFFu;
        const dmc_u32 nxt = sm->t.f.next[s]++;
        const dmc_u32 nb = log - dmc_zstd_highbit(nxt);
        const dmc_u32 base = (nxt << nb) - size;
        table[u] = s | (nb << 8) | (base << 16);
    }
    return DMC_STATUS_OK;
}

// A sequence table's entry (kind 0 LL, 1 OF, 2 ML) for symbol `sym` whose next state is `base`
// plus `nb` bits: the baseline in bits 0-8, nb in bits 11-15, the symbol in bits 16-23 and the
// bits a sequence reads for it — the symbol's extra bits (the offset code itself for OF) and nb
// — in bits 25-31. The fields are placed so that the sum of a sequence's three entries holds
// the sums of each field: its baselines (at most 3 x 511, bits 0-10), its state updates' bits
// (at most 9 + 9 + 8, bits 11-15), its symbols (at most 35 + 31 + 52, bits 16-23) and all the
// bits it reads (at most 25 + 39 + 25, bits 25-31: one shift of the sum) — what the sequence
// loop reads with one add (dmc_zstd_seq_group).
__device__ __forceinline__ dmc_u32 dmc_zstd_seq_entry(dmc_u32 kind, dmc_u32 sym, dmc_u32 nb, dmc_u32 base) {
    const dmc_u32 x = kind == 1 ? sym : (kind == 0 ? (dmc_u32)dmc_zstd_ll_bits[sym] : (dmc_u32)dmc_zstd_ml_bits[sym]);
    return base | (nb << 11) | (sym << 16) | ((x + nb) << 25);
}
#define DMC_ZSTD_ENTRY_BASE(e) ((e) & 511u)
#define DMC_ZSTD_ENTRY_NB(e) (((e) >> 11) & 31u)
#define DMC_ZSTD_ENTRY_SYM(e) (((e) >> 16) & 255u)
#define DMC_ZSTD_ENTRY_BITS(e) ((e) >> 25)

// All lanes: the states of a spread sequence table of `kind` (dmc_zstd_spread_warp, published
// by a __syncwarp; each cell its symbol), 32 cells per round: the k-th cell of symbol s in cell
// order gets next[s] + k, so a lane counts the lanes before it holding the same symbol
// (__match_any_sync) and the last of them moves next[s] on; four shared requests per 32 cells
// (lane 0 alone spent four per cell). Each cell becomes its dmc_zstd_seq_entry. log >= 5.
__device__ void dmc_zstd_fse_states(dmc_zstd_smem* sm, dmc_u32* table, dmc_u32 kind, dmc_u32 log, dmc_u32 lane) {
    const dmc_u32 size = 1u << log;
    for (dmc_u32 u = lane; u < size; u += DMC_WARP_SIZE) {
        const dmc_u32 s = table[u] & 0xFFu;
        const dmc_u32 peers = __match_any_sync(0xffffffffu, s);
        const dmc_u32 nxt = sm->t.f.next[s] + (dmc_u32)__popc(peers & ((1u << lane) - 1u));
        __syncwarp();  // every lane read next[s] before it moves on
        if ((peers >> lane) == 1u) sm->t.f.next[s] = (dmc_u16)(nxt + 1);  // the group's last lane
        const dmc_u32 nb = log - dmc_zstd_highbit(nxt);
        table[u] = dmc_zstd_seq_entry(kind, s, nb, (nxt << nb) - size);
        __syncwarp();
    }
}

// ---- Huffman ----

// Lane 0: reads the weights of a Huffman tree description at [p, p+avail) into sm->t.weights.
// Returns the status; *used bytes consumed, *n_out the weights described (the last one is
// implied; dmc_zstd_build_huffman completes it).
__device__ dmc_u32 dmc_zstd_read_weights(dmc_zstd_smem* sm, const dmc_u8* p, dmc_u32 avail, dmc_u32* used,
                                         dmc_u32* n_out) {
    if (avail < 1) return DMC_STATUS_CORRUPT;
    const dmc_u32 hb = p[0];
    dmc_u32 n = 0;  // weights described (the last one is implied)
    if (hb < 128) {
        if (hb == 0 || hb > avail - 1) return DMC_STATUS_CORRUPT;
        dmc_u32 nc_used = 0, wlog = 0, wmax = 0;
        dmc_u32 st = dmc_zstd_read_ncount(sm, p + 1, hb, 6, 12, &nc_used, &wlog, &wmax);
        if (st != DMC_STATUS_OK) return st;
        st = dmc_zstd_build_fse(sm, sm->wt, wlog, wmax);
        if (st != DMC_STATUS_OK) return st;
        if (nc_used >= hb) return DMC_STATUS_CORRUPT;
        dmc_zbr r;
        if (!dmc_zbr_init(&r, p + 1 + nc_used, hb - nc_used)) return DMC_STATUS_CORRUPT;
        dmc_u32 s1 = dmc_zbr_read(&r, wlog);
        dmc_u32 s2 = dmc_zbr_read(&r, wlog);
        // Two interleaved states; when an update overruns the stream the other state's symbol
        // is the last one.
        for (;;) {
            if (n >= 255) return DMC_STATUS_CORRUPT;
            dmc_u32 e = sm->wt[s1];
            sm->t.weights[n++] = (dmc_u8)(e & 0xFF);
            s1 = (e >> 16) + dmc_zbr_read(&r, (e >> 8) & 0xFF);
            if (r.pos < 0) {
                if (n >= 255) return DMC_STATUS_CORRUPT;
                sm->t.weights[n++] = (dmc_u8)(sm->wt[s2] & 0xFF);
                break;
            }
            if (n >= 255) return DMC_STATUS_CORRUPT;
            e = sm->wt[s2];
            sm->t.weights[n++] = (dmc_u8)(e & 0xFF);
            s2 = (e >> 16) + dmc_zbr_read(&r, (e >> 8) & 0xFF);
            if (r.pos < 0) {
                if (n >= 255) return DMC_STATUS_CORRUPT;
                sm->t.weights[n++] = (dmc_u8)(sm->wt[s1] & 0xFF);
                break;
            }
        }
        *used = 1 + hb;
    } else {
        n = hb - 127;
        const dmc_u32 bytes = (n + 1) / 2;
        if (bytes > avail - 1) return DMC_STATUS_CORRUPT;
        for (dmc_u32 i = 0; i < n; i++) {
            const dmc_u32 b = p[1 + i / 2];
            sm->t.weights[i] = (dmc_u8)((i & 1) ? (b & 15) : (b >> 4));
        }
        *used = 1 + bytes;
    }
    *n_out = n;
    return DMC_STATUS_OK;
}

// All lanes: the canonical Huffman code (sm->hrank, sm->hsym) from the n weights in
// sm->t.weights (lane 0 wrote them, the warp synchronised since) and the implied last one. Lane l
// keeps the weights of symbols l + 32 j (j < 8) as 4-bit fields of one register; the sum of
// 2^(w-1) is a warp reduction. Codes go in order of increasing weight, symbols in natural order
// within a weight, so the 2^log prefixes of log bits fall into one range per weight w,
// [T_w, T_w+1), 2^(w-1) prefixes per symbol: a ballot per weight and 32 symbols counts the
// symbols of each weight (lane w), a warp scan gives T_w and R_w, and the same ballots place
// each symbol in hsym, one store request per 32 symbols (the table of 2^log entries it replaces
// took a store request per symbol, and its lookups conflicted: dmc_zstd_huf_stream). Ends with
// a __syncwarp that publishes both tables. Returns the status (the same in every lane); *log_out
// the maximum code length.
__device__ dmc_u32 dmc_zstd_build_huffman(dmc_zstd_smem* sm, dmc_u32 n, dmc_u32* log_out, dmc_u32 lane) {
    dmc_u32 pk = 0, sum = 0;
    bool bad = false;
    DMC_UNROLL
    for (dmc_u32 j = 0; j < 8; j++) {
        const dmc_u32 s = lane + DMC_WARP_SIZE * j;
        const dmc_u32 w = s < n ? sm->t.weights[s] : 0u;
        if (w > DMC_ZSTD_HUF_LOG_MAX) bad = true;
        else if (w) sum += 1u << (w - 1);
        pk |= (w & 15u) << (4 * j);
    }
    for (dmc_u32 d = 1; d < DMC_WARP_SIZE; d <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, (int)d);
    if (__any_sync(0xffffffffu, bad) || sum == 0) return DMC_STATUS_CORRUPT;
    // The implied last weight completes the sum of 2^(w-1) to a power of two.
    const dmc_u32 log = dmc_zstd_highbit(sum) + 1;
    if (log > DMC_ZSTD_HUF_LOG_MAX) return DMC_STATUS_CORRUPT;
    const dmc_u32 rest = (1u << log) - sum;
    if (rest & (rest - 1)) return DMC_STATUS_CORRUPT;
    if (lane == (n & 31u)) pk |= (dmc_zstd_highbit(rest) + 1) << (4 * (n >> 5));  // n <= 255
    const dmc_u32 nsym = n + 1;
    // Lane w: the symbols of weight w (1 <= w <= log; the other lanes count none).
    dmc_u32 cnt = 0;
    for (dmc_u32 j = 0; DMC_WARP_SIZE * j < nsym; j++) {
        const dmc_u32 wj = lane + DMC_WARP_SIZE * j < nsym ? (pk >> (4 * j)) & 15u : 0u;
        for (dmc_u32 w = 1; w <= log; w++) {
            const dmc_u32 m = __ballot_sync(0xffffffffu, wj == w);
            if (lane == w) cnt += (dmc_u32)__popc(m);
        }
    }
    // An exclusive warp scan of cnt << (w-1) (T, bits 0-15) and cnt (R, bits 16-24): lane w
    // gets T_w | R_w << 16 (the lanes above log T = 2^log, past every prefix).
    const dmc_u32 own = lane >= 1 && lane <= log ? (cnt << 16) | (cnt << (lane - 1)) : 0u;
    dmc_u32 incl = own;
    for (dmc_u32 d = 1; d < DMC_WARP_SIZE; d <<= 1) {
        const dmc_u32 t = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += t;
    }
    dmc_u32 run = incl - own;  // lane w: T_w | R_w << 16, then R_w moves on as symbols are placed
    if ((__shfl_sync(0xffffffffu, incl, DMC_WARP_SIZE - 1) & 0xFFFFu) != (1u << log)) return DMC_STATUS_CORRUPT;
    if (lane < 16) sm->hrank[lane] = run;
    for (dmc_u32 j = 0; DMC_WARP_SIZE * j < nsym; j++) {
        const dmc_u32 s = lane + DMC_WARP_SIZE * j;
        const dmc_u32 wj = s < nsym ? (pk >> (4 * j)) & 15u : 0u;
        const dmc_u32 base = __shfl_sync(0xffffffffu, run, (int)wj) >> 16;
        dmc_u32 rank = 0;
        for (dmc_u32 w = 1; w <= log; w++) {
            const dmc_u32 m = __ballot_sync(0xffffffffu, wj == w);
            if (wj == w) rank = (dmc_u32)__popc(m & ((1u << lane) - 1u));
            if (lane == w) run += (dmc_u32)__popc(m) << 16;
        }
        if (wj != 0) sm->hsym[base + rank] = (dmc_u8)s;
    }
    __syncwarp();  // hrank and hsym are visible to every lane
    // The decode table, 32 entries per round: entry i's weight w is the last T_w <= i (a binary
    // search over lanes 0..15, which hold T_w | R_w << 16), its symbol the (i - T_w) >> (w-1)-th
    // of weight w in hsym, its length log + 1 - w.
    const dmc_u32 hr = sm->hrank[lane & 15u];
    for (dmc_u32 i0 = 0; i0 < (1u << log); i0 += DMC_WARP_SIZE) {  // uniform: the shuffles need every lane
        const dmc_u32 i = i0 + lane;
        dmc_u32 w = 0;
        DMC_UNROLL
        for (dmc_u32 step = 8; step > 0; step >>= 1) {
            const dmc_u32 t = __shfl_sync(0xffffffffu, hr, (int)(w + step));
            if ((t & 0xFFFFu) <= i) w += step;
        }
        const dmc_u32 h = __shfl_sync(0xffffffffu, hr, (int)w);
        if (i < (1u << log)) sm->hdec[i] = (dmc_u16)(sm->hsym[(h >> 16) + ((i - (h & 0xFFFFu)) >> (w - 1))] | ((log + 1 - w) << 8));
    }
    // Publishes the table: every lane of dmc_zstd_huf_stream reads entries other lanes wrote, and
    // the shuffles and ballots above order no shared memory (compute-sanitizer's racecheck
    // reported the earlier tables on an H200 without such a barrier, issue 28).
    __syncwarp();
    *log_out = log;
    return DMC_STATUS_OK;
}

// ---- Huffman literal streams: one segment per lane ----
// A stream is a chain of codes read backwards from its top bit, so its decode looks serial. But
// Huffman codes resynchronise: a decoder started at an arbitrary bit soon lands on a code
// boundary of the real chain, and from there on it follows the real chain (Klein and Wiseman
// on the self-synchronisation of Huffman codes; Weißenberger and Schmidt, "Massively Parallel
// Huffman Decoding on GPUs", ICPP 2018, build a GPU decoder on it). So the warp cuts the stream
// into up to 32 segments of bits and gives one to each lane:
//   1. every lane decodes its segment from its top bit (a guess: the real chain may start a few
//      bits lower), counting the codes that start inside it and noting its exit, the first code
//      boundary at or below the segment's bottom (dmc_zstd_huf_run);
//   2. the real chain enters segment i at lane i - 1's exit. A lane whose guess was not that
//      bit walks the real chain from there in lockstep with its guessed chain until the two
//      meet (positions equal: from there on they are one chain, so its count and exit stand,
//      corrected by the codes before the meeting) or its segment ends (new count and exit);
//      repeated while any lane's entry moved (each round makes at least one more lane final,
//      so at most 32 rounds, one or two in practice: chains meet within a few codes);
//   3. a warp scan of the counts places each segment's literals, and every lane decodes its
//      segment again from its real entry, storing its literals: aligned 4-byte stores, the
//      bytes of the partial words at either end of its range one at a time.
// Each lane reads its bits through a window of three aligned 8-byte words, the lowest loaded a
// word ahead of use (dmc_zlr), and looks each code up in the warp's decode table of 2^log
// entries in shared memory (symbol | length << 8: dmc_zstd_build_huffman fills sm->hdec). A
// lane's steps are a few ALU operations and one shared load, without shuffles: the warp
// decodes 32 codes in the time one code takes (the whole-warp decode this replaces found the
// codes of 32 bits per round, ~5 literals, with ~180 instructions of shuffles).

// A lane's backward reader over the stream [p, p+len) (bits as dmc_zbr's): a 64-bit container
// whose bit nb - 1 is the bit just below the read position (33 <= nb <= 64 between reads), and
// the next lower aligned 4-byte word, loaded one word ahead of use so that its latency passes
// while the container's bits are decoded. Words are counted in 4-byte steps from p - mis; bytes
// outside the stream read as zeros.
struct dmc_zlr {
    const dmc_u8* p;
    dmc_u32 len, mis;
    dmc_i32 k;   // the aligned word `nx` holds
    dmc_u32 nx;  // word k
    dmc_u32 nb;  // valid bits of `c`
    dmc_u64 c;
};

// (Its words: dmc_word4, common.cuh.)

// Places the reader for reads below bit `pos` (>= 0): the container holds the two words up to
// the one with bit pos - 1.
__device__ __forceinline__ void dmc_zlr_seek(dmc_zlr* r, dmc_i32 pos) {
    const dmc_i32 a = pos + 8 * (dmc_i32)r->mis;  // address bit of pos
    const dmc_i32 top = (a - 1) >> 5;               // the word holding bit a - 1 (floor)
    r->c = ((dmc_u64)dmc_word4(r->p, r->len, r->mis, top) << 32) |
           dmc_word4(r->p, r->len, r->mis, top - 1);
    r->nb = (dmc_u32)(a - 32 * (top - 1));  // in [33, 64]
    r->k = top - 2;
    r->nx = dmc_word4(r->p, r->len, r->mis, r->k);
}

// The n (<= 32) bits below the read position, not consumed.
__device__ __forceinline__ dmc_u32 dmc_zlr_peek(const dmc_zlr* r, dmc_u32 n) {
    return (dmc_u32)(r->c >> (r->nb - n)) & ((1u << n) - 1u);
}

// Refills the container (32 or fewer bits left) from the word loaded ahead, and loads the next.
__device__ __forceinline__ void dmc_zlr_refill(dmc_zlr* r) {
    r->c = (r->c << 32) | r->nx;
    r->nb += 32u;
    r->k--;
    r->nx = dmc_word4(r->p, r->len, r->mis, r->k);
}
// Consumes n bits (<= 31, which the container always holds; or as many as it holds: the
// caller checked), refilling when 32 or fewer bits are left. (A branch-free form,
// selects and a predicated load, measured 8 % slower on an H200:
// benches/results/gpu-h200-2026-11-28-b2a1de2/.)
__device__ __forceinline__ void dmc_zlr_skip(dmc_zlr* r, dmc_u32 n) {
    r->nb -= n;
    if (r->nb <= 32u) dmc_zlr_refill(r);
}

// Reads n (<= 31) bits (n = 0: none, 0) and lowers *pos by n: the sequence bitstream's reads.
// Without a branch for n = 0: the container shifts right by nb - n in two steps (each under 64),
// and the mask of 0 bits clears it.
__device__ __forceinline__ dmc_u32 dmc_zstd_seq_read(dmc_zlr* r, dmc_i32* pos, dmc_u32 n) {
    const dmc_u32 v = (dmc_u32)((r->c >> (r->nb - n - 1u)) >> 1) & ((1u << n) - 1u);
    dmc_zlr_skip(r, n);
    *pos -= (dmc_i32)n;
    return v;
}

// The code length of the code starting at bit `pos` (its top bit pos - 1), read without a
// reader's state (two word loads; the lockstep walk of step 2 touches words step 1 loaded).
__device__ __forceinline__ dmc_u32 dmc_zstd_huf_len_at(const dmc_zstd_smem* sm, const dmc_u8* p, dmc_u32 len,
                                                      dmc_u32 mis, dmc_u32 log, dmc_i32 pos) {
    const dmc_i32 at = pos - (dmc_i32)log + 8 * (dmc_i32)mis;  // address bit of the lowest bit
    const dmc_i32 q = at >> 5;                                   // floor
    const dmc_u64 v = ((dmc_u64)dmc_word4(p, len, mis, q + 1) << 32) | dmc_word4(p, len, mis, q);
    return (dmc_u32)sm->hdec[(dmc_u32)(v >> (at - 32 * q)) & ((1u << log) - 1u)] >> 8;
}

// Decodes from bit `pos` (the reader placed there) while the code start is above `lo`: the
// number of codes, and *exit the first code start at or below lo. With `out`, decodes n_out
// codes instead and stores their literals to out[0, n_out) (the caller checked the range).
__device__ __forceinline__ dmc_u32 dmc_zstd_huf_run(const dmc_zstd_smem* sm, dmc_zlr* r, dmc_u32 log, dmc_i32 pos,
                                                   dmc_i32 lo, dmc_i32* exit, dmc_u8* out, dmc_u32 n_out) {
    dmc_u32 c = 0;
    if (out == nullptr) {
        while (pos > lo) {
            const dmc_u32 n = sm->hdec[dmc_zlr_peek(r, log)] >> 8;
            dmc_zlr_skip(r, n);
            pos -= (dmc_i32)n;
            c++;
        }
    } else {
        // bytes [head, body_end) go out as aligned 4-byte words, the rest one at a time
        const dmc_u32 head = dmc_min_u32((4u - (dmc_u32)((dmc_u64)out & 3u)) & 3u, n_out);
        const dmc_u32 body_end = n_out - ((n_out - head) & 3u);
        dmc_u32 acc = 0;
        for (; c < n_out; c++) {
            const dmc_u32 e = sm->hdec[dmc_zlr_peek(r, log)];
            dmc_zlr_skip(r, e >> 8);
            pos -= (dmc_i32)(e >> 8);
            if (c < head || c >= body_end) {
                out[c] = (dmc_u8)e;
            } else {
                const dmc_u32 sh = 8u * ((c - head) & 3u);
                acc |= (e & 0xFFu) << sh;
                if (sh == 24u) {
                    *(dmc_u32*)(out + c - 3) = acc;  // aligned: out + head is
                    acc = 0;
                }
            }
        }
    }
    *exit = pos;
    return c;
}

// All 32 lanes: decodes `count` Huffman-coded literals of the backward stream [p, p+len) into
// out (the decode table sm->hdec of the code of `log` bits), one segment of the stream per lane
// (above). Returns the status, the same in every lane: a code reaching below the stream's first
// bit, a stream not ending exactly at its first bit, or a stream of other than `count` codes is
// corrupt (a serial decode's statuses).
__device__ __noinline__ dmc_u32 dmc_zstd_huf_stream(const dmc_zstd_smem* sm, dmc_u32 log, const dmc_u8* p,
                                                    dmc_u32 len, dmc_u8* out, dmc_u32 count, dmc_u32 lane) {
    if (len == 0) return DMC_STATUS_CORRUPT;
    const dmc_u32 last = p[len - 1];
    if (last == 0) return DMC_STATUS_CORRUPT;
    const dmc_i32 top = (dmc_i32)(len - 1) * 8 + (dmc_i32)dmc_zstd_highbit(last);
    // Segments of at least 128 bits (resynchronisation takes a few codes of at most 11 bits),
    // at most 32; lane i's is the bits (lo, hi].
    const dmc_u32 nseg = dmc_min_u32(DMC_WARP_SIZE, top >= 256 ? (dmc_u32)top / 128u : 1u);
    const dmc_i32 seg = (top + (dmc_i32)nseg - 1) / (dmc_i32)nseg;
    const bool active = lane < nseg;
    const dmc_i32 hi = active ? top - (dmc_i32)lane * seg : 0;
    const dmc_i32 lo = active ? (top - (dmc_i32)(lane + 1) * seg > 0 ? top - (dmc_i32)(lane + 1) * seg : 0) : 0;
    dmc_zlr r;
    r.p = p;
    r.len = len;
    r.mis = (dmc_u32)((dmc_u64)p & 3u);
    // 1. the guessed chain from the segment's top
    dmc_i32 start = hi, exit = hi;
    dmc_u32 cnt = 0;
    if (active) {
        dmc_zlr_seek(&r, hi);
        cnt = dmc_zstd_huf_run(sm, &r, log, hi, lo, &exit, nullptr, 0);
    }
    // 2. the real chain's entry: the previous lane's exit (lane 0's is the stream's top)
    for (;;) {
        const dmc_i32 prev = __shfl_up_sync(0xffffffffu, exit, 1);
        const dmc_i32 entry = lane == 0 ? top : prev;
        const bool moved = active && entry != start;
        if (!__any_sync(0xffffffffu, moved)) break;
        if (moved) {
            // a: the real chain, b: the guessed one (its codes from `start`: cnt, to `exit`)
            dmc_i32 a = entry, b = start;
            dmc_u32 ca = 0, cb = 0;
            bool met = false;
            while (a > lo) {
                if (a == b) {
                    met = true;
                    break;
                }
                if (a > b) {
                    a -= (dmc_i32)dmc_zstd_huf_len_at(sm, p, len, r.mis, log, a);
                    ca++;
                } else {
                    b -= (dmc_i32)dmc_zstd_huf_len_at(sm, p, len, r.mis, log, b);
                    cb++;
                }
            }
            if (met) {
                cnt = ca + (cnt - cb);
            } else {
                cnt = ca;
                exit = a;
            }
            start = entry;
        }
    }
    // The real chain must end exactly at bit 0 with `count` codes.
    dmc_u32 off = cnt;  // inclusive scan of the counts
    for (dmc_u32 d = 1; d < DMC_WARP_SIZE; d <<= 1) {
        const dmc_u32 t = __shfl_up_sync(0xffffffffu, off, d);
        if (lane >= d) off += t;
    }
    const dmc_u32 total = __shfl_sync(0xffffffffu, off, DMC_WARP_SIZE - 1);
    const dmc_i32 end = __shfl_sync(0xffffffffu, exit, (int)(nseg - 1));
    if (total != count || end != 0) return DMC_STATUS_CORRUPT;
    // 3. the literals, from each segment's real entry
    if (active && cnt > 0) {
        dmc_zlr_seek(&r, start);
        dmc_i32 e;
        dmc_zstd_huf_run(sm, &r, log, start, lo, &e, out + (off - cnt), cnt);
    }
    return DMC_STATUS_OK;
}

// ---- Copies (all 32 lanes) ----

// Copies and fills of this many bytes or more use aligned 4-byte stores (dmc_warp_copy_wide,
// dmc_zstd_fill_wide); shorter ones cost fewer requests one byte per lane.
#define DMC_ZSTD_WIDE_MIN 64u
// Matches that overlap their source (runs) this long or longer leave the short-sequence batch
// for dmc_zstd_match; shorter ones stay (a batch resolves their bytes with the batch's others).
#define DMC_ZSTD_RUN_MIN 128u

// Matches this long or longer that do not overlap their source go in dmc_lz_match_copy's rounds
// of 16-byte loads (one load request per 496 bytes, a call: dmc_zstd_far_match); shorter ones
// with dmc_warp_copy_wide's 4-byte words, inline (a call for a round or two's copy would cost
// more than it saves).
#define DMC_ZSTD_FAR_MIN 256u

// Match copy: out[op..op+len) = the bytes `dist` back, overlap-safe (byte j comes from
// op-dist+(j mod dist), always before op). The caller synchronised the warp first.
// A long match that does not overlap its source (dist >= len) goes in dmc_lz_match_copy's rounds
// of aligned 16-byte loads and stores (one load request per 496 bytes, each lane's word shifted
// together from its own and the next lane's; dmc_warp_copy_wide's 4-byte words took four per
// 512 bytes). A long match that overlaps its source (dist < len: a run, e.g. a label image's constant
// regions at distance 2 or 4) with a period under DMC_LZ_PATTERN_DIST goes through
// dmc_lz_match_copy's pattern path (a call: dmc_zstd_run_match; periods of 1, 2 and 4 bytes
// built from one 4-byte word): the pattern is loaded once into a word per lane and the run
// stored as aligned 16-byte words without further loads. A longer period grows by doubling: the
// bytes [op - dist, op + w) repeat with period dist, so the next min(w + dist, len - w) bytes are
// a copy of the ones w + dist back, which do not overlap them: disjoint wide copies of dist,
// 2 dist, 4 dist, ... bytes (dmc_warp_copy_wide, two words per lane and round: four spilled the
// kernel's registers here), a __syncwarp between
// (each reads what the last one wrote). One byte per lane and round took len / 32 rounds, each
// waiting for its load.
// The far copy is a call: inlined in the sequence loop (the kernel is at its bound of 128
// registers) ptxas spilled 20 bytes of the loop's state on sm_80.
__device__ __noinline__ void dmc_zstd_far_match(dmc_u8* out, dmc_u32 op, dmc_u32 dist, dmc_u32 len, dmc_u32 lane) {
    dmc_lz_match_copy(out, op, dist, len, lane, false);
}

// A long match that overlaps its source with a period under DMC_LZ_PATTERN_DIST (a run): the
// pattern path of dmc_lz_match_copy, with its short-period fill (a period of 1, 2 or 4 bytes,
// a label image's runs, from one 4-byte word: 4 shuffles where the general pattern takes 16
// and a modulo a lane). A call, as dmc_zstd_far_match: inlined in the sequence loop at the
// kernel's 128 registers the short-period fill spilled.
__device__ __noinline__ void dmc_zstd_run_match(dmc_u8* out, dmc_u32 op, dmc_u32 dist, dmc_u32 len, dmc_u32 lane) {
    dmc_lz_match_copy(out, op, dist, len, lane, true);
}

__device__ __forceinline__ void dmc_zstd_match(dmc_u8* out, dmc_u32 op, dmc_u32 dist, dmc_u32 len, dmc_u32 lane) {
    if (len >= DMC_ZSTD_WIDE_MIN) {
        if (dist >= len) {
            dmc_zstd_far_match(out, op, dist, len, lane);
            return;
        }
        if (dist < DMC_LZ_PATTERN_DIST) {
            dmc_zstd_run_match(out, op, dist, len, lane);
            return;
        }
        for (dmc_u32 w = 0; w < len;) {
            const dmc_u32 m = dmc_min_u32(w + dist, len - w);
            dmc_warp_copy_wide<2>(out + op + w, out + op + w - (w + dist), m, lane);
            w += m;
            __syncwarp();
        }
        return;
    }
    const dmc_u32 base = op - dist;
    for (dmc_u32 j = lane; j < len; j += DMC_WARP_SIZE) {
        const dmc_u32 k = j < dist ? j : j % dist;
        out[op + j] = out[base + k];
    }
}

// ---- A team leader's ring of its latest output ----
// A team's block has four dmc_zstd_smem, of which the team uses two (the job's and its second
// table set, dmc_zstd_seq_set): the leader keeps its latest DMC_ZSTD_RING bytes of output in the
// other two (dmc_ring, common.cuh: every byte its copies store also goes to ring slot (its
// address mod DMC_ZSTD_RING), and a match byte the ring still holds is read from there, a
// shared-memory load, where the output stored moments before is an L2 access: a label image's
// matches copy the rows just written, 2-8 KiB back). The ring mirrors every output byte of a
// frame from dmc_zstd_frame_state::ring_lo on; a byte before it (one of the copies that do not
// mirror: see ring_lo) is read from memory. A warp alone has no ring (null).
typedef dmc_ring<true, DMC_ZSTD_RING> dmc_zstd_ring;
__device__ __forceinline__ dmc_u8* dmc_zstd_ring_of(dmc_zstd_smem* sm) {
    return (dmc_u8*)(((dmc_u64)(sm + 2) + 15u) & ~(dmc_u64)15u);  // 16-byte aligned (dmc_ring)
}
static_assert(DMC_ZSTD_WARPS_PER_BLOCK == 4 && 2 * sizeof(dmc_zstd_smem) >= DMC_ZSTD_RING + 15,
              "a team block's third and fourth dmc_zstd_smem hold the leader's ring");

// A match copied as dmc_zstd_match, every byte also into the ring, its source bytes read from it
// by dmc_lz_match_copy's rules (the source lies at or after ring_lo: the caller checked). A call,
// as dmc_zstd_far_match.
__device__ __noinline__ void dmc_zstd_ring_match(dmc_u8* out, dmc_u32 op, dmc_u32 dist, dmc_u32 len, dmc_u32 lane,
                                                 dmc_u8* rb) {
    dmc_lz_match_copy(out, op, dist, len, lane, true, dmc_zstd_ring{rb});
}

// A block's last literals, when more than this, do not go into the ring (it restarts after
// them: dmc_zstd_frame_state::ring_lo): a byte per lane a round into the ring, they would cost a
// literal-heavy block (a smooth field's) more than the next block's few matches gain.
#define DMC_ZSTD_RING_LITS_MAX 1024u

// Ring slots of out[at, at + n), from the n bytes at `from` (which hold them; the last
// DMC_ZSTD_RING only: the earlier ones' slots are those bytes' too), one byte per lane a round.
// The caller ordered the slots' earlier accesses (a __syncwarp) and orders these writes before
// the next reads.
__device__ __forceinline__ void dmc_zstd_ring_fill(dmc_u8* rb, const dmc_u8* at, const dmc_u8* from, dmc_u32 n,
                                                   dmc_u32 lane) {
    const dmc_u32 k0 = n > DMC_ZSTD_RING ? n - DMC_ZSTD_RING : 0u;
    for (dmc_u32 j = k0 + lane; j < n; j += DMC_WARP_SIZE) *dmc_zstd_ring{rb}.at(at + j) = from[j];
}

// All lanes: d[0, n) = v, aligned 4-byte stores for the aligned words.
__device__ __forceinline__ void dmc_zstd_fill_wide(dmc_u8* d, dmc_u8 v, dmc_u32 n, dmc_u32 lane) {
    const dmc_u32 head = dmc_min_u32((4u - (dmc_u32)((dmc_u64)d & 3u)) & 3u, n);
    const dmc_u32 nw = (n - head) / 4;
    const dmc_u32 tail = n - head - 4 * nw;
    if (lane < head + tail) d[lane < head ? lane : n - tail + (lane - head)] = v;
    dmc_u32* dw = (dmc_u32*)(d + head);
    const dmc_u32 w = 0x01010101u * v;
    for (dmc_u32 k = lane; k < nw; k += DMC_WARP_SIZE) dw[k] = w;
}

// Literal source of a block: raw bytes in the input, one RLE byte, or Huffman-decoded bytes in
// the output's tail.
struct dmc_zstd_lits {
    const dmc_u8* src;  // raw: input bytes; huffman: out + tail position
    dmc_u32 size;       // regenerated size
    dmc_u32 used;       // literals consumed so far
    dmc_u32 tail;       // huffman: position of the literals in the output; else 0
    dmc_u8 rle;
    dmc_u8 kind;  // 0 raw, 1 rle, 2 in the output's tail
};

// Copies the next n literals to out[op..). In-tail literals may overlap the target when the
// front is close behind them (the target is always at or before the source): then the copy
// goes in rounds of 128 bytes, each round's loads ordered before its stores, and not at all when
// the front has reached them (target = source: a block's last literals, when the block's
// matches are all behind; for a block of literals with few matches, nearly the whole block).
// `wide`: long copies with aligned 4-byte stores (a constant at every call site). With a ring
// (rb, a team leader's: dmc_zstd_ring_of) the bytes also go to it, from the literal source the
// copy has just read (the literals' L1 lines) or an RLE byte as it is; literals copied in rounds
// do not (a byte per lane a round into the ring cost a smooth field's one-block chunks, whose
// literals run close behind the front, more than it saved): *ring_lo moves past them. Literals
// already in place are not mirrored: they end the job's output (the front reaches the tail's
// literals only at out_len, and a sequence's match, 3 bytes or more, may not reach them), so
// nothing after them reads them.
__device__ __forceinline__ void dmc_zstd_copy_lits(dmc_u8* out, dmc_u32 op, dmc_zstd_lits* L, dmc_u32 n,
                                                   dmc_u32 lane, bool wide, dmc_u8* rb, dmc_u32* ring_lo) {
    if (L->kind == 1) {
        if (wide && n >= DMC_ZSTD_WIDE_MIN) {
            dmc_zstd_fill_wide(out + op, L->rle, n, lane);
        } else {
            for (dmc_u32 j = lane; j < n; j += DMC_WARP_SIZE) out[op + j] = L->rle;
        }
        if (rb != nullptr)
            for (dmc_u32 j = (n > DMC_ZSTD_RING ? n - DMC_ZSTD_RING : 0u) + lane; j < n; j += DMC_WARP_SIZE)
                *dmc_zstd_ring{rb}.at(out + op + j) = L->rle;
    } else if (L->kind == 0 || L->tail + L->used - op >= n) {
        const dmc_u8* s = L->src + L->used;
        if (wide && n >= DMC_ZSTD_WIDE_MIN) {
            dmc_warp_copy_long(out + op, s, n, lane);
        } else {
            for (dmc_u32 j = lane; j < n; j += DMC_WARP_SIZE) out[op + j] = s[j];
        }
        if (rb != nullptr) dmc_zstd_ring_fill(rb, out + op, s, n, lane);
    } else if (L->tail + L->used != op) {
        // rounds of 128 bytes, 4 per lane: every load of a round before any of its stores (a
        // store reaches only source bytes this round or an earlier one loaded; 8 per lane
        // spilled the kernel's registers)
        const dmc_u8* s = L->src + L->used;
        for (dmc_u32 j0 = 0; j0 < n; j0 += 4 * DMC_WARP_SIZE) {
            dmc_u8 v[4];
            DMC_UNROLL
            for (dmc_u32 b = 0; b < 4; b++) {
                const dmc_u32 j = j0 + DMC_WARP_SIZE * b + lane;
                v[b] = j < n ? s[j] : 0;
            }
            __syncwarp();
            DMC_UNROLL
            for (dmc_u32 b = 0; b < 4; b++) {
                const dmc_u32 j = j0 + DMC_WARP_SIZE * b + lane;
                if (j < n) out[op + j] = v[b];
            }
        }
        if (rb != nullptr) *ring_lo = op + n;  // not mirrored: the ring restarts after them
    }  // else the literals are already in place (the front reached them: a block's last literals)
    L->used += n;
}

// A batch of up to 32 short sequences in one pass: lane k holds sequence k's literals length
// (under 64) | match length << 8 in `blen`, its offset in `boff`, its output start in `start` and
// its first literal's index in `lu` (lanes k >= nb: ignored); the batch's output is out[op, end)
// (the caller's warp scans gave the starts and literal indices, so none is scanned again here).
// Each lane takes one byte of the batch's output per slot of 32 (4 slots per round of 128
// bytes) and resolves where that byte comes from: a literal (the literal source), or a match
// byte, whose source byte (the overlap-safe rule of dmc_zstd_match) either lies before op
// (already written and synchronised: read the output) or is another byte of this batch,
// resolved again (each step lands in an earlier sequence or in a literal, so at most nb steps).
// A step finds the byte's sequence by a binary search of dependent shuffles, except the first
// of each slot, whose bytes are 32 consecutive ones: there it is the count of the sequences that
// start before the slot and in it at or before the byte (one OR over the lanes of a bit per
// start in the slot).
// No lane reads a byte that any lane writes in this call, and each round of 128 bytes is four
// load requests and one store request for the whole batch (a sequence alone spent a load and a
// store request per 32 bytes of each sequence). The caller made sure the batch's stores end at
// or before the first in-tail literal it reads (out[op, end) never meets the literals); the warp
// is synchronised on entry and return.
// With a ring (rb: a team leader's, dmc_zstd_ring_of; null: none) every byte stored also goes to
// it, and a match byte from before op is read from it when it lies at or after rlo (the ring's
// first byte, dmc_zstd_frame_state::ring_lo) and at most DMC_ZSTD_RING before end (no byte of
// the batch reuses its slot).
__device__ __forceinline__ void dmc_zstd_seq_batch(dmc_u8* out, dmc_u32 op, dmc_u32 end, const dmc_zstd_lits* L,
                                                   dmc_u32 nb, dmc_u32 blen, dmc_u32 boff, dmc_u32 start,
                                                   dmc_u32 lu, dmc_u32 lane, dmc_u8* rb, dmc_u32 rlo) {
    __syncwarp();  // the bytes before op are visible to every lane
    const dmc_u32 bll = blen & 0xFFu;
    const dmc_u32 total = end - op;
    // Output in rounds of 128 bytes from the aligned word at or before op: slot b of a round is
    // the bytes x = r + 32 b + lane (x counted from that word, the batch's bytes are x in
    // [mis, span)), one byte per lane resolved and loaded; shuffles gather each lane's 4 bytes
    // x = r + 4 lane .. + 3, stored with one aligned 4-byte store. The bytes of the partial
    // words at either end (which other output, or in-tail literals, may share) are stored one
    // at a time where they are loaded.
    const dmc_u32 mis = (dmc_u32)((dmc_u64)(out + op) & 3u), span = mis + total;
    // the sequences that start before the slot (the slots tile the bytes from the aligned word at
    // or before op, where none starts), and the lanes at or below this one
    dmc_u32 before = 0;
    const dmc_u32 upto_lane = 0xFFFFFFFFu >> (DMC_WARP_SIZE - 1 - lane);
    for (dmc_u32 r = 0; r < span; r += 4 * DMC_WARP_SIZE) {
        dmc_u32 pk = 0;  // byte b: this lane's byte of slot b
        DMC_UNROLL
        for (dmc_u32 b = 0; b < 4; b++) {
            const dmc_u32 x = r + DMC_WARP_SIZE * b + lane;
            const bool mine = x >= mis && x < span;
            bool done = !mine, lit = false;
            dmc_u32 q = op + x - mis;  // the output position of the byte to resolve
            dmc_u32 src = 0;           // literal index (lit) or output position
            // The first step's q are the slot's 32 consecutive positions q0 + lane: the last
            // sequence starting at or before q is one less than the sequences starting before
            // the slot (counted over the slots before it) and those starting in q0 .. q (their
            // starts in the slot, a bit each: one OR over the lanes; no two sequences start at
            // one byte). No binary search of dependent shuffles for it.
            const dmc_u32 rel = start - (op + x - mis - lane);  // start - q0
            const dmc_u32 slot_starts = __reduce_or_sync(0xffffffffu, lane < nb && rel < DMC_WARP_SIZE ? 1u << rel : 0u);
            const dmc_u32 upto = before + (dmc_u32)__popc(slot_starts & upto_lane);
            before += (dmc_u32)__popc(slot_starts);
            bool first = true;
            while (__any_sync(0xffffffffu, !done)) {
                // the last sequence starting at or before q
                dmc_u32 s = 0;
                if (first) {
                    s = upto > 0 ? upto - 1 : 0;
                    first = false;
                } else {
                    DMC_UNROLL
                    for (dmc_u32 step = DMC_WARP_SIZE / 2; step > 0; step >>= 1) {
                        const dmc_u32 st = __shfl_sync(0xffffffffu, start, s + step);
                        if (s + step < nb && st <= q) s += step;
                    }
                }
                const dmc_u32 st = __shfl_sync(0xffffffffu, start, s), sll = __shfl_sync(0xffffffffu, bll, s),
                              soff = __shfl_sync(0xffffffffu, boff, s), slu = __shfl_sync(0xffffffffu, lu, s);
                if (!done) {
                    const dmc_u32 dq = q - st;
                    if (dq < sll) {
                        lit = true;
                        src = slu + dq;
                        done = true;
                    } else {
                        const dmc_u32 k = dq - sll;
                        const dmc_u32 a = st + sll + (k < soff ? k : k % soff);  // source: a - soff
                        q = a - soff;
                        if (q < op) {  // before the batch
                            src = q;
                            done = true;
                        }
                    }
                }
            }
            dmc_u32 v = 0;
            if (mine) {
                const bool ring = rb != nullptr && !lit && src >= rlo && src + DMC_ZSTD_RING >= end;
                v = (lit && L->kind == 1) ? L->rle
                                          : *(ring ? dmc_zstd_ring{rb}.at(out + src) : lit ? L->src + src : out + src);
                // a byte of a partial word at either end: stored alone
                if (x < ((mis + 3u) & ~3u) || x >= (span & ~3u)) {
                    out[op + x - mis] = (dmc_u8)v;
                    if (rb != nullptr) *dmc_zstd_ring{rb}.at(out + op + x - mis) = (dmc_u8)v;
                }
            }
            pk |= v << (8 * b);
        }
        // lane l's word is the bytes x = r + 4 l + c, slot l / 8 of lanes 4 l + c (mod 32)
        dmc_u32 word = 0;
        DMC_UNROLL
        for (dmc_u32 c = 0; c < 4; c++) {
            const dmc_u32 t = __shfl_sync(0xffffffffu, pk, (int)(((4 * lane) & 31u) + c));
            word |= ((t >> (8 * (lane >> 3))) & 0xFFu) << (8 * c);
        }
        const dmc_u32 x0 = r + 4 * lane;
        if (x0 >= ((mis + 3u) & ~3u) && x0 + 4 <= span) {
            *(dmc_u32*)(out + op + x0 - mis) = word;  // aligned
            if (rb != nullptr) *(dmc_u32*)dmc_zstd_ring{rb}.at(out + op + x0 - mis) = word;
        }
    }
    __syncwarp();
}

// ---- XXH64 (seed 0) of out[0..len), accumulators on lanes 0..3 ----
#define DMC_XXP1 0x9E3779B185EBCA87ull
#define DMC_XXP2 0xC2B2AE3D27D4EB4Full
#define DMC_XXP3 0x165667B19E3779F9ull
#define DMC_XXP4 0x85EBCA77C2B2AE63ull
#define DMC_XXP5 0x27D4EB2F165667C5ull

__device__ __forceinline__ dmc_u64 dmc_rotl64(dmc_u64 x, dmc_u32 r) { return (x << r) | (x >> (64 - r)); }
__device__ __forceinline__ dmc_u64 dmc_xx_round(dmc_u64 acc, dmc_u64 in) {
    acc += in * DMC_XXP2;
    acc = dmc_rotl64(acc, 31);
    return acc * DMC_XXP1;
}
__device__ __forceinline__ dmc_u64 dmc_xx_merge(dmc_u64 acc, dmc_u64 v) {
    acc ^= dmc_xx_round(0, v);
    return acc * DMC_XXP1 + DMC_XXP4;
}
__device__ __forceinline__ dmc_u64 dmc_load_le64(const dmc_u8* p) {
    return (dmc_u64)dmc_load_le32(p) | ((dmc_u64)dmc_load_le32(p + 4) << 32);
}

// All lanes call; all lanes return the hash.
__device__ dmc_u64 dmc_zstd_xxh64(const dmc_u8* p, dmc_u64 len, dmc_u32 lane) {
    const dmc_u64 stripes = len / 32;
    dmc_u64 acc = 0;
    if (lane < 4) {
        // selects, not an array indexed by lane (which would live in local memory)
        acc = lane == 0 ? DMC_XXP1 + DMC_XXP2 : (lane == 1 ? DMC_XXP2 : (lane == 2 ? 0 : 0 - DMC_XXP1));
        for (dmc_u64 k = 0; k < stripes; k++) acc = dmc_xx_round(acc, dmc_load_le64(p + 32 * k + 8 * lane));
    }
    const dmc_u64 v1 = __shfl_sync(0xffffffffu, acc, 0);
    const dmc_u64 v2 = __shfl_sync(0xffffffffu, acc, 1);
    const dmc_u64 v3 = __shfl_sync(0xffffffffu, acc, 2);
    const dmc_u64 v4 = __shfl_sync(0xffffffffu, acc, 3);
    dmc_u64 h;
    if (stripes > 0) {
        h = dmc_rotl64(v1, 1) + dmc_rotl64(v2, 7) + dmc_rotl64(v3, 12) + dmc_rotl64(v4, 18);
        h = dmc_xx_merge(h, v1);
        h = dmc_xx_merge(h, v2);
        h = dmc_xx_merge(h, v3);
        h = dmc_xx_merge(h, v4);
    } else {
        h = DMC_XXP5;
    }
    h += len;
    dmc_u64 i = stripes * 32;
    for (; i + 8 <= len; i += 8) {
        h ^= dmc_xx_round(0, dmc_load_le64(p + i));
        h = dmc_rotl64(h, 27) * DMC_XXP1 + DMC_XXP4;
    }
    if (i + 4 <= len) {
        h ^= (dmc_u64)dmc_load_le32(p + i) * DMC_XXP1;
        h = dmc_rotl64(h, 23) * DMC_XXP2 + DMC_XXP3;
        i += 4;
    }
    for (; i < len; i++) {
        h ^= (dmc_u64)p[i] * DMC_XXP5;
        h = dmc_rotl64(h, 11) * DMC_XXP1;
    }
    h ^= h >> 33;
    h *= DMC_XXP2;
    h ^= h >> 29;
    h *= DMC_XXP3;
    h ^= h >> 32;
    return h;
}

// ---- Sequences ----

// A block's sequence decoder (identical in every lane): the bitstream reader, the three FSE
// states and the sequences decoded so far. Its tables are those of the dmc_zstd_smem `ts` its
// functions take: the table state's set (dmc_zstd_seq_set).
struct dmc_zstd_seqdec {
    dmc_zlr r;
    dmc_i32 spos;
    dmc_u32 s_ll, s_of, s_ml;
    dmc_u32 i, nseq;
};

// Moves the reader n (<= 63) bits down, to bit `pos` (the position already lowered by n): when
// 32 or fewer bits are left it refills (dmc_zlr_refill), and when none are left (n was more
// than the bits left: a long offset's extra bits) it is placed anew at pos.
__device__ __forceinline__ void dmc_zlr_drop(dmc_zlr* r, dmc_i32 pos, dmc_u32 n) {
    const dmc_i32 nb = (dmc_i32)r->nb - (dmc_i32)n;
    if (nb > 32) {
        r->nb = (dmc_u32)nb;
    } else if (nb > 0) {
        r->nb = (dmc_u32)nb;
        dmc_zlr_refill(r);
    } else {
        dmc_zlr_seek(r, pos);
    }
}

// Passes over the n - sb bits above, then reads sb (<= 31) as dmc_zstd_seq_read (n - sb <= 63);
// *pos is lowered by n. When the container holds the n bits (a sequence reads ~20-40 and the
// container holds 32 to 64), one step: one shift and mask (t = 64 only when nothing is read: sb
// = 0 masks everything), then a refill when 32 or fewer bits are left (the word loaded ahead: the
// container keeps 32 or more); else dmc_zlr_drop past the n - sb, then dmc_zstd_seq_read (33 or
// more bits are left after a drop).
__device__ __forceinline__ dmc_u32 dmc_zlr_drop_read(dmc_zlr* r, dmc_i32* pos, dmc_u32 n, dmc_u32 sb) {
    const dmc_i32 t = (dmc_i32)r->nb - (dmc_i32)n;  // the bits left below the n
    dmc_u32 v;
    if (t >= 0) {
        v = (dmc_u32)(r->c >> ((dmc_u32)t & 63u)) & ((1u << sb) - 1u);
        *pos -= (dmc_i32)n;
        dmc_zlr_skip(r, n);
    } else {
        const dmc_u32 xb = n - sb;
        *pos -= (dmc_i32)xb;
        dmc_zlr_drop(r, *pos, xb);
        v = dmc_zstd_seq_read(r, pos, sb);
    }
    return v;
}

// The n (<= 31) bits from address bit a (relative to the word k0 that w0, w1, w2 are words k0,
// k0 + 1, k0 + 2 of; the bits lie in them) as a number.
__device__ __forceinline__ dmc_u32 dmc_zstd_bits_in(dmc_u32 w0, dmc_u32 w1, dmc_u32 w2, dmc_u32 a, dmc_u32 n) {
    const bool up = a >= 32u;
    return __funnelshift_r(up ? w1 : w0, up ? w2 : w1, a & 31u) & ~(0xFFFFFFFFu << n);
}

// The tables of a table state (dmc_zstd_frame_state::tabs): the job's (sm), or when its set
// bit is on (a team's second set: the block decoded ahead builds its tables there while helper
// 1 still reads the current block's; see dmc_zstd_seq_tables) the next dmc_zstd_smem of the
// block's shared memory.
#define DMC_ZSTD_TABS_SET (1u << 28)
__device__ __forceinline__ const dmc_zstd_smem* dmc_zstd_seq_set(const dmc_zstd_smem* sm, dmc_u32 tabs) {
    return sm + ((tabs & DMC_ZSTD_TABS_SET) != 0 ? 1 : 0);
}

// Places a block's sequence decoder: the bitstream [sp, sp + slen) (slen > 0, its last byte
// non-zero: checked by the caller), its nseq sequences and its three initial states (the logs
// from `tabs`).
__device__ __forceinline__ void dmc_zstd_seq_start(dmc_zstd_seqdec* D, const dmc_u8* sp, dmc_u32 slen, dmc_u32 nseq,
                                                   dmc_u32 tabs) {
    D->spos = (dmc_i32)(slen - 1) * 8 + (dmc_i32)dmc_zstd_highbit(sp[slen - 1]);
    D->r.p = sp;
    D->r.len = slen;
    D->r.mis = (dmc_u32)((dmc_u64)sp & 3u);
    dmc_zlr_seek(&D->r, D->spos);
    D->s_ll = dmc_zstd_seq_read(&D->r, &D->spos, (tabs >> 8) & 15u);
    D->s_of = dmc_zstd_seq_read(&D->r, &D->spos, (tabs >> 16) & 15u);
    D->s_ml = dmc_zstd_seq_read(&D->r, &D->spos, (tabs >> 24) & 15u);
    D->i = 0;
    D->nseq = nseq;
}

// Decodes the next group of up to 32 of a block's sequences (D->i moves past them): lane j
// keeps the group's sequence j — its literals length, match length and offset value (the
// repeat offsets are resolved where the sequences are executed: dmc_zstd_rep_resolve, so a
// block's sequences decode without the blocks before them); zeros on lanes past the group. All
// 32 lanes. Returns the index in the group of the first sequence the bitstream could not give
// (DMC_WARP_SIZE: none); nothing from it on is decoded (D->i = nseq).
//
// Two phases. The FSE chain, the serial part, is walked by every lane in step through a reader of
// its own (no shuffles on it): per sequence the three states' entries (three broadcast shared loads
// issued together) and their sum, whose fields give all the bits the sequence reads (one shift) and
// the state updates' bits among them (dmc_zstd_seq_entry), one drop past the extra bits, one read
// of the updates' bits (LL, ML, OF; at most 9 + 9 + 8) and the three new states, each its baseline
// or'ed with its bits (the drop and the read one step of the container when it holds them, then one
// refill test: dmc_zlr_drop_read); lane j keeps sequence j's position and states. Then every lane
// at once reads its sequence's entries again and its three extra-bit fields from its position
// (three word loads), and forms the values: what the chain no longer carries (three reads, the code
// baselines) costs the group one pass of independent lanes instead of 32 passes of the whole warp.
// A sequence the bitstream could not give is one whose end lies below the stream's first bit (words
// outside the stream read as zeros and states stay in their tables, so the walk past it is
// harmless; its result is not used).
__device__ __forceinline__ dmc_u32 dmc_zstd_seq_group(const dmc_zstd_smem* ts, dmc_zstd_seqdec* D, dmc_u32 lane,
                                                      dmc_u32* e_ll, dmc_u32* e_ml, dmc_u32* e_ofv) {
    const dmc_u32 cnt = dmc_min_u32(D->nseq - D->i, DMC_WARP_SIZE);
    dmc_i32 kpos = 0;  // lane j: sequence j's position (its first extra bit's top) and states
    dmc_u32 kst = 0;
    dmc_u32 s_ll = D->s_ll, s_ml = D->s_ml, s_of = D->s_of, sb = 0;
    for (dmc_u32 j = 0; j < cnt; j++) {
        const dmc_u32 ell = ts->ll[s_ll], eml = ts->ml[s_ml], eof = ts->of[s_of];
        if (lane == j) {
            kpos = D->spos;
            kst = s_ll + s_ml * 512u + s_of * 262144u;
        }
        const dmc_u32 sum = ell + eml + eof;
        sb = DMC_ZSTD_ENTRY_NB(sum);
        const dmc_u32 v = dmc_zlr_drop_read(&D->r, &D->spos, DMC_ZSTD_ENTRY_BITS(sum), sb);
        const dmc_u32 nof = DMC_ZSTD_ENTRY_NB(eof), nml = DMC_ZSTD_ENTRY_NB(eml);
        // a baseline's low nb bits are zero (dmc_zstd_fse_states): the state bits are or'ed in
        s_of = DMC_ZSTD_ENTRY_BASE(eof) | (v & ~(0xFFFFFFFFu << nof));
        s_ml = DMC_ZSTD_ENTRY_BASE(eml) | ((v >> nof) & ~(0xFFFFFFFFu << nml));
        s_ll = DMC_ZSTD_ENTRY_BASE(ell) | (v >> (nof + nml));
    }
    // the block's last sequence has no state update: the bits read for one (past the stream's
    // first bit they read as zeros) go back; the reader is not used after it
    if (D->i + cnt == D->nseq) D->spos += (dmc_i32)sb;
    D->s_ll = s_ll;
    D->s_ml = s_ml;
    D->s_of = s_of;
    // sequence j ends where sequence j + 1 starts (the group's last: at the reader's position)
    const dmc_i32 next = __shfl_down_sync(0xffffffffu, kpos, 1);
    const dmc_i32 end = lane + 1 < cnt ? next : D->spos;
    const dmc_u32 broken = __ballot_sync(0xffffffffu, lane < cnt && end < 0);
    const dmc_u32 bad = broken != 0 ? (dmc_u32)__ffs(broken) - 1u : DMC_WARP_SIZE;
    dmc_u32 ll = 0, ml = 0, ofv = 0;
    if (lane < dmc_min_u32(cnt, bad)) {
        const dmc_u32 ell = ts->ll[kst & 511u], eml = ts->ml[(kst >> 9) & 511u], eof = ts->of[kst >> 18];
        // each symbol's extra bits: the bits read for it less its state update's
        const dmc_u32 xo = DMC_ZSTD_ENTRY_BITS(eof) - DMC_ZSTD_ENTRY_NB(eof);
        const dmc_u32 xm = DMC_ZSTD_ENTRY_BITS(eml) - DMC_ZSTD_ENTRY_NB(eml);
        const dmc_u32 llc = DMC_ZSTD_ENTRY_SYM(ell), mlc = DMC_ZSTD_ENTRY_SYM(eml);
        // the codes with extra bits: baseline | extra bits << 24 (sm->codes); the others are
        // their own baselines (match lengths 3 above their code)
        const dmc_u32 llb = llc < 16 ? llc : ts->codes[llc - 16] & 0xFFFFFFu;
        const dmc_u32 mlb = mlc < 32 ? mlc + 3 : ts->codes[20 + mlc - 32] & 0xFFFFFFu;
        // the three fields, at most 63 bits below kpos, lie in three words from the one holding
        // the lowest bit (LL's lowest; then ML, then OF above it)
        const dmc_u32 xl = DMC_ZSTD_ENTRY_BITS(ell) - DMC_ZSTD_ENTRY_NB(ell);
        const dmc_i32 a = kpos - (dmc_i32)(xo + xm + xl) + 8 * (dmc_i32)D->r.mis;
        const dmc_i32 k0 = a >> 5;  // floor
        const dmc_u32 w0 = dmc_word4(D->r.p, D->r.len, D->r.mis, k0), w1 = dmc_word4(D->r.p, D->r.len, D->r.mis, k0 + 1),
                      w2 = dmc_word4(D->r.p, D->r.len, D->r.mis, k0 + 2);
        const dmc_u32 al = (dmc_u32)a & 31u;  // LL's lowest bit in w0
        ll = llb + dmc_zstd_bits_in(w0, w1, w2, al, xl);
        ml = mlb + dmc_zstd_bits_in(w0, w1, w2, al + xl, xm);
        ofv = (1u << DMC_ZSTD_ENTRY_SYM(eof)) + dmc_zstd_bits_in(w0, w1, w2, al + xl + xm, xo);
    }
    *e_ll = ll;
    *e_ml = ml;
    *e_ofv = ofv;
    if (bad != DMC_WARP_SIZE) {
        D->i = D->nseq;
        return bad;
    }
    D->i += cnt;
    return DMC_WARP_SIZE;
}

// The end of a block's sequence bitstream once its sequences are decoded: exactly used up.
__device__ __forceinline__ dmc_u32 dmc_zstd_seq_end(const dmc_zstd_seqdec* D) {
    return D->spos == 0 ? DMC_STATUS_OK : DMC_STATUS_CORRUPT;
}

// ---- Teams (see struct dmc_zstd_team) ----

// The leader: posts the next round's task and ends this round. Returns the number of the
// round posted (the helpers' count of barriers passed, less one), on every lane.
__device__ __forceinline__ dmc_u32 dmc_zstd_team_post(dmc_zstd_team* tm, dmc_u32 task, dmc_u32 lane) {
    dmc_u32 r = 0;
    if (lane == 0) {
        r = tm->round;
        tm->task[r & 1u] = task;
        tm->round = r + 1;
    }
    r = __shfl_sync(0xffffffffu, r, 0);
    dmc_team_sync();
    return r;
}

// Warp w's parts of a DMC_ZSTD_TASK_COPY round's copy: dmc_range_copy's rounds of 2 KiB, round
// k to warp k mod DMC_ZSTD_TEAM. Not inlined: the leader calls it too, from a frame loop at the
// register limit.
__device__ __noinline__ void dmc_zstd_team_copy(const dmc_zstd_team* tm, dmc_u32 w, dmc_u32 lane) {
    dmc_range_copy<DMC_COPY_UNROLL>(tm->cdst, tm->csrc, tm->clen, w, DMC_ZSTD_TEAM, lane, DMC_WARP_SIZE);
}

// Helper 1 or 2 (k = w - 1), lane 0: posts its reader's place for round r (see dmc_zstd_team::pf).
__device__ __forceinline__ void dmc_zstd_post_place(dmc_zstd_team* tm, dmc_u32 r, dmc_u32 k, const dmc_zstd_seqdec& D,
                                                    dmc_u32 lane) {
    if (lane == 0) {
        tm->pf[r & 1u][k].p = D.r.p;
        tm->pf[r & 1u][k].at = D.spos >> 3;  // (negative past a corrupt stream's start)
    }
}

// A prefetch's 16-byte load (p aligned): its four words xor'ed, for the caller's sink (a value
// stored and never read, so that the load is kept).
__device__ __forceinline__ dmc_u32 dmc_zstd_touch16(const void* p) {
    const dmc_u32x4 x = dmc_load16(p);
    return x.w[0] ^ x.w[1] ^ x.w[2] ^ x.w[3];
}

// Helper 3 in round r: loads into L1 the bytes its readers will take next — per posted reader the
// 512 bytes (a 16-byte vector per lane) below the DMC_ZSTD_PREFETCH_SKIP it takes in this round (a
// group of 32 sequences reads ~100 bytes of the demo volume's streams), the vectors lying within
// its bitstream, one load instruction per reader. A reader's next words are then L1 hits (~43
// cycles on an H200) instead of first touches of the input (HBM, ~700; benches/results/
// gpu-model.md), and its FSE chain, the team's longest path on sequence-heavy chunks, waits less.
// The input is only read, and the places are the last round's (ordered by the round's barrier).
#define DMC_ZSTD_PREFETCH_SKIP 128u
__device__ __forceinline__ void dmc_zstd_prefetch(dmc_zstd_team* tm, dmc_u32 r, dmc_u32 lane) {
    dmc_u32 acc = 0;
    for (dmc_u32 k = 0; k < 2; k++) {
        const dmc_u8* lo = tm->pf[(r - 1u) & 1u][k].p;
        const dmc_i32 at = tm->pf[(r - 1u) & 1u][k].at;
        if (lo == nullptr || at < (dmc_i32)(DMC_ZSTD_PREFETCH_SKIP + 16u)) continue;
        // vector `lane` below the skipped bytes, down to the first one wholly in the stream
        const dmc_u64 top = (dmc_u64)(lo + (at - (dmc_i32)DMC_ZSTD_PREFETCH_SKIP)) & ~(dmc_u64)15;
        const dmc_u64 v = top - 16u * (lane + 1u);
        if (v >= (dmc_u64)lo && v < top) acc ^= dmc_zstd_touch16((const void*)v);
    }
    tm->pfsink[lane] = acc;
}

// Stores a decoded group (lane j: sequence j's values) at e (DMC_ZSTD_GROUP_WORDS words).
__device__ __forceinline__ void dmc_zstd_group_put(dmc_u32* e, dmc_u32 ll, dmc_u32 ml, dmc_u32 ofv, dmc_u32 lane) {
    e[lane] = ll;
    e[DMC_WARP_SIZE + lane] = ml;
    e[2 * DMC_WARP_SIZE + lane] = ofv;
}

__device__ __noinline__ void dmc_zstd_exec_prefetch(dmc_zstd_team* tm, dmc_u32 r, dmc_u32 lane);

// A helper (warp w > 0 of a team) until the job is done: each round it waits at the barrier and
// does the round's task: a Huffman stream (stream w of a DMC_ZSTD_TASK_HUF round), or (helper
// 1) the next group of 32 of a block's sequences into the group's buffer, while the leader
// executes the group before; helper 2, once a round posts the block ahead, decodes that block's
// next group into the job's sequence scratch in every other round until the block is done.
__device__ __noinline__ void dmc_zstd_helper(const dmc_zstd_smem* sm, dmc_zstd_team* tm, dmc_u32 w, dmc_u32 lane) {
    dmc_zstd_seqdec D = {};
    const dmc_zstd_smem* ts = sm;  // the tables of the block being decoded
    dmc_u32 g = 0, abad = 0;
    for (dmc_u32 round = 0;; round++) {
        dmc_team_sync();
        const dmc_u32 task = tm->task[round & 1u];
        if (task == DMC_ZSTD_TASK_DONE) return;
        if (task == DMC_ZSTD_TASK_COPY) {
            // (helper 2 has no block ahead here: a raw block follows blocks the leader executed)
            dmc_zstd_team_copy(tm, w, lane);
            continue;
        }
        if ((task & 7u) == DMC_ZSTD_TASK_HUF) {
            for (dmc_u32 k = w; k < 4; k += DMC_ZSTD_TEAM) {
                const dmc_u32 st = dmc_zstd_huf_stream(sm, tm->log, tm->p[k], tm->len[k], tm->dst[k], tm->cnt[k], lane);
                if (lane == 0) tm->st[k] = st;
            }
        }
        if (w == 3) {
            if ((task & 7u) != DMC_ZSTD_TASK_HUF) dmc_zstd_prefetch(tm, round, lane);
            continue;
        }
        if (w == 2) {
            if (task & DMC_ZSTD_TASK_AHEAD) {
                dmc_zstd_seq_start(&D, tm->asp, tm->aslen, tm->anseq, tm->atabs);
                ts = dmc_zstd_seq_set(sm, tm->atabs);
                g = 0;
                abad = D.nseq;
            }
            if ((task & 7u) != DMC_ZSTD_TASK_HUF && D.i < D.nseq) {
                dmc_u32 e_ll, e_ml, e_ofv;
                const dmc_u32 at = D.i;
                const dmc_u32 bad = dmc_zstd_seq_group(ts, &D, lane, &e_ll, &e_ml, &e_ofv);
                dmc_zstd_group_put(tm->scratch + g * DMC_ZSTD_GROUP_WORDS, e_ll, e_ml, e_ofv, lane);
                g++;
                if (bad != DMC_WARP_SIZE) abad = at + bad;
                dmc_zstd_post_place(tm, round, 1, D, lane);
            }
            if (lane == 0) {
                dmc_u32* pr = tm->aprog[round & 1u];
                pr[0] = g;
                pr[1] = abad;
                pr[2] = D.i < D.nseq ? DMC_STATUS_OK : dmc_zstd_seq_end(&D);
            }
            continue;
        }
        if (w == 1 && (task & DMC_ZSTD_TASK_XP) != 0) {
            dmc_zstd_exec_prefetch(tm, round, lane);
            continue;
        }
        if (w != 1 || ((task & 7u) != DMC_ZSTD_TASK_SEQ0 && (task & 7u) != DMC_ZSTD_TASK_SEQ)) continue;
        if ((task & 7u) == DMC_ZSTD_TASK_SEQ0) {
            dmc_zstd_seq_start(&D, tm->sp, tm->slen, tm->nseq, tm->tabs);
            ts = dmc_zstd_seq_set(sm, tm->tabs);
            g = 0;
        }
        dmc_u32 e_ll, e_ml, e_ofv;
        const dmc_u32 bad = dmc_zstd_seq_group(ts, &D, lane, &e_ll, &e_ml, &e_ofv);
        dmc_zstd_group_put(tm->seq[g & 1u], e_ll, e_ml, e_ofv, lane);
        dmc_zstd_post_place(tm, round, 0, D, lane);
        if (lane == 0) {
            tm->bad[g & 1u] = bad;
            if (D.i == D.nseq) tm->end_st = dmc_zstd_seq_end(&D);
        }
        g++;
    }
}

// ---- Blocks and frames ----

// Decoding state carried across the blocks of a frame (identical in every lane).
struct dmc_zstd_frame_state {
    dmc_u32 frame_start;  // output position of the frame's first byte
    dmc_u32 block_max;
    // The three repeat offsets, chosen by selects (a rep[3] indexed by the offset code put the
    // whole state in local memory: a 64-byte stack frame on sm_90).
    dmc_u32 rep0, rep1, rep2;
    // One register for the table state: bits 0-3 the Huffman table's log (0: no table yet),
    // then per sequence table k (0 LL, 1 OF, 2 ML) at bit 4 + 8k its tag (2 bits: 0 none yet,
    // 1 predefined, 2 other) and at bit 8 + 8k its accuracy log (4 bits); DMC_ZSTD_TABS_SET:
    // the tables are a team's second set.
    dmc_u32 tabs;
    // A team leader's ring (dmc_zstd_ring_of) holds every output byte from this position on
    // (within its last DMC_ZSTD_RING bytes). What is not mirrored moves it past its bytes: raw
    // and RLE blocks, a block's last literals over DMC_ZSTD_RING_LITS_MAX, in-tail literals
    // copied in rounds (dmc_zstd_copy_lits), and matches whose source lay before it (but the
    // 64-255-byte ones that do not overlap it: dmc_warp_copy_wide mirrors them).
    dmc_u32 ring_lo;
};

// Sets up one sequence table (mode 0 predefined, 1 RLE, 2 FSE, 3 repeat) of the table state
// *tabs in the set `to` (kind: 0 LL, 1 OF, 2 ML). `from` is the current tables' set: a team
// builds a block's tables in the set the current ones are not in (the block decoded ahead
// builds them while helper 1 still reads the current block's), so a table the block keeps
// (repeated, or predefined again) is copied over; a warp alone has one set (from = to).
__device__ __forceinline__ dmc_u32 dmc_zstd_tag(dmc_u32 tabs, dmc_u32 k) { return (tabs >> (4 + 8 * k)) & 3u; }
__device__ __forceinline__ void dmc_zstd_set_table(dmc_u32* tabs, dmc_u32 k, dmc_u32 tag, dmc_u32 log) {
    *tabs = (*tabs & ~(0xFFu << (4 + 8 * k))) | (tag << (4 + 8 * k)) | (log << (8 + 8 * k));
}

__device__ __forceinline__ dmc_u32 dmc_zstd_seq_table(dmc_zstd_smem* sm, dmc_u32* tabs, dmc_u32 kind, dmc_u32 mode, const dmc_u8* b,
                                      dmc_u32 n, dmc_u32* bp, dmc_u32 lane, const dmc_zstd_smem* from,
                                      dmc_zstd_smem* to) {
    dmc_u32* table = kind == 0 ? to->ll : (kind == 1 ? to->of : to->ml);
    const dmc_u32 sym_max = kind == 0 ? DMC_ZSTD_LL_MAX_SYM : (kind == 1 ? DMC_ZSTD_OF_MAX_SYM : DMC_ZSTD_ML_MAX_SYM);
    const dmc_u32 log_max = kind == 0 ? DMC_ZSTD_LL_LOG_MAX : (kind == 1 ? DMC_ZSTD_OF_LOG_MAX : DMC_ZSTD_ML_LOG_MAX);
    const dmc_u32 tag = dmc_zstd_tag(*tabs, kind);
    if (mode == 3 && tag == 0) return DMC_STATUS_CORRUPT;
    if (mode == 3 || (mode == 0 && tag == 1)) {  // the table already holds it
        if (from != to) {
            const dmc_u32* old = kind == 0 ? from->ll : (kind == 1 ? from->of : from->ml);
            const dmc_u32 size = 1u << ((*tabs >> (8 + 8 * kind)) & 15u);
            for (dmc_u32 j = lane; j < size; j += DMC_WARP_SIZE) table[j] = old[j];
            __syncwarp();
        }
        return DMC_STATUS_OK;
    }
    if (mode == 0) {
        const dmc_i16* dist = kind == 0 ? dmc_zstd_ll_default : (kind == 1 ? dmc_zstd_of_default : dmc_zstd_ml_default);
        const dmc_u32 n_sym = kind == 0 ? 36u : (kind == 1 ? 29u : 53u);
        const dmc_i32 n0 = lane < n_sym ? dist[lane] : 0;
        const dmc_i32 n1 = lane + 32 < n_sym ? dist[lane + 32] : 0;
        __syncwarp();
        const dmc_u32 s = dmc_zstd_spread_warp(sm, table, kind == 1 ? 5 : 6, n0, n1, lane);
        if (s != DMC_STATUS_OK) return s;
        dmc_zstd_fse_states(sm, table, kind, kind == 1 ? 5 : 6, lane);
        dmc_zstd_set_table(tabs, kind, 1, kind == 1 ? 5 : 6);
        return DMC_STATUS_OK;
    }
    if (mode == 1) {
        if (*bp >= n) return DMC_STATUS_CORRUPT;
        const dmc_u32 sym = b[*bp];
        *bp += 1;
        if (sym > sym_max) return DMC_STATUS_CORRUPT;
        __syncwarp();
        if (lane == 0) table[0] = dmc_zstd_seq_entry(kind, sym, 0, 0);
        __syncwarp();
        dmc_zstd_set_table(tabs, kind, 2, 0);
        return DMC_STATUS_OK;
    }
    // FSE-compressed description.
    if (*bp >= n) return DMC_STATUS_CORRUPT;
    __syncwarp();
    if (lane == 0) {
        dmc_u32 used = 0, log = 0, msym = 0;
        sm->res[0] = dmc_zstd_read_ncount(sm, b + *bp, n - *bp, log_max, sym_max, &used, &log, &msym);
        sm->res[1] = used;
        sm->res[2] = log;
        sm->res[3] = msym;
    }
    __syncwarp();
    if (sm->res[0] != DMC_STATUS_OK) return sm->res[0];
    const dmc_u32 msym = sm->res[3];
    const dmc_i32 n0 = lane <= msym ? sm->t.f.norm[lane] : 0;
    const dmc_i32 n1 = lane + 32 <= msym ? sm->t.f.norm[lane + 32] : 0;
    const dmc_u32 st = dmc_zstd_spread_warp(sm, table, sm->res[2], n0, n1, lane);
    if (st != DMC_STATUS_OK) return st;
    dmc_zstd_fse_states(sm, table, kind, sm->res[2], lane);
    *bp += sm->res[1];
    dmc_zstd_set_table(tabs, kind, 2, sm->res[2]);
    return DMC_STATUS_OK;
}

// The literals section header of block b[0..n) (RFC 8878 3.1.1.3.1): its type, size format,
// header size, regenerated size, and for Huffman literals the compressed size and streams.
// Returns the status; *end is where the sequences section starts.
struct dmc_zstd_lhdr {
    dmc_u32 ltype, hs, regen, csize, streams;
};
__device__ __forceinline__ dmc_u32 dmc_zstd_lits_header(const dmc_u8* b, dmc_u32 n, dmc_u32 block_max,
                                                        dmc_zstd_lhdr* h, dmc_u32* end) {
    if (n < 1) return DMC_STATUS_CORRUPT;
    const dmc_u32 b0 = b[0];
    const dmc_u32 sf = (b0 >> 2) & 3;
    h->ltype = b0 & 3;
    h->csize = 0;
    h->streams = 0;
    if (h->ltype <= 1) {
        if (sf == 0 || sf == 2) {
            h->hs = 1;
            h->regen = b0 >> 3;
        } else if (sf == 1) {
            h->hs = 2;
            if (n < 2) return DMC_STATUS_CORRUPT;
            h->regen = (b0 >> 4) + ((dmc_u32)b[1] << 4);
        } else {
            h->hs = 3;
            if (n < 3) return DMC_STATUS_CORRUPT;
            h->regen = (b0 >> 4) + ((dmc_u32)b[1] << 4) + ((dmc_u32)b[2] << 12);
        }
        if (h->regen > block_max) return DMC_STATUS_CORRUPT;
        if (h->ltype == 0) {
            if (h->regen > n - h->hs) return DMC_STATUS_CORRUPT;
            *end = h->hs + h->regen;
        } else {
            if (h->hs >= n) return DMC_STATUS_CORRUPT;
            *end = h->hs + 1;
        }
        return DMC_STATUS_OK;
    }
    if (sf <= 1) {
        h->hs = 3;
        if (n < 3) return DMC_STATUS_CORRUPT;
        const dmc_u32 x = b0 | ((dmc_u32)b[1] << 8) | ((dmc_u32)b[2] << 16);
        h->regen = (x >> 4) & 0x3FF;
        h->csize = (x >> 14) & 0x3FF;
        h->streams = sf == 0 ? 1 : 4;
    } else if (sf == 2) {
        h->hs = 4;
        if (n < 4) return DMC_STATUS_CORRUPT;
        const dmc_u32 x = dmc_load_le32(b);
        h->regen = (x >> 4) & 0x3FFF;
        h->csize = x >> 18;
        h->streams = 4;
    } else {
        h->hs = 5;
        if (n < 5) return DMC_STATUS_CORRUPT;
        const dmc_u32 x = dmc_load_le32(b);
        h->regen = (x >> 4) & 0x3FFFF;
        h->csize = (x >> 22) + ((dmc_u32)b[4] << 10);
        h->streams = 4;
    }
    if (h->regen > block_max) return DMC_STATUS_CORRUPT;
    if (h->csize > n - h->hs) return DMC_STATUS_CORRUPT;
    *end = h->hs + h->csize;
    return DMC_STATUS_OK;
}

// The sequences section header at b[*bp..n): the number of sequences (*bp moves past it).
__device__ __forceinline__ dmc_u32 dmc_zstd_nseq(const dmc_u8* b, dmc_u32 n, dmc_u32* bp, dmc_u32* nseq_out) {
    if (*bp >= n) return DMC_STATUS_CORRUPT;
    dmc_u32 nseq = b[(*bp)++];
    if (nseq >= 128) {
        if (*bp >= n) return DMC_STATUS_CORRUPT;
        if (nseq < 255) {
            nseq = ((nseq - 128) << 8) + b[(*bp)++];
        } else {
            if (n - *bp < 2) return DMC_STATUS_CORRUPT;
            nseq = b[*bp] + ((dmc_u32)b[*bp + 1] << 8) + 0x7F00;
            *bp += 2;
        }
    }
    *nseq_out = nseq;
    return DMC_STATUS_OK;
}

// The three sequence tables of a block with sequences (b[bp] its modes byte) built on the
// table state `tabs`, then a check of the bitstream that follows the descriptions (not empty,
// its last byte not zero). Returns the new table state (low 32 bits), and the status | the
// bitstream's start in b << 8 (high 32 bits). Not inlined (two call sites, one per block and
// one ahead; values in and out, so no caller's state goes to memory).
__device__ __noinline__ dmc_u64 dmc_zstd_seq_tables(dmc_zstd_smem* sm, dmc_u32 tabs, const dmc_u8* b, dmc_u32 n,
                                                    dmc_u32 bp, dmc_u32 lane) {
#define DMC_ZSTD_TABLES_RET(st) (((dmc_u64)((st) | bp << 8) << 32) | tabs)
    if (bp >= n) return DMC_ZSTD_TABLES_RET(DMC_STATUS_CORRUPT);
    const dmc_u32 modes = b[bp++];
    if (modes & 3) return DMC_ZSTD_TABLES_RET(DMC_STATUS_CORRUPT);
    const dmc_zstd_smem* from = dmc_zstd_seq_set(sm, tabs);
    dmc_zstd_smem* to = sm->tm != nullptr && from == sm ? sm + 1 : sm;
    dmc_u32 st = dmc_zstd_seq_table(sm, &tabs, 0, modes >> 6, b, n, &bp, lane, from, to);
    if (st == DMC_STATUS_OK) st = dmc_zstd_seq_table(sm, &tabs, 1, (modes >> 4) & 3, b, n, &bp, lane, from, to);
    if (st == DMC_STATUS_OK) st = dmc_zstd_seq_table(sm, &tabs, 2, (modes >> 2) & 3, b, n, &bp, lane, from, to);
    if (st != DMC_STATUS_OK) return DMC_ZSTD_TABLES_RET(st);
    tabs = (tabs & ~DMC_ZSTD_TABS_SET) | (to != sm ? DMC_ZSTD_TABS_SET : 0u);
    if (bp >= n || b[n - 1] == 0) return DMC_ZSTD_TABLES_RET(DMC_STATUS_CORRUPT);
    return DMC_ZSTD_TABLES_RET(DMC_STATUS_OK);
#undef DMC_ZSTD_TABLES_RET
}

// A team's leader, while helper 1 decodes the current block's sequences: when the frame's next
// block (its header at nb[0..navail)) is a compressed block with sequences whose groups fit the
// job's scratch, parses its literals header, builds its sequence tables into the sets the
// current block's are not in and hands its sequence bitstream to helper 2 (the caller posts
// DMC_ZSTD_TASK_AHEAD with its next round), so the two blocks' sequences decode side by side.
// Anything wrong with the block, or no room: false, and the block is decoded when its turn
// comes as if this never ran (its errors are reported then, in order). All 32 lanes.
// (tabs and block_max: the frame state's.)
__device__ __forceinline__ bool dmc_zstd_look_ahead(dmc_zstd_smem* sm, dmc_u32 tabs, dmc_u32 block_max, const dmc_u8* nb,
                                                 dmc_u32 navail, dmc_u32 lane) {
    dmc_zstd_team* tm = sm->tm;
    if (tm->scratch == nullptr || navail < 3) return false;
    const dmc_u32 bh = nb[0] | ((dmc_u32)nb[1] << 8) | ((dmc_u32)nb[2] << 16);
    const dmc_u32 bsize = bh >> 3;
    if (((bh >> 1) & 3) != 2 || bsize > block_max || bsize > navail - 3) return false;
    const dmc_u8* b = nb + 3;
    dmc_zstd_lhdr h;
    dmc_u32 bp = 0, nseq = 0;
    if (dmc_zstd_lits_header(b, bsize, block_max, &h, &bp) != DMC_STATUS_OK) return false;
    if (dmc_zstd_nseq(b, bsize, &bp, &nseq) != DMC_STATUS_OK || nseq == 0) return false;
    if ((nseq + DMC_WARP_SIZE - 1) / DMC_WARP_SIZE > tm->scratch_groups) return false;
    const dmc_u64 t = dmc_zstd_seq_tables(sm, tabs, b, bsize, bp, lane);
    if (((t >> 32) & 0xFFu) != DMC_STATUS_OK) return false;
    tabs = (dmc_u32)t;
    bp = (dmc_u32)(t >> 40);
    if (lane == 0) {
        tm->asp = b + bp;
        tm->aslen = bsize - bp;
        tm->anseq = nseq;
        tm->atabs = tabs;
    }
    return true;
}

// The repeat offsets of a group of sequences (RFC 8878 3.1.2.5), all 32 lanes: lane j brings
// sequence j's offset value and literals length (`in` false: a lane past the group, or one the
// bitstream could not give, which changes nothing) and gets its offset; fs->rep0..2 move past
// the group. A group of only new offsets and repeats of the latest (about four in five of the
// demo volume's) takes one ballot and four shuffles; any other a warp scan of the sequences'
// moves of the offsets (five steps of four shuffles). (The decoder once kept the offsets itself; resolving them
// here lets the blocks of a frame decode their sequences side by side: dmc_zstd_helper.)
__device__ __forceinline__ dmc_u32 dmc_zstd_rep_resolve(dmc_zstd_frame_state* fs, dmc_u32 ofv, dmc_u32 ll, bool in,
                                                        dmc_u32 lane) {
    // 0..3: repeat offset 1..3 or rep0 - 1 (the codes shift by one after a zero literals
    // length), 4: a new offset (ofv - 3)
    const dmc_u32 idx = !in ? 0u : (ofv > 3 ? 4u : ofv - 1 + (ll == 0 ? 1u : 0u));
    const dmc_u32 r0 = fs->rep0, r1 = fs->rep1, r2 = fs->rep2;
    if (!__any_sync(0xffffffffu, idx != 0 && idx != 4)) {
        // Only new offsets and repeats of the latest (most groups): a repeat takes the offset of
        // the nearest new one before it (r0 if none), and the last three new ones lead the
        // offsets after the group.
        const unsigned fresh = __ballot_sync(0xffffffffu, idx == 4);
        const unsigned upto = fresh & (0xffffffffu >> (DMC_WARP_SIZE - 1 - lane));  // lanes <= this one
        const dmc_u32 src = upto != 0 ? 31u - (dmc_u32)__clz(upto) : lane;
        const dmc_u32 got = __shfl_sync(0xffffffffu, ofv - 3, src);
        const dmc_u32 m = (dmc_u32)__popc(fresh);
        const dmc_u32 p0 = m > 0 ? 31u - (dmc_u32)__clz(fresh) : 0u;
        const unsigned f1 = m > 1 ? fresh & ~(1u << p0) : 0u;
        const dmc_u32 p1 = m > 1 ? 31u - (dmc_u32)__clz(f1) : 0u;
        const dmc_u32 p2 = m > 2 ? 31u - (dmc_u32)__clz(f1 & ~(1u << p1)) : 0u;
        const dmc_u32 o0 = __shfl_sync(0xffffffffu, ofv - 3, p0), o1 = __shfl_sync(0xffffffffu, ofv - 3, p1);
        const dmc_u32 o2 = __shfl_sync(0xffffffffu, ofv - 3, p2);
        fs->rep0 = m > 0 ? o0 : r0;
        fs->rep1 = m > 1 ? o1 : (m == 1 ? r0 : r1);
        fs->rep2 = m > 2 ? o2 : (m == 2 ? r0 : (m == 1 ? r1 : r2));
        return upto != 0 ? got : r0;
    }
    // Else a warp scan of the sequences' moves of the three offsets: a move sets each offset j to
    // an offset before it plus a delta (kind j = that offset's index) or to a value (kind 3);
    // moves compose into moves (a later move's offset from an earlier one's value is a value, its
    // delta added), so lane j's inclusive scan is what sequences 0..j do to the group's offsets.
    // 0: none; 1: (r1, r0, r2); 2: (r2, r0, r1); 3: (r0 - 1, r0, r1); 4: (new, r0, r1).
    dmc_u32 kinds = idx == 0 ? 0x24u : (idx == 1 ? 0x21u : (idx == 2 ? 0x12u : (idx == 3 ? 0x10u : 0x13u)));
    dmc_u32 v0 = idx == 3 ? 0xFFFFFFFFu : (idx == 4 ? ofv - 3 : 0u), v1 = 0, v2 = 0;
    DMC_UNROLL
    for (dmc_u32 d = 1; d < DMC_WARP_SIZE; d <<= 1) {
        const dmc_u32 pk = __shfl_up_sync(0xffffffffu, kinds, d), p0 = __shfl_up_sync(0xffffffffu, v0, d),
                      p1 = __shfl_up_sync(0xffffffffu, v1, d), p2 = __shfl_up_sync(0xffffffffu, v2, d);
        if (lane >= d) {  // this lane's moves after the d lanes' before it
            const dmc_u32 k0 = kinds & 3u, k1 = (kinds >> 2) & 3u, k2 = (kinds >> 4) & 3u;
            kinds = (k0 == 3 ? 3u : (pk >> (2 * k0)) & 3u) | (k1 == 3 ? 3u : (pk >> (2 * k1)) & 3u) << 2 |
                    (k2 == 3 ? 3u : (pk >> (2 * k2)) & 3u) << 4;
            v0 += k0 == 3 ? 0u : (k0 == 0 ? p0 : (k0 == 1 ? p1 : p2));
            v1 += k1 == 3 ? 0u : (k1 == 0 ? p0 : (k1 == 1 ? p1 : p2));
            v2 += k2 == 3 ? 0u : (k2 == 0 ? p0 : (k2 == 1 ? p1 : p2));
        }
    }
    const dmc_u32 k0 = kinds & 3u, k1 = (kinds >> 2) & 3u, k2 = (kinds >> 4) & 3u;
    const dmc_u32 a = (k0 == 3 ? 0u : (k0 == 0 ? r0 : (k0 == 1 ? r1 : r2))) + v0;
    const dmc_u32 c1 = (k1 == 3 ? 0u : (k1 == 0 ? r0 : (k1 == 1 ? r1 : r2))) + v1;
    const dmc_u32 c2 = (k2 == 3 ? 0u : (k2 == 0 ? r0 : (k2 == 1 ? r1 : r2))) + v2;
    fs->rep0 = __shfl_sync(0xffffffffu, a, DMC_WARP_SIZE - 1);
    fs->rep1 = __shfl_sync(0xffffffffu, c1, DMC_WARP_SIZE - 1);
    fs->rep2 = __shfl_sync(0xffffffffu, c2, DMC_WARP_SIZE - 1);
    return a;
}

// Groups a team's leader executes from the scratch between two rounds (a round's length is then
// the longer of helper 2's group, while it still decodes the block ahead, one group a round, and
// these), and the groups helper 1 loads ahead for it (dmc_zstd_exec_prefetch).
#define DMC_ZSTD_AHEAD_RUN 2u

// Helper 1 in a DMC_ZSTD_TASK_XP round r: loads into L1 what the leader's groups of the next
// round will read, while the leader executes this round's (those from xp.g up to the next
// multiple of DMC_ZSTD_AHEAD_RUN; the next round's are the DMC_ZSTD_AHEAD_RUN after). A block
// executed from the scratch (dmc_zstd_block) reads, per group, its three scratch lines (helper 2
// stored them: global stores leave no line in L1, so the leader's loads were L2 accesses), the
// literals its sequences copy (stored by the Huffman round, likewise) and its matches' sources,
// most of them (the demo volume's) farther back than the leader's ring. Helper 1 walks the
// block's groups in order as the leader will (from xs, posted with group 0; its place kept in
// xh): their repeat offsets (dmc_zstd_rep_resolve), output and literal positions; up to this
// round's last group without loads, then the next round's, loading their scratch lines, their
// literals (16-byte vectors) and the first and last 4-byte words of each of their matches'
// sources more than DMC_ZSTD_RING - 512 bytes back (nearer ones are the ring's).
// What it loads the leader never writes in this round: output before the front at xp.g (written
// in earlier rounds) and literals from the next round's first one on (the leader's stores stay
// below the in-tail literals it has still to copy: dmc_zstd_seq_exec's checks); groups below
// xp.lim (helper 2 posted them rounds ago). A corrupt group (values past any block) ends the walk.
__device__ __noinline__ void dmc_zstd_exec_prefetch(dmc_zstd_team* tm, dmc_u32 r, dmc_u32 lane) {
    const dmc_u32 g0 = tm->xp[r & 1u].g, lim = tm->xp[r & 1u].lim, nseq = tm->xs.nseq;
    const dmc_u32 gn = (g0 / DMC_ZSTD_AHEAD_RUN + 1) * DMC_ZSTD_AHEAD_RUN;
    const dmc_u32 g1 = dmc_min_u32(gn + DMC_ZSTD_AHEAD_RUN, lim);
    // the walk's place: the block's start with group 0, else where the last round left it
    const bool start = g0 == 0;
    dmc_u32 h = start ? 0u : tm->xh.h;
    dmc_zstd_frame_state fs;
    fs.rep0 = start ? tm->xs.rep[0] : tm->xh.rep[0];
    fs.rep1 = start ? tm->xs.rep[1] : tm->xh.rep[1];
    fs.rep2 = start ? tm->xs.rep[2] : tm->xh.rep[2];
    dmc_u32 op = start ? tm->xs.op : tm->xh.op, used = start ? 0u : tm->xh.used;
    // the leader's output front at g0, or one before it: output before it is written (g0 grows
    // from round to round: the first group loaded last round if the leader reached it, else the
    // front taken last round)
    const dmc_u32 front = start ? op : (g0 >= tm->xh.tg ? tm->xh.top : tm->xh.front);
    dmc_u32 tg = start ? 0u : tm->xh.tg, top = start ? op : tm->xh.top;
    const dmc_u8* out = tm->out;
    dmc_u32 lit_lo = 0, acc = 0;
    // (h < g0: a walk that stopped at a corrupt group, which the leader does not pass)
    const bool go = h >= g0 && gn < g1;
    if (go) {
        // the next round's groups' scratch lines first, a 16-byte vector a lane (the walk's loads
        // of them are then L1 hits)
        const dmc_u32x4* v = (const dmc_u32x4*)(tm->scratch + gn * DMC_ZSTD_GROUP_WORDS);
        const dmc_u32 nv = (g1 - gn) * DMC_ZSTD_GROUP_WORDS / 4;
        for (dmc_u32 k = lane; k < nv; k += DMC_WARP_SIZE) acc ^= dmc_zstd_touch16(v + k);
        lit_lo = used;
        for (; h < g1; h++) {
            if (h == gn) {
                lit_lo = used;
                tg = gn;
                top = op;
            }
            const dmc_u32* e = tm->scratch + h * DMC_ZSTD_GROUP_WORDS;
            const bool in = h * DMC_WARP_SIZE + lane < nseq;
            const dmc_u32 ll = in ? e[lane] : 0u, ml = in ? e[DMC_WARP_SIZE + lane] : 0u, ofv = e[2 * DMC_WARP_SIZE + lane];
            if (!__all_sync(0xffffffffu, ll <= DMC_ZSTD_BLOCK_MAX && ml <= DMC_ZSTD_BLOCK_MAX)) break;
            const dmc_u32 off = dmc_zstd_rep_resolve(&fs, ofv, ll, in, lane);
            dmc_u32 oend = ll + ml, lend = ll;
            dmc_zstd_scan2(&oend, &lend, lane);
            const dmc_u32 mop = op + oend - ml;  // the match's first byte
            if (h >= gn && in && off <= mop && off > DMC_ZSTD_RING - 512u) {
                const dmc_u32 a = (mop - off) & ~3u, b = (mop - off + ml - 1) & ~3u;
                if (a + 4 <= front) acc ^= *(const dmc_u32*)(out + a);
                if ((b >> 5) > (a >> 5) && b + 4 <= front) acc ^= *(const dmc_u32*)(out + b);  // another sector
            }
            op += __shfl_sync(0xffffffffu, oend, DMC_WARP_SIZE - 1);
            used += __shfl_sync(0xffffffffu, lend, DMC_WARP_SIZE - 1);
        }
    }
    __syncwarp();  // every lane read xh
    if (lane == 0) {
        tm->xh.h = h;
        tm->xh.op = op;
        tm->xh.used = used;
        tm->xh.rep[0] = fs.rep0;
        tm->xh.rep[1] = fs.rep1;
        tm->xh.rep[2] = fs.rep2;
        tm->xh.tg = tg;
        tm->xh.top = top;
        tm->xh.front = front;
    }
    // the next round's literals: the 16-byte vectors from its first literal on, within the block's
    const dmc_u8* lsrc = tm->xs.lsrc;
    const dmc_u32 lsize = tm->xs.lsize;
    if (go && h > gn && lsrc != nullptr && lit_lo < used && used <= lsize) {
        const dmc_u64 lo = ((dmc_u64)(lsrc + lit_lo) + 15u) & ~(dmc_u64)15u, end = (dmc_u64)(lsrc + lsize);
        const dmc_u64 hi = dmc_min_u64((dmc_u64)(lsrc + used) + 15u, end);
        for (dmc_u64 v = lo + 16u * lane; v + 16u <= hi; v += 16u * DMC_WARP_SIZE)
            acc ^= dmc_zstd_touch16((const void*)v);
    }
    tm->xsink[lane] = acc;
}

// A leader executing a block from the scratch: posts the next round (g: the next group it
// executes, lim: the groups it may read; dmc_zstd_team::xp) and ends this round. Returns the
// round posted (dmc_zstd_team_post).
__device__ __forceinline__ dmc_u32 dmc_zstd_post_xp(dmc_zstd_team* tm, dmc_u32 g, dmc_u32 lim, dmc_u32 lane) {
    if (lane == 0) {
        tm->xp[tm->round & 1u].g = g;
        tm->xp[tm->round & 1u].lim = lim;
    }
    return dmc_zstd_team_post(tm, DMC_ZSTD_TASK_IDLE | DMC_ZSTD_TASK_XP, lane);
}

// Checks and executes a group of n (1..32) of a block's sequences, lane j holding sequence j's
// literals length, match length and offset value; `bad`: the index of one the bitstream could
// not give (DMC_WARP_SIZE: none). All 32 lanes; *op_io, L->used, *block_out and the repeat
// offsets (dmc_zstd_rep_resolve) move past the group.
// Warp scans give each sequence its output start and literal index, so each lane makes its own
// sequence's checks (those a sequence-by-sequence loop would make, in its order) and the group's
// first failing check is the status (then nothing of the group is written). The group then goes
// out in runs of consecutive short sequences, each a dmc_zstd_seq_batch (its stores may not reach
// the first in-tail literal it reads), and long sequences alone: the literals, then the match.
// A sequence-by-sequence loop spent ~110 instructions per sequence on the checks and the batch
// bookkeeping, every lane the same.
template <bool RING>
__device__ __forceinline__ dmc_u32 dmc_zstd_seq_exec(dmc_u8* out, dmc_u32 out_len, dmc_u32* op_io, dmc_zstd_lits* L,
                                                     dmc_zstd_frame_state* fs, dmc_u32* block_out, dmc_u32 n,
                                                     dmc_u32 bad, dmc_u32 ll, dmc_u32 ml, dmc_u32 ofv, dmc_u32 lane,
                                                     dmc_u8* rb) {
    const bool in = lane < n;
    if (!in) {
        ll = 0;
        ml = 0;
    }
    const dmc_u32 off = dmc_zstd_rep_resolve(fs, ofv, ll, in && lane < bad, lane);
    // inclusive scans: the group's output and literals up to the end of this lane's sequence
    dmc_u32 oend = ll + ml, lend = ll;
    dmc_zstd_scan2(&oend, &lend, lane);
    const dmc_u32 op0 = *op_io, bo = *block_out + oend;  // the block's output after this sequence
    oend += op0;
    lend += L->used;
    const dmc_u32 sop = oend - ml - ll, lu = lend - ll;  // this sequence's first byte, first literal
    const dmc_u32 mop = sop + ll;                          // its match's first byte
    dmc_u32 st = DMC_STATUS_OK;
    if (lane == bad) {
        st = DMC_STATUS_CORRUPT;
    } else if (ll > L->size - lu) {
        st = DMC_STATUS_CORRUPT;
    } else if (ll > out_len - sop) {
        st = DMC_STATUS_DST_OVERFLOW;
    } else if (bo > fs->block_max) {
        st = DMC_STATUS_CORRUPT;
    } else if (ml > (L->kind == 2 ? L->tail + lu + ll : out_len) - mop) {
        // the match may not reach the literals still to copy (in-tail literals) nor past the
        // output range
        st = DMC_STATUS_DST_OVERFLOW;
    } else if (off == 0 || off > mop - fs->frame_start) {
        st = DMC_STATUS_BAD_OFFSET;
    }
    const unsigned fail = __ballot_sync(0xffffffffu, in && st != DMC_STATUS_OK);
    if (fail != 0) return __shfl_sync(0xffffffffu, st, __ffs(fail) - 1);
    *block_out = __shfl_sync(0xffffffffu, bo, DMC_WARP_SIZE - 1);
    // a match of DMC_ZSTD_RUN_MIN bytes or more that overlaps its source (a run) goes out alone
    // too: dmc_zstd_match stores it without loads or by doubling; in a batch each of its bytes
    // would be resolved through the batch's sequences, one binary search of shuffles per step (at
    // 64 bytes the zstd fixtures' model time rose 11 %, at 128 5 %, with the label image's gain
    // the same)
    const bool short_seq = in && ll < DMC_ZSTD_WIDE_MIN && ml < DMC_ZSTD_RUN_MIN && !(ml >= DMC_ZSTD_WIDE_MIN && off >= ml);
    for (dmc_u32 s = 0; s < n;) {
        // the run from s: short sequences whose stores end at or before the first in-tail literal
        // the run reads (the lanes past the group never join)
        const dmc_u32 lim = L->tail + __shfl_sync(0xffffffffu, lu, s);
        const bool join = short_seq && lane >= s && (L->kind != 2 || lim >= oend);
        const unsigned stop = __ballot_sync(0xffffffffu, !join && lane >= s);
        const dmc_u32 e = stop != 0 ? (dmc_u32)__ffs(stop) - 1 : DMC_WARP_SIZE;
        if (e > s) {
            // sequence s + k on lane k (ll < 64, ml < 128: short)
            const dmc_u32 from = (lane + s) & (DMC_WARP_SIZE - 1);
            const dmc_u32 blen = __shfl_sync(0xffffffffu, ll | ml << 8, from), boff = __shfl_sync(0xffffffffu, off, from);
            const dmc_u32 bstart = __shfl_sync(0xffffffffu, sop, from), blu = __shfl_sync(0xffffffffu, lu, from);
            L->used = __shfl_sync(0xffffffffu, lend, e - 1);
            dmc_zstd_seq_batch(out, __shfl_sync(0xffffffffu, sop, s), __shfl_sync(0xffffffffu, oend, e - 1), L, e - s,
                               blen, boff, bstart, blu, lane, rb, fs->ring_lo);
            s = e;
            continue;
        }
        // sequence s alone
        const dmc_u32 op = __shfl_sync(0xffffffffu, sop, s), sll = __shfl_sync(0xffffffffu, ll, s);
        const dmc_u32 sml = __shfl_sync(0xffffffffu, ml, s), soff = __shfl_sync(0xffffffffu, off, s);
        L->used = __shfl_sync(0xffffffffu, lu, s);
        // literals of DMC_ZSTD_WIDE_MIN or more from the input, or in the tail and not close
        // behind the front, go with aligned 4-byte stores; else in rounds (dmc_zstd_copy_lits:
        // in-tail literals that the copy may overlap)
        const bool wide_lits = sll >= DMC_ZSTD_WIDE_MIN && L->kind != 1 &&
                               (L->kind != 2 || L->tail + L->used - op >= sll + sml);
        // a match of DMC_ZSTD_WIDE_MIN to DMC_ZSTD_FAR_MIN bytes that does not overlap its source
        // likewise (longer ones: dmc_zstd_match's 16-byte rounds)
        const bool near_match = sml >= DMC_ZSTD_WIDE_MIN && sml < DMC_ZSTD_FAR_MIN && soff >= sml;
        __syncwarp();  // the earlier sequences' bytes are visible to every lane
        // the literals, then the match (its source may be these literals: a __syncwarp between);
        // one call site each: fewer live registers
        for (dmc_u32 part = 0; part < 2; part++) {
            // with a ring, a match whose source it holds (every byte from ring_lo on, read after the
            // literals, which may have moved it) goes through it; another's bytes do not go into it
            // (unless a near match's: dmc_warp_copy_wide's writes), and it holds the bytes after the
            // match only
            const bool ring_match = RING && part == 1 && op + sll - soff >= fs->ring_lo;
            if (ring_match) {
                dmc_zstd_ring_match(out, op + sll, soff, sml, lane, rb);
            } else if (part == 0 ? wide_lits : near_match) {
                dmc_warp_copy_wide(out + op + (part == 0 ? 0 : sll), part == 0 ? L->src + L->used : out + op + sll - soff,
                                   part == 0 ? sll : sml, lane, dmc_ring<RING, DMC_ZSTD_RING>{rb});
            } else if (part == 0) {
                dmc_zstd_copy_lits(out, op, L, sll, lane, false, rb, &fs->ring_lo);
            } else {
                dmc_zstd_match(out, op + sll, soff, sml, lane);
            }
            if (part == 1 && RING && !ring_match && !near_match) fs->ring_lo = op + sll + sml;
            __syncwarp();
        }
        s++;
    }
    *op_io = __shfl_sync(0xffffffffu, oend, DMC_WARP_SIZE - 1);
    L->used = __shfl_sync(0xffffffffu, lend, DMC_WARP_SIZE - 1);
    return DMC_STATUS_OK;
}

// Decodes one compressed block b[0..n) to out[*op..). out_len bounds the job's output.
// b[n..n+navail): what follows the block in its frame (navail 0: it is the last), for a team's
// look ahead (dmc_zstd_look_ahead).
__device__ dmc_u32 dmc_zstd_block(dmc_zstd_smem* sm, dmc_zstd_frame_state* fs, const dmc_u8* b, dmc_u32 n,
                                  dmc_u32 navail, dmc_u8* out, dmc_u32 out_len, dmc_u32* op_io, dmc_u32 lane) {
    dmc_u32 op = *op_io;
    if (sm->tm != nullptr && sm->tm->ahead_at != 0 && lane == 0) {
        // a block decoded ahead, which the leader will execute from the scratch: its start for
        // helper 1 (dmc_zstd_team::xs; no XP round runs before it posts the block's first)
        sm->tm->xs.op = op;
        sm->tm->xs.rep[0] = fs->rep0;
        sm->tm->xs.rep[1] = fs->rep1;
        sm->tm->xs.rep[2] = fs->rep2;
    }
    // ---- Literals section ----
    dmc_zstd_lhdr h;
    dmc_u32 bp = 0;
    {
        const dmc_u32 st = dmc_zstd_lits_header(b, n, fs->block_max, &h, &bp);
        if (st != DMC_STATUS_OK) return st;
    }
    dmc_zstd_lits L;
    L.used = 0;
    L.tail = 0;
    L.rle = 0;
    L.size = h.regen;
    if (h.ltype == 0) {
        L.kind = 0;
        L.src = b + h.hs;
    } else if (h.ltype == 1) {
        L.kind = 1;
        L.src = b;
        L.rle = b[h.hs];
    } else {
        const dmc_u32 regen = h.regen, csize = h.csize, streams = h.streams;
        const dmc_u8* c = b + h.hs;
        dmc_u32 th = 0;
        if (h.ltype == 2) {
            __syncwarp();  // earlier readers of the Huffman table are done
            if (lane == 0) {
                dmc_u32 used = 0, nw = 0;
                const dmc_u32 s = dmc_zstd_read_weights(sm, c, csize, &used, &nw);
                sm->res[0] = s;
                sm->res[1] = used;
                sm->res[2] = nw;
            }
            __syncwarp();
            if (sm->res[0] != DMC_STATUS_OK) return sm->res[0];
            th = sm->res[1];
            dmc_u32 log = 0;
            const dmc_u32 s = dmc_zstd_build_huffman(sm, sm->res[2], &log, lane);
            if (s != DMC_STATUS_OK) return s;
            fs->tabs = (fs->tabs & ~15u) | log;
        } else if ((fs->tabs & 15u) == 0) {
            return DMC_STATUS_CORRUPT;  // treeless literals without an earlier table
        }
        if (th > csize) return DMC_STATUS_CORRUPT;
        // The literals go to the tail of the output range.
        if (regen > out_len - op) return DMC_STATUS_DST_OVERFLOW;
        const dmc_u32 tail = out_len - regen;
        dmc_u8* lit = out + tail;
        const dmc_u8* sp = c + th;
        const dmc_u32 slen = csize - th;
        // The streams one after another, each on the whole warp (unless a team decodes them
        // side by side, below). 4 streams: a jump table of the first three streams' sizes (each checked
        // against the bytes left when it is read), then segments of seg literals and a last
        // one of the rest.
        dmc_u32 seg = regen, start = 0;
        if (streams == 4) {
            if (slen < 6) return DMC_STATUS_CORRUPT;
            seg = (regen + 3) / 4;
            if (3 * seg > regen) return DMC_STATUS_CORRUPT;
            start = 6;
        }
        // With a team the four streams go side by side: the jump table read here, the streams
        // posted, decoded in one round (the leader's stream 0 here, the helpers' the others), read.
        dmc_zstd_team* tm = sm->tm;
        const bool side_by_side = streams == 4 && tm != nullptr;
        for (dmc_u32 k = 0; k < streams; k++) {
            const dmc_u32 len = k + 1 < streams ? dmc_load_le16(sp + 2 * k) : slen - start;
            if (len > slen - start) return DMC_STATUS_CORRUPT;
            const dmc_u32 cnt = k + 1 < streams ? seg : regen - k * seg;
            if (side_by_side) {
                if (lane == 0) {
                    tm->p[k] = sp + start;
                    tm->len[k] = len;
                    tm->dst[k] = lit + k * seg;
                    tm->cnt[k] = cnt;
                }
            } else {
                const dmc_u32 st = dmc_zstd_huf_stream(sm, fs->tabs & 15u, sp + start, len, lit + k * seg, cnt, lane);
                if (st != DMC_STATUS_OK) return st;
            }
            start += len;
        }
        if (side_by_side) {
            if (lane == 0) tm->log = fs->tabs & 15u;
            dmc_zstd_team_post(tm, DMC_ZSTD_TASK_HUF, lane);
            const dmc_u32 st = dmc_zstd_huf_stream(sm, fs->tabs & 15u, tm->p[0], tm->len[0], tm->dst[0], tm->cnt[0], lane);
            dmc_zstd_team_post(tm, DMC_ZSTD_TASK_IDLE, lane);  // the helpers' streams are done
            if (st != DMC_STATUS_OK) return st;
            for (dmc_u32 k = 1; k < 4; k++)
                if (tm->st[k] != DMC_STATUS_OK) return tm->st[k];
        }
        __syncwarp();  // the decoded literals are visible to every lane
        L.kind = 2;
        L.src = lit;
        L.tail = tail;
    }
    // ---- Sequences section ----
    dmc_zstd_team* tm = sm->tm;
    dmc_u32 nseq = 0;
    dmc_u32 ahead_at = 0;
    if (tm != nullptr) {
        ahead_at = tm->ahead_at;
        __syncwarp();
        if (lane == 0) tm->ahead_at = 0;
    }
    const dmc_u32 ahead_round = ahead_at - 1;
    const bool from_ahead = ahead_at != 0;  // helper 2 decodes this block's sequences
    if (from_ahead) {
        // the header and tables were read by dmc_zstd_look_ahead (posted to the team rounds ago)
        nseq = tm->anseq;
        fs->tabs = (tm->atabs & ~15u) | (fs->tabs & 15u);
    } else {
        const dmc_u32 st = dmc_zstd_nseq(b, n, &bp, &nseq);
        if (st != DMC_STATUS_OK) return st;
    }
    if (nseq > 0 && !from_ahead) {
        const dmc_u64 t = dmc_zstd_seq_tables(sm, fs->tabs, b, n, bp, lane);
        if (((t >> 32) & 0xFFu) != DMC_STATUS_OK) return (dmc_u32)(t >> 32) & 0xFFu;
        fs->tabs = (dmc_u32)t;
        bp = (dmc_u32)(t >> 40);
    }
    dmc_u32 block_out = 0;
    if (nseq > 0 && tm != nullptr) {
        // A team: the groups come from helper 1, a group ahead through the two shared buffers,
        // or, for a block decoded ahead, from the scratch as helper 2 posts them (aprog: trusted
        // from the round after the one that started it; a round every DMC_ZSTD_AHEAD_RUN groups
        // lets it go on). Meanwhile the leader looks at the next block, whose sequences helper 2
        // may decode side by side (dmc_zstd_look_ahead).
        bool ahead = false;
        if (!from_ahead) {
            if (lane == 0) {
                tm->sp = b + bp;
                tm->slen = n - bp;
                tm->nseq = nseq;
                tm->tabs = fs->tabs;
            }
            dmc_zstd_team_post(tm, DMC_ZSTD_TASK_SEQ0, lane);
            ahead = dmc_zstd_look_ahead(sm, fs->tabs, fs->block_max, b + n, navail, lane);
        }
        dmc_u32 r = tm->round - 1;  // the round in progress
        __syncwarp();
        const dmc_u32 groups = (nseq + DMC_WARP_SIZE - 1) / DMC_WARP_SIZE;
        dmc_u32 done = 0, abad = nseq, aend = DMC_STATUS_OK;
        if (from_ahead) {  // the block's start for helper 1, and a round to load the second run's groups
            if (lane == 0) {
                tm->xs.lsrc = L.kind == 1 ? nullptr : L.src;
                tm->xs.lsize = L.size;
                tm->xs.nseq = nseq;
            }
            if (r > ahead_round) done = tm->aprog[(r - 1) & 1u][0];
            r = dmc_zstd_post_xp(tm, 0, dmc_min_u32(done, groups), lane);
        }
        for (dmc_u32 g = 0; g < groups; g++) {
            const dmc_u32 i = g * DMC_WARP_SIZE, cnt = dmc_min_u32(nseq - i, DMC_WARP_SIZE);
            const dmc_u32* e;
            dmc_u32 bad;
            if (from_ahead) {
                for (;;) {
                    if (r > ahead_round) {
                        const dmc_u32* pr = tm->aprog[(r - 1) & 1u];
                        done = pr[0];
                        abad = pr[1];
                        aend = pr[2];
                    }
                    if (g < done) break;
                    r = dmc_zstd_post_xp(tm, g, dmc_min_u32(done, groups), lane);
                }
                e = tm->scratch + g * DMC_ZSTD_GROUP_WORDS;
                bad = abad >= i && abad - i < DMC_WARP_SIZE ? abad - i : DMC_WARP_SIZE;
            } else {
                // group g: decoded by helper 1 in the round this post ends
                const dmc_u32 task = (i + DMC_WARP_SIZE < nseq ? DMC_ZSTD_TASK_SEQ : DMC_ZSTD_TASK_IDLE) |
                                     (ahead ? DMC_ZSTD_TASK_AHEAD : 0u);
                r = dmc_zstd_team_post(tm, task, lane);
                if (ahead && lane == 0) tm->ahead_at = r + 1;
                ahead = false;
                e = tm->seq[g & 1u];
                bad = tm->bad[g & 1u];
            }
            const dmc_u32 ll = e[lane], ml = e[DMC_WARP_SIZE + lane], ofv = e[2 * DMC_WARP_SIZE + lane];
            const dmc_u32 st =
                dmc_zstd_seq_exec<true>(out, out_len, &op, &L, fs, &block_out, cnt, bad, ll, ml, ofv, lane, dmc_zstd_ring_of(sm));
            if (st != DMC_STATUS_OK) return st;
            if (from_ahead && g % DMC_ZSTD_AHEAD_RUN == DMC_ZSTD_AHEAD_RUN - 1 && g + 1 < groups)
                r = dmc_zstd_post_xp(tm, g + 1, dmc_min_u32(done, groups), lane);
        }
        const dmc_u32 st = from_ahead ? aend : tm->end_st;
        if (st != DMC_STATUS_OK) return st;
    } else if (nseq > 0) {
        // A warp alone: the sequences go in groups of 32 (dmc_zstd_seq_group: every lane walks
        // the FSE chain in step through a reader of its own — dmc_zlr, a 64-bit container and
        // the next word loaded ahead, the lanes loading the same words, one broadcast request
        // per 4 bytes — so the dependent chain has no shuffle, then lane j reads sequence j's
        // extra bits), each checked and executed by the whole warp (dmc_zstd_seq_exec). A
        // team's helpers decode them the same way (dmc_zstd_helper).
        dmc_zstd_seqdec D = {};
        dmc_zstd_seq_start(&D, b + bp, n - bp, nseq, fs->tabs);
        while (D.i < D.nseq) {
            const dmc_u32 cnt = dmc_min_u32(D.nseq - D.i, DMC_WARP_SIZE);
            dmc_u32 ll, ml, ofv;
            const dmc_u32 bad = dmc_zstd_seq_group(sm, &D, lane, &ll, &ml, &ofv);
            const dmc_u32 st = dmc_zstd_seq_exec<false>(out, out_len, &op, &L, fs, &block_out, cnt, bad, ll, ml, ofv, lane, nullptr);
            if (st != DMC_STATUS_OK) return st;
        }
        const dmc_u32 st = dmc_zstd_seq_end(&D);
        if (st != DMC_STATUS_OK) return st;
    } else if (bp != n) {
        return DMC_STATUS_CORRUPT;
    }
    // Last literals.
    const dmc_u32 rest = L.size - L.used;
    if (rest > out_len - op) return DMC_STATUS_DST_OVERFLOW;
    block_out += rest;
    if (block_out > fs->block_max) return DMC_STATUS_CORRUPT;
    const bool ring = tm != nullptr && rest <= DMC_ZSTD_RING_LITS_MAX;
    dmc_zstd_copy_lits(out, op, &L, rest, lane, true, ring ? dmc_zstd_ring_of(sm) : nullptr, &fs->ring_lo);
    if (tm != nullptr && !ring) fs->ring_lo = op + rest;  // not mirrored
    op += rest;
    __syncwarp();  // the next block's matches read these bytes
    *op_io = op;
    return DMC_STATUS_OK;
}

// Decodes one frame whose magic number was consumed; in[*ip..) is its header.
__device__ dmc_u32 dmc_zstd_frame(dmc_zstd_smem* sm, const dmc_u8* in, dmc_u32 in_len, dmc_u32* ip_io, dmc_u8* out,
                                  dmc_u32 out_len, dmc_u32* op_io, bool verify, dmc_u32 lane) {
    dmc_u32 ip = *ip_io;
    if (ip >= in_len) return DMC_STATUS_SRC_TRUNCATED;
    const dmc_u32 fhd = in[ip++];
    if (fhd & 0x08) return DMC_STATUS_CORRUPT;  // reserved bit
    const dmc_u32 fcs_flag = fhd >> 6;
    const bool single = (fhd >> 5) & 1;
    const bool has_checksum = (fhd >> 2) & 1;
    const dmc_u32 did_flag = fhd & 3;
    const dmc_u32 did_size = did_flag == 3 ? 4 : did_flag;
    const dmc_u32 fcs_size = fcs_flag == 0 ? (single ? 1 : 0) : (1u << fcs_flag);
    const dmc_u32 hdr = (single ? 0 : 1) + did_size + fcs_size;
    if (hdr > in_len - ip) return DMC_STATUS_SRC_TRUNCATED;
    dmc_u64 window = 0;
    if (!single) {
        const dmc_u32 wd = in[ip++];
        const dmc_u32 wlog = 10 + (wd >> 3);
        const dmc_u64 wbase = 1ull << wlog;
        window = wbase + (wbase >> 3) * (wd & 7);
    }
    dmc_u32 did = 0;
    for (dmc_u32 k = 0; k < did_size; k++) did |= (dmc_u32)in[ip + k] << (8 * k);
    ip += did_size;
    if (did != 0) return DMC_STATUS_UNSUPPORTED;
    dmc_u64 fcs = 0;
    for (dmc_u32 k = 0; k < fcs_size; k++) fcs |= (dmc_u64)in[ip + k] << (8 * k);
    if (fcs_size == 2) fcs += 256;
    ip += fcs_size;
    if (single) window = fcs;
    __syncwarp();  // the lanes read the last frame's fields
    if (lane == 0) {
        sm->fcs = fcs;
        sm->fflags = (has_checksum ? 1u : 0u) | (fcs_size > 0 ? 2u : 0u);
    }
    __syncwarp();
    dmc_zstd_frame_state fs;
    fs.frame_start = *op_io;
    fs.block_max = (dmc_u32)dmc_min_u64(window, DMC_ZSTD_BLOCK_MAX);
    fs.rep0 = 1;
    fs.rep1 = 4;
    fs.rep2 = 8;
    fs.tabs = 0;
    fs.ring_lo = *op_io;
    dmc_u32 op = *op_io;
    for (;;) {
        if (in_len - ip < 3) return DMC_STATUS_SRC_TRUNCATED;
        const dmc_u32 bh = in[ip] | ((dmc_u32)in[ip + 1] << 8) | ((dmc_u32)in[ip + 2] << 16);
        ip += 3;
        const bool last = bh & 1;
        const dmc_u32 btype = (bh >> 1) & 3;
        const dmc_u32 bsize = bh >> 3;
        if (btype == 3) return DMC_STATUS_CORRUPT;
        if (bsize > fs.block_max) return DMC_STATUS_CORRUPT;
        if (btype == 0) {
            if (bsize > in_len - ip) return DMC_STATUS_SRC_TRUNCATED;
            if (bsize > out_len - op) return DMC_STATUS_DST_OVERFLOW;
            dmc_zstd_team* tm = sm->tm;
            if (tm != nullptr && bsize >= DMC_ZSTD_TEAM_COPY_MIN) {
                // the whole team, in a round of its own; the next round's barrier makes the
                // helpers' bytes visible to the leader's next reads
                if (lane == 0) {
                    tm->cdst = out + op;
                    tm->csrc = in + ip;
                    tm->clen = bsize;
                }
                dmc_zstd_team_post(tm, DMC_ZSTD_TASK_COPY, lane);
                dmc_zstd_team_copy(tm, 0, lane);
                dmc_zstd_team_post(tm, DMC_ZSTD_TASK_IDLE, lane);
            } else {
                dmc_warp_copy_long(out + op, in + ip, bsize, lane);
            }
            ip += bsize;
            op += bsize;
            fs.ring_lo = op;  // not mirrored
        } else if (btype == 1) {
            if (in_len - ip < 1) return DMC_STATUS_SRC_TRUNCATED;
            if (bsize > out_len - op) return DMC_STATUS_DST_OVERFLOW;
            const dmc_u8 v = in[ip];
            dmc_zstd_fill_wide(out + op, v, bsize, lane);
            ip += 1;
            op += bsize;
            fs.ring_lo = op;  // not mirrored
        } else {
            if (bsize > in_len - ip) return DMC_STATUS_SRC_TRUNCATED;
            __syncwarp();  // earlier raw/RLE bytes are visible to this block's matches
            // what follows in the frame, for a team's look ahead
            const dmc_u32 st = dmc_zstd_block(sm, &fs, in + ip, bsize, last ? 0 : in_len - ip - bsize, out, out_len, &op, lane);
            if (st != DMC_STATUS_OK) return st;
            ip += bsize;
        }
        if (last) break;
    }
    __syncwarp();
    if ((sm->fflags & 2u) && (dmc_u64)(op - fs.frame_start) != sm->fcs) return DMC_STATUS_SIZE_MISMATCH;
    if (sm->fflags & 1u) {
        if (in_len - ip < 4) return DMC_STATUS_SRC_TRUNCATED;
        if (verify) {
            const dmc_u64 h = dmc_zstd_xxh64(out + fs.frame_start, op - fs.frame_start, lane);
            if ((dmc_u32)h != dmc_load_le32(in + ip)) return DMC_STATUS_CHECKSUM_MISMATCH;
        }
        ip += 4;
    }
    *ip_io = ip;
    *op_io = op;
    return DMC_STATUS_OK;
}

// Blocks per SM for ptxas's register target: 4 blocks of 4 warps (16 warps per SM) allow up to
// 128 registers; the kernel takes 127 on sm_80 and 128 on sm_90, no spill. At 20 warps (96
// registers: sm_90's target until the per-lane Huffman and sequence readers) ptxas spilled
// 24 bytes of the kernel's entry state, which the compile test forbids; the H200 runs of
// f51d4fa–fd22e7f measured that spilling build. (DMC_ZSTD_MIN_BLOCKS: common.cuh.)
// Jobs and warps: a block has DMC_ZSTD_WARPS_PER_BLOCK (= DMC_ZSTD_TEAM) warps. The first
// n_team jobs of ids get a block each, whose warps are the job's team: warp 0 (the leader) walks
// the job and posts the helpers' tasks (dmc_zstd_helper), round by round. Each later block holds
// DMC_ZSTD_WARPS_PER_BLOCK jobs of the rest, a warp each (no barriers). The launcher (decode.rs)
// chooses n_team per wave: every job while they fit the device's resident blocks, else the jobs
// whose bytes are mostly a team's (four-stream literals, long raw blocks).
extern "C" __global__ void __launch_bounds__(DMC_ZSTD_WARPS_PER_BLOCK * DMC_WARP_SIZE, DMC_ZSTD_MIN_BLOCKS)
dmc_zstd_decode(const dmc_u8* __restrict__ src_base, dmc_u64 src_total, dmc_u8* __restrict__ dst_base,
                dmc_u64 dst_total, const dmc_stream* __restrict__ streams, const dmc_u32* __restrict__ ids,
                dmc_u32 n_ids, dmc_u32* __restrict__ status, dmc_u32* __restrict__ actual, dmc_u64 seq_half,
                dmc_u32 n_team) {
    __shared__ dmc_zstd_smem smem[DMC_ZSTD_WARPS_PER_BLOCK];
    __shared__ dmc_zstd_team team_sm;
    const dmc_u32 wib = threadIdx.x / DMC_WARP_SIZE;  // warp of the block
    const bool team = blockIdx.x < n_team;            // uniform over the block
    const dmc_u32 job = team ? blockIdx.x : n_team + (blockIdx.x - n_team) * DMC_ZSTD_WARPS_PER_BLOCK + wib;
    const dmc_u32 w = team ? wib : 0;  // warp of the job's team (0: the leader)
    const dmc_u32 lane = dmc_lane();
    if (job >= n_ids) return;  // the whole warp (team: block) leaves together
    const dmc_u32 sid = ids[job];
    const dmc_stream s = streams[sid];
    // every warp of a team checks the same descriptor: all leave here, or none
    if (!dmc_stream_ok(s, sid, src_total, dst_total, lane == 0 && w == 0, status, actual)) return;
    dmc_zstd_smem* sm = &smem[team ? 0 : wib];
    dmc_zstd_team* tm = team ? &team_sm : nullptr;
    if (w > 0) {
        dmc_zstd_helper(sm, tm, w, lane);
        return;
    }
    // A team's sequence scratch: the job's output range mirrored into the other half of the
    // wave's output buffer (seq_half bytes away: the unshuffle scratch half, whose bytes at a
    // zstd job's mirror no kernel touches before this one ends), 16-byte aligned; whole groups.
    dmc_u32* scratch = nullptr;
    dmc_u32 scratch_groups = 0;
    if (tm != nullptr && seq_half != 0) {
        const dmc_u64 m = s.dst_off >= seq_half ? s.dst_off - seq_half : s.dst_off + seq_half;
        const dmc_u64 pad = (16u - ((dmc_u64)(dst_base + m) & 15u)) & 15u;
        if (m + s.dst_len <= dst_total && s.dst_len > pad) {
            scratch_groups = (dmc_u32)((s.dst_len - pad) / (4u * DMC_ZSTD_GROUP_WORDS));
            if (scratch_groups > 0) scratch = (dmc_u32*)(dst_base + m + pad);
        }
    }
    if (lane == 0) {
        sm->tm = tm;
        if (tm != nullptr) {
            tm->round = 0;
            tm->ahead_at = 0;
            tm->scratch = scratch;
            tm->scratch_groups = scratch_groups;
            tm->out = dst_base + s.dst_off;
            for (dmc_u32 i = 0; i < 4; i++) tm->pf[i >> 1][i & 1u].p = nullptr;
        }
    }
    // the length codes, in both table sets of a team (dmc_zstd_seq_set), a set at a time (one
    // store request to consecutive words)
    for (dmc_u32 set = 0; set < (tm != nullptr ? 2u : 1u); set++) {
        for (dmc_u32 t = lane; t < DMC_ZSTD_CODES; t += DMC_WARP_SIZE) {
            sm[set].codes[t] = t < 20 ? dmc_zstd_ll_base[16 + t] | ((dmc_u32)dmc_zstd_ll_bits[16 + t] << 24)
                                      : dmc_zstd_ml_base[12 + t] | ((dmc_u32)dmc_zstd_ml_bits[12 + t] << 24);
        }
    }
    __syncwarp();  // the code tables and the team's fields are visible to every lane
    const dmc_u8* in = src_base + s.src_off;
    dmc_u8* out = dst_base + s.dst_off;
    const dmc_u32 in_len = s.src_len;
    const dmc_u32 out_len = s.dst_len;
    const bool verify = (s.flags & DMC_ZSTD_VERIFY_CHECKSUM) != 0;
    dmc_u32 ip = 0, op = 0;
    dmc_u32 st = in_len == 0 ? DMC_STATUS_SRC_TRUNCATED : DMC_STATUS_OK;
    while (st == DMC_STATUS_OK && ip < in_len) {
        if (in_len - ip < 4) {
            st = DMC_STATUS_SRC_TRUNCATED;
            break;
        }
        const dmc_u32 magic = dmc_load_le32(in + ip);
        ip += 4;
        if ((magic & 0xFFFFFFF0u) == 0x184D2A50u) {  // skippable frame
            if (in_len - ip < 4) {
                st = DMC_STATUS_SRC_TRUNCATED;
                break;
            }
            const dmc_u32 size = dmc_load_le32(in + ip);
            ip += 4;
            if (size > in_len - ip) {
                st = DMC_STATUS_SRC_TRUNCATED;
                break;
            }
            ip += size;
            continue;
        }
        if (magic != DMC_ZSTD_MAGIC) {
            st = DMC_STATUS_CORRUPT;
            break;
        }
        st = dmc_zstd_frame(sm, in, in_len, &ip, out, out_len, &op, verify, lane);
    }
    if (st == DMC_STATUS_OK && op != out_len) st = DMC_STATUS_SIZE_MISMATCH;
    if (tm != nullptr) dmc_zstd_team_post(tm, DMC_ZSTD_TASK_DONE, lane);  // the helpers leave
    if (lane == 0) {
        status[sid] = st;
        actual[sid] = op;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_zstd_decode,
                 (const dmc_u8* src_base, dmc_u64 src_total, dmc_u8* dst_base, dmc_u64 dst_total,
                  const dmc_stream* streams, const dmc_u32* ids, dmc_u32 n_ids, dmc_u32* status,
                  dmc_u32* actual, dmc_u64 seq_half, dmc_u32 n_team),
                 (src_base, src_total, dst_base, dst_total, streams, ids, n_ids, status, actual, seq_half, n_team))
#endif
