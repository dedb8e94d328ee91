#!/usr/bin/env python3
"""nvCOMP's batched decoders on the very streams damacy's kernel_bench decoded, and the device's
device-to-device copy bandwidth: the yardsticks of the GPU kernel report.

Reads the dump of ``kernel_bench --dump DIR`` (``DIR/index.json`` plus one ``.bin`` of
concatenated raw streams per batch; each entry names its ``algorithm``: ``LZ4`` raw block
streams, ``Zstd`` frames or ``Deflate`` raw deflate streams), uploads each batch with CuPy and
decodes it with

* nvCOMP's C API, ``nvcompBatchedLZ4DecompressAsync`` through ctypes (the batched kernel alone,
  CUDA events around the one call), once per decompression backend (DEFAULT and CUDA); LZ4
  batches only;
* nvCOMP's Python API, ``nvidia.nvcomp.Codec(algorithm=<the entry's>, bitstream_kind=RAW)``
  with a preconfigured ``decompression_config`` and preallocated outputs (events around
  ``decode``), once per execution policy (CONCURRENCY, the default, and LATENCY); every batch.

Each variant is verified once (statuses, decoded sizes, a SHA-256 prefix of every stream's
output) before it is timed; median over ``--reps`` timed runs after ``--warmup`` untimed ones.
GB/s = 1e9 decoded bytes per second. Copy bandwidth: ``cudaMemcpyAsync`` device to device of
the same byte counts, bytes copied per second (a copy of N bytes reads N and writes N).

Without a GPU (or CuPy) it prints ``SKIPPED: <reason>`` and exits 0.

Example::

    python3 benches/gpu/nvcomp_decode.py --index /tmp/dump/index.json --json nvcomp.json
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import ctypes
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ALIGN = 16
NVCOMP_SUCCESS = 0
BACKENDS = {"default": 0, "cuda": 2}  # nvcompDecompressBackend_t
PY_POLICIES = ("CONCURRENCY", "LATENCY")  # nvidia.nvcomp.ExecutionPolicy members


def skip(reason: str, out: str | None) -> None:
    """Print the skip line, leave a JSON that says so, exit 0."""
    print(f"SKIPPED: {reason}")
    if out:
        Path(out).write_text(json.dumps({"tool": "nvcomp_decode", "skipped": reason}, indent=1))
    sys.exit(0)


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def summary(times_s: list[float], nbytes: int) -> dict[str, Any]:
    med = statistics.median(times_s)
    return {
        "s_median": med,
        "s_min": min(times_s),
        "gbps": nbytes / med / 1e9 if med > 0 else None,
        "reps": len(times_s),
    }


class DecompressOpts(ctypes.Structure):
    """``nvcompBatchedLZ4DecompressOpts_t`` of nvcomp/lz4.h (6.0): 4 ints and 48 reserved bytes."""

    _fields_ = [
        ("backend", ctypes.c_int),
        ("sort_before_hw_decompress", ctypes.c_int),
        ("data_type", ctypes.c_int),
        ("bitshuffle_mode", ctypes.c_int),
        ("reserved", ctypes.c_char * 48),
    ]


def load_c_api() -> tuple[Any, str]:
    """libnvcomp.so from the nvidia-libnvcomp wheel, with the two LZ4 entry points typed."""
    try:
        import nvidia.libnvcomp as libpkg  # type: ignore[import-not-found]
    except Exception as e:  # noqa: BLE001 - any import failure means "not installed here"
        return None, f"nvidia.libnvcomp is not importable ({e})"
    lib = None
    try:
        lib = libpkg.load_library()
    except Exception:  # noqa: BLE001
        lib = None
    if lib is None:
        for sub in ("lib64", "lib"):
            p = Path(libpkg.__file__).parent / sub / "libnvcomp.so.6"
            if p.exists():
                lib = ctypes.CDLL(str(p))
                break
    if lib is None:
        return None, "libnvcomp.so.6 not found in the nvidia-libnvcomp package"
    size_t, vp = ctypes.c_size_t, ctypes.c_void_p
    f = lib.nvcompBatchedLZ4DecompressGetTempSize
    f.argtypes = [size_t, size_t, DecompressOpts, ctypes.POINTER(size_t), size_t, vp]
    f.restype = ctypes.c_int
    f = lib.nvcompBatchedLZ4DecompressAsync
    f.argtypes = [vp, vp, vp, vp, size_t, vp, size_t, vp, DecompressOpts, vp, vp]
    f.restype = ctypes.c_int
    return lib, ""


def load_py_api() -> tuple[Any, str]:
    try:
        from nvidia import nvcomp  # type: ignore[import-not-found]
    except Exception as e:  # noqa: BLE001
        return None, f"nvidia.nvcomp is not importable ({e})"
    return nvcomp, ""


class Batch:
    """One dumped batch on the device: packed streams, preallocated outputs, pointer tables."""

    def __init__(self, cp: Any, entry: dict[str, Any], root: Path) -> None:
        import numpy as np

        self.entry = entry
        raw = np.fromfile(root / entry["file"], dtype=np.uint8)
        n = entry["n_streams"]
        self.n = n
        self.comp_sizes = [int(s) for s in entry["comp_sizes"]]
        self.out_sizes = [int(s) for s in entry["decoded_sizes"]]
        self.comp_offsets, self.out_offsets = [], []
        c = o = 0
        for cs, us in zip(self.comp_sizes, self.out_sizes):
            self.comp_offsets.append(c)
            self.out_offsets.append(o)
            c += align(cs)
            o += align(us)
        packed = np.zeros(max(c, 1), dtype=np.uint8)
        for src_off, dst_off, cs in zip(entry["offsets"], self.comp_offsets, self.comp_sizes):
            packed[dst_off : dst_off + cs] = raw[src_off : src_off + cs]
        self.decoded_bytes = sum(self.out_sizes)
        self.comp_dev = cp.asarray(packed)
        self.out_dev = cp.zeros(max(o, 1), dtype=cp.uint8)
        cb, ob = self.comp_dev.data.ptr, self.out_dev.data.ptr
        self.comp_ptrs = cp.asarray([cb + x for x in self.comp_offsets], dtype=cp.uint64)
        self.out_ptrs = cp.asarray([ob + x for x in self.out_offsets], dtype=cp.uint64)
        self.comp_bytes = cp.asarray(self.comp_sizes, dtype=cp.uint64)
        self.out_bytes = cp.asarray(self.out_sizes, dtype=cp.uint64)
        self.actual = cp.zeros(n, dtype=cp.uint64)
        self.status = cp.full(n, -1, dtype=cp.int32)

    def check_output(self, pool: cf.Executor) -> str | None:
        """None when every stream decoded to the expected bytes, else what differs."""
        host = memoryview(self.out_dev.get())
        want = self.entry["decoded_sha256_64"]

        def one(i: int) -> str | None:
            off, size = self.out_offsets[i], self.out_sizes[i]
            got = hashlib.sha256(host[off : off + size]).hexdigest()[:16]
            return None if got == want[i] else f"stream {i}: sha256 {got} != {want[i]}"

        for r in pool.map(one, range(self.n)):
            if r:
                return r
        return None


def time_events(cp: Any, stream: Any, fn: Callable[[], None], warmup: int, reps: int) -> list[float]:
    """Seconds per call between CUDA events recorded on `stream` around `fn`."""
    out = []
    for i in range(warmup + reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        if i >= warmup:
            out.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    return out


def run_c_api(cp: Any, lib: Any, b: Batch, stream: Any, backend: int, args: Any, pool: cf.Executor) -> dict[str, Any]:
    opts = DecompressOpts(backend=backend, sort_before_hw_decompress=0, data_type=0, bitshuffle_mode=0)
    temp_bytes = ctypes.c_size_t(0)
    rc = lib.nvcompBatchedLZ4DecompressGetTempSize(
        b.n, max(b.out_sizes), opts, ctypes.byref(temp_bytes), b.decoded_bytes, stream.ptr
    )
    if rc != NVCOMP_SUCCESS:
        return {"error": f"nvcompBatchedLZ4DecompressGetTempSize returned {rc}"}
    temp = cp.empty(max(temp_bytes.value, 1), dtype=cp.uint8)

    def call() -> None:
        rc = lib.nvcompBatchedLZ4DecompressAsync(
            b.comp_ptrs.data.ptr,
            b.comp_bytes.data.ptr,
            b.out_bytes.data.ptr,
            b.actual.data.ptr,
            b.n,
            temp.data.ptr,
            temp_bytes.value,
            b.out_ptrs.data.ptr,
            opts,
            b.status.data.ptr,
            stream.ptr,
        )
        if rc != NVCOMP_SUCCESS:
            raise RuntimeError(f"nvcompBatchedLZ4DecompressAsync returned {rc}")

    b.out_dev.fill(0)
    b.status.fill(-1)
    stream.synchronize()
    call()
    stream.synchronize()
    status = b.status.get()
    bad = [i for i, s in enumerate(status) if s != NVCOMP_SUCCESS]
    if bad:
        return {"error": f"{len(bad)} streams failed, first {bad[0]} with nvcompStatus {int(status[bad[0]])}"}
    actual = b.actual.get()
    wrong = [i for i in range(b.n) if int(actual[i]) != b.out_sizes[i]]
    if wrong:
        i = wrong[0]
        return {"error": f"stream {i} decoded {int(actual[i])} bytes, expected {b.out_sizes[i]}"}
    diff = b.check_output(pool)
    if diff:
        return {"error": f"output differs: {diff}", "verified": False}
    res = summary(time_events(cp, stream, call, args.warmup, args.reps), b.decoded_bytes)
    res.update(verified=True, temp_bytes=temp_bytes.value)
    return res


def run_py_api(
    cp: Any, nvcomp: Any, b: Batch, stream: Any, algorithm: str, policy: str, args: Any, pool: cf.Executor
) -> dict[str, Any]:
    codec = nvcomp.Codec(
        algorithm=algorithm,
        bitstream_kind=nvcomp.BitstreamKind.RAW,
        cuda_stream=stream.ptr,
        execution_policy=getattr(nvcomp.ExecutionPolicy, policy),
    )
    srcs = nvcomp.as_arrays(b.comp_dev, b.comp_offsets, b.comp_sizes, cuda_stream=stream.ptr)
    outs = nvcomp.as_arrays(b.out_dev, b.out_offsets, b.out_sizes, cuda_stream=stream.ptr)
    # Parses (walks) the raw streams once for their decoded sizes; synchronizes.
    config = codec.decompression_config(srcs)

    def call() -> None:
        codec.decode(srcs, out=outs, decompression_config=config)

    b.out_dev.fill(0)
    stream.synchronize()
    call()
    stream.synchronize()
    diff = b.check_output(pool)
    if diff:
        return {"error": f"output differs: {diff}", "verified": False}
    walls = []
    for i in range(args.warmup + args.reps):
        t = time.perf_counter()
        call()
        stream.synchronize()
        if i >= args.warmup:
            walls.append(time.perf_counter() - t)
    res = summary(time_events(cp, stream, call, args.warmup, args.reps), b.decoded_bytes)
    res.update(verified=True, wall_s_median=statistics.median(walls))
    return res


def copy_bandwidth(cp: Any, stream: Any, nbytes: int, args: Any) -> dict[str, Any]:
    src = cp.empty(nbytes, dtype=cp.uint8)
    dst = cp.empty(nbytes, dtype=cp.uint8)
    src.fill(1)
    kind = cp.cuda.runtime.memcpyDeviceToDevice

    def call() -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, kind, stream.ptr)

    res = summary(time_events(cp, stream, call, args.warmup, args.reps), nbytes)
    res["bytes"] = nbytes
    return res


def guarded(what: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - one failing variant must not stop the others
        print(f"  {what}: ERROR {type(e).__name__}: {e}", flush=True)
        return {"error": f"{type(e).__name__}: {e}"}


def fmt(r: dict[str, Any]) -> str:
    if "gbps" in r and r.get("gbps") is not None:
        return f"{r['gbps']:8.1f} GB/s"
    return "ERROR " + str(r.get("error", "?"))[:60]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="index.json written by kernel_bench --dump")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--copy-bytes", type=int, nargs="*", default=[], help="extra copy sizes to time")
    args = ap.parse_args()

    index_path = Path(args.index)
    try:
        index = json.loads(index_path.read_text())
    except OSError as e:
        print(f"nvcomp_decode: cannot read {index_path}: {e}", file=sys.stderr)
        return 2
    try:
        import cupy as cp  # type: ignore[import-not-found]
    except Exception as e:  # noqa: BLE001
        skip(f"cupy is not importable ({type(e).__name__}: {e})", args.json)
    try:
        n_dev = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        skip(f"no CUDA device ({type(e).__name__}: {e})", args.json)
    if n_dev == 0:
        skip("no CUDA device", args.json)
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    print(f"nvcomp_decode on {name} (cupy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()})")

    lib, c_reason = load_c_api()
    nvcomp, py_reason = load_py_api()
    report: dict[str, Any] = {
        "tool": "nvcomp_decode",
        "device": name,
        "cupy": cp.__version__,
        "nvcomp_version": getattr(nvcomp, "__version__", None),
        "c_api": {"available": lib is not None, "reason": c_reason},
        "py_api": {"available": nvcomp is not None, "reason": py_reason},
        "gbps_unit": "1e9 decoded bytes/s",
        "reps": args.reps,
        "warmup": args.warmup,
        "entries": [],
        "copy": [],
    }
    if c_reason:
        print(f"nvCOMP C API unavailable: {c_reason}")
    if py_reason:
        print(f"nvCOMP Python API unavailable: {py_reason}")

    stream = cp.cuda.Stream(non_blocking=True)
    pool = cf.ThreadPoolExecutor(max_workers=os.cpu_count() or 4)
    root = index_path.parent
    for entry in index.get("entries", []):
        algorithm = entry.get("algorithm", "LZ4")
        print(
            f"{entry['name']}: {algorithm}, {entry['n_streams']} streams, {entry['decoded_bytes'] / 2**20:.0f} MiB",
            flush=True,
        )
        row: dict[str, Any] = {
            k: entry[k] for k in ("name", "dataset", "dtype", "chunk_bytes", "n_streams", "comp_bytes", "decoded_bytes")
        }
        row["algorithm"] = algorithm
        try:
            b = Batch(cp, entry, root)
        except Exception as e:  # noqa: BLE001
            row["error"] = f"upload failed: {type(e).__name__}: {e}"
            print(f"  {row['error']}")
            report["entries"].append(row)
            continue
        if lib is not None and algorithm == "LZ4":
            row["c_api"] = {}
            for label, backend in BACKENDS.items():
                r = guarded(f"C API ({label})", lambda: run_c_api(cp, lib, b, stream, backend, args, pool))
                row["c_api"][label] = r
                print(f"  C API, backend {label:<11} {fmt(r)}", flush=True)
        if nvcomp is not None:
            row["py_api"] = {}
            for policy in PY_POLICIES:
                r = guarded(f"Python API ({policy})", lambda: run_py_api(cp, nvcomp, b, stream, algorithm, policy, args, pool))
                row["py_api"][policy.lower()] = r
                print(f"  Python API, {policy:<12} {fmt(r)}", flush=True)
        report["entries"].append(row)
        del b
        cp.get_default_memory_pool().free_all_blocks()

    sizes = sorted({int(e["decoded_bytes"]) for e in index.get("entries", [])} | set(args.copy_bytes))
    for n in sizes:
        r = guarded(f"copy {n}", lambda: copy_bandwidth(cp, stream, n, args))
        r.setdefault("bytes", n)
        report["copy"].append(r)
        print(f"device-to-device copy of {n / 2**20:.1f} MiB: {fmt(r)}", flush=True)
        cp.get_default_memory_pool().free_all_blocks()
    pool.shutdown()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
        print(f"wrote {args.json}")
    failed = [
        e["name"]
        for e in report["entries"]
        if "error" in e
        or any("error" in r for r in e.get("c_api", {}).values())
        or any("error" in r for r in e.get("py_api", {}).values())
    ]
    if failed:
        print(f"{len(failed)} batch(es) had an nvCOMP error: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
