"""TABLE_MAP events: the exact column layout of the rows that follow.

With ``binlog_row_metadata=FULL`` a table map carries column names,
signedness, charsets, ENUM/SET elements and the primary key, so rows are always
decoded with the layout they were written in, whatever DDL ran since.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sparkcdc.capture.charsets import charset_of, codec_of
from sparkcdc.errors import DecodeError, SchemaError
from sparkcdc.model import ColumnInfo, IndexInfo, TableInfo

# enum_field_types
T_DECIMAL = 0
T_TINY = 1
T_SHORT = 2
T_LONG = 3
T_FLOAT = 4
T_DOUBLE = 5
T_NULL = 6
T_TIMESTAMP = 7
T_LONGLONG = 8
T_INT24 = 9
T_DATE = 10
T_TIME = 11
T_DATETIME = 12
T_YEAR = 13
T_NEWDATE = 14
T_VARCHAR = 15
T_BIT = 16
T_TIMESTAMP2 = 17
T_DATETIME2 = 18
T_TIME2 = 19
T_BLOB_COMPRESSED = 140
"""MariaDB's BLOB/TEXT ... COMPRESSED in a table map and row events (only there: the column's type is BLOB)."""
T_VARCHAR_COMPRESSED = 141
"""MariaDB's VARCHAR/VARBINARY ... COMPRESSED, likewise."""
COMPRESSED_TYPES = frozenset({T_BLOB_COMPRESSED, T_VARCHAR_COMPRESSED})
T_JSON = 245
T_NEWDECIMAL = 246
T_ENUM = 247
T_SET = 248
T_TINY_BLOB = 249
T_MEDIUM_BLOB = 250
T_LONG_BLOB = 251
T_BLOB = 252
T_VAR_STRING = 253
T_STRING = 254
T_GEOMETRY = 255

NUMERIC_TYPES = frozenset(
    {T_TINY, T_SHORT, T_INT24, T_LONG, T_LONGLONG, T_NEWDECIMAL, T_FLOAT, T_DOUBLE, T_YEAR}
)
CHARACTER_TYPES = frozenset(
    {T_STRING, T_VAR_STRING, T_VARCHAR, T_BLOB, T_GEOMETRY, T_BLOB_COMPRESSED, T_VARCHAR_COMPRESSED}
)

# Charset ids that are binary; every other id is decoded as text.
BINARY_CHARSET = 63


def column_codec(tm: TableMap, i: int) -> str:
    """The codec of column ``i``'s collation (``charsets.codec_of``); a DecodeError naming the column."""
    cs = tm.charsets[i]
    assert cs is not None
    try:
        return codec_of(cs)
    except DecodeError as exc:
        raise DecodeError(f"column {tm.schema}.{tm.table}.{column_name(tm, i)}: {exc.message}") from None


def column_name(tm: TableMap, i: int) -> str:
    """Column ``i``'s name, or ``@<i+1>`` when the map has no names."""
    return tm.names[i] if i < len(tm.names) else f"@{i + 1}"


@dataclass(slots=True)
class TableMap:
    """One decoded TABLE_MAP event."""

    table_id: int
    schema: str
    table: str
    types: list[int]
    meta: list[int | tuple[int, int]]
    nullable: list[bool]
    unsigned: list[bool] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    charsets: list[int | None] = field(default_factory=list)
    enum_values: dict[int, list[str]] = field(default_factory=dict)
    set_values: dict[int, list[str]] = field(default_factory=dict)
    primary_key: list[int] = field(default_factory=list)
    real_types: list[int] = field(default_factory=list)
    """Per column: the real type (ENUM/SET hide behind STRING in ``types``)."""
    plugin_types: dict[int, str] = field(default_factory=dict)
    """Columns of MariaDB's data-type plugins (``uuid``, ``inet4``, ``inet6``) by index. The table
    map says BINARY(16)/BINARY(4) for them; only the tracked shape knows (``with_plugin_types``)."""

    @property
    def column_count(self) -> int:
        return len(self.types)


PLUGIN_TYPE_SIZES = {"uuid": 16, "inet4": 4, "inet6": 16}
"""MariaDB's data-type plugins the decoders read, and their binary size.

MariaDB logs such a column as BINARY(size) does (type STRING, metadata ``0xFE, size``, binary
charset) and its value as BINARY(size) values are: a 1-byte length, then the value without its
trailing zero bytes. The value is the type's in-memory form, which is the order of its text: a
UUID's 16 bytes as its 32 hex digits (InnoDB keeps time-based UUIDs in another order, the binlog
does not), an INET4/INET6 address in network order.
"""


def with_plugin_types(tm: TableMap, info: TableInfo | None) -> TableMap:
    """The table map with the plugin-type columns of the tracked shape ``info`` marked.

    ``info`` describes the same columns as the map (TableShapes matched them by name; the map may
    end with MariaDB's hidden hash columns, which ``info`` leaves out); a column
    the shape calls UUID/INET4/INET6 must be BINARY(n) of that type's size in the map, else the
    shape is not the one the rows were written with: SchemaError naming the table and column.
    """
    if info is None or len(info.columns) > tm.column_count:
        return tm
    found: dict[int, str] = {}
    for i, col in enumerate(info.columns):
        size = PLUGIN_TYPE_SIZES.get(col.type)
        if size is None:
            continue
        m = tm.meta[i]
        if (
            tm.real_types[i] != T_STRING
            or m != (T_STRING, size)
            or tm.charsets[i] not in (None, BINARY_CHARSET)
        ):
            raise SchemaError(
                f"column {tm.schema}.{tm.table}.{col.name} is {col.type.upper()} in the tracked schema "
                f"(version {info.version}) but the binlog table map gives type {tm.real_types[i]} with "
                f"metadata {m!r}, not BINARY({size}); the tracked shape is not the one these rows were "
                "written with: restart the changefeed from a new snapshot"
            )
        found[i] = col.type
    if not found:
        return tm
    return replace(tm, plugin_types=found)


def read_packed(buf: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer and the position after it."""
    b = buf[pos]
    if b < 251:
        return b, pos + 1
    if b == 252:
        return int.from_bytes(buf[pos + 1 : pos + 3], "little"), pos + 3
    if b == 253:
        return int.from_bytes(buf[pos + 1 : pos + 4], "little"), pos + 4
    return int.from_bytes(buf[pos + 1 : pos + 9], "little"), pos + 9


def parse_table_map(body: bytes, *, mariadb: bool = True) -> TableMap:
    """Decode a TABLE_MAP event body (checksum already stripped).

    ``mariadb``: the binlog was written by MariaDB, which counts GEOMETRY columns among the
    character columns of the charset metadata; MySQL does not.
    """
    table_id = int.from_bytes(body[0:6], "little")
    pos = 8
    slen = body[pos]
    schema = body[pos + 1 : pos + 1 + slen].decode("utf-8", "surrogateescape")
    pos += 1 + slen + 1
    tlen = body[pos]
    table = body[pos + 1 : pos + 1 + tlen].decode("utf-8", "surrogateescape")
    pos += 1 + tlen + 1
    ncol, pos = read_packed(body, pos)
    types = list(body[pos : pos + ncol])
    pos += ncol
    mlen, pos = read_packed(body, pos)
    meta_end = pos + mlen
    meta: list[int | tuple[int, int]] = []
    real_types: list[int] = []
    for t in types:
        real = t
        if t in (
            T_FLOAT,
            T_DOUBLE,
            T_BLOB,
            T_GEOMETRY,
            T_JSON,
            T_TIMESTAMP2,
            T_DATETIME2,
            T_TIME2,
            T_BLOB_COMPRESSED,
        ):
            meta.append(body[pos])
            pos += 1
        elif t in (T_VARCHAR, T_VAR_STRING, T_VARCHAR_COMPRESSED):
            meta.append(int.from_bytes(body[pos : pos + 2], "little"))
            pos += 2
        elif t == T_NEWDECIMAL:
            meta.append((body[pos], body[pos + 1]))  # precision, scale
            pos += 2
        elif t == T_BIT:
            meta.append((body[pos], body[pos + 1]))  # bits in last byte, bytes
            pos += 2
        elif t == T_STRING:
            b0, b1 = body[pos], body[pos + 1]
            pos += 2
            if b0 in (T_ENUM, T_SET):
                real = b0
                meta.append((b0, b1))  # real type, pack length
            else:
                # The max length is split over both bytes (MySQL bug #37426 encoding).
                max_len = (((b0 << 8) >> 4) & 0x300) ^ 0x300
                max_len += b1
                meta.append((T_STRING, max_len))
        elif t in (T_ENUM, T_SET):
            meta.append((t, body[pos + 1]))
            pos += 2
        else:
            meta.append(0)
        real_types.append(real)
    pos = meta_end
    nbytes = (ncol + 7) // 8
    nullbits = int.from_bytes(body[pos : pos + nbytes], "little")
    pos += nbytes
    nullable = [bool(nullbits >> i & 1) for i in range(ncol)]
    tm = TableMap(table_id, schema, table, types, meta, nullable, real_types=real_types)
    _parse_optional_metadata(tm, body, pos, mariadb)
    return tm


def _parse_optional_metadata(tm: TableMap, body: bytes, pos: int, mariadb: bool = True) -> None:
    ncol = tm.column_count
    real = tm.real_types
    numeric_idx = [i for i in range(ncol) if real[i] in NUMERIC_TYPES]
    char_types = CHARACTER_TYPES if mariadb else CHARACTER_TYPES - {T_GEOMETRY}
    char_idx = [i for i in range(ncol) if real[i] in char_types]
    enumset_idx = [i for i in range(ncol) if real[i] in (T_ENUM, T_SET)]
    enum_idx = [i for i in range(ncol) if real[i] == T_ENUM]
    set_idx = [i for i in range(ncol) if real[i] == T_SET]
    tm.unsigned = [False] * ncol
    tm.charsets = [None] * ncol
    raw_elements: dict[int, list[bytes]] = {}
    """ENUM/SET elements as the map has them: in the column's charset, which a later field gives."""
    end = len(body)
    while pos < end:
        typ = body[pos]
        length, pos = read_packed(body, pos + 1)
        val = body[pos : pos + length]
        pos += length
        if typ == 1:  # SIGNEDNESS: one bit per numeric column, MSB first
            for k, i in enumerate(numeric_idx):
                if val[k // 8] & (0x80 >> (k % 8)):
                    tm.unsigned[i] = True
        elif typ in (2, 10):  # DEFAULT_CHARSET / ENUM_AND_SET_DEFAULT_CHARSET
            cols = char_idx if typ == 2 else enumset_idx
            p = 0
            default, p = read_packed(val, p)
            per = {}
            while p < len(val):
                k, p = read_packed(val, p)
                cs, p = read_packed(val, p)
                per[k] = cs
            for k, i in enumerate(cols):
                tm.charsets[i] = per.get(k, default)
        elif typ in (3, 11):  # COLUMN_CHARSET / ENUM_AND_SET_COLUMN_CHARSET
            cols = char_idx if typ == 3 else enumset_idx
            p = 0
            for i in cols:
                if p >= len(val):
                    break
                cs, p = read_packed(val, p)
                tm.charsets[i] = cs
        elif typ == 4:  # COLUMN_NAME
            p = 0
            names = []
            while p < len(val):
                n, p = read_packed(val, p)
                names.append(val[p : p + n].decode("utf-8", "surrogateescape"))
                p += n
            tm.names = names
        elif typ in (5, 6):  # SET_STR_VALUE / ENUM_STR_VALUE
            cols = set_idx if typ == 5 else enum_idx
            p = 0
            for i in cols:
                if p >= len(val):
                    break
                cnt, p = read_packed(val, p)
                items = []
                for _ in range(cnt):
                    n, p = read_packed(val, p)
                    items.append(val[p : p + n])
                    p += n
                raw_elements[i] = items
        elif typ == 8:  # SIMPLE_PRIMARY_KEY
            p = 0
            pk = []
            while p < len(val):
                k, p = read_packed(val, p)
                pk.append(k)
            tm.primary_key = pk
        elif typ == 9:  # PRIMARY_KEY_WITH_PREFIX
            p = 0
            pk = []
            while p < len(val):
                k, p = read_packed(val, p)
                _prefix, p = read_packed(val, p)
                pk.append(k)
            tm.primary_key = pk
    if not tm.names:
        tm.names = [f"@{i + 1}" for i in range(ncol)]
    for i, items in raw_elements.items():
        codec = _element_codec(tm, i)
        target = tm.enum_values if real[i] == T_ENUM else tm.set_values
        target[i] = [e.decode(codec, "surrogateescape") for e in items]


def _element_codec(tm: TableMap, i: int) -> str:
    """The codec of ENUM/SET column ``i``'s elements: its charset's; byte for byte when it is binary."""
    cs = tm.charsets[i]
    if cs is None:
        return "utf-8"  # a map without the ENUM_AND_SET charsets: the server's utf8 default
    if cs == BINARY_CHARSET:
        return "latin1"  # bytes as the code points of the same numbers, as DDL's 0x literals read
    return column_codec(tm, i)


_BLOB_BY_LEN = {
    1: ("tinyblob", "tinytext"),
    2: ("blob", "text"),
    3: ("mediumblob", "mediumtext"),
    4: ("longblob", "longtext"),
}


def table_info_from_map(tm: TableMap, version: int = 0) -> TableInfo:
    """A TableInfo built from the table map alone (when no tracked shape matches it)."""
    cols = []
    for i in range(tm.column_count):
        real = tm.real_types[i]
        m = tm.meta[i]
        cs_id = tm.charsets[i]
        binary = cs_id == BINARY_CHARSET
        kw: dict[str, object] = {}
        if real in (T_TINY, T_SHORT, T_INT24, T_LONG, T_LONGLONG):
            name = {
                T_TINY: "tinyint",
                T_SHORT: "smallint",
                T_INT24: "mediumint",
                T_LONG: "int",
                T_LONGLONG: "bigint",
            }[real]
        elif real == T_FLOAT:
            name = "float"
        elif real == T_DOUBLE:
            name = "double"
        elif real == T_NEWDECIMAL:
            assert isinstance(m, tuple)
            name, kw = "decimal", {"precision": m[0], "scale": m[1]}
        elif real in (T_DATE, T_NEWDATE):
            name = "date"
        elif real in (T_DATETIME, T_DATETIME2):
            name, kw = "datetime", {"fsp": m if isinstance(m, int) else 0}
        elif real in (T_TIMESTAMP, T_TIMESTAMP2):
            name, kw = "timestamp", {"fsp": m if isinstance(m, int) else 0}
        elif real in (T_TIME, T_TIME2):
            name, kw = "time", {"fsp": m if isinstance(m, int) else 0}
        elif real == T_YEAR:
            name = "year"
        elif real == T_BIT:
            assert isinstance(m, tuple)
            name, kw = "bit", {"length": m[1] * 8 + m[0]}
        elif real == T_ENUM:
            name, kw = "enum", {"elements": tuple(tm.enum_values.get(i, ()))}
        elif real == T_SET:
            name, kw = "set", {"elements": tuple(tm.set_values.get(i, ()))}
        elif real in (T_VARCHAR, T_VAR_STRING, T_VARCHAR_COMPRESSED):
            name = "varbinary" if binary else "varchar"
        elif real == T_STRING:
            name = "binary" if binary else "char"
        elif real in (T_BLOB, T_JSON, T_BLOB_COMPRESSED):
            blob, text = _BLOB_BY_LEN.get(m if isinstance(m, int) else 4, ("longblob", "longtext"))
            name = blob if binary else text
            if real == T_JSON:
                name = "json"
        elif real == T_GEOMETRY:
            name = "geometry"
        else:
            name = "varchar"
        charset = None if binary or cs_id is None else (charset_of(cs_id) or "utf8mb4")
        cols.append(
            ColumnInfo(
                name=tm.names[i],
                type=name,
                unsigned=tm.unsigned[i] if i < len(tm.unsigned) else False,
                nullable=tm.nullable[i],
                charset=charset if name not in ("bit",) else None,
                **kw,  # type: ignore[arg-type]
            )
        )
    idx: tuple[IndexInfo, ...] = ()
    if tm.primary_key:
        idx = (IndexInfo("PRIMARY", tuple(tm.names[k] for k in tm.primary_key), unique=True, primary=True),)
    return TableInfo(schema=tm.schema, table=tm.table, columns=tuple(cols), indexes=idx, version=version)
