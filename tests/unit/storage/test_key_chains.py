"""Keys changed several times in one transaction: storage files keep the binlog order, split in place.

The storage writer splits a key-changing UPDATE into its DELETE + INSERT where it stands and never
sorts a transaction, so a file holds each key's changes in binlog order. These tests write chain
transactions into files (canal-json and CSV), decode them as ``sparkcdc consumer`` does and replay
them into ``Replica``, which refuses what a database would refuse.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.codec.csv import CSVDecoder
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.storage import decode_canal_json_file
from sparkcdc.model import RowChange, TableInfo, compose_ts
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.storage import StorageSink
from tests.unit.key_chains import (
    PK_TABLE,
    SCENARIOS,
    UK_TABLE,
    Replica,
    final_state,
    random_txn,
    start_replica,
    unique_key_swap,
)

TS = compose_ts(1_700_000_000_000, 0)


def write_and_read(
    root: Path, protocol: str, table: TableInfo, txns: list[list[RowChange]]
) -> list[RowChange]:
    """Write the transactions in one batch, then decode every data file in file order."""
    cfg = ReplicaConfig.from_toml("[sink]\ndate-separator = 'none'")
    sink = StorageSink(f"file://{root}?protocol={protocol}&enable-tidb-extension=true", cfg, "cf")
    w = sink.open_writer(WriterContext("cf", 0, 0))
    for txn in txns:
        for row in txn:
            w.write(row, table)
    files = w.close()["files"]
    out: list[RowChange] = []
    for name in files:
        data = (root / name).read_bytes()
        if protocol == "csv":
            decoder = CSVDecoder.from_config(cfg)
            out.extend(rec.to_row_change(table, i) for i, rec in enumerate(decoder.decode(data, table)))
        else:
            out.extend(decode_canal_json_file(data, table))
    return out


def _typed(image: tuple[Any, ...] | None, table: TableInfo) -> tuple[Any, ...] | None:
    """canal-json file values come back as MySQL parameter text: ints to int for the comparison."""
    if image is None:
        return None
    return tuple(
        int(v) if v is not None and c.type == "int" else v for v, c in zip(image, table.columns, strict=True)
    )


def replay(start: Replica, rows: list[RowChange]) -> Replica:
    replica = start.copy()
    for r in rows:
        before, after = _typed(r.before, replica.table), _typed(r.after, replica.table)
        if r.op == "U" and before is None:
            # CSV has no pre-image; the writer split every key change, so the key is the row's own
            assert after is not None
            before = replica.rows[after[0]]
        replica.apply(RowChange(r.op, "s", "t", 1, r.commit_ts, before, after, r.seq))
    return replica


@pytest.mark.parametrize("protocol", ["canal-json", "csv"])
@pytest.mark.parametrize("table", [PK_TABLE, UK_TABLE], ids=["pk", "pk+uk"])
def test_chain_scenarios_replay_from_the_files(tmp_path: Path, protocol: str, table: TableInfo) -> None:
    start = start_replica(table)
    upstream = start.copy()
    txns: list[list[RowChange]] = []
    for name in sorted(SCENARIOS):
        txns.append(SCENARIOS[name](upstream, TS + len(txns)))
        upstream.apply_all(txns[-1])
    if table is UK_TABLE:
        uk_start = start_replica(UK_TABLE)
        # the unique-key swap needs rows 1 and 2 as they start: run it on its own table state
        swap_txn = unique_key_swap(uk_start, TS)
        got = replay(uk_start, write_and_read(tmp_path / "uk", protocol, table, [swap_txn]))
        assert got.rows == final_state(uk_start, [swap_txn])
    got = replay(start, write_and_read(tmp_path / "all", protocol, table, txns))
    assert got.rows == upstream.rows


def test_key_changed_twice_is_written_in_binlog_order(tmp_path: Path) -> None:
    start = start_replica()
    txn = SCENARIOS["key_changed_twice"](start, TS)
    rows = write_and_read(tmp_path, "canal-json", PK_TABLE, [txn])
    assert [(r.op, _typed(r.before if r.op == "D" else r.after, PK_TABLE)) for r in rows] == [
        ("D", (1, "one")),
        ("I", (3, "one")),
        ("D", (3, "one")),
        ("I", (4, "one")),
    ]


@pytest.mark.parametrize("table", [PK_TABLE, UK_TABLE], ids=["pk", "pk+uk"])
def test_random_transactions_replay_from_the_files(tmp_path: Path, table: TableInfo) -> None:
    rng = random.Random(5)
    start = start_replica(table)
    upstream = start.copy()
    txns: list[list[RowChange]] = []
    for i in range(150):
        txns.append(random_txn(upstream, TS + i, rng, rng.randint(1, 12)))
        upstream.apply_all(txns[-1])
    got = replay(start, write_and_read(tmp_path, "canal-json", table, txns))
    assert got.rows == upstream.rows
