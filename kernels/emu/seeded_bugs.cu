// seeded_bugs.cu — small kernels with the defects the emulator's detectors must catch, each
// with a switch that removes the defect; compiled only into emulated builds (never NVRTC).
// tests/emulator_checks.rs asserts each one caught, and the fixed variant clean.
#include <cfenv>

#include "common.cuh"

// A missing __syncwarp: lanes publish a value in shared memory and read their neighbour's.
// Mapping: one warp.
extern "C" __global__ void dmc_bug_missing_syncwarp(dmc_u32 fixed, dmc_u32* out) {
    __shared__ dmc_u32 cell[32];
    const dmc_u32 lane = threadIdx.x & 31u;
    cell[lane] = lane + 100;
    if (fixed) __syncwarp();
    out[lane] = cell[lane ^ 1u];
}
DMC_EMU_LAUNCHER(dmc_bug_missing_syncwarp, (dmc_u32 fixed, dmc_u32* out), (fixed, out))

// Lanes communicating through shared memory with only shuffles and a ballot between (the
// class of dmc_zstd_decode's hazards in issue 28: lanes 0-15 wrote the Huffman ranks, the whole
// warp read them after shuffles, and compute-sanitizer's racecheck reported it). A shuffle or
// vote waits for the lanes but orders no memory access: only __syncwarp (or __syncthreads) does.
// Fixed: a __syncwarp before the reads. Mapping: one warp.
extern "C" __global__ void dmc_bug_shfl_is_no_fence(dmc_u32 fixed, dmc_u32* out) {
    __shared__ dmc_u32 rank[16];
    const dmc_u32 lane = threadIdx.x & 31u;
    if (lane < 16) rank[lane] = lane * 7u;
    dmc_u32 x = __shfl_sync(0xffffffffu, lane, (int)(lane ^ 3u));
    x += (dmc_u32)__popc(__ballot_sync(0xffffffffu, x & 1u));
    if (fixed) __syncwarp();
    out[lane] = rank[(lane + 5u) & 15u] + x;
}
DMC_EMU_LAUNCHER(dmc_bug_shfl_is_no_fence, (dmc_u32 fixed, dmc_u32* out), (fixed, out))

// A lost update: every thread increments one counter, non-atomically unless fixed.
extern "C" __global__ void __launch_bounds__(256) dmc_bug_lost_update(dmc_u32 fixed, dmc_u32* counter) {
    if (fixed) {
        atomicAdd(counter, 1u);
    } else {
        *counter += 1;
    }
}
DMC_EMU_LAUNCHER(dmc_bug_lost_update, (dmc_u32 fixed, dmc_u32* counter), (fixed, counter))

// Two blocks writing the same bytes: block b writes 256 bytes from b*128 (overlapping halves),
// or from b*256 when fixed.
extern "C" __global__ void dmc_bug_blocks_overlap(dmc_u32 fixed, dmc_u8* out) {
    const dmc_u32 start = blockIdx.x * (fixed ? 256u : 128u);
    for (dmc_u32 i = threadIdx.x; i < 256; i += blockDim.x) out[start + i] = (dmc_u8)blockIdx.x;
}
DMC_EMU_LAUNCHER(dmc_bug_blocks_overlap, (dmc_u32 fixed, dmc_u8* out), (fixed, out))

// A divergent collective: half the warp shuffles from one call site, half from another, both
// with the full mask (undefined on the GPU). Fixed: one call site.
extern "C" __global__ void dmc_bug_divergent_shfl(dmc_u32 fixed, dmc_u32* out) {
    const dmc_u32 lane = threadIdx.x & 31u;
    dmc_u32 v;
    if (fixed) {
        v = __shfl_sync(0xffffffffu, lane * 3u, 0);
    } else if (lane < 16) {
        v = __shfl_sync(0xffffffffu, lane * 3u, 0);
    } else {
        v = __shfl_sync(0xffffffffu, lane * 3u, 0);
    }
    out[lane] = v;
}
DMC_EMU_LAUNCHER(dmc_bug_divergent_shfl, (dmc_u32 fixed, dmc_u32* out), (fixed, out))

// An uninitialised shared read: the block sums into a shared accumulator that only the fixed
// variant zeroes first. Mapping: one warp per block, out[block].
extern "C" __global__ void dmc_bug_uninit_shared(dmc_u32 fixed, dmc_u32* out) {
    __shared__ dmc_u32 acc;
    if (fixed && threadIdx.x == 0) acc = 0;
    __syncthreads();
    atomicAdd(&acc, 1u);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
}
DMC_EMU_LAUNCHER(dmc_bug_uninit_shared, (dmc_u32 fixed, dmc_u32* out), (fixed, out))

// Static shared memory beyond the 48 KiB limit (ptxas rejects it on the GPU).
extern "C" __global__ void dmc_bug_big_shared(dmc_u32* out) {
    __shared__ dmc_u8 big[49 * 1024];
    big[threadIdx.x] = 1;
    __syncthreads();
    out[threadIdx.x] = big[threadIdx.x];
}
DMC_EMU_LAUNCHER(dmc_bug_big_shared, (dmc_u32* out), (out))

// A kernel that changes the rounding mode (host C++ only: CUDA has no floating-point
// environment, rounding is per instruction). The emulator's fibers share the launching
// thread's control state, so the launch aborts instead of rounding other launches wrongly.
extern "C" __global__ void dmc_bug_rounding_mode(dmc_u32* out) {
    if (threadIdx.x == 0) fesetround(FE_UPWARD);
    out[threadIdx.x] = threadIdx.x;
}
DMC_EMU_LAUNCHER(dmc_bug_rounding_mode, (dmc_u32* out), (out))

// A spin-wait on another warp: warp 0 waits for a flag that warp 1 sets. On the GPU warp 1 may
// never be scheduled while warp 0 spins (no forward-progress guarantee between warps in this
// form); the emulator's sync schedule never preempts, and the watchdog names warp 0.
extern "C" __global__ void dmc_bug_spin_wait(volatile dmc_u32* flag, dmc_u32* out) {
    if (threadIdx.x < 32) {
        while (*flag == 0) {
        }
        out[threadIdx.x] = 1;
    } else {
        *flag = 1;
    }
}
DMC_EMU_LAUNCHER(dmc_bug_spin_wait, (volatile dmc_u32* flag, dmc_u32* out), (flag, out))

// Dynamic shared memory: each thread writes its index, the block reads them reversed.
extern "C" __global__ void dmc_emu_dynamic_shared(dmc_u32* out) {
    extern __shared__ dmc_u32 dyn[];
    const dmc_u32 t = threadIdx.x;
    dyn[t] = t * 7u;
    __syncthreads();
    out[t] = dyn[blockDim.x - 1 - t];
}
DMC_EMU_LAUNCHER(dmc_emu_dynamic_shared, (dmc_u32* out), (out))

// Warp intrinsics with partial masks and widths; 16 results per lane in out[16 * lane + k].
extern "C" __global__ void __launch_bounds__(32) dmc_emu_intrinsics(dmc_u32* out) {
    const dmc_u32 lane = threadIdx.x & 31u;
    dmc_u32* o = out + 16 * lane;
    o[0] = __shfl_sync(0xffffffffu, lane, 9, 8);        // lane 9 of each group of 8: base + 1
    o[1] = __shfl_up_sync(0xffffffffu, lane, 3, 8);
    o[2] = __shfl_down_sync(0xffffffffu, lane, 3, 8);
    o[3] = __shfl_xor_sync(0xffffffffu, lane, 16, 8);   // later group: own value; earlier: read
    // partial masks: the two halves shuffle separately, from different call sites
    if (lane < 16) {
        o[4] = __shfl_sync(0x0000ffffu, lane * 10u, 3);
    } else {
        o[4] = __shfl_sync(0xffff0000u, lane * 10u, 20);
    }
    o[5] = (lane >= 8 && lane < 16) ? __ballot_sync(0x0000ff00u, lane & 1u) : 0u;
    o[6] = __match_any_sync(0xffffffffu, lane / 5u);
    o[7] = __reduce_add_sync(0xffffffffu, lane);
    o[8] = __reduce_max_sync(0xffffffffu, (lane * 37u) % 32u);
    o[9] = (dmc_u32)__reduce_min_sync(0xffffffffu, (int)lane - 7);
    o[10] = __funnelshift_l(0x89abcdefu, 0x01234567u, lane);
    o[11] = __funnelshift_r(0x89abcdefu, 0x01234567u, lane);
    dmc_u32 active = 0;
    if (lane % 3 == 0) active = __activemask();
    o[12] = active;
    o[13] = __reduce_xor_sync(0xffffffffu, lane * 0x01010101u);
    __nanosleep(100);
    __threadfence_block();
    int pred = 0;
    o[14] = __match_all_sync(0xffffffffu, lane < 32 ? 5u : lane, &pred);
    o[15] = (dmc_u32)pred;
}
DMC_EMU_LAUNCHER(dmc_emu_intrinsics, (dmc_u32* out), (out))

// Reads out of bounds, for AddressSanitizer: `where` 0 reads a thread's local array one element
// past its end (a stack redzone of the fiber's frame, after the thread has yielded at a
// collective, so the fiber switches must keep the frame's shadow), 1 reads past the block's
// static shared variables (the arena's poisoned rest). `fixed` reads the last element instead.
// Mapping: one warp, out[lane].
extern "C" __global__ void __launch_bounds__(32) dmc_bug_oob_read(dmc_u32 fixed, dmc_u32 where, dmc_u32* out) {
    __shared__ dmc_u32 cells[32];
    volatile dmc_u32 local[8];
    for (int i = 0; i < 8; i++) local[i] = threadIdx.x + (dmc_u32)i;
    cells[threadIdx.x] = threadIdx.x;
    __syncwarp();
    const dmc_u32 sum = __reduce_add_sync(0xffffffffu, threadIdx.x);
    const dmc_u32 past = fixed ? 0u : 1u;
    if (where == 0) out[threadIdx.x] = local[7 + past] + sum;
    else out[threadIdx.x] = cells[31 + past] + sum;
}
DMC_EMU_LAUNCHER(dmc_bug_oob_read, (dmc_u32 fixed, dmc_u32 where, dmc_u32* out), (fixed, where, out))

// A misaligned access: lane l loads (store 0) or stores (store 1) a `width`-byte word (2, 4, 8,
// or 16 through common.cuh's dmc_load16/dmc_store16) at buf + 2 * width * l + 1, or at
// buf + 2 * width * l when fixed. A GPU faults on it (misaligned address); x86 forgives it, so
// only the alignment-sanitizer build (DAMACY_EMU_UBSAN=1) catches it. Mapping: one warp; buf
// holds 64 * width bytes, out[lane] the loaded word's low 8 bytes.
extern "C" __global__ void __launch_bounds__(32) dmc_bug_misaligned(dmc_u32 fixed, dmc_u32 width, dmc_u32 store,
                                                                    dmc_u8* buf, dmc_u64* out) {
    const dmc_u32 lane = threadIdx.x & 31u;
    dmc_u8* p = buf + 2 * width * lane + (fixed ? 0u : 1u);
    const dmc_u64 v = 0x0101010101010101ull * (lane + 1);
    dmc_u64 r = 0;
    if (width == 2) {
        if (store) *(dmc_u16*)p = (dmc_u16)v;
        else r = *(const dmc_u16*)p;
    } else if (width == 4) {
        if (store) *(dmc_u32*)p = (dmc_u32)v;
        else r = *(const dmc_u32*)p;
    } else if (width == 8) {
        if (store) *(dmc_u64*)p = v;
        else r = *(const dmc_u64*)p;
    } else {
        if (store) {
            dmc_store16(p, dmc_u32x4{{(dmc_u32)v, (dmc_u32)v, (dmc_u32)v, (dmc_u32)v}});
        } else {
            const dmc_u32x4 x = dmc_load16(p);
            r = (dmc_u64)x.w[0] | (dmc_u64)x.w[1] << 32;
        }
    }
    out[lane] = r;
}
DMC_EMU_LAUNCHER(dmc_bug_misaligned, (dmc_u32 fixed, dmc_u32 width, dmc_u32 store, dmc_u8* buf, dmc_u64* out),
                 (fixed, width, store, buf, out))

// A shuffle whose lanes disagree on the width: lanes 16..31 pass 32, lanes 0..15 pass 16
// (undefined on the GPU: the lanes of one collective must agree on it). Fixed: every lane 16.
// Mapping: one warp, out[lane].
extern "C" __global__ void __launch_bounds__(32) dmc_bug_shfl_width(dmc_u32 fixed, dmc_u32* out) {
    const dmc_u32 lane = threadIdx.x & 31u;
    const int width = (fixed || lane < 16) ? 16 : 32;
    out[lane] = __shfl_sync(0xffffffffu, lane * 3u, 1, width);
}
DMC_EMU_LAUNCHER(dmc_bug_shfl_width, (dmc_u32 fixed, dmc_u32* out), (fixed, out))

// A shuffle reached from one call site with non-identical masks that overlap: variant 1 gives
// lanes 0..15 the full mask and lanes 16..31 0xffff0000, variant 2 lanes 0..15 0x0000ffff and
// lanes 16..31 the full mask (each half alone would complete; CUDA requires every lane of a
// mask to name the same mask). Variant 0 (fixed): the full mask everywhere. Mapping: one warp.
extern "C" __global__ void __launch_bounds__(32) dmc_bug_mask_mismatch(dmc_u32 variant, dmc_u32* out) {
    const dmc_u32 lane = threadIdx.x & 31u;
    dmc_u32 mask = 0xffffffffu;
    if (variant == 1 && lane >= 16) mask = 0xffff0000u;
    if (variant == 2 && lane < 16) mask = 0x0000ffffu;
    out[lane] = __shfl_sync(mask, lane * 3u, 20);
}
DMC_EMU_LAUNCHER(dmc_bug_mask_mismatch, (dmc_u32 variant, dmc_u32* out), (variant, out))

// Blocks far apart writing the same bytes: block b writes 256 bytes at 256 b, except block
// `other` (> 0), which writes block 0's bytes. `other` 0: no overlap (fixed). With the TSan
// build's old rotation of 4 fiber sets, blocks 0 and 4 ran on the same TSan fibers in launch
// order, so their race was invisible. Mapping: 64 threads per block.
extern "C" __global__ void dmc_bug_blocks_apart(dmc_u32 other, dmc_u8* out) {
    const dmc_u32 start = (other != 0 && blockIdx.x == other) ? 0u : blockIdx.x * 256u;
    for (dmc_u32 i = threadIdx.x; i < 256; i += blockDim.x) out[start + i] = (dmc_u8)(blockIdx.x + 1);
}
DMC_EMU_LAUNCHER(dmc_bug_blocks_apart, (dmc_u32 other, dmc_u8* out), (other, out))

// A result that depends on block order: block 0 publishes a value after a barrier, block 1
// reads it with no synchronisation between the blocks (none exists inside a launch: blocks run
// in any order and at once). Sequential blocks in launch order hide it; resident blocks whose
// fibers interleave show it. Fixed: block 1 computes the value itself. Mapping: 2 blocks of 64
// threads; out[t] is what thread t of block 1 got.
extern "C" __global__ void dmc_bug_block_order(dmc_u32 fixed, dmc_u32* cell, dmc_u32* out) {
    if (blockIdx.x == 0) {
        __syncthreads();
        if (threadIdx.x == 0) *cell = 42u;
    } else if (fixed) {
        out[threadIdx.x] = 42u;
    } else {
        out[threadIdx.x] = *(volatile dmc_u32*)cell;
    }
}
DMC_EMU_LAUNCHER(dmc_bug_block_order, (dmc_u32 fixed, dmc_u32* cell, dmc_u32* out), (fixed, cell, out))
