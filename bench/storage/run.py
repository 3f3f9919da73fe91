"""Storage benchmark: upstream → Spark → CSV files, beside the capture alone and python-mysql-replication.

Usage (from the repository root)::

    .venv/bin/python bench/storage/run.py [--rows 200000] [--master local[2]] [--idle-seconds 20]

Starts a private MariaDB, writes a fixed workload of N row changes between two
``query_tso`` calls, then measures on that same binlog range, each in its own
process:

1. end to end: ``start_changefeed`` with start/target ts to ``file://…?protocol=csv``
   (rows/s from the query start to the checkpoint reaching target-ts, and with
   the Spark session start-up included); peak memory = the largest sum of RSS
   over the process tree (driver Python, Spark's JVM, its Python workers),
   sampled with psutil;
2. the capture alone: ``RowReader`` over the range, producing RowChange objects;
3. python-mysql-replication alone: ``BinLogStreamReader`` decoding every row.

Then, in the end-to-end process, the Spark micro-batch overhead: a second
changefeed follows an idle stream while one single-row INSERT commits every
0.5 s; the latency of each row is the time from its COMMIT returning to the
progress callback reporting the batch that holds it committed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

CHUNK = 1000
"""Rows per bulk statement (one transaction each)."""

WARMUP_ROWS = 5
"""Idle-stream rows sent (and waited for) before the latency is measured."""

SINGLE_ROW_TXNS = 2000
"""Single-row autocommit updates mixed in (small transactions)."""

TABLES = (
    """CREATE TABLE bench.orders (
      id INT PRIMARY KEY, tiny TINYINT NOT NULL, qty INT UNSIGNED NOT NULL, big BIGINT NOT NULL,
      price DECIMAL(12,4) NOT NULL, ratio DOUBLE NOT NULL, name VARCHAR(64) NOT NULL,
      created DATETIME(6) NOT NULL, updated TIMESTAMP(3) NULL, day DATE NOT NULL, digest BLOB NOT NULL,
      state ENUM('new','paid','shipped','done') NOT NULL, note VARCHAR(32) NULL)""",
    """CREATE TABLE bench.events (
      id BIGINT PRIMARY KEY, order_id INT NOT NULL, kind VARCHAR(16) NOT NULL, payload JSON NULL)""",
)

INSERT_ORDERS = """
INSERT INTO bench.orders
SELECT seq, CAST(seq % 128 AS SIGNED) - 64, seq * 3, seq * 1000003, seq / 7, seq * 1.5,
       CONCAT('order-', seq, '-', REPEAT('x', seq % 20)),
       TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL (seq * 7919) % 1000000 MICROSECOND,
       IF(seq % 3 = 0, NULL, TIMESTAMP('2024-06-01') + INTERVAL seq SECOND),
       DATE('2020-01-01') + INTERVAL seq % 3000 DAY, UNHEX(SHA1(seq)),
       ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'done'), IF(seq % 5 = 0, NULL, CONCAT('n', seq))
FROM seq_{a}_to_{b}
"""

INSERT_EVENTS = """
INSERT INTO bench.events
SELECT seq, seq % 50000, ELT(1 + seq % 3, 'created', 'paid', 'sent'), CONCAT('{{"seq": ', seq, ', "ok": true}}')
FROM seq_{a}_to_{b}
"""

UPDATE_ORDERS = """
UPDATE bench.orders SET qty = qty + 1, price = price * 2, name = CONCAT(name, '!'),
       updated = TIMESTAMP('2025-01-01') + INTERVAL id SECOND, state = 'paid'
WHERE id BETWEEN {a} AND {b}
"""


def _chunks(lo: int, hi: int, size: int = CHUNK) -> list[tuple[int, int]]:
    return [(a, min(a + size - 1, hi)) for a in range(lo, hi + 1, size)]


def write_workload(db: Any, rows: int) -> dict[str, Any]:
    """~45% order inserts, 15% event inserts, 25% updates (bulk and single-row), 15% deletes."""
    from sparkcdc.capture.start import head_offset, query_tso
    from sparkcdc.capture.upstream import UpstreamConfig

    up = UpstreamConfig.from_uri(db.uri)
    db.execute("CREATE DATABASE bench", *TABLES)
    n_ord = rows * 45 // 100
    n_evt = rows * 15 // 100
    n_del = rows * 15 // 100
    n_upd = rows - n_ord - n_evt - n_del
    singles = min(SINGLE_ROW_TXNS, n_upd // 2)
    start_ts = query_tso(up)
    start = head_offset(up)
    t0 = time.monotonic()
    conn = db.connect("bench")
    with conn.cursor() as cur:
        evt = _chunks(1, n_evt)
        for k, (a, b) in enumerate(_chunks(1, n_ord)):
            cur.execute(INSERT_ORDERS.format(a=a, b=b))
            if k < len(evt):
                cur.execute(INSERT_EVENTS.format(a=evt[k][0], b=evt[k][1]))
        for a, b in evt[len(_chunks(1, n_ord)) :]:
            cur.execute(INSERT_EVENTS.format(a=a, b=b))
        bulk_upd = _chunks(1, n_upd - singles)
        dels = _chunks(n_ord - n_del + 1, n_ord)
        for k in range(max(len(bulk_upd), len(dels))):
            if k < len(bulk_upd):
                cur.execute(UPDATE_ORDERS.format(a=bulk_upd[k][0], b=bulk_upd[k][1]))
            if k < len(dels):
                cur.execute(f"DELETE FROM orders WHERE id BETWEEN {dels[k][0]} AND {dels[k][1]}")
        for i in range(singles):
            cur.execute(
                f"UPDATE orders SET note = 'single', big = big + 1 WHERE id = {n_upd - singles + 1 + i}"
            )
    conn.close()
    write_s = time.monotonic() - t0
    end = head_offset(up)
    target_ts = query_tso(up)
    return {
        "uri": db.uri,
        "rows": n_ord + n_evt + n_upd + n_del,
        "start_ts": start_ts,
        "target_ts": target_ts,
        "start": start.to_json(),
        "end": end.to_json(),
        "write_s": write_s,
    }


# --- candidates: each runs in its own process and prints one JSON line --------------------------


def _vm_hwm() -> int:
    """Peak RSS of this process since exec (VmHWM), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def run_capture(spec: dict[str, Any]) -> dict[str, Any]:
    """sparkcdc's RowReader producing RowChange objects over [start, end)."""
    from sparkcdc.capture.offset import Offset
    from sparkcdc.capture.reader import RowReader
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.model import RowChange

    up = UpstreamConfig.from_uri(spec["uri"])
    rows = 0
    t0 = time.monotonic()
    reader = RowReader(up, Offset.from_json(spec["start"]), Offset.from_json(spec["end"]), blocking=False)
    for ev in reader.events():
        if isinstance(ev, RowChange):
            rows += 1
    return {"rows": rows, "seconds": time.monotonic() - t0, "peak_rss": _vm_hwm()}


def run_pymysqlreplication(spec: dict[str, Any]) -> dict[str, Any]:
    """python-mysql-replication decoding every row of the same range."""
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
    return {"rows": rows, "seconds": time.monotonic() - t0, "peak_rss": _vm_hwm()}


def run_end_to_end(spec: dict[str, Any]) -> dict[str, Any]:
    """start_changefeed over [start_ts, target_ts] to CSV files, twice; then the idle-stream batch latency.

    The first changefeed of a fresh Spark session also pays for starting Spark's Python workers
    and importing sparkcdc, pyarrow and pandas in each ("cold"); a second changefeed over the same
    range in the same session shows the steady throughput ("warm").
    """
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import ChangefeedSpec, start_changefeed
    from sparkcdc.pipeline.spark import get_spark

    out_dir = spec["out"]
    t_begin = time.time()
    spark = get_spark(spec["master"])
    t_spark = time.time()
    cfg = ReplicaConfig.from_dict({"filter": {"rules": ["bench.*"]}})
    result: dict[str, Any] = {"t_begin": t_begin, "t_spark": t_spark}
    for run in ("cold", "warm"):
        cf = ChangefeedSpec(
            changefeed_id=f"bench-{run}",
            upstream_uri=spec["uri"],
            sink_uri=f"file://{out_dir}/{run}?protocol=csv",
            config=cfg,
            start_ts=spec["start_ts"],
            target_ts=spec["target_ts"],
            checkpoint_dir=f"{out_dir}/state/bench-{run}",
        )
        t0 = time.time()
        running = start_changefeed(spark, cf)
        try:
            if not running.wait(timeout=3600):
                err = running.exception()
                raise RuntimeError(f"changefeed did not reach target-ts: {err.message if err else 'timeout'}")
            t1 = time.time()
            prog = running.progress()
        finally:
            running.stop()
        records = 0
        for dirpath, _, files in os.walk(f"{out_dir}/{run}"):
            for name in files:
                if name.startswith("CDC") and name.endswith(".csv"):
                    with open(os.path.join(dirpath, name), "rb") as f:
                        records += f.read().count(b"\r\n")
        result[run] = {
            "rows": prog.rows_total,
            "csv_records": records,
            "batches": prog.batches,
            "t0": t0,
            "t1": t1,
            "seconds": t1 - t0,
        }
    if spec["idle_seconds"] > 0:
        result["idle"] = idle_latency(spark, spec, out_dir, cfg)
    spark.stop()
    return result


def idle_latency(spark: Any, spec: dict[str, Any], out_dir: str, cfg: Any) -> dict[str, Any]:
    """Median time from a single-row COMMIT to its batch being committed, on an otherwise idle stream."""
    import pymysql

    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.pipeline.changefeed import ChangefeedSpec, Progress, start_changefeed

    up = UpstreamConfig.from_uri(spec["uri"])
    conn = up.connect(database="bench")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS idle_ticks (id INT PRIMARY KEY, at DOUBLE NOT NULL)")
    seen: list[tuple[float, int]] = []
    lock = threading.Lock()

    def on_progress(p: Progress) -> None:
        with lock:
            seen.append((time.time(), p.rows_total))

    cf = ChangefeedSpec(
        changefeed_id="bench-idle",
        upstream_uri=spec["uri"],
        sink_uri=f"file://{out_dir}/idle?protocol=csv",
        config=cfg,
        checkpoint_dir=f"{out_dir}/state/bench-idle",
    )
    running = start_changefeed(spark, cf, on_progress)
    commits: list[float] = []
    try:
        # Warm up: the first batches of a query start its Python workers; measure after five rows
        # went through one by one.
        with conn.cursor() as cur:
            for k in range(1, WARMUP_ROWS + 1):
                cur.execute("INSERT INTO idle_ticks VALUES (%s, %s)", (-k, time.time()))
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    with lock:
                        if seen and seen[-1][1] >= k:
                            break
                    time.sleep(0.05)
        with lock:
            base = seen[-1][1] if seen else 0
        n = int(spec["idle_seconds"] / 0.5)
        for k in range(1, n + 1):
            tick = time.monotonic()
            try:
                with conn.cursor() as cur:
                    cur.execute("INSERT INTO idle_ticks VALUES (%s, %s)", (k, time.time()))
            except pymysql.MySQLError as exc:
                raise RuntimeError(f"idle insert failed: {exc}") from exc
            commits.append(time.time())
            time.sleep(max(0.0, 0.5 - (time.monotonic() - tick)))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if seen and seen[-1][1] >= base + n:
                    break
            time.sleep(0.1)
    finally:
        running.stop()
        conn.close()
    latencies = []
    for k, committed_at in enumerate(commits, start=1):
        with lock:
            hit = next((t for t, rows in seen if rows >= base + k), None)
        if hit is not None:
            latencies.append(hit - committed_at)
    if not latencies:
        raise RuntimeError("no idle row was reported committed")
    latencies.sort()
    return {
        "rows": len(commits),
        "delivered": len(latencies),
        "median_s": statistics.median(latencies),
        "p90_s": latencies[int(0.9 * (len(latencies) - 1))],
        "max_s": latencies[-1],
    }


CANDIDATES = {"e2e": run_end_to_end, "capture": run_capture, "pymysqlreplication": run_pymysqlreplication}


# --- the parent: spawn, sample the process tree's RSS, print -----------------------------------------


def measure(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one candidate in a child process; add the peak RSS of its whole process tree."""
    import psutil

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--candidate", name, "--spec", json.dumps(spec)],
            stdout=out,
            env=env,
        )
        samples: list[tuple[float, int]] = []
        timeline: list[tuple[float, int, int]] = []
        """(time, JVM RSS, Python processes' RSS)"""
        root = psutil.Process(p.pid)
        at_peak: list[tuple[str, int]] = []
        """The processes of the largest sample: (what it runs, RSS)."""
        while p.poll() is None:
            total = jvm = 0
            here: list[tuple[str, int]] = []
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for proc in procs:
                try:
                    rss = proc.memory_info().rss
                    total += rss
                    if proc.name() == "java":
                        jvm += rss
                    here.append((_label(proc), rss))
                except psutil.NoSuchProcess:
                    pass  # a worker that just exited
            now = time.time()
            if total > max((x for _, x in samples), default=0):
                at_peak = here
            samples.append((now, total))
            timeline.append((now, jvm, total - jvm))
            time.sleep(0.1)
        if p.returncode != 0:
            raise RuntimeError(f"candidate {name} exited with {p.returncode}")
        out.seek(0)
        result = dict(json.loads(out.read().decode().strip().splitlines()[-1]))
    result["tree_peak_rss"] = max((s for _, s in samples), default=0)
    result["timeline"] = timeline
    result["at_peak"] = sorted(at_peak, key=lambda x: -x[1])
    for run in ("cold", "warm"):
        if run in result:
            r = result[run]
            r["tree_peak_rss"] = max((s for t, s in samples if r["t0"] <= t <= r["t1"]), default=0)
    return result


def _label(proc: Any) -> str:
    """What a process of the tree runs: java, or the module a Python process was started with."""
    cmd = proc.cmdline()
    if proc.name() == "java" or not cmd:
        return proc.name()
    if "-m" in cmd:
        return " ".join(cmd[cmd.index("-m") + 1 : cmd.index("-m") + 3])
    return " ".join(os.path.basename(c) for c in cmd[:2])


def print_rss_timeline(e2e: dict[str, Any], step: float = 2.0) -> None:
    """RSS of the end-to-end process tree over time: the largest sample of each ``step`` seconds."""
    timeline = e2e["timeline"]
    if not timeline:
        return
    t0 = e2e["t_begin"]
    marks = {"cold": e2e["cold"], "warm": e2e["warm"]}
    print()
    print(f"RSS of the end-to-end process tree over time (largest sample of each {step:.0f} s; MB):")
    print(f"{'s':>6} {'JVM':>6} {'Python':>7} {'total':>6}  phase")
    k = 0
    while k < len(timeline):
        start = timeline[k][0]
        bucket = []
        while k < len(timeline) and timeline[k][0] < start + step:
            bucket.append(timeline[k])
            k += 1
        top = max(bucket, key=lambda x: x[1] + x[2])
        phase = next((n for n, r in marks.items() if r["t0"] <= top[0] <= r["t1"]), "")
        print(
            f"{top[0] - t0:>6.1f} {top[1] / 2**20:>6.0f} {top[2] / 2**20:>7.0f} "
            f"{(top[1] + top[2]) / 2**20:>6.0f}  {phase}"
        )
    print("the processes of the largest sample (RSS MB; forked workers share pages, counted in each):")
    for label, rss in e2e["at_peak"]:
        print(f"  {rss / 2**20:>6.0f}  {label[:90]}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="row changes in the workload (default 200000)")
    ap.add_argument(
        "--master", default="local[2]", help="Spark master of the end-to-end run (default local[2])"
    )
    ap.add_argument("--idle-seconds", type=float, default=20.0, help="length of the idle-stream latency test")
    ap.add_argument("--candidate", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.candidate:
        print(json.dumps(CANDIDATES[args.candidate](json.loads(args.spec))))
        return 0

    from sparkcdc.services.mariadb import LocalMariaDB

    with LocalMariaDB() as db, tempfile.TemporaryDirectory(prefix="bench-storage-") as out:
        w = write_workload(db, args.rows)
        print(
            f"workload: {w['rows']} row changes in {w['write_s']:.1f}s; ts {w['start_ts']} -> {w['target_ts']}; "
            f"cores: {os.cpu_count()}; Spark master {args.master}",
            flush=True,
        )
        spec = dict(w, out=out, master=args.master, idle_seconds=args.idle_seconds)
        cap = measure("capture", spec)
        pmr = measure("pymysqlreplication", spec)
        e2e = measure("e2e", spec)

    def line(name: str, rows: int, seconds: float, rss: int) -> str:
        return f"{name:52} {rows:>9} {seconds:>8.2f} {rows / seconds:>10.0f} {rss / 2**20:>12.0f}"

    print()
    print(f"{'measure':52} {'rows':>9} {'seconds':>8} {'rows/s':>10} {'peak RSS MB':>12}")
    print("-" * 95)
    cold, warm = e2e["cold"], e2e["warm"]
    print(line("end to end, warm: binlog -> Spark -> CSV files", warm["rows"], warm["seconds"], warm["tree_peak_rss"]))  # fmt: skip
    print(line("end to end, cold: first changefeed of the session", cold["rows"], cold["seconds"], cold["tree_peak_rss"]))  # fmt: skip
    print(line("  cold, Spark session start-up included", cold["rows"], cold["t1"] - e2e["t_begin"], e2e["tree_peak_rss"]))  # fmt: skip
    print(line("capture alone: RowReader -> RowChange", cap["rows"], cap["seconds"], cap["tree_peak_rss"]))
    print(
        line(
            "python-mysql-replication 1.0.17 decode alone", pmr["rows"], pmr["seconds"], pmr["tree_peak_rss"]
        )
    )
    rate_pmr = pmr["rows"] / pmr["seconds"]
    print()
    print(
        f"end to end / python-mysql-replication: warm {warm['rows'] / warm['seconds'] / rate_pmr:.2f}x, "
        f"cold {cold['rows'] / cold['seconds'] / rate_pmr:.2f}x (target >= 3x)"
    )
    print(
        f"end to end (warm) / capture alone: {warm['rows'] / warm['seconds'] / (cap['rows'] / cap['seconds']):.2f}x"
    )
    print(
        f"end-to-end runs: {warm['batches']} micro-batch(es), {warm['csv_records']} CSV records each; "
        f"Spark session start-up {e2e['t_spark'] - e2e['t_begin']:.1f}s"
    )
    idle = e2e.get("idle")
    if idle:
        print(
            f"micro-batch overhead on an idle stream (1 row / 0.5 s, {idle['rows']} rows, "
            f"{idle['delivered']} delivered): median {idle['median_s'] * 1000:.0f} ms, "
            f"p90 {idle['p90_s'] * 1000:.0f} ms, max {idle['max_s'] * 1000:.0f} ms (COMMIT -> batch committed)"
        )
    print_rss_timeline(e2e)
    got = (("cold", cold), ("warm", warm), ("capture", cap), ("python-mysql-replication", pmr))
    mismatched = [n for n, r in got if r["rows"] != w["rows"]]
    if mismatched:
        print(f"WARNING: row counts differ from the workload's {w['rows']}: {mismatched}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
