"""Benchmark: rows/s of the initial snapshot to CSV files, beside ``mariadb-dump --tab`` and a plain cursor read.

    .venv/bin/python bench/snapshot/run.py [--rows 500000] [--chunk-size 50000] [--master local[2]]
                                           [--uri mysql://root:@127.0.0.1:3306/] [--json out.json]

Without ``--uri`` a throw-away MariaDB with a ROW binlog is started on a free port (``--tab``
needs the server to write into a local directory, so the server must run on this machine). The
table (INT PK, INT, VARCHAR(64), DECIMAL(12,2), DATETIME(3), DOUBLE) is filled with
``INSERT … SELECT … FROM seq_1_to_N``, then, in the same run:

1. ``mariadb-dump --tab``: the server writes the table as a tab-separated file (the ceiling:
   ``SELECT … INTO OUTFILE`` inside the server, no client protocol);
2. ``python cursor``: one PyMySQL connection streams ``SELECT *`` (unbuffered cursor), no conversion;
3. ``sparkcdc snapshot``: ``InitialSnapshot`` on Spark — plan ranges, read them in parallel with
   chunked keyset reads, spool, correct against the binlog, write TiCDC CSV files through the
   storage sink (``file://…?protocol=csv``); also reported: the parallel read phase alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from sparkcdc.services.mariadb import LocalMariaDB

DB = "bench_snapshot"
TABLE = "t"


def fill(db: Any, rows: int) -> None:
    """Create and fill the table."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {DB}")
            cur.execute(f"CREATE DATABASE {DB}")
            cur.execute(
                f"CREATE TABLE {DB}.{TABLE} (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(64), "
                "c DECIMAL(12,2), d DATETIME(3), e DOUBLE)"
            )
            cur.execute(
                f"INSERT INTO {DB}.{TABLE} SELECT seq, seq * 7 % 1000, CONCAT('name ', seq, ' ', REPEAT('x', seq % 20)), "
                f"seq / 100, '2024-01-01 00:00:00.000' + INTERVAL seq SECOND, seq / 7 FROM {DB}.seq_1_to_{rows}"
            )
            cur.execute(f"ANALYZE TABLE {DB}.{TABLE}")
    finally:
        conn.close()


def bench_dump(db: Any, out: Path) -> float:
    """Seconds of ``mariadb-dump --tab`` of the table."""
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o777)
    exe = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if exe is None:
        raise SystemExit("mariadb-dump not found: apt-get install mariadb-client")
    t0 = time.monotonic()
    subprocess.run(
        [
            exe,
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-P",
            str(db.port),
            "-u",
            "root",
            f"--tab={out}",
            DB,
            TABLE,
        ],
        check=True,
        capture_output=True,
    )
    return time.monotonic() - t0


def bench_cursor(db: Any) -> float:
    """Seconds of one unbuffered cursor reading every row."""
    import pymysql

    conn = db.connect()
    try:
        t0 = time.monotonic()
        with conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(f"SELECT * FROM {DB}.{TABLE}")
            n = 0
            while True:
                batch = cur.fetchmany(10000)
                if not batch:
                    break
                n += len(batch)
        return time.monotonic() - t0
    finally:
        conn.close()


def bench_snapshot(db: Any, work: Path, chunk_size: int, master: str) -> tuple[float, dict[str, Any]]:
    """Seconds of the whole snapshot to CSV files (Spark session already warm), and its report."""
    from sparkcdc.capture.start import head_offset
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import bootstrap_history
    from sparkcdc.pipeline.snapshot import SNAPSHOT_BATCH_ID, InitialSnapshot, SnapshotOptions
    from sparkcdc.pipeline.spark import get_spark
    from sparkcdc.pipeline.writer import BatchWriter
    from sparkcdc.sink import create_sink

    spark = get_spark(master)
    spark.range(10).count()  # start the JVM and the executors before the clock starts
    cfg = ReplicaConfig.from_dict({"filter": {"rules": [f"{DB}.*"]}})
    sink = create_sink(f"file://{work / 'out'}?protocol=csv", cfg, "bench")
    up = UpstreamConfig.from_uri(db.uri)
    state = work / "state"
    state.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    start = head_offset(up)
    history = str(state / "schema_history.jsonl")
    bootstrap_history(up, history, start)
    writer = BatchWriter(sink, str(state / "spark"), history, "bench", lambda r: None)
    snap = InitialSnapshot(
        spark,
        changefeed_id="bench",
        upstream_uri=db.uri,
        checkpoint_dir=str(state),
        history_path=history,
        handover=start,
        filter_rules=[f"{DB}.*"],
        options=SnapshotOptions(chunk_size=chunk_size),
    )
    report = snap.run(lambda df, ts: writer.write_rows(df, SNAPSHOT_BATCH_ID, ts).rows, writer)
    sink.close()
    return time.monotonic() - t0, report


def main() -> None:
    """Run the three readers on the same table and print rows/s."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--chunk-size", type=int, default=50_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--uri", default=None, help="an existing upstream (must run on this machine)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sparkcdc-bench-snapshot-"))
    db: Any = None
    try:
        if args.uri:
            from sparkcdc.capture.upstream import UpstreamConfig

            u = UpstreamConfig.from_uri(args.uri)

            class _Db:
                port = u.port
                uri = args.uri

                def connect(self, database: str | None = None) -> Any:
                    return u.connect(database=database)

            db = _Db()
        else:
            db = LocalMariaDB().start()
        t = time.monotonic()
        fill(db, args.rows)
        print(f"filled {args.rows} rows in {time.monotonic() - t:.1f}s", file=sys.stderr)
        results: dict[str, Any] = {"rows": args.rows, "chunk_size": args.chunk_size, "master": args.master}
        dump_s = bench_dump(db, work / "dump")
        cursor_s = bench_cursor(db)
        snap_s, report = bench_snapshot(db, work, args.chunk_size, args.master)
        n = args.rows
        results.update(
            {
                "mariadb_dump_tab": {"seconds": round(dump_s, 3), "rows_per_s": round(n / dump_s)},
                "python_cursor": {"seconds": round(cursor_s, 3), "rows_per_s": round(n / cursor_s)},
                "sparkcdc_snapshot": {
                    "seconds": round(snap_s, 3),
                    "rows_per_s": round(n / snap_s),
                    "read_phase_seconds": report["read_seconds"],
                    "read_phase_rows_per_s": round(n / max(report["read_seconds"], 1e-9)),
                    "correct_phase_seconds": report["correct_seconds"],
                    "write_phase_seconds": report["write_seconds"],
                    "ranges": report["ranges"],
                },
            }
        )
        results["snapshot_vs_dump"] = round(dump_s / snap_s, 3)
        results["read_phase_vs_dump"] = round(dump_s / max(report["read_seconds"], 1e-9), 3)
        print(f"{'reader':<28}{'seconds':>10}{'rows/s':>12}")
        for name, key in (
            ("mariadb-dump --tab", "mariadb_dump_tab"),
            ("python cursor (1 thread)", "python_cursor"),
            ("sparkcdc snapshot -> CSV", "sparkcdc_snapshot"),
        ):
            r = results[key]
            print(f"{name:<28}{r['seconds']:>10.2f}{r['rows_per_s']:>12,}")
        s = results["sparkcdc_snapshot"]
        print(
            f"{'  of which parallel read':<28}{s['read_phase_seconds']:>10.2f}{s['read_phase_rows_per_s']:>12,}"
        )
        print(f"{'  binlog corrections':<28}{s['correct_phase_seconds']:>10.2f}")
        w = s["write_phase_seconds"]
        print(f"{'  write through the sink':<28}{w:>10.2f}{round(n / max(w, 1e-9)):>12,}")
        print(
            f"snapshot / dump rate: {results['snapshot_vs_dump']:.0%}  (read phase: {results['read_phase_vs_dump']:.0%})"
        )
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    finally:
        if isinstance(db, LocalMariaDB):
            db.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
