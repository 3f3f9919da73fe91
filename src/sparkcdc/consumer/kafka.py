"""Replay canal-json (or avro) messages from Kafka into MySQL, like TiCDC's kafka-consumer.

``sparkcdc consumer --upstream-uri kafka://h:p/topic?protocol=canal-json --downstream-uri mysql://...``

``protocol=avro`` (alias ``flat-avro``) is replayed by ``AvroKafkaConsumer`` in
``sparkcdc.consumer.kafka_avro`` (see its docstring); ``kafka_consumer()`` picks
the class by protocol. Both run the poll/apply loop of
``sparkcdc.consumer.kafka_loop``. The rest of this docstring is about canal-json.

* Every partition of the topic is read. DML messages are buffered per
  partition; ``TIDB_WATERMARK`` messages (the changefeed needs
  ``enable-tidb-extension=true``) move each partition's watermark. Only changes
  up to W = the minimum watermark over all partitions are applied: every
  transaction ≤ W is complete, on every partition. DDLs (partition 0) are
  applied in commit order among the rows once W has passed them.
* Applied changes go through ``sparkcdc.sink.mysql.applier.MySQLApplier``
  (the same applier as the MySQL sink), sorted by commit_ts, each partition's
  order kept. Partitions of one transaction interleave in arrival order: that
  is enough because every change of a key goes to the key's partition, in the
  binlog's order (key-changing UPDATEs split, as the sink does by default) or
  as one net change per key (a transaction with a split UPDATE, see
  ``sparkcdc.sink.kafka.writer``), and the applier never moves a change of a
  key across another change of the same key.
* Progress: the applied watermark is stored in the downstream table
  ``<progress-schema>.sparkcdc_kafka_consumer_progress`` *before* the Kafka
  offsets are committed (consumer group ``group-id``, default
  ``sparkcdc-consumer-<topic>``). After a restart, messages with commit_ts ≤
  the applied watermark are replays and are dropped; rows up to the watermark
  an interrupted round was applying are applied in safe mode (REPLACE), so a
  crash at any point neither loses nor doubles a change. Within a partition a
  row at or below a watermark the partition carried before it, or below the
  largest commit_ts seen, is a re-sent batch and is dropped too (TiCDC's
  "commit ts fallback"). The re-sent copy of a partition's last transaction
  before any watermark followed it (a crash between the sink's send and its
  watermark) is applied again, which is idempotent for tables with a primary or
  NOT NULL unique key; a table without one has its messages numbered within
  their transaction and partition (the ``sparkcdc-row-seq`` header,
  ``sink.kafka.config.ROW_SEQ_HEADER``), and a number that is not larger than
  the last one of the same transaction is a copy and is dropped.
* Large messages: a ``claimCheckLocation`` reference is resolved by reading the
  full message from ``claim-check-storage-uri`` ([sink.kafka-config.large-message-handle]
  in ``--config``). An ``onlyHandleKey`` INSERT/UPDATE cannot be restored: TiCDC's
  consumer re-reads such rows from the upstream with ``tidb_snapshot``, which
  MySQL/MariaDB do not have, so the consumer stops with a clear error (a DELETE
  needs only the key and is applied).

The upstream URI takes the Kafka sink's connection parameters (TLS, SASL,
timeouts) plus ``group-id``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.codec.canal_json import CanalMessage, canal_message_to_row_change, decode_canal_json
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.kafka_loop import (
    CONSUMER_PARAMS,
    DEFAULT_PROGRESS_SCHEMA,
    REPLAYED_PROTOCOLS,
    ConsumerStats,
    KafkaConsumerBase,
    Pair,
    split_consumer_params,
)
from sparkcdc.consumer.progress import ProgressTable
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.kafka.config import ROW_SEQ_HEADER, KafkaOptions
from sparkcdc.sink.kafka.large_message import parse_claim_check_body

log = logging.getLogger(__name__)

PROGRESS_TABLE = "sparkcdc_kafka_consumer_progress"
PROGRESS_COLUMNS = (
    "consumer_id VARCHAR(32) NOT NULL PRIMARY KEY, topic VARCHAR(255) NOT NULL, "
    "group_id VARCHAR(255) NOT NULL, applied_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, "
    "applying_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, "
    "updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)"
)


@dataclass
class _Pending:
    commit_ts: int
    order: int
    partition: int
    msg: CanalMessage


@dataclass
class _PartitionState:
    watermark: int | None = None
    rows: list[_Pending] = field(default_factory=list)
    marks: list[tuple[int, int]] = field(default_factory=list)
    """(watermark ts, offset after that watermark message), oldest first."""
    at_end: bool = False
    max_ts: int = 0
    """The largest row commit_ts seen: a smaller one is a replay of a retried batch."""
    seq: tuple[int, int] = (0, -1)
    """(commit_ts, ``ROW_SEQ_HEADER``) of the last message of a table without a handle key: one of
    the same transaction whose number is not larger is a copy of a re-sent batch."""


def _row_seq(m: Any) -> int | None:
    """A message's ``ROW_SEQ_HEADER`` (only tables without a handle key have one)."""
    headers = m.headers()
    if not headers:
        return None
    for k, v in headers:
        if k == ROW_SEQ_HEADER and v is not None:
            return int(v)
    return None


class KafkaConsumer(KafkaConsumerBase[_PartitionState]):
    """Applies one topic's canal-json messages to a downstream MySQL."""

    PROTOCOLS: tuple[str, ...] = ("canal-json",)

    def __init__(
        self,
        upstream_uri: str,
        downstream_uri: str,
        config: ReplicaConfig | None = None,
        *,
        progress_schema: str = DEFAULT_PROGRESS_SCHEMA,
        group_id: str | None = None,
    ) -> None:
        super().__init__(
            upstream_uri, downstream_uri, config, progress_schema=progress_schema, group_id=group_id
        )
        self._progress = ProgressTable(self.progress_schema, PROGRESS_TABLE, PROGRESS_COLUMNS)
        self._applied = 0
        """The watermark applied downstream: changes at or below it are replays."""
        self._applying = 0
        """The watermark an interrupted round was applying (its rows are applied in safe mode)."""
        self._ddls: dict[tuple[int, str], _Pending] = {}
        self._order = 0

    # --- the loop's steps (KafkaConsumerBase.run) ----------------------------------------------------

    def _start(self) -> tuple[Any, dict[int, _PartitionState]]:
        self._applied, self._applying = self._load_progress()
        self.stats.watermark = self._applied
        consumer, partitions = self._open()
        self._ddls = {}
        self._order = 0
        return consumer, {p: _PartitionState() for p in partitions}

    def _stop_at_timeout(self) -> None:
        log.warning("Kafka consumer stops at its timeout with watermark %d", self._applied)

    def _message(self, m: Any, st: _PartitionState, out: list[Pair]) -> None:
        value = m.value()
        if value is None:
            return
        msg = decode_canal_json(value)
        if msg.kind == "watermark":
            wm = msg.watermark_ts or 0
            if st.watermark is None or wm > st.watermark:
                st.watermark = wm
            st.marks.append((wm, m.offset() + 1))
            return
        ts = msg.commit_ts
        p = m.partition()
        if ts is None:
            raise DecodeError(
                f"a canal-json {msg.type} message on {self.topic}[{p}]@{m.offset()} has no _tidb.commitTs: "
                "the changefeed must use enable-tidb-extension=true for the consumer to order and "
                "deduplicate changes"
            )
        if ts <= self._applied or (st.watermark is not None and ts <= st.watermark):
            # At or below a watermark this partition already carried: the sink had sent every change
            # up to it, so this is a replay (a batch run again after a restart), also when the
            # watermark is not applied yet.
            self.stats.rows_dropped += 1
            return
        self._order += 1
        if msg.kind == "ddl":
            self._ddls.setdefault((ts, msg.sql), _Pending(ts, self._order, p, msg))
            return
        if ts < st.max_ts:
            # commit_ts fell back: the sink re-sent a batch after a failure (at-least-once);
            # the partition already delivered these rows in order
            self.stats.rows_dropped += 1
            return
        seq = _row_seq(m)
        if seq is not None:
            if (ts, seq) <= st.seq:
                # a table without a handle key: the same message of the same transaction again
                self.stats.rows_dropped += 1
                return
            st.seq = (ts, seq)
        st.max_ts = ts
        st.rows.append(_Pending(ts, self._order, p, msg))

    def _after_poll(self, consumer: Any, state: dict[int, _PartitionState]) -> None:
        marks = [s.watermark for s in state.values()]
        if all(w is not None for w in marks):
            w = min(w for w in marks if w is not None)
            if w > self._applied:
                self._apply_round(w, state, self._ddls, replicating_ts=self._applying)
                self._applied = w
                self.stats.watermark = w
                self._commit_offsets(consumer, state, w)

    def _finish(self, state: dict[int, _PartitionState]) -> None:
        self.stats.rows_pending = sum(len(s.rows) for s in state.values()) + len(self._ddls)
        if self.stats.rows_pending and any(s.watermark is None for s in state.values()):
            log.warning(
                "%d change(s) wait: partitions %s of %s have no TIDB_WATERMARK yet and nothing is applied before "
                "every partition has one (does the changefeed use enable-tidb-extension=true?)",
                self.stats.rows_pending,
                [p for p, s in state.items() if s.watermark is None],
                self.topic,
            )

    def _apply_round(
        self,
        w: int,
        state: dict[int, _PartitionState],
        ddls: dict[tuple[int, str], _Pending],
        replicating_ts: int,
    ) -> None:
        events: list[_Pending] = []
        for st in state.values():
            keep: list[_Pending] = []
            for r in st.rows:
                (events if r.commit_ts <= w else keep).append(r)
            st.rows = keep
        ddl_events = [d for d in ddls.values() if d.commit_ts <= w]
        for d in ddl_events:
            del ddls[(d.commit_ts, d.msg.sql)]
        # DDL before the rows of later transactions; each partition's order kept within a commit_ts
        merged = sorted(
            [(d.commit_ts, 0, d.order, d) for d in ddl_events]
            + [(r.commit_ts, 1, r.order, r) for r in events],
            key=lambda t: (t[0], t[1], t[2]),
        )
        self._save_progress(applied=self.stats.watermark, applying=w)
        pending_rows: list[tuple[RowChange, TableInfo]] = []
        for _, is_row, _, item in merged:
            if not is_row:
                if pending_rows:
                    self._apply_rows(pending_rows, replicating_ts)
                    pending_rows = []
                self._apply_ddl(item.msg)
                continue
            pending_rows.append(self._row(item.msg))
        if pending_rows:
            self._apply_rows(pending_rows, replicating_ts)
        self._save_progress(applied=w, applying=w)
        self.stats.rounds += 1
        log.info(
            "Kafka consumer applied up to watermark %d (%d DDL, %d rows)", w, len(ddl_events), len(events)
        )

    def _apply_ddl(self, msg: CanalMessage) -> None:
        self.applier.apply_ddl(msg.database or None, msg.sql)
        self.stats.ddls += 1
        # any table of the schema may have changed shape (renames, drops): reload lazily
        for key in [k for k in self._tables if k[0] == msg.database]:
            del self._tables[key]

    def _commit_offsets(self, consumer: Any, state: dict[int, _PartitionState], w: int) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        offsets = []
        for p, st in state.items():
            best = None
            keep: list[tuple[int, int]] = []
            for wm, off in st.marks:
                if wm <= w:
                    best = off
                else:
                    keep.append((wm, off))
            st.marks = keep
            if best is not None:
                offsets.append(TopicPartition(self.topic, p, best))
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                # the downstream progress already holds the watermark: a replay is dropped on restart
                log.warning("committing Kafka offsets failed (%s); replays will be deduplicated", exc)

    # --- rows ----------------------------------------------------------------------------------------

    def _full_message(self, msg: CanalMessage) -> CanalMessage:
        if msg.claim_check_location:
            if self.claim_check is None:
                raise ConfigError(
                    f"message of {msg.database}.{msg.table} refers to claim-check object "
                    f"{msg.claim_check_location!r}, but no claim-check-storage-uri is configured: pass --config "
                    "with [sink.kafka-config.large-message-handle] claim-check-storage-uri"
                )
            _, value = parse_claim_check_body(
                self.claim_check.read(msg.claim_check_location), self.claim_check_raw
            )
            if value is None:
                raise DecodeError(f"claim-check object {msg.claim_check_location!r} has no value")
            self.stats.claim_checks += 1
            return decode_canal_json(value)
        if msg.only_handle_key and msg.type != "DELETE":
            raise DecodeError(
                f"an {msg.type} of {msg.database}.{msg.table} at commit_ts {msg.commit_ts} carries only its handle "
                "key (large-message-handle-option=handle-key-only); TiCDC's consumer re-reads such rows from the "
                "upstream with tidb_snapshot, which MySQL/MariaDB lack, so it cannot be replayed: use "
                "large-message-handle-option=claim-check or a larger max-message-bytes"
            )
        return msg

    def _row(self, msg: CanalMessage) -> tuple[RowChange, TableInfo]:
        msg = self._full_message(msg)
        info = self._table(msg.database, msg.table)
        return canal_message_to_row_change(msg, info), info

    # --- progress ----------------------------------------------------------------------------------

    def _load_progress(self) -> tuple[int, int]:
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT applied_ts, applying_ts FROM {self._progress.name} WHERE consumer_id=%s",
                (self.consumer_id,),
            )
            row = cur.fetchone()
        conn.commit()
        if row is None:
            return 0, 0
        return int(row[0]), int(row[1])

    def _save_progress(self, applied: int, applying: int) -> None:
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self._progress.name} (consumer_id, topic, group_id, applied_ts, applying_ts) "
                "VALUES (%s,%s,%s,%s,%s) ON DUPLICATE KEY UPDATE applied_ts=VALUES(applied_ts), "
                "applying_ts=VALUES(applying_ts)",
                (self.consumer_id, self.topic, self.group_id, applied, applying),
            )
        conn.commit()


def run_kafka_consumer(
    upstream_uri: str,
    downstream_uri: str,
    config: ReplicaConfig | None = None,
    once: bool = False,
    timeout: float | None = None,
    *,
    progress_schema: str = DEFAULT_PROGRESS_SCHEMA,
    stop: threading.Event | None = None,
) -> ConsumerStats:
    """Replay a topic into MySQL; with ``once``, stop when every partition is read to its end."""
    with kafka_consumer(upstream_uri, downstream_uri, config, progress_schema=progress_schema) as consumer:
        return consumer.run(once=once, timeout=timeout, stop=stop)


def kafka_consumer(
    upstream_uri: str,
    downstream_uri: str,
    config: ReplicaConfig | None = None,
    *,
    progress_schema: str = DEFAULT_PROGRESS_SCHEMA,
    group_id: str | None = None,
) -> KafkaConsumerBase[Any]:
    """The consumer for the upstream URI's protocol: KafkaConsumer (canal-json) or AvroKafkaConsumer (avro)."""
    sink_uri, _ = split_consumer_params(upstream_uri)
    options = KafkaOptions.parse(sink_uri, config or ReplicaConfig(), "consumer", consumer=True)
    cls: type[KafkaConsumerBase[Any]] = KafkaConsumer
    if options.protocol == "avro":
        from sparkcdc.consumer.kafka_avro import AvroKafkaConsumer

        cls = AvroKafkaConsumer
    return cls(upstream_uri, downstream_uri, config, progress_schema=progress_schema, group_id=group_id)


def main(args: argparse.Namespace) -> int:
    """``sparkcdc consumer`` for kafka:// upstreams (args: upstream_uri, downstream_uri, config, once)."""
    config = ReplicaConfig.from_file(args.config) if getattr(args, "config", None) else ReplicaConfig()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    stats = run_kafka_consumer(
        args.upstream_uri,
        args.downstream_uri,
        config,
        once=bool(getattr(args, "once", False)),
        progress_schema=getattr(args, "progress_schema", None) or DEFAULT_PROGRESS_SCHEMA,
        stop=stop,
    )
    if stats.protocol == "avro":
        print(
            f"applied {stats.rows} rows from {stats.messages} messages ({stats.rows_dropped} replays dropped, "
            f"{stats.rows_pending} deletes held for the partition's next row)"
        )
        return 0
    print(
        f"watermark {stats.watermark}: applied {stats.ddls} DDL and {stats.rows} rows from {stats.messages} "
        f"messages ({stats.rows_dropped} replays dropped, {stats.rows_pending} waiting for a watermark)"
    )
    return 0


run_from_args = main
"""The name ``sparkcdc consumer`` (cli/cmd_consumer.py) calls."""


__all__ = [
    "CONSUMER_PARAMS",
    "DEFAULT_PROGRESS_SCHEMA",
    "PROGRESS_TABLE",
    "REPLAYED_PROTOCOLS",
    "ConsumerStats",
    "KafkaConsumer",
    "kafka_consumer",
    "main",
    "run_from_args",
    "run_kafka_consumer",
]
