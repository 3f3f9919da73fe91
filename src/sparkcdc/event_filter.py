"""TiCDC's event filter: ``[[filter.event-filters]]`` rules that drop row changes and DDLs.

A rule has a ``matcher`` (table-filter rules, ``sparkcdc.filter``), ``ignore-event``
(event kinds) and ``ignore-sql`` (regular expressions). An event of a table some
rule's matcher selects is dropped when that rule names the event's kind, or, for a
DDL, when one of the rule's expressions occurs in the statement (searched, not
anchored, case-insensitive, Go RE2 syntax: TiCDC joins them as ``(?i)a|b``).
Rules are independent: any matching rule that says "ignore" drops the event
(``tiflow:pkg/filter/sql_event_filter.go``, ``pkg/binlog-filter/filter.go``).

Event kinds (``ignore-event``) are TiCDC's names: ``all dml``, ``all ddl``,
``insert``, ``update``, ``delete`` and the DDL kinds of ``DDL_KINDS``.
``alter table`` also covers every ALTER TABLE sub-kind (``add column``, ``create
index`` ...), as in TiCDC. ``all`` is every event (the binlog filter's meaning;
TiCDC's own check refuses it). What kind a DDL statement is comes from the
capture (``sparkcdc.capture.ddl_kind``); this module only matches.

Differences from TiCDC, on purpose: the matcher follows the changefeed's
``case-sensitive`` (TiCDC's event-filter matchers are always case-sensitive), a
rename is matched by its old and its new name, and ``ignore-sql`` and ``all
ddl`` apply to every DDL, also the few kinds TiCDC does not classify.

A filtered DDL still changes the tracked schema (the planner applies it to the
schema history before it filters), so later rows of the table decode with the
new shape; it is only not sent to the sink.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkcdc.errors import FilterRuleError
from sparkcdc.filter import TableFilter, compile_re2

ALL_DML = "all dml"
ALL_DDL = "all ddl"
ALTER_TABLE = "alter table"

DML_KINDS: dict[str, str] = {"I": "insert", "U": "update", "D": "delete"}
"""Row op → its event kind."""

DDL_KINDS: tuple[str, ...] = (
    "create schema",
    "drop schema",
    "modify schema charset and collate",
    "create table",
    "drop table",
    "truncate table",
    "rename table",
    "recover table",
    "modify table comment",
    "modify table charset and collate",
    "create view",
    "drop view",
    "add table partition",
    "drop table partition",
    "truncate table partition",
    "exchange table partition",
    "reorganize table partition",
    "alter table partitioning",
    "remove table partitioning",
    "add column",
    "drop column",
    "modify column",
    "set default value",
    "rebase auto id",
    "add primary key",
    "drop primary key",
    "create index",
    "drop index",
    "rename index",
    "alter index visibility",
    "alter ttl info",
    "alter ttl remove",
    "multi schema change",
    ALTER_TABLE,
)
"""TiCDC's DDL event kinds (``pkg/filter`` ``SupportedEventTypes``); some never occur in MariaDB."""

ALIASES: dict[str, str] = {"create database": "create schema", "drop database": "drop schema"}
"""Other names TiCDC accepts for a kind."""

EVENT_KINDS: tuple[str, ...] = (ALL_DML, ALL_DDL, *DML_KINDS.values(), *DDL_KINDS, *ALIASES)
"""Every value ``ignore-event`` accepts."""


@dataclass(frozen=True)
class EventRule:
    """One compiled ``[[filter.event-filters]]`` rule."""

    matcher: TableFilter
    events: frozenset[str]
    """Event kinds to drop, aliases resolved."""
    sql: tuple[re.Pattern[str], ...]
    """Expressions searched in a DDL statement."""

    def ignores_op(self, op: str) -> bool:
        """Whether this rule drops row changes of ``op`` (``I``/``U``/``D``)."""
        ev = self.events
        return ALL_DML in ev or DML_KINDS.get(op, "") in ev

    def ignores_ddl(self, kinds: Iterable[str], query: str) -> bool:
        """Whether this rule drops a DDL of these kinds with this statement text."""
        ev = self.events
        if ALL_DDL in ev or any(k in ev for k in kinds):
            return True
        return any(p.search(query) for p in self.sql)

    @property
    def drops_ddl(self) -> bool:
        """Whether this rule can drop any DDL at all."""
        return bool(self.sql) or any(e not in DML_KINDS.values() and e != ALL_DML for e in self.events)


def compile_rule(
    matcher: Sequence[str],
    ignore_event: Sequence[str],
    ignore_sql: Sequence[str],
    *,
    case_sensitive: bool = False,
    where: str = "filter.event-filters[0]",
) -> EventRule:
    """Check and compile one rule; FilterRuleError names the key, the value and what is allowed."""
    try:
        table_filter = TableFilter(list(matcher), case_sensitive)
    except FilterRuleError as exc:
        raise FilterRuleError(f"{where}.matcher: {exc.message}") from None
    if not any(r.strip(" \t") and not r.strip(" \t").startswith("#") for r in matcher):
        raise FilterRuleError(
            f"{where}.matcher is empty: the rule would apply to no table; "
            'name the tables it applies to, e.g. matcher = ["db.*"]'
        )
    events: set[str] = set()
    for i, kind in enumerate(ignore_event):
        if kind not in EVENT_KINDS:
            raise FilterRuleError(
                f"invalid value {kind!r} for '{where}.ignore-event[{i}]'; allowed: {', '.join(EVENT_KINDS)}"
            )
        events.add(ALIASES.get(kind, kind))
    patterns: list[re.Pattern[str]] = []
    for i, source in enumerate(ignore_sql):
        try:
            patterns.append(compile_re2(source, ignore_case=True))
        except ValueError as exc:
            reason = str(exc).removeprefix("invalid pattern: ")
            raise FilterRuleError(
                f"invalid regular expression {source!r} for '{where}.ignore-sql[{i}]': {reason}; "
                "ignore-sql takes Go RE2 expressions, searched in the DDL statement"
            ) from None
    if not events and not patterns:
        raise FilterRuleError(
            f'{where} ignores nothing: set ignore-event (e.g. ["delete"]) or ignore-sql (e.g. '
            '["^DROP"]), or remove the rule'
        )
    return EventRule(table_filter, frozenset(events), tuple(patterns))


def rule_specs(rules: Iterable[Any]) -> list[dict[str, list[str]]]:
    """JSON-able specs of config rules (objects with ``matcher``, ``ignore_event``, ``ignore_sql``)."""
    return [
        {"matcher": list(r.matcher), "ignore-event": list(r.ignore_event), "ignore-sql": list(r.ignore_sql)}
        for r in rules
    ]


class EventFilter:
    """A changefeed's event filter: which row changes and DDLs never reach the sink.

    Built from ``rule_specs`` (it travels inside Spark task specs as JSON); lookups
    per table are cached, so a row event costs one dict lookup.
    """

    def __init__(self, specs: Sequence[Mapping[str, Any]] = (), case_sensitive: bool = False) -> None:
        self.specs = [dict(s) for s in specs]
        self.case_sensitive = case_sensitive
        self.rules: tuple[EventRule, ...] = tuple(
            compile_rule(
                s.get("matcher", ()),
                s.get("ignore-event", ()),
                s.get("ignore-sql", ()),
                case_sensitive=case_sensitive,
                where=f"filter.event-filters[{i}]",
            )
            for i, s in enumerate(self.specs)
        )
        self._row_ops: dict[tuple[str, str], frozenset[str]] = {}

    def __bool__(self) -> bool:
        return bool(self.rules)

    def ignored_ops(self, schema: str, table: str) -> frozenset[str]:
        """The row ops (``I``/``U``/``D``) dropped for ``schema.table``."""
        key = (schema, table)
        hit = self._row_ops.get(key)
        if hit is None:
            rules = [r for r in self.rules if r.matcher.match(schema, table)]
            hit = frozenset(op for op in DML_KINDS if any(r.ignores_op(op) for r in rules))
            self._row_ops[key] = hit
        return hit

    def ignore_row(self, schema: str, table: str, op: str) -> bool:
        """Whether a row change of ``op`` on ``schema.table`` is dropped."""
        return op in self.ignored_ops(schema, table)

    def ignore_ddl(
        self,
        schema: str,
        table: str,
        kinds: Iterable[str],
        query: str,
        old: tuple[str, str] | None = None,
    ) -> bool:
        """Whether a DDL is dropped: ``table`` empty for a schema-level DDL, ``old`` the renamed table."""
        kinds = tuple(kinds)
        for rule in self.rules:
            if table:
                hit = rule.matcher.match(schema, table) or (old is not None and rule.matcher.match(*old))
            else:
                hit = rule.matcher.match_schema(schema)
            if hit and rule.ignores_ddl(kinds, query):
                return True
        return False

    @property
    def drops_ddl(self) -> bool:
        """Whether some rule can drop a DDL (else DDLs need no classification)."""
        return any(r.drops_ddl for r in self.rules)

    def __getstate__(self) -> dict[str, Any]:
        return {"specs": self.specs, "case_sensitive": self.case_sensitive}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["specs"], state["case_sensitive"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"EventFilter({self.specs!r}, case_sensitive={self.case_sensitive})"


__all__ = [
    "DDL_KINDS",
    "DML_KINDS",
    "EVENT_KINDS",
    "EventFilter",
    "EventRule",
    "compile_rule",
    "rule_specs",
]
