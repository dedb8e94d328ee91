#!/usr/bin/env bash
# Runs every damacy-kernels test (unit tests, the emulated kernels, the NVRTC compile check,
# the GPU tests where a device is present) with the emulated kernels built under
# AddressSanitizer. Any out-of-bounds access by a kernel (on corrupt or truncated input too)
# aborts the run. `make test` runs this crate's tests here only, not once more in a plain build:
# the ASan build is the stricter of the two and the sweeps take minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export DAMACY_EMU_ASAN=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/asan}"
# libasan is linked dynamically into a binary that is not itself instrumented; fibers switch
# stacks, so stack-use-after-return tracking is off.
export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0:detect_stack_use_after_return=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
exec cargo test -p damacy-kernels --features emulate,cuda --lib --tests "$@"
