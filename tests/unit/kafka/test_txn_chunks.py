"""A transaction larger than the writer's bound is sent in chunks, each reordered on its own.

``KafkaPartitionWriter`` holds at most ``max_txn_rows`` row changes of a transaction (the
DELETE < UPDATE < INSERT reorder of a split UPDATE needs them held); beyond that it sends
what it holds and goes on. Against a real broker: the bound holds after every call, every
message arrives, and the partition's messages are exactly the per-chunk reordered sequence.
"""

from __future__ import annotations

import re
import uuid

from sparkcdc.codec.canal_json import ReferenceCanalJsonEncoder
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo, compose_ts
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.writer import MAX_TXN_ROWS, KafkaPartitionWriter

T = TableInfo(
    schema="s",
    table="t",
    columns=(ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "varchar", length=16)),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=1,
)
_TS = re.compile(rb',"ts":\d+,')
BOUND = 100


def big_transaction(n: int) -> list[RowChange]:
    """One transaction: inserts, key-changing UPDATEs (split), plain UPDATEs and deletes, interleaved."""
    ts = compose_ts(1_700_000_000_000, 0)
    rows: list[RowChange] = []
    for i in range(n):
        k = i % 4
        if k == 0:
            rows.append(RowChange("I", "s", "t", 1, ts, None, (i, f"i{i}"), i))
        elif k == 1:  # the key moves: DELETE + INSERT
            rows.append(RowChange("U", "s", "t", 1, ts, (i, "a"), (i + 10_000_000, "a"), i))
        elif k == 2:
            rows.append(RowChange("U", "s", "t", 1, ts, (i, "a"), (i, "b"), i))
        else:
            rows.append(RowChange("D", "s", "t", 1, ts, (i, "d"), None, i))
    return rows


def expected(sink: KafkaSink, rows: list[RowChange], bound: int) -> list[bytes]:
    """Row by row: parts held until ``bound`` of them are, then sent ordered D < U < I."""
    ref = ReferenceCanalJsonEncoder(sink.config)
    order = {"D": 0, "U": 1, "I": 2}
    out: list[bytes] = []
    held: list[RowChange] = []

    def send() -> None:
        parts = sorted(held, key=lambda r: order[r.op]) if split[0] else held
        out.extend(_TS.sub(b',"ts":0,', ref.encode_row(p, T)) for p in parts)
        held.clear()
        split[0] = False

    split = [False]
    for row in rows:
        parts = sink.expand(row, T)
        if len(parts) > 1:
            split[0] = True
        held.extend(parts)
        if len(held) >= bound:
            send()
    send()
    return out


def consume(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "t-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        for _ in range(200):
            for m in c.consume(10_000, 0.2):
                if m.error() is None:
                    got.append(_TS.sub(b',"ts":0,', m.value() or b""))
            if len(got) >= expect:
                break
    finally:
        c.close()
    return got


def open_writer(tansu: LocalTansu) -> tuple[KafkaSink, KafkaPartitionWriter, str]:
    topic = "chunks-" + uuid.uuid4().hex[:8]
    sink = create_sink(tansu.sink_uri(topic, "protocol=canal-json&partition-num=1"), ReplicaConfig(), "cf")
    assert isinstance(sink, KafkaSink)
    sink.check()
    w = sink.open_writer(WriterContext("cf", 0, 0))
    assert isinstance(w, KafkaPartitionWriter)
    assert w.max_txn_rows == MAX_TXN_ROWS
    w.max_txn_rows = BOUND
    return sink, w, topic


def test_a_large_transaction_is_sent_in_reordered_chunks(tansu: LocalTansu) -> None:
    sink, w, topic = open_writer(tansu)
    rows = big_transaction(1_000)
    held = 0
    for row in rows:
        w.write(row, T)
        held = max(held, w._held)
    assert held < BOUND
    msg = w.close()
    want = expected(sink, rows, BOUND)
    assert msg["messages"] == len(want) == 1_250  # every 4th row is split in two
    assert w.chunks == len(want) // BOUND - (len(want) % BOUND == 0)
    assert consume(tansu.bootstrap, topic, len(want)) == want


def test_write_rows_keeps_the_bound_and_each_split_in_one_chunk(tansu: LocalTansu) -> None:
    sink, w, topic = open_writer(tansu)
    rows = big_transaction(2_000)
    held = 0
    for i in range(0, len(rows), 37):  # lists of a ROWS event's size, not aligned with the bound
        w.write_rows(rows[i : i + 37], T)
        held = max(held, w._held)
    assert held < BOUND
    msg = w.close()
    assert w.chunks >= len(rows) * 5 // 4 // BOUND - 1
    got = consume(tansu.bootstrap, topic, msg["messages"])
    ref = ReferenceCanalJsonEncoder(sink.config)
    parts = [p for row in rows for p in sink.expand(row, T)]
    assert sorted(got) == sorted(_TS.sub(b',"ts":0,', ref.encode_row(p, T)) for p in parts)
    # a split UPDATE's DELETE still precedes its INSERT (both parts land in the same chunk)
    where = {m: n for n, m in enumerate(got)}
    for row in rows:
        if (
            row.op == "U"
            and row.after is not None
            and row.before is not None
            and row.after[0] != row.before[0]
        ):
            d, ins = sink.expand(row, T)
            assert (
                where[_TS.sub(b',"ts":0,', ref.encode_row(d, T))]
                < where[_TS.sub(b',"ts":0,', ref.encode_row(ins, T))]
            )
