"""The Kafka sink: TiCDC's MQ sink on librdkafka (``kafka[+ssl]://h1:p1,h2:p2/topic?protocol=...``).

Per micro-batch (see ``sparkcdc.sink.base``):

* ``route()`` sends every row to the writer group that owns its Kafka
  (topic, partition), so one producer writes each partition, in commit order;
* writers split key-changing UPDATEs (spec §7), encode, apply the large-message
  rules, produce with delivery tracking and, in ``close()``, wait until the
  broker acknowledged every message (or raise, so the batch is retried and the
  checkpoint does not move);
* ``apply_ddl()`` sends the DDL message (canal-json: partition 0 of the table's
  topic) and waits for it;
* ``commit()`` broadcasts the watermark (canal-json with
  ``enable-tidb-extension``: ``TIDB_WATERMARK``) to every partition of every
  topic in use plus the default topic. Published watermarks never go backwards:
  before its first one the sink reads back the newest watermark in the default
  topic (``watermark.py``) and it never sends one that is not larger, so a
  changefeed resumed from an older position re-sends rows but not older marks.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING, Any

from sparkcdc.dispatch.router import EventRouter
from sparkcdc.sink.base import PartitionWriter, Sink, SinkCapabilities, WriterContext, mark_every_s
from sparkcdc.sink.kafka.config import DEFAULT_PARTITION_NUM, KafkaOptions
from sparkcdc.sink.kafka.encoders import MessageEncoder, build_encoder, validate_protocol
from sparkcdc.sink.kafka.producer import DeliveryTracker, get_producer
from sparkcdc.sink.kafka.writer import KafkaPartitionWriter, _TableRoute, writer_group

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.model import DDLEvent, RowChange, TableInfo
    from sparkcdc.sink.kafka.admin import KafkaAdmin

log = logging.getLogger(__name__)

MAX_WRITERS = 16

_ENCODER_LOCK = threading.Lock()
_ENCODERS: dict[str, MessageEncoder] = {}


class KafkaSink(Sink):
    """Writes change events to Kafka in TiCDC's formats (canal-json, avro)."""

    scheme = "kafka"

    def __init__(self, uri: str, config: ReplicaConfig, changefeed_id: str = "default") -> None:
        super().__init__(uri, config, changefeed_id)
        self.options = KafkaOptions.parse(uri, config, changefeed_id)
        validate_protocol(self.options, config)
        self._encoder_key: str | None = None
        self.router = EventRouter(config, self.options.topic, self.options.protocol)
        self.split_updates = not self.options.output_raw_change_event
        # index-value/columns rules may send the two halves of a split UPDATE to different
        # partitions; one writer group keeps every partition's order in that case
        self._key_dispatch = any(r.partition.kind in ("index-value", "columns") for r in self.router.routes)
        # table and fixed rules send every row of a table to one partition: routing needs no row values
        self._route_depends_on_row = any(
            r.partition.kind not in ("table", "fixed") for r in self.router.routes
        )
        self.partitions: dict[str, int] = {}
        """Topic → partition count the sink uses (the first n of a larger default topic)."""
        self.max_message_bytes = self.options.max_message_bytes
        self._writers = max(1, min(MAX_WRITERS, self.options.partition_num or DEFAULT_PARTITION_NUM))
        self.topics_in_use: set[str] = set()
        self.last_watermark: int | None = None
        """The largest watermark published (read back from the default topic before the first commit)."""
        self._watermark_read = False
        self._admin: KafkaAdmin | None = None
        self._lock = threading.Lock()
        self._table_routes: dict[tuple[str, str, int], _TableRoute] = {}

    @property
    def capabilities(self) -> SinkCapabilities:
        # The writer outruns a shuffle: each segment's task decodes and encodes it, and the tasks
        # take turns at producing, so every partition receives the batch in commit order. A turn
        # passes once the earlier messages are acknowledged; without acknowledgements (acks=0) a
        # delivered message may not be in the log yet, so one task writes each batch.
        return SinkCapabilities(
            segments="serial" if self.options.required_acks == 0 else "turns",
            route_depends_on_row=self._route_depends_on_row,
            resume_evidence="the watermarks on its topics (never published below the last one)",
            idempotence="",  # consumers drop a message at or below their partition's watermark
            # a mark is a watermark on every partition only where the protocol sends one
            resolved_every_s=mark_every_s(self.encoder().encode_watermark(0)),
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None
        state["_lock"] = None
        state["_table_routes"] = {}  # keyed by id(table): only valid in this process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # --- topics ---------------------------------------------------------------------------------

    def admin(self) -> KafkaAdmin:
        """The (lazily created) admin client."""
        if self._admin is None:
            from sparkcdc.sink.kafka.admin import KafkaAdmin

            self._admin = KafkaAdmin(self.options)
        return self._admin

    def num_partitions_of(self, topic: str) -> int:
        """The partition count used for a topic (creating the topic if it is missing and allowed)."""
        n = self.partitions.get(topic)
        if n is None:
            with self._lock:
                n = self.partitions.get(topic)
                if n is None:
                    n = self.admin().ensure_topic(topic, is_default=topic == self.options.topic)
                    self.partitions[topic] = n
        return n

    def check(self) -> None:
        """Connect, create/verify the default topic and static dispatch topics, size limits, fixed partitions."""
        admin = self.admin()
        existed = admin.partition_count(self.options.topic) is not None
        self.partitions[self.options.topic] = admin.ensure_topic(self.options.topic, is_default=True)
        self.max_message_bytes = admin.effective_max_message_bytes(self.options.topic, existed)
        for route in self.router.routes:
            if route.topic.is_static:
                self.num_partitions_of(route.topic.topic("", ""))
        self.router.verify(dict(self.partitions))
        self._writers = max(1, min(MAX_WRITERS, max(self.partitions.values())))
        log.info(
            "Kafka sink ready: brokers %s, default topic %s (%d partitions), protocol %s, max-message-bytes %d",
            self.options.bootstrap_servers,
            self.options.topic,
            self.partitions[self.options.topic],
            self.options.protocol,
            self.max_message_bytes,
        )

    # --- routing --------------------------------------------------------------------------------

    @property
    def num_writers(self) -> int:
        """Writer groups per batch (one when key-based dispatch could split a row across partitions)."""
        if self._key_dispatch and self.split_updates:
            return 1
        return self._writers

    def expand(self, row: RowChange, table: TableInfo) -> list[RowChange]:
        """The row changes actually sent for a row: a key-changing UPDATE becomes DELETE + INSERT."""
        if self.split_updates and row.op == "U":
            from sparkcdc.codec.values import split_update_if_key_changed

            return split_update_if_key_changed(row, table)
        return [row]

    def destination(self, row: RowChange, table: TableInfo) -> tuple[str, int]:
        """(topic, partition) of one (already split) row change."""
        return self.router.route(row, table, self.num_partitions_of)

    def table_route(self, row: RowChange, table: TableInfo) -> _TableRoute:
        """Topic, partition rule and key columns of ``row``'s schema and table name with shape ``table`` (cached)."""
        key = (row.schema, row.table, id(table))
        tr = self._table_routes.get(key)
        if tr is None or tr.table is not table:
            tr = _TableRoute(self, None, row, table)
            if len(self._table_routes) > 4096:
                self._table_routes.clear()
            self._table_routes[key] = tr
        return tr

    def split(self, row: RowChange, table: TableInfo, key_indexes: tuple[int, ...]) -> list[RowChange] | None:
        """``expand(row)`` when it splits a key-changing UPDATE, else None (``key_indexes``: the key columns)."""
        if row.op != "U" or not self.split_updates:
            return None
        before, after = row.before, row.after
        if before is None or after is None:
            return None
        for i in key_indexes:
            if before[i] != after[i] or type(before[i]) is not type(after[i]):
                parts = self.expand(row, table)
                return parts if len(parts) > 1 else None
        return None

    def route(self, row: RowChange, table: TableInfo) -> int:
        """The writer group owning the row's Kafka partition."""
        n = self.num_writers
        if n <= 1:
            return 0
        tr = self.table_route(row, table)
        partition = tr.fixed_partition
        if partition is None:
            parts = self.split(row, table, tr.key_indexes)
            partition = tr.dispatcher.partition(row if parts is None else parts[0], table, tr.num_partitions)
        return writer_group(tr.topic, partition, n)

    # --- encoders -------------------------------------------------------------------------------

    def encoder(self) -> MessageEncoder:
        """The process-wide encoder of this sink's protocol and options."""
        key = self._encoder_key
        if key is None:  # once per sink: a mark asks for it every second
            key = json.dumps(
                [self.uri, self.changefeed_id, self.config.to_dict()], sort_keys=True, default=str
            )
            self._encoder_key = key
        with _ENCODER_LOCK:
            enc = _ENCODERS.get(key)
            if enc is None:
                if len(_ENCODERS) > 64:
                    _ENCODERS.clear()
                enc = build_encoder(self.options, self.config)
                _ENCODERS[key] = enc
            return enc

    # --- driver side ----------------------------------------------------------------------------

    def _send_and_wait(self, messages: list[tuple[str, int, bytes | None, bytes | None]]) -> None:
        tracker = DeliveryTracker(get_producer(self.options), self.max_message_bytes)
        for topic, partition, key, value in messages:
            tracker.produce(topic, partition, key, value)
        tracker.wait()

    def apply_ddl(self, ddl: DDLEvent) -> None:
        """Send the DDL message (canal-json: partition 0 of the table's topic) and wait for the ack."""
        encoder = self.encoder()
        kv = encoder.encode_ddl(ddl)
        topic = self.router.topic_for_ddl(ddl)
        self.topics_in_use.add(topic)
        if kv is None:
            return
        n = self.num_partitions_of(topic)
        partitions = [0] if encoder.ddl_to_partition_zero else list(range(n))
        self._send_and_wait([(topic, p, kv[0], kv[1]) for p in partitions])

    def commit(self, batch_id: int, messages: list[dict[str, Any]], checkpoint_ts: int) -> None:
        """Broadcast the watermark for checkpoint_ts to every partition of every topic in use."""
        for m in messages:
            for topic, n in (m.get("topics") or {}).items():
                self.topics_in_use.add(topic)
                self.partitions.setdefault(topic, int(n))
        topics = sorted(self.topics_in_use | {self.options.topic})
        kv = self.encoder().encode_watermark(checkpoint_ts)
        if kv is not None and not self._watermark_read:
            self._read_published_watermark()
        if self.last_watermark is not None and checkpoint_ts <= self.last_watermark:
            return
        if kv is not None:
            out = []
            for topic in topics:
                for p in range(self.num_partitions_of(topic)):
                    out.append((topic, p, kv[0], kv[1]))
            self._send_and_wait(out)
        self.last_watermark = checkpoint_ts

    def _read_published_watermark(self) -> None:
        """Raise ``last_watermark`` to the newest watermark already in the default topic."""
        from sparkcdc.sink.kafka.watermark import last_published_watermark

        topic = self.options.topic
        found = last_published_watermark(self.options, topic, self.num_partitions_of(topic))
        if found is not None and (self.last_watermark is None or found > self.last_watermark):
            log.info("Kafka sink: %s already holds watermark %d; later ones only move forward", topic, found)
            self.last_watermark = found
        self._watermark_read = True

    def open_writer(self, ctx: WriterContext) -> PartitionWriter:
        """A writer for one group of one batch."""
        return KafkaPartitionWriter(self, ctx)

    def close(self) -> None:
        """Flush the driver's producer."""
        from sparkcdc.sink.kafka.producer import close_all_producers

        close_all_producers()
