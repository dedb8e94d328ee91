#!/usr/bin/env bash
# The GPU performance model (issue 30; crates/damacy-kernels/src/model/). Builds kernel_bench as a
# cost build (DAMACY_EMU_COST=1, feature emulate, release), makes the SASS weight table for that
# binary (scripts/gpu_model_sass.py: NVRTC sm_90 cubins + nvdisasm line info joined with the
# binary's basic blocks), and runs kernel_bench on the emulator with --model.
#   gpu_model.sh [kernel_bench args]   e.g. --cases lz4 --sizes 64K --batch-mib 32 (prints the
#                                      predicted kernel time and GB/s of each case)
#   gpu_model.sh --report              the cases of the H200 run (--batch-mib 32 --sizes 64K,1M
#                                      --zstd-levels 3) → benches/results/gpu-model.md
#   gpu_model.sh --table               only (re)make the weight table; prints its path
# Needs NVRTC (make nvrtc) and nvdisasm (make nvdisasm), objdump and addr2line (binutils).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export DAMACY_EMU_COST=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/cost"
if [[ -z "${DAMACY_NVRTC_DIR:-}" ]]; then
  for d in .nvrtc/*/nvidia/cu13/lib; do [[ -d "$d" ]] && export DAMACY_NVRTC_DIR="$PWD/$d"; done
fi
if [[ -z "${NVDISASM:-}" ]]; then
  for d in .nvdisasm/*/nvidia/cu13/bin/nvdisasm; do [[ -x "$d" ]] && export NVDISASM="$PWD/$d"; done
  NVDISASM="${NVDISASM:-$(command -v nvdisasm || true)}"
fi
[[ -n "${DAMACY_NVRTC_DIR:-}" ]] || { echo "gpu_model.sh: no NVRTC (make nvrtc)" >&2; exit 2; }
[[ -n "${NVDISASM:-}" ]] || { echo "gpu_model.sh: no nvdisasm (make nvdisasm)" >&2; exit 2; }
cargo build -q --release -p damacy-kernels --example kernel_bench --features emulate
BIN="$CARGO_TARGET_DIR/release/examples/kernel_bench"
TABLE="$CARGO_TARGET_DIR/gpu_model_sass.tsv"
if [[ ! -f "$TABLE" || "$BIN" -nt "$TABLE" ]]; then
  python3 crates/damacy-kernels/scripts/gpu_model_sass.py --binary "$BIN" --out "$TABLE" \
    --nvrtc-dir "$DAMACY_NVRTC_DIR" --nvdisasm "$NVDISASM"
fi
case "$TABLE" in /*) ;; *) TABLE="$PWD/$TABLE" ;; esac
export DAMACY_GPU_MODEL_SASS="$TABLE"
case "${1:-}" in
  --table) echo "$DAMACY_GPU_MODEL_SASS"; exit 0 ;;
  --report)
    shift
    # the measured rows: the latest H200 run (f51d4fa: every decode, copy, unshuffle and
    # assemble row, and nvCOMP on the same streams); the Nsight Compute durations of the first
    # run (0650f56, a copy of ../shared/…), whose assemble and zstd kernels have changed since
    # (no ratio for them). Kernels changed since the measured build (H200_LABEL, a commit) are
    # named in the report: its ratios then compare two builds and calibrate nothing.
    H200="${H200_DIR:-benches/results/gpu-h200-2026-11-28-f51d4fa}"
    H200_LABEL="${H200_LABEL:-f51d4fa}"
    if git rev-parse -q --verify "$H200_LABEL^{commit}" > /dev/null 2>&1; then
      KERNELS_CHANGED="$(git diff --name-only "$H200_LABEL" -- kernels ':!kernels/emu' | paste -sd, -)"
    else
      KERNELS_CHANGED=unknown
    fi
    [[ -z "$KERNELS_CHANGED" ]] || echo "gpu_model.sh: the kernels differ from $H200_LABEL's ($KERNELS_CHANGED): the report's ratios compare two builds" >&2
    NCU="${H200_NCU_DIR:-benches/results/gpu-h200-2026-11-28}"
    MIB="${MODEL_MIB:-2}"
    # four processes: LZ4, the copy/unshuffle cases, assemble (sampled in launches shaped for
    # all of its crops), zstd + deflate
    run() {
      "$BIN" --device emulated --model h200 --batch-mib 32 --sizes 64K,1M --zstd-levels 3 --reps 1 --warmup 0 \
        --model-mib "$MIB" --cases "$1" --json "$CARGO_TARGET_DIR/gpu_model_$2.json" "${@:3}" \
        > "$CARGO_TARGET_DIR/gpu_model_$2.log" 2>&1
    }
    run lz4 a "$@" & A=$!
    run zstd,deflate b "$@" & B=$!
    run assemble c "$@" & C=$!
    run shuffle d "$@" & D=$!
    wait $C; wait $D
    # the label image unsampled (its chunks are uneven: the slowest decides the launch); its
    # rows replace the sampled ones (the report takes the last model file's row of a case)
    run zstd,deflate e --datasets u16-labels --model-mib 32 "$@" & E=$!
    wait $A; wait $B; wait $E
    cat "$CARGO_TARGET_DIR"/gpu_model_[abcde].log | grep -v '^\['
    python3 crates/damacy-kernels/scripts/gpu_model_report.py --measured "$H200/kernel_bench.json" \
      --model "$CARGO_TARGET_DIR/gpu_model_a.json" --model "$CARGO_TARGET_DIR/gpu_model_b.json" \
      --model "$CARGO_TARGET_DIR/gpu_model_c.json" --model "$CARGO_TARGET_DIR/gpu_model_d.json" \
      --model "$CARGO_TARGET_DIR/gpu_model_e.json" \
      --measured-label "$H200_LABEL" ${H200_LATER_LOG:+--measured-log "$H200_LATER_LOG" --measured-log-label later} \
      --ncu-kernels "$NCU/ncu-kernels.txt" --ncu-zstd "$NCU/ncu-zstd.txt" --model-mib "$MIB" \
      --ncu-changed "${NCU_CHANGED-dmc_assemble,dmc_zstd_decode}" --nvcomp "$H200/nvcomp_decode.json" \
      --commit "$(git rev-parse --short HEAD)" --kernels-changed "$KERNELS_CHANGED" \
      --out "${GPU_MODEL_OUT:-benches/results/gpu-model.md}"
    ;;
  *) exec "$BIN" --device emulated --model "${GPU_MODEL:-h200}" --reps 1 --warmup 0 "$@" ;;
esac
