"""The Kafka sink's encoders: a codec's ``Encoder`` (``codec.base``) with what Kafka adds.

The codec writes the messages; ``MessageEncoder`` says where a protocol's DDLs go and gives the
large-message forms (canal-json only). Adding a protocol means one encoder in ``codec`` and its
name in ``KAFKA_PROTOCOLS``; the sink refuses a protocol that is not there, naming the supported ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkcdc.codec.base import CodecOptions, Encoder, KeyValue, RowsEncoder, ValueEncoder
from sparkcdc.codec.base import build_encoder as build_codec
from sparkcdc.config.options import not_supported
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.kafka.config import KNOWN_PROTOCOLS, KafkaOptions

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.model import DDLEvent, RowChange, TableInfo

__all__ = [
    "KAFKA_PROTOCOLS",
    "KeyValue",
    "MessageEncoder",
    "build_encoder",
    "check_supported",
    "validate_protocol",
]

KAFKA_PROTOCOLS: tuple[str, ...] = ("avro", "canal-json")
"""The protocols the Kafka sink sends (aliases already resolved)."""


def codec_options(options: KafkaOptions, config: ReplicaConfig) -> CodecOptions:
    """What the sink URI says about the encoding."""
    avro = None
    if options.protocol == "avro":
        from sparkcdc.codec.avro import AvroOptions

        avro = AvroOptions.from_sink(options.uri, config)
    return CodecOptions(
        enable_tidb_extension=options.enable_tidb_extension,
        only_output_updated_columns=options.only_output_updated_columns,
        content_compatible=options.content_compatible,
        avro=avro,
    )


class MessageEncoder:
    """Encodes events of one protocol as Kafka (key, value) pairs (built in each executor; picklable)."""

    def __init__(self, options: KafkaOptions, config: ReplicaConfig, codec: Encoder | None = None) -> None:
        self.options = options
        self.protocol = options.protocol
        self.codec = codec or build_codec(options.protocol, config, codec_options(options, config))
        self.ddl_to_partition_zero = self.protocol == "canal-json"
        """canal-json sends a DDL to partition 0 only; other protocols broadcast it to every partition."""
        self.supports_large_message_handle = self.protocol == "canal-json"

    def encode_row(self, row: RowChange, table: TableInfo, topic: str) -> list[KeyValue]:
        """The messages of one row change, in order."""
        return self.codec.messages(row, table, topic)

    def value_encoder(self, row: RowChange, table: TableInfo) -> ValueEncoder | None:
        """For protocols that send one keyless message per row: that message's value for rows of
        ``row``'s schema and table name with shape ``table`` (the writer's fast path); else None."""
        return self.codec.value_encoder(row, table)

    def rows_encoder(self, row: RowChange, table: TableInfo) -> RowsEncoder | None:
        """For protocols that send one keyless message per row: the values of a list of row changes of
        ``row``'s table and commit_ts at once (the codec's run encoder, else its value encoder row by
        row); None for the others."""
        encode_rows = self.codec.rows_encoder(row, table)
        if encode_rows is not None:
            return encode_rows
        encode_value = self.codec.value_encoder(row, table)
        if encode_value is None:
            return None
        one = encode_value

        def encode_each(rows: list[RowChange]) -> list[bytes]:
            return [one(r) for r in rows]

        return encode_each

    def _canal(self, what: str) -> Any:
        from sparkcdc.codec.canal_json import ReferenceCanalJsonEncoder

        if not isinstance(self.codec, ReferenceCanalJsonEncoder):
            raise ConfigError(f"protocol {self.protocol} has no {what} form for large messages")
        return self.codec

    def encode_row_handle_key_only(self, row: RowChange, table: TableInfo) -> KeyValue:
        """The handle-key-only form of an oversized row message (``_tidb.onlyHandleKey``)."""
        return (None, self._canal("handle-key-only").encode_row_handle_key_only(row, table))

    def encode_row_claim_check(self, row: RowChange, table: TableInfo, location: str) -> KeyValue:
        """The reference message of an oversized row whose full message went to claim-check storage."""
        return (None, self._canal("claim-check").encode_row_claim_check(row, table, location))

    def encode_ddl(self, ddl: DDLEvent) -> KeyValue | None:
        """The DDL message, or None when the protocol sends none."""
        value = self.codec.encode_ddl(ddl)
        return None if value is None else (None, value)

    def encode_watermark(self, ts: int) -> KeyValue | None:
        """The watermark (resolved ts) message, or None when the protocol sends none."""
        value = self.codec.encode_watermark(ts)
        return None if value is None else (None, value)


def check_supported(protocol: str) -> None:
    """Refuse a protocol the Kafka sink does not send, naming the supported ones."""
    if protocol not in KAFKA_PROTOCOLS:
        fix = f"use one of: {', '.join(KAFKA_PROTOCOLS)}"
        if protocol in KNOWN_PROTOCOLS:
            raise not_supported(f"the Kafka sink's protocol {protocol!r}", fix=fix, ticdc=True, uri=True)
        raise SinkURIError(f"protocol {protocol!r} is not a known protocol; {fix}")


def build_encoder(options: KafkaOptions, config: ReplicaConfig) -> MessageEncoder:
    """A new encoder for the sink's protocol."""
    check_supported(options.protocol)
    return MessageEncoder(options, config)


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
