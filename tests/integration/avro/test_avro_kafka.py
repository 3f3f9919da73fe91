"""avro end to end through the Kafka sink: a real broker (Tansu) and a real registry process."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo, compose_ts
from sparkcdc.registry.local import LocalSchemaRegistry
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.kafka.producer import close_all_producers
from tests.integration.kafka.conftest import consume_all, run_batch

pytestmark = pytest.mark.integration

BASE_MS = 1_700_000_000_000
RULES = '[sink]\ndispatchers = [{matcher = ["*.*"], topic = "{schema}_{table}"}]\n'


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalTansu]:
    with LocalTansu() as b:
        yield b
    close_all_producers(1)


def ts(i: int) -> int:
    return compose_ts(BASE_MS + i, 0)


def table(schema: str, name: str) -> TableInfo:
    return TableInfo(
        schema,
        name,
        (
            ColumnInfo("id", "int", nullable=False),
            ColumnInfo("name", "varchar", length=32, charset="utf8mb4"),
            ColumnInfo("ubig", "bigint", unsigned=True),
            ColumnInfo("price", "decimal", precision=12, scale=3),
            ColumnInfo("flags", "bit", length=16),
            ColumnInfo("kind", "enum", elements=("a", "b")),
        ),
        indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        version=1,
    )


def row(i: int, name: str = "") -> tuple[Any, ...]:
    return (i, name or f"n{i}", 2**64 - i, Decimal(i) / 8, i * 3, "ab"[i % 2])


def apply(messages: list[Any], registry: str) -> dict[int, dict[str, Any]]:
    """Replay decoded messages like a downstream upsert/delete consumer, keyed by the Avro key."""
    de = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    state: dict[int, dict[str, Any]] = {}
    for m in messages:
        ctx_k = SerializationContext(m.topic(), MessageField.KEY)
        key = de(m.key(), ctx_k)
        if m.value() is None:
            state.pop(key["id"], None)
            continue
        value = de(m.value(), SerializationContext(m.topic(), MessageField.VALUE))
        assert value["_tidb_op"] in ("c", "u")
        state[key["id"]] = value
    return state


def test_dml_through_kafka_decodes_to_the_upstream_rows(broker: LocalTansu) -> None:
    schema = "s" + uuid.uuid4().hex[:8]
    with LocalSchemaRegistry() as reg:
        uri = broker.sink_uri(
            f"{schema}-default", f"protocol=flat-avro&schema-registry={reg.url}&enable-tidb-extension=true"
        )
        sink = create_sink(uri, ReplicaConfig.from_toml(RULES), "cf")
        sink.check()
        t1, t2 = table(schema, "person"), table(schema, "other")
        items: list[tuple[RowChange, TableInfo]] = []
        for i in range(1, 31):
            t = t1 if i % 2 else t2
            items.append((RowChange("I", schema, t.table, 1, ts(i), None, row(i)), t))
        items.append((RowChange("U", schema, "person", 1, ts(40), row(1), row(1, "renamed")), t1))
        items.append((RowChange("D", schema, "person", 1, ts(41), row(3), None), t1))
        items.append((RowChange("U", schema, "other", 1, ts(42), row(2), row(200)), t2))  # PK change
        run_batch(sink, items, 1, ts(42))

        expected = {
            "person": {i: row(i) for i in range(1, 31, 2) if i != 3} | {1: row(1, "renamed")},
            "other": {i: row(i) for i in range(2, 31, 2) if i != 2} | {200: row(200)},
        }
        for name, want in expected.items():
            topic = f"{schema}_{name}"
            got = consume_all(broker.bootstrap, topic, sink.partitions.get(topic, 3))
            msgs = [m for p in sorted(got) for m in got[p]]
            state = apply(msgs, reg.url)
            assert set(state) == set(want)
            for pk, values in want.items():
                v = state[pk]
                assert (v["id"], v["name"], v["price"], v["kind"]) == (
                    values[0],
                    values[1],
                    values[3],
                    values[5],
                )
                assert v["ubig"] == values[2] - 2**64  # long mode: cast to int64
                assert int.from_bytes(v["flags"], "big") == values[4]
        subjects = SchemaRegistryClient({"url": reg.url}).get_subjects()
        assert f"{schema}_person-value" in subjects and f"{schema}_other-key" in subjects
        sink.close()


def test_default_topic_replicates_exactly_one_table(broker: LocalTansu) -> None:
    schema = "s" + uuid.uuid4().hex[:8]
    with LocalSchemaRegistry() as reg:
        sink = create_sink(
            broker.sink_uri(f"{schema}-only", f"protocol=avro&schema-registry={reg.url}"),
            ReplicaConfig(),
            "cf",
        )
        sink.check()
        t1, t2 = table(schema, "first"), table(schema, "second")
        run_batch(sink, [(RowChange("I", schema, "first", 1, ts(1), None, row(1)), t1)], 1, ts(1))
        # a second table in the same topic means a second record schema under the same subject
        with pytest.raises(SinkError, match=r"HTTP 409.*NAME_MISMATCH"):
            run_batch(sink, [(RowChange("I", schema, "second", 1, ts(2), None, row(2)), t2)], 2, ts(2))
        sink.close()


@pytest.mark.parametrize("topic", ["{schema}", "fixed", "{table}"])
def test_invalid_topic_rule_is_refused(broker: LocalTansu, topic: str) -> None:
    toml = f'[sink]\ndispatchers = [{{matcher = ["*.*"], topic = "{topic}"}}]\n'
    with pytest.raises(ConfigError, match=r"topic rule for Avro must contain \{schema\} and \{table\}"):
        create_sink(
            broker.sink_uri("x", "protocol=avro&schema-registry=http://127.0.0.1:1"),
            ReplicaConfig.from_toml(toml),
        )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("protocol=avro", 'Avro protocol requires parameter "schema-registry"'),
        ("protocol=avro&schema-registry=http://h:1&avro-decimal-handling-mode=x", "could only be"),
        ("protocol=avro&schema-registry=http://h:1&avro-bigint-unsigned-handling-mode=x", "could only be"),
        ("protocol=avro&schema-registry=http://h:1&enable-tidb-extension=maybe", "expected true or false"),
    ],
)
def test_cli_level_option_errors(broker: LocalTansu, query: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        create_sink(broker.sink_uri("x", query), ReplicaConfig())


def test_sink_throughput_with_precise_decimals(broker: LocalTansu) -> None:
    schema = "s" + uuid.uuid4().hex[:8]
    n = 20000
    with LocalSchemaRegistry() as reg:
        uri = broker.sink_uri(
            f"{schema}-d", f"protocol=avro&schema-registry={reg.url}&enable-tidb-extension=true"
        )
        sink = create_sink(uri, ReplicaConfig.from_toml(RULES), "cf")
        sink.check()
        t = table(schema, "bench")
        items = [(RowChange("I", schema, "bench", 1, ts(i // 100), None, row(i)), t) for i in range(1, n + 1)]
        run_batch(sink, items[:1], 1, ts(0))  # topic creation and schema registration outside the timing
        started = time.perf_counter()
        written = run_batch(sink, items[1:], 2, ts(n))
        rate = (n - 1) / (time.perf_counter() - started)
        print(f"avro end-to-end through the Kafka sink (precise decimals): {rate:,.0f} rows/s")
        assert sum(m["rows"] for m in written) == n - 1
        got = consume_all(broker.bootstrap, f"{schema}_bench", 3, timeout=60)
        assert sum(len(v) for v in got.values()) == n
        sink.close()
