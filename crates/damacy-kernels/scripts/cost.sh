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
if [[ -z "${NVDISASM:-}" ]]; then
  for d in .nvdisasm/*/nvidia/cu13/bin/nvdisasm; do [[ -x "$d" ]] && export NVDISASM="$PWD/$d"; done
fi
if [[ "${1:-}" == "--report" ]]; then
  shift
  exec cargo run -q -p damacy-kernels --features emulate --example kernel_cost -- "$@"
fi
# The GPU performance model's budgets (model_h200_us, model_insts_per_byte; issue 30) need the
# SASS weight table of the test binary itself: NVRTC (make nvrtc) and nvdisasm (make nvdisasm).
BIN=$(cargo test -q -p damacy-kernels --features emulate --test kernel_cost --no-run --message-format=json |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "kernel_cost":
        print(m["executable"])')
[[ -n "${DAMACY_NVRTC_DIR:-}" && -n "${NVDISASM:-}" ]] || {
  echo "cost.sh: the GPU model's budgets need NVRTC and nvdisasm (make nvrtc nvdisasm)" >&2
  exit 2
}
TABLE="$CARGO_TARGET_DIR/kernel_cost_sass.tsv"
if [[ ! -f "$TABLE" || "$BIN" -nt "$TABLE" ]]; then
  python3 crates/damacy-kernels/scripts/gpu_model_sass.py --binary "$BIN" --out "$TABLE" \
    --nvrtc-dir "$DAMACY_NVRTC_DIR" --nvdisasm "$NVDISASM"
fi
case "$TABLE" in /*) ;; *) TABLE="$PWD/$TABLE" ;; esac
export DAMACY_GPU_MODEL_SASS="$TABLE" DAMACY_GPU_MODEL_REQUIRED=1
exec cargo test -p damacy-kernels --features emulate --test kernel_cost "$@"
