"""Statement building: quoting, parameters, batching and safe-mode variants (no database)."""

from __future__ import annotations

from decimal import Decimal

import pymysql.converters

from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.sink.mysql.applier import MySQLApplier
from sparkcdc.sink.mysql.connection import ConnParams, adjust_sql_mode, mysql_time_zone
from sparkcdc.sink.mysql.statements import StatementPlanner, TablePlan, quote_ident, quote_ident_raw

HOSTILE = TableInfo(
    schema="we`ird db",
    table="sel'ect%s",
    columns=(
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo('a"b`c', "varchar", length=10),
        ColumnInfo("order", "int"),
        ColumnInfo("gen", "int", generated=True),
    ),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
)

PK2 = TableInfo(
    schema="s",
    table="t",
    columns=(
        ColumnInfo("a", "int", nullable=False),
        ColumnInfo("b", "bigint", nullable=False),
        ColumnInfo("v", "varchar", length=20),
    ),
    indexes=(IndexInfo("PRIMARY", ("a", "b"), unique=True, primary=True),),
)

TEXTKEY = TableInfo(
    schema="s",
    table="tk",
    columns=(ColumnInfo("k", "varchar", length=10, nullable=False), ColumnInfo("v", "int")),
    indexes=(IndexInfo("PRIMARY", ("k",), unique=True, primary=True),),
)

NOKEY = TableInfo(
    schema="s",
    table="nk",
    columns=(ColumnInfo("x", "int"), ColumnInfo("y", "varchar", length=10), ColumnInfo("j", "json")),
)


def rc(op: str, table: TableInfo, before=None, after=None, ts: int = 100, seq: int = 0) -> RowChange:
    return RowChange(
        op=op,
        schema=table.schema,
        table=table.table,
        table_version=0,
        commit_ts=ts,  # type: ignore[arg-type]
        before=before,
        after=after,
        seq=seq,
    )


def render(sql: str, args: list) -> str:
    """What PyMySQL would send (client-side formatting), to check placeholders line up."""
    esc = tuple(pymysql.converters.escape_item(a, "utf8mb4") for a in args)
    return sql % esc


def test_quote_ident_escapes_backticks_and_percent() -> None:
    assert quote_ident("a`b") == "`a``b`"
    assert quote_ident("x%s") == "`x%%s`"
    assert quote_ident_raw("x%s`") == "`x%s```"


def test_hostile_insert_renders_with_exact_names() -> None:
    plan = TablePlan.build(HOSTILE)
    sql, args = plan.insert([(1, "v'1", 7, 99), (2, None, 8, 99)], replace=False)
    assert args == [1, "v'1", 7, 2, None, 8]  # the generated column is never written
    text = render(sql, args)
    assert text == (
        "INSERT INTO `we``ird db`.`sel'ect%s` (`id`,`a\"b``c`,`order`) VALUES (1,'v\\'1',7),(2,NULL,8)"
    )


def test_update_sets_all_stored_columns_and_matches_old_key() -> None:
    plan = TablePlan.build(HOSTILE)
    sql, args = plan.update((1, "x", 1, 0), (5, "y", 2, 0))
    assert render(sql, args) == (
        "UPDATE `we``ird db`.`sel'ect%s` SET `id` = 5,`a\"b``c` = 'y',`order` = 2 WHERE `id` = 1 LIMIT 1"
    )


def test_delete_batches_single_and_composite_keys() -> None:
    sql, args = TablePlan.build(HOSTILE).delete_keys([(1,), (2,)])
    assert render(sql, args) == "DELETE FROM `we``ird db`.`sel'ect%s` WHERE `id` IN (1,2)"
    sql, args = TablePlan.build(PK2).delete_keys([(1, 2), (3, 4)])
    assert render(sql, args) == "DELETE FROM `s`.`t` WHERE (`a` = 1 AND `b` = 2) OR (`a` = 3 AND `b` = 4)"


def test_no_key_table_matches_all_columns_null_safe_with_limit() -> None:
    plan = TablePlan.build(NOKEY)
    sql, args = plan.delete_row((1, None, {"k": [1]}))
    assert render(sql, args) == (
        "DELETE FROM `s`.`nk` WHERE `x` <=> 1 AND `y` <=> NULL AND `j` <=> '{\\\"k\\\": [1]}' LIMIT 1"
    )
    sql, args = plan.update((1, None, None), (2, "b", None))
    assert render(sql, args).endswith("WHERE `x` <=> 1 AND `y` <=> NULL AND `j` <=> NULL LIMIT 1")


def test_value_types_are_parameters() -> None:
    t = TableInfo(
        schema="s",
        table="v",
        columns=(
            ColumnInfo("id", "int", nullable=False),
            ColumnInfo("d", "decimal", precision=10, scale=2),
            ColumnInfo("bin", "varbinary", length=4),
            ColumnInfo("b", "bit", length=8),
            ColumnInfo("e", "enum", elements=("a", "b")),
            ColumnInfo("dt", "datetime", fsp=3),
        ),
        indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    )
    sql, args = TablePlan.build(t).insert(
        [(1, Decimal("12.50"), b"\x00'", b"\x41", "b", "2024-01-02 03:04:05.678")], replace=True
    )
    assert args == [1, Decimal("12.50"), b"\x00'", 65, "b", "2024-01-02 03:04:05.678"]
    assert render(sql, args).endswith("VALUES (1,12.50,_binary X'0027',65,'b','2024-01-02 03:04:05.678')")


def _sqls(planner: StatementPlanner) -> list[str]:
    return [s.sql.split(" WHERE ")[0].split(" VALUES ")[0] + f" x{s.rows}" for s in planner.finish()]


def test_safe_mode_batches_inserts_into_one_replace_and_splits_key_changes() -> None:
    plan = TablePlan.build(PK2)
    p = StatementPlanner()
    p.add(rc("I", PK2, after=(1, 1, "a")), plan, safe=True)
    p.add(rc("I", PK2, after=(2, 2, "b")), plan, safe=True)
    p.add(rc("U", PK2, before=(1, 1, "a"), after=(1, 1, "c")), plan, safe=True)  # same key: REPLACE only
    p.add(
        rc("U", PK2, before=(2, 2, "b"), after=(9, 9, "b")), plan, safe=True
    )  # key change: DELETE + REPLACE
    stmts = p.finish()
    # The delete of (2,2) targets a pending write, so the writes before it are flushed first.
    assert [(s.sql.split()[0], s.rows) for s in stmts] == [("REPLACE", 3), ("DELETE", 1), ("REPLACE", 1)]
    assert stmts[1].args == [2, 2]


PERIOD_KEY = TableInfo(
    schema="s",
    table="rooms",
    columns=(
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("s", "date", nullable=False),
        ColumnInfo("e", "date", nullable=False),
        ColumnInfo("v", "int"),
    ),
    # PRIMARY KEY (id, p WITHOUT OVERLAPS) for PERIOD FOR p (s, e): the key holds the end, then the start
    indexes=(IndexInfo("PRIMARY", ("id", "e", "s"), unique=True, primary=True, without_overlaps=True),),
)


def test_safe_mode_on_a_without_overlaps_key_deletes_then_inserts_instead_of_replace() -> None:
    plan = TablePlan.build(PERIOD_KEY)
    assert plan.no_replace and not TablePlan.build(PK2).no_replace
    p = StatementPlanner()
    p.add(rc("I", PERIOD_KEY, after=(1, "2020-01-01", "2020-02-01", 1)), plan, safe=True)
    p.add(rc("I", PERIOD_KEY, after=(2, "2020-01-01", "2020-02-01", 1)), plan, safe=True)
    p.add(
        rc(
            "U",
            PERIOD_KEY,
            before=(1, "2020-01-01", "2020-02-01", 1),
            after=(1, "2020-01-01", "2020-02-01", 5),
        ),
        plan,
        safe=True,
    )
    stmts = p.finish()
    # each write first deletes what REPLACE would: the same id over an overlapping period
    assert [(s.sql.split()[0], s.rows) for s in stmts] == [("DELETE", 1), ("INSERT", 1)] * 3
    assert stmts[0].sql == "DELETE FROM `s`.`rooms` WHERE (`id` = %s AND `s` < %s AND `e` > %s)"
    assert stmts[0].args == [1, "2020-02-01", "2020-01-01"]
    assert stmts[2].args == [2, "2020-02-01", "2020-01-01"]
    assert not any(s.sql.startswith("REPLACE") for s in stmts)
    # outside safe mode nothing changes
    p.add(rc("I", PERIOD_KEY, after=(3, "2020-01-01", "2020-02-01", 1)), plan, safe=False)
    assert [s.sql.split()[0] for s in p.finish()] == ["INSERT"]


def test_deletes_move_before_writes_of_other_keys_only() -> None:
    plan = TablePlan.build(PK2)
    p = StatementPlanner()
    p.add(rc("I", PK2, after=(1, 1, "a")), plan, safe=False)
    p.add(rc("D", PK2, before=(5, 5, "x")), plan, safe=False)
    p.add(rc("I", PK2, after=(2, 2, "b")), plan, safe=False)
    p.add(rc("D", PK2, before=(6, 6, "x")), plan, safe=False)
    stmts = p.finish()
    assert [(s.sql.split()[0], s.rows) for s in stmts] == [("DELETE", 2), ("INSERT", 2)]


def test_text_keys_never_reorder_because_collations_compare_differently() -> None:
    plan = TablePlan.build(TEXTKEY)
    p = StatementPlanner()
    p.add(rc("I", TEXTKEY, after=("a", 1)), plan, safe=False)
    p.add(rc("D", TEXTKEY, before=("A", 1)), plan, safe=False)  # 'A' = 'a' under a _ci collation
    stmts = p.finish()
    assert [s.sql.split()[0] for s in stmts] == ["INSERT", "DELETE"]


def test_unsafe_updates_are_single_statements_in_order() -> None:
    plan = TablePlan.build(PK2)
    p = StatementPlanner()
    p.add(rc("I", PK2, after=(1, 1, "a")), plan, safe=False)
    p.add(rc("U", PK2, before=(1, 1, "a"), after=(1, 2, "a")), plan, safe=False)
    p.add(rc("I", PK2, after=(1, 1, "z")), plan, safe=False)
    stmts = p.finish()
    assert [s.sql.split()[0] for s in stmts] == ["INSERT", "UPDATE", "INSERT"]
    assert stmts[1].single


def test_batch_limit_and_no_batching() -> None:
    plan = TablePlan.build(PK2)
    p = StatementPlanner(max_rows_per_statement=2)
    for i in range(5):
        p.add(rc("I", PK2, after=(i, i, "v")), plan, safe=False)
    assert [s.rows for s in p.finish()] == [2, 2, 1]
    p = StatementPlanner(batch=False)
    for i in range(3):
        p.add(rc("I", PK2, after=(i, i, "v")), plan, safe=False)
    assert [s.rows for s in p.finish()] == [1, 1, 1]


def test_replicating_ts_decides_safe_mode_per_row() -> None:
    applier = MySQLApplier(ConnParams(), safe_mode=False)
    rows = [(rc("I", PK2, after=(1, 1, "a"), ts=10), PK2), (rc("I", PK2, after=(2, 2, "b"), ts=20), PK2)]
    stmts = applier.statements(rows, replicating_ts=10)
    assert [(s.sql.split()[0], s.rows) for s in stmts] == [("REPLACE", 1), ("INSERT", 1)]
    assert [s.sql.split()[0] for s in applier.statements(rows, None, force_safe=True)] == ["REPLACE"]
    assert [s.sql.split()[0] for s in MySQLApplier(ConnParams(), safe_mode=True).statements(rows, None)] == [
        "REPLACE"
    ]


def test_chunks_keep_transactions_whole_up_to_max_txn_row() -> None:
    applier = MySQLApplier(ConnParams(), max_txn_row=4)
    ts = [1, 1, 2, 2, 2, 3, 4, 4, 4, 4, 4, 4]
    rows = [(rc("I", PK2, after=(i, i, "v"), ts=t), PK2) for i, t in enumerate(ts)]
    chunks = [([r.commit_ts for r, _ in c], done) for c, done in applier._chunks(rows)]
    assert chunks == [([1, 1], True), ([2, 2, 2, 3], True), ([4, 4, 4, 4], False), ([4, 4], True)]
    whole = MySQLApplier(ConnParams(), max_txn_row=4, split_txn=False)
    chunks = [([r.commit_ts for r, _ in c], done) for c, done in whole._chunks(rows)]
    assert chunks == [([1, 1], True), ([2, 2, 2, 3], True), ([4, 4, 4, 4, 4, 4], True)]


def test_session_settings() -> None:
    assert adjust_sql_mode("STRICT_TRANS_TABLES,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION") == (
        "NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO,ALLOW_INVALID_DATES"
    )
    assert mysql_time_zone("UTC") == "+00:00"
    assert mysql_time_zone("+08:00") == "+08:00"


UJIS = TableInfo(
    schema="s",
    table="t",
    columns=(
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("name", "varchar", length=10, charset="ujis"),
        ColumnInfo("note", "varchar", length=10, charset="utf8mb4"),
    ),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=1,
)


def test_a_refused_row_holding_u_fffd_in_a_non_unicode_column_says_what_the_message_lost() -> None:
    applier = MySQLApplier(ConnParams())
    lost = RowChange("I", "s", "t", 1, 7, None, (1, "a\ufffdb", "ok"), 0)
    msg = applier._refused(
        pymysql.err.OperationalError(1267, "Illegal mix of collations"), [(lost, UJIS)]
    ).message
    assert "refused rows of s.t (commit_ts 7..7)" in msg and "Illegal mix of collations" in msg
    assert "column name of s.t (ujis) holds U+FFFD" in msg and "canal-json writes U+FFFD" in msg
    # a real U+FFFD in a Unicode column, or none at all: no such hint
    for row in (
        RowChange("I", "s", "t", 1, 7, None, (1, "plain", "a\ufffdb"), 0),
        RowChange("U", "s", "t", 1, 7, (1, "old", None), (1, "new", None), 0),
    ):
        msg = applier._refused(pymysql.err.OperationalError(1062, "Duplicate"), [(row, UJIS)]).message
        assert "U+FFFD" not in msg, msg
