"""Column-type normalisation: a parsed column definition becomes the ``ColumnInfo`` MariaDB 10.11 stores.

Default display widths, charset inheritance, binary charsets and ``DEFAULT``
values as ``SHOW CREATE TABLE`` prints them, so a tracked table equals the table
the server reports and the column types the binlog's table maps are checked against.
"""

from __future__ import annotations

import re
import struct
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation, localcontext

from sparkcdc.capture.charsets import charset_codec
from sparkcdc.capture.ddl.charsets import mbmaxlen, resolve_charset
from sparkcdc.capture.ddl.statements import ColumnDef, DefaultValue
from sparkcdc.errors import SchemaError
from sparkcdc.model.schema import INT_TYPES, ColumnInfo

_INT_WIDTH = {
    "tinyint": (4, 3),
    "smallint": (6, 5),
    "mediumint": (9, 8),
    "int": (11, 10),
    "bigint": (20, 20),
}
_TEXT_BY_SIZE = (("tinytext", 255), ("text", 65535), ("mediumtext", 16777215), ("longtext", 4294967295))
_BLOB_BY_SIZE = (("tinyblob", 255), ("blob", 65535), ("mediumblob", 16777215), ("longblob", 4294967295))
TEXT_MAX_BYTES = dict(_TEXT_BY_SIZE) | dict(_BLOB_BY_SIZE)
_TO_BINARY = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}
CHARSET_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
)


def text_type_for_bytes(nbytes: int, binary: bool) -> str:
    """The smallest TEXT (or BLOB) type holding ``nbytes`` bytes."""
    for name, size in _BLOB_BY_SIZE if binary else _TEXT_BY_SIZE:
        if nbytes <= size:
            return name
    return "longblob" if binary else "longtext"


def enum_elements(cdef: ColumnDef, charset: str | None) -> tuple[str, ...]:
    """An ENUM/SET column's elements as the table map's metadata gives them, in its resolved charset.

    In a binary column an element is bytes, one code point per byte: a 0x/b'' literal as written,
    a string as its UTF-8 bytes (capture rewrites a string a session in another connection
    charset wrote into a hex literal, ``ddl.literals``). In any other charset a 0x/b'' literal's
    bytes are text in that charset.
    """
    flags = cdef.byte_elements or [False] * len(cdef.args)
    if charset is None or charset == "binary":
        return tuple(
            e if is_bytes else e.encode("utf-8", "surrogateescape").decode("latin1")
            for e, is_bytes in zip(cdef.args, flags, strict=True)
        )
    if not any(flags):
        return tuple(cdef.args)
    codec = charset_codec(charset, f"column {cdef.name!r}")
    return tuple(
        e.encode("latin1").decode(codec, "surrogateescape") if is_bytes else e
        for e, is_bytes in zip(cdef.args, flags, strict=True)
    )


def build_column(cdef: ColumnDef, table_charset: tuple[str, str]) -> ColumnInfo:
    """Turn a parsed column definition into a ColumnInfo, as MariaDB 10.11 stores it."""
    t = cdef.type_name
    nums = [int(a) for a in cdef.args if a.isdigit()] if t not in ("enum", "set") else []
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fsp = 0
    charset: str | None = None
    collation: str | None = None
    elements: tuple[str, ...] = ()
    unsigned = cdef.unsigned or cdef.zerofill
    if cdef.json_check and t == "longtext":
        t = "json"

    if t in CHARSET_TYPES:
        cs_in = cdef.charset
        if cdef.national:
            cs_in = "utf8mb3"
        resolved: tuple[str, str]
        if t == "json" and cs_in is None and cdef.collation is None and not cdef.json_check:
            # MariaDB's JSON is LONGTEXT in utf8mb4_bin whatever the table's charset
            resolved = ("utf8mb4", "utf8mb4_bin")
        else:
            explicit = resolve_charset(cs_in, cdef.collation, None)
            resolved = explicit if explicit is not None else table_charset
            if cdef.binary_collation and cdef.collation is None and resolved[0] != "binary":
                # the BINARY attribute picks the charset's _bin collation, it does not make the column binary
                resolved = (resolved[0], resolved[0] + "_bin")
        charset, collation = resolved
        if charset == "binary" and t in _TO_BINARY:
            t = _TO_BINARY[t]
            charset = collation = None

    if t in INT_TYPES:
        length = nums[0] if nums else _INT_WIDTH[t][1 if unsigned else 0]
    elif t == "decimal":
        precision = nums[0] if nums else 10
        scale = nums[1] if len(nums) > 1 else 0
    elif t in ("float", "double"):
        if len(nums) >= 2:
            precision, scale = nums[0], nums[1]
        elif len(nums) == 1 and t == "float":
            if nums[0] > 24:
                t = "double"
    elif t in ("datetime", "timestamp", "time"):
        fsp = nums[0] if nums else 0
    elif t == "year":
        length = nums[0] if nums and nums[0] == 2 else 4
    elif t in ("char", "binary"):
        length = nums[0] if nums else 1
    elif t in ("varchar", "varbinary"):
        if not nums:
            raise SchemaError(f"column {cdef.name!r}: {t.upper()} needs a length, e.g. {t.upper()}(255)")
        length = nums[0]
    elif t == "bit":
        length = nums[0] if nums else 1
    elif t in ("text", "blob") and nums:
        t = text_type_for_bytes(nums[0] * (mbmaxlen(charset) if t == "text" else 1), t == "blob")
    elif t in ("enum", "set"):
        elements = enum_elements(cdef, charset)

    nullable = not cdef.not_null if cdef.not_null is not None else True
    if cdef.auto_increment or cdef.inline_primary:
        nullable = False
    col = ColumnInfo(
        name=cdef.name,
        type=t,
        unsigned=unsigned if t in INT_TYPES or t in ("decimal", "float", "double") else False,
        zerofill=cdef.zerofill if t in INT_TYPES or t in ("decimal", "float", "double") else False,
        length=length,
        precision=precision,
        scale=scale,
        fsp=fsp,
        charset=charset,
        collation=collation,
        nullable=nullable,
        elements=elements,
        generated=cdef.generated,
        auto_increment=cdef.auto_increment,
        comment=cdef.comment,
    )
    default: str | None = None
    if cdef.default is not None and not cdef.generated:
        default = normalize_default(col, cdef.default)
    return with_default(col, default)


def with_default(col: ColumnInfo, default: str | None) -> ColumnInfo:
    """A copy with a new DEFAULT; ``has_default`` follows the server (nullable columns default to NULL)."""
    from dataclasses import replace

    has = default is not None or (col.nullable and not col.generated and not col.auto_increment)
    return replace(col, default=default, has_default=has)


# --------------------------------------------------------------------------------------------
# DEFAULT values, normalised the way SHOW CREATE TABLE prints them
# --------------------------------------------------------------------------------------------


def normalize_default(col: ColumnInfo, dv: DefaultValue) -> str | None:
    """The DEFAULT of a column as the server prints it (strings unquoted); None for NULL."""
    with localcontext() as ctx:
        ctx.prec = 200  # DECIMAL(65,30) needs more than the default 28 digits
        return _normalize_default(col, dv)


def _normalize_default(col: ColumnInfo, dv: DefaultValue) -> str | None:
    if dv.kind == "null":
        return None
    if dv.kind == "expr":
        return dv.text
    text = dv.text
    if dv.lit == "hex":
        text = bytes.fromhex(text if len(text) % 2 == 0 else "0" + text).decode("latin-1")
        if col.type in INT_TYPES or col.type in ("bit", "decimal", "float", "double", "year"):
            text = str(int(dv.text or "0", 16))
    elif dv.lit == "bin":
        if col.type == "bit" or col.type in INT_TYPES or col.type in ("decimal", "float", "double", "year"):
            text = str(int(dv.text or "0", 2))
        else:
            n = int(dv.text or "0", 2)
            text = n.to_bytes(max(1, (len(dv.text) + 7) // 8), "big").decode("latin-1")
    elif dv.lit == "str" and col.holds_bytes:
        # a binary column's default is bytes, one code point per byte, as a hex literal's above
        text = text.encode("utf-8", "surrogateescape").decode("latin-1")
    t = col.type
    try:
        if t in INT_TYPES:
            return str(int(Decimal(text.strip() or "0").to_integral_value(ROUND_HALF_UP)))
        if t == "decimal":
            q = Decimal(1).scaleb(-(col.scale or 0))
            d = Decimal(text.strip() or "0").quantize(q, rounding=ROUND_HALF_UP)
            return format(d.copy_abs() if d == 0 else d, "f")
        if t in ("float", "double"):
            return format_real(float(Decimal(text.strip() or "0")), t, col.scale)
        if t == "bit":
            n = (
                int(Decimal(text))
                if dv.lit in ("num", "bool", "hex", "bin")
                else int.from_bytes(text.encode("latin-1"), "big")
            )
            return f"b'{n:b}'"
        if t == "year":
            return _norm_year(text, dv.lit)
        if t == "date":
            return _norm_date(text)
        if t in ("datetime", "timestamp"):
            return _norm_datetime(text, col.fsp)
        if t == "time":
            return _norm_time(text, col.fsp)
    except (InvalidOperation, ValueError, OverflowError):
        return text
    if t == "enum":
        return _norm_enum(text, dv.lit, col.elements)
    if t == "set":
        return _norm_set(text, dv.lit, col.elements)
    return text


def format_real(x: float, type_name: str, scale: int | None) -> str:
    """A FLOAT/DOUBLE value as MariaDB prints it (``my_gcvt``: %g-like, 6 digits for FLOAT)."""
    if scale is not None:
        if type_name == "float":
            x = struct.unpack("f", struct.pack("f", x))[0]
        d = Decimal(repr(x)).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_EVEN)
        return format(d, "f")
    if x == 0:
        return "0"
    if type_name == "float":
        x = struct.unpack("f", struct.pack("f", x))[0]
        digits_str = f"{abs(x):.5e}"
    else:
        digits_str = repr(abs(x))
    d = Decimal(digits_str).normalize()
    _sign, digs, exp = d.as_tuple()
    digits = "".join(map(str, digs)).rstrip("0") or "0"
    assert isinstance(exp, int)
    decpt = len(digs) + exp  # position of the decimal point relative to the digits
    n = len(digits)
    neg = "-" if x < 0 else ""
    if -14 <= decpt <= 15 or (decpt > 15 and n > decpt):
        if decpt <= 0:
            s = "0." + "0" * (-decpt) + digits
        elif decpt >= n:
            s = digits + "0" * (decpt - n)
        else:
            s = digits[:decpt] + "." + digits[decpt:]
        return neg + s
    mant = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{neg}{mant}e{decpt - 1}"


def _norm_year(text: str, lit: str) -> str:
    s = text.strip()
    n = int(Decimal(s))
    if lit == "str" and len(s) <= 2 and 0 <= n <= 99:
        return str(2000 + n if n < 70 else 1900 + n)
    if 1 <= n <= 69:
        return str(2000 + n)
    if 70 <= n <= 99:
        return str(1900 + n)
    return str(n) if n else "0000"


_DATE_RE = re.compile(r"^(\d{1,4})[-/.:](\d{1,2})[-/.:](\d{1,2})$")
_DT_RE = re.compile(
    r"^(\d{1,4})[-/.:](\d{1,2})[-/.:](\d{1,2})(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d*))?)?)?)?$"
)
_TIME_RE = re.compile(r"^(-)?(?:(\d+) )?(\d{1,3})(?::(\d{1,2})(?::(\d{1,2}))?)?(?:\.(\d*))?$")


def _frac(frac: str | None, fsp: int) -> str:
    if fsp <= 0:
        return ""
    f = (frac or "")[:fsp].ljust(fsp, "0")
    return "." + f


def _norm_date(text: str) -> str:
    s = text.strip()
    m = _DT_RE.match(s)
    if m:
        return f"{int(m.group(1)):04d}-{int(m.group(2)):02d}-{int(m.group(3)):02d}"
    if s.isdigit() and len(s) == 8:
        return f"{s[:4]}-{s[4:6]}-{s[6:]}"
    return s


def _norm_datetime(text: str, fsp: int) -> str:
    s = text.strip()
    m = _DT_RE.match(s)
    if m:
        y, mo, d, h, mi, se, fr = m.groups()
        # extra fraction digits are cut, not rounded (time_round_mode=TRUNCATE)
        return (
            f"{int(y):04d}-{int(mo):02d}-{int(d):02d} {int(h or 0):02d}:{int(mi or 0):02d}:{int(se or 0):02d}"
            + _frac(fr, fsp)
        )
    if s.isdigit() and len(s) in (8, 14):
        s14 = s.ljust(14, "0")
        return f"{s14[:4]}-{s14[4:6]}-{s14[6:8]} {s14[8:10]}:{s14[10:12]}:{s14[12:14]}" + _frac("", fsp)
    return s


def _norm_time(text: str, fsp: int) -> str:
    s = text.strip()
    m = _TIME_RE.match(s)
    if m and (m.group(4) is not None or m.group(2) is not None):
        neg, days, h, mi, se, fr = m.groups()
        hours = int(h) + 24 * int(days or 0)
        return f"{neg or ''}{hours:02d}:{int(mi or 0):02d}:{int(se or 0):02d}" + _frac(fr, fsp)
    if re.match(r"^-?\d+(\.\d*)?$", s):
        neg = s.startswith("-")
        whole, _, fr = s.lstrip("-").partition(".")
        whole = whole.rjust(6, "0")
        return f"{'-' if neg else ''}{int(whole[:-4]):02d}:{whole[-4:-2]}:{whole[-2:]}" + _frac(fr, fsp)
    return s


def _norm_enum(text: str, lit: str, elements: tuple[str, ...]) -> str:
    if lit in ("num", "bool") and text.isdigit():
        i = int(text)
        if 1 <= i <= len(elements):
            return elements[i - 1]
        return text
    for e in elements:
        if e.lower() == text.lower():
            return e
    return text


def _norm_set(text: str, lit: str, elements: tuple[str, ...]) -> str:
    if lit in ("num", "bool") and text.isdigit():
        bits = int(text)
        return ",".join(e for k, e in enumerate(elements) if bits >> k & 1)
    wanted = {p.lower() for p in text.split(",") if p != ""}
    return ",".join(e for e in elements if e.lower() in wanted)
