"""``sparkcdc run``'s output: the progress display (live bar, plain lines, log records) and JSON logs."""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass

import pytest

from sparkcdc.cli.logs import JsonFormatter
from sparkcdc.cli.progress import CatchUp, ProgressDisplay, figures_of, plain_line
from sparkcdc.model.ts import compose_ts


@dataclass
class Report:
    checkpoint_ts: int
    rows_total: int
    rows_per_sec: float
    lag_s: float
    caught_up: bool = False
    snapshot_phase: str = ""
    snapshot_rows: int = 0
    snapshot_rows_estimated: int = 0
    snapshot_ranges_done: int = 0
    snapshot_ranges_total: int = 0
    snapshot_eta_s: float | None = None
    backlog_done_bytes: int = 0
    backlog_total_bytes: int | None = None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


TS = compose_ts(1_700_000_000_000, 0)


def test_catch_up_progress_and_eta_in_bytes() -> None:
    clock = Clock()
    c = CatchUp(clock)
    assert c.update(0, 1000) == (0.0, 1000.0, None)  # one report: no rate yet
    clock.now += 10
    read, to_read, eta = c.update(200, 1000)  # 200 bytes in 10 s: 20 B/s, 800 left
    assert (read, to_read) == (200.0, 1000.0) and eta == pytest.approx(40.0)
    c.caught_up(1000)
    # a new catch-up counts from where the last one ended (the head grew by 500 bytes)
    assert c.update(1100, 1500)[:2] == (100.0, 500.0)
    # a new run (its bytes count from its own start offset) starts over
    assert c.update(50, 400)[:2] == (50.0, 400.0)


def test_a_backlog_read_late_shows_the_share_of_its_bytes() -> None:
    # written in 45 s, read 4 minutes later: 96 % of the bytes read, the lag still 3.5 minutes
    c = CatchUp(Clock())
    f = figures_of(
        Report(TS, 1_632_000, 40_000.0, 210.0, backlog_done_bytes=960, backlog_total_bytes=1000), c
    )
    assert f.phase == "catching up" and (f.completed, f.total) == (960.0, 1000.0)
    assert "catching up 96% binlog 960 B/1000 B" in plain_line("orders", f)
    # the binlog's size not probed yet: no share
    f = figures_of(Report(TS, 0, 0.0, 210.0), CatchUp(Clock()))
    assert f.phase == "catching up" and f.total is None and f.eta_s is None
    # everything up to the head read: caught up, even before the monitor's next probe
    f = figures_of(Report(TS, 9, 0.0, 210.0, backlog_done_bytes=1000, backlog_total_bytes=1000), c)
    assert f.phase == "caught up" and f.completed == f.total


def test_figures_of_a_snapshot_and_of_the_stream() -> None:
    c = CatchUp(Clock())
    snap = figures_of(
        Report(TS, 0, 250.0, 0.0, False, "reading", 500, 2000, 3, 8, 6.0),
        c,
    )
    assert (snap.phase, snap.rows, snap.completed, snap.total, snap.eta_s) == (
        "snapshot reading",
        500,
        500,
        2000,
        6,
    )
    line = plain_line("orders", snap)
    assert "snapshot reading 25% ranges 3/8" in line and "rows 500 (250 rows/s)" in line
    assert "ETA 0:00:06" in line and "lag 0.0s" in line
    up = figures_of(Report(TS, 42, 0.0, 0.0, caught_up=True), c)
    assert up.phase == "caught up" and up.eta_s == 0.0
    behind = figures_of(Report(TS, 42, 10.0, 30.0, backlog_done_bytes=10, backlog_total_bytes=3 << 20), c)
    assert behind.phase == "catching up" and behind.total == 3 << 20
    assert "binlog 10 B/3.0 MiB" in plain_line("orders", behind)
    assert "ETA -:--:--" in plain_line("orders", behind)


def test_plain_lines_off_a_terminal_are_throttled() -> None:
    clock = Clock()
    out = io.StringIO()
    d = ProgressDisplay("orders", out, plain_interval_s=5, clock=clock)
    assert not d.live
    d.update(Report(TS, 10, 5.0, 3.0))
    d.update(Report(TS, 11, 5.0, 2.5))  # same phase, too soon: not printed
    clock.now += 6
    d.update(Report(TS, 12, 5.0, 2.0))
    d.update(Report(TS, 12, 0.0, 0.0, caught_up=True))  # a new phase prints at once
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("changefeed orders: catching up") and "rows 10 " in lines[0]
    assert "rows 12 " in lines[1] and lines[2].startswith("changefeed orders: caught up")
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_a_terminal_gets_a_live_bar() -> None:
    term = Terminal()
    d = ProgressDisplay("orders", term)
    assert d.live
    d.update(Report(TS, 0, 250.0, 0.0, False, "reading", 500, 2000, 3, 8, 6.0))
    d.stop()  # renders the last state
    shown = term.getvalue()
    assert "orders: snapshot reading" in shown and "━" in shown
    assert "rows 500" in shown and "250 rows/s" in shown and "ETA 0:00:06" in shown and "lag 0.0s" in shown
    assert "ranges 3/8" in shown


def test_json_logs_and_progress_records(caplog: pytest.LogCaptureFixture) -> None:
    rec = logging.LogRecord("sparkcdc.x", logging.WARNING, __file__, 1, "sink %s down", ("kafka",), None)
    rec.changefeed = "orders"
    out = json.loads(JsonFormatter().format(rec))
    assert out["level"] == "warning" and out["logger"] == "sparkcdc.x" and out["message"] == "sink kafka down"
    assert out["changefeed"] == "orders" and out["time"].endswith("Z")
    d = ProgressDisplay("orders", io.StringIO(), json_logs=True)
    with caplog.at_level(logging.INFO, logger="sparkcdc.progress"):
        d.update(Report(TS, 7, 3.0, 2.0))
    (r,) = caplog.records
    assert r.getMessage() == "catching up"
    assert (r.changefeed, r.rows, r.lag_s, r.checkpoint_ts) == ("orders", 7, 2.0, TS)  # type: ignore[attr-defined]


def test_a_closed_display_shows_nothing_more() -> None:
    term = Terminal()
    d = ProgressDisplay("orders", term)
    d.update(Report(TS, 5, 1.0, 0.0, caught_up=True))
    d.close()
    shown = term.getvalue()
    d.update(Report(TS, 6, 1.0, 0.0, caught_up=True))  # the last report of a stopping query
    d.stop()
    assert term.getvalue() == shown and "rows 5 " in shown
