"""Executor side of the Kafka sink: ``KafkaPartitionWriter`` produces one writer group's rows.

A writer buffers each transaction, splits its key-changing UPDATEs (spec §7, reordering the
transaction DELETE < UPDATE < INSERT, after collapsing it to one net change per key: see
``_net_changes``), encodes each run of consecutive rows of one table with its table's cached route
(``_TableRoute``: topic, partition rule, key columns, run encoder: one call per run, for canal-json
in C), applies the large-message rules and produces with delivery tracking; ``close()`` returns once
the broker acknowledged every message. A transaction larger than ``MAX_TXN_ROWS`` row changes is
sent in chunks of that many as it arrives (the collapse and reorder apply within each chunk), so a
writer's memory does not grow with it. ``writer_group`` maps a Kafka (topic, partition) onto the
writer group that owns it.

The segments of a batch are written by parallel tasks that take turns (``pipeline.turns``): a
writer of a later segment encodes as it goes but holds its messages (up to ``HOLD_BYTES``) until
every earlier segment's messages are acknowledged, then produces them in order; so each partition
receives the batch in commit order, as from one task.

Keys changed several times in one transaction. TiDB hands TiCDC at most one change per key per
transaction, so its DELETE < UPDATE < INSERT sort cannot reorder two changes of one key. A MySQL or
MariaDB binlog can (``UPDATE id=2 WHERE id=1; UPDATE id=3 WHERE id=2``): sorting its split halves
would send D1, D2, I2, I3 and leave row 2 behind. A transaction that is reordered is therefore first
collapsed to its net change per handle key (a chain I→U→D sends nothing, U(1→2) U(2→3) sends D1 +
I3, a net UPDATE that changes a unique key is split again), which is the TiDB-shaped transaction the
format and TiCDC's consumers expect; rows of a table without a handle key cannot be collapsed and
keep their binlog order. A transaction without a split UPDATE is sent in binlog order, which keeps
every key's order as well.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkcdc.sink.base import PartitionWriter, WriterContext
from sparkcdc.sink.kafka.config import MESSAGE_OVERHEAD, ROW_SEQ_HEADER
from sparkcdc.sink.kafka.encoders import MessageEncoder
from sparkcdc.sink.kafka.large_message import LargeMessageHandler
from sparkcdc.sink.kafka.producer import DeliveryTracker, get_producer

if TYPE_CHECKING:
    from sparkcdc.model import RowChange, TableInfo
    from sparkcdc.sink.kafka.sink import KafkaSink

_OP_ORDER = {"D": 0, "U": 1, "I": 2}

HOLD_BYTES = 64 << 20
"""Memory a writer of a later segment holds messages in while it waits for its turn
(``WriterContext.turn``); past it, it stops encoding until the turn comes, so a batch's memory
stays bounded."""
_HELD_OVERHEAD = 120
"""Bytes of Python objects per held message beside its key and value (its tuple, two bytes headers)."""

MAX_TXN_ROWS = 8192
"""Row changes of one transaction a writer holds at most: a larger transaction is sent in chunks of
this many, each collapsed per key and reordered DELETE < UPDATE < INSERT on its own when it holds a
split UPDATE, so a transaction of any size streams in bounded memory (the reorder of spec §7 is then
per chunk; the chunks follow each other in every partition, so each key's order still holds)."""


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
        "keyless",
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
        self.keyless = not table.handle_key_index
        """A table without a handle key: its messages carry ``ROW_SEQ_HEADER``."""
        self.encode_rows = None if encoder is None else encoder.rows_encoder(row, table)


_Run = tuple[list["RowChange"], "TableInfo", _TableRoute]
"""Consecutive row changes of one table in one transaction, as held by a writer (its own list)."""

_Message = tuple[str, int, "bytes | None", "bytes | None", "list[tuple[str, bytes]] | None"]
"""topic, partition, key, value, headers: a message held until its segment's turn."""


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
        self._seq: dict[tuple[str, int], int] = {}
        """(topic, partition) → the next ``ROW_SEQ_HEADER`` number in transaction ``_seq_ts``."""
        self._seq_ts: int | None = None
        self.turn = ctx.turn
        self._waiting: list[_Message] | None = None if self.turn is None or self.turn.ready() else []
        """Messages encoded before the segment's turn came, in order (None: the turn came)."""
        self._waiting_bytes = 0

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
        if self._waiting is not None and self.turn is not None and self.turn.ready():
            self._send_waiting()
        txn = self._txn
        if self._txn_split:
            # spec §7: once an UPDATE was split, the transaction is ordered DELETE < UPDATE < INSERT;
            # collapsed per key first, as that sort is only sound with one change per key
            txn = _net_changes(txn, self.sink.split)
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
        if self._waiting is not None and self._waiting_bytes >= HOLD_BYTES:
            self._send_waiting()

    def _send(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Produce one message, or hold it until the segment's turn."""
        if self._waiting is None:
            self.tracker.produce(topic, partition, key, value, headers)
            return
        self._waiting.append((topic, partition, key, value, headers))
        self._waiting_bytes += _HELD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)

    def _send_waiting(self) -> None:
        """Once the segment's turn came (waiting for it here): produce what was held, in order;
        later messages go straight out."""
        assert self.turn is not None and self._waiting is not None
        self.turn.wait()
        waiting = self._waiting
        self._waiting = None
        self._waiting_bytes = 0
        self.tracker.produce_all(waiting)

    def _row_seq(self, ts: int, topic: str, partition: int) -> list[tuple[str, bytes]]:
        """The ``ROW_SEQ_HEADER`` of the next message of a table without a handle key."""
        if ts != self._seq_ts:
            self._seq.clear()
            self._seq_ts = ts
        n = self._seq.get((topic, partition), 0)
        self._seq[(topic, partition)] = n + 1
        return [(ROW_SEQ_HEADER, b"%d" % n)]

    def _produce_run(self, rows: list[RowChange], table: TableInfo, tr: _TableRoute) -> None:
        """A run's messages encoded in one call, keyless, produced in order (or held in order
        until the segment's turn)."""
        assert tr.encode_rows is not None
        if tr.keyless:
            self._produce_rows(rows, table, tr, tr.encode_rows(rows))
            return
        values = tr.encode_rows(rows)
        limit = self.large.max_message_bytes - MESSAGE_OVERHEAD
        topic = tr.topic
        fixed = tr.fixed_partition
        out: list[tuple[str, int, bytes | None, bytes | None, list[tuple[str, bytes]] | None]] = []
        add = out.append
        nbytes = 0
        for row, value in zip(rows, values, strict=True):
            partition = fixed
            if partition is None:
                partition = tr.dispatcher.partition(row, table, tr.num_partitions)
            if len(value) <= limit:
                add((topic, partition, None, value, None))
                nbytes += len(value)
                continue
            for key, payload in self.large.check(self.encoder, row, table, [(None, value)]):
                add((topic, partition, key, payload, None))
                nbytes += (len(key) if key else 0) + (len(payload) if payload else 0)
        if self._waiting is None:
            self.tracker.produce_all(out)
        else:
            self._waiting += out
            self._waiting_bytes += _HELD_OVERHEAD * len(out) + nbytes

    def _produce_rows(
        self, rows: list[RowChange], table: TableInfo, tr: _TableRoute, values: list[bytes] | None = None
    ) -> None:
        """Row by row: for protocols without a run encoder (Avro: keyed messages), for a table
        without a handle key, whose messages each carry their ``ROW_SEQ_HEADER`` (``values``: the
        run encoder's, when the protocol has one)."""
        for i, row in enumerate(rows):
            partition = tr.fixed_partition
            if partition is None:
                partition = tr.dispatcher.partition(row, table, tr.num_partitions)
            messages: list[tuple[bytes | None, bytes | None]] = (
                [(None, values[i])] if values is not None else self.encoder.encode_row(row, table, tr.topic)
            )
            for key, payload in self.large.check(self.encoder, row, table, messages):
                headers = self._row_seq(row.commit_ts, tr.topic, partition) if tr.keyless else None
                self._send(tr.topic, partition, key, payload, headers)

    def close(self) -> dict[str, Any]:
        """Send the last transaction (after the segment's turn came), wait for every acknowledgement,
        report what was written."""
        if self._txn:
            self._flush_txn()
        if self._waiting is not None:
            self._send_waiting()
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
        self._waiting = None


def _op_of(row: RowChange) -> str:
    return row.op


def _net_changes(txn: list[_Run], split: _Splitter) -> list[_Run]:
    """The transaction as one net change per handle key, ordered DELETE < UPDATE < INSERT, regrouped into runs.

    Every held row is an INSERT, a DELETE or an UPDATE that keeps its handle key (the key-changing
    ones were split), so a key's net change follows from its first pre-image and its last
    post-image: absent before and after → nothing; absent before → INSERT; absent after → DELETE;
    else UPDATE (split again when it changes a unique key). Rows of a table without a handle key
    cannot be matched up: they go first, in binlog order, since sorting them by kind would reorder
    an INSERT and a DELETE of the same row.
    """
    keyless: list[_Item] = []
    ranked: list[_Item] = []
    first: dict[tuple[int, Any], int] = {}
    """(route, key) → position in ``ranked`` of the key's first row."""
    nets: dict[int, _NetChange] = {}
    """Position of a key's first row → its changes, for keys changed more than once."""
    for rows, table, tr in txn:
        key_index = table.handle_key_index
        if not key_index:
            keyless.extend((row, table, tr) for row in rows)
            continue
        route = id(tr)
        single = key_index[0] if len(key_index) == 1 else -1
        for row in rows:
            image = row.before if row.op == "D" else row.after
            assert image is not None
            key = (route, image[single] if single >= 0 else tuple(image[i] for i in key_index))
            at = first.setdefault(key, len(ranked))
            if at == len(ranked):
                ranked.append((row, table, tr))
                continue
            net = nets.get(at)
            if net is None:
                net = nets[at] = _NetChange(ranked[at][0], table, tr)
            net.add(row)
    items = ranked
    if nets:
        # a key changed more than once: its net change takes the place of its first row
        items = []
        for at, item in enumerate(ranked):
            net = nets.get(at)
            if net is None:
                items.append(item)
            else:
                items.extend((row, net.table, net.tr) for row in net.rows(split))
    items.sort(key=_op_rank)
    out: list[_Run] = []
    for row, table, tr in keyless + items:
        if out and out[-1][2] is tr:
            out[-1][0].append(row)
        else:
            out.append(([row], table, tr))
    return out


_Item = tuple["RowChange", "TableInfo", _TableRoute]

_Splitter = Callable[["RowChange", "TableInfo", tuple[int, ...]], "list[RowChange] | None"]
"""``KafkaSink.split``: the DELETE + INSERT of a key-changing UPDATE, else None."""


class _NetChange:
    """The changes of a key changed more than once in one transaction: its first pre-image and last row."""

    __slots__ = ("existed", "first_before", "last", "table", "tr")

    def __init__(self, row: RowChange, table: TableInfo, tr: _TableRoute) -> None:
        self.table = table
        self.tr = tr
        self.existed = row.op != "I"
        self.first_before = row.before
        self.last = row

    def add(self, row: RowChange) -> None:
        self.last = row

    def rows(self, split: _Splitter) -> list[RowChange]:
        """The net change: nothing, or one INSERT, DELETE or UPDATE (or the DELETE + INSERT of a split one)."""
        last = self.last
        after = None if last.op == "D" else last.after
        if not self.existed:
            return [] if after is None else [dataclasses.replace(last, op="I", before=None, after=after)]
        if after is None:
            return [dataclasses.replace(last, op="D", before=self.first_before, after=None)]
        update = dataclasses.replace(last, op="U", before=self.first_before, after=after)
        parts = split(update, self.table, self.tr.key_indexes)
        return [update] if parts is None else parts


def _op_rank(item: tuple[RowChange, TableInfo, _TableRoute]) -> int:
    return _OP_ORDER[item[0].op]
