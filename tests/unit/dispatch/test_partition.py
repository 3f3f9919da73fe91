"""PartitionDispatcher: tiflow's partition tests (literal partitions), independent CRC-32 checks, errors."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.config.replica import DispatchRule
from sparkcdc.dispatch.partition import DispatchError, PartitionDispatcher, value_bytes
from sparkcdc.errors import ConfigError, SinkError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo


def crc(*parts: bytes) -> int:
    """IEEE CRC-32 of the concatenation, as Go's crc32.ChecksumIEEE."""
    return zlib.crc32(b"".join(parts))


def table(
    schema: str,
    name: str,
    columns: Sequence[ColumnInfo | str],
    pk: tuple[str, ...] = (),
    indexes: tuple[IndexInfo, ...] = (),
    version: int = 1,
) -> TableInfo:
    cols = tuple(ColumnInfo(c, "int") if isinstance(c, str) else c for c in columns)
    ix = indexes + ((IndexInfo("PRIMARY", pk, unique=True, primary=True),) if pk else ())
    return TableInfo(schema, name, cols, ix, version=version)


def insert(t: TableInfo, *values: Any, commit_ts: int = 1) -> RowChange:
    return RowChange("I", t.schema, t.table, t.version, commit_ts, None, tuple(values))


# --- table / default / ts ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "commit_ts", "expected"),
    [("t1", 1, 15), ("t1", 2, 15), ("t1", 3, 15), ("t2", 1, 5), ("t2", 2, 5), ("t2", 3, 5), ("t3", 3, 3)],
)
def test_table_dispatcher_literal_partitions(name: str, commit_ts: int, expected: int) -> None:
    # tiflow partition/table_test.go, 16 partitions
    t = table("test", name, ["id"], pk=("id",))
    row = insert(t, 1, commit_ts=commit_ts)
    assert PartitionDispatcher("table").partition(row, t, 16) == expected
    assert crc(b"test", name.encode()) % 16 == expected


def test_default_is_table() -> None:
    # tiflow partition/default_test.go: test.t1 with id=1 (PK), 3 partitions → 0
    t = table("test", "t1", ["id"], pk=("id",))
    d = PartitionDispatcher("default")
    assert d.kind == "table"
    assert d.partition(insert(t, 1), t, 3) == 0
    assert PartitionDispatcher("").kind == "table"
    # the table hash uses the original-case names
    u = table("Test", "T1", ["id"], pk=("id",))
    assert d.partition(insert(u, 1), u, 1000) == crc(b"Test", b"T1") % 1000


def test_ts_dispatcher() -> None:
    t = table("test", "t1", ["id"])
    d = PartitionDispatcher("ts")
    for ts in (1, 2, 3, 449_567_351_238_049_793):
        assert d.partition(insert(t, 1, commit_ts=ts), t, 16) == ts % 16


# --- index-value ------------------------------------------------------------------


SINGLE_PK = table("test", "t1", ["a", "b"], pk=("a",))
COMPOSITE_PK = table("test", "t2", ["a", "b"], pk=("a", "b"))
COMPOSITE_PK_REORDERED = table("test", "t2", ["b", "a"], pk=("a", "b"))


@pytest.mark.parametrize(
    ("t", "values", "expected"),
    [
        (SINGLE_PK, (11, 22), 2),
        (SINGLE_PK, (22, 22), 11),
        (SINGLE_PK, (11, 33), 2),
        (COMPOSITE_PK, (11, 22), 5),
        (COMPOSITE_PK_REORDERED, (22, 11), 5),  # XOR of independent CRCs: order does not matter
        (COMPOSITE_PK, (11, 0), 14),
        (COMPOSITE_PK, (11, 33), 2),
    ],
)
def test_index_value_literal_partitions(t: TableInfo, values: tuple[int, int], expected: int) -> None:
    # tiflow partition/index_value_test.go, 16 partitions
    for rule in ("index-value", "rowid", "pk", "ROWID", "Index-Value"):
        assert PartitionDispatcher(rule).partition(insert(t, *values), t, 16) == expected


def test_index_value_hash_is_positioninertia() -> None:
    t = COMPOSITE_PK
    h = PartitionDispatcher("index-value").hash_row(insert(t, 11, 22), t)
    assert h == crc(b"test", b"t2") ^ crc(b"a", b"11") ^ crc(b"b", b"22")
    # no handle key: only the table hash
    nokey = table("test", "t3", ["a"])
    assert PartitionDispatcher("index-value").hash_row(insert(nokey, 5), nokey) == crc(b"test", b"t3")


def test_index_value_uses_not_null_unique_key_without_pk() -> None:
    cols = [ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "varchar")]
    t = table("s", "u", cols, indexes=(IndexInfo("uk", ("id",), unique=True),))
    h = PartitionDispatcher("index-value").hash_row(insert(t, 7, "x"), t)
    assert h == crc(b"s", b"u") ^ crc(b"id", b"7")


def test_index_value_with_index_name() -> None:
    # tiflow TestIndexValueDispatcherWithIndexName: index1 on a, a=11 → 2 of 16
    t = table("test", "t1", ["a"], indexes=(IndexInfo("index1", ("a",)),))
    row = insert(t, 11)
    with pytest.raises(DispatchError, match="index not found when dispatch event") as info:
        PartitionDispatcher("index-value", index="index2").partition(row, t, 16)
    assert isinstance(info.value, SinkError) and not info.value.transient
    assert info.value.code == "CDC:ErrDispatcherFailed"
    assert PartitionDispatcher("index-value", index="index1").partition(row, t, 16) == 2
    # index names match case-insensitively
    assert PartitionDispatcher("index-value", index="INDEX1").partition(row, t, 16) == 2
    # an index rather than the PK
    t2 = table(
        "db", "t", ["id", "k1", "k2"], pk=("id",), indexes=(IndexInfo("uk", ("k2", "k1"), unique=True),)
    )
    h = PartitionDispatcher("index-value", index="uk").hash_row(insert(t2, 1, 2, 3), t2)
    assert h == crc(b"db", b"t") ^ crc(b"k1", b"2") ^ crc(b"k2", b"3")


def test_delete_uses_old_row() -> None:
    t = SINGLE_PK
    d = PartitionDispatcher("index-value")
    delete = RowChange("D", "test", "t1", 1, 5, (22, 1), None)
    assert d.partition(delete, t, 16) == 11
    update = RowChange("U", "test", "t1", 1, 5, (22, 1), (11, 1))
    assert d.partition(update, t, 16) == 2


# --- columns ------------------------------------------------------------------------


def test_columns_literal_partitions() -> None:
    # tiflow partition/columns_test.go: col1=22, col2=11, col3=33, 16 partitions
    t = table("test", "t1", ["col1", "col2", "col3"])
    row = insert(t, 22, 11, 33)
    assert PartitionDispatcher("columns", columns=["col2", "col1"]).partition(row, t, 16) == 15
    # listed names match case-insensitively
    assert PartitionDispatcher("columns", columns=["COL2", "Col1"]).partition(row, t, 16) == 15
    # but the actual column name is hashed
    upper = table("test", "t1", ["Col1", "COL2", "col3"])
    assert (
        PartitionDispatcher("columns", columns=["col2", "col1"]).partition(
            insert(upper, 22, 11, 33), upper, 16
        )
        == 5
    )
    assert (crc(b"test", b"t1") ^ crc(b"COL2", b"11") ^ crc(b"Col1", b"22")) % 16 == 5


def test_columns_missing_from_the_table_are_skipped() -> None:
    """Seed 002: only the columns the table has are hashed; with none of them, partition 0."""
    t = table("test", "t1", ["col1", "col2", "col3"])
    row = insert(t, 22, 11, 33)
    partial = PartitionDispatcher("columns", columns=["col2", "col-not-found", "col1"])
    assert partial.hash_row(row, t) == crc(b"test", b"t1") ^ crc(b"col2", b"11") ^ crc(b"col1", b"22")
    assert partial.partition(row, t, 16) == 15  # the same as [col2, col1] above
    one = PartitionDispatcher("[nope, col3]")
    assert one.partition(row, t, 7) == (crc(b"test", b"t1") ^ crc(b"col3", b"33")) % 7
    none = PartitionDispatcher("[col-2, col-not-found]")
    assert crc(b"test", b"t1") % 16 != 0  # so partition 0 below is not the table hash by chance
    for n in (1, 3, 16):
        assert none.partition(row, t, n) == 0
    delete = RowChange("D", "test", "t1", 1, 5, (22, 11, 33), None)
    assert none.partition(delete, t, 16) == 0
    # another table of the same rule that has the columns is hashed by them
    other = table("test", "t2", ["col-2", "x"])
    assert none.partition(insert(other, 5, 6), other, 16) == (crc(b"test", b"t2") ^ crc(b"col-2", b"5")) % 16


def test_bracket_form_is_columns() -> None:
    t = table("test", "t1", ["col1", "col2", "col3"])
    row = insert(t, 22, 11, 33)
    d = PartitionDispatcher("[col2, col1]")
    assert d.kind == "columns" and d.columns == ("col2", "col1")
    assert d.partition(row, t, 16) == 15
    assert PartitionDispatcher(" [ `col2` ,col1 ] ").partition(row, t, 16) == 15
    # with the same columns also listed, it is not a conflict
    assert PartitionDispatcher("[col2, col1]", columns=["COL2", "col1"]).kind == "columns"
    with pytest.raises(ConfigError, match="disagree"):
        PartitionDispatcher("[col2]", columns=["col1"])
    for bad in ("[]", "[a,,b]", "[ ]"):
        with pytest.raises(ConfigError, match="list the column names"):
            PartitionDispatcher(bad)


def test_columns_null_and_generated() -> None:
    cols = [ColumnInfo("a", "int"), ColumnInfo("g", "int", generated=True)]
    t = table("s", "t", cols)
    h = PartitionDispatcher("columns", columns=["a"]).hash_row(insert(t, None, 1), t)
    assert h == crc(b"s", b"t") ^ crc(b"a", b"null")
    with pytest.raises(DispatchError, match="found virtual generated columns when dispatch event"):
        PartitionDispatcher("columns", columns=["a", "g"]).partition(insert(t, 1, 2), t, 4)


def test_inferred_kind_from_index_or_columns() -> None:
    assert PartitionDispatcher("", columns=["a"]).kind == "columns"
    assert PartitionDispatcher("", index="uk").kind == "index-value"


# --- value rendering -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("col", "value", "expected"),
    [
        (ColumnInfo("c", "int"), None, b"null"),
        (ColumnInfo("c", "int"), -42, b"-42"),
        (ColumnInfo("c", "bigint", unsigned=True), 18446744073709551615, b"18446744073709551615"),
        (ColumnInfo("c", "bit", length=8), 5, b"5"),
        (ColumnInfo("c", "tinyint"), True, b"1"),
        (ColumnInfo("c", "tinyint"), False, b"0"),
        (ColumnInfo("c", "double"), 1.5, b"1.5"),
        (ColumnInfo("c", "double"), 100.0, b"100"),
        (ColumnInfo("c", "double"), 0.1, b"0.1"),
        (ColumnInfo("c", "double"), -0.0, b"-0"),
        (ColumnInfo("c", "double"), 1e21, b"1000000000000000000000"),
        (ColumnInfo("c", "double"), 1.5e-7, b"0.00000015"),
        (ColumnInfo("c", "double"), 123456789.125, b"123456789.125"),
        # FLOAT renders at 32-bit precision: the float32 nearest 0.1 prints as 0.1, not 0.10000000149011612
        (ColumnInfo("c", "float"), 0.10000000149011612, b"0.1"),
        (ColumnInfo("c", "float"), 3.140000104904175, b"3.14"),
        (ColumnInfo("c", "float"), 16777216.0, b"16777216"),
        (ColumnInfo("c", "float"), 1e-45, b"0.000000000000000000000000000000000000000000001"),
        (ColumnInfo("c", "decimal", precision=10, scale=2), Decimal("1.50"), b"1.50"),
        (ColumnInfo("c", "decimal", precision=10, scale=0), Decimal("1E+2"), b"100"),
        (ColumnInfo("c", "varchar"), "héllo", "héllo".encode()),
        (ColumnInfo("c", "varbinary"), b"\x00\xff", b"\x00\xff"),
        (ColumnInfo("c", "datetime", fsp=3), "2024-01-02 03:04:05.678", b"2024-01-02 03:04:05.678"),
        (ColumnInfo("c", "json"), '{"a": 1}', b'{"a": 1}'),
        (ColumnInfo("c", "enum", elements=("x", "y", "z")), "y", b"2"),
        (ColumnInfo("c", "enum", elements=("x", "y", "z")), "", b"0"),
        (ColumnInfo("c", "enum", elements=("x", "y", "z")), "Z", b"3"),
        (ColumnInfo("c", "set", elements=("a", "b", "c")), "a,c", b"5"),
        (ColumnInfo("c", "set", elements=("a", "b", "c")), "", b"0"),
        (ColumnInfo("c", "set", elements=("a", "b", "c")), "b", b"2"),
    ],
)
def test_value_rendering(col: ColumnInfo, value: Any, expected: bytes) -> None:
    assert value_bytes(value, col) == expected
    t = table("s", "t", [col])
    h = PartitionDispatcher("columns", columns=["c"]).hash_row(insert(t, value), t)
    assert h == crc(b"s", b"t") ^ crc(b"c", expected)


def test_unknown_enum_value_is_an_error() -> None:
    col = ColumnInfo("e", "enum", elements=("x",))
    with pytest.raises(DispatchError, match="not one of its elements"):
        value_bytes("nope", col)
    with pytest.raises(DispatchError, match="not one of its elements"):
        value_bytes("x,nope", ColumnInfo("s", "set", elements=("x",)))


# --- fixed partition ---------------------------------------------------------------------


def test_fixed_partition() -> None:
    t = table("s", "t", ["id"], pk=("id",))
    d = PartitionDispatcher("3")
    assert d.kind == "fixed" and d.fixed == 3
    assert d.partition(insert(t, 1), t, 4) == 3
    assert d.partition(insert(t, 2, commit_ts=99), t, 10) == 3
    d.validate_partition_count(4)
    with pytest.raises(ConfigError, match=r"partition 3 .* out of range: the topic has 3 partition\(s\)"):
        d.validate_partition_count(3)
    with pytest.raises(DispatchError, match="out of range"):
        d.partition(insert(t, 1), t, 2)
    assert PartitionDispatcher("0").partition(insert(t, 1), t, 1) == 0
    for bad in ("-1", "+2"):
        with pytest.raises(ConfigError, match="must be an integer 0 <= N"):
            PartitionDispatcher(bad)


def test_partition_count_must_be_positive() -> None:
    t = table("s", "t", ["id"])
    with pytest.raises(ConfigError, match="at least 1 partition"):
        PartitionDispatcher("table").partition(insert(t, 1), t, 0)
    with pytest.raises(ConfigError, match="at least 1 partition"):
        PartitionDispatcher("table").validate_partition_count(0)


# --- configuration errors ----------------------------------------------------------------


@pytest.mark.parametrize("rule", ["unknown-dispatcher", "1.5", "hash", "key", "[a"])
def test_unknown_rule_is_refused_with_valid_list(rule: str) -> None:
    with pytest.raises(ConfigError, match="unknown partition rule") as info:
        PartitionDispatcher(rule)
    msg = str(info.value)
    assert repr(rule) in msg
    for valid in ("default", "table", "ts", "index-value", "rowid", "pk", "columns"):
        assert valid in msg


def test_conflicting_options() -> None:
    with pytest.raises(ConfigError, match="dispatcher and partition cannot be configured both"):
        PartitionDispatcher.from_rule(DispatchRule(matcher=["*.*"], partition="ts", dispatcher="table"))
    with pytest.raises(ConfigError, match="index = 'uk' only applies to partition = \"index-value\""):
        PartitionDispatcher("ts", index="uk")
    with pytest.raises(ConfigError, match='only applies to partition = "columns"'):
        PartitionDispatcher("table", columns=["a"])
    with pytest.raises(ConfigError, match='partition = "columns" needs the column names'):
        PartitionDispatcher("columns")
    # dispatcher alone is the alias of partition
    d = PartitionDispatcher.from_rule(DispatchRule(matcher=["*.*"], dispatcher="rowid"))
    assert d.kind == "index-value"
    d = PartitionDispatcher.from_rule(DispatchRule(matcher=["*.*"], partition="columns", columns=["x"]))
    assert d.columns == ("x",)


def test_verify_table() -> None:
    t = table(
        "db",
        "t",
        ["id", "a", ColumnInfo("g", "int", generated=True)],
        pk=("id",),
        indexes=(IndexInfo("uk", ("a",), unique=True), IndexInfo("k", ("a",))),
    )
    PartitionDispatcher("index-value", index="uk").verify_table(t)
    PartitionDispatcher("index-value", index="primary").verify_table(t)
    PartitionDispatcher("index-value").verify_table(t)
    with pytest.raises(
        ConfigError, match=r"index not found when verify the table, table: db\.t, index: 'nope'"
    ):
        PartitionDispatcher("index-value", index="nope").verify_table(t)
    with pytest.raises(ConfigError, match="index is not unique when verify the table"):
        PartitionDispatcher("index-value", index="k").verify_table(t)
    PartitionDispatcher("[ID, a]").verify_table(t)
    # a table without some (or all) of the columns is dispatched by the ones it has (seed 002)
    PartitionDispatcher("[id, zz]").verify_table(t)
    PartitionDispatcher("[yy, zz]").verify_table(t)
    with pytest.raises(ConfigError, match="found virtual generated columns when verify the table"):
        PartitionDispatcher("[g]").verify_table(t)


def test_plan_cache_follows_table_version() -> None:
    d = PartitionDispatcher("index-value")
    v1 = table("s", "t", ["a", "b"], pk=("a",), version=1)
    v2 = table("s", "t", ["a", "b"], pk=("b",), version=2)
    assert d.hash_row(insert(v1, 1, 2), v1) == crc(b"s", b"t") ^ crc(b"a", b"1")
    assert d.hash_row(insert(v2, 1, 2), v2) == crc(b"s", b"t") ^ crc(b"b", b"2")
    # an equal table object rebuilt elsewhere (e.g. unpickled) reuses the plan
    v1_copy = TableInfo.from_dict(v1.to_dict())
    assert d.hash_row(insert(v1_copy, 1, 2), v1_copy) == crc(b"s", b"t") ^ crc(b"a", b"1")


def test_pickle_round_trip() -> None:
    t = table("test", "t1", ["col1", "col2", "col3"], pk=("col1",))
    row = insert(t, 22, 11, 33, commit_ts=77)
    for d in [
        PartitionDispatcher("table"),
        PartitionDispatcher("ts"),
        PartitionDispatcher("rowid"),
        PartitionDispatcher("[col2, col1]"),
        PartitionDispatcher("2"),
    ]:
        d.partition(row, t, 16)  # fill the plan cache
        e = pickle.loads(pickle.dumps(d))
        assert e.kind == d.kind and e.columns == d.columns and e.fixed == d.fixed
        assert e.partition(row, t, 16) == d.partition(row, t, 16)


def test_router_with_a_columns_rule_routes_tables_missing_the_columns() -> None:
    """``[[sink.dispatchers]] partition = "[c1, c2]"`` from TOML: verified and routed, never refused."""
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.dispatch.router import EventRouter

    cfg = ReplicaConfig.from_toml(
        '[sink]\n[[sink.dispatchers]]\nmatcher = ["shop.*"]\ntopic = "cdc"\npartition = "[c1, c2]"\n'
    )
    router = EventRouter(cfg, "cdc", "canal-json")
    both = table("shop", "both", ["id", "c1", "c2"], pk=("id",))
    half = table("shop", "half", ["id", "c2"], pk=("id",))
    none = table("shop", "none", ["id", "v"], pk=("id",))
    router.verify(6, [both, half, none])
    counts = {"cdc": 6}.__getitem__
    assert router.route(insert(both, 1, 7, 8), both, counts) == (
        "cdc",
        (crc(b"shop", b"both") ^ crc(b"c1", b"7") ^ crc(b"c2", b"8")) % 6,
    )
    assert router.route(insert(half, 1, 8), half, counts) == (
        "cdc",
        (crc(b"shop", b"half") ^ crc(b"c2", b"8")) % 6,
    )
    assert {router.route(insert(none, i, "x"), none, counts)[1] for i in range(20)} == {0}
