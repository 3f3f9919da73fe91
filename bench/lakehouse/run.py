"""Lakehouse benchmark: binlog → Spark → Iceberg / Delta tables (upsert, changelog) beside plain Parquet.

Usage (from the repository root)::

    .venv/bin/python bench/lakehouse/run.py [--rows 1000000] [--master local[2]]

Starts a private MariaDB and writes the storage benchmark's workload (``bench/storage/run.py``:
45 % order inserts, 15 % event inserts, 25 % updates, 15 % deletes, so 40 % updates and deletes)
between two ``query_tso`` calls. On that one binlog range, in one Spark session (a first pass
warms it: Python workers started, modules imported), it runs ``start_changefeed`` (the code of
``sparkcdc run``) from start-ts to target-ts into:

- plain Parquet: the same pipeline and the same change frames, written by the Spark tasks as
  Parquet files and nothing more (the lakehouse sinks' writer stage alone; no table commit),
  once before the table sinks and once after them (the faster pass is the baseline);
- ``delta://…?mode=changelog`` and ``delta://…`` (upsert);
- ``iceberg://…?mode=changelog`` and ``iceberg://…`` (upsert, SQLite catalog in the warehouse);

and, in its own process, python-mysql-replication 1.0.17 decoding every row of the range.
For each sink it reports rows/s and the time the driver spent applying staged frames to the
tables (``commit``), the rest being decode, shuffle and the writers' frames.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import loadavg, run_candidate, run_pymysqlreplication
from storage.run import write_workload

from sparkcdc.sink.lakehouse.sink import LakehouseSink

COMMIT_SECONDS: list[float] = []
"""Driver time in ``commit`` of the sink under test (this process is the driver)."""


class TimedLakehouseSink(LakehouseSink):
    """The lakehouse sink, its driver-side commit timed."""

    def commit(self, batch_id: int, messages: list[dict[str, Any]], checkpoint_ts: int) -> None:
        """Apply the batch and add the time to ``COMMIT_SECONDS``."""
        t0 = time.perf_counter()
        super().commit(batch_id, messages, checkpoint_ts)
        COMMIT_SECONDS.append(time.perf_counter() - t0)


class PlainParquetSink(LakehouseSink):
    """The writers' Parquet files are the output: no table, no commit (``delta://`` URI syntax)."""

    def commit(self, batch_id: int, messages: list[dict[str, Any]], checkpoint_ts: int) -> None:
        """Nothing to apply: the staged files stay where the writers put them."""
        return None


def run_sinks(spec: dict[str, Any]) -> dict[str, Any]:
    """Every sink over the same range in one Spark session."""
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import start_changefeed
    from sparkcdc.pipeline.spark import get_spark
    from sparkcdc.pipeline.spec import ChangefeedSpec
    from sparkcdc.sink import SINKS

    SINKS["iceberg"] = SINKS["delta"] = f"{__name__}:TimedLakehouseSink"
    SINKS["parquet"] = f"{__name__}:PlainParquetSink"
    out = spec["out"]
    spark = get_spark(spec["master"])
    cfg = ReplicaConfig.from_dict({"filter": {"rules": ["bench.*"]}})
    runs = [
        ("warm-up (plain Parquet, not counted)", f"parquet://{out}/warmup?mode=changelog"),
        ("plain Parquet (the writers' frames)", f"parquet://{out}/parquet?mode=changelog"),
        ("delta changelog", f"delta://{out}/delta-log?mode=changelog"),
        ("delta upsert", f"delta://{out}/delta-upsert"),
        ("iceberg changelog", f"iceberg://{out}/ice-log?mode=changelog"),
        ("iceberg upsert", f"iceberg://{out}/ice-upsert"),
        ("plain Parquet, again at the end", f"parquet://{out}/parquet2?mode=changelog"),
    ]
    only = spec.get("only") or []
    result: dict[str, Any] = {}
    for k, (name, uri) in enumerate(runs):
        if only and k > 0 and not any(o in name for o in only):
            continue
        # The registry maps the bench's own scheme to the plain-Parquet sink; its URI parses as delta's.
        sink_uri = uri.replace("parquet://", "delta://") if uri.startswith("parquet://") else uri
        if uri.startswith("parquet://"):
            SINKS["delta"] = f"{__name__}:PlainParquetSink"
        else:
            SINKS["delta"] = f"{__name__}:TimedLakehouseSink"
        COMMIT_SECONDS.clear()
        cf = ChangefeedSpec(
            changefeed_id=f"bench-{k}",
            upstream_uri=spec["uri"],
            sink_uri=sink_uri,
            config=cfg,
            start_ts=spec["start_ts"],
            target_ts=spec["target_ts"],
            checkpoint_dir=f"{out}/state/bench-{k}",
        )
        t0 = time.time()
        running = start_changefeed(spark, cf)
        try:
            if not running.wait(timeout=3600):
                err = running.exception()
                raise RuntimeError(f"{name}: no target-ts: {err.message if err else 'timeout'}")
            seconds = time.time() - t0
            prog = running.progress()
        finally:
            running.stop()
        result[name] = {
            "rows": prog.rows_total,
            "batches": prog.batches,
            "seconds": seconds,
            "commit_s": sum(COMMIT_SECONDS),
        }
        print(json.dumps({name: result[name]}), file=sys.stderr, flush=True)
    spark.stop()
    return result


CANDIDATES = {"sinks": run_sinks, "pymysqlreplication": run_pymysqlreplication}


def measure(name: str, spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Run one candidate in a child process (bench/common.py): its JSON line, its tree's peak RSS."""
    r = run_candidate(Path(__file__).resolve(), name, spec)
    r.pop("memory")
    return r, int(r.pop("tree_peak_rss"))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=int, default=1_000_000, help="row changes in the workload (default 1000000)"
    )
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--only", action="append", default=[], help="run only the sinks whose name holds this")
    ap.add_argument("--candidate", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.candidate:
        print(json.dumps(CANDIDATES[args.candidate](json.loads(args.spec))))
        return 0

    from sparkcdc.services.mariadb import LocalMariaDB

    with LocalMariaDB() as db, tempfile.TemporaryDirectory(prefix="bench-lakehouse-") as out:
        w = write_workload(db, args.rows)
        print(
            f"workload: {w['rows']} row changes in {w['write_s']:.1f}s; cores: {os.cpu_count()}; "
            f"{loadavg()}; Spark master {args.master}",
            flush=True,
        )
        spec = dict(w, out=out, master=args.master, only=args.only)
        pmr, _ = measure("pymysqlreplication", spec)
        sinks, sinks_rss = measure("sinks", spec)

    print()
    print(f"{'measure':44} {'rows':>9} {'seconds':>8} {'rows/s':>9} {'commit s':>9} {'vs parquet':>11}")
    print("-" * 96)
    # The faster of the two plain-Parquet passes (before and after the sinks) is the baseline: on a
    # shared machine a pass can be slowed by other work, and a slow baseline would flatter the sinks.
    bases = [r for n, r in sinks.items() if n.startswith("plain Parquet")]
    base_rate = max((r["rows"] / r["seconds"] for r in bases), default=0.0)
    for name, r in sinks.items():
        if name.startswith("warm-up"):
            continue
        rate = r["rows"] / r["seconds"]
        ratio = f"{rate / base_rate * 100:.0f} %" if base_rate else "-"
        print(f"{name:44} {r['rows']:>9} {r['seconds']:>8.2f} {rate:>9.0f} {r['commit_s']:>9.2f} {ratio:>11}")
    print(
        f"{'python-mysql-replication 1.0.17 decode alone':44} {pmr['rows']:>9} {pmr['seconds']:>8.2f} {pmr['rows'] / pmr['seconds']:>9.0f}"
    )
    print(f"\npeak RSS of the sinks' process tree (JVM + Python): {sinks_rss / 2**20:,.0f} MB")
    print(f"after the runs: {loadavg()}")
    mismatched = [n for n, r in sinks.items() if r["rows"] != w["rows"]]
    if mismatched:
        print(f"WARNING: row counts differ from the workload's {w['rows']}: {mismatched}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
