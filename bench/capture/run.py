"""Capture benchmark: decode the same binlog range with sparkcdc, python-mysql-replication and mariadb-binlog.

Candidate (a) uses the C row decoder (sparkcdc.capture._rowdecode) and (a') the same reader
with the Python reference decoder, the fallback when the extension is not built.

Usage (from the repository root)::

    .venv/bin/python bench/capture/run.py [--rows N] [--repeat K] [--profile] [--sinks]

Starts a private MariaDB, writes a fixed workload of N row changes (inserts,
updates, deletes of mixed types), then decodes that binlog range once per
candidate, each in its own process, and prints rows/s and peak RSS (ru_maxrss).
``--sinks`` adds what a writer task does after decoding: (e) the Kafka canal-json writer
(private Tansu broker) and (f) the CSV storage writer, and the per-row split of the time.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkcdc.capture.offset import Offset, file_seq
from sparkcdc.capture.reader import RowReader, Scanner
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model import RowChange
from sparkcdc.services.mariadb import LocalMariaDB

CHUNK = 1000
"""Rows per bulk statement (one transaction each)."""

SINGLE_ROW_TXNS = 2000
"""Single-row autocommit updates mixed into the workload (small transactions)."""

TABLE = """
CREATE TABLE bench.orders (
  id INT PRIMARY KEY,
  tiny TINYINT NOT NULL,
  qty INT UNSIGNED NOT NULL,
  big BIGINT NOT NULL,
  price DECIMAL(12,4) NOT NULL,
  ratio DOUBLE NOT NULL,
  name VARCHAR(64) NOT NULL,
  created DATETIME(6) NOT NULL,
  updated TIMESTAMP(3) NULL,
  day DATE NOT NULL,
  digest BLOB NOT NULL,
  state ENUM('new','paid','shipped','done') NOT NULL,
  note VARCHAR(32) NULL
)
"""

INSERT = """
INSERT INTO bench.orders
SELECT seq, CAST(seq % 128 AS SIGNED) - 64, seq * 3, seq * 1000003, seq / 7, seq * 1.5,
       CONCAT('order-', seq, '-', REPEAT('x', seq % 20)),
       TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL (seq * 7919) % 1000000 MICROSECOND,
       IF(seq % 3 = 0, NULL, TIMESTAMP('2024-06-01') + INTERVAL seq SECOND),
       DATE('2020-01-01') + INTERVAL seq % 3000 DAY,
       UNHEX(SHA1(seq)),
       ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'done'),
       IF(seq % 5 = 0, NULL, CONCAT('n', seq))
FROM seq_{a}_to_{b}
"""

UPDATE = """
UPDATE bench.orders SET qty = qty + 1, price = price * 2, name = CONCAT(name, '!'),
       updated = TIMESTAMP('2025-01-01') + INTERVAL id SECOND, state = 'paid'
WHERE id BETWEEN {a} AND {b}
"""


@dataclass
class Workload:
    """What was written: the binlog range and how many row changes it holds."""

    start: Offset
    end: Offset
    inserts: int
    updates: int
    deletes: int
    write_s: float

    @property
    def rows(self) -> int:
        """Row changes in the range."""
        return self.inserts + self.updates + self.deletes


def _chunks(lo: int, hi: int, size: int = CHUNK) -> list[tuple[int, int]]:
    return [(a, min(a + size - 1, hi)) for a in range(lo, hi + 1, size)]


def write_workload(db: LocalMariaDB, rows: int) -> Workload:
    """60% inserts, 25% updates (bulk and single-row), 15% deletes; interleaved transactions."""
    up = UpstreamConfig.from_uri(db.uri)
    db.execute("CREATE DATABASE bench", TABLE)
    n_ins = rows * 60 // 100
    n_del = rows * 15 // 100
    n_upd = rows - n_ins - n_del
    singles = min(SINGLE_ROW_TXNS, n_upd // 2)
    start = head_offset(up)
    t0 = time.monotonic()
    conn = db.connect("bench")
    with conn.cursor() as cur:
        for a, b in _chunks(1, n_ins):
            cur.execute(INSERT.format(a=a, b=b))
        bulk_upd = _chunks(1, n_upd - singles)
        dels = _chunks(n_ins - n_del + 1, n_ins)
        for k in range(max(len(bulk_upd), len(dels))):
            if k < len(bulk_upd):
                cur.execute(UPDATE.format(a=bulk_upd[k][0], b=bulk_upd[k][1]))
            if k < len(dels):
                cur.execute(f"DELETE FROM orders WHERE id BETWEEN {dels[k][0]} AND {dels[k][1]}")
        for i in range(singles):
            rid = n_upd - singles + 1 + i
            cur.execute(f"UPDATE orders SET note = 'single', big = big + 1 WHERE id = {rid}")
    conn.close()
    write_s = time.monotonic() - t0
    end = head_offset(up)
    return Workload(start, end, n_ins, n_upd, n_del, write_s)


# --- candidates: each runs in its own process and prints one JSON line --------------------------


def _vm_hwm(pid: int | str = "self") -> int | None:
    """Peak RSS in bytes since the process's exec (VmHWM); None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _result(rows: int, t0: float, t1: float) -> dict[str, Any]:
    # ru_maxrss of a forked child can include the parent's pages from before exec; VmHWM cannot.
    peak = _vm_hwm() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"rows": rows, "t0": t0, "t1": t1, "maxrss": peak}


def run_sparkcdc(spec: dict[str, Any]) -> dict[str, Any]:
    """(a) sparkcdc RowReader producing RowChange objects over [start, end)."""
    up = UpstreamConfig.from_uri(spec["uri"])
    start, end = Offset.from_json(spec["start"]), Offset.from_json(spec["end"])
    rows = 0
    t0 = time.time()
    for ev in RowReader(up, start, end, blocking=False).events():
        if isinstance(ev, RowChange):
            rows += 1
    return _result(rows, t0, time.time())


def run_sparkcdc_python(spec: dict[str, Any]) -> dict[str, Any]:
    """(a') candidate (a) as when the C row decoder is not built: every row through the Python reference."""
    from sparkcdc.capture import rowcodec

    rowcodec._native = None
    return run_sparkcdc(spec)


def run_pymysqlreplication(spec: dict[str, Any]) -> dict[str, Any]:
    """(b) python-mysql-replication decoding every row of the same range (bench/common's candidate)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import common

    t0 = time.time()
    r = common.run_pymysqlreplication(spec)
    return _result(int(r["rows"]), t0, t0 + float(r["seconds"]))


def _segment_rows(spec: dict[str, Any]) -> Any:
    """The range's ROWS events as lists of RowChange with their shapes (what a segment writer task reads)."""
    from sparkcdc.capture.reader import TableShapes

    up = UpstreamConfig.from_uri(spec["uri"])
    start, end = Offset.from_json(spec["start"]), Offset.from_json(spec["end"])
    reader = RowReader(up, start, end, blocking=False, shapes=TableShapes(version=1))
    for ev in reader.event_batches():
        if type(ev) is list:
            yield ev, reader.shapes.last[(ev[0].schema, ev[0].table)]


def run_sparkcdc_kafka(spec: dict[str, Any]) -> dict[str, Any]:
    """(e) (a) plus the Kafka sink's writer (canal-json, Tansu broker of spec["sink"]): a writer task's work."""
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.sink import create_sink
    from sparkcdc.sink.base import WriterContext
    from sparkcdc.sink.kafka.producer import get_producer

    sink = create_sink(spec["sink"], ReplicaConfig(), "bench")
    sink.check()
    # not timed: the producer's connection, the topic's metadata and producer id (one message per partition)
    producer = get_producer(sink.options).producer
    topic = sink.options.topic
    for part in range(sink.num_partitions_of(topic)):
        producer.produce(topic, b"warm-up", None, part)
    producer.flush(30)
    rows = 0
    t0, c0 = time.time(), time.process_time()
    w = sink.open_writer(WriterContext("bench", 0, 0))
    for ev, info in _segment_rows(spec):
        w.write_rows(ev, info)
        rows += len(ev)
    w.close()
    return {**_result(rows, t0, time.time()), "cpu": time.process_time() - c0}


def run_sparkcdc_csv(spec: dict[str, Any]) -> dict[str, Any]:
    """(f) (a) plus the storage sink's CSV writer into a local directory: a segment writer task's work."""
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.sink import create_sink
    from sparkcdc.sink.base import WriterContext

    rows = 0
    with tempfile.TemporaryDirectory(prefix="bench-capture-csv-") as d:
        sink = create_sink(f"file://{d}?protocol=csv", ReplicaConfig(), "bench")
        t0, c0 = time.time(), time.process_time()
        w = sink.open_writer(WriterContext("bench", 0, 0))
        for ev, info in _segment_rows(spec):
            w.write_rows(ev, info)
            rows += len(ev)
        w.close()
        t1 = time.time()
    return {**_result(rows, t0, t1), "cpu": time.process_time() - c0}


CANDIDATES = {
    "sparkcdc": run_sparkcdc,
    "sparkcdc-python": run_sparkcdc_python,
    "pymysqlreplication": run_pymysqlreplication,
    "sparkcdc-kafka": run_sparkcdc_kafka,
    "sparkcdc-csv": run_sparkcdc_csv,
}


def _child(name: str, spec: dict[str, Any]) -> None:
    print(json.dumps(CANDIDATES[name](spec)))


def _spawn(name: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--candidate", name, "--spec", json.dumps(spec)],
        stdout=subprocess.PIPE,
        text=True,
    )


def _collect(p: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = p.communicate(timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(f"candidate process exited with {p.returncode}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def _spec(db: LocalMariaDB, start: Offset, end: Offset, server_id: int = 0) -> dict[str, Any]:
    return {"uri": db.uri, "start": start.to_json(), "end": end.to_json(), "server_id": server_id or 90001}


def measure_python(name: str, db: LocalMariaDB, w: Workload) -> dict[str, Any]:
    """One candidate in one process."""
    r = _collect(_spawn(name, _spec(db, w.start, w.end)))
    r["seconds"] = r["t1"] - r["t0"]
    return r


def measure_parallel(db: LocalMariaDB, w: Workload) -> dict[str, Any]:
    """(d) sparkcdc with the range split at a middle transaction boundary, two processes at once."""
    up = UpstreamConfig.from_uri(db.uri)
    t0 = time.monotonic()
    txns = list(Scanner(up).scan(w.start, stop=lambda t: t.end.key() >= w.end.key()))
    total = sum(t.nbytes for t in txns)
    acc = 0
    mid = w.start
    for t in txns:
        acc += t.nbytes
        mid = t.end
        if acc >= total // 2:
            break
    scan_s = time.monotonic() - t0
    procs = [_spawn("sparkcdc", _spec(db, w.start, mid)), _spawn("sparkcdc", _spec(db, mid, w.end))]
    parts = [_collect(p) for p in procs]
    return {
        "rows": sum(p["rows"] for p in parts),
        "seconds": max(p["t1"] for p in parts) - min(p["t0"] for p in parts),
        "maxrss": max(p["maxrss"] for p in parts),
        "scan_s": scan_s,
        "mid": str(mid),
    }


def measure_mariadb_binlog(db: LocalMariaDB, w: Workload) -> dict[str, Any]:
    """(c) the C decoder: mariadb-binlog --read-from-remote-server --base64-output=decode-rows -v."""
    exe = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if exe is None:
        raise FileNotFoundError("mariadb-binlog not found: apt-get install mariadb-client")
    files = sorted({w.start.file, w.end.file}, key=file_seq)
    args = [
        exe,
        "--read-from-remote-server",
        "--host=127.0.0.1",
        f"--port={db.port}",
        "--user=root",
        "--base64-output=decode-rows",
        "-v",
        f"--start-position={w.start.pos}",
        f"--stop-position={w.end.pos}",
        *files,
    ]
    with tempfile.NamedTemporaryFile(prefix="bench-binlog-", suffix=".txt") as out:
        t0 = time.monotonic()
        p = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE)
        # Sample the child's VmHWM (monotonic peak RSS since its exec) until it exits.
        peak = 0
        while p.poll() is None:
            peak = max(peak, _vm_hwm(p.pid) or 0)
            time.sleep(0.005)
        seconds = time.monotonic() - t0
        if p.returncode != 0:
            err = p.stderr.read().decode() if p.stderr else ""
            raise RuntimeError(f"mariadb-binlog exited with {p.returncode}: {err}")
        out.flush()
        out.seek(0)
        rows = 0
        for line in out:
            if line.startswith((b"### INSERT INTO", b"### UPDATE", b"### DELETE FROM")):
                rows += 1
    return {"rows": rows, "seconds": seconds, "maxrss": peak}


def profile_sparkcdc(db: LocalMariaDB, w: Workload, top: int = 25) -> str:
    """cProfile of candidate (a) in this process: the top functions by own time."""
    spec = _spec(db, w.start, w.end)
    prof = cProfile.Profile()
    prof.enable()
    run_sparkcdc(spec)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="row changes in the workload (default 200000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per candidate; the fastest is shown")
    ap.add_argument("--profile", action="store_true", help="also print a cProfile of the sparkcdc reader")
    ap.add_argument(
        "--sinks",
        action="store_true",
        help="also (e) decode + Kafka canal-json writer (private Tansu) and (f) decode + CSV storage writer",
    )
    ap.add_argument("--candidate", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.candidate:
        _child(args.candidate, json.loads(args.spec))
        return 0

    with contextlib.ExitStack() as stack:
        db = stack.enter_context(LocalMariaDB())
        w = write_workload(db, args.rows)
        mb = (w.end.pos - w.start.pos) / 2**20 if w.start.file == w.end.file else float("nan")
        print(
            f"workload: {w.rows} row changes ({w.inserts} I / {w.updates} U / {w.deletes} D), "
            f"binlog {w.start} -> {w.end} ({mb:.1f} MB), written in {w.write_s:.1f}s, cores: {os.cpu_count()}"
        )
        measures: dict[str, Callable[[], dict[str, Any]]] = {
            "(a) sparkcdc RowReader -> RowChange": lambda: measure_python("sparkcdc", db, w),
            "(a') (a) with the Python reference decoder": lambda: measure_python("sparkcdc-python", db, w),
            "(b) python-mysql-replication 1.0.17": lambda: measure_python("pymysqlreplication", db, w),
            "(c) mariadb-binlog -v (C decoder)": lambda: measure_mariadb_binlog(db, w),
            "(d) sparkcdc, 2 segments in 2 processes": lambda: measure_parallel(db, w),
        }
        if args.sinks:
            from sparkcdc.services.tansu import LocalTansu

            broker = stack.enter_context(LocalTansu())
            topics = iter(range(10**6))

            def kafka() -> dict[str, Any]:
                spec = {**_spec(db, w.start, w.end), "sink": broker.sink_uri(f"cap-{next(topics)}")}
                r = _collect(_spawn("sparkcdc-kafka", spec))
                return {**r, "seconds": r["t1"] - r["t0"]}

            measures["(e) (a) + Kafka canal-json writer"] = kafka
            measures["(f) (a) + CSV storage writer"] = lambda: measure_python("sparkcdc-csv", db, w)
        results: dict[str, dict[str, Any]] = {}
        for _ in range(args.repeat):
            for name, measure in measures.items():
                r = measure()
                if name not in results or r["seconds"] < results[name]["seconds"]:
                    results[name] = r
        print(f"(best of {args.repeat} runs per candidate; other load on this machine slows every candidate)")

        print()
        print(f"{'candidate':44} {'rows':>9} {'seconds':>8} {'rows/s':>10} {'peak RSS MB':>12}")
        print("-" * 87)
        for name, r in results.items():
            rate = r["rows"] / r["seconds"] if r["seconds"] > 0 else float("inf")
            print(f"{name:44} {r['rows']:>9} {r['seconds']:>8.2f} {rate:>10.0f} {r['maxrss'] / 2**20:>12.1f}")
        a = results["(a) sparkcdc RowReader -> RowChange"]
        if args.sinks:
            e, f = results["(e) (a) + Kafka canal-json writer"], results["(f) (a) + CSV storage writer"]
            us = {k: r["seconds"] / r["rows"] * 1e6 for k, r in (("a", a), ("e", e), ("f", f))}
            print()
            print(
                f"per row, wall: decoding (a) {us['a']:.2f} us; Kafka writer (e)-(a) {us['e'] - us['a']:.2f} us; "
                f"CSV writer (f)-(a) {us['f'] - us['a']:.2f} us (CPU of the process: (e) "
                f"{e['cpu'] / e['rows'] * 1e6:.2f} us, (f) {f['cpu'] / f['rows'] * 1e6:.2f} us per row; "
                "the broker and MariaDB are other processes)"
            )
        a_py = results["(a') (a) with the Python reference decoder"]
        b = results["(b) python-mysql-replication 1.0.17"]
        d = results["(d) sparkcdc, 2 segments in 2 processes"]
        ratio = (a["rows"] / a["seconds"]) / (b["rows"] / b["seconds"])
        print()
        print(
            f"ratio (a)/(b): {ratio:.2f}x   (d)/(b): {(d['rows'] / d['seconds']) / (b['rows'] / b['seconds']):.2f}x"
            f"   (a)/(a'): {a_py['seconds'] / a['seconds']:.2f}x (C row decoder against the Python reference)"
        )
        print(
            f"(d) split at {d['mid']}; finding it with Scanner took {d['scan_s']:.2f}s (driver side, not in (d))"
        )
        mismatched = [n for n, r in results.items() if r["rows"] != w.rows]
        if mismatched:
            print(f"WARNING: row counts differ from the workload's {w.rows}: {mismatched}")
        if args.profile:
            print()
            print(profile_sparkcdc(db, w))
    return 0


if __name__ == "__main__":
    sys.exit(main())
