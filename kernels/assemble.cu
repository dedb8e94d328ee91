// assemble.cu — crop + fill + byte order + transpose + dtype cast into the batch tensor.
// Mapping: grid.y = job (one region of one decoded chunk, or one fill region), grid.x blocks ×
// DMC_ASSEMBLE_THREADS threads stride over the region's elements in C order; each thread maps
// its element through the job's source and destination strides (so any axis permutation is a
// stride choice), loads, swaps bytes, converts and stores one element. The job is copied into
// registers once per thread, so the element loop reads only the data.
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

__device__ __forceinline__ dmc_u64 dmc_load_elem(const dmc_u8* p, dmc_u32 size, bool swap) {
    dmc_u64 v = 0;
    for (dmc_u32 i = 0; i < size; i++) {
        const dmc_u32 k = swap ? (size - 1 - i) : i;
        v |= (dmc_u64)p[k] << (8 * i);
    }
    return v;
}

__device__ __forceinline__ void dmc_store_elem(dmc_u8* p, dmc_u32 size, dmc_u64 v) {
    for (dmc_u32 i = 0; i < size; i++) p[i] = (dmc_u8)(v >> (8 * i));
}

extern "C" __global__ void __launch_bounds__(DMC_ASSEMBLE_THREADS)
dmc_assemble(const dmc_u8* __restrict__ src, dmc_u64 src_total, dmc_u8* __restrict__ dst,
             dmc_u64 dst_total, const dmc_assemble_job* __restrict__ jobs, dmc_u32 n_jobs,
             dmc_u32* __restrict__ status) {
    const dmc_u32 jid = blockIdx.y;
    if (jid >= n_jobs) return;
    // The job's fields in registers, read once: the element loop reads only the data.
    const dmc_assemble_job job = jobs[jid];
    const dmc_assemble_job* j = &job;
    const dmc_u32 ssz = dmc_dtype_size(j->src_dtype);
    const dmc_u32 dsz = dmc_dtype_size(j->dst_dtype);
    const bool fill = (j->flags & DMC_ASM_FILL) != 0;
    const bool swap = (j->flags & DMC_ASM_BYTESWAP) != 0;
    const dmc_u32 rank = j->rank;
    if (dsz == 0 || (!fill && ssz == 0) || rank > DMC_ASSEMBLE_MAX_RANK || j->n_elems > 0xFFFFFFFFull) {
        if (blockIdx.x == 0 && threadIdx.x == 0) status[jid] = DMC_STATUS_BAD_DESCRIPTOR;
        return;
    }
    bool bad = false;
    const dmc_u64 step = (dmc_u64)gridDim.x * blockDim.x;
    for (dmc_u64 e = (dmc_u64)blockIdx.x * blockDim.x + threadIdx.x; e < j->n_elems; e += step) {
        dmc_i64 so = 0, dof = 0;
        dmc_u32 rest = (dmc_u32)e;  // the host keeps n_elems below 2^32: 32-bit index math
        for (dmc_i32 k = (dmc_i32)rank - 1; k >= 0; k--) {
            const dmc_u32 ext = (dmc_u32)j->shape[k];
            const dmc_u32 idx = ext ? rest % ext : 0;
            rest = ext ? rest / ext : 0;
            so += (dmc_i64)idx * j->src_stride[k];
            dof += (dmc_i64)idx * j->dst_stride[k];
        }
        const dmc_i64 dpos = (dmc_i64)j->dst_off + dof * (dmc_i64)dsz;
        if (dpos < 0 || !dmc_in_bounds((dmc_u64)dpos, dsz, dst_total)) {
            bad = true;
            continue;
        }
        dmc_u64 v;
        if (fill) {
            v = j->fill_bits;
        } else {
            const dmc_i64 spos = (dmc_i64)j->src_off + so * (dmc_i64)ssz;
            if (spos < 0 || !dmc_in_bounds((dmc_u64)spos, ssz, src_total)) {
                bad = true;
                continue;
            }
            v = dmc_convert(dmc_load_elem(src + spos, ssz, swap), j->src_dtype, j->dst_dtype);
        }
        dmc_store_elem(dst + dpos, dsz, v);
    }
    if (bad) status[jid] = DMC_STATUS_BAD_DESCRIPTOR;
}

#ifdef DMC_EMULATE
DMC_EMU_LAUNCHER(dmc_assemble,
                 (const dmc_u8* src, dmc_u64 src_total, dmc_u8* dst, dmc_u64 dst_total,
                  const dmc_assemble_job* jobs, dmc_u32 n_jobs, dmc_u32* status),
                 (src, src_total, dst, dst_total, jobs, n_jobs, status))
#endif
