"""The marks file the driver and the source's planner share (``pipeline/marks.py``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sparkcdc.capture.offset import Offset
from sparkcdc.pipeline.marks import KEEP_RAISED, MARKS_FILE, Marks, MarkState, Quiet, read_marks


def test_a_start_is_raised_only_at_a_position_the_driver_raised() -> None:
    state = MarkState()
    state.add_raised(Offset("b.000001", 100, 50))
    state.add_raised(Offset("b.000001", 200, 70))
    assert state.raise_start(Offset("b.000001", 100, 10)) == Offset("b.000001", 100, 50)
    assert state.raise_start(Offset("b.000001", 200, 60)) == Offset("b.000001", 200, 70)
    # another position, or a chain state already higher: as it is
    assert state.raise_start(Offset("b.000001", 300, 10)) == Offset("b.000001", 300, 10)
    assert state.raise_start(Offset("b.000001", 100, 90)) == Offset("b.000001", 100, 90)
    # XA transactions open at the start stay with it
    xa = Offset("b.000001", 100, 10, (("x1", "b.000001", 4),))
    assert state.raise_start(xa) == Offset("b.000001", 100, 50, (("x1", "b.000001", 4),))


def test_the_newest_raise_of_each_of_the_last_positions_is_kept() -> None:
    state = MarkState()
    state.add_raised(Offset("b.000001", 100, 50))
    state.add_raised(Offset("b.000001", 100, 60))
    assert state.raised == [Offset("b.000001", 100, 60)]
    for pos in range(1, KEEP_RAISED + 2):
        state.add_raised(Offset("b.000002", pos, 100 + pos))
    assert len(state.raised) == KEEP_RAISED
    assert state.raised[-1] == Offset("b.000002", KEEP_RAISED + 1, 101 + KEEP_RAISED)
    assert state.raise_start(Offset("b.000001", 100, 1)).ts == 1, "the oldest position was dropped"


def test_the_state_round_trips_through_the_file(tmp_path: Path) -> None:
    marks = Marks(str(tmp_path / "spark"))
    with marks.locked() as state:
        assert state == MarkState()
        state.add_raised(Offset("b.000001", 100, 50))
        state.quiet = Quiet("b.000001", 100, ("b.000001", 100))
    got = read_marks(str(tmp_path / "spark"))
    assert got.raised == [Offset("b.000001", 100, 50)]
    assert got.quiet == Quiet("b.000001", 100, ("b.000001", 100))
    assert got.quiet.at(Offset("b.000001", 100, 999)) and not got.quiet.at(Offset("b.000001", 101, 50))
    marks.close()


def test_a_quiet_span_keeps_its_clock_reading_and_an_older_file_reads_without_one(tmp_path: Path) -> None:
    marks = Marks(str(tmp_path))
    with marks.locked() as state:
        state.quiet = Quiet("b.000001", 100, ("b.000001", 900), resolved=77)
    assert read_marks(str(tmp_path)).quiet == Quiet("b.000001", 100, ("b.000001", 900), 77)
    marks.close()
    # the file of a run before quiet spans: four fields
    (tmp_path / MARKS_FILE).write_text('{"raised": [], "quiet": ["b.000001", 100, "b.000001", 100]}')
    assert read_marks(str(tmp_path)).quiet == Quiet("b.000001", 100, ("b.000001", 100), None)


def test_no_file_or_a_torn_one_reads_as_nothing_raised(tmp_path: Path) -> None:
    assert read_marks(str(tmp_path)) == MarkState()
    (tmp_path / MARKS_FILE).write_text('{"raised": [{"file": "b.0')
    assert read_marks(str(tmp_path)) == MarkState()


def test_the_lock_keeps_a_plan_and_a_mark_apart(tmp_path: Path) -> None:
    """Two openers (the driver and the runner are two processes; two descriptors lock alike)."""
    driver, planner = Marks(str(tmp_path)), Marks(str(tmp_path))
    order: list[str] = []

    def plan() -> None:
        with planner.locked() as state:
            order.append(f"plan saw {len(state.raised)} raised")

    with driver.locked() as state:
        t = threading.Thread(target=plan)
        t.start()
        t.join(0.3)
        assert t.is_alive(), "the planner got the lock the driver holds"
        state.add_raised(Offset("b.000001", 4, 9))
        driver.flush(state)
        order.append("mark")
        time.sleep(0.05)  # still held: the planner must not run before the lock goes
    t.join(5)
    assert order == ["mark", "plan saw 1 raised"]
    driver.close()
    planner.close()
