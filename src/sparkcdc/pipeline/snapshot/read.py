"""Reading the snapshot: range tasks copy their key range chunk by chunk into the spool.

``read_ranges`` (driver) runs Spark jobs over the unfinished ranges, round after round, until none
is left; each task reads its ranges one after the other with ``read_range`` (executor), which
records the range's progress after every chunk, resumes after the last finished one, and hands
the remaining key space of a range that grew past ``split_factor`` times its planned size to
child ranges (read in the next round). A key-less table is one range, read consistently and undone
back to S (``_read_keyless``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import StateStorageError
from sparkcdc.model import TableInfo
from sparkcdc.pipeline.snapshot.plan import (
    STAGE_DONE,
    STAGE_SPLIT,
    RangeState,
    SnapshotJob,
    SnapshotTaskSpec,
    balanced,
)
from sparkcdc.pipeline.snapshot.spool import RECORDS_SUFFIX, stage_chunk, write_parquet
from sparkcdc.pipeline.state import state_dir

log = logging.getLogger(__name__)


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
        spool_values([conv.convert(r) for r in raw], rel)

    def spool_values(rows: list[tuple[Any, ...]], rel: str) -> None:
        from sparkcdc.pipeline.serde import dump_images

        keys: list[str] = []
        payloads: list[bytes] = []
        for row in rows:
            keys.append(cs.key_token(row[i] for i in key_idx))
            payloads.append(dump_images(None, row, None))
        write_parquet(state_dir(spec.spool_dir), rel, st.schema, st.table, info.version, keys, payloads)
        st.files.append(rel)

    def paged(
        fetch: Callable[[Any, Any], list[tuple[Any, ...]]],
        spool: Callable[[list[tuple[Any, ...]], str], None],
    ) -> Callable[[Any, Any], tuple[Any, bool]]:
        """A chunk reader: ``fetch`` a chunk after a key, ``spool`` it, move on to its last key."""

        def read(after: Any, upto: Any) -> tuple[Any, bool]:
            rows = fetch(after, upto)
            if rows:
                spool(rows, f"{st.range_id}/{spec.epoch}-{st.rows_copied + len(rows):012d}.parquet")
                after = tuple(rows[-1][i] for i in key_idx)
                st.rows_copied += len(rows)
            return after, len(rows) < spec.chunk_size

        return read

    text = cs.TextRowReader(info, spec.time_zone)
    rec_fields = spec.rendered.get(f"{st.schema}\x00{st.table}")
    if rec_fields is None:
        if text.usable:  # the C reader yields the decoder's values; PyMySQL's rows are converted
            return paged(lambda a, u: cs.read_values(conn, text, a, u, spec.chunk_size), spool_values)
        return paged(lambda a, u: cs.read_chunk(conn, info, a, u, spec.chunk_size), spool_rows)
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
                stage_chunk(spec, st, info, base, chunk)
                st.files.append(base + RECORDS_SUFFIX)
            if chunk.others:
                spool_rows(chunk.others, base + ".parquet")
            st.rows_copied += n
        return chunk.upto, chunk.last

    return read_rendered


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
        write_parquet(state_dir(spec.spool_dir), rel, st.schema, st.table, info.version, [""] * len(buf), buf)
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


def read_ranges(job: SnapshotJob, spec: SnapshotTaskSpec) -> int:
    """Spark jobs over the unfinished ranges until none is left (splits add ranges); the number of rounds."""
    sc = job.spark.sparkContext
    rounds = 0
    while True:
        pending = [s for s in job.store.load_all() if not s.finished]
        if not pending:
            return rounds
        rounds += 1
        # One task per slot, each reading its ranges one after the other (a Spark task costs ≈ 50 ms
        # of scheduling and Python worker round trips; ranges are planned to similar sizes).
        groups = balanced(
            [(max(s.estimated_rows - s.rows_copied, 1), s.to_json()) for s in pending],
            min(len(pending), job.task_slots()),
        )
        log.info("snapshot round %d: %d range(s) in %d task(s)", rounds, len(pending), len(groups))
        sc.setJobDescription(f"sparkcdc snapshot {job.changefeed_id}: read {len(pending)} ranges")

        def task(it: Iterable[list[dict[str, Any]]], spec: SnapshotTaskSpec = spec) -> Iterator[int]:
            for group in it:
                for d in group:
                    st = read_range(spec, RangeState.from_json(d))
                    if st.finished:
                        yield st.range_id

        finished = set(sc.parallelize(groups, len(groups)).mapPartitions(task).collect())
        unseen = sorted(s.range_id for s in job.store.load_all() if s.range_id in finished and not s.finished)
        if unseen:
            # The tasks finished these ranges, yet the driver does not see it: the executors saved
            # their progress somewhere else (a local data dir on each host). Another round would loop.
            raise StateStorageError(
                f"the snapshot tasks finished ranges {unseen[:5]} but the driver does not see their "
                f"progress in the data dir {job.state.display}: the data dir must be shared by the "
                "driver and every executor; use a shared mount or an s3://, gcs:// or azure:// data dir"
            )
