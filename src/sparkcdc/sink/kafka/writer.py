"""Executor side of the Kafka sink: ``KafkaPartitionWriter`` produces one writer group's rows.

A writer buffers each transaction, splits its key-changing UPDATEs (spec §7, reordering the
transaction DELETE < UPDATE < INSERT), encodes each run of consecutive rows of one table with its
table's cached route (``_TableRoute``: topic, partition rule, key columns, run encoder: one call per
run, for canal-json in C), applies the large-message rules and produces with delivery tracking;
``close()`` returns once the broker acknowledged every message. A transaction larger than ``MAX_TXN_ROWS`` row changes is sent in chunks of that many as it
arrives (the reorder applies within each chunk), so a writer's memory does not grow with it.
``writer_group`` maps a Kafka (topic, partition) onto the writer group that owns it.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from sparkcdc.sink.base import PartitionWriter, WriterContext
from sparkcdc.sink.kafka.config import MESSAGE_OVERHEAD
from sparkcdc.sink.kafka.encoders import MessageEncoder
from sparkcdc.sink.kafka.large_message import LargeMessageHandler
from sparkcdc.sink.kafka.producer import DeliveryTracker, get_producer

if TYPE_CHECKING:
    from sparkcdc.model import RowChange, TableInfo
    from sparkcdc.sink.kafka.sink import KafkaSink

_OP_ORDER = {"D": 0, "U": 1, "I": 2}

MAX_TXN_ROWS = 8192
"""Row changes of one transaction a writer holds at most: a larger transaction is sent in chunks of
this many, each reordered DELETE < UPDATE < INSERT on its own when it holds a split UPDATE, so a
transaction of any size streams in bounded memory (the reorder of spec §7 is then per chunk)."""


def writer_group(topic: str, partition: int, num_writers: int) -> int:
    """The writer group of a Kafka partition: a topic's partitions spread over consecutive groups."""
    if num_writers <= 1:
        return 0
    return (zlib.crc32(topic.encode()) + partition) % num_writers


class _TableRoute:
    """What a writer reuses for every row of one table: topic, partition rule, key columns, encoders."""

    __slots__ = (
        "dispatcher",
        "encode_rows",
        "fixed_partition",
        "key_indexes",
        "num_partitions",
        "table",
        "topic",
    )

    def __init__(
        self, sink: KafkaSink, encoder: MessageEncoder | None, row: RowChange, table: TableInfo
    ) -> None:
        from sparkcdc.codec.values import key_column_indexes

        self.table = table
        route = sink.router.match(row.schema, row.table)
        self.topic: str = route.topic.topic(row.schema, row.table)
        self.num_partitions = sink.num_partitions_of(self.topic)
        self.dispatcher = route.partition
        # table and fixed rules give every row of a table the same partition
        self.fixed_partition: int | None = (
            self.dispatcher.partition(row, table, self.num_partitions)
            if self.dispatcher.kind in ("table", "fixed")
            else None
        )
        self.key_indexes = tuple(sorted(key_column_indexes(table)))
        self.encode_rows = None if encoder is None else encoder.rows_encoder(row, table)


_Run = tuple[list["RowChange"], "TableInfo", _TableRoute]
"""Consecutive row changes of one table in one transaction, as held by a writer (its own list)."""


class KafkaPartitionWriter(PartitionWriter):
    """Produces one writer group's rows; ``close()`` returns only once the broker acknowledged all of them."""

    def __init__(self, sink: KafkaSink, ctx: WriterContext) -> None:
        self.sink = sink
        self.ctx = ctx
        self.encoder = sink.encoder()
        self.tracker = DeliveryTracker(get_producer(sink.options), sink.max_message_bytes)
        self.large = LargeMessageHandler(
            sink.options.large_message, sink.max_message_bytes, sink.options.protocol
        )
        self.topics: dict[str, int] = {}
        self._txn: list[_Run] = []
        self._held = 0
        """Row changes in ``_txn`` (split UPDATEs count two)."""
        self._txn_ts: int | None = None
        self._txn_split = False
        self._routes: dict[tuple[str, str, int], _TableRoute] = {}
        self.rows = 0
        self.max_txn_rows = MAX_TXN_ROWS
        """A transaction is sent in chunks of at most this many row changes (see ``MAX_TXN_ROWS``)."""
        self.chunks = 0
        """Chunks sent before their transaction ended (transactions larger than ``max_txn_rows``)."""

    def _route_of(self, row: RowChange, table: TableInfo) -> _TableRoute:
        key = (row.schema, row.table, id(table))
        tr = self._routes.get(key)
        if tr is None or tr.table is not table:
            tr = _TableRoute(self.sink, self.encoder, row, table)
            self._routes[key] = tr
            self.topics.setdefault(tr.topic, tr.num_partitions)
        return tr

    def _hold(self, rows: list[RowChange], table: TableInfo, tr: _TableRoute) -> None:
        """Add rows (a list the writer owns) to the transaction, after its last run when that is the table's."""
        txn = self._txn
        if txn and txn[-1][2] is tr:
            txn[-1][0].extend(rows)
        else:
            txn.append((rows, table, tr))
        self._held += len(rows)
        if self._held >= self.max_txn_rows:
            self._send_chunk()

    def write(self, row: RowChange, table: TableInfo) -> None:
        """Hold the row with its transaction; a transaction is sent once the next one starts."""
        if row.commit_ts != self._txn_ts:
            if self._txn:
                self._flush_txn()
            self._txn_ts = row.commit_ts
        tr = self._routes.get((row.schema, row.table, id(table)))
        if tr is None or tr.table is not table:
            tr = self._route_of(row, table)
        self.rows += 1
        if row.op == "U":
            parts = self.sink.split(row, table, tr.key_indexes)
            if parts is not None:
                # spec §7: a key-changing UPDATE becomes DELETE + INSERT, the transaction is reordered
                self._txn_split = True
                self._hold(list(parts), table, tr)
                return
        self._hold([row], table, tr)

    def write_rows(self, rows: list[RowChange], table: TableInfo) -> None:
        """``write`` for consecutive rows of one table in one transaction (one route lookup)."""
        first = rows[0]
        if first.commit_ts != self._txn_ts:
            if self._txn:
                self._flush_txn()
            self._txn_ts = first.commit_ts
        if rows[-1].commit_ts != first.commit_ts:  # not one transaction after all: row by row
            for row in rows:
                self.write(row, table)
            return
        tr = self._routes.get((first.schema, first.table, id(table)))
        if tr is None or tr.table is not table:
            tr = self._route_of(first, table)
        if self._held + 2 * len(rows) > self.max_txn_rows:
            # the chunk bound may be reached inside this list: row by row (each row checks it)
            for row in rows:
                self.write(row, table)
            return
        self.rows += len(rows)
        if "U" not in map(_op_of, rows):
            self._hold(list(rows), table, tr)
            return
        split = self.sink.split
        key_indexes = tr.key_indexes
        held: list[RowChange] = []
        for row in rows:
            if row.op == "U":
                parts = split(row, table, key_indexes)
                if parts is not None:
                    # spec §7: a key-changing UPDATE becomes DELETE + INSERT, the transaction is reordered
                    held.extend(parts)
                    self._txn_split = True
                    continue
            held.append(row)
        self._hold(held, table, tr)

    def _send_chunk(self) -> None:
        """Send the rows held of a transaction that has not ended (it outgrew ``max_txn_rows``)."""
        ts = self._txn_ts
        self._flush_txn()
        self._txn_ts = ts
        self.chunks += 1

    def _flush_txn(self) -> None:
        txn = self._txn
        if self._txn_split:
            # spec §7: once an UPDATE was split, the transaction is ordered DELETE < UPDATE < INSERT
            txn = _reordered(txn)
        try:
            for rows, table, tr in txn:
                if tr.encode_rows is not None:
                    self._produce_run(rows, table, tr)
                else:
                    self._produce_rows(rows, table, tr)
        finally:
            if self.tracker.sent:
                self.tracker.shared.producer.poll(0)
        self._txn = []
        self._held = 0
        self._txn_ts = None
        self._txn_split = False

    def _produce_run(self, rows: list[RowChange], table: TableInfo, tr: _TableRoute) -> None:
        """A run's messages encoded in one call, produced keyless (the common case inline)."""
        assert tr.encode_rows is not None
        values = tr.encode_rows(rows)
        tracker = self.tracker
        limit = self.large.max_message_bytes - MESSAGE_OVERHEAD
        producer = tracker.shared.producer
        on_delivery = tracker.on_delivery
        topic = tr.topic
        fixed = tr.fixed_partition
        dispatcher = tr.dispatcher
        sent = nbytes = 0
        try:
            for row, value in zip(rows, values, strict=True):
                partition = fixed
                if partition is None:
                    partition = dispatcher.partition(row, table, tr.num_partitions)
                if len(value) <= limit:
                    try:
                        producer.produce(topic, value, None, partition, on_delivery)
                    except BufferError:
                        tracker.produce(topic, partition, None, value)
                        continue
                    sent += 1
                    nbytes += len(value)
                    continue
                for key, payload in self.large.check(self.encoder, row, table, [(None, value)]):
                    tracker.produce(topic, partition, key, payload)
        finally:
            tracker.sent += sent
            tracker.bytes += nbytes

    def _produce_rows(self, rows: list[RowChange], table: TableInfo, tr: _TableRoute) -> None:
        """Row by row, for protocols without a run encoder (Avro: keyed messages)."""
        for row in rows:
            partition = tr.fixed_partition
            if partition is None:
                partition = tr.dispatcher.partition(row, table, tr.num_partitions)
            messages = self.encoder.encode_row(row, table, tr.topic)
            for key, payload in self.large.check(self.encoder, row, table, messages):
                self.tracker.produce(tr.topic, partition, key, payload)

    def close(self) -> dict[str, Any]:
        """Send the last transaction, wait for every acknowledgement, report what was written."""
        if self._txn:
            self._flush_txn()
        self.tracker.wait()
        return {
            "writer": self.ctx.writer_id,
            "rows": self.rows,
            "messages": self.tracker.sent,
            "bytes": self.tracker.bytes,
            "large_messages": self.large.handled,
            "topics": self.topics,
        }

    def abort(self) -> None:
        """Drop the unsent transaction (queued messages may still be delivered: at-least-once)."""
        self._txn = []
        self._held = 0
        self._txn_ts = None


def _op_of(row: RowChange) -> str:
    return row.op


def _reordered(txn: list[_Run]) -> list[_Run]:
    """The transaction's row changes ordered DELETE < UPDATE < INSERT (stable), regrouped into runs."""
    flat = [(row, table, tr) for rows, table, tr in txn for row in rows]
    flat.sort(key=_op_rank)
    out: list[_Run] = []
    for row, table, tr in flat:
        if out and out[-1][2] is tr:
            out[-1][0].append(row)
        else:
            out.append(([row], table, tr))
    return out


def _op_rank(item: tuple[RowChange, TableInfo, _TableRoute]) -> int:
    return _OP_ORDER[item[0].op]
