// runtime.cu — the emulator's out-of-line pieces, compiled only into emulated builds: the
// coverage callback that drives the lockstep and preempt schedules, and the C API that sets a
// thread's launch options.
#include "common.cuh"

// Called at every basic block of the kernels (-fsanitize-coverage=trace-pc). Outside a fiber,
// or under the sync schedule, it returns at once.
extern "C" __attribute__((no_sanitize_coverage, no_sanitize_thread)) void __sanitizer_cov_trace_pc(void) {
    if (__builtin_expect(::dmc_emu::tls_step_mode == 0, 1)) return;
    ::dmc_emu::Block* b = ::dmc_emu::tls_block;
    // lockstep: every lane steps one basic block, then the next lane; preempt: 1 in 16
    if (b->schedule == ::dmc_emu::SCHED_LOCKSTEP || (::dmc_emu::next_rng(b->rng) & 15u) == 0) ::dmc_emu::preempt();
}

// Options of the launches made afterwards by the calling OS thread (0: the default):
// schedule 1 sync, 2 lockstep, 3 preempt (default: DAMACY_EMU_SCHEDULE, else sync);
// dynamic shared memory bytes; the opt-in maximum of dynamic shared memory (≤ 227 KiB);
// the watchdog's time in milliseconds (default: DAMACY_EMU_WATCHDOG_S, else 300 s).
extern "C" int dmc_emu_configure(unsigned schedule, unsigned dyn_smem, unsigned max_dyn_smem, unsigned watchdog_ms) {
    if (schedule > ::dmc_emu::SCHED_PREEMPT) return -1;
    ::dmc_emu::Options& o = ::dmc_emu::thread_state()->opts;
    o.schedule = schedule;
    o.dyn_smem = dyn_smem;
    o.max_dyn_smem = max_dyn_smem;
    o.watchdog_ms = watchdog_ms;
    return 0;
}

// Which sanitizer the emulated kernels were built with: 0 none, 1 AddressSanitizer,
// 2 ThreadSanitizer.
extern "C" int dmc_emu_sanitizer(void) { return DMC_EMU_ASAN ? 1 : DMC_EMU_TSAN ? 2 : 0; }

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
