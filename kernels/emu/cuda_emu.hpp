// cuda_emu.hpp — host emulation of the CUDA C subset damacy's kernels use.
//
// Force-included (g++ -std=c++20 -x c++ -include cuda_emu.hpp) before every kernels/*.cu file
// when the crate is built with the `emulate` feature. It provides the qualifiers, dim3 and the
// thread/block built-ins, __syncthreads, __syncwarp, warp shuffles/ballot/any/all, atomics and
// a few bit intrinsics.
//
// Execution model: one fiber per CUDA thread; the blocks of a grid run one at a time on the
// calling OS thread. A fiber runs until it reaches a synchronisation point (__syncthreads or a
// warp collective) and then yields to the block scheduler. A warp collective completes when
// every lane of the warp has reached it; a barrier completes when every thread of the block
// has. With a non-zero seed the scheduler runs the ready fibers in a freshly shuffled order
// after every synchronisation point, so a missing barrier shows up as a wrong result.
//
// Limits (checked, abort with a message): full-warp masks only; a warp collective or barrier
// reached while other lanes/threads of the warp/block have exited or wait elsewhere;
// more than DMC_EMU_MAX_THREADS threads per block. `__shared__` variables become function-local
// `static thread_local` (parallel test threads stay apart); dynamic `extern __shared__` is not
// supported.
#pragma once

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define DMC_EMU_ASAN 1
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old,
                                     size_t* size_old);
}
#else
#define DMC_EMU_ASAN 0
#endif

#define DMC_EMULATE 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __shared__ static thread_local
#define __launch_bounds__(...)

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
};

namespace dmc_emu {

constexpr int MAX_THREADS = 1024;
constexpr size_t STACK_BYTES = DMC_EMU_ASAN ? (512 * 1024) : (128 * 1024);

enum State : int { READY = 0, WAIT_BAR = 1, WAIT_WARP = 2, DONE = 3 };
enum WarpOp : int { W_SYNC, W_SHFL, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_XOR, W_BALLOT, W_ANY, W_ALL };

struct Fiber {
    jmp_buf ctx;
    ucontext_t uc;
    void* stack = nullptr;
    bool started = false;
    dim3 tid;
    int linear = 0;
    int state = READY;
    int op = 0;
    uint64_t val = 0;
    int arg = 0;
    int width = 32;
    uint64_t result = 0;
    int bar_pred = 0;
#if DMC_EMU_ASAN
    void* fake_stack = nullptr;
#endif
};

struct Block {
    dim3 bidx, bdim, gdim;
    void (*body)(void*) = nullptr;
    void* ctx = nullptr;
    jmp_buf sched;
    Fiber* cur = nullptr;
    int bar_count = 0;
#if DMC_EMU_ASAN
    void* sched_fake_stack = nullptr;
    const void* sched_bottom = nullptr;
    size_t sched_size = 0;
#endif
};

inline thread_local Fiber* tls_pool[MAX_THREADS];
inline thread_local int tls_pool_size = 0;
inline thread_local Block* tls_block = nullptr;

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "damacy CUDA emulator: %s\n", what);
    std::abort();
}

inline Fiber* cur() { return tls_block->cur; }

// Switch from the current fiber back to the scheduler.
inline void yield_to_scheduler() {
    Block* b = tls_block;
    Fiber* f = b->cur;
    if (!_setjmp(f->ctx)) {
#if DMC_EMU_ASAN
        __sanitizer_start_switch_fiber(&f->fake_stack, b->sched_bottom, b->sched_size);
#endif
        _longjmp(b->sched, 1);
    }
#if DMC_EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, nullptr, nullptr);
#endif
}

inline void fiber_main() {
#if DMC_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &tls_block->sched_bottom, &tls_block->sched_size);
#endif
    for (;;) {
        Block* b = tls_block;
        b->body(b->ctx);
        b->cur->state = DONE;
        yield_to_scheduler();
    }
}

inline Fiber* get_fiber(int i) {
    while (tls_pool_size <= i) {
        Fiber* f = new Fiber();
        void* st = mmap(nullptr, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
        if (st == MAP_FAILED) fail("cannot map a fiber stack");
        f->stack = st;
        if (getcontext(&f->uc) != 0) fail("getcontext failed");
        f->uc.uc_stack.ss_sp = st;
        f->uc.uc_stack.ss_size = STACK_BYTES;
        f->uc.uc_link = nullptr;
        makecontext(&f->uc, (void (*)())fiber_main, 0);
        tls_pool[tls_pool_size++] = f;
    }
    return tls_pool[i];
}

inline void switch_to(Block* b, Fiber* f) {
    b->cur = f;
    if (!_setjmp(b->sched)) {
#if DMC_EMU_ASAN
        __sanitizer_start_switch_fiber(&b->sched_fake_stack, f->stack, STACK_BYTES);
#endif
        if (!f->started) {
            f->started = true;
            setcontext(&f->uc);
        }
        _longjmp(f->ctx, 1);
    }
#if DMC_EMU_ASAN
    __sanitizer_finish_switch_fiber(b->sched_fake_stack, nullptr, nullptr);
#endif
}

struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

// Completes the warp collective of lanes [w0, w0+nl) if all of them wait on it.
// Returns true when lanes were released (appended to `ready`).
inline bool try_complete_warp(Fiber** fs, int w0, int nl, Fiber** ready, int* nready) {
    int waiting = 0, done = 0;
    for (int l = 0; l < nl; l++) {
        int s = fs[w0 + l]->state;
        if (s == WAIT_WARP) waiting++;
        if (s == DONE) done++;
    }
    if (waiting == 0) return false;
    if (waiting + done < nl) return false;  // some lanes still run or wait at a barrier
    if (done > 0) fail("warp collective with a full mask reached after some lanes exited");
    int op = fs[w0]->op;
    for (int l = 1; l < nl; l++)
        if (fs[w0 + l]->op != op) fail("lanes of one warp wait on different warp collectives");
    uint64_t ballot = 0;
    for (int l = 0; l < nl; l++)
        if (fs[w0 + l]->val != 0) ballot |= (1ull << l);
    for (int l = 0; l < nl; l++) {
        Fiber* f = fs[w0 + l];
        int w = f->width;
        int src = l;
        switch (op) {
        case W_SYNC: break;
        case W_SHFL: src = (l / w) * w + (((f->arg % w) + w) % w); break;
        case W_SHFL_UP: src = ((l % w) >= f->arg) ? l - f->arg : l; break;
        case W_SHFL_DOWN: src = ((l % w) + f->arg < w) ? l + f->arg : l; break;
        case W_SHFL_XOR: {
            int t = l ^ f->arg;
            src = (t / w == l / w) ? t : l;
            break;
        }
        default: break;
        }
        if (src >= nl) src = l;
        switch (op) {
        case W_SHFL:
        case W_SHFL_UP:
        case W_SHFL_DOWN:
        case W_SHFL_XOR: f->result = fs[w0 + src]->val; break;
        case W_BALLOT: f->result = ballot; break;
        case W_ANY: f->result = ballot != 0; break;
        case W_ALL: f->result = ballot == ((nl == 64) ? ~0ull : ((1ull << nl) - 1)); break;
        default: f->result = 0; break;
        }
        f->state = READY;
        ready[(*nready)++] = f;
    }
    return true;
}

inline void shuffle(Fiber** a, int n, Rng& rng) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng.next() % (uint64_t)(i + 1));
        Fiber* t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

inline void run_block(Block* b, int nthreads, uint64_t seed, uint64_t block_linear) {
    Fiber* fs[MAX_THREADS];
    Fiber* ready[MAX_THREADS];
    for (int i = 0; i < nthreads; i++) {
        Fiber* f = get_fiber(i);
        f->linear = i;
        f->tid.x = i % b->bdim.x;
        f->tid.y = (i / b->bdim.x) % b->bdim.y;
        f->tid.z = i / (b->bdim.x * b->bdim.y);
        f->state = READY;
        fs[i] = f;
        ready[i] = f;
    }
    int nready = nthreads;
    Rng rng{seed ^ (block_linear * 0xD1B54A32D192ED03ull)};
    if (seed != 0) shuffle(ready, nready, rng);
    for (;;) {
        for (int i = 0; i < nready; i++) switch_to(b, ready[i]);
        nready = 0;
        for (int w0 = 0; w0 < nthreads; w0 += 32) {
            int nl = nthreads - w0 < 32 ? nthreads - w0 : 32;
            try_complete_warp(fs, w0, nl, ready, &nready);
        }
        if (nready == 0) {
            int done = 0, bar = 0;
            for (int i = 0; i < nthreads; i++) {
                if (fs[i]->state == DONE) done++;
                if (fs[i]->state == WAIT_BAR) bar++;
            }
            if (done == nthreads) return;
            if (bar + done == nthreads && done == 0) {
                int count = 0;
                for (int i = 0; i < nthreads; i++) count += fs[i]->bar_pred != 0;
                b->bar_count = count;
                for (int i = 0; i < nthreads; i++) {
                    fs[i]->state = READY;
                    ready[nready++] = fs[i];
                }
            } else if (bar + done == nthreads) {
                fail("__syncthreads reached after some threads of the block exited");
            } else {
                fail("deadlock: threads wait on different barriers or warp collectives");
            }
        }
        if (seed != 0) shuffle(ready, nready, rng);
    }
}

// Runs a whole grid; blocks one at a time in launch order.
inline int launch(dim3 grid, dim3 block, uint64_t seed, void (*body)(void*), void* ctx) {
    uint64_t nthreads = (uint64_t)block.x * block.y * block.z;
    if (nthreads == 0 || nthreads > (uint64_t)MAX_THREADS) return -1;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return 0;
    if (tls_block != nullptr) fail("nested launch");
    Block b;
    b.bdim = block;
    b.gdim = grid;
    b.body = body;
    b.ctx = ctx;
    tls_block = &b;
    uint64_t linear = 0;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                b.bidx.x = x;
                b.bidx.y = y;
                b.bidx.z = z;
                run_block(&b, (int)nthreads, seed, linear++);
            }
    tls_block = nullptr;
    return 0;
}

template <class F> inline int launch_lambda(dim3 grid, dim3 block, uint64_t seed, F&& f) {
    auto tramp = [](void* p) { (*static_cast<F*>(p))(); };
    return launch(grid, block, seed, tramp, (void*)&f);
}

inline uint64_t warp_op(int op, uint64_t val, int arg, int width, unsigned mask) {
    if (mask != 0xffffffffu) fail("only full-warp masks (0xffffffff) are emulated");
    Fiber* f = cur();
    f->op = op;
    f->val = val;
    f->arg = arg;
    f->width = width;
    f->state = WAIT_WARP;
    yield_to_scheduler();
    return f->result;
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

#define threadIdx (::dmc_emu::cur()->tid)
#define blockIdx (::dmc_emu::tls_block->bidx)
#define blockDim (::dmc_emu::tls_block->bdim)
#define gridDim (::dmc_emu::tls_block->gdim)
#define warpSize 32

inline void __syncthreads() {
    ::dmc_emu::Fiber* f = ::dmc_emu::cur();
    f->bar_pred = 0;
    f->state = ::dmc_emu::WAIT_BAR;
    ::dmc_emu::yield_to_scheduler();
}
inline int __syncthreads_count(int pred) {
    ::dmc_emu::Fiber* f = ::dmc_emu::cur();
    f->bar_pred = pred;
    f->state = ::dmc_emu::WAIT_BAR;
    ::dmc_emu::yield_to_scheduler();
    return ::dmc_emu::tls_block->bar_count;
}
inline int __syncthreads_or(int pred) { return __syncthreads_count(pred) != 0; }
inline int __syncthreads_and(int pred) {
    return __syncthreads_count(pred) == (int)(blockDim.x * blockDim.y * blockDim.z);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    ::dmc_emu::warp_op(::dmc_emu::W_SYNC, 0, 0, 32, mask);
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    return ::dmc_emu::from_bits<T>(
        ::dmc_emu::warp_op(::dmc_emu::W_SHFL, ::dmc_emu::to_bits(v), src, width, mask));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    return ::dmc_emu::from_bits<T>(
        ::dmc_emu::warp_op(::dmc_emu::W_SHFL_UP, ::dmc_emu::to_bits(v), (int)d, width, mask));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    return ::dmc_emu::from_bits<T>(
        ::dmc_emu::warp_op(::dmc_emu::W_SHFL_DOWN, ::dmc_emu::to_bits(v), (int)d, width, mask));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
    return ::dmc_emu::from_bits<T>(
        ::dmc_emu::warp_op(::dmc_emu::W_SHFL_XOR, ::dmc_emu::to_bits(v), m, width, mask));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    return (unsigned)::dmc_emu::warp_op(::dmc_emu::W_BALLOT, pred != 0, 0, 32, mask);
}
inline int __any_sync(unsigned mask, int pred) {
    return (int)::dmc_emu::warp_op(::dmc_emu::W_ANY, pred != 0, 0, 32, mask);
}
inline int __all_sync(unsigned mask, int pred) {
    return (int)::dmc_emu::warp_op(::dmc_emu::W_ALL, pred != 0, 0, 32, mask);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
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
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T min(T a, T b) { return a < b ? a : b; }
template <class T> inline T max(T a, T b) { return a > b ? a : b; }

template <class T> inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomicMax(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
template <class T> inline T atomicMin(T* p, T v) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
template <class T> inline T atomicCAS(T* p, T cmp, T v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}

// Declares the C-ABI launcher `dmc_emu_<name>` of a kernel: grid (x, y), block x, seed, then
// the kernel's own parameters. PARAMS and ARGS are parenthesised lists.
#define DMC_EMU_UNPAREN(...) __VA_ARGS__
#define DMC_EMU_LAUNCHER(name, PARAMS, ARGS)                                                   \
    extern "C" int dmc_emu_##name(unsigned grid_x, unsigned grid_y, unsigned block_x,         \
                                  unsigned long long seed, DMC_EMU_UNPAREN PARAMS) {           \
        dim3 g;                                                                                \
        g.x = grid_x;                                                                          \
        g.y = grid_y;                                                                          \
        dim3 b;                                                                                \
        b.x = block_x;                                                                         \
        return ::dmc_emu::launch_lambda(g, b, seed, [&]() { name ARGS; });                     \
    }
