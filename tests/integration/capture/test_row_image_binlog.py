"""The FULL row-image check on rows events a real MariaDB wrote with each binlog_row_image."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sparkcdc.capture import protocol as P
from sparkcdc.capture.row_image import check_full_image
from sparkcdc.capture.tablemap import parse_table_map
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import UpstreamSetupError
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

Captured = list[tuple[str, int, str, int, bytes, str]]
"""(op, rows event version, db.table, column count of its table map, body, position) per rows event."""

WIDE = ", ".join(f"c{i} INT" for i in range(2, 12))
"""Ten more columns: the bitmaps of the wide table take two bytes."""


def _capture(db: LocalMariaDB, database: str, image: str, *statements: str) -> Captured:
    """The rows events of ``statements``, run in one session with ``binlog_row_image=image``."""
    file, pos = db.query("SHOW MASTER STATUS")[0][:2]
    conn = db.connect(database)
    conn.autocommit(True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = {image}")
            for s in statements:
                cur.execute(s)
    finally:
        conn.close()
    out: Captured = []
    columns: dict[int, tuple[str, int]] = {}
    with P.BinlogStream(UpstreamConfig.from_uri(db.uri), str(file), int(pos), blocking=False) as stream:
        for ev in stream.events():
            if ev.type == P.TABLE_MAP_EVENT:
                tm = parse_table_map(ev.body)
                columns[tm.table_id] = (f"{tm.schema}.{tm.table}", tm.column_count)
            elif ev.type in P.ROWS_EVENTS:
                op, version = P.ROWS_EVENTS[ev.type]
                name, count = columns[int.from_bytes(ev.body[:6], "little")]
                out.append((op, version, name, count, ev.body, f"{stream.file}:{ev.log_pos}"))
    return out


def _statements(table: str) -> tuple[str, ...]:
    return (
        f"INSERT INTO {table} (id, name, doc) VALUES (1, 'a', 'x'), (2, 'b', 'y')",
        f"UPDATE {table} SET name = 'c' WHERE id = 1",
        f"DELETE FROM {table} WHERE id = 2",
    )


@pytest.fixture()
def tables(mariadb: LocalMariaDB, fresh_db: str) -> str:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.narrow (id INT PRIMARY KEY, name VARCHAR(10), doc BLOB)",
        f"CREATE TABLE `{fresh_db}`.wide (id INT PRIMARY KEY, name VARCHAR(10), doc TEXT, {WIDE})",
        f"CREATE TABLE `{fresh_db}`.nokey (id INT, name VARCHAR(10), doc BLOB)",
    )
    return fresh_db


def _check(ev: tuple[str, int, str, int, bytes, str]) -> Callable[[], None]:
    op, version, name, count, body, where = ev
    return lambda: check_full_image(body, version, op, count, table=name, where=where)


EXPECTED: dict[tuple[str, str], dict[str, str | None]] = {
    # image, table -> op -> None (a full image) or what the error says is missing
    ("FULL", "narrow"): {"I": None, "U": None, "D": None},
    ("FULL", "wide"): {"I": None, "U": None, "D": None},
    ("FULL", "nokey"): {"I": None, "U": None, "D": None},
    ("MINIMAL", "narrow"): {
        "I": None,  # the insert named every column
        "U": "before image has 1 of 3 columns, after image has 1 of 3 columns",
        "D": "before image has 1 of 3 columns",
    },
    ("MINIMAL", "wide"): {
        "I": "row has 3 of 13 columns",  # only the columns the insert named
        "U": "before image has 1 of 13 columns, after image has 1 of 13 columns",
        "D": "before image has 1 of 13 columns",
    },
    # without a key MariaDB logs every column of the before image, and of the after image too
    ("MINIMAL", "nokey"): {"I": None, "U": None, "D": None},
    ("NOBLOB", "narrow"): {
        "I": None,  # the insert set the blob
        "U": "before image has 2 of 3 columns, after image has 2 of 3 columns",
        "D": "before image has 2 of 3 columns",
    },
    ("NOBLOB", "wide"): {
        "I": None,
        "U": "before image has 12 of 13 columns, after image has 12 of 13 columns",
        "D": "before image has 12 of 13 columns",
    },
    ("NOBLOB", "nokey"): {"I": None, "U": None, "D": None},
}


@pytest.mark.parametrize(("image", "table"), list(EXPECTED))
def test_rows_events_of_each_row_image(mariadb: LocalMariaDB, tables: str, image: str, table: str) -> None:
    events = _capture(mariadb, tables, image, *_statements(table))
    assert [e[0] for e in events] == ["I", "U", "D"]
    for ev in events:
        op, _version, name, _count, _body, where = ev
        assert name == f"{tables}.{table}"
        missing = EXPECTED[(image, table)][op]
        if missing is None:
            _check(ev)()
            continue
        with pytest.raises(UpstreamSetupError) as info:
            _check(ev)()
        msg = str(info.value)
        assert msg.startswith(
            f"rows event of {tables}.{table} at {where} is not a FULL row image ({missing})"
        )
        assert "binlog_row_image=MINIMAL or NOBLOB" in msg and "SET GLOBAL binlog_row_image=FULL" in msg
        assert "my.cnf" in msg
        assert info.value.code == "CDC:ErrUpstreamSetup" and not info.value.transient


def test_full_bitmaps_are_written_with_the_unused_bits_clear(mariadb: LocalMariaDB, tables: str) -> None:
    """What the fast path compares against: 3 columns are 0x07, 13 columns 0xFF 0x1F."""
    narrow = _capture(mariadb, tables, "FULL", *_statements("narrow"))
    wide = _capture(mariadb, tables, "FULL", *_statements("wide"))
    assert narrow[0][4][8:10] == b"\x03\x07" and narrow[1][4][8:11] == b"\x03\x07\x07"
    assert wide[0][4][8:11] == b"\x0d\xff\x1f" and wide[1][4][8:13] == b"\x0d\xff\x1f\xff\x1f"
