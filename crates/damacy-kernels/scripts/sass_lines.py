#!/usr/bin/env python3
"""Names the source lines of SASS offsets that compute-sanitizer reports (`dmc_zstd_decode+0xc500`).

    python3 crates/damacy-kernels/scripts/sass_lines.py zstd dmc_zstd_decode+0xc500 0xd880 [--arch sm_90]

Compiles kernels/<kernel>.cu as the crate does (common.cuh inlined in place of its #include,
`--gpu-architecture=<arch> --std=c++17`) plus `-lineinfo`, with the NVRTC of DAMACY_NVRTC_DIR or
the workspace's .nvrtc/ (`make nvrtc`), disassembles the cubin with nvdisasm and prints, for each
offset, the instruction and its inlining stack as kernels/ file:line. The SASS must be the build's:
use the same NVRTC version and architecture as the run that reported the offsets (the GPU run's
README names them). The script checks that -lineinfo left the instructions unchanged.
nvdisasm: $NVDISASM, else .nvrtc/tools (`pip install --target .nvrtc/tools nvidia-cuda-nvdisasm`).
Issue 28 mapped racecheck's zstd hazards this way (NVRTC 13.0.88, sm_90).
"""

import argparse
import ctypes
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))


def nvrtc_dir():
    d = os.environ.get("DAMACY_NVRTC_DIR")
    if d:
        return d
    found = sorted(glob.glob(os.path.join(ROOT, ".nvrtc/*/nvidia/cu13/lib")))
    if not found:
        sys.exit("libnvrtc not found: run `make nvrtc` or set DAMACY_NVRTC_DIR")
    return found[-1]


def nvdisasm():
    exe = os.environ.get("NVDISASM") or os.path.join(ROOT, ".nvrtc/tools/nvidia/cu13/bin/nvdisasm")
    if not os.access(exe, os.X_OK):
        sys.exit(f"nvdisasm not found at {exe}: pip install --target .nvrtc/tools nvidia-cuda-nvdisasm, or set NVDISASM")
    return exe


def compile_cubin(lib, source, name, opts):
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None) != 0:
        sys.exit("nvrtcCreateProgram failed")
    copts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), copts)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.exit(f"NVRTC failed ({rc}):\n{log.value.decode(errors='replace')}")
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, cubin)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw


INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LINE = re.compile(r'//## File "[^"]*", line (\d+)(?: inlined at "[^"]*", line (\d+))?')


def disassemble(exe, cubin, with_lines):
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        args = [exe, "-c"] + (["-gi"] if with_lines else []) + [f.name]
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", help="kernels/<kernel>.cu, e.g. zstd")
    ap.add_argument("offsets", nargs="+", help="0xc500 or dmc_zstd_decode+0xc500")
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args()

    libdir = nvrtc_dir()
    libs = sorted(glob.glob(os.path.join(libdir, "libnvrtc.so.*")))
    libs = [p for p in libs if re.search(r"libnvrtc\.so\.\d+$", p)]
    if not libs:
        sys.exit(f"no libnvrtc.so.N in {libdir}")
    # libnvrtc loads libnvrtc-builtins from its own folder by name: preload it too.
    for b in sorted(glob.glob(os.path.join(libdir, "libnvrtc-builtins.so.*"))):
        if ".alt." not in b:
            ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(libs[-1])
    ver = (ctypes.c_int(), ctypes.c_int())
    lib.nvrtcVersion(ctypes.byref(ver[0]), ctypes.byref(ver[1]))

    path = os.path.join(ROOT, "kernels", a.kernel + ".cu")
    raw = open(path).read()
    common = open(os.path.join(ROOT, "kernels/common.cuh")).read()
    include = '#include "common.cuh"'
    at = raw[: raw.index(include)].count("\n") + 1  # the #include's line in the kernel file
    source = raw.replace(include, common)
    added = common.count("\n")  # lines the inlining adds after the #include's line

    def where(n):
        if n < at:
            return f"kernels/{a.kernel}.cu:{n}"
        if n <= at + added:
            return f"kernels/common.cuh:{n - at + 1}"
        return f"kernels/{a.kernel}.cu:{n - added}"

    opts = [f"--gpu-architecture={a.arch}", "--std=c++17"]
    exe = nvdisasm()
    plain = disassemble(exe, compile_cubin(lib, source, a.kernel + ".cu", opts), False)
    lined = disassemble(exe, compile_cubin(lib, source, a.kernel + ".cu", opts + ["-lineinfo"]), True)

    def insns(text):
        return [(m.group(1), m.group(2)) for m in map(INSN.match, text.splitlines()) if m]

    same = insns(plain) == insns(lined)
    print(f"NVRTC {ver[0].value}.{ver[1].value} ({libs[-1]}), {a.arch}; -lineinfo left the SASS "
          + ("unchanged" if same else "CHANGED: the lines below may not match the reported build"))

    # offset -> (instruction, inlining stack of the line block just before it)
    table = {}
    stack = []
    fresh = False
    for line in lined.splitlines():
        m = LINE.search(line)
        if m:
            if not fresh:
                stack = []
                fresh = True
            stack.append(int(m.group(1)))
            continue
        m = INSN.match(line)
        if m:
            fresh = False
            table[int(m.group(1), 16)] = (m.group(2), list(stack))
    for o in a.offsets:
        off = int(o.split("+")[-1], 16)
        if off not in table:
            print(f"{o}: no instruction at {off:#x}")
            continue
        insn, st = table[off]
        chain = " <- ".join(where(n) for n in st) if st else "(no line info)"
        print(f"{o}: {insn}\n    {chain}")


if __name__ == "__main__":
    main()
