"""Kafka benchmark: upstream -> Spark -> Kafka (canal-json, avro) against python-mysql-replication.

Usage (from the repository root)::

    .venv/bin/python bench/kafka/run.py [--rows N] [--latency-seconds S] [--latency-rate R]

Starts a private MariaDB, writes the capture benchmark's workload (bench/capture:
N row changes of mixed types, 60 % inserts, 25 % updates, 15 % deletes), then on
that one binlog range measures, each in its own process:

1. sparkcdc end to end to a Kafka-protocol broker (Tansu) with canal-json:
   ``start_changefeed`` with start-ts before the workload and target-ts after it,
   timed from the Spark session start (and from the query start) to finished,
   with the peak RSS of the process and its children (Spark JVM, Python workers)
   sampled by psutil in a thread;
2. the same with protocol=avro (precise decimals) and a local schema registry;
3. python-mysql-replication decoding the same range (decode only);
4. the ratios of 1 and 2 to 3.

Then it measures commit-to-broker latency: a writer commits small transactions
at a fixed rate (default 50 rows every 10 ms = 5,000 rows/s) for ~30 s while a
running canal-json changefeed (enable-tidb-extension=true) carries them to the
broker; a confluent-kafka consumer reads every message and subtracts the
recorded commit time of its transaction (found by primary key) from the
message's broker timestamp and from its consume time.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]

WARMUP_TXNS = 10
"""Transactions written and awaited before the paced write starts (Python workers and producers start)."""

LAT_TABLE = (
    "CREATE TABLE bench.lat (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(32) NOT NULL, d DECIMAL(10,2))"
)


def load_capture_bench() -> ModuleType:
    """bench/capture/run.py as a module (workload writer and the python-mysql-replication candidate)."""
    name = "sparkcdc_bench_capture_run"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "capture" / "run.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"bench/capture/run.py not found under {ROOT}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


# --- memory: this process and every descendant (Spark JVM, Python workers) ---------------------


class RssSampler(threading.Thread):
    """Samples the summed RSS of this process and its descendants; keeps the peaks."""

    def __init__(self, interval: float = 0.2) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.interval = interval
        self.peak_total = 0
        self.peak_jvm = 0
        self.peak_python = 0
        self.peak_pss = 0
        self.samples = 0
        self._stop_event = threading.Event()
        self._me = psutil.Process()

    def sample(self) -> None:
        """One sample of the whole process tree."""
        total = jvm = python = pss = 0
        for p in [self._me, *self._me.children(recursive=True)]:
            try:
                mem = p.memory_full_info()
                rss = int(mem.rss)
                name = p.name()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # a Python worker that just exited
            total += rss
            # forked Python workers share pages: RSS counts them in every worker, PSS splits them
            pss += int(getattr(mem, "pss", rss))
            if name == "java":
                jvm += rss
            else:
                python += rss
        self.peak_total = max(self.peak_total, total)
        self.peak_jvm = max(self.peak_jvm, jvm)
        self.peak_python = max(self.peak_python, python)
        self.peak_pss = max(self.peak_pss, pss)
        self.samples += 1

    def run(self) -> None:
        """Sample until stopped."""
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        """Take a last sample and stop."""
        self.sample()
        self._stop_event.set()
        self.join(timeout=5)


# --- the pipeline child process ----------------------------------------------------------------


def run_pipeline(spec: dict[str, Any]) -> dict[str, Any]:
    """Child: start Spark and a changefeed; until target-ts (throughput) or until told to stop (latency)."""
    sampler = RssSampler()
    sampler.start()
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import ChangefeedSpec, Progress, start_changefeed
    from sparkcdc.pipeline.spark import get_spark

    first_commit: list[float] = []

    def on_progress(p: Progress) -> None:
        if p.batches >= 1 and not first_commit:
            first_commit.append(time.time())

    config: dict[str, Any] = {"filter": {"rules": spec["rules"]}}
    if spec.get("partition"):
        config["sink"] = {"dispatchers": [{"matcher": spec["rules"], "partition": spec["partition"]}]}
    t_spark = time.time()
    spark = get_spark(spec["master"])
    t_query = time.time()
    with tempfile.TemporaryDirectory(prefix="sparkcdc-bench-kafka-") as state:
        cf = ChangefeedSpec(
            changefeed_id=spec["id"],
            upstream_uri=spec["upstream"],
            sink_uri=spec["sink"],
            config=ReplicaConfig.from_dict(config),
            start_ts=spec["start_ts"],
            target_ts=spec.get("target_ts"),
            checkpoint_dir=state,
            trigger_interval=spec["trigger"],
        )
        running = start_changefeed(spark, cf, on_progress)
        t_started = time.time()
        error = ""
        try:
            if spec.get("target_ts") is None:
                print(json.dumps({"event": "started"}), flush=True)
                stop = threading.Event()

                def wait_for_stop() -> None:
                    sys.stdin.readline()
                    stop.set()

                threading.Thread(target=wait_for_stop, daemon=True).start()
                while not stop.wait(0.5):
                    if not running.is_active():
                        break
                finished = stop.is_set()
            else:
                finished = running.wait(timeout=float(spec["timeout"]))
            t_done = time.time()
            if not finished:
                exc = running.exception()
                error = exc.message if exc is not None else f"not finished within {spec['timeout']}s"
            prog = running.progress()
            # Spark posts a batch's progress after foreachBatch returns, i.e. after target-ts was seen.
            deadline = time.monotonic() + 30
            durations = batch_durations(running.query)
            while len(durations.get("addBatch", [])) < prog.batches and time.monotonic() < deadline:
                time.sleep(0.2)
                durations = batch_durations(running.query)
        finally:
            running.stop()
        # The sampler reads every process's smaps (≈ 15 ms of CPU a sample on this machine): it stops
        # here, so the peak is the cold run's and the warm run (no memory figure) does not pay for it.
        sampler.stop()
        warm: dict[str, Any] = {}
        if spec.get("warm_sink") and not error:
            # The same range again in the same session (Python workers started): steady throughput.
            cf_warm = dataclasses.replace(
                cf,
                changefeed_id=spec["id"] + "-warm",
                sink_uri=spec["warm_sink"],
                checkpoint_dir=state + "/warm",
            )
            t0 = time.time()
            running = start_changefeed(spark, cf_warm)
            try:
                if not running.wait(timeout=float(spec["timeout"])):
                    exc = running.exception()
                    error = "warm run: " + (exc.message if exc is not None else "timeout")
                warm = {"warm_seconds": time.time() - t0, "warm_rows": running.progress().rows_total}
            finally:
                running.stop()
    spark.stop()
    return {
        **warm,
        "rows": prog.rows_total,
        "batches": prog.batches,
        "t_spark": t_spark,
        "t_query": t_query,
        "t_started": t_started,
        "t_first_commit": first_commit[0] if first_commit else None,
        "t_done": t_done,
        "peak_total": sampler.peak_total,
        "peak_jvm": sampler.peak_jvm,
        "peak_python": sampler.peak_python,
        "peak_pss": sampler.peak_pss,
        "durations": durations,
        "samples": sampler.samples,
        "error": error,
    }


def batch_durations(query: Any) -> dict[str, list[int]]:
    """Spark's durationMs of each recent micro-batch, by phase (addBatch is the sink write)."""
    out: dict[str, list[int]] = {}
    try:
        progress = query.recentProgress
    except Exception as exc:  # a failed query may not answer; the figures are optional
        print(f"no Spark progress: {exc}", file=sys.stderr)
        return out
    for p in progress:
        if not p.numInputRows and p.batchId != 0:
            continue  # the monitor's empty polls
        for k, v in (p.durationMs or {}).items():
            out.setdefault(k, []).append(int(v))
    return out


def _phases(d: dict[str, list[int]], agg: str = "sum") -> str:
    keys = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")
    parts = []
    for k in keys:
        v = d.get(k)
        if v:
            x = sum(v) if agg == "sum" else statistics.median(v)
            parts.append(f"{k} {x / 1000:.1f}s")
    return ", ".join(parts)


@dataclass
class Child:
    """A pipeline child process; its stdout lines are JSON."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    @classmethod
    def spawn(cls, spec: dict[str, Any]) -> Child:
        """Start ``run.py --child SPEC``."""
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
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
            raise TimeoutError(f"the pipeline process printed nothing within {timeout:.0f}s") from None
        if not line:
            code = self.proc.wait(timeout=60)
            raise RuntimeError(f"the pipeline process exited with {code} (its stderr is above)")
        return dict(json.loads(line))

    def tell_stop(self) -> None:
        """Ask a latency-mode child to stop its changefeed."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """Kill the child if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def topic_messages(bootstrap: str, topic: str, timeout: float = 600) -> int:
    """Messages in every partition of a topic, counted by reading them all.

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
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"consumer error on {topic}: {err}")
                    at_end.add(int(m.partition() or 0))
                    continue
                at_end.discard(int(m.partition() or 0))
                n += 1
        return n
    finally:
        c.close()


def measure_e2e(db: Any, w: Any, protocol: str, args: argparse.Namespace) -> dict[str, Any]:
    """One changefeed over the workload's range to a fresh broker, in its own process."""
    from sparkcdc.registry.local import LocalSchemaRegistry
    from sparkcdc.services.tansu import LocalTansu

    topic = f"bench-{protocol}"
    with LocalTansu() as broker:
        registry = LocalSchemaRegistry().start() if protocol == "avro" else None
        try:
            if registry is not None:
                query = f"protocol=avro&schema-registry={registry.url}&avro-decimal-handling-mode=precise"
            else:
                query = "protocol=canal-json"
            spec = {
                "id": f"bench-{protocol}",
                "upstream": db.uri,
                "sink": broker.sink_uri(topic, query),
                "rules": ["bench.orders"],
                "start_ts": w.start.ts,
                "target_ts": w.end.ts,
                "master": args.master,
                "trigger": args.trigger_interval,
                "timeout": args.timeout,
                "partition": args.partition,
                "warm_sink": broker.sink_uri(topic + "-warm", query),
            }
            child = Child.spawn(spec)
            try:
                r = child.next_json(args.timeout + 300)
                child.proc.wait(timeout=120)
            finally:
                child.kill()
            if r["error"]:
                raise RuntimeError(f"{protocol} changefeed failed: {r['error']}")
            r["messages"] = topic_messages(broker.bootstrap, topic)
            r["warm_messages"] = topic_messages(broker.bootstrap, topic + "-warm")
        finally:
            if registry is not None:
                registry.stop()
    r["seconds"] = r["t_done"] - r["t_spark"]
    r["query_seconds"] = r["t_done"] - r["t_query"]
    r["spark_start_s"] = r["t_query"] - r["t_spark"]
    return r


# --- latency at a steady rate ------------------------------------------------------------------


@dataclass
class WriterResult:
    """What the paced writer committed."""

    commits: list[float]
    rows_per_txn: int
    seconds: float
    late: int

    @property
    def rows(self) -> int:
        """Rows committed."""
        return len(self.commits) * self.rows_per_txn


def paced_writer(db: Any, seconds: float, rows_per_txn: int, interval: float) -> WriterResult:
    """Commit rows_per_txn-row INSERTs every interval seconds; record each commit's wall time."""
    commits: list[float] = []
    late = 0
    conn = db.connect("bench")  # autocommit: one INSERT statement is one transaction
    try:
        with conn.cursor() as cur:
            t0 = time.monotonic()
            k = 0
            while True:
                due = t0 + k * interval
                if due - t0 >= seconds:
                    break
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                elif now - due > interval:
                    late += 1
                first = k * rows_per_txn + 1
                values = ",".join(
                    f"({i},{k},'row-{i}',{i % 100000}.{i % 100:02d})"
                    for i in range(first, first + rows_per_txn)
                )
                cur.execute(f"INSERT INTO lat (id, k, v, d) VALUES {values}")
                commits.append(time.time())
                k += 1
            elapsed = time.monotonic() - t0
    finally:
        conn.close()
    return WriterResult(commits, rows_per_txn, elapsed, late)


def latency_consumer(
    bootstrap: str, topic: str, out: list[tuple[int, int, int, float]], want: list[int], deadline: float
) -> None:
    """Append (id, timestamp type, timestamp ms, receive time) of every row until want[0] rows with id > 0."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-lat-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
        }
    )
    measured = 0
    try:
        parts = c.list_topics(topic, timeout=30).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        while time.monotonic() < deadline:
            if want[0] and measured >= want[0]:
                break
            for m in c.consume(num_messages=1000, timeout=0.05):
                now = time.time()
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consumer error on {topic}: {err}")
                body = json.loads(m.value() or b"{}")
                if body.get("isDdl") or body.get("type") not in ("INSERT", "UPDATE", "DELETE"):
                    continue  # WATERMARK and DDL messages carry no row
                ts_type, ts_ms = m.timestamp()
                for row in body.get("data") or []:
                    rid = int(row["id"])
                    out.append((rid, ts_type, ts_ms, now))
                    measured += rid > 0
    finally:
        c.close()


def warm_up(db: Any, got: list[tuple[int, int, int, float]], rows_per_txn: int, timeout: float) -> float:
    """Commit a few transactions (negative ids) and wait until the consumer has them all; seconds taken."""
    from sparkcdc.services.common import wait_until

    t0 = time.monotonic()
    conn = db.connect("bench")
    try:
        with conn.cursor() as cur:
            for k in range(WARMUP_TXNS):
                ids = range(-(k * rows_per_txn + 1), -((k + 1) * rows_per_txn + 1), -1)
                cur.execute("INSERT INTO lat (id, k, v) VALUES " + ",".join(f"({i},-1,'warm')" for i in ids))
                time.sleep(0.2)
    finally:
        conn.close()
    n = WARMUP_TXNS * rows_per_txn
    wait_until(
        lambda: sum(1 for g in list(got) if g[0] < 0) >= n,
        timeout=timeout,
        what="the warm-up rows to reach the consumer",
        interval=0.2,
    )
    return time.monotonic() - t0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def measure_latency(db: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Run a changefeed, a paced writer and a consumer at once; latency statistics in ms."""
    from sparkcdc.capture.start import head_offset
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.services.tansu import LocalTansu

    db.execute(LAT_TABLE, database="bench")
    start = head_offset(UpstreamConfig.from_uri(db.uri))
    topic = "bench-latency"
    rows_per_txn = max(1, round(args.latency_rate * args.latency_interval_ms / 1000))
    with LocalTansu() as broker:
        spec = {
            "id": "bench-latency",
            "upstream": db.uri,
            "sink": broker.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true"),
            "rules": ["bench.lat"],
            "start_ts": start.ts,
            "master": args.master,
            "trigger": args.trigger_interval,
            "timeout": args.timeout,
        }
        child = Child.spawn(spec)
        try:
            ev = child.next_json(600)
            if ev.get("event") != "started":
                raise RuntimeError(f"the latency changefeed did not start: {ev}")
            want = [0]
            got: list[tuple[int, int, int, float]] = []
            deadline = time.monotonic() + args.latency_seconds + args.timeout
            consumer = threading.Thread(
                target=latency_consumer, args=(broker.bootstrap, topic, got, want, deadline), daemon=True
            )
            consumer.start()
            warm_s = warm_up(db, got, rows_per_txn, args.timeout)
            wr = paced_writer(db, args.latency_seconds, rows_per_txn, args.latency_interval_ms / 1000)
            want[0] = wr.rows
            consumer.join(timeout=args.timeout + 60)
            child.tell_stop()
            r = child.next_json(300)
            child.proc.wait(timeout=120)
        finally:
            child.kill()
    if r["error"]:
        raise RuntimeError(f"latency changefeed failed: {r['error']}")
    t_begin = wr.commits[0] if wr.commits else 0.0
    broker_ms: list[float] = []
    consume_ms: list[float] = []
    steady_broker: list[float] = []
    steady_consume: list[float] = []
    ts_types: set[int] = set()
    seen: set[int] = set()
    for rid, ts_type, ts_ms, recv in got:
        txn = (rid - 1) // wr.rows_per_txn
        if rid <= 0 or rid in seen or txn >= len(wr.commits):
            continue
        seen.add(rid)
        committed = wr.commits[txn]
        ts_types.add(ts_type)
        b = ts_ms - committed * 1000
        c = (recv - committed) * 1000
        broker_ms.append(b)
        consume_ms.append(c)
        if committed - t_begin >= args.latency_warmup:
            steady_broker.append(b)
            steady_consume.append(c)
    return {
        "warm_s": warm_s,
        "writer_rows": wr.rows,
        "writer_seconds": wr.seconds,
        "writer_rate": wr.rows / wr.seconds if wr.seconds else 0.0,
        "writer_late": wr.late,
        "txns": len(wr.commits),
        "rows_per_txn": wr.rows_per_txn,
        "received": len(seen),
        "ts_types": sorted(ts_types),
        "broker_all": (statistics.median(broker_ms) if broker_ms else float("nan"), _pct(broker_ms, 0.9)),
        "broker": (
            statistics.median(steady_broker) if steady_broker else float("nan"),
            _pct(steady_broker, 0.9),
        ),
        "consume": (
            statistics.median(steady_consume) if steady_consume else float("nan"),
            _pct(steady_consume, 0.9),
        ),
        "broker_max": max(steady_broker) if steady_broker else float("nan"),
        "steady_rows": len(steady_broker),
        "peak_total": r["peak_total"],
        "batches": r["batches"],
        "durations": r["durations"],
    }


# --- main ----------------------------------------------------------------------------------------


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def main(argv: list[str] | None = None) -> int:
    """Run every measurement on one workload and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="row changes in the workload (default 200000)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--trigger-interval", default="200 milliseconds", help="micro-batch trigger")
    ap.add_argument(
        "--partition",
        default="",
        help="partition dispatcher of the throughput runs (table, ts, index-value, ...; default: TiCDC's default)",
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds a changefeed may take")
    ap.add_argument(
        "--latency-seconds", type=float, default=30, help="length of the paced write (default 30)"
    )
    ap.add_argument(
        "--latency-rate", type=float, default=5000, help="rows/s of the paced write (default 5000)"
    )
    ap.add_argument("--latency-interval-ms", type=float, default=10, help="ms between its transactions")
    ap.add_argument("--latency-warmup", type=float, default=5, help="seconds left out of the latency figures")
    ap.add_argument("--skip-latency", action="store_true", help="only the throughput rows")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_pipeline(json.loads(args.child))), flush=True)
        return 0

    cap = load_capture_bench()
    from sparkcdc.services.mariadb import LocalMariaDB

    with LocalMariaDB() as db:
        w = cap.write_workload(db, args.rows)
        print(
            f"workload: {w.rows} row changes ({w.inserts} I / {w.updates} U / {w.deletes} D) in binlog "
            f"{w.start} -> {w.end}, written in {w.write_s:.1f}s; cores: {os.cpu_count()}, "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        print("python-mysql-replication decode ...", flush=True)
        base = cap.measure_python("pymysqlreplication", db, w)
        print("sparkcdc -> Kafka canal-json ...", flush=True)
        canal = measure_e2e(db, w, "canal-json", args)
        print("sparkcdc -> Kafka avro (precise decimals) + schema registry ...", flush=True)
        avro = measure_e2e(db, w, "avro", args)
        lat = None
        if not args.skip_latency:
            print(
                f"latency: {args.latency_rate:.0f} rows/s for {args.latency_seconds:.0f}s "
                "through a running canal-json changefeed ...",
                flush=True,
            )
            lat = measure_latency(db, args)

    base_rate = base["rows"] / base["seconds"]
    print()
    print(
        f"{'candidate':46} {'rows':>8} {'msgs':>8} {'total s':>8} {'rows/s':>8} "
        f"{'query s':>8} {'rows/s':>8} {'peak RSS MB':>11}"
    )
    print("-" * 113)
    for name, r in (
        ("sparkcdc -> Kafka canal-json", canal),
        ("sparkcdc -> Kafka avro (precise decimals)", avro),
    ):
        print(
            f"{name:46} {r['rows']:>8} {r['messages']:>8} {r['seconds']:>8.1f} {r['rows'] / r['seconds']:>8.0f} "
            f"{r['query_seconds']:>8.1f} {r['rows'] / r['query_seconds']:>8.0f} {_mb(r['peak_total']):>11}"
        )
    for name, r in (
        ("  same, warm (2nd changefeed of the session)", canal),
        ("  same, warm (2nd changefeed of the session)", avro),
    ):
        print(
            f"{name:46} {r['warm_rows']:>8} {r['warm_messages']:>8} {'-':>8} {'-':>8} "
            f"{r['warm_seconds']:>8.1f} {r['warm_rows'] / r['warm_seconds']:>8.0f} {'-':>11}"
        )
    print(
        f"{'python-mysql-replication decode only':46} {base['rows']:>8} {'-':>8} {base['seconds']:>8.1f} "
        f"{base_rate:>8.0f} {'-':>8} {'-':>8} {_mb(base['maxrss']):>11}"
    )
    print()
    print("total s: Spark session start to target-ts reached; query s: start_changefeed to target-ts reached")
    for name, r in (("canal-json", canal), ("avro", avro)):
        print(
            f"ratio {name:10} warm / python-mysql-replication: "
            f"{r['warm_rows'] / r['warm_seconds'] / base_rate:.2f}x (second changefeed of the session, "
            "Python workers already started)"
        )
    print(
        f"partition dispatcher: {args.partition or 'TiCDC default'}; Spark master {args.master}; trigger {args.trigger_interval}"
    )
    for name, r in (("canal-json", canal), ("avro", avro)):
        first = r["t_first_commit"] - r["t_query"] if r["t_first_commit"] else float("nan")
        print(
            f"ratio {name:10} / python-mysql-replication: {r['rows'] / r['seconds'] / base_rate:.2f}x "
            f"(with Spark start-up), {r['rows'] / r['query_seconds'] / base_rate:.2f}x (query only); "
            f"Spark start-up {r['spark_start_s']:.1f}s, start_changefeed returned after "
            f"{r['t_started'] - r['t_query']:.1f}s, first batch committed {first:.1f}s after the query "
            f"start, {r['batches']} batches; peak RSS JVM {_mb(r['peak_jvm'])} MB + Python processes "
            f"{_mb(r['peak_python'])} MB (peak PSS of the tree {_mb(r['peak_pss'])} MB)"
        )
        print(f"    Spark phases, summed over batches: {_phases(r['durations'])}")
    bad = [
        n
        for n, r in (("canal-json", canal), ("avro", avro))
        if r["rows"] != w.rows or r["messages"] != w.rows or r["warm_messages"] != w.rows
    ]
    if base["rows"] != w.rows:
        bad.append("python-mysql-replication")
    if bad:
        print(f"WARNING: rows or messages differ from the workload's {w.rows}: {bad}")
    if lat is not None:
        print()
        print(
            f"latency: writer committed {lat['writer_rows']} rows in {lat['txns']} transactions of "
            f"{lat['rows_per_txn']} rows over {lat['writer_seconds']:.1f}s = {lat['writer_rate']:.0f} rows/s "
            f"(target {args.latency_rate:.0f}; {lat['writer_late']} transactions started > 1 interval late); "
            f"consumer received {lat['received']}; {lat['batches']} batches; warm-up "
            f"({WARMUP_TXNS} transactions before the paced write) took {lat['warm_s']:.1f}s"
        )
        kinds = {0: "none", 1: "CreateTime", 2: "LogAppendTime"}
        print(
            f"commit -> broker timestamp ({', '.join(kinds.get(t, str(t)) for t in lat['ts_types'])}), "
            f"after {args.latency_warmup:.0f}s warm-up, {lat['steady_rows']} rows: "
            f"median {lat['broker'][0]:.0f} ms, p90 {lat['broker'][1]:.0f} ms, max {lat['broker_max']:.0f} ms"
        )
        print(f"commit -> consumed: median {lat['consume'][0]:.0f} ms, p90 {lat['consume'][1]:.0f} ms")
        print(
            f"commit -> broker including the warm-up: median {lat['broker_all'][0]:.0f} ms, "
            f"p90 {lat['broker_all'][1]:.0f} ms"
        )
        print(f"Spark phases, median per batch: {_phases(lat['durations'], 'median')}")
        if lat["received"] != lat["writer_rows"]:
            print(f"WARNING: the consumer received {lat['received']} of {lat['writer_rows']} rows")
    print(f"(one run; the machine's load average is {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
