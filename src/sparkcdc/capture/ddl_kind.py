"""The TiCDC event kinds of a DDL (what ``[[filter.event-filters]] ignore-event`` matches).

TiDB names a DDL by its job type (``tiflow:pkg/filter/filter.go`` ``ddlWhiteListMap``);
a MariaDB statement is named here by what it does: ``ALTER TABLE t ADD COLUMN c``
is ``add column``, ``CREATE INDEX`` is ``create index``, an ALTER TABLE with
several specifications is ``multi schema change``. Every ALTER TABLE sub-kind
(and RENAME TABLE and CREATE/DROP INDEX, as TiDB's ``alterTableSubType``) also
counts as ``alter table``. A statement TiCDC has no kind for gets none: only
``all ddl`` and ``ignore-sql`` match it.
"""

from __future__ import annotations

import re

from sparkcdc.capture import ddl as D
from sparkcdc.errors import SchemaError
from sparkcdc.model import DDLEvent, DDLType

ALTER_TABLE = "alter table"

_BY_TYPE: dict[DDLType, tuple[str, ...]] = {
    DDLType.CREATE_SCHEMA: ("create schema",),
    DDLType.DROP_SCHEMA: ("drop schema",),
    DDLType.ALTER_SCHEMA: ("modify schema charset and collate",),
    DDLType.CREATE_TABLE: ("create table",),
    DDLType.DROP_TABLE: ("drop table",),
    DDLType.TRUNCATE_TABLE: ("truncate table",),
    DDLType.CREATE_VIEW: ("create view",),
    DDLType.DROP_VIEW: ("drop view",),
    DDLType.OTHER: (),
}
"""Kinds that follow from the DDLType alone."""

_SPEC_KINDS: dict[str, str] = {
    "add_column": "add column",
    "drop_column": "drop column",
    "modify_column": "modify column",
    "change_column": "modify column",
    "rename_column": "modify column",
    "set_default": "set default value",
    "drop_default": "set default value",
    "drop_index": "drop index",
    "drop_primary": "drop primary key",
    "rename_index": "rename index",
    "rename_table": "rename table",
    "convert": "modify table charset and collate",
}
"""One ALTER TABLE specification → its kind (TiDB's job type for it)."""

_PARTITION_OPS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(rf"\b{op}\s+PARTITION\b", re.I), kind)
    for op, kind in (
        ("ADD", "add table partition"),
        ("DROP", "drop table partition"),
        ("TRUNCATE", "truncate table partition"),
        ("EXCHANGE", "exchange table partition"),
        ("REORGANIZE", "reorganize table partition"),
    )
)
_NOT_COUNTED = frozenset({"algorithm"})
"""ALGORITHM=/LOCK= clauses do not make an ALTER TABLE a multi schema change."""


def ddl_event_kinds(ev: DDLEvent) -> tuple[str, ...]:
    """The event kinds of one DDL event (may be empty)."""
    by_type = _BY_TYPE.get(ev.ddl_type)
    if by_type is not None:
        return by_type
    try:
        stmt = D.parse_statement(ev.query)
    except SchemaError:
        stmt = None
    if isinstance(stmt, D.RenameTable):
        return ("rename table", ALTER_TABLE)
    if isinstance(stmt, D.CreateIndex):
        return ("add primary key" if stmt.index.kind == "primary" else "create index", ALTER_TABLE)
    if isinstance(stmt, D.DropIndex):
        return ("drop index", ALTER_TABLE)
    if isinstance(stmt, D.AlterTable):
        return (*_alter_kinds(stmt, ev.query), ALTER_TABLE)
    # the catalog classified the statement, the parser could not read it again: the type decides
    fallback = {
        DDLType.RENAME_TABLE: "rename table",
        DDLType.ADD_INDEX: "create index",
        DDLType.DROP_INDEX: "drop index",
    }.get(ev.ddl_type)
    return (fallback, ALTER_TABLE) if fallback else (ALTER_TABLE,)


def _alter_kinds(stmt: D.AlterTable, query: str) -> tuple[str, ...]:
    specs = [s for s in stmt.specs if s.action not in _NOT_COUNTED]
    if len(specs) > 1:
        return ("multi schema change",)
    if not specs:
        return ()
    spec = specs[0]
    a = spec.action
    if a in _SPEC_KINDS:
        return (_SPEC_KINDS[a],)
    if a == "add_index" and spec.index is not None:
        kind = spec.index.kind
        if kind == "primary":
            return ("add primary key",)
        return () if kind == "foreign" else ("create index",)
    if a == "partition":
        return tuple(kind for pattern, kind in _PARTITION_OPS if pattern.search(query))[:1]
    if a == "options" and spec.options is not None:
        o = spec.options
        if o.partitioned is True:
            return ("alter table partitioning",)
        if o.partitioned is False:
            return ("remove table partitioning",)
        if o.charset is not None or o.collation is not None:
            return ("modify table charset and collate",)
        if re.search(r"\bCOMMENT\b", query, re.I):
            return ("modify table comment",)
        if re.search(r"\bAUTO_INCREMENT\b", query, re.I):
            return ("rebase auto id",)
    return ()


__all__ = ["ddl_event_kinds"]
