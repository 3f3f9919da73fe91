"""Table and database schema files: TiCDC's ``TableDefinition`` body, checksum and inverse.

The body is Go's ``json.MarshalIndent(def, "", "    ")``; the checksum in the
file name is crc32 of the same marshalling with ``Version`` 0, without
``TableVersion``/``Query``/``Type`` and with the columns sorted by name (spec §3).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

from sparkcdc.errors import DecodeError
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, TableInfo
from sparkcdc.model.schema import DEFAULT_FLEN, DEFAULT_UNSIGNED_FLEN
from sparkcdc.sink.storage.layout import schema_file_path

TABLE_DEFINITION_VERSION = 1

# TiDB's model.ActionType values for the DDLs sparkcdc emits.
ACTION_CREATE_SCHEMA = 1
ACTION_DROP_SCHEMA = 2
ACTION_CREATE_TABLE = 3
ACTION_DROP_TABLE = 4
ACTION_ADD_COLUMN = 5
ACTION_DROP_COLUMN = 6
ACTION_ADD_INDEX = 7
ACTION_DROP_INDEX = 8
ACTION_ADD_FOREIGN_KEY = 9
ACTION_DROP_FOREIGN_KEY = 10
ACTION_TRUNCATE_TABLE = 11
ACTION_MODIFY_COLUMN = 12
ACTION_RENAME_TABLE = 14
ACTION_SET_DEFAULT_VALUE = 15
ACTION_MODIFY_TABLE_COMMENT = 17
ACTION_RENAME_INDEX = 18
ACTION_ADD_TABLE_PARTITION = 19
ACTION_DROP_TABLE_PARTITION = 20
ACTION_CREATE_VIEW = 21
ACTION_MODIFY_TABLE_CHARSET_AND_COLLATE = 22
ACTION_TRUNCATE_TABLE_PARTITION = 23
ACTION_DROP_VIEW = 24
ACTION_MODIFY_SCHEMA_CHARSET_AND_COLLATE = 26
ACTION_ADD_PRIMARY_KEY = 32
ACTION_DROP_PRIMARY_KEY = 33
ACTION_RENAME_TABLES = 47
ACTION_MULTI_SCHEMA_CHANGE = 61

_SIMPLE_ACTIONS = {
    DDLType.CREATE_SCHEMA: ACTION_CREATE_SCHEMA,
    DDLType.DROP_SCHEMA: ACTION_DROP_SCHEMA,
    DDLType.ALTER_SCHEMA: ACTION_MODIFY_SCHEMA_CHARSET_AND_COLLATE,
    DDLType.CREATE_TABLE: ACTION_CREATE_TABLE,
    DDLType.DROP_TABLE: ACTION_DROP_TABLE,
    DDLType.TRUNCATE_TABLE: ACTION_TRUNCATE_TABLE,
    DDLType.RENAME_TABLE: ACTION_RENAME_TABLE,
    DDLType.CREATE_VIEW: ACTION_CREATE_VIEW,
    DDLType.DROP_VIEW: ACTION_DROP_VIEW,
    DDLType.OTHER: 0,
}

_FLEN_TYPES = frozenset(
    {
        "tinyint", "smallint", "mediumint", "int", "bigint", "bit", "char", "varchar", "binary",
        "varbinary", "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob",
        "longblob", "year",
    }
)  # fmt: skip
_TIME_TYPES = frozenset({"datetime", "timestamp", "time"})


def go_json(obj: Any, indent: bool = True) -> bytes:
    """``json.MarshalIndent(obj, "", "    ")`` (or ``json.Marshal``) as Go's encoding/json writes it."""
    if indent:
        text = json.dumps(obj, ensure_ascii=False, indent=4, separators=(",", ": "))
    else:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    # Go escapes HTML-sensitive characters and the JS line separators; they only occur inside strings.
    text = (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return text.encode("utf-8")


def ddl_action_type(ddl: DDLEvent) -> int:
    """TiDB's ActionType number for a DDL (ALTER TABLE is refined from its query)."""
    if ddl.ddl_type in _SIMPLE_ACTIONS:
        if ddl.ddl_type == DDLType.RENAME_TABLE and "," in ddl.query:
            return ACTION_RENAME_TABLES
        return _SIMPLE_ACTIONS[ddl.ddl_type]
    if ddl.ddl_type == DDLType.ADD_INDEX:
        q = ddl.query.upper()
        if "PRIMARY KEY" in q:
            return ACTION_ADD_PRIMARY_KEY
        if "FOREIGN KEY" in q:
            return ACTION_ADD_FOREIGN_KEY
        return ACTION_ADD_INDEX
    if ddl.ddl_type == DDLType.DROP_INDEX:
        q = ddl.query.upper()
        if "PRIMARY KEY" in q:
            return ACTION_DROP_PRIMARY_KEY
        if "FOREIGN KEY" in q:
            return ACTION_DROP_FOREIGN_KEY
        return ACTION_DROP_INDEX
    return _alter_action(ddl.query)


_ALTER_CLAUSES: list[tuple[re.Pattern[str], int]] = [
    (re.compile(r"^ADD\s+(?:COLUMN\b|(?!INDEX|KEY|UNIQUE|PRIMARY|FULLTEXT|SPATIAL|CONSTRAINT|FOREIGN|PARTITION|CHECK))"), ACTION_ADD_COLUMN),
    (re.compile(r"^ADD\s+PARTITION\b"), ACTION_ADD_TABLE_PARTITION),
    (re.compile(r"^ADD\s+(?:CONSTRAINT\s+\S+\s+)?PRIMARY\s+KEY\b"), ACTION_ADD_PRIMARY_KEY),
    (re.compile(r"^ADD\s+(?:CONSTRAINT\s+\S+\s+)?FOREIGN\s+KEY\b"), ACTION_ADD_FOREIGN_KEY),
    (re.compile(r"^ADD\b"), ACTION_ADD_INDEX),
    (re.compile(r"^DROP\s+PRIMARY\s+KEY\b"), ACTION_DROP_PRIMARY_KEY),
    (re.compile(r"^DROP\s+FOREIGN\s+KEY\b"), ACTION_DROP_FOREIGN_KEY),
    (re.compile(r"^DROP\s+(?:INDEX|KEY)\b"), ACTION_DROP_INDEX),
    (re.compile(r"^DROP\s+PARTITION\b"), ACTION_DROP_TABLE_PARTITION),
    (re.compile(r"^DROP\b"), ACTION_DROP_COLUMN),
    (re.compile(r"^(?:MODIFY|CHANGE)\b"), ACTION_MODIFY_COLUMN),
    (re.compile(r"^RENAME\s+(?:INDEX|KEY)\b"), ACTION_RENAME_INDEX),
    (re.compile(r"^RENAME\s+COLUMN\b"), ACTION_MODIFY_COLUMN),
    (re.compile(r"^RENAME\b"), ACTION_RENAME_TABLE),
    (re.compile(r"^ALTER\s+(?:COLUMN\s+)?\S+\s+(?:SET|DROP)\s+DEFAULT\b"), ACTION_SET_DEFAULT_VALUE),
    (re.compile(r"^COMMENT\b"), ACTION_MODIFY_TABLE_COMMENT),
    (re.compile(r"^(?:CONVERT\s+TO\b|(?:DEFAULT\s+)?(?:CHARACTER\s+SET|CHARSET|COLLATE)\b)"), ACTION_MODIFY_TABLE_CHARSET_AND_COLLATE),
    (re.compile(r"^TRUNCATE\s+PARTITION\b"), ACTION_TRUNCATE_TABLE_PARTITION),
]  # fmt: skip
_ALTER_HEAD = re.compile(r"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:`(?:[^`]|``)*`|[^\s.]+)(?:\.(?:`(?:[^`]|``)*`|\S+))?\s*(.*)$", re.S | re.I)  # fmt: skip


def _split_clauses(body: str) -> list[str]:
    out: list[str] = []
    depth = 0
    quote = ""
    start = 0
    for i, ch in enumerate(body):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(body[start:i])
            start = i + 1
    out.append(body[start:])
    return [c.strip() for c in out if c.strip()]


def _alter_action(query: str) -> int:
    m = _ALTER_HEAD.match(query)
    if not m:
        return ACTION_MULTI_SCHEMA_CHANGE if "," in query else ACTION_MODIFY_COLUMN
    clauses = _split_clauses(m.group(1))
    if len(clauses) != 1:
        return ACTION_MULTI_SCHEMA_CHANGE
    clause = clauses[0].upper()
    for pattern, action in _ALTER_CLAUSES:
        if pattern.match(clause):
            return action
    return ACTION_MODIFY_COLUMN


@dataclass
class TableCol:
    """One column of a table definition (TiCDC ``TableCol``); '' means omitted."""

    name: str
    type: str
    default: str | None = None
    precision: str = ""
    scale: str = ""
    nullable: str = ""
    is_pk: str = ""
    id: str = ""

    def to_json(self) -> dict[str, Any]:
        """The column as an ordered dict with TiCDC's keys (omitempty applied)."""
        d: dict[str, Any] = {}
        if self.id:
            d["ColumnId"] = self.id
        d["ColumnName"] = self.name
        d["ColumnType"] = self.type
        if self.default is not None:
            d["ColumnDefault"] = self.default
        if self.precision:
            d["ColumnPrecision"] = self.precision
        if self.scale:
            d["ColumnScale"] = self.scale
        if self.nullable:
            d["ColumnNullable"] = self.nullable
        if self.is_pk:
            d["ColumnIsPk"] = self.is_pk
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableCol:
        """Inverse of ``to_json``."""
        default = d.get("ColumnDefault")
        return cls(
            name=str(d["ColumnName"]),
            type=str(d["ColumnType"]),
            default=None if default is None else str(default),
            precision=str(d.get("ColumnPrecision", "")),
            scale=str(d.get("ColumnScale", "")),
            nullable=str(d.get("ColumnNullable", "")),
            is_pk=str(d.get("ColumnIsPk", "")),
            id=str(d.get("ColumnId", "")),
        )

    @classmethod
    def from_column(cls, col: ColumnInfo, is_pk: bool, column_id: int | None = None) -> TableCol:
        """TiCDC's ``FromTiColumnInfo`` over sparkcdc's ColumnInfo."""
        t = col.type
        tc = cls(name=col.name, type=t.upper() + (" UNSIGNED" if col.unsigned else ""))
        if column_id is not None:
            tc.id = str(column_id)
        if is_pk:
            tc.is_pk = "true"
        if not col.nullable or is_pk:
            tc.nullable = "false"
        tc.default = col.default
        if tc.default is not None and col.holds_bytes:
            # bytes, one code point per byte: TiCDC prints a default's bytes as a Go string
            tc.default = tc.default.encode("latin-1").decode("utf-8", "replace")
        if t in _TIME_TYPES:
            if col.fsp:
                tc.scale = str(col.fsp)
        elif t in ("float", "double"):
            tc.precision = str(col.precision if col.precision is not None else DEFAULT_FLEN[t])
            if col.scale not in (None, 0, -1):
                tc.scale = str(col.scale)
        elif t == "decimal":
            tc.precision = str(col.precision if col.precision is not None else 10)
            tc.scale = str(col.scale if col.scale is not None else 0)
        elif t in _FLEN_TYPES:
            if col.length is not None:
                flen = col.length
            elif col.unsigned and t in DEFAULT_UNSIGNED_FLEN:
                flen = DEFAULT_UNSIGNED_FLEN[t]
            else:
                flen = DEFAULT_FLEN[t]
            tc.precision = str(flen)
        return tc

    def to_column(self) -> ColumnInfo:
        """The ColumnInfo this definition describes (as far as the file tells)."""
        tp = self.type.upper()
        unsigned = tp.endswith(" UNSIGNED")
        t = tp.removesuffix(" UNSIGNED").lower()
        length = precision = scale = None
        fsp = 0
        if t in _TIME_TYPES:
            fsp = int(self.scale) if self.scale else 0
        elif t in ("float", "double", "decimal"):
            precision = int(self.precision) if self.precision else None
            scale = int(self.scale) if self.scale else None
        elif t in _FLEN_TYPES and self.precision:
            length = int(self.precision)
        return ColumnInfo(
            name=self.name,
            type=t,
            unsigned=unsigned,
            length=length,
            precision=precision,
            scale=scale,
            fsp=fsp,
            nullable=self.nullable != "false",
            default=self.default,
            has_default=self.default is not None,
            charset=None
            if t in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
            else "utf8mb4",
        )


@dataclass
class TableDefinition:
    """TiCDC's ``TableDefinition``: the body of a schema file."""

    schema: str
    table: str = ""
    table_version: int = 0
    query: str = ""
    type: int = 0
    columns: list[TableCol] | None = None
    total_columns: int = 0
    version: int = TABLE_DEFINITION_VERSION

    @classmethod
    def from_table_info(
        cls, info: TableInfo, table_version: int, output_column_id: bool = False
    ) -> TableDefinition:
        """A table's definition at a version (Query empty, Type 0)."""
        pk = {c.lower() for c in info.primary_key}
        cols = [
            TableCol.from_column(c, c.name.lower() in pk, i + 1 if output_column_id else None)
            for i, c in enumerate(info.columns)
        ]
        return cls(
            schema=info.schema,
            table=info.table,
            table_version=table_version,
            columns=cols or None,
            total_columns=len(cols),
        )

    @classmethod
    def from_ddl(
        cls, ddl: DDLEvent, table_info: TableInfo | None, output_column_id: bool = False
    ) -> TableDefinition:
        """The schema file of a DDL; ``table_info`` None writes a database-level (or column-less) file."""
        if table_info is not None:
            d = cls.from_table_info(
                table_info.renamed(ddl.schema, ddl.table), ddl.table_version, output_column_id
            )
        else:
            d = cls(schema=ddl.schema, table=ddl.table, table_version=ddl.table_version)
        d.query = ddl.query
        d.type = ddl_action_type(ddl)
        return d

    @property
    def is_table_schema(self) -> bool:
        """True when the file describes a table (it has columns)."""
        return self.total_columns != 0

    def to_json(self) -> dict[str, Any]:
        """The body as an ordered dict with TiCDC's keys."""
        return {
            "Table": self.table,
            "Schema": self.schema,
            "Version": self.version,
            "TableVersion": self.table_version,
            "Query": self.query,
            "Type": self.type,
            "TableColumns": None if self.columns is None else [c.to_json() for c in self.columns],
            "TableColumnsTotal": self.total_columns,
        }

    def marshal(self) -> bytes:
        """The schema file body (Go MarshalIndent with 4 spaces)."""
        return go_json(self.to_json())

    def checksum(self) -> int:
        """crc32 of the Version-0, query-less marshalling with columns sorted by name."""
        cols = sorted(self.columns or [], key=lambda c: c.name.encode("utf-8"))
        body = {
            "Table": self.table,
            "Schema": self.schema,
            "Version": 0,
            "TableColumns": [c.to_json() for c in cols],
            "TableColumnsTotal": self.total_columns,
        }
        return zlib.crc32(go_json(body))

    def path(self) -> str:
        """``{schema}[/{table}]/meta/schema_{TableVersion}_{checksum:010d}.json``."""
        return schema_file_path(self.schema, self.table, self.table_version, self.checksum())

    @classmethod
    def parse(cls, data: bytes, source: str = "schema file") -> TableDefinition:
        """Read a schema file body."""
        try:
            obj = json.loads(data)
            cols_raw = obj.get("TableColumns")
            cols = None if cols_raw is None else [TableCol.from_json(c) for c in cols_raw]
            return cls(
                schema=str(obj["Schema"]),
                table=str(obj.get("Table", "")),
                table_version=int(obj.get("TableVersion", 0)),
                query=str(obj.get("Query", "")),
                type=int(obj.get("Type", 0)),
                columns=cols,
                total_columns=int(obj.get("TableColumnsTotal", 0)),
                version=int(obj.get("Version", TABLE_DEFINITION_VERSION)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DecodeError(f"invalid {source}: {exc}") from exc

    def to_table_info(self) -> TableInfo:
        """The TableInfo this definition describes (PK from ColumnIsPk; no other indexes)."""
        cols = tuple(c.to_column() for c in self.columns or [])
        pk = tuple(c.name for c in self.columns or [] if c.is_pk == "true")
        indexes = (IndexInfo(name="PRIMARY", columns=pk, unique=True, primary=True),) if pk else ()
        return TableInfo(
            schema=self.schema, table=self.table, columns=cols, indexes=indexes, version=self.table_version
        )
