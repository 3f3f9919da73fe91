"""What the Kafka consumers share: the Kafka connection, the downstream applier and the poll/apply loop.

``KafkaConsumerBase.run`` is the one loop: it polls every partition of the
topic, hands each message to the protocol's consumer (``kafka.KafkaConsumer``
for canal-json, ``kafka_avro.AvroKafkaConsumer`` for avro), applies the rows the
protocol released during the poll, and lets the protocol apply and commit what
its progress rules allow. The protocol modules import this one, never each other.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Self, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import ConfigError, DecodeError, SinkUnavailable
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.kafka.config import KafkaOptions
from sparkcdc.sink.kafka.large_message import ClaimCheckStorage

log = logging.getLogger(__name__)

DEFAULT_PROGRESS_SCHEMA = "sparkcdc_consumer"
CONSUMER_PARAMS = ("group-id",)
REPLAYED_PROTOCOLS = ("canal-json", "avro")

Pair = tuple[RowChange, TableInfo]


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


class PartitionProgress(Protocol):
    """The per-partition state a protocol keeps; the loop reads and sets ``at_end``."""

    at_end: bool


StateT = TypeVar("StateT", bound=PartitionProgress)


def split_consumer_params(uri: str) -> tuple[str, dict[str, str]]:
    """The Kafka sink URI without the consumer's own parameters (``group-id``), and those parameters."""
    parts = urlsplit(uri)
    own: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k in CONSUMER_PARAMS:
            own[k] = v
        else:
            rest.append((k, v))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)), own


class KafkaConsumerBase(ABC, Generic[StateT]):
    """Replays one topic into a downstream MySQL; a subclass per protocol decodes, buffers and commits."""

    PROTOCOLS: tuple[str, ...] = ()
    """The protocols a subclass replays."""

    def __init__(
        self,
        upstream_uri: str,
        downstream_uri: str,
        config: ReplicaConfig | None = None,
        *,
        progress_schema: str = DEFAULT_PROGRESS_SCHEMA,
        group_id: str | None = None,
    ) -> None:
        from sparkcdc.consumer.downstream import downstream_settings
        from sparkcdc.sink.mysql.applier import MySQLApplier

        self.config = config or ReplicaConfig()
        sink_uri, own = split_consumer_params(upstream_uri)
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
        settings = downstream_settings(downstream_uri)
        self.applier = MySQLApplier(
            settings.conn,
            safe_mode=settings.safe_mode,
            max_txn_row=settings.max_txn_row,
            split_txn=settings.transaction_atomicity != "table",
        )
        self._tables: dict[tuple[str, str], TableInfo] = {}
        self._consumer: Any = None
        self.topic_empty = False
        """Whether every partition of the topic was empty when the consumer opened it."""
        self.stats = ConsumerStats()

    # --- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> Self:
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
        self.topic_empty = True
        for p in partitions:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=max(self.options.read_timeout, 5.0)
                )
            except KafkaException:
                self.topic_empty = False  # unknown: the poll loop finds out
                break
            if high > low:
                self.topic_empty = False
                break
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
        """Consume and apply until ``stop`` (or, with ``once``, until every partition was read to its end once)."""
        from confluent_kafka import KafkaError

        stop = stop or threading.Event()
        consumer, state = self._start()
        if once and self.topic_empty:
            raise ConfigError(
                f"Kafka topic {self.topic!r} on {self.options.bootstrap_servers} holds no messages, so "
                "--once has nothing to apply; check the topic in --upstream-uri (the changefeed's sink topic)"
            )
        if self.topic_empty:
            log.warning(
                "Kafka topic %s on %s holds no messages yet; waiting for the changefeed to write some "
                "(is its sink topic this one?)",
                self.topic,
                self.options.bootstrap_servers,
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        ended: set[int] = set()

        def reached_end(partition: int, out: list[Pair]) -> None:
            st = state[partition]
            st.at_end = True
            ended.add(partition)
            self._partition_end(st, out)

        while not stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                self._stop_at_timeout()
                break
            batch = consumer.consume(num_messages=2000, timeout=poll_interval)
            out: list[Pair] = []
            read: set[int] = set()
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        reached_end(m.partition(), out)
                        continue
                    if err.fatal() or not err.retriable():
                        raise SinkUnavailable(f"Kafka consumer error on {self.topic}: {err.str()}")
                    log.warning("Kafka consumer error on %s: %s", self.topic, err.str())
                    continue
                st = state[m.partition()]
                st.at_end = False
                read.add(m.partition())
                self.stats.messages += 1
                self._message(m, st, out)
            # librdkafka signals a partition's end only after a fetch that came back empty; under a
            # steady stream of messages (a changefeed's watermarks) no fetch is empty, so a partition
            # whose read position reached the end offset of its latest fetch is at its end too
            for p in self._caught_up(consumer, read):
                reached_end(p, out)
            if out:
                self._apply_rows(out, 0)
            self._after_poll(consumer, state)
            # every partition was read to its end at least once: a topic a live changefeed keeps
            # writing (watermarks every second) has no empty poll and no moment when all partitions
            # are at their end together; what arrived since stays for the next run (offsets are
            # committed only up to the applied watermark)
            if once and len(ended) == len(state):
                break
        self._finish(state)
        return self.stats

    def _caught_up(self, consumer: Any, partitions: set[int]) -> list[int]:
        """Those of ``partitions`` whose position reached the end offset their latest fetch reported
        (the last stable offset, as the consumer reads committed messages only)."""
        from confluent_kafka import TopicPartition

        if not partitions:
            return []
        done = []
        for tp in consumer.position([TopicPartition(self.topic, p) for p in sorted(partitions)]):
            _, high = consumer.get_watermark_offsets(tp, cached=True)
            if tp.offset >= 0 and high >= 0 and tp.offset >= high:
                done.append(tp.partition)
        return done

    @abstractmethod
    def _start(self) -> tuple[Any, dict[int, StateT]]:
        """Load the stored progress, open the consumer (``_open``) and give each partition its state."""

    @abstractmethod
    def _message(self, m: Any, st: StateT, out: list[Pair]) -> None:
        """Take one message of a partition: buffer it, or append the rows it releases to ``out``."""

    def _partition_end(self, st: StateT, out: list[Pair]) -> None:
        """A partition is read to its end (rows released now go to ``out``)."""

    @abstractmethod
    def _after_poll(self, consumer: Any, state: dict[int, StateT]) -> None:
        """After a poll's rows are applied: apply what the progress rules allow, save progress, commit offsets."""

    @abstractmethod
    def _finish(self, state: dict[int, StateT]) -> None:
        """The run ends: count what is left in ``self.stats``."""

    @abstractmethod
    def _stop_at_timeout(self) -> None:
        """Say that the run stops at its timeout."""

    # --- downstream -------------------------------------------------------------------------------

    def _apply_rows(self, rows: list[Pair], replicating_ts: int) -> None:
        self.applier.apply_rows(rows, replicating_ts=replicating_ts or None)
        self.stats.rows += len(rows)

    def _table(self, schema: str, table: str) -> TableInfo:
        key = (schema, table)
        info = self._tables.get(key)
        if info is None:
            from sparkcdc.consumer.downstream import downstream_table

            info = downstream_table(self.applier, schema, table)
            if info is None:
                raise DecodeError(f"downstream table {schema}.{table} does not exist")
            self._tables[key] = info
        return info
