"""Apache Iceberg tables through pyiceberg, with a SQL catalog (SQLite by default, or PostgreSQL).

Each commit's snapshots carry the changefeed id and the batch's checkpoint-ts as snapshot summary
properties. An upsert is one transaction (one catalog commit): a delete of the frame's keys, then
an append of the rows that are not deleted.
"""

from __future__ import annotations

import warnings
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.errors import SinkError, SinkUnavailable
from sparkcdc.sink.lakehouse.changes import (
    COMMIT_TS,
    DELETED,
    PROP_CHANGEFEED,
    PROP_CHECKPOINT,
    CommitTag,
    SchemaChange,
    TableFormat,
    conform,
    lost_race,
)


def _range_filter(frame: pa.Table, column: str) -> Any:
    """``lo <= column <= hi`` over the frame's values of ``column`` (a key column: no NULL)."""
    from pyiceberg import expressions as ex

    # The predicates' runtime signature is (term, literal); their pydantic fields say otherwise.
    at_least: Any = ex.GreaterThanOrEqual
    at_most: Any = ex.LessThanOrEqual
    bounds = pc.min_max(frame[column]).as_py()
    return ex.And(at_least(column, bounds["min"]), at_most(column, bounds["max"]))


def sqlalchemy_url(catalog_uri: str) -> str:
    """The SQLAlchemy URL of a catalog URI (``postgresql://`` goes through psycopg 3)."""
    for prefix in ("postgresql://", "postgres://"):
        if catalog_uri.startswith(prefix):
            return "postgresql+psycopg://" + catalog_uri[len(prefix) :]
    return catalog_uri


class IcebergFormat(TableFormat):
    """Tables ``<namespace>.<table name>`` of a SQL catalog whose warehouse is a directory or bucket."""

    name = "iceberg"

    def __init__(
        self,
        catalog_uri: str,
        warehouse: str,
        namespace: str,
        io_properties: dict[str, str] | None = None,
        catalog_name: str = "sparkcdc",
    ) -> None:
        self.catalog_uri = catalog_uri
        self.warehouse = warehouse
        self.namespace = namespace
        self.io_properties = io_properties or {}
        self.catalog_name = catalog_name
        self._catalog: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_catalog"] = None
        return state

    @property
    def catalog(self) -> Any:
        """The SQL catalog (opened on first use; its tables are created then)."""
        if self._catalog is None:
            from pyiceberg.catalog.sql import SqlCatalog

            try:
                cat = SqlCatalog(
                    self.catalog_name,
                    uri=sqlalchemy_url(self.catalog_uri),
                    warehouse=self.warehouse,
                    **self.io_properties,
                )
                cat.create_namespace_if_not_exists(self.namespace)
            except Exception as exc:
                raise SinkUnavailable(
                    f"cannot open the Iceberg SQL catalog {self.catalog_name!r} at {self._shown_catalog()!r}: {exc}"
                ) from exc
            self._catalog = cat
        return self._catalog

    def _shown_catalog(self) -> str:
        from sparkcdc.config.uri import redact_uri

        return redact_uri(self.catalog_uri)

    def _ident(self, table: str) -> tuple[str, str]:
        return (self.namespace, table)

    def _load(self, table: str) -> Any:
        return self.catalog.load_table(self._ident(table))

    def exists(self, table: str) -> bool:
        """Whether the catalog has the table."""
        return bool(self.catalog.table_exists(self._ident(table)))

    def create(self, table: str, schema: pa.Schema) -> None:
        """Create the table (an attempt that lost the race finds it there)."""
        from pyiceberg.exceptions import TableAlreadyExistsError

        try:
            self.catalog.create_table(self._ident(table), schema=schema)
        except TableAlreadyExistsError:
            pass
        except Exception as exc:
            raise SinkError(f"cannot create Iceberg table {self.namespace}.{table}: {exc}") from exc

    def schema(self, table: str) -> pa.Schema:
        """The table's schema as Arrow."""
        return pa.schema(f.remove_metadata() for f in self._load(table).schema().as_arrow())

    def checkpoint(self, table: str, changefeed_id: str) -> int | None:
        """The checkpoint-ts in the newest snapshot this changefeed committed."""
        return _tag_of(self._load(table), changefeed_id)

    @staticmethod
    def _unapplied(t: Any, frame: pa.Table, tag: CommitTag) -> pa.Table | None:
        """The frame's rows above the tag of the table as ``t`` was loaded; None when it holds the batch.

        The commit that follows goes through the same ``t``: pyiceberg asserts the table's current
        snapshot is still ``t``'s, so a commit of another driver in between fails this one (a
        batch applied twice by two drivers, or an older batch after a newer one, cannot happen).
        pyiceberg would retry such a commit on the new snapshot by itself (an append rebases
        cleanly), past the tag it never read again: ``t`` commits without those retries.
        """
        _no_commit_retries(t)
        last = _tag_of(t, tag.changefeed_id)
        if last is None:
            return frame
        if last >= tag.checkpoint_ts:
            return None
        if COMMIT_TS not in frame.column_names:
            return frame  # an upsert frame: each key's last state, as new as the batch (idempotent)
        return frame.filter(pc.greater(frame[COMMIT_TS], pa.scalar(last, pa.int64())))

    def upsert(self, table: str, keys: tuple[str, ...], frame: pa.Table, tag: CommitTag) -> None:
        """Replace the rows in the frame's key range, in one transaction (an overwrite with a key filter).

        The filter is the range of the first key column (cheap to bind, and it prunes data files
        by their column bounds): the table's rows in that range are read, those whose key is in
        the frame are dropped in Arrow, and the range is overwritten by what is left plus the
        frame's live rows. pyiceberg's own delete by an ``In`` filter of every key binds the
        filter once per manifest and file, which costs seconds per 100,000 keys.
        """
        t = self._load(table)
        unapplied = self._unapplied(t, frame, tag)
        if unapplied is None or unapplied.num_rows == 0:
            return
        frame = unapplied
        props = tag.properties()
        live = frame.filter(pc.invert(frame[DELETED])).drop_columns([DELETED])
        key_range = _range_filter(frame, keys[0])
        current = t.scan(row_filter=key_range).to_arrow()
        if current.num_rows:
            key_types = pa.schema([current.schema.field(k) for k in keys])
            touched = conform(frame.select(list(keys)), key_types)
            kept = current.join(touched, list(keys), join_type="left anti", use_threads=False)
            rows = pa.concat_tables([conform(kept, current.schema), conform(live, current.schema)])
        else:
            rows = live
        with _raced(table), t.transaction() as tx, warnings.catch_warnings():
            # A range that holds no row yet deletes nothing, which pyiceberg warns about.
            warnings.simplefilter("ignore", UserWarning)
            if current.num_rows:
                tx.delete(key_range, snapshot_properties=props)
            if rows.num_rows:
                tx.append(rows, snapshot_properties=props)

    def append(self, table: str, frame: pa.Table, tag: CommitTag) -> None:
        """Append the frame as one snapshot."""
        t = self._load(table)
        unapplied = self._unapplied(t, frame, tag)
        if unapplied is not None and unapplied.num_rows:
            with _raced(table):
                t.append(unapplied, snapshot_properties=tag.properties())

    def truncate(self, table: str, tag: CommitTag) -> None:
        """Delete every row as one snapshot."""
        from pyiceberg.expressions import AlwaysTrue

        self._load(table).delete(AlwaysTrue(), snapshot_properties=tag.properties())

    def evolve(self, table: str, change: SchemaChange, target: pa.Schema) -> None:
        """Renames, drops, additions and promotions in one schema update."""
        from pyiceberg.catalog import Catalog

        def iceberg_type(f: pa.Field) -> Any:
            return Catalog._convert_schema_if_needed(pa.schema([f])).fields[0].field_type

        t = self._load(table)
        with t.update_schema() as u:
            for old, new_name in change.renames:
                u.rename_column(old, new_name)
            for name in change.drops:
                u.delete_column(name)
            names = target.names
            for f in change.adds:
                u.add_column(f.name, iceberg_type(f))
                # ADD COLUMN … AFTER / FIRST: the column goes where the upstream put it.
                at = names.index(f.name)
                if at == 0:
                    u.move_first(f.name)
                elif at < len(names) - 1:
                    u.move_after(f.name, names[at - 1])
            for f in change.widens:
                u.update_column(f.name, field_type=iceberg_type(f))

    def close(self) -> None:
        """Dispose of the catalog's database engine."""
        if self._catalog is not None:
            engine = getattr(self._catalog, "engine", None)
            if engine is not None:
                engine.dispose()
            self._catalog = None


def _tag_of(t: Any, changefeed_id: str) -> int | None:
    """The checkpoint-ts in the newest snapshot of ``t`` (a loaded table) this changefeed committed."""
    snapshots = sorted(t.snapshots(), key=lambda s: (s.sequence_number or 0, s.timestamp_ms), reverse=True)
    for snap in snapshots:
        props = snap.summary.additional_properties if snap.summary is not None else {}
        if props.get(PROP_CHANGEFEED) == changefeed_id and PROP_CHECKPOINT in props:
            return int(props[PROP_CHECKPOINT])
    return None


def _no_commit_retries(t: Any) -> None:
    """Make commits through the loaded table ``t`` fail on a concurrent commit instead of rebasing.

    Only this in-memory copy of the table's properties changes: a catalog commit applies its
    updates to the metadata it holds, so the table's stored properties stay as they are.
    """
    from pyiceberg.table import TableProperties

    props = {**t.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    t.metadata = t.metadata.model_copy(update={"properties": props})


def _raced(table: str) -> Any:
    """``changes.lost_race`` with Iceberg's commit conflict."""
    from pyiceberg.exceptions import CommitFailedException

    return lost_race("Iceberg", table, CommitFailedException)
