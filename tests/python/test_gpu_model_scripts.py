"""The GPU performance model's host-side scripts (crates/damacy-kernels/scripts): the SASS line
counts (without the collectives' divergent copies), the rolled-loop rewrite, the common.cuh line
map and the report's log parser. No GPU, NVRTC or nvdisasm needed: they are pure text functions."""

import json
import os
import sys

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "damacy-kernels", "scripts")
sys.path.insert(0, os.path.abspath(SCRIPTS))

import gpu_model_report  # noqa: E402
import gpu_model_sass  # noqa: E402


def hexed(text, stalls=None):
    """TEXT (nvdisasm -gi -c lines) as nvdisasm -hex prints it: each instruction line followed by
    the line with its encoding's upper 64 bits, whose control word holds the stall count (bits
    41-44): STALLS[i] for the i-th instruction, 4 when not given."""
    out, i = [], 0
    for line in text.split("\n"):
        out.append(line)
        if gpu_model_sass.INSN.match(line):
            st = stalls[i] if stalls else 4
            i += 1
            out.append(f"                                  /* 0x{(0x7e0 << 40) | (st << 41):016x} */")
    return "\n".join(out)


SASS = """
//--------------------- .text.dmc_k      --------------------------
.text.dmc_k:
\t//## File "/x/k.cu", line 3
        /*0000*/                   LOP3.LUT R82, R7, 0x1f, RZ, 0xc0, !PT ;
        /*0010*/                   BRA.DIV UR6, `(.L_x_8) ;
\t//## File "/x/k.cu", line 4
        /*0020*/                   SHFL.IDX PT, R74, R5, R82, 0x1f ;
.L_x_2:
\t//## File "/x/k.cu", line 5
        /*0030*/                   IADD3 R4, R74, 0x1, RZ ;
        /*0040*/                   EXIT ;
.L_x_8:
\t//## File "/x/k.cu", line 4
        /*0050*/                   WARPSYNC.COLLECTIVE R50, `(.L_x_9) ;
        /*0060*/                   SHFL.IDX P2, R74, R5, R82, R51 ;
        /*0070*/                   ENDCOLLECTIVE ;
.L_x_9:
        /*0080*/                   BRA `(.L_x_2) ;
.L_x_10:
\t//## File "/x/k.cu", line 6
        /*0090*/                   BRA `(.L_x_10) ;
"""


def test_a_collectives_divergent_copy_is_not_counted():
    lines = {3: ("k.cu", 3), 4: ("k.cu", 4), 5: ("k.cu", 5), 6: ("k.cu", 6)}
    c = gpu_model_sass.count_lines(hexed(SASS), lines)
    # the BRA.DIV target's copy (4 instructions up to its branch back) is left out
    assert c.sass == {("k.cu", 3): 2, ("k.cu", 4): 1, ("k.cu", 5): 2, ("k.cu", 6): 1}
    assert c.shfl == {("k.cu", 4): 1}
    assert c.per_fn == {"dmc_k": 10}
    # one copy (not inlined), with its SASS: the counted instruction, not the divergent copy's
    assert c.copies[("k.cu", 4)] == {("dmc_k", ()): 1}
    # the issue cycles: 4 an instruction, none for the exposed shuffle
    assert c.cycles == {("k.cu", 3): 8, ("k.cu", 4): 0, ("k.cu", 5): 8, ("k.cu", 6): 4}
    # a disassembly without the encodings is refused, not counted without cycles
    try:
        gpu_model_sass.count_lines(SASS, lines)
    except ValueError as e:
        assert "control words" in str(e)
    else:
        raise AssertionError("count_lines took a disassembly without -hex")


TWO_COPIES = """
.text.dmc_k:
\t//## File "/x/k.cu", line 3 inlined at "/x/k.cu", line 8
\t//## File "/x/k.cu", line 8
        /*0000*/                   IADD3 R4, R4, 0x1, RZ ;
        /*0010*/                   IADD3 R4, R4, 0x1, RZ ;
        /*0020*/                   IADD3 R4, R4, 0x1, RZ ;
\t//## File "/x/k.cu", line 3 inlined at "/x/k.cu", line 9
\t//## File "/x/k.cu", line 9
        /*0030*/                   IADD3 R4, R4, 0x1, RZ ;
        /*0040*/                   EXIT ;
"""


def test_each_inlined_copy_of_a_line_has_its_own_sass_count():
    lines = {3: ("k.cu", 3), 8: ("k.cu", 8), 9: ("k.cu", 9)}
    c = gpu_model_sass.count_lines(hexed(TWO_COPIES, [1, 2, 13, 5, 6]), lines)
    assert c.sass == {("k.cu", 3): 5}
    assert c.copies[("k.cu", 3)] == {("dmc_k", (("k.cu", 8),)): 3, ("dmc_k", (("k.cu", 9),)): 2}
    # each copy's issue cycles are its own instructions' stall counts
    assert c.cycles == {("k.cu", 3): 27}
    assert c.copies_cycles[("k.cu", 3)] == {("dmc_k", (("k.cu", 8),)): 16, ("dmc_k", (("k.cu", 9),)): 11}


CHAINS = """
.text.dmc_k:
\t//## File "/x/k.cu", line 3
        /*0000*/                   SHFL.IDX PT, R10, R1, R2, 0x1f ;
        /*0010*/                   SHFL.IDX PT, R11, R3, R2, 0x1f ;
        /*0020*/                   SHFL.IDX PT, R12, R4, R2, 0x1f ;
\t//## File "/x/k.cu", line 4
        /*0030*/                   IADD3 R13, R10, 0x1, RZ ;
        /*0040*/                   SHFL.IDX PT, R14, R5, R13, 0x1f ;
        /*0050*/                   SHFL.IDX PT, R15, R11, R2, 0x1f ;
        /*0060*/                   IMAD.WIDE R20, R14, 0x4, R6 ;
        /*0070*/                   SHFL.IDX PT, R16, R21, R2, 0x1f ;
\t//## File "/x/k.cu", line 5
        /*0080*/                   BRA `(.L_x_1) ;
.L_x_1:
        /*0090*/                   SHFL.IDX PT, R17, R16, R2, 0x1f ;
        /*00a0*/                   EXIT ;
"""


# four instructions of dmc_zstd_decode's entry as nvdisasm 13.0 -c -hex prints them for sm_90
ENTRY = """
        /*0060*/                   SHF.R.U32.HI R111, RZ, 0x5, R113 ;            /* 0x00000005ff6f7819 */
                                                                                  /* 0x002fca0000011671 */
        /*0070*/                   VIADD R3, R111, UR4 ;                          /* 0x000000046f037c36 */
                                                                                  /* 0x000fe20008000000 */
        /*00a0*/                   ISETP.GE.U32.AND P1, PT, R5, UR4, PT ;         /* 0x0000000405007c0c */
                                                                                  /* 0x000fda000bf26070 */
        /*00b0*/               @P1 EXIT ;                                         /* 0x000000000000194d */
                                                                                  /* 0x000fea0003800000 */
"""


def test_the_control_word_gives_each_instructions_stall_count_and_scoreboards():
    # the shift waits for scoreboard 1 (the S2R before it: wait mask 0x2) then holds its
    # dependent add 5 cycles; the add's successor is independent (1); the compare holds the
    # predicated exit 13 cycles (a predicate read by a branch); the exit's own count is 5
    ctrl = gpu_model_sass.control_words(ENTRY)
    assert [c.stall for c in ctrl] == [5, 1, 13, 5]
    assert [c.wait for c in ctrl] == [0x2, 0, 0, 0]
    assert all(c.wbar == 7 and c.rbar == 7 for c in ctrl)


def ctrl_hi(stall, wbar=7, rbar=7, wait=0):
    return f"0x{(wait << 52) | (rbar << 49) | (wbar << 46) | (stall << 41):016x}"


def test_a_consumer_waits_for_an_xu_result_but_not_for_a_loads():
    # POPC sets scoreboard 0; two independent instructions (2 + 2 cycles) pass before the add
    # waits for it: it waits XU_LATENCY - 2 - 2 - 2 (the POPC's own stall) cycles. A load's
    # scoreboard (1) is ready at once (the model charges loads per request). A label ends the
    # stretch: a wait after it finds nothing in flight.
    text = "\n".join([
        ".text.dmc_k:",
        '\t//## File "/x/k.cu", line 3',
        "        /*0000*/                   POPC R6, R11 ;",
        f"        /* {ctrl_hi(2, wbar=0)} */",
        "        /*0010*/                   LDG.E R7, desc[UR4][R2.64] ;",
        f"        /* {ctrl_hi(2, wbar=1)} */",
        "        /*0020*/                   IADD3 R8, R9, 0x1, RZ ;",
        f"        /* {ctrl_hi(2)} */",
        '\t//## File "/x/k.cu", line 4',
        "        /*0030*/                   IADD3 R6, R6, R11, RZ ;",
        f"        /* {ctrl_hi(4, wait=0x1)} */",
        "        /*0040*/                   IADD3 R7, R7, 0x1, RZ ;",
        f"        /* {ctrl_hi(4, wait=0x2)} */",
        "        /*0050*/                   POPC R6, R6 ;",
        f"        /* {ctrl_hi(1, wbar=0)} */",
        ".L_x_1:",
        '\t//## File "/x/k.cu", line 5',
        "        /*0060*/                   IADD3 R6, R6, R11, RZ ;",
        f"        /* {ctrl_hi(4, wait=0x1)} */",
        "        /*0070*/                   EXIT ;",
        f"        /* {ctrl_hi(5)} */",
    ])
    lines = {3: ("k.cu", 3), 4: ("k.cu", 4), 5: ("k.cu", 5)}
    c = gpu_model_sass.count_lines(text, lines)
    wait = gpu_model_sass.XU_LATENCY - 6
    assert c.cycles[("k.cu", 3)] == 6
    assert abs(c.cycles[("k.cu", 4)] - (wait + 4 + 4 + 1)) < 1e-9
    assert c.cycles[("k.cu", 5)] == 9


def test_only_the_shuffles_that_lengthen_a_chain_are_exposed():
    lines = {3: ("k.cu", 3), 4: ("k.cu", 4), 5: ("k.cu", 5)}
    shfl = gpu_model_sass.count_lines(hexed(CHAINS), lines).shfl
    # line 3: three independent shuffles, one latency; line 4: R14 depends on R10 (depth 2),
    # R15 on R11 (depth 2, beside R14), R16 on R14 through the wide IMAD's high half (depth 3);
    # after the unconditional branch the chain starts again (depth 1: exposed)
    assert shfl == {("k.cu", 3): 1, ("k.cu", 4): 2, ("k.cu", 5): 1}


def test_loops_without_a_pragma_are_rolled_on_their_own_line():
    src = "\n".join([
        "void f(int n) {",
        "    for (int i = 0; i < n; i++) g(i);",
        "    DMC_UNROLL",
        "    for (int j = 0; j < 4; j++) g(j);",
        "    while (n > 0) {",
        "        do {",
        "            n--;",
        "        } while (n & 1);",
        "    }",
        "#define M(x) for (int k = 0; k < x; k++) \\",
        "    g(k)",
        "}",
    ])
    out = gpu_model_sass.roll_loops(src).split("\n")
    assert len(out) == len(src.split("\n"))
    assert out[1] == '    _Pragma("unroll 1") for (int i = 0; i < n; i++) g(i);'
    assert out[3] == "    for (int j = 0; j < 4; j++) g(j);"  # DMC_UNROLL keeps its own
    assert out[4].startswith('    _Pragma("unroll 1") while')
    assert out[5].startswith('        _Pragma("unroll 1") do')
    assert out[7] == "        } while (n & 1);"  # a do-while's tail is not a loop start
    assert out[9].startswith("#define M(x) for")  # macros are left alone


def test_the_line_map_follows_common_cuh_into_the_kernel_file():
    common = "// c1\n// c2\n// c3\n"
    raw = 'int a;\n#include "common.cuh"\nint b;\nint c;\n'
    src, lines = gpu_model_sass.inline_common(raw, common, "k.cu")
    combined = src.split("\n")
    for number, (f, ln) in lines.items():
        if number > len(combined):
            continue
        want = (raw if f == "k.cu" else common).split("\n")[ln - 1]
        assert combined[number - 1] == want, (number, f, ln)
    # the kernel's own lines after the include land on their text
    assert lines[combined.index("int b;") + 1] == ("k.cu", 3)


def test_the_report_reads_a_runs_kernel_bench_tables(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(
        "Decode cases (gpu; GB/s = 1e9 decoded bytes/s, medians):\n"
        "case                         chunks   ratio  verif  kernel GB/s  wall GB/s    unshuf-only  note\n"
        "lz4-u16-labels-64KiB            512   55.51     ok        47.74      32.59              -  \n"
        "copy-ts2-1MiB                    32       -     ok      1168.98       4.65              -  \n"
        "zstd-l3-noise-64KiB             512    1.00   FAIL       143.58      17.23              -  \n"
        "\n"
        "Assemble (gpu; wall time of Assembler::run ...):\n"
        "case                     crops  verif       crop    out MiB     out GB/s   equiv GB/s    equiv net equiv kernel\n"
        "assemble-64KiB            2048     ok     64x128       32.0        91.26        91.26       990.22       919.80\n"
        "assemble-cast-1MiB         128     ok    256x512       64.0       789.63       592.22      1301.84      1197.92\n"
        "\n"
    )
    rows = gpu_model_report.log_rows(str(log))
    assert set(rows) == {"lz4-u16-labels-64KiB", "copy-ts2-1MiB", "assemble-64KiB", "assemble-cast-1MiB"}
    assert abs(rows["lz4-u16-labels-64KiB"] - (512 * 65536) / 47.74e9 * 1e6) < 1e-6
    assert abs(rows["copy-ts2-1MiB"] - (32 << 20) / 1168.98e9 * 1e6) < 1e-6
    # assemble: (read + written) / 2 bytes at the kernel's copy-equivalent rate
    assert abs(rows["assemble-64KiB"] - (32 << 20) / 919.80e9 * 1e6) < 1e-6
    assert abs(rows["assemble-cast-1MiB"] - (48 << 20) / 1197.92e9 * 1e6) < 1e-6


def test_the_report_says_when_its_kernels_are_not_the_measured_ones(tmp_path):
    measured = tmp_path / "kernel_bench.json"
    measured.write_text(json.dumps({"rows": [
        {"name": "copy-ts2-1MiB", "kind": "copy", "kernel_s": 2.7e-5, "decoded_bytes": 32 << 20, "n_chunks": 32},
    ]}))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"rows": []}))

    def header(*extra):
        out = tmp_path / "report.md"
        argv = ["gpu_model_report.py", "--measured", str(measured), "--model", str(model),
                "--measured-label", "f51d4fa", "--out", str(out), *extra]
        old = sys.argv
        sys.argv = argv
        try:
            assert gpu_model_report.main() == 0
        finally:
            sys.argv = old
        return out.read_text().split("\n\n")[1]

    assert "modelled kernels" not in header()
    changed = header("--kernels-changed", "kernels/lz4.cu,kernels/zstd.cu")
    assert "the modelled kernels are not the measured ones" in changed
    assert "`kernels/lz4.cu`, `kernels/zstd.cu` changed since f51d4fa" in changed
    assert "may not be the measured ones" in header("--kernels-changed", "unknown")


HOST = """
0000000000001000 <dmc_k>:
dmc_k():
/x/k.cu:3
    1000:\tpush   %rbx
    1001:\tcall   2000 <__sanitizer_cov_trace_pc>
    1006:\tmov    %edi,%eax
/x/k.cu:4
    1008:\tcall   3000 <__tsan_read4>
    100d:\tadd    $0x1,%eax
    1010:\tjne    1020 <dmc_k+0x20>
    1012:\tcall   2000 <__sanitizer_cov_trace_pc>
/x/k.cu:5
    1017:\tmov    %eax,%ebx
helper():
/x/k.cu:4
    1019:\tshl    $0x2,%eax
    101c:\tnop
/usr/include/c++/12/bits/stl_algo.h:77
    101d:\tret
/x/k.cu:6
    1020:\tcall   2000 <__sanitizer_cov_trace_pc>
    1025:\tint3
"""


def test_each_host_block_holds_the_kernel_instructions_after_its_coverage_call():
    blocks, insns = gpu_model_sass.parse_host(HOST, {"k.cu"})
    # a block starts at each coverage call's return address, on the call's line
    assert blocks == [(0x1006, "k.cu", 3), (0x1017, "k.cu", 4), (0x1025, "k.cu", 6)]
    # the prologue before the first call joins the first block; the instrumentation's calls,
    # padding and lines of other files are not counted
    assert sorted(insns) == [
        (0x1000, ("k.cu", 3), 0x1006), (0x1006, ("k.cu", 3), 0x1006), (0x100d, ("k.cu", 4), 0x1006),
        (0x1010, ("k.cu", 4), 0x1006), (0x1017, ("k.cu", 5), 0x1017), (0x1019, ("k.cu", 4), 0x1017),
    ]


def test_a_lines_sass_goes_to_the_blocks_that_hold_its_host_instructions():
    blocks = [(0x10, "k.cu", 3), (0x20, "k.cu", 4), (0x30, "k.cu", 8)]
    # line 4: two host instructions in block 0x10, one in 0x20, one copy; line 5: one copy in
    # block 0x20, a second copy elsewhere (0x30); line 9 has no host instruction (folded)
    insns = [(1, ("k.cu", 4), 0x10), (2, ("k.cu", 4), 0x10), (3, ("k.cu", 4), 0x20),
             (4, ("k.cu", 5), 0x20), (5, ("k.cu", 5), 0x30), (6, ("k.cu", 3), 0x10)]
    host_copies = {("k.cu", 4): {"a"}, ("k.cu", 5): {"a", "b"}, ("k.cu", 3): {"a"}, ("k.cu", 8): {"a"}}
    sass = {("k.cu", 3): 2, ("k.cu", 4): 6, ("k.cu", 5): 10, ("k.cu", 9): 4, ("k.cu", 1): 7}
    shfl = {("k.cu", 4): 3}
    gpu_copies = {("k.cu", 5): {"x", "y"}}
    w, wsh, unplaced = gpu_model_sass.block_weights(blocks, insns, host_copies, sass, shfl, gpu_copies)
    # 0x10: line 3 (2) + 2/3 of line 4 (4); 0x20: 1/3 of line 4 (2) + line 5's copy (10 / 2);
    # 0x30: line 5's other copy (5) + line 9 through its bucket (line 8's block: 4)
    assert w == {0x10: 6.0, 0x20: 7.0, 0x30: 9.0}
    assert {k: v for k, v in wsh.items() if v} == {0x10: 2.0, 0x20: 1.0}
    assert unplaced == 7  # line 1 lies before every block of its file


def test_a_host_copy_is_charged_the_sass_of_the_same_gpu_copy():
    # line 3 inlined at lines 8 and 9 (a template's two instantiations, say): the GPU copies have
    # 9 and 3 SASS instructions; the host's copies sit in blocks 0x10 (at 8: two instructions)
    # and 0x20 (at 9: one), and a third host copy (at 12) has no GPU copy of its own
    blocks = [(0x10, "k.cu", 8), (0x20, "k.cu", 9), (0x30, "k.cu", 12)]
    a, b, c = ("dmc_k", (("k.cu", 8),)), ("dmc_k", (("k.cu", 9),)), ("dmc_k", (("k.cu", 12),))
    insns = [(1, ("k.cu", 3), 0x10), (2, ("k.cu", 3), 0x10), (3, ("k.cu", 3), 0x20), (4, ("k.cu", 3), 0x30)]
    insn_copy = {1: a, 2: a, 3: b, 4: c}
    host_copies = {("k.cu", 3): {a, b, c}}
    sass = {("k.cu", 3): 12}
    shfl = {("k.cu", 3): 4}
    import collections
    gpu_copies = {("k.cu", 3): collections.Counter({a: 9, b: 3})}
    w, wsh, unplaced = gpu_model_sass.block_weights(blocks, insns, host_copies, sass, shfl, gpu_copies, insn_copy)
    # each matched copy its own SASS (the shuffles in proportion); the unmatched copy: none left
    assert w == {0x10: 9.0, 0x20: 3.0}
    assert wsh == {0x10: 3.0, 0x20: 1.0}
    assert unplaced == 0
    # without the copies' counts (a set per line) every host copy is charged the GPU copies' mean
    # (6), spread over its blocks by host instructions (4 over 3 copies), as before
    w, _, _ = gpu_model_sass.block_weights(blocks, insns, host_copies, sass, shfl, {("k.cu", 3): {a, b}}, insn_copy)
    assert w == {0x10: 9.0, 0x20: 4.5, 0x30: 4.5}
    # host copies not matched (instructions 3 and 4: copy unknown) share the GPU copies left (b's
    # 3 instructions, per host copy)
    w, _, _ = gpu_model_sass.block_weights(blocks, insns, host_copies, sass, shfl, gpu_copies, {1: a, 2: a})
    assert w == {0x10: 9.0, 0x20: 3.0, 0x30: 3.0}
