"""Running the initial snapshot: plan, read, correct, write, with progress figures along the way.

``run_initial_snapshot`` (called by ``pipeline.changefeed.start_changefeed``) builds an
``InitialSnapshot`` and runs it, or returns the report of the run that finished; ``run`` plans
(``plan``), reads the ranges (``read``), reads the corrections after S (``correct``) and writes the
corrected spool (``write``), then marks the snapshot done. A thread reports ``SnapshotFigures``
meanwhile; ``snapshot_progress`` turns them into the changefeed's ``Progress``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sparkcdc.capture.offset import Offset
from sparkcdc.errors import ConfigError
from sparkcdc.model import TableInfo
from sparkcdc.pipeline.snapshot.correct import binlog_corrections
from sparkcdc.pipeline.snapshot.plan import (
    SNAPSHOT_BATCH_ID,
    STAGE_DONE,
    STAGE_SPLIT,
    RangeState,
    RangeStore,
    SnapshotJob,
    SnapshotOptions,
    SnapshotTaskSpec,
)
from sparkcdc.pipeline.snapshot.read import read_ranges
from sparkcdc.pipeline.snapshot.write import direct_groups, final_rows, write_direct, write_spool
from sparkcdc.pipeline.state import StateDir, check_executors_see

log = logging.getLogger(__name__)


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


class InitialSnapshot(SnapshotJob):
    """Driver side of one changefeed's initial snapshot: the plan, then read, correct, write (see the package)."""

    def __init__(
        self, spark: Any, *, on_figures: Callable[[SnapshotFigures], None] | None = None, **job: Any
    ) -> None:
        """``job``: ``SnapshotJob``'s keyword arguments; ``on_figures`` gets the progress figures."""
        super().__init__(spark, **job)
        self.on_figures = on_figures
        self.phase = "planning"
        self._rate: list[tuple[float, int]] = []
        self._estimated = 0

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
        done = self.done_report()
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
            rounds = read_ranges(self, spec)
            t_read = time.monotonic() - t0
            self.phase = "correcting"
            self._report()
            states = self.store.load_all()
            head, corrections_df, touched = binlog_corrections(self, tables)
            t_correct = time.monotonic() - t0 - t_read
            self.phase = "writing"
            self._report()
            if writer is not None and writer.sink.capabilities.segments == "parallel":
                rows = write_spool(self, writer, states, corrections_df, tables)
            elif writer is not None and direct_groups(writer.sink) is not None:
                rows = write_direct(self, writer, states, corrections_df, tables)
            else:
                rows = write(final_rows(self, states, corrections_df, tables), self.handover.ts)
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
            self.store.save_done(report)
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
        if not self.options.upstream_render or sink is None or not sink.capabilities.upstream_rendered_csv:
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
    snapshot_dir: str = "",
) -> dict[str, Any]:
    """Run (or resume, or skip when done) the snapshot of a changefeed; return its report.

    ``snapshot_dir``: where the snapshot's state lives (default ``<checkpoint_dir>/snapshot``); the
    server gives the changefeed's own folder, which outlives its claims.
    """
    snap = InitialSnapshot(
        spark,
        changefeed_id=changefeed_id,
        upstream_uri=upstream_uri,
        checkpoint_dir=checkpoint_dir,
        snapshot_dir=snapshot_dir,
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
                snapshot_rows_estimated=f.rows_estimated,
            )
        )

    return report
