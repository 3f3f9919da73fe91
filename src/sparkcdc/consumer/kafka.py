"""Replay canal-json (or avro) messages from Kafka into MySQL, like TiCDC's kafka-consumer.

``sparkcdc consumer --upstream-uri kafka://h:p/topic?protocol=canal-json --downstream-uri mysql://...``

``protocol=avro`` (alias ``flat-avro``) is replayed by ``AvroKafkaConsumer`` in
``sparkcdc.consumer.kafka_avro`` (see its docstring); ``kafka_consumer()`` picks
the class by protocol. The rest of this docstring is about canal-json.

* Every partition of the topic is read. DML messages are buffered per
  partition; ``TIDB_WATERMARK`` messages (the changefeed needs
  ``enable-tidb-extension=true``) move each partition's watermark. Only changes
  up to W = the minimum watermark over all partitions are applied: every
  transaction ≤ W is complete, on every partition. DDLs (partition 0) are
  applied in commit order among the rows once W has passed them.
* Applied changes go through ``sparkcdc.sink.mysql.applier.MySQLApplier``
  (the same applier as the MySQL sink), sorted by commit_ts, each partition's
  order kept.
* Progress: the applied watermark is stored in the downstream table
  ``<progress-schema>.sparkcdc_kafka_consumer_progress`` *before* the Kafka
  offsets are committed (consumer group ``group-id``, default
  ``sparkcdc-consumer-<topic>``). After a restart, messages with commit_ts ≤
  the applied watermark are replays and are dropped; rows up to the watermark
  an interrupted round was applying are applied in safe mode (REPLACE), so a
  crash at any point neither loses nor doubles a change. Within a partition a
  row whose commit_ts is below the largest one seen is a re-sent batch and is
  dropped too (TiCDC's "commit ts fallback"); the re-sent copy of a partition's
  last transaction cannot be told apart and is applied again, which is
  idempotent for tables with a primary or NOT NULL unique key.
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
import hashlib
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sparkcdc.codec.canal_json import CanalMessage, canal_message_to_row_change, decode_canal_json
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import ConfigError, DecodeError, SinkUnavailable
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.kafka.large_message import ClaimCheckStorage, parse_claim_check_body
from sparkcdc.sink.kafka.options import KafkaOptions

log = logging.getLogger(__name__)

PROGRESS_TABLE = "sparkcdc_kafka_consumer_progress"
DEFAULT_PROGRESS_SCHEMA = "sparkcdc_consumer"
CONSUMER_PARAMS = ("group-id",)
REPLAYED_PROTOCOLS = ("canal-json", "avro")


@dataclass
class ConsumerStats:
    """What a run did."""

    watermark: int = 0
    rows: int = 0
    ddls: int = 0
    rows_dropped: int = 0
    messages: int = 0
    rounds: int = 0
    rows_pending: int = 0
    claim_checks: int = 0
    protocol: str = "canal-json"


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


def _split_consumer_params(uri: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(uri)
    own: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k in CONSUMER_PARAMS:
            own[k] = v
        else:
            rest.append((k, v))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)), own


class KafkaConsumer:
    """Applies one topic's canal-json messages to a downstream MySQL."""

    PROTOCOLS: tuple[str, ...] = ("canal-json",)
    """The protocols this class replays (the avro subclass has its own)."""

    def __init__(
        self,
        upstream_uri: str,
        downstream_uri: str,
        config: ReplicaConfig | None = None,
        *,
        progress_schema: str = DEFAULT_PROGRESS_SCHEMA,
        group_id: str | None = None,
    ) -> None:
        from sparkcdc.sink.mysql.applier import MySQLApplier
        from sparkcdc.sink.mysql.config import parse_mysql_sink

        self.config = config or ReplicaConfig()
        sink_uri, own = _split_consumer_params(upstream_uri)
        self.options = KafkaOptions.parse(sink_uri, self.config, "consumer", consumer=True)
        if self.options.protocol not in self.PROTOCOLS:
            if self.options.protocol in REPLAYED_PROTOCOLS:
                raise ConfigError(
                    f"{type(self).__name__} replays {', '.join(self.PROTOCOLS)}, got protocol "
                    f"{self.options.protocol!r} in {redact_uri(upstream_uri)!r}; open the consumer with "
                    "sparkcdc.consumer.kafka.kafka_consumer(), which picks the class by protocol"
                )
            raise ConfigError(
                f"the Kafka consumer replays {' and '.join(REPLAYED_PROTOCOLS)} only, got protocol "
                f"{self.options.protocol!r} in {redact_uri(upstream_uri)!r}; use protocol=canal-json "
                "(or protocol=avro with schema-registry=http://...)"
            )
        self.topic = self.options.topic
        self.group_id = group_id or own.get("group-id") or f"sparkcdc-consumer-{self.topic}"
        self.consumer_id = hashlib.sha1(
            f"{self.options.bootstrap_servers}/{self.topic}/{self.group_id}".encode()
        ).hexdigest()[:16]
        if not progress_schema or "`" in progress_schema:
            raise ConfigError(f"invalid progress schema name {progress_schema!r}")
        self.progress_schema = progress_schema
        lm = self.config.sink.kafka_config.large_message_handle
        self.claim_check = (
            ClaimCheckStorage(lm.claim_check_storage_uri) if lm.claim_check_storage_uri else None
        )
        self.claim_check_raw = lm.claim_check_raw_value
        settings = parse_mysql_sink(downstream_uri, ReplicaConfig())
        self.applier = MySQLApplier(
            settings.conn,
            safe_mode=settings.safe_mode,
            max_txn_row=settings.max_txn_row,
            split_txn=settings.transaction_atomicity != "table",
        )
        self._tables: dict[tuple[str, str], TableInfo] = {}
        self._consumer: Any = None
        self._progress_ready = False
        self.stats = ConsumerStats()

    # --- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the Kafka consumer and the downstream connection."""
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None
        self.applier.close()

    def _open(self, floor: dict[int, int] | None = None) -> tuple[Any, list[int]]:
        """Assign every partition at its committed offset (or at ``floor[p]`` when that is further)."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        conf = self.options.common_config()
        conf.update(
            {
                "group.id": self.group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
        consumer = Consumer(conf)
        try:
            md = consumer.list_topics(self.topic, timeout=max(self.options.read_timeout, 5.0))
        except KafkaException as exc:
            consumer.close()
            raise SinkUnavailable(
                f"cannot reach Kafka {self.options.bootstrap_servers}: {exc.args[0] if exc.args else exc}"
            ) from exc
        tmd = md.topics.get(self.topic)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            consumer.close()
            raise ConfigError(
                f"Kafka topic {self.topic!r} does not exist on {self.options.bootstrap_servers}; "
                "check the topic in --upstream-uri"
            )
        partitions = sorted(tmd.partitions)
        committed = consumer.committed([TopicPartition(self.topic, p) for p in partitions], timeout=10)
        start = []
        for tp in committed:
            # OFFSET_INVALID (no commit yet) → from the beginning
            offset = tp.offset if tp.offset is not None and tp.offset >= 0 else -2
            further = (floor or {}).get(tp.partition, -1)
            if further >= 0 and further > offset:
                offset = further
            start.append(TopicPartition(self.topic, tp.partition, offset))
        consumer.assign(start)
        self._consumer = consumer
        return consumer, partitions

    # --- the loop -----------------------------------------------------------------------------------

    def run(
        self,
        *,
        once: bool = False,
        timeout: float | None = None,
        stop: threading.Event | None = None,
        poll_interval: float = 0.5,
    ) -> ConsumerStats:
        """Consume and apply until ``stop`` (or, with ``once``, until every partition is read to its end)."""
        stop = stop or threading.Event()
        applied, applying = self._load_progress()
        self.stats.watermark = applied
        consumer, partitions = self._open()
        state = {p: _PartitionState() for p in partitions}
        ddls: dict[tuple[int, str], _Pending] = {}
        order = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        from confluent_kafka import KafkaError

        while not stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                log.warning("Kafka consumer stops at its timeout with watermark %d", applied)
                break
            batch = consumer.consume(num_messages=2000, timeout=poll_interval)
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        state[m.partition()].at_end = True
                        continue
                    if err.fatal() or not err.retriable():
                        raise SinkUnavailable(f"Kafka consumer error on {self.topic}: {err.str()}")
                    log.warning("Kafka consumer error on %s: %s", self.topic, err.str())
                    continue
                p = m.partition()
                st = state[p]
                st.at_end = False
                self.stats.messages += 1
                value = m.value()
                if value is None:
                    continue
                msg = decode_canal_json(value)
                if msg.kind == "watermark":
                    wm = msg.watermark_ts or 0
                    if st.watermark is None or wm > st.watermark:
                        st.watermark = wm
                    st.marks.append((wm, m.offset() + 1))
                    continue
                ts = msg.commit_ts
                if ts is None:
                    raise DecodeError(
                        f"a canal-json {msg.type} message on {self.topic}[{p}]@{m.offset()} has no _tidb.commitTs: "
                        "the changefeed must use enable-tidb-extension=true for the consumer to order and "
                        "deduplicate changes"
                    )
                if ts <= applied:
                    self.stats.rows_dropped += 1
                    continue
                order += 1
                if msg.kind == "ddl":
                    ddls.setdefault((ts, msg.sql), _Pending(ts, order, p, msg))
                    continue
                if ts < st.max_ts:
                    # commit_ts fell back: the sink re-sent a batch after a failure (at-least-once);
                    # the partition already delivered these rows in order
                    self.stats.rows_dropped += 1
                    continue
                st.max_ts = ts
                st.rows.append(_Pending(ts, order, p, msg))
            marks = [s.watermark for s in state.values()]
            if all(w is not None for w in marks):
                w = min(w for w in marks if w is not None)
                if w > applied:
                    self._apply_round(w, state, ddls, replicating_ts=applying)
                    applied = w
                    self.stats.watermark = w
                    self._commit_offsets(consumer, state, w)
            if once and all(s.at_end for s in state.values()) and not batch:
                break
        self.stats.rows_pending = sum(len(s.rows) for s in state.values()) + len(ddls)
        if self.stats.rows_pending and any(s.watermark is None for s in state.values()):
            log.warning(
                "%d change(s) wait: partitions %s of %s have no TIDB_WATERMARK yet and nothing is applied before "
                "every partition has one (does the changefeed use enable-tidb-extension=true?)",
                self.stats.rows_pending,
                [p for p, s in state.items() if s.watermark is None],
                self.topic,
            )
        return self.stats

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

    def _apply_rows(self, rows: list[tuple[RowChange, TableInfo]], replicating_ts: int) -> None:
        self.applier.apply_rows(rows, replicating_ts=replicating_ts or None)
        self.stats.rows += len(rows)

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

    def _table(self, schema: str, table: str) -> TableInfo:
        key = (schema, table)
        info = self._tables.get(key)
        if info is None:
            from sparkcdc.capture.catalog import parse_create_table
            from sparkcdc.sink.mysql.statements import quote_ident_raw

            conn = self.applier.connection()
            with conn.cursor() as cur:
                cur.execute(f"SHOW CREATE TABLE {quote_ident_raw(schema)}.{quote_ident_raw(table)}")
                row = cur.fetchone()
            conn.commit()
            if row is None:
                raise DecodeError(f"downstream table {schema}.{table} does not exist")
            info = parse_create_table(row[1], schema)
            self._tables[key] = info
        return info

    # --- progress ----------------------------------------------------------------------------------

    def _progress_table(self) -> str:
        from sparkcdc.sink.mysql.statements import quote_ident_raw

        return f"{quote_ident_raw(self.progress_schema)}.{quote_ident_raw(PROGRESS_TABLE)}"

    def _progress_conn(self) -> Any:
        from sparkcdc.sink.mysql.statements import quote_ident_raw

        conn = self.applier.connection()
        if not self._progress_ready:
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE IF NOT EXISTS " + quote_ident_raw(self.progress_schema))
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._progress_table()} ("
                    "consumer_id VARCHAR(32) NOT NULL PRIMARY KEY, topic VARCHAR(255) NOT NULL, "
                    "group_id VARCHAR(255) NOT NULL, applied_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, "
                    "applying_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, "
                    "updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3))"
                )
            conn.commit()
            self._progress_ready = True
        return conn

    def _load_progress(self) -> tuple[int, int]:
        conn = self._progress_conn()
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT applied_ts, applying_ts FROM {self._progress_table()} WHERE consumer_id=%s",
                (self.consumer_id,),
            )
            row = cur.fetchone()
        conn.commit()
        if row is None:
            return 0, 0
        return int(row[0]), int(row[1])

    def _save_progress(self, applied: int, applying: int) -> None:
        conn = self._progress_conn()
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self._progress_table()} (consumer_id, topic, group_id, applied_ts, applying_ts) "
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
) -> KafkaConsumer:
    """The consumer for the upstream URI's protocol: KafkaConsumer (canal-json) or AvroKafkaConsumer (avro)."""
    sink_uri, _ = _split_consumer_params(upstream_uri)
    options = KafkaOptions.parse(sink_uri, config or ReplicaConfig(), "consumer", consumer=True)
    cls: type[KafkaConsumer] = KafkaConsumer
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
