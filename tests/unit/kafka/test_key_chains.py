"""A key changed several times in one transaction reaches Kafka so that a replay ends in the upstream's rows.

The writer collapses a transaction holding a split UPDATE to one net change per handle key before the
DELETE < UPDATE < INSERT sort of spec §7 (``_net_changes``); a transaction without a split keeps its
binlog order. Both must replay into the upstream's rows when applied in order, and the collapsed
form also when applied grouped by kind (as TiCDC's MySQL sink applies a transaction). The last
tests write through a real broker with the index-value dispatcher and replay every partition.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from sparkcdc.codec.canal_json import canal_message_to_row_change, decode_canal_json
from sparkcdc.codec.values import key_column_indexes
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import ColumnInfo, RowChange, TableInfo, compose_ts
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.writer import KafkaPartitionWriter, _net_changes
from tests.unit.key_chains import (
    PK_TABLE,
    SCENARIOS,
    UK_TABLE,
    final_state,
    grouped_by_kind,
    random_txn,
    start_replica,
    unique_key_swap,
)

TS = compose_ts(1_700_000_000_000, 0)


def sink_for_tests(config: ReplicaConfig | None = None) -> KafkaSink:
    """A sink that is never connected: its split rule is all these tests use."""
    sink = create_sink("kafka://127.0.0.1:9/t?protocol=canal-json", config or ReplicaConfig(), "cf")
    assert isinstance(sink, KafkaSink)
    return sink


def sent(sink: KafkaSink, table: TableInfo, rows: Sequence[RowChange]) -> list[RowChange]:
    """What the writer sends for one transaction of one table: split, then collapsed and sorted if split."""
    route: Any = SimpleNamespace(key_indexes=tuple(sorted(key_column_indexes(table))))
    held: list[RowChange] = []
    was_split = False
    for row in rows:
        parts = sink.split(row, table, route.key_indexes)
        was_split = was_split or parts is not None
        held.extend(parts or [row])
    if not was_split:
        return held
    return [r for run, _, _ in _net_changes([(held, table, route)], sink.split) for r in run]


def _check_tidb_shaped(out: Sequence[RowChange]) -> None:
    """One change per key, except the DELETE + INSERT of a unique-key change; sorted D < U < I."""
    rank = {"D": 0, "U": 1, "I": 2}
    assert [rank[r.op] for r in out] == sorted(rank[r.op] for r in out)
    seen: dict[Any, list[str]] = {}
    for r in out:
        seen.setdefault(r.image[0], []).append(r.op)
    assert all(ops in (["D"], ["U"], ["I"], ["D", "I"]) for ops in seen.values()), seen


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("table", [PK_TABLE, UK_TABLE], ids=["pk", "pk+uk"])
def test_scenario_replays_to_the_upstream_rows(name: str, table: TableInfo) -> None:
    start = start_replica(table)
    txn = SCENARIOS[name](start, TS)
    want = final_state(start, [txn])
    out = sent(sink_for_tests(), table, txn)
    _check_tidb_shaped(out)
    assert start.copy().apply_all(out).rows == want
    assert start.copy().apply_all(grouped_by_kind(out)).rows == want


def test_key_changed_twice_is_one_delete_and_one_insert() -> None:
    start = start_replica()
    out = sent(sink_for_tests(), PK_TABLE, SCENARIOS["key_changed_twice"](start, TS))
    # the plain sort sent D1, D2, I2, I3 and a replica kept rows 2 and 3
    assert [(r.op, r.image) for r in out] == [("D", (1, "one")), ("I", (4, "one"))]


def test_insert_update_delete_sends_nothing() -> None:
    start = start_replica()
    assert sent(sink_for_tests(), PK_TABLE, SCENARIOS["insert_update_delete"](start, TS)) == []


def test_swap_is_two_updates_in_place() -> None:
    start = start_replica()
    out = sent(sink_for_tests(), PK_TABLE, SCENARIOS["swap"](start, TS))
    assert [(r.op, r.before, r.after) for r in out] == [
        ("U", (1, "one"), (1, "two")),
        ("U", (2, "two"), (2, "one")),
    ]


def test_unique_key_swap_is_split_again_after_the_collapse() -> None:
    start = start_replica(UK_TABLE)
    txn = unique_key_swap(start, TS)
    out = sent(sink_for_tests(), UK_TABLE, txn)
    _check_tidb_shaped(out)
    # row 2's unique key changed (200 → 100): its net UPDATE is a DELETE + INSERT again
    assert [(r.op, r.image) for r in out] == [
        ("D", (1, 100, "one")),
        ("D", (2, 200, "two")),
        ("I", (2, 100, "two")),
        ("I", (3, 200, "one")),
    ]
    want = final_state(start, [txn])
    assert start.copy().apply_all(grouped_by_kind(out)).rows == want


def test_raw_change_events_keep_the_binlog_order() -> None:
    sink = sink_for_tests(ReplicaConfig.from_toml("[sink.kafka-config]\noutput-raw-change-event = true\n"))
    assert not sink.split_updates
    start = start_replica()
    txn = SCENARIOS["interleaved"](start, TS)
    assert sent(sink, PK_TABLE, txn) == txn


@pytest.mark.parametrize("table", [PK_TABLE, UK_TABLE], ids=["pk", "pk+uk"])
def test_random_transactions_replay_to_the_upstream_rows(table: TableInfo) -> None:
    rng = random.Random(20240611)
    sink = sink_for_tests()
    replica = start_replica(table)
    grouped = replica.copy()
    for i in range(400):
        txn = random_txn(replica, TS + i, rng, rng.randint(1, 12))
        want = final_state(replica, [txn])
        out = sent(sink, table, txn)
        if any(r.op == "U" and sink.split(r, table, tuple(key_column_indexes(table))) for r in txn):
            _check_tidb_shaped(out)
        replica.apply_all(out)
        grouped.apply_all(grouped_by_kind(out) if out != txn else out)
        assert replica.rows == want, f"transaction {i}: {txn}"
        assert grouped.rows == want, f"transaction {i}: {txn}"


def test_rows_of_a_table_without_a_handle_key_keep_their_binlog_order() -> None:
    keyless = TableInfo("s", "n", (ColumnInfo("a", "int"), ColumnInfo("b", "int")), version=1)
    sink = sink_for_tests()
    route: Any = SimpleNamespace(key_indexes=())
    keyed_route: Any = SimpleNamespace(key_indexes=(0,))

    def rc(op: str, before: Any, after: Any, seq: int, table: str = "n") -> RowChange:
        return RowChange(op, "s", table, 1, TS, before, after, seq)

    keyless_rows = [rc("I", None, (1, 1), 0), rc("D", (1, 1), None, 1), rc("I", None, (1, 1), 2)]
    split_rows = [rc("D", (1, "one"), None, 3, "t"), rc("I", None, (2, "one"), 3, "t")]
    runs = _net_changes([(keyless_rows, keyless, route), (split_rows, PK_TABLE, keyed_route)], sink.split)
    assert [r for run, _, _ in runs for r in run] == keyless_rows + split_rows


# --- through a real broker --------------------------------------------------------------------------

PARTITIONS = 3


def _consume_all(bootstrap: str, topic: str, expect: int) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chains-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        for _ in range(300):
            for m in c.consume(10_000, 0.2):
                partition = m.partition()
                if m.error() is None and partition is not None:
                    got[partition].append(m.value() or b"")
            if sum(len(v) for v in got.values()) >= expect:
                break
    finally:
        c.close()
    assert sum(len(v) for v in got.values()) == expect
    return got


def test_the_writer_sends_chains_that_replay_partition_by_partition(tansu: LocalTansu) -> None:
    topic = "chains-" + uuid.uuid4().hex[:8]
    config = ReplicaConfig.from_toml(
        '[sink]\ndispatchers = [{matcher = ["s.*"], partition = "index-value"}]\n'
    )
    sink = create_sink(
        tansu.sink_uri(topic, f"protocol=canal-json&enable-tidb-extension=true&partition-num={PARTITIONS}"),
        config,
        "cf",
    )
    assert isinstance(sink, KafkaSink)
    sink.check()
    rng = random.Random(7)
    start = start_replica()
    upstream = start.copy()
    txns: list[list[RowChange]] = []
    for name in sorted(SCENARIOS):
        txns.append(SCENARIOS[name](upstream, TS + len(txns)))
        upstream.apply_all(txns[-1])
    for _ in range(60):
        txns.append(random_txn(upstream, TS + len(txns), rng, rng.randint(1, 10), keys=12))
        upstream.apply_all(txns[-1])
    w = sink.open_writer(WriterContext("cf", 0, 0))
    assert isinstance(w, KafkaPartitionWriter)
    for i, txn in enumerate(txns):
        if i % 2:
            w.write_rows(txn, PK_TABLE)
        else:
            for row in txn:
                w.write(row, PK_TABLE)
    messages = w.close()["messages"]
    by_partition = _consume_all(tansu.bootstrap, topic, messages)

    decoded = {
        p: [canal_message_to_row_change(decode_canal_json(v), PK_TABLE) for v in values]
        for p, values in by_partition.items()
    }
    for p, rows in decoded.items():
        # each partition holds whole keys: every change of a key goes to the key's partition
        assert all(sink.destination(r, PK_TABLE)[1] == p for r in rows)
    # A consumer sees each transaction's messages partition after partition, in any order of partitions.
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):
        replica = start.copy()
        for ts in sorted({r.commit_ts for rows in decoded.values() for r in rows}):
            for p in order:
                replica.apply_all(r for r in decoded[p] if r.commit_ts == ts)
        assert replica.rows == upstream.rows, f"partition order {order}"
