"""The progress of ``sparkcdc run``: a live bar on a terminal, plain lines (or log records) otherwise.

While the initial snapshot copies rows, the bar counts rows copied against the tables' estimated
rows; while the stream catches up, it counts the lag already made up against the lag the catch-up
started from. Either way the line shows rows, rows/s, an ETA and the checkpoint lag.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from sparkcdc.model.ts import physical_ms

log = logging.getLogger("sparkcdc.progress")

CAUGHT_UP_LAG_S = 1.0
"""A lag below this counts as caught up (the checkpoint moves in micro-batches)."""

ETA_WINDOW_S = 30.0


@dataclass
class Figures:
    """What one progress line shows."""

    phase: str
    """"snapshot reading" (or correcting, writing), "catching up" or "caught up"."""
    rows: int
    rows_per_sec: float
    lag_s: float
    checkpoint_ts: int
    completed: float
    total: float | None
    """None: how far the work goes is unknown."""
    eta_s: float | None
    detail: str = ""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class CatchUp:
    """Turns a stream of lags into catch-up progress: how much of the lag is made up, and an ETA."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.start_lag = 0.0
        self._lags: deque[tuple[float, float]] = deque()

    def caught_up(self) -> None:
        """The lag is gone: the next lag starts a new catch-up."""
        self.start_lag = 0.0
        self._lags.clear()

    def update(self, lag_s: float) -> tuple[float, float, float | None]:
        """(lag made up, lag the catch-up started from, ETA) after the lag ``lag_s``."""
        now = self.clock()
        self.start_lag = max(self.start_lag, lag_s)
        self._lags.append((now, lag_s))
        while self._lags and now - self._lags[0][0] > ETA_WINDOW_S:
            self._lags.popleft()
        eta = None
        (t0, lag0), (t1, lag1) = self._lags[0], self._lags[-1]
        if t1 > t0 and lag1 < lag0:
            eta = lag1 / ((lag0 - lag1) / (t1 - t0))
        return (self.start_lag - lag_s, self.start_lag, eta)


def figures_of(p: Any, catch_up: CatchUp) -> Figures:
    """The figures of a progress report (``pipeline.changefeed.Progress``)."""
    phase = p.snapshot_phase
    if phase and phase != "done":
        done_ranges = f"ranges {p.snapshot_ranges_done}/{p.snapshot_ranges_total}"
        total = float(p.snapshot_rows_estimated) if p.snapshot_rows_estimated else None
        return Figures(
            f"snapshot {phase}",
            p.snapshot_rows,
            p.rows_per_sec,
            p.lag_s,
            p.checkpoint_ts,
            float(p.snapshot_rows),
            total,
            p.snapshot_eta_s,
            done_ranges,
        )
    if p.caught_up or p.lag_s < CAUGHT_UP_LAG_S:
        catch_up.caught_up()
        return Figures("caught up", p.rows_total, p.rows_per_sec, p.lag_s, p.checkpoint_ts, 1.0, 1.0, 0.0)
    made_up, start, eta = catch_up.update(p.lag_s)
    return Figures("catching up", p.rows_total, p.rows_per_sec, p.lag_s, p.checkpoint_ts, made_up, start, eta)


def plain_line(changefeed_id: str, f: Figures) -> str:
    """The figures as one line of text."""
    ckpt = time.strftime("%H:%M:%S", time.gmtime(physical_ms(f.checkpoint_ts) / 1000))
    pct = f" {100.0 * f.completed / f.total:.0f}%" if f.total else ""
    detail = f" {f.detail}" if f.detail else ""
    return (
        f"changefeed {changefeed_id}: {f.phase}{pct}{detail}, rows {f.rows:,} ({f.rows_per_sec:,.0f} rows/s), "
        f"ETA {_duration(f.eta_s)}, lag {f.lag_s:.1f}s, checkpoint-ts {f.checkpoint_ts} ({ckpt} UTC)"
    )


class ProgressDisplay:
    """Shows progress reports: a rich live bar when ``stream`` is a terminal, else a line every few seconds."""

    def __init__(
        self,
        changefeed_id: str,
        stream: TextIO | None = None,
        *,
        json_logs: bool = False,
        plain_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.changefeed_id = changefeed_id
        self.stream = stream if stream is not None else sys.stdout
        self.live = self.stream.isatty()
        self.json_logs = json_logs
        self.plain_interval_s = plain_interval_s
        self.clock = clock
        self.catch_up = CatchUp(clock)
        self._last_plain = -1e18
        self._last_phase = ""
        self._progress: Any = None
        self._task: Any = None
        self._handlers: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._lock = threading.Lock()  # reports come from the batch writer and the monitor thread
        self._closed = False

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        stderr_tty = sys.stderr.isatty()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=30),
            TextColumn("{task.fields[figures]}"),
            console=Console(file=self.stream),
            redirect_stdout=True,
            redirect_stderr=stderr_tty,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(f"{self.changefeed_id}: starting", total=None, figures="")
        before = sys.stderr
        self._progress.start()
        if stderr_tty:
            # Log records go above the live line, not through it (sys.stderr is rich's proxy now).
            for h in logging.getLogger().handlers:
                if isinstance(h, logging.StreamHandler) and h.stream is before:
                    self._handlers.append((h, h.stream))
                    h.setStream(sys.stderr)

    def update(self, p: Any) -> None:
        """Show a progress report."""
        with self._lock:
            if not self._closed:
                self._update(p)

    def _update(self, p: Any) -> None:
        f = figures_of(p, self.catch_up)
        if self.live:
            self._show_live(f)
            return
        now = self.clock()
        if f.phase == self._last_phase and now - self._last_plain < self.plain_interval_s:
            return
        self._last_plain, self._last_phase = now, f.phase
        if self.json_logs:
            log.info(
                "%s",
                f.phase,
                extra={
                    "changefeed": self.changefeed_id,
                    "rows": f.rows,
                    "rows_per_sec": round(f.rows_per_sec, 1),
                    "eta_s": None if f.eta_s is None else round(f.eta_s, 1),
                    "lag_s": round(f.lag_s, 3),
                    "checkpoint_ts": f.checkpoint_ts,
                    "completed": f.completed,
                    "total": f.total,
                },
            )
            return
        print(plain_line(self.changefeed_id, f), file=self.stream, flush=True)

    def _show_live(self, f: Figures) -> None:
        if self._progress is None:
            self._start_live()
        detail = f"{f.detail}  " if f.detail else ""
        figures = f"{detail}rows {f.rows:,}  {f.rows_per_sec:,.0f} rows/s  ETA {_duration(f.eta_s)}  lag {f.lag_s:.1f}s"
        self._progress.update(
            self._task,
            description=f"{self.changefeed_id}: {f.phase}",
            total=f.total,
            completed=f.completed,
            figures=figures,
        )

    def stop(self) -> None:
        """End the live line (the last state stays on screen)."""
        with self._lock:
            self._stop()

    def close(self) -> None:
        """Stop for good: later reports (a stopping query's last one) show nothing."""
        with self._lock:
            self._closed = True
            self._stop()

    def _stop(self) -> None:
        if self._progress is not None:
            for h, stream in self._handlers:
                h.setStream(stream)
            self._handlers.clear()
            self._progress.stop()
            self._progress = None
