#!/usr/bin/env python3
"""SASS instructions per host basic block, for the GPU performance model (issue 30).

Compiles every kernel of kernels/ with NVRTC for sm_90 (the options the crate uses, plus
-lineinfo and ptxas -v), counts the SASS instructions nvdisasm attributes to each source line,
finds every basic block of the emulated kernels in BINARY (objdump: the calls of
__sanitizer_cov_trace_pc; addr2line: their source lines), and joins the two by source line:

    weight(call site) = SASS instructions of the line's bucket / host basic blocks of that bucket

and likewise the exposed shuffles among them (`ShuffleChains`: a SHFL that lengthens the longest
chain of dependent shuffles of its straight-line stretch of SASS; shuffles beside it overlap).

Each line's SASS leaves out the out-of-line copies nvcc makes of every collective for a
diverged warp (reached by `BRA.DIV`, never taken by the converged warps of these kernels: they
had doubled the weight of shuffle-heavy lines).

The SASS comes from a build with every loop that has no unroll pragma of its own compiled
rolled (`roll_loops`: nvcc unrolls run-time-trip loops the host keeps rolled), so that a line's
SASS is one iteration's; registers, shared memory and per-kernel SASS totals come from the build
the crate launches.

A bucket is a line that starts a host basic block, with the lines after it up to the next such
line of the same file (straight-line code that the host compiled into the same block). The
weight file (one "offset weight" line per call site, the offset being the return address of
the call in BINARY, which is what the emulator's coverage hook sees) is what
DAMACY_GPU_MODEL_SASS names; its "#res" lines give each kernel's registers and static shared
memory from ptxas, for the model's occupancy.

usage: gpu_model_sass.py --binary BIN --out FILE [--nvrtc-dir DIR] [--nvdisasm PATH] [--summary]
"""
from __future__ import annotations

import argparse
import bisect
import collections
import concurrent.futures
import ctypes
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KERNELS = os.path.join(ROOT, "kernels")
# the kernel files the crate compiles (src/kernel.rs)
FILES = ["lz4.cu", "blosclz.cu", "memcpy.cu", "shuffle.cu", "crc32c.cu", "assemble.cu", "zstd.cu", "inflate.cu"]
INCLUDE = '#include "common.cuh"'


LOOP = re.compile(r"^(\s*)(for\s*\(|while\s*\(|do\s*\{|do\s*$)")


def roll_loops(src: str) -> str:
    """SRC with `#pragma unroll 1` (as `_Pragma`, on the loop's own line: line numbers unchanged)
    before every loop that carries no unroll pragma of its own.

    nvcc unrolls loops of a run-time trip count (by 4, with a remainder loop), which the host
    compiler keeps rolled: joined by source line, every host run of such a loop's body would be
    charged all of its SASS copies. Compiled rolled, a line's SASS is one iteration's, as
    on the host. Loops marked DMC_UNROLL (constant trips, unrolled on both sides) keep their
    pragma. Loops inside macros (lines ending in a backslash) are left alone."""
    out, prev = [], ""
    for line in src.split("\n"):
        m = LOOP.match(line)
        if m and not line.rstrip().endswith("\\") and "DMC_UNROLL" not in prev and "pragma" not in prev \
                and not prev.rstrip().endswith("\\"):
            line = f'{m.group(1)}_Pragma("unroll 1") {line[len(m.group(1)):]}'
        out.append(line)
        if line.strip():
            prev = line
    return "\n".join(out)


def inline_common(raw: str, common: str, name: str) -> tuple[str, dict[int, tuple[str, int]]]:
    """RAW with its `#include "common.cuh"` line replaced by COMMON (as src/kernel.rs does), and
    a map from the combined source's line numbers to (file, line)."""
    src = raw.replace(INCLUDE, common)
    lines = {}
    n_common = common.count("\n")
    out = 1
    for i, text in enumerate(raw.split("\n"), start=1):
        if INCLUDE in text:
            for k in range(n_common + 1):
                lines[out + k] = ("common.cuh", k + 1)
            # the include line became common.cuh's n_common + 1 lines (its last one: the rest of
            # the include line, empty when common.cuh ends with a newline)
            out += n_common + 1
            continue
        lines[out] = (name, i)
        out += 1
    return src, lines


def nvrtc_compile(lib, name: str, rolled: bool) -> tuple[bytes, str, dict[str, tuple[str, int]]]:
    """The sm_90 cubin and ptxas log of kernels/NAME (loops rolled when ROLLED, see
    `roll_loops`), and a map from the combined source's line numbers (common.cuh inlined, as
    src/kernel.rs does) to (file, line)."""
    raw = open(os.path.join(KERNELS, name)).read()
    common = open(os.path.join(KERNELS, "common.cuh")).read()
    src, lines = inline_common(raw, common, name)
    if rolled:
        src = roll_loops(src)
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None) != 0:
        raise SystemExit(f"nvrtcCreateProgram failed for {name}")
    opts = [b"--gpu-architecture=sm_90", b"--std=c++17", b"-lineinfo", b"--ptxas-options=-v"]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, buf)
    log = buf.value.decode(errors="replace")
    if rc != 0:
        raise SystemExit(f"NVRTC failed on {name}:\n{log}")
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return buf.raw, log, lines


def ptxas_resources(log: str) -> dict[str, tuple[int, int]]:
    """kernel -> (registers, static shared memory bytes) from ptxas' verbose log."""
    res, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            smem = re.search(r"(\d+) bytes smem", line)
            res[cur] = (int(m.group(1)), int(smem.group(1)) if smem else 0)
            cur = None
    return res


def sass_lines(nvdisasm: str, cubin: bytes, lines: dict) -> tuple[collections.Counter, dict, dict[str, int],
                                                                  collections.Counter]:
    """SASS instructions per (file, line) of one cubin, the inlined copies of each (file, line)
    (distinct "inlined at" call sites: nvdisasm -gi), the SASS instructions per kernel, and the
    exposed shuffles (`SHFL`, see `ShuffleChains`) per (file, line)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        text = subprocess.run([nvdisasm, "-gi", "-c", path], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return count_lines(text, lines)


def count_lines(text: str, lines: dict) -> tuple[collections.Counter, dict, dict[str, int], collections.Counter]:
    """`sass_lines` of a disassembly (`nvdisasm -gi -c` output); the shuffles counted per line
    are the exposed ones (`ShuffleChains`)."""
    per_line: collections.Counter = collections.Counter()
    per_line_shfl: collections.Counter = collections.Counter()
    copies: dict = collections.defaultdict(set)
    per_fn: dict[str, int] = collections.Counter()
    # Before an instruction whose location changes, nvdisasm -gi prints the inlining chain, one
    # "//##" line per level, innermost first: the instruction belongs to the first one's line;
    # the rest (the call sites it is inlined at) name its copy.
    where, fn, chain = None, None, []
    chains = ShuffleChains()

    # A collective (shuffle, vote with a mask) is compiled as `BRA.DIV` to an out-of-line copy
    # for a diverged warp, then the fast instruction; the copy (from the BRA.DIV's target to its
    # branch back) runs only when the warp is diverged at the collective, which the kernels
    # never are: it is not counted (it doubled the weight of shuffle-heavy lines).
    div_targets = set(re.findall(r"BRA\.DIV\s+[^,]+,\s*`\(\s*(\.L_x_\d+)\s*\)", text))
    cold = False
    for line in text.splitlines():
        m = re.match(r'\s*//## File "[^"]*", line (\d+)', line)
        if m:
            chain.append(lines.get(int(m.group(1))))
            continue
        m = re.match(r"^\.text\.(\w+):", line)
        if m:
            fn, where, chain, cold = m.group(1), None, [], False
            chains.reset()
            continue
        m = re.match(r"^(\.L_x_\d+):", line)
        if m and m.group(1) in div_targets:
            cold = True
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(\S.*)", line)
        if m:
            if chain:
                where = chain[0]
                if where is not None and not cold:
                    copies[where].add((fn, tuple(chain[1:])))
                chain = []
            per_fn[fn] += 1
            if cold:
                if re.match(r"BRA\s", m.group(1)):  # unguarded: the branch back
                    cold = False
                continue
            exposed = chains.step(m.group(1))
            if where is not None:
                per_line[where] += 1
                if exposed:
                    per_line_shfl[where] += 1
    return per_line, copies, per_fn, per_line_shfl


# SASS operations that write no register: every register operand is a source
NO_DEST = re.compile(r"(ST|STS|STG|STL|RED|REDUX\.SUM\.NONE|BRA|BRX|JMP|CALL|RET|EXIT|BSSY|BSYNC|WARPSYNC|BAR|"
                     r"MEMBAR|DEPBAR|NOP|YIELD|ERRBAR|CCTL|FENCE|BPT|KILL|NANOSLEEP|ACQBULK|UCGABAR)(\.|$)")
REG = re.compile(r"\b(U?R\d+|U?P\d)(\.64)?\b")


def _regs(operand: str, wide: bool) -> list[str]:
    """The registers an operand names (a pair for `R2.64`, or for every register of a 64-bit
    operation's destination)."""
    out = []
    for m in REG.finditer(operand):
        r = m.group(1)
        out.append(r)
        if (m.group(2) or wide) and r[-1].isdigit() and "P" not in r:
            base = r.rstrip("0123456789")
            out.append(f"{base}{int(r[len(base):]) + 1}")
    return out


class ShuffleChains:
    """Which shuffles a lone warp waits out: a `SHFL` is *exposed* when it lengthens the longest
    chain of shuffles (through register dependencies) of its straight-line stretch of SASS: a
    shuffle whose operands depend on no shuffle still to come, beside another such shuffle,
    overlaps it (the MIO pipe takes one per few cycles; the consumer waits one latency for
    both), so only a chain's length is latency. The stretch ends at an unguarded branch, exit or
    return (what follows is reached by a jump, with unknown registers in flight)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.depth: dict[str, int] = {}
        self.longest = 0

    def step(self, text: str) -> bool:
        """Account the instruction TEXT (`[@P0 ]OP.MOD a, b, ... ;`); True when it is an
        exposed shuffle."""
        text = text.split(";")[0].strip()
        guard = ""
        if text.startswith("@"):
            guard, _, text = text.partition(" ")
        op, _, rest = text.partition(" ")
        ops = [o.strip() for o in rest.split(",")] if rest.strip() else []
        wide = ".64" in op or ".WIDE" in op or ".128" in op
        if NO_DEST.match(op):
            dests, srcs = [], ops
        elif op.startswith("SHFL"):
            dests, srcs = ops[1:2], ops[2:]
        else:
            dests, srcs = ops[:1], ops[1:]
        d = max([self.depth.get(r, 0) for o in srcs + [guard.lstrip("@!")] for r in _regs(o, False)], default=0)
        shfl = op.startswith("SHFL")
        if shfl:
            d += 1
        for o in dests:
            for r in _regs(o, wide):
                if r not in ("RZ", "PT"):
                    self.depth[r] = d
        exposed = shfl and d > self.longest
        self.longest = max(self.longest, d)
        if not guard and re.match(r"(BRA|EXIT|RET|BRX|JMP)(\.|$)", op):
            self.reset()
        return exposed


def host_sites(binary: str) -> tuple[list[tuple[int, str, int]], dict]:
    """(return address, file, line) of every __sanitizer_cov_trace_pc call in a kernel source,
    and the host copies of each (file, line): distinct (function, inlined-at location) pairs
    (addr2line -i -f)."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    calls = []
    for i, line in enumerate(dis):
        if "call" in line and "<__sanitizer_cov_trace_pc" in line:
            m = re.match(r"\s*([0-9a-f]+):", line)
            # the return address: the next instruction's address
            for nxt in dis[i + 1:i + 4]:
                n = re.match(r"\s*([0-9a-f]+):", nxt)
                if n:
                    calls.append((int(m.group(1), 16), int(n.group(1), 16)))
                    break
    if not calls:
        return [], {}
    out = subprocess.run(["addr2line", "-a", "-i", "-f", "-e", binary], input="\n".join(hex(c) for c, _ in calls),
                         check=True, capture_output=True, text=True).stdout.splitlines()
    # groups: "0xaddr", then (function, file:line) pairs, innermost first
    groups, cur = [], None
    for line in out:
        if re.match(r"^0x[0-9a-f]+$", line):
            cur = []
            groups.append(cur)
        elif cur is not None:
            cur.append(line)
    sites, copies = [], collections.defaultdict(set)
    known = set(FILES) | {"common.cuh"}

    def loc(text: str):
        path, _, ln = text.rpartition(":")
        ln = ln.split()[0] if ln else "0"
        return (os.path.basename(path), int(ln)) if ln.isdigit() else (os.path.basename(path), 0)

    for (_, ret), g in zip(calls, groups):
        if len(g) < 2:
            continue
        where = loc(g[1])
        if where[0] not in known or where[1] == 0:
            continue
        chain = tuple(loc(g[i]) for i in range(3, len(g), 2))  # the call sites it is inlined at
        outer = g[-2]  # the outermost function: the copy's home
        sites.append((ret, where[0], where[1]))
        copies[where].add((outer, chain))
    return sites, copies


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nvrtc-dir", default=os.environ.get("DAMACY_NVRTC_DIR", ""))
    ap.add_argument("--nvdisasm", default=os.environ.get("NVDISASM", "nvdisasm"))
    ap.add_argument("--summary", action="store_true", help="print SASS and host blocks per kernel file")
    a = ap.parse_args()
    libdir = a.nvrtc_dir
    if not libdir:
        cands = sorted(d for d in (os.path.join(ROOT, ".nvrtc", v, "nvidia", "cu13", "lib")
                                   for v in os.listdir(os.path.join(ROOT, ".nvrtc"))) if os.path.isdir(d))
        libdir = cands[-1] if cands else ""
    # libnvrtc opens its builtins library by name: preload it from the same folder
    for f in sorted(os.listdir(libdir)):
        if f.startswith("libnvrtc-builtins.so"):
            ctypes.CDLL(os.path.join(libdir, f), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.join(libdir, next(f for f in sorted(os.listdir(libdir)) if f.startswith("libnvrtc.so"))))

    def one_file(name: str):
        # registers, shared memory and SASS per kernel: the build the crate launches
        cubin, log, lines = nvrtc_compile(lib, name, rolled=False)
        _, _, per_fn, _ = sass_lines(a.nvdisasm, cubin, lines)
        cubin, _, lines = nvrtc_compile(lib, name, rolled=True)
        per_line, copies, _, per_line_shfl = sass_lines(a.nvdisasm, cubin, lines)
        return ptxas_resources(log), per_fn, per_line, copies, per_line_shfl

    # The files compile side by side (NVRTC is thread-safe; ctypes lets go of the GIL in its
    # calls), the two largest first, beside the host binary's scan; merged in FILES order.
    workers = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        host = pool.submit(host_sites, a.binary)
        order = sorted(FILES, key=lambda n: n not in ("zstd.cu", "inflate.cu"))
        futures = {name: pool.submit(one_file, name) for name in order}
        results = [futures[name].result() for name in FILES]
        sites, host_copies = host.result()
    sass: collections.Counter = collections.Counter()
    shfl: collections.Counter = collections.Counter()
    gpu_copies: dict = collections.defaultdict(set)
    resources: dict[str, tuple[int, int]] = {}
    totals: dict[str, int] = {}
    for res, per_fn, per_line, copies, per_line_shfl in results:
        resources.update(res)
        totals.update(per_fn)
        sass.update(per_line)
        shfl.update(per_line_shfl)
        for k, v in copies.items():
            gpu_copies[k] |= v

    if not sites:
        raise SystemExit(f"no __sanitizer_cov_trace_pc call of a kernel source in {a.binary}")
    # Both compilers copy a line once per inlined call (and the host may keep one out-of-line
    # copy for several kernels): compare one copy with one copy. SASS per GPU copy of a line,
    # summed over its bucket; host basic blocks per host copy of the bucket's first line.
    per_line_sites = collections.Counter((f, ln) for _, f, ln in sites)
    starts: dict[str, list[int]] = collections.defaultdict(list)
    for (f, ln) in per_line_sites:
        starts[f].append(ln)
    for f in starts:
        starts[f].sort()
    bucket_sass: collections.Counter = collections.Counter()
    bucket_shfl: collections.Counter = collections.Counter()
    unplaced = 0
    for (f, ln), n in sass.items():
        s = starts.get(f)
        if not s:
            unplaced += n
            continue
        k = bisect.bisect_right(s, ln) - 1
        n_copies = max(1, len(gpu_copies.get((f, ln), ())))
        bucket_sass[(f, s[max(k, 0)])] += n / n_copies
        bucket_shfl[(f, s[max(k, 0)])] += shfl[(f, ln)] / n_copies
    with open(a.out, "w") as out:
        out.write("# SASS instructions, and the exposed shuffles among them, per host basic block "
                  "(crates/damacy-kernels/scripts/gpu_model_sass.py)\n")
        out.write(f"# binary {os.path.abspath(a.binary)}\n")
        for k, (regs, smem) in sorted(resources.items()):
            out.write(f"#res {k} {regs} {smem} {totals.get(k, 0)}\n")
        for ret, f, ln in sites:
            per_copy = per_line_sites[(f, ln)] / max(1, len(host_copies.get((f, ln), ())))
            w = bucket_sass[(f, ln)] / per_copy
            out.write(f"{ret:x} {w:.4f} {bucket_shfl[(f, ln)] / per_copy:.4f}\n")
    if a.summary:
        by_file_sass = collections.Counter()
        for (f, _), n in sass.items():
            by_file_sass[f] += n
        by_file_sites = collections.Counter(f for _, f, _ in sites)
        for f in sorted(set(by_file_sass) | set(by_file_sites)):
            print(f"{f:12} SASS {by_file_sass[f]:6}  host blocks {by_file_sites[f]:6}", file=sys.stderr)
        print(f"SASS instructions on lines of no host block's file: {unplaced}", file=sys.stderr)
        for k, (regs, smem) in sorted(resources.items()):
            print(f"{k:24} {regs:3} registers {smem:6} B smem {totals.get(k, 0):6} SASS", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
