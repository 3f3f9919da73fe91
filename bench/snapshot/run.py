"""Benchmark: rows/s of the initial snapshot to every kind of sink, beside ``mariadb-dump --tab``.

    .venv/bin/python bench/snapshot/run.py [--rows 500000] [--chunk-size 50000] [--master local[2]]
                                           [--sinks csv,kafka,avro,mysql] [--uri mysql://root:@127.0.0.1:3306/]
                                           [--json out.json]

Without ``--uri`` a throw-away MariaDB with a ROW binlog is started on a free port (``--tab``
needs the server to write into a local directory, so the server must run on this machine). The
table (INT PK, INT, VARCHAR(64), DECIMAL(12,2), DATETIME(3), DOUBLE) is filled with
``INSERT … SELECT … FROM seq_1_to_N``, then, in the same run:

1. ``mariadb-dump --tab``: the server writes the table as a tab-separated file (the ceiling:
   ``SELECT … INTO OUTFILE`` inside the server, no client protocol);
2. ``python cursor``: one PyMySQL connection streams ``SELECT *`` (unbuffered cursor), no conversion;
3. ``sparkcdc snapshot``: ``InitialSnapshot`` on Spark — plan ranges, read them in parallel in
   chunks, correct against the binlog, write through the sink — in one Spark session:
   - CSV files (``file://…?protocol=csv``), upstream-rendered, cold: each chunk's CSV records
     rendered by the upstream (``codec.csv_sql``) and staged by the range tasks; the session's
     Python workers start inside this first run;
   - the same, warm (fresh output and state);
   - CSV files row by row, warm: ``[snapshot] upstream-render = false`` — rows read by the C row
     reader (``capture/_textrows.c``), spooled as parquet, encoded by the storage writer;
   - Kafka canal-json and Kafka Avro (a local schema registry, precise decimals) on a Tansu broker,
     warm: rows read by the C row reader, spooled, produced by parallel tasks straight from the
     spool; each beside the broker ceiling of the same run (the first messages of the topic read
     back and produced again by plain librdkafka with the sink's producer settings);
   - MySQL (a second MariaDB as the downstream, the table created there first), warm, beside
     ``LOAD DATA INFILE`` of the dump's file into the downstream (the downstream's ceiling).
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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
    db: Any,
    work: Path,
    chunk_size: int,
    master: str,
    upstream_render: bool = True,
    sink_uri: str | None = None,
    config: dict[str, Any] | None = None,
) -> tuple[float, dict[str, Any]]:
    """Seconds of the whole snapshot into a sink (CSV files by default; Spark session already started)."""
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
    cfg = ReplicaConfig.from_dict({"filter": {"rules": [f"{DB}.*"]}, **(config or {})})
    sink = create_sink(sink_uri or f"file://{work / 'out'}?protocol=csv", cfg, "bench")
    sink.check()  # a changefeed checks its sink before the snapshot (topics are created here)
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
    seconds = time.monotonic() - t0
    sink.close()
    return seconds, report


def bench_kafka(
    db: Any, work: Path, args: argparse.Namespace, protocol: str, rows: int
) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """The snapshot to a fresh Tansu broker (Avro: with a local schema registry); and the broker ceiling."""
    from common import kafka_broker, librdkafka_ceiling, read_topic

    topic = f"bench-snapshot-{protocol}"
    with kafka_broker(protocol, "protocol=canal-json&enable-tidb-extension=true") as (broker, query):
        uri = broker.sink_uri(topic, query)
        seconds, report = bench_snapshot(db, work, args.chunk_size, args.master, sink_uri=uri)
        keep = min(rows, CEILING_MESSAGES)
        count, kept = read_topic(broker.bootstrap, topic, keep=keep)
        if count < rows:
            raise RuntimeError(f"{protocol}: {count} messages in {topic}, expected at least {rows}")
        ceiling = librdkafka_ceiling(broker.sink_uri(topic + "-ceiling", query), kept, topic + "-ceiling")
        del kept
    return seconds, report, {"messages": count, **ceiling}


def bench_mysql(
    db: Any, work: Path, args: argparse.Namespace, dump_file: Path
) -> tuple[float, dict[str, Any], float]:
    """The snapshot to a second MariaDB; and ``LOAD DATA INFILE`` of the dump's file there (its ceiling)."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW CREATE TABLE {DB}.{TABLE}")
            ddl = cur.fetchone()[1]
    finally:
        conn.close()
    with LocalMariaDB() as down:
        down.execute(f"CREATE DATABASE {DB}", ddl.replace("CREATE TABLE ", f"CREATE TABLE {DB}.", 1))
        conn = down.connect()
        try:
            with conn.cursor() as cur:
                t0 = time.monotonic()
                cur.execute(f"LOAD DATA INFILE %s INTO TABLE {DB}.{TABLE}", [str(dump_file)])
                load_s = time.monotonic() - t0
                cur.execute(f"TRUNCATE TABLE {DB}.{TABLE}")
        finally:
            conn.close()
        seconds, report = bench_snapshot(
            db, work, args.chunk_size, args.master, sink_uri=down.uri.rstrip("/") + "/?worker-count=4"
        )
        conn = down.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM {DB}.{TABLE}")
                n = int(cur.fetchone()[0])
        finally:
            conn.close()
        if n != args.rows:
            raise RuntimeError(f"mysql: {n} rows downstream, expected {args.rows}")
    return seconds, report, load_s


CEILING_MESSAGES = 500_000
"""The most messages read back from a topic and produced again for the broker ceiling (a rate)."""


def _loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    """Run the readers and sinks on the same table and print rows/s beside the dump's."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--chunk-size", type=int, default=50_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--sinks", default="csv,kafka,avro,mysql", help="comma-separated: csv, kafka, avro, mysql"
    )
    ap.add_argument("--uri", default=None, help="an existing upstream (must run on this machine)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    sinks = [x.strip() for x in args.sinks.split(",") if x.strip()]
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
        results["load_before"] = _loadavg()
        dump_s = bench_dump(db, work / "dump")
        cursor_s = bench_cursor(db)
        n = args.rows
        results.update(
            {
                "mariadb_dump_tab": {"seconds": round(dump_s, 3), "rows_per_s": round(n / dump_s)},
                "python_cursor": {"seconds": round(cursor_s, 3), "rows_per_s": round(n / cursor_s)},
            }
        )

        def record(key: str, snap_s: float, report: dict[str, Any], **extra: Any) -> None:
            results[key] = {
                "seconds": round(snap_s, 3),
                "rows_per_s": round(n / snap_s),
                "read_phase_seconds": report["read_seconds"],
                "correct_phase_seconds": report["correct_seconds"],
                "write_phase_seconds": report["write_seconds"],
                "ranges": report["ranges"],
                "vs_dump": round(dump_s / snap_s, 3),
                "loadavg": _loadavg(),
                **extra,
            }
            print(f"  {key}: {snap_s:.2f}s ({_loadavg()})", file=sys.stderr, flush=True)

        rows_table: list[tuple[str, str]] = [
            ("mariadb-dump --tab", "mariadb_dump_tab"),
            ("python cursor (1 thread, no conversion)", "python_cursor"),
        ]
        if "csv" in sinks:
            # cold: the session's first Python tasks start their workers inside the snapshot; warm: a second
            # snapshot in the same session; row by row: the same without records rendered by the upstream.
            for key, render in (("rendered_cold", True), ("rendered_warm", True), ("row_by_row_warm", False)):
                snap_s, report = bench_snapshot(db, work / key, args.chunk_size, args.master, render)
                record(key, snap_s, report)
            rows_table += [
                ("CSV, upstream-rendered, cold", "rendered_cold"),
                ("CSV, upstream-rendered, warm", "rendered_warm"),
                ("CSV, row by row, warm", "row_by_row_warm"),
            ]
        for protocol in ("kafka", "avro"):
            if protocol not in sinks:
                continue
            name = "canal-json" if protocol == "kafka" else "avro"
            snap_s, report, ceiling = bench_kafka(db, work / protocol, args, name, n)
            record(
                f"kafka_{name}",
                snap_s,
                report,
                ceiling_rows_per_s=round(ceiling["rate"]),
                ceiling_messages=ceiling["messages"],
                messages=ceiling["messages"],
                vs_ceiling=round(n / snap_s / ceiling["rate"], 3),
            )
            rows_table += [(f"Kafka {name}, warm", f"kafka_{name}")]
        if "mysql" in sinks:
            snap_s, report, load_s = bench_mysql(db, work / "mysql", args, work / "dump" / f"{TABLE}.txt")
            record(
                "mysql",
                snap_s,
                report,
                ceiling_rows_per_s=round(n / load_s),
                vs_ceiling=round(load_s / snap_s, 3),
            )
            rows_table += [("MySQL (second MariaDB), warm", "mysql")]
        print(
            f"{'reader / sink':<40}{'seconds':>9}{'rows/s':>12}{'vs dump':>9}{'read':>7}{'correct':>9}{'write':>7}"
            f"{'  ceiling rows/s':>17}{'vs ceiling':>11}  load average"
        )
        for name, key in rows_table:
            r = results[key]
            line = f"{name:<40}{r['seconds']:>9.2f}{r['rows_per_s']:>12,}"
            if "vs_dump" in r:
                line += (
                    f"{r['vs_dump']:>9.0%}{r['read_phase_seconds']:>7.2f}{r['correct_phase_seconds']:>9.2f}"
                    f"{r['write_phase_seconds']:>7.2f}"
                )
                if "ceiling_rows_per_s" in r:
                    line += f"{r['ceiling_rows_per_s']:>17,}{r['vs_ceiling']:>11.0%}"
                else:
                    line += " " * 28
                line += f"  {r['loadavg']}"
            print(line)
        print(
            "ceilings: Kafka = plain librdkafka produce of the topic's first "
            f"{CEILING_MESSAGES:,} messages at most; MySQL = LOAD DATA INFILE of the dump's file downstream"
        )
        print(f"load average before the run: {results['load_before']}; after: {_loadavg()}")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    finally:
        if isinstance(db, LocalMariaDB):
            db.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
