// assemble.cu — crop + fill + byte order + transpose + dtype cast into the batch tensor.
// Mapping: grid.y = job (one region of one decoded chunk, or one fill region), grid.x blocks ×
// DMC_ASSEMBLE_THREADS threads stride over the region's elements in C order; each thread maps
// its element through the job's source and destination strides (so any axis permutation is a
// stride choice), loads, swaps bytes, converts and stores one element.
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

// binary32 → binary16, round to nearest even; NaN stays NaN, overflow gives infinity.
__device__ __forceinline__ dmc_u32 dmc_f32_to_f16(float f) {
    const dmc_u32 x = dmc_f32_to_bits(f);
    const dmc_u32 sign = (x >> 16) & 0x8000u;
    const dmc_u32 exp = (x >> 23) & 0xFFu;
    dmc_u32 man = x & 0x7FFFFFu;
    if (exp == 0xFFu) return sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0u);
    const dmc_i32 e = (dmc_i32)exp - 127 + 15;
    if (e >= 31) return sign | 0x7C00u;
    if (e <= 0) {
        if (e < -10) return sign;
        man |= 0x800000u;
        const dmc_u32 shift = (dmc_u32)(14 - e);
        dmc_u32 h = man >> shift;
        const dmc_u32 rem = man & ((1u << shift) - 1u);
        const dmc_u32 half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return sign | h;
    }
    dmc_u32 h = ((dmc_u32)e << 10) | (man >> 13);
    const dmc_u32 rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;  // may carry into the exponent: fine
    return sign | h;
}

// binary32 → bfloat16, round to nearest even; NaN stays NaN.
__device__ __forceinline__ dmc_u32 dmc_f32_to_bf16(float f) {
    const dmc_u32 x = dmc_f32_to_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return ((x >> 16) | 0x40u) & 0xFFFFu;
    const dmc_u32 r = x + 0x7FFFu + ((x >> 16) & 1u);
    return (r >> 16) & 0xFFFFu;
}

__device__ __forceinline__ double dmc_float_bits_to_f64(dmc_u64 b, dmc_u32 d) {
    switch (d) {
    case DMC_DTYPE_F16: return (double)dmc_f16_to_f32((dmc_u32)b);
    case DMC_DTYPE_BF16: return (double)dmc_bits_to_f32((dmc_u32)b << 16);
    case DMC_DTYPE_F32: return (double)dmc_bits_to_f32((dmc_u32)b);
    default: return dmc_bits_to_f64(b);
    }
}

__device__ __forceinline__ dmc_u64 dmc_f64_to_float_bits(double v, dmc_u32 d) {
    switch (d) {
    case DMC_DTYPE_F16: return dmc_f32_to_f16((float)v);
    case DMC_DTYPE_BF16: return dmc_f32_to_bf16((float)v);
    case DMC_DTYPE_F32: return dmc_f32_to_bits((float)v);
    default: return dmc_f64_to_bits(v);
    }
}

// Converts one element's little-endian bits from dtype `s` to dtype `d` (numpy `astype`
// semantics for in-range values: ints wrap, floats → ints truncate toward zero and saturate,
// NaN → 0, anything → bool is `!= 0`).
__device__ __forceinline__ dmc_u64 dmc_convert(dmc_u64 bits, dmc_u32 s, dmc_u32 d) {
    if (s == d) return bits;
    const dmc_u32 ss = dmc_dtype_size(s);
    if (dmc_dtype_is_float(s)) {
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
    if (dmc_dtype_is_float(d)) {
        const double v = dmc_dtype_is_signed(s) ? (double)(dmc_i64)u : (double)u;
        return dmc_f64_to_float_bits(v, d);
    }
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
    const dmc_assemble_job* j = jobs + jid;
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
