"""Snapshot planning: per-range progress records, where they are stored, and the plan of key ranges.

``SnapshotJob`` is one changefeed's snapshot seen from the driver: where it reads (the upstream at
the handover point S), where its state lives (the changefeed's ``snapshot`` folder of the data dir,
never a server's claim of it: ``plan.json``, ``done.json`` and the spool), and ``plan``, which
cuts every selected table into key ranges (``capture.snapshot``) and records one ``RangeState`` per
range in a ``RangeStore`` (a JSON object per range in the data dir, or the meta database's
``range_progress`` table). ``SnapshotTaskSpec`` is what every executor task receives.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import ConfigError, TransientError
from sparkcdc.model import TableInfo
from sparkcdc.pipeline.spark import changefeed_tasks
from sparkcdc.pipeline.state import StateDir, open_history_store, state_dir

log = logging.getLogger(__name__)

SNAPSHOT_BATCH_ID = -1
"""The batch id the snapshot rows are written under (streaming batches count from 0)."""

STAGE_SNAPSHOT = "snapshot"
STAGE_DONE = "done"
STAGE_SPLIT = "split"

MAX_INITIAL_RANGES = (1 << 16) - 1


# --------------------------------------------------------------------------- progress records


# --------------------------------------------------------------------------- progress records


@dataclass
class RangeState:
    """Progress of one key range (JSON-able; the seed design's per-range progress row)."""

    range_id: int
    schema: str
    table: str
    after: list[Any] | None
    """Exclusive lower key bound (``capture.snapshot.encode_key`` form); None: from the first key."""
    upto: list[Any] | None
    """Inclusive upper key bound; None: to the last key."""
    snapshot_version: int
    """The handover ts S the range is snapshotted for."""
    stage: str = STAGE_SNAPSHOT
    last_key: list[Any] | None = None
    """The last key copied (exclusive start of the next chunk); None: nothing copied yet."""
    rows_copied: int = 0
    files: list[str] = field(default_factory=list)
    """Spooled chunk files (relative to the spool dir), in key order."""
    estimated_rows: int = 0
    parent: int | None = None
    children: list[int] = field(default_factory=list)
    read_position: dict[str, Any] | None = None
    """Key-less tables: the binlog position of the consistent read."""
    attempts: int = 0
    """How many tasks started reading this range."""
    epoch: int = 0
    """The run of the snapshot that last wrote this record; an older run's late task may not overwrite it."""
    started_at: float = 0.0
    finished_at: float = 0.0

    @property
    def finished(self) -> bool:
        """Done or handed over to children."""
        return self.stage in (STAGE_DONE, STAGE_SPLIT)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RangeState:
        """Inverse of ``to_json``."""
        return cls(**d)


class RangeStore(Protocol):
    """Where range progress lives; must be picklable (executors save after each chunk)."""

    def load_all(self) -> list[RangeState]:
        """Every range of the changefeed's snapshot."""
        ...

    def save(self, st: RangeState) -> None:
        """Insert or replace one range's progress durably; ``StaleRangeWriter`` if a newer run owns it."""
        ...

    def get(self, st: RangeState) -> RangeState | None:
        """The stored progress of ``st``'s range (None before its first save)."""
        ...

    def clear(self) -> None:
        """Forget every range (a plan that never finished)."""
        ...

    def done_report(self) -> dict[str, Any] | None:
        """The report of a snapshot this store recorded as durable in the sink (None: not recorded here)."""
        ...

    def save_done(self, report: dict[str, Any]) -> None:
        """Record the snapshot as durable in the sink (besides ``done.json`` in the data dir)."""
        ...


class StaleRangeWriter(TransientError):
    """A task of an earlier run of the snapshot (outliving its driver) tried to write a range a newer run owns."""


def _check_epoch(stored: RangeState | None, st: RangeState) -> None:
    if stored is not None and stored.epoch > st.epoch:
        raise StaleRangeWriter(
            f"range {st.range_id} of {st.schema}.{st.table} belongs to snapshot run {stored.epoch}; "
            f"this task of run {st.epoch} stops"
        )


class FileRangeStore:
    """One JSON object per range in a folder of the data dir (``sparkcdc run``: the changefeed's own).

    The folder is a location string (a local path or an object-store URL), so executors on other
    hosts open the same folder. On a local (or mounted) folder a save holds a file lock while it
    checks the stored run and replaces the file; an object store has no lock, and Spark runs one
    attempt of a range's task at a time (speculation off), so the check is against older runs only.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory

    @property
    def _state(self) -> StateDir:
        return state_dir(self.directory)

    def load_all(self) -> list[RangeState]:
        """Every range, ordered by (schema, table, id)."""
        state = self._state
        out = []
        for name in state.list():
            if not name.endswith(".json"):
                continue
            d = state.read_json(name)
            if d is not None:
                out.append(RangeState.from_json(d))
        return sorted(out, key=lambda s: (s.schema, s.table, s.range_id))

    def save(self, st: RangeState) -> None:
        """Replace the range's object atomically, refusing a task of an older run."""
        state, name = self._state, f"{st.range_id}.json"
        if not state.local:
            _check_epoch(_range_or_none(state.read_json(name)), st)
            state.write_json(name, st.to_json())
            return
        import fcntl

        os.makedirs(state.local_path(), exist_ok=True)
        with open(state.local_path(name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _check_epoch(_range_or_none(state.read_json(name)), st)
            state.write_json(name, st.to_json())

    def get(self, st: RangeState) -> RangeState | None:
        """The stored progress of ``st``'s range."""
        return _range_or_none(self._state.read_json(f"{st.range_id}.json"))

    def clear(self) -> None:
        """Remove every range object."""
        self._state.remove_tree()

    def done_report(self) -> dict[str, Any] | None:
        """None: ``done.json`` beside the ranges is the one record (``SnapshotJob.is_done``)."""
        return None

    def save_done(self, report: dict[str, Any]) -> None:
        """Nothing: ``done.json`` beside the ranges is the one record."""


def _range_or_none(d: dict[str, Any] | None) -> RangeState | None:
    return RangeState.from_json(d) if d is not None else None


class MetaRangeStore:
    """Range progress in the meta database's ``range_progress`` table (for the server).

    Stage, snapshot version, last key, rows copied and parent map onto the table's
    columns; the key bounds and the spool files ride in ``last_log_position``. The rows belong
    to the changefeed (not to a server's claim of it): any server continues its snapshot. The
    finished snapshot is recorded in ``snapshot_done`` under the changefeed's identity, so a server
    whose data dir lacks ``done.json`` never copies it again.
    """

    def __init__(
        self, meta_uri: str, changefeed_id: str, namespace: str = "default", changefeed_uid: str = ""
    ) -> None:
        self.meta_uri = meta_uri
        self.changefeed_id = changefeed_id
        self.namespace = namespace
        self.changefeed_uid = changefeed_uid
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "meta_uri": self.meta_uri,
            "changefeed_id": self.changefeed_id,
            "namespace": self.namespace,
            "changefeed_uid": self.changefeed_uid,
        }

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)
        self._store = None

    def _meta(self) -> Any:
        if self._store is None:
            from sparkcdc.meta.store import MetaStore

            self._store = MetaStore.open(self.meta_uri)
        return self._store

    @staticmethod
    def _from_progress(p: Any) -> RangeState | None:
        extra = dict(p.last_log_position or {}).get("snapshot", {})
        if not extra:
            return None
        return RangeState.from_json(
            {
                **extra,
                "range_id": p.range_id,
                "schema": p.schema,
                "table": p.table,
                "snapshot_version": p.snapshot_version or 0,
                "last_key": p.last_snapshot_key,
                "rows_copied": p.rows_copied,
                "parent": p.parent_range_id,
            }
        )

    def load_all(self) -> list[RangeState]:
        """Every range of the changefeed."""
        return range_states(self._meta().get_range_progress(self.changefeed_id, self.namespace))

    def _row(self, st: RangeState) -> Any:
        rows = self._meta().get_range_progress(self.changefeed_id, self.namespace, st.schema, st.table)
        return next((p for p in rows if p.range_id == st.range_id), None)

    def get(self, st: RangeState) -> RangeState | None:
        """The stored progress of ``st``'s range."""
        row = self._row(st)
        return self._from_progress(row) if row is not None else None

    def save(self, st: RangeState) -> None:
        """Insert or compare-and-swap update the range's row."""
        from sparkcdc.meta.models import RangeProgress, RangeStage

        meta = self._meta()
        current = self._row(st)
        if current is not None:
            _check_epoch(self._from_progress(current), st)
        d = st.to_json()
        extra = {
            k: v
            for k, v in d.items()
            if k
            not in ("range_id", "schema", "table", "snapshot_version", "last_key", "rows_copied", "parent")
        }
        meta.save_range_progress(
            RangeProgress(
                changefeed_id=self.changefeed_id,
                schema=st.schema,
                table=st.table,
                range_id=st.range_id,
                stage=RangeStage.SNAPSHOT if st.stage == STAGE_SNAPSHOT else RangeStage.LOG,
                snapshot_version=st.snapshot_version,
                last_snapshot_key=st.last_key,
                last_log_position={"snapshot": extra},
                rows_copied=st.rows_copied,
                parent_range_id=st.parent,
                namespace=self.namespace,
                version=current.version if current is not None else 0,
            )
        )

    def clear(self) -> None:
        """Range rows are removed with the changefeed; a restarted plan overwrites them."""
        for st in self.load_all():
            st.stage = STAGE_SPLIT
            st.children = []
            st.files = []
            self.save(st)

    def done_report(self) -> dict[str, Any] | None:
        """The snapshot's report once recorded done for this changefeed identity."""
        report: dict[str, Any] | None = self._meta().snapshot_report(
            self.changefeed_id, self.namespace, self.changefeed_uid
        )
        return report

    def save_done(self, report: dict[str, Any]) -> None:
        """Record the snapshot done in the meta database."""
        self._meta().save_snapshot_report(self.changefeed_id, self.namespace, self.changefeed_uid, report)


def range_states(rows: list[Any]) -> list[RangeState]:
    """The snapshot ranges among a changefeed's ``range_progress`` rows (``MetaStore.get_range_progress``)."""
    out = []
    for p in rows:
        st = MetaRangeStore._from_progress(p)
        if st is not None:
            out.append(st)
    return out


@dataclass
class SnapshotTaskSpec:
    """What every snapshot task needs (picklable)."""

    upstream_uri: str
    time_zone: str
    chunk_size: int
    range_rows: dict[str, int]
    """Planned rows per range of each table (``schema.table``)."""
    split_factor: float
    spool_dir: str
    handover: dict[str, Any]
    tables: dict[str, dict[str, Any]]
    """``schema\\x00table`` → TableInfo dict (the shapes at S)."""
    store: Any
    epoch: int = 0
    """This run of the snapshot (fences tasks of earlier runs that outlive their driver)."""
    rendered: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``schema\\x00table`` → the table's ``TableRecordSQL`` fields, for tables whose CSV records the
    upstream renders; ``csv`` → the ``ServerCSV`` fields of those records."""
    sink: Any = None
    """The storage sink the rendered records are staged in (with ``rendered``)."""
    rendered_max_bytes: int = 64 << 20
    """The most one rendered chunk may hold (``capture.snapshot.RENDERED_CHUNK_MAX_BYTES``); a larger
    chunk is read again as half as many rows."""

    def info(self, schema: str, table: str) -> TableInfo:
        """The shape of a snapshotted table."""
        return TableInfo.from_dict(self.tables[f"{schema}\x00{table}"])


@dataclass
class SnapshotOptions:
    """Tuning knobs (the config's ``[snapshot]`` plus internals tests may change)."""

    chunk_size: int = 50000
    parallelism: int = 0
    ranges_per_task_slot: int = 4
    max_chunks_per_range: int = 4
    split_factor: float = 2.0
    progress_interval_s: float = 0.5
    upstream_render: bool = True
    """Let the upstream render the CSV records of a CSV storage sink's tables (``codec.csv_sql``)."""
    rendered_max_bytes: int = 64 << 20
    """The most one rendered chunk may hold (the upstream builds it in memory)."""


# --------------------------------------------------------------------------- the plan


class SnapshotJob:
    """One changefeed's initial snapshot on the driver: its inputs, its state in the data dir, its plan.

    ``InitialSnapshot`` (``pipeline.snapshot.run``) adds the run; the reading, correcting and writing
    steps take the job as their first argument.
    """

    def __init__(
        self,
        spark: Any,
        *,
        changefeed_id: str,
        upstream_uri: str,
        checkpoint_dir: str = "",
        history_path: str,
        handover: Offset,
        filter_rules: list[str],
        case_sensitive: bool = False,
        time_zone: str = "UTC",
        options: SnapshotOptions | None = None,
        store: RangeStore | None = None,
        snapshot_dir: str = "",
    ) -> None:
        """``snapshot_dir``: the snapshot's folder (default ``<checkpoint_dir>/snapshot``)."""
        self.spark = spark
        self.changefeed_id = changefeed_id
        self.upstream_uri = upstream_uri
        self.up = UpstreamConfig.from_uri(upstream_uri)
        self.state = StateDir.parse(snapshot_dir or StateDir.parse(checkpoint_dir).join("snapshot"))
        self.dir = self.state.location
        self.spool = self.state.child("rows")
        self.spool_dir = self.spool.location
        self.history_path = history_path
        self.handover = handover
        self.filter_rules = filter_rules
        self.case_sensitive = case_sensitive
        self.time_zone = time_zone
        self.options = options or SnapshotOptions()
        self.store: RangeStore = store or FileRangeStore(self.state.join("ranges"))

    # ---------------------------------------------------------------- state files
    # done.json: written once the snapshot rows are durable in the sink; plan.json: the plan of
    # ranges, written once every range's progress row exists.

    def is_done(self) -> bool:
        """Whether a previous run finished the snapshot (``done.json``, or the store's record of it)."""
        return self.done_report() is not None

    def done_report(self) -> dict[str, Any] | None:
        """The report of the run that finished the snapshot, or None."""
        done: dict[str, Any] | None = self.state.read_json("done.json")
        return done if done is not None else self.store.done_report()

    # ---------------------------------------------------------------- planning

    def tables(self) -> list[TableInfo]:
        """The selected tables as they were at the handover point."""
        from sparkcdc.capture.schema_history import SchemaHistory
        from sparkcdc.filter import changefeed_filter

        flt = changefeed_filter(self.filter_rules, self.case_sensitive)
        catalog = SchemaHistory.open(open_history_store(self.history_path)).catalog_at(self.handover.ts)
        return sorted(
            (t for t in catalog.tables() if flt.match(t.schema, t.table)), key=lambda t: (t.schema, t.table)
        )

    def task_slots(self) -> int:
        """How many ranges are read at once."""
        par = self.options.parallelism
        return par if par > 0 else changefeed_tasks(self.spark)

    def range_rows_for(self, estimated: int) -> int:
        """Rows per planned range: enough ranges for every task slot, a few chunks each."""
        chunk = self.options.chunk_size
        want = math.ceil(max(estimated, 1) / (self.task_slots() * self.options.ranges_per_task_slot))
        rows = min(max(want, chunk), chunk * self.options.max_chunks_per_range)
        return max(rows, math.ceil(estimated / MAX_INITIAL_RANGES))

    def plan(self, tables: list[TableInfo], epoch: int = 1) -> dict[str, Any]:
        """Ranges of every table, recorded in the store; resumed from ``plan.json`` when it exists."""
        from sparkcdc.capture import snapshot as cs

        plan: dict[str, Any] | None = self.state.read_json("plan.json")
        if plan is not None:
            if plan.get("handover") != self.handover.to_json():
                raise ConfigError(
                    f"the snapshot in {self.state.display} was planned for handover point {plan.get('handover')}, "
                    f"not {self.handover.to_json()}; remove the changefeed's data dir to start over"
                )
            return plan
        self.store.clear()
        self.spool.remove_tree()
        conn = self.up.connect(conv=cs.reader_conv())
        range_rows: dict[str, int] = {}
        next_id = 1
        try:
            for info in tables:
                est = cs.estimate_rows(conn, info)
                rr = self.range_rows_for(est)
                range_rows[f"{info.schema}.{info.table}"] = rr
                ranges = cs.plan_table_ranges(conn, info, rr, next_id)
                next_id += len(ranges)
                if next_id > MAX_INITIAL_RANGES:
                    raise ConfigError(
                        f"the snapshot needs more than {MAX_INITIAL_RANGES} ranges; raise [snapshot] chunk-size "
                        f"(now {self.options.chunk_size})"
                    )
                for r in ranges:
                    self.store.save(
                        RangeState(
                            range_id=r.range_id,
                            schema=r.schema,
                            table=r.table,
                            after=cs.encode_key(r.after),
                            upto=cs.encode_key(r.upto),
                            snapshot_version=self.handover.ts,
                            estimated_rows=r.estimated_rows,
                            epoch=epoch,
                        )
                    )
                log.info(
                    "snapshot of %s.%s: %d range(s) of about %d rows",
                    info.schema,
                    info.table,
                    len(ranges),
                    rr,
                )
        finally:
            conn.close()
        plan = {
            "handover": self.handover.to_json(),
            "tables": [f"{t.schema}.{t.table}" for t in tables],
            "range_rows": range_rows,
            "chunk_size": self.options.chunk_size,
            "planned_at": time.time(),
        }
        self.state.write_json("plan.json", plan)
        return plan


def balanced(items: list[tuple[int, Any]], n: int) -> list[list[Any]]:
    """``n`` groups of the items with about equal total weight, largest first (greedy)."""
    groups: list[list[Any]] = [[] for _ in range(n)]
    sizes = [0] * n
    for weight, item in sorted(items, key=lambda wi: -wi[0]):
        i = sizes.index(min(sizes))
        groups[i].append(item)
        sizes[i] += weight
    return groups
