"""The binlog as a PySpark streaming data source (``sparkcdc_binlog``).

Offsets are transaction boundaries (``{"file", "pos", "ts"}``, plus ``"ddl"``
for a DDL batch). ``read`` re-reads a segment from the upstream binlog, so a
retried task yields exactly the same rows; it yields Arrow record batches.

With the option ``mode = "segments"`` a batch's rows are one row per segment
(``SEGMENT_SCHEMA``: the segment's JSON) and the writer task decodes the segment
itself (``iter_segment``): a row is then decoded in the process that writes it
and never crosses the JVM. With the option ``segments-dir`` as well, the source's
runner leaves each batch's segments in that directory (``segments_file``) when
Spark plans the batch, and the driver hands them to the writers itself: no
executor task then runs a Python worker only to read them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from sparkcdc.pipeline.serde import SOURCE_SCHEMA

if TYPE_CHECKING:
    from sparkcdc.model import RowChange, TableInfo
    from sparkcdc.pipeline.plan import Planner

ARROW_BATCH_ROWS = 8192
SEGMENT_SCHEMA = "segment string"
SEGMENTS_DIR_OPTION = "segments-dir"


def segments_file(directory: str, end: dict[str, Any]) -> str:
    """Where the source's runner leaves the segments of the batch that ends at ``end`` (as Spark
    logged it) for the driver."""
    key = json.dumps(end, sort_keys=True, separators=(",", ":"))
    return os.path.join(directory, hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")


def read_planned_segments(directory: str, end: dict[str, Any]) -> list[str] | None:
    """The segments (JSON) the runner planned for a batch, or None when it left none."""
    try:
        with open(segments_file(directory, end), encoding="utf-8") as f:
            segments: list[str] = json.load(f)
    except FileNotFoundError:
        return None
    return segments


def drop_planned_segments(directory: str, end: dict[str, Any]) -> None:
    """Forget a committed batch's segments."""
    try:
        os.unlink(segments_file(directory, end))
    except FileNotFoundError:
        pass


@dataclass
class BinlogPartition(InputPartition):
    """One segment of whole transactions, with the shapes of the tables it touches."""

    upstream_uri: str
    start: dict[str, Any]
    end: dict[str, Any]
    tables: dict[str, dict[str, Any]]
    filter_rules: list[str]
    case_sensitive: bool
    time_zone: str
    index: int = 0
    """This segment's place in its batch (0-based)."""
    count: int = 1
    """How many segments the batch has."""
    event_filters: list[dict[str, Any]] = field(default_factory=list)
    """``[[filter.event-filters]]`` (``event_filter.rule_specs``): row changes they drop are never yielded."""
    shapes_from: list[int] | None = None
    """``Offset.key()`` of where the schema history was bootstrapped: older rows may have other columns."""
    relay_dir: str = ""
    """The server's binlog relay of the upstream (``SourceSpec.relay_dir``), read where it holds the segment."""

    def __post_init__(self) -> None:
        InputPartition.__init__(self, None)

    def to_json(self) -> str:
        """The segment as JSON (a row of ``SEGMENT_SCHEMA``)."""
        return json.dumps({k: v for k, v in self.__dict__.items() if k != "value"})

    @classmethod
    def from_json(cls, text: str) -> BinlogPartition:
        """Inverse of ``to_json``."""
        return cls(**json.loads(text))


def iter_segment(partition: BinlogPartition) -> Iterator[tuple[RowChange, TableInfo | None, bool]]:
    """Decode a segment: ``(row, shape it was decoded with, whether that shape is the batch's own)``."""
    for rows, info, own in iter_segment_batches(partition):
        for row in rows:
            yield row, info, own


def iter_segment_batches(
    partition: BinlogPartition, tally: dict[tuple[str, str, str], list[int]] | None = None
) -> Iterator[tuple[list[RowChange], TableInfo | None, bool]]:
    """``iter_segment`` by ROWS event: the rows of one table and one transaction share the shape.

    ``tally``: (schema, table, op) → [row changes, binlog bytes] of what is yielded, added up.
    """
    from sparkcdc.capture.offset import Offset
    from sparkcdc.capture.reader import RowReader, TableShapes
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.event_filter import EventFilter
    from sparkcdc.filter import changefeed_filter
    from sparkcdc.model import TableInfo

    infos: dict[tuple[str, str], TableInfo] = {}
    for name, d in partition.tables.items():
        s, t = name.split("\x00", 1)
        infos[(s, t)] = TableInfo.from_dict(d)
    shapes = TableShapes(lambda s, t: infos.get((s, t)))
    flt = changefeed_filter(partition.filter_rules, partition.case_sensitive)
    reader = RowReader(
        UpstreamConfig.from_uri(partition.upstream_uri),
        Offset.from_json(partition.start),
        Offset.from_json(partition.end),
        shapes=shapes,
        match=flt.match,
        time_zone=partition.time_zone,
        shapes_from=(partition.shapes_from[0], partition.shapes_from[1]) if partition.shapes_from else None,
        relay_dir=partition.relay_dir,
    )
    last = shapes.last
    # Event filters drop row changes here, before any sink sees them (one ROWS event: one table, one op).
    events = EventFilter(partition.event_filters, partition.case_sensitive)
    for ev in reader.event_batches():
        if type(ev) is not list:
            continue
        first = ev[0]
        if events and events.ignore_row(first.schema, first.table, first.op):
            continue
        if tally is not None:
            counts = tally.setdefault((first.schema, first.table, first.op), [0, 0])
            counts[0] += len(ev)
            counts[1] += reader.last_rows_bytes
        key = (first.schema, first.table)
        info = last.get(key)
        yield ev, info, info is None or info is infos.get(key)


class BinlogStreamReader(DataSourceStreamReader):
    """Runs in Spark's source worker on the driver: plans batches, hands out segments."""

    def __init__(self, spec_json: str, segments_mode: bool = False, segments_dir: str = "") -> None:
        from sparkcdc.pipeline.plan import SourceSpec

        self.spec = SourceSpec.from_json(json.loads(spec_json))
        self.segments_mode = segments_mode
        self.segments_dir = segments_dir
        """Where ``partitions`` leaves each batch's segments for the driver (``segments_file``)."""
        self._planner: Planner | None = None

    @property
    def planner(self) -> Planner:
        """The batch planner: made on first use, in the source's runner on the driver.

        Spark also makes a reader to ship ``read`` to the executors (pickled with it): that one
        never plans, so it opens neither the schema history nor an upstream connection.
        """
        if self._planner is None:
            from sparkcdc.pipeline.plan import Planner

            self._planner = Planner(self.spec)
        return self._planner

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_planner": None}

    def initialOffset(self) -> dict[str, Any]:
        """The changefeed's start offset (resolved before the query started)."""
        return dict(self.spec.start)

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        """The end of the next batch (``start`` itself when nothing is new, after waiting up to
        ``IDLE_WAIT_S`` for a write: an idle query's trigger then calls here once per wait)."""
        from sparkcdc.pipeline.plan import IDLE_WAIT_S, offset_of

        plan = self.planner.next_batch(offset_of(start), wait=IDLE_WAIT_S)
        if plan is None:
            return start
        return plan.end_json()

    def stop(self) -> None:
        """The query ends: close the planner's upstream connection."""
        if self._planner is not None:
            self._planner.close()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[BinlogPartition]:
        """One partition per segment; none for a DDL batch without rows (the driver applies it)."""
        plan = self.planner.plan(start, end)
        if not plan.segments:
            return []
        tables = {f"{s}\x00{t}": info.to_dict() for (s, t), info in plan.tables.items()}
        parts = [
            BinlogPartition(
                self.spec.upstream_uri,
                seg.start.to_json(),
                seg.end.to_json(),
                tables,
                self.spec.filter_rules,
                self.spec.case_sensitive,
                self.spec.time_zone,
                i,
                len(plan.segments),
                self.spec.event_filters,
                self._shapes_from(),
                self.spec.relay_dir,
            )
            for i, seg in enumerate(plan.segments)
        ]
        if self.segments_mode and self.segments_dir and parts:
            path = segments_file(self.segments_dir, end)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump([p.to_json() for p in parts], f)
            os.replace(tmp, path)
        return parts

    def _shapes_from(self) -> list[int] | None:
        bp = self.spec.bootstrap_pos
        if not bp:
            return None
        from sparkcdc.capture.offset import file_seq

        return [file_seq(str(bp[0])), int(bp[1])]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Executor: decode the segment's rows into Arrow batches (or yield the segment itself)."""
        import pickle

        from sparkcdc.pipeline.arrow_columns import batch, strings
        from sparkcdc.pipeline.serde import dump_images

        assert isinstance(partition, BinlogPartition)
        if self.segments_mode:
            yield batch({"segment": strings([partition.to_json()])})
            return
        cols: list[list[Any]] = [[], [], [], [], [], [], []]
        a_ts, a_seq, a_op, a_s, a_t, a_v, a_p = cols
        shape_blobs: dict[int, bytes] = {}
        n = 0
        for ev, info, own in iter_segment(partition):
            a_ts.append(ev.commit_ts)
            a_seq.append(ev.seq)
            a_op.append(ev.op)
            a_s.append(ev.schema)
            a_t.append(ev.table)
            a_v.append(ev.table_version)
            shape = None
            if not own and info is not None:
                # Rows decoded with a shape the writers cannot look up carry it along.
                shape_id = id(info)
                if shape_id not in shape_blobs:
                    shape_blobs[shape_id] = pickle.dumps(info.to_dict())
                shape = shape_blobs[shape_id]
            a_p.append(dump_images(ev.before, ev.after, shape))
            n += 1
            if n >= ARROW_BATCH_ROWS:
                yield _rows_batch(cols)
                for c in cols:
                    c.clear()
                n = 0
        if n:
            yield _rows_batch(cols)


def _rows_batch(cols: list[list[Any]]) -> Any:
    """``SOURCE_SCHEMA``'s record batch of the column lists (commit_ts … payload)."""
    import pyarrow as pa

    from sparkcdc.pipeline.arrow_columns import batch, binaries, ints, strings

    ts, seq, op, schema, table, version, payload = cols
    return batch(
        {
            "commit_ts": ints(ts, pa.int64()),
            "seq": ints(seq, pa.int64()),
            "op": strings(op),
            "schema": strings(schema),
            "table": strings(table),
            "table_version": ints(version, pa.int64()),
            "payload": binaries(payload),
        }
    )


class BinlogDataSource(DataSource):
    """``spark.readStream.format("sparkcdc_binlog").option("spec", json)``."""

    @classmethod
    def name(cls) -> str:
        return "sparkcdc_binlog"

    def schema(self) -> str:
        return SEGMENT_SCHEMA if self._segments_mode() else SOURCE_SCHEMA

    def streamReader(self, schema: Any) -> BinlogStreamReader:
        return BinlogStreamReader(
            self.options["spec"], self._segments_mode(), self.options.get(SEGMENTS_DIR_OPTION, "")
        )

    def _segments_mode(self) -> bool:
        mode = self.options.get("mode", "rows")
        if mode not in ("rows", "segments"):
            raise ValueError(f"sparkcdc_binlog: option mode={mode!r}; use 'rows' or 'segments'")
        return bool(mode == "segments")
