"""MariaDB compressed events (``log_bin_compress=ON``): types 165-171 back into plain events.

MariaDB compresses, with zlib, the part of an event that can be large and keeps the rest as it
is (``sql/log_event.cc``, ``query_event_uncompress`` and ``row_log_event_uncompress``):

- QUERY_COMPRESSED_EVENT (165): the query text, after the post-header, the status variables and
  the default schema with its NUL;
- WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1 (166-168) and the version 2 forms (169-171): the
  rows, after the post-header (and version 2's extra data), the column count and the
  columns-present bitmap(s).

The compressed part starts with one byte ``0x80 | algorithm << 4 | n`` (algorithm 0: zlib), then
the uncompressed length in ``n`` bytes, high byte first, then a zlib stream. ``uncompress_event``
returns the event a server without compression would have written, so the readers decode one
form only.
"""

from __future__ import annotations

import struct
import zlib

from sparkcdc.capture.protocol import (
    MARIA_DELETE_ROWS_COMPRESSED_V1,
    MARIA_DELETE_ROWS_COMPRESSED_V2,
    MARIA_QUERY_COMPRESSED,
    MARIA_UPDATE_ROWS_COMPRESSED_V1,
    MARIA_UPDATE_ROWS_COMPRESSED_V2,
    MARIA_WRITE_ROWS_COMPRESSED_V1,
    MARIA_WRITE_ROWS_COMPRESSED_V2,
    QUERY_EVENT,
    RawEvent,
)
from sparkcdc.capture.tablemap import read_packed
from sparkcdc.errors import DecodeError

PLAIN_TYPE = {
    MARIA_QUERY_COMPRESSED: QUERY_EVENT,
    MARIA_WRITE_ROWS_COMPRESSED_V1: 23,
    MARIA_UPDATE_ROWS_COMPRESSED_V1: 24,
    MARIA_DELETE_ROWS_COMPRESSED_V1: 25,
    MARIA_WRITE_ROWS_COMPRESSED_V2: 30,
    MARIA_UPDATE_ROWS_COMPRESSED_V2: 31,
    MARIA_DELETE_ROWS_COMPRESSED_V2: 32,
}
"""Each compressed event type and the plain type it stands for."""

QUERY_POST_HEADER = 13
ROWS_POST_HEADER_V1 = 8


def uncompress_payload(data: bytes, what: str) -> bytes:
    """The bytes of a compressed part (header byte, big-endian length, zlib stream)."""
    if not data or data[0] & 0x80 == 0:
        raise DecodeError(f"{what}: the compressed part does not start with a compression header")
    algorithm = (data[0] & 0x70) >> 4
    lenlen = data[0] & 0x07
    if algorithm != 0:
        raise DecodeError(
            f"{what}: compression algorithm {algorithm}, which sparkcdc cannot read (MariaDB writes 0, "
            "zlib); set log_bin_compress=OFF upstream"
        )
    if not 1 <= lenlen <= 4 or len(data) < 1 + lenlen:
        raise DecodeError(f"{what}: a compressed length of {lenlen} bytes")
    size = int.from_bytes(data[1 : 1 + lenlen], "big")
    try:
        out = zlib.decompress(data[1 + lenlen :])
    except zlib.error as exc:
        raise DecodeError(f"{what}: cannot decompress ({exc})") from exc
    if len(out) != size:
        raise DecodeError(f"{what}: decompressed to {len(out)} bytes, its header says {size}")
    return out


def uncompress_event(ev: RawEvent, where: str) -> RawEvent:
    """The plain event a compressed one (types 165-171) stands for; ``where`` names its position."""
    plain = PLAIN_TYPE[ev.type]
    body = ev.body
    what = f"compressed event type {ev.type} at {where}"
    if plain == QUERY_EVENT:
        _thread, _exec, db_len, _err, status_len = struct.unpack_from("<IIBHH", body, 0)
        head = QUERY_POST_HEADER + status_len + db_len + 1
    else:
        p = ROWS_POST_HEADER_V1
        if ev.type >= MARIA_WRITE_ROWS_COMPRESSED_V2:
            p += struct.unpack_from("<H", body, p)[0]
        width, p = read_packed(body, p)
        p += (width + 7) // 8
        if plain in (24, 31):
            p += (width + 7) // 8
        head = p
    if head > len(body):
        raise DecodeError(f"{what}: {len(body)} bytes, shorter than its own header")
    return RawEvent(
        ev.timestamp,
        plain,
        ev.server_id,
        ev.size,
        ev.log_pos,
        ev.flags,
        body[:head] + uncompress_payload(body[head:], what),
    )
