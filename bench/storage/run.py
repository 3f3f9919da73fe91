"""Storage benchmark: upstream -> Spark -> CSV files, with its baselines in the same run.

Usage (from the repository root)::

    .venv/bin/python bench/storage/run.py [--rows 200000] [--backlog-factor 3] [--memory-rows M]
        [--big-txn R] [--master local[2]] [--idle-seconds 20]

Starts a private MariaDB and writes a workload in rounds (two tables; bulk and single-row
transactions; 45 % order inserts, 15 % event inserts with JSON, 25 % updates, 15 % deletes): N
changes, then N x (factor - 1) more, a ``query_tso`` mark between rounds. Then, each in its own
process:

1. baselines: python-mysql-replication decoding the first N changes, ``mariadb-binlog -v`` decoding
   the N x factor range (bench/capture's candidate), a bare Spark session started, counting one row
   and stopped (bench/startup's baseline); and the capture alone (``RowReader`` -> ``RowChange``);
2. in one Spark session, ``start_changefeed`` over the first N changes to ``file://...?protocol=csv``:
   cold (the session's first changefeed) and warm (a second one), then the micro-batch overhead on
   an idle stream (one single-row INSERT every 0.5 s; COMMIT -> batch committed);
3. the whole process as a user runs it: ``sparkcdc run --start-ts ... --target-ts ...`` to CSV over N
   and over N x factor changes; the steady rate is the difference of rows over the difference of
   wall times, the fixed cost the intercept; RSS and PSS of its process tree over time
   (``--memory-rows`` adds a run over a separate backlog of that size, ``--big-txn`` one over a
   single transaction of that many rows).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (
    MB,
    REPORT_HEADER,
    Mark,
    add_backlog_args,
    loadavg,
    memory_line,
    print_steady,
    print_timeline,
    print_whole_memory,
    report_row,
    run_baselines,
    run_candidate,
    run_pymysqlreplication,
    sparkcdc_run,
    whole_process_runs,
    write_backlogs,
    write_rounds,
)

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


def create_tables(db: Any) -> None:
    """The workload's database and its two tables."""
    db.execute("CREATE DATABASE bench", *TABLES)


def write_round(conn: Any, first: int, rows: int) -> int:
    """One round on ids first ..: ~45 % order inserts, 15 % event inserts, 25 % updates, 15 % deletes.

    Returns the row changes written (updates count once).
    """
    n_ord = rows * 45 // 100
    n_evt = rows * 15 // 100
    n_del = rows * 15 // 100
    n_upd = rows - n_ord - n_evt - n_del
    singles = min(SINGLE_ROW_TXNS, n_upd // 2)
    last = first + n_ord - 1
    with conn.cursor() as cur:
        evt = _chunks(first, first + n_evt - 1)
        ords = _chunks(first, last)
        for k, (a, b) in enumerate(ords):
            cur.execute(INSERT_ORDERS.format(a=a, b=b))
            if k < len(evt):
                cur.execute(INSERT_EVENTS.format(a=evt[k][0], b=evt[k][1]))
        for a, b in evt[len(ords) :]:
            cur.execute(INSERT_EVENTS.format(a=a, b=b))
        bulk_upd = _chunks(first, first + n_upd - singles - 1)
        dels = _chunks(last - n_del + 1, last)
        for k in range(max(len(bulk_upd), len(dels))):
            if k < len(bulk_upd):
                cur.execute(UPDATE_ORDERS.format(a=bulk_upd[k][0], b=bulk_upd[k][1]))
            if k < len(dels):
                cur.execute(f"DELETE FROM orders WHERE id BETWEEN {dels[k][0]} AND {dels[k][1]}")
        for i in range(singles):
            cur.execute(
                f"UPDATE orders SET note = 'single', big = big + 1 WHERE id = {first + n_upd - singles + i}"
            )
    return n_ord + n_evt + n_upd + n_del


def write_big_txn(conn: Any, first: int, rows: int) -> int:
    """One transaction of ``rows`` order inserts (one INSERT ... SELECT)."""
    with conn.cursor() as cur:
        cur.execute(INSERT_ORDERS.format(a=first, b=first + rows - 1))
    return rows


def write_workload(db: Any, rows: int) -> dict[str, Any]:
    """The tables and one round of ``rows`` changes; the range as ts and binlog offsets."""
    create_tables(db)
    t0 = time.monotonic()
    marks = write_rounds(db, [rows], write_round)
    return {
        "uri": db.uri,
        "rows": marks[1].rows,
        "start_ts": marks[0].ts,
        "target_ts": marks[1].ts,
        "start": marks[0].offset.to_json(),
        "end": marks[1].offset.to_json(),
        "write_s": time.monotonic() - t0,
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


def run_end_to_end(spec: dict[str, Any]) -> dict[str, Any]:
    """start_changefeed over [start_ts, target_ts] to CSV files, twice; then the idle-stream batch latency.

    The first changefeed of a fresh Spark session also pays for starting Spark's Python workers
    and importing sparkcdc, pyarrow and pandas in each ("cold"); a second changefeed over the same
    range in the same session shows the steady throughput ("warm").
    """
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import start_changefeed
    from sparkcdc.pipeline.spark import get_spark
    from sparkcdc.pipeline.spec import ChangefeedSpec

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
    from sparkcdc.pipeline.changefeed import Progress, start_changefeed
    from sparkcdc.pipeline.spec import ChangefeedSpec

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


# --- the parent ----------------------------------------------------------------------------------------------


def measure(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one candidate of this file in a child process, its process tree's memory sampled."""
    r = run_candidate(Path(__file__).resolve(), name, spec)
    for run in ("cold", "warm"):
        if run in r:
            samples = r["memory"]["timeline"]
            r[run]["tree_peak_rss"] = max(
                (s[1] + s[2] for s in samples if r[run]["t0"] <= s[0] <= r[run]["t1"]), default=0
            )
    return r


def csv_records(out: str) -> int:
    """CSV records under a storage sink's directory."""
    records = 0
    for dirpath, _, files in os.walk(out):
        for name in files:
            if name.startswith("CDC") and name.endswith(".csv"):
                records += Path(dirpath, name).read_bytes().count(b"\r\n")
    return records


def measure_whole(
    db: Any, runs: list[tuple[str, Mark, Mark]], args: argparse.Namespace, out: str
) -> dict[str, Any]:
    """``sparkcdc run`` to CSV over each (name, start, end); ``--repeat-whole`` rounds, the fastest kept."""
    result: dict[str, Any] = {}
    for _rep, i, key, a, b, env in whole_process_runs(runs, args):
        print(f"  sparkcdc run -> CSV, {key}: {b.rows - a.rows:,} changes ...", flush=True)
        sink_dir = f"{out}/run-{i}"
        r = sparkcdc_run(
            db.uri,
            f"file://{sink_dir}?protocol=csv",
            a.ts,
            b.ts,
            f"{out}/data-{i}",
            master=args.master,
            trigger=args.trigger_interval,
            env=env,
        )
        r["rows"] = b.rows - a.rows
        r["records"] = csv_records(sink_dir)
        r["load"] = loadavg()
        print(
            f"    {r['wall']:.1f} s, {r['records']:,} CSV records, {memory_line(r['memory'])} ({r['load']})",
            flush=True,
        )
        if key not in result or r["wall"] < result[key]["wall"]:
            result[key] = r
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backlog_args(ap)
    ap.add_argument(
        "--trigger-interval", default="200 milliseconds", help="micro-batch trigger of sparkcdc run"
    )
    ap.add_argument("--idle-seconds", type=float, default=20.0, help="length of the idle-stream latency test")
    ap.add_argument(
        "--skip-session", action="store_true", help="no in-session (cold/warm) runs, no idle test"
    )
    ap.add_argument("--skip-whole", action="store_true", help="no whole-process (sparkcdc run) runs")
    ap.add_argument("--candidate", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.candidate:
        print(json.dumps(CANDIDATES[args.candidate](json.loads(args.spec))))
        return 0

    from sparkcdc.services.mariadb import LocalMariaDB

    print(f"cores: {os.cpu_count()}; Spark master {args.master}; {loadavg()}", flush=True)
    with LocalMariaDB() as db, tempfile.TemporaryDirectory(prefix="bench-storage-") as out:
        create_tables(db)
        marks, whole_runs = write_backlogs(db, args, write_round, write_big_txn)
        first, mid = marks[0], marks[1]
        spec = {
            "uri": db.uri,
            "start_ts": first.ts,
            "target_ts": mid.ts,
            "start": first.offset.to_json(),
            "end": mid.offset.to_json(),
            "out": out,
            "master": args.master,
            "idle_seconds": args.idle_seconds,
        }
        pmr, mbl, bare = run_baselines(db, marks, args)
        print("capture alone (N) ...", flush=True)
        cap = measure("capture", spec)
        e2e = None
        if not args.skip_session:
            print("in session: sparkcdc -> CSV (cold, warm, idle stream) ...", flush=True)
            e2e = measure("e2e", spec)
        whole: dict[str, Any] = {}
        if not args.skip_whole:
            print("whole process: sparkcdc run -> CSV ...", flush=True)
            whole = measure_whole(db, whole_runs, args, out)
    print_report(args, whole_runs, pmr, mbl, bare, cap, e2e, whole)
    return 0


def print_report(
    args: argparse.Namespace,
    whole_runs: list[tuple[str, Mark, Mark]],
    pmr: dict[str, Any],
    mbl: dict[str, Any],
    bare: dict[str, Any],
    cap: dict[str, Any],
    e2e: dict[str, Any] | None,
    whole: dict[str, Any],
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
    print(
        report_row(
            "baseline: bare Spark session: start, count, stop",
            "-",
            bare["wall_s"],
            float("nan"),
            f"peak RSS {bare['peak_rss'] / MB:,.0f} MB",
        )
    )
    print(
        report_row(
            "capture alone: RowReader -> RowChange (N)",
            cap["rows"],
            cap["seconds"],
            cap["rows"] / cap["seconds"],
        )
    )
    if e2e is not None:
        cold, warm = e2e["cold"], e2e["warm"]
        print(
            report_row(
                "in session -> CSV, cold, Spark start included",
                cold["rows"],
                cold["t1"] - e2e["t_begin"],
                cold["rows"] / (cold["t1"] - e2e["t_begin"]),
                memory_line(e2e["memory"]),
            )
        )
        print(
            report_row(
                "in session -> CSV, cold, query only",
                cold["rows"],
                cold["seconds"],
                cold["rows"] / cold["seconds"],
            )
        )
        print(
            report_row(
                "in session -> CSV, warm (2nd changefeed)",
                warm["rows"],
                warm["seconds"],
                warm["rows"] / warm["seconds"],
            )
        )
    for name, _a, _b in whole_runs:
        r = whole.get(name)
        if r is None:
            continue
        first = r["phases"].get("batch")
        print(
            report_row(
                f"sparkcdc run -> CSV, {name}",
                r["rows"],
                r["wall"],
                r["rows"] / r["wall"],
                f"first batch at {first:.1f}s" if first else "",
            )
        )
    print()
    print_steady(whole, f, bare, mbl, pmr, ("CSV", 200_000))
    if e2e is not None:
        warm = e2e["warm"]
        rate_w = warm["rows"] / warm["seconds"]
        print(
            f"in session, warm: {rate_w / pmr['rate']:.2f}x python-mysql-replication, "
            f"{rate_w / mbl['rate'] * 100:.0f} % of mariadb-binlog; {warm['batches']} micro-batch(es), "
            f"{warm['csv_records']} CSV records"
        )
        idle = e2e.get("idle")
        if idle:
            print(
                f"micro-batch overhead on an idle stream (1 row / 0.5 s, {idle['rows']} rows, "
                f"{idle['delivered']} delivered): median {idle['median_s'] * 1000:.0f} ms, "
                f"p90 {idle['p90_s'] * 1000:.0f} ms, max {idle['max_s'] * 1000:.0f} ms (COMMIT -> batch committed)"
            )
    print_whole_memory(whole_runs, whole)
    if e2e is not None:
        print()
        print("in-session process tree (cold, then warm):")
        print_timeline(
            e2e["memory"], e2e["t_begin"], {k: (e2e[k]["t0"], e2e[k]["t1"]) for k in ("cold", "warm")}
        )
    bad = []
    for name, a, b in whole_runs:
        r = whole.get(name)
        if r is not None and r["records"] != b.rows - a.rows:
            bad.append(f"{name}: {r['records']} CSV records")
    if e2e is not None:
        for run in ("cold", "warm"):
            if e2e[run]["rows"] != n:
                bad.append(f"in session {run}: {e2e[run]['rows']}")
    for name, r in (("capture", cap), ("python-mysql-replication", pmr)):
        if r["rows"] != n:
            bad.append(f"{name}: {r['rows']}")
    if mbl["rows"] != n * f:
        bad.append(f"mariadb-binlog: {mbl['rows']}")
    if bad:
        print(f"WARNING: counts differ from the workload's: {bad}")
    print(f"(one run; {loadavg()} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    sys.exit(main())
