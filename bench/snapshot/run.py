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
3. ``sparkcdc snapshot``: ``InitialSnapshot`` on Spark — plan ranges, read them in parallel in
   chunks, correct against the binlog, write TiCDC CSV files through the storage sink
   (``file://…?protocol=csv``), three times in one Spark session:
   - upstream-rendered, cold: each chunk's CSV records rendered by the upstream
     (``codec.csv_sql``) and staged as data files by the range tasks; the session's Python
     workers start inside this first run;
   - upstream-rendered, warm: the same again (fresh output and state), workers already running;
   - row by row, warm: ``[snapshot] upstream-render = false``, the baseline — rows converted in
     Python, spooled as parquet and encoded by the storage writer.
   Each prints its read / correction / write phases.
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


def bench_snapshot(
    db: Any, work: Path, chunk_size: int, master: str, upstream_render: bool = True
) -> tuple[float, dict[str, Any]]:
    """Seconds of the whole snapshot to CSV files (Spark session already started), and its report."""
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
    work.mkdir(parents=True, exist_ok=True)
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
        options=SnapshotOptions(chunk_size=chunk_size, upstream_render=upstream_render),
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
        n = args.rows
        results.update(
            {
                "mariadb_dump_tab": {"seconds": round(dump_s, 3), "rows_per_s": round(n / dump_s)},
                "python_cursor": {"seconds": round(cursor_s, 3), "rows_per_s": round(n / cursor_s)},
            }
        )
        # cold: the session's first Python tasks start their workers inside the snapshot; warm: a second
        # snapshot in the same session; row by row: the same without records rendered by the upstream.
        for key, render in (("rendered_cold", True), ("rendered_warm", True), ("row_by_row_warm", False)):
            snap_s, report = bench_snapshot(db, work / key, args.chunk_size, args.master, render)
            results[key] = {
                "seconds": round(snap_s, 3),
                "rows_per_s": round(n / snap_s),
                "read_phase_seconds": report["read_seconds"],
                "correct_phase_seconds": report["correct_seconds"],
                "write_phase_seconds": report["write_seconds"],
                "ranges": report["ranges"],
                "vs_dump": round(dump_s / snap_s, 3),
            }
        print(
            f"{'reader':<40}{'seconds':>9}{'rows/s':>12}{'vs dump':>9}{'read':>7}{'correct':>9}{'write':>7}"
        )
        for name, key in (
            ("mariadb-dump --tab", "mariadb_dump_tab"),
            ("python cursor (1 thread, no conversion)", "python_cursor"),
            ("sparkcdc, upstream-rendered, cold", "rendered_cold"),
            ("sparkcdc, upstream-rendered, warm", "rendered_warm"),
            ("sparkcdc, row by row, warm", "row_by_row_warm"),
        ):
            r = results[key]
            line = f"{name:<40}{r['seconds']:>9.2f}{r['rows_per_s']:>12,}"
            if "vs_dump" in r:
                line += (
                    f"{r['vs_dump']:>9.0%}{r['read_phase_seconds']:>7.2f}{r['correct_phase_seconds']:>9.2f}"
                    f"{r['write_phase_seconds']:>7.2f}"
                )
            print(line)
        print(
            f"snapshot / dump rate (upstream-rendered, warm): {results['rendered_warm']['vs_dump']:.0%}; "
            f"row by row: {results['row_by_row_warm']['vs_dump']:.0%}"
        )
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    finally:
        if isinstance(db, LocalMariaDB):
            db.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
