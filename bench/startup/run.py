"""Start-up benchmark: a one-row ``sparkcdc run`` against a bare Spark session, in the same run.

Usage (from the repository root)::

    .venv/bin/python bench/startup/run.py [--repeat 5] [--master local[2]] [--also-src DIR]
        [--variant-conf KEY=VALUE] [--variant-env NAME=VALUE] [--txn-rows N] [--no-bare]

Starts a private MariaDB, creates a table and commits one transaction (one row, or ``--txn-rows``
rows) between two ``query_tso`` calls. Then, alternately and each in a fresh process:

1. the baselines: a bare Spark session (the session settings and driver JVM options ``sparkcdc
   run`` uses, without the sparkcdc data source) starts, counts ``spark.range(1)`` and stops; and
   the same with Spark's own JVM defaults;
2. ``sparkcdc run --start-ts … --target-ts …`` to ``file://…?protocol=csv``, as a user runs it (a
   new changefeed each time), until it exits 0; the CSV records are checked complete and in order;
3. with ``--also-src``, the same run with another checkout's ``src`` first on ``PYTHONPATH``; with
   ``--variant-conf``/``--variant-env``, the same run with those Spark settings or variables.

It prints the median wall time of each, their difference and ratio (the target: the run within
the baseline + 2 s), the load average beside the figures, the peak RSS and PSS of each process
tree with the processes at the peak of the PSS sum and the sums over time, and the median time of
the phases of the run read from its debug log: Spark's start, the query start, the first batch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def bare_session(master: str, spark_jvm: bool = False) -> dict[str, Any]:
    """The baseline, in this process: start a session, count one row, stop; the times of each step."""
    t0 = time.time()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from sparkcdc.pipeline import spark as cdc_spark

    # The driver JVM options sparkcdc's own session gets (none in a checkout older than them).
    java_options = "" if spark_jvm else getattr(cdc_spark, "driver_java_options", lambda: "")()
    log4j = cdc_spark.LOG4J2_CONFIG

    builder = (
        SparkSession.builder.appName("bare")
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.log.level", "ERROR")
        .config(
            "spark.driver.defaultJavaOptions",
            f"-Dlog4j2.configurationFile={log4j.as_uri()} {java_options}",
        )
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


def _label(proc: psutil.Process, root_pid: int) -> str:
    """What a process of the tree is: the JVM, the driver, or which of Spark's Python processes."""
    try:
        cmd = proc.cmdline()
        ppid = proc.ppid()
    except psutil.Error:
        return "?"
    if proc.pid == root_pid:
        return "driver (python)"
    if cmd and cmd[0].endswith("java"):
        return "JVM"
    if "pyspark.daemon" in cmd:
        module = cmd[cmd.index("pyspark.daemon") + 1 :] or ["pyspark.worker"]
        name = "executor" if module[0] == "pyspark.worker" else module[0].rsplit(".", 1)[-1]
        try:
            parent_cmd = psutil.Process(ppid).cmdline()
        except psutil.Error:
            parent_cmd = []
        role = "worker" if "pyspark.daemon" in parent_cmd else "daemon"
        return f"{name} {role}"
    if "-m" in cmd:
        return cmd[cmd.index("-m") + 1].rsplit(".", 1)[-1]
    return " ".join(cmd)[:40]


def _pss(proc: psutil.Process) -> int:
    """Proportional set size (shared pages split among their users) from ``smaps_rollup``."""
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class TreeSampler:
    """RSS of a process tree every ``every`` s; every ``full_every`` s also each process's RSS and PSS.

    Keeps the peak of the RSS sum, the peak of the PSS sum and its processes, and the
    totals over time (seconds from the start, RSS, PSS) of the full samples.
    """

    def __init__(self, pid: int, every: float = 0.05, full_every: float = 0.5) -> None:
        self.root = psutil.Process(pid)
        self.every = every
        self.full_every = full_every
        self.t0 = time.time()
        self.peak_rss = 0
        self.peak_pss = 0
        self.at_peak_pss: list[tuple[str, int, int]] = []
        self.series: list[tuple[float, int, int]] = []
        self._labels: dict[int, str] = {}
        self._last_full = 0.0

    def summary(self) -> dict[str, Any]:
        """The figures as plain data (JSON-able)."""
        return {
            "peak_rss": self.peak_rss,
            "peak_pss": self.peak_pss,
            "at_peak_pss": self.at_peak_pss,
            "series": self.series,
        }

    def _procs(self) -> list[psutil.Process]:
        return [self.root, *self.root.children(recursive=True)]

    def sample(self) -> None:
        """One sample (called every ``every`` seconds)."""
        procs = self._procs()
        now = time.time()
        full = now - self._last_full >= self.full_every
        rows: list[tuple[str, int, int]] = []
        total = 0
        for proc in procs:
            try:
                rss = proc.memory_info().rss
            except psutil.Error:
                continue
            total += rss
            if full:
                label = self._labels.get(proc.pid)
                if label is None:
                    label = self._labels[proc.pid] = _label(proc, self.root.pid)
                rows.append((label, rss, _pss(proc)))
        if full:
            self._last_full = now
            pss = sum(r[2] for r in rows)
            self.series.append((now - self.t0, total, pss))
            if pss > self.peak_pss:
                self.peak_pss, self.at_peak_pss = pss, rows
        self.peak_rss = max(self.peak_rss, total)


def _watch(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[int, str, float, TreeSampler, float]:
    """Run ``cmd``: exit code, stderr, wall seconds, the memory samples of its process tree, start (epoch)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd)
        sampler = TreeSampler(p.pid)
        while p.poll() is None:
            try:
                sampler.sample()
            except psutil.NoSuchProcess:
                break
            time.sleep(sampler.every)
        p.wait()
        wall = time.time() - t0
        err.seek(0)
        return p.returncode, err.read().decode(errors="replace"), wall, sampler, t0


def run_bare(master: str, env: dict[str, str], cwd: str, spark_jvm: bool = False) -> dict[str, Any]:
    """The baseline in a fresh process (``spark_jvm``: with Spark's own JVM defaults, not sparkcdc's)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--bare", "--master", master]
    rc, err, wall, mem, _ = _watch([*cmd, "--spark-jvm"] if spark_jvm else cmd, env, cwd)
    if rc != 0:
        raise RuntimeError(f"bare Spark session exited with {rc}: {err[-2000:]}")
    line = [x for x in err.splitlines() if x.startswith("{")][-1]
    return dict(
        json.loads(line), wall_s=wall, peak_rss=mem.peak_rss, peak_pss=mem.peak_pss, mem=mem.summary()
    )


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
    spec: dict[str, Any],
    master: str,
    env: dict[str, str],
    cwd: str,
    k: int,
    spark_conf: list[str] | None = None,
) -> dict[str, Any]:
    """One ``sparkcdc run`` of the prepared range, as a user runs it."""
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
    for kv in spark_conf or []:
        cmd += ["--spark-conf", kv]
    rc, err, wall, mem, t0 = _watch(cmd, env, cwd)
    if rc != 0:
        raise RuntimeError(f"sparkcdc run exited with {rc}: {err[-3000:]}")
    check_output(out, spec["rows"])
    shutil.rmtree(out, ignore_errors=True)
    phases = {k: v for k, v in _phases(err, t0).items() if v < wall}
    return {
        "wall_s": wall,
        "peak_rss": mem.peak_rss,
        "peak_pss": mem.peak_pss,
        "mem": mem.summary(),
        "phases": phases,
    }


def check_output(out: str, rows: int) -> None:
    """The CSV records are the committed rows: ids 1..rows, each once, in order within each file."""
    ids: list[int] = []
    for dirpath, _, files in os.walk(out):
        for name in sorted(files):
            if name.endswith(".csv"):
                with open(Path(dirpath, name), "rb") as f:
                    for line in f:
                        # "I","t","bench",<id>,"<v>" (v has no comma)
                        ids.append(int(line.split(b",")[-2]))
    if len(ids) != rows or ids != list(range(1, rows + 1)):
        raise RuntimeError(f"sparkcdc run wrote {len(ids)} CSV records, expected ids 1..{rows} in order")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def _fmt_procs(rows: list[tuple[str, int, int]]) -> list[str]:
    """Processes of one sample grouped by label: count, RSS MB, PSS MB (largest first)."""
    groups: dict[str, list[int]] = {}
    for label, rss, pss in rows:
        g = groups.setdefault(label, [0, 0, 0])
        g[0] += 1
        g[1] += rss
        g[2] += pss
    out = []
    for label, (n, rss, pss) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        out.append(f"    {label + (f' x{n}' if n > 1 else ''):44} {rss / 2**20:>8.0f} {pss / 2**20:>8.0f}")
    out.append(
        f"    {'total':44} {sum(r[1] for r in rows) / 2**20:>8.0f} {sum(r[2] for r in rows) / 2**20:>8.0f}"
    )
    return out


def _print_memory(title: str, r: dict[str, Any]) -> None:
    mem = r["mem"]
    print(f"{title}: peak RSS {mem['peak_rss'] / 2**20:.0f} MB, peak PSS {mem['peak_pss'] / 2**20:.0f} MB")
    print(f"    {'process (at the peak of the PSS sum)':44} {'RSS MB':>8} {'PSS MB':>8}")
    for line in _fmt_procs(mem["at_peak_pss"]):
        print(line)
    step = max(1, len(mem["series"]) // 12)
    series = ", ".join(
        f"{t:.0f}s {rss / 2**20:.0f}/{pss / 2**20:.0f}" for t, rss, pss in mem["series"][::step]
    )
    print(f"    over time (s RSS/PSS MB): {series}")


def make_range(db: Any, up: Any, txn_rows: int) -> dict[str, Any]:
    """Commit ``txn_rows`` rows (ids 1..n) in one transaction between two ``query_tso`` calls."""
    from sparkcdc.capture.start import query_tso

    db.execute("CREATE DATABASE bench", "CREATE TABLE bench.t (id INT PRIMARY KEY, v VARCHAR(16))")
    start_ts = query_tso(up)
    if txn_rows == 1:
        db.execute("INSERT INTO bench.t VALUES (1, 'one')")
    else:
        # MariaDB's SEQUENCE engine: one INSERT, one transaction, n rows.
        db.execute(f"INSERT INTO bench.t SELECT seq, CONCAT('row-', seq) FROM bench.seq_1_to_{txn_rows}")
    return {"uri": db.uri, "start_ts": start_ts, "target_ts": query_tso(up), "rows": txn_rows}


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
    ap.add_argument(
        "--variant-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="also run the changefeed with this --spark-conf (repeatable), alternating, to measure a setting alone",
    )
    ap.add_argument(
        "--variant-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the variant run also gets this environment variable (repeatable)",
    )
    ap.add_argument(
        "--txn-rows",
        type=int,
        default=1,
        help="rows of the one transaction the changefeed replicates (default 1; e.g. 1000000 for the "
        "memory of one large transaction)",
    )
    ap.add_argument("--no-bare", action="store_true", help="skip the bare session (memory runs)")
    ap.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--spark-jvm", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.bare:
        print(json.dumps(bare_session(args.master, args.spark_jvm)), file=sys.stderr, flush=True)
        return 0

    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.services.mariadb import LocalMariaDB

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARKCDC_SPARK_MASTER", None)
    other_env = None
    if args.also_src:
        other_env = dict(
            env, PYTHONPATH=os.pathsep.join([os.path.abspath(args.also_src), env.get("PYTHONPATH", "")])
        )
    variant = bool(args.variant_conf or args.variant_env)
    variant_env = dict(env, **dict(kv.split("=", 1) for kv in args.variant_env))
    bare: list[dict[str, Any]] = []
    bare_default: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    variants: list[dict[str, Any]] = []
    loads: list[float] = []
    with LocalMariaDB() as db, tempfile.TemporaryDirectory(prefix="bench-startup-") as cwd:
        spec = make_range(db, UpstreamConfig.from_uri(db.uri), args.txn_rows)
        print(
            f"cores: {os.cpu_count()}; Spark master {args.master}; one transaction of {args.txn_rows} rows; "
            f"{_load()}",
            flush=True,
        )
        for k in range(args.repeat):
            loads.append(os.getloadavg()[0])
            line = []
            if not args.no_bare:
                b = run_bare(args.master, env, cwd)
                bare.append(b)
                d = run_bare(args.master, env, cwd, spark_jvm=True)
                bare_default.append(d)
                line.append(f"bare session {b['wall_s']:.2f}s (Spark's JVM defaults {d['wall_s']:.2f}s)")
            r = run_changefeed(spec, args.master, env, cwd, k)
            runs.append(r)
            line.append(f"sparkcdc run {r['wall_s']:.2f}s ({r['peak_rss'] / 2**20:.0f} MB)")
            if other_env is not None:
                o = run_changefeed(spec, args.master, other_env, cwd, 1000 + k)
                others.append(o)
                line.append(f"--also-src {o['wall_s']:.2f}s ({o['peak_rss'] / 2**20:.0f} MB)")
            if variant:
                v = run_changefeed(spec, args.master, variant_env, cwd, 2000 + k, args.variant_conf)
                variants.append(v)
                line.append(f"variant {v['wall_s']:.2f}s ({v['peak_rss'] / 2**20:.0f} MB)")
            print(f"  {k + 1}/{args.repeat}: {', '.join(line)} ({_load()})", flush=True)

    def med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    labels = {
        "spark": "  Spark session up (from the process start)",
        "query": "  streaming query started",
        "batch": "  first batch committed",
        "target": "  target-ts reached",
    }

    def report(title: str, rs: list[dict[str, Any]]) -> float:
        s = med([r["wall_s"] for r in rs])
        rss, pss = med([r["peak_rss"] for r in rs]) / 2**20, med([r["peak_pss"] for r in rs]) / 2**20
        print(f"{title:50} {s:>8.2f} {rss:>8.0f} {pss:>8.0f}")
        for name, _ in PHASES:
            xs = [r["phases"][name] for r in rs if name in r["phases"]]
            if xs:
                print(f"{labels[name]:50} {med(xs):>8.2f}")
        return s

    print()
    print(f"{'measure (median of ' + str(args.repeat) + ')':50} {'seconds':>8} {'peak RSS':>8} {'PSS MB':>8}")
    print("-" * 78)
    b_s = float("nan")
    if bare:
        b_s = med([b["wall_s"] for b in bare])
        print(f"{'bare Spark session: start, count, stop':50} {b_s:>8.2f} {med([b['peak_rss'] for b in bare]) / 2**20:>8.0f} {med([b['peak_pss'] for b in bare]) / 2**20:>8.0f}")  # fmt: skip
        print(f"{'  of which session start (import .. getOrCreate)':50} {med([b['import_s'] + b['session_s'] for b in bare]):>8.2f}")  # fmt: skip
        print(f"{'  of which count':50} {med([b['count_s'] for b in bare]):>8.2f}")
        print(f"{'  of which stop':50} {med([b['stop_s'] for b in bare]):>8.2f}")
        d_s = med([d["wall_s"] for d in bare_default])
        print(f"{'bare session with Spark JVM defaults (no sparkcdc':50} {d_s:>8.2f} {med([d['peak_rss'] for d in bare_default]) / 2**20:>8.0f} {med([d['peak_pss'] for d in bare_default]) / 2**20:>8.0f}")  # fmt: skip
        print(f"{'  JVM options, no class data archive)':50}")
    r_s = report(f"sparkcdc run, {args.txn_rows} row(s), new changefeed", runs)
    if others:
        o_s = report("sparkcdc run of --also-src", others)
        print(f"--also-src - bare session: {o_s - b_s:+.2f}s; ratio {o_s / b_s:.2f}x")
    if variants:
        v_s = report("sparkcdc run, variant", variants)
        print(f"variant - bare session: {v_s - b_s:+.2f}s; ratio {v_s / b_s:.2f}x")
    print()
    if bare:
        _print_memory("bare session (last run)", bare[-1])
    _print_memory("sparkcdc run (last run)", runs[-1])
    if others:
        _print_memory("--also-src (last run)", others[-1])
    if variants:
        _print_memory(f"variant {' '.join(args.variant_conf + args.variant_env)} (last run)", variants[-1])
    print()
    if bare:
        print(
            f"sparkcdc run - bare session: {r_s - b_s:+.2f}s; ratio {r_s / b_s:.2f}x "
            f"(target: within +2 s: {'met' if r_s - b_s <= 2.0 else 'not met'}); "
            f"load average 1 min during the runs: {min(loads):.2f}-{max(loads):.2f}"
        )
        print(
            f"sparkcdc run - bare session with Spark's JVM defaults: {r_s - d_s:+.2f}s; ratio {r_s / d_s:.2f}x"
        )
    else:
        print(f"load average 1 min during the runs: {min(loads):.2f}-{max(loads):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
