"""Batch planning on the driver: where each micro-batch ends and how it is split.

A batch ends at a transaction boundary. DDLs are batches of their own (a run of
DDL transactions with no rows in between is one batch; its end offset carries the
DDL events, each with its commit_ts), so a sink applies a DDL after every earlier
row is durable and before any later row. A DDL whose transaction also wrote rows
(``CREATE TABLE ... SELECT``) carries them as the batch's segments: the sink
applies the DDL, then writes them, with the DDL's commit_ts. A DML batch is split into segments of
whole transactions that Spark tasks decode in parallel.

At the binlog head a batch may hold no transaction: its end offset is the start's
position with a larger chain state (``segments = 0``), the resolved ts of
``capture.resolved`` (at most once per upstream second) or target-ts. Sinks commit it
like any batch, so the checkpoint of an idle changefeed follows the upstream clock, and
the raised chain state in Spark's offset log and ``checkpoint.json`` gives every later
transaction a larger commit_ts on a replay too. With ``SourceSpec.marks_dir`` the driver raises
the chain state of an idle changefeed itself, without a batch (``marks.py``): the planner then
plans from the raised state and makes no resolved batch but the one to target-ts. With the driver
marking, a scan that reaches the head through transactions of tables the changefeed does not
capture is treated the same way, up to a bound (``Planner._quiet_span``): no batch runs for them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sparkcdc.capture.ddl_kind import ddl_event_kinds
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import Scanner, TxnInfo, check_statement_rows
from sparkcdc.capture.relay import relay_tip
from sparkcdc.capture.resolved import UpstreamClock
from sparkcdc.capture.txnstream import QueryItem
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.event_filter import EventFilter
from sparkcdc.filter import TableFilter, changefeed_filter
from sparkcdc.model import DDLEvent, TableInfo
from sparkcdc.pipeline.dirwatch import DirWatch, watch_folders
from sparkcdc.pipeline.marks import Marks, MarkState, Quiet, raised_end
from sparkcdc.pipeline.serde import ddl_from_dict, ddl_to_dict
from sparkcdc.pipeline.start import after_bootstrap

log = logging.getLogger(__name__)

MAX_DDL_BATCH = 256
"""DDL transactions in a row that one batch applies at most."""

SPLIT_BYTES = 4 << 20
"""The default ``SourceSpec.split_bytes`` (read when a spec is made, so a test can lower it)."""

IDLE_WAIT_S = 5.0
"""How long the source's ``latestOffset`` waits on an idle binlog before it answers "nothing new"
(``Planner.next_batch``): an idle query's trigger calls into its Python runner once per wait.
A query's stop ends the wait (``Marks.ask_stop``, seen within ``HEAD_POLL_S``)."""

HEAD_POLL_S = 0.2
"""How often that wait reads the binlog head: a write is seen as soon as with a 200 ms trigger."""

RELAY_LOOK_S = 1.0
"""With the server's relay, the wait wakes when a relayed file is written (``dirwatch``) and
looks at the relay at least this often anyway: a relay that stopped writes nothing more, and
the wait then reads the head from the upstream every ``HEAD_POLL_S``."""

QUIET_SPAN_BYTES = 256 << 10
"""The most binlog of transactions that change no captured table a plan leaves to a later batch
(a quiet span, ``Planner._quiet_span``): every plan from the same start scans it again."""

QUIET_SPAN_S = 30.0
"""How long a plan leaves such a span at most; then a batch without segments moves past it, so
the start of a changefeed on a busy upstream keeps up with the relay's and the binlog's purges."""


@dataclass
class SourceSpec:
    """Everything the source needs; JSON-able (it travels as a data source option)."""

    changefeed_id: str
    upstream_uri: str
    start: dict[str, Any]
    history_path: str
    target_ts: int | None = None
    filter_rules: list[str] = field(default_factory=lambda: ["*.*"])
    case_sensitive: bool = False
    event_filters: list[dict[str, Any]] = field(default_factory=list)
    """``[[filter.event-filters]]`` as ``event_filter.rule_specs``."""
    time_zone: str = "UTC"
    max_batch_bytes: int = 64 << 20
    split_bytes: int = field(default_factory=lambda: SPLIT_BYTES)
    """A batch larger than this is decoded by several Spark tasks in parallel."""
    parallelism: int = 2
    bootstrap_ts: int = 0
    """The schema history was loaded from the upstream's current tables at this ts; DDLs at or before it
    are already reflected in it (a changefeed started from a past position catches up to it)."""
    bootstrap_pos: list[Any] | None = None
    """``[file, pos]`` of the binlog end when the history was loaded; when set, it decides instead of
    ``bootstrap_ts``: DDLs that end at or before it are already reflected in the history."""
    marks_dir: str = ""
    """The directory of the file the driver raises an idle changefeed's chain state in (``marks.py``);
    empty: the planner makes resolved batches itself."""
    relay_dir: str = ""
    """A server's binlog relay of the upstream (``capture/relay.py``): segment tasks on its host read
    the binlog there while it holds their segment; empty: each task opens its own binlog dump."""
    first_batch: dict[str, Any] | None = None
    """``{"start", "end"}`` of a batch with rows an earlier run planned from this changefeed's start
    and may have published without committing (``planned.json``): the first batch ends where that
    one did, so a sink whose output depends on batch ends (the HTTP sink's last request of a batch,
    and so its id) writes what it wrote then."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SourceSpec:
        """Inverse of ``to_json``."""
        return cls(**d)

    def table_filter(self) -> TableFilter:
        """The changefeed's table filter (system schemas always dropped)."""
        return changefeed_filter(self.filter_rules, self.case_sensitive)

    def event_filter(self) -> EventFilter:
        """The changefeed's event filter (``[[filter.event-filters]]``)."""
        return EventFilter(self.event_filters, self.case_sensitive)


@dataclass
class Segment:
    """A run of whole transactions read by one Spark task."""

    start: Offset
    end: Offset
    nbytes: int


@dataclass
class BatchPlan:
    """One micro-batch: its end offset and either DDL events or DML segments."""

    start: Offset
    end: Offset
    ddls: list[DDLEvent] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    tables: dict[tuple[str, str], TableInfo] = field(default_factory=dict)
    is_ddl: bool = False

    def end_json(self) -> dict[str, Any]:
        """The end offset as Spark stores it."""
        d = self.end.to_json()
        if self.is_ddl:
            d["ddl"] = [ddl_to_dict(e) for e in self.ddls]
            if self.segments:
                d["segments"] = len(self.segments)  # the rows of the DDL's own transaction
        else:
            # How many Spark partitions read the batch: one means rows arrive already in commit order.
            d["segments"] = len(self.segments)
        return d


def offset_of(d: dict[str, Any]) -> Offset:
    """The Offset part of a source offset dict."""
    return Offset.from_json(d)


def ddls_of(d: dict[str, Any]) -> list[DDLEvent] | None:
    """The DDL events a batch applies (None for a DML batch)."""
    if "ddl" not in d:
        return None
    return [ddl_from_dict(x) for x in d["ddl"]]


def split_segments(txns: list[TxnInfo], split_bytes: int, parallelism: int) -> list[Segment]:
    """Cut transactions into at most ``parallelism`` segments of similar size."""
    total = sum(t.nbytes for t in txns)
    n = 1 if total < split_bytes or parallelism <= 1 else min(parallelism, len(txns))
    target = total / n
    segs: list[Segment] = []
    first = txns[0]
    acc = 0
    for i, t in enumerate(txns):
        acc += t.nbytes
        last = i == len(txns) - 1
        if last or (acc >= target and len(segs) < n - 1):
            segs.append(Segment(first.start, t.end, acc))
            if not last:
                first = txns[i + 1]
            acc = 0
    return segs


class Planner:
    """Decides batch ends (``latestOffset``) and partitions; keeps the schema catalog in step."""

    def __init__(self, spec: SourceSpec) -> None:
        from sparkcdc.capture.schema_history import SchemaHistory
        from sparkcdc.pipeline.state import open_history_store

        self.spec = spec
        self.up = UpstreamConfig.from_uri(spec.upstream_uri)
        self.scanner = Scanner(self.up, relay_dir=spec.relay_dir)
        self.clock = UpstreamClock(self.up)
        self._idle = False
        """The last scan found nothing new: the next one may advance the resolved ts."""
        self._quiet: Quiet | None = None
        """The last scan that found nothing to capture (its start, the binlog head read before it,
        and for a quiet span the clock reading it was planned with): while the head stays there,
        nothing was written after the start."""
        self._reading: int | None = None
        """The resolved bound of this planner's last clock reading; taken before every later head."""
        self._span_since: tuple[tuple[str, int], float] | None = None
        """Where and since when (monotonic) plans leave a quiet span."""
        self.filter = spec.table_filter()
        self.event_filter = spec.event_filter()
        # A DDL that fails only for tables outside the filter makes the catalog forget them.
        self.history = SchemaHistory.open(open_history_store(spec.history_path), captured=self.filter.match)
        self._catalog: Any = None
        self._catalog_at: Offset | None = None
        self._plans: dict[tuple[Offset, Offset], BatchPlan] = {}
        fb = spec.first_batch
        self._first: tuple[Offset, Offset] | None = (
            (offset_of(fb["start"]), offset_of(fb["end"])) if fb is not None else None
        )
        """The earlier run's batch: every plan from its start ends where it did (Spark may ask for the
        batch after a start more than once before it runs one)."""
        self.marks = Marks(spec.marks_dir) if spec.marks_dir else None
        """Shared with the driver, which raises an idle changefeed's chain state (``marks.py``)."""
        self._watch: DirWatch | None = None
        self._watch_tried = False
        self._asked = False
        """``next_batch`` answered once (a wait applies from the second ask on)."""

    def _catalog_for(self, start: Offset) -> Any:
        # one position, one catalog: a raised chain state there has no DDL before it
        if self._catalog is None or self._catalog_at is None or self._catalog_at.key() != start.key():
            self._catalog = self.history.catalog_at(start.ts)
            self._catalog_at = start
        return self._catalog

    def next_batch(self, start: Offset, wait: float = 0.0) -> BatchPlan | None:
        """Plan the batch after ``start``; None when there is nothing new.

        With ``wait`` (``IDLE_WAIT_S`` from the source), a start where nothing is new waits up to
        that long for the binlog head to move and plans once more (``_wait_for_writes``)."""
        plan = self._next_batch_now(start)
        # Not on the query's first ask: Spark runs the first batch of a new query (an empty one,
        # from its start) only on that answer, and a starting query holds a start slot until then.
        asked, self._asked = self._asked, True
        if plan is None and wait > 0 and asked and self._wait_for_writes(start, wait):
            plan = self._next_batch_now(start)
        return plan

    def _wait_for_writes(self, start: Offset, wait: float) -> bool:
        """Wait while the last scan from ``start`` found nothing and the binlog head stays where it
        was (read every ``HEAD_POLL_S``; with the server's relay, looked at when a relayed file is
        written, ``dirwatch``): whether it moved within ``wait`` seconds.

        Only where the driver marks the chain state (an idle stream has no batch to make here, the
        driver publishes its resolved ts): so each idle trigger of the query costs the JVM one call
        per ``wait`` instead of one per trigger interval, and a write is still seen within
        ``HEAD_POLL_S``. A stop of the query ends the wait (``Marks.ask_stop``). Not under the
        marks lock: the quiet record this wait reads is the one the driver marks from."""
        if self.marks is None or self.clock.no_head:
            return False
        quiet = self._quiet
        if quiet is None or not quiet.at(start) or self._finished_at(start):
            return False
        deadline = time.monotonic() + wait
        # With the server's binlog relay, a poll first looks at the relay's newest file: while it
        # did not grow (and the relay is alive), nothing was written, and the upstream is not asked.
        # Its state is taken before the head is read once: a write after that read grows it.
        tip = None if not self.spec.relay_dir else (lambda: relay_tip(Path(self.spec.relay_dir), self.up))
        watch = self._relay_watch() if tip is not None else None  # before the look: no write between
        seen = None
        if tip is not None:
            seen = tip()
            head = self.clock.binlog_head()
            if head is None or head != quiet.head:
                return True
        marks = self.marks
        while (left := deadline - time.monotonic()) > 0:
            if watch is not None and seen is not None:
                # woken by a relayed write or the driver's stop; looks anyway every RELAY_LOOK_S
                watch.wait(min(RELAY_LOOK_S, left))
            else:
                time.sleep(min(HEAD_POLL_S, left))  # the polling period of the head; the deadline bounds it
            if marks.stopping():
                return False  # the driver stops the query: answer now, Spark's stop waits for it
            if tip is not None:
                now = tip()
                if now is not None and now == seen:
                    continue
                seen = now
            head = self.clock.binlog_head()
            if head is None or head != quiet.head:
                return True
        return False

    def _relay_watch(self) -> DirWatch | None:
        """A watch of the relay's folder and the marks folder (``dirwatch``), made once; None
        where there can be none (the wait then polls every ``HEAD_POLL_S``)."""
        if not self._watch_tried and self.marks is not None and self.spec.relay_dir:
            self._watch_tried = True
            self._watch = watch_folders([self.spec.relay_dir, self.marks.directory])
        return self._watch

    def close(self) -> None:
        """The query ends: close the upstream connection and the watch."""
        self.clock.close()
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def _finished_at(self, start: Offset) -> bool:
        """Whether the changefeed reached its target-ts at ``start``: nothing more is planned."""
        return self.spec.target_ts is not None and start.ts >= self.spec.target_ts

    def _next_batch_now(self, start: Offset) -> BatchPlan | None:
        if self.marks is None or self.clock.no_head:
            # without the binlog head the driver cannot tell an idle stream: resolved batches here
            return self._next_batch(start, None)
        with self.marks.locked() as marks:
            plan = self._next_batch(marks.raise_start(start), marks)
            if plan is not None:
                marks.quiet = None  # a batch is planned (to target-ts, say): the driver waits for it
            return plan

    def _next_batch(self, start: Offset, marks: MarkState | None) -> BatchPlan | None:
        if self._finished_at(start):
            return None
        target = self.spec.target_ts
        # The clock is read before the scan: a transaction the scan misses was not committed
        # when the clock was read (capture/resolved.py). Only an idle stream asks for it, and only
        # when the driver does not raise its chain state itself.
        ask = marks is None and self._idle and self.clock.due()
        resolved = self.clock.resolved_bound() if ask else None
        self._idle = False
        # Read after the clock as well: when the binlog still ends where the last scan from this
        # start found nothing, nothing committed since, and no scan (a binlog dump) is needed.
        head = self.clock.binlog_head()
        if marks is not None:
            marks.quiet = None  # set again below when this start is still quiet
        quiet = self._quiet
        if quiet is not None and quiet.at(start) and quiet.head == head and not self._span_aged(start):
            self._idle = True
            if marks is not None:
                marks.quiet = quiet
            return self._resolved_batch(start, resolved)
        if marks is not None and head is not None and self.clock.due():
            # Read before the head that bounds this scan: if the scan passes only other tables'
            # transactions, the driver may publish this bound although the head moves on.
            reading = self.clock.resolved_bound()
            later = self.clock.binlog_head() if reading is not None else None
            if later is not None:
                head, self._reading = later, reading
        cat = self._catalog_for(start)
        txns: list[TxnInfo] = []
        ddl_txns: list[TxnInfo] = []
        total = 0
        whole = False  # the scan reached the head: no transaction was left for a later batch
        until = self._first[1].key() if self._first is not None and self._first[0] == start else None
        for txn in self.scanner.scan(start, until=head):
            if target is not None and txn.ts > target:
                resolved = target  # every transaction up to target-ts is out
                break
            for st in txn.statement_rows:
                check_statement_rows(st, self.filter.match)
            if txn.queries:
                # DDLs in a row are one batch (each keeps its commit_ts); a DDL with rows of its own
                # (CREATE TABLE ... SELECT) is a batch alone: its rows follow it.
                if txns or (txn.tables and ddl_txns):
                    break
                ddl_txns.append(txn)
                if txn.tables or len(ddl_txns) >= MAX_DDL_BATCH:
                    break
                continue
            if ddl_txns:
                break
            txns.append(txn)
            total += txn.nbytes
            if total >= self.spec.max_batch_bytes or (until is not None and txn.end.key() >= until):
                break
        else:
            whole = True
        if ddl_txns:
            return self._ddl_batch(start, ddl_txns, cat)
        if not txns:
            self._idle = True
            if head is not None:
                self._quiet = Quiet(start.file, start.pos, head)
                if marks is not None:
                    marks.quiet = self._quiet
            return self._resolved_batch(start, resolved)
        if (
            whole
            and marks is not None
            and head is not None
            and until is None
            and self._quiet_span(start, txns, total)
        ):
            self._idle = True
            self._quiet = marks.quiet = Quiet(start.file, start.pos, head, self._reading)
            return None
        plan = self._dml_batch(start, txns, cat)
        self._catalog_at = plan.end
        return plan

    def _quiet_span(self, start: Offset, txns: list[TxnInfo], nbytes: int) -> bool:
        """Whether a plan leaves ``txns`` (from ``start`` to the binlog head) to a later batch.

        Each of a server's changefeeds sees every write to its upstream. A batch past transactions
        that change no captured table has no tasks (``_add_rows``), but it is still a Spark
        micro-batch (offset and commit logs, planning, the driver's commit): twenty changefeeds
        on one upstream ran nineteen of them for each write to one table. Such a span is treated
        like an idle binlog instead: the driver raises the chain state at ``start``
        (``marks.Quiet.resolved``) and no batch runs. Only for whole spans of row changes that
        leave the prepared XA transactions as they were, up to ``QUIET_SPAN_BYTES`` and
        ``QUIET_SPAN_S``; past either, a batch without segments moves the start past them.
        """
        if txns[-1].end.xa != start.xa or nbytes > QUIET_SPAN_BYTES or self._captures(txns):
            return False
        at = (start.file, start.pos)
        if self._span_since is None or self._span_since[0] != at:
            self._span_since = (at, time.monotonic())
        return not self._span_aged(start)

    def _span_aged(self, start: Offset) -> bool:
        """Whether plans have left a quiet span at ``start`` for ``QUIET_SPAN_S``: then the next plan
        moves past it even while the binlog is idle (a restart of the upstream rotates its binlog,
        and an old enough file at the start would then be purged)."""
        since = self._span_since
        return (
            since is not None
            and since[0] == (start.file, start.pos)
            and time.monotonic() - since[1] >= QUIET_SPAN_S
        )

    def _captures(self, txns: list[TxnInfo]) -> bool:
        """Whether any of ``txns`` changed a table the changefeed captures."""
        return any(self.filter.match(*key) for t in txns for key in t.tables)

    def _resolved_batch(self, start: Offset, resolved: int | None) -> BatchPlan | None:
        """A batch that only raises the chain state at ``start`` to ``resolved`` (capped at target-ts)."""
        end = raised_end(start, resolved, self.spec.target_ts) if resolved is not None else None
        if end is None:
            return None
        plan = BatchPlan(start, end)
        self._catalog_at = plan.end  # no DDL in between: the catalog at start is the catalog at its end
        return plan

    def _ddl_batch(self, start: Offset, txns: list[TxnInfo], cat: Any) -> BatchPlan:
        events: list[DDLEvent] = []
        for txn in txns:
            events.extend(self._ddl_events(txn, cat))
        visible = [
            e
            for e in events
            if (e.table and self.filter.match(e.schema, e.table))
            or (not e.table and self.filter.match_schema(e.schema))
            or (e.old_table is not None and self.filter.match(e.old_schema or e.schema, e.old_table))
        ]
        if self.event_filter.drops_ddl:
            # The history already has these DDLs: a dropped one still changes the shape later rows have.
            visible = [e for e in visible if not self._ignored_ddl(e)]
        end = txns[-1].end
        plan = BatchPlan(start, end, ddls=visible, is_ddl=True)
        # CREATE TABLE ... SELECT: the rows of the statement's transaction follow its DDL.
        self._add_rows(plan, txns, cat)
        self._catalog_at = end
        self._plans[(start, end)] = plan
        return plan

    def _ddl_events(self, txn: TxnInfo, cat: Any) -> list[DDLEvent]:
        """Apply one transaction's DDL statements to the catalog and the history."""
        events: list[DDLEvent] = []
        for q in txn.queries:
            start = len(events)
            self._statement_events(events, txn, cat, q.schema, self._pinned(q, cat, txn))
            if q.sql_mode is not None:
                events[start:] = [replace(e, sql_mode=q.sql_mode) for e in events[start:]]
        return events

    def _pinned(self, q: QueryItem, cat: Any, txn: TxnInfo) -> str:
        """The statement with its binary columns' literals independent of its session
        (``ddl.literals``), read against the catalog before it: every later reader sees that text."""
        from sparkcdc.capture.ddl.literals import pin_connection_literals
        from sparkcdc.errors import DecodeError

        try:
            return pin_connection_literals(
                q.query, q.connection, lambda st: cat.column_charset(st, q.schema or None)
            )
        except DecodeError as exc:
            raise DecodeError(
                f"{exc.message} (the statement at binlog position {txn.start.file}:{txn.start.pos})"
            ) from None

    def _statement_events(
        self, events: list[DDLEvent], txn: TxnInfo, cat: Any, schema: str, query: str
    ) -> None:
        """Append the DDLEvents of one statement of ``txn`` (applied to the catalog and the history)."""
        from sparkcdc.errors import SchemaError

        try:
            events.extend(self.history.apply(cat, query, schema or None, txn.ts))
        except SchemaError as exc:
            if self._after_bootstrap(txn):
                raise type(exc)(
                    f"{exc.message} (the transaction at binlog position {txn.start.file}:{txn.start.pos})",
                    code=exc.code,
                ) from exc
            redefined = self._redefine(cat, query, schema or None, txn.ts)
            if redefined is not None:
                events.extend(redefined)
                return
            # Already reflected in the bootstrap shapes: pass the statement on; later rows of
            # the table get this DDL's version.
            caught = catch_up_events(cat, query, schema or None, txn.ts)
            for e in caught:
                if e.table_info is not None:
                    cat.put(e.table_info)
                self.history.record(e)
            events.extend(caught)

    def _redefine(self, cat: Any, query: str, default_schema: str | None, ts: int) -> list[DDLEvent] | None:
        """A CREATE TABLE older than the bootstrap shapes, applied as the binlog has it.

        The bootstrap loaded the upstream's shapes of when the changefeed was created; a table
        created after the start point has that later shape there (every later ALTER included). Its
        CREATE TABLE in the binlog says exactly what it was then, so the table is defined again from
        it and the ALTERs after it apply in turn: each version gets the columns it had (rows written
        between them carry those columns). None when the statement is not such a CREATE TABLE or
        does not apply.
        """
        from sparkcdc.capture import ddl as D
        from sparkcdc.errors import SchemaError

        try:
            stmt = D.parse_statement(query)
        except SchemaError:
            return None
        if not isinstance(stmt, D.CreateTable) or stmt.like is not None or not stmt.columns:
            return None
        schema, table = stmt.name.resolve(default_schema, query)
        previous, meta = cat.get(schema, table), cat.meta(schema, table)
        cat.remove(schema, table)
        try:
            return list(self.history.apply(cat, query, default_schema, ts))
        except SchemaError:
            if previous is not None:
                cat.put(previous, meta)
            return None

    def _ignored_ddl(self, e: DDLEvent) -> bool:
        old = (e.old_schema or e.schema, e.old_table) if e.old_table is not None else None
        ignored = self.event_filter.ignore_ddl(e.schema, e.table, ddl_event_kinds(e), e.query, old)
        if ignored:
            log.info("event filter: DDL at %d not sent to the sink: %s", e.commit_ts, e.query)
        return ignored

    def _after_bootstrap(self, txn: TxnInfo) -> bool:
        """Whether a transaction committed after the schema history was bootstrapped."""
        return after_bootstrap(txn.end, txn.ts, self.spec.bootstrap_ts, self.spec.bootstrap_pos)

    def _add_rows(self, plan: BatchPlan, txns: list[TxnInfo], cat: Any) -> None:
        """The segments and table shapes of ``txns``' rows (none when no captured table has one).

        A batch whose transactions change only tables outside the filter has no segments: it moves
        the checkpoint past them as a resolved batch does, with no task to decode rows that would
        all be dropped. On a server whose changefeeds capture different tables of one upstream, a
        write to one table is then one batch with tasks, not one per changefeed. A captured table
        the catalog does not know keeps its segments (the task that meets its rows says so).
        """
        if not self._captures(txns):
            return
        tables: dict[tuple[str, str], TableInfo] = {}
        for t in txns:
            for key in t.tables:
                if key not in tables and self.filter.match(*key):
                    info = cat.get(*key)
                    if info is not None:
                        tables[key] = info
        if plan.is_ddl and not tables:
            return
        plan.tables = tables
        plan.segments = split_segments(txns, self.spec.split_bytes, self.spec.parallelism)

    def _dml_batch(self, start: Offset, txns: list[TxnInfo], cat: Any) -> BatchPlan:
        plan = BatchPlan(start, txns[-1].end)
        self._add_rows(plan, txns, cat)
        self._plans[(start, plan.end)] = plan
        if len(self._plans) > 64:
            self._plans.pop(next(iter(self._plans)))
        return plan

    def plan(self, start_d: dict[str, Any], end_d: dict[str, Any]) -> BatchPlan:
        """The plan of a batch Spark already fixed (recomputed after a restart)."""
        start, end = offset_of(start_d), offset_of(end_d)
        if self.marks is not None:
            # planned from the raised chain state (no mark moves a start while its batch is planned)
            with self.marks.locked() as marks:
                start = marks.raise_start(start)
        cached = self._plans.get((start, end))
        if cached is not None:
            return cached
        if "ddl" in end_d and not end_d.get("segments"):
            return BatchPlan(start, end, ddls=ddls_of(end_d) or [], is_ddl=True)
        if end.key() <= start.key():
            return BatchPlan(start, end)  # a resolved batch: no transaction in it
        cat = self.history.catalog_at(end.ts)
        txns = [
            t
            for t in self.scanner.scan(
                start, stop=lambda t: t.end.key() >= end.key(), until=(end.file, end.pos)
            )
        ]
        txns = [t for t in txns if t.end.key() <= end.key()]
        if "ddl" in end_d:
            plan = BatchPlan(start, end, ddls=ddls_of(end_d) or [], is_ddl=True)
            self._add_rows(plan, txns, cat)
            return plan
        if not txns:
            return BatchPlan(start, end)
        return self._dml_batch(start, txns, cat)


def catch_up_events(cat: Any, query: str, default_schema: str | None, ts: int) -> list[DDLEvent]:
    """DDLEvents for a statement older than the bootstrap shapes, which already include its effect."""
    from sparkcdc.capture import ddl as D
    from sparkcdc.model import DDLType

    stmt = D.parse_statement(query)
    out: list[DDLEvent] = []

    def ev(kind: DDLType, schema: str, table: str, **kw: Any) -> None:
        info = cat.get(schema, table) if table else None
        out.append(
            DDLEvent(query, schema, table, kind, ts, ts, info.with_version(ts) if info else None, **kw)
        )

    if isinstance(stmt, D.CreateDatabase):
        ev(DDLType.CREATE_SCHEMA, stmt.name, "")
    elif isinstance(stmt, D.DropDatabase):
        ev(DDLType.DROP_SCHEMA, stmt.name, "")
    elif isinstance(stmt, D.CreateTable):
        ev(DDLType.CREATE_TABLE, *stmt.name.resolve(default_schema, query))
    elif isinstance(stmt, D.DropTable):
        for n in stmt.names:
            s, t = n.resolve(default_schema, query)
            out.append(DDLEvent(query, s, t, DDLType.DROP_TABLE, ts, ts, None))
    elif isinstance(stmt, D.TruncateTable):
        ev(DDLType.TRUNCATE_TABLE, *stmt.name.resolve(default_schema, query))
    elif isinstance(stmt, D.RenameTable):
        for old, new in stmt.pairs:
            os_, ot = old.resolve(default_schema, query)
            ev(DDLType.RENAME_TABLE, *new.resolve(default_schema, query), old_schema=os_, old_table=ot)
    elif isinstance(stmt, D.AlterTable):
        ev(DDLType.ALTER_TABLE, *stmt.name.resolve(default_schema, query))
    elif isinstance(stmt, D.CreateIndex):
        ev(DDLType.ADD_INDEX, *stmt.table.resolve(default_schema, query))
    elif isinstance(stmt, D.DropIndex):
        ev(DDLType.DROP_INDEX, *stmt.table.resolve(default_schema, query))
    else:
        out.append(DDLEvent(query, default_schema or "", "", DDLType.OTHER, ts, ts, None))
    return out
