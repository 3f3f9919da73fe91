"""The apply-changes core shared by the Iceberg and Delta sinks.

Executors turn the row changes of one table in one batch into a *change frame* (``ChangeFrame``):

- ``upsert`` mode: one row per primary key touched in the batch, its last state: the after image
  and ``_sparkcdc_deleted = false``, or the before image and ``_sparkcdc_deleted = true`` when the
  key's last change deleted it (an update that changes the key deletes the old key and writes the
  new one);
- ``changelog`` mode: every change, with ``_op`` (I/U/D), ``_commit_ts``, ``_seq``, the after image
  (the before image for a delete) and the before image as ``_before_<column>``.

The driver (``TableApplier``) applies each table's frame in one table commit that records the
changefeed id and the batch's checkpoint-ts in the table; a table whose recorded checkpoint-ts is
already at or past the batch's skips it, and the rows of a batch at or below the table's
recorded checkpoint-ts are left out (a batch planned again after a failover may start below it),
so a change replayed after a crash is applied once. DDLs become schema changes by comparing the table's columns with the DDL's new shape.
"""

from __future__ import annotations

import contextlib
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.errors import SinkError, SinkUnavailable
from sparkcdc.model import DDLEvent, DDLType, RowChange, TableInfo
from sparkcdc.sink.lakehouse.types import arrow_fields, column_arrays, normal_type, widens

log = logging.getLogger(__name__)

MODES = ("upsert", "changelog")
DELETED = "_sparkcdc_deleted"
OP, COMMIT_TS, SEQ = "_op", "_commit_ts", "_seq"
BEFORE = "_before_"
PROP_CHANGEFEED = "sparkcdc.changefeed-id"
PROP_CHECKPOINT = "sparkcdc.checkpoint-ts"


def table_fields(info: TableInfo, mode: str) -> list[pa.Field]:
    """The lakehouse table's columns for an upstream table shape."""
    if mode == "changelog":
        return [
            pa.field(OP, pa.string()),
            pa.field(COMMIT_TS, pa.int64()),
            pa.field(SEQ, pa.int64()),
            *arrow_fields(info),
            *arrow_fields(info, BEFORE),
        ]
    return arrow_fields(info)


def frame_schema(info: TableInfo, mode: str) -> pa.Schema:
    """The schema of a change frame (the table's columns plus the upsert bookkeeping)."""
    fields = table_fields(info, mode)
    if mode == "upsert":
        fields += [pa.field(DELETED, pa.bool_()), pa.field(COMMIT_TS, pa.int64()), pa.field(SEQ, pa.int64())]
    return pa.schema(fields)


def key_columns(info: TableInfo) -> tuple[str, ...]:
    """The handle key that upsert mode mirrors the table by; a table without one is refused."""
    key = info.handle_key
    if not key:
        raise SinkError(
            f"table {info.schema}.{info.table} has no primary key nor NOT NULL unique key, so "
            "mode=upsert cannot mirror it; add a primary key upstream, filter the table out, or use "
            "mode=changelog"
        )
    return key


class ChangeFrame:
    """Executor: the changes of one table (one shape) in one batch, in (commit_ts, seq) order."""

    def __init__(self, info: TableInfo, mode: str, time_zone: str = "UTC") -> None:
        self.info = info
        self.mode = mode
        self.time_zone = time_zone
        self.rows = 0
        self._log: list[RowChange] = []
        self._last: dict[tuple[Any, ...], tuple[bool, Any, int, int]] = {}
        self._key = tuple(info.index_of(c) for c in key_columns(info)) if mode == "upsert" else ()

    def add(self, row: RowChange) -> None:
        """Take one row change."""
        self.rows += 1
        if self.mode == "changelog":
            self._log.append(row)
            return
        k = self._key
        if row.op == "D":
            img = row.before
            self._last[tuple(img[i] for i in k)] = (True, img, row.commit_ts, row.seq)  # type: ignore[index]
            return
        after = row.after
        new_key = tuple(after[i] for i in k)  # type: ignore[index]
        if row.op == "U" and row.before is not None:
            old_key = tuple(row.before[i] for i in k)
            if old_key != new_key:
                self._last[old_key] = (True, row.before, row.commit_ts, row.seq)
        self._last[new_key] = (False, after, row.commit_ts, row.seq)

    def to_arrow(self) -> pa.Table:
        """The change frame (see the module docstring)."""
        schema = frame_schema(self.info, self.mode)
        n = len(self.info.columns)
        fields = list(schema)
        if self.mode == "changelog":
            rows = self._log
            images = [r.before if r.op == "D" else r.after for r in rows]
            befores = [r.before if r.op != "I" else None for r in rows]
            arrays = [
                pa.array([r.op for r in rows], pa.string()),
                pa.array([r.commit_ts for r in rows], pa.int64()),
                pa.array([r.seq for r in rows], pa.int64()),
                *column_arrays(self.info, images, fields[3 : 3 + n], self.time_zone),
                *column_arrays(self.info, befores, fields[3 + n :], self.time_zone),
            ]
        else:
            entries = list(self._last.values())
            arrays = [
                *column_arrays(self.info, [e[1] for e in entries], fields[:n], self.time_zone),
                pa.array([e[0] for e in entries], pa.bool_()),
                pa.array([e[2] for e in entries], pa.int64()),
                pa.array([e[3] for e in entries], pa.int64()),
            ]
        return pa.Table.from_arrays(arrays, schema=schema)


def last_per_key(frame: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """Upsert frames of one table from several writers merged: the last change of each key wins."""
    idx = "_sparkcdc_idx"
    ordered = frame.sort_by([(COMMIT_TS, "ascending"), (SEQ, "ascending")])
    ordered = ordered.append_column(idx, pa.array(range(ordered.num_rows), pa.int64()))
    last = ordered.group_by(list(keys), use_threads=False).aggregate([(idx, "max")])
    return ordered.take(last[f"{idx}_max"]).drop_columns([idx])


def conform(frame: pa.Table, schema: pa.Schema) -> pa.Table:
    """``frame``'s columns in ``schema``'s order and types; a column it lacks is all NULL."""
    arrays = []
    for f in schema:
        if f.name in frame.column_names:
            arrays.append(frame[f.name].cast(f.type))
        else:
            arrays.append(pa.nulls(frame.num_rows, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass
class SchemaChange:
    """What a DDL does to a lakehouse table's columns."""

    renames: list[tuple[str, str]]
    drops: list[str]
    adds: list[pa.Field]
    widens: list[pa.Field]

    def __bool__(self) -> bool:
        return bool(self.renames or self.drops or self.adds or self.widens)


_RENAME = re.compile(r"\bRENAME\s+COLUMN\s+`?([^`\s]+)`?\s+TO\s+`?([^`\s,]+)`?", re.IGNORECASE)
_CHANGE = re.compile(
    r"\bCHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?`?([^`\s]+)`?\s+`?([^`\s]+)`?", re.IGNORECASE
)


def renamed_columns(query: str) -> list[tuple[str, str]]:
    """(old, new) column names an ALTER TABLE renames (RENAME COLUMN, CHANGE old new ...)."""
    pairs = [(a, b) for a, b in _RENAME.findall(query)]
    pairs += [(a, b) for a, b in _CHANGE.findall(query) if a.lower() != b.lower()]
    return pairs


def schema_change(current: pa.Schema, target: list[pa.Field], ddl: DDLEvent, name: str) -> SchemaChange:
    """The renames, drops, additions and type promotions that turn ``current`` into ``target``."""
    have = {f.name.lower(): f for f in current}
    want = {f.name.lower(): f for f in target}
    renames: list[tuple[str, str]] = []
    for old, new in renamed_columns(ddl.query):
        for prefix in ("", BEFORE):
            o, n = (prefix + old).lower(), (prefix + new).lower()
            if o in have and o not in want and n in want and n not in have:
                renames.append((have[o].name, want[n].name))
    gone = {o.lower() for o, _ in renames}
    came = {n.lower() for _, n in renames}
    drops = [f.name for k, f in have.items() if k not in want and k not in gone]
    adds = [f for k, f in want.items() if k not in have and k not in came]
    promoted: list[pa.Field] = []
    renamed_to = {n.lower(): have[o.lower()] for o, n in renames}
    for k, f in want.items():
        old_f = have.get(k) or renamed_to.get(k)
        if old_f is None or normal_type(old_f.type) == normal_type(f.type):
            continue
        if not widens(old_f.type, f.type):
            raise SinkError(
                f"DDL {ddl.query!r} changes column {f.name!r} of table {name!r} from {old_f.type} to "
                f"{f.type}, which the table format cannot express (only int→bigint, float→double and "
                "a wider decimal precision are); recreate the table and restart the changefeed from a "
                "snapshot"
            )
        promoted.append(f)
    return SchemaChange(renames, drops, adds, promoted)


class TableFormat(ABC):
    """One table format (Iceberg, Delta): the few operations the core needs, each one commit."""

    name = ""

    @abstractmethod
    def exists(self, table: str) -> bool:
        """Whether the table exists."""

    @abstractmethod
    def create(self, table: str, schema: pa.Schema) -> None:
        """Create an empty table (no error when another attempt created it first)."""

    @abstractmethod
    def schema(self, table: str) -> pa.Schema:
        """The table's current columns as Arrow fields."""

    @abstractmethod
    def checkpoint(self, table: str, changefeed_id: str) -> int | None:
        """The checkpoint-ts the changefeed's last commit to the table recorded, None if none."""

    @abstractmethod
    def upsert(self, table: str, keys: tuple[str, ...], frame: pa.Table, tag: CommitTag) -> None:
        """Delete the frame's keys and write its rows that are not deleted, in one commit."""

    @abstractmethod
    def append(self, table: str, frame: pa.Table, tag: CommitTag) -> None:
        """Append rows in one commit."""

    @abstractmethod
    def truncate(self, table: str, tag: CommitTag) -> None:
        """Delete every row in one commit."""

    @abstractmethod
    def evolve(self, table: str, change: SchemaChange, target: pa.Schema) -> None:
        """Apply a schema change (``target`` is the schema after it)."""

    def close(self) -> None:
        """Release catalog connections."""
        return None


@dataclass(frozen=True)
class CommitTag:
    """What a commit records in the table so that a replay recognises it."""

    changefeed_id: str
    checkpoint_ts: int

    def properties(self) -> dict[str, str]:
        """The tag as string properties (Iceberg snapshot summary)."""
        return {PROP_CHANGEFEED: self.changefeed_id, PROP_CHECKPOINT: str(self.checkpoint_ts)}


@contextlib.contextmanager
def lost_race(fmt: str, table: str, conflict: type[BaseException]) -> Iterator[None]:
    """A commit that lost to another on the same table (``conflict``, the format's error for it) is a
    passing fault: the batch is retried and then sees the other driver's tag."""
    try:
        yield
    except conflict as exc:
        raise SinkUnavailable(
            f"{fmt} table {table} changed while this batch was being applied (another driver committed): "
            f"{exc}; the batch is applied again from the table's new state"
        ) from exc


def table_name(template: str, schema: str, table: str) -> str:
    """The lakehouse table of an upstream table (``{schema}_{table}`` by default)."""
    return template.replace("{schema}", schema).replace("{table}", table)


class TableApplier:
    """Driver: applies staged change frames and DDLs to the tables of one format."""

    def __init__(self, fmt: TableFormat, mode: str, template: str, changefeed_id: str) -> None:
        self.fmt = fmt
        self.mode = mode
        self.template = template
        self.changefeed_id = changefeed_id

    def name_of(self, schema: str, table: str) -> str:
        """The lakehouse table name of an upstream table."""
        return table_name(self.template, schema, table)

    def applied(self, table: str, ts: int) -> bool:
        """Whether the table already holds the changefeed's commit at ``ts`` (or a later one)."""
        last = self.fmt.checkpoint(table, self.changefeed_id)
        return last is not None and last >= ts

    def apply(self, info: TableInfo, frames: list[pa.Table], checkpoint_ts: int) -> bool:
        """Apply one table's frames of a batch; False when an earlier run already committed them."""
        name = self.name_of(info.schema, info.table)
        last = None
        if not self.fmt.exists(name):
            self.fmt.create(name, pa.schema(table_fields(info, self.mode)))
        else:
            last = self.fmt.checkpoint(name, self.changefeed_id)
        if last is not None and last >= checkpoint_ts:
            log.info(
                "%s table %s already holds checkpoint-ts %d: skipped", self.fmt.name, name, checkpoint_ts
            )
            return False
        frame = pa.concat_tables(frames) if len(frames) > 1 else frames[0]
        if last is not None:
            # A batch planned again after a failover may start below the table's tag: its rows up to
            # the tag are in the table already (a changelog would log them twice).
            frame = frame.filter(pc.greater(frame[COMMIT_TS], pa.scalar(last, pa.int64())))
            if frame.num_rows == 0:
                return False
        tag = CommitTag(self.changefeed_id, checkpoint_ts)
        target = self.fmt.schema(name)
        if self.mode == "changelog":
            frame = frame.sort_by([(COMMIT_TS, "ascending"), (SEQ, "ascending")])
            self.fmt.append(name, conform(frame, target), tag)
            return True
        keys = key_columns(info)
        if len(frames) > 1:
            frame = last_per_key(frame, keys)
        with_flag = pa.schema([*target, pa.field(DELETED, pa.bool_())])
        self.fmt.upsert(name, keys, conform(frame, with_flag), tag)
        return True

    def apply_ddl(self, ddl: DDLEvent) -> None:
        """Evolve, empty or keep the DDL's table (tables are created from their first rows)."""
        if not ddl.table:
            return
        name = self.name_of(ddl.schema, ddl.table)
        if ddl.ddl_type in (DDLType.DROP_TABLE, DDLType.DROP_VIEW):
            log.info("%s sink: DDL %r leaves table %s as it is", self.fmt.name, ddl.query, name)
            return
        if not self.fmt.exists(name):
            return
        if ddl.ddl_type == DDLType.TRUNCATE_TABLE:
            if self.applied(name, ddl.commit_ts):
                return
            self.fmt.truncate(name, CommitTag(self.changefeed_id, ddl.commit_ts))
            log.info("%s sink: table %s emptied by %r", self.fmt.name, name, ddl.query)
            return
        if ddl.table_info is None:
            return
        target = table_fields(ddl.table_info, self.mode)
        change = schema_change(self.fmt.schema(name), target, ddl, name)
        if change:
            try:
                self.fmt.evolve(name, change, pa.schema(target))
            except SinkError:
                raise
            except Exception as exc:
                raise SinkError(
                    f"DDL {ddl.query!r} cannot be applied to {self.fmt.name} table {name!r}: {exc}"
                ) from exc
            log.info("%s sink: table %s evolved by %r: %s", self.fmt.name, name, ddl.query, change)
