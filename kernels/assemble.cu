// assemble.cu — crop + fill + byte order + transpose + dtype cast into the batch tensor.
// Mapping: grid.y = job (one region of one decoded chunk, or one fill region), grid.x blocks ×
// DMC_ASSEMBLE_THREADS threads stride over the job's work items. The block loads the job into
// shared memory once (not a copy per thread, which would be local memory). Three paths, chosen per
// job (uniform over its blocks) from the job's flags:
// - element path (any job): an item is one element of the region in C order; the thread maps it
//   through the job's source and destination strides (so any axis permutation is a stride
//   choice), loads, swaps bytes, converts and stores one element: one load and one store of
//   the elements' sizes when the job's source and destination bases are aligned to them (as
//   device allocations at whole-element offsets are), else single bytes.
// - wide path (DMC_ASM_WIDE, set by the host for jobs without a cast or a byte swap whose
//   innermost axis is contiguous in the destination and, unless a fill, in the source; checked
//   again here, else the element path): the region is a set of
//   rows (the innermost axis), and an item is one 16-byte-aligned word of the destination that a
//   row touches (row r's item w is the w-th aligned word from the one holding the row's first
//   byte; a row touches at most ceil((row bytes + 15) / 16) words, and exactly
//   ceil((offset + row bytes) / 16) when all rows start at the same offset in a word
//   (dmc_asm_rows_in_step), which sets the items per row; else a row's last item may have
//   none). Consecutive threads take consecutive words of a row. A whole word is one aligned
//   16-byte store of the 16 source bytes at the same row position, loaded as one aligned
//   16-byte word (or two, shifted, when source and destination differ in alignment); a word
//   the row covers only in part (the row's head and tail) stores the covered bytes as at most
//   one aligned store of each width 8, 4, 2, 1 going up and again going down.
// - vector cast path (DMC_ASM_VEC, set by the host for jobs with a u8/i8/u16/i16 source cast to
//   f32/bf16/f16, or a 2-byte byte swap alone, whose innermost axis is contiguous in both
//   buffers; checked again here, with the destination's elements aligned, else the element
//   path): an item is a group of 8 destination element slots (aligned to 8 × their size) that a
//   row touches (counted, like the wide path's words, from the rows' common offset when they
//   start in step); a thread loads the group's source elements as one 16-byte window (two aligned
//   16-byte loads shifted together), converts 8 elements with dmc_convert at compile-time
//   dtypes (one instance per pair: the same bits as the element path) and stores one (16-bit)
//   or two (f32) aligned 16-byte words; a row's first and last groups store element by element.
#include "common.cuh"

__device__ __forceinline__ dmc_u32 dmc_dtype_size(dmc_u32 d) {
    switch (d) {
    case DMC_DTYPE_BOOL: case DMC_DTYPE_U8: case DMC_DTYPE_I8: return 1;
    case DMC_DTYPE_U16: case DMC_DTYPE_I16: case DMC_DTYPE_F16: case DMC_DTYPE_BF16: return 2;
    case DMC_DTYPE_U32: case DMC_DTYPE_I32: case DMC_DTYPE_F32: return 4;
    case DMC_DTYPE_U64: case DMC_DTYPE_I64: case DMC_DTYPE_F64: return 8;
    default: return 0;
    }
}
__device__ __forceinline__ bool dmc_dtype_is_float(dmc_u32 d) {
    return d == DMC_DTYPE_F16 || d == DMC_DTYPE_BF16 || d == DMC_DTYPE_F32 || d == DMC_DTYPE_F64;
}
__device__ __forceinline__ bool dmc_dtype_is_signed(dmc_u32 d) {
    return d == DMC_DTYPE_I8 || d == DMC_DTYPE_I16 || d == DMC_DTYPE_I32 || d == DMC_DTYPE_I64;
}

__device__ __forceinline__ float dmc_bits_to_f32(dmc_u32 b) {
    union { dmc_u32 u; float f; } x;
    x.u = b;
    return x.f;
}
__device__ __forceinline__ dmc_u32 dmc_f32_to_bits(float f) {
    union { dmc_u32 u; float f; } x;
    x.f = f;
    return x.u;
}
__device__ __forceinline__ double dmc_bits_to_f64(dmc_u64 b) {
    union { dmc_u64 u; double f; } x;
    x.u = b;
    return x.f;
}
__device__ __forceinline__ dmc_u64 dmc_f64_to_bits(double f) {
    union { dmc_u64 u; double f; } x;
    x.f = f;
    return x.u;
}

// IEEE binary16 → binary32 (exact).
__device__ __forceinline__ float dmc_f16_to_f32(dmc_u32 h) {
    const dmc_u32 sign = (h & 0x8000u) << 16;
    dmc_u32 exp = (h >> 10) & 0x1Fu;
    dmc_u32 man = h & 0x3FFu;
    dmc_u32 bits;
    if (exp == 0x1Fu) {
        bits = sign | 0x7F800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        // subnormal: normalise
        exp = 113u;
        while ((man & 0x400u) == 0) {
            man <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((man & 0x3FFu) << 13);
    }
    return dmc_bits_to_f32(bits);
}

__device__ __forceinline__ double dmc_float_bits_to_f64(dmc_u64 b, dmc_u32 d) {
    switch (d) {
    case DMC_DTYPE_F16: return (double)dmc_f16_to_f32((dmc_u32)b);
    case DMC_DTYPE_BF16: return (double)dmc_bits_to_f32((dmc_u32)b << 16);
    case DMC_DTYPE_F32: return (double)dmc_bits_to_f32((dmc_u32)b);
    default: return dmc_bits_to_f64(b);
    }
}

// Rounds m·2^e (m > 0) once, to nearest even, into a binary format with `mb` mantissa bits and
// `eb` exponent bits (binary16: 10, 5; bfloat16: 7, 8), subnormals included; overflow gives
// infinity. Returns the exponent and mantissa bits (no sign).
__device__ __forceinline__ dmc_u32 dmc_round_to_small_float(dmc_u64 m, dmc_i32 e, dmc_i32 mb,
                                                            dmc_i32 eb) {
    const dmc_i32 bias = (1 << (eb - 1)) - 1;
    const dmc_i32 p = 63 - __clzll((long long)m);  // m = 1.f · 2^p
    dmc_i32 be = p + e + bias;                      // biased exponent of the result
    dmc_i32 shift = p - mb;                         // low bits of m below the result's ulp
    if (be <= 0) {                                  // subnormal: the ulp is that of exponent 1
        shift += 1 - be;
        be = 0;
    }
    dmc_u64 q;
    if (shift <= 0) {
        q = m << (dmc_u32)(-shift);  // exact (shift >= -63: m has at least one bit)
    } else if (shift > 64) {
        q = 0;  // below half the smallest subnormal
    } else {
        const dmc_u64 rem = shift == 64 ? m : (m & ((1ull << (dmc_u32)shift) - 1ull));
        const dmc_u64 half = 1ull << (dmc_u32)(shift - 1);
        q = shift == 64 ? 0 : (m >> (dmc_u32)shift);
        if (rem > half || (rem == half && (q & 1ull))) q++;
    }
    if (be == 0) return (dmc_u32)q;  // a subnormal that rounds up to 2^mb is the smallest normal
    if (q == (1ull << (dmc_u32)(mb + 1))) {
        q >>= 1;
        be++;
    }
    const dmc_u32 inf = ((1u << (dmc_u32)eb) - 1u) << (dmc_u32)mb;
    if (be >= (1 << eb) - 1) return inf;
    return ((dmc_u32)be << (dmc_u32)mb) | ((dmc_u32)q & ((1u << (dmc_u32)mb) - 1u));
}

// binary64 → binary16 or bfloat16, rounded once (numpy's float64 → float16; not through float32,
// which rounds twice: 1 + 2^-11 + 2^-40 must give 1 + 2^-10, not 1). NaN stays NaN (quiet).
__device__ __forceinline__ dmc_u32 dmc_f64_to_small_float(double v, dmc_i32 mb, dmc_i32 eb) {
    const dmc_u64 x = dmc_f64_to_bits(v);
    const dmc_u32 sign = (dmc_u32)(x >> 63) << (dmc_u32)(mb + eb);
    const dmc_u32 exp = (dmc_u32)(x >> 52) & 0x7FFu;
    const dmc_u64 man = x & 0xFFFFFFFFFFFFFull;
    const dmc_u32 inf = ((1u << (dmc_u32)eb) - 1u) << (dmc_u32)mb;
    if (exp == 0x7FFu) {
        if (man == 0) return sign | inf;
        return sign | inf | (1u << (dmc_u32)(mb - 1)) | (dmc_u32)(man >> (dmc_u32)(52 - mb));
    }
    if (exp == 0 && man == 0) return sign;
    if (exp == 0) return sign | dmc_round_to_small_float(man, -1074, mb, eb);
    return sign | dmc_round_to_small_float(man | (1ull << 52), (dmc_i32)exp - 1075, mb, eb);
}

__device__ __forceinline__ dmc_u64 dmc_f64_to_float_bits(double v, dmc_u32 d) {
    switch (d) {
    case DMC_DTYPE_F16: return dmc_f64_to_small_float(v, 10, 5);
    case DMC_DTYPE_BF16: return dmc_f64_to_small_float(v, 7, 8);
    case DMC_DTYPE_F32: return dmc_f32_to_bits((float)v);
    default: return dmc_f64_to_bits(v);
    }
}

// A 64-bit integer (magnitude `mag`, sign `neg`) → a float dtype, rounded once (numpy casts
// int64 → float32 directly, not through float64).
__device__ __forceinline__ dmc_u64 dmc_int_to_float_bits(dmc_u64 u, bool is_signed, dmc_u32 d) {
    const bool neg = is_signed && (dmc_i64)u < 0;
    switch (d) {
    case DMC_DTYPE_F32: return dmc_f32_to_bits(is_signed ? (float)(dmc_i64)u : (float)u);
    case DMC_DTYPE_F64: return dmc_f64_to_bits(is_signed ? (double)(dmc_i64)u : (double)u);
    default: {
        const dmc_u64 mag = neg ? (0ull - u) : u;
        const dmc_i32 mb = d == DMC_DTYPE_F16 ? 10 : 7;
        const dmc_i32 eb = d == DMC_DTYPE_F16 ? 5 : 8;
        const dmc_u32 sign = neg ? (1u << (dmc_u32)(mb + eb)) : 0u;
        return mag == 0 ? 0u : (sign | dmc_round_to_small_float(mag, 0, mb, eb));
    }
    }
}

// Converts one element's little-endian bits from dtype `s` to dtype `d` (numpy `astype`
// semantics for in-range values, every conversion rounded once: ints wrap, floats → ints
// truncate toward zero and saturate, NaN → 0, anything → bool is `!= 0`).
__device__ __forceinline__ dmc_u64 dmc_convert(dmc_u64 bits, dmc_u32 s, dmc_u32 d) {
    if (s == d) return bits;
    const dmc_u32 ss = dmc_dtype_size(s);
    if (dmc_dtype_is_float(s)) {
        // f16, bf16 and f32 are exact in f64: the only rounding is the one to `d`.
        const double v = dmc_float_bits_to_f64(bits, s);
        if (dmc_dtype_is_float(d)) return dmc_f64_to_float_bits(v, d);
        if (d == DMC_DTYPE_BOOL) return v != 0.0 ? 1u : 0u;
        if (v != v) return 0;
        if (dmc_dtype_is_signed(d)) {
            if (v <= -9223372036854775808.0) return 0x8000000000000000ull;
            if (v >= 9223372036854775807.0) return 0x7FFFFFFFFFFFFFFFull;
            return (dmc_u64)(dmc_i64)v;
        }
        if (v <= 0.0) return 0;
        if (v >= 18446744073709551615.0) return 0xFFFFFFFFFFFFFFFFull;
        return (dmc_u64)v;
    }
    // integer or bool source: sign-extend signed values to 64 bits
    dmc_u64 u = bits;
    if (dmc_dtype_is_signed(s) && ss < 8) {
        const dmc_u64 m = 1ull << (ss * 8 - 1);
        u = (u ^ m) - m;
    }
    if (dmc_dtype_is_float(d)) return dmc_int_to_float_bits(u, dmc_dtype_is_signed(s), d);
    if (d == DMC_DTYPE_BOOL) return u != 0 ? 1u : 0u;
    return u;  // truncated to the destination size by the store
}

// The low `size` bytes of v in reverse order (size 2, 4 or 8).
// Written so that the 8-byte result is not built from the 2/4-byte one: in the form
// `lo = perm(low word); if 2 …; if 4 return lo; return lo << 32 | perm(high word)`, ptxas
// (NVRTC 12.9.86, 13.0.88 and 13.5.37 for sm_80 and sm_90; sm_100 and sm_120 were right)
// lowered the last line's `bfi.b64 %rd, %rd, %rd_hi, 32, 32` (its destination the register of
// the 4-byte result) to
// `PRMT R24, R27, 0x123, RZ; IMAD.MOV.U32 R25, RZ, RZ, R24`: the low word overwritten before it
// was copied to the high one, so every 8-byte big-endian element came out as
// perm(high word) twice (993 → 993 << 32 | 993 on an H200; the emulator, compiled by g++, was
// right). The SASS of this form was checked by hand on the same compilers; the GPU tests'
// big-endian int64/float64 fixtures check it on hardware.
__device__ __forceinline__ dmc_u64 dmc_bswap_elem(dmc_u64 v, dmc_u32 size) {
    const dmc_u32 a = __byte_perm((dmc_u32)v, 0u, 0x0123u);
    if (size == 8) {
        const dmc_u32 b = __byte_perm((dmc_u32)(v >> 32), 0u, 0x0123u);
        return ((dmc_u64)a << 32) | (dmc_u64)b;
    }
    return size == 2 ? (dmc_u64)(a >> 16) : (dmc_u64)a;
}

// One element of `size` bytes at p, its bytes reversed when `swap`: one access of the element's
// size when `nat` (p is aligned to `size`; see dmc_asm_elements), single bytes otherwise.
__device__ __forceinline__ dmc_u64 dmc_load_elem(const dmc_u8* p, dmc_u32 size, bool swap, bool nat) {
    dmc_u64 v = 0;
    if (nat) {
        switch (size) {
        case 1: return *p;
        case 2: v = *(const dmc_u16*)p; break;
        case 4: v = *(const dmc_u32*)p; break;
        default: v = *(const dmc_u64*)p; break;
        }
        return swap ? dmc_bswap_elem(v, size) : v;
    }
    for (dmc_u32 i = 0; i < size; i++) {
        const dmc_u32 k = swap ? (size - 1 - i) : i;
        v |= (dmc_u64)p[k] << (8 * i);
    }
    return v;
}

// Stores the low `size` bytes of v at p (little-endian): one access when `nat` (p aligned to
// `size`), single bytes otherwise.
__device__ __forceinline__ void dmc_store_elem(dmc_u8* p, dmc_u32 size, dmc_u64 v, bool nat) {
    if (nat) {
        switch (size) {
        case 1: *p = (dmc_u8)v; return;
        case 2: *(dmc_u16*)p = (dmc_u16)v; return;
        case 4: *(dmc_u32*)p = (dmc_u32)v; return;
        default: *(dmc_u64*)p = v; return;
        }
    }
    for (dmc_u32 i = 0; i < size; i++) p[i] = (dmc_u8)(v >> (8 * i));
}

// The source and destination element offsets (so, dof) of index `rest` over axes 0..=top of the
// job, in C order (axis top varies fastest). The axes are read from the job staged in shared
// memory (broadcast reads: every lane reads the same address).
__device__ __forceinline__ void dmc_asm_offsets(const dmc_assemble_job* j, dmc_u32 rest, dmc_i32 top,
                                                dmc_i64* so, dmc_i64* dof) {
    dmc_i64 s = 0, d = 0;
    for (dmc_i32 k = top; k >= 0; k--) {
        const dmc_u32 ext = (dmc_u32)j->shape[k];
        const dmc_u32 idx = ext ? rest % ext : 0;
        rest = ext ? rest / ext : 0;
        s += (dmc_i64)idx * j->src_stride[k];
        d += (dmc_i64)idx * j->dst_stride[k];
    }
    *so = s;
    *dof = d;
}

// `#pragma unroll 1` for the CUDA compilers: a loop kept rolled (its body once in registers).
#ifdef DMC_EMULATE
#define DMC_ASM_ROLLED
#else
#define DMC_ASM_ROLLED _Pragma("unroll 1")
#endif

// Whether every row of the job (its innermost axis) starts at the same byte offset within an
// aligned unit of `unit` bytes (a power of two, at least `esz`): each outer axis with more than
// one index steps the destination by a multiple of `unit` (elements of `esz` bytes, a power of
// two), i.e. by a multiple of unit / esz elements, which the low bits of the strides' OR tell
// (negative strides too: two's complement keeps the low bits). Then a row's items (16-byte
// words, 8-element groups) are counted exactly from that offset instead of for the worst
// offset, one item fewer a row where the offset and the row's length allow: a 256-byte row
// touches 16 words when its rows start in step at a word's first byte, not 17 (64 rows × 17
// items took 5 trips of a loop over 256 threads where 64 × 16 take 4).
__device__ __forceinline__ bool dmc_asm_rows_in_step(const dmc_assemble_job* j, dmc_u32 esz, dmc_u32 unit) {
    dmc_u32 low = 0;  // the OR of the low words of the strides that step
DMC_ASM_ROLLED
    for (dmc_u32 k = 0; k + 1 < j->rank; k++) low |= j->shape[k] > 1 ? (dmc_u32)j->dst_stride[k] : 0u;
    return ((low * esz) & (unit - 1)) == 0;
}

// ---- The wide path ----

// Word i (< 4) of v, by selects (no indexing of a register array: that would be local memory).
__device__ __forceinline__ dmc_u32 dmc_asm_word(const dmc_u32x4& v, dmc_u32 i) {
    return i == 0 ? v.w[0] : i == 1 ? v.w[1] : i == 2 ? v.w[2] : v.w[3];
}

// 16 bytes of the fill value `f` (size `sz`) repeated, for a word whose elements are aligned.
__device__ __forceinline__ dmc_u32x4 dmc_asm_fill16(dmc_u64 f, dmc_u32 sz) {
    dmc_u32 lo = (dmc_u32)f, hi = (dmc_u32)(f >> 32);
    if (sz == 1) lo = (lo & 0xffu) * 0x01010101u;
    if (sz == 2) lo = (lo & 0xffffu) * 0x00010001u;
    if (sz < 8) hi = lo;
    return dmc_u32x4{{lo, hi, lo, hi}};
}

// Stores bytes [lo, hi) (0 <= lo < hi <= 16) of v at the 16-byte aligned address p: going up,
// one aligned store of width 1, 2, 4, 8 wherever the position is not yet aligned to twice the
// width; then going down, 8, 4, 2, 1 while the rest is that long. Every store is aligned to its
// width and touches only [lo, hi).
__device__ __forceinline__ void dmc_asm_store_part(dmc_u8* p, const dmc_u32x4& v, dmc_u32 lo, dmc_u32 hi) {
    dmc_u32 x = lo;
    if ((x & 1u) && x + 1 <= hi) {
        p[x] = (dmc_u8)(dmc_asm_word(v, x >> 2) >> (8 * (x & 3u)));
        x += 1;
    }
    if ((x & 2u) && x + 2 <= hi) {
        *(dmc_u16*)(p + x) = (dmc_u16)(dmc_asm_word(v, x >> 2) >> (8 * (x & 2u)));
        x += 2;
    }
    if ((x & 4u) && x + 4 <= hi) {
        *(dmc_u32*)(p + x) = dmc_asm_word(v, x >> 2);
        x += 4;
    }
    if ((x & 8u) && x + 8 <= hi) {  // x == 8
        *(dmc_u64*)(p + 8) = (dmc_u64)v.w[2] | ((dmc_u64)v.w[3] << 32);
        x = 16;
    }
    if (x + 8 <= hi) {  // x == 0
        *(dmc_u64*)p = (dmc_u64)v.w[0] | ((dmc_u64)v.w[1] << 32);
        x = 8;
    }
    if (x + 4 <= hi) {
        *(dmc_u32*)(p + x) = dmc_asm_word(v, x >> 2);
        x += 4;
    }
    if (x + 2 <= hi) {
        *(dmc_u16*)(p + x) = (dmc_u16)(dmc_asm_word(v, x >> 2) >> (8 * (x & 2u)));
        x += 2;
    }
    if (x < hi) p[x] = (dmc_u8)(dmc_asm_word(v, x >> 2) >> (8 * (x & 3u)));
}

// The 16 bytes at the 16-byte aligned address p, those outside [lo, hi) not read and 0: one
// 16-byte load when all 16 lie inside, else single bytes in a rolled loop (the words that
// straddle the ends of the source buffer only).
__device__ __forceinline__ dmc_u32x4 dmc_asm_load16(const dmc_u8* p, const dmc_u8* lo, const dmc_u8* hi) {
    if (p >= lo && p + 16 <= hi) return dmc_load16(p);
    dmc_u64 a = 0, b = 0;
DMC_ASM_ROLLED
    for (dmc_u32 q = 0; q < 16; q++) {
        const dmc_u64 x = (p + q >= lo && p + q < hi) ? (dmc_u64)p[q] : 0ull;
        if (q < 8) {
            a |= x << (8 * q);
        } else {
            b |= x << (8 * (q - 8));
        }
    }
    return dmc_u32x4{{(dmc_u32)a, (dmc_u32)(a >> 32), (dmc_u32)b, (dmc_u32)(b >> 32)}};
}

// The wide path of `job` (see the top of the file): rows of `rb` bytes, `nw` items per row,
// `items` in all (< 2^32). Returns whether an item lay outside the buffers (nothing is written
// for it). Source words are read whole when they lie inside the source buffer (bytes outside the
// row are loaded and dropped: the source is not written while assemble runs), byte by byte at
// the buffer's ends.
__device__ __forceinline__ bool dmc_asm_wide(const dmc_u8* __restrict__ src, dmc_u64 src_total,
                                             dmc_u8* __restrict__ dst, dmc_u64 dst_total,
                                             const dmc_assemble_job* j, dmc_u32 sz, dmc_u32 rb,
                                             dmc_u32 nw, dmc_u32 items) {
    const bool fill = (j->flags & DMC_ASM_FILL) != 0;
    const dmc_i32 top = (dmc_i32)j->rank - 2;  // the rows' axes: 0..=top
    const dmc_i64 src_off = (dmc_i64)j->src_off, dst_off = (dmc_i64)j->dst_off;
    const dmc_u64 fill_bits = j->fill_bits;
    bool bad = false;
    const dmc_u32 step = gridDim.x * blockDim.x;
    for (dmc_u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < items; e += step) {
        const dmc_u32 row = e / nw;
        const dmc_u32 w = e - row * nw;
        dmc_i64 so, dof;  // the row's first element
        dmc_asm_offsets(j, row, top, &so, &dof);
        const dmc_i64 dpos = dst_off + dof * (dmc_i64)sz;
        const dmc_i64 spos = src_off + so * (dmc_i64)sz;
        if (dpos < 0 || !dmc_in_bounds((dmc_u64)dpos, rb, dst_total) ||
            (!fill && (spos < 0 || !dmc_in_bounds((dmc_u64)spos, rb, src_total)))) {
            bad = true;
            continue;
        }
        const dmc_u64 d0 = (dmc_u64)(dst + dpos);     // the row's first destination byte
        const dmc_u64 a = (d0 & ~(dmc_u64)15) + 16ull * w;  // this item's word
        const dmc_u32 lo = a < d0 ? (dmc_u32)(d0 - a) : 0u;
        const dmc_u64 end = d0 + rb;
        if (end <= a) continue;  // the row ends before this word
        const dmc_u32 hi = end - a >= 16 ? 16u : (dmc_u32)(end - a);
        dmc_u32x4 v;
        if (fill) {
            v = dmc_asm_fill16(fill_bits, sz);
        } else {
            // source byte of destination address x: x - d0 + (src + spos)
            const dmc_u64 s = (dmc_u64)(src + spos) + (a - d0);
            const dmc_u8* sa = (const dmc_u8*)(s & ~(dmc_u64)15);
            const dmc_u32 sh = (dmc_u32)(s & 15u);
            v = dmc_asm_load16(sa, src, src + src_total);
            if (sh != 0) v = dmc_shift16(v, dmc_asm_load16(sa + 16, src, src + src_total), sh);
        }
        if (lo == 0 && hi == 16) {
            dmc_store16((void*)a, v);
        } else {
            dmc_asm_store_part((dmc_u8*)a, v, lo, hi);
        }
    }
    return bad;
}

// ---- The vector cast path ----

// Element i (< 16 / SSZ) of the little-endian elements of SSZ (1 or 2) bytes in v; i is a
// constant once the caller's loop is unrolled, so the selects fold away.
template <dmc_u32 SSZ>
__device__ __forceinline__ dmc_u32 dmc_asm_lane(const dmc_u32x4& v, dmc_u32 i) {
    if (SSZ == 1) return (dmc_asm_word(v, i >> 2) >> (8 * (i & 3u))) & 0xffu;
    return (dmc_asm_word(v, i >> 1) >> (16 * (i & 1u))) & 0xffffu;
}

// The vector cast path of `job` for source dtype S (1 or 2 bytes) and destination dtype D
// (2 or 4 bytes), both compile-time, so dmc_convert folds to the one conversion (the same
// function as the element path: the same bits). Rows of `len` elements, contiguous in both
// buffers, the destination's elements aligned to their size; an item is a group of 8
// destination element slots aligned to 8·DSZ bytes that a row touches (row r's item g is the
// g-th group from the one holding the row's first element; `ng` per row, `items` in all).
// Per item: one 16-byte source window from the group's first element (two aligned 16-byte loads
// shifted together; single bytes at the source buffer's ends; bytes outside the row are loaded
// and dropped), bytes swapped in each 2-byte element when the job says so, 8 conversions, and
// one (bf16/f16) or two (f32) aligned 16-byte stores, or single element stores for the slots a
// row's first and last groups cover. Returns whether an item lay outside the buffers.
template <dmc_u32 S, dmc_u32 D>
__device__ __forceinline__ bool dmc_asm_vec(const dmc_u8* __restrict__ src, dmc_u64 src_total,
                                            dmc_u8* __restrict__ dst, dmc_u64 dst_total,
                                            const dmc_assemble_job* j, dmc_u32 len, dmc_u32 ng,
                                            dmc_u32 items) {
    constexpr dmc_u32 SSZ = (S == DMC_DTYPE_U8 || S == DMC_DTYPE_I8) ? 1u : 2u;
    constexpr dmc_u32 DSZ = D == DMC_DTYPE_F32 ? 4u : 2u;
    const bool swap = SSZ == 2 && (j->flags & DMC_ASM_BYTESWAP) != 0;
    const dmc_i32 top = (dmc_i32)j->rank - 2;  // the rows' axes: 0..=top
    const dmc_i64 src_off = (dmc_i64)j->src_off, dst_off = (dmc_i64)j->dst_off;
    const dmc_u8* src_end = src + src_total;
    bool bad = false;
    const dmc_u32 step = gridDim.x * blockDim.x;
    for (dmc_u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < items; e += step) {
        const dmc_u32 row = e / ng;
        const dmc_u32 g = e - row * ng;
        dmc_i64 so, dof;  // the row's first element
        dmc_asm_offsets(j, row, top, &so, &dof);
        const dmc_i64 dpos = dst_off + dof * (dmc_i64)DSZ;
        const dmc_i64 spos = src_off + so * (dmc_i64)SSZ;
        if (dpos < 0 || !dmc_in_bounds((dmc_u64)dpos, (dmc_u64)len * DSZ, dst_total) || spos < 0 ||
            !dmc_in_bounds((dmc_u64)spos, (dmc_u64)len * SSZ, src_total)) {
            bad = true;
            continue;
        }
        const dmc_u64 d0 = (dmc_u64)(dst + dpos);  // aligned to DSZ (checked by the caller)
        const dmc_u32 lead = (dmc_u32)(d0 & (8u * DSZ - 1u)) / DSZ;  // slots before the row's first
        const dmc_i64 k0 = (dmc_i64)g * 8 - (dmc_i64)lead;  // the row element in slot 0
        if (k0 >= (dmc_i64)len) continue;  // the row ends before this group
        const dmc_u64 s = (dmc_u64)(src + spos) + (dmc_u64)(k0 * (dmc_i64)SSZ);
        const dmc_u8* sa = (const dmc_u8*)(s & ~(dmc_u64)15);
        const dmc_u32 sh = (dmc_u32)(s & 15u);
        dmc_u32x4 v = dmc_asm_load16(sa, src, src_end);
        if (sh != 0) v = dmc_shift16(v, dmc_asm_load16(sa + 16, src, src_end), sh);
        if (swap) {
DMC_UNROLL
            for (dmc_u32 q = 0; q < 4; q++) v.w[q] = __byte_perm(v.w[q], 0u, 0x2301u);
        }
        dmc_u8* gp = (dmc_u8*)((d0 & ~(dmc_u64)(8u * DSZ - 1u)) + (dmc_u64)g * 8u * DSZ);
        if (k0 >= 0 && k0 + 8 <= (dmc_i64)len) {
            // a whole group: converted 4 (f32) or 8 (16-bit) elements at a time, each 16 bytes
            // stored as soon as built (fewer live registers than all 8 first)
DMC_UNROLL
            for (dmc_u32 h = 0; h < 8; h += 16 / DSZ) {
                dmc_u32x4 o;
DMC_UNROLL
                for (dmc_u32 q = 0; q < 4; q++) {
                    if (DSZ == 4) {
                        o.w[q] = (dmc_u32)dmc_convert(dmc_asm_lane<SSZ>(v, h + q), S, D);
                    } else {
                        o.w[q] = (dmc_u32)dmc_convert(dmc_asm_lane<SSZ>(v, 2 * q), S, D) |
                                 ((dmc_u32)dmc_convert(dmc_asm_lane<SSZ>(v, 2 * q + 1), S, D) << 16);
                    }
                }
                dmc_store16(gp + h * DSZ, o);
            }
        } else {
            // a row's first or last group: the slots it covers, one element store each
DMC_UNROLL
            for (dmc_u32 i = 0; i < 8; i++) {
                const dmc_i64 k = k0 + (dmc_i64)i;
                if (k < 0 || k >= (dmc_i64)len) continue;
                const dmc_u32 o = (dmc_u32)dmc_convert(dmc_asm_lane<SSZ>(v, i), S, D);
                if (DSZ == 4) {
                    *(dmc_u32*)(gp + 4 * i) = o;
                } else {
                    *(dmc_u16*)(gp + 2 * i) = (dmc_u16)o;
                }
            }
        }
    }
    return bad;
}

// The vector cast path for the job's dtypes: 1 (an item failed) or 0 when they are a pair it
// has, -1 when not (the caller takes the element path). The pairs: u8, i8, u16, i16 → f32,
// bf16, f16, and u16 → u16, i16 → i16 (a byte swap alone). Keep in step with the host's
// `vec_pair` (crates/damacy-kernels/src/assemble.rs).
__device__ __forceinline__ int dmc_asm_vec_any(const dmc_u8* __restrict__ src, dmc_u64 src_total,
                                               dmc_u8* __restrict__ dst, dmc_u64 dst_total,
                                               const dmc_assemble_job* j, dmc_u32 len, dmc_u32 ng,
                                               dmc_u32 items) {
    const dmc_u32 s = j->src_dtype, d = j->dst_dtype;
#define DMC_ASM_VEC_PAIR(S, D)                                                                    \
    if (s == (S) && d == (D)) return dmc_asm_vec<(S), (D)>(src, src_total, dst, dst_total, j, len, ng, items) ? 1 : 0;
#define DMC_ASM_VEC_TO_FLOATS(S)                                                                  \
    DMC_ASM_VEC_PAIR(S, DMC_DTYPE_F32)                                                            \
    DMC_ASM_VEC_PAIR(S, DMC_DTYPE_BF16)                                                           \
    DMC_ASM_VEC_PAIR(S, DMC_DTYPE_F16)
    DMC_ASM_VEC_TO_FLOATS(DMC_DTYPE_U16)
    DMC_ASM_VEC_TO_FLOATS(DMC_DTYPE_I16)
    DMC_ASM_VEC_TO_FLOATS(DMC_DTYPE_U8)
    DMC_ASM_VEC_TO_FLOATS(DMC_DTYPE_I8)
    DMC_ASM_VEC_PAIR(DMC_DTYPE_U16, DMC_DTYPE_U16)
    DMC_ASM_VEC_PAIR(DMC_DTYPE_I16, DMC_DTYPE_I16)
#undef DMC_ASM_VEC_TO_FLOATS
#undef DMC_ASM_VEC_PAIR
    return -1;
}

// The element path of `job` (see the top of the file). NAT: every element's source and
// destination address is aligned to its size (one access per element), else byte accesses; two
// instances, so the aligned one has no per-access branch (a per-access branch took the kernel
// to 60 registers on sm_90; the two instances take it from 40 to 48). Returns whether an
// element lay outside the buffers (nothing is written for it).
template <bool NAT>
__device__ __forceinline__ bool dmc_asm_elements(const dmc_u8* __restrict__ src, dmc_u64 src_total,
                                                 dmc_u8* __restrict__ dst, dmc_u64 dst_total,
                                                 const dmc_assemble_job* j, dmc_u32 ssz, dmc_u32 dsz) {
    const bool fill = (j->flags & DMC_ASM_FILL) != 0;
    const bool swap = (j->flags & DMC_ASM_BYTESWAP) != 0;
    const dmc_i32 top = (dmc_i32)j->rank - 1;
    const dmc_i64 src_off = (dmc_i64)j->src_off, dst_off = (dmc_i64)j->dst_off;
    const dmc_u64 fill_bits = j->fill_bits, n = j->n_elems;
    const dmc_u32 sd = j->src_dtype, dd = j->dst_dtype;
    bool bad = false;
    const dmc_u64 step = (dmc_u64)gridDim.x * blockDim.x;
    for (dmc_u64 e = (dmc_u64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += step) {
        dmc_i64 so, dof;  // the host keeps n_elems below 2^32: 32-bit index math
        dmc_asm_offsets(j, (dmc_u32)e, top, &so, &dof);
        const dmc_i64 dpos = dst_off + dof * (dmc_i64)dsz;
        if (dpos < 0 || !dmc_in_bounds((dmc_u64)dpos, dsz, dst_total)) {
            bad = true;
            continue;
        }
        dmc_u64 v;
        if (fill) {
            v = fill_bits;
        } else {
            const dmc_i64 spos = src_off + so * (dmc_i64)ssz;
            if (spos < 0 || !dmc_in_bounds((dmc_u64)spos, ssz, src_total)) {
                bad = true;
                continue;
            }
            v = dmc_convert(dmc_load_elem(src + spos, ssz, swap, NAT), sd, dd);
        }
        dmc_store_elem(dst + dpos, dsz, v, NAT);
    }
    return bad;
}

// A job as the block stages it in shared memory: loaded as 8-byte words, read as the struct.
static_assert(sizeof(dmc_assemble_job) % 8 == 0 && sizeof(dmc_assemble_job) / 8 <= DMC_ASSEMBLE_THREADS,
              "one 8-byte word of the job per thread");
union dmc_asm_staged_job {
    dmc_u64 w[sizeof(dmc_assemble_job) / 8];
    dmc_assemble_job job;
};

extern "C" __global__ void __launch_bounds__(DMC_ASSEMBLE_THREADS)
dmc_assemble(const dmc_u8* __restrict__ src, dmc_u64 src_total, dmc_u8* __restrict__ dst,
             dmc_u64 dst_total, const dmc_assemble_job* __restrict__ jobs, dmc_u32 n_jobs,
             dmc_u32* __restrict__ status) {
    const dmc_u32 jid = blockIdx.y;
    if (jid >= n_jobs) return;  // uniform over the block
    // The job in shared memory, loaded once per block (one 8-byte word per thread): the axis
    // loops index its strides and shape by axis, so a per-thread copy would live in local
    // memory (a 240-byte stack frame per thread, written in full by every thread); reads of
    // shared memory at one address are broadcasts.
    __shared__ dmc_asm_staged_job staged;
    if (threadIdx.x < sizeof(dmc_assemble_job) / 8)
        staged.w[threadIdx.x] = ((const dmc_u64*)(jobs + jid))[threadIdx.x];
    __syncthreads();
    const dmc_assemble_job* j = &staged.job;
    const dmc_u32 ssz = dmc_dtype_size(j->src_dtype);
    const dmc_u32 dsz = dmc_dtype_size(j->dst_dtype);
    const bool fill = (j->flags & DMC_ASM_FILL) != 0;
    const bool swap = (j->flags & DMC_ASM_BYTESWAP) != 0;
    const dmc_u32 rank = j->rank;
    if (dsz == 0 || (!fill && ssz == 0) || rank > DMC_ASSEMBLE_MAX_RANK || j->n_elems > 0xFFFFFFFFull) {
        if (blockIdx.x == 0 && threadIdx.x == 0) status[jid] = DMC_STATUS_BAD_DESCRIPTOR;
        return;
    }
    if (j->flags & DMC_ASM_WIDE) {
        // The wide path needs: no cast and no byte swap (of elements wider than a byte),
        // contiguous rows (innermost strides 1, the source's unless a fill), rows and items
        // within 32 bits, and for a fill elements aligned in the destination's 16-byte words.
        // Else the element path below.
        const dmc_u64 len = rank ? j->shape[rank - 1] : 0;
        const dmc_u64 rb = len * dsz;
        const dmc_u64 rows = len ? j->n_elems / len : 0;
        // the words a row touches: the most a row can touch, ceil((rb + 15) / 16), or, when the
        // launch's threads take more than one trip (else a count changes no thread's trips)
        // and the rows start in step, counted from their common offset in a word
        dmc_u64 nw = (rb + 30) / 16;
        if (rows * nw > (dmc_u64)gridDim.x * blockDim.x && dmc_asm_rows_in_step(j, dsz, 16))
            nw = (((dmc_u64)(dst + j->dst_off) & 15u) + rb + 15) / 16;
        const bool aligned = ((dmc_u64)(dst + j->dst_off) & (dsz - 1)) == 0;
        const bool rows_ok = rank >= 1 && j->dst_stride[rank - 1] == 1 && rb <= 0xFFFFFFFFull &&
                             rows * len == j->n_elems && rows * nw <= 0xFFFFFFFFull;
        const bool copy_ok = fill ? aligned
                                  : j->src_dtype == j->dst_dtype && j->src_stride[rank - 1] == 1 &&
                                        (!swap || dsz == 1);
        if (rows_ok && copy_ok) {
            if (dmc_asm_wide(src, src_total, dst, dst_total, j, dsz, (dmc_u32)rb, (dmc_u32)nw,
                             (dmc_u32)(rows * nw)))
                status[jid] = DMC_STATUS_BAD_DESCRIPTOR;
            return;
        }
    }
    if ((j->flags & DMC_ASM_VEC) && !fill && rank >= 1) {
        // The vector cast path needs: contiguous rows in both buffers (innermost strides 1),
        // rows below 2^28 elements, items within 32 bits, the destination's elements aligned to
        // their size, and a dtype pair it has (dmc_asm_vec_any). Else the element path below.
        const dmc_u64 len = j->shape[rank - 1];
        const dmc_u64 rows = len ? j->n_elems / len : 0;
        // the groups a row touches (8 slots aligned to 8 × dsz bytes): the most, ceil((len + 7)
        // / 8), or counted from the rows' common first slot as the wide path's words
        dmc_u64 ng = (len + 14) / 8;
        if (rows * ng > (dmc_u64)gridDim.x * blockDim.x && dmc_asm_rows_in_step(j, dsz, 8 * dsz))
            ng = (((dmc_u64)(dst + j->dst_off) & (8u * dsz - 1u)) / dsz + len + 7) / 8;
        const bool ok = len > 0 && len < (1ull << 28) && j->dst_stride[rank - 1] == 1 &&
                        j->src_stride[rank - 1] == 1 && rows * len == j->n_elems &&
                        rows * ng <= 0xFFFFFFFFull && ((dmc_u64)(dst + j->dst_off) & (dsz - 1)) == 0;
        if (ok) {
            const int r = dmc_asm_vec_any(src, src_total, dst, dst_total, j, (dmc_u32)len, (dmc_u32)ng,
                                          (dmc_u32)(rows * ng));
            if (r >= 0) {
                if (r > 0) status[jid] = DMC_STATUS_BAD_DESCRIPTOR;
                return;
            }
        }
    }
    // Every element's address is the job's base plus a multiple of the element size, so one
    // check of the bases says whether all of the job's elements are aligned to their size.
    const bool nat = (fill || ((dmc_u64)(src + j->src_off) & (dmc_u64)(ssz - 1)) == 0) &&
                     ((dmc_u64)(dst + j->dst_off) & (dmc_u64)(dsz - 1)) == 0;
    const bool bad = nat ? dmc_asm_elements<true>(src, src_total, dst, dst_total, j, ssz, dsz)
                         : dmc_asm_elements<false>(src, src_total, dst, dst_total, j, ssz, dsz);
    if (bad) status[jid] = DMC_STATUS_BAD_DESCRIPTOR;
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_assemble,
                 (const dmc_u8* src, dmc_u64 src_total, dmc_u8* dst, dmc_u64 dst_total,
                  const dmc_assemble_job* jobs, dmc_u32 n_jobs, dmc_u32* status),
                 (src, src_total, dst, dst_total, jobs, n_jobs, status))
#endif
