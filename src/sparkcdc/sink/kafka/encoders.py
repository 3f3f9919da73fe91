"""The Kafka sink's encoders: an explicit registry from protocol name to a message encoder.

A ``MessageEncoder`` turns one row change into Kafka (key, value) pairs and
says how DDLs and watermarks look for its protocol. Adding a protocol means
writing one adapter class here and one line in ``ENCODERS``; the sink refuses
a protocol that is not in the registry, naming the supported ones.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.kafka.options import KNOWN_PROTOCOLS, KafkaOptions

if TYPE_CHECKING:
    from collections.abc import Callable

    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.model import DDLEvent, RowChange, TableInfo

KeyValue = tuple[bytes | None, bytes | None]


class MessageEncoder(ABC):
    """Encodes events of one protocol for Kafka (built lazily in each executor; must be picklable)."""

    protocol: str = ""
    ddl_to_partition_zero: bool = True
    """canal-json sends a DDL to partition 0 only; other protocols broadcast it to every partition."""
    supports_large_message_handle: bool = False

    def __init__(self, options: KafkaOptions, config: ReplicaConfig) -> None:
        self.options = options

    @abstractmethod
    def encode_row(self, row: RowChange, table: TableInfo, topic: str) -> list[KeyValue]:
        """The messages of one row change, in order."""

    def value_encoder(self, row: RowChange, table: TableInfo) -> Callable[[RowChange], bytes] | None:
        """For protocols that send one keyless message per row: that message's value for rows of
        ``row``'s schema and table name with shape ``table`` (the writer's fast path); else None."""
        return None

    def encode_row_handle_key_only(self, row: RowChange, table: TableInfo) -> KeyValue:
        """The handle-key-only form of an oversized row message."""
        raise ConfigError(f"protocol {self.protocol} has no handle-key-only form for large messages")

    def encode_row_claim_check(self, row: RowChange, table: TableInfo, location: str) -> KeyValue:
        """The reference message of an oversized row whose full message went to claim-check storage."""
        raise ConfigError(f"protocol {self.protocol} has no claim-check form for large messages")

    @abstractmethod
    def encode_ddl(self, ddl: DDLEvent) -> KeyValue | None:
        """The DDL message, or None when the protocol sends none."""

    @abstractmethod
    def encode_watermark(self, ts: int) -> KeyValue | None:
        """The watermark (resolved ts) message, or None when the protocol sends none."""


class CanalJsonKafkaEncoder(MessageEncoder):
    """canal-json (spec §1): one JSON message per row, key null, DDL to partition 0."""

    protocol = "canal-json"
    ddl_to_partition_zero = True
    supports_large_message_handle = True

    def __init__(self, options: KafkaOptions, config: ReplicaConfig) -> None:
        from sparkcdc.codec.canal_json import CanalJsonEncoder

        super().__init__(options, config)
        self._codec = CanalJsonEncoder(
            config,
            options.enable_tidb_extension,
            only_output_updated_columns=options.only_output_updated_columns,
            content_compatible=options.content_compatible,
        )

    def encode_row(self, row: RowChange, table: TableInfo, topic: str) -> list[KeyValue]:
        """One message, key null."""
        return [(None, self._codec.encode_row(row, table))]

    def value_encoder(self, row: RowChange, table: TableInfo) -> Callable[[RowChange], bytes] | None:
        """The compiled canal-json encoder of the table (the key is always null)."""
        return self._codec.row_encoder(row, table)

    def encode_row_handle_key_only(self, row: RowChange, table: TableInfo) -> KeyValue:
        """Only the handle-key columns and ``_tidb.onlyHandleKey``."""
        return (None, self._codec.encode_row_handle_key_only(row, table))

    def encode_row_claim_check(self, row: RowChange, table: TableInfo, location: str) -> KeyValue:
        """Only the handle-key columns and ``_tidb.claimCheckLocation``."""
        return (None, self._codec.encode_row_claim_check(row, table, location))

    def encode_ddl(self, ddl: DDLEvent) -> KeyValue | None:
        """The canal-json DDL message."""
        return (None, self._codec.encode_ddl(ddl))

    def encode_watermark(self, ts: int) -> KeyValue | None:
        """TIDB_WATERMARK (only with enable-tidb-extension)."""
        value = self._codec.encode_watermark(ts)
        return None if value is None else (None, value)


class AvroKafkaEncoder(MessageEncoder):
    """avro (spec §2): Confluent wire format, DELETE = tombstone, no DDL/watermark unless avro-enable-watermark."""

    protocol = "avro"
    ddl_to_partition_zero = False

    def __init__(self, options: KafkaOptions, config: ReplicaConfig) -> None:
        from sparkcdc.codec.avro import AvroEncoder, AvroOptions

        super().__init__(options, config)
        self._codec = AvroEncoder(AvroOptions.from_sink(options.uri, config))

    def encode_row(self, row: RowChange, table: TableInfo, topic: str) -> list[KeyValue]:
        """Key and value in the Confluent wire format."""
        return self._codec.encode_row(row, table, topic)

    def encode_ddl(self, ddl: DDLEvent) -> KeyValue | None:
        """Only with the test-only avro-enable-watermark."""
        value = self._codec.encode_ddl(ddl)
        return None if value is None else (None, value)

    def encode_watermark(self, ts: int) -> KeyValue | None:
        """Only with the test-only avro-enable-watermark."""
        value = self._codec.encode_checkpoint(ts)
        return None if value is None else (None, value)


ENCODERS: dict[str, str] = {
    "canal-json": "sparkcdc.sink.kafka.encoders:CanalJsonKafkaEncoder",
    "avro": "sparkcdc.sink.kafka.encoders:AvroKafkaEncoder",
}
"""Protocol name (aliases already resolved) → ``module:Class`` of its encoder."""


def check_supported(protocol: str) -> None:
    """Refuse a protocol without an encoder, naming the supported ones."""
    if protocol not in ENCODERS:
        known = "a TiCDC protocol" if protocol in KNOWN_PROTOCOLS else "not a known protocol"
        raise SinkURIError(
            f"protocol {protocol!r} is {known} but is not supported yet by the sparkcdc Kafka sink; "
            f"use one of: {', '.join(sorted(ENCODERS))}"
        )


def encoder_class(protocol: str) -> type[MessageEncoder]:
    """The encoder class of a protocol (imported lazily)."""
    check_supported(protocol)
    module_name, cls_name = ENCODERS[protocol].split(":")
    cls: type[MessageEncoder] = getattr(importlib.import_module(module_name), cls_name)
    return cls


def build_encoder(options: KafkaOptions, config: ReplicaConfig) -> MessageEncoder:
    """A new encoder for the sink's protocol."""
    return encoder_class(options.protocol)(options, config)


def validate_protocol(options: KafkaOptions, config: ReplicaConfig) -> None:
    """Driver-side checks of the protocol's own options (at sink creation, before anything runs)."""
    check_supported(options.protocol)
    if options.protocol == "avro":
        from sparkcdc.codec.avro import AvroOptions, validate_avro_topic_rules

        AvroOptions.from_sink(options.uri, config)
        validate_avro_topic_rules(config.sink.dispatchers)
    if options.protocol == "canal-json":
        if config.sink.delete_only_output_handle_key_columns and config.force_replicate:
            raise ConfigError(
                'force-replicate must be disabled when configuration "delete-only-output-handle-key-columns" '
                "is true"
            )
