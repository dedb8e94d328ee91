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
#   6. compare  benches/gpu/compare.py: kernel_bench + nvCOMP LZ4 + copy bandwidth
#                -> gpu-kernels-<date>.md, kernel_bench.json, nvcomp_decode.json
#   7. python   the damacy wheel and zarr from the bundle; benches/gpu/python_gpu.py: Pipeline
#               batches into torch and cupy, zarr enable_gpu() reads through
#               damacy.GpuCodecPipeline, random-crop timing -> python-gpu-<date>.md
# Output folder: $OUT if set, else benches/results/ (gpu-run.log, gpu-tests.log,
# inspect-gpu.log and the compare.py files). Steps 4-7 can be named to run only those (steps
# 1-3 always run): under the device tool's 10-minute limit per command, run
#   bash benches/gpu/run.sh tests inspect compare      # well inside 9 minutes
#   bash benches/gpu/run.sh python                     # about 5 minutes
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/benches/results}"
mkdir -p "$out"
bundle="$root/.gpu-bundle"
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
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$bundle"/wheels/*.whl || return 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
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
  timeout --kill-after=10 120 "$bin/gpu-tests" --test-threads=1 --nocapture 2>&1 | tee "$out/gpu-tests.log"
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

compare() {
  [ -x "$bin/kernel_bench" ] || { echo "no kernel_bench binary (bundle step failed?)"; return 1; }
  PYTHONUNBUFFERED=1 timeout --kill-after=10 400 python3 benches/gpu/compare.py --device cuda --bin "$bin/kernel_bench" --out "$out" --timeout 240 --nvcomp-timeout 140
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

python_gpu() {
  ls "$bundle"/pywheels/damacy-*.whl >/dev/null 2>&1 || { echo "no damacy wheel in $bundle/pywheels"; return 1; }
  python3 -m pip install -q --no-index --no-deps --target /tmp/site-py "$bundle"/pywheels/*.whl || return 1
  PYTHONPATH="/tmp/site-py${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout --kill-after=10 240 python3 benches/gpu/python_gpu.py --out "$out"
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
      compare) step compare compare ;;
      python) step python python_gpu ;;
      *) echo "unknown step $name (tests, inspect, compare, python)"; failed+=("$name") ;;
    esac
  done
  echo
  ls -l "$out"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "=== FAILED steps: ${failed[*]} ($SECONDS s in all)"
    return 1
  fi
  echo "=== all steps ok ($SECONDS s in all)"
}

# Steps 4-7 by name (`bash benches/gpu/run.sh python`); all of them when none is named.
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests inspect compare python)
main 2>&1 | tee "$out/gpu-run${1:+-$(IFS=-; echo "$*")}.log"
exit "${PIPESTATUS[0]}"
