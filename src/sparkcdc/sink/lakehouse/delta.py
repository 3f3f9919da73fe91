"""Delta Lake tables through the deltalake package (delta-rs), one directory per table under the root.

Each commit carries a Delta application transaction (``app_id`` = ``sparkcdc:<changefeed>``,
``version`` = the batch's checkpoint-ts), the protocol's own record of what a writer applied.
Upserts are one MERGE on the key; ADD COLUMN is a metadata change; delta-rs has no column mapping,
so DROP COLUMN, RENAME COLUMN and a widened type rewrite the table in one overwrite commit.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.errors import SinkError, SinkUnavailable
from sparkcdc.sink.lakehouse.changes import (
    COMMIT_TS,
    DELETED,
    CommitTag,
    SchemaChange,
    TableFormat,
    lost_race,
)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class DeltaFormat(TableFormat):
    """Tables at ``<root>/<table name>`` (a local directory or s3://bucket/prefix)."""

    name = "delta"

    def __init__(self, root: str, storage_options: dict[str, str] | None = None) -> None:
        self.root = root.rstrip("/")
        self.storage_options = storage_options or None

    def _uri(self, table: str) -> str:
        return f"{self.root}/{table}"

    def _table(self, table: str) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self._uri(table), storage_options=self.storage_options)

    @staticmethod
    def _props(tag: CommitTag) -> Any:
        from deltalake import CommitProperties, Transaction

        return CommitProperties(
            app_transactions=[Transaction(f"sparkcdc:{tag.changefeed_id}", tag.checkpoint_ts)],
            custom_metadata=tag.properties(),
        )

    def exists(self, table: str) -> bool:
        """Whether a Delta log is at the table's path."""
        from deltalake import DeltaTable

        try:
            return bool(DeltaTable.is_deltatable(self._uri(table), storage_options=self.storage_options))
        except OSError as exc:
            raise SinkUnavailable(f"cannot reach Delta table {self._uri(table)!r}: {exc}") from exc

    def create(self, table: str, schema: pa.Schema) -> None:
        """Create the table with an empty first commit."""
        from deltalake import DeltaTable

        try:
            DeltaTable.create(self._uri(table), schema, mode="ignore", storage_options=self.storage_options)
        except Exception as exc:
            raise SinkError(f"cannot create Delta table {self._uri(table)!r}: {exc}") from exc

    def schema(self, table: str) -> pa.Schema:
        """The table's schema as Arrow."""
        return pa.schema(self._table(table).schema().to_arrow())

    def checkpoint(self, table: str, changefeed_id: str) -> int | None:
        """The version of the changefeed's application transaction."""
        v = self._table(table).transaction_version(f"sparkcdc:{changefeed_id}")
        return None if v is None else int(v)

    def _unapplied(self, dt: Any, frame: pa.Table, tag: CommitTag) -> pa.Table | None:
        """The frame's rows above the application transaction of ``dt`` (the table as loaded); None
        when it holds the batch. The commit goes through ``dt`` with the same application id:
        delta-rs refuses it when another commit since ``dt``'s version carries that id."""
        v = dt.transaction_version(f"sparkcdc:{tag.changefeed_id}")
        if v is None:
            return frame
        if int(v) >= tag.checkpoint_ts:
            return None
        if COMMIT_TS not in frame.column_names:
            return frame  # an upsert frame: each key's last state, as new as the batch (idempotent)
        return frame.filter(pc.greater(frame[COMMIT_TS], pa.scalar(int(v), pa.int64())))

    def upsert(self, table: str, keys: tuple[str, ...], frame: pa.Table, tag: CommitTag) -> None:
        """One MERGE: matched deleted keys are removed, the others updated or inserted."""
        dt = self._table(table)
        unapplied = self._unapplied(dt, frame, tag)
        if unapplied is None or unapplied.num_rows == 0:
            return
        frame = unapplied
        cols = [n for n in frame.column_names if n != DELETED]
        on = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in keys)
        values = {_quote(c): f"s.{_quote(c)}" for c in cols}
        flag = f"s.{_quote(DELETED)}"
        with _raced(table):
            (
                dt.merge(frame, on, source_alias="s", target_alias="t", commit_properties=self._props(tag))
                .when_matched_delete(predicate=flag)
                .when_matched_update(values, predicate=f"NOT {flag}")
                .when_not_matched_insert(values, predicate=f"NOT {flag}")
                .execute()
            )

    def append(self, table: str, frame: pa.Table, tag: CommitTag) -> None:
        """Append the frame in one commit."""
        from deltalake import write_deltalake

        dt = self._table(table)
        unapplied = self._unapplied(dt, frame, tag)
        if unapplied is None or unapplied.num_rows == 0:
            return
        with _raced(table):
            write_deltalake(dt, unapplied, mode="append", commit_properties=self._props(tag))

    def truncate(self, table: str, tag: CommitTag) -> None:
        """Delete every row in one commit."""
        self._table(table).delete(commit_properties=self._props(tag))

    def evolve(self, table: str, change: SchemaChange, target: pa.Schema) -> None:
        """ADD COLUMN at the end alters the metadata; anything else rewrites the table."""
        from deltalake import Schema, write_deltalake

        dt = self._table(table)
        current = self.schema(table).names
        appended = current + [f.name for f in change.adds] == target.names
        if appended and not (change.renames or change.drops or change.widens):
            fields = Schema.from_arrow(pa.schema(change.adds)).fields
            dt.alter.add_columns(fields)
            return
        data = dt.to_pyarrow_table()
        renamed = dict(change.renames)
        data = data.rename_columns([renamed.get(n, n) for n in data.column_names])
        arrays = [
            data[f.name].cast(f.type) if f.name in data.column_names else pa.nulls(data.num_rows, f.type)
            for f in target
        ]
        write_deltalake(
            dt,
            pa.Table.from_arrays(arrays, schema=target),
            mode="overwrite",
            schema_mode="overwrite",
            storage_options=self.storage_options,
        )


def _raced(table: str) -> Any:
    """``changes.lost_race`` with Delta's commit conflict."""
    from deltalake.exceptions import CommitFailedError

    return lost_race("Delta", table, CommitFailedError)
