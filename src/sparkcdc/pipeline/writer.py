"""Per-batch writing: DDL on the driver, rows in executors, commit on the driver."""

from __future__ import annotations

import json
import logging
import pickle
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import fsspec

from sparkcdc import failpoint
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.pipeline.plan import ddls_of, offset_of
from sparkcdc.pipeline.spark import changefeed_tasks, map_in_arrow
from sparkcdc.sink.base import PartitionWriter, Sink, WriterContext, table_route

if TYPE_CHECKING:
    from sparkcdc.pipeline.turns import SegmentTurn, TurnTicket

log = logging.getLogger(__name__)

RowTally = dict[tuple[str, str, str], list[int]]
"""(schema, table, op) → [row changes, bytes] of one writer task or one batch."""


def read_batch_offset(checkpoint_dir: str, batch_id: int) -> dict[str, Any]:
    """The source end offset Spark logged for a batch (``offsets/<batch_id>``, written before it runs)."""
    with fsspec.open(f"{checkpoint_dir.rstrip('/')}/offsets/{batch_id}", "r") as f:
        lines = f.read().splitlines()
    # v1 / metadata JSON / one line per source
    return json.loads(lines[2])


@dataclass
class BatchResult:
    """What one committed batch did."""

    batch_id: int
    checkpoint_ts: int
    end: dict[str, Any]
    rows: int
    ddls: int
    seconds: float
    tables: RowTally = field(default_factory=dict)
    """Row changes and bytes by (schema, table, op): the binlog bytes of their row events (row sinks:
    the size of their decoded images as shipped between Spark tasks)."""
    sink_seconds: float = 0.0
    """Time in the sink: its slowest writer task's write calls plus the commit (or the DDL)."""


def _tally_key(key: str) -> tuple[str, str, str]:
    schema, table, op = key.split("\x00")
    return schema, table, op


def _has_custom_route(sink: Sink) -> bool:
    return type(sink).route is not Sink.route


def make_router(
    sink: Sink, tables: dict[tuple[str, str], dict[str, Any]]
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow function adding the ``route`` column with the sink's own routing."""

    def route_batches(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from sparkcdc.pipeline.arrow_columns import ints

        infos: dict[Any, TableInfo] = {}
        by_table: dict[tuple[str, str], int] = {}
        per_row = sink.capabilities.route_depends_on_row
        for rb in batches:
            if per_row:
                cols = rb.to_pydict()
                routes = []
                for i in range(rb.num_rows):
                    row, info = _row_at(cols, i, tables, infos)
                    routes.append(sink.route(row, info))
            else:
                # The route is the table's: decode one row per table, not every row.
                cols = rb.select(["schema", "table"]).to_pydict()
                routes = []
                for i, key in enumerate(zip(cols["schema"], cols["table"], strict=True)):
                    r = by_table.get(key)
                    if r is None:
                        row, info = _row_at(rb.slice(i, 1).to_pydict(), 0, tables, infos)
                        r = by_table[key] = sink.route(row, info)
                    routes.append(r)
            yield rb.append_column("route", ints(routes, pa.int32()))

    return route_batches


def _row_at(
    cols: dict[str, list[Any]],
    i: int,
    tables: dict[tuple[str, str], dict[str, Any]],
    infos: dict[Any, TableInfo],
) -> tuple[RowChange, TableInfo]:
    before, after, shape = pickle.loads(cols["payload"][i])
    schema, table = cols["schema"][i], cols["table"][i]
    key: Any = shape if shape is not None else (schema, table)
    info = infos.get(key)
    if info is None:
        d = pickle.loads(shape) if shape is not None else tables[(schema, table)]
        info = infos[key] = TableInfo.from_dict(d)
    row = RowChange(
        cols["op"][i],
        schema,
        table,
        cols["table_version"][i],
        cols["commit_ts"][i],
        before,
        after,
        cols["seq"][i],
    )
    return row, info


def task_retried() -> bool:
    """Whether this Spark task runs again after a failed attempt; False outside Spark.

    (PySpark does not tell a task of a re-attempted stage, which Spark starts after a lost
    shuffle block, from a first attempt.)
    """
    try:
        from pyspark import TaskContext
    except ImportError:
        return False
    tc = TaskContext.get()
    return tc is not None and tc.attemptNumber() > 0


class RouteWriters:
    """Executor: one sink writer per route group of a task, fed rows in (commit_ts, seq) order."""

    def __init__(
        self,
        sink: Sink,
        tables: dict[tuple[str, str], dict[str, Any]],
        changefeed_id: str,
        batch_id: int,
        segment: int = 0,
        segments: int = 1,
        replay: bool | None = None,
        turn: SegmentTurn | None = None,
    ) -> None:
        self.sink = sink
        self.tables = tables
        self.changefeed_id = changefeed_id
        self.batch_id = batch_id
        self.segment = segment
        self.segments = segments
        self.replay = False if replay is None else replay or task_retried()
        """An earlier attempt of the batch (or of this task) may have published part of it; ``replay``
        None: rows that are never a replay of published ones (the initial snapshot's ranges share one
        commit_ts and are copied once by the snapshot's own state)."""
        self.turn = turn
        """The segment's place in its batch's order ("turns" sinks), given to every writer."""
        self.writers: dict[int, PartitionWriter] = {}
        self.counts: dict[int, int] = {}
        self.custom_route = _has_custom_route(sink)
        self.per_row = sink.capabilities.route_depends_on_row
        self.n_routes = max(1, sink.num_writers)
        self.table_routes: dict[tuple[str, str], int] = {}
        self.ctx_tables: dict[tuple[str, str, int], TableInfo] = {}
        self.tally: RowTally = {}
        """Rows and bytes by table and op, filled by whoever feeds the writers (they see the sizes)."""
        self.sink_seconds = 0.0

    def route(self, row: RowChange, info: TableInfo) -> int:
        """The row's route group (looked up once per table unless the sink routes by row)."""
        if self.custom_route and self.per_row:
            return self.sink.route(row, info)
        key = (row.schema, row.table)
        r = self.table_routes.get(key, -1)
        if r < 0:
            r = self.table_routes[key] = (
                self.sink.route(row, info)
                if self.custom_route
                else table_route(row.schema, row.table, self.n_routes)
            )
        return r

    def _open(self, r: int) -> PartitionWriter:
        if not self.ctx_tables:
            for d in self.tables.values():
                t = TableInfo.from_dict(d)
                self.ctx_tables[(t.schema, t.table, t.version)] = t
        ctx = WriterContext(
            self.changefeed_id,
            self.batch_id,
            r,
            0,
            self.ctx_tables,
            self.segment,
            self.segments,
            self.replay,
            self.turn,
        )
        w = self.writers[r] = self.sink.open_writer(ctx)
        self.counts[r] = 0
        return w

    def write(self, row: RowChange, info: TableInfo, r: int) -> None:
        """Write one row to route group ``r``."""
        t0 = time.perf_counter()
        w = self.writers.get(r)
        if w is None:
            w = self._open(r)
        w.write(row, info)
        self.counts[r] += 1
        self.sink_seconds += time.perf_counter() - t0

    def write_rows(self, rows: list[RowChange], info: TableInfo) -> None:
        """Write consecutive row changes of one table in one transaction, each to its route group."""
        if self.custom_route and self.per_row:
            for row in rows:
                self.write(row, info, self.sink.route(row, info))
            return
        t0 = time.perf_counter()
        r = self.route(rows[0], info)
        w = self.writers.get(r)
        if w is None:
            w = self._open(r)
        w.write_rows(rows, info)
        self.counts[r] += len(rows)
        self.sink_seconds += time.perf_counter() - t0

    def close(self) -> list[str]:
        """Close every writer: the commit messages (JSON); the first also carries the task's figures.

        With a turn, the segment says it is done once every writer closed (its output is durable),
        and never before the segments ahead of it (``SegmentTurn.done`` waits for the turn)."""
        t0 = time.perf_counter()
        closed = [(r, w.close()) for r, w in self.writers.items()]
        if self.turn is not None:
            self.turn.done()
        self.sink_seconds += time.perf_counter() - t0
        out = []
        for i, (r, sink_msg) in enumerate(closed):
            msg: dict[str, Any] = {
                "route": r,
                "segment": self.segment,
                "rows": self.counts[r],
                "sink": sink_msg,
            }
            if i == 0:
                msg["tally"] = {"\x00".join(k): v for k, v in self.tally.items()}
                msg["sink_s"] = self.sink_seconds
            out.append(json.dumps(msg))
        return out

    def abort(self) -> None:
        """Abort every writer (the task failed); with a turn, the batch is given up."""
        for w in self.writers.values():
            try:
                w.abort()
            except Exception:  # the original error is the one to report
                log.exception("abort of a writer failed")
        if self.turn is not None:
            self.turn.abandon()


def make_writer(
    sink: Sink,
    tables: dict[tuple[str, str], dict[str, Any]],
    changefeed_id: str,
    batch_id: int,
    replay: bool | None = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow function writing rows (sorted by commit_ts, seq) and yielding commit messages."""

    def write_batches(batches: Iterator[Any]) -> Iterator[Any]:
        from sparkcdc.pipeline.arrow_columns import batch, strings

        out = RouteWriters(sink, tables, changefeed_id, batch_id, replay=replay)
        infos: dict[Any, TableInfo] = {}
        tally = out.tally
        try:
            for rb in batches:
                cols = rb.to_pydict()
                routes = cols.get("route")
                payloads = cols["payload"]
                for i in range(rb.num_rows):
                    row, info = _row_at(cols, i, tables, infos)
                    out.write(row, info, routes[i] if routes is not None else out.route(row, info))
                    t = tally.get((row.schema, row.table, row.op))
                    if t is None:
                        t = tally[(row.schema, row.table, row.op)] = [0, 0]
                    t[0] += 1
                    t[1] += len(payloads[i])
            msgs = out.close()
        except BaseException:
            out.abort()
            raise
        if msgs:
            yield batch({"msg": strings(msgs)})

    return write_batches


def make_segment_writer(
    sink: Sink,
    tables: dict[tuple[str, str], dict[str, Any]],
    changefeed_id: str,
    batch_id: int,
    segments: list[str] | None = None,
    replay: bool = False,
    ticket: TurnTicket | None = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow function over segment rows (``SEGMENT_SCHEMA``): decode each segment and write it.

    With ``segments`` (their JSON, shipped with the function), the input rows are ``spark.range``
    ids instead: row ``i`` stands for ``segments[i]``. The rows of a segment are decoded and
    written by the same Python process, in commit order; segments of one batch run in parallel
    tasks and the sink orders their output at commit, or, with ``ticket`` ("turns" sinks), the
    segments take turns at sending it (``pipeline.turns``).
    """

    def write_segments(batches: Iterator[Any]) -> Iterator[Any]:
        from sparkcdc.pipeline.arrow_columns import batch, strings
        from sparkcdc.pipeline.source import BinlogPartition, iter_segment_batches

        msgs: list[str] = []
        for rb in batches:
            if segments is None:
                texts = rb.column("segment").to_pylist()
            else:
                texts = [segments[i] for i in rb.column("id").to_pylist()]
            for text in texts:
                part = BinlogPartition.from_json(text)
                turn = None
                if ticket is not None and part.count > 1:
                    from sparkcdc.pipeline.turns import SegmentTurn

                    turn = SegmentTurn(ticket, part.index)
                out = RouteWriters(
                    sink, tables, changefeed_id, batch_id, part.index, part.count, replay, turn
                )
                fallback: dict[tuple[str, str], TableInfo] = {}
                try:
                    for rows, info, _own in iter_segment_batches(part, out.tally):
                        if info is None:
                            key = (rows[0].schema, rows[0].table)
                            info = fallback.get(key)
                            if info is None:
                                info = fallback[key] = TableInfo.from_dict(tables[key])
                        out.write_rows(rows, info)
                    msgs.extend(out.close())
                except BaseException:
                    out.abort()
                    raise
        if msgs:
            yield batch({"msg": strings(msgs)})

    return write_segments


class BatchWriter:
    """The ``foreachBatch`` function of a changefeed."""

    def __init__(
        self,
        sink: Sink,
        checkpoint_dir: str,
        history_path: str,
        changefeed_id: str,
        on_commit: Callable[[BatchResult], None],
        segments_mode: bool = False,
        segments_dir: str = "",
        before_resolved: Callable[[BatchResult], None] | None = None,
        before_write: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        from sparkcdc.capture.schema_history import SchemaHistory
        from sparkcdc.pipeline.state import open_history_store

        self.sink = sink
        self.checkpoint_dir = checkpoint_dir
        self.history_store = open_history_store(history_path)
        self.history_cls = SchemaHistory
        self.changefeed_id = changefeed_id
        self.on_commit = on_commit
        self.segments_mode = segments_mode
        """The stream's rows are segments (source option ``mode = "segments"``), decoded by the writers."""
        self.segments_dir = segments_dir
        """Where the source's runner leaves each batch's segments (source option ``segments-dir``)."""
        self.before_resolved = before_resolved
        """Saves a batch without transactions (a raised chain state) before the sink publishes its ts."""
        self.before_write = before_write
        """Records the end of a batch with rows before its writers run (``planned.json``): a resume
        from its start plans the same batch again (``SourceSpec.first_batch``)."""
        self.replay = True
        """The next batch may repeat what the sink published: the first one after a start or a
        failure, and every one that ends below the checkpoint the sink's output already held."""

    def __call__(self, df: Any, batch_id: int) -> None:
        try:
            end_ts = self._batch(df, batch_id)
        except BaseException:
            self.replay = True
            raise
        self.replay = end_ts < self.sink.published_checkpoint()

    def _batch(self, df: Any, batch_id: int) -> int:
        """Write and commit one batch; its checkpoint."""
        t0 = time.monotonic()
        end = read_batch_offset(self.checkpoint_dir, batch_id)
        end_off = offset_of(end)
        ddls = ddls_of(end)
        for d in ddls or []:
            log.info("applying DDL at %d: %s", d.commit_ts, d.query)
            self.sink.apply_ddl(d)
        if not end.get("segments"):
            # A DDL batch, or a resolved one (no transaction, the checkpoint moves): nothing for executors.
            ddls = ddls or []
            t_sink = time.monotonic()
            if not ddls and self.before_resolved is not None:
                # The chain state is durable before the sink publishes a checkpoint derived from it.
                self.before_resolved(BatchResult(batch_id, end_off.ts, end, 0, 0, 0.0))
            self.sink.commit(batch_id, [], end_off.ts)
            failpoint.hit("after-sink-commit")
            done = time.monotonic()
            self.on_commit(
                BatchResult(batch_id, end_off.ts, end, 0, len(ddls), done - t0, sink_seconds=done - t_sink)
            )
            return end_off.ts
        # A DDL with rows of its own transaction (CREATE TABLE ... SELECT) was applied above.
        if self.before_write is not None:
            self.before_write(end)
        if self.segments_mode:
            res = self._write_segments(df, batch_id, end_off.ts, end)
        else:
            res = self._write_df(df, batch_id, end_off.ts, int(end.get("segments", 2)), self.replay)
        failpoint.hit("after-sink-commit")
        self.on_commit(
            BatchResult(
                batch_id,
                end_off.ts,
                end,
                res.rows,
                len(ddls or []),
                time.monotonic() - t0,
                res.tables,
                res.sink_seconds,
            )
        )
        return end_off.ts

    def write_rows(self, df: Any, batch_id: int, checkpoint_ts: int) -> BatchResult:
        """Write a DataFrame of rows (``SOURCE_SCHEMA``) as one batch committed at ``checkpoint_ts``.

        For rows that do not come from a streaming batch (the initial snapshot): no DDL, the
        shapes are the schema history's at ``checkpoint_ts``, and ``on_commit`` is not called.
        """
        return self._write_df(df, batch_id, checkpoint_ts, segments=2, replay=None)

    def _tables_at(self, checkpoint_ts: int) -> dict[tuple[str, str], dict[str, Any]]:
        history = self.history_cls.open(self.history_store)
        catalog = history.catalog_at(checkpoint_ts)
        return {(t.schema, t.table): t.to_dict() for t in catalog.tables()}

    def _commit_messages(self, out: Any, batch_id: int, checkpoint_ts: int) -> BatchResult:
        """Run the write job ``out`` (a DataFrame of commit messages), then commit the sink."""
        t0 = time.monotonic()
        messages = [json.loads(r.msg) for r in out.collect()]
        messages.sort(key=lambda m: (m.get("segment", 0), m["route"]))
        rows = sum(m["rows"] for m in messages)
        tables: RowTally = {}
        for m in messages:
            for key, (n, size) in m.get("tally", {}).items():
                t = tables.setdefault(_tally_key(key), [0, 0])
                t[0] += n
                t[1] += size
        t_commit = time.monotonic()
        self.sink.commit(batch_id, [m["sink"] for m in messages], checkpoint_ts)
        done = time.monotonic()
        # Writer tasks run in parallel: the slowest one's time in the sink, then the driver's commit.
        sink_s = max((float(m.get("sink_s", 0.0)) for m in messages), default=0.0) + done - t_commit
        return BatchResult(batch_id, checkpoint_ts, {}, rows, 0, done - t0, tables, sink_s)

    def _write_segments(self, df: Any, batch_id: int, checkpoint_ts: int, end: dict[str, Any]) -> BatchResult:
        """Each segment row: one task decodes the segment and writes it (no shuffle).

        The segments the source's runner left when Spark planned the batch go to the writers with
        the writer function, over a ``spark.range`` with one partition per segment, so no executor
        task runs a Python worker only to read them from the stream (and the segments, which
        hold the upstream URI, are not literals of a plan that Spark's UI would show); ``df``,
        which yields the same rows, is read when they are missing.
        """
        from sparkcdc.pipeline.source import drop_planned_segments, read_planned_segments

        segments = read_planned_segments(self.segments_dir, end) if self.segments_dir else None
        if segments is not None:
            df = df.sparkSession.range(0, len(segments), 1, len(segments))
        tables = self._tables_at(checkpoint_ts)
        desk = ticket = None
        if self.sink.capabilities.segments == "turns" and int(end.get("segments", 1)) > 1:
            from sparkcdc.pipeline.turns import turn_desk

            desk = turn_desk(df.sparkSession)
            ticket = desk.open(f"changefeed {self.changefeed_id} batch {batch_id}")
        out = map_in_arrow(
            df,
            make_segment_writer(
                self.sink, tables, self.changefeed_id, batch_id, segments, self.replay, ticket
            ),
            "msg string",
        )
        try:
            res = self._commit_messages(out, batch_id, checkpoint_ts)
        finally:
            if desk is not None and ticket is not None:
                desk.close(ticket)
        if segments is not None:
            drop_planned_segments(self.segments_dir, end)
        return res

    def _write_df(
        self, df: Any, batch_id: int, checkpoint_ts: int, segments: int, replay: bool | None
    ) -> BatchResult:
        """Route, order and write a DataFrame of rows, then commit the sink at ``checkpoint_ts``."""
        from pyspark.sql import functions as F

        tables = self._tables_at(checkpoint_ts)
        sink = self.sink
        n = max(1, sink.num_writers)
        if segments <= 1:
            # One source partition: rows already arrive in (commit_ts, seq) order and one task
            # writes every route group, so no shuffle and no sort.
            shaped = df
        elif n == 1:
            shaped = df.coalesce(1).sortWithinPartitions("commit_ts", "seq")
        else:
            if _has_custom_route(sink):
                from pyspark.sql.types import IntegerType, StructField, StructType

                schema = StructType([*df.schema.fields, StructField("route", IntegerType(), False)])
                routed = map_in_arrow(df, make_router(sink, tables), schema)
            else:
                routed = df.withColumn(
                    "route",
                    F.pmod(
                        F.crc32(F.encode(F.concat(F.col("schema"), F.col("table")), "UTF-8")), F.lit(n)
                    ).cast("int"),
                )
            # Several route groups may share a Spark task: the writer function keeps one writer per group.
            tasks = min(n, changefeed_tasks(df.sparkSession))
            shaped = routed.repartition(tasks, "route").sortWithinPartitions("commit_ts", "seq")
        out = map_in_arrow(
            shaped, make_writer(sink, tables, self.changefeed_id, batch_id, replay), "msg string"
        )
        return self._commit_messages(out, batch_id, checkpoint_ts)
