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

// Buckets of WarpRec::warm_dist.
constexpr int WARM_BUCKETS = 12;

// One warp of a launch, for the GPU performance model (issue 30): its block, its dynamic
// instruction estimate and its memory requests (C ABI: a Rust twin in
// crates/damacy-kernels/src/model/mod.rs; u64 and f64 fields only).
struct WarpRec {
    uint64_t block;  // linear block index (x fastest)
    uint64_t warp;   // warp of the block
    // the block's barriers (__syncthreads) before this record: a warp's path between two of
    // its block's barriers is one record, so that the model can wait each phase out
    uint64_t phase;
    // basic blocks the warp ran: its lanes' paths merged in lockstep (simt_runs: a block that
    // several lanes run at the same point of their paths is one run; diverged lanes take turns)
    uint64_t bbs;
    // the same, each weighted by the SASS instructions per host basic block of its source
    // line (kernels/emu/model weights, DAMACY_GPU_MODEL_SASS); = bbs without a weight table
    double insts;
    // the exposed shuffles among them (the table's third column: those that lengthen a chain
    // of dependent shuffles; 0 without a table)
    double shfl;
    // the same blocks' issue cycles (the table's fourth column: their SASS's stall counts, ptxas'
    // static schedule, the exposed shuffles' left out); without a table NO_TABLE_CYCLES per block
    double cycles;
    // global requests and sectors; loads: cold (a sector the launch never touched whose
    // 64-byte L2 line no load fetched: HBM), warm (every sector loaded before and not stored
    // since: an L1 hit), l2 (the rest: a first touch of a sector whose line partner a load
    // fetched, a sector the launch stored, which a store does not leave in L1, or an L1 miss)
    uint64_t g_load_cold, g_load_warm, g_store, g_sectors;
    uint64_t s_load, s_store, s_wavefronts;  // shared requests, wavefronts
    uint64_t g_load_l2;
    // the warm loads by reuse distance: the distinct 128-byte lines this OS thread's global
    // loads of the launch touched since the request's lines were last touched (an LRU stack
    // distance; the blocks an emulator thread runs go one after another: the distance is what
    // the block, and the blocks before it on the thread, touched meanwhile). Bucket 0: < 16
    // lines (2 KiB); bucket k: [2^(k+3), 2^(k+4)) lines; the last bucket is open. The model
    // makes a warm load an L2 hit when its distance exceeds the block's share of the SM's L1.
    uint64_t warm_dist[WARM_BUCKETS];
};
static_assert(sizeof(WarpRec) == 8 * (15 + WARM_BUCKETS), "WarpRec has no padding");

struct Rec {
    uint64_t addr;
    uintptr_t pc;
    uint32_t inst;
    uint32_t size;
    uint8_t lane, kind, space;
};

struct WarpLog {
    std::vector<Rec> recs;
    // the runs of the warp (simt_runs' steps) at which each lane ran each block of its trace
    std::vector<uint32_t> step[32];
    uint64_t g_cold = 0, g_warm = 0, s_req = 0;
    // GPU performance model (issue 30; crates/damacy-kernels/src/model/): the basic blocks
    // (coverage call sites) each lane ran, in order, since the warp last converged, and the
    // warp's totals so far.
    std::vector<uintptr_t> trace[32];
    std::unordered_map<uintptr_t, uint32_t> runs;  // flush_warp's scratch: warp runs per site
    WarpRec tot{};
};

// LRU stack distances of a sequence of keys (128-byte lines): `touch(k)` returns how many
// distinct keys were touched since k's previous touch (UINT64_MAX for a first touch). A Fenwick
// tree over the touch times marks each key's latest touch; the distance is the marks after the
// previous one.
struct ReuseDistance {
    std::unordered_map<uint64_t, uint64_t> last;  // key -> time of its latest touch
    std::vector<uint32_t> tree;                    // Fenwick tree over times 1..tree.size()-1
    uint64_t now = 0;

    void clear() {
        last.clear();
        tree.assign(1, 0);
        now = 0;
    }
    void add(uint64_t t, int32_t v) {
        for (; t < tree.size(); t += t & (~t + 1)) tree[t] += (uint32_t)v;
    }
    uint64_t prefix(uint64_t t) const {
        uint64_t n = 0;
        for (; t > 0; t -= t & (~t + 1)) n += tree[t];
        return n;
    }
    uint64_t touch(uint64_t key) {
        now++;
        if (now >= tree.size()) {  // grow: rebuild over twice the times from the latest touches
            tree.assign(std::max<size_t>(1024, 2 * tree.size()), 0);
            for (const auto& kv : last) add(kv.second, 1);
        }
        uint64_t d = UINT64_MAX;
        const auto it = last.find(key);
        if (it != last.end()) {
            d = prefix(now - 1) - prefix(it->second);
            add(it->second, -1);
            it->second = now;
        } else {
            last.emplace(key, now);
        }
        add(now, 1);
        return d;
    }
};

struct ThreadCost {
    LaunchCost cur{};
    std::unordered_set<uint64_t> footprint;
    // the 64-byte L2 lines (a sector index >> 1) a load of the launch brought in from HBM: a
    // load that misses L2 fetches its sector's whole 64-byte line, so the first load of the
    // line's other sector is an L2 hit, not an HBM access (stores fetch nothing)
    std::unordered_set<uint64_t> fetched;
    // sectors loaded since they were last stored (the L1's global lines: stores write through
    // and leave no line in L1)
    std::unordered_set<uint64_t> l1;
    ReuseDistance reuse;  // of the launch's global requests' lines
    WarpLog warps[MAX_THREADS / 32];
    uintptr_t stack_lo = 0, stack_hi = 0;
    std::vector<uint64_t> scratch, scratch2;
    // per call site (DAMACY_EMU_COST_SITES set): global requests, cold ones, shared requests
    std::unordered_map<uintptr_t, std::array<uint64_t, 3>> sites;
    std::vector<WarpRec> warp_recs;  // the launch's warps' phases, as their barriers complete
    uint64_t phase = 0;              // barriers the running block passed (blocks run one at a time)
    // per basic block (DAMACY_EMU_COST_SITES set): warp runs, weighted instructions and issue
    // cycles (with the exposed shuffles at SHFL_SITE_CYCLES)
    struct BbSite {
        uint64_t runs = 0;
        double insts = 0, cycles = 0;
    };
    std::unordered_map<uintptr_t, BbSite> bb_sites;
};

struct Sink {
    std::mutex mu;
    std::vector<LaunchCost> launches;
    std::vector<std::vector<WarpRec>> warps;  // per launch, beside `launches`
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
    // the lane's block (1-based position in its trace; flush_warp turns it into the warp's run)
    const uint32_t inst = (uint32_t)L.trace[lane].size();
    L.recs.push_back(Rec{(uint64_t)a, pc, inst, (uint32_t)size, (uint8_t)lane, kind, space});
    tls_busy = 0;
}

// ---- The GPU performance model's instruction count (issue 30) ----
// Every basic block of a kernel calls __sanitizer_cov_trace_pc (kernels/emu/runtime.cu), which
// calls on_bb with its return address while a launch is recorded. A weight table maps those
// call sites (offsets in the loaded binary) to SASS instructions per execution: made by
// crates/damacy-kernels/scripts/gpu_model_sass.py from NVRTC's sm_90 cubins (nvdisasm line
// info) joined with the binary's call sites (objdump + addr2line) by source line; the file it
// wrote is named by DAMACY_GPU_MODEL_SASS. Without one every basic block weighs 1 instruction
// of NO_TABLE_CYCLES issue cycles.
struct Weight {
    // SASS instructions, the exposed shuffles among them and their issue cycles, per execution
    float insts, shfl, cycles;
};
// A basic block's issue cycles without a weight table: one instruction at the dependent-issue
// latency of sm_90's integer pipes (4 cycles; a table gives each block its SASS's own).
constexpr float NO_TABLE_CYCLES = 4.0f;
// An exposed shuffle's cycles in the per-site listing (DAMACY_EMU_COST_SITES): the model's shuffle
// latency (src/model: SHFL_LATENCY), so that the sites rank as the model charges them.
constexpr double SHFL_SITE_CYCLES = 27.6;
struct Weights {
    uintptr_t base = 0;
    std::unordered_map<uintptr_t, Weight> w;  // by offset from `base`
    bool loaded = false;
};
inline Weights& weights() {
    static Weights* ws = [] {
        Weights* x = new Weights();
        Dl_info info{};
        if (dladdr((void*)&weights, &info) != 0) x->base = (uintptr_t)info.dli_fbase;
        const char* path = std::getenv("DAMACY_GPU_MODEL_SASS");
        if (path != nullptr && *path != 0) {
            if (FILE* f = std::fopen(path, "r")) {
                unsigned long off = 0;
                float wt = 0, sh = 0, cy = 0;
                char line[256];
                bool old_format = false;
                while (std::fgets(line, sizeof line, f) != nullptr) {
                    if (line[0] == '#') continue;
                    const int n = std::sscanf(line, "%lx %f %f %f", &off, &wt, &sh, &cy);
                    if (n == 4) {
                        x->w[(uintptr_t)off] = Weight{wt, sh, cy};
                    } else if (n >= 1) {
                        old_format = true;
                    }
                }
                std::fclose(f);
                if (old_format) {
                    // a table of an older gpu_model_sass.py (no issue cycles): not used
                    std::fprintf(stderr,
                                 "damacy CUDA emulator: DAMACY_GPU_MODEL_SASS=%s has rows without the issue-cycles "
                                 "column: remake it (crates/damacy-kernels/scripts/gpu_model.sh --table)\n",
                                 path);
                    x->w.clear();
                } else {
                    x->loaded = true;
                }
            } else {
                std::fprintf(stderr, "damacy CUDA emulator: DAMACY_GPU_MODEL_SASS=%s cannot be opened\n", path);
            }
        }
        return x;
    }();
    return *ws;
}

// SASS instructions (and shuffles) of one execution of the basic block whose coverage call
// returns to `pc`: the table's weights (0 for blocks of no kernel source line: the emulator's
// own code), or 1 instruction of NO_TABLE_CYCLES without a table.
DMC_EMU_INTERNAL inline Weight bb_weight(uintptr_t pc) {
    Weights& ws = weights();
    if (!ws.loaded) return Weight{1.0f, 0.0f, NO_TABLE_CYCLES};
    auto it = ws.w.find(pc - ws.base);
    return it == ws.w.end() ? Weight{0.0f, 0.0f, 0.0f} : it->second;
}

// One basic block run by the current fiber's lane (from __sanitizer_cov_trace_pc).
DMC_EMU_INTERNAL inline void on_bb(uintptr_t pc) {
    if (tls_on == 0 || tls_busy != 0) return;
    Block* b = tls_block;
    if (b == nullptr || b->cur == nullptr) return;
    tls_busy = 1;
    Fiber* f = b->cur;
    tls_cost->warps[f->linear / 32].trace[f->linear & 31].push_back(pc);
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

// WarpRec::warm_dist's bucket of a reuse distance of `d` lines.
DMC_EMU_INTERNAL inline int warm_bucket(uint64_t d) {
    if (d < 16) return 0;
    const int k = 63 - __builtin_clzll(d) - 3;  // d in [2^(k+3), 2^(k+4))
    return k < WARM_BUCKETS - 1 ? k : WARM_BUCKETS - 1;
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
        std::vector<uint64_t>& lines = c->scratch2;  // the 128-byte lines (also the L1's unit below)
        units(r, n, 7, lines);
        t.g_lines[k] += lines.size();
        units(r, n, 5, u);
        t.g_sectors[k] += u.size();
        // cold: a sector no earlier request of the launch touched; hbm: one of them whose
        // 64-byte L2 line no earlier load fetched (the load waits for HBM)
        bool cold = false, hbm = false, in_l1 = true;
        for (uint64_t s : u) {
            const bool fresh = c->footprint.insert(s).second;
            cold |= fresh;
            hbm |= fresh && c->fetched.count(s >> 1) == 0;
            in_l1 = in_l1 && c->l1.count(s) != 0;
        }
        // loads allocate lines in L1 (stores and atomics do not): their LRU distance
        uint64_t dist = 0;
        if (k != KIND_STORE && k != KIND_ATOMIC) {
            for (uint64_t line : lines) dist = std::max(dist, c->reuse.touch(line));
        }
        t.g_cold += cold;
        (cold ? L.g_cold : L.g_warm)++;
        L.tot.g_sectors += u.size();
        if (k == KIND_STORE) {
            L.tot.g_store++;
            for (uint64_t s : u) c->l1.erase(s);
        } else if (k == KIND_ATOMIC) {  // performed in L2
            (hbm ? L.tot.g_load_cold : L.tot.g_load_l2)++;
            for (uint64_t s : u) {
                c->l1.erase(s);
                c->fetched.insert(s >> 1);
            }
        } else {
            (hbm ? L.tot.g_load_cold : (!cold && in_l1) ? L.tot.g_load_warm : L.tot.g_load_l2)++;
            if (!cold && in_l1) L.tot.warm_dist[warm_bucket(dist)]++;
            for (uint64_t s : u) {
                c->l1.insert(s);
                c->fetched.insert(s >> 1);
            }
        }
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
        (k == KIND_STORE ? L.tot.s_store : L.tot.s_load)++;
        L.tot.s_wavefronts += degree;
        if (sites_on()) c->sites[r[0].pc][2]++;
    }
}

// The warp's runs of each basic block since it last converged, from its lanes' traces, in
// `L.runs`, and the run at which each lane ran each block of its trace in `L.step` (the traces
// are consumed). A warp runs its lanes in lockstep, as a SIMT stack does: lanes at the same
// block run it together; where they go different ways (divergence) each group runs alone up to
// the point where their paths meet again, and there they run together again. The meeting point
// (the branch's immediate post-dominator, which a GPU's reconvergence barrier marks) is taken
// from the lanes' own futures: the first block that lies on every group's path, the nearest one
// by the longer of the ways to it (a branch's join before the next iteration's same branch).
// So a warp runs each iteration of a loop as the union of its lanes' paths, and a block that
// one lane runs in iterations 1–5 and another in iterations 6–10 is ten runs.
DMC_EMU_INTERNAL inline void simt_runs(WarpLog& L) {
    constexpr uintptr_t NONE = 0, END = UINTPTR_MAX;
    constexpr size_t WINDOW = 1u << 16;  // how far ahead a meeting point is looked for
    size_t pos[32] = {};
    for (int l = 0; l < 32; l++) L.step[l].resize(L.trace[l].size());
    auto at = [&](int l) { return pos[l] < L.trace[l].size() ? L.trace[l][pos[l]] : END; };
    struct Entry {
        uint32_t mask;
        uintptr_t rpc;  // where its lanes stop (NONE: their ends)
    };
    std::vector<Entry> st;
    uint32_t all = 0;
    for (int l = 0; l < 32; l++)
        if (!L.trace[l].empty()) all |= 1u << l;
    if (all != 0) st.push_back(Entry{all, NONE});
    std::unordered_map<uintptr_t, uint32_t> seen;  // block -> groups whose paths reach it
    uint32_t s = 0;
    while (!st.empty()) {
        const Entry e = st.back();
        uint32_t act = 0;
        for (int l = 0; l < 32; l++)
            if ((e.mask >> l & 1u) && at(l) != END && at(l) != e.rpc) act |= 1u << l;
        if (act == 0) {
            st.pop_back();
            continue;
        }
        // the groups of the active lanes by block, and a lead lane of each
        uintptr_t pcs[32];
        uint32_t masks[32];
        int leads[32], ng = 0;
        for (int l = 0; l < 32; l++) {
            if (!(act >> l & 1u)) continue;
            int g = 0;
            while (g < ng && pcs[g] != at(l)) g++;
            if (g == ng) {
                pcs[ng] = at(l);
                masks[ng] = 0;
                leads[ng++] = l;
            }
            masks[g] |= 1u << l;
        }
        if (ng == 1) {  // converged: one run of the block
            L.runs[pcs[0]]++;
            for (int l = 0; l < 32; l++)
                if (act >> l & 1u) L.step[l][pos[l]++] = s;
            s++;
            continue;
        }
        // diverged: the meeting point, the first block found on every group's path walking
        // them forward side by side (a path ends at the entry's stop or the lane's end)
        seen.clear();
        uintptr_t meet = e.rpc;
        bool open[32];
        for (int g = 0; g < ng; g++) open[g] = true;
        for (size_t d = 0; d < WINDOW && meet == e.rpc; d++) {
            bool any = false;
            for (int g = 0; g < ng && meet == e.rpc; g++) {
                if (!open[g]) continue;
                const size_t i = pos[leads[g]] + d;
                uintptr_t pc = i < L.trace[leads[g]].size() ? L.trace[leads[g]][i] : END;
                if (pc == e.rpc || pc == END) open[g] = false;
                if (pc == e.rpc) continue;  // every path stops there: the default
                uint32_t& m = seen[pc];
                m |= 1u << g;
                if (m == (ng == 32 ? ~0u : (1u << ng) - 1u) && pc != END) meet = pc;
                any = any || open[g];
            }
            if (!any) break;
        }
        // each group runs alone to the meeting point (the last pushed first), then the entry's
        // lanes, all there, go on together
        for (int g = 0; g < ng; g++) st.push_back(Entry{masks[g], meet});
    }
    for (auto& t : L.trace) t.clear();
}

// Evaluates the requests warp `w` logged so far and restarts its instance counters: called
// where the warp is converged.
DMC_EMU_INTERNAL inline void flush_warp(int w) {
    ThreadCost* c = tls_cost;
    if (tls_on == 0 || c == nullptr) return;
    const int busy = tls_busy;
    tls_busy = 1;
    WarpLog& L = c->warps[w];
    simt_runs(L);
    std::vector<Rec>& v = L.recs;
    // a request is the accesses of one call site in one run of the warp (lanes that ran the
    // site's block together)
    for (Rec& r : v) r.inst = r.inst == 0 ? 0 : 1 + L.step[r.lane][r.inst - 1];
    if (!v.empty()) {
        // in the warp's order (its runs), then by site: the L1's reuse distances and first
        // touches follow the order the warp issued its requests in
        std::sort(v.begin(), v.end(), [](const Rec& x, const Rec& y) {
            return x.inst != y.inst ? x.inst < y.inst : x.pc != y.pc ? x.pc < y.pc : x.lane < y.lane;
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
    for (const auto& [pc, m] : L.runs) {
        L.tot.bbs += m;
        const Weight wt = bb_weight(pc);
        const double wi = m * (double)wt.insts;
        L.tot.insts += wi;
        L.tot.shfl += m * (double)wt.shfl;
        L.tot.cycles += m * (double)wt.cycles;
        if (sites_on()) {
            auto& e = c->bb_sites[pc];
            e.runs += m;
            e.insts += wi;
            e.cycles += m * ((double)wt.cycles + (double)wt.shfl * SHFL_SITE_CYCLES);
        }
    }
    L.runs.clear();
    tls_busy = busy;
}

// At a barrier (end false) and at the block's end: evaluates every warp's requests and closes
// its phase, a record of what it ran since the block's last barrier (none for a warp that ran
// nothing: one that left before the barrier).
DMC_EMU_INTERNAL inline void flush_block(Block* b, bool end) {
    if (tls_on == 0) return;
    const int nw = (b->nthreads + 31) / 32;
    for (int w = 0; w < nw; w++) flush_warp(w);
    ThreadCost* c = tls_cost;
    const uint64_t block =
        (uint64_t)b->bidx.x + (uint64_t)b->gdim.x * ((uint64_t)b->bidx.y + (uint64_t)b->gdim.y * b->bidx.z);
    for (int w = 0; w < nw; w++) {
        WarpLog& L = c->warps[w];
        if (end) {
            c->cur.max_warp_g_cold = std::max(c->cur.max_warp_g_cold, L.g_cold);
            c->cur.max_warp_g_warm = std::max(c->cur.max_warp_g_warm, L.g_warm);
            c->cur.max_warp_s_req = std::max(c->cur.max_warp_s_req, L.s_req);
            L.g_cold = L.g_warm = L.s_req = 0;
        }
        const WarpRec& t = L.tot;
        if (t.bbs == 0 && t.g_store == 0 && t.g_sectors == 0 && t.s_load == 0 && t.s_store == 0) continue;
        L.tot.block = block;
        L.tot.warp = (uint64_t)w;
        L.tot.phase = c->phase;
        c->warp_recs.push_back(L.tot);
        L.tot = WarpRec{};
    }
    c->phase = end ? 0 : c->phase + 1;
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
    c->fetched.clear();
    c->l1.clear();
    c->reuse.clear();
    c->warp_recs.clear();
    c->phase = 0;
    for (WarpLog& L : c->warps) {
        L.recs.clear();
        L.g_cold = L.g_warm = L.s_req = 0;
        for (int l = 0; l < 32; l++) {
            L.trace[l].clear();
            L.step[l].clear();
        }
        L.runs.clear();
        L.tot = WarpRec{};
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
    if (sites_on() && !c->bb_sites.empty()) {
        // the 40 blocks of the most issue cycles (all warps of the launch)
        std::vector<std::pair<uintptr_t, ThreadCost::BbSite>> v(c->bb_sites.begin(), c->bb_sites.end());
        std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.second.cycles > y.second.cycles; });
        Weights& ws = weights();
        for (size_t i = 0; i < v.size() && i < 40; i++)
            std::fprintf(stderr, "model-site %s 0x%lx runs %lu insts %.0f cycles %.0f\n", c->cur.kernel,
                         (unsigned long)(v[i].first - ws.base), (unsigned long)v[i].second.runs, v[i].second.insts,
                         v[i].second.cycles);
        c->bb_sites.clear();
    }
    {
        std::lock_guard<std::mutex> lock(sink().mu);
        sink().launches.push_back(c->cur);
        sink().warps.push_back(std::move(c->warp_recs));
        c->warp_recs = {};
    }
    tls_busy = 0;
}

}  // namespace cost
