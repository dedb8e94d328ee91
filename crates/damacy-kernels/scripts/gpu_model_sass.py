#!/usr/bin/env python3
"""SASS instructions per host basic block, for the GPU performance model (issue 30).

Compiles every kernel of kernels/ with NVRTC for sm_90 (the options the crate uses, plus
-lineinfo and ptxas -v), counts the SASS instructions nvdisasm attributes to each source line,
finds every basic block of the emulated kernels in BINARY (objdump -d -l: a block starts at
each call of __sanitizer_cov_trace_pc) and the host instructions of each source line in each
block (objdump's line of each instruction, the innermost of its inlining chain; copies of a line:
addr2line -i), and joins the two by source line:

    weight(block) = sum over the lines with host instructions in the block of
                    SASS of the line per GPU copy x (the line's host instructions in the block /
                                                      the line's host instructions per host copy)

that is, a line's SASS is spread over the host blocks that hold its host instructions, in
proportion to them; a line with no host instruction of its own (folded into another line's by
the host compiler) falls back to its bucket: the nearest line at or above it in its file where a
host block starts, shared by the blocks that start there. The exposed shuffles among a line's
SASS (`ShuffleChains`: a SHFL that lengthens the longest chain of dependent shuffles of its
straight-line stretch of SASS; shuffles beside it overlap) are spread the same way.

Each line's issue cycles are joined the same way: the stall count of each of its SASS
instructions (`control_words`: the 4-bit field of the instruction's control word, ptxas' static
schedule: the cycles the warp waits before its next issue, fixed-latency dependencies included),
the exposed shuffles' left out (the model charges them the shuffle latency), plus the cycles an
instruction waits on a scoreboard for an XU result (`Scoreboard`: bit counts, conversions,
MUFU). A lone warp's path through straight-line code is their sum: dependent instructions wait
the pipe's latency, independent ones issue a cycle or two apart.

An earlier form charged every line to such a bucket; the weight of a bucket moved with the
host compiler's block layout (removing a compare from a zstd loop moved the instructions charged
to the FSE entries' line from ~1.4 M to ~7.1 M in a launch), where a line's host instructions
stay with the line wherever the compiler puts them.

Each line's SASS leaves out the out-of-line copies nvcc makes of every collective for a
diverged warp (reached by `BRA.DIV`, never taken by the converged warps of these kernels: they
had doubled the weight of shuffle-heavy lines).

The SASS comes from a build with every loop that has no unroll pragma of its own compiled
rolled (`roll_loops`: nvcc unrolls run-time-trip loops the host keeps rolled), so that a line's
SASS is one iteration's; registers, shared memory and per-kernel SASS totals come from the build
the crate launches.

The weight file (one "offset weight shuffles cycles" line per host block with a weight, the offset
being the return address of the block's coverage call in BINARY, which is what the emulator's
coverage hook sees) is what DAMACY_GPU_MODEL_SASS names; its "#res" lines give each kernel's
registers and static shared memory from ptxas, for the model's occupancy.

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
import typing

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


class LineCounts(typing.NamedTuple):
    """What `count_lines` finds per source line (file, line) of one cubin."""

    sass: collections.Counter  # SASS instructions
    copies: dict  # per line: its copies (kernel, call sites innermost first) -> SASS instructions
    per_fn: dict  # SASS instructions per kernel
    shfl: collections.Counter  # exposed shuffles (`ShuffleChains`)
    cycles: collections.Counter  # issue cycles: stall counts (the exposed shuffles' left out), XU waits
    copies_cycles: dict  # per line: its copies -> issue cycles


def sass_lines(nvdisasm: str, cubin: bytes, lines: dict) -> LineCounts:
    """`count_lines` of one cubin's disassembly (nvdisasm -gi -c -hex: line info with the
    inlining chains, and each instruction's encoding for its control word)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        text = subprocess.run([nvdisasm, "-gi", "-c", "-hex", path], check=True, capture_output=True,
                              text=True).stdout
    finally:
        os.unlink(path)
    return count_lines(text, lines)


# an instruction line of nvdisasm -c (its offset, then the instruction)
INSN = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+(\S.*)")
# with -hex, the line after an instruction holds the upper 64 bits of its 128-bit encoding
INSN_HI = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+\S[^\n]*\n\s*/\* (0x[0-9a-f]+) \*/", re.M)


def split_insn(text: str) -> tuple[str, str, str]:
    """An instruction's text (`[@P0 ]OP.MOD a, b, ... ;`) as its guard ("" when none), its
    operation and its operands' text."""
    text = text.split(";")[0].strip()
    guard = ""
    if text.startswith("@"):
        guard, _, text = text.partition(" ")
    op, _, rest = text.partition(" ")
    return guard, op, rest


def ends_stretch(guard: str, op: str) -> bool:
    """Whether the instruction ends a straight-line stretch of SASS: an unguarded branch, exit or
    return (what follows is reached by a jump, with unknown registers in flight)."""
    return not guard and re.match(r"(BRA|EXIT|RET|BRX|JMP)(\.|$)", op) is not None


class Control(typing.NamedTuple):
    """An instruction's control information: the fields that sm_70 and later GPUs carry in bits
    105-125 of each 128-bit instruction (41-61 of its upper 64 bits), as Jia et al. decoded them
    ("Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018)."""

    stall: int  # cycles the scheduler waits before it issues the warp's next instruction
    wbar: int  # scoreboard the instruction's result releases when ready (7: none, a fixed latency)
    rbar: int  # scoreboard released once its source registers are read (7: none)
    wait: int  # mask of the scoreboards it waits for before it issues


def control_words(text: str) -> list[Control]:
    """The control information of every instruction of an `nvdisasm -c -hex` disassembly, in
    order. Fixed-latency dependencies are in the stall counts (ptxas' static schedule);
    variable-latency results (loads, shuffles, the XU pipe's operations) are waited for through
    the scoreboards (`Scoreboard`)."""
    out = []
    for hi in INSN_HI.findall(text):
        v = int(hi, 16)
        out.append(Control((v >> 41) & 15, (v >> 46) & 7, (v >> 49) & 7, (v >> 52) & 63))
    return out


# The XU pipe's variable-latency operations (bit counts, conversions, the special-function unit:
# the runtime-divisor division's I2F, MUFU.RCP, F2I) and the cycles from one's issue until a
# consumer can issue: the H200's `lat_popc_step` (benches/gpu/model_cal.py: x = popc(x) + x, 23.19
# cycles a step, runs a61ddac and fd22e7f) less the stall count of the step's dependent IADD3 in that
# benchmark's sm_90 SASS (6); measured for POPC, assumed for the other operations of the pipe.
XU_OPS = re.compile(r"(POPC|FLO|BREV|I2F|F2I|F2F|I2I|FRND|MUFU)(\.|$)")
XU_LATENCY = 23.19 - 6


class Scoreboard:
    """A lone warp's waits for variable-latency results in its straight-line stretch of SASS:
    `step` returns the cycles an instruction waits, beyond the stall counts since the last one
    issued, for the scoreboards its control word names. A result of the XU pipe (`XU_OPS`) is
    ready `XU_LATENCY` cycles after its producer issued; the other scoreboards (global and
    shared loads, shuffles, read barriers) are ready at once here, their latencies being the
    model's per request (the cost recorder's loads, the exposed shuffles). The stretch ends at
    an unconditional branch, exit or return, and at a label (what follows a jump target has
    unknown results in flight)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.t = 0.0  # the next instruction's earliest issue (the last issue + its stall count)
        self.ready: dict[int, float] = {}

    def step(self, text: str, c: Control) -> float:
        """Account the instruction TEXT with control information C; the cycles it waits."""
        t = self.t
        for b in range(6):
            if c.wait >> b & 1:
                t = max(t, self.ready.pop(b, t))
        waited = t - self.t
        guard, op, _ = split_insn(text)
        if c.wbar != 7:
            # a scoreboard several results share is ready when the last of them is
            lat = XU_LATENCY if XU_OPS.match(op) else 0.0
            self.ready[c.wbar] = max(self.ready.get(c.wbar, t), t + lat)
        if c.rbar != 7:
            self.ready[c.rbar] = max(self.ready.get(c.rbar, t), t)
        self.t = t + c.stall
        if ends_stretch(guard, op):
            self.reset()
        return waited


def count_lines(text: str, lines: dict) -> LineCounts:
    """`sass_lines` of a disassembly (`nvdisasm -gi -c -hex` output); the shuffles counted per
    line are the exposed ones (`ShuffleChains`); the copies of a line map each copy (kernel, call
    sites innermost first) to its SASS instructions (and, in `copies_cycles`, its issue
    cycles)."""
    per_line: collections.Counter = collections.Counter()
    per_line_shfl: collections.Counter = collections.Counter()
    per_line_cyc: collections.Counter = collections.Counter()
    copies: dict = collections.defaultdict(collections.Counter)
    copies_cyc: dict = collections.defaultdict(collections.Counter)
    per_fn: dict[str, int] = collections.Counter()
    ctrl = control_words(text)
    n_insns = sum(1 for line in text.splitlines() if INSN.match(line))
    if len(ctrl) != n_insns:
        raise ValueError(f"{n_insns} instructions but {len(ctrl)} control words: not nvdisasm -hex output")
    k = 0  # the next instruction's index in `ctrl`
    board = Scoreboard()
    # Before an instruction whose location changes, nvdisasm -gi prints the inlining chain, one
    # "//##" line per level, innermost first: the instruction belongs to the first one's line;
    # the rest (the call sites it is inlined at) name its copy.
    where, fn, chain, key = None, None, [], None
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
            board.reset()
            continue
        m = re.match(r"^(\.L_x_\d+):", line)
        if m:
            board.reset()
            if m.group(1) in div_targets:
                cold = True
            continue
        m = INSN.match(line)
        if m:
            c = ctrl[k]
            k += 1
            if chain:
                where, key = chain[0], (fn, tuple(chain[1:]))
                chain = []
            per_fn[fn] += 1
            if cold:
                if re.match(r"BRA\s", m.group(1)):  # unguarded: the branch back
                    cold = False
                continue
            exposed = chains.step(m.group(1))
            waited = board.step(m.group(1), c)
            if where is not None:
                per_line[where] += 1
                copies[where][key] += 1
                cyc = waited + (0 if exposed else c.stall)
                per_line_cyc[where] += cyc
                copies_cyc[where][key] += cyc
                if exposed:
                    per_line_shfl[where] += 1
    return LineCounts(per_line, copies, per_fn, per_line_shfl, per_line_cyc, copies_cyc)


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
        guard, op, rest = split_insn(text)
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
        if ends_stretch(guard, op):
            self.reset()
        return exposed


def parse_host(text: str, known: set) -> tuple[list[tuple[int, str, int]], list[tuple[int, tuple[str, int], int]]]:
    """The host's basic blocks and the kernel-source instructions in each, from `objdump -d -l`
    output of the binary: (return address, file, line) of every __sanitizer_cov_trace_pc call
    (a block starts there: the return address is what the emulator's coverage hook sees; file
    and line those of the call, or "" and 0 outside the kernel sources), and (address, (file,
    line), block) of every instruction objdump puts on a line of a KNOWN file (the innermost
    line of its inlining chain), the block being the return address of the last coverage call
    before it in its function (a function's instructions before its first call: that call's
    block). The instrumentation's own calls (coverage, ThreadSanitizer hooks) and padding are
    not counted."""
    blocks: list[tuple[int, str, int]] = []
    insns: list[tuple[int, tuple[str, int], int]] = []
    where: tuple[str, int] | None = None
    block = None
    pending: list[tuple[int, tuple[str, int]]] = []
    start_next, call_at = False, None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <.*>:$", line)
        if m:
            block, pending, start_next, where = None, [], False, None
            continue
        m = re.match(r"^(/\S*|[^\s:]+\.\w+):(\d+)", line)
        if m:
            f = os.path.basename(m.group(1))
            where = (f, int(m.group(2))) if f in known else None
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S.*)$", line)
        if not m:
            continue
        addr, ins = int(m.group(1), 16), m.group(2)
        if start_next:
            block, start_next = addr, False
            blocks.append((addr, call_at[0] if call_at else "", call_at[1] if call_at else 0))
            insns.extend((a, w, block) for a, w in pending)
            pending = []
        if "<__sanitizer_cov_trace_pc" in ins:
            start_next, call_at = True, where
            continue
        if "<__tsan_" in ins or ins.startswith(("int3", "nop", "data16", "cs nopw", "xchg   %ax,%ax")):
            continue
        if where is None:
            continue
        if block is None:
            pending.append((addr, where))
        else:
            insns.append((addr, where, block))
    return blocks, insns


def inline_copies(binary: str, addrs: list[int]) -> list[tuple[tuple[str, int], tuple]]:
    """For each address, its innermost (file, line) and its copy: the outermost function and the
    call sites it is inlined at (addr2line -i -f), distinct per inlined copy of a line."""
    out = subprocess.run(["addr2line", "-a", "-i", "-f", "-e", binary], input="\n".join(hex(a) for a in addrs),
                         check=True, capture_output=True, text=True).stdout.splitlines()
    # groups: "0xaddr", then (function, file:line) pairs, innermost first
    groups, cur = [], None
    for line in out:
        if re.match(r"^0x[0-9a-f]+$", line):
            cur = []
            groups.append(cur)
        elif cur is not None:
            cur.append(line)

    def loc(text: str):
        path, _, ln = text.rpartition(":")
        ln = ln.split()[0] if ln else "0"
        return (os.path.basename(path), int(ln)) if ln.isdigit() else (os.path.basename(path), 0)

    res = []
    for g in groups:
        if len(g) < 2:
            res.append((("", 0), ()))
            continue
        chain = tuple(loc(g[i]) for i in range(3, len(g), 2))
        res.append((loc(g[1]), (g[-2], chain)))
    return res


def host_blocks(binary: str):
    """`parse_host` of BINARY's disassembly, with the host copies of each (file, line): the
    distinct copies (`inline_copies`) of its instructions and of its blocks' coverage calls;
    and the copy of each instruction (by address)."""
    known = set(FILES) | {"common.cuh"}
    text = subprocess.run(["objdump", "-d", "-l", "--no-show-raw-insn", binary], check=True, capture_output=True,
                          text=True).stdout
    blocks, insns = parse_host(text, known)
    copies: dict = collections.defaultdict(set)
    addrs = [a for a, _, _ in insns]
    # a coverage call's copy: the call is the instruction before its return address; addr2line
    # of the return address - 1 names the call's line
    sites = [b for b in blocks if b[1]]
    found = inline_copies(binary, addrs + [ret - 1 for ret, _, _ in sites]) if addrs or sites else []
    insn_copy = {a: key for a, (w, key) in zip(addrs, found) if w[0] in known and w[1] != 0}
    for (w, key) in found:
        if w[0] in known and w[1] != 0:
            copies[w].add(key)
    return blocks, insns, copies, insn_copy


def block_weights(blocks, insns, host_copies, sass, shfl, gpu_copies, insn_copy=None) -> tuple[dict, dict, int]:
    """SASS instructions and exposed shuffles per execution of each host block (by return
    address), and the SASS instructions placed on no block.

    A source line's SASS, per GPU copy of the line, is spread over the host blocks that hold the
    line's host instructions, in proportion to them, per host copy: a block holding k of the
    copy's n host instructions of the line is charged k / n of the copy's SASS per execution.
    A host copy and a GPU copy are the same copy when their kernels and call-site chains are
    (INSN_COPY: each host instruction's copy; GPU_COPIES: each line's copies with their SASS);
    a host copy with no such GPU copy is charged the mean SASS of the GPU copies left (so
    are all copies when the copies are not known: a set, not a count, per line). A line with no
    host instruction (the host compiler folded it into another line's) falls back to its
    bucket: the nearest line at or above it, in its file, where a host block starts (its SASS
    shared by the blocks that start there, per host copy)."""
    w: dict = collections.Counter()
    wsh: dict = collections.Counter()
    insn_copy = insn_copy or {}
    per_line_copy_blocks: dict = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for addr, where, blk in insns:
        per_line_copy_blocks[where][insn_copy.get(addr)][blk] += 1
    sites = [(ret, f, ln) for ret, f, ln in blocks if f]
    at_line: dict = collections.defaultdict(list)
    for ret, f, ln in sites:
        at_line[(f, ln)].append(ret)
    starts: dict = collections.defaultdict(list)
    for (f, ln) in at_line:
        starts[f].append(ln)
    for f in starts:
        starts[f].sort()
    unplaced = 0
    for (f, ln), n in sass.items():
        gc = gpu_copies.get((f, ln), ())
        counted = isinstance(gc, collections.Counter)
        g = max(1, len(gc))
        sh = shfl.get((f, ln), 0)
        by_copy = per_line_copy_blocks.get((f, ln))
        if by_copy:
            matched = [c for c in by_copy if counted and c is not None and c in gc]
            for c in matched:
                hb = by_copy[c]
                k_all = sum(hb.values())
                for blk, k in hb.items():
                    w[blk] += gc[c] * k / k_all
                    wsh[blk] += sh * gc[c] / n * k / k_all
            rest = collections.Counter()
            for c, hb in by_copy.items():
                if c not in matched:
                    rest.update(hb)
            n_rest = n - sum(gc[c] for c in matched)
            if rest and n_rest > 0:
                g_rest = max(1, g - len(matched))
                s_copy, sh_copy = n_rest / g_rest, sh * n_rest / n / g_rest
                h_rest = max(1, len(host_copies.get((f, ln), ())) - len(matched))
                per_copy = sum(rest.values()) / h_rest
                for blk, k in rest.items():
                    w[blk] += s_copy * k / per_copy
                    wsh[blk] += sh_copy * k / per_copy
            elif n_rest > 0:
                # GPU copies with no host copy: shared by the host's copies, as their mean
                hb = collections.Counter()
                for c in matched:
                    hb.update(by_copy[c])
                g_rest = max(1, g - len(matched))
                per_copy = sum(hb.values()) / max(1, len(matched))
                for blk, k in hb.items():
                    w[blk] += n_rest / g_rest * k / per_copy
                    wsh[blk] += sh * n_rest / n / g_rest * k / per_copy
            continue
        s_copy, sh_copy = n / g, sh / g
        st = starts.get(f)
        k = bisect.bisect_right(st, ln) - 1 if st else -1
        if k < 0:
            unplaced += n
            continue
        first = (f, st[k])
        rets = at_line[first]
        per_copy = len(rets) / max(1, len(host_copies.get(first, ())))
        for ret in rets:
            w[ret] += s_copy / per_copy
            wsh[ret] += sh_copy / per_copy
    return w, wsh, unplaced


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
        per_fn = sass_lines(a.nvdisasm, cubin, lines).per_fn
        cubin, _, lines = nvrtc_compile(lib, name, rolled=True)
        return ptxas_resources(log), per_fn, sass_lines(a.nvdisasm, cubin, lines)

    # The files compile side by side (NVRTC is thread-safe; ctypes lets go of the GIL in its
    # calls), the two largest first, beside the host binary's scan; merged in FILES order.
    workers = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        host = pool.submit(host_blocks, a.binary)
        order = sorted(FILES, key=lambda n: n not in ("zstd.cu", "inflate.cu"))
        futures = {name: pool.submit(one_file, name) for name in order}
        results = [futures[name].result() for name in FILES]
        blocks, insns, host_copies, insn_copy = host.result()
    sass: collections.Counter = collections.Counter()
    shfl: collections.Counter = collections.Counter()
    cycles: collections.Counter = collections.Counter()
    gpu_copies: dict = collections.defaultdict(collections.Counter)
    gpu_copies_cyc: dict = collections.defaultdict(collections.Counter)
    resources: dict[str, tuple[int, int]] = {}
    totals: dict[str, int] = {}
    for res, per_fn, c in results:
        resources.update(res)
        totals.update(per_fn)
        sass.update(c.sass)
        shfl.update(c.shfl)
        cycles.update(c.cycles)
        for k, v in c.copies.items():
            gpu_copies[k].update(v)
        for k, v in c.copies_cycles.items():
            gpu_copies_cyc[k].update(v)

    if not any(f for _, f, _ in blocks):
        raise SystemExit(f"no __sanitizer_cov_trace_pc call of a kernel source in {a.binary}")
    weight, weight_shfl, unplaced = block_weights(blocks, insns, host_copies, sass, shfl, gpu_copies, insn_copy)
    # the issue cycles spread the same way (a Counter update keeps no line of zero cycles; such
    # a line's blocks get none, which is what they have)
    weight_cyc, _, _ = block_weights(blocks, insns, host_copies, +cycles, {}, gpu_copies_cyc, insn_copy)
    with open(a.out, "w") as out:
        out.write("# SASS instructions, the exposed shuffles among them and their issue cycles (stall counts, "
                  "the exposed shuffles' left out), per host basic block "
                  "(crates/damacy-kernels/scripts/gpu_model_sass.py)\n")
        out.write(f"# binary {os.path.abspath(a.binary)}\n")
        for k, (regs, smem) in sorted(resources.items()):
            out.write(f"#res {k} {regs} {smem} {totals.get(k, 0)}\n")
        for ret, _, _ in blocks:
            if weight.get(ret, 0) > 0:
                out.write(f"{ret:x} {weight[ret]:.4f} {weight_shfl.get(ret, 0):.4f} {weight_cyc.get(ret, 0):.4f}\n")
    if a.summary:
        by_file_sass = collections.Counter()
        for (f, _), n in sass.items():
            by_file_sass[f] += n
        by_file_sites = collections.Counter(f for _, f, _ in blocks if f)
        for f in sorted(set(by_file_sass) | set(by_file_sites)):
            print(f"{f:12} SASS {by_file_sass[f]:6}  host blocks {by_file_sites[f]:6}", file=sys.stderr)
        print(f"SASS instructions on lines of no host block's file: {unplaced}", file=sys.stderr)
        for k, (regs, smem) in sorted(resources.items()):
            print(f"{k:24} {regs:3} registers {smem:6} B smem {totals.get(k, 0):6} SASS", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
