"""MySQL's binary JSON (row images of JSON columns) decoded to the text MySQL prints.

MySQL 8 stores a JSON column in the binlog in its binary format (``sql-common/json_binary.cc``):
a type byte, then the value. Objects and arrays have a header (element count, byte size, key and
value entries with offsets relative to the header's start; 2-byte offsets in the small format,
4-byte in the large one), scalars are stored inline in a value entry when they fit (literals and
16-bit integers; 32-bit integers too in the large format), strings carry a variable-length length
(7 bits a byte, low group first), and "opaque" values carry a MySQL column type and raw bytes
(DECIMAL, DATE/TIME/DATETIME/TIMESTAMP packed as 64-bit integers, anything else kept as bytes).

``decode_json_binary`` renders the value as ``Json_wrapper::to_string`` does (``json_dom.cc``),
which is what ``SELECT json_col`` and ``JSON_EXTRACT`` print and what canal-json carries: ``, ``
between elements, ``": "`` after keys, keys in stored order (shortest first, then bytewise —
the order MySQL sorts them in when it writes the document), doubles by ``my_gcvt`` with ``.0``
added to an integral value, DECIMAL with its scale, temporal values quoted with six fractional
digits, any other opaque value as ``"base64:typeN:..."``.

This module is the reference of the C row decoder's JSON columns (``_rowdecode.c``, kind
``K_JSON``), as ``rowcodec.read_value`` is for the other types: the C walk makes the same bounds
checks and prints the same text (doubles by the same ``my_gcvt`` rule); it calls
``opaque_text`` for opaque values. The equivalence tests compare both on random and corrupt
documents. A malformed document raises ``JsonBinaryError`` (a ValueError, turned into a
DecodeError naming the row by both decoders).
"""

from __future__ import annotations

import base64
import math
import struct
from decimal import Decimal

from sparkcdc.capture.mysqldecimal import decimal_size, decode_decimal

SMALL_OBJECT = 0x00
LARGE_OBJECT = 0x01
SMALL_ARRAY = 0x02
LARGE_ARRAY = 0x03
LITERAL = 0x04
INT16 = 0x05
UINT16 = 0x06
INT32 = 0x07
UINT32 = 0x08
INT64 = 0x09
UINT64 = 0x0A
DOUBLE = 0x0B
STRING = 0x0C
OPAQUE = 0x0F

_INTEGERS = {INT16: "<h", UINT16: "<H", INT32: "<i", UINT32: "<I", INT64: "<q", UINT64: "<Q"}
"""The struct format of each integer type."""

LITERAL_NULL = 0x00
LITERAL_TRUE = 0x01
LITERAL_FALSE = 0x02

# MySQL column types an opaque value may carry and that print as something other than base64.
FT_DECIMAL = 0
FT_TIMESTAMP = 7
FT_DATE = 10
FT_TIME = 11
FT_DATETIME = 12
FT_NEWDECIMAL = 246
FT_VAR_STRING = 253

_GCVT_WIDTH = 34
"""``MY_GCVT_MAX_FIELD_WIDTH``: DBL_DIG + 4 + max(5, MAX_DECPT_FOR_F_FORMAT) with DBL_DIG = 15."""
_MAX_DECPT_FOR_F_FORMAT = 15

_ESCAPES = {
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}
_ESCAPE_TABLE = {c: _ESCAPES.get(c, "\\u%04x" % c) for c in (*range(0x20), 0x22, 0x5C)}


class JsonBinaryError(ValueError):
    """A JSON column value that is not a well-formed MySQL binary JSON document."""


def decode_json_binary(data: bytes) -> str:
    """The JSON text MySQL prints for a binary JSON column value (``b""`` is the JSON null MySQL reads)."""
    if not data:
        # An empty value (a JSON column added to existing rows, a non-strict insert): MySQL reads it
        # as the JSON null literal.
        return "null"
    out: list[str] = []
    try:
        _value(data, data[0], 1, len(data), out, 0)
    except (IndexError, struct.error) as exc:
        raise JsonBinaryError(f"binary JSON value of {len(data)} bytes is truncated: {exc}") from exc
    return "".join(out)


def quote(text: str) -> str:
    """A JSON string literal as MySQL's ``double_quote`` writes it (only controls, quote and backslash escaped)."""
    return '"' + text.translate(_ESCAPE_TABLE) + '"'


def format_double(d: float) -> str:
    """A double as MySQL's JSON printer writes it: ``my_gcvt(d, DOUBLE, 34)``, plus ``.0`` if integral."""
    text = _gcvt(d)
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _gcvt(x: float) -> str:
    """``my_gcvt`` for a double with MySQL's maximal field width (shortest round-trip digits)."""
    negative = x < 0 or (x == 0 and struct.pack("<d", x)[7] & 0x80 != 0)
    width = _GCVT_WIDTH - (1 if x < 0 else 0)
    digits, decpt = _shortest_digits(abs(x))
    n = len(digits)
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    f_len = n - decpt + 2 if decpt <= 0 else (n + 1 if decpt < n else decpt)
    have_space = f_len <= width
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_f = (
        have_space
        or (decpt <= width and (decpt >= -1 or (decpt == -2 and (n > 1 or not force_e))) and not force_e)
    ) and (
        not have_space
        or (decpt >= -_MAX_DECPT_FOR_F_FORMAT + 1 and (decpt <= _MAX_DECPT_FOR_F_FORMAT or n > decpt))
    )
    sign = "-" if negative else ""
    if use_f:
        # With a 34-character field the shortest digits (at most 17) always fit: no truncation.
        if decpt <= 0:
            return sign + "0." + "0" * -decpt + digits
        if decpt < n:
            return sign + digits[:decpt] + "." + digits[decpt:]
        return sign + digits + "0" * (decpt - n)
    e = decpt - 1
    mantissa = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{mantissa}e{e}"


def _shortest_digits(x: float) -> tuple[str, int]:
    """The shortest digits that read back as ``x`` (>= 0) and the decimal point position (dtoa's decpt)."""
    if x == 0:
        return "0", 1
    text = repr(x)
    mant, _, exp = text.partition("e")
    ip, _, fp = mant.partition(".")
    allds = ip + fp
    stripped = allds.lstrip("0")
    decpt = len(ip) + (int(exp) if exp else 0) - (len(allds) - len(stripped))
    return stripped.rstrip("0"), decpt


def _varlen(data: bytes, p: int, end: int) -> tuple[int, int]:
    """A variable-length length (7 bits a byte, low group first, at most 5 bytes) and the position after it."""
    n = 0
    for i in range(5):
        if p + i >= end:
            raise JsonBinaryError(
                f"variable-length length at byte {p} runs past the end of its value ({end})"
            )
        b = data[p + i]
        n |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return n, p + i + 1
    raise JsonBinaryError(f"variable-length length at byte {p} is longer than 5 bytes")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _value(data: bytes, t: int, p: int, end: int, out: list[str], depth: int) -> None:
    """Append the value of type ``t`` stored at ``data[p:end]``."""
    if t in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
        _container(data, t, p, end, out, depth)
    elif t == LITERAL:
        _literal(data[p], p, out)
    elif t in _INTEGERS:
        out.append(str(struct.unpack_from(_INTEGERS[t], data, p)[0]))
    elif t == DOUBLE:
        d = struct.unpack_from("<d", data, p)[0]
        if not math.isfinite(d):
            raise JsonBinaryError(f"double at byte {p} is {d}, which JSON cannot hold")
        out.append(format_double(d))
    elif t == STRING:
        n, q = _varlen(data, p, end)
        if q + n > end:
            raise JsonBinaryError(f"string of {n} bytes at byte {q} runs past the end of its value ({end})")
        out.append(quote(_text(data[q : q + n])))
    elif t == OPAQUE:
        if p >= end:
            raise JsonBinaryError(f"opaque value at byte {p} has no type")
        ftype = data[p]
        n, q = _varlen(data, p + 1, end)
        if q + n > end:
            raise JsonBinaryError(
                f"opaque value of {n} bytes at byte {q} runs past the end of its value ({end})"
            )
        out.append(opaque_text(ftype, data[q : q + n]))
    else:
        raise JsonBinaryError(f"unknown binary JSON type 0x{t:02x} at byte {p - 1}")


def _literal(b: int, p: int, out: list[str]) -> None:
    if b == LITERAL_NULL:
        out.append("null")
    elif b == LITERAL_TRUE:
        out.append("true")
    elif b == LITERAL_FALSE:
        out.append("false")
    else:
        raise JsonBinaryError(f"unknown JSON literal 0x{b:02x} at byte {p}")


def _container(data: bytes, t: int, p: int, end: int, out: list[str], depth: int) -> None:
    if depth >= 100:
        raise JsonBinaryError("binary JSON nests deeper than 100 levels (MySQL's limit)")
    large = t in (LARGE_OBJECT, LARGE_ARRAY)
    is_object = t in (SMALL_OBJECT, LARGE_OBJECT)
    fmt, osz = ("<I", 4) if large else ("<H", 2)
    count = struct.unpack_from(fmt, data, p)[0]
    size = struct.unpack_from(fmt, data, p + osz)[0]
    if p + size > end:
        raise JsonBinaryError(
            f"{'object' if is_object else 'array'} at byte {p} says it has {size} bytes, "
            f"but its value ends at byte {end}"
        )
    end = p + size
    key_entry = osz + 2
    value_entry = 1 + osz
    keys_at = p + 2 * osz
    values_at = keys_at + (count * key_entry if is_object else 0)
    if values_at + count * value_entry > end:
        raise JsonBinaryError(
            f"header of the {count} elements at byte {p} is larger than the value ({size} bytes)"
        )
    out.append("{" if is_object else "[")
    for i in range(count):
        if i:
            out.append(", ")
        if is_object:
            ke = keys_at + i * key_entry
            koff = struct.unpack_from(fmt, data, ke)[0]
            klen = struct.unpack_from("<H", data, ke + osz)[0]
            if koff + klen > size:
                raise JsonBinaryError(f"key {i} of the object at byte {p} runs past the object's end")
            out.append(quote(_text(data[p + koff : p + koff + klen])))
            out.append(": ")
        ve = values_at + i * value_entry
        vt = data[ve]
        if vt in (LITERAL, INT16, UINT16) or (large and vt in (INT32, UINT32)):
            _value(data, vt, ve + 1, ve + value_entry, out, depth + 1)
        else:
            voff = struct.unpack_from(fmt, data, ve + 1)[0]
            if voff >= size:
                raise JsonBinaryError(f"element {i} of the value at byte {p} points past the value's end")
            _value(data, vt, p + voff, end, out, depth + 1)
    out.append("}" if is_object else "]")


def opaque_text(ftype: int, raw: bytes) -> str:
    """An opaque value: DECIMAL as a number, temporal values quoted, strings as strings, else base64."""
    if ftype in (FT_NEWDECIMAL, FT_DECIMAL) and len(raw) >= 2:
        precision, scale = raw[0], raw[1]
        if precision and scale <= precision and len(raw) - 2 >= decimal_size(precision, scale):
            return _decimal_text(
                decode_decimal(raw[2 : 2 + decimal_size(precision, scale)], precision, scale)
            )
    if ftype in (FT_DATE, FT_TIME, FT_DATETIME, FT_TIMESTAMP) and len(raw) >= 8:
        packed = struct.unpack_from("<q", raw, 0)[0]
        return (
            '"'
            + (_packed_time(packed) if ftype == FT_TIME else _packed_datetime(packed, ftype == FT_DATE))
            + '"'
        )
    if ftype == FT_VAR_STRING:
        return quote(_text(raw))
    return quote(f"base64:type{ftype}:{mysql_base64(raw)}")


def _decimal_text(d: Decimal) -> str:
    return format(d, "f")


def mysql_base64(raw: bytes) -> str:
    """Base64 as MySQL's ``base64_encode`` writes it: a newline after every 76 characters."""
    text = base64.b64encode(raw).decode("ascii")
    return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))


def _packed_datetime(packed: int, date_only: bool) -> str:
    """A DATETIME/DATE/TIMESTAMP packed as MySQL's ``TIME_to_longlong_datetime_packed``."""
    neg = packed < 0
    if neg:
        packed = -packed
    usec = packed % (1 << 24)
    ymdhms = packed >> 24
    ymd = ymdhms >> 17
    ym = ymd >> 5
    hms = ymdhms % (1 << 17)
    date = "%s%04d-%02d-%02d" % ("-" if neg else "", ym // 13, ym % 13, ymd % 32)
    if date_only:
        return date
    return "%s %02d:%02d:%02d.%06d" % (date, hms >> 12, (hms >> 6) % 64, hms % 64, usec)


def _packed_time(packed: int) -> str:
    """A TIME packed as MySQL's ``TIME_to_longlong_time_packed``."""
    neg = packed < 0
    if neg:
        packed = -packed
    usec = packed % (1 << 24)
    hms = packed >> 24
    return "%s%02d:%02d:%02d.%06d" % (
        "-" if neg else "",
        (hms >> 12) % (1 << 10),
        (hms >> 6) % 64,
        hms % 64,
        usec,
    )
