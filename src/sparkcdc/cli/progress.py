"""The progress of ``sparkcdc run``: a live bar on a terminal, plain lines (or log records) otherwise.

While the initial snapshot copies rows, the bar counts rows copied against the tables' estimated
rows; while the stream catches up, it counts the binlog bytes read against the bytes from where the
catch-up started to the binlog's head (or the target-ts offset), and the ETA is the bytes left at the
rate they were read in the last half minute. Either way the line shows rows, rows/s, an ETA and the
checkpoint lag. (The lag is no measure of the work left: a backlog written in 45 s and read 4 minutes
later is 96 % read while its lag has shrunk by a tenth.)
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
    """Turns binlog bytes read (of a run's backlog) into catch-up progress: bytes made up, bytes to read, ETA.

    A catch-up counts from the bytes read when the changefeed was last caught up (from the run's
    start offset for the first one), so a burst after a quiet hour shows the burst's own share.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.base = 0
        """Bytes read (from the run's start) when this catch-up began."""
        self._last_done = 0
        self._done: deque[tuple[float, int]] = deque()

    def caught_up(self, done: int = 0) -> None:
        """Nothing is left to read at ``done`` bytes: the next catch-up starts there."""
        self.base = self._last_done = done
        self._done.clear()

    def update(self, done: int, total: int) -> tuple[float, float, float | None]:
        """(bytes read, bytes to read, ETA) of the catch-up after a report of ``done`` of ``total`` bytes."""
        now = self.clock()
        if done < self._last_done:  # a new run: its bytes count from its own start offset
            self.base = 0
            self._done.clear()
        self._last_done = done
        self.base = min(self.base, done)
        self._done.append((now, done))
        while self._done and now - self._done[0][0] > ETA_WINDOW_S:
            self._done.popleft()
        eta = None
        (t0, done0), (t1, done1) = self._done[0], self._done[-1]
        if t1 > t0 and done1 > done0:
            eta = max(0, total - done) / ((done1 - done0) / (t1 - t0))
        return (float(done - self.base), float(total - self.base), eta)


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
    done, total = p.backlog_done_bytes, p.backlog_total_bytes
    if p.caught_up or p.lag_s < CAUGHT_UP_LAG_S or (total is not None and done >= total):
        catch_up.caught_up(done)
        return Figures("caught up", p.rows_total, p.rows_per_sec, p.lag_s, p.checkpoint_ts, 1.0, 1.0, 0.0)
    if total is None:  # the binlog's size is not known yet: no share, no ETA
        return Figures("catching up", p.rows_total, p.rows_per_sec, p.lag_s, p.checkpoint_ts, 0.0, None, None)
    read, to_read, eta = catch_up.update(done, total)
    detail = f"binlog {_size(read)}/{_size(to_read)}"
    return Figures(
        "catching up", p.rows_total, p.rows_per_sec, p.lag_s, p.checkpoint_ts, read, to_read, eta, detail
    )


def _size(n: float) -> str:
    """Bytes as B, KiB, MiB or GiB (one decimal above bytes)."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


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
