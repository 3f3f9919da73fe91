"""A changefeed: one Structured Streaming query from the binlog to a sink.

``start_changefeed`` validates everything first (config, sink, upstream), then
starts the query; ``RunningChangefeed`` reports progress and knows when the
target-ts is reached. Restarting with the same ``checkpoint_dir`` resumes after
the last committed batch (at-least-once: the batch that was running when the
process died is written again).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.relay import relay_tip
from sparkcdc.capture.resolved import SharedClockUser, shared_clock
from sparkcdc.capture.upstream import UpstreamConfig, check_upstream
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import SparkCdcError
from sparkcdc.event_filter import rule_specs
from sparkcdc.filter import changefeed_filter
from sparkcdc.model.ts import physical_ms
from sparkcdc.pipeline.backlog import BacklogProbe, backlog_of
from sparkcdc.pipeline.marks import Marks, raised_end
from sparkcdc.pipeline.plan import SourceSpec
from sparkcdc.pipeline.resume import drop_stale_spark_log
from sparkcdc.pipeline.source import SEGMENTS_DIR_OPTION
from sparkcdc.pipeline.spark import changefeed_tasks, release_planner_workers, use_changefeed_pool
from sparkcdc.pipeline.spec import ChangefeedSpec
from sparkcdc.pipeline.start import bootstrap_history, resolve_start
from sparkcdc.pipeline.state import (
    SPARK_CHECKPOINT_ROOT_CONF,
    StateDir,
    UpstreamIdentity,
    check_executors_see,
    check_upstream_identity,
    follow_upstream,
    spark_checkpoint_location,
)
from sparkcdc.pipeline.writer import BatchResult, BatchWriter
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import Sink, batch_trigger

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """A progress report (after each committed batch and periodically)."""

    checkpoint_ts: int
    resolved_ts: int
    rows_total: int
    rows_per_sec: float
    lag_s: float
    batches: int = 0
    caught_up: bool = False
    snapshot_phase: str = ""
    """The initial snapshot: "" (none runs), reading, correcting, writing or done."""
    snapshot_rows: int = 0
    snapshot_ranges_done: int = 0
    snapshot_ranges_total: int = 0
    snapshot_eta_s: float | None = None
    snapshot_rows_estimated: int = 0
    batch: BatchResult | None = None
    """The batch just committed, in the one report that follows its commit (None in the others)."""
    checkpoint_end: dict[str, Any] | None = None
    """The offset after the last committed batch (JSON form): a resume that starts there gives every
    later transaction the commit_ts this run gives it, where a resume from ``checkpoint_ts`` alone
    may not (a raised chain state, see ARCHITECTURE's resolved ts)."""
    backlog_done_bytes: int = 0
    """Binlog bytes from this run's start offset to the end of the last committed batch."""
    backlog_total_bytes: int | None = None
    """Binlog bytes from this run's start offset to the head (or the target-ts offset); None: not known yet."""
    run_id: str = ""
    """This run of the changefeed (a new one after every restart): ``row_tally`` counts from its start."""
    row_tally: dict[tuple[str, str, str], tuple[int, int]] = field(default_factory=dict)
    """Rows and binlog bytes by (schema, table, op) of every batch this run committed."""


class RunningChangefeed:
    """Handle of a started changefeed."""

    def __init__(
        self,
        spec: ChangefeedSpec,
        sink: Sink,
        up: UpstreamConfig,
        start: Offset,
        on_progress: Callable[[Progress], None] | None,
    ) -> None:
        self.spec = spec
        self.state = StateDir.parse(spec.checkpoint_dir)
        self.sink = sink
        self.up = up
        self.query: Any = None
        self.on_progress = on_progress
        self.checkpoint_ts = start.ts
        self.last_end: Offset = start
        self.rows_total = 0
        self.batches = 0
        self.run_id = uuid.uuid4().hex
        self._tally: dict[tuple[str, str, str], tuple[int, int]] = {}
        self._probe = BacklogProbe(up, spec.target_ts)
        self._window: deque[tuple[float, int]] = deque(maxlen=50)
        self._finished = threading.Event()
        self._stopped = threading.Event()
        self._error: SparkCdcError | None = None
        self._caught_up = False
        self._lock = threading.Lock()
        self.segments_dir = ""
        """A directory of this host where the source's runner leaves batches' segments (segments mode)."""
        self._saved: tuple[int, Offset, int] | None = None
        """What ``checkpoint.json`` holds (written by this run)."""
        self.on_resolved: Callable[[int, dict[str, Any]], None] | None = None
        """Also records a raised chain state (checkpoint_ts, end offset) where the next owner of the
        changefeed starts (the server's meta database), before the sink publishes it."""
        self.on_planned: Callable[[dict[str, Any]], None] | None = None
        """Also records a batch about to be written (``save_planned``) where the next owner starts."""
        self.give_back_start_slot: Callable[[], None] = lambda: None
        """Gives back the start slot the query holds until its first batch (``_StartSlots``)."""
        self.marks: Marks | None = None
        """Shared with the source's planner: set when this driver raises the chain state of an idle
        changefeed itself (``marks.py``, ``mark``)."""
        self._clock: SharedClockUser | None = None
        self._mark_every_ms = int(sink.capabilities.resolved_every_s * 1000)
        self._mark_skip = 0
        """Upstream seconds the last look found a mark short of being worth it (the marker sleeps)."""
        self._mark_lock = threading.Lock()
        """Held by a mark while it publishes, and by ``stop`` while it closes the sink."""
        self._last_batch = 0
        self._load_checkpoint()
        self.run_start: Offset = self.last_end
        """Where this run's query starts reading: the backlog counts from here."""

    def _load_checkpoint(self) -> None:
        d = self.state.read_json("checkpoint.json")
        if d is not None:
            self.checkpoint_ts = int(d["checkpoint_ts"])
            self.last_end = Offset.from_json(d["end"])
            self.rows_total = int(d.get("rows_total", 0))

    def _save_checkpoint(self) -> None:
        saved = (self.checkpoint_ts, self.last_end, self.rows_total)
        if saved == self._saved:
            return  # written already before the sink published it (``save_resolved``)
        self.state.write_json(
            "checkpoint.json",
            {
                "checkpoint_ts": self.checkpoint_ts,
                "end": self.last_end.to_json(),
                "rows_total": self.rows_total,
            },
        )
        self._saved = saved

    def save_resolved(self, res: BatchResult) -> None:
        """Make a batch without rows durable before the sink publishes its checkpoint.

        Such a batch only raises the chain state (a resolved ts): a transaction after it with an older
        binlog header gets a commit_ts above that ts, which a resume from an earlier offset would not
        give it. So ``checkpoint.json`` has the raise before any consumer can see the ts (a crash
        in between loses nothing: the batch has no rows)."""
        with self._lock:
            self.checkpoint_ts = max(self.checkpoint_ts, res.checkpoint_ts)
            self.last_end = Offset.from_json(res.end)
            self._save_checkpoint()
            if self.on_resolved is not None:
                self.on_resolved(self.checkpoint_ts, self.last_end.to_json())

    def save_planned(self, end: dict[str, Any]) -> None:
        """Record the batch with rows about to be written, from the last committed end to ``end``.

        Written before any writer runs (a sink may publish part of the batch, then the process
        dies): a resume from the same start plans the same batch (``SourceSpec.first_batch``), so
        what a sink derives from batch ends (the HTTP sink's request ids) comes out the same.
        """
        with self._lock:
            planned = {"start": self.last_end.to_json(), "end": Offset.from_json(end).to_json()}
        self.state.write_json("planned.json", planned)
        if self.on_planned is not None:
            self.on_planned(planned)

    def use_marks(self, directory: str) -> None:
        """Raise this changefeed's chain state while idle from the driver (``mark``), in the marks
        file of ``directory``, which the source's planner reads (``SourceSpec.marks_dir``)."""
        self.marks = Marks(directory)
        self.marks.clear_stop()
        self._clock = shared_clock(self.up)  # one reading per upstream second for the process

    def mark(self) -> bool:
        """Raise an idle changefeed's chain state to the upstream's resolved bound and have the sink
        publish it, without a batch (``marks.py``); whether it did.

        Only where the planner's last scan found nothing to capture: at the end of the last
        committed batch (no batch is planned and unwritten), with the binlog head, read after the
        clock, still where that scan started from (nothing committed since); or, when the head
        moved, to the clock reading that scan was planned with, if it passed other tables'
        transactions (``marks.Quiet.resolved``). Under the marks lock throughout, so no plan is made
        between the reading and the publishing; the raised state is durable (the marks file,
        ``checkpoint.json``, the meta database) before the sink publishes it.
        """
        marks, clock = self.marks, self._clock
        if marks is None or clock is None or not clock.due() or self._seconds_to_worth(clock) > 0:
            return False
        with self._mark_lock:
            if self._stopped.is_set():
                return False
            with marks.locked() as state:
                with self._lock:
                    end, batch = self.last_end, self._last_batch
                quiet = state.quiet
                if quiet is None or not quiet.at(end):
                    return False
                resolved = clock.resolved_bound()
                if resolved is None or clock.binlog_head() != quiet.head:
                    # Written since that scan; a scan that passed other tables' transactions says
                    # how far the clock had gone before the head it read (marks.Quiet.resolved).
                    resolved = quiet.resolved
                    if resolved is None:
                        return False
                target = self.spec.target_ts
                raised = raised_end(end, resolved, target)
                if raised is None:
                    return False
                resolved = raised.ts
                state.add_raised(raised)
                marks.flush(state)
                self.save_resolved(BatchResult(batch, resolved, raised.to_json(), 0, 0, 0.0))
                # a sink that fails here fails the next batch too, which stops the query with it
                self.sink.commit(batch, [], resolved)
                if self._mark_every_ms > 1000:  # the marker sleeps until the next mark is worth it
                    self._mark_skip = -(-(self._mark_every_ms - MARK_SLACK_MS) // 1000)
        if target is not None and resolved >= target:
            self._finished.set()
        self._report()
        return True

    def _seconds_to_worth(self, clock: SharedClockUser) -> int:
        """Upstream seconds until a bound is ``resolved_every_s`` past the checkpoint: 0 when this
        second's is (always, for a sink that publishes every second). The reading is the
        process's for the second, and taking it makes the marker wait for the next."""
        self._mark_skip = 0
        if self._mark_every_ms <= 1000:
            return 0
        bound = clock.resolved_bound()
        if bound is None:
            return 0  # mark() finds out again, and what it does then
        with self._lock:
            published = self.checkpoint_ts
        short = self._mark_every_ms - MARK_SLACK_MS - (physical_ms(bound) - physical_ms(published))
        self._mark_skip = max(0, -(-short // 1000))  # bounds move a second at a time
        return self._mark_skip

    def on_commit(self, res: BatchResult) -> None:
        """Called by the batch writer once a batch is durable in the sink."""
        with self._lock:
            self._last_batch = res.batch_id
            self.checkpoint_ts = max(self.checkpoint_ts, res.checkpoint_ts)
            self.last_end = Offset.from_json(res.end)
            self.rows_total += res.rows
            self.batches += 1
            for key, (rows, size) in res.tables.items():
                r0, s0 = self._tally.get(key, (0, 0))
                self._tally[key] = (r0 + rows, s0 + size)
            self._window.append((time.monotonic(), self.rows_total))
            self._save_checkpoint()
        log.debug(
            "batch %d committed: %d rows, checkpoint-ts %d, %.2fs",
            res.batch_id,
            res.rows,
            res.checkpoint_ts,
            res.seconds,
        )
        target = self.spec.target_ts
        if target is not None and self.checkpoint_ts >= target:
            self._finished.set()
        self._report(res)

    def progress(self) -> Progress:
        """Current figures."""
        with self._lock:
            rate = 0.0
            if len(self._window) >= 2:
                (t0, r0), (t1, r1) = self._window[0], self._window[-1]
                now = time.monotonic()
                rate = (r1 - r0) / max(now - t0, 1e-6) if now - t1 < 5 else 0.0
            lag = 0.0 if self._caught_up else max(0.0, time.time() - physical_ms(self.checkpoint_ts) / 1000.0)
            start, end = self.run_start, self.last_end
            backlog = backlog_of(
                self._probe.files, (start.file, start.pos), (end.file, end.pos), self._probe.goal
            )
            return Progress(
                self.checkpoint_ts,
                self.checkpoint_ts,
                self.rows_total,
                rate,
                lag,
                self.batches,
                self._caught_up,
                checkpoint_end=self.last_end.to_json(),
                backlog_done_bytes=backlog.done if backlog is not None else 0,
                backlog_total_bytes=backlog.total if backlog is not None else None,
                run_id=self.run_id,
                row_tally=dict(self._tally),
            )

    def _report(self, batch: BatchResult | None = None) -> None:
        if self.on_progress is not None:
            try:
                p = self.progress()
                p.batch = batch
                self.on_progress(p)
            except Exception:  # a progress callback must not break the data path
                log.exception("progress callback failed")

    def _monitor(self) -> None:
        from sparkcdc.capture.reader import Scanner

        scanner = Scanner(self.up, relay_dir=self.spec.relay_dir)
        try:
            self._watch(scanner)
        finally:
            self._probe.close()

    def _probe_backlog(self) -> bool:
        """List the binlog files' sizes now; False when the upstream did not answer."""
        try:
            self._probe.probe()
        except SparkCdcError as err:
            log.warning("binlog size probe failed: %s", err.message)
            return False
        return True

    def _watch(self, scanner: Any) -> None:
        from sparkcdc.pipeline.backlog import head_of

        relay = Path(self.spec.relay_dir) if self.spec.relay_dir else None
        tip = relay_tip(relay, self.up) if relay is not None else None
        self._probe_backlog()
        quiet: tuple[str, int, tuple[str, int]] | None = None  # (end, head) of a scan that found nothing
        while not self._stopped.wait(1.0):
            if self.query is not None and not self.query.isActive:
                self.give_back_start_slot()  # it ended before its first batch
                break
            # With the server's binlog relay: while its newest file did not grow since before the
            # last listing (and it is alive), the binlog files did not either; the upstream is not asked.
            was, tip = tip, relay_tip(relay, self.up) if relay is not None else None
            listed = True if tip is not None and tip == was else self._probe_backlog()
            # The head the probe just listed: while it stays where a scan from the same end found
            # nothing, nothing was written since, and no binlog dump is opened to say so.
            end, head = self.last_end, head_of(self._probe.files) if listed else None
            if head is not None and (head == (end.file, end.pos) or quiet == (end.file, end.pos, head)):
                self._caught_up = True
                self._report()
                continue
            try:
                scan = scanner.scan(end, max_bytes=1, until=head)  # with a relay: read there
                try:
                    nxt = next(scan, None)
                finally:
                    scan.close()
                self._caught_up = nxt is None
                if nxt is None and head is not None:
                    quiet = (end.file, end.pos, head)
            except SparkCdcError as err:
                log.warning("progress probe failed: %s", err.message)
            self._report()

    def _mark_loop(self) -> None:
        """Marks while the query runs: when the clock can give a larger bound, else every
        ``MARK_POLL_S`` (the stream is busy, or the planner has not scanned the head yet)."""
        clock = self._clock
        assert clock is not None
        wait = MARK_POLL_S
        failing = False
        try:
            while not self._stopped.wait(wait):
                if self.query is not None and not self.query.isActive:
                    break
                try:
                    self.mark()
                    failing = False
                except Exception as exc:  # the next mark tries again (the raise may be saved already)
                    if not failing:
                        msg = exc.message if isinstance(exc, SparkCdcError) else repr(exc)
                        log.warning("an idle checkpoint mark failed (tried again each second): %s", msg)
                    failing = True
                # the next upstream second, or the one a mark is worth in
                skip = self._mark_skip - 1 if self._mark_skip > 0 else 0
                wait = min(max(clock.until_due() + skip, MARK_POLL_S), max(1.0, self._mark_every_ms / 1000))
        finally:
            clock.close()
            if self.marks is not None:
                self.marks.close()

    def start_monitor(self) -> None:
        threading.Thread(
            target=self._monitor, name=f"sparkcdc-monitor-{self.spec.changefeed_id}", daemon=True
        ).start()
        if self.marks is not None:
            threading.Thread(
                target=self._mark_loop, name=f"sparkcdc-marks-{self.spec.changefeed_id}", daemon=True
            ).start()

    def finished(self) -> bool:
        """True once the checkpoint reached target-ts."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until finished, the query stops, or timeout; True when finished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._finished.is_set():
                return True
            if self.query is not None and not self.query.isActive:
                return self._finished.is_set()
            if deadline is not None and time.monotonic() > deadline:
                return False
            self._finished.wait(0.2)

    def is_active(self) -> bool:
        """Whether the streaming query still runs."""
        return self.query is not None and bool(self.query.isActive)

    def exception(self) -> SparkCdcError | None:
        """The error that stopped the query: the sparkcdc error it carries, or an UnclassifiedError."""
        from sparkcdc.errors import map_spark_error

        if self._error is not None:
            return self._error
        if self.query is None:
            return None
        exc = self.query.exception()
        if exc is None:
            return None
        return map_spark_error(exc)

    def stop(self) -> None:
        """Stop the query and the monitor (the sink keeps what was committed)."""
        self._stopped.set()
        self.give_back_start_slot()
        if self.query is not None:
            if self.marks is not None:
                try:
                    self.marks.ask_stop()  # an idle ask of the source answers now, not after its wait
                except OSError as exc:
                    log.debug("could not ask the source to end its wait: %s", exc)
            try:
                self.query.stop()
            except Exception:  # stopping a failed query may raise again; it is stopped either way
                log.debug("query.stop raised", exc_info=True)
        try:
            with self._mark_lock:  # no mark is publishing
                if self._clock is not None:
                    self._clock.close()  # the marker closes it too; this one covers a marker never started
                self.sink.close()
        finally:
            if self.segments_dir:
                shutil.rmtree(self.segments_dir, ignore_errors=True)
            self._report()


MARK_POLL_S = 0.2
"""How often the marker looks again while it cannot mark (the stream is busy)."""

MARK_SLACK_MS = 500
"""A bound this much short of ``resolved_every_s`` past the checkpoint is marked: bounds move
by whole upstream seconds, a checkpoint of rows anywhere within one."""

QUERY_START_CAP_S = 30.0
"""How long a starting query holds its start slot at most when no first batch comes."""


class _StartSlots:
    """How many streaming queries of this process start at once: a query holds a slot from its
    ``start()`` until its first batch reaches the writer (or ``QUERY_START_CAP_S``).

    Each query starts its source's Python runner, a process Spark gives 10 seconds (fixed in
    ``PythonWorkerFactory``) to import PySpark and connect back. Twenty changefeeds created at
    once on two cores started twenty runners beside twenty first batches, and some missed the 10
    seconds ("Python worker failed to connect back"): their starts were retried. Two slots per
    core keep the runners that import at the same time few; a query that has its first batch
    holds none, however long that batch runs.
    """

    def __init__(self, slots: int) -> None:
        self.slots = threading.BoundedSemaphore(slots)

    def take(self) -> Callable[[], None]:
        """Wait for a slot; the returned function gives it back (once, whoever calls it first)."""
        self.slots.acquire()
        lock = threading.Lock()
        held = [True]

        def give_back() -> None:
            with lock:
                if not held:
                    return
                held.clear()
            timer.cancel()
            self.slots.release()

        timer = threading.Timer(QUERY_START_CAP_S, give_back)
        timer.daemon = True
        timer.start()
        return give_back


_START_SLOTS = _StartSlots(2 * max(1, os.cpu_count() or 1))


def _first_batch(
    writer: BatchWriter, spark: Any, started: Callable[[], None], release_planners: bool
) -> Callable[[Any, int], None]:
    """``writer``, calling ``started`` before the first batch it writes (the source is planned then,
    its runner connected) and, with ``release_planners``, releasing Spark's planner processes."""
    pending = [True]

    def write(df: Any, batch_id: int) -> None:
        if pending:
            pending.clear()
            started()
            if release_planners:
                log.debug("released Spark's planner processes: %s", release_planner_workers(spark))
        writer(df, batch_id)

    return write


@dataclass
class PreparedChangefeed:
    """What a changefeed's start finds out without Spark: checks passed, start point, schema history."""

    spec: ChangefeedSpec
    state: StateDir
    sink: Sink
    start: Offset
    history_path: str
    bootstrap_ts: int
    bootstrap_pos: list[Any] | None
    running: RunningChangefeed


def prepare_changefeed(
    spec: ChangefeedSpec,
    on_progress: Callable[[Progress], None] | None = None,
    *,
    checked_sink: Sink | None = None,
) -> PreparedChangefeed:
    """The Spark-free part of a start: validate, resolve the start, bootstrap the schema history.

    Needs no SparkSession, so ``sparkcdc run`` does it while Spark starts; raises
    ConfigError/UpstreamSetupError like ``start_changefeed``. ``checked_sink``: the caller already
    reached the upstream, the data dir and this sink (``sparkcdc run`` does before Spark starts), so
    those checks are not repeated and this sink is used.
    """
    if not spec.checkpoint_dir:
        raise ValueError("ChangefeedSpec.checkpoint_dir is required")
    state = StateDir.parse(spec.checkpoint_dir)
    up = UpstreamConfig.from_uri(spec.upstream_uri)
    if checked_sink is not None:
        sink = checked_sink
    else:
        sink = create_sink(spec.sink_uri, spec.config, spec.changefeed_id)
        check_upstream(
            up, captures=changefeed_filter(spec.config.filter.rules, spec.config.case_sensitive).match
        )
        current = UpstreamIdentity.query(up)
        if spec.upstream_identity is not None:
            follow_upstream(
                spec.upstream_identity,
                current,
                spec.changefeed_id,
                "recorded in the meta database",
                "point the changefeed back at that server (cli changefeed update --upstream-uri), or remove "
                "it and create it again with a start-ts on this one",
            )
        else:
            check_upstream_identity(state, spec.changefeed_id, current)
        sink.check()
        state.check()
    from_head = not (
        state.exists("start.json") or spec.start_ts is not None or spec.start_position or spec.start_gtid
    )
    start = resolve_start(up, spec.checkpoint_dir, spec.start_ts, spec.start_position, spec.start_gtid)
    history_path = state.join("schema_history.jsonl")
    # A new changefeed without a start point starts at the head resolve_start just read.
    # Scoped by the table filter: a table the changefeed leaves out cannot fail its start.
    captured = changefeed_filter(spec.config.filter.rules, spec.config.case_sensitive).match
    bootstrap_ts, bootstrap_pos = bootstrap_history(
        up, history_path, start, start if from_head else None, captured
    )
    running = RunningChangefeed(spec, sink, up, start, on_progress)
    return PreparedChangefeed(spec, state, sink, start, history_path, bootstrap_ts, bootstrap_pos, running)


def _planned_from(state: StateDir, start: Offset) -> dict[str, Any] | None:
    """The batch an earlier run planned from ``start`` and did not commit (``planned.json``), if any."""
    planned = state.read_json("planned.json")
    if planned is None or Offset.from_json(planned["start"]) != start:
        return None
    log.info(
        "the batch from %s was being written when the last run stopped: planning it again up to %s",
        start,
        Offset.from_json(planned["end"]),
    )
    return planned


def start_changefeed(
    spark: Any,
    spec: ChangefeedSpec,
    on_progress: Callable[[Progress], None] | None = None,
    prepared: PreparedChangefeed | None = None,
    *,
    release_planners: bool = False,
    on_resolved: Callable[[int, dict[str, Any]], None] | None = None,
    on_planned: Callable[[dict[str, Any]], None] | None = None,
) -> RunningChangefeed:
    """Validate, then start the streaming query; raises ConfigError/UpstreamSetupError before starting.

    ``prepared``: the result of ``prepare_changefeed(spec, on_progress)`` when it already ran.
    ``release_planners``: when the first batch reaches the writer (the source is planned by then),
    stop the Python processes Spark kept from planning it (``pipeline.spark.release_planner_workers``);
    only for a session where no other query is planned at the same time (``sparkcdc run``).
    ``on_resolved``: where else a raised chain state must be durable before the sink publishes it
    (the server: its meta database, where a failover starts; ``RunningChangefeed.on_resolved``).
    """
    p = prepared if prepared is not None else prepare_changefeed(spec, on_progress)
    state, sink, start, running = p.state, p.sink, p.start, p.running
    running.on_resolved = on_resolved
    running.on_planned = on_planned
    history_path, bootstrap_ts, bootstrap_pos = p.history_path, p.bootstrap_ts, p.bootstrap_pos
    cfg = spec.config
    caps = sink.capabilities
    backend = caps.executors_write_files
    if backend is not None:
        # A file storage sink on a cluster: executors write its files, the driver numbers and moves them.
        check_executors_see(
            spark, StateDir(backend.root, backend), "the executors write the sink's files there"
        )
    spark_checkpoint = spark_checkpoint_location(
        state, spec.changefeed_id, spark.conf.get(SPARK_CHECKPOINT_ROOT_CONF, None)
    )
    # A driver-local Spark log left from an earlier run on this host must not win over a newer
    # checkpoint.json (the changefeed ran on another host since): the start follows the newest record.
    drop_stale_spark_log(spark_checkpoint, state.read_json("checkpoint.json"))
    src = SourceSpec(
        changefeed_id=spec.changefeed_id,
        upstream_uri=spec.upstream_uri,
        # Spark resumes from its own offset log; without one (a driver-local Spark checkpoint that was
        # lost with its host) the query starts after the last batch the sink acknowledged.
        start=running.last_end.to_json(),
        history_path=history_path,
        target_ts=spec.target_ts,
        filter_rules=list(cfg.filter.rules),
        case_sensitive=cfg.case_sensitive,
        event_filters=rule_specs(cfg.filter.event_filters),
        time_zone=cfg.time_zone,
        max_batch_bytes=spec.max_batch_bytes,
        parallelism=changefeed_tasks(spark),
        bootstrap_ts=bootstrap_ts,
        bootstrap_pos=bootstrap_pos,
        first_batch=_planned_from(state, running.last_end),
        # the driver raises an idle changefeed's chain state itself, beside Spark's offset log
        marks_dir=spark_checkpoint,
        relay_dir=spec.relay_dir,
    )
    running.use_marks(spark_checkpoint)
    # A sink that orders parallel segments itself, or whose segments take turns at sending, gets
    # segments: each task decodes and writes one.
    mode = "rows" if caps.segments == "rows" else "segments"
    if caps.segments == "serial":
        src.parallelism = 1  # one task decodes and writes each batch, in commit order
    if mode == "segments":
        # the source's runner (a process on this host) leaves each batch's segments here for the writer
        running.segments_dir = tempfile.mkdtemp(prefix="sparkcdc-segments-")
    writer = BatchWriter(
        sink,
        spark_checkpoint,
        history_path,
        spec.changefeed_id,
        running.on_commit,
        mode == "segments",
        running.segments_dir,
        before_resolved=running.save_resolved,
        before_write=running.save_planned,
    )
    # this changefeed's jobs (its snapshot's, then every batch of its query) in a pool of its own
    use_changefeed_pool(spark, spec.changefeed_id)
    if cfg.snapshot.mode == "initial":
        from sparkcdc.pipeline.snapshot import MetaRangeStore, run_initial_snapshot, snapshot_progress

        run_initial_snapshot(
            spark,
            changefeed_id=spec.changefeed_id,
            upstream_uri=spec.upstream_uri,
            checkpoint_dir=spec.checkpoint_dir,
            history_path=history_path,
            handover=start,
            config=cfg,
            writer=writer,
            on_figures=snapshot_progress(running, on_progress),
            store=MetaRangeStore(spec.meta_uri, spec.changefeed_id, spec.namespace, spec.changefeed_uid)
            if spec.meta_uri
            else None,
            snapshot_dir=spec.snapshot_dir,
        )
    t_query = time.monotonic()
    df = (
        spark.readStream.format("sparkcdc_binlog")
        .option("spec", json.dumps(src.to_json()))
        .option("mode", mode)
        .option(SEGMENTS_DIR_OPTION, running.segments_dir)
        .load()
    )
    log.info(
        "starting changefeed %s: %s -> %s from %s",
        spec.changefeed_id,
        redact_uri(spec.upstream_uri),
        redact_uri(spec.sink_uri),
        start,
    )
    started = running.give_back_start_slot = _START_SLOTS.take()
    try:
        running.query = (
            df.writeStream.foreachBatch(_first_batch(writer, spark, started, release_planners))
            .option("checkpointLocation", spark_checkpoint)
            .queryName(f"sparkcdc-{spec.changefeed_id}")
            .trigger(processingTime=batch_trigger(spec.trigger_interval, sink.batch_interval))
            .start()
        )
    except BaseException:
        started()
        raise
    log.debug("streaming query started in %.2fs", time.monotonic() - t_query)
    running.start_monitor()
    return running
