"""Value renderers shared by the codecs: Go float formatting, canal strings, key-change splits.

Go prints floats from the *shortest* decimal digits that round-trip through the
float's own width: ``FormatFloat(v, 'f', -1, 32|64)`` in canal-json (never an
exponent) and ``%v`` in CSV (shortest ``'g'``: an exponent when the decimal
exponent is < -4 or >= 6, so ``1e+06``). FLOAT columns hold a float32 widened to
a Python float, so they are rendered from 32-bit shortest digits (``3.14``, not
``3.140000104904175``).
"""

from __future__ import annotations

import dataclasses
import math
import struct
from decimal import ROUND_HALF_UP, Context, Decimal
from functools import lru_cache
from typing import Any

from sparkcdc.errors import DecodeError
from sparkcdc.model.events import RowChange
from sparkcdc.model.schema import ColumnInfo, TableInfo

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_U64 = struct.Struct("<Q")


# --------------------------------------------------------------------------- floats


def to_float32(v: float) -> float:
    """Round a Python float to the nearest float32 (returned widened to float)."""
    return float(_F32.unpack(_F32.pack(v))[0])


def _shortest_exact(v: float, bits: int) -> tuple[bool, str, int]:
    """Shortest round-tripping digits of ``v`` as a float of ``bits``: (negative, digits, decimal point).

    ``int(digits) * 10**(dp - len(digits)) == |value|`` approximately; the digits
    are the shortest inside the rounding interval (inclusive when the mantissa is
    even), the closest one on a tie of length, half-to-even on an exact tie —
    what Go's ``strconv`` (Ryu / roundShortest) produces.
    """
    if bits == 32:
        b = _U32.unpack(_F32.pack(v))[0]
        neg = bool(b >> 31)
        ef = (b >> 23) & 0xFF
        frac = b & 0x7FFFFF
        mant_bits, bias = 23, 127
    else:
        b = _U64.unpack(_F64.pack(v))[0]
        neg = bool(b >> 63)
        ef = (b >> 52) & 0x7FF
        frac = b & 0xFFFFFFFFFFFFF
        mant_bits, bias = 52, 1023
    if ef == 0 and frac == 0:
        return neg, "0", 1
    if ef == 0:
        m = frac
        e = 1 - bias - mant_bits
    else:
        m = frac | (1 << mant_bits)
        e = ef - bias - mant_bits
    # value = m * 2**e; half-gaps to the neighbours (the lower one is half as wide
    # at a power of two). Scale everything by 4 * 2**-e so all are integers over D.
    narrow_low = frac == 0 and ef > 1
    if e >= 2:
        big_v = m << e
        den = 1
        half_hi = 1 << (e - 1)
        half_lo = half_hi >> 1 if narrow_low else half_hi
    else:
        big_v = m << 2
        den = 1 << (2 - e)
        half_hi = 2
        half_lo = 1 if narrow_low else 2
    inclusive = (m & 1) == 0
    k = math.floor(math.log10(abs(v))) + 1  # start one decade high: never skips a candidate
    for p in range(1, 20):
        q = k + 1 - p
        if q >= 0:
            unit = den * 10**q
            val, lo, hi = big_v, big_v - half_lo, big_v + half_hi
        else:
            unit = den
            scale = 10**-q
            val, lo, hi = big_v * scale, (big_v - half_lo) * scale, (big_v + half_hi) * scale
        n = val // unit
        down = n * unit
        up = down + unit
        okdown = n > 0 and (down > lo or (inclusive and down == lo))
        okup = up < hi or (inclusive and up == hi)
        if okdown and okup:
            d_down, d_up = val - down, up - val
            if d_down < d_up or (d_down == d_up and n % 2 == 0):
                chosen = n
            else:
                chosen = n + 1
        elif okdown:
            chosen = n
        elif okup:
            chosen = n + 1
        else:
            continue
        digits = str(chosen)
        dp = len(digits) + q
        digits = digits.rstrip("0") or "0"
        return neg, digits, dp
    raise AssertionError(f"no shortest representation for {v!r}")  # pragma: no cover


def _shortest64(v: float) -> tuple[bool, str, int]:
    """Shortest digits of a double, from ``repr`` (David Gay's shortest, same as Go's)."""
    r = repr(v)
    neg = r[0] == "-"
    if neg:
        r = r[1:]
    mant, _, exp = r.partition("e")
    ip, _, fp = mant.partition(".")
    digits = ip + fp
    dp = len(ip) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    if not stripped.rstrip("0"):
        return neg, "0", 1
    dp -= len(digits) - len(stripped)
    return neg, stripped.rstrip("0"), dp


@lru_cache(maxsize=65536)
def _shortest32(v: float) -> tuple[bool, str, int]:
    return _shortest_exact(v, 32)


def shortest_digits(v: float, bits: int = 64) -> tuple[bool, str, int]:
    """Shortest round-tripping decimal digits of a finite float: (negative, digits, decimal-point position)."""
    if bits == 32:
        if v == 0.0:  # -0.0 == 0.0 would share a cache slot
            return math.copysign(1.0, v) < 0, "0", 1
        return _shortest32(v)
    return _shortest64(v)


def _special(v: float) -> str | None:
    if v != v:
        return "NaN"
    if v == math.inf:
        return "+Inf"
    if v == -math.inf:
        return "-Inf"
    return None


def _fmt_f(neg: bool, digits: str, dp: int) -> str:
    nd = len(digits)
    if digits == "0":
        ip, fp = "0", ""
    elif dp <= 0:
        ip, fp = "0", "0" * (-dp) + digits
    elif dp >= nd:
        ip, fp = digits + "0" * (dp - nd), ""
    else:
        ip, fp = digits[:dp], digits[dp:]
    s = ip + "." + fp if fp else ip
    return "-" + s if neg else s


def _fmt_e(neg: bool, digits: str, dp: int) -> str:
    exp = dp - 1 if digits != "0" else 0
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if exp < 0 else "+"
    e = abs(exp)
    s = f"{mant}e{sign}{e:02d}"
    return "-" + s if neg else s


def go_format_float(v: float, bits: int = 64) -> str:
    """Go ``strconv.FormatFloat(v, 'f', -1, bits)``: shortest digits, never an exponent."""
    if bits == 64:
        r = repr(v)
        if "e" not in r and "n" not in r:  # repr is already fixed notation: drop a ".0"
            return r[:-2] if r.endswith(".0") else r
    sp = _special(v)
    if sp is not None:
        return sp
    neg, digits, dp = shortest_digits(v, bits)
    return _fmt_f(neg, digits, dp)


def go_g_format(v: float, bits: int = 64) -> str:
    """Go ``fmt.Sprintf("%v", v)`` for float32/float64: shortest ``'g'`` (``1e+06``, ``123456``, ``1e-05``)."""
    sp = _special(v)
    if sp is not None:
        return sp
    neg, digits, dp = shortest_digits(v, bits)
    exp = dp - 1 if digits != "0" else 0
    # strconv's 'g' with the shortest precision decides with eprec = 6.
    if exp < -4 or exp >= 6:
        return _fmt_e(neg, digits, dp)
    return _fmt_f(neg, digits, dp)


# --------------------------------------------------------------------------- decimals


# DECIMAL(65,30) needs 65 digits; the default context keeps 28.
_DECIMAL_CONTEXT = Context(prec=200, rounding=ROUND_HALF_UP)


def decimal_text(d: Decimal, scale: int | None) -> str:
    """A DECIMAL as MySQL prints it: fixed notation with exactly ``scale`` fraction digits."""
    s = str(d)
    if "E" not in s:
        if scale is None:
            return s
        dot = s.find(".")
        if (0 if dot < 0 else len(s) - dot - 1) == scale:
            return s
    if scale is not None and d.is_finite():
        d = d.quantize(Decimal(1).scaleb(-scale), context=_DECIMAL_CONTEXT)
    return format(d, "f")


# --------------------------------------------------------------------------- enum / set


def enum_index(col: ColumnInfo, name: str) -> int:
    """The 1-based index of an ENUM element (0 for the empty invalid value)."""
    if name == "":
        return 0
    try:
        return col.elements.index(name) + 1
    except ValueError:
        raise DecodeError(
            f"value {name!r} is not an element of ENUM column {col.name!r} {col.elements!r}; "
            "the table schema does not match the row"
        ) from None


def enum_name(col: ColumnInfo, index: int) -> str:
    """The ENUM element name for a 1-based index (``""`` for 0)."""
    if index == 0:
        return ""
    if not 1 <= index <= len(col.elements):
        raise DecodeError(f"ENUM index {index} out of range for column {col.name!r} {col.elements!r}")
    return col.elements[index - 1]


def set_bitmask(col: ColumnInfo, names: str) -> int:
    """The SET bitmask of comma-joined element names."""
    if names == "":
        return 0
    mask = 0
    for part in names.split(","):
        try:
            mask |= 1 << col.elements.index(part)
        except ValueError:
            raise DecodeError(
                f"value {part!r} is not an element of SET column {col.name!r} {col.elements!r}; "
                "the table schema does not match the row"
            ) from None
    return mask


def set_names(col: ColumnInfo, mask: int) -> str:
    """The comma-joined SET element names of a bitmask, in definition order."""
    if mask >> len(col.elements):
        raise DecodeError(f"SET bitmask {mask} out of range for column {col.name!r} {col.elements!r}")
    return ",".join(e for i, e in enumerate(col.elements) if mask >> i & 1)


# --------------------------------------------------------------------------- canal strings


def canal_value(v: Any, col: ColumnInfo) -> str | None:
    """The canal-json string of one column value (None for SQL NULL)."""
    if v is None:
        return None
    t = col.type
    if t == "float":
        return go_format_float(v, 32)
    if t == "double":
        return go_format_float(v, 64)
    if t == "decimal":
        return decimal_text(v, col.scale) if isinstance(v, Decimal) else str(v)
    if t == "enum":
        return str(enum_index(col, v)) if isinstance(v, str) else str(v)
    if t == "set":
        return str(set_bitmask(col, v)) if isinstance(v, str) else str(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return bytes(v).decode("latin-1")
    if isinstance(v, bool):
        return "1" if v else "0"
    return v if isinstance(v, str) else str(v)


# --------------------------------------------------------------------------- split update


def key_column_indexes(table: TableInfo) -> frozenset[int]:
    """Positions of every primary-key, handle-key and unique-key column."""
    pos: set[int] = set(table.handle_key_index)
    for ix in table.indexes:
        if ix.primary or ix.unique:
            pos.update(table.index_of(c) for c in ix.columns)
    return frozenset(pos)


def split_update_if_key_changed(row: RowChange, table: TableInfo) -> list[RowChange]:
    """Spec §7: an UPDATE that changes a PK/handle/UK column becomes DELETE(pre-image) + INSERT(post-image)."""
    if row.op != "U" or row.before is None or row.after is None:
        return [row]
    before, after = row.before, row.after
    for i in key_column_indexes(table):
        if before[i] != after[i] or type(before[i]) is not type(after[i]):
            return [
                dataclasses.replace(row, op="D", after=None),
                dataclasses.replace(row, op="I", before=None),
            ]
    return [row]
