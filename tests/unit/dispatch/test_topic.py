"""TopicDispatcher: tiflow's expression_test.go cases, Avro rule, static topics, pickling."""

from __future__ import annotations

import pickle

import pytest

from sparkcdc.dispatch.topic import (
    KAFKA_TOPIC_MAX_LENGTH,
    TopicDispatcher,
    is_hard_coded,
    sanitize_topic_name,
    substitute,
    validate_topic_expression,
)
from sparkcdc.errors import ConfigError

# (expression, schema, table, expected topic) — valid cases of TestSubstituteTopicExpression
SUBSTITUTE_CASES = [
    ("{schema}", "abc", "", "abc"),
    ("abc{schema}", "def", "", "abcdef"),
    ("{schema}def", "hello", "", "hellodef"),
    ("abc{schema}def", "hello", "", "abchellodef"),
    ("abc{schema}", "DEF", "", "abcDEF"),
    ("abc._-def{schema}abc", "HELLO", "", "abc._-defHELLOabc"),
    ("abc_def{schema}", "!@#$%^&*()_+.{}", "", "abc_def____________.__"),
    ("abc{schema}def", "你好", "", "abc__def"),
    ("{schema}_{table}", "hello", "world", "hello_world"),
    ("{schema}_{table}", "HELLO", "WORLD", "HELLO_WORLD"),
    ("{schema}_{table}", "hello", "!@#$%^&*", "hello_________"),
    ("{schema}_{table}", "()_+.{}", "world", "____.___world"),
    ("ab.-c_{schema}_{table}_de.-f", "hello", "WORLD", "ab.-c_hello_WORLD_de.-f"),
    ("abc_{schema}de._-{table}_fhi", "hello", "world", "abc_hellode._-world_fhi"),
    ("{schema}_{table}", "你好", "世界", "_____"),
    ("{schema}", ".", "", "_"),
    ("{schema}", "..", "", "__"),
    ("prefix_{table}", "test", "table1", "prefix_table1"),
    ("prefix_{schema}", "test", "abc", "prefix_test"),
]

INVALID_EXPRESSIONS = [
    "{{{{schema}",
    "你好{schema}",
    "{schema}}}}}",
    "{xxx}",
    "abc{sch}",
    "{sch}_{tab}",
    "{schema}!@#$%^&*()+{}你好{table}",
    "{table}_{schema}",  # {table} must come after {schema}
    "a b",
]


@pytest.mark.parametrize(("expression", "schema", "table", "expected"), SUBSTITUTE_CASES)
def test_substitute(expression: str, schema: str, table: str, expected: str) -> None:
    validate_topic_expression(expression)
    assert substitute(expression, schema, table) == expected
    assert TopicDispatcher(expression, "default").topic(schema, table) == expected


@pytest.mark.parametrize("expression", INVALID_EXPRESSIONS)
def test_invalid_expression(expression: str) -> None:
    with pytest.raises(ConfigError, match="invalid topic expression") as info:
        TopicDispatcher(expression, "default")
    assert repr(expression) in str(info.value)


def test_truncated_to_kafka_limit() -> None:
    long_table = "t" * 300
    topic = TopicDispatcher("cdc_{schema}_{table}", "d").topic("db", long_table)
    assert len(topic) == KAFKA_TOPIC_MAX_LENGTH == 249
    assert topic == ("cdc_db_" + long_table)[:249]
    # exactly 249 characters is kept as is
    assert sanitize_topic_name("x" * 249) == "x" * 249


def test_per_rune_replacement_keeps_case() -> None:
    # one '_' per character (rune), not per UTF-8 byte
    assert substitute("{schema}", "Ünïcödé", "") == "_n_c_d_"
    assert substitute("{schema}.{table}", "A😀B", "c") == "A_B.c"


def test_empty_expression_is_the_static_default_topic() -> None:
    d = TopicDispatcher("", "my-default")
    assert d.is_static
    assert d.topic("any", "table") == "my-default"
    # the default topic comes from the sink URI and is never checked against the Avro rule
    assert TopicDispatcher("", "plain", protocol="avro").topic("a", "b") == "plain"


def test_hard_coded_topic() -> None:
    assert is_hard_coded("orders.v1-x_y")
    assert not is_hard_coded("{schema}")
    d = TopicDispatcher("orders", "default")
    assert d.is_static
    assert d.topic("s", "t") == "orders"
    assert TopicDispatcher(".", "default").topic("s", "t") == "_"


def test_avro_requires_schema_and_table() -> None:
    ok = TopicDispatcher("avro_{schema}_{table}", "d", protocol="avro")
    assert ok.topic("db", "t") == "avro_db_t"
    for bad in ["{schema}", "prefix_{table}", "hard_coded", "{schema}{table}x!"]:
        with pytest.raises(ConfigError, match=r"topic rule for Avro must contain \{schema\} and \{table\}"):
            TopicDispatcher(bad, "d", protocol="avro")
    # flat-avro is Avro too; other protocols accept a schema-only topic
    with pytest.raises(ConfigError, match="Avro"):
        validate_topic_expression("{schema}", "flat-avro")
    validate_topic_expression("{schema}", "canal-json")


def test_pickle_round_trip() -> None:
    for d in [
        TopicDispatcher("", "dflt"),
        TopicDispatcher("k_{schema}_{table}", "dflt"),
        TopicDispatcher("x", "d"),
    ]:
        e = pickle.loads(pickle.dumps(d))
        assert e.topic("Db", "T!") == d.topic("Db", "T!")
        assert e.is_static == d.is_static
