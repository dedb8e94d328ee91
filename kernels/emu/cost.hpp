// cost.hpp — the memory-access recorder of the cost model (issue 14), part of cuda_emu.hpp.
//
// Built only when the kernels are compiled with DMC_EMU_COST=1 (DAMACY_EMU_COST=1): then the
// kernels are compiled with gcc's ThreadSanitizer instrumentation (-fsanitize=thread) but
// libtsan is NOT linked; kernels/emu/runtime.cu defines the __tsan_read*/__tsan_write*/
// __tsan_atomic* entry points instead, and each of them calls record() below with the address,
// the size, the kind (load, store, atomic) and the call site (the return address of the hook:
// one machine instruction of the kernel).
//
// What counts: accesses made while a fiber runs a kernel (tls_block->cur set), classified by
// address: the block's shared-memory arena is shared memory; the fiber stacks are local memory
// (counted, not modelled); the launching OS thread's stack and the emulator's own fiber objects
// are emulator bookkeeping (counted as `host`, not modelled; the kernels' argument captures
// live there); everything else is global memory (the device buffers).
//
// Grouping: the k-th execution of call site S by lane L of warp W is instance k; the lanes of
// W with the same (S, k) form one warp request, as they would issue one instruction together
// on a converged warp. The instance counters restart at every point where the whole warp is
// known to be converged (a full-warp collective, a barrier), so divergent loops realign there.
// A warp's requests are evaluated at those points and at the end of the block.
// Included by cuda_emu.hpp inside namespace dmc_emu (it uses the Block, Fiber and ThreadState
// of the scheduler); its standard headers are included at the top of cuda_emu.hpp.
#pragma once

namespace cost {

enum Space : uint8_t { SPACE_GLOBAL = 0, SPACE_SHARED = 1 };
enum Kind : uint8_t { KIND_LOAD = 0, KIND_STORE = 1, KIND_ATOMIC = 2 };

// The totals of one launch (C ABI: a Rust twin in crates/damacy-kernels/src/cost.rs; only
// u64 fields after the name, so the layout has no padding). Arrays of 3 are per kind.
struct LaunchCost {
    char kernel[48];
    uint64_t grid_x, grid_y, block_threads, smem_bytes, warps;
    // global memory: warp requests, active lanes summed, bytes requested (with duplicates),
    // distinct 32-byte sectors and 128-byte lines per request summed, the ideal sectors
    // (ceil(distinct bytes / 32)) summed
    uint64_t g_req[3], g_lanes[3], g_bytes[3], g_sectors[3], g_ideal[3], g_lines[3];
    // shared memory: warp requests, lanes, bytes, wavefronts (the largest number of distinct
    // 4-byte words in one of the 32 banks: 1 = conflict free; lanes reading the same word are
    // a broadcast and count once), the ideal wavefronts (ceil(distinct words / 32))
    uint64_t s_req[3], s_lanes[3], s_bytes[3], s_wavefronts[3], s_ideal[3];
    uint64_t s_max_wavefronts;  // the worst request
    uint64_t footprint_sectors;  // distinct global sectors of the whole launch
    uint64_t g_cold;  // global requests that touched a sector no earlier request of the launch did
    uint64_t local_accesses, local_bytes, host_accesses;
    // the most cold and warm global requests and shared requests one warp issued (each the
    // maximum over the warps on its own)
    uint64_t max_warp_g_cold, max_warp_g_warm, max_warp_s_req;
};
static_assert(sizeof(LaunchCost) == 48 + 8 * (5 + 18 + 15 + 9), "LaunchCost has no padding");

struct Rec {
    uint64_t addr;
    uintptr_t pc;
    uint32_t inst;
    uint32_t size;
    uint8_t lane, kind, space;
};

struct WarpLog {
    std::vector<Rec> recs;
    std::unordered_map<uintptr_t, std::array<uint32_t, 32>> inst;
    uint64_t g_cold = 0, g_warm = 0, s_req = 0;
};

struct ThreadCost {
    LaunchCost cur{};
    std::unordered_set<uint64_t> footprint;
    WarpLog warps[MAX_THREADS / 32];
    uintptr_t stack_lo = 0, stack_hi = 0;
    std::vector<uint64_t> scratch;
    // per call site (DAMACY_EMU_COST_SITES set): global requests, cold ones, shared requests
    std::unordered_map<uintptr_t, std::array<uint64_t, 3>> sites;
};

struct Sink {
    std::mutex mu;
    std::vector<LaunchCost> launches;
};
inline Sink& sink() {
    static Sink* s = new Sink();  // never destroyed: stream threads may outlive main
    return *s;
}

// 1 while this OS thread runs a launch; 1 while the recorder itself runs (its containers'
// instrumented code calls back into the hooks).
inline DMC_EMU_TLS int tls_on = 0;
inline DMC_EMU_TLS int tls_busy = 0;
inline thread_local ThreadCost* tls_cost = nullptr;

DMC_EMU_INTERNAL inline void record(const volatile void* p, uint64_t size, uint8_t kind, uintptr_t pc) {
    if (__builtin_expect(tls_on == 0 || tls_busy != 0, 1)) return;
    Block* b = tls_block;
    if (b == nullptr || b->cur == nullptr) return;
    tls_busy = 1;
    ThreadCost* c = tls_cost;
    ThreadState* ts = tls_state;
    const uintptr_t a = (uintptr_t)p;
    const uintptr_t arena = (uintptr_t)b->arena, stacks = (uintptr_t)ts->region + ARENAS_BYTES;
    const uintptr_t fibers = (uintptr_t)ts->fiber_pool;
    uint8_t space = SPACE_GLOBAL;
    if (a - arena < ARENA_BYTES) {
        space = SPACE_SHARED;
    } else if (a - stacks < STACKS_BYTES) {
        c->cur.local_accesses++;
        c->cur.local_bytes += size;
        tls_busy = 0;
        return;
    } else if ((a >= c->stack_lo && a < c->stack_hi) || a - fibers < sizeof(Fiber) * STACK_SETS * MAX_THREADS ||
               a - (uintptr_t)b < sizeof(Block)) {
        c->cur.host_accesses++;
        tls_busy = 0;
        return;
    }
    Fiber* f = b->cur;
    const int w = f->linear / 32, lane = f->linear & 31;
    WarpLog& L = c->warps[w];
    const uint32_t inst = L.inst[pc][lane]++;
    L.recs.push_back(Rec{(uint64_t)a, pc, inst, (uint32_t)size, (uint8_t)lane, kind, space});
    tls_busy = 0;
}

// The distinct units of 2^shift bytes that the records [r, r + n) touch, sorted, in `out`.
DMC_EMU_INTERNAL inline void units(const Rec* r, size_t n, int shift, std::vector<uint64_t>& out) {
    out.clear();
    for (size_t i = 0; i < n; i++) {
        const uint64_t first = r[i].addr >> shift, last = (r[i].addr + (r[i].size ? r[i].size : 1) - 1) >> shift;
        for (uint64_t u = first; u <= last; u++) out.push_back(u);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
}

// DAMACY_EMU_COST_SITES set: launch_end prints the requests of every call site to stderr
// (module-relative addresses for addr2line), a diagnostic for finding a kernel's costs.
DMC_EMU_INTERNAL inline bool sites_on() {
    static const bool on = std::getenv("DAMACY_EMU_COST_SITES") != nullptr;
    return on;
}

// Evaluates one warp request: the records of one (call site, instance) of one warp.
DMC_EMU_INTERNAL inline void request(ThreadCost* c, WarpLog& L, const Rec* r, size_t n) {
    LaunchCost& t = c->cur;
    const int k = r[0].kind;
    uint32_t lanes = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        lanes |= 1u << r[i].lane;
        bytes += r[i].size;
    }
    std::vector<uint64_t>& u = c->scratch;
    units(r, n, 0, u);
    const uint64_t distinct = u.size();
    if (r[0].space == SPACE_GLOBAL) {
        t.g_req[k]++;
        t.g_lanes[k] += (uint64_t)__builtin_popcount(lanes);
        t.g_bytes[k] += bytes;
        t.g_ideal[k] += (distinct + 31) / 32;
        units(r, n, 7, u);
        t.g_lines[k] += u.size();
        units(r, n, 5, u);
        t.g_sectors[k] += u.size();
        bool cold = false;
        for (uint64_t s : u) cold |= c->footprint.insert(s).second;
        t.g_cold += cold;
        (cold ? L.g_cold : L.g_warm)++;
        if (sites_on()) {
            auto& e = c->sites[r[0].pc];
            e[0]++;
            e[1] += cold;
        }
    } else {
        units(r, n, 2, u);
        unsigned per_bank[32] = {};
        uint64_t degree = 0;
        for (uint64_t word : u) degree = std::max<uint64_t>(degree, ++per_bank[word & 31u]);
        t.s_req[k]++;
        t.s_lanes[k] += (uint64_t)__builtin_popcount(lanes);
        t.s_bytes[k] += bytes;
        t.s_wavefronts[k] += degree;
        t.s_ideal[k] += (u.size() + 31) / 32;
        t.s_max_wavefronts = std::max(t.s_max_wavefronts, degree);
        L.s_req++;
        if (sites_on()) c->sites[r[0].pc][2]++;
    }
}

// Evaluates the requests warp `w` logged so far and restarts its instance counters: called
// where the warp is converged.
DMC_EMU_INTERNAL inline void flush_warp(int w) {
    ThreadCost* c = tls_cost;
    if (tls_on == 0 || c == nullptr) return;
    const int busy = tls_busy;
    tls_busy = 1;
    WarpLog& L = c->warps[w];
    std::vector<Rec>& v = L.recs;
    if (!v.empty()) {
        std::sort(v.begin(), v.end(), [](const Rec& x, const Rec& y) {
            return x.pc != y.pc ? x.pc < y.pc : x.inst != y.inst ? x.inst < y.inst : x.lane < y.lane;
        });
        size_t i = 0;
        while (i < v.size()) {
            size_t j = i + 1;
            while (j < v.size() && v[j].pc == v[i].pc && v[j].inst == v[i].inst) j++;
            request(c, L, &v[i], j - i);
            i = j;
        }
        v.clear();
    }
    L.inst.clear();
    tls_busy = busy;
}

DMC_EMU_INTERNAL inline void flush_block(Block* b, bool end) {
    if (tls_on == 0) return;
    const int nw = (b->nthreads + 31) / 32;
    for (int w = 0; w < nw; w++) flush_warp(w);
    if (!end) return;
    ThreadCost* c = tls_cost;
    for (int w = 0; w < nw; w++) {
        WarpLog& L = c->warps[w];
        c->cur.max_warp_g_cold = std::max(c->cur.max_warp_g_cold, L.g_cold);
        c->cur.max_warp_g_warm = std::max(c->cur.max_warp_g_warm, L.g_warm);
        c->cur.max_warp_s_req = std::max(c->cur.max_warp_s_req, L.s_req);
        L.g_cold = L.g_warm = L.s_req = 0;
    }
}

DMC_EMU_INTERNAL inline void launch_begin(const char* kernel, dim3 grid, dim3 block) {
    tls_busy = 1;
    if (tls_cost == nullptr) {
        tls_cost = new ThreadCost();
        pthread_attr_t attr;
        void* lo = nullptr;
        size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            pthread_attr_getstack(&attr, &lo, &size);
            pthread_attr_destroy(&attr);
        }
        tls_cost->stack_lo = (uintptr_t)lo;
        tls_cost->stack_hi = (uintptr_t)lo + size;
    }
    ThreadCost* c = tls_cost;
    c->cur = LaunchCost{};
    std::snprintf(c->cur.kernel, sizeof c->cur.kernel, "%s", kernel);
    c->cur.grid_x = grid.x;
    c->cur.grid_y = (uint64_t)grid.y * grid.z;
    c->cur.block_threads = (uint64_t)block.x * block.y * block.z;
    c->cur.warps = (uint64_t)grid.x * grid.y * grid.z * ((c->cur.block_threads + 31) / 32);
    c->footprint.clear();
    for (WarpLog& L : c->warps) {
        L.recs.clear();
        L.inst.clear();
        L.g_cold = L.g_warm = L.s_req = 0;
    }
    tls_busy = 0;
    tls_on = 1;
}

DMC_EMU_INTERNAL inline void launch_end(size_t smem_bytes) {
    tls_on = 0;
    tls_busy = 1;
    ThreadCost* c = tls_cost;
    c->cur.smem_bytes = smem_bytes;
    c->cur.footprint_sectors = c->footprint.size();
    if (sites_on() && !c->sites.empty()) {
        std::vector<std::pair<uintptr_t, std::array<uint64_t, 3>>> v(c->sites.begin(), c->sites.end());
        std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second[0] * 8 + x.second[2] > y.second[0] * 8 + y.second[2]; });
        for (const auto& [pc, e] : v) {
            Dl_info info{};
            const uintptr_t base = dladdr((void*)pc, &info) ? (uintptr_t)info.dli_fbase : 0;
            std::fprintf(stderr, "cost-site %s %s 0x%lx global %lu cold %lu shared %lu\n", c->cur.kernel,
                         info.dli_fname ? info.dli_fname : "?", (unsigned long)(pc - base), (unsigned long)e[0],
                         (unsigned long)e[1], (unsigned long)e[2]);
        }
        c->sites.clear();
    }
    {
        std::lock_guard<std::mutex> lock(sink().mu);
        sink().launches.push_back(c->cur);
    }
    tls_busy = 0;
}

}  // namespace cost
