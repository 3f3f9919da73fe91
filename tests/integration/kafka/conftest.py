"""Kafka test helpers: read topics back, build batches; the broker fixture ``tansu`` is in tests/conftest.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sparkcdc.sink.kafka.producer import close_all_producers


@pytest.fixture(autouse=True)
def _drop_producers() -> Iterator[None]:
    """Cached producers die with each test, so none keeps dialling a broker that is gone."""
    yield
    close_all_producers(1)


@pytest.fixture()
def topic() -> str:
    """A fresh topic name."""
    return "t-" + uuid.uuid4().hex[:10]


def consume_all(bootstrap: str, topic: str, partitions: int, timeout: float = 20.0) -> dict[int, list[Any]]:
    """Every message of every partition, read until each partition reports its end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"partitions {sorted(set(range(partitions)) - at_end)} of {topic} never ended"
                )
            m = c.poll(0.5)
            if m is None:
                continue
            err, part = m.error(), int(m.partition() or 0)
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(part)
                    continue
                raise RuntimeError(str(err))
            at_end.discard(part)
            out[part].append(m)
        return out
    finally:
        c.close()


def person_table(schema: str = "test", table: str = "person", version: int = 1) -> Any:
    """A small table: id INT PK, name VARCHAR(64), note TEXT, price DECIMAL(10,2)."""
    from sparkcdc.model import ColumnInfo, IndexInfo, TableInfo

    return TableInfo(
        schema=schema,
        table=table,
        columns=(
            ColumnInfo("id", "int", length=11, nullable=False),
            ColumnInfo("name", "varchar", length=64, charset="utf8mb4"),
            ColumnInfo("note", "text", charset="utf8mb4"),
            ColumnInfo("price", "decimal", precision=10, scale=2),
        ),
        indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        version=version,
    )


def run_batch(
    sink: Any,
    items: list[tuple[Any, Any]],
    batch_id: int,
    checkpoint_ts: int,
    commit: bool = True,
    by_event: bool = False,
) -> list[dict[str, Any]]:
    """What the pipeline does with one batch: group by route(), sort, write, close every writer, commit.

    ``commit=False`` is a batch whose driver died before committing (it will be re-sent).
    ``by_event=True`` hands each writer its consecutive rows of one table through ``write_rows`` (as
    the segment writer does with a ROWS event's rows) instead of ``write``; such a run may span
    transactions here, which ``write_rows`` must handle row by row.
    """
    from sparkcdc.sink.base import WriterContext

    groups: dict[int, list[tuple[Any, Any]]] = {}
    for row, table in items:
        g = sink.route(row, table)
        assert 0 <= g < sink.num_writers
        groups.setdefault(g, []).append((row, table))
    messages = []
    for g, rows in sorted(groups.items()):
        w = sink.open_writer(WriterContext("cf", batch_id, g))
        ordered = sorted(rows, key=lambda rt: (rt[0].commit_ts, rt[0].seq))
        if by_event:
            run: list[Any] = []
            for row, table in ordered:
                if run and (run[0][0].table, run[0][1]) != (row.table, table):
                    w.write_rows([r for r, _ in run], run[0][1])
                    run = []
                run.append((row, table))
            if run:
                w.write_rows([r for r, _ in run], run[0][1])
        else:
            for row, table in ordered:
                w.write(row, table)
        messages.append(w.close())
    if commit:
        sink.commit(batch_id, messages, checkpoint_ts)
    return messages
