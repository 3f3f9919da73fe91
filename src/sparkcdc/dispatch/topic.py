"""Topic dispatchers: which Kafka topic a table's events go to (TiCDC ``dispatcher/topic``).

A rule's ``topic`` is empty (→ the sink URI's default topic), a hard-coded name
(``^[A-Za-z0-9._-]+$``) or an expression ``[prefix]{schema}[middle]{table}[suffix]``
in which ``{schema}`` and ``{table}`` are optional but ``{table}`` comes after
``{schema}``. Substituted names are sanitised as Kafka requires: every character
outside ``[A-Za-z0-9._-]`` becomes ``_`` (case is kept), the result is cut to 249
characters, and the reserved names ``.``/``..`` become ``_``/``__``. The rule's
syntax is checked by ``sparkcdc.config.dispatch_rule.validate_topic_expression``
(re-exported here), which loading a ReplicaConfig runs too.
"""

from __future__ import annotations

import re

from sparkcdc.config.dispatch_rule import validate_topic_expression

KAFKA_TOPIC_MAX_LENGTH = 249
"""Kafka's limit on topic names (``org.apache.kafka.common.internals.Topic``)."""

_HARD_CODED = re.compile(r"[A-Za-z0-9._\-]+")
_FORBIDDEN = re.compile(r"[^A-Za-z0-9._\-]")


def is_hard_coded(expression: str) -> bool:
    """Whether a topic rule is a plain topic name (no placeholders)."""
    return _HARD_CODED.fullmatch(expression) is not None


def sanitize_topic_name(name: str) -> str:
    """Make a Kafka-legal topic name the way TiCDC does (truncate to 249, ``.``/``..`` → ``_``/``__``)."""
    if len(name) > KAFKA_TOPIC_MAX_LENGTH:
        return name[:KAFKA_TOPIC_MAX_LENGTH]
    if name == ".":
        return "_"
    if name == "..":
        return "__"
    return name


def substitute(expression: str, schema: str, table: str) -> str:
    """Fill ``{schema}``/``{table}`` with the names, each disallowed character (per rune) → ``_``."""
    topic = expression.replace("{schema}", _FORBIDDEN.sub("_", schema)).replace(
        "{table}", _FORBIDDEN.sub("_", table)
    )
    return sanitize_topic_name(topic)


class TopicDispatcher:
    """The topic of one dispatch rule: static (default or hard-coded) or a ``{schema}``/``{table}`` expression."""

    __slots__ = ("_static_topic", "default_topic", "expression", "is_static")

    def __init__(self, expression: str, default_topic: str, protocol: str | None = None) -> None:
        self.expression = expression
        self.default_topic = default_topic
        if expression == "":
            # the sink URI's topic: used verbatim and never checked against the Avro rule
            self.is_static = True
            self._static_topic = default_topic
            return
        validate_topic_expression(expression, protocol)
        self.is_static = "{schema}" not in expression and "{table}" not in expression
        self._static_topic = sanitize_topic_name(expression) if self.is_static else ""

    def topic(self, schema: str, table: str) -> str:
        """The topic for a table (``table`` is ``""`` for schema-level events)."""
        if self.is_static:
            return self._static_topic
        return substitute(self.expression, schema, table)

    def __getstate__(self) -> tuple[str, str, bool, str]:
        return (self.expression, self.default_topic, self.is_static, self._static_topic)

    def __setstate__(self, state: tuple[str, str, bool, str]) -> None:
        self.expression, self.default_topic, self.is_static, self._static_topic = state

    def __repr__(self) -> str:
        if self.expression == "":
            return f"TopicDispatcher(default={self.default_topic!r})"
        return f"TopicDispatcher({self.expression!r})"


__all__ = [
    "KAFKA_TOPIC_MAX_LENGTH",
    "TopicDispatcher",
    "is_hard_coded",
    "sanitize_topic_name",
    "substitute",
    "validate_topic_expression",
]
