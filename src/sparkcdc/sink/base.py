"""The contract between the Spark pipeline and a sink.

A ``Sink`` is built on the driver from a sink URI and the changefeed's
``ReplicaConfig``; it validates everything in its constructor (raising
``ConfigError`` naming the key, the value and what is allowed) and must be
picklable: connections open lazily in executors.

Per micro-batch the pipeline does, in this order:

1. driver: ``apply_ddl(ddl)`` for each DDL that leads the batch (the source cuts
   batches so that DDLs only ever come first: every row before a DDL was
   written and committed in an earlier batch, every row in this batch has a
   larger commit_ts);
2. executors: rows are grouped by ``route()`` into ``num_writers`` groups,
   each sorted by ``(commit_ts, seq)``; each group is fed to one
   ``PartitionWriter`` (``write`` per row, then ``close`` which must make the
   rows durable and return a small JSON-able commit message). A sink whose
   ``capabilities.segments`` is "parallel" instead gets one writer per route group
   and segment (``WriterContext.segment``), all running at once; a "turns" one
   as well, each segment's writers holding their output until the earlier segments'
   are durable (``WriterContext.turn``); a "serial" one gets a batch in one task;
3. driver: ``commit(batch_id, messages, checkpoint_ts)`` once every writer
   succeeded (messages in segment order): everything with commit_ts ≤ checkpoint_ts is now durable
   (storage writes ``metadata``, Kafka broadcasts watermarks, ...).

A retried batch calls these again with the same rows (at-least-once).
"""

from __future__ import annotations

import re
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sparkcdc.model import DDLEvent, RowChange, TableInfo

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.turns import SegmentTurn
    from sparkcdc.sink.objectstore import StorageBackend


WATERMARK_EVERY_S = 1.0
"""How often an idle changefeed is marked where each mark is a watermark a consumer reads (the
Kafka and HTTP sinks with the TiDB extension, Avro with its watermark): every upstream second."""
RECORD_EVERY_S = 2.0
"""How often an idle changefeed is marked where a mark publishes nothing (no watermark, no file):
it only moves the checkpoint the server shows and a restart resumes from, as the storage sink's
``metadata`` does every 2 s. Twenty such changefeeds marked every second took 11 % of a core
while idle, every 2 s 6.3–6.8 % (`bench/density --sink kafka`)."""


def mark_every_s(watermark: object | None) -> float:
    """``SinkCapabilities.resolved_every_s`` of a sink whose encoder gives ``watermark`` for a
    resolved ts (``encode_watermark``; None where the protocol sends none)."""
    return RECORD_EVERY_S if watermark is None else WATERMARK_EVERY_S


@dataclass(frozen=True)
class SinkCapabilities:
    """What a sink can do, declared by the sink in one place; the pipeline reads this, never its settings."""

    segments: Literal["rows", "parallel", "turns", "serial"] = "rows"
    """How a batch reaches the writers. "rows": decoded rows are grouped by route and sorted in
    commit order. "parallel": writers of different segments of a batch may write the same route
    group at the same time (each in commit order within its segment) and ``commit`` puts their
    output in segment order; each segment is decoded and written by one task, without a shuffle.
    "turns": as "parallel", but the downstream takes each segment's output only after the earlier
    segments' (``WriterContext.turn``, ``pipeline.turns``): the tasks decode and encode at the same
    time and send in commit order, for a writer whose order spans route groups (Kafka).
    "serial": one task decodes a whole batch and writes it in commit order (Kafka with
    ``required-acks=0``: no acknowledgement says a message is in the log, so two producers cannot
    take turns)."""
    route_depends_on_row: bool = False
    """``route()`` looks at a row's values or commit_ts, not only its schema and table."""
    resume_evidence: str = ""
    """What the sink's output records of how far it got, read back at start (``published_checkpoint``,
    or a mark the sink guards itself): "" when it records nothing."""
    idempotence: str = ""
    """How a batch written again (at-least-once after a failure) leaves the downstream as it was;
    "" when whoever reads the output must drop repeats."""
    executors_write_files: StorageBackend | None = None
    """A local folder the executors write the sink's files into (checked visible from them)."""
    upstream_rendered_csv: bool = False
    """The initial snapshot may have the upstream render the sink's CSV records (``codec.csv_sql``)."""
    resolved_every_s: float = RECORD_EVERY_S
    """How often an idle changefeed's resolved ts is worth publishing here: the driver's marks
    (``RunningChangefeed.mark``) come this far apart. A mark makes its raise durable three times
    (marks file, ``checkpoint.json``, the meta database) before the sink publishes it, so a sink
    is marked as often as it publishes: every second where a consumer reads watermarks
    (``WATERMARK_EVERY_S``), every 2 s where the storage sink writes ``metadata`` (its throttle),
    and every ``RECORD_EVERY_S`` where a mark publishes nothing and only moves the checkpoint the
    server shows."""


@dataclass
class WriterContext:
    """What an executor-side writer knows about its task."""

    changefeed_id: str
    batch_id: int
    writer_id: int
    """The route group this writer serves (0 ≤ writer_id < num_writers)."""
    task_attempt: int = 0
    tables: dict[tuple[str, str, int], TableInfo] = field(default_factory=dict)
    """(schema, table, table_version) → shape, for every table version in the batch."""
    segment: int = 0
    """With ``segments > 1``: which of the batch's segments this writer's rows come from."""
    segments: int = 1
    """How many segments of the batch are written at the same time (only for "parallel" sinks)."""
    replay: bool = False
    """An earlier attempt of this batch may have published part of it (the first batch after a start
    or a failure, or a task Spark runs again): a sink that cannot make its writes idempotent checks
    what is already there (the storage sink's ``replay``)."""
    turn: SegmentTurn | None = None
    """With "turns" segments and ``segments > 1``: the segment's place in the batch's order, shared
    by the task's writers; they send nothing before ``turn.ready()`` (they hold it), and the task
    says ``turn.done()`` once every writer closed."""


class PartitionWriter(ABC):
    """Writes one route group of one batch, in (commit_ts, seq) order."""

    @abstractmethod
    def write(self, row: RowChange, table: TableInfo) -> None:
        """Add one row change (buffering is allowed)."""

    def write_rows(self, rows: list[RowChange], table: TableInfo) -> None:
        """``write`` each of ``rows``: consecutive row changes of one table in one transaction."""
        for row in rows:
            self.write(row, table)

    @abstractmethod
    def close(self) -> dict[str, Any]:
        """Make everything written durable; return a small JSON-able commit message."""

    def abort(self) -> None:
        """Called instead of ``close`` when the task fails; release resources."""
        return None


class Sink(ABC):
    """A destination of change events (see the module docstring for the call order)."""

    scheme: str = ""

    def __init__(self, uri: str, config: ReplicaConfig, changefeed_id: str = "default") -> None:
        self.uri = uri
        self.config = config
        self.changefeed_id = changefeed_id

    @property
    def capabilities(self) -> SinkCapabilities:
        """What this sink can do (``SinkCapabilities``); the defaults: rows, routed by table, no marks."""
        return SinkCapabilities()

    @property
    def num_writers(self) -> int:
        """How many route groups (Spark writer tasks) a batch is split into."""
        return 1

    @property
    def batch_interval(self) -> float | None:
        """Seconds the sink wants at least between micro-batches (None: the changefeed's trigger)."""
        return None

    def route(self, row: RowChange, table: TableInfo) -> int:
        """The route group of a row; by default every row of a table goes to the same group."""
        return table_route(row.schema, row.table, self.num_writers)

    def check(self) -> None:
        """Driver, before the changefeed starts: reach the sink and verify settings."""
        return None

    def apply_ddl(self, ddl: DDLEvent) -> None:
        """Driver: apply/emit one DDL after every earlier row is durable."""
        return None

    @abstractmethod
    def open_writer(self, ctx: WriterContext) -> PartitionWriter:
        """Executor: a writer for one route group of one batch."""

    def commit(self, batch_id: int, messages: list[dict[str, Any]], checkpoint_ts: int) -> None:
        """Driver: every writer of the batch succeeded; record checkpoint_ts if the sink keeps one."""
        return None

    def published_checkpoint(self) -> int:
        """Driver: the largest checkpoint this sink's output already holds (0 when it keeps none).

        Batches that end below it replay what was published before (``WriterContext.replay``).
        """
        return 0

    def close(self) -> None:
        """Driver: release resources at shutdown."""
        return None


_SPARK_UNITS = {
    "microsecond": 1e-6,
    "millisecond": 1e-3,
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86400.0,
}
_SPARK_PART = re.compile(
    r"(\d+(?:\.\d+)?)\s*(microsecond|millisecond|second|minute|hour|day)s?", re.IGNORECASE
)


def batch_trigger(trigger_interval: str, sink_interval: float | None) -> str:
    """The Spark trigger interval: ``trigger_interval``, or the sink's ``batch_interval`` if longer."""
    if sink_interval is None:
        return trigger_interval
    given = sum(float(n) * _SPARK_UNITS[u.lower()] for n, u in _SPARK_PART.findall(trigger_interval))
    if given >= sink_interval:
        return trigger_interval
    return f"{round(sink_interval * 1000)} milliseconds"


def table_route(schema: str, table: str, n: int) -> int:
    """crc32(schema‖table) % n: the same group for every row of a table."""
    if n <= 1:
        return 0
    return zlib.crc32((schema + table).encode()) % n


SinkFactory = Callable[[str, "ReplicaConfig", str], Sink]
