// selftest.cu — emulator self-test, compiled only into emulated builds (never shipped to NVRTC).
// Mapping: one block of 64 threads; each thread publishes a value in shared memory and reads
// its left neighbour's. Without the barrier the read races the neighbour's write: the fixed
// schedule hides that, a shuffled schedule exposes it.
#include "common.cuh"

extern "C" __global__ void dmc_selftest_neighbor(dmc_u32 with_barrier, dmc_u32* out) {
    __shared__ dmc_u32 cell[64];
    const dmc_u32 t = threadIdx.x;
    cell[t] = 0;
    __syncthreads();
    cell[t] = t + 1;
    if (with_barrier) __syncthreads();
    out[t] = cell[t == 0 ? 0 : t - 1];
    if (!with_barrier) __syncthreads();  // keep the barrier count equal on both paths
}

DMC_EMU_LAUNCHER(dmc_selftest_neighbor, (dmc_u32 with_barrier, dmc_u32* out), (with_barrier, out))
