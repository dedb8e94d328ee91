#!/usr/bin/env bash
# Runs every damacy-kernels test (unit tests, the emulated kernels, the NVRTC compile check,
# the GPU tests where a device is present) with the emulated kernels built under
# AddressSanitizer and gcc's alignment sanitizer. Any out-of-bounds access by a kernel (on
# corrupt or truncated input too), and any misaligned 2-, 4-, 8- or 16-byte load or store (a
# fault on a GPU; x86 forgives it), aborts the run. (The alignment checks ride on this run: a
# run of their own, scripts/ubsan.sh, would cost as long again.) `make test` runs this crate's
# tests here only, not once more in a plain build: the ASan build is the stricter of the two and
# the sweeps take minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export DAMACY_EMU_ASAN=1
export DAMACY_EMU_UBSAN=1
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/asan}"
# Every launch with a non-zero seed runs under a schedule chosen from (seed, kernel, grid): the
# shuffled sync order, random preemption or lock-step warps (kernels/emu/cuda_emu.hpp,
# mixed_schedule), so the fixture and property tests of every real kernel cover all three;
# tests that set a schedule themselves (dmc_emu_configure) keep theirs.
export DAMACY_EMU_SCHEDULE="${DAMACY_EMU_SCHEDULE:-mixed}"
# libasan is linked dynamically into a binary that is not itself instrumented; fibers switch
# stacks, so stack-use-after-return tracking is off.
export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0:detect_stack_use_after_return=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
exec cargo test -p damacy-kernels --features emulate,cuda --lib --tests "$@"
