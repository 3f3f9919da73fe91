"""Builders of MySQL 8 binlog events for tests (written from the event layouts, not taken from a server).

- ``event``: the 19-byte header (timestamp, type, server id, size, log_pos, flags) + body, no checksum;
- ``gtid_body``: GTID_LOG_EVENT (flags, server UUID, GNO, logical clock type 2, last committed,
  sequence number);
- ``query_body``: QUERY_EVENT with no status variables;
- ``rows_v2``: a v1 ROWS event body (as MariaDB writes it) as MySQL's v2 (an empty extra-data block);
- ``payload_body``: TRANSACTION_PAYLOAD_EVENT: packed-integer fields (type, length, value) for the
  compressed size, the compression type and the uncompressed size, the end mark, then the events
  (zstd-compressed, or as they are for compression type NONE).
"""

from __future__ import annotations

import struct
import uuid

import zstandard

from sparkcdc.capture import payload as PL
from sparkcdc.capture import protocol as P

HEADER = struct.Struct("<IBIIIH")


def packed(n: int) -> bytes:
    """MySQL's length-encoded integer (net_store_length)."""
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def event(
    typ: int, body: bytes, *, ts: int = 1_700_000_000, server_id: int = 1, log_pos: int = 0, flags: int = 0
) -> bytes:
    """One event as it sits in a binlog file or a payload (header + body, no checksum)."""
    return HEADER.pack(ts, typ, server_id, P.HEADER_LEN + len(body), log_pos, flags) + body


def gtid_body(sid: str, gno: int, *, last_committed: int = 0, sequence_number: int = 1) -> bytes:
    """A GTID_LOG_EVENT body (the 8.0 fields this reader needs and the logical clock)."""
    return (
        b"\x01"
        + uuid.UUID(sid).bytes
        + struct.pack("<q", gno)
        + b"\x02"
        + struct.pack("<qq", last_committed, sequence_number)
    )


def query_body(query: str, schema: str = "") -> bytes:
    """A QUERY_EVENT body without status variables."""
    db = schema.encode()
    return struct.pack("<IIBHH", 7, 0, len(db), 0, 0) + db + b"\x00" + query.encode()


def xid_body(xid: int) -> bytes:
    """An XID_EVENT body."""
    return struct.pack("<Q", xid)


def rows_v2(typ: int, body: bytes) -> tuple[int, bytes]:
    """A v1 ROWS event (type, body) as the v2 event MySQL writes: same rows, an empty extra-data block."""
    v2 = {
        P.WRITE_ROWS_V1: P.WRITE_ROWS_V2,
        P.UPDATE_ROWS_V1: P.UPDATE_ROWS_V2,
        P.DELETE_ROWS_V1: P.DELETE_ROWS_V2,
    }
    return v2[typ], body[:8] + b"\x02\x00" + body[8:]


def payload_body(events: bytes, *, compression: int = PL.COMPRESSION_ZSTD, level: int = 3) -> bytes:
    """A TRANSACTION_PAYLOAD_EVENT body holding ``events`` (back-to-back events without checksums)."""
    data = (
        zstandard.ZstdCompressor(level=level).compress(events)
        if compression == PL.COMPRESSION_ZSTD
        else events
    )
    out = bytearray()
    for ftype, value in (
        (PL.FIELD_SIZE, len(data)),
        (PL.FIELD_COMPRESSION, compression),
        (PL.FIELD_UNCOMPRESSED_SIZE, len(events)),
    ):
        v = packed(value)
        out += packed(ftype) + packed(len(v)) + v
    out += packed(PL.FIELD_END)
    return bytes(out) + data


def split_events(raw: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, log_pos, timestamp, body) of back-to-back events."""
    out = []
    p = 0
    while p < len(raw):
        ts, typ, _sid, size, log_pos, _flags = HEADER.unpack_from(raw, p)
        out.append((typ, log_pos, ts, raw[p + P.HEADER_LEN : p + size]))
        p += size
    return out
