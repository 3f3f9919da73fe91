"""CSV row-encoding micro-benchmark: the storage sink's per-row work and the codec alone.

Usage (from the repository root)::

    .venv/bin/python bench/codec/run.py [--rows 200000] [--repeat 3]

Builds N synthetic row changes shaped like bench/storage's workload (two tables:
``orders`` with INT/TINYINT/INT UNSIGNED/BIGINT/DECIMAL(12,4)/DOUBLE/VARCHAR/
DATETIME(6)/TIMESTAMP(3)/DATE/BLOB/ENUM/nullable VARCHAR and ``events`` with
BIGINT/INT/VARCHAR/JSON; 45 % order inserts, 15 % event inserts, 25 % updates,
15 % deletes) and times, on one core, what the storage sink does per row with the
default ``[sink.csv]`` options: the key-change split of an UPDATE plus the CSV
encoding of each resulting row: ``RowEncoder.encode`` (and ``encode_many``) after
``encoding.split_update``, whose output is compared byte for byte with
``split_update_if_key_changed`` + ``CSVEncoder.encode_row`` first; the codec alone
(``CSVEncoder.encode_row`` per row change) is timed too. Three ``[sink.csv]``
configurations: the defaults, backslash escaping, and every per-record option on
(``--config`` picks one).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from sparkcdc.codec.csv import CSVEncoder
from sparkcdc.codec.values import split_update_if_key_changed
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.storage.encoding import RowEncoder, split_update

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shapes import EVENTS, ORDERS

STATES = ("new", "paid", "shipped", "done")
KINDS = ("created", "paid", "sent")
_Q4 = Decimal("0.0001")


def order_image(seq: int) -> tuple[Any, ...]:
    """An ``orders`` row as the capture would produce it for bench/storage's INSERT."""
    return (
        seq,
        seq % 128 - 64,
        seq * 3,
        seq * 1000003,
        (Decimal(seq) / 7).quantize(_Q4),
        seq * 1.5,
        f"order-{seq}-{'x' * (seq % 20)}",
        f"2024-01-{1 + seq // 86400 % 28:02d} {seq // 3600 % 24:02d}:{seq // 60 % 60:02d}:{seq % 60:02d}"
        f".{seq * 7919 % 1000000:06d}",
        None
        if seq % 3 == 0
        else f"2024-06-01 {seq // 3600 % 24:02d}:{seq // 60 % 60:02d}:{seq % 60:02d}.000",
        f"{2020 + seq % 8}-{1 + seq % 12:02d}-{1 + seq % 28:02d}",
        hashlib.sha1(str(seq).encode()).digest(),
        STATES[seq % 4],
        None if seq % 5 == 0 else f"n{seq}",
    )


def event_image(seq: int) -> tuple[Any, ...]:
    """An ``events`` row."""
    return (seq, seq % 50000, KINDS[seq % 3], f'{{"seq": {seq}, "ok": true}}')


def workload(rows: int) -> list[tuple[RowChange, TableInfo]]:
    """45 % order inserts, 15 % event inserts, 25 % updates, 15 % deletes, in bench/storage's order."""
    n_ord = rows * 45 // 100
    n_evt = rows * 15 // 100
    n_del = rows * 15 // 100
    n_upd = rows - n_ord - n_evt - n_del
    out: list[tuple[RowChange, TableInfo]] = []
    ts = 1 << 40

    def add(op: str, table: TableInfo, before: Any, after: Any) -> None:
        nonlocal ts
        ts += 1
        out.append((RowChange(op, "bench", table.table, 1, ts, before, after), table))  # type: ignore[arg-type]

    for seq in range(1, n_ord + 1):
        add("I", ORDERS, None, order_image(seq))
        if seq <= n_evt:
            add("I", EVENTS, None, event_image(seq))
    for seq in range(n_ord + 1, n_evt + 1):
        add("I", EVENTS, None, event_image(seq))
    for seq in range(1, n_upd + 1):
        old = order_image(seq)
        new = list(old)
        new[2] += 1
        new[4] *= 2
        new[6] += "!"
        new[8] = f"2025-01-01 00:{seq // 60 % 60:02d}:{seq % 60:02d}.000"
        new[11] = "paid"
        add("U", ORDERS, old, tuple(new))
    for seq in range(n_ord - n_del + 1, n_ord + 1):
        add("D", ORDERS, order_image(seq), None)
    return out


def expected_records(enc: CSVEncoder, rows: list[tuple[RowChange, TableInfo]]) -> list[bytes]:
    """The sink path's records from the shared key-change rule and ``CSVEncoder.encode_row``."""
    out = []
    for row, table in rows:
        for r in split_update_if_key_changed(row, table):
            out.append(enc.encode_row(r, table))
    return out


def sink_path(enc: RowEncoder, per_row: bool) -> Callable[[list[tuple[RowChange, TableInfo]]], list[bytes]]:
    """The storage sink's per-row work (``encode`` per row or ``encode_many``)."""

    def run(rows: list[tuple[RowChange, TableInfo]]) -> list[bytes]:
        out: list[bytes] = []
        if per_row:
            for row, table in rows:
                for r in split_update(row, table):
                    out.append(enc.encode(r, table))
            return out
        # Runs of consecutive rows of one table, as a writer batching per table would pass them.
        i, n = 0, len(rows)
        while i < n:
            table = rows[i][1]
            batch: list[RowChange] = []
            while i < n and rows[i][1] is table:
                batch += split_update(rows[i][0], table)
                i += 1
            out += enc.encode_many(batch, table)
        return out

    return run


def best_rates(
    paths: dict[str, Callable[[list[Any]], list[bytes]]], rows: list[Any], repeat: int
) -> dict[str, float]:
    """Rows per second of each path: the fastest of ``repeat`` runs, interleaved, in process CPU time.

    CPU time of this (single-threaded) process, not wall time, so other work on the
    machine moves the figures less; runs alternate between paths for the same reason.
    """
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(repeat):
        for name, fn in paths.items():
            gc.collect()
            t0 = time.process_time()
            fn(rows)
            best[name] = min(best[name], time.process_time() - t0)
    return {name: len(rows) / seconds for name, seconds in best.items()}


CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "escaped": {"quote": "", "delimiter": "|"},
    "all-options": {
        "delimiter": "[*]",
        "include-commit-ts": True,
        "output-old-value": True,
        "output-handle-key": True,
        "binary-encoding-method": "hex",
    },
}
"""[sink.csv] of each run: TiCDC's defaults, backslash escaping, and every per-record option on."""


def codec_path(fn: Callable[[RowChange, TableInfo], bytes]) -> Callable[[list[Any]], list[bytes]]:
    """The codec alone: one ``encode_row`` per row change (UPDATEs are not split)."""

    def run(rows: list[tuple[RowChange, TableInfo]]) -> list[bytes]:
        return [fn(row, table) for row, table in rows]

    return run


def bench_config(name: str, csv: dict[str, Any], rows: list[Any], repeat: int) -> bool:
    """Check identity, then print the rates of one [sink.csv] configuration; False on a mismatch."""
    cfg = ReplicaConfig.from_dict({"sink": {"csv": csv}})
    codec = CSVEncoder.from_config(cfg)
    row_enc = RowEncoder("csv", cfg)
    paths = {
        "sink path: split_update + RowEncoder.encode": sink_path(row_enc, per_row=True),
        "sink path: split_update + RowEncoder.encode_many": sink_path(row_enc, per_row=False),
        "codec alone: CSVEncoder.encode_row": codec_path(codec.encode_row),
    }
    records = expected_records(CSVEncoder.from_config(cfg), rows)
    for label, fn in paths.items():
        if label.startswith("sink path") and fn(rows) != records:
            print(
                f"MISMATCH: {label} differs from encode_row after the shared key-change rule", file=sys.stderr
            )
            return False
    print(
        f"\n[{name}] {json.dumps(csv)}: {len(rows)} row changes -> "
        f"{sum(r.count(cfg.sink.terminator.encode()) for r in records)} CSV records, "
        f"{sum(map(len, records)) / 2**20:.1f} MiB, identical bytes"
    )
    rates = best_rates(paths, rows, repeat)
    print(f"{'path (one core, CPU time)':60} {'rows/s':>9} {'us/row':>7}")
    for label, rate in rates.items():
        print(f"{label:60} {rate:>9,.0f} {1e6 / rate:>7.2f}")
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print rows/s of each path."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="row changes (default 200000)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per path; the fastest counts (default 5)")
    ap.add_argument(
        "--config", choices=[*CONFIGS, "all"], default="all", help="[sink.csv] options to run (default all)"
    )
    args = ap.parse_args(argv)
    rows = workload(args.rows)
    for name, csv in CONFIGS.items():
        if args.config in (name, "all") and not bench_config(name, csv, rows, args.repeat):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
