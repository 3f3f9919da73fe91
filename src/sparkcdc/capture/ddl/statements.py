"""The statement objects the DDL parser produces (``CreateTable``, ``AlterTable`` ...)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sparkcdc.capture.ddl.lexer import clip_sql, quote_ident
from sparkcdc.errors import SchemaError


@dataclass(frozen=True, slots=True)
class TableName:
    """A possibly qualified table name."""

    schema: str | None
    name: str

    def resolve(self, default_schema: str | None, query: str) -> tuple[str, str]:
        """(schema, table) with the default database filled in."""
        schema = self.schema if self.schema is not None else default_schema
        if not schema:
            raise SchemaError(
                f"table {quote_ident(self.name)} is not qualified and the statement has no default "
                f"database: {clip_sql(query)!r}; qualify the name (db.table)"
            )
        return schema, self.name


@dataclass(slots=True)
class DefaultValue:
    """A column DEFAULT: ``kind`` null, literal (``text`` + ``lit`` kind) or expr (canonical text)."""

    kind: Literal["null", "literal", "expr"]
    text: str = ""
    lit: Literal["str", "num", "hex", "bin", "bool", ""] = ""


@dataclass(slots=True)
class ColumnDef:
    """A column definition as written."""

    name: str
    type_name: str
    args: list[str] = field(default_factory=list)
    byte_elements: list[bool] = field(default_factory=list)
    """Per ENUM/SET element: written as a 0x/X'' or b'' literal (``args`` holds its bytes, one code
    point per byte), not as a string; ``build_column`` reads both in the column's charset."""
    unsigned: bool = False
    zerofill: bool = False
    binary_collation: bool = False
    charset: str | None = None
    collation: str | None = None
    not_null: bool | None = None
    default: DefaultValue | None = None
    auto_increment: bool = False
    generated: bool = False
    comment: str = ""
    inline_primary: bool = False
    inline_unique: bool = False
    json_check: bool = False
    national: bool = False
    references: bool = False
    serial_default_value: bool = False
    string_literals: list[tuple[int, int, str]] = field(default_factory=list, compare=False, repr=False)
    """The column's ENUM/SET elements and DEFAULT written as plain strings (no charset introducer):
    start and end offsets in the statement, and the value. Their bytes in a binary column depend on
    the session's connection charset (``ddl.literals``)."""


@dataclass(slots=True)
class IndexDef:
    """An index definition: kind primary/unique/key/fulltext/spatial/foreign."""

    kind: Literal["primary", "unique", "key", "fulltext", "spatial", "foreign"]
    name: str | None
    parts: list[tuple[str, int | None]]
    using_hash: bool = False
    if_not_exists: bool = False
    functional: bool = False
    """Some key parts are expressions (MySQL 8 functional index): ``parts`` lists only the columns,
    and the index is no key of the rows' identity."""
    without_overlaps: bool = False
    """The last key part is an application-time period ``WITHOUT OVERLAPS``, which ``period`` names."""
    period: str | None = None
    """The period of ``WITHOUT OVERLAPS`` (not in ``parts``): the catalog, which keeps each table's
    periods, appends its end and start columns to the key's."""


@dataclass(slots=True)
class PeriodDef:
    """``PERIOD FOR name (start, end)``: an application-time period (MariaDB 10.5+)."""

    name: str
    start: str
    end: str


@dataclass(slots=True)
class TableOptions:
    """The table options the tracker cares about."""

    charset: str | None = None
    collation: str | None = None
    partitioned: bool | None = None
    """True for PARTITION BY, False for REMOVE PARTITIONING, None when untouched."""
    as_select: bool = False


@dataclass(slots=True)
class CreateTable:
    """CREATE [OR REPLACE] TABLE."""

    name: TableName
    columns: list[ColumnDef]
    items: list[ColumnDef | IndexDef]
    """Columns and index definitions in statement order (for index naming)."""
    options: TableOptions
    if_not_exists: bool = False
    or_replace: bool = False
    like: TableName | None = None
    periods: list[PeriodDef] = field(default_factory=list)
    """Its application-time periods (a ``WITHOUT OVERLAPS`` key names one)."""


@dataclass(slots=True)
class CreateDatabase:
    """CREATE DATABASE|SCHEMA."""

    name: str
    if_not_exists: bool
    or_replace: bool
    charset: str | None
    collation: str | None


@dataclass(slots=True)
class AlterDatabase:
    """ALTER DATABASE|SCHEMA."""

    name: str | None
    charset: str | None
    collation: str | None


@dataclass(slots=True)
class DropDatabase:
    """DROP DATABASE|SCHEMA."""

    name: str
    if_exists: bool


@dataclass(slots=True)
class DropTable:
    """DROP TABLE a, b."""

    names: list[TableName]
    if_exists: bool


@dataclass(slots=True)
class TruncateTable:
    """TRUNCATE [TABLE] t."""

    name: TableName


@dataclass(slots=True)
class RenameTable:
    """RENAME TABLE a TO b, c TO d."""

    pairs: list[tuple[TableName, TableName]]
    if_exists: bool = False


@dataclass(slots=True)
class AlterSpec:
    """One comma-separated ALTER TABLE specification."""

    action: str
    """add_column, drop_column, modify_column, change_column, rename_column, set_default,
    drop_default, add_index, drop_index, drop_primary, rename_index, rename_table, convert,
    options, partition, drop_foreign_key, drop_constraint, add_period, drop_period, noop,
    system_versioning (the parser turns an ALTER TABLE with it into ``UnsupportedTable``)."""
    column: ColumnDef | None = None
    columns: list[ColumnDef] = field(default_factory=list)
    index: IndexDef | None = None
    indexes: list[IndexDef] = field(default_factory=list)
    name: str | None = None
    new_name: str | None = None
    position: tuple[str, str | None] | None = None
    """("first", None) or ("after", column) for ADD/MODIFY/CHANGE."""
    if_exists: bool = False
    default: DefaultValue | None = None
    table: TableName | None = None
    options: TableOptions | None = None
    period: PeriodDef | None = None
    """ADD PERIOD's period (DROP PERIOD names it in ``name``)."""


@dataclass(slots=True)
class AlterTable:
    """ALTER TABLE t spec, spec, ..."""

    name: TableName
    specs: list[AlterSpec]
    if_exists: bool = False


@dataclass(slots=True)
class CreateIndex:
    """CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX name ON t (...)."""

    table: TableName
    index: IndexDef


@dataclass(slots=True)
class DropIndex:
    """DROP INDEX name ON t."""

    table: TableName
    name: str
    if_exists: bool


@dataclass(slots=True)
class ViewStmt:
    """CREATE/ALTER/DROP VIEW (no table shape)."""

    action: Literal["create", "alter", "drop"]
    names: list[TableName]


@dataclass(slots=True)
class UnsupportedTable:
    """A statement that makes (or changes) a table whose rows sparkcdc does not deliver yet.

    ``CREATE SEQUENCE``, ``CREATE TABLE ... SEQUENCE=1``, ``CREATE TABLE ... WITH SYSTEM
    VERSIONING`` (or a column ``WITH SYSTEM VERSIONING``), and ``ALTER TABLE`` adding or dropping
    system versioning or the SYSTEM_TIME period.
    """

    name: TableName
    kind: Literal["sequence", "system-versioned table"]


@dataclass(slots=True)
class Ignored:
    """A statement that does not change any table shape (DML, transaction control, grants ...)."""

    reason: str


Statement = (
    CreateTable
    | CreateDatabase
    | AlterDatabase
    | DropDatabase
    | DropTable
    | TruncateTable
    | RenameTable
    | AlterTable
    | CreateIndex
    | DropIndex
    | ViewStmt
    | UnsupportedTable
    | Ignored
)
