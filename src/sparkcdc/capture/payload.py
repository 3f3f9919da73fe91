"""MySQL compressed transactions: the events inside a TRANSACTION_PAYLOAD_EVENT.

With ``binlog_transaction_compression=ON`` (MySQL 8.0.20+) a transaction is written as its GTID
event followed by one TRANSACTION_PAYLOAD_EVENT whose body is a header of fields, each a packed
integer type, a packed integer length and a packed integer value (1 = compressed size,
2 = compression type: 0 zstd, 255 none, 3 = uncompressed size), ended by type 0, and then the
payload: the transaction's events (BEGIN, TABLE_MAP, ROWS..., XID) back to back, each with its
19-byte header and without a checksum, compressed as one zstd frame.

``payload_events`` returns those events in order. Their positions in the file are not known (the
whole transaction sits inside one event), so every inner event but the last carries log_pos 0
and the last one (the XID or COMMIT that ends the transaction) the position after the payload
event: a reader's transaction boundaries stay the real ones.
"""

from __future__ import annotations

import struct

from sparkcdc.capture.protocol import HEADER_LEN, RawEvent
from sparkcdc.capture.tablemap import read_packed
from sparkcdc.errors import DecodeError

FIELD_END = 0
FIELD_SIZE = 1
FIELD_COMPRESSION = 2
FIELD_UNCOMPRESSED_SIZE = 3

COMPRESSION_ZSTD = 0
COMPRESSION_NONE = 255

_HEADER = struct.Struct("<IBIIIH")


def parse_payload_header(body: bytes) -> tuple[int, int, bytes]:
    """(compression type, uncompressed size or 0, payload bytes) of a TRANSACTION_PAYLOAD_EVENT body."""
    p = 0
    size = None
    compression = COMPRESSION_NONE
    uncompressed = 0
    try:
        while True:
            ftype, p = read_packed(body, p)
            if ftype == FIELD_END:
                break
            flen, p = read_packed(body, p)
            if ftype == FIELD_SIZE:
                size, p = read_packed(body, p)
            elif ftype == FIELD_COMPRESSION:
                compression, p = read_packed(body, p)
            elif ftype == FIELD_UNCOMPRESSED_SIZE:
                uncompressed, p = read_packed(body, p)
            else:
                p += flen  # a field of a later server version: skipped, as MySQL's own decoder does
    except IndexError as exc:
        raise DecodeError(
            f"TRANSACTION_PAYLOAD_EVENT of {len(body)} bytes has a truncated header (no end mark)"
        ) from exc
    payload = body[p:] if size is None else body[p : p + size]
    if size is not None and len(payload) != size:
        raise DecodeError(
            f"TRANSACTION_PAYLOAD_EVENT says its payload has {size} bytes but {len(payload)} follow its header"
        )
    return compression, uncompressed, payload


def decompress(compression: int, uncompressed: int, payload: bytes) -> bytes:
    """The raw events of a payload."""
    if compression == COMPRESSION_NONE:
        return payload
    if compression != COMPRESSION_ZSTD:
        raise DecodeError(
            f"TRANSACTION_PAYLOAD_EVENT uses compression type {compression}, which sparkcdc cannot read "
            "(only zstd, 0, and none, 255, exist as of MySQL 8.4); set binlog_transaction_compression=OFF upstream"
        )
    import zstandard

    try:
        # A streaming decompressor: MySQL's frames may omit their content size.
        dobj = zstandard.ZstdDecompressor().decompressobj()
        out = dobj.decompress(payload)
        if not dobj.eof:
            raise zstandard.ZstdError("the zstd frame ends early")
    except zstandard.ZstdError as exc:
        raise DecodeError(
            f"cannot decompress a TRANSACTION_PAYLOAD_EVENT ({len(payload)} bytes): {exc}"
        ) from exc
    if uncompressed and len(out) != uncompressed:
        raise DecodeError(
            f"TRANSACTION_PAYLOAD_EVENT decompressed to {len(out)} bytes, its header says {uncompressed}"
        )
    return out


def payload_events(ev: RawEvent) -> list[RawEvent]:
    """The events inside a TRANSACTION_PAYLOAD_EVENT, in order (see the module doc for their log_pos)."""
    raw = decompress(*parse_payload_header(ev.body))
    out: list[RawEvent] = []
    p = 0
    end = len(raw)
    while p < end:
        if end - p < HEADER_LEN:
            raise DecodeError(f"TRANSACTION_PAYLOAD_EVENT: an event header at byte {p} of its payload is cut")
        ts, typ, sid, size, _log_pos, flags = _HEADER.unpack_from(raw, p)
        if size < HEADER_LEN or p + size > end:
            raise DecodeError(
                f"TRANSACTION_PAYLOAD_EVENT: the event at byte {p} of its payload says it has {size} bytes, "
                f"{end - p} remain"
            )
        out.append(RawEvent(ts, typ, sid, size, 0, flags, bytes(raw[p + HEADER_LEN : p + size])))
        p += size
    if out:
        out[-1].log_pos = ev.log_pos
    return out
