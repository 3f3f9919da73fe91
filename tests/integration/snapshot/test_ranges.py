"""Key ranges and chunk reads against a real MariaDB: coverage, keyset order, value types, splits."""

from __future__ import annotations

import itertools

import pytest

from sparkcdc.capture import snapshot as cs
from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.capture.helpers import read_all
from tests.integration.capture.test_types import COLUMNS, ROWS

pytestmark = pytest.mark.integration


def _info(db: LocalMariaDB, schema: str, table: str) -> TableInfo:
    conn = db.connect()
    try:
        cat = SchemaCatalog.load_from_upstream(conn, None, 1)
    finally:
        conn.close()
    info = cat.get(schema, table)
    assert info is not None
    return info


def _read_range(conn: object, info: TableInfo, r: cs.KeyRange, chunk: int) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    after = r.after
    while True:
        rows = cs.read_chunk(conn, info, after, r.upto, chunk)
        out.extend(rows)
        if len(rows) < chunk:
            return out
        after = tuple(rows[-1][i] for i in info.handle_key_index)


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_ranges_of_a_composite_key_cover_every_row_once(
    mariadb: LocalMariaDB, fresh_db: str, chunk: int
) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (a INT NOT NULL, b VARCHAR(10) NOT NULL, v INT, UNIQUE KEY u (a, b))",
        f"INSERT INTO `{fresh_db}`.t SELECT seq DIV 7, CONCAT('k', seq % 7), seq FROM `{fresh_db}`.seq_1_to_1000",
    )
    info = _info(mariadb, fresh_db, "t")
    assert info.handle_key == ("a", "b")
    conn = UpstreamConfig.from_uri(mariadb.uri).connect(conv=cs.reader_conv())
    try:
        ranges = cs.plan_table_ranges(conn, info, 97, 1)
        assert len(ranges) == 11  # ten full ranges of 97 rows and the last 30
        assert [r.range_id for r in ranges] == list(range(1, 12))
        assert ranges[0].after is None and ranges[-1].upto is None and ranges[-1].estimated_rows == 30
        for prev, nxt in itertools.pairwise(ranges):
            assert prev.upto == nxt.after
        seen = [row[2] for r in ranges for row in _read_range(conn, info, r, chunk)]
    finally:
        conn.close()
    assert sorted(seen) == list(range(1, 1001))
    assert len(seen) == 1000


def test_a_table_without_a_key_is_one_range(
    mariadb: LocalMariaDB, fresh_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.nokey (a INT, b INT)",
        f"INSERT INTO `{fresh_db}`.nokey VALUES (1, 1), (1, 1)",
    )
    info = _info(mariadb, fresh_db, "nokey")
    conn = UpstreamConfig.from_uri(mariadb.uri).connect()
    try:
        ranges = cs.plan_table_ranges(conn, info, 1, 5)
    finally:
        conn.close()
    assert [(r.range_id, r.after, r.upto) for r in ranges] == [(5, None, None)]
    assert "read as one range" in caplog.text


def test_split_remaining_hands_the_rest_to_children(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id BIGINT PRIMARY KEY)",
        f"INSERT INTO `{fresh_db}`.t SELECT seq * 10 FROM `{fresh_db}`.seq_1_to_500",
    )
    info = _info(mariadb, fresh_db, "t")
    conn = UpstreamConfig.from_uri(mariadb.uri).connect()
    try:
        children = cs.split_remaining(conn, info, 3, (1000,), (4000,), 100)
    finally:
        conn.close()
    # (1000, 4000] holds 300 rows: three children of 100 rows each.
    assert [(c.after, c.upto) for c in children] == [
        ((1000,), (2000,)),
        ((2000,), (3000,)),
        ((3000,), (4000,)),
    ]
    assert [cs.range_depth(c.range_id) for c in children] == [1, 1, 1]
    assert len({c.range_id for c in children} | {3}) == 4


def test_snapshot_values_equal_the_binlog_decoders(mariadb: LocalMariaDB, fresh_db: str) -> None:
    """A chunk read converts every type to exactly what the binlog decoder yields for the same row."""
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.all_types (id INT PRIMARY KEY, {cols})")
    start = head_offset(UpstreamConfig.from_uri(mariadb.uri))
    conn = mariadb.connect(fresh_db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        for i, row in enumerate(ROWS, start=1):
            cur.execute(f"INSERT INTO all_types VALUES ({i}, {', '.join(row)})")
    conn.close()
    binlog = {
        ev.after[0]: ev.after
        for ev in read_all(mariadb, start, fresh_db)
        if isinstance(ev, RowChange) and ev.after
    }
    info = _info(mariadb, fresh_db, "all_types")
    for tz in ("UTC", "+05:30"):
        if tz != "UTC":
            binlog = {
                ev.after[0]: ev.after
                for ev in read_all(mariadb, start, fresh_db, tz=tz)
                if isinstance(ev, RowChange) and ev.after
            }
        up = UpstreamConfig.from_uri(mariadb.uri).connect(conv=cs.reader_conv())
        try:
            raw = cs.read_chunk(up, info, None, None, 100)
        finally:
            up.close()
        conv = cs.RowConverter(info, tz)
        got = {r[0]: r for r in (conv.convert(x) for x in raw)}
        assert set(got) == set(binlog) == {1, 2, 3}
        for pk in got:
            for k, c in enumerate(info.columns):
                assert got[pk][k] == binlog[pk][k], (
                    f"{tz} row {pk} column {c.name}: {got[pk][k]!r} != {binlog[pk][k]!r}"
                )
                assert type(got[pk][k]) is type(binlog[pk][k])
            assert cs.key_token(got[pk]) == cs.key_token(binlog[pk])
