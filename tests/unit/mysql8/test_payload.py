"""Compressed transactions (TRANSACTION_PAYLOAD_EVENT) read like the same transaction written plainly.

The row events are real: tests/fixtures/mysql8/mariadb_txn.events was recorded from a local MariaDB
(see its README). They are turned into MySQL's shape (v2 ROWS events, a GTID_LOG_EVENT and a BEGIN
query before them) and then either written one after another, or zstd-compressed into one
TRANSACTION_PAYLOAD_EVENT after the GTID event, as MySQL 8.0.20+ does with
binlog_transaction_compression=ON. Both must give the same transaction, rows and boundaries.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture import payload as PL
from sparkcdc.capture import protocol as P
from sparkcdc.capture import reader as R
from sparkcdc.capture import relay
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import RawEvent
from sparkcdc.capture.txnstream import Begin, End, Idle, RowsItem, TableMapItem, TxnStream
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import DecodeError, UpstreamSetupError
from sparkcdc.model import RowChange
from tests.unit.mysql8.mysqlwire import (
    HEADER,
    event,
    gtid_body,
    packed,
    payload_body,
    query_body,
    rows_v2,
    split_events,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "mysql8" / "mariadb_txn.events"
SID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
FILE = "binlog.000001"
START = 1000
UP = UpstreamConfig("mysql8.invalid", 3306, "cdc", "x")


def _inner_events(partial: bool = False) -> list[tuple[int, bytes, int]]:
    """(type, body, timestamp) of BEGIN, the recorded TABLE_MAP/ROWS (as v2) and XID events."""
    recorded = split_events(FIXTURE.read_bytes())
    ts = recorded[0][2]
    out = [(P.QUERY_EVENT, query_body("BEGIN"), ts)]
    for typ, _pos, ets, body in recorded:
        if typ in P.ROWS_EVENTS:
            typ, body = rows_v2(typ, body)
            if partial and typ == P.UPDATE_ROWS_V2:
                typ = P.PARTIAL_UPDATE_ROWS_EVENT
        out.append((typ, body, ets))
    return out


def plain_events(partial: bool = False) -> list[bytes]:
    """The transaction written event by event, log_pos counting from START."""
    pos = START
    out = []
    evs = [(P.MYSQL_GTID_EVENT, gtid_body(SID, 42), _inner_events()[0][2]), *_inner_events(partial)]
    for typ, body, ts in evs:
        pos += P.HEADER_LEN + len(body)
        out.append(event(typ, body, ts=ts, log_pos=pos))
    return out


def compressed_events(compression: int = PL.COMPRESSION_ZSTD, partial: bool = False) -> list[bytes]:
    """The same transaction as MySQL writes it compressed: GTID, then one TRANSACTION_PAYLOAD_EVENT."""
    inner = b"".join(event(t, b, ts=ts) for t, b, ts in _inner_events(partial))
    ts = _inner_events()[0][2]
    g = gtid_body(SID, 42)
    pos = START + P.HEADER_LEN + len(g)
    body = payload_body(inner, compression=compression)
    return [
        event(P.MYSQL_GTID_EVENT, g, ts=ts, log_pos=pos),
        event(P.TRANSACTION_PAYLOAD_EVENT, body, ts=ts, log_pos=pos + P.HEADER_LEN + len(body)),
    ]


def raw(events: list[bytes]) -> list[RawEvent]:
    out = []
    for e in events:
        ts, typ, sid, size, log_pos, flags = HEADER.unpack_from(e, 0)
        out.append(RawEvent(ts, typ, sid, size, log_pos, flags, e[P.HEADER_LEN :]))
    return out


class FakeStream:
    """Stands in for BinlogStream: replays events."""

    def __init__(self, events: list[bytes]) -> None:
        self._events = raw(events)

    def events(self) -> Iterator[RawEvent]:
        yield from self._events

    def close(self) -> None:
        pass


def items(events: list[bytes], want_rows: bool = True) -> list[Any]:
    return list(TxnStream(FakeStream(events), Offset(FILE, START, 0), want_rows=want_rows).items())  # type: ignore[arg-type]


def test_payload_gives_the_plain_transaction() -> None:
    plain = items(plain_events())
    packed_items = items(compressed_events())
    kinds = [type(i).__name__ for i in plain]
    assert kinds == ["Begin"] + ["TableMapItem", "RowsItem"] * 3 + ["End", "Idle"]
    assert [type(i).__name__ for i in packed_items] == kinds
    for a, b in zip(plain, packed_items, strict=True):
        if isinstance(a, (RowsItem, TableMapItem)):
            assert a == b
    begin_a, begin_b = plain[0], packed_items[0]
    assert isinstance(begin_a, Begin) and isinstance(begin_b, Begin)
    assert (begin_a.ts, begin_a.start, begin_a.gtid) == (begin_b.ts, begin_b.start, begin_b.gtid)
    assert begin_a.gtid == f"{SID}:42"
    end_a, end_b = plain[-2], packed_items[-2]
    assert isinstance(end_a, End) and isinstance(end_b, End)
    # each ends after its last event: the XID, or the payload that holds it
    assert end_a.end.pos == START + sum(len(e) for e in plain_events())
    assert end_b.end.pos == START + sum(len(e) for e in compressed_events())
    assert end_a.end.ts == end_b.end.ts
    assert isinstance(packed_items[-1], Idle) and packed_items[-1].at == end_b.end


def test_scanner_boundaries_read_through_the_payload() -> None:
    got = items(compressed_events(), want_rows=False)
    assert [type(i).__name__ for i in got] == [
        "Begin",
        "TableMapItem",
        "TableMapItem",
        "TableMapItem",
        "End",
        "Idle",
    ]


EXPECTED = [
    (
        None,
        (1, Decimal("12.50"), 3, "café", "2024-02-29 23:59:59.123456", "new", '{"a": [1, 2]}', b"\x00\xff"),
    ),
    (
        None,
        (
            2,
            Decimal("-0.01"),
            18446744073709551615,
            "漢字😀",
            "1999-01-01 00:00:00.000000",
            "paid",
            None,
            None,
        ),
    ),
    (None, (3, Decimal("99999999.99"), 0, "", None, None, "[]", b"")),
    (
        (1, Decimal("12.50"), 3, "café", "2024-02-29 23:59:59.123456", "new", '{"a": [1, 2]}', b"\x00\xff"),
        (1, Decimal("13.50"), 3, "café", "2024-02-29 23:59:59.123456", "paid", '{"a": [1, 2]}', b"\x00\xff"),
    ),
    ((3, Decimal("99999999.99"), 0, "", None, None, "[]", b""), None),
]


def read_rows(monkeypatch: pytest.MonkeyPatch, events: list[bytes], **kw: Any) -> list[Any]:
    monkeypatch.setattr(relay, "BinlogStream", lambda *a, **k: FakeStream(events))  # RowReader opens it there
    reader = R.RowReader(UP, Offset(FILE, START, 0), blocking=False, **kw)
    return list(reader.events())


@pytest.mark.parametrize("compression", [PL.COMPRESSION_ZSTD, PL.COMPRESSION_NONE])
def test_row_reader_decodes_compressed_transactions(
    monkeypatch: pytest.MonkeyPatch, compression: int
) -> None:
    plain = read_rows(monkeypatch, plain_events())
    got = read_rows(monkeypatch, compressed_events(compression))
    rows = [e for e in got if isinstance(e, RowChange)]
    assert [(r.before, r.after) for r in rows] == EXPECTED
    assert [r.op for r in rows] == ["I", "I", "I", "U", "D"]
    assert {(r.schema, r.table) for r in rows} == {("m8", "orders")}
    assert rows[0].position is not None and rows[0].position.gtid == f"{SID}:42"
    assert [(r.before, r.after, r.commit_ts, r.seq) for r in rows] == [
        (r.before, r.after, r.commit_ts, r.seq) for r in plain if isinstance(r, RowChange)
    ]
    offsets = [e for e in got if isinstance(e, Offset)]
    assert offsets[0].pos == START + sum(len(e) for e in compressed_events(compression))


def test_partial_json_update_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    for events in (plain_events(partial=True), compressed_events(partial=True)):
        with pytest.raises(
            UpstreamSetupError,
            match=r"m8\.orders: upstream mysql8\.invalid:3306 wrote a PARTIAL_UPDATE_ROWS_EVENT in the transaction "
            r"at binlog\.000001:1000 .*SET PERSIST binlog_row_value_options=''",
        ):
            read_rows(monkeypatch, events)
    # a table the changefeed does not capture: its partial updates are no concern
    got = read_rows(monkeypatch, compressed_events(partial=True), match=lambda s, t: False)
    assert not [e for e in got if isinstance(e, RowChange)]


def test_payload_header_fields() -> None:
    inner = b"".join(event(t, b, ts=ts) for t, b, ts in _inner_events())
    body = payload_body(inner)
    compression, size, data = PL.parse_payload_header(body)
    assert (compression, size) == (PL.COMPRESSION_ZSTD, len(inner)) and len(inner) > 251  # 0xfc sizes
    assert PL.decompress(compression, size, data) == inner
    # a field of a later server version is skipped by its length
    extra = packed(9) + packed(3) + b"abc"
    assert PL.parse_payload_header(extra + body)[2] == data


def test_bad_payloads_raise_decode_error() -> None:
    inner = b"".join(event(t, b, ts=ts) for t, b, ts in _inner_events())
    body = payload_body(inner)
    g = raw(compressed_events())[1]
    with pytest.raises(DecodeError, match=r"compression type 7.*binlog_transaction_compression=OFF"):
        PL.payload_events(RawEvent(g.timestamp, g.type, 1, 0, 5, 0, payload_body(inner, compression=7)))
    with pytest.raises(DecodeError, match=r"says its payload has .* bytes but .* follow its header"):
        PL.payload_events(RawEvent(g.timestamp, g.type, 1, 0, 5, 0, body[:-10]))
    data = PL.parse_payload_header(body)[2]
    with pytest.raises(DecodeError, match="cannot decompress a TRANSACTION_PAYLOAD_EVENT"):
        PL.decompress(PL.COMPRESSION_ZSTD, 0, data[:-10])
    with pytest.raises(DecodeError, match="cannot decompress a TRANSACTION_PAYLOAD_EVENT"):
        PL.decompress(PL.COMPRESSION_ZSTD, 0, data[:8] + bytes(b ^ 0x5A for b in data[8:]))
    with pytest.raises(DecodeError, match="truncated header"):
        PL.parse_payload_header(packed(1) + packed(1))
    cut = payload_body(inner[:-5], compression=PL.COMPRESSION_NONE)
    with pytest.raises(DecodeError, match=r"says it has .* bytes"):
        PL.payload_events(RawEvent(g.timestamp, g.type, 1, 0, 5, 0, cut))
