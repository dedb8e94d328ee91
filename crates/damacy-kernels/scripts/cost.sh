#!/usr/bin/env bash
# The emulator's cost model (issue 14). Builds the emulated kernels with DAMACY_EMU_COST=1: gcc's
# ThreadSanitizer instrumentation without libtsan, the emulator's hooks recording every global and
# shared memory access into warp requests (kernels/emu/cost.hpp), in its own target folder.
#   cost.sh            probe kernels with exact expectations, and every kernel's budget
#                      (crates/damacy-kernels/cost_budgets.toml) on the fixture workloads
#                      (make kernel-cost, part of make test)
#   cost.sh --report   the report benches/results/kernel_cost.md (make bench); model, not GPU time
set -euo pipefail
cd "$(dirname "$0")/../../.."
export DAMACY_EMU_COST=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/cost"
# the tests fail (instead of skipping) if this is somehow not a cost build
export DAMACY_EMU_COST_REQUIRED=1
if [[ -z "${DAMACY_NVRTC_DIR:-}" ]]; then
  for d in .nvrtc/*/nvidia/cu13/lib; do [[ -d "$d" ]] && export DAMACY_NVRTC_DIR="$PWD/$d"; done
fi
if [[ "${1:-}" == "--report" ]]; then
  shift
  exec cargo run -q -p damacy-kernels --features emulate --example kernel_cost -- "$@"
fi
exec cargo test -p damacy-kernels --features emulate --test kernel_cost "$@"
