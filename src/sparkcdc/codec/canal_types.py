"""Canal type facts: ``java.sql.Types`` codes (``sqlType``) and ``mysqlType`` strings.

TiCDC derives both from TiDB's field types (``pkg/sink/codec/internal/java.go``,
``pkg/sink/codec/utils/mysql_types.go``); here they are derived from
``ColumnInfo``, whose ``type`` is already the bare lower-case MySQL name.
"""

from __future__ import annotations

from typing import Final

from sparkcdc.model.schema import BLOB_TYPES, DEFAULT_FLEN, DEFAULT_UNSIGNED_FLEN, TEXT_TYPES, ColumnInfo

# java.sql.Types (JDK 1.8)
JAVA_BIT: Final = -7
JAVA_TINYINT: Final = -6
JAVA_SMALLINT: Final = 5
JAVA_INTEGER: Final = 4
JAVA_BIGINT: Final = -5
JAVA_REAL: Final = 7
JAVA_DOUBLE: Final = 8
JAVA_DECIMAL: Final = 3
JAVA_CHAR: Final = 1
JAVA_VARCHAR: Final = 12
JAVA_DATE: Final = 91
JAVA_TIME: Final = 92
JAVA_TIMESTAMP: Final = 93
JAVA_BINARY: Final = -2
JAVA_BLOB: Final = 2004
JAVA_CLOB: Final = 2005

_BASE_JAVA: dict[str, int] = {
    "tinyint": JAVA_TINYINT,
    "smallint": JAVA_SMALLINT,
    "mediumint": JAVA_INTEGER,
    "int": JAVA_INTEGER,
    "bigint": JAVA_BIGINT,
    "float": JAVA_REAL,
    "double": JAVA_DOUBLE,
    "decimal": JAVA_DECIMAL,
    "date": JAVA_DATE,
    "datetime": JAVA_TIMESTAMP,
    "timestamp": JAVA_TIMESTAMP,
    "time": JAVA_TIME,
    "year": JAVA_VARCHAR,
    "char": JAVA_CHAR,
    "varchar": JAVA_VARCHAR,
    "tinytext": JAVA_CLOB,
    "text": JAVA_CLOB,
    "mediumtext": JAVA_CLOB,
    "longtext": JAVA_CLOB,
    "binary": JAVA_BLOB,
    "varbinary": JAVA_BLOB,
    "tinyblob": JAVA_BLOB,
    "blob": JAVA_BLOB,
    "mediumblob": JAVA_BLOB,
    "longblob": JAVA_BLOB,
    "enum": JAVA_INTEGER,
    "set": JAVA_BIT,
    "bit": JAVA_BIT,
    "json": JAVA_VARCHAR,
    "geometry": JAVA_BINARY,
    # MariaDB's data-type plugins: their values are their text (a UUID, an address), which a
    # JDBC reader takes as a string; MariaDB Connector/J reads all three with getString too.
    # mysqlType is MariaDB's own name (``uuid``, ``inet4``, ``inet6``): TiDB has no such types.
    "uuid": JAVA_VARCHAR,
    "inet4": JAVA_VARCHAR,
    "inet6": JAVA_VARCHAR,
}

# Unsigned integers whose value exceeds the signed range get the next wider Java
# type (canal's LogEventConvert rule); MEDIUMINT is INTEGER already and never moves.
UNSIGNED_PROMOTION: dict[str, tuple[int, int]] = {
    "tinyint": (127, JAVA_SMALLINT),
    "smallint": (32767, JAVA_INTEGER),
    "int": (2147483647, JAVA_BIGINT),
    "bigint": (9223372036854775807, JAVA_DECIMAL),
}


def base_java_type(col: ColumnInfo) -> int:
    """The ``sqlType`` of a column before value-dependent unsigned promotion."""
    return _BASE_JAVA.get(col.type, JAVA_VARCHAR)


def java_type(col: ColumnInfo, value: object) -> int:
    """The ``sqlType`` of one value: unsigned integers above the signed range are promoted."""
    base = _BASE_JAVA.get(col.type, JAVA_VARCHAR)
    if col.unsigned and value is not None:
        promo = UNSIGNED_PROMOTION.get(col.type)
        if promo is not None and value > promo[0]:  # type: ignore[operator]
            return promo[1]
    return base


def mysql_type(col: ColumnInfo, full: bool = False) -> str:
    """The canal ``mysqlType``: bare name (``int unsigned``) or, with ``full``, the full type (``int(10) unsigned``)."""
    t = col.type
    if full:
        s = _compact_type(col)
        if col.unsigned and t not in ("bit", "year"):
            s += " unsigned"
        if col.zerofill and t != "year":
            s += " zerofill"
        return s
    s = t
    if col.unsigned and t not in ("bit", "year"):
        s += " unsigned"
    if col.zerofill and t not in ("bit", "year"):
        s += " zerofill"
    return s


def _quote_element(e: str) -> str:
    return e.replace("\\", "\\\\").replace("'", "''")


def _compact_type(col: ColumnInfo) -> str:
    """TiDB's ``FieldType.CompactStr``: the type with the widths TiDB always shows."""
    t = col.type
    if t in ("enum", "set"):
        return f"{t}('" + "','".join(_quote_element(e) for e in col.elements) + "')"
    if t in ("datetime", "timestamp", "time"):
        return f"{t}({col.fsp})" if col.fsp else t
    if t in ("float", "double"):
        if col.scale is not None and col.scale > 0:
            flen = col.precision if col.precision is not None else (12 if t == "float" else 22)
            return f"{t}({flen},{col.scale})"
        return t
    if t == "decimal":
        return f"decimal({col.precision if col.precision is not None else 10},{col.scale or 0})"
    if t in DEFAULT_UNSIGNED_FLEN or t in ("bit", "char", "varchar", "binary", "varbinary", "year"):
        width: int | None = col.length
        if width is None:
            if col.unsigned and t in DEFAULT_UNSIGNED_FLEN:
                width = DEFAULT_UNSIGNED_FLEN[t]
            elif t not in ("varchar", "varbinary"):  # content-compatible types keep these bare
                width = DEFAULT_FLEN[t]
        return f"{t}({width})" if width is not None else t
    return t


def base_type_of(mysql_type_str: str) -> str:
    """The bare type name of a ``mysqlType`` string (``int(10) unsigned`` → ``int``)."""
    s = mysql_type_str.strip().lower()
    for i, ch in enumerate(s):
        if ch in "( ":
            return s[:i]
    return s


def is_binary_mysql_type(mysql_type_str: str) -> bool:
    """Whether a ``mysqlType`` string names a binary type (values are U+00xx-encoded bytes)."""
    return base_type_of(mysql_type_str) in BLOB_TYPES


def is_text_mysql_type(mysql_type_str: str) -> bool:
    """Whether a ``mysqlType`` string names a character type."""
    return base_type_of(mysql_type_str) in TEXT_TYPES
