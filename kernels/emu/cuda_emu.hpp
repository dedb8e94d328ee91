// cuda_emu.hpp — host emulation of the CUDA C subset damacy's kernels use.
//
// Force-included (g++ -std=c++20 -x c++ -include cuda_emu.hpp) before every kernels/*.cu file
// when the crate is built with the `emulate` feature. The build script first rewrites each file's
// `__shared__` declarations into DMC_EMU_SHARED / DMC_EMU_EXTERN_SHARED (same line numbers, a
// #line directive keeps the original file name) and declares each kernel's __launch_bounds__.
//
// Execution model: one fiber per CUDA thread, all on the calling OS thread. With seed 0 the
// blocks of a grid run one at a time in launch order; with any other seed in a seeded random
// order, up to 4 at once (resident blocks, each with its own fibers, barrier and shared arena;
// the scheduler interleaves the fibers of all of them), so a kernel whose result depends on
// block order or on one block seeing another's writes fails. Schedules:
// - sync (default): a fiber runs until it reaches a synchronisation point (__syncthreads, a warp
//   collective, __nanosleep); with a non-zero seed the ready fibers run in a freshly shuffled
//   order after every synchronisation point, so a missing barrier shows up as a wrong result.
// - lockstep: the lanes of a warp advance together, one basic block at a time, round robin
//   (kernels are built with -fsanitize-coverage=trace-pc; the callback is the step point).
// - preempt: a fiber is preempted at a random basic block (seeded), so the other threads'
//   accesses fall between any two of its own.
// - mixed: one of the three per launch, from (seed, kernel, grid) (mixed_schedule; what
//   scripts/asan.sh runs the tests under).
// Collectives are matched by call site (std::source_location), operation, mask and width; a
// collective completes when every non-exited lane of its mask waits on it; partial masks, the
// width semantics of CUDA's shuffles, __activemask (the lanes waiting at the same call site),
// __match_any/all_sync and __reduce_*_sync are emulated.
//
// Shared memory: one arena per block, filled with 0xA5 at every block's start (under ASan the
// unused parts are poisoned), static variables checked against the 48 KiB static limit, dynamic
// `extern __shared__` memory sized by dmc_emu_configure up to the opt-in maximum (≤ 227 KiB).
//
// Checked (abort with a message): divergent barriers and collectives (different call sites,
// masks, widths or operations), a mask that does not name its lane, deadlocks, shared memory
// limits, a warp that reaches no sync point for the watchdog's time. Launch limits (block size,
// __launch_bounds__, grid y/z ≤ 65535, dynamic shared memory) fail the launch with a code.
//
// Fibers switch with dmc_emu_swap (runtime.cu, x86-64 only): it saves the callee-saved
// general registers on the current stack and loads the other fiber's stack pointer. The
// floating-point control state (MXCSR, x87 control word) is the launching thread's for every
// fiber; a launch fails if a kernel changed it. glibc's _setjmp/_longjmp did this with more
// work per switch, and under ASan every _longjmp was intercepted (a sigaltstack system call and
// an unpoisoning of the stack's shadow per switch: most of the ASan run's time); a fiber switch
// abandons no frames and needs neither.
//
// Sanitizers: under AddressSanitizer the fiber switches are annotated; with DMC_EMU_UBSAN
// (-fsanitize=alignment) a misaligned access aborts; under ThreadSanitizer
// every CUDA thread is a TSan fiber (a set per block, up to tsan_sets(); see TSAN_LAUNCH_FIBERS), switches do
// not synchronise, and barriers, __syncwarp and the end of a launch are release/acquire points
// (shuffles, votes, matches and reductions are not: they order no memory on a GPU), so a data
// race between CUDA threads (a missing __syncthreads or __syncwarp, lanes communicating through
// shared memory with only a shuffle or vote between, a lost update, two blocks writing the same
// bytes) is reported. Atomics are relaxed (as CUDA's).
#pragma once

#include <atomic>
#include <cstdarg>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <source_location>
#include <thread>
#include <vector>
#include <sys/mman.h>
#if defined(DMC_EMU_COST) && DMC_EMU_COST
#include <algorithm>
#include <array>
#include <pthread.h>
#include <dlfcn.h>
#include <unordered_map>
#include <unordered_set>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define DMC_EMU_ASAN 1
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     size_t* size_old);
void __asan_poison_memory_region(void const volatile* addr, size_t size);
void __asan_unpoison_memory_region(void const volatile* addr, size_t size);
}
#else
#define DMC_EMU_ASAN 0
#endif

// DMC_EMU_COST=1 (the cost-model build): the kernels carry ThreadSanitizer's instrumentation,
// but libtsan is not linked: the hooks record memory accesses (cost.hpp, runtime.cu).
#ifndef DMC_EMU_COST
#define DMC_EMU_COST 0
#endif

#if defined(__SANITIZE_THREAD__) && !DMC_EMU_COST
#define DMC_EMU_TSAN 1
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
void __tsan_set_fiber_name(void* fiber, const char* name);
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}
#else
#define DMC_EMU_TSAN 0
#endif

// DMC_EMU_UBSAN=1 (set by the build script with -fsanitize=alignment): every load and store
// through a T* checks the address against alignof(T) and aborts on a misaligned one.
#ifndef DMC_EMU_UBSAN
#define DMC_EMU_UBSAN 0
#endif

#define DMC_EMULATE 1

#if !defined(__x86_64__)
#error "the CUDA emulator's fiber switch (dmc_emu_swap in kernels/emu/runtime.cu) is written for x86-64"
#endif
extern "C" {
// Saves the calling context on its stack, stores its stack pointer at *save and resumes the
// context saved at load (runtime.cu).
void dmc_emu_swap(void** save, void* load);
// Where a new fiber's first switch returns to: calls the function in r13 with r12 as argument.
void dmc_emu_fiber_start(void);
}

// Emulator internals: not instrumented by TSan (the scheduler's
// bookkeeping is no memory access of the emulated program) nor by the coverage callback that
// drives the lockstep and preempt schedules.
#define DMC_EMU_INTERNAL __attribute__((no_sanitize_thread, no_sanitize_coverage))
#define DMC_EMU_TLS __attribute__((tls_model("initial-exec"))) thread_local
// In the cost build: emulator glue that kernel code reaches (the launch trampolines, cur())
// is no memory access of the emulated program either.
#if DMC_EMU_COST
#define DMC_EMU_COST_INTERNAL DMC_EMU_INTERNAL
#else
#define DMC_EMU_COST_INTERNAL
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
// Every __shared__ declaration is rewritten by the build script; one that is left (a form it
// does not understand, e.g. several declarators or a declaration over several lines) fails to
// compile here.
#define __shared__ DMC_EMU_UNSUPPORTED_SHARED_DECLARATION_write_one_per_line

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};

namespace dmc_emu {

constexpr int MAX_THREADS = 1024;
constexpr size_t STACK_BYTES = DMC_EMU_ASAN ? (512 * 1024) : DMC_EMU_TSAN ? (256 * 1024) : (128 * 1024);
// Shared memory: static variables below 48 KiB, dynamic memory after them, up to 227 KiB in all
// (the sm_90 opt-in maximum per block).
constexpr size_t SMEM_STATIC_LIMIT = 48 * 1024;
constexpr size_t SMEM_OPTIN_LIMIT = 227 * 1024;
constexpr size_t ARENA_BYTES = (SMEM_STATIC_LIMIT + SMEM_OPTIN_LIMIT + 4095) / 4096 * 4096;
// Under TSan a launch's blocks run on sets of TSan fibers (see tsan_sets), and each fiber of
// the launch has its own stack (fiber slot set * block size + thread): a stack is only ever
// used by one TSan fiber within a launch, so locals whose address is taken (TSan tracks those)
// are never reported as shared between CUDA threads of different blocks that happened to reuse
// the same memory. STACK_SETS * MAX_THREADS slots per OS thread.
constexpr int STACK_SETS = DMC_EMU_TSAN ? 4 : 1;
constexpr size_t STACKS_BYTES = (size_t)STACK_SETS * MAX_THREADS * STACK_BYTES;
// Blocks of a grid resident at once (each with its own fibers, barrier and shared arena; the
// scheduler interleaves their fibers): up to this many with a non-zero seed (DAMACY_EMU_RESIDENT_BLOCKS,
// dmc_emu_set_resident_blocks), one at a time with seed 0 and in the cost build (its address
// classification knows one arena).
constexpr int MAX_RESIDENT = DMC_EMU_COST ? 1 : 4;
constexpr size_t ARENAS_BYTES = (size_t)MAX_RESIDENT * ARENA_BYTES;
constexpr unsigned char SMEM_POISON = 0xA5;
constexpr uint64_t SHFL_POISON = 0xA5A5A5A5A5A5A5A5ull;
// TSan sync objects are addresses: every block gets a fresh window of them (so no ordering
// carries over from one block to the next through a reused sync object), from a reserved
// region whose metadata is reset by unmapping it when it is used up.
constexpr size_t TSAN_SYNC_REGION = (size_t)64 << 20;
constexpr size_t TSAN_SYNC_WINDOW = 2048;
constexpr int TSAN_MASKS = 16;  // distinct __syncwarp masks per warp and block

// SCHED_MIXED picks one of the other three per launch (mixed_schedule).
enum Schedule : unsigned { SCHED_DEFAULT = 0, SCHED_SYNC = 1, SCHED_LOCKSTEP = 2, SCHED_PREEMPT = 3, SCHED_MIXED = 4 };
enum State : int { READY = 0, WAIT_BAR = 1, WAIT_WARP = 2, DONE = 3 };
enum WarpOp : int {
    W_SYNC, W_SHFL, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_XOR, W_BALLOT, W_ANY, W_ALL, W_MATCH_ANY,
    W_MATCH_ALL, W_RED_ADD, W_RED_MIN, W_RED_MAX, W_RED_MIN_S, W_RED_MAX_S, W_RED_AND, W_RED_OR,
    W_RED_XOR, W_ACTIVEMASK
};
inline const char* op_name(int op) {
    static const char* const names[] = {
        "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
        "__ballot_sync", "__any_sync", "__all_sync", "__match_any_sync", "__match_all_sync",
        "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync", "__reduce_min_sync",
        "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync",
        "__activemask"};
    return (op >= 0 && op <= W_ACTIVEMASK) ? names[op] : "?";
}

// The call site of a collective or barrier. gcc and clang represent a std::source_location as
// a pointer to one static record per call site, so the same bytes mean the same site, and
// comparing them is all a collective's lanes usually need; records that differ are compared by
// what they name (operator==, after cost.hpp). The accessors are read only then and in messages.
struct Site {
    std::source_location loc{};
    const char* file() const;
    unsigned line() const;
    unsigned column() const;
    bool operator==(const Site& o) const;
};
static_assert(sizeof(std::source_location) == sizeof(void*), "a source_location is one pointer");

struct Block;
struct Fiber {
    void* sp = nullptr;  // the saved stack pointer while suspended; null until made
    char* stack = nullptr;
    Block* block = nullptr;  // the block it runs in
    dim3 tid;
    int linear = 0;
    int state = READY;
    // The collective or barrier it waits on.
    int op = 0;
    unsigned mask = 0;
    int width = 32;
    int arg = 0;
    uint64_t val = 0;
    Site site;
    uint64_t result = 0;
    int result2 = 0;
    int bar_pred = 0;
#if DMC_EMU_ASAN
    void* fake_stack = nullptr;
#endif
#if DMC_EMU_TSAN
    void* tsan = nullptr;
    char* sync_addr = nullptr;
    unsigned bar_gen = 0;
#endif
};

struct Options {
    unsigned schedule = SCHED_DEFAULT;
    unsigned dyn_smem = 0;
    unsigned max_dyn_smem = 0;
    unsigned watchdog_ms = 0;
    unsigned resident = 0;  // resident blocks with a non-zero seed (0: DAMACY_EMU_RESIDENT_BLOCKS, else MAX_RESIDENT)
};

// What the watchdog thread sees of a launch in progress on one OS thread.
struct RunRecord {
    std::atomic<int> active{0};
    std::atomic<uint64_t> progress{0};
    std::atomic<unsigned> timeout_ms{0};
    std::atomic<unsigned> bx{0}, by{0}, bz{0};
    std::atomic<int> running{-1};  // linear thread index of the fiber running now
    std::atomic<uint64_t> switches{0};
    const char* kernel = "";
    // owned by the watchdog thread
    uint64_t seen = ~0ull;
    std::chrono::steady_clock::time_point since{};
};

struct SharedVar {
    const void* key;
    const char* name;
    size_t off, size;
};

struct Block {
    dim3 bidx, bdim, gdim;
    int nthreads = 0;
    void (*body)(void*) = nullptr;
    void* ctx = nullptr;
    void* sched_sp = nullptr;  // the scheduler's saved stack pointer while a fiber runs
    Fiber* cur = nullptr;
    Fiber** fibers = nullptr;
    int bar_count = 0;
    unsigned schedule = SCHED_SYNC;
    uint64_t seed = 0;
    uint64_t rng = 0;
    const char* kernel = "";
    RunRecord* rec = nullptr;
    int slot = 0;       // its resident slot: arena and (outside TSan) fibers
    bool live = false;  // a block runs in the slot
    // shared memory of the launch
    char* arena = nullptr;
    SharedVar vars[64];
    int nvars = 0;
    size_t static_top = 0;
    size_t dyn_bytes = 0;
    size_t smem_limit = SMEM_STATIC_LIMIT;
#if DMC_EMU_ASAN
    void* sched_fake_stack = nullptr;
    const void* sched_bottom = nullptr;
    size_t sched_size = 0;
#endif
#if DMC_EMU_TSAN
    void* sched_tsan = nullptr;
    void** tsan_fibers = nullptr;
    int tsan_set = 0;
    unsigned bar_gen = 0;
    char* sync_window = nullptr;
    char exit_sync = 0;
    char start_sync = 0;
#endif
};

// Per OS thread: the fibers, their stacks and the shared-memory arena in one mapping.
struct ThreadState {
    char* region = nullptr;
    Fiber* fiber_pool = nullptr;  // one array: the cost model tells its addresses from the kernels'
    Fiber* fibers[STACK_SETS * MAX_THREADS] = {};
    RunRecord rec;
    Options opts;
    unsigned last_schedule = 0;  // the schedule the thread's latest launch ran under
    int last_resident = 0;       // and how many blocks it kept resident
    bool registered = false;
#if DMC_EMU_TSAN
    char* sync_region = nullptr;
    char* retired_sync_region = nullptr;  // unmapped at the end of the launch that replaced it
    size_t sync_next = 0;
    // per warp: the __syncwarp masks seen in this block, and each lane's count per mask
    // (per resident slot)
    unsigned wmask[MAX_RESIDENT][MAX_THREADS / 32][TSAN_MASKS];
    unsigned wcount[MAX_RESIDENT][MAX_THREADS / 32][TSAN_MASKS][32];
    int nmasks[MAX_RESIDENT][MAX_THREADS / 32];
#endif
    ~ThreadState();
};

inline DMC_EMU_TLS Block* tls_block = nullptr;
// 1 while a fiber runs and the schedule wants the coverage callback to step or preempt.
inline DMC_EMU_TLS int tls_step_mode = 0;
inline thread_local ThreadState* tls_state = nullptr;

inline std::atomic<unsigned> g_launch_order_sync{0};

DMC_EMU_INTERNAL inline const char* short_file(const char* f) {
    const char* k = nullptr;
    for (const char* p = std::strstr(f, "/kernels/"); p != nullptr; p = std::strstr(p + 1, "/kernels/")) k = p + 1;
    return k ? k : f;
}

[[noreturn]] DMC_EMU_INTERNAL __attribute__((format(printf, 1, 2))) inline void fail(const char* fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    Block* b = tls_block;
    if (b != nullptr) {
        std::fprintf(stderr, "damacy CUDA emulator: %s [kernel %s, block (%u,%u,%u)", buf, b->kernel,
                     b->bidx.x, b->bidx.y, b->bidx.z);
        if (b->cur != nullptr) std::fprintf(stderr, ", thread %d", b->cur->linear);
        std::fprintf(stderr, "]\n");
    } else {
        std::fprintf(stderr, "damacy CUDA emulator: %s\n", buf);
    }
    std::fflush(stderr);
    std::abort();
}

DMC_EMU_COST_INTERNAL inline Fiber* cur() { return tls_block->cur; }

// ---- Options: per OS thread (dmc_emu_configure), defaults from the environment ----

DMC_EMU_INTERNAL inline unsigned env_schedule() {
    static const unsigned s = [] {
        const char* e = std::getenv("DAMACY_EMU_SCHEDULE");
        if (e == nullptr || *e == 0 || std::strcmp(e, "sync") == 0) return (unsigned)SCHED_SYNC;
        if (std::strcmp(e, "lockstep") == 0) return (unsigned)SCHED_LOCKSTEP;
        if (std::strcmp(e, "preempt") == 0) return (unsigned)SCHED_PREEMPT;
        if (std::strcmp(e, "mixed") == 0) return (unsigned)SCHED_MIXED;
        std::fprintf(stderr, "damacy CUDA emulator: DAMACY_EMU_SCHEDULE=%s is not sync, lockstep, preempt or mixed\n", e);
        std::abort();
    }();
    return s;
}

DMC_EMU_INTERNAL inline unsigned env_resident_blocks() {
    static const unsigned n = [] {
        const char* e = std::getenv("DAMACY_EMU_RESIDENT_BLOCKS");
        const long v = e ? std::strtol(e, nullptr, 10) : 0;
        return v >= 1 && v <= MAX_RESIDENT ? (unsigned)v : (unsigned)MAX_RESIDENT;
    }();
    return n;
}

DMC_EMU_INTERNAL inline unsigned env_watchdog_ms() {
    static const unsigned ms = [] {
        const char* e = std::getenv("DAMACY_EMU_WATCHDOG_S");
        const long s = e ? std::strtol(e, nullptr, 10) : 0;
        return s > 0 ? (unsigned)(s * 1000) : 300000u;
    }();
    return ms;
}

// ---- The watchdog: one thread for the process, started by the first launch ----

struct Watchdog {
    std::mutex mu;
    std::vector<RunRecord*> records;
};
inline Watchdog& watchdog() {
    static Watchdog* w = new Watchdog();  // never destroyed: threads may exit after main
    return *w;
}

DMC_EMU_INTERNAL inline void watchdog_loop() {
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        Watchdog& w = watchdog();
        std::lock_guard<std::mutex> lock(w.mu);
        const auto now = std::chrono::steady_clock::now();
        for (RunRecord* r : w.records) {
            if (!r->active.load()) {
                r->seen = ~0ull;
                continue;
            }
            const uint64_t p = r->progress.load();
            if (p != r->seen) {
                r->seen = p;
                r->since = now;
                continue;
            }
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - r->since).count();
            if (ms < (long long)r->timeout_ms.load()) continue;
            const int t = r->running.load();
            std::fprintf(stderr,
                         "damacy CUDA emulator: watchdog: kernel %s, block (%u,%u,%u): warp %d "
                         "(threads %d-%d) reached no sync point for %lld ms (thread %d %s); "
                         "a spin-wait on another warp or an endless loop?\n",
                         r->kernel, r->bx.load(), r->by.load(), r->bz.load(), t / 32, t / 32 * 32,
                         t / 32 * 32 + 31, (long long)ms, t,
                         r->switches.load() > 0 ? "was running" : "runs");
            std::fflush(stderr);
            std::abort();
        }
    }
}

DMC_EMU_INTERNAL inline void watchdog_register(RunRecord* r) {
    static std::once_flag once;
    std::call_once(once, [] { std::thread(watchdog_loop).detach(); });
    std::lock_guard<std::mutex> lock(watchdog().mu);
    watchdog().records.push_back(r);
}

inline ThreadState::~ThreadState() {
    if (registered) {
        std::lock_guard<std::mutex> lock(watchdog().mu);
        auto& v = watchdog().records;
        for (size_t i = 0; i < v.size(); i++)
            if (v[i] == &rec) {
                v.erase(v.begin() + (long)i);
                break;
            }
    }
}

// ---- Fibers ----

#if DMC_EMU_TSAN
// TSan fibers: creating one costs 1-1.5 ms with gcc 12's libtsan (its pre-2022 runtime: a
// ThreadState with a 16K-entry clock and a mapped shadow stack per fiber), so fibers are pooled
// for the process, and a launch checks out `sets` sets of them: block k (in run order) runs on
// set k mod sets.
//
// Why a fiber that is fresh to its launch is as good as a new one: a pooled fiber's history is
// earlier launches, all ordered before this one (launches acquire g_launch_order_sync), and
// inside a launch nothing passes ordering from one block's fibers to another's: every block
// gets fresh sync addresses (barriers, collectives), a fresh shared arena and its own stacks,
// start_sync carries only the launching thread's clock, and exit_sync is acquired by the
// launching thread alone, after the last block. So two blocks on different sets share no
// ordering, exactly as if each had new fibers. Two blocks on the same set do: this runtime
// treats every access of one fiber (one tid) as program-ordered, and a reused tid (destroy +
// create) is no better (the registry recycles the slot with a higher epoch, and accesses of the
// same tid are never compared). New fibers per block are out of reach: a 256-thread block would
// cost ~0.3 s to create, and the runtime allows 8192 live threads, while every release/acquire
// costs time linear in the number of fibers a clock has seen (1.1 ms per fiber to create, and
// 32 fibers' release+acquire 5 -> 100 ms when the clocks span 64 -> 4096 fibers, measured).
// So `sets` is as large as a budget of TSAN_LAUNCH_FIBERS fibers allows (at least 4), and a
// launch of at most `sets` blocks (the seeded-bug kernels, the focused tests' launches of up to
// 1024 / block-size blocks) runs every block on fibers of its own: races between any two
// blocks are seen. In larger grids, blocks that run a multiple of `sets` apart share fibers;
// with a non-zero seed the block order is a seeded random permutation, so which pairs share
// changes with the seed.
constexpr int TSAN_LAUNCH_FIBERS = 1024;
DMC_EMU_INTERNAL inline int tsan_sets(uint64_t blocks, int block_threads) {
    int sets = TSAN_LAUNCH_FIBERS / block_threads;
    if (sets < 4) sets = 4;
    if (sets > STACK_SETS * MAX_THREADS / block_threads) sets = STACK_SETS * MAX_THREADS / block_threads;
    return blocks < (uint64_t)sets ? (int)blocks : sets;
}
struct TsanPool {
    std::mutex mu;
    std::vector<void*> free;
};
inline TsanPool& tsan_pool() {
    static TsanPool* p = new TsanPool();
    return *p;
}
DMC_EMU_INTERNAL inline void tsan_checkout(void** out, int n) {
    int have = 0;
    {
        std::lock_guard<std::mutex> lock(tsan_pool().mu);
        auto& v = tsan_pool().free;
        while (have < n && !v.empty()) {
            out[have++] = v.back();
            v.pop_back();
        }
    }
    while (have < n) out[have++] = __tsan_create_fiber(0);
}
DMC_EMU_INTERNAL inline void tsan_checkin(void** fibers, int n) {
    std::lock_guard<std::mutex> lock(tsan_pool().mu);
    for (int i = 0; i < n; i++) tsan_pool().free.push_back(fibers[i]);
}
#endif

DMC_EMU_INTERNAL inline void yield_to_scheduler() {
    Block* b = tls_block;
    Fiber* f = b->cur;
    tls_step_mode = 0;
#if DMC_EMU_ASAN
    __sanitizer_start_switch_fiber(&f->fake_stack, b->sched_bottom, b->sched_size);
#endif
#if DMC_EMU_TSAN
    __tsan_switch_to_fiber(b->sched_tsan, 1 /* no synchronisation */);
#endif
    dmc_emu_swap(&f->sp, b->sched_sp);
    // Resumed, possibly by a later launch: `b` may be gone (a Block lives in its launch's frame).
    b = tls_block;
#if DMC_EMU_ASAN
    // The stack this switch came from is the resuming launch's scheduler stack.
    __sanitizer_finish_switch_fiber(f->fake_stack, &b->sched_bottom, &b->sched_size);
#endif
    tls_step_mode = b->schedule == SCHED_LOCKSTEP || b->schedule == SCHED_PREEMPT;
}

DMC_EMU_INTERNAL inline void fiber_main() {
#if DMC_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &tls_block->sched_bottom, &tls_block->sched_size);
#endif
    tls_step_mode = tls_block->schedule == SCHED_LOCKSTEP || tls_block->schedule == SCHED_PREEMPT;
    for (;;) {
        Block* b = tls_block;
#if DMC_EMU_TSAN
        // The launching thread's earlier work (its uploads) happens before the kernel.
        __tsan_acquire(&b->start_sync);
#endif
        b->body(b->ctx);
#if DMC_EMU_TSAN
        __tsan_release(&b->exit_sync);  // the launch's end happens after every thread's work
#endif
        b->cur->state = DONE;
        b->rec->progress.fetch_add(1, std::memory_order_relaxed);
        yield_to_scheduler();
    }
}

DMC_EMU_INTERNAL inline ThreadState* thread_state() {
    if (tls_state == nullptr) {
        auto* s = new ThreadState();
        const size_t bytes = ARENAS_BYTES + STACKS_BYTES;
        void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) fail("cannot map fiber stacks and the shared-memory arena");
        s->region = static_cast<char*>(m);
        s->fiber_pool = new Fiber[STACK_SETS * MAX_THREADS]();  // value-initialised: uc zeroed
        for (int i = 0; i < STACK_SETS * MAX_THREADS; i++) {
            s->fibers[i] = &s->fiber_pool[i];
            s->fibers[i]->stack = s->region + ARENAS_BYTES + (size_t)i * STACK_BYTES;
        }
        tls_state = s;
        static thread_local struct Reaper {
            ~Reaper() {
                if (tls_state) {
#if DMC_EMU_ASAN
                    // gcc 12's libasan keeps the shadow of unmapped memory: without this the
                    // arena's poison and the redzones of the suspended fibers' frames would be
                    // found by whatever is mapped here next (another thread's fiber stacks).
                    __asan_unpoison_memory_region(tls_state->region, ARENAS_BYTES);
                    for (int i = 0; i < STACK_SETS * MAX_THREADS; i++)
                        if (tls_state->fiber_pool[i].sp != nullptr)
                            __asan_unpoison_memory_region(tls_state->fiber_pool[i].stack, STACK_BYTES);
#endif
                    delete[] tls_state->fiber_pool;
                    munmap(tls_state->region, ARENAS_BYTES + STACKS_BYTES);
                    delete tls_state;
                    tls_state = nullptr;
                }
            }
        } reaper;
        (void)reaper;
    }
    return tls_state;
}

DMC_EMU_INTERNAL inline void make_fiber(Fiber* f) {
#if DMC_EMU_ASAN
    // A fresh mapping may still carry shadow left by memory unmapped there earlier (libasan does
    // not clear it on munmap, e.g. a finished thread's stack redzones): start the stack clean.
    __asan_unpoison_memory_region(f->stack, STACK_BYTES);
#endif
    // The frame dmc_emu_swap pops, at the 16-byte aligned top of the stack: r15, r14, r13
    // (fiber_main), r12, rbx, rbp (0: the end of the frame-pointer chain) and the return address
    // dmc_emu_fiber_start, which calls fiber_main with the stack aligned as the ABI wants at a
    // call. The top is coloured: stack k starts k mod 256 cache lines below its end. Stacks lie
    // STACK_BYTES (a power of two) apart, so uncoloured tops all map to the same cache sets (a
    // test of the emulated device route went from 88 to ~80 s with the colouring).
    const size_t colour = (size_t)((f - tls_state->fiber_pool) % 256) * 64;
    auto* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(f->stack) + STACK_BYTES - colour) & ~uintptr_t{15});
    top[-1] = reinterpret_cast<uint64_t>(&dmc_emu_fiber_start);
    top[-2] = 0;                                          // rbp
    top[-3] = 0;                                          // rbx
    top[-4] = 0;                                          // r12: fiber_main's (unused) argument
    top[-5] = reinterpret_cast<uint64_t>(&fiber_main);  // r13
    top[-6] = 0;                                          // r14
    top[-7] = 0;                                          // r15
    f->sp = &top[-7];
}

DMC_EMU_INTERNAL inline void switch_to(Block* b, Fiber* f) {
    tls_block = b;
    b->cur = f;
    b->rec->running.store(f->linear, std::memory_order_relaxed);
#if DMC_EMU_ASAN
    __sanitizer_start_switch_fiber(&b->sched_fake_stack, f->stack, STACK_BYTES);
#endif
#if DMC_EMU_TSAN
    __tsan_switch_to_fiber(f->tsan, 1 /* no synchronisation */);
#endif
    dmc_emu_swap(&b->sched_sp, f->sp);
#if DMC_EMU_ASAN
    __sanitizer_finish_switch_fiber(b->sched_fake_stack, nullptr, nullptr);
#endif
    b->cur = nullptr;
}

DMC_EMU_INTERNAL inline uint64_t next_rng(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

DMC_EMU_INTERNAL inline void shuffle(Fiber** a, int n, uint64_t& rng) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(next_rng(rng) % (uint64_t)(i + 1));
        Fiber* t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

// ---- Shared memory ----

DMC_EMU_INTERNAL inline void* shared_static(const void* key, size_t size, size_t align, const char* name) {
    Block* b = tls_block;
    if (b == nullptr || b->cur == nullptr) fail("__shared__ variable `%s` outside a kernel (file-scope __shared__ is not emulated)", name);
    for (int i = 0; i < b->nvars; i++)
        if (b->vars[i].key == key) return b->arena + b->vars[i].off;
    if (b->nvars == 64) fail("more than 64 __shared__ variables in one kernel");
    if (align < 16) align = 16;
    const size_t off = (b->static_top + align - 1) / align * align;
    const size_t top = off + size;
    if (top > SMEM_STATIC_LIMIT)
        fail("static __shared__ memory exceeds the 48 KiB static limit: `%s` (%zu bytes) ends at byte %zu", name, size, top);
    if (top + b->dyn_bytes > b->smem_limit)
        fail("static (%zu bytes, up to `%s`) + dynamic (%zu bytes) shared memory exceeds the block's limit of %zu bytes",
             top, name, b->dyn_bytes, b->smem_limit);
    b->vars[b->nvars++] = SharedVar{key, name, off, size};
    b->static_top = top;
    // The bytes were filled with the poison at the block's start (by the scheduler, so under
    // TSan that write happens before every thread of the block).
#if DMC_EMU_ASAN
    __asan_unpoison_memory_region(b->arena + off, size);
#endif
    return b->arena + off;
}

DMC_EMU_INTERNAL inline void* shared_dynamic(size_t align) {
    Block* b = tls_block;
    if (b == nullptr || b->cur == nullptr) fail("extern __shared__ memory used outside a kernel");
    if (align > 16) fail("extern __shared__ alignment above 16 bytes is not emulated");
    return b->arena + SMEM_STATIC_LIMIT;
}

// Poisons the block's shared memory: 0xA5 bytes where the kernel may read (a value it reads
// before writing is visible), and under ASan everything else in the arena is unaddressable.
DMC_EMU_INTERNAL inline void poison_arena(Block* b) {
#if DMC_EMU_ASAN
    __asan_unpoison_memory_region(b->arena, ARENA_BYTES);
#endif
    // All of the static part: variables first reached later in this block are poisoned too.
    std::memset(b->arena, SMEM_POISON, SMEM_STATIC_LIMIT + b->dyn_bytes);
#if DMC_EMU_ASAN
    __asan_poison_memory_region(b->arena + b->static_top, SMEM_STATIC_LIMIT - b->static_top);
    __asan_poison_memory_region(b->arena + SMEM_STATIC_LIMIT + b->dyn_bytes,
                                ARENA_BYTES - SMEM_STATIC_LIMIT - b->dyn_bytes);
#endif
}

#if DMC_EMU_COST
#include "cost.hpp"
#define DMC_EMU_COST_HOOK(...) __VA_ARGS__
#else
#define DMC_EMU_COST_HOOK(...)
#endif

// std::source_location's accessors are out-of-line functions compiled with the kernels'
// instrumentation: in the cost build their reads of the location's static record would count as
// global loads of the kernel, so the recorder is paused while they run.
template <class F> DMC_EMU_INTERNAL inline auto unrecorded(F&& f) {
#if DMC_EMU_COST
    const int busy = cost::tls_busy;
    cost::tls_busy = 1;
    auto r = f();
    cost::tls_busy = busy;
    return r;
#else
    return f();
#endif
}
DMC_EMU_INTERNAL inline const char* Site::file() const { return unrecorded([&] { return loc.file_name(); }); }
DMC_EMU_INTERNAL inline unsigned Site::line() const { return unrecorded([&] { return (unsigned)loc.line(); }); }
DMC_EMU_INTERNAL inline unsigned Site::column() const { return unrecorded([&] { return (unsigned)loc.column(); }); }
DMC_EMU_INTERNAL inline bool Site::operator==(const Site& o) const {
    if (std::memcmp(&loc, &o.loc, sizeof loc) == 0) return true;
    return line() == o.line() && column() == o.column() && std::strcmp(file(), o.file()) == 0;
}

// ---- Collectives ----

DMC_EMU_INTERNAL inline bool same_collective(const Fiber* a, const Fiber* b) {
    return a->op == b->op && a->mask == b->mask && a->width == b->width && a->site == b->site;
}

// Computes the results of a complete collective whose lanes (bits of `p`, warp at w0) all wait.
DMC_EMU_INTERNAL inline void complete_collective(Block* b, int w0, int nl, unsigned p) {
    Fiber** fs = b->fibers + w0;
    const int op = fs[__builtin_ctz(p)]->op;
    unsigned ballot = 0;
    uint32_t r_and = ~0u, r_or = 0, r_xor = 0, r_add = 0, r_min = ~0u, r_max = 0;
    int32_t r_smin = INT32_MAX, r_smax = INT32_MIN;
    bool all_equal = true;
    const uint64_t first = fs[__builtin_ctz(p)]->val;
    for (int l = 0; l < nl; l++) {
        if (!(p >> l & 1u)) continue;
        const uint64_t v = fs[l]->val;
        const uint32_t v32 = (uint32_t)v;
        if (v != 0) ballot |= 1u << l;
        if (v != first) all_equal = false;
        r_and &= v32;
        r_or |= v32;
        r_xor ^= v32;
        r_add += v32;
        r_min = v32 < r_min ? v32 : r_min;
        r_max = v32 > r_max ? v32 : r_max;
        r_smin = (int32_t)v32 < r_smin ? (int32_t)v32 : r_smin;
        r_smax = (int32_t)v32 > r_smax ? (int32_t)v32 : r_smax;
    }
    for (int l = 0; l < nl; l++) {
        if (!(p >> l & 1u)) continue;
        Fiber* f = fs[l];
        const int w = f->width;
        const int base = l & ~(w - 1);
        int src = l;
        switch (op) {
        case W_SHFL: src = base + (f->arg & (w - 1)); break;
        case W_SHFL_UP: src = (l - base) >= f->arg ? l - f->arg : l; break;
        case W_SHFL_DOWN: src = (l - base) + f->arg < w ? l + f->arg : l; break;
        // xor: lanes of earlier groups may be read, a later group gives the lane's own value
        case W_SHFL_XOR: src = (l ^ f->arg) < base + w ? (l ^ f->arg) : l; break;
        default: break;
        }
        switch (op) {
        case W_SHFL:
        case W_SHFL_UP:
        case W_SHFL_DOWN:
        case W_SHFL_XOR:
            // A lane outside the mask (or exited) gives an undefined value: poison.
            f->result = (src >= 0 && src < nl && (p >> src & 1u)) ? fs[src]->val : SHFL_POISON;
            break;
        case W_BALLOT: f->result = ballot; break;
        case W_ANY: f->result = ballot != 0; break;
        case W_ALL: f->result = ballot == p; break;
        case W_MATCH_ANY: {
            unsigned m = 0;
            for (int k = 0; k < nl; k++)
                if ((p >> k & 1u) && fs[k]->val == f->val) m |= 1u << k;
            f->result = m;
            break;
        }
        case W_MATCH_ALL:
            f->result = all_equal ? p : 0;
            f->result2 = all_equal;
            break;
        case W_RED_ADD: f->result = r_add; break;
        case W_RED_MIN: f->result = r_min; break;
        case W_RED_MAX: f->result = r_max; break;
        case W_RED_MIN_S: f->result = (uint32_t)r_smin; break;
        case W_RED_MAX_S: f->result = (uint32_t)r_smax; break;
        case W_RED_AND: f->result = r_and; break;
        case W_RED_OR: f->result = r_or; break;
        case W_RED_XOR: f->result = r_xor; break;
        case W_ACTIVEMASK: f->result = p; break;
        default: f->result = 0; break;
        }
    }
    for (int l = 0; l < nl; l++)
        if (p >> l & 1u) fs[l]->state = READY;
    b->rec->progress.fetch_add(1, std::memory_order_relaxed);
}

// Completes every collective of warp [w0, w0+nl) whose lanes all wait on it; appends the
// released lanes to `ready`. `stalled`: nothing runs, so __activemask groups may resolve.
DMC_EMU_INTERNAL inline void complete_warp(Block* b, int w0, int nl, bool stalled, Fiber** ready, int* nready) {
    Fiber** fs = b->fibers + w0;
    unsigned present = 0, waiting = 0, runnable = 0;
    for (int l = 0; l < nl; l++) {
        if (fs[l]->state != DONE) present |= 1u << l;
        if (fs[l]->state == WAIT_WARP) waiting |= 1u << l;
        if (fs[l]->state == READY) runnable |= 1u << l;
    }
    unsigned released = 0;
    for (int l = 0; l < nl; l++) {
        Fiber* f = fs[l];
        if (!(waiting >> l & 1u) || f->op == W_ACTIVEMASK) continue;
        const unsigned p = f->mask & present;
        if ((p & waiting) != p) continue;  // some lane of the mask is not there yet
        bool same = true;
        for (int k = 0; k < nl && same; k++)
            if (p >> k & 1u) same = same_collective(f, fs[k]);
        if (!same) continue;  // reported as a divergent collective if the block stalls
        // CUDA: every lane named in the mask must execute the same collective with the same
        // mask. A lane waiting at this very call site with another mask that names a lane of
        // this group is a bug (disjoint masks at one site are two collectives, as after a
        // divergent branch). Without this check the two groups would each complete alone.
        for (int k = 0; k < nl; k++) {
            const Fiber* o = fs[k];
            if (!(waiting >> k & 1u) || (p >> k & 1u) || o->op != f->op || o->mask == f->mask ||
                (o->mask & f->mask) == 0 || !(o->site == f->site))
                continue;
            fail("%s at %s:%u:%u: warp %d lanes reach it with non-identical masks: lane %d with mask %#010x, lane %d "
                 "with mask %#010x (every lane named in a collective's mask must name the same mask)",
                 op_name(f->op), short_file(f->site.file()), f->site.line(), f->site.column(), w0 / 32, l, f->mask, k,
                 o->mask);
        }
        complete_collective(b, w0, nl, p);
        // the whole warp is converged here: its memory requests so far are complete
        DMC_EMU_COST_HOOK(if (p == present) cost::flush_warp(w0 / 32));
        waiting &= ~p;
        released |= p;
    }
    // __activemask: when no lane of the warp can run, the lanes waiting at the same
    // __activemask call site are the converged ones.
    if (stalled && runnable == 0 && released == 0) {
        for (int l = 0; l < nl; l++) {
            Fiber* f = fs[l];
            if (!(waiting >> l & 1u) || f->op != W_ACTIVEMASK) continue;
            unsigned g = 0;
            for (int k = 0; k < nl; k++)
                if ((waiting >> k & 1u) && fs[k]->op == W_ACTIVEMASK && fs[k]->site == f->site) g |= 1u << k;
            complete_collective(b, w0, nl, g);
            waiting &= ~g;
            released |= g;
        }
    }
    for (int l = 0; l < nl; l++)
        if (released >> l & 1u) ready[(*nready)++] = fs[l];
}

[[noreturn]] DMC_EMU_INTERNAL inline void report_stall(Block* b) {
    char msg[1800];
    size_t len = 0;
    auto put = [&](const char* fmt, auto... a) {
        if (len < sizeof msg) len += (size_t)std::snprintf(msg + len, sizeof msg - len, fmt, a...);
    };
    int done = 0, bar = 0;
    for (int i = 0; i < b->nthreads; i++) {
        done += b->fibers[i]->state == DONE;
        bar += b->fibers[i]->state == WAIT_BAR;
    }
    put("deadlock: ");
    for (int w0 = 0; w0 < b->nthreads; w0 += 32) {
        const int nl = b->nthreads - w0 < 32 ? b->nthreads - w0 : 32;
        unsigned shown = 0;
        for (int l = 0; l < nl; l++) {
            Fiber* f = b->fibers[w0 + l];
            if (f->state != WAIT_WARP || (shown >> l & 1u)) continue;
            unsigned g = 0;
            for (int k = 0; k < nl; k++)
                if (b->fibers[w0 + k]->state == WAIT_WARP && same_collective(f, b->fibers[w0 + k])) g |= 1u << k;
            shown |= g;
            put("warp %d lanes %#010x wait at %s(mask %#010x, width %d) %s:%u:%u; ", w0 / 32, g, op_name(f->op),
                f->mask, f->width, short_file(f->site.file()), f->site.line(), f->site.column());
        }
    }
    if (bar > 0) {
        const Fiber* first = nullptr;
        for (int i = 0; i < b->nthreads; i++) {
            Fiber* f = b->fibers[i];
            if (f->state != WAIT_BAR) continue;
            if (first == nullptr) {
                first = f;
                put("%d threads wait at __syncthreads %s:%u", bar, short_file(f->site.file()), f->site.line());
            } else if (!(f->site == first->site)) {
                put(", thread %d at another __syncthreads %s:%u", i, short_file(f->site.file()), f->site.line());
                break;
            }
        }
        if (done > 0) put(", %d threads exited", done);
    }
    // Name the mismatch when lanes wait at one call site for one operation but differ in width
    // or mask (different call sites are the divergent case).
    bool widths = false, masks = false;
    for (int i = 0; i < b->nthreads; i++) {
        const Fiber* f = b->fibers[i];
        if (f->state != WAIT_WARP) continue;
        for (int k = (i & ~31); k < i; k++) {
            const Fiber* o = b->fibers[k];
            if (o->state != WAIT_WARP || o->op != f->op || !(o->site == f->site)) continue;
            widths |= o->width != f->width;
            masks |= o->mask != f->mask;
        }
    }
    if (widths) put("lanes of one collective call site use different widths; ");
    if (masks) put("lanes of one collective call site use non-identical masks; ");
    put(" (divergent collectives or barriers: lanes wait at different call sites, masks, widths, or after lanes exited)");
    fail("%s", msg);
}

DMC_EMU_INTERNAL inline void complete_barrier(Block* b, Fiber** ready, int* nready) {
    const Site s = b->fibers[0]->site;
    int count = 0;
    for (int i = 0; i < b->nthreads; i++) {
        Fiber* f = b->fibers[i];
        if (!(f->site == s) || f->op != b->fibers[0]->op)
            fail("threads of the block wait at different __syncthreads: thread 0 at %s:%u, thread %d at %s:%u",
                 short_file(s.file()), s.line(), i, short_file(f->site.file()), f->site.line());
        count += f->bar_pred != 0;
    }
    b->bar_count = count;
    DMC_EMU_COST_HOOK(cost::flush_block(b, false));
#if DMC_EMU_TSAN
    b->bar_gen++;
#endif
    for (int i = 0; i < b->nthreads; i++) {
        b->fibers[i]->state = READY;
        ready[(*nready)++] = b->fibers[i];
    }
    b->rec->progress.fetch_add(1, std::memory_order_relaxed);
}

// ---- Blocks and launches ----

// Starts block b (its index, rng and TSan set already set) on `fibers`: a fresh (TSan) and
// poisoned arena, fresh sync addresses, its fibers READY and appended to `ready`.
DMC_EMU_INTERNAL inline void begin_block(Block* b, Fiber** fibers, Fiber** ready, int* nready) {
#if DMC_EMU_TSAN
    ThreadState* ts = tls_state;
#endif
    const int n = b->nthreads;
    tls_block = b;
#if DMC_EMU_TSAN
    // Fresh memory for the block's shared memory: TSan forgets the accesses of the previous
    // block's threads there (no race: each block has its own shared memory on the GPU). Fiber
    // stacks are reused as they are, one stack per TSan fiber of the launch (STACK_SETS).
    const size_t used = (SMEM_STATIC_LIMIT + b->dyn_bytes + 4095) / 4096 * 4096;
    if (mmap(b->arena, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
        MAP_FAILED)
        fail("cannot remap the shared-memory arena");
#endif
    poison_arena(b);
#if DMC_EMU_TSAN
    if (ts->sync_region == nullptr || ts->sync_next + TSAN_SYNC_WINDOW > TSAN_SYNC_REGION) {
        // munmap resets TSan's metadata of the range: the addresses are fresh again (no
        // resident block's window is in it: a launch's blocks take at most MAX_RESIDENT windows
        // of the region's thousands at a time, and a new region is mapped before the old goes)
        char* old = ts->sync_region;
        void* m = mmap(nullptr, TSAN_SYNC_REGION, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) fail("cannot reserve TSan sync addresses");
        ts->sync_region = static_cast<char*>(m);
        ts->sync_next = 0;
        if (old != nullptr) {
            // (a region retired earlier in this launch is thousands of blocks old: no resident
            // block uses it)
            if (ts->retired_sync_region != nullptr) munmap(ts->retired_sync_region, TSAN_SYNC_REGION);
            ts->retired_sync_region = old;
        }
    }
    b->sync_window = ts->sync_region + ts->sync_next;
    ts->sync_next += TSAN_SYNC_WINDOW;
    for (int w = 0; w < (n + 31) / 32; w++) ts->nmasks[b->slot][w] = 0;
    __tsan_release(&b->start_sync);
#endif
    for (int i = 0; i < n; i++) {
        Fiber* f = fibers[i];
        f->block = b;
        f->linear = i;
        f->tid.x = i % b->bdim.x;
        f->tid.y = (i / b->bdim.x) % b->bdim.y;
        f->tid.z = i / (b->bdim.x * b->bdim.y);
        f->state = READY;
        f->bar_pred = 0;
        if (f->sp == nullptr) make_fiber(f);
#if DMC_EMU_TSAN
        f->tsan = b->tsan_fibers[(size_t)b->tsan_set * (size_t)n + (size_t)i];
        char name[96];
        std::snprintf(name, sizeof name, "CUDA thread %d (warp %d) of block (%u,%u,%u)", i, i / 32, b->bidx.x,
                      b->bidx.y, b->bidx.z);
        __tsan_set_fiber_name(f->tsan, name);
#endif
        ready[(*nready)++] = f;
    }
    b->fibers = fibers;
    b->live = true;
}

// After the fibers in `ready` ran: collects block b's fibers that can run again (preempted ones,
// those a completed collective or barrier released) into `ready`. Returns false when the block
// has finished (every thread exited); a block that can make no progress is a deadlock.
DMC_EMU_INTERNAL inline bool advance_block(Block* b, Fiber** ready, int* nready) {
    const int n = b->nthreads;
    Fiber** fibers = b->fibers;
    tls_block = b;
    const int first = *nready;
    // Preempted fibers (lockstep step, preemption, __nanosleep) run again.
    for (int i = 0; i < n; i++)
        if (fibers[i]->state == READY) ready[(*nready)++] = fibers[i];
    const bool stalled = *nready == first;
    for (int w0 = 0; w0 < n; w0 += 32) complete_warp(b, w0, n - w0 < 32 ? n - w0 : 32, stalled, ready, nready);
    if (*nready > first) return true;
    int done = 0, bar = 0;
    for (int i = 0; i < n; i++) {
        done += fibers[i]->state == DONE;
        bar += fibers[i]->state == WAIT_BAR;
    }
    if (done == n) {
#if DMC_EMU_TSAN
        for (int i = 0; i < n; i++) fibers[i]->tsan = nullptr;
#endif
        DMC_EMU_COST_HOOK(cost::flush_block(b, true));
        b->live = false;
        return false;
    }
    if (bar == n) complete_barrier(b, ready, nready);
    else report_stall(b);
    return true;
}

DMC_EMU_INTERNAL inline uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// Launch error codes (the launch fails, as cudaLaunchKernel would).
enum LaunchError : int {
    E_BLOCK = -1,          // block size 0 or beyond 1024 threads / (1024, 1024, 64)
    E_GRID = -2,           // grid.x beyond 2^31-1 or grid.y/z beyond 65535
    E_LAUNCH_BOUNDS = -3,  // more threads than the kernel's __launch_bounds__
    E_SMEM = -4,           // dynamic shared memory beyond the block's limit
    E_NESTED = -5,
};

// The floating-point control state every fiber of a launch shares with the launching thread
// (dmc_emu_swap does not switch it): MXCSR's control bits (its exception flags, bits 0-5, are
// status, not control) and the x87 control word.
DMC_EMU_INTERNAL inline uint64_t fp_control() {
    uint32_t mxcsr = 0;
    uint16_t fpucw = 0;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    return uint64_t{mxcsr & ~0x3Fu} | uint64_t{fpucw} << 32;
}

// The schedule of a launch under SCHED_MIXED (DAMACY_EMU_SCHEDULE=mixed, what scripts/asan.sh
// sets): a launch with seed 0 keeps the fixed order (the tests' reference run); any other seed
// picks sync (shuffled), preempt or lockstep from a hash of (seed, kernel name, grid), so the
// same test input gets the same schedule on every run (a failure reproduces) while the many
// seeds and stream counts of the fixture and property tests spread every kernel over all
// three. Weights: sync 10, preempt 5, lockstep 1 in 16 (under ASan, on two fixture tests:
// preempt 1.4x and lockstep 3.6x the time of sync; 4/3/1 in 8 made the ASan run of the
// emulated tests ~1.5x as long).
DMC_EMU_INTERNAL inline unsigned mixed_schedule(uint64_t seed, const char* kernel, dim3 grid) {
    if (seed == 0) return SCHED_SYNC;
    uint64_t h = seed ^ 0x5C4ED01Eull;
    for (const char* c = kernel; *c != 0; c++) h = (h ^ (unsigned char)*c) * 0x100000001B3ull;
    h ^= (uint64_t)grid.x << 32 ^ (uint64_t)grid.y << 8 ^ grid.z;
    const uint64_t r = next_rng(h) & 15u;
    return r < 10 ? SCHED_SYNC : r < 15 ? SCHED_PREEMPT : SCHED_LOCKSTEP;
}

// Runs a whole grid: blocks one at a time in launch order (seed 0), or in a seeded random order
// with up to `resident` blocks at once.

DMC_EMU_INTERNAL inline int launch(dim3 grid, dim3 block, uint64_t seed, unsigned bounds, const char* kernel,
                                   void (*body)(void*), void* ctx) {
    const uint64_t nthreads = (uint64_t)block.x * block.y * block.z;
    if (nthreads == 0 || nthreads > (uint64_t)MAX_THREADS || block.x > 1024 || block.y > 1024 || block.z > 64) {
        std::fprintf(stderr, "damacy CUDA emulator: launch of %s with block (%u,%u,%u): invalid block size\n", kernel,
                     block.x, block.y, block.z);
        return E_BLOCK;
    }
    if (bounds != 0 && nthreads > bounds) {
        std::fprintf(stderr, "damacy CUDA emulator: launch of %s with %llu threads per block: its __launch_bounds__ is %u\n",
                     kernel, (unsigned long long)nthreads, bounds);
        return E_LAUNCH_BOUNDS;
    }
    if (grid.x > 0x7FFFFFFFu || grid.y > 65535u || grid.z > 65535u) {
        std::fprintf(stderr, "damacy CUDA emulator: launch of %s with grid (%u,%u,%u): grid.x ≤ 2^31-1, grid.y and grid.z ≤ 65535\n",
                     kernel, grid.x, grid.y, grid.z);
        return E_GRID;
    }
    if (tls_block != nullptr) return E_NESTED;
    ThreadState* ts = thread_state();
    const Options& o = ts->opts;
    // Without an opt-in a block has 48 KiB in all; with one (cudaFuncAttributeMaxDynamicSharedMemorySize)
    // up to that much dynamic memory and 227 KiB in all.
    const size_t limit = o.max_dyn_smem ? SMEM_OPTIN_LIMIT : SMEM_STATIC_LIMIT;
    const size_t dyn_limit = o.max_dyn_smem ? o.max_dyn_smem : SMEM_STATIC_LIMIT;
    if (o.max_dyn_smem > SMEM_OPTIN_LIMIT || o.dyn_smem > dyn_limit) {
        std::fprintf(stderr, "damacy CUDA emulator: launch of %s with %u bytes of dynamic shared memory: the limit is %zu "
                             "(opt in up to %zu)\n", kernel, o.dyn_smem, dyn_limit, SMEM_OPTIN_LIMIT);
        return E_SMEM;
    }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
    DMC_EMU_COST_HOOK(cost::launch_begin(kernel, grid, block));
    Block b;
    b.bdim = block;
    b.gdim = grid;
    b.nthreads = (int)nthreads;
    b.body = body;
    b.ctx = ctx;
    b.kernel = kernel;
    b.seed = seed;
    b.schedule = o.schedule != SCHED_DEFAULT ? o.schedule : env_schedule();
    if (b.schedule == SCHED_MIXED) b.schedule = mixed_schedule(seed, kernel, grid);
    ts->last_schedule = b.schedule;
    {
        // DAMACY_EMU_SCHEDULE_LOG=1: one line per launch on stderr (kernel, seed, grid,
        // schedule), to see which schedules a test run gave each kernel
        static const bool log = std::getenv("DAMACY_EMU_SCHEDULE_LOG") != nullptr;
        if (log)
            std::fprintf(stderr, "damacy CUDA emulator: launch %s seed %#llx grid (%u,%u,%u) schedule %s\n", kernel,
                         (unsigned long long)seed, grid.x, grid.y, grid.z,
                         b.schedule == SCHED_LOCKSTEP ? "lockstep" : b.schedule == SCHED_PREEMPT ? "preempt" : "sync");
    }
    b.arena = ts->region;
    b.dyn_bytes = o.dyn_smem;
    b.smem_limit = limit;
    b.rec = &ts->rec;
    if (!ts->registered) {
        watchdog_register(&ts->rec);
        ts->registered = true;
    }
    ts->rec.kernel = kernel;
    ts->rec.timeout_ms.store(o.watchdog_ms ? o.watchdog_ms : env_watchdog_ms());
    ts->rec.switches.store(0);
    ts->rec.active.store(1);
#if DMC_EMU_TSAN
    // Launches are ordered among themselves (the emulated streams synchronise in Rust, which
    // TSan does not see); inside a launch only barriers and collectives order threads.
    __tsan_acquire(&g_launch_order_sync);
    b.sched_tsan = __tsan_get_current_fiber();
#endif
    tls_block = &b;
    const uint64_t fp_before = fp_control();
    const uint64_t total = (uint64_t)grid.x * grid.y * grid.z;
    // Resident blocks: with a non-zero seed up to `resident` at once, as many as the fiber slots
    // (and under TSan the fiber sets) allow.
    int resident = seed == 0 ? 1 : (int)(o.resident ? o.resident : env_resident_blocks());
    if (resident > MAX_RESIDENT) resident = MAX_RESIDENT;
    if (resident > STACK_SETS * MAX_THREADS / (int)nthreads) resident = STACK_SETS * MAX_THREADS / (int)nthreads;
    if ((uint64_t)resident > total) resident = (int)total;
    if (resident < 1) resident = 1;
#if DMC_EMU_TSAN
    const int sets = tsan_sets(total, (int)nthreads);
    if (resident > sets) resident = sets;
    std::vector<void*> tsan_fibers((size_t)sets * nthreads);
    tsan_checkout(tsan_fibers.data(), (int)tsan_fibers.size());
    b.tsan_fibers = tsan_fibers.data();
    bool set_used[STACK_SETS * MAX_THREADS] = {};
#endif
    ts->last_resident = resident;
    uint64_t mult = 1, add = 0;
    if (seed != 0 && total > 1) {
        uint64_t r = seed ^ 0xB10C0DE5ull;
        do mult = next_rng(r) % total; while (mult == 0 || gcd(mult, total) != 1);
        add = next_rng(r) % total;
    }
    Block blocks[MAX_RESIDENT];
    Fiber* ready[MAX_RESIDENT * MAX_THREADS];
    int nready = 0;
    uint64_t k = 0;  // blocks started
    // Starts the next block of the run order in slot b, if any is left.
    auto start_next = [&](Block* nb) DMC_EMU_INTERNAL {
        if (k == total) return false;
        // a bijection of [0, total): a random block order when seeded
        const uint64_t lin = (uint64_t)(((unsigned __int128)k * mult + add) % total);
        nb->bidx.x = (unsigned)(lin % grid.x);
        nb->bidx.y = (unsigned)((lin / grid.x) % grid.y);
        nb->bidx.z = (unsigned)(lin / ((uint64_t)grid.x * grid.y));
        nb->rng = seed ^ (lin * 0xD1B54A32D192ED03ull) ^ 0x5EEDull;
#if DMC_EMU_TSAN
        // set k mod sets, or the next one no resident block runs on
        int set = (int)(k % (uint64_t)sets);
        while (set_used[set]) set = (set + 1) % sets;
        set_used[set] = true;
        nb->tsan_set = set;
        Fiber** fibers = ts->fibers + (size_t)set * nthreads;
#else
        Fiber** fibers = ts->fibers + (size_t)nb->slot * nthreads;
#endif
        k++;
        begin_block(nb, fibers, ready, &nready);
        return true;
    };
    int live = 0;
    for (int r = 0; r < resident; r++) {
        blocks[r] = b;
        blocks[r].slot = r;
        blocks[r].arena = ts->region + (size_t)r * ARENA_BYTES;
        live += start_next(&blocks[r]);
    }
    const bool shuffled = (seed != 0 && b.schedule == SCHED_SYNC) || b.schedule == SCHED_PREEMPT;
    // One block: its own rng shuffles (as before resident blocks); several: the launch's.
    uint64_t launch_rng = seed ^ 0x1A7E5C4Eull;
    auto shuffle_ready = [&]() DMC_EMU_INTERNAL {
        if (shuffled) shuffle(ready, nready, resident == 1 ? blocks[0].rng : launch_rng);
    };
    shuffle_ready();
    const Block* shown = nullptr;
    while (live > 0) {
        for (int i = 0; i < nready; i++) {
            Block* fb = ready[i]->block;
            if (fb != shown) {  // the watchdog names the block it last saw running
                ts->rec.bx.store(fb->bidx.x, std::memory_order_relaxed);
                ts->rec.by.store(fb->bidx.y, std::memory_order_relaxed);
                ts->rec.bz.store(fb->bidx.z, std::memory_order_relaxed);
                shown = fb;
            }
            switch_to(fb, ready[i]);
        }
        nready = 0;
        for (int r = 0; r < resident; r++) {
            Block* rb = &blocks[r];
            if (!rb->live || advance_block(rb, ready, &nready)) continue;
#if DMC_EMU_TSAN
            set_used[rb->tsan_set] = false;
#endif
            if (!start_next(rb)) live--;
        }
        shuffle_ready();
    }
    tls_block = &blocks[0];
    if (fp_control() != fp_before)
        fail("%s changed the floating-point control state (rounding mode or exception masks; MXCSR/x87 control "
             "word): CUDA kernels have no such state, and the emulator's fibers share the launching thread's",
             kernel);
#if DMC_EMU_TSAN
    tsan_checkin(tsan_fibers.data(), (int)tsan_fibers.size());
    if (ts->retired_sync_region != nullptr) {
        munmap(ts->retired_sync_region, TSAN_SYNC_REGION);
        ts->retired_sync_region = nullptr;
    }
#endif
    tls_block = nullptr;
    DMC_EMU_COST_HOOK(cost::launch_end(blocks[0].static_top + blocks[0].dyn_bytes));
    ts->rec.active.store(0);
#if DMC_EMU_TSAN
    for (int r = 0; r < resident; r++) __tsan_acquire(&blocks[r].exit_sync);
    __tsan_release(&g_launch_order_sync);
#endif
    return 0;
}

template <class F> inline int launch_lambda(dim3 grid, dim3 block, uint64_t seed, unsigned bounds, const char* kernel, F&& f) {
    auto tramp = [](void* p) DMC_EMU_COST_INTERNAL { (*static_cast<F*>(p))(); };
    return launch(grid, block, seed, bounds, kernel, tramp, (void*)&f);
}
template <class F> inline int launch_lambda(dim3 grid, dim3 block, uint64_t seed, F&& f) {
    return launch_lambda(grid, block, seed, 0, "lambda", static_cast<F&&>(f));
}

// ---- Sync points called by the kernels ----

DMC_EMU_INTERNAL inline uint64_t warp_op(int op, uint64_t val, int arg, int width, unsigned mask, std::source_location loc) {
    Fiber* f = cur();
    const int lane = f->linear & 31;
    if (!(mask >> lane & 1u))
        fail("%s at %s:%u: mask %#010x does not name the calling lane %d", op_name(op), short_file(loc.file_name()),
             (unsigned)loc.line(), mask, lane);
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fail("%s at %s:%u: width %d is not a power of 2 in [1, 32]", op_name(op), short_file(loc.file_name()),
             (unsigned)loc.line(), width);
    f->op = op;
    f->val = val;
    f->arg = arg;
    f->width = width;
    f->mask = mask;
    f->site = Site{loc};
    f->state = WAIT_WARP;
#if DMC_EMU_TSAN
    // Only __syncwarp orders memory between the lanes of a warp (PTX: bar.warp.sync "guarantees
    // memory ordering among threads participating in barrier"; shfl.sync, vote.sync, match.sync
    // and redux.sync wait for the lanes but order no memory access, and the compiler moves
    // loads and stores across them): a lane that reads shared memory another lane wrote with
    // only shuffles or votes between is a race, as compute-sanitizer's racecheck reports it
    // (dmc_zstd_decode's Huffman tables, issue 28). The other collectives are no TSan sync.
    if (op == W_SYNC) {
        // The lanes of a completed __syncwarp have done equally many of them with its mask:
        // that count (its parity) names the sync object they release to and acquire from.
        ThreadState* ts = tls_state;
        const int w = f->linear / 32;
        int k = 0;
        const int r = tls_block->slot;
        while (k < ts->nmasks[r][w] && ts->wmask[r][w][k] != mask) k++;
        if (k == ts->nmasks[r][w]) {
            if (k == TSAN_MASKS) fail("more than %d distinct __syncwarp masks in one warp (TSan build)", TSAN_MASKS);
            ts->wmask[r][w][k] = mask;
            for (int l = 0; l < 32; l++) ts->wcount[r][w][k][l] = 0;
            ts->nmasks[r][w]++;
        }
        const unsigned c = ts->wcount[r][w][k][lane]++;
        f->sync_addr = tls_block->sync_window + 2 + ((size_t)w * TSAN_MASKS + (size_t)k) * 2 + (c & 1u);
        __tsan_release(f->sync_addr);
    }
#endif
    yield_to_scheduler();
#if DMC_EMU_TSAN
    if (op == W_SYNC) __tsan_acquire(f->sync_addr);
#endif
    return f->result;
}

DMC_EMU_INTERNAL inline int barrier(int pred, std::source_location loc) {
    Fiber* f = cur();
    Block* b = tls_block;
    f->bar_pred = pred;
    f->op = -1;
    f->site = Site{loc};
    f->state = WAIT_BAR;
#if DMC_EMU_TSAN
    f->bar_gen = b->bar_gen;
    __tsan_release(b->sync_window + (f->bar_gen & 1));
#endif
    yield_to_scheduler();
#if DMC_EMU_TSAN
    __tsan_acquire(b->sync_window + (f->bar_gen & 1));
#endif
    return b->bar_count;
}

// A yield that is no synchronisation: the fiber runs again after the others had their turn.
DMC_EMU_INTERNAL inline void preempt() {
    tls_block->rec->switches.fetch_add(1, std::memory_order_relaxed);
    yield_to_scheduler();
}

template <class T> inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof(T));
    return u;
}
template <class T> inline T from_bits(uint64_t u) {
    T v;
    std::memcpy(&v, &u, sizeof(T));
    return v;
}

}  // namespace dmc_emu

// Shared-memory declarations after the build script's rewrite.
#define DMC_EMU_UNPAREN(...) __VA_ARGS__
#define DMC_EMU_SHARED(T, name, dims)                                                          \
    static char dmc_emu_key_##name;                                                            \
    using dmc_emu_type_##name = DMC_EMU_UNPAREN T dims;                                        \
    dmc_emu_type_##name& name = *static_cast<dmc_emu_type_##name*>(::dmc_emu::shared_static(   \
        &dmc_emu_key_##name, sizeof(dmc_emu_type_##name), alignof(dmc_emu_type_##name), #name))
#define DMC_EMU_EXTERN_SHARED(T) (static_cast<DMC_EMU_UNPAREN T*>(::dmc_emu::shared_dynamic(alignof(DMC_EMU_UNPAREN T))))

#if DMC_EMU_COST
// The cost build reads the indices through uninstrumented functions: they are no memory
// access of the emulated program.
namespace dmc_emu {
DMC_EMU_INTERNAL inline dim3 thread_idx() { return tls_block->cur->tid; }
DMC_EMU_INTERNAL inline dim3 block_idx() { return tls_block->bidx; }
DMC_EMU_INTERNAL inline dim3 block_dim() { return tls_block->bdim; }
DMC_EMU_INTERNAL inline dim3 grid_dim() { return tls_block->gdim; }
}  // namespace dmc_emu
#define threadIdx (::dmc_emu::thread_idx())
#define blockIdx (::dmc_emu::block_idx())
#define blockDim (::dmc_emu::block_dim())
#define gridDim (::dmc_emu::grid_dim())
#else
#define threadIdx (::dmc_emu::cur()->tid)
#define blockIdx (::dmc_emu::tls_block->bidx)
#define blockDim (::dmc_emu::tls_block->bdim)
#define gridDim (::dmc_emu::tls_block->gdim)
#endif
#define warpSize 32

#define DMC_EMU_LOC std::source_location loc = std::source_location::current()
inline void __syncthreads(DMC_EMU_LOC) { ::dmc_emu::barrier(0, loc); }
inline int __syncthreads_count(int pred, DMC_EMU_LOC) { return ::dmc_emu::barrier(pred, loc); }
inline int __syncthreads_or(int pred, DMC_EMU_LOC) { return ::dmc_emu::barrier(pred, loc) != 0; }
inline int __syncthreads_and(int pred, DMC_EMU_LOC) {
    return ::dmc_emu::barrier(pred, loc) == (int)(blockDim.x * blockDim.y * blockDim.z);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, DMC_EMU_LOC) {
    ::dmc_emu::warp_op(::dmc_emu::W_SYNC, 0, 0, 32, mask, loc);
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32, DMC_EMU_LOC) {
    return ::dmc_emu::from_bits<T>(::dmc_emu::warp_op(::dmc_emu::W_SHFL, ::dmc_emu::to_bits(v), src, width, mask, loc));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32, DMC_EMU_LOC) {
    return ::dmc_emu::from_bits<T>(::dmc_emu::warp_op(::dmc_emu::W_SHFL_UP, ::dmc_emu::to_bits(v), (int)d, width, mask, loc));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32, DMC_EMU_LOC) {
    return ::dmc_emu::from_bits<T>(::dmc_emu::warp_op(::dmc_emu::W_SHFL_DOWN, ::dmc_emu::to_bits(v), (int)d, width, mask, loc));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32, DMC_EMU_LOC) {
    return ::dmc_emu::from_bits<T>(::dmc_emu::warp_op(::dmc_emu::W_SHFL_XOR, ::dmc_emu::to_bits(v), m, width, mask, loc));
}
inline unsigned __ballot_sync(unsigned mask, int pred, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_BALLOT, pred != 0, 0, 32, mask, loc);
}
inline int __any_sync(unsigned mask, int pred, DMC_EMU_LOC) {
    return (int)::dmc_emu::warp_op(::dmc_emu::W_ANY, pred != 0, 0, 32, mask, loc);
}
inline int __all_sync(unsigned mask, int pred, DMC_EMU_LOC) {
    return (int)::dmc_emu::warp_op(::dmc_emu::W_ALL, pred != 0, 0, 32, mask, loc);
}
inline unsigned __activemask(DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_ACTIVEMASK, 0, 0, 32, 1u << (::dmc_emu::cur()->linear & 31), loc);
}
template <class T> inline unsigned __match_any_sync(unsigned mask, T v, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_MATCH_ANY, ::dmc_emu::to_bits(v), 0, 32, mask, loc);
}
template <class T> inline unsigned __match_all_sync(unsigned mask, T v, int* pred, DMC_EMU_LOC) {
    const unsigned r = (unsigned)::dmc_emu::warp_op(::dmc_emu::W_MATCH_ALL, ::dmc_emu::to_bits(v), 0, 32, mask, loc);
    *pred = ::dmc_emu::cur()->result2;
    return r;
}
inline unsigned __reduce_add_sync(unsigned mask, unsigned v, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_ADD, v, 0, 32, mask, loc);
}
inline int __reduce_add_sync(unsigned mask, int v, DMC_EMU_LOC) {
    return (int)(unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_ADD, (unsigned)v, 0, 32, mask, loc);
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_MIN, v, 0, 32, mask, loc);
}
inline int __reduce_min_sync(unsigned mask, int v, DMC_EMU_LOC) {
    return (int)(unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_MIN_S, (unsigned)v, 0, 32, mask, loc);
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_MAX, v, 0, 32, mask, loc);
}
inline int __reduce_max_sync(unsigned mask, int v, DMC_EMU_LOC) {
    return (int)(unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_MAX_S, (unsigned)v, 0, 32, mask, loc);
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned v, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_AND, v, 0, 32, mask, loc);
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned v, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_OR, v, 0, 32, mask, loc);
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v, DMC_EMU_LOC) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_RED_XOR, v, 0, 32, mask, loc);
}
// Fences order a thread's own accesses; the fibers of a launch share one OS thread, so they
// only stop the compiler. (TSan models no standalone fence: ordering through fences + relaxed
// atomics would be reported; damacy's kernels order through barriers and collectives.)
inline void __threadfence() { __asm__ __volatile__("" ::: "memory"); }
inline void __threadfence_block() { __asm__ __volatile__("" ::: "memory"); }
// A yield to the other threads (no synchronisation); the watchdog counts no progress.
inline void __nanosleep(unsigned) { ::dmc_emu::preempt(); }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
    return (x >> 16) | (x << 16);
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        unsigned sel = (s >> (4 * i)) & 7u;
        r |= (unsigned)((v >> (8 * sel)) & 0xFFu) << (8 * i);
    }
    return r;
}
// The upper 32 bits of (hi:lo) << (shift & 31), and the lower 32 bits of (hi:lo) >> (shift & 31).
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32 | lo) << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)(((unsigned long long)hi << 32 | lo) >> (shift & 31u));
}
// The clamping variants: shifts of 32 and more act as 32.
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32 | lo) << (shift > 32u ? 32u : shift)) >> 32);
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)(((unsigned long long)hi << 32 | lo) >> (shift > 32u ? 32u : shift));
}
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T min(T a, T b) { return a < b ? a : b; }
template <class T> inline T max(T a, T b) { return a > b ? a : b; }

// CUDA's atomics are relaxed: they order nothing by themselves.
template <class T> inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicMax(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
template <class T> inline T atomicMin(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
template <class T> inline T atomicCAS(T* p, T cmp, T v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}

// Declares the C-ABI launcher `dmc_emu_<name>` of a kernel: grid (x, y), block x, seed, then
// the kernel's own parameters. PARAMS and ARGS are parenthesised lists. The build script
// declares `dmc_emu_bounds_<name>`: the kernel's __launch_bounds__ (0: none).
#define DMC_EMU_LAUNCHER(name, PARAMS, ARGS)                                                   \
    extern "C" int dmc_emu_##name(unsigned grid_x, unsigned grid_y, unsigned block_x,         \
                                  unsigned long long seed, DMC_EMU_UNPAREN PARAMS) {           \
        dim3 g;                                                                                \
        g.x = grid_x;                                                                          \
        g.y = grid_y;                                                                          \
        dim3 b;                                                                                \
        b.x = block_x;                                                                         \
        return ::dmc_emu::launch_lambda(g, b, seed, dmc_emu_bounds_##name, #name,              \
                                        [&]() DMC_EMU_COST_INTERNAL { name ARGS; });                                 \
    }
