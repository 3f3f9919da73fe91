"""Scaling from 1 to 2 cores: storage, Kafka and snapshot changefeeds on local[1], local[2] and a 2-worker cluster.

Usage (from the repository root)::

    .venv/bin/python bench/scale/run.py [--rows 2000000] [--snapshot-rows 500000] [--repeat 2]
                                        [--only storage,kafka,snapshot] [--setups local1,local2,cluster]

Starts a private MariaDB, a moto S3 server (every changefeed's data dir, so that all setups keep
their state the same way) and a Spark standalone cluster of two one-core workers, each with a
private /tmp (``LocalSparkCluster(workers=2, cores=1)``). It fills a 500,000-row table for the
snapshot (``bench/snapshot``'s table), then writes one binlog range of mixed-type row changes
(``bench/storage``'s workload) between two ``query_tso`` calls S and T. Every candidate is a
``sparkcdc run`` subprocess, as a user runs it, with a new changefeed id and data dir:

- storage:  ``--start-ts S --target-ts T`` to ``file://…?protocol=csv`` (a folder under this
  directory, outside /tmp, so the cluster's workers write it too; removed at the end);
- kafka:    the same range, canal-json to a fresh Tansu broker (``LocalTansu``) per run;
- snapshot: ``[snapshot] mode = "initial"`` of the 500,000-row table to the CSV storage sink,
  with ``--target-ts`` = the head just before the start (the command exits once the stream after
  the snapshot's handover is caught up).

Each runs on ``local[1]``, ``local[2]`` and the cluster (``--master spark://…`` with the cluster's
driver environment and ``--spark-conf`` settings), ``--repeat`` times, interleaved; ``--setups``
may add ``pinned1``: ``local[1]`` with the driver's process tree pinned to one CPU (``local[1]``
alone still runs its JVM, driver and source process on both). A micro-batch reads up to 64 MB of
binlog: the default 2,000,000 changes (≈ 240 MB) make four batches, 500,000 (≈ 61 MB) only one,
which leaves nothing after the first batch. Measured per run:

- whole command: launch to exit (Spark session start, changefeed start, every batch, shutdown);
- after the first batch: the rows of batches 2..n over the time from batch 1's end to the last
  batch's commit (the driver's "reached target-ts" line). Batch times come from Spark's event log
  (written by the driver with ``--spark-conf spark.eventLog.*``: each micro-batch's trigger start
  and duration by phase, and the launch and finish of every task); the first batch's rows from the
  changefeed's ``checkpoint.json``, read every 0.5 s;
- snapshot: launch to the log line "initial snapshot … done", and the snapshot's own report
  (``done.json``: read / correct / write seconds);
- CPU seconds of the driver's process tree, the cluster (master, workers, executors and their
  Python workers), MariaDB, the broker, moto and everything else on the machine, sampled with
  psutil every second; the 1-minute load average at the start and the end of each run.

Speed-up = rows/s (2 cores) / rows/s (local[1]), best run against best run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUCKET = "scale"
KINDS = ("storage", "kafka", "snapshot")
SETUPS = ("local1", "local2", "cluster", "pinned1")
RUN_TIMEOUT = 1800.0
POLL_INTERVAL = 0.5
CPU_INTERVAL = 1.0
STREAM_RULES = "bench.*"


def bench_module(name: str) -> ModuleType:
    """``bench/<name>/run.py`` as a module (to reuse its workload and helpers)."""
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


# --- the Spark setups ----------------------------------------------------------------------------


@dataclass
class Setup:
    """One way of running Spark: a master URL, the driver's environment and extra ``--spark-conf``."""

    key: str
    label: str
    master: str
    cores: int
    env: dict[str, str]
    conf: dict[str, str] = field(default_factory=dict)
    cpus: set[int] | None = None
    """When set, the driver (and so every process it starts) may only run on these CPUs."""


def local_setup(cores: int) -> Setup:
    """``local[cores]``: driver and executor threads in one JVM."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARKCDC_SPARK_MASTER", None)
    return Setup(f"local{cores}", f"local[{cores}]", f"local[{cores}]", cores, env)


def pinned_setup() -> Setup:
    """``local[1]`` with the driver's whole process tree pinned to one CPU (the services are not)."""
    s = local_setup(1)
    s.key, s.label, s.cpus = "pinned1", "local[1] 1 CPU", {min(os.sched_getaffinity(0))}
    return s


def cluster_setup(cluster: Any) -> Setup:
    """The standalone cluster: the driver runs here, the executors on the workers."""
    cores = int(cluster.workers * cluster.cores)
    label = f"cluster {cluster.workers}x{cluster.cores}"
    return Setup("cluster", label, cluster.master_url, cores, cluster.driver_env(), cluster.spark_conf())


# --- CPU accounting ------------------------------------------------------------------------------


def session_processes(sid: int) -> list[psutil.Process]:
    """Every live process of session ``sid`` (a ``start_new_session`` child and all it started)."""
    found = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                found.append(p)
        except (OSError, psutil.Error):
            continue
    return found


def find_cluster_master(port: int) -> list[psutil.Process]:
    """The standalone master's JVM, found by its class and port on the command line."""
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if "org.apache.spark.deploy.master.Master" in cmd and str(port) in cmd:
            return [p]
    return []


def process_role(p: psutil.Process) -> str:
    """What a Spark-side process is, from its command line (for the CPU breakdown)."""
    try:
        cmd = " ".join(p.cmdline())
        name = str(p.name())
    except psutil.Error:
        return "gone"
    if name == "java":
        if "CoarseGrainedExecutorBackend" in cmd:
            return "executor JVMs"
        if "deploy.worker.Worker" in cmd or "deploy.master.Master" in cmd:
            return "master+worker JVMs"
        return "driver JVM"
    if not name.startswith("python"):
        return name  # e.g. the spark-submit launcher script, before it execs the JVM
    if "sparkcdc.cli.main" in cmd:
        return "driver Python"
    if "streaming_source_runner" in cmd or "pyspark.sql.worker" in cmd:
        return "source/planner Python"
    if "pyspark" in cmd:
        return "task Python workers"
    return name


def machine_busy(t: Any) -> float:
    """The machine's busy CPU seconds in ``psutil.cpu_times()``."""
    return float(sum(getattr(t, f) for f in ("user", "nice", "system", "irq", "softirq")))


def busy_cores(series: list[tuple[float, float]], a: float, z: float) -> float | None:
    """The machine's busy cores on average between wall times ``a`` and ``z`` (the samples at or
    just outside them: a sample every second); None when fewer than two samples span it."""
    before = [p for p in series if p[0] <= a]
    after = [p for p in series if p[0] >= z]
    if not before or not after or after[0][0] <= before[-1][0]:
        return None
    (t0, b0), (t1, b1) = before[-1], after[0]
    return (b1 - b0) / (t1 - t0)


class CpuMeter(threading.Thread):
    """CPU seconds per group of processes between ``start()`` and ``stop()``, sampled every second.

    A process's CPU time is read while it lives; one that ends between two samples loses at most
    its last second. ``other`` is the machine's busy time minus every group. ``machine_series``
    keeps the machine's busy seconds at each sample, for the busy cores of a part of the run.
    """

    def __init__(self, groups: dict[str, Callable[[], list[psutil.Process]]]) -> None:
        super().__init__(name="cpu-meter", daemon=True)
        self.groups = groups
        self.base: dict[tuple[int, float], float] = {}
        self.last: dict[tuple[int, float], float] = {}
        self.owner: dict[tuple[int, float], tuple[str, str]] = {}
        self.roles: dict[str, float] = {}
        self._halt = threading.Event()
        self._machine0 = psutil.cpu_times()
        self.machine_series: list[tuple[float, float]] = [(time.time(), machine_busy(self._machine0))]
        self._sample(self.base)

    def _sample(self, into: dict[tuple[int, float], float]) -> None:
        for g, lister in self.groups.items():
            try:
                procs = lister()
            except (OSError, psutil.Error):
                continue
            for p in procs:
                try:
                    key = (p.pid, p.create_time())
                    t = p.cpu_times()
                except psutil.Error:
                    continue  # ended meanwhile
                # Classified at every sample: a launcher script may exec the JVM under the same pid.
                role = process_role(p) if g in ("driver", "cluster") else g
                if role != "gone" or key not in self.owner:
                    self.owner[key] = (g, role)
                into[key] = t.user + t.system

    def run(self) -> None:
        """Sample until stopped."""
        while not self._halt.wait(CPU_INTERVAL):
            self.machine_series.append((time.time(), machine_busy(psutil.cpu_times())))
            self._sample(self.last)

    def stop(self) -> dict[str, float]:
        """Take a last sample; CPU seconds per group, plus ``other``, ``machine`` and ``steal``.

        ``roles`` then holds the driver's and the cluster's seconds by process role.
        """
        self._halt.set()
        self.join(timeout=10)
        self._sample(self.last)
        m0, m1 = self._machine0, psutil.cpu_times()
        self.machine_series.append((time.time(), machine_busy(m1)))
        busy = machine_busy(m1) - machine_busy(m0)
        out = {g: 0.0 for g in self.groups}
        for key, v in self.last.items():
            g, role = self.owner[key]
            used = max(0.0, v - self.base.get(key, 0.0))
            out[g] += used
            if g in ("driver", "cluster"):
                self.roles[role] = self.roles.get(role, 0.0) + used
        out["other"] = max(0.0, busy - sum(out.values()))
        out["machine"] = busy
        out["steal"] = getattr(m1, "steal", 0.0) - getattr(m0, "steal", 0.0)
        return out


# --- one `sparkcdc run` --------------------------------------------------------------------------


@dataclass
class Result:
    """What one candidate run measured."""

    kind: str
    setup: Setup
    rep: int
    rows: int = 0
    whole_s: float = 0.0
    events: EventLog | None = None
    """The micro-batches and tasks of Spark's event log."""
    rows_first: int | None = None
    """Rows of the first batch (from checkpoint.json)."""
    reached_s: float | None = None
    """Launch to the driver's "reached target-ts" line: the last batch committed."""
    snap_done_s: float | None = None
    snapshot: dict[str, Any] | None = None
    load: tuple[float, float] = (0.0, 0.0)
    cpu: dict[str, float] = field(default_factory=dict)
    roles: dict[str, float] = field(default_factory=dict)
    """CPU seconds of the driver's and the cluster's processes by role (driver JVM, task Python workers…)."""
    check: str = ""
    t0_wall: float = 0.0
    """The launch, as wall time."""
    machine_series: list[tuple[float, float]] = field(default_factory=list)
    """The machine's busy CPU seconds once a second (``CpuMeter.machine_series``)."""

    @property
    def steady_busy_cores(self) -> float | None:
        """The machine's busy cores on average after the first batch (stream kinds)."""
        if self.kind == "snapshot" or not self.later_batches or self.events is None:
            return None
        a = self.t0_wall + self.events.batches[0].end_s
        return busy_cores(self.machine_series, a, self.t0_wall + self.steady_end_s)

    @property
    def whole_rate(self) -> float:
        """Rows/s of the whole command (snapshot: launch to the snapshot's done line)."""
        secs = self.snap_done_s if self.kind == "snapshot" and self.snap_done_s else self.whole_s
        return self.rows / secs if secs else 0.0

    @property
    def steady_rate(self) -> float | None:
        """Rows/s after the first batch (snapshot: rows over the snapshot's own seconds)."""
        if self.kind == "snapshot":
            secs = float((self.snapshot or {}).get("seconds") or 0)
            return self.rows / secs if secs else None
        later = self.later_batches
        if not later or self.rows_first is None or self.events is None:
            return None
        secs = self.steady_end_s - self.events.batches[0].end_s
        return (self.rows - self.rows_first) / secs if secs > 0 else None

    @property
    def steady_end_s(self) -> float:
        """The last batch's commit: the "reached target-ts" line, else the last batch Spark logged."""
        if self.reached_s is not None:
            return self.reached_s
        logged = [b for b in self.later_batches if b.logged]
        return logged[-1].end_s if logged else 0.0

    @property
    def later_batches(self) -> list[Batch]:
        """Batches 2..n (empty with fewer than two batches)."""
        return self.events.batches[1:] if self.events is not None else []


class Driver:
    """A ``sparkcdc run`` subprocess in a session of its own; its output is timestamped line by line."""

    def __init__(
        self, args: list[str], env: dict[str, str], log_path: Path, cpus: set[int] | None = None
    ) -> None:
        self.log_path = log_path
        self.lines: list[tuple[float, str]] = []
        self._log = open(log_path, "w")
        self.t0_wall = time.time()
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sparkcdc.cli.main", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        if cpus:
            # Before the interpreter has started anything: the JVM and the Python workers inherit it.
            os.sched_setaffinity(self.proc.pid, cpus)
        self._pump = threading.Thread(target=self._read, name="driver-output", daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.t0, line.rstrip("\n")))
            self._log.write(line)
        self._log.flush()

    def first(self, pattern: str) -> float | None:
        """Seconds from launch to the first output line matching ``pattern``."""
        rx = re.compile(pattern)
        return next((t for t, line in list(self.lines) if rx.search(line)), None)

    def tail(self, n: int = 40) -> str:
        """The last lines of output."""
        return "\n".join(line for _, line in list(self.lines)[-n:])

    def wait(self, timeout: float) -> float:
        """Wait for the exit; seconds from launch. A non-zero exit or a timeout raises with the output."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TimeoutError(f"sparkcdc run did not finish within {timeout:.0f}s:\n{self.tail()}") from None
        took = time.monotonic() - self.t0
        self._pump.join(timeout=30)
        if rc != 0:
            raise RuntimeError(f"sparkcdc run exited with {rc}:\n{self.tail()}")
        return took

    def kill(self) -> None:
        """SIGKILL every process left in the driver's session (its JVM, Python workers), by pid."""
        for p in session_processes(self.proc.pid):
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def close(self) -> None:
        """Make sure nothing of the driver runs on; close the log."""
        if self.proc.poll() is None or session_processes(self.proc.pid):
            self.kill()
        self._log.close()


class CheckpointPoller(threading.Thread):
    """Reads the changefeed's ``checkpoint.json`` every 0.5 s; keeps each new ``rows_total``."""

    def __init__(self, state: Any) -> None:
        super().__init__(name="checkpoint-poller", daemon=True)
        self.state = state
        self.seen: list[tuple[float, int]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        """Poll until stopped."""
        while not self._halt.wait(POLL_INTERVAL):
            self.poll()

    def poll(self) -> None:
        """One read of checkpoint.json."""
        try:
            d = self.state.read_json("checkpoint.json")
        except Exception:  # not written yet, or a read racing the write: the next poll sees it
            return
        if d is not None:
            rows = int(d.get("rows_total", 0))
            if not self.seen or rows != self.seen[-1][1]:
                self.seen.append((time.time(), rows))

    def stop(self) -> None:
        """A last read, then stop."""
        self._halt.set()
        self.join(timeout=10)
        self.poll()


@dataclass
class Batch:
    """One micro-batch as Spark's event log shows it."""

    batch_id: int
    start_s: float
    """The trigger's start, seconds from launch."""
    seconds: float
    phases: dict[str, float]
    """Spark's ``durationMs`` of the batch in seconds: latestOffset, walCommit, addBatch, commitOffsets…"""
    tasks: list[tuple[float, float, str]] = field(default_factory=list)
    """(launch, finish) in seconds from launch and the executor of every task of the batch's jobs."""
    logged: bool = True
    """False for a batch seen only through its jobs: the driver stopped the query once the batch
    reached target-ts, before Spark posted its progress (``start_s`` is then its job's submission)."""

    @property
    def end_s(self) -> float:
        """The trigger's end (the batch is committed), seconds from launch."""
        return self.start_s + self.seconds

    @property
    def task_span(self) -> float:
        """First task launch to last task finish."""
        return max(z for _, z, _ in self.tasks) - min(a for a, _, _ in self.tasks) if self.tasks else 0.0

    @property
    def task_seconds(self) -> float:
        """The tasks' durations added up."""
        return sum(z - a for a, z, _ in self.tasks)


@dataclass
class EventLog:
    """What a driver's Spark event log says about its micro-batches and other jobs."""

    batches: list[Batch]
    other_tasks: list[tuple[float, float, str]]
    """Tasks of jobs outside the micro-batches (the initial snapshot's)."""


def event_log_conf(folder: Path) -> dict[str, str]:
    """Spark settings that write a plain JSON-lines event log into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": folder.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


def read_event_log(folder: Path, t0: float) -> EventLog:
    """The micro-batches (``QueryProgressEvent``) and the tasks of the event log in ``folder``."""
    job_batch: dict[int, int | None] = {}
    job_submitted: dict[int, float] = {}
    stage_job: dict[int, int] = {}
    tasks: list[tuple[int, float, float, str]] = []
    batches: dict[int, Batch] = {}
    for f in sorted(folder.rglob("*")):
        if not f.is_file() or f.name.startswith("."):
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue  # the last line of a log cut short
                ev = str(e.get("Event", ""))
                if ev == "SparkListenerJobStart":
                    bid = (e.get("Properties") or {}).get("streaming.sql.batchId")
                    job_batch[int(e["Job ID"])] = int(bid) if bid is not None else None
                    job_submitted[int(e["Job ID"])] = e["Submission Time"] / 1000 - t0
                    for sid in e.get("Stage IDs", []):
                        stage_job[int(sid)] = int(e["Job ID"])
                elif ev == "SparkListenerTaskEnd":
                    ti = e["Task Info"]
                    launch, finish = ti["Launch Time"] / 1000 - t0, ti["Finish Time"] / 1000 - t0
                    tasks.append((int(e["Stage ID"]), launch, finish, str(ti["Executor ID"])))
                elif ev.endswith("QueryProgressEvent"):
                    p = e["progress"]
                    start = datetime.fromisoformat(p["timestamp"]).timestamp() - t0
                    phases = {k: v / 1000 for k, v in (p.get("durationMs") or {}).items()}
                    batches[int(p["batchId"])] = Batch(
                        int(p["batchId"]), start, p["batchDuration"] / 1000, phases
                    )
    other = []
    for stage, launch, finish, executor in tasks:
        job = stage_job.get(stage, -1)
        bid = job_batch.get(job)
        if bid is None:
            other.append((launch, finish, executor))
            continue
        if bid not in batches:
            batches[bid] = Batch(bid, job_submitted[job], 0.0, {}, logged=False)
        batches[bid].tasks.append((launch, finish, executor))
    return EventLog([batches[k] for k in sorted(batches)], other)


@dataclass
class Context:
    """The services and the input shared by every run."""

    db: Any
    s3: Any
    cluster: Any
    work: Path
    out: Path
    start_ts: int
    target_ts: int
    stream_rows: int
    snapshot_rows: int
    timeout: float


def _cpu_groups(ctx: Context, driver: Callable[[], list[psutil.Process]], broker: Any) -> dict[str, Any]:
    master = find_cluster_master(ctx.cluster.port) if ctx.cluster is not None else []
    me = psutil.Process()
    groups: dict[str, Callable[[], list[psutil.Process]]] = {"driver": driver}
    if ctx.cluster is not None:
        cl = ctx.cluster
        groups["cluster"] = lambda: master + [p for i in range(cl.workers) for p in cl.worker_processes(i)]
    groups["mariadb"] = lambda: [psutil.Process(ctx.db.proc.pid)]
    if broker is not None:
        groups["broker"] = lambda: [psutil.Process(broker.proc.pid)] if broker.proc is not None else []
    groups["s3"] = lambda: [psutil.Process(ctx.s3.proc.pid)]
    groups["bench"] = lambda: [me]
    return groups


def run_one(ctx: Context, kind: str, setup: Setup, rep: int) -> Result:
    """One changefeed of ``kind`` on ``setup``, timed from launch to exit; checks what arrived."""
    from sparkcdc.capture.start import query_tso
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.pipeline.state import StateDir

    cid = f"scale-{kind}-{setup.key}-{rep}-{uuid.uuid4().hex[:6]}"
    data_dir = ctx.s3.sink_uri(f"{BUCKET}/state/{cid}")
    state = StateDir.parse(data_dir).child(cid)
    ckpt_root = ctx.work / "spark-checkpoints"
    out_dir = ctx.out / cid
    config = ctx.work / f"{cid}.toml"
    if kind == "snapshot":
        db_name = bench_module("snapshot").DB
        config.write_text(f'[filter]\nrules = ["{db_name}.*"]\n[snapshot]\nmode = "initial"\n')
    else:
        config.write_text(f'[filter]\nrules = ["{STREAM_RULES}"]\n')
    res = Result(kind, setup, rep)
    with contextlib.ExitStack() as stack:
        broker = None
        if kind == "kafka":
            from sparkcdc.services.tansu import LocalTansu

            broker = stack.enter_context(LocalTansu())
            sink = broker.sink_uri(cid, "protocol=canal-json")
        else:
            sink = f"file://{out_dir}?protocol=csv"
        if kind == "snapshot":
            # The snapshot starts at the head; the stream after it has nothing to do, so the command
            # exits once the checkpoint is past this ts (the head now, i.e. the snapshot's handover).
            span = ["--target-ts", str(query_tso(UpstreamConfig.from_uri(ctx.db.uri)))]
        else:
            span = ["--start-ts", str(ctx.start_ts), "--target-ts", str(ctx.target_ts)]
        args = [
            "run",
            "--upstream-uri",
            ctx.db.uri,
            "--sink-uri",
            sink,
            "--config",
            str(config),
            "-c",
            cid,
            "--data-dir",
            data_dir,
            "--master",
            setup.master,
            "--no-progress",
            *span,
        ]
        scratch = ctx.work / "tmp"
        scratch.mkdir(exist_ok=True)
        conf = {
            **setup.conf,
            **event_log_conf(ctx.work / "events" / cid),
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch}",
            "spark.sql.streaming.checkpointLocation": str(ckpt_root),
        }
        for k, v in conf.items():
            args += ["--spark-conf", f"{k}={v}"]
        # Spark's checkpoint (driver-local with an S3 data dir) and the driver's scratch files go to the
        # work dir, which is removed at the end.
        env = dict(
            setup.env,
            TMPDIR=str(scratch),
            SPARK_LOCAL_DIRS=str(ctx.work / "spark-local"),
        )
        sid: list[int] = []
        meter = CpuMeter(_cpu_groups(ctx, lambda: session_processes(sid[0]) if sid else [], broker))
        poller = CheckpointPoller(state)
        load0 = os.getloadavg()[0]
        meter.start()
        driver = Driver(args, env, ctx.work / f"{cid}.log", setup.cpus)
        stack.callback(driver.close)
        sid.append(driver.proc.pid)
        poller.start()
        try:
            res.whole_s = driver.wait(ctx.timeout)
        finally:
            poller.stop()
            res.cpu = meter.stop()
            res.roles = meter.roles
            res.machine_series = meter.machine_series
            res.t0_wall = driver.t0_wall
            res.load = (load0, os.getloadavg()[0])
        final = state.read_json("checkpoint.json") or {}
        res.events = read_event_log(ctx.work / "events" / cid, driver.t0_wall)
        if kind == "snapshot":
            res.rows = ctx.snapshot_rows
            res.snapshot = state.child("snapshot").read_json("done.json")
            res.snap_done_s = driver.first(r"initial snapshot of changefeed \S+ done")
            copied = int((res.snapshot or {}).get("rows_copied", -1))
            records = count_csv_records(out_dir)
            res.check = f"{copied:,} rows copied, {records:,} CSV records"
            if copied != ctx.snapshot_rows or records != ctx.snapshot_rows:
                res.check += f" (WARNING: expected {ctx.snapshot_rows:,})"
        else:
            res.rows = int(final.get("rows_total", 0))
            res.reached_s = driver.first(r"reached target-ts")
            batches = res.events.batches
            # The first read of checkpoint.json shows the first batch's rows if it came within a read
            # interval (plus the read itself) of that batch's end; a later batch takes seconds here.
            if len(batches) > 1 and poller.seen:
                t_seen, rows_seen = poller.seen[0]
                if rows_seen < res.rows and t_seen - driver.t0_wall < batches[0].end_s + 2 * POLL_INTERVAL:
                    res.rows_first = rows_seen
            if kind == "storage":
                got = count_csv_records(out_dir)
                res.check = f"{got:,} CSV records"
            else:
                assert broker is not None
                got = bench_module("kafka").read_topic(broker.bootstrap, cid)[0]
                res.check = f"{got:,} messages"
            if got != ctx.stream_rows or res.rows != ctx.stream_rows:
                res.check += f" (WARNING: {res.rows:,} rows reported, {ctx.stream_rows:,} expected)"
        shutil.rmtree(out_dir, ignore_errors=True)
    return res


def count_csv_records(folder: Path) -> int:
    """Records in the storage sink's CSV data files (one CRLF each)."""
    n = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if name.startswith("CDC") and name.endswith(".csv"):
                with open(os.path.join(dirpath, name), "rb") as f:
                    n += f.read().count(b"\r\n")
    return n


# --- printing ------------------------------------------------------------------------------------


def cpu_text(cpu: dict[str, float]) -> str:
    """CPU seconds per group, e.g. ``driver 20.1 cluster 0.3 mariadb 4.2 …``."""
    keys = ("driver", "cluster", "mariadb", "broker", "s3", "bench", "other", "steal")
    return " ".join(
        f"{k} {cpu[k]:.1f}"
        for k in keys
        if k in cpu and (cpu[k] >= 0.05 or k == "other") and (k != "steal" or cpu[k] >= 0.5)
    )


def steady_parts(r: Result) -> dict[str, float]:
    """Where the time after the first batch went, in seconds, from the event log.

    ``tasks`` is each batch's first task launch to last task finish; ``planning`` each logged
    trigger minus its ``addBatch`` (latestOffset, the offset and commit logs); ``rest`` is the
    remainder: starting each batch's job, the sink's commit, waiting for the next trigger.
    """
    later = r.later_batches
    if not later or r.events is None:
        return {}
    wall = r.steady_end_s - r.events.batches[0].end_s
    span = sum(b.task_span for b in later)
    planning = sum(b.seconds - b.phases.get("addBatch", 0.0) for b in later if b.logged)
    return {
        "wall": wall,
        "tasks": span,
        "planning": planning,
        "rest": wall - span - planning,
        "task-s": sum(b.task_seconds for b in later),
        "per batch": sum(len(b.tasks) for b in later) / len(later),
    }


def steady_text(r: Result) -> str:
    """The after-the-first-batch time split into its parts, in one line."""
    p = steady_parts(r)
    if not p:
        return ""
    util = p["task-s"] / (p["tasks"] * r.setup.cores) if p["tasks"] else 0.0
    busy = r.steady_busy_cores
    return (
        f"{p['wall']:.1f}s = tasks {p['tasks']:.1f} + planning {p['planning']:.1f} + job start/commit/wait "
        f"{p['rest']:.1f}; {p['per batch']:.0f} task(s)/batch, {p['task-s']:.1f} task-s = {util:.0%} of "
        f"{r.setup.cores} slot(s) while tasks ran"
        + (f"; machine {busy:.2f} of {psutil.cpu_count() or 1} cores busy" if busy is not None else "")
    )


def task_text(b: Batch) -> str:
    """A batch's tasks: each one's seconds and executor, e.g. ``2.9@driver,3.1@driver``."""
    return ",".join(f"{z - a:.1f}@{ex}" for a, z, ex in sorted(b.tasks)) or "-"


def run_line(r: Result) -> str:
    """One printed line per run."""
    steady = r.steady_rate
    parts = [
        f"{r.kind:8} {r.setup.label:14} #{r.rep + 1}",
        f"whole {r.whole_s:6.1f}s",
    ]
    if r.kind == "snapshot":
        snap = r.snapshot or {}
        parts.append(f"to done {r.snap_done_s or 0:6.1f}s {r.whole_rate:>8,.0f} rows/s")
        parts.append(
            f"snapshot {float(snap.get('seconds', 0)):5.2f}s {steady or 0:>8,.0f} rows/s "
            f"(read {snap.get('read_seconds', 0):.2f} correct {snap.get('correct_seconds', 0):.2f} "
            f"write {snap.get('write_seconds', 0):.2f})"
        )
        done = r.snap_done_s or 0.0
        began = done - float(snap.get("seconds", 0))
        tasks = [t for t in (r.events.other_tasks if r.events else []) if began - 0.5 <= t[0] <= done]
        if tasks:
            span = max(z for _, z, _ in tasks) - min(a for a, _, _ in tasks)
            busy = sum(z - a for a, z, _ in tasks)
            parts.append(f"snapshot tasks: {len(tasks)}, span {span:.2f}s, {busy:.2f} task-s")
    else:
        parts.append(f"{r.whole_rate:>8,.0f} rows/s")
        batches = r.events.batches if r.events is not None else []
        if batches:
            parts.append(f"1st batch starts {batches[0].start_s:.1f}s")
            parts.append(
                "batch s " + " ".join(f"{b.seconds:.1f}" if b.logged else "(unlogged)" for b in batches)
            )
        if batches:
            parts.append("tasks (s@executor) " + " / ".join(task_text(b) for b in batches))
        if steady:
            parts.append(f"after 1st {r.rows - (r.rows_first or 0):,} rows {steady:>8,.0f} rows/s")
            parts.append(steady_text(r))
        else:
            parts.append("after 1st –")
    parts.append(f"load {r.load[0]:.2f}→{r.load[1]:.2f}")
    parts.append(f"CPU s: {cpu_text(r.cpu)}")
    parts.append(r.check)
    return " | ".join(parts)


def best(results: list[Result], rate: Callable[[Result], float | None]) -> Result | None:
    """The run with the highest rate (None when no run has one)."""
    rated = [r for r in results if rate(r)]
    return max(rated, key=lambda r: rate(r) or 0.0) if rated else None


def summary(results: list[Result], setups: list[Setup], kinds: list[str]) -> str:
    """The table: best rows/s per kind and setup, speed-ups against local[1], load averages."""
    out = []
    head = (
        f"{'kind':9}{'setup':15}{'runs':>5}{'whole s':>9}{'rows/s':>10}{'speed-up':>10}"
        f"{'steady rows/s':>15}{'speed-up':>10}   load (start→end, each run)"
    )
    out += [head, "-" * len(head)]
    for kind in kinds:
        base = [r for r in results if r.kind == kind and r.setup.key == "local1"]
        b_whole = best(base, lambda r: r.whole_rate)
        b_steady = best(base, lambda r: r.steady_rate)
        for s in setups:
            rs = [r for r in results if r.kind == kind and r.setup.key == s.key]
            if not rs:
                continue
            w = best(rs, lambda r: r.whole_rate)
            st = best(rs, lambda r: r.steady_rate)
            secs = (w.snap_done_s if kind == "snapshot" else w.whole_s) if w else None
            up_w = f"{w.whole_rate / b_whole.whole_rate:.2f}x" if w and b_whole and s.key != "local1" else ""
            up_s = ""
            if st and b_steady and s.key != "local1":
                up_s = f"{(st.steady_rate or 0) / (b_steady.steady_rate or 1):.2f}x"
            loads = ", ".join(f"{r.load[0]:.1f}→{r.load[1]:.1f}" for r in rs)
            out.append(
                f"{kind:9}{s.label:15}{len(rs):>5}{secs or 0:>9.1f}{(w.whole_rate if w else 0):>10,.0f}"
                f"{up_w:>10}{(st.steady_rate if st else 0) or 0:>15,.0f}{up_s:>10}   {loads}"
            )
    out.append("")
    out.append(
        "whole = launch of `sparkcdc run` to exit (snapshot: to its 'initial snapshot … done' line); "
        "steady = rows of batches 2..n over batch 1's commit → last commit (snapshot: rows over the "
        "snapshot's own read+correct+write seconds); best run of each; speed-up against local[1]."
    )
    return "\n".join(out)


def cpu_summary(results: list[Result], setups: list[Setup], kinds: list[str]) -> str:
    """Where the CPU went in each kind × setup (its best whole-command run), in seconds."""
    ncpu = psutil.cpu_count() or 1
    out = [
        "CPU seconds during the best whole-command run of each (psutil, sampled every second; "
        "'other' = processes not started by this benchmark; steal = time the hypervisor took):"
    ]
    for kind in kinds:
        for s in setups:
            w = best([r for r in results if r.kind == kind and r.setup.key == s.key], lambda r: r.whole_rate)
            if w is None:
                continue
            m = w.cpu.get("machine", 0.0)
            out.append(
                f"  {kind:8} {s.label:14} {w.whole_s:6.1f}s wall, machine busy {m:6.1f}s "
                f"({m / (w.whole_s * ncpu):.0%} of {ncpu} cores): {cpu_text(w.cpu)}"
            )
            roles = sorted(((k, v) for k, v in w.roles.items() if v >= 0.05), key=lambda kv: -kv[1])
            out.append(
                "  " + " " * 24 + "driver+cluster by role: " + ", ".join(f"{k} {v:.1f}" for k, v in roles)
            )
    return "\n".join(out)


def steady_summary(results: list[Result], setups: list[Setup], kinds: list[str]) -> str:
    """The after-the-first-batch time of each stream kind × setup (its best run) split into parts."""
    out = [
        "After the first batch, best run of each (Spark event log): tasks = first task launch to last "
        "finish, per batch; planning = trigger minus addBatch (latestOffset, offset/commit logs); the "
        "rest = starting each batch's job, the sink's commit and waiting for the next trigger:"
    ]
    for kind in kinds:
        if kind == "snapshot":
            continue
        for s in setups:
            st = best(
                [r for r in results if r.kind == kind and r.setup.key == s.key], lambda r: r.steady_rate
            )
            if st is not None:
                out.append(f"  {kind:8} {s.label:14} {st.steady_rate or 0:>8,.0f} rows/s: {steady_text(st)}")
        base = best(
            [r for r in results if r.kind == kind and r.setup.key == "local1"], lambda r: r.steady_rate
        )
        busy = base.steady_busy_cores if base is not None else None
        if busy:
            ncpu = psutil.cpu_count() or 1
            out.append(
                f"  {kind:8} ceiling: local[1] kept {busy:.2f} of {ncpu} cores busy after its first batch "
                f"(its tasks, the driver, the services): with the same CPU per row, no "
                f"setup on this machine runs more than {ncpu / busy:.2f}x as fast"
            )
    return "\n".join(out)


EXPLANATION = """\
What limits each kind (read it with the CPU and after-the-first-batch figures above):
- Fixed cost: before its first batch every `sparkcdc run` starts a JVM and a Spark session (the
  driver JVM alone uses ~8-10 CPU-s here, most of it start-up and JIT), checks the sink and the
  upstream, bootstraps the schema history and starts the streaming query and its Python source
  process; on the cluster also two executor JVMs. '1st batch starts' shows it. A second core
  barely shortens it, so the whole-command speed-up stays well below the one after the first batch.
- Storage (CSV): parallel segments: a batch is one binlog segment per core, each task decodes its
  segment and writes its own files (numbered at commit), no row crosses the JVM, no shuffle. What
  does not scale: per batch the driver plans the next one (a scan of its 64 MB of binlog), starts
  the job and commits; the two segments of a batch do not finish together; and a task needs more
  CPU time when two run at once (compare the task-s of local[1] and local[2]) although the machine
  is not saturated: the two vCPUs share caches and memory bandwidth (and perhaps a host core).
- Snapshot (500,000 rows): the snapshot itself takes 2-3 s. Its read job is the session's first
  Python job, so every range task starts a Python worker (importing pyspark, pyarrow, sparkcdc)
  inside the snapshot; two tasks split the rows but each pays that start. MariaDB renders the
  chunks' CSV (upstream-render) with little CPU. The Spark start dominates the whole command.
- Kafka: segments that take turns (sink/base.py `SinkCapabilities.segments`, pipeline/turns.py):
  each segment's task decodes and encodes at once, like storage's, but a task produces only after
  every earlier segment's messages are acknowledged (before that it holds what it encoded), so
  every partition receives the batch in commit order. What stays serial: the producing of the
  segments one after another, librdkafka's threads and the broker (on the same two cores), plus
  the per-batch planning and commit. On the cluster, two more JVMs share the two cores and the
  first task on each executor starts its Python worker and producer."""


# --- main ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def services(
    need_cluster: bool, need_snapshot: bool, snapshot_rows: int, rows: int
) -> Iterator[tuple[Any, Any, Any, dict[str, Any]]]:
    """MariaDB with the snapshot table and the workload, moto S3, and the cluster; all stopped at the end."""
    from sparkcdc.services.mariadb import LocalMariaDB
    from sparkcdc.services.s3 import LocalS3
    from sparkcdc.services.spark_cluster import LocalSparkCluster

    with contextlib.ExitStack() as stack:
        db = stack.enter_context(LocalMariaDB())
        s3 = stack.enter_context(LocalS3())
        s3.create_bucket(BUCKET)
        cluster = None
        if need_cluster:
            cluster = stack.enter_context(LocalSparkCluster(workers=2, cores=1))
            if not cluster.isolated:
                print("WARNING: the cluster's workers share this host's /tmp (not root?)", flush=True)
        if need_snapshot:
            # Before the stream's range: the snapshot's 500k-row INSERT stays out of S..T.
            t = time.monotonic()
            bench_module("snapshot").fill(db, snapshot_rows)
            print(f"snapshot table: {snapshot_rows:,} rows in {time.monotonic() - t:.1f}s", flush=True)
        w = bench_module("storage").write_workload(db, rows)
        yield db, s3, cluster, w


def main(argv: list[str] | None = None) -> int:
    """Run every kind on every setup ``--repeat`` times; print each run, the table and the explanation."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000, help="row changes in the stream's binlog range")
    ap.add_argument("--snapshot-rows", type=int, default=500_000, help="rows of the snapshotted table")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each candidate (default 2)")
    ap.add_argument("--only", default=",".join(KINDS), help="kinds to run, comma-separated")
    ap.add_argument(
        "--setups",
        default="local1,local2,cluster",
        help="setups to run: local1, local2, cluster, and pinned1 (local[1] pinned to one CPU; not by default)",
    )
    ap.add_argument("--timeout", type=float, default=RUN_TIMEOUT, help="seconds allowed per run")
    args = ap.parse_args(argv)
    kinds = [k for k in KINDS if k in args.only.split(",")]
    wanted = args.setups.split(",")
    unknown = [k for k in args.only.split(",") if k not in KINDS] + [s for s in wanted if s not in SETUPS]
    if unknown or not kinds or args.repeat < 1:
        ap.error(f"unknown kind or setup {unknown}" if unknown else "nothing to run")
    t_begin = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-scale-"))
    # The storage sink's folder: outside /tmp, which is private to each cluster worker.
    out = Path(tempfile.mkdtemp(prefix=".out-", dir=HERE))
    results: list[Result] = []
    setups: list[Setup] = []
    failed = 0
    try:
        with services("cluster" in wanted, "snapshot" in kinds, args.snapshot_rows, args.rows) as (
            db,
            s3,
            cluster,
            w,
        ):
            setups += [pinned_setup()] if "pinned1" in wanted else []
            setups += [local_setup(1)] if "local1" in wanted else []
            setups += [local_setup(2)] if "local2" in wanted else []
            setups += [cluster_setup(cluster)] if cluster is not None else []
            print(
                f"stream range: {w['rows']:,} row changes ({w['write_s']:.1f}s to write), "
                f"binlog {w['start']['file']}:{w['start']['pos']} → {w['end']['file']}:{w['end']['pos']}; "
                f"{psutil.cpu_count()} cores; setups: {', '.join(s.label for s in setups)}",
                flush=True,
            )
            ctx = Context(
                db,
                s3,
                cluster,
                work,
                out,
                w["start_ts"],
                w["target_ts"],
                w["rows"],
                args.snapshot_rows,
                args.timeout,
            )
            for rep in range(args.repeat):
                for kind in kinds:
                    for s in setups:
                        try:
                            r = run_one(ctx, kind, s, rep)
                        except Exception as exc:  # one failed run must not lose the others' figures
                            failed += 1
                            print(f"{kind:8} {s.label:14} #{rep + 1} | FAILED: {exc}", flush=True)
                            continue
                        results.append(r)
                        print(run_line(r), flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(summary(results, setups, kinds))
    print()
    print(cpu_summary(results, setups, kinds))
    print()
    print(steady_summary(results, setups, kinds))
    print()
    print(EXPLANATION)
    print(
        f"\nthe whole benchmark took {time.monotonic() - t_begin:.0f}s"
        + (f"; {failed} run(s) FAILED" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
