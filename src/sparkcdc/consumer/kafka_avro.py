"""Replay avro (Confluent wire format) messages from Kafka into MySQL.

``sparkcdc consumer --upstream-uri 'kafka://h:p/topic?protocol=avro&schema-registry=http://r:8081'
--downstream-uri mysql://...``

* Keys and values are decoded with the schema registry (``schema-registry`` in
  the URI or ``[sink]`` of ``--config``): magic byte 0, 4-byte schema id, Avro body.
* Avro carries no DDL, so **the downstream tables must exist before the
  consumer runs** (create them with the upstream's ``SHOW CREATE TABLE``). The
  record's namespace ``<changefeed namespace>.<schema>`` and name ``<table>``
  (both sanitised: characters outside ``[A-Za-z0-9_]`` become ``_``, a leading
  digit gets a ``_`` prefix) are matched against the downstream tables'
  sanitised names; the column layout comes from the downstream
  ``SHOW CREATE TABLE`` (``sparkcdc.capture.catalog.parse_create_table``) and
  every stored column must have a field of the same (sanitised) name.
* ``_tidb_op`` ``c`` and ``u`` (or a value without the extension) become
  ``REPLACE`` of the full row; a tombstone (null value) is a ``DELETE`` by the
  key. A key-changing UPDATE arrives as tombstone + ``c``. The applier runs in
  safe mode, so replaying any suffix of a partition again leaves the same table
  (for tables with a primary or NOT NULL unique key; a table without one has no
  Avro key, so its deletes cannot be replayed and are dropped with a warning).
* Order: each partition is applied in offset order. There are no watermarks
  (the test-only ``avro-enable-watermark`` messages are read and skipped), so
  rows of the same key must stay in one partition (the default, ``table`` and
  ``index-value`` dispatchers do; a ``ts`` dispatcher does not).
* Progress: after every downstream commit, each partition's next offset and the
  largest ``_tidb_commit_ts`` applied are stored in the downstream table
  ``<progress-schema>.sparkcdc_kafka_avro_consumer_progress``, then the Kafka
  offsets are committed (consumer group ``group-id``). A restart resumes from
  the further of the two offsets. With ``enable-tidb-extension=true`` a row
  whose commit_ts is below the partition's largest one is a re-sent batch
  (at-least-once delivery) and is dropped; a tombstone has no commit_ts, so it
  is held until the partition's next row tells whether it is a re-send (or
  until the partition's end). Without the extension every message is applied
  again, which REPLACE/DELETE make idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkcdc.codec.avro import AvroDecoder, AvroOptions, AvroRow, AvroWatermark, check_schema_registry
from sparkcdc.codec.avro_schema import sanitize_name
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import redact_uri
from sparkcdc.consumer.kafka_loop import DEFAULT_PROGRESS_SCHEMA, ConsumerStats, KafkaConsumerBase, Pair
from sparkcdc.consumer.progress import ProgressTable
from sparkcdc.errors import DecodeError, SinkUnavailable
from sparkcdc.model import RowChange, TableInfo

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

log = logging.getLogger(__name__)

AVRO_PROGRESS_TABLE = "sparkcdc_kafka_avro_consumer_progress"
AVRO_PROGRESS_COLUMNS = (
    "consumer_id VARCHAR(32) NOT NULL, kafka_partition INT NOT NULL, "
    "topic VARCHAR(255) NOT NULL, group_id VARCHAR(255) NOT NULL, "
    "next_offset BIGINT NOT NULL, applied_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, "
    "updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), "
    "PRIMARY KEY (consumer_id, kafka_partition)"
)
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


@dataclass
class _Held:
    offset: int
    row: RowChange
    info: TableInfo


@dataclass
class _Partition:
    done: int | None = None
    """The offset after the last message applied or dropped (None: nothing read yet)."""
    max_ts: int = 0
    """The largest ``_tidb_commit_ts`` applied: a smaller one is a re-sent batch."""
    held: list[_Held] = field(default_factory=list)
    at_end: bool = False
    dirty: bool = False

    def commit_offset(self) -> int | None:
        """The next offset to resume from: the first held tombstone, else after the last one done."""
        return self.held[0].offset if self.held else self.done


@dataclass(frozen=True)
class _Target:
    """A downstream table and where each of its columns is found in the Avro records."""

    info: TableInfo
    fields: tuple[str, ...]
    """Per column, the sanitised Avro field name."""
    key_fields: tuple[str, ...]
    """The sanitised names of the downstream handle-key columns."""
    field_set: frozenset[str]


class AvroKafkaConsumer(KafkaConsumerBase[_Partition]):
    """Applies one topic's avro messages to a downstream MySQL (see the module docstring)."""

    PROTOCOLS = ("avro",)

    def __init__(
        self,
        upstream_uri: str,
        downstream_uri: str,
        config: ReplicaConfig | None = None,
        *,
        progress_schema: str = DEFAULT_PROGRESS_SCHEMA,
        group_id: str | None = None,
        registry_client: SchemaRegistryClient | None = None,
    ) -> None:
        super().__init__(
            upstream_uri, downstream_uri, config, progress_schema=progress_schema, group_id=group_id
        )
        self.avro = AvroOptions.from_sink(self.options.uri, self.config)
        self._registry_client = registry_client
        self._decoder: AvroDecoder | None = None
        # no before images and no transaction boundaries: every change is a REPLACE or a DELETE by key
        self.applier.safe_mode = True
        self._targets: dict[tuple[str, str], _Target] = {}
        self._names: dict[tuple[str, str], list[tuple[str, str]]] | None = None
        self._progress = ProgressTable(self.progress_schema, AVRO_PROGRESS_TABLE, AVRO_PROGRESS_COLUMNS)
        self.stats = ConsumerStats(protocol="avro")
        self._warned_keyless = False

    # --- registry ----------------------------------------------------------------------------------

    def decoder(self) -> AvroDecoder:
        """The decoder over the registry client (the registry is checked on first use)."""
        if self._decoder is None:
            client = self._registry_client
            if client is None:
                check_schema_registry(self.avro.schema_registry)
                from confluent_kafka.schema_registry import SchemaRegistryClient

                client = SchemaRegistryClient({"url": self.avro.schema_registry, "timeout": 30})
            self._decoder = AvroDecoder(client)
        return self._decoder

    def _decode(self, m: Any) -> AvroRow | AvroWatermark | None:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        from sparkcdc.codec.avro import _transport_errors

        where = f"{self.topic}[{m.partition()}]@{m.offset()}"
        try:
            return self.decoder().decode(m.key(), m.value())
        except SchemaRegistryError as exc:
            msg = (
                f"schema registry {redact_uri(self.avro.schema_registry)} cannot give the schema of the message "
                f"at {where} (HTTP {exc.http_status_code}, error code {exc.error_code}): {exc.error_message}"
            )
            if exc.http_status_code >= 500 or exc.http_status_code in (408, 429):
                raise SinkUnavailable(msg) from exc
            raise DecodeError(
                msg + "; point schema-registry at the registry the changefeed wrote to"
            ) from exc
        except _transport_errors() as exc:
            raise SinkUnavailable(
                f"cannot reach schema registry {redact_uri(self.avro.schema_registry)} to decode {where}: {exc}"
            ) from exc
        except DecodeError as exc:
            raise DecodeError(f"message at {where}: {exc}") from exc
        except (ValueError, TypeError, EOFError, KeyError) as exc:
            raise DecodeError(
                f"message at {where} is not valid Avro for its writer schema: {type(exc).__name__}: {exc}"
            ) from exc

    # --- the loop's steps (KafkaConsumerBase.run) ----------------------------------------------------

    def _start(self) -> tuple[Any, dict[int, _Partition]]:
        self.decoder()  # an unreachable registry fails here, before anything is read
        stored = self._load_avro_progress()
        consumer, partitions = self._open({p: off for p, (off, _) in stored.items()})
        state = {p: _Partition(max_ts=stored.get(p, (0, 0))[1]) for p in partitions}
        self.stats.watermark = max((s.max_ts for s in state.values()), default=0)
        return consumer, state

    def _stop_at_timeout(self) -> None:
        log.warning("Kafka avro consumer stops at its timeout")

    def _partition_end(self, st: _Partition, out: list[Pair]) -> None:
        self._release(st, out, None)

    def _after_poll(self, consumer: Any, state: dict[int, _Partition]) -> None:
        if any(s.dirty for s in state.values()):
            self._save_avro_progress(state)
            self._commit_avro_offsets(consumer, state)
            self.stats.rounds += 1

    def _finish(self, state: dict[int, _Partition]) -> None:
        self.stats.rows_pending = sum(len(s.held) for s in state.values())
        self.stats.watermark = max((s.max_ts for s in state.values()), default=0)

    def _message(self, m: Any, st: _Partition, out: list[Pair]) -> None:
        offset = m.offset()
        st.dirty = True
        decoded = self._decode(m)
        if decoded is None:
            # no key and no value: a DELETE of a table without a handle key (TiCDC sends it so too)
            if not self._warned_keyless:
                log.warning(
                    "%s[%d]@%d is a DELETE without a key (a table without a primary or NOT NULL unique key): "
                    "it cannot be replayed and is dropped (further ones are counted in rows_dropped)",
                    self.topic,
                    m.partition(),
                    offset,
                )
                self._warned_keyless = True
            self.stats.rows_dropped += 1
            self._done(st, offset)
            return
        if isinstance(decoded, AvroWatermark):
            # the test-only avro-enable-watermark checkpoint/DDL messages: nothing to apply
            self._done(st, offset)
            return
        if decoded.op == "D":
            target = self._target(decoded)
            before = self._key_image(decoded, target)
            row = RowChange("D", target.info.schema, target.info.table, 0, st.max_ts, before, None)
            st.held.append(_Held(offset, row, target.info))
            return
        if decoded.value is None:  # pragma: no cover - the decoder gives "D" for a null value
            raise DecodeError(f"message at {self.topic}[{m.partition()}]@{offset} has no value")
        ts = decoded.commit_ts
        if ts is not None and ts < st.max_ts:
            # commit_ts fell back: a re-sent batch; the held tombstones before it are re-sends too
            self.stats.rows_dropped += 1 + len(st.held)
            st.held.clear()
            self._done(st, offset)
            return
        target = self._target(decoded)
        after = self._image(decoded, target, m)
        commit_ts = ts if ts is not None else 0
        self._release(st, out, commit_ts if ts is not None else None)
        out.append(
            (RowChange("I", target.info.schema, target.info.table, 0, commit_ts, None, after), target.info)
        )
        if ts is not None:
            st.max_ts = ts
        self._done(st, offset)

    def _release(self, st: _Partition, out: list[Pair], commit_ts: int | None) -> None:
        """Apply the held tombstones now (they precede a new row, or the partition's end)."""
        if not st.held:
            return
        for h in st.held:
            row = h.row
            if commit_ts is not None and row.commit_ts != commit_ts:
                row = RowChange("D", row.schema, row.table, 0, commit_ts, row.before, None)
            out.append((row, h.info))
        self._done(st, st.held[-1].offset)
        st.held.clear()
        st.dirty = True

    @staticmethod
    def _done(st: _Partition, offset: int) -> None:
        st.done = offset + 1 if st.done is None else max(st.done, offset + 1)

    # --- rows ------------------------------------------------------------------------------------------

    def _image(self, decoded: AvroRow, target: _Target, m: Any) -> tuple[Any, ...]:
        value = decoded.value or {}
        out: list[Any] = []
        missing: list[str] = []
        for col, name in zip(target.info.columns, target.fields, strict=True):
            if name in value:
                out.append(value[name])
            elif col.generated:
                out.append(None)
            else:
                missing.append(col.name)
                out.append(None)
        if missing:
            raise DecodeError(
                f"the Avro record {decoded.schema}.{decoded.table} at {self.topic}[{m.partition()}]@{m.offset()} "
                f"has no field for downstream column(s) {', '.join(missing)} of "
                f"{target.info.schema}.{target.info.table}; make the downstream table match the upstream table"
            )
        if not target.field_set.issuperset(value):
            extra = set(value) - target.field_set
            raise DecodeError(
                f"the Avro record {decoded.schema}.{decoded.table} has field(s) {', '.join(sorted(extra))} that the "
                f"downstream table {target.info.schema}.{target.info.table} lacks; add the columns downstream "
                "(Avro carries no DDL)"
            )
        return tuple(out)

    def _key_image(self, decoded: AvroRow, target: _Target) -> tuple[Any, ...]:
        key = decoded.key or {}
        missing = [f for f in target.key_fields if f not in key]
        if missing or not target.key_fields:
            raise DecodeError(
                f"cannot delete from {target.info.schema}.{target.info.table} by the Avro key "
                f"{sorted(key)}: the downstream handle key is {list(target.info.handle_key) or 'missing'}; "
                "give the downstream table the upstream's primary key (or NOT NULL unique key)"
            )
        image: list[Any] = [None] * len(target.info.columns)
        for i, name in zip(target.info.handle_key_index, target.key_fields, strict=True):
            image[i] = key[name]
        return tuple(image)

    def _target(self, decoded: AvroRow) -> _Target:
        key = (decoded.schema, decoded.table)
        target = self._targets.get(key)
        if target is None:
            schema, table = self._resolve(decoded.schema, decoded.table)
            info = self._table(schema, table)
            fields = tuple(sanitize_name(c.name) for c in info.columns)
            key_fields = tuple(fields[i] for i in info.handle_key_index)
            target = _Target(info, fields, key_fields, frozenset(fields))
            self._targets[key] = target
        return target

    def _resolve(self, avro_schema: str, avro_table: str) -> tuple[str, str]:
        """The downstream (schema, table) whose sanitised names are the record's namespace part and name."""
        for fresh in (False, True):
            if self._names is None or fresh:
                self._names = self._downstream_names()
            found = self._names.get((avro_schema, avro_table), [])
            exact = [n for n in found if n == (avro_schema, avro_table)]
            if exact:
                return exact[0]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise DecodeError(
                    f"the Avro record {avro_schema}.{avro_table} matches several downstream tables after name "
                    f"sanitising: {', '.join(f'{s}.{t}' for s, t in found)}; keep only one of them"
                )
        raise DecodeError(
            f"downstream table {avro_schema}.{avro_table} (from the Avro record's namespace and name) does not exist; "
            "Avro carries no DDL: create the table downstream first (the upstream's SHOW CREATE TABLE)"
        )

    def _downstream_names(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        conn = self.applier.connection()
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'"
            )
            rows = cur.fetchall()
        conn.commit()
        names: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for schema, table in rows:
            if str(schema).lower() in SYSTEM_SCHEMAS:
                continue
            key = (sanitize_name(str(schema)), sanitize_name(str(table)))
            names.setdefault(key, []).append((str(schema), str(table)))
        return names

    # --- progress ----------------------------------------------------------------------------------

    def _load_avro_progress(self) -> dict[int, tuple[int, int]]:
        """Partition → (next offset, largest commit_ts applied), as stored downstream."""
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT kafka_partition, next_offset, applied_ts FROM {self._progress.name} "
                "WHERE consumer_id=%s",
                (self.consumer_id,),
            )
            rows = cur.fetchall()
        conn.commit()
        return {int(p): (int(off), int(ts)) for p, off, ts in rows}

    def _save_avro_progress(self, state: dict[int, _Partition]) -> None:
        rows = []
        for p, st in sorted(state.items()):
            off = st.commit_offset()
            if st.dirty and off is not None:
                rows.append((self.consumer_id, p, self.topic, self.group_id, off, st.max_ts))
        if not rows:
            return
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {self._progress.name} "
                "(consumer_id, kafka_partition, topic, group_id, next_offset, applied_ts) VALUES (%s,%s,%s,%s,%s,%s) "
                "ON DUPLICATE KEY UPDATE next_offset=VALUES(next_offset), applied_ts=VALUES(applied_ts)",
                rows,
            )
        conn.commit()

    def _commit_avro_offsets(self, consumer: Any, state: dict[int, _Partition]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        offsets = []
        for p, st in state.items():
            off = st.commit_offset()
            if st.dirty and off is not None:
                offsets.append(TopicPartition(self.topic, p, off))
            st.dirty = False
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                # the downstream progress already holds the offsets: a restart resumes from there
                log.warning(
                    "committing Kafka offsets failed (%s); the downstream progress is used on restart", exc
                )
