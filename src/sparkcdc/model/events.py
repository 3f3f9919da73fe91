"""The events capture emits, in commit order: RowChange, DDLEvent, Resolved."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from sparkcdc.model.schema import TableInfo

Op = Literal["I", "U", "D"]
Row = tuple[Any, ...]
"""Column values in table order; see ColumnInfo for the Python type of each MySQL type."""


@dataclass(frozen=True, slots=True)
class BinlogPosition:
    """A place in the upstream binlog: a transaction boundary unless said otherwise."""

    file: str
    pos: int
    gtid: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row change: full before and after images.

    ``seq`` is the row's index inside its transaction, so ``(commit_ts, seq)``
    totally orders every event of a changefeed.
    """

    op: Op
    schema: str
    table: str
    table_version: int
    commit_ts: int
    before: Row | None
    after: Row | None
    seq: int = 0
    position: BinlogPosition | None = None

    @property
    def image(self) -> Row:
        """The new row for I/U, the old row for D."""
        img = self.after if self.op != "D" else self.before
        assert img is not None
        return img


class DDLType(StrEnum):
    """What a DDL did (the canal-json ``type`` is derived from it)."""

    CREATE_SCHEMA = "create schema"
    DROP_SCHEMA = "drop schema"
    ALTER_SCHEMA = "alter schema"
    CREATE_TABLE = "create table"
    DROP_TABLE = "drop table"
    TRUNCATE_TABLE = "truncate table"
    RENAME_TABLE = "rename table"
    ALTER_TABLE = "alter table"
    ADD_INDEX = "add index"
    DROP_INDEX = "drop index"
    CREATE_VIEW = "create view"
    DROP_VIEW = "drop view"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class DDLEvent:
    """A schema change; ``table_info`` is the table's new shape (None when dropped or schema-level)."""

    query: str
    schema: str
    table: str
    ddl_type: DDLType
    commit_ts: int
    table_version: int
    table_info: TableInfo | None = None
    old_schema: str | None = None
    old_table: str | None = None
    seq: int = 0
    position: BinlogPosition | None = None
    sql_mode: str | None = None
    """The upstream session's ``sql_mode`` for the statement (from its binlog event), when known:
    a MySQL downstream runs the DDL with it, as a replica does."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """Every change with commit_ts ≤ ``commit_ts`` has been emitted before this event."""

    commit_ts: int
    position: BinlogPosition | None = None


Event = RowChange | DDLEvent | Resolved
