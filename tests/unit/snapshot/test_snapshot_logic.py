"""Range splitting and the handover correction, without services.

The correction is checked against a simulation: a table with a history of random changes after S,
read chunk by chunk with keyset pagination at random moments of that history (so chunks see
different states, as real chunk reads do), then corrected with the first events after S. The
result must be the table at S, for every history and read schedule.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture import snapshot as cs
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.pipeline.snapshot import FileRangeStore, InitialSnapshot, RangeState, SnapshotOptions


def test_key_values_round_trip_through_json() -> None:
    key = (1, -(2**63), "é'x", Decimal("-12.50"), b"\x00\xff", 1.5, None, "2024-01-01 00:00:00.5")
    data = json.loads(json.dumps(cs.encode_key(key)))
    assert cs.decode_key(data) == key
    assert type(cs.decode_key(data)[3]) is Decimal  # type: ignore[index]
    assert cs.encode_key(None) is None and cs.decode_key(None) is None
    with pytest.raises(TypeError, match="cannot store a key value of type object"):
        cs.encode_key((object(),))


def test_key_tokens_tell_types_and_values_apart() -> None:
    assert cs.key_token((1, "a")) == cs.key_token([1, "a"])
    assert len({cs.key_token(k) for k in [(1,), ("1",), (b"1",), (Decimal("1"),), (1.0,), (1, "")]}) == 6


def test_range_predicates_are_keyset_comparisons() -> None:
    where, params = cs.range_predicate(["id"], (5,), (9,))
    assert where == "`id` > %s AND `id` <= %s" and params == [5, 9]
    where, params = cs.range_predicate(["a", "b`c"], (1, "x"), None)
    assert where == "(`a` > %s OR (`a` = %s AND `b``c` > %s))" and params == [1, 1, "x"]
    where, params = cs.range_predicate(["a", "b", "c"], None, (1, 2, 3))
    assert where == "(`a` < %s OR (`a` = %s AND (`b` < %s OR (`b` = %s AND `c` <= %s))))"
    assert params == [1, 1, 2, 2, 3]
    assert cs.range_predicate(["a"], None, None) == ("1=1", [])


def test_keyset_predicate_matches_tuple_order() -> None:
    """Evaluate the generated predicate in Python: it must equal (after < key <= upto) on tuples."""
    rnd = random.Random(3)
    cols = ["a", "b", "c"]
    keys = sorted({(rnd.randint(0, 3), rnd.randint(0, 3), rnd.randint(0, 3)) for _ in range(40)})
    for _ in range(50):
        after, upto = sorted(rnd.sample(keys, 2))
        where, params = cs.range_predicate(cols, after, upto)
        expr = where.replace("`", "").replace(" = ", " == ").replace("OR", "or").replace("AND", "and")
        for k in keys:
            env = dict(zip(cols, k, strict=True))
            it = iter(params)
            py = "".join(repr(next(it)) if part == "%s" else part for part in _split_params(expr))
            assert eval(py, {}, env) == (after < k <= upto), (where, k)


def _split_params(expr: str) -> list[str]:
    out: list[str] = []
    for i, part in enumerate(expr.split("%s")):
        if i:
            out.append("%s")
        out.append(part)
    return out


def test_child_range_ids_are_unique_paths() -> None:
    ids = set()
    frontier = [(r, 0) for r in range(1, 40)]
    for parent, depth in frontier[:]:
        for i in range(1, 6):
            c = cs.child_range_id(parent, depth, i)
            assert cs.range_depth(c) == depth + 1
            ids.add(c)
            for j in range(1, 4):
                g = cs.child_range_id(c, depth + 1, j)
                assert cs.range_depth(g) == depth + 2
                ids.add(g)
    ids |= {r for r, _ in frontier}
    assert len(ids) == 39 + 39 * 5 + 39 * 5 * 3
    assert cs.range_depth(7) == 0
    with pytest.raises(ValueError):
        cs.child_range_id(1, 0, 256)


def test_range_rows_give_every_task_slot_a_few_ranges_of_whole_chunks() -> None:
    snap = InitialSnapshot(
        None,
        changefeed_id="x",
        upstream_uri="mysql://root:@127.0.0.1:3306/",
        checkpoint_dir="/nonexistent",
        history_path="",
        handover=None,  # type: ignore[arg-type]
        filter_rules=["*.*"],
        options=SnapshotOptions(chunk_size=1000, parallelism=2),
    )
    assert snap.range_rows_for(500_000) == 4000  # capped at max_chunks_per_range chunks
    assert snap.range_rows_for(20_000) == 2500  # 8 ranges for 2 slots
    assert snap.range_rows_for(10) == 1000  # never below one chunk
    assert snap.range_rows_for(10**12) >= 10**12 // 65535  # initial range ids stay within 16 bits


# ----------------------------------------------------------------------------- corrections


INFO = TableInfo(
    "db",
    "t",
    (ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "int")),
    (IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
)


def _ev(op: str, ts: int, seq: int, before: Any, after: Any) -> RowChange:
    return RowChange(op, "db", "t", 1, ts, before, after, seq)  # type: ignore[arg-type]


def test_touched_keys_of_each_operation() -> None:
    assert cs.touched_keys(_ev("I", 1, 0, None, (1, 10)), (0,)) == [((1,), None)]
    assert cs.touched_keys(_ev("D", 1, 0, (1, 10), None), (0,)) == [((1,), (1, 10))]
    assert cs.touched_keys(_ev("U", 1, 0, (1, 10), (1, 11)), (0,)) == [((1,), (1, 10))]
    assert cs.touched_keys(_ev("U", 1, 0, (1, 10), (2, 10)), (0,)) == [((1,), (1, 10)), ((2,), None)]


def _simulate(seed: int) -> None:
    rnd = random.Random(seed)
    table = {k: rnd.randint(0, 9) for k in rnd.sample(range(200), 120)}
    at_s = dict(table)
    states = [dict(table)]
    events: list[RowChange] = []
    for ts in range(1, 400):
        op = rnd.choice("IUDMX")
        k = rnd.randrange(200)
        seq = 0
        if op == "I" and k not in table:
            table[k] = rnd.randint(0, 9)
            events.append(_ev("I", ts, seq, None, (k, table[k])))
        elif op == "U" and k in table:
            old = (k, table[k])
            table[k] += 1
            events.append(_ev("U", ts, seq, old, (k, table[k])))
        elif op == "D" and k in table:
            events.append(_ev("D", ts, seq, (k, table.pop(k)), None))
        elif op == "M" and k in table:  # a key change to a free key
            new = rnd.randrange(200)
            if new not in table:
                v = table.pop(k)
                table[new] = v
                events.append(_ev("U", ts, seq, (k, v), (new, v)))
        elif op == "X" and k in table:  # two rows of one transaction: delete then re-insert the key
            events.append(_ev("D", ts, 0, (k, table.pop(k)), None))
            table[k] = 99
            events.append(_ev("I", ts, 1, None, (k, 99)))
        states.append(dict(table))
    # Keyset pagination: each chunk reads the keys after the last one, at a later moment of the history.
    snapshot: list[tuple[str, str, str, tuple[Any, ...]]] = []
    last = -1
    t = 0
    while True:
        t = min(len(states) - 1, t + rnd.randint(0, 40))
        state = states[t]
        chunk = sorted(k for k in state if k > last)[: rnd.randint(1, 15)]
        if not chunk:
            break
        snapshot.extend(("db", "t", cs.key_token((k,)), (k, state[k])) for k in chunk)
        last = chunk[-1]
    corrections = cs.first_events(events, lambda s, tb: (0,) if (s, tb) == ("db", "t") else None)
    got = sorted(row for _, _, row in cs.state_at_handover(snapshot, corrections))
    assert got == sorted(at_s.items()), f"seed {seed}"


@pytest.mark.parametrize("seed", range(40))
def test_corrected_snapshot_is_the_state_at_s_for_any_read_schedule(seed: int) -> None:
    _simulate(seed)


def test_first_event_wins_whatever_the_input_order() -> None:
    evs = [_ev("U", 5, 0, (1, 2), (1, 3)), _ev("D", 3, 1, (1, 1), None), _ev("I", 3, 2, None, (1, 2))]
    c = cs.first_events(evs, lambda s, t: (0,))
    assert c[("db", "t", cs.key_token((1,)))].row == (1, 1)


# ----------------------------------------------------------------------------- key-less tables


def test_undo_changes_restores_the_multiset_at_s() -> None:
    at_s = [(1, "a"), (1, "a"), (2, "b"), (3, None)]
    changes = [
        _ev("D", 1, 0, (1, "a"), None),
        _ev("I", 2, 0, None, (2, "b")),
        _ev("I", 2, 1, None, (4, "d")),
        _ev("U", 3, 0, (3, None), (3, "z")),
        _ev("I", 4, 0, None, (1, "a")),  # re-inserted: net zero for (1, "a")
        _ev("D", 5, 0, (1, "a"), None),
    ]
    at_read = [(1, "a"), (2, "b"), (2, "b"), (4, "d"), (3, "z")]
    delta = cs.MultisetDelta()
    for ev in changes:
        delta.add(ev)
    assert sorted(cs.undo_changes(at_read, delta), key=repr) == sorted(at_s, key=repr)


def test_undo_changes_refuses_a_read_that_lacks_logged_rows() -> None:
    delta = cs.MultisetDelta()
    delta.add(_ev("I", 1, 0, None, (9, "x")))
    with pytest.raises(Exception, match="lacks 1 row"):
        list(cs.undo_changes([(1, "a")], delta))


# ----------------------------------------------------------------------------- values and progress


def test_row_converter_matches_the_binlog_value_types() -> None:
    info = TableInfo(
        "db",
        "t",
        (
            ColumnInfo("b", "bit", length=10),
            ColumnInfo("f", "float"),
            ColumnInfo("ts", "timestamp", fsp=3),
            ColumnInfo("vb", "varbinary"),
            ColumnInfo("y", "year"),
            ColumnInfo("n", "int"),
        ),
    )
    raw = (b"\x01\x02", 1.2345677614212036, "2024-01-01 23:30:00.500", bytearray(b"\x00"), 2024, None)
    assert cs.RowConverter(info).convert(raw) == (
        258,
        1.2345677614212036,
        "2024-01-01 23:30:00.500",
        b"\x00",
        2024,
        None,
    )
    east = cs.RowConverter(info, "+05:30").convert(raw)
    assert east[2] == "2024-01-02 05:00:00.500"
    assert cs.RowConverter(info, "+05:30").convert((None, None, "0000-00-00 00:00:00.000", None, 0, 1))[
        2:5:2
    ] == (
        "0000-00-00 00:00:00.000",
        0,
    )
    assert cs.select_list(info).startswith("`b`, CAST(`f` AS DOUBLE), `ts`")


def test_file_range_store_round_trip(tmp_path: Path) -> None:
    store = FileRangeStore(str(tmp_path / "ranges"))
    assert store.load_all() == []
    a = RangeState(2, "db", "t", cs.encode_key((5,)), None, 77, last_key=cs.encode_key((9,)), rows_copied=3)
    b = RangeState(
        1, "db", "t", None, cs.encode_key((5,)), 77, stage="done", files=["1/000000000005.parquet"]
    )
    store.save(a)
    store.save(b)
    a.rows_copied = 4
    store.save(a)
    got = store.load_all()
    assert [s.range_id for s in got] == [1, 2] and got[1].rows_copied == 4 and got[0].finished
    assert not got[1].finished and cs.decode_key(got[1].last_key) == (9,)
    store.clear()
    assert store.load_all() == []


def test_a_task_of_an_older_run_cannot_overwrite_a_newer_runs_range(tmp_path: Path) -> None:
    from sparkcdc.pipeline.snapshot import StaleRangeWriter

    store = FileRangeStore(str(tmp_path / "ranges"))
    old = RangeState(1, "db", "t", None, None, 77, rows_copied=10, epoch=1)
    store.save(old)
    new = RangeState(1, "db", "t", None, None, 77, rows_copied=10, epoch=2, attempts=2)
    store.save(new)
    old.rows_copied = 20
    with pytest.raises(StaleRangeWriter, match="belongs to snapshot run 2"):
        store.save(old)
    assert store.load_all()[0].rows_copied == 10 and store.load_all()[0].epoch == 2
