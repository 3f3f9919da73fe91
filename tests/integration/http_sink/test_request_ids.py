"""HTTP request ids come from the rows: stable across restarts and claims, new for new rows.

Spark batch ids start again at 0 whenever a changefeed is claimed anew (a server failover, a
restart without its checkpoint). The receiver here drops a request whose id it has seen, as the
sink's docs allow; it must still end with every change exactly once.
"""

from __future__ import annotations

import pickle

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.http import HTTPSink

from .conftest import Receiver, Request

pytestmark = pytest.mark.integration

CF = "cf-ids"


def shape(name: str) -> TableInfo:
    return TableInfo(
        "shop",
        name,
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("note", "varchar", length=20)),
        (IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    )


TABLES = {"orders": shape("orders"), "items": shape("items")}


def change(i: int, tables: tuple[str, ...] = ("orders",)) -> RowChange:
    """Row i: three rows per transaction, the tables taking turns per transaction."""
    name = tables[(i // 3) % len(tables)]
    return RowChange("I", "shop", name, 0, (1 << 30) + i // 3, None, (i, f"n{i}"), seq=i % 3)


def new_sink(receiver: Receiver) -> HTTPSink:
    """The sink of a (re)started changefeed, shipped to its writer as Spark does (pickled)."""
    s = create_sink(f"{receiver.url}/cdc?batch-size=64", ReplicaConfig(), CF)
    assert isinstance(s, HTTPSink)
    copy = pickle.loads(pickle.dumps(s))
    assert isinstance(copy, HTTPSink)
    return copy


def run(
    receiver: Receiver, batches: list[tuple[int, range]], tables: tuple[str, ...] = ("orders",)
) -> list[Request]:
    """One run of a changefeed: (batch id, rows) batches written and committed; its requests."""
    sink = new_sink(receiver)
    before = len(receiver.accepted)
    for batch_id, ids in batches:
        w = sink.open_writer(WriterContext(CF, batch_id, 0))
        for i in ids:
            r = change(i, tables)
            w.write(r, TABLES[r.table])
        sink.commit(batch_id, [w.close()], change(ids[-1]).commit_ts)
    sink.close()
    return receiver.accepted[before:]


def rid(req: Request) -> str:
    return req.headers["X-Sparkcdc-Request-Id"]


def row_ids(req: Request) -> list[int]:
    return [int(m["data"][0]["id"]) for m in req.body]


def by_id(requests: list[Request]) -> dict[str, list[int]]:
    return {rid(r): row_ids(r) for r in requests}


def deduplicated(requests: list[Request]) -> list[int]:
    """What a receiver that drops already-seen request ids applies, in order."""
    seen: set[str] = set()
    out: list[int] = []
    for req in requests:
        if rid(req) not in seen:
            seen.add(rid(req))
            out += row_ids(req)
    return out


def test_a_restart_from_an_earlier_checkpoint_sends_the_same_ids(receiver: Receiver) -> None:
    first = run(receiver, [(0, range(0, 300)), (1, range(300, 600)), (2, range(600, 900))])
    # Restart from the checkpoint after batch 0: Spark replays batches 1 and 2 under other ids.
    again = run(receiver, [(7, range(300, 600)), (8, range(600, 900))])
    old, new = by_id(first), by_id(again)
    assert len(set(new)) == len(again), "two requests of one run share an id"
    assert set(new) <= set(old)
    for k, rows in new.items():
        assert old[k] == rows, f"request {k} holds other rows than before"
    assert sorted(i for rows in new.values() for i in rows) == list(range(300, 900))
    # Every row id names the changefeed, the rows' (commit_ts, seq) range, their count and the table.
    for req in again:
        ts_min, ts_max = req.headers["X-Sparkcdc-Commit-Ts-Min"], req.headers["X-Sparkcdc-Commit-Ts-Max"]
        rows = row_ids(req)
        first_seq, last_seq = rows[0] % 3, rows[-1] % 3
        assert rid(req) == f"{CF}:rows:{ts_min}.{first_seq}-{ts_max}.{last_seq}:{len(rows)}:shop.orders"


def test_new_rows_after_a_claim_change_get_new_ids(receiver: Receiver) -> None:
    first = run(receiver, [(0, range(0, 300)), (1, range(300, 600))])
    # Another server claims the changefeed: its batch ids start at 0 again, over new rows.
    claimed = run(receiver, [(0, range(600, 900)), (1, range(900, 1200))])
    assert not set(by_id(first)) & set(by_id(claimed))
    assert deduplicated(first + claimed) == list(range(1200))


def test_a_deduplicating_receiver_gets_every_change_exactly_once(receiver: Receiver) -> None:
    tables = ("orders", "items")
    run(receiver, [(0, range(0, 250)), (1, range(250, 500)), (2, range(500, 750))], tables)
    # Failover: the meta database lags, so the new owner replays batches 1 and 2 with batch ids
    # from 0, then goes on with new rows (whose batch ids the first owner used for other rows).
    run(receiver, [(0, range(250, 500)), (1, range(500, 750)), (2, range(750, 1000))], tables)
    # A restart that replays the last batch once more.
    run(receiver, [(5, range(750, 1000))], tables)
    applied = deduplicated(receiver.accepted)
    assert applied == list(range(1000))
    # Requests of both tables carry no table in their id; a request of one table would.
    assert any(rid(r).count(":") == 3 for r in receiver.accepted)


def test_a_replay_cut_into_other_batches_falls_back_into_step(receiver: Receiver) -> None:
    first = run(receiver, [(0, range(0, 700)), (1, range(700, 1400)), (2, range(1400, 2100))])
    # A lost checkpoint: the whole range again, as one batch.
    wide = run(receiver, [(0, range(0, 2100))])
    old = set(by_id(first))
    fresh = [r for r in wide if rid(r) not in old]
    # Only requests after the two old batch ends, up to the next cut point, differ; the rest are
    # dropped as duplicates. (Requests counted from each batch's start would differ from row 700 on.)
    assert 1 <= len(fresh) <= 8, [rid(r) for r in fresh]
    resent = sorted(i for r in fresh for i in row_ids(r))
    assert len(resent) <= 8 * 64
    assert all(abs(i - 700) < 6 * 64 or abs(i - 1400) < 6 * 64 for i in resent)
    assert sorted(deduplicated(first + wide)) == sorted([*range(2100), *resent])
