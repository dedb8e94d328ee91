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
