"""Keys changed several times in one transaction, on the lakehouse tables.

Upsert mode collapses a batch to each key's last state in (commit_ts, seq) order, a key-changing
UPDATE deleting its old key; changelog mode keeps every change with its ``_commit_ts`` and ``_seq``.
Both must give the upstream's rows for chains (a key changed twice, insert-update-delete, swaps),
including when a batch's rows are spread over several writers.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparkcdc.model import RowChange, compose_ts
from sparkcdc.sink.lakehouse.changes import ChangeFrame
from tests.unit.key_chains import PK_TABLE, SCENARIOS, Replica, final_state, random_txn, start_replica
from tests.unit.lakehouse.helpers import make_sink, read_table, run_batch

FORMATS = ("delta", "iceberg")
TS = compose_ts(1_700_000_000_000, 0)
NAME = "s_t"


def chain_batches(start: Replica) -> tuple[list[list[RowChange]], Replica]:
    """Two batches: the named scenarios, then random transactions; and the upstream after them."""
    upstream = start.copy()
    first: list[RowChange] = []
    for name in sorted(SCENARIOS):
        txn = SCENARIOS[name](upstream, TS + len(first))
        upstream.apply_all(txn)
        first.extend(txn)
    second: list[RowChange] = []
    rng = random.Random(3)
    for i in range(40):
        txn = random_txn(upstream, TS + 1000 + i, rng, rng.randint(1, 8))
        upstream.apply_all(txn)
        second.extend(txn)
    return [first, second], upstream


def test_upsert_frame_of_a_key_changed_twice() -> None:
    start = start_replica()
    f = ChangeFrame(PK_TABLE, "upsert")
    for r in SCENARIOS["key_changed_twice"](start, TS):
        f.add(r)
    got = {r["id"]: (r["v"], r["_sparkcdc_deleted"]) for r in f.to_arrow().to_pylist()}
    # 1 moved to 3 then to 4: 1 and 3 deleted, 4 written
    assert got == {1: ("one", True), 3: ("one", True), 4: ("one", False)}


@pytest.mark.parametrize("writers", [1, 2])
@pytest.mark.parametrize("fmt", FORMATS)
def test_upsert_tables_mirror_chains(fmt: str, writers: int, tmp_path: Path) -> None:
    sink = make_sink(f"{fmt}://{tmp_path}/wh")
    start = start_replica()
    seed = [RowChange("I", "s", "t", 1, TS - 1, None, r, i) for i, r in enumerate(start.rows.values())]
    run_batch(sink, 0, seed, TS - 1, info=PK_TABLE)
    batches, upstream = chain_batches(start)
    for i, rows in enumerate(batches, start=1):
        run_batch(sink, i, rows, rows[-1].commit_ts, info=PK_TABLE, writers=writers)
    got = {r["id"]: (r["id"], r["v"]) for r in read_table(sink, NAME).to_pylist()}
    assert got == upstream.rows
    sink.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_changelog_replays_chains_in_commit_ts_seq_order(fmt: str, tmp_path: Path) -> None:
    sink = make_sink(f"{fmt}://{tmp_path}/wh?mode=changelog")
    start = start_replica()
    batches, upstream = chain_batches(start)
    for i, rows in enumerate(batches):
        run_batch(sink, i, rows, rows[-1].commit_ts, info=PK_TABLE, writers=2)
    log = sorted(read_table(sink, NAME).to_pylist(), key=lambda r: (r["_commit_ts"], r["_seq"]))
    replica = start.copy()
    for r in log:
        before = None if r["_op"] == "I" else (r["_before_id"], r["_before_v"])
        after = None if r["_op"] == "D" else (r["id"], r["v"])
        replica.apply(RowChange(r["_op"], "s", "t", 1, r["_commit_ts"], before, after, r["_seq"]))
    assert replica.rows == final_state(start, batches)
    assert replica.rows == upstream.rows
    sink.close()
