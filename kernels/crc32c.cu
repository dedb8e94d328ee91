// crc32c.cu — CRC32C (Castagnoli) verification of streams (zarr `crc32c` codec).
// Mapping: one block per stream; thread t takes the stream's 16-byte aligned words t, t + T,
// t + 2T, … (T = blockDim.x threads), so a warp loads 512 contiguous bytes per request. Per word
// it folds its running CRC into the word's first 4 bytes and reduces the 16 bytes with 32 nibble
// tables (one per nibble position); between two of its words it skips the 16·(T−1) bytes of the
// other threads (8 nibble tables of "multiply by x^(8·16·(T−1))"). The unaligned head and the
// tail (fewer than 16 bytes each) take a byte per lane of warp 0; thread 0's first word
// continues the head. Each thread's CRC is then shifted past the bytes that follow it (GF(2)
// multiply by x^(8n)) and the block XOR-reduces the parts (a warp reduction, then one shared
// atomic per warp).
// Tables of 16 entries (4-bit indices) lie in 16 banks: a warp's lookups into one table never
// conflict (a 256-entry byte table would, with random data).
// The stream's `flags` field holds the expected CRC; `actual` receives the computed one.
#include "common.cuh"

#define DMC_CRC32C_POLY 0x82F63B78u
// Nibble tables of 16 entries: one per nibble of a 16-byte word, one per nibble of the register.
#define DMC_CRC32C_WORD_TABLES 32
#define DMC_CRC32C_SKIP_TABLES 8

// Product of two polynomials in the reflected representation (bit 31 = x^0), modulo the CRC
// polynomial.
__device__ __forceinline__ dmc_u32 dmc_crc_mulmod(dmc_u32 a, dmc_u32 b) {
    dmc_u32 p = 0;
    for (int i = 0; i < 32; i++) {
        if (a & (0x80000000u >> i)) p ^= b;
        b = (b & 1u) ? ((b >> 1) ^ DMC_CRC32C_POLY) : (b >> 1);
    }
    return p;
}

// x^(8n) modulo the CRC polynomial, reflected, by square-and-multiply.
__device__ __forceinline__ dmc_u32 dmc_crc_x8n(dmc_u64 n) {
    dmc_u32 r = 0x80000000u;   // x^0
    dmc_u32 sq = 0x00800000u;  // x^8
    while (n != 0) {
        if (n & 1u) r = dmc_crc_mulmod(r, sq);
        sq = dmc_crc_mulmod(sq, sq);
        n >>= 1;
    }
    return r;
}

// c · x^bits, one bit at a time (the table entries).
__device__ __forceinline__ dmc_u32 dmc_crc_shift_bits(dmc_u32 c, dmc_u32 bits) {
    for (dmc_u32 i = 0; i < bits; i++) c = (c & 1u) ? ((c >> 1) ^ DMC_CRC32C_POLY) : (c >> 1);
    return c;
}

// Raw CRC (no initial value, no final xor) of the 16 bytes `q` with `c` (the raw CRC of what
// precedes them) folded in: word table j holds the CRC of a 16-byte word whose only non-zero
// nibble is nibble j (byte j/2, low nibble first).
__device__ __forceinline__ dmc_u32 dmc_crc_word(const dmc_u32* word_tab, dmc_u32 c, const dmc_u32x4& q) {
    dmc_u32 r = 0;
    for (dmc_u32 k = 0; k < 4; k++) {
        const dmc_u32 x = k == 0 ? q.w[0] ^ c : q.w[k];
        for (dmc_u32 m = 0; m < 8; m++) r ^= word_tab[(8 * k + m) * 16 + ((x >> (4 * m)) & 15u)];
    }
    return r;
}

extern "C" __global__ void __launch_bounds__(DMC_CRC32C_THREADS)
dmc_crc32c(const dmc_u8* __restrict__ base, dmc_u64 total, const dmc_stream* __restrict__ streams,
           const dmc_u32* __restrict__ ids, dmc_u32 n_ids, dmc_u32* __restrict__ status,
           dmc_u32* __restrict__ actual) {
    __shared__ dmc_u32 word_tab[DMC_CRC32C_WORD_TABLES * 16];
    __shared__ dmc_u32 skip_tab[DMC_CRC32C_SKIP_TABLES * 16];
    __shared__ dmc_u32 acc;
    if (blockIdx.x >= n_ids) return;
    const dmc_u32 sid = ids[blockIdx.x];
    const dmc_stream* s = streams + sid;
    const dmc_u64 src_off = s->src_off;
    const dmc_u64 n = s->src_len;  // up to u32::MAX: the length arithmetic below is 64-bit
    const dmc_u32 t = threadIdx.x, nt = blockDim.x;
    if (!dmc_in_bounds(src_off, n, total)) {
        if (t == 0) {
            status[sid] = DMC_STATUS_BAD_DESCRIPTOR;
            actual[sid] = 0;
        }
        return;
    }
    // word table j, entry v: nibble v at byte j/2 of a 16 byte word, times x^(8·(16 − j/2));
    // skip table k, entry v: nibble v at bit 4k of the register, times x^(8·16·(nt − 1)).
    for (dmc_u32 e = t; e < (DMC_CRC32C_WORD_TABLES + DMC_CRC32C_SKIP_TABLES) * 16; e += nt) {
        const dmc_u32 j = e / 16, v = e % 16;
        if (j < DMC_CRC32C_WORD_TABLES) {
            word_tab[e] = dmc_crc_shift_bits(v << (4 * (j % 2)), 8 * (16 - j / 2));
        } else {
            const dmc_u32 k = j - DMC_CRC32C_WORD_TABLES;
            skip_tab[e - DMC_CRC32C_WORD_TABLES * 16] = dmc_crc_mulmod(v << (4 * k), dmc_crc_x8n(16ull * (nt - 1)));
        }
    }
    if (t == 0) acc = 0;
    __syncthreads();
    const dmc_u8* p = base + src_off;
    const dmc_u64 head = dmc_min_u64(n, (16u - (dmc_u32)((dmc_u64)p & 15u)) & 15u);
    const dmc_u64 words = (n - head) / 16;
    const dmc_u64 tail = n - head - 16 * words;
    const dmc_u8* w = p + head;  // 16-byte aligned
    dmc_u32 c = 0;     // raw CRC of the stream's bytes [0, end), other threads' bytes as zeros
    dmc_u64 end = 0;
    dmc_u32 tail_crc = 0;
    if (t < DMC_WARP_SIZE) {
        // warp 0: lanes 0-15 take the head's bytes, lanes 16-31 the tail's (each fewer than 16):
        // byte q of a part of `len` bytes contributes byte · x^(8·(len − q)); a butterfly in
        // each half of the warp XORs them into the part's raw CRC.
        const bool in_tail = t >= 16;
        const dmc_u32 q = t % 16;
        const dmc_u64 len = in_tail ? tail : head;
        const dmc_u64 at = in_tail ? head + 16 * words : 0;
        dmc_u32 v = 0;
        if (q < len) v = dmc_crc_shift_bits(p[at + q], 8 * (dmc_u32)(len - q));
        for (int m = 8; m >= 1; m /= 2) v ^= __shfl_xor_sync(0xFFFFFFFFu, v, m);
        if (t == 0) {
            c = v;  // thread 0's first word continues the head
            end = head;
        }
        if (t == 16) tail_crc = v;  // ends the stream: no shift
    }
    for (dmc_u64 i = t; i < words; i += nt) {
        if (i >= nt) {
            // skip the other threads' 16·(nt − 1) bytes since this thread's previous word
            dmc_u32 r = 0;
            for (dmc_u32 k = 0; k < DMC_CRC32C_SKIP_TABLES; k++) r ^= skip_tab[k * 16 + ((c >> (4 * k)) & 15u)];
            c = r;
        }
        c = dmc_crc_word(word_tab, c, dmc_load16(w + 16 * i));
        end = head + 16 * (i + 1);
    }
    const dmc_u32 part = (c != 0 ? dmc_crc_mulmod(c, dmc_crc_x8n(n - end)) : 0u) ^ tail_crc;
    const dmc_u32 warp_part = __reduce_xor_sync(0xFFFFFFFFu, part);
    if (dmc_lane() == 0 && warp_part != 0) atomicXor(&acc, warp_part);
    __syncthreads();
    if (t == 0) {
        // standard CRC32C: initial register ~0 shifted through the n bytes, final xor ~0
        const dmc_u32 crc = acc ^ dmc_crc_mulmod(0xFFFFFFFFu, dmc_crc_x8n(n)) ^ 0xFFFFFFFFu;
        actual[sid] = crc;
        status[sid] = (crc == s->flags) ? DMC_STATUS_OK : DMC_STATUS_CRC_MISMATCH;
    }
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_crc32c,
                 (const dmc_u8* base, dmc_u64 total, const dmc_stream* streams, const dmc_u32* ids,
                  dmc_u32 n_ids, dmc_u32* status, dmc_u32* actual),
                 (base, total, streams, ids, n_ids, status, actual))
#endif
