"""MariaDB's hidden column of a long UNIQUE key, on a real server.

A UNIQUE key over a TEXT column (or too long a VARCHAR) makes MariaDB add a hidden column,
``DB_ROW_HASH_1``, after the table's own; the binlog's table map names it and its rows carry its
value, while the table's definition does not have it. Capture decoded those rows with the map's
columns, and the MySQL sink named the hidden column in its INSERT (``main/ctype_utf8_uca``
through the oracle paths). The rows now have the table's columns only.
"""

from __future__ import annotations

import pytest

from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model import RowChange
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration]


def test_rows_leave_out_the_hidden_hash_columns(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, a TEXT, b INT, c VARCHAR(2000), "
        "UNIQUE (a), UNIQUE (c, b)) ENGINE=InnoDB"
    )
    up = UpstreamConfig.from_uri(mariadb.uri)
    start = head_offset(up)
    mariadb.execute(
        f"INSERT INTO `{fresh_db}`.t VALUES (1, 'x', 5, 'p'), (2, 'y', 6, NULL)",
        f"UPDATE `{fresh_db}`.t SET a = 'z' WHERE id = 1",
        f"DELETE FROM `{fresh_db}`.t WHERE id = 2",
    )
    conn = mariadb.connect()
    try:
        info = SchemaCatalog.load_from_upstream(conn, None, 1).get(fresh_db, "t")
    finally:
        conn.close()
    assert info is not None and list(info.column_names) == ["id", "a", "b", "c"]
    shapes = TableShapes(lambda s, t: info if (s, t) == (fresh_db, "t") else None)
    rows = [
        (ev.op, ev.before, ev.after)
        for ev in RowReader(up, start, head_offset(up), shapes=shapes).events()
        if isinstance(ev, RowChange)
    ]
    assert rows == [
        ("I", None, (1, "x", 5, "p")),
        ("I", None, (2, "y", 6, None)),
        ("U", (1, "x", 5, "p"), (1, "z", 5, "p")),
        ("D", (2, "y", 6, None), None),
    ]
    assert shapes.last[(fresh_db, "t")] is info
