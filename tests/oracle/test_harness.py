"""The oracle harness alone: its comparison and how it names the segment a failed run stopped in."""

from __future__ import annotations

from sparkcdc.services.mariadb import LocalMariaDB
from tests.oracle.harness import Boundary, Segment, TableData, diff_table, failed_segment

COLS = [("id", "int(11)"), ("v", "varchar(10)")]


def test_equal_tables_have_no_problem() -> None:
    rows = [("1", "a"), ("2", "b")]
    assert (
        diff_table(TableData(COLS, ["id"], rows), TableData(COLS, ["id"], list(rows)), "d.t", "kafka") == []
    )


def test_first_differing_key_names_both_rows() -> None:
    native = TableData(COLS, ["id"], [("1", "a"), ("2", "b"), ("3", "c")])
    replica = TableData(COLS, ["id"], [("1", "a"), ("2", "B"), ("4", "d")])
    (problem,) = diff_table(native, replica, "d.t", "storage")
    assert "d.t: 3 rows on the native replica, 3 on storage" in problem
    assert "first differing key (id='2'): native ('2', 'b'), storage ('2', 'B')" in problem


def test_a_missing_and_an_extra_key() -> None:
    native = TableData(COLS, ["id"], [("1", "a")])
    (missing,) = diff_table(native, TableData(COLS, ["id"], []), "d.t", "mysql")
    assert "first differing key (id='1'): native ('1', 'a'), mysql missing" in missing
    (extra,) = diff_table(native, TableData(COLS, ["id"], [("1", "a"), ("9", "z")]), "d.t", "mysql")
    assert "first differing key (id='9'): native missing, mysql ('9', 'z')" in extra


def test_table_without_key_compares_as_a_multiset() -> None:
    native = TableData(COLS, [], [("1", "x"), ("1", "x"), ("2", "y")])
    replica = TableData(COLS, [], [("1", "x"), ("2", "y")])
    (problem,) = diff_table(native, replica, "d.nopk", "kafka")
    assert "first differing row (id='1', v='x'): 2 on the native replica, 1 on kafka" in problem


def test_columns_and_key_differences_come_first() -> None:
    native = TableData(COLS, ["id"], [("1", "a")])
    (cols,) = diff_table(native, TableData([*COLS, ("w", "int(11)")], ["id"], [("1", "a", None)]), "d.t", "x")
    assert "columns differ" in cols and "('w', 'int(11)')" in cols
    (key,) = diff_table(native, TableData(COLS, [], [("1", "a")]), "d.t", "x")
    assert "primary key differs: native ['id'], x []" in key


def _noop(up: LocalMariaDB) -> None:
    """A segment's writer (never called here)."""


BEGIN = Boundary("", "mysql-bin.000001", 400, 100)
BOUNDS = [
    Boundary("a", "mysql-bin.000001", 1000, 110),
    Boundary("b", "mysql-bin.000001", 2000, 120),
    Boundary("c", "mysql-bin.000003", 500, 130),
    Boundary("d", "mysql-bin.000003", 900, 140),
]
SEGS = [Segment(b.segment, _noop, (f"db_{b.segment}",)) for b in BOUNDS]


def test_a_position_in_the_error_names_its_segment() -> None:
    err = (
        "[CDC:ErrDecode] the transaction at mysql-bin.000001:1500 ends with ROLLBACK at mysql-bin.000001:1800"
    )
    assert failed_segment(BEGIN, BOUNDS, SEGS, 100, err, None) == 1
    # a transaction that starts at a boundary belongs to the next segment; later files sort later
    assert failed_segment(BEGIN, BOUNDS, SEGS, 100, "at mysql-bin.000001:2000", None) == 2
    assert failed_segment(BEGIN, BOUNDS, SEGS, 100, "at mysql-bin.000003:600", None) == 3


def test_a_position_before_the_run_start_is_passed_over() -> None:
    # a run resumed after segment b: an older position in the text does not blame a or b
    err = "after mysql-bin.000001:1500: refused at mysql-bin.000003:700"
    assert failed_segment(BEGIN, BOUNDS, SEGS, 120, err, None) == 3


def test_without_a_position_the_named_database_tells() -> None:
    err = "applying DDL 'ALTER TABLE t ...' in schema 'db_c': the downstream refused the statement"
    assert failed_segment(BEGIN, BOUNDS, SEGS, 100, err, 105) == 2
    # db_c is not db_cc
    assert failed_segment(BEGIN, BOUNDS, SEGS, 100, "schema 'db_cc'", None) is None


def test_the_checkpoint_is_the_last_resort_and_no_progress_blames_nothing() -> None:
    assert failed_segment(BEGIN, BOUNDS, SEGS, 100, "Lost connection", 115) == 1
    assert failed_segment(BEGIN, BOUNDS, SEGS, 110, "Lost connection", 110) is None
    assert failed_segment(BEGIN, BOUNDS, SEGS, 140, "at mysql-bin.000003:950", None) is None


def test_runs_stop_after_the_restart_segments_then_at_the_target() -> None:
    from tests.oracle.harness import Capture

    cap = Capture("c", 100, 140, ["db_a"], SEGS, BEGIN, BOUNDS, None, {}, {}, restarts=("a", "c"))  # type: ignore[arg-type]
    assert cap.stops(100) == [110, 130, 140]
    # a run resumed after segment b (a failure): only the restarts after its start
    assert cap.stops(120) == [130, 140]
    assert cap.stops(130) == [140]
