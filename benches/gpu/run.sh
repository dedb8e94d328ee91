#!/usr/bin/env bash
# Every GPU number of the kernel report in one command, on a GPU machine with no Rust toolchain
# and no network (Python 3.12 with cupy and the nvidia-cuda-nvrtc wheel, NVIDIA driver), run
# from the repo root with .gpu-bundle/ (made by benches/gpu/bundle.sh) carried along:
#
#   bash benches/gpu/run.sh
#
# Steps, each logged; a failed step does not stop the next, and the script exits 1 at the end
# if any failed:
#   1. bundle   unpack the bundle's binaries, install the nvCOMP wheels offline into /tmp/site
#   2. nvrtc    find libnvrtc (nvidia-cuda-nvrtc wheel, else a CUDA toolkit) for DAMACY_NVRTC_DIR
#   3. gpu      nvidia-smi
#   4. tests    damacy-kernels' GPU integration tests (--test-threads=1); a skip counts as failure
#   5. inspect  damacy inspect fixtures --digest --executor gpu, digests vs fixtures/manifest.json
#   6. sanitize compute-sanitizer memcheck and racecheck over the GPU integration tests
#                -> sanitize-memcheck.txt, sanitize-racecheck.txt (an error or a race fails it)
#   7. e2e      end to end on the demo's full dataset: 16 arrays of sharded zstd (15 hard links),
#                128^3 float32 batch 128 on gpu (workers 1/2/4) and cpu, an uncompressed and a
#                blosc-lz4 16-array copy, 64^3 uint16, --compare-engine, cold start
#                -> gpu-e2e-<date>.md and e2e.tar.gz (every bench's JSON and stderr)
#   8. calibrate benches/gpu/model_cal.py: the performance model's constants measured (launch
#                cost, dependent-issue CPI, L1/L2/DRAM/shared latency, copy bandwidth, SM clock)
#                -> model_cal.json
#      profile  Nsight Compute on zstd (label image, smooth field) and LZ4 (label image) at 64 KiB:
#                stall reasons per issued instruction, instruction and branch counts, occupancy
#                -> ncu-profile.txt, ncu-stalls.txt (named only: not in the default list)
#   9. compare  benches/gpu/compare.py: kernel_bench (its defaults, plus the demo volume's real
#                chunks: `damacy demo --full` writes it on first use) + nvCOMP LZ4/Zstd/Deflate +
#                copy bandwidth -> gpu-kernels-<date>.md, kernel_bench.json, nvcomp_decode.json
#      waves    the demo volume's zstd chunks in waves of 75, 150 and 250 MiB, teams chosen by the
#                decoder, forced on and forced off -> waves.md (named only: not in the default list)
#  10. python   the damacy wheel and zarr from the bundle; benches/gpu/python_gpu.py: Pipeline
#               batches into torch and cupy, zarr enable_gpu() reads through
#               damacy.GpuCodecPipeline, random-crop timing -> python-gpu-<date>.md
#  11. cold     a fresh `damacy bench --executor gpu` with an empty kernel cache and no NVRTC in
#               reach: every kernel must load from the images shipped in the binary; the time
#               from process start to the first batch -> cold.txt, cold.json
# Output folder: $OUT if set, else benches/results/ (gpu-run.log, gpu-tests.log,
# inspect-gpu.log and the compare.py files). Steps 4-11 can be named to run only those (steps
# 1-3 always run), in the order named: under the device tool's 10-minute limit per command, run
#   bash benches/gpu/run.sh cold tests inspect sanitize e2e calibrate   # about 3 minutes
#   bash benches/gpu/run.sh compare python                              # about 8 minutes
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/benches/results}"
mkdir -p "$out"
bundle="$root/${DAMACY_GPU_BUNDLE:-.gpu-bundle}"
bin=/tmp/damacy-gpu-bin
failed=()

step() { # name function
  local name=$1 t0=$SECONDS rc
  echo
  echo "=== [$(date -u +%H:%M:%S)] $name"
  "$2"
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "=== $name: ok ($((SECONDS - t0)) s)"
  else
    echo "=== $name: FAILED (exit $rc$([ $rc -eq 124 ] && echo ', timed out')) ($((SECONDS - t0)) s)"
    failed+=("$name")
  fi
}

unpack_bundle() {
  if [ ! -d "$bundle/bin" ] || [ ! -d "$bundle/wheels" ]; then
    echo "no $bundle: run 'bash benches/gpu/bundle.sh' on the build machine and carry .gpu-bundle"
    return 1
  fi
  cat "$bundle/BUILD_INFO.json" 2>/dev/null && echo
  mkdir -p "$bin"
  local f
  for f in "$bundle"/bin/*.xz; do
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$f" "$bin/$(basename "$f" .xz)" || return 1
  done
  chmod +x "$bin"/*
  ls -l "$bin"
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  if ! ls "$bundle"/wheels/*.whl >/dev/null 2>&1; then
    echo "no nvCOMP wheels in the bundle (built with DAMACY_BUNDLE_NVCOMP=0): the compare step cannot run"
    return 0
  fi
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$bundle"/wheels/*.whl || return 1
  python3 -c 'import nvidia.nvcomp as n; print("nvCOMP", n.__version__, "for CUDA", n.__cuda_version__)'
}

find_nvrtc() {
  local dir
  dir="$(python3 - <<'EOF'
import glob, os, sys
# The nvidia-cuda-nvrtc wheel (nvidia/cu13/lib, or nvidia/cuda_nvrtc/lib for CUDA 12), then a toolkit.
roots = [os.path.join(p, "nvidia") for p in sys.path if p]
cands = []
for r in roots:
    cands += glob.glob(os.path.join(r, "cu13", "lib", "libnvrtc.so.13*"))
for r in roots:
    cands += glob.glob(os.path.join(r, "*", "lib", "libnvrtc.so.1[23]*"))
cands += glob.glob("/usr/local/cuda*/lib64/libnvrtc.so.1[23]*") + glob.glob("/usr/local/cuda*/targets/*/lib/libnvrtc.so.1[23]*")
for c in cands:
    d = os.path.dirname(os.path.realpath(c))
    if glob.glob(os.path.join(d, "libnvrtc-builtins.so*")):
        print(d)
        break
EOF
)"
  if [ -z "$dir" ]; then
    echo "libnvrtc (with libnvrtc-builtins beside it) not found in the Python packages or /usr/local/cuda*"
    return 1
  fi
  export DAMACY_NVRTC_DIR="$dir"
  echo "DAMACY_NVRTC_DIR=$dir"
  ls "$dir" | grep -i nvrtc
}

gpu_info() {
  nvidia-smi || return 1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
}

gpu_tests() {
  [ -x "$bin/gpu-tests" ] || { echo "no gpu-tests binary (bundle step failed?)"; return 1; }
  # The test binary reads <repo root at build time>/fixtures; point that path at this checkout.
  local build_root
  build_root="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("build_root", ""))' "$bundle/BUILD_INFO.json")"
  if [ -n "$build_root" ] && [ "$build_root" != "$root" ] && [ ! -e "$build_root/fixtures/manifest.json" ]; then
    if [ ! -e "$build_root" ] && mkdir -p "$(dirname "$build_root")" && ln -s "$root" "$build_root"; then
      echo "linked $build_root -> $root (the tests' fixtures path)"
    else
      echo "note: $build_root/fixtures is not reachable; fixture tests will fail"
    fi
  fi
  # --nocapture: the tests print why they skip (no driver, no device, no NVRTC) on stderr.
  # gpu_*: the CUDA instances (the binary also holds the emulated twins, which CI runs).
  timeout --kill-after=10 120 "$bin/gpu-tests" gpu_ --test-threads=1 --nocapture 2>&1 | tee "$out/gpu-tests.log"
  local rc=${PIPESTATUS[0]}
  if grep -q "SKIPPED" "$out/gpu-tests.log"; then
    echo "the GPU tests skipped (no usable GPU): nothing was tested on a GPU"
    return 1
  fi
  return "$rc"
}

inspect_digests() {
  [ -x "$bin/damacy" ] || { echo "no damacy binary (bundle step failed?)"; return 1; }
  echo "\$ damacy inspect fixtures --digest --executor gpu > $out/inspect-gpu.log"
  timeout --kill-after=10 60 "$bin/damacy" inspect fixtures --digest --executor gpu >"$out/inspect-gpu.log" 2>&1
  local rc=$?
  if [ "$(wc -l <"$out/inspect-gpu.log")" -gt 4 ]; then
    head -n 1 "$out/inspect-gpu.log"
    tail -n 1 "$out/inspect-gpu.log"
  else
    cat "$out/inspect-gpu.log"
  fi
  python3 - "$out/inspect-gpu.log" fixtures/manifest.json <<'EOF' || return 1
import json, re, sys
log, manifest = open(sys.argv[1]).read().splitlines(), json.load(open(sys.argv[2]))
want = {a["path"].strip("/"): a["sha256"] for a in manifest["arrays"]}
got, by, current = {}, {}, None
for line in log:
    if line and not line.startswith(" ") and line.strip("/") in want:
        current = line.strip("/")
    m = re.match(r"\s+sha256 ([0-9a-f]{64})\s+\((.*)\)", line)
    if m and current:
        got[current], by[current] = m.group(1), m.group(2)
bad = sorted(p for p in got if got[p] != want[p])
missing = sorted(set(want) - set(got))
device = sum(1 for b in by.values() if "by device kernels" in b and " of " not in b)
partly = sum(1 for b in by.values() if " of " in b)
print(f"digests: {len(got) - len(bad)} of {len(want)} arrays match fixtures/manifest.json; "
      f"{device} decoded entirely by device kernels, {partly} partly, {len(got) - device - partly} on the CPU or with no chunks")
for p in bad:
    print(f"  MISMATCH {p}: {got[p]} != {want[p]}")
if got:
    for p in missing[:20]:
        print(f"  MISSING {p}")
    if len(missing) > 20:
        print(f"  ... and {len(missing) - 20} more missing")
sys.exit(1 if bad or missing else 0)
EOF
  return "$rc"
}

# The demo volume's real chunks (kernel_bench --dataset: sharded zstd and blosc-lz4 as stored),
# written on first use by `damacy demo --full` (the e2e step reads the same folder); prints the
# dataset's path, or fails.
demo_volume() {
  local demo_dir="${DAMACY_DEMO_DIR:-$HOME/.cache/damacy/demo}"
  [ -x "$bin/damacy" ] && timeout --kill-after=10 180 "$bin/damacy" demo --full --dir "$demo_dir" \
    --batches 1 --warmup 0 --executor cpu >/dev/null && echo "$demo_dir/full/demo.zarr"
}

compare() {
  [ -x "$bin/kernel_bench" ] || { echo "no kernel_bench binary (bundle step failed?)"; return 1; }
  # DAMACY_COMPARE_BENCH_ARGS: more kernel_bench arguments (e.g. "--cases shuffle,assemble,demo
  # --sizes 64K,1M --batch-mib 32" for a short run).
  local bench_args="${DAMACY_COMPARE_BENCH_ARGS:-}" demo
  if demo="$(demo_volume)"; then
    bench_args="$bench_args --dataset $demo"
  else
    echo "no demo volume (damacy demo --full failed or timed out): the demo rows are left out"
  fi
  PYTHONUNBUFFERED=1 timeout --kill-after=10 400 python3 benches/gpu/compare.py --device cuda --bin "$bin/kernel_bench" --out "$out" --timeout 240 --nvcomp-timeout 140 \
    ${bench_args:+--bench-args "$bench_args"}
  local rc=$?
  # The GPU performance model's predictions of the same cases (issue 30), made beforehand on the
  # build machine by crates/damacy-kernels/scripts/gpu_model.sh --report and carried in the
  # bundle as gpu_model/*.json: measured vs predicted for this run, in one step.
  if ls "$bundle"/gpu_model/gpu_model_*.json >/dev/null 2>&1 && [ -f "$out/kernel_bench.json" ]; then
    local models=()
    for m in "$bundle"/gpu_model/gpu_model_*.json; do models+=(--model "$m"); done
    python3 crates/damacy-kernels/scripts/gpu_model_report.py --measured "$out/kernel_bench.json" "${models[@]}" \
      --out "$out/gpu-model.md" || echo "gpu-model report failed (the run's rows stand)"
  fi
  return "$rc"
}

# The demo volume's zstd chunks decoded in waves of the engine's sizes (a lane's default wave
# holds ~76 MiB: ~300 chunks, which fit the device's resident teams; 150 and 250 MiB do not),
# each with the decoder's own choice of teams (`--teams auto`) and with teams and lone warps
# forced: what the GPU model (benches/results/gpu-model.md) cannot settle, the launch shape of
# large waves (its seventh and eighth calibrations disagree on the 250 MiB wave). -> waves.md and
# waves-<MiB>-<teams>.json
waves() {
  [ -x "$bin/kernel_bench" ] || { echo "no kernel_bench binary (bundle step failed?)"; return 1; }
  local demo mib teams rc=0
  demo="$(demo_volume)" || { echo "no demo volume (damacy demo --full failed or timed out)"; return 1; }
  for mib in 75 150 250; do
    for teams in auto on off; do
      timeout --kill-after=10 120 "$bin/kernel_bench" --device cuda --cases demo --dataset "$demo" --batch-mib "$mib" \
        --teams "$teams" --json "$out/waves-$mib-$teams.json" >/dev/null || { echo "kernel_bench $mib MiB --teams $teams failed"; rc=1; }
    done
  done
  python3 - "$out" <<'EOF' | tee "$out/waves.md"
import glob, json, os, sys
print("| wave MiB | teams | chunks | kernel µs (median) | kernel GB/s |")
print("|---:|---|---:|---:|---:|")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "waves-*.json")), key=lambda p: (int(p.split("-")[-2]), p)):
    mib, teams = os.path.basename(f)[6:-5].split("-")
    for r in json.load(open(f))["rows"]:
        if r["name"].startswith("zstd-demo"):
            print(f"| {mib} | {teams} | {r['n_chunks']} | {r['kernel_s'] * 1e6:.1f} | {r['kernel_gbps']:.2f} |")
EOF
  return "$rc"
}

cold_start() {
  [ -x "$bin/damacy" ] || { echo "no damacy binary (bundle step failed?)"; return 1; }
  local cache t0 t1 rc
  cache="$(mktemp -d)"
  t0=$(date +%s%N)
  # No DAMACY_NVRTC_DIR: NVRTC is out of reach, so any kernel not shipped fails the run.
  env -u DAMACY_NVRTC_DIR DAMACY_KERNEL_CACHE_DIR="$cache" timeout --kill-after=10 120 "$bin/damacy" bench \
    "fixtures#v3/sharded_zstd_index_end" --crop 8,8,8 --batch 4 --batches 2 --warmup 1 --executor gpu --json \
    >"$out/cold.json" 2>"$out/cold.txt"
  rc=$?
  t1=$(date +%s%N)
  echo "process wall time: $(( (t1 - t0) / 1000000 )) ms (exit $rc)" >>"$out/cold.txt"
  cat "$out/cold.txt"
  rm -rf "$cache"
  [ $rc -eq 0 ] || { cat "$out/cold.json"; return 1; }
  python3 - "$out/cold.json" <<'EOF' | tee -a "$out/cold.txt"
import json, sys
v = json.load(open(sys.argv[1]))
c = v["cold_start"]
print(f"cold start: first batch {c['first_batch_s']:.3f} s after process start, executor built in {c['executor_s']:.3f} s")
print(f"executor: {v['executor']}")
# Issue 29's goal on sm_80/sm_90: kernels from the shipped images, first batch within 1 s.
sys.exit(0 if c["kernels"] == "shipped" else 1)
EOF
  return "${PIPESTATUS[0]}"
}

# compute-sanitizer from PATH, a CUDA toolkit, or Nsight's folders.
find_sanitizer() {
  local c
  for c in "$(command -v compute-sanitizer 2>/dev/null)" /usr/local/cuda*/bin/compute-sanitizer \
    /usr/local/cuda*/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

# memcheck and racecheck over every GPU integration test, so that wrong bytes and shared-memory
# races are checked on hardware, not only by the emulator. A race is a warning to racecheck
# (--error-exitcode ignores it): any "Race reported" line fails the step.
sanitize() {
  [ -x "$bin/gpu-tests" ] || { echo "no gpu-tests binary (bundle step failed?)"; return 1; }
  local cs rc=0 tool log r
  cs="$(find_sanitizer)" || { echo "compute-sanitizer not found"; return 1; }
  echo "compute-sanitizer: $cs"
  for tool in memcheck racecheck; do
    log="$out/sanitize-$tool.txt"
    echo "\$ compute-sanitizer --tool $tool --error-exitcode 9 gpu-tests gpu_ --test-threads=1 > $log"
    timeout --kill-after=10 150 "$cs" --tool "$tool" --error-exitcode 9 "$bin/gpu-tests" gpu_ --test-threads=1 >"$log" 2>&1
    r=$?
    grep -E "^test |test result|SUMMARY|Race reported|Invalid|hazards\]" "$log" | head -n 40
    if [ $r -ne 0 ] || grep -q "Race reported" "$log"; then
      echo "$tool: FAILED (exit $r)"
      rc=1
    fi
  done
  return $rc
}

# End to end on the demo's full dataset (512^3 uint16: sharded zstd, inner chunks 32x64x64 in
# 256x256x512 shards; blosc-lz4 64^3 chunks), page cache warm: 16 arrays = one array and 15 hard
# links. Every bench is one JSON object in $out/e2e/; e2e_report.py writes the table.
e2e() {
  [ -x "$bin/damacy" ] || { echo "no damacy binary (bundle step failed?)"; return 1; }
  # DAMACY_E2E_EXECUTOR=emulated and DAMACY_E2E_SIZE=--tiny try the step's plumbing without a GPU.
  # The same folder as compare's demo volume, so that one run writes it once.
  local d="${DAMACY_DEMO_DIR:-$HOME/.cache/damacy/demo}" e="$out/e2e" store i t0 size="${DAMACY_E2E_SIZE:---full}"
  local gpu="${DAMACY_E2E_EXECUTOR:-gpu}"
  e2e_rc=0
  e2e_t0=$SECONDS
  mkdir -p "$e"
  t0=$SECONDS
  timeout 150 "$bin/damacy" demo $size --dir "$d" --batches 1 --warmup 0 --executor cpu >"$e/demo.txt" 2>&1 ||
    { tail -n 5 "$e/demo.txt"; return 1; }
  store="$(ls -d "$d"/*/demo.zarr | head -n 1)"
  echo "dataset ready in $((SECONDS - t0)) s: $store"
  local zstd16=("$store/sharded_zstd") lz4_16=("$store/blosc_lz4") raw16=("$store/raw")
  for i in $(seq 1 15); do
    [ -e "$store/zstd_$i" ] || cp -al "$store/sharded_zstd" "$store/zstd_$i"
    [ -e "$store/lz4_$i" ] || cp -al "$store/blosc_lz4" "$store/lz4_$i"
    zstd16+=("$store/zstd_$i")
    lz4_16+=("$store/lz4_$i")
    raw16+=("$store/raw_$i")
  done
  # The uncompressed copy (bytes only, the same shard geometry), written by zarr-python.
  t0=$SECONDS
  local py_path="${PYTHONPATH:-}"
  if ! python3 -c 'import zarr' 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site-py "$bundle"/pywheels/*.whl >/dev/null 2>&1
    py_path="/tmp/site-py${py_path:+:$py_path}"
  fi
  if PYTHONPATH="$py_path" timeout 120 python3 benches/gpu/raw_copy.py "$store"; then
    echo "uncompressed copy ready in $((SECONDS - t0)) s"
  else
    echo "uncompressed copy: FAILED"
    e2e_rc=1
  fi
  local f32=(--crop 128,128,128 --batch 128 --dtype float32 --batches 10 --warmup 2)
  # Cold start first, with an empty kernel cache: shipped images (else NVRTC) before the first batch.
  DAMACY_KERNEL_CACHE_DIR="$(mktemp -d)" e2e_bench cold-gpu 60 "$store/sharded_zstd" --executor "$gpu" --crop 64,64,64 --batch 8 --batches 2 --warmup 0
  e2e_bench zstd16-f32-gpu-w1 40 "${zstd16[@]}" "${f32[@]}" --executor "$gpu" --workers 1
  e2e_bench zstd16-f32-gpu-w2 40 "${zstd16[@]}" "${f32[@]}" --executor "$gpu" --workers 2
  e2e_bench zstd16-f32-gpu-w4 40 "${zstd16[@]}" "${f32[@]}" --executor "$gpu" --workers 4
  e2e_bench zstd16-f32-cpu 40 "${zstd16[@]}" "${f32[@]}" --executor cpu
  if [ -e "$store/raw/zarr.json" ]; then
    e2e_bench raw16-f32-gpu-w4 40 "${raw16[@]}" "${f32[@]}" --executor "$gpu" --workers 4
    e2e_bench raw16-f32-cpu 40 "${raw16[@]}" "${f32[@]}" --executor cpu
  fi
  e2e_bench zstd1-f32-gpu-engine 40 "$store/sharded_zstd" "${f32[@]}" --executor "$gpu" --compare-engine
  e2e_bench lz416-f32-gpu-w4 40 "${lz4_16[@]}" "${f32[@]}" --executor "$gpu" --workers 4
  e2e_bench lz416-f32-cpu 40 "${lz4_16[@]}" "${f32[@]}" --executor cpu
  e2e_bench zstd16-64-u16-gpu-w4 30 "${zstd16[@]}" --crop 64,64,64 --batch 32 --batches 20 --executor "$gpu" --workers 4
  e2e_bench zstd16-64-u16-cpu 30 "${zstd16[@]}" --crop 64,64,64 --batch 32 --batches 20 --executor cpu
  e2e_bench lz41-f32-gpu-engine 60 "$store/blosc_lz4" "${f32[@]}" --executor "$gpu" --compare-engine
  python3 benches/gpu/e2e_report.py "$e" "$out/gpu-e2e-$(date -u +%Y-%m-%d).md" || e2e_rc=1
  # One file for every bench's JSON and stderr (the device tool brings back a limited number).
  tar czf "$out/e2e.tar.gz" -C "$out" e2e && rm -rf "$e"
  return $e2e_rc
}

# One `damacy bench --json` of the e2e step: name, time limit, arguments. Once the step has run
# DAMACY_E2E_BUDGET seconds (default 240) the remaining benches are skipped, so that a slow route
# cannot eat the steps after it.
e2e_bench() {
  local name=$1 t=$2 e="$out/e2e" left=$((${DAMACY_E2E_BUDGET:-240} - (SECONDS - e2e_t0)))
  shift 2
  if [ $left -le 5 ]; then
    echo "  $name: skipped (the e2e step's ${DAMACY_E2E_BUDGET:-240} s are spent)" | tee "$e/$name.err"
    e2e_rc=1
    return
  fi
  [ "$t" -le "$left" ] || t=$left
  echo "\$ damacy bench $*" | sed -E "s#[^ ]*/demo.zarr/##g" | cut -c 1-400
  timeout --kill-after=5 "$t" "$bin/damacy" bench --json "$@" >"$e/$name.json" 2>"$e/$name.err"
  local r=$?
  if [ $r -ne 0 ]; then
    echo "  $name: exit $r$([ $r -eq 124 ] && echo ', timed out'): $(tail -n 2 "$e/$name.err")"
    e2e_rc=1
    return
  fi
  python3 benches/gpu/e2e_report.py --line "$e/$name.json"
}

find_ncu() {
  local c
  for c in "$(command -v ncu 2>/dev/null)" /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute*/ncu; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

# Nsight Compute on the decoders the performance model misses or leans on (issue 30): zstd on
# the label image and the smooth field, LZ4 on the label image, 64 KiB chunks, one 32 MiB batch:
# where a warp's cycles go (stall reasons per issued instruction), its instruction and branch
# counts and its occupancy, for the model's per-instruction-class latencies. Two passes: the
# sections (which every ncu has), then the stall-reason metrics by name (a name this ncu lacks
# fails that pass only). -> ncu-profile.txt, ncu-stalls.txt
profile() {
  [ -x "$bin/kernel_bench" ] || { echo "no kernel_bench binary (bundle step failed?)"; return 1; }
  local n
  n="$(find_ncu)" || { echo "no ncu (Nsight Compute) found"; return 1; }
  local args=(--device cuda --batch-mib 32 --sizes 64K --zstd-levels 3 --reps 1 --warmup 0)
  local kern='regex:dmc_(zstd|lz4)_decode'
  timeout --kill-after=10 240 "$n" --kernel-name "$kern" --launch-count 8 --section SpeedOfLight \
    --section Occupancy --section SchedulerStats --section WarpStateStats --section InstructionStats \
    --section SourceCounters --section LaunchStats --print-details all \
    "$bin/kernel_bench" "${args[@]}" --cases zstd,lz4 --datasets u16-labels,u16-smooth \
    > "$out/ncu-profile.txt" 2>&1 || { tail -n 20 "$out/ncu-profile.txt"; return 1; }
  local stalls=() r
  for r in short_scoreboard long_scoreboard wait branch_resolving math_pipe_throttle mio_throttle \
    lg_throttle no_instruction dispatch_stall not_selected selected barrier membar sleeping drain misc; do
    stalls+=("smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio")
  done
  local IFS=,
  timeout --kill-after=10 240 "$n" --kernel-name "$kern" --launch-count 8 --metrics "${stalls[*]}" \
    "$bin/kernel_bench" "${args[@]}" --cases zstd,lz4 --datasets u16-labels,u16-smooth \
    > "$out/ncu-stalls.txt" 2>&1 || { tail -n 20 "$out/ncu-stalls.txt"; return 1; }
}

# The performance model's constants, measured on this GPU (CuPy only; seconds).
calibrate() {
  PYTHONUNBUFFERED=1 timeout --kill-after=10 90 python3 benches/gpu/model_cal.py "$out/model_cal.json"
}

python_gpu() {
  ls "$bundle"/pywheels/damacy-*.whl >/dev/null 2>&1 || { echo "no damacy wheel in $bundle/pywheels"; return 1; }
  python3 -m pip install -q --no-index --no-deps --target /tmp/site-py "$bundle"/pywheels/*.whl || return 1
  PYTHONPATH="/tmp/site-py${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout --kill-after=10 "${DAMACY_PY_GPU_TIMEOUT:-240}" python3 benches/gpu/python_gpu.py --out "$out" --reps "${DAMACY_PY_GPU_REPS:-5}"
}

main() {
  echo "damacy GPU run: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), output in $out"
  export DAMACY_KERNEL_CACHE_DIR=/tmp/damacy-kernel-cache
  step bundle unpack_bundle
  step nvrtc find_nvrtc
  step gpu gpu_info
  local name
  for name in "${steps[@]}"; do
    case "$name" in
      tests) step tests gpu_tests ;;
      inspect) step inspect inspect_digests ;;
      sanitize) step sanitize sanitize ;;
      e2e) step e2e e2e ;;
      calibrate) step calibrate calibrate ;;
      profile) step profile profile ;;
      compare) step compare compare ;;
      waves) step waves waves ;;
      python) step python python_gpu ;;
      cold) step cold cold_start ;;
      *) echo "unknown step $name (cold, tests, inspect, sanitize, e2e, calibrate, profile, compare, waves, python)"; failed+=("$name") ;;
    esac
  done
  echo
  # Under the device tool ($OUT set) only a few files come back: everything but the markdown
  # reports, the logs and tarballs goes into one tarball.
  if [ -n "${OUT:-}" ]; then
    local extra
    extra="$(cd "$out" && ls -A | grep -vE '\.(md|log|tar\.gz)$' || true)"
    if [ -n "$extra" ]; then
      # shellcheck disable=SC2086 # one name per line, no spaces (names this script chose)
      (cd "$out" && tar czf gpu-run-files.tar.gz $extra && rm -rf $extra) && echo "packed into gpu-run-files.tar.gz:" $extra
    fi
  fi
  ls -l "$out"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "=== FAILED steps: ${failed[*]} ($SECONDS s in all)"
    return 1
  fi
  echo "=== all steps ok ($SECONDS s in all)"
}

# Steps 4-11 by name (`bash benches/gpu/run.sh python`); all of them when none is named.
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(cold tests inspect sanitize e2e calibrate compare python)
main 2>&1 | tee "$out/gpu-run${1:+-$(IFS=-; echo "$*")}.log"
exit "${PIPESTATUS[0]}"
