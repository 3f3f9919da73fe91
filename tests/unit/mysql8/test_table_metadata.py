"""MySQL 8 table metadata: invisible columns and functional indexes in DDL, MySQL's charset metadata layout."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from sparkcdc.capture import protocol as P
from sparkcdc.capture import tablemap as t
from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import RawEvent
from sparkcdc.capture.tablemap import parse_table_map
from sparkcdc.capture.txnstream import TableMapItem, TxnStream
from sparkcdc.model.events import DDLType

# SHOW CREATE TABLE of MySQL 8.4 for a table with an invisible column and functional indexes
MYSQL_SHOW_CREATE = """CREATE TABLE `t` (
  `id` int NOT NULL,
  `a` int DEFAULT NULL,
  `b` int DEFAULT NULL /*!80023 INVISIBLE */,
  `j` json DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `fi` (((`a` + `b`))),
  UNIQUE KEY `fu` (((`a` * 2)),`b`),
  KEY `fj` ((cast(json_extract(`j`,_utf8mb4'$.x') as unsigned array)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"""


def test_functional_indexes_and_invisible_columns_are_tracked() -> None:
    c = SchemaCatalog()
    c.apply_ddl("CREATE DATABASE db", None, 1)
    c.apply_ddl(MYSQL_SHOW_CREATE, "db", 2)
    info = c.get("db", "t")
    assert info is not None
    assert [col.name for col in info.columns] == ["id", "a", "b", "j"]  # invisible columns are in row images
    idx = {ix.name: ix for ix in info.indexes}
    assert idx["PRIMARY"].primary and idx["PRIMARY"].columns == ("id",)
    # an expression is no column: a functional index is never a key of the rows' identity
    assert (idx["fi"].columns, idx["fi"].unique) == ((), False)
    assert (idx["fu"].columns, idx["fu"].unique) == (("b",), False)
    assert idx["fj"].columns == ()
    events = c.apply_ddl("CREATE INDEX g ON t ((a * 2) DESC, (lower(j->>'$.n')))", "db", 3)
    assert [e.ddl_type for e in events] == [DDLType.ADD_INDEX]
    c.apply_ddl(
        "ALTER TABLE t ADD INDEX ((a + 1)), ALTER COLUMN a SET INVISIBLE, ADD COLUMN c int INVISIBLE", "db", 4
    )
    c.apply_ddl("DROP INDEX fi ON t", "db", 5)
    info = c.get("db", "t")
    assert info is not None
    assert [ix.name for ix in info.indexes] == ["PRIMARY", "fu", "fj", "g", "functional_index"]
    assert [col.name for col in info.columns] == ["id", "a", "b", "j", "c"]


MYSQL_SHOW_CREATE_MORE = [
    # 8.0.13 expression defaults, 8.0.16 CHECK constraints, SRID, VIRTUAL columns, invisible indexes
    """CREATE TABLE `t1` (
  `id` int NOT NULL AUTO_INCREMENT,
  `j` json DEFAULT (json_array()),
  `u` binary(16) DEFAULT (uuid_to_bin(uuid())),
  `d` date DEFAULT (curdate()),
  PRIMARY KEY (`id`)
) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci""",
    """CREATE TABLE `t2` (
  `id` int NOT NULL,
  `a` int DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `t2_chk_1` CHECK ((`a` > 0)),
  CONSTRAINT `c2` CHECK ((`a` < 100)) /*!80016 NOT ENFORCED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci""",
    """CREATE TABLE `t3` (
  `id` int NOT NULL,
  `g` point NOT NULL /*!80003 SRID 4326 */,
  `v` int GENERATED ALWAYS AS ((`id` * 2)) VIRTUAL,
  `s` varchar(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_as_cs DEFAULT NULL,
  PRIMARY KEY (`id`),
  SPATIAL KEY `g` (`g`),
  KEY `k` (`s`) /*!80000 INVISIBLE */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci""",
    "ALTER TABLE t3 ALTER INDEX k VISIBLE",
]


def test_more_mysql8_show_create_forms_are_tracked() -> None:
    c = SchemaCatalog()
    c.apply_ddl("CREATE DATABASE db", None, 1)
    for k, sql in enumerate(MYSQL_SHOW_CREATE_MORE):
        c.apply_ddl(sql, "db", 2 + k)
    t3 = c.get("db", "t3")
    assert t3 is not None
    assert [col.name for col in t3.columns] == ["id", "g", "v", "s"]
    assert [ix.name for ix in t3.indexes] == ["PRIMARY", "g", "k"]


def _table_map_body(types: list[int], meta: bytes, charsets: list[int]) -> bytes:
    """A TABLE_MAP body with COLUMN_CHARSET metadata listing ``charsets`` for the character columns."""
    body = (7).to_bytes(6, "little") + b"\x01\x00"
    body += b"\x02db\x00" + b"\x01t\x00"
    body += bytes([len(types)]) + bytes(types) + bytes([len(meta)]) + meta
    body += b"\xff"  # all nullable
    cs = b"".join(bytes([c]) for c in charsets)
    body += bytes([3, len(cs)]) + cs
    names = b"".join(bytes([len(n)]) + n for n in (b"g", b"v"))
    body += bytes([4, len(names)]) + names
    return body


def test_geometry_is_no_character_column_in_mysql_charset_metadata() -> None:
    types = [t.T_GEOMETRY, t.T_VARCHAR]
    meta = b"\x04" + struct.pack("<H", 40)
    mysql = parse_table_map(_table_map_body(types, meta, [45]), mariadb=False)
    assert mysql.charsets == [None, 45]
    maria = parse_table_map(_table_map_body(types, meta, [63, 45]), mariadb=True)
    assert maria.charsets == [63, 45]


class _Stream:
    def __init__(self, events: list[RawEvent]) -> None:
        self._events = events

    def events(self) -> Iterator[RawEvent]:
        yield from self._events


def _fde(version: str) -> RawEvent:
    body = (
        struct.pack("<H", 4)
        + version.encode().ljust(50, b"\x00")
        + struct.pack("<I", 1_700_000_000)
        + b"\x13"
    )
    return RawEvent(1_700_000_000, P.FORMAT_DESCRIPTION_EVENT, 1, 19 + len(body), 0, 0, body)


def test_the_format_description_tells_whose_table_maps_follow() -> None:
    types = [t.T_GEOMETRY, t.T_VARCHAR]
    meta = b"\x04" + struct.pack("<H", 40)
    tm_event = RawEvent(1_700_000_000, P.TABLE_MAP_EVENT, 1, 0, 200, 0, _table_map_body(types, meta, [45]))
    for version, expect in (("8.4.3", [None, 45]), ("10.11.6-MariaDB-log", [45, None])):
        items = list(TxnStream(_Stream([_fde(version), tm_event]), Offset("binlog.000001", 4, 0)).items())  # type: ignore[arg-type]
        maps = [i.tm for i in items if isinstance(i, TableMapItem)]
        assert maps[0].charsets == expect, version


def test_previous_gtids_tell_a_mysql_file_has_history() -> None:
    from sparkcdc.capture.txnstream import first_event_info

    sid = bytes(range(16))
    one = struct.pack("<Q", 1) + sid + struct.pack("<Q", 1) + struct.pack("<QQ", 1, 101)
    for body, count in ((struct.pack("<Q", 0), 0), (one, 1)):
        prev = RawEvent(1_700_000_000, P.PREVIOUS_GTIDS_EVENT, 1, 19 + len(body), 200, 0, body)
        info = first_event_info(_Stream([_fde("8.4.3"), prev]))  # type: ignore[arg-type]
        assert info == {"fde_ts": 1_700_000_000, "gtid_list_count": count}
