"""An encoder of MySQL's binary JSON, written from the format described in ``sql-common/json_binary.cc``.

Test tooling only: it makes the documents the decoder is checked on, as MySQL's
``json_binary::serialize`` lays them out:

- a document is a type byte then the value;
- an object/array: element count and byte size (2-byte fields in the small format, 4-byte in
  the large one), then for an object one key entry per member (key offset, 2-byte key length),
  then one value entry per element (type byte, then the value inline or its offset), then the
  keys, then the values that are not inline; offsets count from the start of the count field;
- object keys sorted by length, then bytewise (``Json_key_comparator``);
- inline in a value entry: literals and 16-bit integers, and in the large format 32-bit integers;
- the small format is used unless an offset or size does not fit in 16 bits;
- strings: a variable-length length (7 bits a byte, low group first, high bit = more) then UTF-8;
- opaque: the MySQL column type byte, a variable-length length, the raw bytes;
- integers take the smallest of int16/int32/int64 that holds them (uint64 beyond int64),
  ``UInt`` forces the unsigned types (uint16/uint32/uint64).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from sparkcdc.capture import jsonbinary as J


@dataclass(frozen=True)
class Opaque:
    """An opaque value: a MySQL column type and its bytes."""

    ftype: int
    data: bytes


@dataclass(frozen=True)
class UInt:
    """An integer stored as an unsigned type."""

    value: int


class _TooBig(Exception):
    pass


def varlen(n: int) -> bytes:
    """The variable-length encoding of a length."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode(value: Any, *, large: bool = False) -> bytes:
    """The binary JSON document of a Python value (``large``: containers in the large format)."""
    t, body = _encode(value, large)
    return bytes([t]) + body


def _scalar_type(value: Any) -> tuple[int, bytes]:
    if value is None:
        return J.LITERAL, bytes([J.LITERAL_NULL])
    if value is True:
        return J.LITERAL, bytes([J.LITERAL_TRUE])
    if value is False:
        return J.LITERAL, bytes([J.LITERAL_FALSE])
    if isinstance(value, UInt):
        v = value.value
        if v <= 0xFFFF:
            return J.UINT16, struct.pack("<H", v)
        if v <= 0xFFFFFFFF:
            return J.UINT32, struct.pack("<I", v)
        return J.UINT64, struct.pack("<Q", v)
    if isinstance(value, int):
        if -(1 << 15) <= value < 1 << 15:
            return J.INT16, struct.pack("<h", value)
        if -(1 << 31) <= value < 1 << 31:
            return J.INT32, struct.pack("<i", value)
        if -(1 << 63) <= value < 1 << 63:
            return J.INT64, struct.pack("<q", value)
        return J.UINT64, struct.pack("<Q", value)
    if isinstance(value, float):
        return J.DOUBLE, struct.pack("<d", value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return J.STRING, varlen(len(raw)) + raw
    if isinstance(value, Opaque):
        return J.OPAQUE, bytes([value.ftype]) + varlen(len(value.data)) + value.data
    raise TypeError(f"cannot encode {value!r}")


def _encode(value: Any, large: bool) -> tuple[int, bytes]:
    if isinstance(value, (dict, list)):
        if not large:
            try:
                return _container(value, False)
            except _TooBig:
                pass
        return _container(value, True)
    return _scalar_type(value)


def _inline(t: int, large: bool) -> bool:
    return t in (J.LITERAL, J.INT16, J.UINT16) or (large and t in (J.INT32, J.UINT32))


def _container(value: dict[str, Any] | list[Any], large: bool) -> tuple[int, bytes]:
    is_object = isinstance(value, dict)
    osz = 4 if large else 2
    fmt = "<I" if large else "<H"
    limit = 0xFFFFFFFF if large else 0xFFFF
    if is_object:
        assert isinstance(value, dict)
        items = sorted(((k.encode("utf-8"), v) for k, v in value.items()), key=lambda kv: (len(kv[0]), kv[0]))
        keys = [k for k, _ in items]
        values = [v for _, v in items]
    else:
        assert isinstance(value, list)
        keys = []
        values = list(value)
    count = len(values)
    header = 2 * osz + count * (1 + osz) + (count * (osz + 2) if is_object else 0)
    key_entries = bytearray()
    pos = header
    for k in keys:
        if len(k) > 0xFFFF:
            raise ValueError("a key longer than 65535 bytes cannot be stored")
        key_entries += struct.pack(fmt, pos) + struct.pack("<H", len(k))
        pos += len(k)
    tail = bytearray(b"".join(keys))
    value_entries = bytearray()
    for v in values:
        t, body = _encode(v, large) if isinstance(v, (dict, list)) else _scalar_type(v)
        if _inline(t, large):
            value_entries += bytes([t]) + body.ljust(osz, b"\x00")
        else:
            if pos > limit:
                raise _TooBig
            value_entries += bytes([t]) + struct.pack(fmt, pos)
            tail += body
            pos += len(body)
    if pos > limit or count > limit:
        raise _TooBig
    body = struct.pack(fmt, count) + struct.pack(fmt, pos) + bytes(key_entries) + bytes(value_entries) + tail
    assert len(body) == pos
    if is_object:
        return (J.LARGE_OBJECT if large else J.SMALL_OBJECT), body
    return (J.LARGE_ARRAY if large else J.SMALL_ARRAY), body


def packed_datetime(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, us: int = 0) -> bytes:
    """8 bytes of ``TIME_to_longlong_datetime_packed`` (DATE/DATETIME/TIMESTAMP in JSON)."""
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return struct.pack("<q", (((ymd << 17) | hms) << 24) + us)


def packed_time(h: int, mi: int, s: int, us: int = 0, negative: bool = False) -> bytes:
    """8 bytes of ``TIME_to_longlong_time_packed`` (TIME in JSON)."""
    v = (((h << 12) | (mi << 6) | s) << 24) + us
    return struct.pack("<q", -v if negative else v)


def decimal_opaque(text: str, precision: int, scale: int) -> Opaque:
    """An opaque NEWDECIMAL: precision, scale, then MySQL's binary DECIMAL (``decimal2bin``)."""
    from decimal import Decimal, localcontext

    d = Decimal(text)
    neg = d < 0
    with localcontext() as ctx:
        ctx.prec = 100
        digits = format(abs(d), f".{scale}f")
    ip, _, fp = digits.partition(".")
    intg = precision - scale
    ip = ip.lstrip("0").rjust(intg, "0") if intg else ""
    fp = fp.ljust(scale, "0")
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(ip[:lead]).to_bytes(dig2bytes[lead], "big")
    for i in range(lead, intg, 9):
        out += int(ip[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(fp[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fp[scale - scale % 9 :]).to_bytes(dig2bytes[scale % 9], "big")
    out[0] ^= 0x80
    if neg:
        out = bytearray(b ^ 0xFF for b in out)
    return Opaque(J.FT_NEWDECIMAL, bytes([precision, scale]) + bytes(out))
