"""Correcting the snapshot to S: the binlog after the handover point, per touched key.

The ranges are read while the upstream keeps changing, so a spooled row may be newer than S.
``binlog_corrections`` (driver) scans the binlog ``(S, H]`` (H = the head once every range finished),
refuses a DDL on a snapshotted table in it, and reads it in executor tasks
(``read_corrections``) keeping, per touched key, the first event's before image: the key's row at
S, or none. ``corrected`` applies them to the spool: the touched keys are dropped from it and
their rows at S added back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import SchemaError
from sparkcdc.model import TableInfo
from sparkcdc.pipeline.snapshot.plan import SnapshotJob
from sparkcdc.pipeline.state import open_history_store

log = logging.getLogger(__name__)


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


def binlog_corrections(job: SnapshotJob, tables: list[TableInfo]) -> tuple[Offset, Any, int]:
    """(H, DataFrame of first events after S per touched key or None without any, how many keys were touched)."""
    from pyspark.sql import functions as F

    from sparkcdc.capture.reader import Scanner
    from sparkcdc.capture.start import scan_head
    from sparkcdc.pipeline.plan import split_segments
    from sparkcdc.pipeline.start import after_bootstrap, bootstrap_marker

    # From S, which carries its chain state: only (S, H] is read, not the head's whole binlog file.
    head = scan_head(job.up, job.handover)
    snap = {(t.schema, t.table) for t in tables}
    txns = []
    cat = None
    # DDLs logged before the schema history's bootstrap are in its first shapes already.
    bootstrap_ts, bootstrap_pos = bootstrap_marker(job.history_path) or (0, None)
    for txn in Scanner(job.up).scan(job.handover, stop=lambda t: t.end.key() >= head.key()):
        if txn.end.key() > head.key():
            break
        if txn.queries and after_bootstrap(txn.end, txn.ts, bootstrap_ts, bootstrap_pos):
            cat = cat or _catalog_copy(job)
            _check_ddl(cat, txn, snap)
        txns.append(txn)
    if not txns:
        return head, None, 0
    schema = "`schema` string, `table` string, key string, commit_ts long, seq long, payload binary"
    keyed = {f"{t.schema}\x00{t.table}": t.to_dict() for t in tables if t.handle_key}
    segs = split_segments(txns, 4 << 20, job.task_slots())
    uri, tz = job.upstream_uri, job.time_zone

    def task(it: Iterable[tuple[dict[str, Any], dict[str, Any]]]) -> Iterator[Any]:
        for seg in it:
            yield from read_corrections(uri, tz, keyed, seg)

    seg_list = [(s.start.to_json(), s.end.to_json()) for s in segs]
    job.spark.sparkContext.setJobDescription(f"sparkcdc snapshot {job.changefeed_id}: binlog corrections")
    rdd = job.spark.sparkContext.parallelize(seg_list, len(seg_list)).mapPartitions(task)
    events = job.spark.createDataFrame(rdd, schema)
    first = (
        events.groupBy("schema", "table", "key")
        .agg(F.min(F.struct("commit_ts", "seq", "payload")).alias("f"))
        .select("schema", "table", "key", F.col("f.payload").alias("payload"))
        .cache()
    )
    touched = int(first.count())
    return head, first, touched


def _catalog_copy(job: SnapshotJob) -> Any:
    from sparkcdc.capture.schema_history import SchemaHistory

    return SchemaHistory.open(open_history_store(job.history_path)).catalog_at(job.handover.ts).snapshot()


def _check_ddl(cat: Any, txn: Any, snap: set[tuple[str, str]]) -> None:
    for q in txn.queries:
        query = q.query
        try:
            events = cat.apply_ddl(query, q.schema or None, txn.ts)
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


def corrected(
    job: SnapshotJob, spool: Any, corrections: Any, tables: list[TableInfo], cols: list[str]
) -> Any:
    """The spool without the touched keys, plus the touched keys' rows at S."""
    from pyspark.sql import functions as F

    versions = job.spark.createDataFrame(
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
