"""EventRouter: tiflow's event_router_test.go (rule order, topics, DDL topics, partitions), verify, pickling."""

from __future__ import annotations

import pickle
import zlib

import pytest

from sparkcdc.config.replica import DispatchRule, ReplicaConfig
from sparkcdc.dispatch import EventRouter
from sparkcdc.errors import ConfigError, FilterRuleError
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, RowChange, TableInfo


def config(*rules: DispatchRule, case_sensitive: bool = False) -> ReplicaConfig:
    cfg = ReplicaConfig(case_sensitive=case_sensitive)
    cfg.sink.dispatchers = list(rules)
    return cfg


def tiflow_rules() -> list[DispatchRule]:
    """newReplicaConfig4DispatcherTest without rule-1 (an unknown rule, refused here)."""
    return [
        DispatchRule(matcher=["test_default1.*"], partition="default"),
        DispatchRule(matcher=["test_table.*"], partition="table", topic="hello_{schema}_world"),
        DispatchRule(matcher=["test_index_value.*"], partition="index-value", topic="{schema}_world"),
        DispatchRule(matcher=["test.*"], partition="rowid", topic="hello_{schema}"),
        DispatchRule(matcher=["*.*", "!*.test"], partition="ts", topic="{schema}_{table}"),
        DispatchRule(matcher=["hard_code_schema.*"], partition="default", topic="hard_code_topic"),
    ]


def tbl(schema: str, name: str, cols: tuple[str, ...] = ("id",), pk: tuple[str, ...] = ("id",)) -> TableInfo:
    return TableInfo(
        schema,
        name,
        tuple(ColumnInfo(c, "int") for c in cols),
        (IndexInfo("PRIMARY", pk, unique=True, primary=True),) if pk else (),
    )


def row(t: TableInfo, *values: object, commit_ts: int = 1) -> RowChange:
    return RowChange("I", t.schema, t.table, t.version, commit_ts, None, tuple(values))


def test_default_router_sends_everything_to_default_topic_by_table() -> None:
    r = EventRouter(ReplicaConfig(), "test", "canal-json")
    route = r.match("test", "test")
    assert route.topic.is_static and route.partition.kind == "table"
    assert r.topic_for("test", "test") == "test"
    assert r.topic_for("any", "thing") == "test"


def test_unknown_partition_rule_is_refused() -> None:
    cfg = config(
        *tiflow_rules()[:1], DispatchRule(matcher=["test_default2.*"], partition="unknown-dispatcher")
    )
    with pytest.raises(
        ConfigError, match=r"sink.dispatchers\[1\]: unknown partition rule 'unknown-dispatcher'"
    ):
        EventRouter(cfg, "test", "canal-json")


def test_rule_order_first_match_wins() -> None:
    r = EventRouter(config(*tiflow_rules()), "", "canal-json")
    # no rule matches "sbs.test" (rule-5 excludes *.test): the implicit default rule
    route = r.match("sbs", "test")
    assert route.topic.is_static and route.partition.kind == "table"
    assert route is r.routes[-1]
    assert r.match("test_default1", "test").partition.kind == "table"
    assert r.match("test_table", "test").partition.kind == "table"
    assert not r.match("test_table", "test").topic.is_static
    assert r.match("test_index_value", "test").partition.kind == "index-value"
    assert r.match("test", "table1").partition.kind == "index-value"
    assert r.match("sbs", "table2").partition.kind == "ts"
    # rule-5 (*.*) comes before rule-6, so rule-6 only applies to the *.test tables rule-5 leaves out
    assert r.match("hard_code_schema", "t").partition.kind == "ts"
    assert r.topic_for("hard_code_schema", "t") == "hard_code_schema_t"
    assert r.match("hard_code_schema", "test").partition.kind == "table"
    assert r.topic_for("hard_code_schema", "test") == "hard_code_topic"
    # reordered, the hard-coded topic wins
    rules = tiflow_rules()
    r2 = EventRouter(config(rules[5], *rules[:5]), "dflt", "canal-json")
    assert r2.topic_for("hard_code_schema", "t") == "hard_code_topic"


def test_all_topics() -> None:
    # tiflow TestGetActiveTopics
    r = EventRouter(config(*tiflow_rules()), "test", "canal-json")
    names = [
        ("test_default1", "table"),
        ("test_table", "table"),
        ("test_index_value", "table"),
        ("test", "table"),
        ("sbs", "table"),
    ]
    assert r.all_topics(names) == {
        "test",
        "hello_test_table_world",
        "test_index_value_world",
        "hello_test",
        "sbs_table",
    }
    assert r.all_topics([tbl("sbs", "x")]) == {"test", "sbs_x"}
    assert r.all_topics([]) == {"test"}


def test_topic_for_row_change() -> None:
    # tiflow TestGetTopicForRowChange
    r = EventRouter(config(*tiflow_rules()), "test", "canal-json")
    assert r.topic_for("test_default1", "table") == "test"
    assert r.topic_for("test_table", "table") == "hello_test_table_world"
    assert r.topic_for("test_index_value", "table") == "test_index_value_world"
    assert r.topic_for("a", "table") == "a_table"


def test_route_partitions() -> None:
    # tiflow TestGetPartitionForRowChange (default is now "table": crc32 of the names)
    r = EventRouter(config(*tiflow_rules()), "test", "canal-json")
    seen: list[str] = []

    def counts(topic: str) -> int:
        seen.append(topic)
        return 16

    t = tbl("test_default1", "table")
    assert r.route(row(t, 1), t, counts) == ("test", zlib.crc32(b"test_default1table") % 16)
    assert r.route(row(t, 1), t, counts) == ("test", 14)
    t = tbl("test_table", "table")
    assert r.route(row(t, 1), t, counts) == ("hello_test_table_world", 15)
    t = tbl("test_index_value", "table", cols=("a", "b"), pk=("a",))
    assert r.route(row(t, 11, 22), t, lambda _: 10) == ("test_index_value_world", 1)
    t = tbl("a", "table")
    assert r.route(row(t, 5, commit_ts=1), t, lambda _: 2) == ("a_table", 1)
    assert seen == ["test", "test", "hello_test_table_world"]


def ddl(
    schema: str, table: str, kind: DDLType, old_schema: str | None = None, old_table: str | None = None
) -> DDLEvent:
    return DDLEvent("q", schema, table, kind, 1, 1, old_schema=old_schema, old_table=old_table)


def test_topic_for_ddl() -> None:
    # tiflow TestGetTopicForDDL
    r = EventRouter(
        config(
            DispatchRule(matcher=["test.*"], partition="rowid", topic="hello_{schema}"),
            DispatchRule(matcher=["*.*", "!*.test"], partition="ts", topic="{schema}_{table}"),
        ),
        "test",
        "open-protocol",
    )
    assert r.topic_for_ddl(ddl("test", "", DDLType.CREATE_SCHEMA)) == "test"
    assert r.topic_for_ddl(ddl("test", "", DDLType.DROP_SCHEMA)) == "test"
    assert r.topic_for_ddl(ddl("other", "", DDLType.ALTER_SCHEMA)) == "test"
    assert r.topic_for_ddl(ddl("test", "tb1", DDLType.CREATE_TABLE)) == "hello_test"
    assert r.topic_for_ddl(ddl("test", "tb1", DDLType.DROP_TABLE)) == "hello_test"
    assert r.topic_for_ddl(ddl("test1", "view1", DDLType.DROP_VIEW)) == "test1_view1"
    assert r.topic_for_ddl(ddl("test1", "tb1", DDLType.ALTER_TABLE)) == "test1_tb1"
    # a rename goes to the old table's topic
    assert r.topic_for_ddl(ddl("test1", "tb2", DDLType.RENAME_TABLE, "test1", "tb1")) == "test1_tb1"
    assert r.topic_for_ddl(ddl("new", "tb2", DDLType.RENAME_TABLE, None, "tb1")) == "new_tb1"


def test_ddl_partitions_by_protocol() -> None:
    # tiflow GetDLLDispatchRuleByProtocol: canal/canal-json → partition 0, others broadcast
    assert EventRouter(ReplicaConfig(), "t", "canal-json").ddl_partitions(4) == [0]
    assert EventRouter(ReplicaConfig(), "t", "canal").ddl_partitions(4) == [0]
    assert EventRouter(ReplicaConfig(), "t", "open-protocol").ddl_partitions(3) == [0, 1, 2]


def test_matchers_follow_case_sensitivity() -> None:
    rule = DispatchRule(matcher=["Shop.Orders"], partition="ts", topic="orders")
    insensitive = EventRouter(config(rule), "d", "canal-json")
    assert insensitive.topic_for("shop", "ORDERS") == "orders"
    sensitive = EventRouter(config(rule, case_sensitive=True), "d", "canal-json")
    assert sensitive.topic_for("shop", "ORDERS") == "d"
    assert sensitive.topic_for("Shop", "Orders") == "orders"


def test_bad_matcher_and_topic_are_refused() -> None:
    with pytest.raises(
        FilterRuleError, match=r"sink.dispatchers\[0\].matcher: invalid table filter rule 'a.b.c'"
    ):
        EventRouter(config(DispatchRule(matcher=["a.b.c"])), "d", "canal-json")
    with pytest.raises(ConfigError, match=r"sink.dispatchers\[0\]: matcher is empty"):
        EventRouter(config(DispatchRule(matcher=[])), "d", "canal-json")
    with pytest.raises(ConfigError, match=r"sink.dispatchers\[0\].topic: invalid topic expression '\{bad\}'"):
        EventRouter(config(DispatchRule(matcher=["*.*"], topic="{bad}")), "d", "canal-json")


def test_avro_topic_rules() -> None:
    with pytest.raises(ConfigError, match=r"topic rule for Avro must contain \{schema\} and \{table\}"):
        EventRouter(config(DispatchRule(matcher=["*.*"], topic="{schema}")), "d", "avro")
    r = EventRouter(
        config(DispatchRule(matcher=["db.*"], topic="{schema}_{table}")), "static-default", "avro"
    )
    assert r.topic_for("db", "t") == "db_t"
    assert r.topic_for("other", "t") == "static-default"  # the static default topic is not checked


def test_verify_fixed_partitions_and_tables() -> None:
    rules = [
        DispatchRule(matcher=["fixed.*"], partition="5", topic="fixed_topic"),
        DispatchRule(matcher=["dyn.*"], partition="2", topic="dyn_{table}"),
        DispatchRule(matcher=["idx.*"], partition="index-value", index="uk"),
    ]
    r = EventRouter(config(*rules), "d", "canal-json")
    r.verify({"fixed_topic": 6})
    with pytest.raises(ConfigError, match=r"partition 5 .* out of range: the topic has 3 partition"):
        r.verify({"fixed_topic": 3})
    with pytest.raises(ConfigError, match=r"partition 2 .* out of range"):
        r.verify({"dyn_t": 2}, [tbl("dyn", "t")])
    r.verify({"dyn_t": 3, "unrelated": 1}, [tbl("dyn", "t")])
    # one partition-num for every topic
    r.verify(6)
    with pytest.raises(ConfigError, match="out of range"):
        r.verify(4)  # partition 5 does not exist anywhere
    # index-value index must exist and be unique on the replicated tables
    good = TableInfo("idx", "t", (ColumnInfo("id", "int"),), (IndexInfo("uk", ("id",), unique=True),))
    bad = TableInfo("idx", "u", (ColumnInfo("id", "int"),), (IndexInfo("uk", ("id",)),))
    r.verify({}, [good])
    with pytest.raises(ConfigError, match=r"index is not unique when verify the table, table: idx\.u"):
        r.verify({}, [bad])


def test_pickle_round_trip() -> None:
    r = EventRouter(config(*tiflow_rules()), "test", "canal-json")
    t = tbl("test_index_value", "table", cols=("a", "b"), pk=("a",))
    assert r.route(row(t, 11, 22), t, lambda _: 10) == ("test_index_value_world", 1)  # fill caches
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.route(row(t, 11, 22), t, lambda _: 10) == ("test_index_value_world", 1)
    for schema, table in [("test_table", "x"), ("sbs", "test"), ("a", "b"), ("TEST", "T")]:
        assert r2.topic_for(schema, table) == r.topic_for(schema, table)
    assert r2.default_topic == "test" and r2.protocol == "canal-json"
