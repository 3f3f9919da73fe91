"""``make demo``: a local MariaDB, a sample workload, and a changefeed to CSV files.

Prints where the files are and how many rows landed. Everything runs on
127.0.0.1 and is stopped at the end (the output directory stays).
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

JVM_NOTICES = (b"WARNING: Using incubator modules: jdk.incubator.vector",)
"""What the JVM prints because Spark's launcher always adds that module: nothing to act on."""


@contextmanager
def jvm_stderr_without_notices() -> Iterator[None]:
    """Start Spark's JVM inside: its stderr passes through a relay that drops ``JVM_NOTICES``."""
    read_fd, write_fd = os.pipe()
    terminal = os.dup(2)

    def relay() -> None:
        with os.fdopen(read_fd, "rb", buffering=0) as src:
            for line in iter(src.readline, b""):
                if line.rstrip(b"\r\n") not in JVM_NOTICES:
                    os.write(terminal, line)

    threading.Thread(target=relay, name="jvm-stderr", daemon=True).start()
    sys.stderr.flush()
    os.dup2(write_fd, 2)  # the JVM (and its Python workers) inherit the relay's end
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)


def workload(db: object, rows: int) -> None:
    """A small shop: customers and orders with inserts, updates, deletes and an ALTER mid-stream."""
    from sparkcdc.services.mariadb import LocalMariaDB

    assert isinstance(db, LocalMariaDB)
    conn = db.connect()
    rnd = random.Random(7)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS shop")
        cur.execute(
            "CREATE TABLE IF NOT EXISTS shop.customers (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
            "email VARCHAR(128), created DATETIME(3) NOT NULL)"
        )
        cur.execute(
            "CREATE TABLE IF NOT EXISTS shop.orders (id BIGINT PRIMARY KEY AUTO_INCREMENT, customer_id INT NOT NULL, "
            "amount DECIMAL(12,2) NOT NULL, status ENUM('new','paid','shipped') NOT NULL DEFAULT 'new', note TEXT)"
        )
        for i in range(1, rows // 4 + 1):
            cur.execute(
                "INSERT INTO shop.customers VALUES (%s, %s, %s, NOW(3))",
                (i, f"customer {i}", f"c{i}@example.com"),
            )
        for _ in range(rows // 2):
            cur.execute(
                "INSERT INTO shop.orders (customer_id, amount, note) VALUES (%s, %s, %s)",
                (rnd.randint(1, rows // 4), Decimal(rnd.randint(100, 99999)) / 100, "first order ☕"),
            )
        cur.execute("ALTER TABLE shop.orders ADD COLUMN shipped_at DATETIME NULL")
        cur.execute("UPDATE shop.orders SET status = 'paid' WHERE id % 3 = 0")
        cur.execute("UPDATE shop.orders SET status = 'shipped', shipped_at = NOW() WHERE id % 6 = 0")
        cur.execute("DELETE FROM shop.customers WHERE id % 10 = 0")
    conn.close()


def main(argv: list[str] | None = None) -> int:
    """Run the demo."""
    p = argparse.ArgumentParser(prog="python -m sparkcdc.demo")
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--out", default=os.path.abspath("demo-output"))
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from sparkcdc.capture.start import query_tso
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.cli.logs import configure
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import start_changefeed
    from sparkcdc.pipeline.spark import get_spark
    from sparkcdc.pipeline.spec import ChangefeedSpec
    from sparkcdc.services.mariadb import LocalMariaDB

    configure("info", "text")
    print("starting a local MariaDB with a ROW binlog ...", flush=True)
    with LocalMariaDB() as db:
        up = UpstreamConfig.from_uri(db.uri)
        start_ts = query_tso(up)
        t0 = time.monotonic()
        workload(db, args.rows)
        target_ts = query_tso(up)
        print(f"wrote the sample workload in {time.monotonic() - t0:.1f}s (upstream {db.uri})", flush=True)
        files_dir = os.path.join(args.out, "files")
        sink_uri = f"file://{files_dir}?protocol=csv"
        spec = ChangefeedSpec(
            changefeed_id="demo",
            upstream_uri=db.uri,
            sink_uri=sink_uri,
            config=ReplicaConfig.from_dict(
                {"filter": {"rules": ["shop.*"]}, "sink": {"date-separator": "none"}}
            ),
            start_ts=start_ts,
            target_ts=target_ts,
            checkpoint_dir=os.path.join(args.out, "state", f"run-{int(time.time())}"),
        )
        print(f"starting Spark and the changefeed {spec.changefeed_id} -> {sink_uri}", flush=True)
        with jvm_stderr_without_notices():
            spark = get_spark("local[2]")
        running = start_changefeed(spark, spec)
        try:
            if not running.wait(timeout=600):
                err = running.exception()
                print(f"changefeed did not finish: {err.message if err else 'timeout'}", file=sys.stderr)
                return 1
            prog = running.progress()
        finally:
            running.stop()
            spark.stop()
    data_files = sorted(glob.glob(os.path.join(files_dir, "**", "CDC*.csv"), recursive=True))
    lines = 0
    for f in data_files:
        with open(f, "rb") as fh:
            lines += fh.read().count(b"\r\n")
    print(f"\nrows replicated: {prog.rows_total} row changes, {lines} CSV records in {len(data_files)} files")
    print(f"files are under {files_dir}")
    for f in data_files[:10]:
        print("  " + os.path.relpath(f, files_dir))
    print(f"checkpoint-ts {prog.checkpoint_ts} (see {os.path.join(files_dir, 'metadata')})")
    return 0 if lines > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
