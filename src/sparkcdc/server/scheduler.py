"""The scheduler: claims changefeeds on a lease, runs them, records their progress, releases them.

One thread ticks every ``tick_seconds``:

1. heartbeat this server's row;
2. for each changefeed it owns: re-read the row; if the row moved to another
   owner or epoch, stop running it (someone else has it now); if the user
   paused or removed it, stop and release it; otherwise start it (with backoff
   after transient errors), watch its query and renew the lease together with
   the latest checkpoint (compare-and-swap);
3. claim normal changefeeds that nobody owns or whose lease expired.

Starting and stopping a streaming query is slow, so those run on a small pool
while the tick keeps renewing leases. A server that cannot reach the meta
database for a whole lease stops its queries: another server may own them by now.

State in the data dir: ``changefeeds/<namespace>/<id>/`` belongs to the changefeed
(``identity.json`` names its identity; state of another identity is refused or moved
aside, see ``pipeline.state.own_changefeed_dir``) and holds its initial snapshot
(``snapshot/``, continued by every claim) and one folder per claim (``epoch-<N>/``,
the older ones removed when a claim starts).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from sparkcdc import __version__
from sparkcdc.capture.offset import Offset
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import (
    ChangefeedNotFound,
    ConflictError,
    SparkCdcError,
    TransientError,
    UnclassifiedError,
)
from sparkcdc.meta import ChangefeedInfo, ChangefeedState, MetaStore
from sparkcdc.metrics import ChangefeedMetrics
from sparkcdc.pipeline.restart import (
    BACKOFF_BASE,
    BACKOFF_MAX,
    DEFAULT_ERROR_STUCK_SECONDS,
    Fail,
    Restart,
    RestartPolicy,
)
from sparkcdc.pipeline.resume import Evidence, checkpoint_evidence, newer_end, newest
from sparkcdc.pipeline.spec import ChangefeedSpec
from sparkcdc.pipeline.state import StateDir, own_changefeed_dir, spark_checkpoint_location
from sparkcdc.server.redact import scrub, unexpected
from sparkcdc.server.runner import ChangefeedRunner, ProgressLike, RunningHandle

log = logging.getLogger(__name__)


@dataclass
class _Final:
    """What to write once the query has stopped."""

    kind: str  # "release" (give it up), "retry" (keep it, start again later)
    state: ChangefeedState | None = None
    error: SparkCdcError | None = None
    remove_dir: bool = False


@dataclass
class _Task:
    namespace: str
    id: str
    epoch: int
    info: ChangefeedInfo
    last_renew_ok: float
    handle: RunningHandle | None = None
    pending: Future[Any] | None = None
    pending_kind: str = ""
    final: _Final | None = None
    progress: ProgressLike | None = None
    retry_at: float = 0.0
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    """The failures since the last progress, and when the next restart is due (``pipeline.restart``)."""
    warning: str | None = None
    best_checkpoint: int = 0
    state_owned: bool = False
    """The changefeed's folder was checked against its identity and the older claims' folders removed."""
    earlier: list[Evidence] = field(default_factory=list)
    """The ``checkpoint.json`` of the older claims' folders, read before they were removed."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.id)

    @property
    def label(self) -> str:
        return self.id if self.namespace == "default" else f"{self.namespace}/{self.id}"


class Scheduler:
    """Claims, runs and releases changefeeds for one server."""

    def __init__(
        self,
        store: MetaStore,
        runner: ChangefeedRunner,
        *,
        server_id: str,
        address: str,
        data_dir: str | Path,
        lease_seconds: float = 10.0,
        tick_seconds: float | None = None,
        backoff_base: float = BACKOFF_BASE,
        backoff_max: float = BACKOFF_MAX,
        error_stuck_seconds: float = DEFAULT_ERROR_STUCK_SECONDS,
        max_changefeeds: int | None = None,
        spark_checkpoint_root: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics: ChangefeedMetrics | None = None,
        debug: bool = False,
    ) -> None:
        self.debug = debug
        """Log the traceback of an unexpected error (``sparkcdc --debug server``)."""
        self.store = store
        self.runner = runner
        self.server_id = server_id
        self.address = address
        self.data_dir = StateDir.parse(str(data_dir))
        self.lease_seconds = float(lease_seconds)
        self.tick_seconds = tick_seconds if tick_seconds is not None else min(1.0, self.lease_seconds / 4)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.error_stuck_seconds = error_stuck_seconds
        self.max_changefeeds = max_changefeeds
        self.spark_checkpoint_root = spark_checkpoint_root
        """The runner's ``spark.sql.streaming.checkpointLocation``, where driver-local Spark checkpoints go."""
        self.clock = clock
        self.metrics = metrics
        """Where the changefeeds this server runs report their progress and errors (``/metrics``)."""
        self.tasks: dict[tuple[str, str], _Task] = {}
        self.claim_grace = self.lease_seconds / 2
        self._claimable_since: dict[tuple[str, str], float] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sparkcdc-runner")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_tick_error: str | None = None
        self._meta_uid: str | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start ticking in a daemon thread."""
        self.store.heartbeat_server(self.server_id, self.address, __version__)
        self._thread = threading.Thread(target=self._loop, name="sparkcdc-scheduler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = self.clock()
            try:
                self.tick()
            except Exception as exc:
                # The scheduler thread must survive anything: one coded line, the traceback with --debug.
                log.error("scheduler tick failed: %s", unexpected(exc), exc_info=exc if self.debug else None)
            self._stop.wait(max(0.0, self.tick_seconds - (self.clock() - started)))

    def shutdown(self, timeout: float = 60.0) -> None:
        """Stop ticking, stop every query and release the leases so other servers take over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for task in list(self.tasks.values()):
            self._wait_pending(task, timeout)
            if task.handle is not None:
                try:
                    task.handle.stop()
                except Exception as exc:  # stopping is best effort; the lease is released below anyway
                    log.warning("changefeed %s: error while stopping: %s", task.label, self._scrub(task, exc))
                task.handle = None
            try:
                row = self.store.get_changefeed(task.id, task.namespace, include_removed=True)
                if row.owner == self.server_id and row.epoch == task.epoch:
                    self.store.release_changefeed(row, self.server_id, **self._progress_values(task))
            except (SparkCdcError, SQLAlchemyError) as exc:
                log.warning(
                    "changefeed %s: could not release at shutdown (its lease will expire): %s",
                    task.label,
                    self._scrub(task, exc),
                )
        self.tasks.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
        try:
            self.store.remove_server(self.server_id)
        except SQLAlchemyError as exc:
            log.warning("could not remove this server from the meta database: %s", exc)
        self.runner.shutdown()

    def _wait_pending(self, task: _Task, timeout: float) -> None:
        if task.pending is None:
            return
        try:
            result = task.pending.result(timeout)
            if task.pending_kind == "start":
                task.handle = result
        except Exception as exc:  # a start that failed leaves nothing to stop
            log.info("changefeed %s: %s ended with %s", task.label, task.pending_kind, self._scrub(task, exc))
        task.pending = None

    # ------------------------------------------------------------------ one tick

    def tick(self) -> None:
        """One round: heartbeat, look after owned changefeeds, claim free ones."""
        try:
            self.store.heartbeat_server(self.server_id, self.address, __version__)
            tasks = list(self.tasks.values())
            rows = self.store.changefeeds_by_key(t.key for t in tasks)  # one read for all of them
            for task in tasks:
                try:
                    self._sync_row(task, rows.get(task.key))
                except SQLAlchemyError:
                    raise
                except Exception as exc:
                    # One changefeed's fault (a runner call that raised) must not stop the others:
                    # it is handled like any changefeed error (retried with backoff, or failed).
                    log.warning(
                        "changefeed %s: %s",
                        task.label,
                        self._scrub(task, unexpected(exc)),
                        exc_info=exc if self.debug else None,
                    )
                    self._on_error(task, exc)
            if not self._stop.is_set():
                self._claim()
            self.last_tick_error = None
        except SQLAlchemyError as exc:
            self.last_tick_error = str(exc.__class__.__name__)
            log.warning("meta database unreachable: %s", exc.__class__.__name__)
            self._fence()

    def _fence(self) -> None:
        # Without the meta database we cannot renew leases; once ours may have expired,
        # another server may be running the changefeed, so ours must stop.
        now = self.clock()
        for task in list(self.tasks.values()):
            if now - task.last_renew_ok > self.lease_seconds * 0.8:
                log.warning(
                    "changefeed %s: lease not renewed for %.1fs, stopping it",
                    task.label,
                    now - task.last_renew_ok,
                )
                self._drop(task)

    def _drop(self, task: _Task) -> None:
        """Forget a task without writing to the meta database, stopping its query in the background."""
        self.tasks.pop(task.key, None)
        self._forget_metrics(task)
        pending, handle = task.pending, task.handle

        def stop_later() -> None:
            h = handle
            if pending is not None:
                try:
                    h = pending.result()
                except Exception:  # a start that failed leaves nothing to stop
                    return
            if h is not None and hasattr(h, "stop"):
                h.stop()

        self._pool.submit(stop_later)

    def _sync(self, task: _Task) -> None:
        """Look after one owned changefeed, from its row read now."""
        try:
            row = self.store.get_changefeed(task.id, task.namespace, include_removed=True)
        except ChangefeedNotFound:
            row = None
        self._sync_row(task, row)

    def _sync_row(self, task: _Task, row: ChangefeedInfo | None) -> None:
        """Look after one owned changefeed, from its row as read this tick (None: it has none)."""
        if row is None:
            log.info("changefeed %s was deleted; stopping it", task.label)
            self._drop(task)
            return
        task.info = row
        if row.owner != self.server_id or row.epoch != task.epoch:
            log.warning(
                "changefeed %s now belongs to %s (epoch %d); stopping it here",
                task.label,
                row.owner,
                row.epoch,
            )
            self._drop(task)
            return

        if task.pending is not None:
            if not task.pending.done():
                self._renew(task, row)
                return
            self._collect(task)

        if task.final is not None:
            if task.handle is not None:
                self._begin_stop(task)
                self._renew(task, row)
                return
            self._finish(task, row)
            return

        if row.state != ChangefeedState.NORMAL:
            log.info("changefeed %s is %s; stopping and releasing it", task.label, row.state)
            task.final = _Final("release", remove_dir=row.state == ChangefeedState.REMOVED)
            self._sync(task)
            return

        handle = task.handle
        if handle is None:
            if self.clock() >= task.retry_at:
                self._begin_start(task, row)
            self._renew(task, row)
            return

        err = handle.exception()
        if handle.finished() and err is None:
            log.info("changefeed %s reached its target-ts", task.label)
            task.final = _Final("release", state=ChangefeedState.FINISHED)
        elif err is not None or not handle.is_active():
            self._on_error(task, err or UnclassifiedError("the changefeed's query stopped without an error"))
        elif self._target_reached(task, row):
            log.info("changefeed %s reached its target-ts %s", task.label, row.target_ts)
            task.final = _Final("release", state=ChangefeedState.FINISHED)
        if task.final is not None:
            self._sync(task)
            return
        self._renew(task, row)

    def _target_reached(self, task: _Task, row: ChangefeedInfo) -> bool:
        p = task.progress
        return bool(row.target_ts) and p is not None and p.checkpoint_ts >= int(row.target_ts or 0)

    def _collect(self, task: _Task) -> None:
        fut, kind = task.pending, task.pending_kind
        task.pending = None
        assert fut is not None
        exc = fut.exception()
        if kind == "start":
            if exc is None:
                task.handle = fut.result()
                log.info("changefeed %s started (epoch %d)", task.label, task.epoch)
            else:
                self._on_error(task, exc)
        elif kind == "stop":
            task.handle = None
            if exc is not None:
                log.warning("changefeed %s: error while stopping: %s", task.label, self._scrub(task, exc))

    def _on_error(self, task: _Task, exc: BaseException) -> None:
        decision = task.policy.failed(exc)
        if self.metrics is not None:
            self.metrics.record_error(
                task.namespace, task.id, decision.error.code, retried=isinstance(decision, Restart)
            )
        msg = self._scrub(task, f"[{decision.error.code}] {decision.error.message}")
        if isinstance(decision, Fail):
            if decision.stuck_seconds is not None:
                log.error(
                    "changefeed %s failed after %.0fs of errors: %s", task.label, decision.stuck_seconds, msg
                )
            else:
                log.error("changefeed %s failed: %s", task.label, msg)
            task.final = _Final("release", state=ChangefeedState.FAILED, error=decision.error)
            return
        task.retry_at = self.clock() + decision.delay
        task.warning = msg
        log.warning("changefeed %s: %s; %s", task.label, msg, decision.describe())
        task.final = _Final("retry")

    def _begin_start(self, task: _Task, row: ChangefeedInfo) -> None:
        try:
            config = ReplicaConfig.from_stored(row.config)
            self._own_state(task, row)
            ckpt_dir = self._checkpoint_dir(task)
            self._prepare_claim_dir(task, row, config, StateDir.parse(ckpt_dir))
        except SparkCdcError as exc:
            self._on_error(task, exc)
            return
        start_ts = row.checkpoint_ts if row.checkpoint_ts > 0 else row.start_ts
        spec = ChangefeedSpec(
            changefeed_id=row.id,
            upstream_uri=row.upstream_uri,
            sink_uri=row.sink_uri,
            config=config,
            start_ts=start_ts,
            target_ts=row.target_ts or None,
            checkpoint_dir=ckpt_dir,
            namespace=row.namespace,
            meta_uri=self.store.uri,
            snapshot_dir=self._snapshot_dir(task).location,
            changefeed_uid=row.uid,
            upstream_identity=row.upstream,
        )
        log.info("changefeed %s: starting from ts %s into %s", task.label, start_ts, redact_uri(row.sink_uri))

        metrics = self.metrics

        def on_progress(p: ProgressLike) -> None:
            with task.lock:
                task.progress = p
            if metrics is not None and self.tasks.get(task.key) is task:  # not a run it gave up
                metrics.observe(task.namespace, task.id, p)  # type: ignore[arg-type]

        task.pending = self._pool.submit(
            self.runner.start,
            spec,
            on_progress,
            lambda ts, end: self._record_resolved(task, ts, end),
            lambda planned: self._record_planned(task, planned),
        )
        task.pending_kind = "start"

    def _record_resolved(self, task: _Task, checkpoint_ts: int, end: dict[str, Any]) -> None:
        """Make a raised chain state durable in the meta database before the sink publishes it.

        Called by the changefeed's driver-side marks (``RunningChangefeed.mark``) and batch writer
        (a resolved batch to target-ts), in this process. The next owner starts from the meta
        database's offset; a raise it lacked would give an old-header transaction after it a
        commit_ts at or below a checkpoint the sink already published, and consumers would drop
        it. Only the claim's owner writes: when the changefeed moved on, the mark or the batch
        fails and its ts is never published.
        """

        def values(row: ChangefeedInfo) -> dict[str, Any] | None:
            stats = dict(row.stats or {})
            if not _advance(stats, end):
                return None  # the meta database holds this point or a later one
            # resolved_ts too: the tick's renewal then has nothing new to write (``_renewal_needless``)
            return {"checkpoint_ts": checkpoint_ts, "resolved_ts": checkpoint_ts, "stats": stats}

        self._record(task, values, f"checkpoint {checkpoint_ts}")

    def _record_planned(self, task: _Task, planned: dict[str, Any]) -> None:
        """Record a batch with rows in the meta database before its writers run.

        The batch starts where the last committed one ended, which becomes the meta database's
        offset too (the renewals lag it by up to a tick): so the next owner starts from the batch's
        start and plans the same batch again (``SourceSpec.first_batch``), and a sink whose output
        depends on where batches end (the HTTP sink's request ids) repeats what it may have
        published, instead of new requests that hold the same rows.
        """

        def values(row: ChangefeedInfo) -> dict[str, Any]:
            stats = {**(row.stats or {}), "planned": planned}
            start: dict[str, Any] = planned["start"]
            if not _advance(stats, start):
                return {"stats": stats}
            return {"stats": stats, "checkpoint_ts": int(start["ts"])}

        self._record(task, values, "the batch it writes")

    def _record(
        self, task: _Task, values: Callable[[ChangefeedInfo], dict[str, Any] | None], what: str
    ) -> None:
        """Write ``values(row)`` into the changefeed's row while this claim owns it (compare-and-swap).

        The first try starts from the row as this claim last wrote or read it, without a read. Only
        a swap decides on it: when anything wrote the row since, its version moved, the swap fails
        and the next try reads the row. A cached row that needs no write, or is not this claim's,
        is read again (the read is what tells this claim still owns the changefeed).
        """
        for attempt in range(6):
            cached = task.info if attempt == 0 else None
            if cached is not None and (cached.owner != self.server_id or cached.epoch != task.epoch):
                cached = None
            row = cached if cached is not None else self.store.get_changefeed(task.id, task.namespace)
            if row.owner != self.server_id or row.epoch != task.epoch:
                raise TransientError(
                    f"changefeed {task.label} is no longer this server's claim (epoch {task.epoch}, now "
                    f"{row.epoch} on {row.owner or 'no server'}); its batch is not published",
                    code="CDC:ErrOwnerChanged",
                )
            update = values(row)
            if update is None:
                if cached is not None:
                    continue
                return
            try:
                info = self.store.renew_lease(row, self.server_id, self.lease_seconds, **update)
            except ConflictError:
                continue  # a tick or a user verb wrote the row meanwhile: read it again
            task.info = info
            task.last_renew_ok = self.clock()
            return
        raise TransientError(
            f"changefeed {task.label}: the meta database row kept changing while recording {what}; "
            "its batch is not published",
            code="CDC:ErrMetaConflict",
        )

    def _own_state(self, task: _Task, row: ChangefeedInfo) -> None:
        """Once per claim: check the changefeed's folder is its own, and remove the older claims' folders."""
        if task.state_owned:
            return
        if self._meta_uid is None:
            self._meta_uid = self.store.identity()
        moved = own_changefeed_dir(self._changefeed_dir(task), task.label, row.uid, self._meta_uid)
        if moved is not None:
            log.warning(
                "changefeed %s: the data dir held state of an earlier changefeed with this id; moved it to %s "
                "and starting afresh",
                task.label,
                moved,
            )
        keep = f"epoch-{task.epoch}"
        older = self._claim_dirs(task, keep)
        task.earlier = self._earlier_checkpoints(task, older)
        for _name, old in older:
            self._remove_claim_dir(task, old)
        task.state_owned = True

    def _earlier_checkpoints(self, task: _Task, older: list[tuple[str, StateDir]]) -> list[Evidence]:
        """The older claims' ``checkpoint.json`` (a shared data dir keeps them after a failover)."""
        found = []
        for name, old in older:
            try:
                ev = checkpoint_evidence(old.read_json("checkpoint.json"), f"checkpoint.json of {name}")
            except SparkCdcError as exc:
                log.warning("changefeed %s: cannot read %s's checkpoint: %s", task.label, name, exc.message)
                continue
            if ev is not None:
                found.append(ev)
        return found

    def _prepare_claim_dir(
        self, task: _Task, row: ChangefeedInfo, config: ReplicaConfig, claim_dir: StateDir
    ) -> None:
        """Where this claim starts: after the last committed batch, or at the snapshot's handover point.

        A changefeed resumes exactly after the last committed batch (its offset carries the chain
        state), as the pipeline does from its own ``checkpoint.json``. The same offset is the claim's
        start: the schema history is bootstrapped there (a start derived from checkpoint_ts alone can
        lie after it, say the first position of a binlog file an upstream restart opened, and rows
        read from the end offset would then find no table in the history). An initial snapshot that
        is not durable in the sink yet continues at the handover point its plan was made for.
        """
        end = (row.stats or {}).get("checkpoint_end")
        checkpoint_ts = row.checkpoint_ts
        if config.snapshot.mode == "initial":
            snapshot = self._snapshot_dir(task)
            done = snapshot.read_json("done.json") or self.store.snapshot_report(
                row.id, row.namespace, row.uid
            )
            if done is None:
                plan = snapshot.read_json("plan.json")
                if plan is not None and not claim_dir.exists("start.json"):
                    claim_dir.write_json("start.json", plan["handover"])
                return
            if end is None and checkpoint_ts <= int(done["handover"]["ts"]):
                # done, and no batch reported since: the stream starts at the handover point
                end = done["handover"]
                checkpoint_ts = int(done["handover"]["ts"])
        evidence = list(task.earlier)
        own = checkpoint_evidence(
            claim_dir.read_json("checkpoint.json"), f"checkpoint.json of epoch-{task.epoch}"
        )
        if own is not None:
            evidence.append(own)  # a restart within this claim
        meta = None
        if checkpoint_ts > 0 and end is not None:
            meta = Evidence(
                "the meta database", end, checkpoint_ts, int((row.stats or {}).get("rows_total", 0))
            )
            evidence.insert(0, meta)  # first: it wins a tie
        chosen = newest(evidence)
        if chosen is None or chosen is own:
            return
        if meta is not None and chosen is not meta:
            log.info("changefeed %s: starting from %s, newer than %s", task.label, chosen, meta)
        claim_dir.write_json("start.json", chosen.end)
        claim_dir.write_json(
            "checkpoint.json",
            {"checkpoint_ts": chosen.checkpoint_ts, "end": chosen.end, "rows_total": chosen.rows_total},
        )
        planned = (row.stats or {}).get("planned")
        if planned is not None and Offset.from_json(planned["start"]) == chosen.offset:
            claim_dir.write_json("planned.json", planned)  # the first batch ends where it did
        elif planned is not None:
            log.debug(
                "changefeed %s: the recorded batch from %s is not this claim's start %s",
                task.label,
                Offset.from_json(planned["start"]),
                chosen.offset,
            )

    def _begin_stop(self, task: _Task) -> None:
        handle = task.handle
        assert handle is not None
        task.pending = self._pool.submit(handle.stop)
        task.pending_kind = "stop"

    def _finish(self, task: _Task, row: ChangefeedInfo) -> None:
        final = task.final
        assert final is not None
        if final.kind == "retry":
            task.final = None
            self._renew(task, row)
            return
        values = self._progress_values(task)
        if row.state == ChangefeedState.NORMAL and final.state is not None:
            values["state"] = final.state
            if final.error is not None:
                values["error"] = {
                    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "addr": self.address,
                    "code": final.error.code,
                    "message": self._scrub(task, final.error.message),
                }
                values["warning"] = None
        if row.state == ChangefeedState.FINISHED or final.state == ChangefeedState.FINISHED:
            values["warning"] = None
        try:
            self.store.release_changefeed(row, self.server_id, **values)
        except ConflictError:
            return  # re-read next tick
        self.tasks.pop(task.key, None)
        self._forget_metrics(task)
        if final.remove_dir or row.state == ChangefeedState.REMOVED:
            for _name, old in self._claim_dirs(task, keep=None):
                self._remove_claim_dir(task, old)
            self._remove_state(self._changefeed_dir(task))
        log.info("changefeed %s released (%s)", task.label, values.get("state", row.state))

    def _progress_values(self, task: _Task) -> dict[str, Any]:
        with task.lock:
            p = task.progress
        values: dict[str, Any] = {"warning": task.warning}
        if p is not None:
            values["checkpoint_ts"] = int(p.checkpoint_ts)
            values["resolved_ts"] = int(p.resolved_ts)
            values["stats"] = {
                "rows_total": int(p.rows_total),
                "rows_per_sec": float(p.rows_per_sec),
                "lag_s": float(p.lag_s),
            }
            end = getattr(p, "checkpoint_end", None)
            # Never behind what the batch writer recorded itself (``_record_resolved``).
            end = newer_end(end, (task.info.stats or {}).get("checkpoint_end"))
            if end is not None:
                values["stats"]["checkpoint_end"] = end
            planned = (task.info.stats or {}).get("planned")
            if planned is not None:  # the batch writer's record (``_record_planned``) stays
                values["stats"]["planned"] = planned
            phase = getattr(p, "snapshot_phase", "")
            if phase:
                values["stats"]["snapshot"] = {
                    "phase": phase,
                    "rows_copied": int(getattr(p, "snapshot_rows", 0)),
                    "rows_estimated": int(getattr(p, "snapshot_rows_estimated", 0)),
                    "ranges_done": int(getattr(p, "snapshot_ranges_done", 0)),
                    "ranges_total": int(getattr(p, "snapshot_ranges_total", 0)),
                }
        return values

    def _renew(self, task: _Task, row: ChangefeedInfo) -> None:
        values = self._progress_values(task)
        cp = values.get("checkpoint_ts")
        if cp is not None and cp > task.best_checkpoint:
            task.best_checkpoint = cp
            if task.handle is not None and task.final is None and task.policy.failing:
                # The checkpoint moves again: the earlier transient errors are over.
                task.policy.progressed()
                task.warning = None
                values["warning"] = None
        if self._renewal_needless(task, row, values):
            return
        try:
            task.info = self.store.renew_lease(row, self.server_id, self.lease_seconds, **values)
            task.last_renew_ok = self.clock()
        except ConflictError:
            pass  # the row changed under us (user verb); the next tick re-reads it

    def _renewal_needless(self, task: _Task, row: ChangefeedInfo, values: dict[str, Any]) -> bool:
        """Whether a renewal now would only extend a lease renewed less than a third of it ago.

        An idle changefeed's marks record its checkpoint (``_record_resolved``), which renews the
        lease too; a tick's renewal that would write nothing new is then left out, so twenty idle
        changefeeds do not cost twenty meta database transactions a second. A changed value (a
        warning, rows, a snapshot's progress, a checkpoint the marks did not record) is written at
        once, as before; a lease is renewed at least every third of it (a tick's ``_fence`` stops a
        changefeed whose renewals failed for 0.8 of it).
        """
        if self.clock() - task.last_renew_ok >= self.lease_seconds / 3:
            return False
        for col, value in values.items():
            if col in ("checkpoint_ts", "resolved_ts"):
                if value is not None and int(value) > getattr(row, col):
                    return False
            elif col == "stats":
                if value != (row.stats or {}):
                    return False
            elif value != getattr(row, col):
                return False
        return True

    def _claim(self) -> None:
        if self.max_changefeeds is not None and len(self.tasks) >= self.max_changefeeds:
            self._claimable_since.clear()
            return
        claimable = self.store.claimable_changefeeds()
        if not claimable:
            self._claimable_since.clear()
            return
        now = self.clock()
        self._claimable_since = {r.key: self._claimable_since.get(r.key, now) for r in claimable}
        others = [
            len(s.owned)
            for s in self.store.list_servers(alive_within=self.lease_seconds * 3)
            if s.id != self.server_id
        ]
        least_loaded_other = min(others, default=None)
        for row in claimable:
            if row.key in self.tasks:
                continue
            # Spread changefeeds: leave a fresh one to a live server that runs fewer, but only
            # for a grace period, so one that never claims (full, or API only) cannot starve it.
            waited = now - self._claimable_since[row.key]
            if (
                least_loaded_other is not None
                and least_loaded_other < len(self.tasks)
                and waited < self.claim_grace
            ):
                continue
            if self.max_changefeeds is not None and len(self.tasks) >= self.max_changefeeds:
                return
            try:
                claimed = self.store.claim_changefeed(row, self.server_id, self.lease_seconds)
            except (ConflictError, ChangefeedNotFound):
                continue  # another server won the race
            previous = f" from {row.owner}" if row.owner and row.owner != self.server_id else ""
            log.info("changefeed %s claimed%s (epoch %d)", _label(claimed), previous, claimed.epoch)
            task = _Task(
                namespace=claimed.namespace,
                id=claimed.id,
                epoch=claimed.epoch,
                info=claimed,
                last_renew_ok=self.clock(),
                best_checkpoint=claimed.checkpoint_ts,
                policy=RestartPolicy(
                    backoff_base=self.backoff_base,
                    backoff_max=self.backoff_max,
                    error_stuck_seconds=self.error_stuck_seconds,
                    clock=self.clock,
                ),
            )
            self.tasks[task.key] = task
            self._sync(task)

    # ------------------------------------------------------------------ helpers

    def _changefeed_dir(self, task: _Task) -> StateDir:
        return self.data_dir.child(f"changefeeds/{task.namespace}/{task.id}")

    def _snapshot_dir(self, task: _Task) -> StateDir:
        # The changefeed's, not a claim's: pause/resume, failover and restarts continue its ranges,
        # and a finished snapshot is never copied again.
        return self._changefeed_dir(task).child("snapshot")

    def _checkpoint_dir(self, task: _Task) -> str:
        # A fresh directory per claim: the meta checkpoint, not a stale local Spark
        # checkpoint from an earlier claim, decides where a changefeed resumes.
        return self._changefeed_dir(task).join(f"epoch-{task.epoch}")

    def _claim_dirs(self, task: _Task, keep: str | None) -> list[tuple[str, StateDir]]:
        """The claims' folders (``epoch-<N>``) but ``keep``, by name; none when the folder cannot be listed."""
        base = self._changefeed_dir(task)
        try:
            names = base.list()
        except SparkCdcError as exc:
            log.warning("changefeed %s: cannot list %s: %s", task.label, base.display, exc.message)
            return []
        return [(name, base.child(name)) for name in names if name.startswith("epoch-") and name != keep]

    def _remove_claim_dir(self, task: _Task, old: StateDir) -> None:
        """Remove a claim's folder, with its driver-local Spark checkpoint."""
        if not old.local:  # Spark's checkpoint of an object-store data dir is on this host
            shutil.rmtree(
                spark_checkpoint_location(old, task.id, self.spark_checkpoint_root), ignore_errors=True
            )
        self._remove_state(old)

    @staticmethod
    def _remove_state(d: StateDir) -> None:
        try:
            d.remove_tree()
        except SparkCdcError as exc:  # a leftover folder costs space, not correctness
            log.warning("cannot remove %s from the data dir: %s", d.display, exc.message)

    def _forget_metrics(self, task: _Task) -> None:
        if self.metrics is not None:
            self.metrics.forget(task.namespace, task.id)

    def _scrub(self, task: _Task, msg: object) -> str:
        return scrub(str(msg), [task.info.sink_uri, task.info.upstream_uri]) or ""


def _advance(stats: dict[str, Any], end: dict[str, Any]) -> bool:
    """Move ``stats["checkpoint_end"]`` to ``end`` when ``end`` is newer; whether it moved."""
    if newer_end(stats.get("checkpoint_end"), end) is not end:
        return False
    stats["checkpoint_end"] = end
    return True


def _label(cf: ChangefeedInfo) -> str:
    return cf.id if cf.namespace == "default" else f"{cf.namespace}/{cf.id}"
