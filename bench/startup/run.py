"""Start-up benchmark: a one-row ``sparkcdc run`` against a bare Spark session, in the same run.

Usage (from the repository root)::

    .venv/bin/python bench/startup/run.py [--repeat 5] [--master local[2]]

Starts a private MariaDB, creates a table and commits one row between two
``query_tso`` calls. Then, alternately and each in a fresh process:

1. the baseline: a bare Spark session (the session settings ``sparkcdc run`` uses,
   without the sparkcdc data source) starts, counts ``spark.range(1)`` and stops;
2. ``sparkcdc run --start-ts … --target-ts …`` to ``file://…?protocol=csv``, as a
   user runs it (a new changefeed each time), until it exits 0 with the row written.

It prints the median wall time of each, their difference and ratio (the target:
the run within the baseline + 2 s), the load average beside the figures, the peak
RSS of each process tree, and the median time of the phases of the run read from
its debug log: Spark's start, the query start, the first batch, the stop.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]

PHASES = (
    ("spark", "Spark session started"),
    ("query", "streaming query started"),
    ("batch", "committed"),
    ("target", "reached target-ts"),
)
"""(phase, a fragment of the debug log line that ends it)."""


def bare_session(master: str) -> dict[str, Any]:
    """The baseline, in this process: start a session, count one row, stop; the times of each step."""
    t0 = time.time()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparkcdc.pipeline.spark import LOG4J2_CONFIG

    builder = (
        SparkSession.builder.appName("bare")
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.log.level", "ERROR")
        .config("spark.driver.defaultJavaOptions", f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}")
    )
    t_import = time.time()
    spark = builder.getOrCreate()
    t_session = time.time()
    n = spark.range(1).count()
    t_count = time.time()
    spark.stop()
    t_stop = time.time()
    assert n == 1
    return {
        "import_s": t_import - t0,
        "session_s": t_session - t_import,
        "count_s": t_count - t_session,
        "stop_s": t_stop - t_count,
    }


def _watch(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[int, str, float, int, float]:
    """Run ``cmd``: exit code, stderr, wall seconds, peak RSS of its process tree, start (epoch)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd)
        root = psutil.Process(p.pid)
        peak = 0
        while p.poll() is None:
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for proc in procs:
                try:
                    total += proc.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            peak = max(peak, total)
            time.sleep(0.05)
        p.wait()
        wall = time.time() - t0
        err.seek(0)
        return p.returncode, err.read().decode(errors="replace"), wall, peak, t0


def run_bare(master: str, env: dict[str, str], cwd: str) -> dict[str, Any]:
    """The baseline in a fresh process."""
    rc, err, wall, peak, _ = _watch(
        [sys.executable, str(Path(__file__).resolve()), "--bare", "--master", master], env, cwd
    )
    if rc != 0:
        raise RuntimeError(f"bare Spark session exited with {rc}: {err[-2000:]}")
    line = [x for x in err.splitlines() if x.startswith("{")][-1]
    return dict(json.loads(line), wall_s=wall, peak_rss=peak)


def _phases(log: str, t0: float) -> dict[str, float]:
    """Seconds from the process start to the first log record of each phase (JSON log lines)."""
    out: dict[str, float] = {}
    for line in log.splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        at = datetime.strptime(rec["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
        for name, fragment in PHASES:
            if name not in out and fragment in rec.get("message", ""):
                out[name] = at - t0
    return out


def run_changefeed(
    spec: dict[str, Any], master: str, env: dict[str, str], cwd: str, k: int
) -> dict[str, Any]:
    """One ``sparkcdc run`` of the one-row range, as a user runs it."""
    out = f"{cwd}/out{k}"
    cmd = [
        sys.executable,
        "-m",
        "sparkcdc.cli.main",
        "--log-level",
        "debug",
        "--log-format",
        "json",
        "run",
        "--upstream-uri",
        spec["uri"],
        "--sink-uri",
        f"file://{out}?protocol=csv",
        "--start-ts",
        str(spec["start_ts"]),
        "--target-ts",
        str(spec["target_ts"]),
        "--data-dir",
        f"{cwd}/data",
        "--master",
        master,
        "--no-progress",
    ]
    rc, err, wall, peak, t0 = _watch(cmd, env, cwd)
    if rc != 0:
        raise RuntimeError(f"sparkcdc run exited with {rc}: {err[-3000:]}")
    records = 0
    for dirpath, _, files in os.walk(out):
        for name in files:
            if name.endswith(".csv"):
                records += Path(dirpath, name).read_bytes().count(b"\n")
    if records != 1:
        raise RuntimeError(f"sparkcdc run wrote {records} CSV records, expected 1")
    phases = {k: v for k, v in _phases(err, t0).items() if v < wall}
    return {"wall_s": wall, "peak_rss": peak, "phases": phases}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    ap.add_argument("--master", default="local[2]", help="Spark master of both (default local[2])")
    ap.add_argument(
        "--also-src",
        metavar="DIR",
        help="also run the changefeed with another checkout's src directory first on PYTHONPATH "
        "(e.g. a `git archive` of an older commit), alternating with this one, to compare them",
    )
    ap.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.bare:
        print(json.dumps(bare_session(args.master)), file=sys.stderr, flush=True)
        return 0

    from sparkcdc.capture.start import query_tso
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.services.mariadb import LocalMariaDB

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARKCDC_SPARK_MASTER", None)
    other_env = None
    if args.also_src:
        other_env = dict(
            env, PYTHONPATH=os.pathsep.join([os.path.abspath(args.also_src), env.get("PYTHONPATH", "")])
        )
    bare: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    loads: list[float] = []
    with LocalMariaDB() as db, tempfile.TemporaryDirectory(prefix="bench-startup-") as cwd:
        db.execute("CREATE DATABASE bench", "CREATE TABLE bench.t (id INT PRIMARY KEY, v VARCHAR(16))")
        up = UpstreamConfig.from_uri(db.uri)
        start_ts = query_tso(up)
        db.execute("INSERT INTO bench.t VALUES (1, 'one')")
        spec = {"uri": db.uri, "start_ts": start_ts, "target_ts": query_tso(up)}
        print(f"cores: {os.cpu_count()}; Spark master {args.master}; {_load()}", flush=True)
        for k in range(args.repeat):
            loads.append(os.getloadavg()[0])
            b = run_bare(args.master, env, cwd)
            r = run_changefeed(spec, args.master, env, cwd, k)
            bare.append(b)
            runs.append(r)
            other = ""
            if other_env is not None:
                o = run_changefeed(spec, args.master, other_env, cwd, 1000 + k)
                others.append(o)
                other = f", --also-src {o['wall_s']:.2f}s"
            print(
                f"  {k + 1}/{args.repeat}: bare session {b['wall_s']:.2f}s, sparkcdc run {r['wall_s']:.2f}s"
                f"{other} ({_load()})",
                flush=True,
            )

    def med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    b_s = med([b["wall_s"] for b in bare])
    r_s = med([r["wall_s"] for r in runs])
    print()
    print(f"{'measure (median of ' + str(args.repeat) + ')':50} {'seconds':>8} {'peak RSS MB':>12}")
    print("-" * 72)
    print(f"{'bare Spark session: start, count, stop':50} {b_s:>8.2f} {med([b['peak_rss'] for b in bare]) / 2**20:>12.0f}")  # fmt: skip
    print(f"{'  of which session start (import .. getOrCreate)':50} {med([b['import_s'] + b['session_s'] for b in bare]):>8.2f}")  # fmt: skip
    print(f"{'  of which count':50} {med([b['count_s'] for b in bare]):>8.2f}")
    print(f"{'  of which stop':50} {med([b['stop_s'] for b in bare]):>8.2f}")
    print(f"{'sparkcdc run, one row, new changefeed':50} {r_s:>8.2f} {med([r['peak_rss'] for r in runs]) / 2**20:>12.0f}")  # fmt: skip
    labels = {
        "spark": "  Spark session up (from the process start)",
        "query": "  streaming query started",
        "batch": "  first batch committed",
        "target": "  target-ts reached",
    }
    for name, _ in PHASES:
        xs = [r["phases"][name] for r in runs if name in r["phases"]]
        if xs:
            print(f"{labels[name]:50} {med(xs):>8.2f}")
    if others:
        o_s = med([o["wall_s"] for o in others])
        print(f"{'sparkcdc run of --also-src':50} {o_s:>8.2f} {med([o['peak_rss'] for o in others]) / 2**20:>12.0f}")  # fmt: skip
        for name, _ in PHASES:
            xs = [o["phases"][name] for o in others if name in o["phases"]]
            if xs:
                print(f"{labels[name]:50} {med(xs):>8.2f}")
        print(f"--also-src - bare session: {o_s - b_s:+.2f}s; ratio {o_s / b_s:.2f}x")
    print()
    print(
        f"sparkcdc run - bare session: {r_s - b_s:+.2f}s; ratio {r_s / b_s:.2f}x "
        f"(target: within +2 s: {'met' if r_s - b_s <= 2.0 else 'not met'}); "
        f"load average 1 min during the runs: {min(loads):.2f}-{max(loads):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
