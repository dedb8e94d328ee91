#!/usr/bin/env python3
"""Remote read benchmark: damacy vs tensorstore on the same crops over HTTP and S3.

    .venv/bin/python benches/remote/compare.py [--data /tmp/damacy-bench-data] [--batches 8]

The arrays of ``benches/read/make_data.py`` (a sharded zstd array and an unsharded blosc-lz4
one), random unaligned 64^3 crops in batches of 32 (one seeded list shared by both readers),
served by

* nginx (started here, on loopback, serving the data folder) through the fault-injecting proxy
  of the tests (``crates/damacy-codec/examples/fault_proxy.rs``) adding 0, 10 and 50 ms to every
  answer;
* moto's S3 server (``tests/services/services.sh start``; ``. .services/env`` gives
  ``DAMACY_TEST_S3_ENDPOINT``) with the data uploaded to a bucket, at 0 ms added;

and, for the ">= 80 % of local throughput at 10 ms" goal, damacy on the local files; then a
Pipeline (``damacy bench``, what users run, with read-ahead across batches) on local files and
over HTTP at each latency, as a second table; and a third with the servers pinned to a core of
their own and damacy to the other (local files pinned alike as the baseline), the goal's setting
of a store elsewhere as far as one machine allows. Both
readers use their default configuration (damacy ``ReaderConfig::default()`` and
``StoreOptions::default()``; tensorstore's default context), so this measures what a new user
gets. Each reader reads one warm-up batch (it fills the shard-index caches), then the timed
batches; the table shows medians, ratios damacy / tensorstore, damacy's in-flight high-water mark
and bytes read / distinct chunk bytes. The table goes to stdout and ``benches/results/remote.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "read"))
import compare as local  # noqa: E402  (benches/read/compare.py: crops, timing, machine helpers)
import make_data  # noqa: E402

BUCKET = "damacy-bench"
LATENCIES_MS = (0, 10, 50)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its children (nginx's master and workers)."""
    total = 0
    pids = [pid] + [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / os.sysconf("SC_CLK_TCK")


class ServerCpu:
    """CPU the servers (``pids``) spend while a phase runs, per batch of the phase, and as a share
    of the phase's wall time (``busy``: 1.0 is one core kept busy)."""

    def __init__(self, pids: list[int], batches: int) -> None:
        self.pids, self.batches = pids, batches

    def __enter__(self) -> "ServerCpu":
        self.t0 = sum(process_cpu_s(p) for p in self.pids)
        self.wall0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        cpu_s = sum(process_cpu_s(p) for p in self.pids) - self.t0
        self.ms_per_batch = cpu_s * 1e3 / self.batches
        self.busy = cpu_s / max(time.monotonic() - self.wall0, 1e-9)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


class Nginx:
    """nginx on a free loopback port serving ``data`` (range requests), as the invoking user."""

    def __init__(self, data: Path, state: Path) -> None:
        self.prefix = state / "nginx"
        (self.prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        user = "" if os.getuid() != 0 else "user root root;"
        (self.prefix / "nginx.conf").write_text(f"""{user}
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fastcgi;
  uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;
  default_type application/octet-stream;
  keepalive_requests 100000;
  server {{ listen 127.0.0.1:{self.port}; root {data}; location / {{ }} }}
}}
""")
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        subprocess.run([binary, "-p", f"{self.prefix}/", "-c", str(self.prefix / "nginx.conf"),
                        "-e", str(self.prefix / "error.log")], check=True)
        wait_port(self.port)
        self.url = f"http://127.0.0.1:{self.port}"
        self.pid = int((self.prefix / "nginx.pid").read_text())

    def stop(self) -> None:
        pid_file = self.prefix / "nginx.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 15)


class RunLogs:
    """Every run's stderr (the read bench's, ``damacy bench``'s, each proxy's), kept in a file of its own under
    ``folder`` (numbered in run order), so a failure in any of many runs can be read afterwards; a run that fails
    has the end of its stderr printed too."""

    folder: Path | None = None
    count = 0

    @classmethod
    def open(cls, label: str):
        if cls.folder is None:
            return None
        cls.count += 1
        cls.folder.mkdir(parents=True, exist_ok=True)
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
        return open(cls.folder / f"{cls.count:03d}-{name}.stderr", "w")

    @staticmethod
    def run(label: str, fn):
        """``fn(stderr)`` with ``stderr`` a fresh log file; on a failed run, the log's tail on our stderr."""
        log = RunLogs.open(label)
        try:
            return fn(log)
        except subprocess.CalledProcessError:
            if log is not None:
                log.flush()
                tail = Path(log.name).read_text(errors="replace").splitlines()[-40:]
                print(f"remote: {label} failed; its stderr ({log.name}) ends:", *tail, sep="\n", file=sys.stderr)
            raise
        finally:
            if log is not None:
                log.close()


class FaultProxy:
    """The tests' proxy (``fault_proxy`` example) adding ``ms`` to every answer of ``upstream``."""

    def __init__(self, exe: str, upstream: str, ms: int) -> None:
        self.log = RunLogs.open(f"fault_proxy-{ms}ms")
        self.proc = subprocess.Popen([exe, upstream, str(ms)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            raise SystemExit(f"fault_proxy did not start: {self.url!r}")

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        if self.log is not None:
            self.log.close()


def upload(endpoint: str, data: Path) -> float:
    """The two arrays into ``BUCKET`` on the S3 server at ``endpoint`` (skipped when there)."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    t = time.perf_counter()
    try:
        s3.head_object(Bucket=BUCKET, Key="sharded_zstd/zarr.json")
        return 0.0
    except Exception:  # noqa: BLE001  (any miss: upload)
        pass
    s3.create_bucket(Bucket=BUCKET)
    for name in local.ARRAYS:
        for p in sorted((data / name).rglob("*")):
            if p.is_file():
                s3.upload_file(str(p), BUCKET, str(p.relative_to(data)))
    return time.perf_counter() - t


def cargo_executable(args: list[str], name: str, env: dict) -> str:
    """Build one cargo target (not timed) and return the executable cargo reports for ``name``."""
    proc = subprocess.run(["cargo", "build", *args, "--message-format=json-render-diagnostics"], cwd=ROOT, env=env,
                          check=True, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            msg = json.loads(line)
            if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == name \
                    and msg.get("executable"):
                return msg["executable"]
    raise SystemExit(f"cargo did not report {name}'s executable")


def build(env: dict) -> tuple[str, str, str]:
    """The read bench's, the proxy's and the ``damacy`` CLI's executables (built once, not timed)."""
    bench = local.build_rust(env)
    proxy = cargo_executable(["--profile", "bench", "-p", "damacy-codec", "--example", "fault_proxy"], "fault_proxy", env)
    cli = cargo_executable(["--release", "-p", "damacy-cli"], "damacy", env)
    return bench, proxy, cli


def run_pipeline(cli: str, uri: str, batches: int, batch_size: int, seed: int, env: dict, threads: int = 2,
                 rounds: int = 1) -> dict:
    """``damacy bench`` on one array: a Pipeline (what users get: the CLI's defaults of 2 batches read
    at once, read-ahead) streaming the same seeded crop plan wherever the array is, CPU executor,
    ``threads`` threads (2, as the engine rows, unless pinned to one core); the median of ``rounds`` timed runs."""
    args = [cli, "bench", uri, "--executor", "cpu", "--threads", str(threads), "--batch", str(batch_size),
            "--batches", str(batches), "--rounds", str(rounds), "--warmup", "2", "--seed", str(seed), "--json"]
    proc = RunLogs.run(f"damacy-bench-{uri}", lambda log: subprocess.run(
        args, cwd=ROOT, env=env, check=True, stdout=subprocess.PIPE, stderr=log, text=True))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_damacy(exe: str, data: Path, crops_path: Path, env: dict, store_url: str | None,
               s3_endpoint: str | None = None, servers: list[int] = (), threads: int = 2) -> list[dict]:
    """damacy's results, each with ``server_cpu_ms_per_batch``: the CPU ``servers`` spent per batch
    (warm-up included, so a slight overestimate) while damacy read that array."""
    env = {**env, "DAMACY_BENCH_READERS": "damacy", "DAMACY_BENCH_STORE_URL": store_url or "",
           "DAMACY_BENCH_S3_ENDPOINT": s3_endpoint or "", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
    crops = json.loads(crops_path.read_text())
    results = []
    for name in local.ARRAYS:
        with ServerCpu(list(servers), len(crops["batches"])) as cpu:
            records = RunLogs.run(f"read-bench-{name}-{store_url or 'local'}",
                                  lambda log: local.run_rust(exe, data, crops_path, threads, env, [name], stderr=log))
            rows = [r for r in records if r.get("kind") == "result"]
        results += [{**r, "server_cpu_ms_per_batch": cpu.ms_per_batch, "server_busy": cpu.busy} for r in rows]
    return results


def run_tensorstore(kvstores: dict[str, dict], crops: dict) -> list[dict]:
    """tensorstore's zarr3 driver over each array's kvstore spec, default context."""
    import tensorstore as ts

    results = []
    for name, kvstore in kvstores.items():
        arr = ts.open({"driver": "zarr3", "kvstore": kvstore}, read=True).result()

        def read_batch(batch: list[list[int]]) -> list:
            with ts.Batch() as b:
                futures = [arr[sel].read(batch=b) for sel in local.selections(batch)]
            return [f.result() for f in futures]

        with local.LoadWindow() as w:
            costs, digest = local.timed_batches(read_batch, crops["batches"], crops["warmup_batches"])
        results.append(local.summarize("tensorstore", name, costs, crops["batch_size"], first_batch_sha256=digest,
                                       other_cores=w.other_cores))
    return results


def table(rows: list[dict], local_rows: dict[str, dict]) -> str:
    """One line per store and array. "damacy / local" is the throughput goal; the CPU columns say
    where a CPU-bound machine's time goes: damacy's own CPU per batch (and its ratio to the same
    batches read from local files) and the servers' (nginx + proxy, or moto) on the same cores."""
    out = ["| store | array | damacy crops/s | tensorstore crops/s | ratio | damacy / local | damacy CPU ms/batch "
           "| ÷ local CPU | server CPU ms/batch | in-flight max | bytes read / distinct | damacy requests/batch "
           "| p50 latency |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        d, t = r["damacy"], r["tensorstore"]
        s = d.get("store_stats") or {}
        loc = local_rows.get(r["array"]) or {}
        frac = d["crops_per_s"] / loc["crops_per_s"] if loc.get("crops_per_s") else float("nan")
        cpu_ratio = d["cpu_ms_per_batch"] / loc["cpu_ms_per_batch"] if loc.get("cpu_ms_per_batch") else float("nan")
        out.append(
            f"| {r['store']} | {r['array']} | {d['crops_per_s']:.0f} | {t['crops_per_s']:.0f} "
            f"| {d['crops_per_s'] / t['crops_per_s']:.2f}x | {frac:.0%} | {d['cpu_ms_per_batch']:.0f} | {cpu_ratio:.2f}x "
            f"| {d.get('server_cpu_ms_per_batch', float('nan')):.0f} | {s.get('in_flight_max', 0)} "
            f"| {d.get('bytes_read_over_distinct_median', float('nan')):.2f} "
            f"| {d.get('storage_requests_per_batch', float('nan')):.0f} | {s.get('latency_p50_ms', 0):.1f} ms |"
        )
    return "\n".join(out)


def pipeline_table(pipelines: list[tuple[str, str, float]]) -> str:
    """The Pipeline's crops/s per store and array, and its share of the same Pipeline on local files."""
    local_rate = {a: c for st, a, c in pipelines if st == "local files"}
    out = ["| store | array | damacy Pipeline crops/s | ÷ Pipeline on local files |", "|---|---|---:|---:|"]
    for store, array, c in pipelines:
        out.append(f"| {store} | {array} | {c:.0f} | {c / local_rate[array]:.0%} |")
    return "\n".join(out)


def pinned_table(rows: list[dict]) -> str:
    """The runs with the servers on a core of their own: engine and Pipeline crops/s per store and
    array, their share of the same reader on local files (pinned alike), damacy's CPU per batch
    over its local cost, and how busy the servers kept their core during the engine run."""
    base = {r["array"]: r for r in rows if r["store"] == "local files"}
    out = ["| store | array | engine crops/s | ÷ local | engine CPU ÷ local | server core busy "
           "| Pipeline crops/s | ÷ local |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = base[r["array"]]
        busy = "—" if r["server_busy"] is None else f"{r['server_busy']:.0%}"
        out.append(f"| {r['store']} | {r['array']} | {r['engine']:.0f} | {r['engine'] / b['engine']:.0%} "
                   f"| {r['cpu'] / b['cpu']:.2f}x | {busy} | {r['pipeline']:.0f} | {r['pipeline'] / b['pipeline']:.0%} |")
    return "\n".join(out)


def run_pinned(data: Path, state: Path, crops_path: Path, env: dict, exes: tuple[str, str, str],
               batches: int, batch_size: int, seed: int, rounds: int) -> list[dict]:
    """The goal's measurement with the store elsewhere, as far as one machine allows: nginx and
    the proxy on CPU 1, damacy (1 decode thread, so its I/O runtime gets 1 thread too) on CPU 0,
    local files read by the same pinned damacy as the baseline. Affinity is set on this process
    around each start, so the children inherit it."""
    bench_exe, proxy_exe, cli_exe = exes
    everything = os.sched_getaffinity(0)
    rows = []

    def measure(store: str, engine_url: str | None, pipeline_base: str, servers: list[int]) -> None:
        os.sched_setaffinity(0, {0})
        try:
            engine = {r["array"]: r for r in run_damacy(bench_exe, data, crops_path, env, engine_url, servers=servers,
                                                        threads=1)}
            for name in local.ARRAYS:
                p = run_pipeline(cli_exe, f"{pipeline_base}#{name}", batches, batch_size, seed, env, threads=1,
                                 rounds=rounds)
                e = engine[name]
                rows.append({"store": store, "array": name, "engine": e["crops_per_s"], "cpu": e["cpu_ms_per_batch"],
                             "server_busy": e["server_busy"] if servers else None,
                             "pipeline": p["pipeline"]["crops_per_s"]})
        finally:
            os.sched_setaffinity(0, everything)

    measure("local files", None, str(data.resolve()), [])
    os.sched_setaffinity(0, {1})
    try:
        nginx = Nginx(data.resolve(), state / "pinned")
    finally:
        os.sched_setaffinity(0, everything)
    try:
        for ms in (0, 10):
            os.sched_setaffinity(0, {1})
            try:
                proxy = FaultProxy(proxy_exe, nginx.url, ms)
            finally:
                os.sched_setaffinity(0, everything)
            try:
                measure(f"HTTP +{ms} ms", proxy.url, proxy.url, [nginx.pid, proxy.proc.pid])
            finally:
                proxy.stop()
    finally:
        nginx.stop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=make_data.DEFAULT_DIR)
    ap.add_argument("--batches", type=int, default=8, help="timed batches per reader and store")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=1,
                    help="timed runs of each Pipeline row (damacy bench --rounds), the median reported")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--logs", type=Path, default=None,
                    help="folder for every run's stderr, one file per run (default: logs/ in the bench's state folder)")
    args = ap.parse_args()

    manifest = make_data.make(args.data, tuple(make_data.DEFAULT_SHAPE))
    state = Path(os.environ.get("TMPDIR", "/tmp")) / f"damacy-remote-bench-{os.getpid()}"
    state.mkdir(parents=True, exist_ok=True)
    RunLogs.folder = args.logs or state / "logs"
    crops = local.make_crops(manifest["shape"], args.batches, 1, args.batch_size, args.seed)
    crops_path = state / "crops.json"
    crops_path.write_text(json.dumps(crops))
    env = dict(os.environ)
    bench_exe, proxy_exe, cli_exe = build(env)
    local.warm_page_cache(args.data)

    rows: list[dict] = []
    local_rust = run_damacy(bench_exe, args.data, crops_path, env, None)
    local_rows = {r["array"]: r for r in local_rust}
    # The Pipeline rows: (store, array, crops/s); local files first, the denominator of the goal.
    pipelines: list[tuple[str, str, float]] = []

    def pipeline_rows(store: str, base: str) -> None:
        for name in local.ARRAYS:
            r = run_pipeline(cli_exe, f"{base}#{name}", args.batches, args.batch_size, args.seed, env,
                             rounds=args.rounds)
            pipelines.append((store, name, r["pipeline"]["crops_per_s"]))

    pipeline_rows("local files", str(args.data.resolve()))
    nginx = Nginx(args.data.resolve(), state)
    try:
        for ms in LATENCIES_MS:
            proxy = FaultProxy(proxy_exe, nginx.url, ms)
            try:
                damacy = run_damacy(bench_exe, args.data, crops_path, env, proxy.url,
                                    servers=[nginx.pid, proxy.proc.pid])
                ts_rows = run_tensorstore(
                    {n: {"driver": "http", "base_url": proxy.url, "path": f"/{n}/"} for n in local.ARRAYS}, crops)
                pipeline_rows(f"HTTP +{ms} ms", proxy.url)
            finally:
                proxy.stop()
            for d, t in zip(damacy, ts_rows):
                rows.append({"store": f"HTTP +{ms} ms", "array": d["array"], "damacy": d, "tensorstore": t})
        endpoint = os.environ.get("DAMACY_TEST_S3_ENDPOINT")
        s3_note = ""
        if endpoint:
            took = upload(endpoint, args.data)
            print(f"remote: uploaded to s3://{BUCKET} in {took:.0f} s", file=sys.stderr)
            moto_pid = ROOT / ".services" / "moto" / "pid"
            moto = [int(moto_pid.read_text())] if moto_pid.exists() else []
            damacy = run_damacy(bench_exe, args.data, crops_path, env, f"s3://{BUCKET}", endpoint, servers=moto)
            os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
            ts_rows = run_tensorstore({n: {"driver": "s3", "bucket": BUCKET, "path": f"{n}/", "endpoint": endpoint,
                                           "aws_region": "us-east-1"} for n in local.ARRAYS}, crops)
            for d, t in zip(damacy, ts_rows):
                rows.append({"store": "S3 (moto) +0 ms", "array": d["array"], "damacy": d, "tensorstore": t})
        else:
            s3_note = "S3 rows skipped: DAMACY_TEST_S3_ENDPOINT is not set (run tests/services/services.sh start)."
    finally:
        nginx.stop()
    pinned = []
    if len(os.sched_getaffinity(0)) >= 2:
        pinned = run_pinned(args.data, state, crops_path, env, (bench_exe, proxy_exe, cli_exe), args.batches,
                            args.batch_size, args.seed, args.rounds)

    text = table(rows, local_rows) + "\n\n" + pipeline_table(pipelines)
    if pinned:
        text += "\n\n" + pinned_table(pinned)
    local_line = ", ".join(f"{a} {v['crops_per_s']:.0f} crops/s ({v['cpu_ms_per_batch']:.0f} ms CPU per batch)"
                           for a, v in local_rows.items())
    print(text)
    print(f"damacy on local files: {local_line}")
    (state / "results.json").write_text(json.dumps({"rows": rows, "local": local_rust}, indent=1))
    if args.no_write:
        return
    m = local.machine()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = f"""# Remote reads: damacy vs tensorstore over HTTP and S3

- date: {now}
- commit: {local.git("rev-parse", "--short", "HEAD")}{" (with uncommitted changes)" if local.git("status", "--porcelain") else ""}
- machine: {m["cpu"]}, {m["nproc"]} cores, {m["mem_gib"]} GiB, Linux {m["kernel"]}; load average {local.loadavg()} at the end
- command: `.venv/bin/python benches/remote/compare.py --batches {args.batches} --rounds {args.rounds}`
- data: `benches/read/make_data.py`, {"x".join(map(str, manifest["shape"]))} uint16 (sharded_zstd: shards 256x256x512 of
  32x64x64 zstd inner chunks; blosc_lz4: 64^3 chunks); random 64^3 crops, batches of {args.batch_size}, 1 warm-up +
  {args.batches} timed batches per reader and store, medians
- servers: nginx on loopback through the tests' fault-injecting proxy (`fault_proxy`, added latency per answer);
  moto's S3 server directly. Default configurations on both sides (damacy `ReaderConfig::default()` +
  `StoreOptions::default()`, tensorstore's default context).
- damacy on local files (the same crops): {local_line}. "damacy / local" is the goal of >= 80 % at 10 ms.
- CPU: damacy's own (user + system, mean per timed batch, from /proc at 10 ms ticks) and its ratio to the
  same batches from local files: at <= 1.25x a CPU-bound reader whose store runs elsewhere keeps >= 80 % of its
  local rate once latency is hidden. Server CPU: nginx + the proxy (or moto) during damacy's run, per batch
  (warm-up included). On this machine the servers share damacy's cores.
- second table: `damacy bench` (a Pipeline with the CLI's defaults: 2 batches read at once, read-ahead) on the
  same stores, CPU executor, 2 threads, {args.batches} timed batches after 2 warm-up batches, its own seeded crop
  plan (the same on every store), median of {args.rounds} run(s); "÷ Pipeline on local files" is the goal's ratio
  for what users run.
- third table (when the machine has 2 CPUs or more): the store on a core of its own, the goal's setting as far as
  one machine allows: nginx and the proxy pinned to CPU 1, damacy pinned to CPU 0 with 1 decode thread (engine:
  the read bench; Pipeline: `damacy bench --threads 1`), each compared with the same pinned reader on local files.
- in-flight max: the most requests damacy had in flight to the store; bytes read / distinct: the bytes
  damacy's timed batches read (coalesced ranges; shard indexes are cached after the warm-up) over the
  encoded bytes of the distinct chunks the crops touch.
{("- " + s3_note) if s3_note else ""}

{text}
"""
    out = ROOT / "benches" / "results" / "remote.md"
    out.write_text(md)
    print(f"wrote {out}", file=sys.stderr)
    print(f"remote: every run's stderr is in {RunLogs.folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
