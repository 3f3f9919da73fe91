"""The binlog relay against the upstream: what a segment task's read costs from each.

Usage (from the repository root)::

    .venv/bin/python bench/relay/run.py [--rows 200000] [--runs 3]

One upstream MariaDB; ``--rows`` rows (a few columns, 50 rows per transaction) written, then a
relay (``capture/relay.py``) started with the whole binlog in its backfill. The bench prints:

- **relay catch-up**: seconds for the relay to store that binlog from the upstream (MB/s);
- **segment read**: a ``RowReader`` over the whole range, as a segment task reads it, decoding
  every row, once from the upstream (the baseline: a replication connection of its own) and once
  from the relay, alternating, ``--runs`` times each; the median rows/s of each and their ratio;
- **events only**: the same range as raw events (no decoding), from a ``BinlogStream`` and from a
  ``RelayStream``: what the relay itself changes;
- the load average before and after each part.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import loadavg

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import BinlogStream
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.relay import RelayStream, RelayWriter, relay_key
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import (
    UpstreamConfig,
    master_status,
)
from sparkcdc.model import RowChange
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB


def _write(db: LocalMariaDB, rows: int) -> None:
    db.execute(
        "CREATE DATABASE bench_relay",
        "CREATE TABLE bench_relay.t (id INT PRIMARY KEY, a BIGINT, b VARCHAR(64), c DATETIME(6), d DECIMAL(12,2))",
    )
    conn = db.connect("bench_relay")
    try:
        with conn.cursor() as cur:
            for first in range(0, rows, 50):
                values = ",".join(
                    f"({i}, {i * 7}, 'value-{i:010d}-{i % 97}', NOW(6), {i % 10000}.25)"
                    for i in range(first, min(rows, first + 50))
                )
                cur.execute(f"INSERT INTO bench_relay.t VALUES {values}")
        conn.commit()
    finally:
        conn.close()


def _rows(up: UpstreamConfig, start: Offset, end: Offset, relay: str) -> int:
    n = 0
    reader = RowReader(up, start, end, shapes=TableShapes(), relay_dir=relay)
    for ev in reader.events():
        if isinstance(ev, RowChange):
            n += 1
    return n


def _events(up: UpstreamConfig, start: Offset, end: Offset, relay: str) -> int:
    """Raw events from ``start`` until one ends at ``end`` (one binlog file: no rotation between)."""
    stream = (
        RelayStream(Path(relay), up, start.file, start.pos)
        if relay
        else BinlogStream(up, start.file, start.pos, blocking=True)
    )
    n = 0
    try:
        for ev in stream.events():
            n += 1
            if ev.log_pos >= end.pos:
                break
    finally:
        stream.close()
    return n


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn()
    return time.perf_counter() - t0, n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    with LocalMariaDB() as db, tempfile.TemporaryDirectory(prefix="sparkcdc-relay-bench-") as work:
        up = UpstreamConfig.from_uri(db.uri)
        db.execute("FLUSH BINARY LOGS")
        start = head_offset(up)
        _write(db, args.rows)
        end = head_offset(up)
        conn = up.connect()
        try:
            head = master_status(conn)
        finally:
            conn.close()
        size = end.pos - start.pos
        print(f"relay bench: {args.rows} rows, {size / 2**20:.1f} MB of binlog in {start.file}; {loadavg()}")

        directory = Path(work) / relay_key(up)
        load0 = loadavg()
        t0 = time.perf_counter()
        writer = RelayWriter(up, directory, backfill_bytes=1 << 40).start()
        wait_until(
            lambda: (writer.file, writer.pos) == head or writer.error is not None,
            timeout=600,
            what="the relay",
            interval=0.005,
        )
        caught = time.perf_counter() - t0
        assert writer.error is None, writer.error
        print(f"relay catch-up: {caught:.2f}s ({size / 2**20 / caught:.1f} MB/s; {load0} -> {loadavg()})")
        try:
            rel = str(directory)
            times: dict[str, list[float]] = {"upstream": [], "relay": []}
            load0 = loadavg()
            for _ in range(args.runs):
                for name, relay in (("upstream", ""), ("relay", rel)):
                    s, n = _timed(functools.partial(_rows, up, start, end, relay))
                    assert n == args.rows, (name, n)
                    times[name].append(s)
            med = {k: statistics.median(v) for k, v in times.items()}
            print(
                f"segment read ({args.rows} rows decoded, median of {args.runs}): upstream "
                f"{args.rows / med['upstream']:,.0f} rows/s, relay {args.rows / med['relay']:,.0f} rows/s, "
                f"relay/upstream {med['upstream'] / med['relay']:.2f}x ({load0} -> {loadavg()})"
            )
            times = {"upstream": [], "relay": []}
            counts: dict[str, int] = {}
            load0 = loadavg()
            for _ in range(args.runs):
                for name, relay in (("upstream", ""), ("relay", rel)):
                    s, n = _timed(functools.partial(_events, up, start, end, relay))
                    counts[name] = n
                    times[name].append(s)
            assert counts["upstream"] == counts["relay"], counts
            med = {k: statistics.median(v) for k, v in times.items()}
            mbs = {k: size / 2**20 / v for k, v in med.items()}
            print(
                f"events only ({counts['relay']} events, median of {args.runs}): upstream "
                f"{mbs['upstream']:.1f} MB/s, relay {mbs['relay']:.1f} MB/s, relay/upstream "
                f"{med['upstream'] / med['relay']:.2f}x ({load0} -> {loadavg()})"
            )
        finally:
            writer.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
