"""Avro options (URI + config, TiCDC's wording), topic rules, wire format and watermark messages."""

from __future__ import annotations

import json
import pickle

import pytest

from sparkcdc.codec.avro import (
    AvroEncoder,
    AvroOptions,
    split_wire,
    validate_avro_topic_rules,
    wire_header,
)
from sparkcdc.config.replica import DispatchRule, ReplicaConfig
from sparkcdc.config.uri import ParsedURI
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model import DDLEvent, DDLType

REG = "schema-registry=http://127.0.0.1:8081"


def _uri(params: str) -> str:
    return f"kafka://127.0.0.1:9092/t?protocol=avro&{params}"


def test_defaults() -> None:
    o = AvroOptions.from_sink(_uri(REG))
    assert o == AvroOptions("http://127.0.0.1:8081", False, "precise", "long", False, "default")


@pytest.mark.parametrize(("raw", "want"), [("true", True), ("false", False)])
def test_extension_true_false(raw: str, want: bool) -> None:
    assert AvroOptions.from_sink(_uri(f"{REG}&enable-tidb-extension={raw}")).enable_tidb_extension is want


def test_extension_invalid_names_option_and_values() -> None:
    with pytest.raises(ConfigError, match="'enable-tidb-extension': expected true or false"):
        AvroOptions.from_sink(_uri(f"{REG}&enable-tidb-extension=yes-please"))


@pytest.mark.parametrize("mode", ["precise", "string"])
def test_decimal_modes(mode: str) -> None:
    assert (
        AvroOptions.from_sink(_uri(f"{REG}&avro-decimal-handling-mode={mode}")).decimal_handling_mode == mode
    )


def test_decimal_mode_invalid_uses_ticdc_wording() -> None:
    with pytest.raises(ConfigError) as err:
        AvroOptions.from_sink(_uri(f"{REG}&avro-decimal-handling-mode=exact"))
    assert 'avro-decimal-handling-mode value could only be "string" or "precise"' in str(err.value)
    assert "'exact'" in str(err.value)


@pytest.mark.parametrize("mode", ["long", "string"])
def test_bigint_modes(mode: str) -> None:
    o = AvroOptions.from_sink(_uri(f"{REG}&avro-bigint-unsigned-handling-mode={mode}"))
    assert o.bigint_unsigned_handling_mode == mode


def test_bigint_mode_invalid_uses_ticdc_wording() -> None:
    with pytest.raises(ConfigError) as err:
        AvroOptions.from_sink(_uri(f"{REG}&avro-bigint-unsigned-handling-mode=int"))
    assert 'avro-bigint-unsigned-handling-mode value could only be "long" or "string"' in str(err.value)


def test_missing_registry_is_refused() -> None:
    with pytest.raises(ConfigError, match='Avro protocol requires parameter "schema-registry"'):
        AvroOptions.from_sink(_uri("enable-tidb-extension=true"))


def test_invalid_registry_url_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"invalid schema-registry 'ftp://x'.*http://"):
        AvroOptions.from_sink(_uri("schema-registry=ftp://x"))


def test_config_values_and_uri_precedence() -> None:
    cfg = ReplicaConfig.from_toml(
        """
        [sink]
        schema-registry = "http://cfg:8081"
        [sink.kafka-config.codec-config]
        enable-tidb-extension = true
        avro-decimal-handling-mode = "string"
        avro-bigint-unsigned-handling-mode = "string"
        """
    )
    o = AvroOptions.from_sink(None, cfg)
    assert (o.schema_registry, o.enable_tidb_extension, o.decimal_handling_mode) == (
        "http://cfg:8081",
        True,
        "string",
    )
    assert o.bigint_unsigned_handling_mode == "string"
    o2 = AvroOptions.from_sink(_uri("schema-registry=http://uri:1&avro-decimal-handling-mode=precise"), cfg)
    assert (o2.schema_registry, o2.decimal_handling_mode, o2.bigint_unsigned_handling_mode) == (
        "http://uri:1",
        "precise",
        "string",
    )


def test_invalid_config_value_is_refused() -> None:
    cfg = ReplicaConfig.from_toml('[sink.kafka-config.codec-config]\navro-decimal-handling-mode = "float"')
    with pytest.raises(ConfigError, match="avro-decimal-handling-mode value could only be"):
        AvroOptions.from_sink(_uri(REG), cfg)


def test_force_replicate_is_refused() -> None:
    cfg = ReplicaConfig.from_toml("force-replicate = true")
    with pytest.raises(ConfigError, match="force-replicate must be disabled, when using avro protocol"):
        AvroOptions.from_sink(_uri(REG), cfg)


def test_uri_parameters_are_marked_read() -> None:
    parsed = ParsedURI.parse(_uri(f"{REG}&enable-tidb-extension=true&avro-enable-watermark=true"))
    parsed.get("protocol")
    opts = AvroOptions.from_sink(parsed)
    parsed.reject_unknown()  # nothing left over
    assert opts.enable_watermark is True


def test_watermark_needs_extension() -> None:
    assert AvroOptions.from_sink(_uri(f"{REG}&avro-enable-watermark=true")).enable_watermark is False


# -- topic rules ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("topic", ["{schema}_{table}", "cdc.{schema}.{table}-x", "", "{schema}{table}"])
def test_valid_avro_topic_rules(topic: str) -> None:
    validate_avro_topic_rules([DispatchRule(matcher=["*.*"], topic=topic)])


@pytest.mark.parametrize(
    "topic", ["{schema}", "fixed-topic", "{table}_{schema}", "a b{schema}{table}", "{table}"]
)
def test_invalid_avro_topic_rules(topic: str) -> None:
    with pytest.raises(ConfigError, match=r"topic rule for Avro must contain \{schema\} and \{table\}"):
        validate_avro_topic_rules([DispatchRule(matcher=["*.*"], topic=topic)])


def test_topic_rules_from_replica_config_and_strings() -> None:
    cfg = ReplicaConfig.from_toml('[[sink.dispatchers]]\nmatcher = ["a.*"]\ntopic = "only_{schema}"')
    with pytest.raises(ConfigError, match="only_"):
        validate_avro_topic_rules(cfg)
    validate_avro_topic_rules(["{schema}_{table}", {"topic": "x_{schema}_{table}"}])


# -- wire format ------------------------------------------------------------------------------------------


def test_wire_header_is_magic_zero_and_big_endian_id() -> None:
    assert wire_header(1) == b"\x00\x00\x00\x00\x01"
    assert wire_header(0x01020304) == b"\x00\x01\x02\x03\x04"
    assert split_wire(b"\x00\x00\x00\x01\x00payload") == (256, b"payload")
    with pytest.raises(DecodeError, match="magic byte 0"):
        split_wire(b"\x01\x00\x00\x00\x01x")
    with pytest.raises(DecodeError):
        split_wire(b"\x00\x00")


def test_encoder_pickles_without_its_client() -> None:
    enc = AvroEncoder(AvroOptions.from_sink(_uri(REG)))
    back = pickle.loads(pickle.dumps(enc))
    assert back.options == enc.options


def test_watermark_messages() -> None:
    on = AvroEncoder(
        AvroOptions.from_sink(_uri(f"{REG}&enable-tidb-extension=true&avro-enable-watermark=true"))
    )
    off = AvroEncoder(AvroOptions.from_sink(_uri(REG)))
    assert off.encode_checkpoint(5) is None
    assert on.encode_checkpoint(429918007904436226) == b"\x02" + (429918007904436226).to_bytes(8, "big")
    ddl = DDLEvent("create table t (a int)", "s", "t", DDLType.CREATE_TABLE, 42, 42)
    raw = on.encode_ddl(ddl)
    assert raw is not None and raw[0] == 1
    assert json.loads(raw[1:]) == {
        "query": "create table t (a int)",
        "type": 3,
        "schema": "s",
        "table": "t",
        "commitTs": 42,
    }
    assert off.encode_ddl(ddl) is None
