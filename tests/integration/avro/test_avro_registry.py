"""The avro encoder against a real registry process, decoded by confluent-kafka's AvroDeserializer."""

from __future__ import annotations

import struct
import time
from dataclasses import replace
from decimal import Decimal
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sparkcdc.codec.avro import AvroDecoder, AvroEncoder, AvroOptions, check_schema_registry, split_wire
from sparkcdc.errors import ConfigError, SinkError, SinkUnavailable
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo, compose_ts
from sparkcdc.registry.local import LocalSchemaRegistry
from sparkcdc.services.common import free_port
from tests.unit.avro.tables import ALL_TYPES, all_types_row, all_types_table, person

pytestmark = pytest.mark.integration

TS = compose_ts(1640007049196, 2)


def _options(reg: LocalSchemaRegistry, **params: str) -> AvroOptions:
    q = "&".join(f"{k}={v}" for k, v in {"schema-registry": reg.url, **params}.items())
    return AvroOptions.from_sink(f"kafka://127.0.0.1:9092/t?protocol=avro&{q}")


def _client(reg: LocalSchemaRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": reg.url})


def _decode(reg: LocalSchemaRegistry, topic: str, key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
    de = AvroDeserializer(_client(reg))
    k = de(key, SerializationContext(topic, MessageField.KEY)) if key is not None else None
    v = de(value, SerializationContext(topic, MessageField.VALUE)) if value is not None else None
    return k, v


def _insert(table: TableInfo, row: tuple[Any, ...], ts: int = TS) -> RowChange:
    return RowChange("I", table.schema, table.table, table.version, ts, None, row)


def _expected_avro(table: TableInfo, row: tuple[Any, ...], decimal: str, bigint: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for col, v in zip(table.columns, row, strict=True):
        if v is None:
            out[col.name] = None
        elif col.type == "bigint" and col.unsigned:
            out[col.name] = str(v) if bigint == "string" else (v - 2**64 if v >= 2**63 else v)
        elif col.type == "decimal":
            out[col.name] = v if decimal == "precise" else f"{v:.{col.scale or 0}f}"
        elif col.type == "float":
            out[col.name] = struct.unpack("<f", struct.pack("<f", v))[0]
        elif col.type == "bit":
            out[col.name] = v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
        else:
            out[col.name] = v
    return out


@pytest.mark.parametrize("decimal", ["precise", "string"])
@pytest.mark.parametrize("bigint", ["long", "string"])
@pytest.mark.parametrize("ext", ["true", "false"])
def test_every_type_decodes_with_confluent_deserializer(
    registry: LocalSchemaRegistry, decimal: str, bigint: str, ext: str
) -> None:
    opts = _options(
        registry,
        **{
            "enable-tidb-extension": ext,
            "avro-decimal-handling-mode": decimal,
            "avro-bigint-unsigned-handling-mode": bigint,
        },
    )
    enc = AvroEncoder(opts)
    table = all_types_table()
    topic = f"types.{decimal}.{bigint}.{ext}"
    row = all_types_row(7)
    [(key, value)] = enc.encode_row(_insert(table, row), table, topic)
    assert key is not None and value is not None
    assert key[0] == 0 and value[0] == 0  # magic byte
    k, v = _decode(registry, topic, key, value)
    assert k == {"id": 7}
    want = _expected_avro(table, row, decimal, bigint)
    if ext == "true":
        want.update({"_tidb_op": "c", "_tidb_commit_ts": TS, "_tidb_commit_physical_time": 1640007049196})
    assert v == want
    # subjects follow TopicNameStrategy with '.' -> '_'
    subjects = _client(registry).get_subjects()
    assert (
        f"types_{decimal}_{bigint}_{ext}-key" in subjects
        and f"types_{decimal}_{bigint}_{ext}-value" in subjects
    )
    # the schema id in the header is the registered one
    sid, _ = split_wire(value)
    latest = _client(registry).get_latest_version(f"types_{decimal}_{bigint}_{ext}-value")
    assert latest.schema_id == sid


def test_nulls_decode(registry: LocalSchemaRegistry) -> None:
    enc = AvroEncoder(_options(registry))
    table = all_types_table()
    row = (1,) + (None,) * len(ALL_TYPES)
    [(key, value)] = enc.encode_row(_insert(table, row), table, "nulls")
    _, v = _decode(registry, "nulls", key, value)
    assert v == {"id": 1, **{c.name: None for c, _ in ALL_TYPES}}


def test_insert_update_delete_and_key_change(registry: LocalSchemaRegistry) -> None:
    enc = AvroEncoder(_options(registry, **{"enable-tidb-extension": "true"}))
    t = person()
    topic = "dml_test_person"
    ins = (1, "Alice", 5, Decimal("12.50"), 5, "b")
    upd = (1, "Bob", 5, Decimal("-0.01"), 65, "c")
    moved = (2, "Bob", 5, Decimal("1.00"), 65, "a")

    [(k1, v1)] = enc.encode_row(_insert(t, ins), t, topic)
    k, v = _decode(registry, topic, k1, v1)
    assert k == {"id": 1}
    assert v is not None and v["_tidb_op"] == "c" and v["price"] == Decimal("12.50") and v["b"] == b"\x05"

    [(k2, v2)] = enc.encode_row(RowChange("U", "test", "person", 100, TS + 1, ins, upd), t, topic)
    k, v = _decode(registry, topic, k2, v2)
    assert k == {"id": 1} and v is not None
    assert (v["_tidb_op"], v["name"], v["price"], v["b"], v["_tidb_commit_ts"]) == (
        "u",
        "Bob",
        Decimal("-0.01"),
        b"A",
        TS + 1,
    )

    # a PK change is split: tombstone of the old key, then an insert of the new row
    out = enc.encode_row(RowChange("U", "test", "person", 100, TS + 2, upd, moved), t, topic)
    assert len(out) == 2
    (tk, tv), (nk, nv) = out
    assert tv is None and _decode(registry, topic, tk, None)[0] == {"id": 1}
    k, v = _decode(registry, topic, nk, nv)
    assert k == {"id": 2} and v is not None and v["_tidb_op"] == "c" and v["e"] == "a"

    # DELETE: key + null value, never _tidb_op "d"
    [(k3, v3)] = enc.encode_row(RowChange("D", "test", "person", 100, TS + 3, moved, None), t, topic)
    assert v3 is None and _decode(registry, topic, k3, None)[0] == {"id": 2}

    # our own decoder gives the rows back in RowChange conventions
    dec = AvroDecoder(_client(registry))
    row = dec.decode(k2, v2)
    assert row is not None and getattr(row, "op", None) == "U"
    assert row.value == dict(zip(t.column_names, upd, strict=True))  # type: ignore[union-attr]
    assert (row.schema, row.table, row.commit_ts) == ("test", "person", TS + 1)  # type: ignore[union-attr]
    gone = dec.decode(k3, None)
    assert gone is not None and gone.op == "D" and gone.key == {"id": 2}  # type: ignore[union-attr]


def test_unsigned_bigint_long_mode_wraps(registry: LocalSchemaRegistry) -> None:
    enc = AvroEncoder(_options(registry))
    t = person()
    [(_, v)] = enc.encode_row(_insert(t, (1, None, 2**64 - 1, None, None, None)), t, "ubig_wrap")
    assert _decode(registry, "ubig_wrap", None, v)[1]["ubig"] == -1
    dec = AvroDecoder(_client(registry)).decode(None, v)
    assert dec is not None and dec.value["ubig"] == 2**64 - 1  # type: ignore[union-attr]


def test_table_version_change_registers_new_schema_version(registry: LocalSchemaRegistry) -> None:
    enc = AvroEncoder(_options(registry))
    t1 = person()
    topic = "evolve.person"
    enc.encode_row(_insert(t1, (1, "a", 0, None, None, None)), t1, topic)
    # cached per (subject, schema): the same version does not register again
    enc.encode_row(_insert(t1, (2, "b", 0, None, None, None)), t1, topic)
    client = _client(registry)
    assert client.get_versions("evolve_person-value") == [1]

    # ADD COLUMN nullable: BACKWARD-compatible, a new version
    t2 = replace(
        t1, columns=(*t1.columns, ColumnInfo("note", "text", charset="utf8mb4")), version=200, _pos={}
    )
    [(k, v)] = enc.encode_row(_insert(t2, (3, "c", 0, None, None, None, "hi")), t2, topic)
    assert client.get_versions("evolve_person-value") == [1, 2]
    assert client.get_versions("evolve_person-key") == [1]  # the key did not change
    assert _decode(registry, topic, k, v)[1]["note"] == "hi"

    # ADD COLUMN NOT NULL without default: the new schema cannot read old data -> refused
    t3 = replace(t2, columns=(*t2.columns, ColumnInfo("must", "int", nullable=False)), version=300, _pos={})
    with pytest.raises(SinkError) as err:
        enc.encode_row(_insert(t3, (4, "d", 0, None, None, None, None, 1)), t3, topic)
    msg = str(err.value)
    assert "evolve_person-value" in msg and "HTTP 409" in msg
    assert "incompatible with an earlier schema" in msg and "'must'" in msg
    assert client.get_versions("evolve_person-value") == [1, 2]

    # with the subject's level relaxed to NONE the same change registers
    client.set_compatibility("evolve_person-value", "NONE")
    enc.encode_row(_insert(t3, (4, "d", 0, None, None, None, None, 1)), t3, topic)
    assert client.get_versions("evolve_person-value") == [1, 2, 3]


def test_forward_and_full_levels_through_the_encoder(registry: LocalSchemaRegistry) -> None:
    client = _client(registry)
    base = TableInfo(
        "lv",
        "t",
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("a", "int", nullable=False)),
        indexes=(IndexInfo("PRIMARY", ("id",), True, True),),
        version=1,
    )
    enc = AvroEncoder(_options(registry))
    enc.encode_row(_insert(base, (1, 1)), base, "levels")
    client.set_compatibility("levels-value", "FORWARD")
    # dropping NOT NULL column a: old readers need a without a default -> FORWARD refuses
    dropped = replace(base, columns=base.columns[:1], version=2, _pos={})
    with pytest.raises(SinkError, match="FORWARD"):
        enc.encode_row(_insert(dropped, (2,)), dropped, "levels")
    client.set_compatibility("levels-value", "FULL")
    added = replace(base, columns=(*base.columns, ColumnInfo("b", "int")), version=3, _pos={})
    enc.encode_row(_insert(added, (3, 3, None)), added, "levels")  # nullable with null default: FULL ok
    assert client.get_versions("levels-value") == [1, 2]


def test_table_without_handle_key_sends_no_key(registry: LocalSchemaRegistry) -> None:
    enc = AvroEncoder(_options(registry))
    t = TableInfo("nk", "t", (ColumnInfo("a", "int"),), version=1)
    [(k, v)] = enc.encode_row(_insert(t, (5,)), t, "nokey")
    assert k is None and _decode(registry, "nokey", None, v)[1] == {"a": 5}


def test_registry_check() -> None:
    with LocalSchemaRegistry() as reg:
        check_schema_registry(reg.url)
        check_schema_registry(reg.url + "/")
        with pytest.raises(ConfigError, match="Unexpected response from Schema Registry"):
            check_schema_registry(reg.url + "/subjects")
    port = free_port()
    with pytest.raises(ConfigError, match=f"cannot reach schema-registry 'http://127.0.0.1:{port}'"):
        check_schema_registry(f"http://127.0.0.1:{port}", timeout=2)


def test_registry_down_is_transient(tmp_path: Any) -> None:
    reg = LocalSchemaRegistry(tmp_path)
    reg.start()
    url = reg.url
    reg.stop()
    enc = AvroEncoder(AvroOptions(url), SchemaRegistryClient({"url": url, "max.retries": 0, "timeout": 2}))
    t = person()
    with pytest.raises(SinkUnavailable, match="cannot reach schema registry"):
        enc.encode_row(_insert(t, (1, None, 0, None, None, None)), t, "down")


def test_restart_keeps_ids_and_old_messages_decode(tmp_path: Any) -> None:
    t = person()
    reg = LocalSchemaRegistry(tmp_path)
    reg.start()
    try:
        enc = AvroEncoder(_options(reg))
        [(k, v)] = enc.encode_row(_insert(t, (9, "x", 1, Decimal("1.23"), 1, "a")), t, "durable")
        assert k is not None and v is not None
        first_id = split_wire(v)[0]
    finally:
        reg.stop()
    reg2 = LocalSchemaRegistry(tmp_path, port=free_port())
    reg2.start()
    try:
        # a fresh client decodes the message written before the restart
        _, got = _decode(reg2, "durable", k, v)
        assert got["id"] == 9 and got["price"] == Decimal("1.23")
        # re-registering the same schema gives the same id; new schemas get fresh ids
        enc2 = AvroEncoder(_options(reg2))
        [(_, v2)] = enc2.encode_row(_insert(t, (10, "y", 1, None, None, None)), t, "durable")
        assert v2 is not None and split_wire(v2)[0] == first_id
        other = replace(t, columns=(*t.columns, ColumnInfo("z", "int")), version=101, _pos={})
        [(_, v3)] = enc2.encode_row(_insert(other, (1, None, 0, None, None, None, None)), other, "durable")
        assert v3 is not None and split_wire(v3)[0] > first_id
        assert httpx.get(f"{reg2.url}/subjects/durable-value/versions").json() == [1, 2]
    finally:
        reg2.close()


def test_encode_rate(registry: LocalSchemaRegistry) -> None:
    enc = AvroEncoder(_options(registry, **{"enable-tidb-extension": "true"}))
    t = person()
    n = 20000
    rows = [
        _insert(t, (i, f"name-{i}", i, Decimal(i) / 100, i & 0xFF, "abc"[i % 3]), TS + i) for i in range(n)
    ]
    enc.encode_row(rows[0], t, "rate")  # registration outside the timing
    start = time.perf_counter()
    for r in rows:
        enc.encode_row(r, t, "rate")
    rate = n / (time.perf_counter() - start)
    print(f"avro encode rate: {rate:,.0f} rows/s")
    assert rate > 2000
