"""Row decoding compiled once per table map.

For every table map we generate a Python function that decodes one row image
with ``struct`` layouts fixed at compile time: runs of fixed-width columns are
read by a single ``unpack_from`` on the fast path (no NULLs), and every column
has its own inline snippet on the slow path. Values follow the types documented
on ``ColumnInfo``.

``rows_event_images`` decodes with the C extension ``_rowdecode`` when it is built
(``RowDecoder.layout_for`` describes the present columns to it once per bitmap); the
compiled Python functions are its reference (the tests compare the two on random rows)
and the fallback: when the extension is missing, for a column shape it does not claim,
and when ``SPARKCDC_PURE_PYTHON_DECODER=1``.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from sparkcdc.capture import tablemap as tmod
from sparkcdc.capture.tablemap import TableMap, charset_codec
from sparkcdc.errors import DecodeError

if TYPE_CHECKING:
    from sparkcdc.capture import _rowdecode

log = logging.getLogger(__name__)

try:
    from sparkcdc.capture import _rowdecode as _native
except ImportError as _exc:  # not built (a source checkout without the compile step)
    _native = None  # type: ignore[assignment]
    log.warning(
        "the C row decoder (sparkcdc.capture._rowdecode) is unavailable: %s; decoding rows in Python", _exc
    )

PURE_PYTHON_ENV = "SPARKCDC_PURE_PYTHON_DECODER"
"""Set to 1 to decode rows with the compiled Python functions even when the C decoder is built."""

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a binary DECIMAL(precision, scale)."""
    intg = precision - scale
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (scale // 9) * 4 + DIG2BYTES[scale % 9]


_DEC_LAYOUTS: dict[
    tuple[int, int], tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]
] = {}


def _decimal_layout(
    precision: int, scale: int
) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    """(offset, size, digits) of the integer groups and of the fraction groups."""
    key = (precision, scale)
    got = _DEC_LAYOUTS.get(key)
    if got is not None:
        return got
    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    p = 0
    ints: list[tuple[int, int, int]] = []
    if intg0x:
        ints.append((p, DIG2BYTES[intg0x], intg0x))
        p += DIG2BYTES[intg0x]
    for _ in range(intg0):
        ints.append((p, 4, 9))
        p += 4
    fracs: list[tuple[int, int, int]] = []
    for _ in range(frac0):
        fracs.append((p, 4, 9))
        p += 4
    if frac0x:
        fracs.append((p, DIG2BYTES[frac0x], frac0x))
    got = _DEC_LAYOUTS[key] = (tuple(ints), tuple(fracs))
    return got


def decode_decimal(raw: bytes, precision: int, scale: int) -> Decimal:
    """MySQL's binary DECIMAL format to a Decimal with exactly ``scale`` digits."""
    ints, fracs = _decimal_layout(precision, scale)
    positive = bool(raw[0] & 0x80)
    b = bytearray(raw) if positive else bytearray(x ^ 0xFF for x in raw)
    b[0] ^= 0x80
    iv = 0
    for off, size, digits in ints:
        iv = iv * 10**digits + int.from_bytes(b[off : off + size], "big")
    if not scale:
        return Decimal(iv if positive else -iv)
    fv = 0
    for off, size, digits in fracs:
        fv = fv * 10**digits + int.from_bytes(b[off : off + size], "big")
    text = "%d.%0*d" % (iv, scale, fv)
    return Decimal(text if positive else "-" + text)


@functools.cache
def decimal_reader(precision: int, scale: int) -> Callable[[Any, int], Decimal]:
    """A compiled reader of one DECIMAL(precision, scale) at ``buf[p:]``: ``decode_decimal`` unrolled.

    Non-negative values (sign bit set) are read group by group without copying the bytes;
    negative ones go through ``decode_decimal``.
    """
    ints, fracs = _decimal_layout(precision, scale)
    n = decimal_size(precision, scale)

    def group(off: int, size: int) -> str:
        g = f"buf[p+{off}]" if size == 1 else f"from_bytes(buf[p+{off}:p+{off + size}], 'big')"
        return f"({g} - {0x80 << 8 * (size - 1)})" if off == 0 else g

    def number(groups: tuple[tuple[int, int, int], ...]) -> str:
        if not groups:
            return "0"
        expr = group(*groups[0][:2])
        for off, size, digits in groups[1:]:
            expr = f"({expr}) * {10**digits} + {group(off, size)}"
        return expr

    if scale:
        value = f'Decimal("%d.%0{scale}d" % ({number(ints)}, {number(fracs)}))'
    else:
        value = f"Decimal({number(ints)})"
    src = "\n".join(
        [
            "def dec(buf, p):",
            "    if buf[p] & 0x80:",
            f"        return {value}",
            f"    return decode_decimal(buf[p:p+{n}], {precision}, {scale})",
        ]
    )
    ns: dict[str, Any] = {"Decimal": Decimal, "from_bytes": int.from_bytes, "decode_decimal": decode_decimal}
    exec(compile(src, f"<decimal({precision},{scale}) reader>", "exec"), ns)
    fn: Callable[[Any, int], Decimal] = ns["dec"]
    return fn


def frac_expr(fsp: int, at: str) -> str:
    """Source of ``read_frac(buf, at, fsp)`` (microseconds) without the call."""
    if fsp == 0:
        return "0"
    if fsp <= 2:
        return f"buf[{at}] * 10000"
    if fsp <= 4:
        return f"from_bytes(buf[{at}:{at}+2], 'big') * 100"
    return f"from_bytes(buf[{at}:{at}+3], 'big')"


def date_lines(v: str) -> list[str]:
    """Source lines of ``decode_date(buf, p)`` into ``v``, inlined (``p`` not advanced)."""
    return [
        "_d = buf[p] | buf[p+1] << 8 | buf[p+2] << 16",
        f'{v} = "%04d-%02d-%02d" % (_d >> 9, (_d >> 5) & 15, _d & 31)',
    ]


def datetime2_lines(v: str, fsp: int) -> list[str]:
    """Source lines of ``decode_datetime2(buf, p, fsp)`` into ``v``, inlined (``p`` not advanced)."""
    head = '"%04d-%02d-%02d %02d:%02d:%02d'
    args = "_ym // 13, _ym % 13, _ymd & 31, _hms >> 12, (_hms >> 6) & 63, _hms & 63"
    lines = [
        "_ip = from_bytes(buf[p:p+5], 'big') - 0x8000000000",
        "_ymd = _ip >> 17",
        "_ym = _ymd >> 5",
        "_hms = _ip & 0x1FFFF",
    ]
    if fsp == 0:
        return [*lines, f'{v} = {head}" % ({args})']
    # a valid fraction is < 10**6; anything else is cut like decode_datetime2 does
    digits = "_u" if fsp == 6 else f"_u // {10 ** (6 - fsp)}"
    return [
        *lines,
        f"_u = {frac_expr(fsp, 'p+5')}",
        f'{v} = {head}.%0{fsp}d" % ({args}, {digits}) if _u < 1000000 else '
        f'{head}.%s" % ({args}, ("%06d" % _u)[:{fsp}])',
    ]


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
    """3-byte DATE (the reference for ``date_lines``, which the row functions inline)."""
    v = buf[p] | buf[p + 1] << 8 | buf[p + 2] << 16
    return "%04d-%02d-%02d" % (v >> 9, (v >> 5) & 15, v & 31)


def decode_datetime2(buf: bytes, p: int, fsp: int) -> str:
    """DATETIME2 (5 bytes + fraction; the reference for ``datetime2_lines``, which the row functions inline)."""
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


def decode_set(bits: int, elements: tuple[str, ...]) -> str:
    """A SET bitmask to its comma-joined element names in definition order."""
    return ",".join(e for i, e in enumerate(elements) if bits >> i & 1)


def decode_enum(index: int, elements: tuple[str, ...]) -> str:
    """An ENUM index (1-based; 0 is the invalid '') to its element name."""
    return elements[index - 1] if 0 < index <= len(elements) else ""


RowFn = Callable[[bytes, int], tuple[tuple[Any, ...], int]]

_FIXED_INT = {
    tmod.T_TINY: ("b", "B", 1),
    tmod.T_SHORT: ("h", "H", 2),
    tmod.T_LONG: ("i", "I", 4),
    tmod.T_LONGLONG: ("q", "Q", 8),
}


class _Gen:
    def __init__(self, tm: TableMap, tsr: TimestampRenderer) -> None:
        self.tm = tm
        self.consts: dict[str, Any] = {
            "unpack_from": struct.unpack_from,
            "from_bytes": int.from_bytes,
            "decode_datetime_old": decode_datetime_old,
            "decode_time2": decode_time2,
            "decode_time_old": decode_time_old,
            "decode_set": decode_set,
            "decode_enum": decode_enum,
            "ts_render": tsr.render,
        }

    def const(self, name: str, value: Any) -> str:
        self.consts[name] = value
        return name

    def fixed(self, i: int) -> tuple[str, int, str | None] | None:
        """(struct code, size, post-transform) of a fixed-width column, None otherwise."""
        tm = self.tm
        t = tm.real_types[i]
        uns = tm.unsigned[i]
        if t in _FIXED_INT:
            s, u, n = _FIXED_INT[t]
            return (u if uns else s, n, None)
        if t == tmod.T_FLOAT:
            return ("f", 4, None)
        if t == tmod.T_DOUBLE:
            return ("d", 8, None)
        if t == tmod.T_YEAR:
            return ("B", 1, "(0 if {v} == 0 else 1900 + {v})")
        return None

    def snippet(self, i: int, v: str) -> list[str]:
        """Lines that decode column i at ``p`` into ``v`` and advance ``p``."""
        tm = self.tm
        t = tm.real_types[i]
        m = tm.meta[i]
        uns = tm.unsigned[i]
        f = self.fixed(i)
        if f is not None:
            code, size, post = f
            lines = [f"{v} = unpack_from('<{code}', buf, p)[0]", f"p += {size}"]
            if post:
                lines.append(f"{v} = " + post.format(v=v))
            return lines
        if t == tmod.T_INT24:
            return [f"{v} = from_bytes(buf[p:p+3], 'little', signed={not uns})", "p += 3"]
        if t == tmod.T_NEWDECIMAL:
            assert isinstance(m, tuple)
            prec, scale = m
            n = decimal_size(prec, scale)
            reader = self.const(f"D{prec}_{scale}", decimal_reader(prec, scale))
            return [f"{v} = {reader}(buf, p)", f"p += {n}"]
        if t in (tmod.T_DATE, tmod.T_NEWDATE):
            return [*date_lines(v), "p += 3"]
        if t == tmod.T_DATETIME2:
            fsp = int(m)  # type: ignore[arg-type]
            return [*datetime2_lines(v, fsp), f"p += {5 + frac_bytes(fsp)}"]
        if t == tmod.T_DATETIME:
            return [f"{v} = decode_datetime_old(buf, p)", "p += 8"]
        if t == tmod.T_TIMESTAMP2:
            fsp = int(m)  # type: ignore[arg-type]
            return [
                f"{v} = ts_render(from_bytes(buf[p:p+4], 'big'), {frac_expr(fsp, 'p+4')}, {fsp})",
                f"p += {4 + frac_bytes(fsp)}",
            ]
        if t == tmod.T_TIMESTAMP:
            return [f"{v} = ts_render(from_bytes(buf[p:p+4], 'little'), 0, 0)", "p += 4"]
        if t == tmod.T_TIME2:
            fsp = int(m)  # type: ignore[arg-type]
            return [f"{v} = decode_time2(buf, p, {fsp})", f"p += {3 + frac_bytes(fsp)}"]
        if t == tmod.T_TIME:
            return [f"{v} = decode_time_old(buf, p)", "p += 3"]
        if t == tmod.T_BIT:
            assert isinstance(m, tuple)
            bits, nbytes = m
            n = nbytes + (1 if bits else 0)
            return [f"{v} = from_bytes(buf[p:p+{n}], 'big')", f"p += {n}"]
        if t == tmod.T_ENUM:
            assert isinstance(m, tuple)
            n = m[1]
            el = self.const(f"E{i}", tuple(tm.enum_values.get(i, ())))
            return [f"{v} = decode_enum(from_bytes(buf[p:p+{n}], 'little'), {el})", f"p += {n}"]
        if t == tmod.T_SET:
            assert isinstance(m, tuple)
            n = m[1]
            el = self.const(f"S{i}", tuple(tm.set_values.get(i, ())))
            return [f"{v} = decode_set(from_bytes(buf[p:p+{n}], 'little'), {el})", f"p += {n}"]
        cs = tm.charsets[i]
        codec = charset_codec(cs) if cs is not None else "binary"
        if t in (tmod.T_VARCHAR, tmod.T_VAR_STRING, tmod.T_STRING):
            maxlen = m[1] if isinstance(m, tuple) else int(m)
            if maxlen > 255:
                head = ["n = buf[p] | buf[p+1] << 8", "p += 2"]
            else:
                head = ["n = buf[p]", "p += 1"]
            body = head + self._bytes_value(v, codec)
            if t == tmod.T_STRING and codec == "binary":
                # BINARY(n) is stored without its trailing zero bytes; SELECT shows them.
                body.append(f"{v} = {v}.ljust({maxlen}, b'\\x00')")
            return body
        if t in (tmod.T_BLOB, tmod.T_GEOMETRY, tmod.T_JSON):
            lb = int(m)  # type: ignore[arg-type]
            if t == tmod.T_JSON:
                raise DecodeError(
                    f"column {tm.schema}.{tm.table}.{tm.names[i]}: MySQL binary JSON is not supported yet "
                    "(MariaDB JSON columns are text and work)"
                )
            if t == tmod.T_GEOMETRY:
                codec = "binary"
            return [f"n = from_bytes(buf[p:p+{lb}], 'little')", f"p += {lb}", *self._bytes_value(v, codec)]
        raise DecodeError(
            f"column {tm.schema}.{tm.table}.{tm.names[i]} has binlog type {t}, which sparkcdc cannot decode"
        )

    @staticmethod
    def _bytes_value(v: str, codec: str) -> list[str]:
        if codec == "binary":
            return [f"{v} = buf[p:p+n]", "p += n"]
        return [f"{v} = buf[p:p+n].decode({codec!r}, 'surrogateescape')", "p += n"]

    def build(self, present: list[int]) -> RowFn:
        """Compile the row function for the columns present in the event."""
        ncol = self.tm.column_count
        nbytes = (len(present) + 7) // 8
        names = [f"v{i}" for i in range(ncol)]
        lines = [
            "def row(buf, p):",
            f"    nulls = from_bytes(buf[p:p+{nbytes}], 'little')",
            f"    p += {nbytes}",
        ]
        # Fast path: no NULL in this row; merge runs of fixed-width columns into one unpack.
        lines.append("    if nulls == 0:")
        k = 0
        while k < len(present):
            i = present[k]
            f = self.fixed(i)
            if f is None:
                lines.extend("        " + s for s in self.snippet(i, names[i]))
                k += 1
                continue
            run = []
            while k < len(present) and self.fixed(present[k]) is not None:
                run.append(present[k])
                k += 1
            codes = "".join(self.fixed(j)[0] for j in run)  # type: ignore[index]
            size = struct.calcsize("<" + codes)
            targets = ", ".join(names[j] for j in run)
            lines.append(f"        {targets}{',' if len(run) == 1 else ''} = unpack_from('<{codes}', buf, p)")
            lines.append(f"        p += {size}")
            for j in run:
                post = self.fixed(j)[2]  # type: ignore[index]
                if post:
                    lines.append(f"        {names[j]} = " + post.format(v=names[j]))
        lines.append("    else:")
        for bit, i in enumerate(present):
            lines.append(f"        if nulls >> {bit} & 1:")
            lines.append(f"            {names[i]} = None")
            lines.append("        else:")
            lines.extend("            " + s for s in self.snippet(i, names[i]))
        absent = [i for i in range(ncol) if i not in set(present)]
        for i in absent:
            lines.append(f"    {names[i]} = None")
        lines.append(f"    return ({', '.join(names)}{',' if ncol == 1 else ''}), p")
        src = "\n".join(lines)
        ns = dict(self.consts)
        exec(compile(src, f"<row decoder {self.tm.schema}.{self.tm.table}>", "exec"), ns)
        fn: RowFn = ns["row"]
        return fn


def native_available() -> bool:
    """Whether the C decoder is built and not disabled by ``SPARKCDC_PURE_PYTHON_DECODER``."""
    return _native is not None and os.environ.get(PURE_PYTHON_ENV, "").strip() not in ("1", "true", "yes")


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

    It mirrors ``_Gen.snippet``: the C decoder gives the values that snippet's code gives.
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
    cs = tm.charsets[i]
    codec = charset_codec(cs) if cs is not None else "binary"
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

    def __init__(self, tm: TableMap, tsr: TimestampRenderer, native: bool | None = None) -> None:
        """``native``: use the C decoder (None: when it is built and not disabled by the environment)."""
        self.tm = tm
        self.tsr = tsr
        self._gen = _Gen(tm, tsr)
        self._fns: dict[int, RowFn] = {}
        if native and _native is None:
            raise RuntimeError("the C row decoder (sparkcdc.capture._rowdecode) is not built")
        self.native = native_available() if native is None else native
        self._layouts: dict[int, _rowdecode.Layout | None] = {}

    def fn_for(self, bitmap: int) -> RowFn:
        """The compiled row function for a columns-present bitmap."""
        fn = self._fns.get(bitmap)
        if fn is None:
            present = [i for i in range(self.tm.column_count) if bitmap >> i & 1]
            fn = self._fns[bitmap] = self._gen.build(present)
        return fn

    def layout_for(self, bitmap: int) -> _rowdecode.Layout | None:
        """The C decoder's layout for a columns-present bitmap; None if a column needs the Python decoder."""
        if bitmap in self._layouts:
            return self._layouts[bitmap]
        # the Python row function first: a column neither decoder reads raises the same DecodeError
        self.fn_for(bitmap)
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


def rows_event_images(
    dec: RowDecoder, body: bytes, version: int, op: str
) -> list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]:
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
    return _python_images(dec, body, pos, op, present1, present2)


def _python_images(
    dec: RowDecoder, body: bytes, pos: int, op: str, present1: int, present2: int
) -> list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]:
    """The images decoded by the compiled Python row functions (the reference of the C decoder)."""
    fn1 = dec.fn_for(present1)
    out: list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]] = []
    end = len(body)
    start = pos
    try:
        if op == "U":
            fn2 = dec.fn_for(present2)
            while pos < end:
                start = pos
                before, pos = fn1(body, pos)
                start = pos
                after, pos = fn2(body, pos)
                out.append((before, after))
        elif op == "I":
            while pos < end:
                start = pos
                after, pos = fn1(body, pos)
                out.append((None, after))
        else:
            while pos < end:
                start = pos
                before, pos = fn1(body, pos)
                out.append((before, None))
        if pos > end:
            # a slice past the end reads short instead of failing: the last image was cut
            raise IndexError(f"the row image runs to byte {pos} but the event body ends at byte {end}")
    except (IndexError, struct.error, ValueError, ArithmeticError) as exc:
        # ArithmeticError: decimal.InvalidOperation from a DECIMAL cut short by the end of the body
        tm = dec.tm
        raise DecodeError(f"cannot decode a row of {tm.schema}.{tm.table} at byte {start}: {exc!r}") from exc
    return out
