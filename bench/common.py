"""What the throughput benchmarks share: child processes, the process tree's memory, the baselines.

- ``TreeSampler``: RSS (and PSS) of a process and all its descendants over time, the JVM and the
  Python processes apart, with the processes of the largest sample; ``print_timeline`` prints it.
- ``run_candidate``: ``script --candidate NAME --spec JSON`` in a child process whose tree is sampled;
  ``Child``: a child that talks JSON lines both ways (a changefeed that runs until told to stop).
- ``run_watched`` and ``sparkcdc_run``: a command (``sparkcdc run --start-ts … --target-ts …``, as a
  user runs it) with its tree sampled; ``steady``: rate and fixed cost from two backlog sizes.
- ``write_rounds``: a workload written in rounds, a ``query_tso`` mark between rounds.
- The baselines every throughput bench prints in the same run: ``python_mysql_replication`` and
  ``mariadb_binlog`` (bench/capture's candidates), ``bare_spark`` (bench/startup's baseline) and
  ``librdkafka_ceiling`` (pre-rendered messages produced with the Kafka sink's producer settings).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, NamedTuple

import psutil

ROOT = Path(__file__).resolve().parents[1]
MB = 2**20


def load_bench(name: str) -> ModuleType:
    """``bench/<name>/run.py`` as a module (imported once)."""
    mod_name = f"sparkcdc_bench_{name}_run"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, ROOT / "bench" / name / "run.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"bench/{name}/run.py not found under {ROOT}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def pyspark_env(**extra: str) -> dict[str, str]:
    """This environment with Spark's Python workers on this interpreter."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **extra)
    env.pop("SPARKCDC_SPARK_MASTER", None)
    return env


def loadavg() -> str:
    """``/proc/loadavg``'s three averages, to print beside a figure."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


# --- memory of a process tree ----------------------------------------------------------------------


class Sample(NamedTuple):
    """One sample of a process tree (bytes; pss is 0 when not read in this sample)."""

    t: float
    jvm: int
    python: int
    pss: int

    @property
    def rss(self) -> int:
        """RSS of the whole tree."""
        return self.jvm + self.python


def label(proc: psutil.Process) -> str:
    """What a process of the tree runs: java, or the module or script a Python process runs."""
    try:
        cmd = proc.cmdline()
        name = proc.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    if name == "java" or not cmd:
        return name
    if "-m" in cmd:
        i = cmd.index("-m")
        return " ".join(cmd[i + 1 : i + 3])
    return " ".join(os.path.basename(c) for c in cmd[:2])


class TreeSampler(threading.Thread):
    """Samples the RSS of a process and its descendants (JVM and Python apart) until stopped.

    PSS is read every ``pss_every``-th sample: it needs each process's smaps (≈ 15 ms of CPU for
    a Spark tree on the 2-core machine), RSS does not. Forked Python workers share pages, so the
    RSS sum counts those pages in every worker; the PSS sum splits them.
    """

    def __init__(self, pid: int | None = None, interval: float = 0.2, pss_every: int = 5) -> None:
        super().__init__(name="tree-sampler", daemon=True)
        self.root = psutil.Process(pid)
        self.interval = interval
        self.pss_every = max(1, pss_every)
        self.samples: list[Sample] = []
        self.at_peak: list[tuple[str, int]] = []
        """The processes of the largest sample: (what it runs, RSS), largest first."""
        self._stop_event = threading.Event()

    def sample(self) -> None:
        """One sample of the tree."""
        with_pss = len(self.samples) % self.pss_every == 0
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        jvm = python = pss = 0
        here: list[tuple[psutil.Process, int]] = []
        for p in procs:
            try:
                if with_pss:
                    mem = p.memory_full_info()
                    pss += int(getattr(mem, "pss", mem.rss))
                else:
                    mem = p.memory_info()
                rss = int(mem.rss)
                is_jvm = p.name() == "java"
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue  # a worker that just exited
            if is_jvm:
                jvm += rss
            else:
                python += rss
            here.append((p, rss))
        if not here:
            return
        s = Sample(time.time(), jvm, python, pss)
        if s.rss > self.peak_rss:
            named = ((label(p), r) for p, r in here)
            self.at_peak = sorted(((n, r) for n, r in named if n != "?"), key=lambda x: -x[1])
        self.samples.append(s)

    def run(self) -> None:
        """Sample until stopped."""
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self, last_sample: bool = True) -> TreeSampler:
        """Take a last sample (if the tree still runs) and stop."""
        if last_sample:
            self.sample()
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)
        return self

    @property
    def peak_rss(self) -> int:
        """Largest RSS of the whole tree."""
        return max((s.rss for s in self.samples), default=0)

    @property
    def peak_jvm(self) -> int:
        """Largest RSS of the JVM."""
        return max((s.jvm for s in self.samples), default=0)

    @property
    def peak_python(self) -> int:
        """Largest RSS of the Python processes together."""
        return max((s.python for s in self.samples), default=0)

    @property
    def peak_pss(self) -> int:
        """Largest PSS of the whole tree (of the samples that read it)."""
        return max((s.pss for s in self.samples), default=0)

    def peak_between(self, t0: float, t1: float) -> int:
        """Largest RSS of the tree between two wall times."""
        return max((s.rss for s in self.samples if t0 <= s.t <= t1), default=0)

    def summary(self) -> dict[str, Any]:
        """The peaks and the samples, JSON-able."""
        return {
            "peak_rss": self.peak_rss,
            "peak_jvm": self.peak_jvm,
            "peak_python": self.peak_python,
            "peak_pss": self.peak_pss,
            "at_peak": self.at_peak,
            "timeline": [list(s) for s in self.samples],
        }


def memory_line(m: dict[str, Any]) -> str:
    """Peak RSS of the tree (JVM + Python) and peak PSS, in MB."""
    return (
        f"peak RSS {m['peak_rss'] / MB:,.0f} MB (JVM {m['peak_jvm'] / MB:,.0f} + Python "
        f"{m['peak_python'] / MB:,.0f}), peak PSS {m['peak_pss'] / MB:,.0f} MB"
    )


def print_timeline(
    m: dict[str, Any], t0: float, marks: dict[str, tuple[float, float]] | None = None, step: float = 0.0
) -> None:
    """RSS over time of a sampled tree: the largest sample of each ``step`` seconds, and its PSS.

    ``m`` is ``TreeSampler.summary()``; ``marks`` names phases by (start, end) wall time. The
    default step is 2 s, longer for a long run (about 20 lines).
    """
    samples = [Sample(*s) for s in m["timeline"]]
    if not samples:
        return
    step = step or max(2.0, round((samples[-1].t - samples[0].t) / 20))
    print(f"RSS over time (largest sample of each {step:.0f} s; MB; PSS of the nearest sample that read it):")
    print(f"{'s':>7} {'JVM':>6} {'Python':>7} {'RSS':>6} {'PSS':>6}  phase")
    k = 0
    while k < len(samples):
        start = samples[k].t
        bucket = []
        while k < len(samples) and samples[k].t < start + step:
            bucket.append(samples[k])
            k += 1
        top = max(bucket, key=lambda s: s.rss)
        with_pss = [s for s in bucket if s.pss]
        pss = max(with_pss, key=lambda s: s.pss).pss if with_pss else 0
        phase = next((n for n, (a, b) in (marks or {}).items() if a <= top.t <= b), "")
        print(
            f"{top.t - t0:>7.1f} {top.jvm / MB:>6.0f} {top.python / MB:>7.0f} {top.rss / MB:>6.0f} "
            f"{(f'{pss / MB:.0f}' if pss else '-'):>6}  {phase}"
        )
    print("the processes of the largest sample (RSS MB; forked workers share pages, counted in each):")
    for name, rss in m["at_peak"]:
        print(f"  {rss / MB:>6.0f}  {name[:90]}")


# --- child processes -----------------------------------------------------------------------------------


def run_candidate(
    script: str | Path,
    name: str,
    spec: dict[str, Any],
    *,
    interval: float = 0.1,
    pss_every: int = 10,
    timeout: float = 7200,
) -> dict[str, Any]:
    """``script --candidate NAME --spec JSON`` in a child; its last JSON line plus its tree's memory.

    Adds ``tree_peak_rss`` and ``memory`` (``TreeSampler.summary()``) to the child's result.
    """
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(
            [sys.executable, str(script), "--candidate", name, "--spec", json.dumps(spec)],
            stdout=out,
            env=pyspark_env(),
        )
        sampler = TreeSampler(p.pid, interval=interval, pss_every=pss_every)
        sampler.start()
        try:
            p.wait(timeout=timeout)
        finally:
            sampler.stop(last_sample=False)
            if p.poll() is None:
                p.kill()
                p.wait(30)
        if p.returncode != 0:
            raise RuntimeError(f"candidate {name} exited with {p.returncode} (its stderr is above)")
        out.seek(0)
        lines = [x for x in out.read().decode().splitlines() if x.startswith("{")]
    result = dict(json.loads(lines[-1]))
    result["memory"] = sampler.summary()
    result["tree_peak_rss"] = sampler.peak_rss
    return result


@dataclass
class Child:
    """A child process whose stdout lines are JSON; ``tell_stop`` writes a line to its stdin."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    @classmethod
    def spawn(cls, argv: Sequence[str]) -> Child:
        """Start ``python argv…`` with Spark's Python workers on this interpreter."""
        proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=pyspark_env(),
        )
        child = cls(proc)
        threading.Thread(target=child._pump, daemon=True).start()
        return child

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(line)
        self.lines.put("")  # end of output

    def next_json(self, timeout: float) -> dict[str, Any]:
        """The next JSON line, or an error naming the exit code."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise TimeoutError(f"the child process printed nothing within {timeout:.0f}s") from None
        if not line:
            code = self.proc.wait(timeout=60)
            raise RuntimeError(f"the child process exited with {code} (its stderr is above)")
        return dict(json.loads(line))

    def tell_stop(self) -> None:
        """Ask the child to stop (one line on its stdin)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """Kill the child if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@dataclass
class Watched:
    """A command run with its process tree sampled."""

    rc: int
    stderr: str
    t0: float
    wall: float
    memory: dict[str, Any]


def run_watched(
    cmd: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None, *, interval: float = 0.2
) -> Watched:
    """Run ``cmd`` to its end (stdout discarded, stderr kept) and sample its tree's memory."""
    with tempfile.TemporaryFile() as err:
        t0 = time.time()
        p = subprocess.Popen(
            list(cmd), stdout=subprocess.DEVNULL, stderr=err, env=env or pyspark_env(), cwd=cwd
        )
        sampler = TreeSampler(p.pid, interval=interval)
        sampler.start()
        try:
            p.wait()
        finally:
            wall = time.time() - t0
            sampler.stop(last_sample=False)
        err.seek(0)
        return Watched(p.returncode, err.read().decode(errors="replace"), t0, wall, sampler.summary())


def sparkcdc_run(
    upstream: str,
    sink: str,
    start_ts: int,
    target_ts: int,
    data_dir: str,
    *,
    master: str = "local[2]",
    trigger: str | None = None,
    config_toml: str | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``sparkcdc run --start-ts … --target-ts …`` as a user runs it; wall time, phases, memory.

    Phases (seconds from the process start: Spark up, query started, first batch committed,
    target-ts reached) come from its debug log, read as bench/startup reads them.
    """
    startup = load_bench("startup")
    cmd = [
        sys.executable, "-m", "sparkcdc.cli.main", "--log-level", "debug", "--log-format", "json",
        "run", "--upstream-uri", upstream, "--sink-uri", sink,
        "--start-ts", str(start_ts), "--target-ts", str(target_ts),
        "--data-dir", data_dir, "--master", master, "--no-progress",
    ]  # fmt: skip
    if trigger:
        cmd += ["--trigger-interval", trigger]
    if config_toml:
        path = os.path.join(data_dir, f"changefeed-{uuid.uuid4().hex[:8]}.toml")
        os.makedirs(data_dir, exist_ok=True)
        Path(path).write_text(config_toml)
        cmd += ["--config", path]
    w = run_watched(cmd, env)
    if w.rc != 0:
        raise RuntimeError(f"sparkcdc run exited with {w.rc}: {w.stderr[-3000:]}")
    phases = {k: v for k, v in startup._phases(w.stderr, w.t0).items() if v < w.wall}
    return {"wall": w.wall, "t0": w.t0, "phases": phases, "memory": w.memory}


def steady(n1: int, s1: float, n2: int, s2: float) -> tuple[float, float]:
    """Steady rate (rows/s) and fixed cost (s) from two runs: ΔN ÷ Δtime, and the intercept."""
    if n2 == n1 or s2 <= s1:
        return float("nan"), float("nan")
    rate = (n2 - n1) / (s2 - s1)
    return rate, s1 - n1 / rate


# --- a workload written in rounds -------------------------------------------------------------------------


class Mark(NamedTuple):
    """A point between rounds: a ts every later commit is above, and the binlog offset there."""

    ts: int
    offset: Any  # sparkcdc.capture.offset.Offset
    rows: int
    """Row changes written before this mark (since the first)."""


def write_rounds(
    db: Any, rounds: Sequence[int], write_round: Callable[[Any, int, int], int], first_id: int = 1
) -> list[Mark]:
    """Call ``write_round(conn, first_id, rows)`` for each size; a mark before and after each round.

    ``write_round`` returns the row changes it wrote; ids of the first round start at ``first_id``,
    those of round k after the previous rounds'. Returns ``len(rounds) + 1`` marks.
    """
    from sparkcdc.capture.start import head_offset
    from sparkcdc.capture.upstream import UpstreamConfig

    up = UpstreamConfig.from_uri(db.uri)
    first = head_offset(up)
    marks = [Mark(first.ts, first, 0)]
    next_id = first_id
    conn = db.connect("bench")
    try:
        for rows in rounds:
            written = write_round(conn, next_id, rows)
            next_id += rows
            head = head_offset(up)
            marks.append(Mark(head.ts, head, marks[-1].rows + written))
    finally:
        conn.close()
    return marks


def add_backlog_args(ap: argparse.ArgumentParser) -> None:
    """The arguments of the workload every whole-process bench writes (``write_backlogs``)."""
    ap.add_argument(
        "--rows", type=int, default=200_000, help="N: row changes of the first round (default 200000)"
    )
    ap.add_argument(
        "--backlog-factor",
        type=int,
        default=3,
        help="the second whole-process run covers N x this (default 3)",
    )
    ap.add_argument(
        "--memory-rows",
        type=int,
        default=0,
        help="also a whole-process run over a separate backlog of this many changes",
    )
    ap.add_argument(
        "--big-txn",
        type=int,
        default=0,
        help="also a whole-process run over one transaction of this many rows",
    )
    ap.add_argument(
        "--repeat-whole",
        type=int,
        default=1,
        help="whole-process runs of N and N x factor; the fastest counts",
    )
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument(
        "--also-src",
        help="also run the --memory-rows backlog with another checkout's src first on PYTHONPATH, "
        "right after the run of this tree (a change compared under the same load)",
    )
    ap.add_argument(
        "--variant-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="also run the --memory-rows backlog with this variable set (repeatable: one run each)",
    )


def memory_variants(args: argparse.Namespace) -> list[tuple[str, dict[str, str] | None]]:
    """(label, environment) of the ``--memory-rows`` runs: this tree, then ``--also-src`` and each
    ``--variant-env``, to be run one after the other."""
    out: list[tuple[str, dict[str, str] | None]] = [("", None)]
    if args.also_src:
        env = pyspark_env()
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in [os.path.abspath(args.also_src), env.get("PYTHONPATH")] if p
        )
        out.append(("--also-src", env))
    for item in args.variant_env:
        name, _, value = item.partition("=")
        out.append((item, pyspark_env(**{name: value})))
    return out


def whole_process_runs(
    runs: list[tuple[str, Mark, Mark]], args: argparse.Namespace
) -> Iterator[tuple[int, int, str, Mark, Mark, dict[str, str] | None]]:
    """The whole-process runs in order: (round, index, key, start mark, end mark, environment).

    ``--repeat-whole`` rounds of N and N x factor; every other backlog once, the ``--memory-rows``
    one with each of ``memory_variants`` in turn (its key then names the variant).
    """
    index = 0
    for rep in range(args.repeat_whole):
        for name, a, b in runs:
            if rep and name not in ("N", "factor"):
                continue  # the memory and big-transaction runs once
            for label, env in memory_variants(args) if name == "memory" else [("", None)]:
                yield rep, index, f"{name} {label}" if label else name, a, b, env
                index += 1


def write_backlogs(
    db: Any,
    args: argparse.Namespace,
    write_round: Callable[[Any, int, int], int],
    write_big_txn: Callable[[Any, int, int], int],
) -> tuple[list[Mark], list[tuple[str, Mark, Mark]]]:
    """Write N and N x (factor - 1) changes, then the ``--memory-rows`` backlog (rounds of 1M) and the
    ``--big-txn`` transaction; print the workload. Returns the first rounds' marks and the
    (name, from, to) ranges of the whole-process runs: ``N``, ``factor``, ``memory``, ``big-txn``."""
    t0 = time.monotonic()
    sizes = [args.rows, args.rows * (args.backlog_factor - 1)]
    marks = write_rounds(db, sizes, write_round)
    runs: list[tuple[str, Mark, Mark]] = [("N", marks[0], marks[1]), ("factor", marks[0], marks[2])]
    if args.memory_rows:
        rounds = [min(1_000_000, args.memory_rows - k) for k in range(0, args.memory_rows, 1_000_000)]
        more = write_rounds(db, rounds, write_round, sum(sizes) + 1)
        base = marks[-1].rows
        big = [Mark(m.ts, m.offset, m.rows + base) for m in more]
        runs.append(("memory", big[0], big[-1]))
    if args.big_txn:
        txn = write_rounds(db, [args.big_txn], write_big_txn, sum(sizes) + args.memory_rows + 1)
        runs.append(("big-txn", txn[0], txn[1]))
    print(
        f"workload: {', '.join(f'{nm} {b.rows - a.rows:,} changes' for nm, a, b in runs)}; "
        f"written in {time.monotonic() - t0:.1f}s; {loadavg()}",
        flush=True,
    )
    return marks, runs


def run_baselines(
    db: Any, marks: list[Mark], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """python-mysql-replication over N, ``mariadb-binlog`` over N x factor, a bare Spark session."""
    print("baselines: python-mysql-replication decode (N) ...", flush=True)
    pmr = python_mysql_replication(db, marks[0].offset, marks[1].offset)
    print(f"  {pmr['rate']:,.0f} rows/s ({loadavg()})", flush=True)
    print(f"baselines: mariadb-binlog -v decode (N x {args.backlog_factor}) ...", flush=True)
    mbl = mariadb_binlog(db, marks[0].offset, marks[2].offset)
    print(f"  {mbl['rate']:,.0f} rows/s ({loadavg()})", flush=True)
    print("baselines: bare Spark session (start, count, stop) ...", flush=True)
    bare = bare_spark(args.master)
    print(f"  {bare['wall_s']:.1f} s ({loadavg()})", flush=True)
    return pmr, mbl, bare


def report_row(name: str, rows: int | str, seconds: float, rate: float, extra: str = "") -> str:
    """One line of a bench's report table (``REPORT_HEADER``)."""
    rows_s = f"{rows:,}" if isinstance(rows, int) else rows
    return f"{name:58} {rows_s:>10} {seconds:>8.2f} {rate:>10,.0f}  {extra}"


REPORT_HEADER = f"{'measure':58} {'rows':>10} {'seconds':>8} {'rows/s':>10}  notes\n" + "-" * 110


def print_steady(
    whole: dict[str, Any],
    f: int,
    bare: dict[str, Any],
    mbl: dict[str, Any],
    pmr: dict[str, Any],
    target: tuple[str, float],
) -> float:
    """The steady rate from the N and N x ``f`` whole runs against ``target`` (name, rows/s) and
    40 % of ``mariadb-binlog``; returns it (nan without both runs)."""
    if "N" not in whole or "factor" not in whole:
        return float("nan")
    rn, rf = whole["N"], whole["factor"]
    rate, fixed = steady(rn["rows"], rn["wall"], rf["rows"], rf["wall"])
    print(
        f"whole process, steady rate (rows of N x {f} - rows of N) / (time - time): {rate:,.0f} rows/s; "
        f"fixed cost (intercept) {fixed:.1f} s; bare Spark session {bare['wall_s']:.1f} s"
    )
    name, goal = target
    print(
        f"  target 1: {name} steady >= {goal:,.0f} rows/s: {'met' if rate >= goal else 'not met'} ({rate:,.0f})"
    )
    print(
        f"  target 1: steady / mariadb-binlog >= 40 %: {rate / mbl['rate'] * 100:.0f} % "
        f"({'met' if rate >= 0.4 * mbl['rate'] else 'not met'})"
    )
    if "ceiling" in whole:
        print(f"  steady / librdkafka ceiling: {rate / whole['ceiling']['rate'] * 100:.0f} %")
    print(f"  steady / python-mysql-replication: {rate / pmr['rate']:.2f}x")
    for label_, r in (("N", rn), ("N x factor", rf)):
        print(f"  {label_}: {r['rows'] / r['wall'] / pmr['rate']:.2f}x python-mysql-replication, "
              f"{r['rows'] / r['wall'] / mbl['rate'] * 100:.0f} % of mariadb-binlog (whole run, start included)")  # fmt: skip
    return rate


def print_whole_memory(whole_runs: list[tuple[str, Mark, Mark]], whole: dict[str, Any]) -> None:
    """Peak memory of each whole-process run, whether it grows with the backlog (target 3: <= 1 GB),
    and the RSS over time of the largest run."""
    runs = {k: r for k, r in whole.items() if "memory" in r}
    if not runs:
        return
    print()
    print("memory of the whole process tree (sparkcdc run: JVM + Python processes):")
    peaks = []
    for name, a, b in whole_runs:
        r = runs.get(name)
        if r is not None:
            peaks.append((b.rows - a.rows, r["memory"]["peak_rss"]))
            print(f"  {name:8} {b.rows - a.rows:>10,} changes: {memory_line(r['memory'])}")
    if len(peaks) >= 2:
        lo, hi = min(peaks), max(peaks)
        grows = hi[1] > lo[1] * 1.10
        print(
            f"  peak RSS from {lo[0]:,} to {hi[0]:,} changes: {lo[1] / MB:,.0f} -> {hi[1] / MB:,.0f} MB "
            f"({'grows' if grows else 'does not grow'} with the backlog, > 10 % counts as growing); "
            f"target 3 (<= 1 GB): {'met' if all(p <= 2**30 for _, p in peaks) else 'not met'}"
        )
    largest = max(runs.values(), key=lambda r: r["rows"])
    print(f"RSS over time of the largest run ({largest['rows']:,} changes):")
    print_timeline(largest["memory"], largest["t0"])


# --- baselines ------------------------------------------------------------------------------------------------


def run_pymysqlreplication(spec: dict[str, Any]) -> dict[str, Any]:
    """Candidate: python-mysql-replication decoding every row of [start, end) (JSON offsets in ``spec``).

    bench/capture's candidate (b) checks the end after an event's rows, so it also counts the first
    event past the end when more follows (a workload written in rounds); this one stops before it.
    """
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    from sparkcdc.capture.offset import Offset, file_seq
    from sparkcdc.capture.upstream import UpstreamConfig

    up = UpstreamConfig.from_uri(spec["uri"])
    start, end = Offset.from_json(spec["start"]), Offset.from_json(spec["end"])
    stream = BinLogStreamReader(
        connection_settings={"host": up.host, "port": up.port, "user": up.user, "passwd": up.password},
        server_id=90_017,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        enable_logging=False,
    )
    rows = 0
    end_key = end.key()
    t0 = time.monotonic()
    try:
        for ev in stream:
            # log_pos is where the event ends: stop at the first event that starts at or after the end.
            if (file_seq(stream.log_file), stream.log_pos - ev.event_size) >= end_key:
                break
            for row in ev.rows:
                rows += 1 if row else 0
    finally:
        stream.close()
    return {"rows": rows, "seconds": time.monotonic() - t0}


def python_mysql_replication(db: Any, start: Any, end: Any) -> dict[str, Any]:
    """python-mysql-replication 1.0.17 decoding every row of [start, end), in its own process."""
    spec = {"uri": db.uri, "start": start.to_json(), "end": end.to_json()}
    r = run_candidate(Path(__file__), "pymysqlreplication", spec)
    r["maxrss"] = r["tree_peak_rss"]
    r["rate"] = r["rows"] / r["seconds"]
    return r


def mariadb_binlog(db: Any, start: Any, end: Any) -> dict[str, Any]:
    """``mariadb-binlog -v`` decoding [start, end) (bench/capture's candidate (c), the C decoder)."""
    cap = load_bench("capture")
    r = dict(cap.measure_mariadb_binlog(db, SimpleNamespace(start=start, end=end)))
    r["rate"] = r["rows"] / r["seconds"]
    return r


def bare_spark(master: str = "local[2]") -> dict[str, Any]:
    """A bare Spark session started, counting one row and stopped, in a fresh process (bench/startup)."""
    startup = load_bench("startup")
    with tempfile.TemporaryDirectory(prefix="bench-bare-") as cwd:
        return dict(startup.run_bare(master, pyspark_env(), cwd))


def read_topic(
    bootstrap: str, topic: str, keep: int = 0, timeout: float = 600
) -> tuple[int, list[tuple[int, bytes | None, bytes | None]]]:
    """Count every message of a topic by reading it all; keep the first ``keep`` (partition, key, value).

    Tansu's high watermarks lag behind what it stores, so they cannot be summed.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    kept: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        parts = list(c.list_topics(topic, timeout=30).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        n = 0
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions of {topic} did not reach their end within {timeout:.0f}s")
            for m in c.consume(num_messages=10000, timeout=0.5):
                err = m.error()
                part = int(m.partition() or 0)
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"consumer error on {topic}: {err}")
                    at_end.add(part)
                    continue
                at_end.discard(part)
                n += 1
                if len(kept) < keep:
                    kept.append((part, m.key(), m.value()))
        return n, kept
    finally:
        c.close()


@contextmanager
def kafka_broker(protocol: str, canal_query: str = "protocol=canal-json") -> Iterator[tuple[Any, str]]:
    """A fresh Tansu broker and the sink URI query for ``protocol``: Avro with a local schema
    registry (precise decimals), stopped on the way out; canal-json with ``canal_query``."""
    from sparkcdc.registry.local import LocalSchemaRegistry
    from sparkcdc.services.tansu import LocalTansu

    with LocalTansu() as broker:
        if protocol != "avro":
            yield broker, canal_query
            return
        registry = LocalSchemaRegistry().start()
        try:
            yield broker, f"protocol=avro&schema-registry={registry.url}&avro-decimal-handling-mode=precise"
        finally:
            registry.stop()


def librdkafka_ceiling(
    sink_uri: str, messages: list[tuple[int, bytes | None, bytes | None]], topic: str
) -> dict[str, Any]:
    """Produce pre-rendered messages to ``topic`` with the Kafka sink's producer settings; rows/s.

    The broker ceiling: librdkafka's ``produce`` in a loop (each message to its original
    partition, ``delivery.report.only.error``), then ``flush`` until every message is acknowledged.
    The topic is created by the sink's own check (same partition count).
    """
    from confluent_kafka import Producer

    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.sink import create_sink
    from sparkcdc.sink.kafka.config import KafkaOptions

    cfg = ReplicaConfig.from_dict({})
    create_sink(sink_uri, cfg, "bench-ceiling").check()
    conf = KafkaOptions.parse(sink_uri, cfg, "bench-ceiling").producer_config()
    conf["delivery.report.only.error"] = True
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None and len(failed) < 5:
            failed.append(str(err))

    producer = Producer(conf)
    produce = producer.produce
    poll = producer.poll
    # connection, metadata and idempotent producer id first, not timed
    for part, key, value in messages[:1000]:
        produce(topic, value=value, key=key, partition=part, on_delivery=on_delivery)
    producer.flush(60)
    t0 = time.perf_counter()
    for part, key, value in messages:
        while True:
            try:
                produce(topic, value=value, key=key, partition=part, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.05)
    left = producer.flush(120)
    seconds = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"librdkafka ceiling: {left} messages not delivered, errors {failed}")
    return {"messages": len(messages), "seconds": seconds, "rate": len(messages) / seconds}


CANDIDATES = {"pymysqlreplication": run_pymysqlreplication}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="one candidate of the shared benchmark code")
    ap.add_argument("--candidate", required=True, choices=sorted(CANDIDATES))
    ap.add_argument("--spec", required=True)
    cli = ap.parse_args()
    print(json.dumps(CANDIDATES[cli.candidate](json.loads(cli.spec))), flush=True)
