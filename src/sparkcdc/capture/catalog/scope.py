"""Which tables a DDL statement writes, so a failure in a table the changefeed leaves out is no failure.

A changefeed captures the tables its filter selects. A table outside it may have a type
sparkcdc cannot read or a DDL its parser does not know; that must not stop the changefeed.
``written_tables`` names the tables a statement creates, changes or removes; when each of them
is outside the filter, the catalog forgets them instead of failing (``SchemaCatalog.apply_ddl``).
A statement whose tables cannot be told (a database statement, an unparsable one naming no
table plainly) still fails: it may change a captured table.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sparkcdc.capture.ddl import (
    AlterTable,
    CreateIndex,
    CreateTable,
    DropIndex,
    DropTable,
    RenameTable,
    TableName,
    TruncateTable,
    ViewStmt,
)

TableMatch = Callable[[str, str], bool]
"""The changefeed's table filter: whether (schema, table) is captured."""


def written_tables(stmt: object, default_schema: str | None, query: str) -> list[tuple[str, str]] | None:
    """The (schema, table) a parsed statement writes; None when it writes no table or a database."""
    names: list[TableName] = []
    if isinstance(stmt, CreateTable | TruncateTable | AlterTable):
        names.append(stmt.name)
        if isinstance(stmt, AlterTable):
            names.extend(
                s.table
                for s in stmt.specs
                if s.action in ("rename_table", "partition") and s.table is not None
            )
    elif isinstance(stmt, DropTable | ViewStmt):
        names.extend(stmt.names)
    elif isinstance(stmt, RenameTable):
        for old, new in stmt.pairs:
            names += [old, new]
    elif isinstance(stmt, CreateIndex | DropIndex):
        names.append(stmt.table)
    elif isinstance(getattr(stmt, "name", None), TableName):
        names.append(stmt.name)  # type: ignore[attr-defined]  # another statement on one table
    if not names:
        return None
    return [n.resolve(default_schema, query) for n in names]


_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+)"
_TABLE_DDL = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*"
    r"(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE(?:\s+IF\s+NOT\s+EXISTS)?"
    r"|ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE(?:\s+IF\s+EXISTS)?"
    r"|TRUNCATE(?:\s+TABLE)?)"
    rf"\s+({_IDENT})(?:\s*\.\s*({_IDENT}))?(?=[\s(;]|$)",
    re.IGNORECASE | re.DOTALL,
)


def unquote_ident(ident: str) -> str:
    """A backquoted identifier's name (doubled backquotes undone); a bare one as it is."""
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def unparsed_table(query: str, default_schema: str | None) -> tuple[str, str] | None:
    """The one table a CREATE/ALTER/TRUNCATE TABLE the parser refused names, if it names it plainly."""
    m = _TABLE_DDL.match(query)
    if m is None:
        return None
    first, second = unquote_ident(m.group(1)), m.group(2)
    if second is not None:
        return first, unquote_ident(second)
    if default_schema is None:
        return None
    return default_schema, first


def outside(tables: list[tuple[str, str]] | None, captured: TableMatch | None) -> bool:
    """Whether every table is outside the filter (False with no filter or no tables)."""
    if captured is None or not tables:
        return False
    return not any(captured(s, t) for s, t in tables)
