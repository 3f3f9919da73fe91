"""EventRouter: the ordered ``[[sink.dispatchers]]`` rules, first match wins (TiCDC ``event_router.go``).

Each rule pairs a table-filter matcher with a topic dispatcher and a partition
dispatcher; ``{matcher = ["*.*"], partition = "default", topic = ""}`` is
appended, so every table has a rule. Matchers follow ``case-sensitive``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sparkcdc.config.dispatch_rule import DispatchRule, check_dispatch_rule
from sparkcdc.dispatch.partition import PartitionDispatcher
from sparkcdc.dispatch.topic import TopicDispatcher
from sparkcdc.filter import TableFilter
from sparkcdc.model import DDLEvent, DDLType, RowChange, TableInfo

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig

_SCHEMA_DDL = frozenset({DDLType.CREATE_SCHEMA, DDLType.DROP_SCHEMA, DDLType.ALTER_SCHEMA})
_CACHE_LIMIT = 65536
_DDL_TO_PARTITION_ZERO = frozenset({"canal", "canal-json"})


class DispatchRoute:
    """One parsed dispatch rule."""

    __slots__ = ("matcher", "partition", "topic")

    def __init__(self, matcher: TableFilter, topic: TopicDispatcher, partition: PartitionDispatcher) -> None:
        self.matcher = matcher
        self.topic = topic
        self.partition = partition

    def __getstate__(self) -> tuple[TableFilter, TopicDispatcher, PartitionDispatcher]:
        return (self.matcher, self.topic, self.partition)

    def __setstate__(self, state: tuple[TableFilter, TopicDispatcher, PartitionDispatcher]) -> None:
        self.matcher, self.topic, self.partition = state

    def __repr__(self) -> str:
        return f"DispatchRoute({list(self.matcher.rules)!r}, {self.topic!r}, {self.partition!r})"


def build_route(
    rule: DispatchRule, *, default_topic: str, protocol: str | None, case_sensitive: bool, where: str
) -> DispatchRoute:
    """Parse one ``[[sink.dispatchers]]`` rule; errors name ``where`` (e.g. ``sink.dispatchers[2]``)."""
    checked = check_dispatch_rule(rule, protocol=protocol, case_sensitive=case_sensitive, where=where)
    topic = TopicDispatcher(checked.topic, default_topic, protocol)
    return DispatchRoute(checked.matcher, topic, PartitionDispatcher.from_parsed(checked.partition))


class EventRouter:
    """Routes row changes and DDLs to (topic, partition) by the changefeed's dispatch rules."""

    def __init__(self, config: ReplicaConfig, default_topic: str, protocol: str) -> None:
        self.default_topic = default_topic
        self.protocol = protocol
        self.case_sensitive = config.case_sensitive
        rules = [*config.sink.dispatchers, DispatchRule(matcher=["*.*"], partition="default", topic="")]
        self.routes: tuple[DispatchRoute, ...] = tuple(
            build_route(
                rule,
                default_topic=default_topic,
                protocol=protocol,
                case_sensitive=config.case_sensitive,
                where=f"sink.dispatchers[{i}]" if i < len(config.sink.dispatchers) else "default dispatcher",
            )
            for i, rule in enumerate(rules)
        )
        self._cache: dict[tuple[str, str], DispatchRoute] = {}

    def match(self, schema: str, table: str) -> DispatchRoute:
        """The first rule whose matcher selects ``schema.table`` (the implicit ``*.*`` rule at worst)."""
        key = (schema, table)
        route = self._cache.get(key)
        if route is None:
            route = next(r for r in self.routes if r.matcher.match(schema, table))
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = route
        return route

    def topic_for(self, schema: str, table: str) -> str:
        """The topic of a table's row changes."""
        return self.match(schema, table).topic.topic(schema, table)

    def partition_dispatcher_for(self, schema: str, table: str) -> PartitionDispatcher:
        """The partition dispatcher that applies to a table."""
        return self.match(schema, table).partition

    def route(
        self, row: RowChange, table: TableInfo, num_partitions_of: Callable[[str], int]
    ) -> tuple[str, int]:
        """(topic, partition) of a row change; ``num_partitions_of(topic)`` gives the topic's partition count."""
        route = self.match(row.schema, row.table)
        topic = route.topic.topic(row.schema, row.table)
        return topic, route.partition.partition(row, table, num_partitions_of(topic))

    def topic_for_ddl(self, ddl: DDLEvent) -> str:
        """The topic of a DDL: the old table's topic for renames, the default topic for schema-level DDL."""
        if ddl.ddl_type in _SCHEMA_DDL:
            return self.default_topic
        if ddl.old_table:
            schema, table = ddl.old_schema or ddl.schema, ddl.old_table
        else:
            schema, table = ddl.schema, ddl.table
        if not table:
            return self.default_topic
        return self.topic_for(schema, table)

    def ddl_partitions(self, num_partitions: int) -> list[int]:
        """Partitions a DDL message goes to: 0 for canal/canal-json, every partition otherwise (TiCDC)."""
        if self.protocol.lower() in _DDL_TO_PARTITION_ZERO:
            return [0]
        return list(range(num_partitions))

    def all_topics(self, tables: Iterable[tuple[str, str] | TableInfo]) -> set[str]:
        """Every topic the given tables write to, plus the default topic (for DDLs and watermarks)."""
        topics = {self.default_topic}
        for t in tables:
            schema, table = (t.schema, t.table) if isinstance(t, TableInfo) else t
            topics.add(self.topic_for(schema, table))
        return topics

    def verify(self, partition_counts: Mapping[str, int] | int, tables: Iterable[TableInfo] = ()) -> None:
        """Refuse fixed partitions a topic does not have and index/columns rules a table cannot satisfy.

        ``partition_counts`` is the partition count of each known topic, or one
        count for every topic (``partition-num``). ``tables`` are the tables the
        changefeed replicates (their topics are checked, and their indexes and
        columns against index-value/columns rules).
        """

        def count_of(topic: str) -> int | None:
            if isinstance(partition_counts, int):
                return partition_counts
            return partition_counts.get(topic)

        for route in self.routes:
            if route.partition.kind == "fixed" and route.topic.is_static:
                n = count_of(route.topic.topic("", ""))
                if n is not None:
                    route.partition.validate_partition_count(n)
        for t in tables:
            route = self.match(t.schema, t.table)
            route.partition.verify_table(t)
            n = count_of(route.topic.topic(t.schema, t.table))
            if n is not None:
                route.partition.validate_partition_count(n)
        if isinstance(partition_counts, int):
            # the fixed rules of dynamic topics apply to every topic of that count
            for route in self.routes:
                if route.partition.kind == "fixed":
                    route.partition.validate_partition_count(partition_counts)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "default_topic": self.default_topic,
            "protocol": self.protocol,
            "case_sensitive": self.case_sensitive,
            "routes": self.routes,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.default_topic = state["default_topic"]
        self.protocol = state["protocol"]
        self.case_sensitive = state["case_sensitive"]
        self.routes = state["routes"]
        self._cache = {}

    def __repr__(self) -> str:
        return f"EventRouter(default_topic={self.default_topic!r}, routes={list(self.routes)!r})"


__all__ = ["DispatchRoute", "EventRouter", "build_route"]
