#!/usr/bin/env python3
"""Calibration microbenchmarks for damacy's GPU performance model (issue 30).

Measures, on the GPU it runs on, the constants `damacy_kernels::model::Gpu` takes from
datasheets and published microbenchmarks, so the next run replaces them with measurements:

- launch_us:        an empty kernel between two CUDA events (the model's fixed launch cost)
- cpi_dep_int:      cycles per instruction of one warp running a dependent integer chain
                    (IADD3/LOP3/IMAD-like ops; the model charges its SASS's stall counts)
- cpi_dep_mix:      the same with a data-dependent branch every few ops (decoder-like)
- lat_l1, lat_l2, lat_dram: cycles of one dependent global load (pointer chase) whose
                    working set fits L1 (16 KiB), L2 (8 MiB) or neither (1 GiB)
- lat_dram_pairs:   cycles of one step of a dependent chain through a 1 GiB buffer's 64-byte
                    blocks in a random order, each block's first sector then its second: the
                    mean of an HBM load and of a first load of a sector whose 64-byte block
                    the step before loaded. The model's L2 lines are 64 bytes (a miss fetches
                    both sectors, the second load hits L2): it expects (lat_dram + lat_l2) / 2;
                    with 32-byte fetches it would be lat_dram
- lat_dram_stream:  cycles of one step of a dependent chain through a fresh 1 GiB buffer in
                    address order, one 128-byte line a step: HBM latency for a stream read in
                    order (open DRAM rows, few TLB misses), against lat_dram's random order.
                    The model charges lat_dram for both; the zstd raw-block row of f51d4fa
                    (four dependent waits per 512-byte round, ~2,630 cycles a round measured,
                    ~3,600 charged) suggests a stream waits less
- l2_fetch_granularity: cudaDeviceGetLimit(cudaLimitMaxL2FetchGranularity), bytes (a hint the
                    driver reports; null where the runtime refuses the query)
- lat_shared:       cycles of one dependent shared-memory load
- lat_imad:         cycles of one dependent IMAD (x = x * x + y: one SASS instruction a step)
- lat_shfl_step:    cycles of one step of a dependent shuffle chain (x = shfl(x, x + 1): a
                    SHFL.IDX and the add that makes its lane; the issue schedule's SHFL latency
                    is this minus one ALU latency)
- lat_popc_step:    cycles of one step of x = popc(x) + x (a POPC and an IADD3): the model's XU
                    latency is this less the IADD3's stall count (6)
- lat_flo_step:     cycles of one step of x = clz(x) + x + 1 (a FLO and its adds): the model
                    assumes FLO has POPC's latency
- lat_udiv_step:    cycles of one step of x = (x + k) / ((x & 7) + d): a division by a divisor
                    known only at run time (I2F, MUFU.RCP, F2I and IMADs, as in the assemble
                    kernel's index math): the model assumes the conversions and MUFU have
                    POPC's latency
- lat_l1_lines32, lat_l2_lines32: cycles of one step of a warp whose 32 lanes each chase their
                    own pointer, every lane in its own 128-byte line (one request of 32 lines a
                    step; working set 16 KiB: L1, or 8 MiB: L2): what a request costs per line
                    beyond lat_l1 / lat_l2 (the per-lane bit readers of the zstd and inflate
                    kernels issue such requests)
- lat_branch_step, lat_branch_div_step: cycles of one step of a dependent chain with a
                    data-dependent branch, taken alike by all lanes (uniform) or by half of
                    them (divergent: both sides run), less nothing: compare with lat_imad
- copy_gbps:        a device-to-device cudaMemcpy of 32 MiB (bytes copied per second)
- sm_clock_mhz:     SM cycles per second while a kernel runs (clock64 over event time)

Python 3.12 + CuPy (+ nothing else: no network, no damacy build). Prints one JSON object and
writes it to model_cal.json (or the path given as the first argument).

    python3 benches/gpu/model_cal.py [out.json]
"""
import json
import sys

import cupy as cp

SRC = r"""
extern "C" __global__ void empty() {}

// one thread: a dependent chain of n integer ops; cycles per op in out[0]
extern "C" __global__ void dep_int(unsigned n, unsigned seed, unsigned long long* out, unsigned* sink) {
    unsigned x = seed, y = seed * 3u + 1u;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) {
        x = x * 0x9E3779B1u + y;      // IMAD
        y = (y ^ (x >> 7)) + 0x1234u; // SHF/LOP3/IADD3
        x = x ^ (y << 3);
        y = y + (x & 0xffu);
    }
    long long t1 = clock64();
    out[0] = (unsigned long long)(t1 - t0);
    sink[0] = x ^ y;
}

// one warp: a decoder-like chain, a data-dependent branch every 4 ops
extern "C" __global__ void dep_mix(unsigned n, unsigned seed, unsigned long long* out, unsigned* sink) {
    unsigned x = seed + threadIdx.x, y = seed * 3u + 1u;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) {
        x = x * 0x9E3779B1u + y;
        if (x & 0x100u) y += x >> 5; else y ^= x << 2;
        y = __shfl_sync(0xffffffffu, y, 0);
        x ^= y;
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = x ^ y;
}

// one thread: pointer chase over `next`, n steps; cycles per step in out[0]
extern "C" __global__ void chase(const unsigned* __restrict__ next, unsigned n, unsigned long long* out, unsigned* sink) {
    unsigned p = 0;
    for (unsigned i = 0; i < 256; i++) p = next[p];  // warm up (TLB, caches)
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) p = next[p];
    long long t1 = clock64();
    out[0] = (unsigned long long)(t1 - t0);
    sink[0] = p;
}

extern "C" __global__ void chase_shared(unsigned n, unsigned long long* out, unsigned* sink) {
    __shared__ unsigned s[1024];
    for (unsigned i = threadIdx.x; i < 1024; i += blockDim.x) s[i] = (i * 97u + 31u) & 1023u;
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned p = 0;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) p = s[p];
    long long t1 = clock64();
    out[0] = (unsigned long long)(t1 - t0);
    sink[0] = p;
}

// one warp: dependent chains of one kind of instruction; cycles per step in out[0]
extern "C" __global__ void dep_imad(unsigned n, unsigned seed, unsigned long long* out, unsigned* sink) {
    unsigned x = seed + threadIdx.x, y = seed * 7u + 3u;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) x = x * x + y;
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = x;
}

extern "C" __global__ void dep_shfl(unsigned n, unsigned long long* out, unsigned* sink) {
    unsigned x = threadIdx.x;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) x = __shfl_sync(0xffffffffu, x, (int)(x + 1u));
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = x;
}

extern "C" __global__ void dep_popc(unsigned n, unsigned seed, unsigned long long* out, unsigned* sink) {
    unsigned x = seed + threadIdx.x;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) x = (unsigned)__popc(x) + x;
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = x;
}

extern "C" __global__ void dep_flo(unsigned n, unsigned seed, unsigned long long* out, unsigned* sink) {
    unsigned x = seed + threadIdx.x;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) x = (unsigned)__clz(x) + x + 1u;
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = x;
}

extern "C" __global__ void dep_udiv(unsigned n, unsigned d, unsigned long long* out, unsigned* sink) {
    unsigned x = 1000003u + threadIdx.x;
    long long t0 = clock64();
    // the divisor depends on x, so that the reciprocal is computed in the chain, as the
    // assemble kernel's per-item divisions compute it
    for (unsigned i = 0; i < n; i++) x = (x + 0x9E3779B1u) / ((x & 7u) + d);
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = x;
}

// one warp: each lane chases its own cycle (lane l starts at word 32 * l: its own 128-byte
// line, and so on along its cycle); cycles per step in out[0]
extern "C" __global__ void chase_lanes(const unsigned* __restrict__ next, unsigned n, unsigned long long* out,
                                       unsigned* sink) {
    unsigned p = 32u * threadIdx.x;
    for (unsigned i = 0; i < 256; i++) p = next[p];
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) p = next[p];
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = p;
}

// one warp: a dependent chain with a data-dependent branch each step; `div` 0: every lane
// takes the same side, 1: lanes of odd index take the other side
extern "C" __global__ void dep_branch(unsigned n, unsigned seed, unsigned div, unsigned long long* out, unsigned* sink) {
    unsigned x = seed, y = seed * 5u + 1u;
    const unsigned flip = div ? (threadIdx.x & 1u) : 0u;
    long long t0 = clock64();
    for (unsigned i = 0; i < n; i++) {
        if (((x >> 3) ^ flip) & 1u) x = x * 0x9E3779B1u + y; else x = (x ^ y) * 0x85EBCA6Bu + 1u;
    }
    long long t1 = clock64();
    if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
    sink[threadIdx.x] = x;
}

// spins for `cycles` SM cycles, for the clock estimate
extern "C" __global__ void spin(long long cycles, unsigned long long* out) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    out[0] = (unsigned long long)(clock64() - t0);
}
"""


def event_time(fn, reps=20):
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    times.sort()
    return times[len(times) // 2]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "model_cal.json"
    mod = cp.RawModule(code=SRC, options=("--std=c++17",))
    k = {name: mod.get_function(name) for name in ("empty", "dep_int", "dep_mix", "chase", "chase_shared", "spin", "dep_imad",
                                                    "dep_shfl", "dep_popc", "dep_flo", "dep_udiv", "chase_lanes", "dep_branch")}
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    cyc = cp.zeros(1, dtype=cp.uint64)
    sink = cp.zeros(64, dtype=cp.uint32)

    res["launch_us"] = event_time(lambda: k["empty"]((1,), (32,), ())) * 1e6

    n = 1 << 16
    k["dep_int"]((1,), (1,), (cp.uint32(n), cp.uint32(7), cyc, sink))
    cp.cuda.Device().synchronize()
    res["cpi_dep_int"] = int(cyc[0]) / (4 * n)
    k["dep_mix"]((1,), (32,), (cp.uint32(n), cp.uint32(7), cyc, sink))
    cp.cuda.Device().synchronize()
    # 4 source ops + branch + shuffle: report cycles per loop iteration and per source op
    res["cycles_per_iter_dep_mix"] = int(cyc[0]) / n

    def warp_step(name, *args):
        """Cycles per step of one warp's n-step chain (kernel NAME with n, ARGS, out, sink)."""
        k[name]((1,), (32,), (cp.uint32(n), *args, cyc, sink))
        cp.cuda.Device().synchronize()
        return int(cyc[0]) / n

    res["lat_imad"] = warp_step("dep_imad", cp.uint32(7))
    res["lat_shfl_step"] = warp_step("dep_shfl")
    res["lat_popc_step"] = warp_step("dep_popc", cp.uint32(7))
    res["lat_flo_step"] = warp_step("dep_flo", cp.uint32(7))
    res["lat_udiv_step"] = warp_step("dep_udiv", cp.uint32(7))

    def chase_cycles(nxt, steps=1 << 14):
        """Cycles per step of one thread's dependent chain through nxt (from word 0)."""
        k["chase"]((1,), (1,), (nxt, cp.uint32(steps), cyc, sink))
        cp.cuda.Device().synchronize()
        return int(cyc[0]) / steps

    for label, size in (("lat_l1", 16 << 10), ("lat_l2", 8 << 20), ("lat_dram", 1 << 30)):
        words = size // 4
        stride = 32 if label != "lat_l1" else 8  # one step per 128 B line (L2/DRAM), 32 B (L1)
        idx = cp.arange(0, words, stride, dtype=cp.uint32)
        perm = cp.random.permutation(idx.size).astype(cp.uint32)
        nxt = cp.zeros(words, dtype=cp.uint32)
        # a random cycle through the chosen words
        order = idx[perm]
        nxt[order] = cp.roll(order, -1)
        res[label] = chase_cycles(nxt)
        del nxt, idx, perm, order
    # 64-byte blocks of 1 GiB in a random order, each visited at its first sector then its
    # second (word offsets 0 and 8); the chain goes on to the next block's first sector
    blocks = (1 << 30) // 64
    order = cp.random.permutation(blocks).astype(cp.uint32) * 16
    nxt = cp.zeros((1 << 30) // 4, dtype=cp.uint32)
    nxt[order] = order + 8
    nxt[order + 8] = cp.roll(order, -1)
    res["lat_dram_pairs"] = chase_cycles(nxt)
    del nxt, order
    # one line a step in address order through memory no step touched before
    words = (1 << 30) // 4
    idx = cp.arange(0, words, 32, dtype=cp.uint32)
    nxt = cp.zeros(words, dtype=cp.uint32)
    nxt[idx] = cp.roll(idx, -1)
    res["lat_dram_stream"] = chase_cycles(nxt)
    del nxt, idx
    try:
        res["l2_fetch_granularity"] = int(cp.cuda.runtime.deviceGetLimit(0x05))
    except Exception:  # noqa: BLE001 - an older CuPy or a runtime that refuses the query
        res["l2_fetch_granularity"] = None
    for label, size in (("lat_l1_lines32", 16 << 10), ("lat_l2_lines32", 8 << 20)):
        # 32 cycles, one per lane, each through its own lines: lane l owns the lines whose
        # index is l mod 32, visited in a random order (the step's 32 requests are 32 lines)
        lines = size // 128
        nxt = cp.zeros(size // 4, dtype=cp.uint32)
        for lane in range(32):
            own = cp.arange(lane, lines, 32, dtype=cp.uint32)
            order = cp.concatenate([own[:1], own[1:][cp.random.permutation(own.size - 1)]]) * 32
            nxt[order] = cp.roll(order, -1)
        steps = 1 << 12
        k["chase_lanes"]((1,), (32,), (nxt, cp.uint32(steps), cyc, sink))
        cp.cuda.Device().synchronize()
        res[label] = int(cyc[0]) / steps
        del nxt
    for label, div in (("lat_branch_step", 0), ("lat_branch_div_step", 1)):
        k["dep_branch"]((1,), (32,), (cp.uint32(n), cp.uint32(7), cp.uint32(div), cyc, sink))
        cp.cuda.Device().synchronize()
        res[label] = int(cyc[0]) / n
    k["chase_shared"]((1,), (256,), (cp.uint32(1 << 14), cyc, sink))
    cp.cuda.Device().synchronize()
    res["lat_shared"] = int(cyc[0]) / (1 << 14)

    a = cp.empty(32 << 20, dtype=cp.uint8)
    b = cp.empty(32 << 20, dtype=cp.uint8)
    t = event_time(lambda: cp.cuda.runtime.memcpyAsync(b.data.ptr, a.data.ptr, a.nbytes, 3, 0))
    res["copy_gbps"] = a.nbytes / t / 1e9

    spin_cycles = 200_000_000
    t = event_time(lambda: k["spin"]((1,), (1,), (cp.int64(spin_cycles), cyc)), reps=3)
    res["sm_clock_mhz"] = int(cyc[0]) / t / 1e6

    print(json.dumps(res, indent=1))
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
