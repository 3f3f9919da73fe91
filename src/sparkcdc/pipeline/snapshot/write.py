"""Writing the snapshot: the spool corrected to S, into the sink as one batch committed at S.ts.

With a sink that orders parallel segments itself, ``write_spool`` has each task read a group of
spool files and write them as one segment (no row goes through the JVM); the chunks the upstream
rendered are staged already and only rewritten when their table has touched keys. Otherwise
``final_rows`` is the corrected spool as stream rows (op ``I``, commit_ts = S.ts) for the
changefeed's ``BatchWriter``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sparkcdc.errors import SchemaError
from sparkcdc.model import TableInfo
from sparkcdc.pipeline.snapshot.correct import corrected
from sparkcdc.pipeline.snapshot.plan import (
    SNAPSHOT_BATCH_ID,
    STAGE_SNAPSHOT,
    RangeState,
    SnapshotJob,
    balanced,
)
from sparkcdc.pipeline.snapshot.spool import (
    RECORDS_SUFFIX,
    SPOOL_COLUMNS,
    spool_frame,
    spool_rows,
    spool_size,
    without_touched,
)


def write_spool(
    job: SnapshotJob, writer: Any, states: list[RangeState], corrections: Any, tables: list[TableInfo]
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
    sink_messages, rows = _rendered_chunks(
        job, writer.sink, [f for f in spooled if f.endswith(RECORDS_SUFFIX)], touched, tables
    )
    groups = balanced([(spool_size(job, f), f) for f in files], min(len(files), 2 * job.task_slots()))
    n = len(groups)
    shapes = {(t.schema, t.table): t for t in tables}
    ts = job.handover.ts
    sc = job.spark.sparkContext
    # Always staged (at least two segments): the staged rendered chunks are numbered at the same commit.
    write_part = _spool_part_writer(writer, shapes, ts, max(2, n + 1))
    msgs: list[str] = []
    if files:
        keys = sc.broadcast(touched)
        spool_dir = job.spool_dir

        def spool_task(it: Iterable[tuple[int, list[str]]]) -> Iterator[str]:
            for i, group in it:
                yield from write_part(i, spool_rows(spool_dir, group, keys.value))

        sc.setJobDescription(f"sparkcdc snapshot {job.changefeed_id}: write {len(files)} spooled chunks")
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


def direct_groups(sink: Any) -> str | None:
    """How the spool goes to a sink without the DataFrame path, or None when it must take it.

    ``"parallel"``: a sink whose own order of a batch spans its route groups (Kafka) takes the snapshot's rows in
    any order (one commit_ts, INSERTs of distinct keys): tasks write groups of spool files at once.
    ``"routes"``: every other sink that routes by table gets each of its route groups in one task, as
    the DataFrame path gives them, without the shuffle and sort (the rows share one commit_ts).
    """
    caps = sink.capabilities
    if caps.segments == "parallel":
        return None
    if caps.segments in ("turns", "serial"):
        return "parallel"
    if caps.route_depends_on_row:
        return None
    return "routes"


def write_direct(
    job: SnapshotJob, writer: Any, states: list[RangeState], corrections: Any, tables: list[TableInfo]
) -> int:
    """Spooled rows without the touched keys, plus the touched keys' rows at S, written by tasks that
    read the spool files themselves (``direct_groups``), committed as one batch at S.ts."""
    from sparkcdc.model import RowChange
    from sparkcdc.pipeline.writer import _has_custom_route
    from sparkcdc.sink.base import table_route

    sink = writer.sink
    how = direct_groups(sink)
    assert how is not None
    files = [f for s in states if s.stage != STAGE_SNAPSHOT for f in s.files]
    shapes = {(t.schema, t.table): t for t in tables}
    touched: set[tuple[str, str, str]] = set()
    back: list[tuple[str, str, int, bytes]] = []
    if corrections is not None:
        for r in corrections.select("schema", "table", "key", "payload").toLocalIterator():
            touched.add((r["schema"], r["table"], r["key"]))
            if r["payload"] is not None:
                back.append(
                    (r["schema"], r["table"], shapes[(r["schema"], r["table"])].version, r["payload"])
                )
    ts = job.handover.ts
    slots = job.task_slots()
    if how == "parallel":
        groups: list[tuple[list[str], list[tuple[str, str, int, bytes]]]] = [
            (g, []) for g in balanced([(spool_size(job, f), f) for f in files], min(len(files), 2 * slots))
        ]
        if back or not groups:
            groups.append(([], back))
    else:
        n = max(1, sink.num_writers)
        custom = _has_custom_route(sink)

        def route_of(schema: str, table: str) -> int:
            if not custom:
                return table_route(schema, table, n)
            info = shapes[(schema, table)]
            row = RowChange("I", schema, table, info.version, ts, None, (None,) * len(info.columns), 0)
            return int(sink.route(row, info))

        by_route: dict[int, tuple[list[str], list[tuple[str, str, int, bytes]]]] = {}
        file_table = {f: (s.schema, s.table) for s in states if s.stage != STAGE_SNAPSHOT for f in s.files}
        for f in files:
            by_route.setdefault(route_of(*file_table[f]), ([], []))[0].append(f)
        for b in back:
            by_route.setdefault(route_of(b[0], b[1]), ([], []))[1].append(b)
        weights = [(sum(spool_size(job, f) for f in fs) + 1, (fs, bs)) for fs, bs in by_route.values()]
        groups = [
            ([f for g in grp for f in g[0]], [b for g in grp for b in g[1]])
            for grp in balanced(weights, min(len(weights), slots))
        ] or [([], [])]
    write_part = _spool_part_writer(writer, shapes, ts, len(groups))
    keys = job.spark.sparkContext.broadcast(touched)
    spool_dir = job.spool_dir
    per_file = how == "parallel"

    def task(it: Iterable[tuple[int, tuple[list[str], list[tuple[str, str, int, bytes]]]]]) -> Iterator[str]:
        for i, (group, rows_back) in it:
            if per_file:
                # One writer per spool file: a writer holds what it was given until it closes.
                for rel in group:
                    yield from write_part(i, spool_rows(spool_dir, [rel], keys.value))
                if rows_back:
                    yield from write_part(i, iter(rows_back))
            else:
                yield from write_part(i, _chain(spool_rows(spool_dir, group, keys.value), rows_back))

    sc = job.spark.sparkContext
    sc.setJobDescription(f"sparkcdc snapshot {job.changefeed_id}: write {len(files)} spooled chunks")
    msgs = sc.parallelize(list(enumerate(groups)), len(groups)).mapPartitions(task).collect()
    keys.unpersist()
    messages = sorted((json.loads(m) for m in msgs), key=lambda m: (m["segment"], m["route"]))
    sink.commit(SNAPSHOT_BATCH_ID, [m["sink"] for m in messages], ts)
    return sum(int(m["rows"]) for m in messages)


def _chain(first: Iterable[Any], second: Iterable[Any]) -> Iterator[Any]:
    yield from first
    yield from second


def _rendered_chunks(
    job: SnapshotJob,
    sink: Any,
    entries: list[str],
    touched: set[tuple[str, str, str]],
    tables: list[TableInfo],
) -> tuple[list[dict[str, Any]], int]:
    """Sink commit messages of the staged rendered chunks (rewritten without touched keys), and their rows."""
    keep: list[list[Any]] = []
    rows = 0
    rewrite: list[tuple[str, int]] = []
    touched_tables = {(s, t) for s, t, _ in touched}
    for path in entries:
        meta = job.spool.read_json(path)
        if meta is None:
            raise SchemaError(
                f"the spooled entry {job.spool.join_display(path)} is missing from the data dir"
            )
        for i, piece in enumerate(meta["pieces"]):
            if (meta["schema"], meta["table"]) in touched_tables:
                rewrite.append((path, i))
            else:
                keep.append(piece["entry"])
                rows += int(piece["rows"])
    messages: list[dict[str, Any]] = [{"staged": keep, "rows": rows}]
    if rewrite:
        sc = job.spark.sparkContext
        keys = sc.broadcast(touched)
        shapes = {(t.schema, t.table): t for t in tables}
        spool_dir = job.spool_dir

        def task(it: Iterable[tuple[str, int]]) -> Iterator[str]:
            for path, i in it:
                yield json.dumps(without_touched(sink, spool_dir, path, i, keys.value, shapes))

        sc.setJobDescription(f"sparkcdc snapshot {job.changefeed_id}: drop touched keys from rendered chunks")
        got = sc.parallelize(rewrite, min(len(rewrite), 2 * job.task_slots())).mapPartitions(task).collect()
        keys.unpersist()
        for m in map(json.loads, got):
            messages.append(m)
            rows += int(m["rows"])
    return messages, rows


def final_rows(job: SnapshotJob, states: list[RangeState], corrections: Any, tables: list[TableInfo]) -> Any:
    """Spooled rows without the touched keys, plus the touched keys' rows at S, as stream rows."""
    from pyspark.sql import functions as F

    files = [f for s in states if s.stage != STAGE_SNAPSHOT for f in s.files]
    cols = SPOOL_COLUMNS
    spool = spool_frame(job, files)
    if corrections is None:
        rows = spool
    else:
        rows = corrected(job, spool, corrections, tables, cols)
    ts = job.handover.ts
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


RUN_ROWS = 8192
"""The most rows of one table handed to a sink writer in one ``write_rows`` call."""


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
        loads = pickle.loads
        run: list[RowChange] = []
        run_key: tuple[str, str, int] | None = None
        try:
            # Runs of consecutive rows of one table (one transaction at ts) go to the writers at once.
            for seq, (schema, table, version, payload) in enumerate(rows):
                if (schema, table, version) != run_key or len(run) >= RUN_ROWS:
                    if run:
                        out.write_rows(run, shapes[(run[0].schema, run[0].table)])
                    run = []
                    run_key = (schema, table, version)
                run.append(RowChange("I", schema, table, version, ts, None, loads(payload)[1], seq))
            if run:
                out.write_rows(run, shapes[(run[0].schema, run[0].table)])
            msgs = out.close()
        except BaseException:
            out.abort()
            raise
        yield from msgs

    return write_part
