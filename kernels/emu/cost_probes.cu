// cost_probes.cu — kernels with known memory-access patterns for the cost model's tests
// (tests/kernel_cost.rs): each asserts exact sectors, lines or bank wavefronts per request.
// Compiled only into emulated builds (never NVRTC).
#include "common.cuh"

// out[i] = in[i * stride] for i = the global thread index: stride 1 is coalesced (a warp reads
// 128 contiguous bytes: 4 sectors, 1 line), stride 32 puts every lane in its own 128-byte line.
extern "C" __global__ void dmc_cost_strided(dmc_u32 stride, const dmc_u32* in, dmc_u32* out) {
    const dmc_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[(dmc_u64)i * stride];
}
DMC_EMU_LAUNCHER(dmc_cost_strided, (dmc_u32 stride, const dmc_u32* in, dmc_u32* out), (stride, in, out))

// Shared memory: lane l writes and reads word l * stride of a shared array (stride 0: every
// lane the same word, a broadcast). Stride 1: conflict free; 2: two words per bank; 32: all 32
// lanes in bank 0. One load and one store request per warp; out[lane] = what lane read.
extern "C" __global__ void dmc_cost_banks(dmc_u32 stride, dmc_u32* out) {
    __shared__ dmc_u32 words[32 * 33];
    const dmc_u32 lane = threadIdx.x & 31u;
    if (stride == 0) {
        if (lane == 0) words[0] = 7u;
    } else {
        words[lane * stride] = lane;
    }
    __syncwarp();
    out[blockIdx.x * blockDim.x + threadIdx.x] = words[lane * stride];
}
DMC_EMU_LAUNCHER(dmc_cost_banks, (dmc_u32 stride, dmc_u32* out), (stride, out))

// Divergence: one warp, `rounds` iterations; in iteration i lanes 0-15 take side A while
// i < rounds / 2 and side B after, lanes 16-31 the other way round. Side A loads
// in[i * 32 + lane]. Lockstep, the warp runs both sides every iteration: `rounds` load requests
// of 16 lanes (a per-lane count of side A's runs merged by their index would say rounds / 2).
extern "C" __global__ void dmc_cost_diverge(dmc_u32 rounds, const dmc_u32* in, dmc_u32* out) {
    const dmc_u32 lane = threadIdx.x & 31u;
    dmc_u32 acc = 0;
    for (dmc_u32 i = 0; i < rounds; i++) {
        if ((i < rounds / 2) == (lane < 16u)) {
            acc += in[i * 32u + lane];
        } else {
            acc = acc * 3u + i;
        }
    }
    out[lane] = acc;
}
DMC_EMU_LAUNCHER(dmc_cost_diverge, (dmc_u32 rounds, const dmc_u32* in, dmc_u32* out), (rounds, in, out))

// Reuse distance: one warp loads line 0 of `in` (128 bytes, one request), then lines 1..=gap
// (gap requests), then line 0 again: a warm load whose reuse distance is `gap` lines.
extern "C" __global__ void dmc_cost_reuse(dmc_u32 gap, const dmc_u32* in, dmc_u32* out) {
    const dmc_u32 lane = threadIdx.x & 31u;
    dmc_u32 acc = in[lane];
    for (dmc_u32 k = 1; k <= gap; k++) acc += in[k * 32u + lane];
    acc ^= ((const volatile dmc_u32*)in)[lane];  // volatile: not the first load's value again
    out[lane] = acc;
}
DMC_EMU_LAUNCHER(dmc_cost_reuse, (dmc_u32 gap, const dmc_u32* in, dmc_u32* out), (gap, in, out))

// L2 lines: lane 0 of one warp loads word k * step of `in` for k < n, one request each (step 8:
// every 32-byte sector in turn, so each 64-byte L2 line's second sector after its first; 16:
// one sector of each line; 4: every sector twice).
extern "C" __global__ void dmc_cost_sectors(dmc_u32 n, dmc_u32 step, const dmc_u32* in, dmc_u32* out) {
    if (threadIdx.x != 0) return;
    dmc_u32 acc = 0;
    for (dmc_u32 k = 0; k < n; k++) acc = acc * 3u + ((const volatile dmc_u32*)in)[k * step];
    out[0] = acc;
}
DMC_EMU_LAUNCHER(dmc_cost_sectors, (dmc_u32 n, dmc_u32 step, const dmc_u32* in, dmc_u32* out), (n, step, in, out))
