"""Table and column shapes with the MySQL type facts every codec needs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

INT_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
FLOAT_TYPES = frozenset({"float", "double"})
TEMPORAL_TYPES = frozenset({"date", "datetime", "timestamp", "time", "year"})
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
BLOB_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
PLUGIN_TYPES = frozenset({"uuid", "inet4", "inet6"})
"""MariaDB's data-type plugins (UUID 10.7+, INET4 10.10+, INET6 10.5+): values are their text."""
ALL_TYPES = (
    INT_TYPES
    | FLOAT_TYPES
    | TEMPORAL_TYPES
    | TEXT_TYPES
    | BLOB_TYPES
    | PLUGIN_TYPES
    | frozenset({"decimal", "enum", "set", "bit", "json", "geometry"})
)

DEFAULT_FLEN: dict[str, int] = {
    "tinyint": 4,
    "smallint": 6,
    "mediumint": 9,
    "int": 11,
    "bigint": 20,
    "bit": 1,
    "char": 1,
    "binary": 1,
    "varchar": 5,
    "varbinary": 5,
    "tinytext": 255,
    "tinyblob": 255,
    "text": 65535,
    "blob": 65535,
    "mediumtext": 16777215,
    "mediumblob": 16777215,
    "longtext": 4294967295,
    "longblob": 4294967295,
    "year": 4,
    "float": 12,
    "double": 22,
    "decimal": 10,
}
"""A type's display length when the column declares none (TiDB's ``GetDefaultFieldLengthAndDecimal``)."""
DEFAULT_UNSIGNED_FLEN: dict[str, int] = {"tinyint": 3, "smallint": 5, "mediumint": 8, "int": 10, "bigint": 20}
"""The same for unsigned integers, as MySQL sets them."""


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One column: name and every MySQL type fact the codecs use.

    ``type`` is the bare lower-case MySQL type name (``int``, ``varchar``,
    ``decimal``, ``datetime``, ``enum``, ``json`` ...). Text columns in a binary
    charset are stored as ``binary``/``varbinary``/``*blob`` with ``charset=None``.

    Values of a column in RowChange images (lossless, see ``model.events``):
    ints → int; float/double → float; decimal → Decimal; date/datetime/
    timestamp/time → str in MySQL text form with exactly ``fsp`` fraction
    digits (TIMESTAMP rendered in the changefeed time zone, UTC by default;
    zero dates kept as ``0000-00-00``); year → int; text types → str; binary
    types → bytes; enum → the element name (``""`` for the invalid index 0);
    set → the element names joined by ``,`` in definition order; bit → int;
    json → str (its MySQL text); uuid/inet4/inet6 → str as MariaDB prints it
    (``6ccd780c-baba-1026-9564-5b8c656024db``, ``10.0.0.1``, ``::ffff:1.2.3.4``); NULL → None.
    """

    name: str
    type: str
    unsigned: bool = False
    zerofill: bool = False
    length: int | None = None
    """Display width (ints), characters (char/varchar), bytes (binary), bits (bit)."""
    precision: int | None = None
    scale: int | None = None
    fsp: int = 0
    charset: str | None = None
    collation: str | None = None
    nullable: bool = True
    default: str | None = None
    """The DEFAULT as MySQL prints it (``'abc'`` unquoted, ``CURRENT_TIMESTAMP``); None if no default."""
    has_default: bool = False
    elements: tuple[str, ...] = ()
    """ENUM/SET elements in definition order."""
    generated: bool = False
    auto_increment: bool = False
    comment: str = ""

    @property
    def is_binary(self) -> bool:
        """True for BINARY/VARBINARY/BLOB columns (values are bytes)."""
        return self.type in BLOB_TYPES

    @property
    def holds_bytes(self) -> bool:
        """True for the binary types and for ENUM/SET of ``CHARACTER SET binary``: elements and
        defaults are bytes (one code point per byte in ``elements`` and ``default``)."""
        return self.is_binary or self.charset == "binary"

    @property
    def is_text(self) -> bool:
        """True for CHAR/VARCHAR/TEXT columns (values are str)."""
        return self.type in TEXT_TYPES

    def full_type(self) -> str:
        """The column type as ``SHOW CREATE TABLE`` would print it (``int(10) unsigned``)."""
        t = self.type
        if t in ("enum", "set"):
            inner = ",".join("'" + e.replace("'", "''") + "'" for e in self.elements)
            s = f"{t}({inner})"
        elif t == "decimal":
            s = f"decimal({self.precision if self.precision is not None else 10},{self.scale or 0})"
        elif t in FLOAT_TYPES and self.precision is not None:
            s = (
                f"{t}({self.precision},{self.scale or 0})"
                if self.scale is not None
                else f"{t}({self.precision})"
            )
        elif t in ("datetime", "timestamp", "time"):
            s = f"{t}({self.fsp})" if self.fsp else t
        elif t in INT_TYPES or t in ("char", "varchar", "binary", "varbinary", "bit", "year"):
            s = f"{t}({self.length})" if self.length is not None else t
        else:
            s = t
        if self.unsigned:
            s += " unsigned"
        if self.zerofill:
            s += " zerofill"
        return s


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """A primary or secondary index."""

    name: str
    columns: tuple[str, ...]
    unique: bool = False
    primary: bool = False
    without_overlaps: bool = False
    """Unique over an application-time period ``WITHOUT OVERLAPS`` (MariaDB 10.5+; its columns end
    with the period's end and start): MariaDB refuses ``REPLACE`` on such a table."""


@dataclass(frozen=True, slots=True)
class TableInfo:
    """The shape of one table at one table version."""

    schema: str
    table: str
    columns: tuple[ColumnInfo, ...]
    indexes: tuple[IndexInfo, ...] = ()
    version: int = 0
    """The commit_ts of the DDL that produced this shape (0 when unknown)."""
    charset: str | None = None
    partitioned: bool = False
    _pos: dict[str, int] = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        self._pos.clear()
        for i, c in enumerate(self.columns):
            self._pos[c.name.lower()] = i

    @property
    def column_names(self) -> tuple[str, ...]:
        """Column names in table order."""
        return tuple(c.name for c in self.columns)

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary-key column names, () if the table has none."""
        for ix in self.indexes:
            if ix.primary:
                return ix.columns
        return ()

    @property
    def unique_keys(self) -> tuple[IndexInfo, ...]:
        """Unique indexes that are not the primary key."""
        return tuple(ix for ix in self.indexes if ix.unique and not ix.primary)

    @property
    def handle_key(self) -> tuple[str, ...]:
        """The PK, else the first unique key whose columns are all NOT NULL, else ()."""
        pk = self.primary_key
        if pk:
            return pk
        for ix in self.unique_keys:
            if all(not self.column(c).nullable for c in ix.columns):
                return ix.columns
        return ()

    @property
    def handle_key_index(self) -> tuple[int, ...]:
        """Positions of the handle-key columns."""
        return tuple(self.index_of(c) for c in self.handle_key)

    def index_of(self, name: str) -> int:
        """Position of a column (case-insensitive); KeyError if missing."""
        return self._pos[name.lower()]

    def column(self, name: str) -> ColumnInfo:
        """A column by name (case-insensitive)."""
        return self.columns[self.index_of(name)]

    def has_column(self, name: str) -> bool:
        """Whether the table has a column of that name (case-insensitive)."""
        return name.lower() in self._pos

    def with_version(self, version: int) -> TableInfo:
        """A copy at another table version."""
        return replace(self, version=version, _pos={})

    def renamed(self, schema: str, table: str) -> TableInfo:
        """A copy under another schema/table name."""
        return replace(self, schema=schema, table=table, _pos={})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for schema history and Spark partitions)."""
        d = asdict(self)
        d.pop("_pos", None)
        for i in d["indexes"]:
            if not i["without_overlaps"]:
                del i["without_overlaps"]  # as written before the flag existed
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableInfo:
        """Inverse of ``to_dict``."""
        cols = tuple(ColumnInfo(**{**c, "elements": tuple(c.get("elements", ()))}) for c in d["columns"])
        idx = tuple(
            IndexInfo(
                name=i["name"],
                columns=tuple(i["columns"]),
                unique=i["unique"],
                primary=i["primary"],
                without_overlaps=i.get("without_overlaps", False),
            )
            for i in d.get("indexes", ())
        )
        return cls(
            schema=d["schema"],
            table=d["table"],
            columns=cols,
            indexes=idx,
            version=d.get("version", 0),
            charset=d.get("charset"),
            partitioned=d.get("partitioned", False),
        )
