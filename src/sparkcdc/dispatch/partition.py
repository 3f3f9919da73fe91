"""Partition dispatchers: which Kafka partition a row change goes to (TiCDC ``dispatcher/partition``).

Rules (``partition =`` in a ``[[sink.dispatchers]]`` rule, ``dispatcher =`` is
its alias; names are case-insensitive):

==========================  ============================================================
``default`` / ``table``     ``crc32(schema‖table) % n`` (``default`` is ``table`` since TiCDC v7.4)
``ts``                      ``commit_ts % n``
``index-value``             table hash XOR ``crc32(col‖value)`` over the handle key
                            (``rowid`` and ``pk`` are aliases); with ``index = "name"``
                            over that index's columns
``columns``                 the same over ``columns = [...]``; ``"[c1, c2]"`` is a shorthand;
                            a table without some of them hashes the ones it has,
                            one without any goes to partition 0 (seed 002; TiCDC
                            refuses such a table)
``"N"``                     the fixed partition N (0 ≤ N < partition count)
==========================  ============================================================

The hash is TiCDC's ``PositionInertia``: each piece is an independent IEEE
CRC-32 and the pieces are XOR-ed, so column order does not matter. Values render
as TiCDC's ``ColumnValueString`` does: NULL → ``null``, integers in decimal,
floats in the shortest ``'f'`` form (FLOAT at 32-bit precision), strings as
UTF-8, bytes raw, DECIMAL as its plain digits, ENUM as its 1-based index and SET
as its bit mask. DELETE hashes the old row, INSERT and UPDATE the new one (TiCDC's
``IndexValueDispatcher`` takes ``Columns``, the post-image, unless the row is a delete).

Changes of one key stay in one partition. A transaction's key may change several times (MySQL and
MariaDB run statements one after the other); by default the Kafka sink splits every key-changing
UPDATE into a DELETE, hashed by the old key, and an INSERT, hashed by the new one, as TiCDC does
since v6.5.3, so each change lands in its key's partition and a key's partition holds all of its
changes in order: a consumer that merges partitions transaction by transaction in any order
replays the table correctly. With ``output-raw-change-event = true`` an UPDATE that changes the key
goes, like TiCDC's, to the partition of its *new* key, away from the earlier changes of its old key;
a consumer merging partitions then cannot order it against a later reuse of the old key in the same
transaction, so key-based rules should keep the default split. An unknown rule is refused at
creation with the list of valid rules (TiCDC only warns and falls back); the
rule is parsed by ``sparkcdc.config.dispatch_rule``, which loading a
ReplicaConfig runs too.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sparkcdc.config.dispatch_rule import (
    VALID_RULES,
    DispatchRule,
    PartitionRule,
    parse_partition_rule,
    rule_partition,
)
from sparkcdc.errors import ConfigError, SinkError
from sparkcdc.model import ColumnInfo, RowChange, TableInfo

_PLAN_CACHE_LIMIT = 4096


class DispatchError(SinkError):
    """A row cannot be dispatched (its table lacks the configured index, or a column is generated)."""

    code = "CDC:ErrDispatcherFailed"


# --- value rendering (TiCDC model.ColumnValueString) -------------------------


def _float64_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return format(Decimal(repr(v)).normalize(), "f")


def _float32_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    target = struct.pack("<f", v)
    f32 = struct.unpack("<f", target)[0]
    text = repr(f32)
    for digits in range(1, 10):  # float32 needs at most 9 significant digits
        candidate = f"{f32:.{digits - 1}e}"
        if struct.pack("<f", float(candidate)) == target:
            text = candidate
            break
    return format(Decimal(text).normalize(), "f")


def _enum_number(value: str, col: ColumnInfo) -> int:
    try:
        return col.elements.index(value) + 1
    except ValueError:
        pass
    if value == "":
        return 0  # MySQL's invalid enum value (index 0)
    lowered = value.lower()
    for i, element in enumerate(col.elements):
        if element.lower() == lowered:
            return i + 1
    raise DispatchError(
        f"cannot dispatch: ENUM column {col.name!r} has value {value!r} that is not one of its elements "
        f"{list(col.elements)!r}; the schema history does not match the row"
    )


def _set_number(value: str, col: ColumnInfo) -> int:
    if value == "":
        return 0
    lowered = [e.lower() for e in col.elements]
    bits = 0
    for name in value.split(","):
        try:
            pos = col.elements.index(name)
        except ValueError:
            try:
                pos = lowered.index(name.lower())
            except ValueError:
                raise DispatchError(
                    f"cannot dispatch: SET column {col.name!r} has member {name!r} that is not one of its "
                    f"elements {list(col.elements)!r}; the schema history does not match the row"
                ) from None
        bits |= 1 << pos
    return bits


def value_bytes(value: Any, col: ColumnInfo) -> bytes:
    """The bytes TiCDC hashes for one column value (``ColumnValueString``)."""
    if value is None:
        return b"null"
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        if col.type == "enum":
            return str(_enum_number(value, col)).encode()
        if col.type == "set":
            return str(_set_number(value, col)).encode()
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, float):
        return (_float32_text(value) if col.type == "float" else _float64_text(value)).encode()
    if isinstance(value, Decimal):
        return format(value, "f").encode()
    return str(value).encode("utf-8", "surrogateescape")


# --- the dispatcher ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one table version needs for hashing: the table hash and the key columns."""

    table: TableInfo
    table_hash: int
    columns: tuple[tuple[bytes, int, ColumnInfo], ...]
    """(actual column name as bytes, position in the row, column) per hashed column."""


class PartitionDispatcher:
    """The partition rule of one dispatch rule; ``partition(row, table, n)`` picks the partition."""

    __slots__ = ("_plans", "columns", "fixed", "index", "kind", "rule")

    def __init__(
        self,
        rule: str = "default",
        *,
        index: str = "",
        columns: Sequence[str] = (),
        where: str = "sink.dispatchers",
    ) -> None:
        self._use(parse_partition_rule(rule, index=index, columns=columns, where=where))

    @classmethod
    def from_parsed(cls, parsed: PartitionRule) -> PartitionDispatcher:
        """Build from a partition rule already parsed (``sparkcdc.config.dispatch_rule``)."""
        dispatcher = cls.__new__(cls)
        dispatcher._use(parsed)
        return dispatcher

    @classmethod
    def from_rule(cls, rule: DispatchRule, where: str = "sink.dispatchers") -> PartitionDispatcher:
        """Build from a ``[[sink.dispatchers]]`` rule (``dispatcher`` is an alias of ``partition``)."""
        return cls.from_parsed(rule_partition(rule, where))

    def _use(self, parsed: PartitionRule) -> None:
        self.rule = parsed.rule
        self.index = parsed.index
        self.columns = parsed.columns
        self.fixed = parsed.fixed
        self.kind = parsed.kind
        self._plans: dict[tuple[str, str, int], _Plan] = {}

    # --- checks ---------------------------------------------------------------

    def validate_partition_count(self, num_partitions: int) -> None:
        """Raise ConfigError if a fixed partition does not exist in a topic of ``num_partitions``."""
        if num_partitions <= 0:
            raise ConfigError(f"invalid partition count {num_partitions}: a topic needs at least 1 partition")
        if self.fixed is not None and self.fixed >= num_partitions:
            raise ConfigError(
                f"partition {self.fixed} (partition = {self.rule!r}) is out of range: the topic has "
                f"{num_partitions} partition(s), so use 0..{num_partitions - 1} or add partitions",
                code="CDC:ErrDispatcherFailed",
            )

    def verify_table(self, table: TableInfo) -> None:
        """Raise ConfigError if ``table`` lacks the configured index (or it is not unique).

        A ``columns`` rule refuses only a generated column: a table without some (or any) of the
        columns is dispatched by the ones it has (or to partition 0).
        """
        name = f"{table.schema}.{table.table}"
        if self.kind == "index-value" and self.index:
            ix = self._find_index(table)
            if ix is None:
                raise ConfigError(
                    f"index not found when verify the table, table: {name}, index: {self.index!r}; "
                    f"existing indexes: {[i.name for i in table.indexes]!r}",
                    code="CDC:ErrDispatcherFailed",
                )
            if not (ix.unique or ix.primary):
                raise ConfigError(
                    f"index is not unique when verify the table, table: {name}, index: {self.index!r}; "
                    "dispatch by a primary or unique index (a non-unique key may change without the "
                    "update being split, which reorders the row's events)",
                    code="CDC:ErrDispatcherFailed",
                )
        elif self.kind == "columns":
            try:
                self._column_offsets(table)
            except DispatchError as exc:
                raise ConfigError(
                    exc.message.replace("when dispatch event", "when verify the table"),
                    code="CDC:ErrDispatcherFailed",
                ) from None

    def _find_index(self, table: TableInfo) -> Any:
        wanted = self.index.lower()
        for ix in table.indexes:
            if ix.name.lower() == wanted:
                return ix
        return None

    def _column_offsets(self, table: TableInfo) -> list[int]:
        """Positions of the configured columns the table has (seed 002: the missing ones are skipped)."""
        offsets: list[int] = []
        for name in self.columns:
            if not table.has_column(name):
                continue
            pos = table.index_of(name)
            if table.columns[pos].generated:
                raise DispatchError(
                    f"found virtual generated columns when dispatch event, table: {table.schema}.{table.table}, "
                    f"columns: {list(self.columns)!r} column: {name.lower()!r}; generated columns carry no "
                    "value in the change stream, dispatch by stored columns"
                )
            offsets.append(pos)
        return offsets

    # --- dispatch -------------------------------------------------------------

    def _plan(self, row: RowChange, table: TableInfo) -> _Plan:
        key = (row.schema, row.table, table.version)
        plan = self._plans.get(key)
        if plan is not None and (plan.table is table or plan.table == table):
            return plan
        if self.kind == "columns":
            offsets = self._column_offsets(table)
        elif self.index:
            ix = self._find_index(table)
            if ix is None:
                raise DispatchError(
                    f"index not found when dispatch event, table: {table.schema}.{table.table}, "
                    f"index: {self.index!r}; existing indexes: {[i.name for i in table.indexes]!r}"
                )
            offsets = [table.index_of(c) for c in ix.columns]
        else:
            offsets = list(table.handle_key_index)
        cols = tuple((table.columns[i].name.encode(), i, table.columns[i]) for i in offsets)
        plan = _Plan(table, zlib.crc32(row.schema.encode() + row.table.encode()), cols)
        if len(self._plans) >= _PLAN_CACHE_LIMIT:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def partition(self, row: RowChange, table: TableInfo, num_partitions: int) -> int:
        """The partition (0 ≤ p < num_partitions) for a row change; DELETE uses the old row."""
        if num_partitions <= 0:
            raise ConfigError(f"invalid partition count {num_partitions}: a topic needs at least 1 partition")
        kind = self.kind
        if kind == "table":
            return zlib.crc32(row.schema.encode() + row.table.encode()) % num_partitions
        if kind == "ts":
            return row.commit_ts % num_partitions
        if kind == "fixed":
            assert self.fixed is not None
            if self.fixed >= num_partitions:
                raise DispatchError(
                    f"partition {self.fixed} (partition = {self.rule!r}) is out of range for table "
                    f"{row.schema}.{row.table}: the topic has {num_partitions} partition(s)"
                )
            return self.fixed
        if kind == "columns" and not self._plan(row, table).columns:
            return 0  # none of the columns is in this table (seed 002; TiCDC refuses the table)
        return self.hash_row(row, table) % num_partitions

    def hash_row(self, row: RowChange, table: TableInfo) -> int:
        """TiCDC's PositionInertia sum for index-value/columns rules (before ``% n``)."""
        plan = self._plan(row, table)
        image = row.image
        h = plan.table_hash
        crc32 = zlib.crc32
        for name, pos, col in plan.columns:
            h ^= crc32(name + value_bytes(image[pos], col))
        return h

    def __getstate__(self) -> tuple[str, str, tuple[str, ...], str, int | None]:
        return (self.rule, self.index, self.columns, self.kind, self.fixed)

    def __setstate__(self, state: tuple[str, str, tuple[str, ...], str, int | None]) -> None:
        self.rule, self.index, self.columns, self.kind, self.fixed = state
        self._plans = {}

    def __repr__(self) -> str:
        extra = ""
        if self.index:
            extra = f", index={self.index!r}"
        elif self.columns:
            extra = f", columns={list(self.columns)!r}"
        return f"PartitionDispatcher({self.kind!r}{extra})"


PartitionFunc = Callable[[RowChange, TableInfo, int], int]

__all__ = ["VALID_RULES", "DispatchError", "PartitionDispatcher", "PartitionFunc", "value_bytes"]
