"""The initial snapshot as Spark work: ranges read in parallel, corrected to the handover point, written once.

``run_initial_snapshot`` runs before the streaming query of a changefeed with
``[snapshot] mode = "initial"``. With S = the changefeed's start offset (the
handover point) it

1. plans key ranges of every selected table (``capture.snapshot``) and records one
   ``RangeState`` per range in a ``RangeStore`` (a JSON file per range in the
   checkpoint dir, or the meta database's ``range_progress`` table);
2. reads the ranges as Spark tasks, chunk by chunk, spooling each chunk as a parquet
   file under ``<checkpoint>/snapshot/rows/<range id>/`` and recording progress after
   each chunk (a crash resumes every range after its last finished chunk; a finished
   range is never read again). A range that grows past ``split_factor`` times its
   planned size hands its remaining key space to child ranges, which inherit its
   progress and run in the next round;
3. reads the binlog ``(S, H]`` (H = the head once every range finished) in executor
   tasks and keeps, per touched key, the first event's before image;
4. writes ``spool ⋈̸ corrections ∪ corrections' rows`` (op ``I``, commit_ts = S.ts)
   through the sink with the changefeed's ``BatchWriter``, as one batch committed at
   S.ts, and marks the snapshot done. The streaming query then starts from S.

Everything the sink receives is the upstream state at S followed (by the stream) by
every change after S: exact, whatever the concurrent write load.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import ConfigError, SchemaError, StateStorageError, TransientError
from sparkcdc.model import TableInfo
from sparkcdc.pipeline.state import StateDir, check_executors_see, open_history_store, state_dir

log = logging.getLogger(__name__)

SNAPSHOT_BATCH_ID = -1
"""The batch id the snapshot rows are written under (streaming batches count from 0)."""

STAGE_SNAPSHOT = "snapshot"
STAGE_DONE = "done"
STAGE_SPLIT = "split"

MAX_INITIAL_RANGES = (1 << 16) - 1


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


def _range_or_none(d: dict[str, Any] | None) -> RangeState | None:
    return RangeState.from_json(d) if d is not None else None


class MetaRangeStore:
    """Range progress in the meta database's ``range_progress`` table (for the server).

    Stage, snapshot version, last key, rows copied and parent map onto the table's
    columns; the key bounds and the spool files ride in ``last_log_position``.
    """

    def __init__(self, meta_uri: str, changefeed_id: str, namespace: str = "default") -> None:
        self.meta_uri = meta_uri
        self.changefeed_id = changefeed_id
        self.namespace = namespace
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"meta_uri": self.meta_uri, "changefeed_id": self.changefeed_id, "namespace": self.namespace}

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
        out = []
        for p in self._meta().get_range_progress(self.changefeed_id, self.namespace):
            st = self._from_progress(p)
            if st is not None:
                out.append(st)
        return out

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


# --------------------------------------------------------------------------- executor work


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


def _write_parquet(
    spool: StateDir, rel: str, schema: str, table: str, version: int, keys: list[str], payloads: list[bytes]
) -> None:
    import pyarrow as pa

    n = len(keys)
    t = pa.Table.from_arrays(
        [
            pa.array([schema] * n, pa.string()),
            pa.array([table] * n, pa.string()),
            pa.array([version] * n, pa.int64()),
            pa.array(keys, pa.string()),
            pa.array(payloads, pa.binary()),
        ],
        names=SPOOL_COLUMNS,
    )
    spool.write_parquet(rel, t)


SPOOL_COLUMNS = ["schema", "table", "table_version", "key", "payload"]
SPOOL_SCHEMA = "`schema` string, `table` string, table_version long, key string, payload binary"


def read_range(spec: SnapshotTaskSpec, st: RangeState) -> RangeState:
    """Executor: copy one range chunk by chunk from its last finished chunk; return its final state.

    The stored progress wins over ``st`` (the state when the round was planned): a task retried after
    its executor was lost skips the ranges its first attempt finished and resumes the one it was in.
    """
    from sparkcdc.capture import snapshot as cs

    st = spec.store.get(st) or st
    if st.finished:
        return st
    info = spec.info(st.schema, st.table)
    up = UpstreamConfig.from_uri(spec.upstream_uri)
    st.attempts += 1
    st.epoch = spec.epoch
    st.started_at = st.started_at or time.time()
    spec.store.save(st)
    conn = up.connect(conv=cs.reader_conv())
    try:
        if not info.handle_key:
            return _read_keyless(spec, st, info, up, conn)
        conv = cs.RowConverter(info, spec.time_zone)
        upto = cs.decode_key(st.upto)
        after = cs.decode_key(st.last_key) if st.last_key is not None else cs.decode_key(st.after)
        range_rows = spec.range_rows.get(f"{st.schema}.{st.table}", spec.chunk_size)
        read_chunk = _chunk_reader(spec, st, info, conv, conn)
        while True:
            after, last = read_chunk(after, upto)
            if after is not None:
                st.last_key = cs.encode_key(after)
            if last:
                st.stage = STAGE_DONE
                st.finished_at = time.time()
                spec.store.save(st)
                return st
            if (
                st.rows_copied >= spec.split_factor * max(range_rows, st.estimated_rows, 1)
                and cs.range_depth(st.range_id) < cs.MAX_SPLIT_DEPTH
            ):
                children = cs.split_remaining(conn, info, st.range_id, after, upto, range_rows)
                if len(children) > 1:
                    for ch in children:
                        spec.store.save(
                            RangeState(
                                range_id=ch.range_id,
                                schema=st.schema,
                                table=st.table,
                                after=cs.encode_key(ch.after),
                                upto=cs.encode_key(ch.upto),
                                snapshot_version=st.snapshot_version,
                                last_key=st.last_key if ch.after == after else None,
                                estimated_rows=ch.estimated_rows,
                                parent=st.range_id,
                                epoch=spec.epoch,
                            )
                        )
                    st.stage = STAGE_SPLIT
                    st.children = [c.range_id for c in children]
                    st.finished_at = time.time()
                    spec.store.save(st)
                    log.info(
                        "range %d of %s.%s grew past %d rows: handed its remaining keys to ranges %s",
                        st.range_id,
                        st.schema,
                        st.table,
                        st.rows_copied,
                        st.children,
                    )
                    return st
            spec.store.save(st)
    finally:
        conn.close()


def _chunk_reader(
    spec: SnapshotTaskSpec, st: RangeState, info: TableInfo, conv: Any, conn: Any
) -> Callable[[Any, Any], tuple[Any, bool]]:
    """``read(after, upto) -> (new after, last chunk)``: spools one chunk of a range and counts its rows."""
    from sparkcdc.capture import snapshot as cs
    from sparkcdc.codec.csv_sql import TableRecordSQL

    key_idx = info.handle_key_index

    def spool_rows(raw: list[tuple[Any, ...]], rel: str) -> None:
        from sparkcdc.pipeline.serde import dump_images

        keys: list[str] = []
        payloads: list[bytes] = []
        for r in raw:
            row = conv.convert(r)
            keys.append(cs.key_token(row[i] for i in key_idx))
            payloads.append(dump_images(None, row, None))
        _write_parquet(state_dir(spec.spool_dir), rel, st.schema, st.table, info.version, keys, payloads)
        st.files.append(rel)

    def read_rows(after: Any, upto: Any) -> tuple[Any, bool]:
        raw = cs.read_chunk(conn, info, after, upto, spec.chunk_size)
        if raw:
            spool_rows(raw, f"{st.range_id}/{spec.epoch}-{st.rows_copied + len(raw):012d}.parquet")
            after = tuple(raw[-1][i] for i in key_idx)
            st.rows_copied += len(raw)
        return after, len(raw) < spec.chunk_size

    rec_fields = spec.rendered.get(f"{st.schema}\x00{st.table}")
    if rec_fields is None:
        return read_rows
    rec = TableRecordSQL(**rec_fields)
    max_bytes = cs.records_session(conn, spec.rendered_max_bytes)
    limit = spec.chunk_size

    def read_rendered(after: Any, upto: Any) -> tuple[Any, bool]:
        nonlocal limit
        while True:
            try:
                chunk = cs.read_rendered_chunk(conn, info, rec, after, upto, limit, max_bytes)
                break
            except cs.ChunkTooLarge:
                if limit == 1:
                    raise
                limit = max(1, limit // 2)
        n = chunk.rows + len(chunk.others)
        if n:
            base = f"{st.range_id}/{spec.epoch}-{st.rows_copied + n:012d}"
            if chunk.rows:
                _stage_chunk(spec, st, info, base, chunk)
                st.files.append(base + RECORDS_SUFFIX)
            if chunk.others:
                spool_rows(chunk.others, base + ".parquet")
            st.rows_copied += n
        return chunk.upto, chunk.last

    return read_rendered


def _stage_chunk(spec: SnapshotTaskSpec, st: RangeState, info: TableInfo, base: str, chunk: Any) -> None:
    """Write a rendered chunk as staged data files of the snapshot batch; the spool records where they are."""
    from sparkcdc.codec.csv_sql import split_records
    from sparkcdc.sink.storage.writer import cut_records, stage_records

    sink, csv = spec.sink, spec.rendered["csv"]
    file_size = sink.settings.file_size
    pieces = [(chunk.records, chunk.rows)]
    if len(chunk.records) > file_size:
        records = split_records(chunk.records, csv["quote"].encode(), csv["terminator"].encode())
        pieces = cut_records(records, file_size)
    name = f"r{st.range_id}-e{spec.epoch}-{st.rows_copied:012d}"
    staged = stage_records(
        sink.settings, sink.changefeed_id, SNAPSHOT_BATCH_ID, name, info, info.version, pieces
    )
    meta = {
        "schema": st.schema,
        "table": st.table,
        "table_version": info.version,
        "key_field": spec.rendered[f"{st.schema}\x00{st.table}"]["key_field"],
        "key_head": spec.rendered[f"{st.schema}\x00{st.table}"]["key_head"],
        "pieces": [{"entry": entry, "rows": count} for entry, count in staged],
        "csv": csv,
    }
    state_dir(spec.spool_dir).write_json(base + RECORDS_SUFFIX, meta)


RECORDS_SUFFIX = ".records.json"
"""The spool entry of a rendered chunk: its staged data files, their record counts and the key's field."""


def _read_keyless(
    spec: SnapshotTaskSpec, st: RangeState, info: TableInfo, up: UpstreamConfig, conn: Any
) -> RangeState:
    """One consistent read of a key-less table, undone back to S as a multiset (see ``undo_changes``)."""
    from sparkcdc.capture import snapshot as cs
    from sparkcdc.capture.reader import RowReader, TableShapes
    from sparkcdc.model import RowChange
    from sparkcdc.pipeline.serde import dump_images

    start = Offset.from_json(spec.handover)
    conv = cs.RowConverter(info, spec.time_zone)
    reads = cs.consistent_read_all(conn, info, spec.chunk_size)
    pos = next(reads)
    assert isinstance(pos, tuple)
    read_at = Offset(pos[0], pos[1], 0)
    delta = cs.MultisetDelta()
    for ev in RowReader(
        up,
        start,
        read_at,
        shapes=TableShapes(lambda s, t: info if (s, t) == (info.schema, info.table) else None),
        match=lambda s, t: (s, t) == (info.schema, info.table),
        time_zone=spec.time_zone,
        blocking=False,
    ).events():
        if isinstance(ev, RowChange):
            delta.add(ev)

    def rows() -> Iterator[tuple[Any, ...]]:
        for batch in reads:
            assert isinstance(batch, list)
            for r in batch:
                yield conv.convert(r)

    st.rows_copied = 0
    st.files = []
    buf: list[bytes] = []

    def flush() -> None:
        rel = f"{st.range_id}/{spec.epoch}-{st.rows_copied + len(buf):012d}.parquet"
        _write_parquet(
            state_dir(spec.spool_dir), rel, st.schema, st.table, info.version, [""] * len(buf), buf
        )
        st.rows_copied += len(buf)
        st.files.append(rel)
        buf.clear()

    for row in cs.undo_changes(rows(), delta):
        buf.append(dump_images(None, row, None))
        if len(buf) >= spec.chunk_size:
            flush()
    if buf:
        flush()
    st.read_position = {"file": pos[0], "pos": pos[1]}
    st.stage = STAGE_DONE
    st.finished_at = time.time()
    spec.store.save(st)
    return st


def read_corrections(
    upstream_uri: str,
    time_zone: str,
    tables: dict[str, dict[str, Any]],
    segment: tuple[dict[str, Any], dict[str, Any]],
) -> Iterator[tuple[str, str, str, int, int, bytes | None]]:
    """Executor: (schema, table, key, commit_ts, seq, state-at-S payload) of each key's first event in a segment."""
    from sparkcdc.capture import snapshot as cs
    from sparkcdc.capture.reader import RowReader, TableShapes
    from sparkcdc.model import RowChange
    from sparkcdc.pipeline.serde import dump_images

    infos = {}
    for k, d in tables.items():
        s, t = k.split("\x00", 1)
        infos[(s, t)] = TableInfo.from_dict(d)
    key_index = {k: v.handle_key_index for k, v in infos.items() if v.handle_key}
    reader = RowReader(
        UpstreamConfig.from_uri(upstream_uri),
        Offset.from_json(segment[0]),
        Offset.from_json(segment[1]),
        shapes=TableShapes(lambda s, t: infos.get((s, t))),
        match=lambda s, t: (s, t) in key_index,
        time_zone=time_zone,
        blocking=False,
    )
    events = (ev for ev in reader.events() if isinstance(ev, RowChange))
    for c in cs.first_events(events, lambda s, t: key_index.get((s, t))).values():
        yield (
            c.schema,
            c.table,
            c.key,
            c.commit_ts,
            c.seq,
            dump_images(None, c.row, None) if c.row is not None else None,
        )


# --------------------------------------------------------------------------- driver


@dataclass
class SnapshotFigures:
    """Progress of a running snapshot."""

    phase: str
    rows_copied: int
    ranges_done: int
    ranges_total: int
    rows_estimated: int
    rows_per_sec: float
    eta_s: float | None


@dataclass
class SnapshotOptions:
    """Tuning knobs (the config's ``[snapshot]`` plus internals tests may change)."""

    chunk_size: int = 50000
    parallelism: int = 0
    ranges_per_task_slot: int = 4
    max_chunks_per_range: int = 4
    split_factor: float = 2.0
    progress_interval_s: float = 1.0
    upstream_render: bool = True
    """Let the upstream render the CSV records of a CSV storage sink's tables (``codec.csv_sql``)."""
    rendered_max_bytes: int = 64 << 20
    """The most one rendered chunk may hold (the upstream builds it in memory)."""


class InitialSnapshot:
    """Driver side of one changefeed's initial snapshot (see the module docstring)."""

    def __init__(
        self,
        spark: Any,
        *,
        changefeed_id: str,
        upstream_uri: str,
        checkpoint_dir: str,
        history_path: str,
        handover: Offset,
        filter_rules: list[str],
        case_sensitive: bool = False,
        time_zone: str = "UTC",
        options: SnapshotOptions | None = None,
        store: RangeStore | None = None,
        on_figures: Callable[[SnapshotFigures], None] | None = None,
    ) -> None:
        self.spark = spark
        self.changefeed_id = changefeed_id
        self.upstream_uri = upstream_uri
        self.up = UpstreamConfig.from_uri(upstream_uri)
        self.state = StateDir.parse(checkpoint_dir).child("snapshot")
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
        self.on_figures = on_figures
        self.phase = "planning"
        self._rate: list[tuple[float, int]] = []
        self._estimated = 0

    # ---------------------------------------------------------------- state files
    # done.json: written once the snapshot rows are durable in the sink; plan.json: the plan of
    # ranges, written once every range's progress row exists.

    def is_done(self) -> bool:
        """Whether a previous run finished the snapshot."""
        return self.state.exists("done.json")

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
        return par if par > 0 else max(1, int(self.spark.sparkContext.defaultParallelism))

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

    # ---------------------------------------------------------------- progress

    def figures(self, states: list[RangeState] | None = None) -> SnapshotFigures:
        """Rows copied, ranges done/total, rate and ETA now."""
        states = states if states is not None else self.store.load_all()
        leaves = [s for s in states if s.stage != STAGE_SPLIT]
        copied = sum(s.rows_copied for s in states)
        done = sum(1 for s in leaves if s.stage == STAGE_DONE)
        now = time.monotonic()
        self._rate.append((now, copied))
        self._rate = [(t, r) for t, r in self._rate if now - t <= 30]
        rate = 0.0
        if len(self._rate) >= 2 and self._rate[-1][0] > self._rate[0][0]:
            rate = (self._rate[-1][1] - self._rate[0][1]) / (self._rate[-1][0] - self._rate[0][0])
        est = max(self._estimated, copied)
        eta = (est - copied) / rate if rate > 0 else None
        if self.phase != "reading":
            eta = 0.0 if self.phase in ("done",) else eta
        return SnapshotFigures(self.phase, copied, done, len(leaves), est, rate, eta)

    def _report(self) -> None:
        if self.on_figures is None:
            return
        try:
            self.on_figures(self.figures())
        except Exception:  # a progress callback must not break the snapshot
            log.exception("snapshot progress callback failed")

    def _monitor(self, stop: threading.Event) -> None:
        while not stop.wait(self.options.progress_interval_s):
            self._report()

    # ---------------------------------------------------------------- the run

    def run(self, write: Callable[[Any, int], int], writer: Any = None) -> dict[str, Any]:
        """Read, correct and hand the rows to ``write(df, checkpoint_ts) -> rows``; return the report.

        With a ``BatchWriter`` whose sink orders parallel segments itself, the spooled files are
        written by parallel tasks straight from the spool instead (``write`` is not called).
        """
        done = self.state.read_json("done.json")
        if done is not None:
            return dict(done)
        tables = self.tables()
        # Each run fences the tasks of earlier runs (which may outlive a killed driver for a moment).
        epoch = max((s.epoch for s in self.store.load_all()), default=0) + 1
        plan = self.plan(tables, epoch)
        infos = {f"{t.schema}\x00{t.table}": t.to_dict() for t in tables}
        self._estimated = sum(s.estimated_rows for s in self.store.load_all() if s.parent is None)
        spec = SnapshotTaskSpec(
            upstream_uri=self.upstream_uri,
            time_zone=self.time_zone,
            chunk_size=self.options.chunk_size,
            range_rows=dict(plan["range_rows"]),
            split_factor=self.options.split_factor,
            spool_dir=self.spool_dir,
            handover=self.handover.to_json(),
            tables=infos,
            store=self.store,
            epoch=epoch,
            rendered=self._rendered_tables(writer, tables),
            sink=writer.sink if writer is not None else None,
            rendered_max_bytes=self.options.rendered_max_bytes,
        )
        stop = threading.Event()
        monitor = threading.Thread(
            target=self._monitor, args=(stop,), name="sparkcdc-snapshot-progress", daemon=True
        )
        monitor.start()
        t0 = time.monotonic()
        try:
            self._check_shared()
            self.phase = "reading"
            rounds = self._read_ranges(spec)
            t_read = time.monotonic() - t0
            self.phase = "correcting"
            self._report()
            states = self.store.load_all()
            head, corrections_df, touched = self._corrections(tables)
            t_correct = time.monotonic() - t0 - t_read
            self.phase = "writing"
            self._report()
            if writer is not None and writer.sink.parallel_segments:
                rows = self._write_spool(writer, states, corrections_df, tables)
            else:
                rows = write(self._final_rows(states, corrections_df, tables), self.handover.ts)
            t_write = time.monotonic() - t0 - t_read - t_correct
            report = {
                "handover": self.handover.to_json(),
                "head": head.to_json(),
                "rows_written": rows,
                "rows_copied": sum(s.rows_copied for s in states),
                "touched_keys": touched,
                "ranges": sum(1 for s in states if s.stage == STAGE_DONE),
                "splits": sum(1 for s in states if s.stage == STAGE_SPLIT),
                "rounds": rounds,
                "read_seconds": round(t_read, 3),
                "correct_seconds": round(t_correct, 3),
                "write_seconds": round(t_write, 3),
                "seconds": round(time.monotonic() - t0, 3),
            }
            self.state.write_json("done.json", report)
            self.phase = "done"
            self._report()
            self.spool.remove_tree()
            log.info("initial snapshot of changefeed %s done: %s", self.changefeed_id, report)
            return report
        finally:
            stop.set()

    def _rendered_tables(self, writer: Any, tables: list[TableInfo]) -> dict[str, dict[str, Any]]:
        """The tables whose CSV records the upstream renders (``codec.csv_sql``), for a CSV storage sink."""
        from sparkcdc.codec.csv_sql import ServerCSV

        sink = getattr(writer, "sink", None)
        settings = getattr(sink, "settings", None)
        if not self.options.upstream_render or sink is None or not sink.parallel_segments:
            return {}
        if getattr(settings, "protocol", None) != "csv":
            return {}
        csv, why = ServerCSV.from_encoder(sink.encoder.build())
        if csv is None:
            log.info("snapshot: every table is read row by row: %s", why)
            return {}
        out: dict[str, dict[str, Any]] = {"csv": asdict(csv)}
        for info in tables:
            if not info.handle_key:
                continue
            rec, why = csv.table(info, self.handover.ts, self.time_zone)
            if rec is None:
                log.info("snapshot: %s.%s is read row by row: %s", info.schema, info.table, why)
                continue
            out[f"{info.schema}\x00{info.table}"] = asdict(rec)
        return out if len(out) > 1 else {}

    def _check_shared(self) -> None:
        """On a cluster, refuse a data dir the executors cannot read (a folder on the driver's own disk)."""
        check_executors_see(
            self.spark,
            self.state,
            f"the snapshot's executors write their progress and rows there (changefeed {self.changefeed_id})",
        )

    def _read_ranges(self, spec: SnapshotTaskSpec) -> int:
        """Spark jobs over the unfinished ranges until none is left (splits add ranges); the number of rounds."""
        sc = self.spark.sparkContext
        rounds = 0
        while True:
            pending = [s for s in self.store.load_all() if not s.finished]
            if not pending:
                return rounds
            rounds += 1
            # One task per slot, each reading its ranges one after the other (a Spark task costs ≈ 50 ms
            # of scheduling and Python worker round trips; ranges are planned to similar sizes).
            groups = _balanced(
                [(max(s.estimated_rows - s.rows_copied, 1), s.to_json()) for s in pending],
                min(len(pending), self.task_slots()),
            )
            log.info("snapshot round %d: %d range(s) in %d task(s)", rounds, len(pending), len(groups))
            sc.setJobDescription(f"sparkcdc snapshot {self.changefeed_id}: read {len(pending)} ranges")

            def task(it: Iterable[list[dict[str, Any]]], spec: SnapshotTaskSpec = spec) -> Iterator[int]:
                for group in it:
                    for d in group:
                        st = read_range(spec, RangeState.from_json(d))
                        if st.finished:
                            yield st.range_id

            finished = set(sc.parallelize(groups, len(groups)).mapPartitions(task).collect())
            unseen = sorted(
                s.range_id for s in self.store.load_all() if s.range_id in finished and not s.finished
            )
            if unseen:
                # The tasks finished these ranges, yet the driver does not see it: the executors saved
                # their progress somewhere else (a local data dir on each host). Another round would loop.
                raise StateStorageError(
                    f"the snapshot tasks finished ranges {unseen[:5]} but the driver does not see their "
                    f"progress in the data dir {self.state.display}: the data dir must be shared by the "
                    "driver and every executor; use a shared mount or an s3://, gcs:// or azure:// data dir"
                )

    def _corrections(self, tables: list[TableInfo]) -> tuple[Offset, Any, int]:
        """(H, DataFrame of first events after S per touched key or None without any, how many keys were touched)."""
        from pyspark.sql import functions as F

        from sparkcdc.capture.reader import Scanner
        from sparkcdc.pipeline.plan import split_segments

        # From S, which carries its chain state: only (S, H] is read, not the head's whole binlog file.
        head = Scanner(self.up).head(self.handover)
        snap = {(t.schema, t.table) for t in tables}
        txns = []
        cat = None
        for txn in Scanner(self.up).scan(self.handover, stop=lambda t: t.end.key() >= head.key()):
            if txn.end.key() > head.key():
                break
            if txn.queries:
                cat = cat or self._catalog_copy()
                self._check_ddl(cat, txn, snap)
            txns.append(txn)
        if not txns:
            return head, None, 0
        schema = "`schema` string, `table` string, key string, commit_ts long, seq long, payload binary"
        keyed = {f"{t.schema}\x00{t.table}": t.to_dict() for t in tables if t.handle_key}
        segs = split_segments(txns, 4 << 20, self.task_slots())
        uri, tz = self.upstream_uri, self.time_zone

        def task(it: Iterable[tuple[dict[str, Any], dict[str, Any]]]) -> Iterator[Any]:
            for seg in it:
                yield from read_corrections(uri, tz, keyed, seg)

        seg_list = [(s.start.to_json(), s.end.to_json()) for s in segs]
        self.spark.sparkContext.setJobDescription(
            f"sparkcdc snapshot {self.changefeed_id}: binlog corrections"
        )
        rdd = self.spark.sparkContext.parallelize(seg_list, len(seg_list)).mapPartitions(task)
        events = self.spark.createDataFrame(rdd, schema)
        first = (
            events.groupBy("schema", "table", "key")
            .agg(F.min(F.struct("commit_ts", "seq", "payload")).alias("f"))
            .select("schema", "table", "key", F.col("f.payload").alias("payload"))
            .cache()
        )
        touched = int(first.count())
        return head, first, touched

    def _catalog_copy(self) -> Any:
        from sparkcdc.capture.schema_history import SchemaHistory

        return (
            SchemaHistory.open(open_history_store(self.history_path)).catalog_at(self.handover.ts).snapshot()
        )

    def _check_ddl(self, cat: Any, txn: Any, snap: set[tuple[str, str]]) -> None:
        for default_schema, query in txn.queries:
            try:
                events = cat.apply_ddl(query, default_schema or None, txn.ts)
            except SchemaError as exc:
                log.warning("snapshot: cannot follow DDL %r during the snapshot: %s", query, exc.message)
                continue
            for e in events:
                hit = {(e.schema, e.table)}
                if e.old_table is not None:
                    hit.add((e.old_schema or e.schema, e.old_table))
                if hit & snap:
                    raise SchemaError(
                        f"DDL {query!r} changed a table while its initial snapshot was read; the rows read "
                        "before and after it have different shapes. Avoid DDL on the selected tables during "
                        "the snapshot and start the changefeed again with a new data dir"
                    )

    def _write_spool(
        self, writer: Any, states: list[RangeState], corrections: Any, tables: list[TableInfo]
    ) -> int:
        """Spooled rows without the touched keys, plus the touched keys' rows at S, written in parallel.

        Each task reads a group of spool files itself and writes them as one segment of the snapshot
        batch (the sink orders segments at commit): no row goes through the JVM. Chunks the upstream
        rendered are staged already: only those of tables with touched keys are rewritten, without them.
        """
        from pyspark.sql import functions as F

        spooled = [f for s in states if s.stage != STAGE_SNAPSHOT for f in s.files]
        files = [f for f in spooled if not f.endswith(RECORDS_SUFFIX)]
        # The touched keys go to every task, as the broadcast of a join would ship them.
        touched = (
            set()
            if corrections is None
            else {
                (r["schema"], r["table"], r["key"])
                for r in corrections.select("schema", "table", "key").toLocalIterator()
            }
        )
        sink_messages, rows = self._rendered_chunks(
            writer.sink, [f for f in spooled if f.endswith(RECORDS_SUFFIX)], touched, tables
        )
        groups = _balanced([(self._spool_size(f), f) for f in files], min(len(files), 2 * self.task_slots()))
        n = len(groups)
        shapes = {(t.schema, t.table): t for t in tables}
        ts = self.handover.ts
        sc = self.spark.sparkContext
        # Always staged (at least two segments): the staged rendered chunks are numbered at the same commit.
        write_part = _spool_part_writer(writer, shapes, ts, max(2, n + 1))
        msgs: list[str] = []
        if files:
            keys = sc.broadcast(touched)
            spool_dir = self.spool_dir

            def spool_task(it: Iterable[tuple[int, list[str]]]) -> Iterator[str]:
                for i, group in it:
                    yield from write_part(i, _spool_rows(spool_dir, group, keys.value))

            sc.setJobDescription(f"sparkcdc snapshot {self.changefeed_id}: write {len(files)} spooled chunks")
            msgs += sc.parallelize(list(enumerate(groups)), n).mapPartitions(spool_task).collect()
            keys.unpersist()
        if corrections is not None:

            def back_task(it: Iterable[Any]) -> Iterator[str]:
                yield from write_part(n, ((r[0], r[1], shapes[(r[0], r[1])].version, r[2]) for r in it))

            back = corrections.where(F.col("payload").isNotNull()).select("schema", "table", "payload")
            msgs += back.rdd.mapPartitions(back_task).collect()
        messages = sorted((json.loads(m) for m in msgs), key=lambda m: (m["segment"], m["route"]))
        sink_messages += [m["sink"] for m in messages]
        writer.sink.commit(SNAPSHOT_BATCH_ID, sink_messages, ts)
        return rows + sum(int(m["rows"]) for m in messages)

    def _rendered_chunks(
        self, sink: Any, entries: list[str], touched: set[tuple[str, str, str]], tables: list[TableInfo]
    ) -> tuple[list[dict[str, Any]], int]:
        """Sink commit messages of the staged rendered chunks (rewritten without touched keys), and their rows."""
        keep: list[list[Any]] = []
        rows = 0
        rewrite: list[tuple[str, int]] = []
        touched_tables = {(s, t) for s, t, _ in touched}
        for path in entries:
            meta = self.spool.read_json(path)
            if meta is None:
                raise SchemaError(
                    f"the spooled entry {self.spool.join_display(path)} is missing from the data dir"
                )
            for i, piece in enumerate(meta["pieces"]):
                if (meta["schema"], meta["table"]) in touched_tables:
                    rewrite.append((path, i))
                else:
                    keep.append(piece["entry"])
                    rows += int(piece["rows"])
        messages: list[dict[str, Any]] = [{"staged": keep, "rows": rows}]
        if rewrite:
            sc = self.spark.sparkContext
            keys = sc.broadcast(touched)
            shapes = {(t.schema, t.table): t for t in tables}
            spool_dir = self.spool_dir

            def task(it: Iterable[tuple[str, int]]) -> Iterator[str]:
                for path, i in it:
                    yield json.dumps(_without_touched(sink, spool_dir, path, i, keys.value, shapes))

            sc.setJobDescription(
                f"sparkcdc snapshot {self.changefeed_id}: drop touched keys from rendered chunks"
            )
            got = (
                sc.parallelize(rewrite, min(len(rewrite), 2 * self.task_slots()))
                .mapPartitions(task)
                .collect()
            )
            keys.unpersist()
            for m in map(json.loads, got):
                messages.append(m)
                rows += int(m["rows"])
        return messages, rows

    def _final_rows(self, states: list[RangeState], corrections: Any, tables: list[TableInfo]) -> Any:
        """Spooled rows without the touched keys, plus the touched keys' rows at S, as stream rows."""
        from pyspark.sql import functions as F

        files = [f for s in states if s.stage != STAGE_SNAPSHOT for f in s.files]
        cols = SPOOL_COLUMNS
        spool = self._spool_frame(files)
        if corrections is None:
            rows = spool
        else:
            rows = self._corrected(spool, corrections, tables, cols)
        ts = self.handover.ts
        out = rows.select(
            F.lit(ts).cast("long").alias("commit_ts"),
            F.monotonically_increasing_id().alias("seq"),
            F.lit("I").alias("op"),
            "schema",
            "table",
            "table_version",
            "payload",
        )
        return out

    def _spool_size(self, rel: str) -> int:
        size = self.spool.size(rel)
        if size is None:
            raise SchemaError(f"the spooled file {self.spool.join_display(rel)} is missing from the data dir")
        return size

    def _spool_frame(self, files: list[str]) -> Any:
        """The spooled chunks as a DataFrame, read by executors from the data dir (any storage it is on)."""
        spark = self.spark
        if not files:
            return spark.createDataFrame([], SPOOL_SCHEMA)
        groups = _balanced([(self._spool_size(f), f) for f in files], min(len(files), 2 * self.task_slots()))
        spool_dir = self.spool_dir

        def read(batches: Iterable[Any]) -> Iterator[Any]:
            spool = state_dir(spool_dir)
            for b in batches:
                for rel in b.column(0).to_pylist():
                    yield from spool.read_parquet(rel).select(SPOOL_COLUMNS).to_batches()

        names = spark.createDataFrame([(f,) for g in groups for f in g], "file string")
        # One partition per group of files of similar size.
        return names.repartition(len(groups)).mapInArrow(read, SPOOL_SCHEMA)

    def _corrected(self, spool: Any, corrections: Any, tables: list[TableInfo], cols: list[str]) -> Any:
        """The spool without the touched keys, plus the touched keys' rows at S."""
        from pyspark.sql import functions as F

        versions = self.spark.createDataFrame(
            [(t.schema, t.table, int(t.version)) for t in tables] or [("", "", 0)],
            "`schema` string, `table` string, table_version long",
        )
        keep = spool.join(
            F.broadcast(corrections.select("schema", "table", "key")), ["schema", "table", "key"], "left_anti"
        )
        back = (
            corrections.where(F.col("payload").isNotNull())
            .join(F.broadcast(versions), ["schema", "table"])
            .select(*cols)
        )
        return keep.unionByName(back)


def _balanced(items: list[tuple[int, Any]], n: int) -> list[list[Any]]:
    """``n`` groups of the items with about equal total weight, largest first (greedy)."""
    groups: list[list[Any]] = [[] for _ in range(n)]
    sizes = [0] * n
    for weight, item in sorted(items, key=lambda wi: -wi[0]):
        i = sizes.index(min(sizes))
        groups[i].append(item)
        sizes[i] += weight
    return groups


def _spool_rows(
    spool_dir: str, files: list[str], touched: set[tuple[str, str, str]]
) -> Iterator[tuple[str, str, int, bytes]]:
    """Executor: ``(schema, table, table_version, payload)`` of spooled rows whose key was not touched."""
    spool = state_dir(spool_dir)
    for rel in files:
        t = spool.read_parquet(rel)
        cols = [t.column(c).to_pylist() for c in ("schema", "table", "table_version", "key", "payload")]
        for schema, table, version, key, payload in zip(*cols, strict=True):
            if (schema, table, key) not in touched:
                yield schema, table, version, payload


def _without_touched(
    sink: Any,
    spool_dir: str,
    path: str,
    piece: int,
    touched: set[tuple[str, str, str]],
    shapes: dict[tuple[str, str], TableInfo],
) -> dict[str, Any]:
    """Executor: stage one piece of a rendered chunk again without the records of touched keys.

    The new files have new names, so a retried task finds the original piece unchanged.
    """
    from sparkcdc.codec.csv_sql import ServerCSV, record_keys, split_records
    from sparkcdc.sink.storage.writer import cut_records, stage_records

    meta = state_dir(spool_dir).read_json(path)
    if meta is None:
        raise SchemaError(f"the spooled entry {path} of the snapshot is missing from the data dir")
    schema, table = meta["schema"], meta["table"]
    entry = meta["pieces"][piece]["entry"]
    data = sink.settings.backend.read(entry[4])
    if data is None:
        raise SchemaError(f"the staged snapshot file {entry[4]} of {schema}.{table} is missing")
    server = ServerCSV(**meta["csv"])
    records = split_records(data, server.quote.encode(), server.terminator.encode())
    keys = record_keys(records, server.decoder(), int(meta["key_field"]), meta["key_head"])
    kept = [r for r, k in zip(records, keys, strict=True) if (schema, table, k) not in touched]
    name = os.path.basename(entry[4]).rsplit(".", 1)[0] + "-kept"
    staged = (
        stage_records(
            sink.settings,
            sink.changefeed_id,
            SNAPSHOT_BATCH_ID,
            name,
            shapes[(schema, table)],
            int(meta["table_version"]),
            cut_records(kept, sink.settings.file_size),
        )
        if kept
        else []
    )
    return {"staged": [e for e, _ in staged], "rows": len(kept)}


def _spool_part_writer(
    writer: Any, shapes: dict[tuple[str, str], TableInfo], ts: int, segments: int
) -> Callable[[int, Iterable[tuple[str, str, int, bytes]]], Iterator[str]]:
    """Executor function writing one segment of snapshot rows (op ``I`` at ``ts``); yields commit messages."""
    import pickle

    from sparkcdc.model import RowChange
    from sparkcdc.pipeline.writer import RouteWriters

    sink, cf = writer.sink, writer.changefeed_id
    tables = {k: v.to_dict() for k, v in shapes.items()}

    def write_part(segment: int, rows: Iterable[tuple[str, str, int, bytes]]) -> Iterator[str]:
        out = RouteWriters(sink, tables, cf, SNAPSHOT_BATCH_ID, segment, segments)
        try:
            for seq, (schema, table, version, payload) in enumerate(rows):
                info = shapes[(schema, table)]
                after = pickle.loads(payload)[1]
                row = RowChange("I", schema, table, version, ts, None, after, seq)
                out.write(row, info, out.route(row, info))
            msgs = out.close()
        except BaseException:
            out.abort()
            raise
        yield from msgs

    return write_part


def run_initial_snapshot(
    spark: Any,
    *,
    changefeed_id: str,
    upstream_uri: str,
    checkpoint_dir: str,
    history_path: str,
    handover: Offset,
    config: Any,
    writer: Any,
    on_figures: Callable[[SnapshotFigures], None] | None = None,
    store: RangeStore | None = None,
) -> dict[str, Any]:
    """Run (or resume, or skip when done) the snapshot of a changefeed; return its report."""
    snap = InitialSnapshot(
        spark,
        changefeed_id=changefeed_id,
        upstream_uri=upstream_uri,
        checkpoint_dir=checkpoint_dir,
        history_path=history_path,
        handover=handover,
        filter_rules=list(config.filter.rules),
        case_sensitive=config.case_sensitive,
        time_zone=config.time_zone,
        options=SnapshotOptions(
            chunk_size=config.snapshot.chunk_size,
            parallelism=config.snapshot.parallelism,
            upstream_render=config.snapshot.upstream_render,
        ),
        store=store,
        on_figures=on_figures,
    )
    if snap.is_done():
        return snap.run(lambda df, ts: 0)
    if StateDir.parse(checkpoint_dir).exists("checkpoint.json"):
        raise ConfigError(
            f"changefeed {changefeed_id!r} already streamed changes without an initial snapshot; [snapshot] mode = "
            '"initial" only applies to a new changefeed: create one with a new id (or data dir)'
        )

    def write(df: Any, ts: int) -> int:
        return int(writer.write_rows(df, SNAPSHOT_BATCH_ID, ts).rows)

    return snap.run(write, writer)


def snapshot_progress(
    running: Any, on_progress: Callable[[Any], None] | None
) -> Callable[[SnapshotFigures], None] | None:
    """Forward snapshot figures as the changefeed's ``Progress`` (with its snapshot fields set)."""
    if on_progress is None:
        return None
    import dataclasses

    def report(f: SnapshotFigures) -> None:
        p = running.progress()
        on_progress(
            dataclasses.replace(
                p,
                rows_per_sec=f.rows_per_sec,
                snapshot_phase=f.phase,
                snapshot_rows=f.rows_copied,
                snapshot_ranges_done=f.ranges_done,
                snapshot_ranges_total=f.ranges_total,
                snapshot_eta_s=f.eta_s,
            )
        )

    return report
