"""A ``[[sink.dispatchers]]`` rule and its one parse: matcher, topic expression, partition rule.

``ReplicaConfig`` refuses a bad rule when it loads, and the dispatchers in
``sparkcdc.dispatch`` are built from the same parse, so the rules live here, in
the config layer, and loading a config needs no dispatcher. What the rules mean
at run time (topic names, partition hashes) is in ``sparkcdc.dispatch.topic``
and ``sparkcdc.dispatch.partition``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.errors import ConfigError, FilterRuleError
from sparkcdc.filter import TableFilter


@dataclass
class DispatchRule:
    """One ``[[sink.dispatchers]]`` rule."""

    matcher: list[str] = field(default_factory=list)
    topic: str = ""
    partition: str = ""
    dispatcher: str = ""
    index: str = ""
    columns: list[str] = field(default_factory=list)


# --- topic expressions -------------------------------------------------------

AVRO_PROTOCOLS = frozenset({"avro", "flat-avro"})

_EXPRESSION = re.compile(r"[A-Za-z0-9._\-]*(\{schema\})?([A-Za-z0-9._\-]*\{table\})?[A-Za-z0-9._\-]*")
_AVRO_EXPRESSION = re.compile(r"[A-Za-z0-9._\-]*\{schema\}[A-Za-z0-9._\-]*\{table\}[A-Za-z0-9._\-]*")


def validate_topic_expression(expression: str, protocol: str | None = None) -> None:
    """Raise ConfigError unless ``expression`` is a valid topic rule for ``protocol``."""
    if (protocol or "").lower() in AVRO_PROTOCOLS:
        if _AVRO_EXPRESSION.fullmatch(expression) is None:
            raise ConfigError(
                f"invalid topic expression {expression!r}: topic rule for Avro must contain {{schema}} and "
                '{table}, e.g. topic = "{schema}_{table}" (Avro schemas are registered per topic)',
                code="CDC:ErrKafkaInvalidTopicExpression",
            )
        return
    if _EXPRESSION.fullmatch(expression) is None:
        raise ConfigError(
            f"invalid topic expression {expression!r}: use characters [A-Za-z0-9._-] around an optional "
            '{schema} followed by an optional {table}, e.g. "cdc_{schema}_{table}" or "orders"',
            code="CDC:ErrKafkaInvalidTopicExpression",
        )


# --- partition rules ---------------------------------------------------------

VALID_RULES = ("default", "table", "ts", "index-value", "rowid", "pk", "columns", "[col1, col2, ...]", "<N>")
"""What ``partition =`` accepts, as shown in error messages."""

_INDEX_VALUE_ALIASES = frozenset({"index-value", "rowid", "pk"})
_FIXED = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class PartitionRule:
    """A parsed ``partition =`` with its ``index`` and ``columns``."""

    rule: str
    """The rule as written."""
    kind: str
    """``table``, ``ts``, ``index-value``, ``columns`` or ``fixed``."""
    index: str
    columns: tuple[str, ...]
    fixed: int | None
    """The partition of a ``fixed`` rule."""


def _parse_columns_list(text: str, where: str) -> tuple[str, ...]:
    inner = text.strip()[1:-1]
    names = tuple(part.strip().strip("`") for part in inner.split(","))
    if not inner.strip() or any(not n for n in names):
        raise ConfigError(
            f"{where}: invalid partition {text!r}: list the column names inside the brackets, "
            'separated by commas, e.g. partition = "[id, region]"'
        )
    return names


def parse_partition_rule(
    rule: Any, *, index: str = "", columns: Sequence[str] = (), where: str = "sink.dispatchers"
) -> PartitionRule:
    """Parse a partition rule (names are case-insensitive); errors name ``where`` and list the valid rules."""
    if not isinstance(rule, str):
        raise ConfigError(f"{where}: partition must be a string, got {rule!r}")
    cols: tuple[str, ...] = tuple(columns)
    fixed: int | None = None
    text = rule.strip()
    lowered = text.lower()
    if text == "":
        # no partition given: infer it from index/columns, else the default
        lowered = "columns" if cols else "index-value" if index else "default"
    if text.startswith("[") and text.endswith("]"):
        listed = _parse_columns_list(text, where)
        if cols and tuple(c.lower() for c in cols) != tuple(c.lower() for c in listed):
            raise ConfigError(
                f"{where}: partition {rule!r} and columns = {list(cols)!r} disagree; keep only one of them"
            )
        cols = listed
        lowered = "columns"
    if lowered in ("default", "table"):
        kind = "table"
    elif lowered == "ts":
        kind = "ts"
    elif lowered in _INDEX_VALUE_ALIASES:
        kind = "index-value"
    elif lowered == "columns":
        kind = "columns"
        if not cols:
            raise ConfigError(
                f'{where}: partition = "columns" needs the column names: add columns = ["c1", "c2"] '
                'or write partition = "[c1, c2]"'
            )
    elif _FIXED.fullmatch(text):
        kind = "fixed"
        fixed = int(text)
    elif text.lstrip("+-").isdigit():
        raise ConfigError(
            f"{where}: invalid partition {rule!r}: a fixed partition must be an integer "
            "0 <= N < the topic's partition count"
        )
    else:
        raise ConfigError(
            f"{where}: unknown partition rule {rule!r}; valid rules: {', '.join(VALID_RULES)}",
            code="CDC:ErrDispatcherFailed",
        )
    if index and kind != "index-value":
        raise ConfigError(
            f'{where}: index = {index!r} only applies to partition = "index-value" '
            f'(got partition {rule!r}); remove index or set partition = "index-value"'
        )
    if cols and kind != "columns":
        raise ConfigError(
            f'{where}: columns = {list(cols)!r} only applies to partition = "columns" '
            f'(got partition {rule!r}); remove columns or set partition = "columns"'
        )
    return PartitionRule(rule, kind, index, cols, fixed)


def check_partition_alias(rule: DispatchRule, where: str) -> None:
    """Refuse a rule that sets both ``partition`` and its alias ``dispatcher``."""
    if rule.partition and rule.dispatcher:
        raise ConfigError(
            f"{where}: dispatcher and partition cannot be configured both "
            f"(got dispatcher={rule.dispatcher!r}, partition={rule.partition!r}); keep only partition"
        )


def rule_partition(rule: DispatchRule, where: str = "sink.dispatchers") -> PartitionRule:
    """The partition rule of a ``[[sink.dispatchers]]`` rule (``dispatcher`` is an alias of ``partition``)."""
    check_partition_alias(rule, where)
    return parse_partition_rule(
        rule.partition or rule.dispatcher, index=rule.index, columns=rule.columns, where=where
    )


# --- whole rules -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckedDispatchRule:
    """A dispatch rule whose matcher, topic expression and partition rule parse."""

    matcher: TableFilter
    topic: str
    """The topic expression; ``""`` is the sink URI's topic."""
    partition: PartitionRule


def check_dispatch_rule(
    rule: DispatchRule, *, protocol: str | None, case_sensitive: bool, where: str
) -> CheckedDispatchRule:
    """Parse one ``[[sink.dispatchers]]`` rule; errors name ``where`` (e.g. ``sink.dispatchers[2]``)."""
    if not rule.matcher:
        raise ConfigError(
            f'{where}: matcher is empty, so the rule can never apply; set matcher = ["db.*"] '
            "(table-filter syntax) or remove the rule"
        )
    try:
        matcher = TableFilter(rule.matcher, case_sensitive)
    except FilterRuleError as exc:
        raise FilterRuleError(f"{where}.matcher: {exc.message}") from None
    if rule.topic != "":
        # the empty topic is the sink URI's: used verbatim and never checked against the Avro rule
        try:
            validate_topic_expression(rule.topic, protocol)
        except ConfigError as exc:
            raise ConfigError(f"{where}.topic: {exc.message}", code=exc.code) from None
    return CheckedDispatchRule(matcher, rule.topic, rule_partition(rule, where))


__all__ = [
    "AVRO_PROTOCOLS",
    "VALID_RULES",
    "CheckedDispatchRule",
    "DispatchRule",
    "PartitionRule",
    "check_dispatch_rule",
    "check_partition_alias",
    "parse_partition_rule",
    "rule_partition",
    "validate_topic_expression",
]
