#!/usr/bin/env bash
# Builds HERE (a machine with the Rust toolchain and a package registry) everything that
# benches/gpu/run.sh needs on a GPU machine that has neither, into .gpu-bundle/ at the repo root:
#
#   bin/kernel_bench.xz   the kernel benchmark (crates/damacy-kernels/examples/kernel_bench.rs)
#   bin/gpu-tests.xz      the GPU integration tests of damacy-kernels (tests/gpu.rs)
#   bin/damacy.xz         the damacy CLI (inspect --digest --executor gpu)
#   wheels/*.whl          nvCOMP's Python API and library (CUDA 13 build, Python 3.12, x86-64;
#                         left out with DAMACY_BUNDLE_NVCOMP=0)
#   pywheels/*.whl        the damacy wheel (release, feature cuda, abi3; left out with
#                         DAMACY_BUNDLE_PYWHEEL=0) and zarr-python with
#                         its pure or cp312 dependencies, for benches/gpu/python_gpu.py
#   BUILD_INFO.json       commit, date, toolchain, the build's repo root, sizes
#
# Every binary and the wheel carry the kernel images compiled at build time (cubins for sm_80
# and sm_90, compute_90 PTX; crates/damacy-kernels/src/images.rs), so no kernel is compiled on
# the GPU machine: NVRTC is installed here first (make nvrtc) and the build fails loudly when an
# artifact lacks them.
#
# Binaries are release builds (feature cuda), stripped and xz-compressed; the bundle must stay
# under 60 MiB so that it and the working tree travel together (64 MiB). Then, on the GPU
# machine, from the repo root with .gpu-bundle carried: bash benches/gpu/run.sh
#
#   bash benches/gpu/bundle.sh        # honours CARGO_TARGET_DIR; NVCOMP_VERSION, NVCOMP_CUDA
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
# DAMACY_GPU_BUNDLE: another folder name at the repo root (e.g. .gpu-bundle-py), so that two
# bundles of different contents can be carried by two calls in a row.
bundle_name="${DAMACY_GPU_BUNDLE:-.gpu-bundle}"
bundle="$root/$bundle_name"
target="${CARGO_TARGET_DIR:-$root/target}"
nvcomp_version="${NVCOMP_VERSION:-6.0.0.12}"
nvcomp_cuda="${NVCOMP_CUDA:-cu13}" # the GPU machines run driver 580 (CUDA 13.0)
max_bundle_mib=60
max_travel_mib=64

if ! git check-ignore -q "$bundle_name/"; then
  echo "bundle.sh: $bundle_name/ is not ignored by git; add /$bundle_name/ to .gitignore" >&2
  exit 1
fi
for tool in cargo strip xz python3; do
  command -v "$tool" >/dev/null || { echo "bundle.sh: $tool not found" >&2; exit 1; }
done

echo "== NVRTC for the shipped kernel images (make nvrtc)"
make -s nvrtc
# Every kernel file for each shipped target (sm_80 sm_90 compute_90: SHIPPED_TARGETS in
# crates/damacy-kernels/src/source.rs): the embedded cubins (ELF CUDA objects, counted by the
# architecture in their e_flags) and the PTX entry points are counted in the binary itself.
n_kernels=$(ls kernels/*.cu | wc -l)
carries_images() { # file label
  if ! python3 - "$1" "$n_kernels" <<'EOF'
import re, struct, sys
data, n = open(sys.argv[1], "rb").read(), int(sys.argv[2])
cubins = {}
for m in re.finditer(rb"\x7fELF\x02\x01\x01", data):
    at = m.start()
    if data[at + 18:at + 20] != b"\xbe\x00":  # e_machine EM_CUDA
        continue
    flags = struct.unpack_from("<I", data, at + 0x30)[0]
    sm = (flags >> 8) & 0xFF if data[at + 8] >= 8 else flags & 0xFF
    cubins[sm] = cubins.get(sm, 0) + 1
ptx = set(re.findall(rb"\.visible \.entry (dmc_\w+)\(", data))
note = re.search(rb"damacy (shipped kernel images: NVRTC [0-9.]+, [0-9]+ images \([a-z0-9_ ]+\)|ships no kernel images in this build: [ -~]{0,120})", data)
print(f"sm_80 cubins {cubins.get(80, 0)}, sm_90 cubins {cubins.get(90, 0)}, compute_90 PTX entries {len(ptx)} of {n} kernels"
      + (f" ({note.group().decode()})" if note else ""))
sys.exit(0 if (cubins.get(80, 0), cubins.get(90, 0), len(ptx)) == (n, n, n) else 1)
EOF
  then
    echo "bundle.sh: $2 ($1) does not carry the shipped kernel images: its kernels would be compiled by NVRTC on the GPU machine (see the cargo warning of damacy-kernels' build)" >&2
    exit 1
  fi
}

echo "== release builds (feature cuda) into $target"
cargo build --release -p damacy-kernels --example kernel_bench
cargo build --release -p damacy-cli
gpu_tests="$(
  cargo test --release -p damacy-kernels --test gpu --no-run --message-format=json |
    python3 -c '
import json, sys
exe = ""
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target") or {}
    if m.get("reason") == "compiler-artifact" and t.get("name") == "gpu" and "test" in t.get("kind", []) and m.get("executable"):
        exe = m["executable"]
print(exe)'
)"
if [ -z "$gpu_tests" ] || [ ! -x "$gpu_tests" ]; then
  echo "bundle.sh: cargo did not report the gpu test executable" >&2
  exit 1
fi

echo "== shipped kernel images"
carries_images "$target/release/examples/kernel_bench" kernel_bench
carries_images "$gpu_tests" gpu-tests
carries_images "$target/release/damacy" damacy

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/wheels"
pack() { # source name
  strip -o "$bundle/bin/$2" "$1"
  xz -9 -T0 "$bundle/bin/$2"
  echo "   $2: $(stat -c %s "$1") bytes built, $(stat -c %s "$bundle/bin/$2.xz") packed"
}
echo "== packing binaries"
pack "$target/release/examples/kernel_bench" kernel_bench
pack "$gpu_tests" gpu-tests
pack "$target/release/damacy" damacy
# the GPU performance model's predictions of kernel_bench's cases for this source (issue 30), if
# crates/damacy-kernels/scripts/gpu_model.sh --report made them: run.sh joins them with the run
if ls "$root"/target/cost/gpu_model_*.json >/dev/null 2>&1; then
  mkdir -p "$bundle/gpu_model"
  cp "$root"/target/cost/gpu_model_[abcd].json "$bundle/gpu_model/" 2>/dev/null || true
fi

# DAMACY_BUNDLE_NVCOMP=0 leaves nvCOMP out (34 MiB): a bundle for the steps other than compare,
# small enough to travel with a larger working tree.
if [ "${DAMACY_BUNDLE_NVCOMP:-1}" != 0 ]; then
  echo "== nvCOMP wheels ($nvcomp_cuda $nvcomp_version, Python 3.12, manylinux x86-64)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$bundle/wheels" "nvidia-nvcomp-$nvcomp_cuda==$nvcomp_version" "nvidia-libnvcomp-$nvcomp_cuda==$nvcomp_version"
  ls -l "$bundle/wheels"
else
  echo "== nvCOMP wheels left out (DAMACY_BUNDLE_NVCOMP=0): the compare step cannot run from this bundle"
fi

echo "== the damacy wheel (release, feature cuda) and zarr-python for Python 3.12"
mkdir -p "$bundle/pywheels"
# DAMACY_BUNDLE_PYWHEEL=0 leaves the damacy wheel out (11 MiB; only the python step needs it), so
# that nvCOMP and a larger working tree travel together; zarr-python stays (the e2e step uses it).
if [ "${DAMACY_BUNDLE_PYWHEEL:-1}" != 0 ]; then
  maturin="${MATURIN:-$root/.venv/bin/maturin}"
  [ -x "$maturin" ] || maturin="$(command -v maturin)" || { echo "bundle.sh: maturin not found (make venv)" >&2; exit 1; }
  "$maturin" build --quiet --release --strip -m crates/damacy-py/Cargo.toml --out "$bundle/pywheels"
  wheel_so="$(mktemp)"
  python3 - "$bundle/pywheels" "$wheel_so" <<'EOF'
import pathlib, sys, zipfile
wheel = sorted(pathlib.Path(sys.argv[1]).glob("damacy-*.whl"))[-1]
with zipfile.ZipFile(wheel) as z:
    so = [n for n in z.namelist() if n.endswith(".so")]
    pathlib.Path(sys.argv[2]).write_bytes(z.read(so[0]))
EOF
  carries_images "$wheel_so" "the damacy wheel's extension"
  rm -f "$wheel_so"
else
  echo "   the damacy wheel left out (DAMACY_BUNDLE_PYWHEEL=0): the python step cannot run from this bundle"
fi
zarr_pin="$(grep -E '^zarr==' requirements-dev.txt | head -n 1)"
# numpy comes with the GPU machine's cupy and torch; everything else zarr needs travels.
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$bundle/pywheels" "${zarr_pin:-zarr}" numcodecs donfig pyyaml google-crc32c typing-extensions packaging \
  pytest pluggy iniconfig pygments
ls -l "$bundle/pywheels"

commit="$(git rev-parse --short HEAD)"
dirty=false
git diff --quiet HEAD || dirty=true
BUNDLE="$bundle" ROOT="$root" COMMIT="$commit" DIRTY="$dirty" NVCOMP="$nvcomp_cuda==$nvcomp_version" \
  RUSTC="$(rustc -V)" python3 - <<'EOF'
import json, os, pathlib, platform
from datetime import datetime, timezone
b = pathlib.Path(os.environ["BUNDLE"])
info = {
    "commit": os.environ["COMMIT"],
    "dirty": os.environ["DIRTY"] == "true",
    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    "rustc": os.environ["RUSTC"],
    "build_host": platform.node(),
    # The test binary reads fixtures from <build_root>/fixtures (CARGO_MANIFEST_DIR at build time).
    "build_root": os.environ["ROOT"],
    "nvcomp": os.environ["NVCOMP"],
    "files": {str(p.relative_to(b)): p.stat().st_size for p in sorted(b.rglob("*")) if p.is_file()},
}
(b / "BUILD_INFO.json").write_text(json.dumps(info, indent=1))
EOF

bundle_bytes="$(du -sb "$bundle" | cut -f1)"
# What travels with a device run besides carried folders: tracked and untracked-not-ignored files.
tree_bytes="$(git ls-files -z --cached --others --exclude-standard | python3 -c '
import os, sys
print(sum(os.path.getsize(p) for p in sys.stdin.read().split("\0") if p and os.path.isfile(p)))')"
mib() { python3 -c "print(f'{$1 / 2**20:.1f}')"; }
echo "== $bundle_name: $(mib "$bundle_bytes") MiB (limit $max_bundle_mib); with the working tree ($(mib "$tree_bytes") MiB): $(mib $((bundle_bytes + tree_bytes))) MiB (limit $max_travel_mib)"
if [ "$bundle_bytes" -ge $((max_bundle_mib << 20)) ] || [ $((bundle_bytes + tree_bytes)) -ge $((max_travel_mib << 20)) ]; then
  echo "bundle.sh: the bundle is too large to travel" >&2
  exit 1
fi
echo "ok: on the GPU machine, from the repo root with $bundle_name carried: DAMACY_GPU_BUNDLE=$bundle_name bash benches/gpu/run.sh"
