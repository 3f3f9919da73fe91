"""Every binlog event type is decoded, listed as carrying nothing, or refused by name and position."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import pytest

from sparkcdc.capture import protocol as P
from sparkcdc.capture.compressed import PLAIN_TYPE, uncompress_event
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import RawEvent
from sparkcdc.capture.reader import check_statement_rows
from sparkcdc.capture.statement_kind import xa_xid
from sparkcdc.capture.txnstream import (
    HANDLED,
    NOTHING_FOR_US,
    REFUSED,
    Begin,
    End,
    Idle,
    QueryItem,
    RollbackTo,
    Savepoint,
    StatementRows,
    TxnStream,
    XaCommit,
    XaStart,
    parse_maria_gtid,
    parse_xa_prepare,
    xid_key,
)
from sparkcdc.errors import DecodeError, UpstreamSetupError

# MariaDB 10.11 (sql/log_event.h, enum Log_event_type): 0-41 and 160-171.
MARIADB_10_11 = [*range(0, 42), *range(160, 172)]
# MySQL 8.4 (libbinlogevents, binary_log::Log_event_type): 0-42 (42: GTID_TAGGED_LOG_EVENT).
MYSQL_8_4 = list(range(0, 43))


@pytest.mark.parametrize("t", sorted(set(MARIADB_10_11) | set(MYSQL_8_4)))
def test_every_event_type_of_mariadb_10_11_and_mysql_8_4_is_classified_once(t: int) -> None:
    where = [
        name
        for name, group in (("decoded", HANDLED), ("nothing", NOTHING_FOR_US), ("refused", REFUSED))
        if t in group
    ]
    assert len(where) == 1, f"{P.event_name(t)} is in {where or 'no list'}"
    assert t in P.EVENT_NAMES


class _Events:
    """A binlog stream made of given events (the TxnStream reads ``events()`` only)."""

    def __init__(self, events: list[RawEvent]) -> None:
        self._events = events

    def events(self) -> Iterator[RawEvent]:
        yield from self._events


def _ev(t: int, body: bytes, log_pos: int, ts: int = 1_700_000_000) -> RawEvent:
    return RawEvent(ts, t, 1, 19 + len(body), log_pos, 0, body)


def _query(text: str, schema: str = "d") -> bytes:
    status = b""
    return (
        struct.pack("<IIBHH", 1, 0, len(schema), 0, len(status))
        + status
        + schema.encode()
        + b"\0"
        + text.encode()
    )


def _maria_gtid(seq: int, flags: int, xid: tuple[int, bytes, bytes] | None = None) -> bytes:
    body = struct.pack("<QIB", seq, 0, flags)
    if xid is not None:
        fmt, g, b = xid
        body += struct.pack("<IBB", fmt, len(g), len(b)) + g + b
    return body + b"\0" * 6


def _items(events: list[RawEvent]) -> list[object]:
    txs = TxnStream(_Events(events), Offset("mysql-bin.000001", 4, 0))  # type: ignore[arg-type]
    return list(txs.items())


@pytest.mark.parametrize("t", sorted(NOTHING_FOR_US))
def test_an_event_that_carries_nothing_moves_the_position_and_yields_nothing(t: int) -> None:
    items = _items([_ev(t, b"\0" * 16, 500)])
    assert len(items) == 1 and isinstance(items[0], Idle)
    assert items[0].at.pos == 500


@pytest.mark.parametrize("t", [*sorted(REFUSED), 50, 159, 172, 255])
def test_a_refused_or_unknown_event_fails_naming_its_type_and_position(t: int) -> None:
    with pytest.raises(UpstreamSetupError) as err:
        _items([_ev(P.QUERY_EVENT, _query("CREATE DATABASE x"), 300), _ev(t, b"\0" * 16, 400)])
    msg = str(err.value)
    assert f"({t})" in msg and "mysql-bin.000001:300" in msg, msg
    if t in REFUSED:
        assert P.EVENT_NAMES[t] in msg and REFUSED[t] in msg


def test_savepoint_statements_inside_a_transaction_are_control_not_ddl() -> None:
    items = _items(
        [
            _ev(P.MARIA_GTID_EVENT, _maria_gtid(1, 0), 100),
            _ev(P.QUERY_EVENT, _query("SAVEPOINT `s1`"), 200),
            _ev(P.QUERY_EVENT, _query("ROLLBACK TO `s1`"), 300),
            _ev(P.QUERY_EVENT, _query("RELEASE SAVEPOINT `s1`"), 350),
            _ev(P.XID_EVENT, b"\0" * 8, 400),
        ]
    )
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["Begin", "Savepoint", "RollbackTo", "End", "Idle"]
    assert isinstance(items[1], Savepoint) and items[1].name == "s1"
    assert isinstance(items[2], RollbackTo) and items[2].name == "s1"
    assert not any(isinstance(i, QueryItem) for i in items)


def test_a_statement_format_row_change_is_refused_when_it_may_touch_a_captured_table() -> None:
    items = _items(
        [
            _ev(P.MARIA_GTID_EVENT, _maria_gtid(1, 0), 100),
            _ev(P.QUERY_EVENT, _query("INSERT INTO t VALUES (1)"), 200),
        ]
    )
    rows = [i for i in items if isinstance(i, StatementRows)]
    assert len(rows) == 1 and rows[0].where == "mysql-bin.000001:100"
    with pytest.raises(UpstreamSetupError, match="binlog_format=ROW"):
        check_statement_rows(rows[0], lambda s, t: (s, t) == ("d", "t"))
    with pytest.raises(UpstreamSetupError, match="at f:1 "):
        check_statement_rows(StatementRows("UPDATE t, u SET t.a = 1", "d", "f:1"), lambda s, t: False)
    check_statement_rows(rows[0], lambda s, t: s != "d")  # plainly outside the filter: not this changefeed's


def test_an_xa_prepare_is_carried_in_the_offset_until_its_commit() -> None:
    xid = (1, b"x1", b"")
    key = xid_key(*xid)
    assert key == xa_xid("XA COMMIT X'7831',X'',1")
    prepare = struct.pack("<BIII", 0, 1, 2, 0) + b"x1"
    assert parse_xa_prepare(prepare) == (False, key)
    assert parse_maria_gtid(_maria_gtid(7, 64, xid), 1) == ("0-1-7", 64, key)
    items = _items(
        [
            _ev(P.MARIA_GTID_EVENT, _maria_gtid(1, 64, xid), 100),
            _ev(P.QUERY_EVENT, _query("XA END X'7831',X'',1"), 200),
            _ev(P.XA_PREPARE_EVENT, prepare, 300),
            _ev(P.MARIA_GTID_EVENT, _maria_gtid(2, 128, xid), 400),
            _ev(P.QUERY_EVENT, _query("XA COMMIT X'7831',X'',1"), 500),
        ]
    )
    assert isinstance(items[1], XaStart) and items[1].prepared and items[1].xid == key
    end = items[2]
    assert isinstance(end, End) and end.outcome == "xa_prepare"
    assert end.end.xa == ((key, "mysql-bin.000001", 4),)
    assert Offset.from_json(end.end.to_json()) == end.end
    commit = items[4]
    assert isinstance(commit, XaCommit) and commit.prepared == Offset("mysql-bin.000001", 4, 0)
    last = items[5]
    assert isinstance(last, End) and last.outcome == "commit" and last.end.xa == ()
    assert isinstance(items[3], Begin)


def test_compressed_events_read_as_their_plain_forms() -> None:
    text = "CREATE TABLE t (id INT PRIMARY KEY, s TEXT) /* " + "x" * 200 + " */"
    raw = text.encode()
    packed = bytes([0x80 | 2]) + len(raw).to_bytes(2, "big") + zlib.compress(raw)
    head = _query("")
    ev = _ev(P.MARIA_QUERY_COMPRESSED, head + packed, 200)
    plain = uncompress_event(ev, "f:1")
    assert plain.type == P.QUERY_EVENT and plain.body == head + raw
    # a V1 write rows event: post-header (8), width 2, one bitmap; rows compressed
    rows = b"\x00\x01\x00\x00\x00\x00" + b"\x01\x00"
    rows_data = b"\xfc" + b"\x01\x00\x00\x00" + b"\x02\x00\x00\x00"
    comp = bytes([0x80 | 1]) + bytes([len(rows_data)]) + zlib.compress(rows_data)
    ev = _ev(P.MARIA_WRITE_ROWS_COMPRESSED_V1, rows + b"\x02\x03" + comp, 300)
    plain = uncompress_event(ev, "f:2")
    assert plain.type == PLAIN_TYPE[P.MARIA_WRITE_ROWS_COMPRESSED_V1] == P.WRITE_ROWS_V1
    assert plain.body == rows + b"\x02\x03" + rows_data
    with pytest.raises(DecodeError, match="compressed event type 166 at f:3"):
        uncompress_event(
            _ev(P.MARIA_WRITE_ROWS_COMPRESSED_V1, rows + b"\x02\x03" + b"\x81\x05garbage", 1), "f:3"
        )
