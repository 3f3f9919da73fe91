"""MariaDB's UUID, INET4 and INET6 columns on a real server: binlog rows and snapshot rows give its text.

As primary key and as plain columns, NULLs included: the binlog decoders (C and Python) and the
snapshot readers (the C text-row reader and PyMySQL) must give exactly what ``SELECT col`` prints.
Random 16-byte values are cast upstream (``CAST(x'..' AS INET6)``), so MariaDB's own text is the
reference for the address printing rules (zero runs, IPv4-mapped and -compatible forms).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from sparkcdc.capture import rowcodec
from sparkcdc.capture import snapshot as cs
from sparkcdc.capture.catalog import SchemaCatalog
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import SchemaError
from sparkcdc.filter import changefeed_filter
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration]

EDGE_INET6 = [
    "::",
    "::1",
    "::ffff:1.2.3.4",
    "::1.2.3.4",
    "1:0:2:3:4:5:6:7",
    "0:0:1::",
    "1:0:0:2:0:0:0:3",
    "::0.0.1.2",
    "::ffff:0:1.2.3.4",
    "2001:db8::ff00:42:8329",
    "fe80::1:2:3:4",
    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
]


def _inet6_samples(rng: random.Random, n: int) -> list[bytes]:
    """Random addresses with zero groups in random places (the text rules are about zero runs)."""
    out = []
    for _ in range(n):
        words = [rng.choice([0, 0, 0, rng.randrange(1, 0x10000), 0xFFFF]) for _ in range(8)]
        out.append(b"".join(w.to_bytes(2, "big") for w in words))
    return out


def _fill(db: LocalMariaDB, schema: str) -> Offset:
    """Create the table and write inserts, updates (key included) and deletes; returns where they start."""
    db.execute(
        f"CREATE TABLE `{schema}`.t (id UUID PRIMARY KEY, a INET4, b INET6 NULL, c UUID NULL, "
        "d INET4 NOT NULL DEFAULT '0.0.0.0', n INT NOT NULL)",
    )
    start = head_offset(UpstreamConfig.from_uri(db.uri))
    rng = random.Random(11)
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            n = 0
            # UUID() makes time-based (v1) UUIDs, which InnoDB keeps in another byte order
            for addr in EDGE_INET6:
                cur.execute("INSERT INTO t VALUES (UUID(), '10.0.0.1', %s, NULL, '0.0.0.0', %s)", (addr, n))
                n += 1
            for raw in _inet6_samples(rng, 120):
                raw16 = bytearray(rng.randbytes(16))
                raw16[6] &= 0x7F  # versions 0-7, every variant (MariaDB refuses version >= 8 with variant 0)
                u = str(uuid.UUID(bytes=bytes(raw16)))
                four = ".".join(str(rng.choice([0, 255, rng.randrange(256)])) for _ in range(4))
                cur.execute(
                    "INSERT INTO t VALUES (%s, %s, CAST(%s AS INET6), %s, %s, %s)",
                    (u, rng.choice([four, None]), raw, rng.choice([str(uuid.uuid4()), None]), four, n),
                )
                n += 1
            cur.execute(
                "INSERT INTO t VALUES ('00000000-0000-0000-0000-000000000000', NULL, NULL, NULL, DEFAULT, -1)"
            )
            cur.execute("UPDATE t SET b = '::ffff:9.9.9.9', c = UUID() WHERE n % 7 = 0")
            cur.execute("UPDATE t SET id = UUID() WHERE n % 11 = 0")  # the primary key changes
            cur.execute("DELETE FROM t WHERE n % 13 = 5")
        conn.commit()
    finally:
        conn.close()
    return start


def _tracked(db: LocalMariaDB, schema: str) -> TableInfo:
    conn = db.connect()
    try:
        cat = SchemaCatalog.load_from_upstream(conn, None, 1)
    finally:
        conn.close()
    info = cat.get(schema, "t")
    assert info is not None
    return info


def _server_rows(db: LocalMariaDB, schema: str) -> dict[int, tuple[Any, ...]]:
    """Every row as the server prints it, by ``n``."""
    rows = db.query("SELECT id, a, b, c, d, n FROM t", database=schema)
    return {int(r[5]): tuple(r) for r in rows}


def _binlog_rows(db: LocalMariaDB, info: TableInfo, start: Offset) -> list[RowChange]:
    up = UpstreamConfig.from_uri(db.uri)
    shapes = TableShapes(lambda s, t: info if (s, t) == (info.schema, info.table) else None)
    return [
        ev
        for ev in RowReader(up, start, head_offset(up), shapes=shapes).events()
        if isinstance(ev, RowChange) and ev.schema == info.schema
    ]


def _replay(events: list[RowChange]) -> dict[int, tuple[Any, ...]]:
    """The table the row changes leave, by ``n`` (the last column)."""
    table: dict[int, tuple[Any, ...]] = {}
    for ev in events:
        if ev.before is not None:
            assert table.pop(ev.before[5]) == ev.before
        if ev.after is not None:
            table[ev.after[5]] = ev.after
    return table


@pytest.mark.parametrize("native", [True, False])
def test_binlog_rows_give_the_servers_text(
    mariadb: LocalMariaDB, fresh_db: str, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not native:
        monkeypatch.setattr(rowcodec, "_native", None)  # the Python reference decoder
    start = _fill(mariadb, fresh_db)
    info = _tracked(mariadb, fresh_db)
    assert [c.type for c in info.columns] == ["uuid", "inet4", "inet6", "uuid", "inet4", "int"]
    events = _binlog_rows(mariadb, info, start)
    assert {ev.op for ev in events} == {"I", "U", "D"}
    values = [v for ev in events for img in (ev.before, ev.after) if img for v in img[:5]]
    assert None in values and not any(isinstance(v, bytes) for v in values)
    assert _replay(events) == _server_rows(mariadb, fresh_db)


def test_snapshot_rows_give_the_same_text_as_the_binlog(mariadb: LocalMariaDB, fresh_db: str) -> None:
    _fill(mariadb, fresh_db)
    info = _tracked(mariadb, fresh_db)
    want = _server_rows(mariadb, fresh_db)
    up = UpstreamConfig.from_uri(mariadb.uri)
    conn = up.connect(conv=cs.reader_conv())
    try:
        reader = cs.TextRowReader(info, "UTC")
        fast = cs.read_values(conn, reader, None, None, 1000) if reader.usable else None
        ref = [cs.RowConverter(info).convert(r) for r in cs.read_chunk(conn, info, None, None, 1000)]
        # chunked by the UUID key: the server orders and compares it, the chunks meet exactly
        first = [cs.RowConverter(info).convert(r) for r in cs.read_chunk(conn, info, None, None, 40)]
        rest = [
            cs.RowConverter(info).convert(r) for r in cs.read_chunk(conn, info, (first[-1][0],), None, 1000)
        ]
    finally:
        conn.close()
    assert {int(r[5]): r for r in ref} == want
    assert first + rest == ref
    if fast is not None:
        assert fast == ref


def test_bootstrap_leaves_out_what_the_filter_excludes(mariadb: LocalMariaDB, fresh_db: str) -> None:
    """A table sparkcdc cannot read fails the load only when the filter captures it."""
    other = fresh_db + "_x"
    mariadb.execute(f"DROP DATABASE IF EXISTS `{other}`", f"CREATE DATABASE `{other}`")
    try:
        # a system-versioned table: a definition the DDL parser refuses
        mariadb.execute(
            f"CREATE TABLE `{other}`.hist (id UUID PRIMARY KEY, v INET6) WITH SYSTEM VERSIONING",
            f"CREATE TABLE `{other}`.u (id UUID PRIMARY KEY, v INET6)",
            f"CREATE TABLE `{fresh_db}`.u (id UUID PRIMARY KEY, v INET4)",
        )
        conn = mariadb.connect()
        try:
            try:
                SchemaCatalog.load_from_upstream(conn, None, 1)
                strict_failed = False
            except SchemaError as exc:
                strict_failed = True
                assert f"table `{other}`.`hist` cannot be captured" in exc.message
            cat = SchemaCatalog.load_from_upstream(conn, None, 1, changefeed_filter([f"{fresh_db}.*"]).match)
            with pytest.raises(SchemaError, match="hist"):
                SchemaCatalog.load_from_upstream(conn, None, 1, changefeed_filter([f"{other}.*"]).match)
        finally:
            conn.close()
        assert strict_failed, "the parser reads system-versioned tables now: pick another unreadable table"
        assert cat.get(other, "hist") is None
        u = cat.get(other, "u")
        assert u is not None and [c.type for c in u.columns] == ["uuid", "inet6"]
        mine = cat.get(fresh_db, "u")
        assert mine is not None and [c.type for c in mine.columns] == ["uuid", "inet4"]
    finally:
        mariadb.execute(f"DROP DATABASE IF EXISTS `{other}`")
