// runtime.cu — the emulator's out-of-line pieces, compiled only into emulated builds: the
// coverage callback that drives the lockstep and preempt schedules, and the C API that sets a
// thread's launch options.
#include "common.cuh"

// The fiber switch (x86-64 System V). dmc_emu_swap(save, load): pushes the callee-saved
// registers, stores the stack pointer at *save, loads `load` as the stack pointer and pops the
// same frame from there; its `ret` resumes
// the other context where it called dmc_emu_swap. Caller-saved registers need no saving: to the
// compiler this is an ordinary call. The MXCSR and x87 control word, callee-saved too, are not
// switched: every fiber of a launch runs with the launching thread's, which the launch checks
// are unchanged at its end (saving and loading them was ~85 % of a switch's time in a profile:
// ldmxcsr and fldcw are slow). A new fiber's frame (make_fiber) returns into
// dmc_emu_fiber_start, which calls r13 with r12 as argument and never returns. Not instrumented
// by any sanitizer; the ASan and TSan fiber annotations are made around the calls.
asm(R"(
    .text
    .globl dmc_emu_swap
    .type dmc_emu_swap, @function
    .p2align 4
dmc_emu_swap:
    .cfi_startproc
    endbr64
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size dmc_emu_swap, .-dmc_emu_swap

    .globl dmc_emu_fiber_start
    .type dmc_emu_fiber_start, @function
    .p2align 4
dmc_emu_fiber_start:
    .cfi_startproc
    .cfi_undefined rip
    endbr64
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size dmc_emu_fiber_start, .-dmc_emu_fiber_start
)");

// Called at every basic block of the kernels (-fsanitize-coverage=trace-pc). Outside a fiber,
// or under the sync schedule, it returns at once. Weak: a cargo-fuzz build links libFuzzer's
// hook of this name too (a stub that exits; two strong definitions failed the link), and builds
// the kernels without trace-pc (build.rs), so neither is called there and the fuzzers run the
// sync schedule only (lockstep and preempt need this hook).
extern "C" __attribute__((weak, no_sanitize_coverage, no_sanitize_thread)) void __sanitizer_cov_trace_pc(void) {
#if DMC_EMU_COST
    ::dmc_emu::cost::on_bb((uintptr_t)__builtin_return_address(0));  // the GPU model's count
#endif
    if (__builtin_expect(::dmc_emu::tls_step_mode == 0, 1)) return;
    ::dmc_emu::Block* b = ::dmc_emu::tls_block;
    // lockstep: every lane steps one basic block, then the next lane; preempt: 1 in 16
    if (b->schedule == ::dmc_emu::SCHED_LOCKSTEP || (::dmc_emu::next_rng(b->rng) & 15u) == 0) ::dmc_emu::preempt();
}

// Options of the launches made afterwards by the calling OS thread (0: the default):
// schedule 1 sync, 2 lockstep, 3 preempt, 4 mixed (one of the three per launch, chosen from
// the seed, the kernel and the grid; seed 0: sync) (default: DAMACY_EMU_SCHEDULE, else sync);
// dynamic shared memory bytes; the opt-in maximum of dynamic shared memory (≤ 227 KiB);
// the watchdog's time in milliseconds (default: DAMACY_EMU_WATCHDOG_S, else 300 s).
extern "C" int dmc_emu_configure(unsigned schedule, unsigned dyn_smem, unsigned max_dyn_smem, unsigned watchdog_ms) {
    if (schedule > ::dmc_emu::SCHED_MIXED) return -1;
    ::dmc_emu::Options& o = ::dmc_emu::thread_state()->opts;
    o.schedule = schedule;
    o.dyn_smem = dyn_smem;
    o.max_dyn_smem = max_dyn_smem;
    o.watchdog_ms = watchdog_ms;
    return 0;
}

// How many blocks of a grid the calling thread's later launches with a non-zero seed keep
// resident at once (their fibers interleaved; 1: one block at a time), 1 to 4; 0: the default
// (DAMACY_EMU_RESIDENT_BLOCKS, else 4). Launches with seed 0 run one block at a time.
extern "C" int dmc_emu_set_resident_blocks(unsigned n) {
    if (n > (unsigned)::dmc_emu::MAX_RESIDENT) return -1;
    ::dmc_emu::thread_state()->opts.resident = n;
    return 0;
}

// How many blocks the calling thread's latest launch kept resident at once.
extern "C" int dmc_emu_last_resident(void) { return ::dmc_emu::thread_state()->last_resident; }

// The schedule the calling thread's latest launch ran under (1 sync, 2 lockstep, 3 preempt;
// what `mixed` chose), 0 before its first launch.
extern "C" int dmc_emu_last_schedule(void) { return (int)::dmc_emu::thread_state()->last_schedule; }

// Which sanitizer the emulated kernels were built with: 0 none, 1 AddressSanitizer,
// 2 ThreadSanitizer.
extern "C" int dmc_emu_sanitizer(void) { return DMC_EMU_ASAN ? 1 : DMC_EMU_TSAN ? 2 : 0; }

// Whether the emulated kernels were built with the alignment sanitizer (DAMACY_EMU_UBSAN=1:
// scripts/ubsan.sh, and scripts/asan.sh beside AddressSanitizer): 1 if so, else 0.
extern "C" int dmc_emu_alignment_checked(void) { return DMC_EMU_UBSAN; }

// A hand-off between OS threads that TSan cannot see (the emulated streams' queues and events
// are Rust channels, mutexes and condition variables on futexes): `release` 1 on the sending
// side, 0 on the receiving side, with the same address. Then what the host did before queueing
// work happens before the work, and what a stream did before an event before its waiters, as
// on a GPU; a missing event between two streams stays a race. A no-op without TSan.
extern "C" void dmc_emu_handoff(const void* addr, int release) {
#if DMC_EMU_TSAN
    if (release) __tsan_release(const_cast<void*>(addr));
    else __tsan_acquire(const_cast<void*>(addr));
#else
    (void)addr;
    (void)release;
#endif
}

// ---- The cost model (DMC_EMU_COST=1 builds; see kernels/emu/cost.hpp) ----

// Whether the kernels were built to record their memory accesses.
extern "C" int dmc_emu_cost_enabled(void) { return DMC_EMU_COST; }

#if DMC_EMU_COST
// sizeof(LaunchCost), for the Rust twin's check (0: no cost build).
extern "C" unsigned long long dmc_emu_cost_record_size(void) { return sizeof(::dmc_emu::cost::LaunchCost); }

// Moves up to `cap` recorded launches (oldest first) into `out`; returns how many.
extern "C" DMC_EMU_INTERNAL unsigned long long dmc_emu_cost_take(void* out, unsigned long long cap) {
    ::dmc_emu::cost::Sink& s = ::dmc_emu::cost::sink();
    std::lock_guard<std::mutex> lock(s.mu);
    const size_t n = s.launches.size() < cap ? s.launches.size() : (size_t)cap;
    for (size_t i = 0; i < n; i++) static_cast<::dmc_emu::cost::LaunchCost*>(out)[i] = s.launches[i];
    s.launches.erase(s.launches.begin(), s.launches.begin() + (long)n);
    s.warps.erase(s.warps.begin(), s.warps.begin() + (long)n);
    return n;
}

// The GPU performance model (issue 30): sizeof(WarpRec), for the Rust twin's check.
extern "C" unsigned long long dmc_emu_model_record_size(void) { return sizeof(::dmc_emu::cost::WarpRec); }

// How many weights the SASS table (DAMACY_GPU_MODEL_SASS) holds; 0 without one.
extern "C" DMC_EMU_INTERNAL unsigned long long dmc_emu_model_weights(void) {
    ::dmc_emu::cost::Weights& w = ::dmc_emu::cost::weights();
    return w.loaded ? (unsigned long long)w.w.size() : 0;
}

// The warps of the `i`-th launch not yet taken (0: the oldest, as dmc_emu_cost_take's order):
// copies up to `cap` into `out`, returns how many the launch has (call again with a larger
// `out` when that exceeds `cap`); 0 when there is no such launch.
extern "C" DMC_EMU_INTERNAL unsigned long long dmc_emu_model_warps(unsigned long long i, void* out,
                                                                   unsigned long long cap) {
    ::dmc_emu::cost::Sink& s = ::dmc_emu::cost::sink();
    std::lock_guard<std::mutex> lock(s.mu);
    if (i >= s.warps.size()) return 0;
    const std::vector<::dmc_emu::cost::WarpRec>& v = s.warps[(size_t)i];
    const size_t n = v.size() < cap ? v.size() : (size_t)cap;
    for (size_t k = 0; k < n; k++) static_cast<::dmc_emu::cost::WarpRec*>(out)[k] = v[k];
    return v.size();
}

// The hooks gcc's -fsanitize=thread instrumentation calls; libtsan is not linked.
#define DMC_COST_HOOK extern "C" DMC_EMU_INTERNAL __attribute__((used))
#define DMC_COST_PC ((uintptr_t)__builtin_return_address(0))
#define DMC_COST_RW(n)                                                                                       \
    DMC_COST_HOOK void __tsan_read##n(void* p) { ::dmc_emu::cost::record(p, n, ::dmc_emu::cost::KIND_LOAD, DMC_COST_PC); } \
    DMC_COST_HOOK void __tsan_write##n(void* p) { ::dmc_emu::cost::record(p, n, ::dmc_emu::cost::KIND_STORE, DMC_COST_PC); } \
    DMC_COST_HOOK void __tsan_unaligned_read##n(void* p) {                                                   \
        ::dmc_emu::cost::record(p, n, ::dmc_emu::cost::KIND_LOAD, DMC_COST_PC);                              \
    }                                                                                                        \
    DMC_COST_HOOK void __tsan_unaligned_write##n(void* p) {                                                  \
        ::dmc_emu::cost::record(p, n, ::dmc_emu::cost::KIND_STORE, DMC_COST_PC);                             \
    }                                                                                                        \
    DMC_COST_HOOK void __tsan_volatile_read##n(void* p) {                                                    \
        ::dmc_emu::cost::record(p, n, ::dmc_emu::cost::KIND_LOAD, DMC_COST_PC);                              \
    }                                                                                                        \
    DMC_COST_HOOK void __tsan_volatile_write##n(void* p) {                                                   \
        ::dmc_emu::cost::record(p, n, ::dmc_emu::cost::KIND_STORE, DMC_COST_PC);                             \
    }
DMC_COST_RW(1)
DMC_COST_RW(2)
DMC_COST_RW(4)
DMC_COST_RW(8)
DMC_COST_RW(16)
DMC_COST_HOOK void __tsan_read_range(void* p, unsigned long size) {
    ::dmc_emu::cost::record(p, size, ::dmc_emu::cost::KIND_LOAD, DMC_COST_PC);
}
DMC_COST_HOOK void __tsan_write_range(void* p, unsigned long size) {
    ::dmc_emu::cost::record(p, size, ::dmc_emu::cost::KIND_STORE, DMC_COST_PC);
}
DMC_COST_HOOK void __tsan_init(void) {}
DMC_COST_HOOK void __tsan_func_entry(void*) {}
DMC_COST_HOOK void __tsan_func_exit(void) {}
DMC_COST_HOOK void __tsan_vptr_update(void**, void*) {}
DMC_COST_HOOK void __tsan_vptr_read(void**) {}
DMC_COST_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
DMC_COST_HOOK void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// Atomics: recorded, then performed for real (sequentially consistent, whatever the order asked).
#define DMC_COST_ATOMIC(bits, T)                                                                             \
    DMC_COST_HOOK T __tsan_atomic##bits##_load(const volatile T* a, int) {                                   \
        ::dmc_emu::cost::record(a, sizeof(T), ::dmc_emu::cost::KIND_LOAD, DMC_COST_PC);                      \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                         \
    }                                                                                                        \
    DMC_COST_HOOK void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                \
        ::dmc_emu::cost::record(a, sizeof(T), ::dmc_emu::cost::KIND_STORE, DMC_COST_PC);                     \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                            \
    }                                                                                                        \
    DMC_COST_ATOMIC_RMW(bits, T, exchange, __atomic_exchange_n)                                              \
    DMC_COST_ATOMIC_RMW(bits, T, fetch_add, __atomic_fetch_add)                                              \
    DMC_COST_ATOMIC_RMW(bits, T, fetch_sub, __atomic_fetch_sub)                                              \
    DMC_COST_ATOMIC_RMW(bits, T, fetch_and, __atomic_fetch_and)                                              \
    DMC_COST_ATOMIC_RMW(bits, T, fetch_or, __atomic_fetch_or)                                                \
    DMC_COST_ATOMIC_RMW(bits, T, fetch_xor, __atomic_fetch_xor)                                              \
    DMC_COST_ATOMIC_RMW(bits, T, fetch_nand, __atomic_fetch_nand)                                            \
    DMC_COST_HOOK int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {    \
        ::dmc_emu::cost::record(a, sizeof(T), ::dmc_emu::cost::KIND_ATOMIC, DMC_COST_PC);                    \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);              \
    }                                                                                                        \
    DMC_COST_HOOK int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {      \
        ::dmc_emu::cost::record(a, sizeof(T), ::dmc_emu::cost::KIND_ATOMIC, DMC_COST_PC);                    \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);              \
    }                                                                                                        \
    DMC_COST_HOOK T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {          \
        ::dmc_emu::cost::record(a, sizeof(T), ::dmc_emu::cost::KIND_ATOMIC, DMC_COST_PC);                    \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
        return c;                                                                                            \
    }
#define DMC_COST_ATOMIC_RMW(bits, T, op, builtin)                                                            \
    DMC_COST_HOOK T __tsan_atomic##bits##_##op(volatile T* a, T v, int) {                                    \
        ::dmc_emu::cost::record(a, sizeof(T), ::dmc_emu::cost::KIND_ATOMIC, DMC_COST_PC);                    \
        return builtin(a, v, __ATOMIC_SEQ_CST);                                                              \
    }
DMC_COST_ATOMIC(8, unsigned char)
DMC_COST_ATOMIC(16, unsigned short)
DMC_COST_ATOMIC(32, unsigned int)
DMC_COST_ATOMIC(64, unsigned long long)
#else
extern "C" unsigned long long dmc_emu_cost_record_size(void) { return 0; }
extern "C" unsigned long long dmc_emu_cost_take(void*, unsigned long long) { return 0; }
extern "C" unsigned long long dmc_emu_model_record_size(void) { return 0; }
extern "C" unsigned long long dmc_emu_model_weights(void) { return 0; }
extern "C" unsigned long long dmc_emu_model_warps(unsigned long long, void*, unsigned long long) { return 0; }
#endif
