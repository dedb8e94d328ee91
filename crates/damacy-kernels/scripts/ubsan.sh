#!/usr/bin/env bash
# Runs every damacy-kernels test with the emulated kernels built under gcc's alignment sanitizer
# alone (-fsanitize=alignment, no recovery): a kernel's misaligned 2-, 4-, 8- or 16-byte load or
# store (a fault on a GPU, forgiven by x86) aborts the run with a report naming its file and line
# and the kernel's stack. `make test` gets the same check from scripts/asan.sh, which builds
# the kernels with -fsanitize=address,alignment (one run instead of two); this script is
# `make kernel-ubsan`, for a faster check without ASan. Its own target folder.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export DAMACY_EMU_UBSAN=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/ubsan"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
exec cargo test -p damacy-kernels --features emulate,cuda --lib --tests "$@"
