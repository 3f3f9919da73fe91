"""Kafka benchmark: upstream -> Spark -> Kafka (canal-json, avro), with its baselines in the same run.

Usage (from the repository root)::

    .venv/bin/python bench/kafka/run.py [--rows N] [--backlog-factor 3] [--memory-rows M] [--big-txn R]
        [--latency-seconds 60] [--latency-rate 20000] [--latency-writers 1] [--skip-latency] ...

Starts a private MariaDB and writes the capture benchmark's workload (bench/capture's table and
statements: 60 % inserts in 1,000-row transactions, 25 % updates, bulk and single-row, 15 % deletes)
in rounds: N changes, then (factor - 1) x N more, a ``query_tso`` mark between rounds. Then:

1. baselines, in the same run: python-mysql-replication decoding the first N changes, ``mariadb-binlog``
   decoding the whole N x factor range (bench/capture's candidates), a bare Spark session started,
   counting one row and stopped (bench/startup's baseline), and plain librdkafka producing the
   canal-json messages of step 2, read back from the topic, to a fresh topic of the same broker
   with the sink's producer settings (the broker ceiling);
2. in one process per protocol, ``start_changefeed`` over the first N changes to a fresh Tansu broker
   with canal-json (then avro with a local schema registry): cold (the session's first changefeed)
   and warm (a second one in the same session), with the process tree's memory;
3. the whole process as a user runs it: ``sparkcdc run --start-ts ... --target-ts ...`` to Kafka
   canal-json over N and over N x factor changes; the steady rate is the difference of rows over
   the difference of wall times, the fixed cost the intercept; RSS and PSS of its process tree
   over time (``--memory-rows`` adds a run over a separate backlog of that size, ``--big-txn`` one
   over a single transaction of that many rows);
4. commit -> broker latency: a running canal-json changefeed while paced writers commit
   ``--latency-rate`` rows/s for ``--latency-seconds``; p50/p90/p99 of the broker timestamp minus
   the commit time of the row's transaction.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    MB,
    REPORT_HEADER,
    Child,
    Mark,
    TreeSampler,
    add_backlog_args,
    kafka_broker,
    librdkafka_ceiling,
    load_bench,
    loadavg,
    memory_line,
    print_steady,
    print_whole_memory,
    read_topic,
    report_row,
    run_baselines,
    sparkcdc_run,
    whole_process_runs,
    write_backlogs,
)

ROOT = Path(__file__).resolve().parents[2]

WARMUP_TXNS = 10
"""Transactions written and awaited before the paced write starts (Python workers and producers start)."""

LAT_TABLE = (
    "CREATE TABLE bench.lat (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(32) NOT NULL, d DECIMAL(10,2))"
)

CHUNK = 1000
"""Rows per bulk statement (one transaction each), as in bench/capture."""

SINGLE_ROW_TXNS = 2000
"""Single-row autocommit updates of a round, as in bench/capture."""


def load_capture_bench() -> ModuleType:
    """bench/capture/run.py as a module (its table and statements, its decode candidates)."""
    return load_bench("capture")


def _chunks(lo: int, hi: int, size: int = CHUNK) -> list[tuple[int, int]]:
    return [(a, min(a + size - 1, hi)) for a in range(lo, hi + 1, size)]


def write_round(conn: Any, first: int, rows: int) -> int:
    """bench/capture's workload on ids first .. first + rows - 1: 60 % I, 25 % U, 15 % D; changes written."""
    cap = load_capture_bench()
    n_ins = rows * 60 // 100
    n_del = rows * 15 // 100
    n_upd = rows - n_ins - n_del
    singles = min(SINGLE_ROW_TXNS, n_upd // 2)
    last = first + n_ins - 1
    with conn.cursor() as cur:
        for a, b in _chunks(first, last):
            cur.execute(cap.INSERT.format(a=a, b=b))
        bulk_upd = _chunks(first, first + n_upd - singles - 1)
        dels = _chunks(last - n_del + 1, last)
        for k in range(max(len(bulk_upd), len(dels))):
            if k < len(bulk_upd):
                cur.execute(cap.UPDATE.format(a=bulk_upd[k][0], b=bulk_upd[k][1]))
            if k < len(dels):
                cur.execute(f"DELETE FROM orders WHERE id BETWEEN {dels[k][0]} AND {dels[k][1]}")
        for i in range(singles):
            cur.execute(
                f"UPDATE orders SET note = 'single', big = big + 1 WHERE id = {first + n_upd - singles + i}"
            )
    return n_ins + n_upd + n_del


def write_big_txn(conn: Any, first: int, rows: int) -> int:
    """One transaction of ``rows`` inserts (one INSERT ... SELECT)."""
    cap = load_capture_bench()
    with conn.cursor() as cur:
        cur.execute(cap.INSERT.format(a=first, b=first + rows - 1))
    return rows


# --- the pipeline child process ----------------------------------------------------------------


def run_pipeline(spec: dict[str, Any]) -> dict[str, Any]:
    """Child: start Spark and a changefeed; until target-ts (throughput) or until told to stop (latency)."""
    sampler = TreeSampler(interval=0.2, pss_every=int(spec.get("pss_every", 5)))
    sampler.start()
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import Progress, start_changefeed
    from sparkcdc.pipeline.spark import get_spark
    from sparkcdc.pipeline.spec import ChangefeedSpec

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
        "memory": sampler.summary(),
        "durations": durations,
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
        out.setdefault("numInputRows", []).append(int(p.numInputRows or 0))
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


def measure_e2e(
    db: Any, start: Mark, end: Mark, protocol: str, args: argparse.Namespace, ceiling: bool = False
) -> dict[str, Any]:
    """One changefeed (cold, then warm) over [start, end] to a fresh broker, in its own process.

    With ``ceiling``, the cold run's messages are read back and produced again by plain librdkafka
    to a fresh topic of the same broker (``r["ceiling"]``).
    """
    topic = f"bench-{protocol}"
    with kafka_broker(protocol) as (broker, query):
        spec = {
            "id": f"bench-{protocol}",
            "upstream": db.uri,
            "sink": broker.sink_uri(topic, query),
            "rules": ["bench.orders"],
            "start_ts": start.ts,
            "target_ts": end.ts,
            "master": args.master,
            "trigger": args.trigger_interval,
            "timeout": args.timeout,
            "partition": args.partition,
            "warm_sink": broker.sink_uri(topic + "-warm", query),
        }
        child = Child.spawn([os.path.abspath(__file__), "--child", json.dumps(spec)])
        try:
            r = child.next_json(args.timeout + 300)
            child.proc.wait(timeout=120)
        finally:
            child.kill()
        if r["error"]:
            raise RuntimeError(f"{protocol} changefeed failed: {r['error']}")
        r["messages"], kept = read_topic(
            broker.bootstrap, topic, keep=end.rows - start.rows if ceiling else 0
        )
        r["warm_messages"], _ = read_topic(broker.bootstrap, topic + "-warm")
        if ceiling:
            r["ceiling"] = librdkafka_ceiling(
                broker.sink_uri(topic + "-ceiling", query), kept, topic + "-ceiling"
            )
            del kept
    r["seconds"] = r["t_done"] - r["t_spark"]
    r["query_seconds"] = r["t_done"] - r["t_query"]
    r["spark_start_s"] = r["t_query"] - r["t_spark"]
    return r


# --- latency at a steady rate ------------------------------------------------------------------


@dataclass
class WriterResult:
    """What the paced writers committed: transaction g holds ids g * rows_per_txn + 1 .. (g + 1) * rows_per_txn."""

    commits: dict[int, float]
    rows_per_txn: int
    seconds: float
    late: int

    @property
    def rows(self) -> int:
        """Rows committed."""
        return len(self.commits) * self.rows_per_txn


def paced_writer(
    db: Any, seconds: float, rows_per_txn: int, interval: float, writers: int = 1
) -> WriterResult:
    """Commit a rows_per_txn-row INSERT every interval seconds, for seconds; each commit's wall time.

    Transaction g is due at g x interval; with several writers (threads, a connection each),
    writer w commits the transactions g = w, w + writers, ...
    """
    commits: dict[int, float] = {}
    late = [0] * writers
    errors: list[BaseException] = []
    t0 = time.monotonic() + 0.1
    n_txns = int(seconds / interval)

    def one(w: int) -> None:
        conn = db.connect("bench")  # autocommit: one INSERT statement is one transaction
        try:
            with conn.cursor() as cur:
                for g in range(w, n_txns, writers):
                    due = t0 + g * interval
                    now = time.monotonic()
                    if due > now:
                        time.sleep(due - now)
                    elif now - due > interval:
                        late[w] += 1
                    first = g * rows_per_txn + 1
                    values = ",".join(
                        f"({i},{g},'row-{i}',{i % 100000}.{i % 100:02d})"
                        for i in range(first, first + rows_per_txn)
                    )
                    cur.execute(f"INSERT INTO lat (id, k, v, d) VALUES {values}")
                    commits[g] = time.time()
        except BaseException as exc:  # reported after the join
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(w,), name=f"writer-{w}") for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    if errors:
        raise RuntimeError(f"a paced writer failed: {errors[0]}")
    return WriterResult(commits, rows_per_txn, elapsed, sum(late))


_ROW_ID = re.compile(rb'"data":\[\{"id":"(-?\d+)"')


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
                # one row a message (canal-json); WATERMARK and DDL messages carry no "data" row
                hit = _ROW_ID.search(m.value() or b"")
                if hit is None:
                    continue
                ts_type, ts_ms = m.timestamp()
                rid = int(hit.group(1))
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
            "trigger": args.latency_trigger_interval or args.trigger_interval,
            "timeout": args.timeout,
            "pss_every": 10**9,  # RSS only: reading smaps costs CPU the latency would pay
        }
        child = Child.spawn([os.path.abspath(__file__), "--child", json.dumps(spec)])
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
            wr = paced_writer(
                db, args.latency_seconds, rows_per_txn, args.latency_interval_ms / 1000, args.latency_writers
            )
            want[0] = wr.rows
            consumer.join(timeout=args.timeout + 60)
            child.tell_stop()
            r = child.next_json(300)
            child.proc.wait(timeout=120)
        finally:
            child.kill()
    if r["error"]:
        raise RuntimeError(f"latency changefeed failed: {r['error']}")
    t_begin = min(wr.commits.values(), default=0.0)
    broker_ms: list[float] = []
    consume_ms: list[float] = []
    steady_broker: list[float] = []
    steady_consume: list[float] = []
    ts_types: set[int] = set()
    seen: set[int] = set()
    for rid, ts_type, ts_ms, recv in got:
        txn = (rid - 1) // wr.rows_per_txn
        if rid <= 0 or rid in seen or txn not in wr.commits:
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
        "broker_p99": _pct(steady_broker, 0.99),
        "consume_p99": _pct(steady_consume, 0.99),
        "broker_max": max(steady_broker) if steady_broker else float("nan"),
        "steady_rows": len(steady_broker),
        "memory": r["memory"],
        "batches": r["batches"],
        "durations": r["durations"],
    }


# --- the whole process, as a user runs it -------------------------------------------------------------


def measure_whole(db: Any, runs: list[tuple[str, Mark, Mark]], args: argparse.Namespace) -> dict[str, Any]:
    """``sparkcdc run`` to Kafka canal-json over each (name, start, end), each to its own topic of one broker.

    Runs ``--repeat-whole`` rounds; the fastest run of each name is kept. The first run's messages
    are read back and produced again by plain librdkafka (``out["ceiling"]``, the broker ceiling).
    """
    from sparkcdc.services.tansu import LocalTansu

    out: dict[str, Any] = {}
    with LocalTansu() as broker, tempfile.TemporaryDirectory(prefix="bench-kafka-run-") as data:
        for rep, i, key, a, b, env in whole_process_runs(runs, args):
            topic = f"run-{i}"
            print(f"  sparkcdc run -> Kafka canal-json, {key}: {b.rows - a.rows:,} changes ...", flush=True)
            r = sparkcdc_run(
                db.uri,
                broker.sink_uri(topic, "protocol=canal-json"),
                a.ts,
                b.ts,
                f"{data}/{i}",
                master=args.master,
                trigger=args.trigger_interval,
                env=env,
            )
            r["rows"] = b.rows - a.rows
            r["load"] = loadavg()
            ceiling = key == "N" and rep == 0
            r["messages"], kept = read_topic(broker.bootstrap, topic, keep=r["rows"] if ceiling else 0)
            if ceiling:
                print("  librdkafka produce of the same messages (broker ceiling) ...", flush=True)
                out["ceiling"] = librdkafka_ceiling(
                    broker.sink_uri(topic + "-ceiling", "protocol=canal-json"), kept, topic + "-ceiling"
                )
                del kept
            print(
                f"    {r['wall']:.1f} s, {r['messages']:,} messages, {memory_line(r['memory'])} ({r['load']})",
                flush=True,
            )
            if key not in out or r["wall"] < out[key]["wall"]:
                out[key] = r
    return out


# --- main ----------------------------------------------------------------------------------------


def _mb(n: float) -> str:
    return f"{n / MB:,.0f}"


def main(argv: list[str] | None = None) -> int:
    """Run every measurement on one workload and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backlog_args(ap)
    ap.add_argument("--trigger-interval", default="200 milliseconds", help="micro-batch trigger")
    ap.add_argument(
        "--partition",
        default="",
        help="partition dispatcher of the in-session runs (table, ts, index-value, ...; default: TiCDC's default)",
    )
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a changefeed may take")
    ap.add_argument(
        "--latency-seconds", type=float, default=60, help="length of the paced write (default 60)"
    )
    ap.add_argument(
        "--latency-rate", type=float, default=20000, help="rows/s of the paced write (default 20000)"
    )
    ap.add_argument(
        "--latency-interval-ms", type=float, default=10, help="ms between its transactions (default 10)"
    )
    ap.add_argument(
        "--latency-writers", type=int, default=1, help="writer connections (threads) of the paced write"
    )
    ap.add_argument("--latency-warmup", type=float, default=5, help="seconds left out of the latency figures")
    ap.add_argument(
        "--latency-trigger-interval",
        default="",
        help="trigger of the latency changefeed (default: --trigger-interval)",
    )
    ap.add_argument("--skip-latency", action="store_true", help="no latency part")
    ap.add_argument(
        "--skip-session", action="store_true", help="no in-session (cold/warm start_changefeed) runs"
    )
    ap.add_argument("--skip-avro", action="store_true", help="no in-session avro run")
    ap.add_argument("--skip-whole", action="store_true", help="no whole-process (sparkcdc run) runs")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(run_pipeline(json.loads(args.child))), flush=True)
        return 0

    cap = load_capture_bench()
    from sparkcdc.services.mariadb import LocalMariaDB

    print(
        f"cores: {os.cpu_count()}; Spark master {args.master}; trigger {args.trigger_interval}; {loadavg()}",
        flush=True,
    )
    with LocalMariaDB() as db:
        db.execute("CREATE DATABASE bench", cap.TABLE)
        marks, whole_runs = write_backlogs(db, args, write_round, write_big_txn)
        pmr, mbl, bare = run_baselines(db, marks, args)
        canal = avro = None
        if not args.skip_session:
            print("in session: sparkcdc -> Kafka canal-json (cold, warm) ...", flush=True)
            canal = measure_e2e(db, marks[0], marks[1], "canal-json", args)
            if not args.skip_avro:
                print(
                    "in session: sparkcdc -> Kafka avro (precise decimals) + schema registry ...", flush=True
                )
                avro = measure_e2e(db, marks[0], marks[1], "avro", args)
        whole: dict[str, Any] = {}
        if not args.skip_whole:
            print("whole process: sparkcdc run -> Kafka canal-json ...", flush=True)
            whole = measure_whole(db, whole_runs, args)
        lat = None
        if not args.skip_latency:
            print(
                f"latency: {args.latency_rate:.0f} rows/s for {args.latency_seconds:.0f}s "
                "through a running canal-json changefeed ...",
                flush=True,
            )
            lat = measure_latency(db, args)
    print_report(args, whole_runs, pmr, mbl, bare, canal, avro, whole, lat)
    return 0


def print_report(
    args: argparse.Namespace,
    whole_runs: list[tuple[str, Mark, Mark]],
    pmr: dict[str, Any],
    mbl: dict[str, Any],
    bare: dict[str, Any],
    canal: dict[str, Any] | None,
    avro: dict[str, Any] | None,
    whole: dict[str, Any],
    lat: dict[str, Any] | None,
) -> None:
    """Every figure, the baselines first, then the ratios the issue's targets are on."""
    n = args.rows
    f = args.backlog_factor
    print()
    print(REPORT_HEADER)
    print(
        report_row(
            "baseline: python-mysql-replication 1.0.17 decode (N)", pmr["rows"], pmr["seconds"], pmr["rate"]
        )
    )
    print(
        report_row(f"baseline: mariadb-binlog -v decode (N x {f})", mbl["rows"], mbl["seconds"], mbl["rate"])
    )
    if "ceiling" in whole:
        c = whole["ceiling"]
        print(
            report_row(
                "baseline: librdkafka produce, pre-rendered canal-json",
                c["messages"],
                c["seconds"],
                c["rate"],
                "sink's producer settings",
            )
        )
    print(
        report_row(
            "baseline: bare Spark session: start, count, stop",
            "-",
            bare["wall_s"],
            float("nan"),
            f"peak RSS {_mb(bare['peak_rss'])} MB",
        )
    )
    for name, r in (("canal-json", canal), ("avro", avro)):
        if r is None:
            continue
        print(
            report_row(
                f"in session -> Kafka {name}, cold, Spark start included",
                r["rows"],
                r["seconds"],
                r["rows"] / r["seconds"],
                memory_line(r["memory"]),
            )
        )
        print(
            report_row(
                f"in session -> Kafka {name}, cold, query only",
                r["rows"],
                r["query_seconds"],
                r["rows"] / r["query_seconds"],
            )
        )
        print(
            report_row(
                f"in session -> Kafka {name}, warm (2nd changefeed)",
                r["warm_rows"],
                r["warm_seconds"],
                r["warm_rows"] / r["warm_seconds"],
            )
        )
    for name, _a, _b in whole_runs:
        r = whole.get(name)
        if r is None:
            continue
        first = r["phases"].get("batch")
        print(
            report_row(f"sparkcdc run -> Kafka canal-json, {name}", r["rows"], r["wall"], r["rows"] / r["wall"],
                 f"first batch at {first:.1f}s" if first else "")
        )  # fmt: skip
    print()
    print_steady(whole, f, bare, mbl, pmr, ("Kafka canal-json", 150_000))
    if canal is not None:
        warm = canal["warm_rows"] / canal["warm_seconds"]
        print(
            f"in session, canal-json warm: {warm / pmr['rate']:.2f}x python-mysql-replication, "
            f"{warm / mbl['rate'] * 100:.0f} % of mariadb-binlog"
        )
        for name, r in (("canal-json", canal), ("avro", avro)):
            if r is not None:
                print(f"  {name} Spark phases, summed over batches: {_phases(r['durations'])}")
    print_whole_memory(whole_runs, whole)
    if lat is not None:
        print()
        print(
            f"latency: writers committed {lat['writer_rows']:,} rows in {lat['txns']} transactions of "
            f"{lat['rows_per_txn']} rows over {lat['writer_seconds']:.1f}s = {lat['writer_rate']:,.0f} rows/s "
            f"(target {args.latency_rate:,.0f}, {args.latency_writers} writer(s); {lat['writer_late']} transactions "
            f"started > 1 interval late); consumer received {lat['received']:,}; {lat['batches']} batches; "
            f"warm-up ({WARMUP_TXNS} transactions before the paced write) took {lat['warm_s']:.1f}s"
        )
        kinds = {0: "none", 1: "CreateTime", 2: "LogAppendTime"}
        print(
            f"commit -> broker timestamp ({', '.join(kinds.get(t, str(t)) for t in lat['ts_types'])}), "
            f"after {args.latency_warmup:.0f}s warm-up, {lat['steady_rows']:,} rows: "
            f"p50 {lat['broker'][0]:.0f} ms, p90 {lat['broker'][1]:.0f} ms, p99 {lat['broker_p99']:.0f} ms, "
            f"max {lat['broker_max']:.0f} ms (target 4: p99 <= 500 ms: "
            f"{'met' if lat['broker_p99'] <= 500 else 'not met'})"
        )
        print(
            f"commit -> consumed: p50 {lat['consume'][0]:.0f} ms, p90 {lat['consume'][1]:.0f} ms, "
            f"p99 {lat['consume_p99']:.0f} ms"
        )
        rows = lat["durations"].get("numInputRows", [])
        print(
            f"Spark phases, median per batch: {_phases(lat['durations'], 'median')}; "
            f"Spark input rows per batch (binlog segments: the source yields segments, not rows) median "
            f"{statistics.median(rows) if rows else 0:,.0f}, max {max(rows, default=0):,}"
        )
        if lat["received"] != lat["writer_rows"]:
            print(f"WARNING: the consumer received {lat['received']} of {lat['writer_rows']} rows")
    bad = []
    for name, a, b in whole_runs:
        r = whole.get(name)
        if r is not None and r["messages"] != b.rows - a.rows:
            bad.append(f"{name}: {r['messages']} messages")
    for name, r in (("canal-json", canal), ("avro", avro)):
        if r is not None and not (r["rows"] == r["messages"] == r["warm_messages"] == n):
            bad.append(f"in session {name}: {r['rows']} rows, {r['messages']}/{r['warm_messages']} messages")
    if pmr["rows"] != n:
        bad.append(f"python-mysql-replication: {pmr['rows']}")
    if mbl["rows"] != n * f:
        bad.append(f"mariadb-binlog: {mbl['rows']}")
    if bad:
        print(f"WARNING: counts differ from the workload's: {bad}")
    print(f"(one run; {loadavg()} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    sys.exit(main())
