"""Row images of ROWS events decoded into Python values.

The C extension ``_rowdecode`` is the decoder: ``rows_event_images`` uses it when it
is built (``RowDecoder.layout_for`` describes the present columns to it once per
columns-present bitmap). The functions below are its reference, plain Python that says
what each binlog column type decodes to (the values documented on ``ColumnInfo``):
``read_value`` reads one value, ``read_image`` one row image and ``reference_images``
every image of an event body. The equivalence tests compare the two decoders on random
rows; the reference decodes when the extension is not built (``_native`` is None; tests
and the capture bench set it so) and for a column shape the extension does not claim.
"""

from __future__ import annotations

import logging
import struct
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sparkcdc.capture import tablemap as tmod
from sparkcdc.capture.jsonbinary import JsonBinaryError, decode_json_binary, opaque_text
from sparkcdc.capture.mysqldecimal import decimal_size, decode_decimal
from sparkcdc.capture.tablemap import TableMap, column_codec
from sparkcdc.errors import DecodeError
from sparkcdc.model import RowChange

if TYPE_CHECKING:
    from sparkcdc.capture import _rowdecode
    from sparkcdc.model import BinlogPosition, TableInfo

log = logging.getLogger(__name__)

try:
    from sparkcdc.capture import _rowdecode as _native
except ImportError as _exc:  # not built (a source checkout without the compile step)
    _native = None  # type: ignore[assignment]
    log.warning(
        "the C row decoder (sparkcdc.capture._rowdecode) is unavailable: %s; decoding rows in Python", _exc
    )

Images = list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]
"""The (before, after) images of one ROWS event: before is None for an insert, after for a delete."""


def _frac(usec: int, fsp: int) -> str:
    return "." + ("%06d" % usec)[:fsp] if fsp else ""


def frac_bytes(fsp: int) -> int:
    """Bytes of the fractional part of a temporal value."""
    return (fsp + 1) // 2


def read_frac(buf: bytes, p: int, fsp: int) -> int:
    """Microseconds from the fractional bytes (unsigned)."""
    if fsp == 0:
        return 0
    if fsp <= 2:
        return buf[p] * 10000
    if fsp <= 4:
        return int.from_bytes(buf[p : p + 2], "big") * 100
    return int.from_bytes(buf[p : p + 3], "big")


def decode_date(buf: bytes, p: int) -> str:
    """3-byte DATE."""
    v = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
    return "%04d-%02d-%02d" % (v >> 9, (v >> 5) & 15, v & 31)


def decode_datetime2(buf: bytes, p: int, fsp: int) -> str:
    """DATETIME2 (5 bytes + fraction)."""
    intpart = int.from_bytes(buf[p : p + 5], "big") - 0x8000000000
    ymd = intpart >> 17
    ym = ymd >> 5
    hms = intpart & 0x1FFFF
    return "%04d-%02d-%02d %02d:%02d:%02d%s" % (
        ym // 13,
        ym % 13,
        ymd & 31,
        hms >> 12,
        (hms >> 6) & 63,
        hms & 63,
        _frac(read_frac(buf, p + 5, fsp), fsp),
    )


def decode_datetime_old(buf: bytes, p: int) -> str:
    """Pre-5.6 DATETIME (8-byte packed decimal)."""
    v = int.from_bytes(buf[p : p + 8], "little")
    d, t = divmod(v, 1000000)
    return "%04d-%02d-%02d %02d:%02d:%02d" % (
        d // 10000,
        d // 100 % 100,
        d % 100,
        t // 10000,
        t // 100 % 100,
        t % 100,
    )


def decode_time2(buf: bytes, p: int, fsp: int) -> str:
    """TIME2 (3 bytes + fraction), negative values included."""
    if fsp <= 0:
        packed = (int.from_bytes(buf[p : p + 3], "big") - 0x800000) << 24
    elif fsp <= 2:
        intpart = int.from_bytes(buf[p : p + 3], "big") - 0x800000
        frac = buf[p + 3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        packed = (intpart << 24) + frac * 10000
    elif fsp <= 4:
        intpart = int.from_bytes(buf[p : p + 3], "big") - 0x800000
        frac = int.from_bytes(buf[p + 3 : p + 5], "big")
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x10000
        packed = (intpart << 24) + frac * 100
    else:
        packed = int.from_bytes(buf[p : p + 6], "big") - 0x800000000000
    neg = packed < 0
    if neg:
        packed = -packed
    hms = packed >> 24
    usec = packed % (1 << 24)
    return "%s%02d:%02d:%02d%s" % (
        "-" if neg else "",
        (hms >> 12) % (1 << 10),
        (hms >> 6) % 64,
        hms % 64,
        _frac(usec, fsp),
    )


def decode_time_old(buf: bytes, p: int) -> str:
    """Pre-5.6 TIME (3 bytes, HHMMSS as a signed integer)."""
    v = int.from_bytes(buf[p : p + 3], "little", signed=True)
    neg = v < 0
    v = abs(v)
    return "%s%02d:%02d:%02d" % ("-" if neg else "", v // 10000, v // 100 % 100, v % 100)


class TimestampRenderer:
    """Renders TIMESTAMP epoch seconds in the changefeed time zone."""

    def __init__(self, tz: str = "UTC") -> None:
        self.utc = tz.upper() in ("UTC", "+00:00", "Z", "GMT")
        self.zone = None if self.utc else _zone(tz)

    def render(self, sec: int, usec: int, fsp: int) -> str:
        """``YYYY-MM-DD HH:MM:SS[.f]``; 0 is the zero timestamp."""
        if sec == 0 and usec == 0:
            return "0000-00-00 00:00:00" + _frac(0, fsp)
        if self.utc:
            t = time.gmtime(sec)
            return "%04d-%02d-%02d %02d:%02d:%02d%s" % (t[0], t[1], t[2], t[3], t[4], t[5], _frac(usec, fsp))
        d = datetime.fromtimestamp(sec, UTC).astimezone(self.zone)
        return d.strftime("%Y-%m-%d %H:%M:%S") + _frac(usec, fsp)


def _zone(tz: str) -> Any:
    import re
    from datetime import timedelta, timezone

    m = re.fullmatch(r"([+-])(\d{1,2}):(\d{2})", tz)
    if m:
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return timezone(-delta if m.group(1) == "-" else delta)
    try:
        return ZoneInfo(tz)
    except Exception as exc:  # ZoneInfoNotFoundError or a bad key
        raise DecodeError(
            f"unknown time zone {tz!r}; use an IANA name like Asia/Shanghai or an offset like +08:00"
        ) from exc


def uuid_text(v: bytes) -> str:
    """A UUID's 16 bytes as MariaDB prints them: lower-case hex, 8-4-4-4-12."""
    h = v.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def inet4_text(v: bytes) -> str:
    """An INET4's 4 bytes as a dotted quad."""
    return "%d.%d.%d.%d" % (v[0], v[1], v[2], v[3])


def inet6_text(v: bytes) -> str:
    """An INET6's 16 bytes as MariaDB prints them (``Inet6::to_string``).

    Groups in lower-case hex without leading zeros; the first longest run of zero groups, even
    a run of one, becomes ``::``; an address whose first 96 bits are zero (IPv4-compatible,
    unless the run is longer) or ``::ffff`` (IPv4-mapped) ends in a dotted quad. Python's
    ``ipaddress`` differs on the single zero group and the IPv4 forms.
    """
    words = [v[2 * i] << 8 | v[2 * i + 1] for i in range(8)]
    gap_pos, gap_len, run_pos, run_len = -1, -1, -1, -1
    for i, w in enumerate(words):
        if w:
            if run_pos >= 0:
                if run_len > gap_len:
                    gap_pos, gap_len = run_pos, run_len
                run_pos = run_len = -1
        elif run_pos >= 0:
            run_len += 1
        else:
            run_pos, run_len = i, 1
    if run_pos >= 0 and run_len > gap_len:
        gap_pos, gap_len = run_pos, run_len
    out: list[str] = []
    i = 0
    while i < 8:
        if i == gap_pos:
            out.append("::" if i == 0 else ":")
            i += gap_len
            continue
        if i == 6 and gap_pos == 0 and (gap_len == 6 or (gap_len == 5 and words[5] == 0xFFFF)):
            out.append("%d.%d.%d.%d" % (v[12], v[13], v[14], v[15]))
            break
        out.append("%x" % words[i])
        if i != 7:
            out.append(":")
        i += 1
    return "".join(out)


PLUGIN_TEXT = {"uuid": uuid_text, "inet4": inet4_text, "inet6": inet6_text}
"""The text of a MariaDB data-type plugin value from its bytes (padded to the type's size)."""


def plugin_value(type_name: str, raw: bytes) -> str:
    """A UUID/INET4/INET6 value of the binlog (trailing zero bytes cut) as MariaDB prints it."""
    size = tmod.PLUGIN_TYPE_SIZES[type_name]
    if len(raw) > size:
        raise ValueError(f"a {type_name.upper()} value of {len(raw)} bytes, more than {size}")
    return PLUGIN_TEXT[type_name](raw.ljust(size, b"\x00"))


def decode_set(bits: int, elements: Sequence[str]) -> str:
    """A SET bitmask to its comma-joined element names in definition order."""
    return ",".join(e for i, e in enumerate(elements) if bits >> i & 1)


def decode_enum(index: int, elements: Sequence[str]) -> str:
    """An ENUM index (1-based; 0 is the invalid '') to its element name."""
    return elements[index - 1] if 0 < index <= len(elements) else ""


# --------------------------------------------------------------------------------------------
# The reference decoder
# --------------------------------------------------------------------------------------------

_INT_SIZES = {tmod.T_TINY: 1, tmod.T_SHORT: 2, tmod.T_INT24: 3, tmod.T_LONG: 4, tmod.T_LONGLONG: 8}
_STRING_TYPES = (tmod.T_VARCHAR, tmod.T_VAR_STRING, tmod.T_STRING)
_READABLE_TYPES = frozenset(
    {
        *_INT_SIZES,
        *_STRING_TYPES,
        tmod.T_YEAR,
        tmod.T_FLOAT,
        tmod.T_DOUBLE,
        tmod.T_NEWDECIMAL,
        tmod.T_DATE,
        tmod.T_NEWDATE,
        tmod.T_DATETIME2,
        tmod.T_DATETIME,
        tmod.T_TIMESTAMP2,
        tmod.T_TIMESTAMP,
        tmod.T_TIME2,
        tmod.T_TIME,
        tmod.T_BIT,
        tmod.T_ENUM,
        tmod.T_SET,
        tmod.T_BLOB,
        tmod.T_GEOMETRY,
        tmod.T_JSON,
        *tmod.COMPRESSED_TYPES,
    }
)
"""The binlog column types the decoders read (compressed columns only the Python one)."""


def check_readable(tm: TableMap, i: int) -> None:
    """Raise DecodeError if column i has a type neither decoder reads."""
    t = tm.real_types[i]
    if t not in _READABLE_TYPES:
        raise DecodeError(
            f"column {tm.schema}.{tm.table}.{tm.names[i]} has binlog type {t}, which sparkcdc cannot decode"
        )


def _need(buf: bytes, p: int, n: int, column: int) -> None:
    """IndexError unless n bytes of the body remain at p (column -1 is the NULL bitmap)."""
    if len(buf) - p < n:
        raise IndexError(
            f"column {column} needs {n} bytes at byte {p} but the event body ends at byte {len(buf)}"
        )


def _int_meta(m: int | tuple[int, int]) -> int:
    """Metadata that is one number (a fraction's digits, a BLOB's length bytes)."""
    assert isinstance(m, int), m
    return m


def _pair_meta(m: int | tuple[int, int]) -> tuple[int, int]:
    """Metadata that is two numbers (DECIMAL precision and scale, BIT bits and bytes, ENUM/SET bytes)."""
    assert isinstance(m, tuple), m
    return m


def read_value(tm: TableMap, tsr: TimestampRenderer, i: int, buf: bytes, p: int) -> tuple[Any, int]:
    """The value of column i (not NULL) at ``buf[p:]`` and the position after it.

    The column's type was checked with ``check_readable``; a value that runs past the end of
    ``buf`` raises IndexError.
    """
    t = tm.real_types[i]
    m = tm.meta[i]
    if t in _INT_SIZES:
        n = _INT_SIZES[t]
        _need(buf, p, n, i)
        return int.from_bytes(buf[p : p + n], "little", signed=not tm.unsigned[i]), p + n
    if t == tmod.T_YEAR:
        _need(buf, p, 1, i)
        year = buf[p]
        return (1900 + year if year else 0), p + 1
    if t in (tmod.T_FLOAT, tmod.T_DOUBLE):
        fmt, n = ("<f", 4) if t == tmod.T_FLOAT else ("<d", 8)
        _need(buf, p, n, i)
        return struct.unpack_from(fmt, buf, p)[0], p + n
    if t == tmod.T_NEWDECIMAL:
        precision, scale = _pair_meta(m)
        n = decimal_size(precision, scale)
        _need(buf, p, n, i)
        return decode_decimal(buf[p : p + n], precision, scale), p + n
    if t in (tmod.T_DATE, tmod.T_NEWDATE):
        _need(buf, p, 3, i)
        return decode_date(buf, p), p + 3
    if t == tmod.T_DATETIME2:
        fsp = _int_meta(m)
        n = 5 + frac_bytes(fsp)
        _need(buf, p, n, i)
        return decode_datetime2(buf, p, fsp), p + n
    if t == tmod.T_DATETIME:
        _need(buf, p, 8, i)
        return decode_datetime_old(buf, p), p + 8
    if t == tmod.T_TIMESTAMP2:
        fsp = _int_meta(m)
        n = 4 + frac_bytes(fsp)
        _need(buf, p, n, i)
        sec = int.from_bytes(buf[p : p + 4], "big")
        return tsr.render(sec, read_frac(buf, p + 4, fsp), fsp), p + n
    if t == tmod.T_TIMESTAMP:
        _need(buf, p, 4, i)
        return tsr.render(int.from_bytes(buf[p : p + 4], "little"), 0, 0), p + 4
    if t == tmod.T_TIME2:
        fsp = _int_meta(m)
        n = 3 + frac_bytes(fsp)
        _need(buf, p, n, i)
        return decode_time2(buf, p, fsp), p + n
    if t == tmod.T_TIME:
        _need(buf, p, 3, i)
        return decode_time_old(buf, p), p + 3
    if t == tmod.T_BIT:
        bits, nbytes = _pair_meta(m)
        n = nbytes + (1 if bits else 0)
        _need(buf, p, n, i)
        return int.from_bytes(buf[p : p + n], "big"), p + n
    if t in (tmod.T_ENUM, tmod.T_SET):
        n = _pair_meta(m)[1]
        _need(buf, p, n, i)
        code = int.from_bytes(buf[p : p + n], "little")
        if t == tmod.T_ENUM:
            return decode_enum(code, tm.enum_values.get(i, ())), p + n
        return decode_set(code, tm.set_values.get(i, ())), p + n
    if t == tmod.T_JSON:
        # MySQL binary JSON: a little-endian length (meta bytes), then the document, printed as MySQL does
        length_bytes = _int_meta(m)
        _need(buf, p, length_bytes, i)
        n = int.from_bytes(buf[p : p + length_bytes], "little")
        p += length_bytes
        _need(buf, p, n, i)
        return decode_json_binary(buf[p : p + n]), p + n
    # strings and BLOBs: a little-endian length, then the bytes (text in the column's charset)
    cs = tm.charsets[i]
    codec = column_codec(tm, i) if cs is not None and t != tmod.T_GEOMETRY else "binary"
    if t in _STRING_TYPES:
        maxlen = m[1] if isinstance(m, tuple) else m
        length_bytes = 2 if maxlen > 255 else 1
    elif t == tmod.T_VARCHAR_COMPRESSED:
        length_bytes = 2 if _int_meta(m) > 255 else 1
    else:
        length_bytes = _int_meta(m)
    _need(buf, p, length_bytes, i)
    n = int.from_bytes(buf[p : p + length_bytes], "little")
    p += length_bytes
    _need(buf, p, n, i)
    raw = buf[p : p + n]
    if t in tmod.COMPRESSED_TYPES:
        raw = column_uncompress(raw, tm, i)
    if codec != "binary":
        return raw.decode(codec, "surrogateescape"), p + n
    if t == tmod.T_STRING and tm.plugin_types:
        plugin = tm.plugin_types.get(i)
        if plugin is not None:
            return plugin_value(plugin, raw), p + n
    if t == tmod.T_STRING:
        # BINARY(n) is stored without its trailing zero bytes; SELECT shows them.
        return raw.ljust(maxlen, b"\x00"), p + n
    return raw, p + n


def column_uncompress(raw: bytes, tm: TableMap, i: int) -> bytes:
    """The value of a MariaDB COMPRESSED column from its stored form.

    Empty stays empty. Otherwise a header byte: method in the high nibble (0: the bytes follow
    as they are; 8: zlib), and for zlib the byte count of the original length (low 3 bits,
    the length follows big-endian) and bit 3 set for a raw deflate stream without zlib's wrapper.
    """
    if not raw:
        return raw
    head = raw[0]
    method = head >> 4
    if method == 0:
        return raw[1:]
    where = f"column {tm.schema}.{tm.table}.{tm.names[i]}"
    if method != 8:
        raise DecodeError(
            f"{where} is compressed with method {method}, which sparkcdc cannot read (only zlib, 8)"
        )
    nlen = head & 0x07
    length = int.from_bytes(raw[1 : 1 + nlen], "big")
    try:
        out = zlib.decompressobj(-zlib.MAX_WBITS if head & 0x08 else zlib.MAX_WBITS).decompress(
            raw[1 + nlen :]
        )
    except zlib.error as exc:
        raise DecodeError(f"{where}: its zlib-compressed value does not inflate ({exc})") from exc
    if len(out) != length:
        raise DecodeError(
            f"{where}: its compressed value inflates to {len(out)} bytes, not the {length} it declares"
        )
    return out


def read_image(
    tm: TableMap, tsr: TimestampRenderer, present: Sequence[int], buf: bytes, p: int
) -> tuple[tuple[Any, ...], int]:
    """One row image at ``buf[p:]`` and the position after it.

    The image is a NULL bitmap over the present columns, then the value of each present
    column that is not NULL; columns the event leaves out are None.
    """
    nbytes = (len(present) + 7) // 8
    _need(buf, p, nbytes, -1)
    nulls = int.from_bytes(buf[p : p + nbytes], "little")
    p += nbytes
    row: list[Any] = [None] * tm.column_count
    for bit, i in enumerate(present):
        if not nulls >> bit & 1:
            row[i], p = read_value(tm, tsr, i, buf, p)
    return tuple(row), p


def reference_images(dec: RowDecoder, body: bytes, pos: int, op: str, present1: int, present2: int) -> Images:
    """Every (before, after) image of an event body from ``pos`` (after the columns-present bitmaps).

    The reference of ``_rowdecode.decode_rows``: an image that does not fit in the body
    raises DecodeError naming the byte where that image starts.
    """
    tm, tsr = dec.tm, dec.tsr
    first_cols = dec.present(present1)
    second_cols = dec.present(present2) if op == "U" else ()
    out: Images = []
    end = len(body)
    start = pos
    try:
        while pos < end:
            start = pos
            first, pos = read_image(tm, tsr, first_cols, body, pos)
            if op == "U":
                start = pos
                second, pos = read_image(tm, tsr, second_cols, body, pos)
                out.append((first, second))
            elif op == "I":
                out.append((None, first))
            else:
                out.append((first, None))
    except (IndexError, ValueError, ArithmeticError) as exc:
        raise DecodeError(f"cannot decode a row of {tm.schema}.{tm.table} at byte {start}: {exc!r}") from exc
    return out


# --------------------------------------------------------------------------------------------
# The C decoder
# --------------------------------------------------------------------------------------------


def native_available() -> bool:
    """Whether the C decoder is built (``RowDecoder`` uses it then, unless told not to)."""
    return _native is not None


_NATIVE_INT = {
    (tmod.T_TINY, False): "K_INT8",
    (tmod.T_TINY, True): "K_UINT8",
    (tmod.T_SHORT, False): "K_INT16",
    (tmod.T_SHORT, True): "K_UINT16",
    (tmod.T_INT24, False): "K_INT24",
    (tmod.T_INT24, True): "K_UINT24",
    (tmod.T_LONG, False): "K_INT32",
    (tmod.T_LONG, True): "K_UINT32",
    (tmod.T_LONGLONG, False): "K_INT64",
    (tmod.T_LONGLONG, True): "K_UINT64",
}


def native_column(tm: TableMap, tsr: TimestampRenderer, i: int) -> tuple[int, int, int, int, Any] | None:
    """The C decoder's (kind, index, a, b, obj) of column i; None if only the Python decoder reads it.

    It mirrors ``read_value``: the C decoder gives the values ``read_value`` gives.
    """
    n = _native
    assert n is not None
    t = tm.real_types[i]
    m = tm.meta[i]
    ts_obj = None if tsr.utc else tsr.render
    if (t, bool(tm.unsigned[i])) in _NATIVE_INT:
        return (getattr(n, _NATIVE_INT[(t, bool(tm.unsigned[i]))]), i, 0, 0, None)
    simple = {
        tmod.T_YEAR: n.K_YEAR,
        tmod.T_FLOAT: n.K_FLOAT,
        tmod.T_DOUBLE: n.K_DOUBLE,
        tmod.T_DATE: n.K_DATE,
        tmod.T_NEWDATE: n.K_DATE,
        tmod.T_DATETIME: n.K_DATETIME,
        tmod.T_TIME: n.K_TIME,
    }
    if t in simple:
        return (simple[t], i, 0, 0, None)
    if t == tmod.T_TIMESTAMP:
        return (n.K_TIMESTAMP, i, 0, 0, ts_obj)
    if t in (tmod.T_DATETIME2, tmod.T_TIMESTAMP2, tmod.T_TIME2):
        if not isinstance(m, int):
            return None
        kind = {tmod.T_DATETIME2: n.K_DATETIME2, tmod.T_TIMESTAMP2: n.K_TIMESTAMP2, tmod.T_TIME2: n.K_TIME2}[
            t
        ]
        return (kind, i, m, 0, ts_obj if t == tmod.T_TIMESTAMP2 else None)
    if t == tmod.T_NEWDECIMAL:
        if not isinstance(m, tuple):
            return None
        return (n.K_DECIMAL, i, m[0], m[1], None)
    if t in (tmod.T_BIT, tmod.T_ENUM, tmod.T_SET):
        if not isinstance(m, tuple):
            return None
        if t == tmod.T_BIT:
            return (n.K_BIT, i, m[1] + (1 if m[0] else 0), 0, None)
        if t == tmod.T_ENUM:
            return (n.K_ENUM, i, m[1], 0, tuple(tm.enum_values.get(i, ())))
        return (n.K_SET, i, m[1], 0, tuple(tm.set_values.get(i, ())))
    if t == tmod.T_JSON:
        if not (isinstance(m, int) and 1 <= m <= 4):
            return None
        return (n.K_JSON, i, m, 0, (opaque_text, JsonBinaryError))
    plugin = tm.plugin_types.get(i)
    if plugin is not None:
        kinds = {"uuid": n.K_UUID, "inet4": n.K_INET4, "inet6": n.K_INET6}
        return (kinds[plugin], i, 1, 0, None)
    cs = tm.charsets[i]
    codec = column_codec(tm, i) if cs is not None else "binary"
    if t in (tmod.T_VARCHAR, tmod.T_VAR_STRING, tmod.T_STRING):
        maxlen = m[1] if isinstance(m, tuple) else int(m)
        pad = maxlen if t == tmod.T_STRING and codec == "binary" else 0
        return (n.K_STRING, i, 2 if maxlen > 255 else 1, pad, None if codec == "binary" else codec)
    if t in (tmod.T_BLOB, tmod.T_GEOMETRY):
        if t == tmod.T_GEOMETRY:
            codec = "binary"
        return (n.K_STRING, i, int(m), 0, None if codec == "binary" else codec)  # type: ignore[arg-type]
    return None


class RowDecoder:
    """Decodes the row images of ROWS events for one table map."""

    def __init__(
        self,
        tm: TableMap,
        tsr: TimestampRenderer,
        native: bool | None = None,
        info: TableInfo | None = None,
    ) -> None:
        """``native``: use the C decoder (None: when it is built); False: the Python reference.

        ``info``: the tracked shape of the rows (TableShapes.resolve), which alone says which
        BINARY(16)/BINARY(4) columns of the map are MariaDB UUID/INET6/INET4 columns: their
        values are then decoded to the text MariaDB prints instead of bytes.
        """
        self.tm = tmod.with_plugin_types(tm, info)
        self.tsr = tsr
        if native and _native is None:
            raise RuntimeError("the C row decoder (sparkcdc.capture._rowdecode) is not built")
        self.native = native_available() if native is None else native
        self._present: dict[int, tuple[int, ...]] = {}
        self._layouts: dict[int, _rowdecode.Layout | None] = {}

    def present(self, bitmap: int) -> tuple[int, ...]:
        """The columns a columns-present bitmap names; DecodeError if one cannot be decoded."""
        cols = self._present.get(bitmap)
        if cols is None:
            cols = tuple(i for i in range(self.tm.column_count) if bitmap >> i & 1)
            for i in cols:
                check_readable(self.tm, i)
            self._present[bitmap] = cols
        return cols

    def layout_for(self, bitmap: int) -> _rowdecode.Layout | None:
        """The C decoder's layout for a columns-present bitmap; None if a column needs the reference."""
        if bitmap in self._layouts:
            return self._layouts[bitmap]
        # checked first: a column neither decoder reads raises the same DecodeError on both paths
        self.present(bitmap)
        tm = self.tm
        assert _native is not None
        cols = [native_column(tm, self.tsr, i) for i in range(tm.column_count) if bitmap >> i & 1]
        specs = [c for c in cols if c is not None]
        layout = None
        if len(specs) == len(cols):
            try:
                layout = _native.Layout(
                    tm.schema, tm.table, tm.column_count, specs, DecodeError, decode_decimal
                )
            except ValueError:  # a shape outside what the C decoder checks it can read exactly
                layout = None
        self._layouts[bitmap] = layout
        return layout


def rows_event_images(dec: RowDecoder, body: bytes, version: int, op: str) -> Images:
    """All (before, after) images of one ROWS event body (the C decoder when ``dec.native``)."""
    from sparkcdc.capture.tablemap import read_packed

    pos = 8
    if version == 2:
        extra = int.from_bytes(body[pos : pos + 2], "little")
        pos += extra
    ncol, pos = read_packed(body, pos)
    nb = (ncol + 7) // 8
    present1 = int.from_bytes(body[pos : pos + nb], "little")
    pos += nb
    present2 = 0
    if op == "U":
        present2 = int.from_bytes(body[pos : pos + nb], "little")
        pos += nb
    if dec.native and type(body) is bytes:
        l1 = dec.layout_for(present1)
        l2 = dec.layout_for(present2) if op == "U" else None
        if l1 is not None and (l2 is not None or op != "U"):
            return _native.decode_rows(l1, l2, body, pos, op)
    return reference_images(dec, body, pos, op, present1, present2)


def row_changes(
    op: str,
    schema: str,
    table: str,
    version: int,
    ts: int,
    images: Images,
    seq0: int,
    pos: BinlogPosition | None,
) -> list[RowChange]:
    """One ``RowChange`` per image of a ROWS event, ``seq`` counting from ``seq0``.

    With the C extension, ``_rowdecode.row_changes`` makes them without running the frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field, most of a decoded row's
    cost): the same objects, equal field by field, which the tests check against this
    comprehension, the reference.
    """
    if _ROW_CHANGES is not None and type(images) is list:
        return _ROW_CHANGES(RowChange, op, schema, table, version, ts, images, seq0, pos)
    return [
        RowChange(op, schema, table, version, ts, before, after, n, pos)  # type: ignore[arg-type]
        for n, (before, after) in enumerate(images, seq0)
    ]


def _native_row_changes() -> Any:
    """``_rowdecode.row_changes`` when it makes the model's RowChange exactly, else None."""
    import dataclasses

    fn = getattr(_native, "row_changes", None)
    if fn is None or hasattr(RowChange, "__post_init__"):
        return None
    if [f.name for f in dataclasses.fields(RowChange)] != list(RowChange.__slots__):
        return None
    try:
        got = fn(RowChange, "U", "s", "t", 3, 5, [((1,), (2,))], 7, None)
    except TypeError as exc:  # the class's slots are not the fields the C code sets
        log.warning("RowChange objects are made in Python: %s", exc)
        return None
    if got != [RowChange("U", "s", "t", 3, 5, (1,), (2,), 7, None)]:
        return None
    return fn


_ROW_CHANGES = _native_row_changes()
"""The C maker of RowChange lists, None when the extension is not built (or the model changed)."""
