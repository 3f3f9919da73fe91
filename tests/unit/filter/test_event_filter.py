"""Event filters: which row changes and DDLs a ``[[filter.event-filters]]`` rule drops.

Matching follows TiCDC (``pkg/filter/sql_event_filter.go``, ``pkg/binlog-filter``):
rules apply to the tables their matcher selects, any rule that says "ignore"
drops the event, ``ignore-sql`` is searched case-insensitively in DDL text, and
``alter table`` covers every ALTER TABLE sub-kind. The planner drops a filtered
DDL after the schema history applied it; the segment reader drops filtered rows.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from sparkcdc.capture.ddl_kind import ddl_event_kinds
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import TxnInfo
from sparkcdc.capture.txnstream import QueryItem
from sparkcdc.errors import FilterRuleError
from sparkcdc.event_filter import DDL_KINDS, EVENT_KINDS, EventFilter, compile_rule, rule_specs
from sparkcdc.model import DDLEvent, DDLType, RowChange


def _filter(*rules: dict[str, Any], case_sensitive: bool = False) -> EventFilter:
    return EventFilter(list(rules), case_sensitive)


def _ddl(query: str, kind: DDLType, schema: str = "db", table: str = "t", **kw: Any) -> DDLEvent:
    return DDLEvent(query, schema, table, kind, 100, 100, None, **kw)


def _kinds(query: str, kind: DDLType = DDLType.ALTER_TABLE) -> tuple[str, ...]:
    return ddl_event_kinds(_ddl(query, kind))


# -- rows ----------------------------------------------------------------------------------------


def test_deletes_of_one_table_only() -> None:
    f = _filter({"matcher": ["db.orders"], "ignore-event": ["delete"]})
    assert f.ignore_row("db", "orders", "D")
    assert not f.ignore_row("db", "orders", "I")
    assert not f.ignore_row("db", "orders", "U")
    assert not f.ignore_row("db", "items", "D")
    assert f.ignored_ops("db", "orders") == frozenset({"D"})


@pytest.mark.parametrize(
    ("events", "ops"),
    [
        (["insert"], {"I"}),
        (["update", "delete"], {"U", "D"}),
        (["all dml"], {"I", "U", "D"}),
        (["all ddl"], set()),
        (["drop table"], set()),
    ],
)
def test_row_kinds(events: list[str], ops: set[str]) -> None:
    f = _filter({"matcher": ["*.*"], "ignore-event": events})
    assert f.ignored_ops("db", "t") == frozenset(ops)


def test_any_matching_rule_drops() -> None:
    f = _filter(
        {"matcher": ["db.*"], "ignore-event": ["insert"]},
        {"matcher": ["db.t"], "ignore-event": ["delete"]},
        {"matcher": ["other.*"], "ignore-event": ["update"]},
    )
    assert f.ignored_ops("db", "t") == frozenset({"I", "D"})
    assert f.ignored_ops("db", "u") == frozenset({"I"})
    assert f.ignored_ops("other", "t") == frozenset({"U"})
    assert f.ignored_ops("x", "y") == frozenset()


def test_matcher_is_a_table_filter_with_exclusions() -> None:
    f = _filter({"matcher": ["db.*", "!db.keep"], "ignore-event": ["delete"]})
    assert f.ignore_row("db", "t", "D")
    assert not f.ignore_row("db", "keep", "D")


def test_matcher_follows_case_sensitive() -> None:
    rule = {"matcher": ["Db.Orders"], "ignore-event": ["delete"]}
    assert _filter(rule).ignore_row("db", "orders", "D")
    assert not _filter(rule, case_sensitive=True).ignore_row("db", "orders", "D")
    assert _filter(rule, case_sensitive=True).ignore_row("Db", "Orders", "D")


def test_no_rules_is_falsy_and_drops_nothing() -> None:
    f = EventFilter()
    assert not f
    assert not f.drops_ddl
    assert not f.ignore_row("db", "t", "D")
    assert not f.ignore_ddl("db", "t", ("drop table",), "DROP TABLE t")


# -- DDLs ----------------------------------------------------------------------------------------


def test_ignore_sql_is_searched_case_insensitively() -> None:
    f = _filter({"matcher": ["db.*"], "ignore-sql": ["^ALTER TABLE .* ADD COLUMN", "drop"]})
    assert f.ignore_ddl("db", "t", (), "alter table t add column c int")
    assert f.ignore_ddl("db", "t", (), "CREATE TABLE x (a int) /* no DROP here */")  # unanchored
    assert not f.ignore_ddl("db", "t", (), "  ALTER TABLE t ADD COLUMN c INT")  # ^ is anchored
    assert not f.ignore_ddl("other", "t", (), "ALTER TABLE t ADD COLUMN c INT")
    assert f.drops_ddl


def test_ignore_sql_does_not_touch_rows() -> None:
    f = _filter({"matcher": ["*.*"], "ignore-sql": [".*"]})
    assert f.ignored_ops("db", "t") == frozenset()


def test_ddl_kinds_and_alter_table_covers_sub_kinds() -> None:
    f = _filter({"matcher": ["db.*"], "ignore-event": ["alter table"]})
    assert f.ignore_ddl("db", "t", ("add column", "alter table"), "ALTER TABLE t ADD c INT")
    assert not f.ignore_ddl("db", "t", ("truncate table",), "TRUNCATE t")
    g = _filter({"matcher": ["db.*"], "ignore-event": ["add column"]})
    assert g.ignore_ddl("db", "t", ("add column", "alter table"), "ALTER TABLE t ADD c INT")
    assert not g.ignore_ddl("db", "t", ("drop column", "alter table"), "ALTER TABLE t DROP c")


def test_dml_only_rules_never_drop_ddl() -> None:
    f = _filter({"matcher": ["*.*"], "ignore-event": ["insert", "all dml"]})
    assert not f.drops_ddl
    assert not f.ignore_ddl("db", "t", ("drop table",), "DROP TABLE t")


def test_all_ddl_drops_every_ddl_even_without_a_kind() -> None:
    f = _filter({"matcher": ["db.*"], "ignore-event": ["all ddl"]})
    assert f.ignore_ddl("db", "v", (), "ALTER VIEW v AS SELECT 1")


def test_schema_level_ddl_goes_by_the_schema() -> None:
    f = _filter({"matcher": ["db.*"], "ignore-event": ["drop database"]})  # alias of drop schema
    assert f.ignore_ddl("db", "", ("drop schema",), "DROP DATABASE db")
    assert not f.ignore_ddl("other", "", ("drop schema",), "DROP DATABASE other")
    # TiDB's MatchSchema: a schema some rule can select a table of (so db.t covers DROP DATABASE db)
    one_table = _filter({"matcher": ["db.t"], "ignore-event": ["drop schema"]})
    assert one_table.ignore_ddl("db", "", ("drop schema",), "DROP DATABASE db")
    assert not one_table.ignore_ddl("dbx", "", ("drop schema",), "DROP DATABASE dbx")


def test_rename_matches_the_old_or_the_new_name() -> None:
    f = _filter({"matcher": ["db.old"], "ignore-event": ["rename table"]})
    kinds = ("rename table", "alter table")
    assert f.ignore_ddl("db", "new", kinds, "RENAME TABLE old TO new", old=("db", "old"))
    assert not f.ignore_ddl("db", "new", kinds, "RENAME TABLE x TO new", old=("db", "x"))


# -- the kinds of MariaDB statements -------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "ddl_type", "kinds"),
    [
        ("CREATE DATABASE db", DDLType.CREATE_SCHEMA, ("create schema",)),
        ("DROP SCHEMA db", DDLType.DROP_SCHEMA, ("drop schema",)),
        (
            "ALTER DATABASE db CHARACTER SET utf8mb4",
            DDLType.ALTER_SCHEMA,
            ("modify schema charset and collate",),
        ),
        ("CREATE TABLE t (a INT)", DDLType.CREATE_TABLE, ("create table",)),
        ("DROP TABLE t", DDLType.DROP_TABLE, ("drop table",)),
        ("TRUNCATE TABLE t", DDLType.TRUNCATE_TABLE, ("truncate table",)),
        ("CREATE VIEW v AS SELECT 1", DDLType.CREATE_VIEW, ("create view",)),
        ("DROP VIEW v", DDLType.DROP_VIEW, ("drop view",)),
        ("ALTER VIEW v AS SELECT 2", DDLType.OTHER, ()),
        ("RENAME TABLE a TO b", DDLType.RENAME_TABLE, ("rename table", "alter table")),
        ("ALTER TABLE a RENAME TO b", DDLType.RENAME_TABLE, ("rename table", "alter table")),
        ("CREATE INDEX i ON t (a)", DDLType.ADD_INDEX, ("create index", "alter table")),
        ("CREATE UNIQUE INDEX i ON t (a)", DDLType.ADD_INDEX, ("create index", "alter table")),
        ("DROP INDEX i ON t", DDLType.DROP_INDEX, ("drop index", "alter table")),
        ("ALTER TABLE t ADD INDEX i (a)", DDLType.ADD_INDEX, ("create index", "alter table")),
        ("ALTER TABLE t ADD PRIMARY KEY (a)", DDLType.ADD_INDEX, ("add primary key", "alter table")),
        ("ALTER TABLE t DROP PRIMARY KEY", DDLType.DROP_INDEX, ("drop primary key", "alter table")),
        ("ALTER TABLE t DROP INDEX i", DDLType.DROP_INDEX, ("drop index", "alter table")),
        ("ALTER TABLE t ADD COLUMN c INT", DDLType.ALTER_TABLE, ("add column", "alter table")),
        ("ALTER TABLE t ADD (c INT, d INT)", DDLType.ALTER_TABLE, ("add column", "alter table")),
        ("ALTER TABLE t DROP COLUMN c", DDLType.ALTER_TABLE, ("drop column", "alter table")),
        ("ALTER TABLE t MODIFY c BIGINT", DDLType.ALTER_TABLE, ("modify column", "alter table")),
        ("ALTER TABLE t CHANGE c d BIGINT", DDLType.ALTER_TABLE, ("modify column", "alter table")),
        ("ALTER TABLE t RENAME COLUMN c TO d", DDLType.ALTER_TABLE, ("modify column", "alter table")),
        ("ALTER TABLE t ALTER c SET DEFAULT 1", DDLType.ALTER_TABLE, ("set default value", "alter table")),
        ("ALTER TABLE t RENAME INDEX i TO j", DDLType.ALTER_TABLE, ("rename index", "alter table")),
        (
            "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
            DDLType.ALTER_TABLE,
            ("modify table charset and collate", "alter table"),
        ),
        ("ALTER TABLE t COMMENT = 'x'", DDLType.ALTER_TABLE, ("modify table comment", "alter table")),
        ("ALTER TABLE t AUTO_INCREMENT = 100", DDLType.ALTER_TABLE, ("rebase auto id", "alter table")),
        ("ALTER TABLE t ENGINE = InnoDB", DDLType.ALTER_TABLE, ("alter table",)),
        ("ALTER TABLE t ADD c INT, DROP d", DDLType.ALTER_TABLE, ("multi schema change", "alter table")),
        ("ALTER TABLE t ADD c INT, ALGORITHM=INPLACE", DDLType.ALTER_TABLE, ("add column", "alter table")),
        (
            "ALTER TABLE t ADD PARTITION (PARTITION p3 VALUES LESS THAN (30))",
            DDLType.ALTER_TABLE,
            ("add table partition", "alter table"),
        ),
        ("ALTER TABLE t DROP PARTITION p1", DDLType.ALTER_TABLE, ("drop table partition", "alter table")),
        (
            "ALTER TABLE t TRUNCATE PARTITION p1",
            DDLType.ALTER_TABLE,
            ("truncate table partition", "alter table"),
        ),
    ],
)
def test_statement_kinds(query: str, ddl_type: DDLType, kinds: tuple[str, ...]) -> None:
    assert _kinds(query, ddl_type) == kinds
    assert set(kinds) <= set(DDL_KINDS)


# -- rules refused at load -----------------------------------------------------------------------


def test_unknown_kind_is_refused_with_the_allowed_list() -> None:
    with pytest.raises(FilterRuleError) as exc:
        compile_rule(["db.*"], ["delete", "add index"], [], where="filter.event-filters[2]")
    msg = exc.value.message
    assert (
        "invalid value 'add index' for 'filter.event-filters[2].ignore-event[1]'; allowed: all dml, all ddl"
        in msg
    )
    assert "create index" in msg and "\n" not in msg


def test_kinds_are_exact_as_in_ticdc() -> None:
    with pytest.raises(FilterRuleError, match="invalid value 'Delete'"):
        compile_rule(["db.*"], ["Delete"], [])
    with pytest.raises(FilterRuleError, match="invalid value 'all'"):  # TiCDC has no "all" either
        compile_rule(["db.*"], ["all"], [])


def test_bad_regex_is_refused_naming_it() -> None:
    with pytest.raises(
        FilterRuleError,
        match=r"invalid regular expression '\(' for 'filter.event-filters\[0\].ignore-sql\[1\]'",
    ):
        compile_rule(["db.*"], [], ["^DROP", "("])
    with pytest.raises(FilterRuleError, match="lookaround is not supported"):
        compile_rule(["db.*"], [], ["(?=x)"])


def test_rules_that_cannot_mean_anything_are_refused() -> None:
    with pytest.raises(FilterRuleError, match=r"matcher is empty"):
        compile_rule([], ["delete"], [])
    with pytest.raises(FilterRuleError, match=r"matcher is empty"):
        compile_rule(["# only a comment"], ["delete"], [])
    with pytest.raises(FilterRuleError, match=r"ignores nothing"):
        compile_rule(["db.*"], [], [])
    with pytest.raises(FilterRuleError, match=r"filter.event-filters\[0\].matcher: .*wrong table pattern"):
        compile_rule(["db"], ["delete"], [])


def test_every_listed_kind_compiles() -> None:
    rule = compile_rule(["*.*"], list(EVENT_KINDS), [])
    assert "create schema" in rule.events and "create database" not in rule.events  # alias resolved


# -- transport -----------------------------------------------------------------------------------


class _Rule:
    matcher = ["db.t"]
    ignore_event = ["delete"]
    ignore_sql = ["^DROP"]


def test_specs_travel_as_json_and_pickle() -> None:
    specs = rule_specs([_Rule()])
    assert specs == [{"matcher": ["db.t"], "ignore-event": ["delete"], "ignore-sql": ["^DROP"]}]
    f = pickle.loads(pickle.dumps(EventFilter(specs, True)))
    assert f.case_sensitive and f.ignore_row("db", "t", "D") and not f.ignore_row("db", "T", "D")
    assert f.ignore_ddl("db", "t", (), "drop table t")


# -- where the pipeline applies them -------------------------------------------------------------


class _History:
    """Records what the planner applied: every DDL, also the ones the sink never gets."""

    def __init__(self, events: list[DDLEvent]) -> None:
        self.events = events
        self.applied: list[str] = []

    def apply(self, cat: Any, query: str, schema: str | None, ts: int) -> list[DDLEvent]:
        self.applied.append(query)
        return [e for e in self.events if e.query == query]


def test_planner_drops_a_filtered_ddl_after_the_history_applied_it() -> None:
    from sparkcdc.pipeline.plan import Planner, SourceSpec

    add = _ddl("ALTER TABLE t ADD COLUMN c INT", DDLType.ALTER_TABLE)
    drop = _ddl("DROP TABLE u", DDLType.DROP_TABLE, table="u")
    spec = SourceSpec(
        "cf",
        "mysql://root@127.0.0.1:1/",
        {},
        "/nonexistent",
        filter_rules=["db.*"],
        event_filters=[{"matcher": ["db.*"], "ignore-sql": ["^ALTER TABLE .* ADD COLUMN"]}],
    )
    p = Planner.__new__(Planner)  # no upstream: only the DDL step runs
    p.spec, p.filter, p.event_filter = spec, spec.table_filter(), spec.event_filter()
    p.history = _History([add, drop])  # type: ignore[assignment]
    p._plans = {}
    txn = TxnInfo(
        Offset("b.1", 4, 1),
        Offset("b.1", 9, 100),
        100,
        5,
        queries=[QueryItem(add.query, "db"), QueryItem(drop.query, "db")],
    )
    plan = p._ddl_batch(Offset("b.1", 4, 1), [txn], object())
    assert p.history.applied == [add.query, drop.query]  # type: ignore[attr-defined]
    assert plan.is_ddl and plan.ddls == [drop]


def test_segment_reader_drops_filtered_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    import sparkcdc.capture.reader as reader_mod
    from sparkcdc.pipeline.source import BinlogPartition, iter_segment_batches

    def row(op: str, table: str) -> RowChange:
        return RowChange(op, "db", table, 1, 100, None, (1,))  # type: ignore[arg-type]

    batches: list[list[RowChange] | Offset] = [
        [row("I", "a"), row("I", "a")],
        [row("D", "a")],
        Offset("b.1", 9, 100),
        [row("U", "a")],
        [row("D", "b")],
    ]

    class FakeReader:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def event_batches(self) -> Iterator[list[RowChange] | Offset]:
            yield from batches

    monkeypatch.setattr(reader_mod, "RowReader", FakeReader)
    part = BinlogPartition(
        "mysql://root@127.0.0.1:1/",
        {"file": "b.1", "pos": 4, "ts": 1},
        {"file": "b.1", "pos": 9, "ts": 100},
        {},
        ["db.*"],
        False,
        "UTC",
        event_filters=[{"matcher": ["db.a"], "ignore-event": ["delete"]}],
    )
    got = [(r.op, r.table) for rows, _info, _own in iter_segment_batches(part) for r in rows]
    assert got == [("I", "a"), ("I", "a"), ("U", "a"), ("D", "b")]
    assert BinlogPartition.from_json(part.to_json()).event_filters == part.event_filters
