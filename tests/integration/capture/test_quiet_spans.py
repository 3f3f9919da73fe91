"""Quiet spans (``Planner._quiet_span``): writes to tables a changefeed does not capture make no batch.

A server's changefeeds on one upstream each see every write to it. Where a changefeed captures
none of the tables written, its planner leaves those transactions to a later batch, the way it
treats an idle binlog, and the driver raises the chain state at the same start to a clock
reading the planner took before the head it scanned to (``marks.Quiet.resolved``). The binlog is
MariaDB's, written by the statements below; the planner and the driver's
``RunningChangefeed.mark`` run without Spark, sharing the marks file as the source's runner and
the driver do.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sparkcdc.capture.offset import Offset, base_ts
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.start import head_offset
from sparkcdc.model import RowChange
from sparkcdc.pipeline import plan as plan_module
from sparkcdc.pipeline.marks import Quiet, read_marks
from sparkcdc.pipeline.plan import BatchPlan, Planner
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB

from .helpers import next_plan, old_insert, upstream
from .helpers import planner as make_planner
from .test_resolved_marks import Driver

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@contextmanager
def _feed(
    db: LocalMariaDB, schema: str, tmp_path: Path, target_in_s: float | None = None
) -> Iterator[tuple[Offset, Driver, Planner]]:
    """Tables ``t`` (captured) and ``other`` in ``schema``; a changefeed of ``t`` from the binlog
    head: its start, its driver side and its planner (with ``target_in_s``: target-ts that many
    seconds after now)."""
    db.execute(
        f"CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)",
        f"CREATE TABLE `{schema}`.other (id INT PRIMARY KEY, v INT)",
    )
    start = head_offset(upstream(db))
    target = base_ts(int(time.time() + target_in_s)) if target_in_s is not None else None
    driver = Driver(db, tmp_path, start, target_ts=target)
    planner = make_planner(
        db, tmp_path, start, target_ts=target, marks_dir=driver.marks_dir, filter_rules=[f"{schema}.t"]
    )
    try:
        yield start, driver, planner
    finally:
        planner.clock.close()
        driver.running.stop()


def _head(db: LocalMariaDB) -> tuple[str, int]:
    file, pos = db.query("SHOW MASTER STATUS")[0][:2]
    return str(file), int(pos)


def _commit_ts_of_t(db: LocalMariaDB, plan: BatchPlan, schema: str) -> list[int]:
    return [
        ev.commit_ts
        for ev in RowReader(upstream(db), plan.start, plan.end, shapes=TableShapes()).events()
        if isinstance(ev, RowChange) and (ev.schema, ev.table) == (schema, "t")
    ]


def _quiet(driver: Driver) -> Quiet:
    quiet = read_marks(driver.marks_dir).quiet
    assert quiet is not None
    return quiet


def test_writes_to_other_tables_make_no_batch_and_the_checkpoint_follows_the_clock_past_them(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    with _feed(mariadb, fresh_db, tmp_path) as (start, driver, planner):
        assert planner.next_batch(start) is None
        driver.mark()
        first = driver.running.checkpoint_ts

        # Each plan after a write to `other` passes it and plans nothing; its record says where it
        # started, the head it scanned to, and a clock reading taken before that head.
        def quiet_past_first() -> bool:
            mariadb.execute(f"INSERT INTO `{fresh_db}`.other VALUES ({len(seen) + 1}, 0)")
            seen.append(_head(mariadb))
            assert planner.next_batch(start) is None, "no batch for rows of another table"
            quiet = _quiet(driver)
            assert quiet.at(start) and quiet.head == seen[-1]
            return quiet.resolved is not None and quiet.resolved > first

        seen: list[tuple[str, int]] = []
        wait_until(quiet_past_first, timeout=10, interval=0.3, what="a quiet span with a later clock reading")
        quiet = _quiet(driver)
        assert quiet.resolved is not None

        # The head moves on (another write to `other`) before the driver marks: it raises the chain
        # state at the start to the planner's reading (durable before the sink publishes it).
        mariadb.execute(f"INSERT INTO `{fresh_db}`.other VALUES (1000, 0)")
        assert _head(mariadb) != quiet.head
        driver.mark()
        [raised] = [r for r in read_marks(driver.marks_dir).raised if r.ts == quiet.resolved]
        assert (raised.file, raised.pos) == (start.file, start.pos)
        assert driver.running.checkpoint_ts == quiet.resolved
        assert driver.checkpoint()["end"] == raised.to_json()
        published = driver.running.checkpoint_ts

        # A captured row with a minute-old header after the span: its batch starts at the raised
        # state and passes the span again; the row comes above the published checkpoint, and a
        # replay from Spark's logged start (a new planner process) gives it the same commit_ts.
        old_insert(mariadb, fresh_db, "(1)", 60)
        plan = next_plan(planner, start)
        assert plan.segments and plan.start == raised and (plan.end.file, plan.end.pos) == _head(mariadb)
        [ts] = _commit_ts_of_t(mariadb, plan, fresh_db)
        assert ts > published
        again = make_planner(
            mariadb, tmp_path, start, marks_dir=driver.marks_dir, filter_rules=[f"{fresh_db}.t"]
        ).plan(start.to_json(), plan.end_json())
        assert again.start == raised
        assert _commit_ts_of_t(mariadb, again, fresh_db) == [ts]


@pytest.mark.parametrize("bound", ["bytes", "age"])
def test_past_its_bound_a_span_is_a_batch_without_segments(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, bound: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_module, "QUIET_SPAN_BYTES" if bound == "bytes" else "QUIET_SPAN_S", 0)
    with _feed(mariadb, fresh_db, tmp_path) as (start, _driver, planner):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.other VALUES (1, 0)")
        plan = next_plan(planner, start)
        assert not plan.segments and not plan.is_ddl
        assert (plan.end.file, plan.end.pos) == _head(mariadb) and plan.end.ts > start.ts


def test_an_aged_span_is_moved_past_while_the_binlog_stays_idle(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A span is left at most ``QUIET_SPAN_S`` even when nothing is written after it: the start
    must not stay behind the head for days (a restart of the upstream rotates its binlog, and an
    old enough file is then purged)."""
    monkeypatch.setattr(plan_module, "QUIET_SPAN_S", 1.0)
    with _feed(mariadb, fresh_db, tmp_path) as (start, _driver, planner):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.other VALUES (1, 0)")
        head = _head(mariadb)
        assert planner.next_batch(start) is None
        left = time.monotonic()
        plan = next_plan(planner, start)  # nothing written since: the head stays where it was
        assert time.monotonic() - left >= 0.9, "moved past before the span aged"
        assert not plan.segments and (plan.end.file, plan.end.pos) == head == _head(mariadb)


def test_a_ddl_or_a_prepared_xa_transaction_after_other_tables_rows_is_planned(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """A span ends where a plan must be made: a DDL (its batch changes the catalog), an XA PREPARE
    (the next start carries the prepared transaction) or a captured row."""
    with _feed(mariadb, fresh_db, tmp_path) as (start, _driver, planner):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.other VALUES (1, 0)")
        assert planner.next_batch(start) is None
        mariadb.execute(f"ALTER TABLE `{fresh_db}`.other ADD COLUMN w INT")
        rows = next_plan(planner, start)  # other's row, before the DDL: moved past without segments
        assert not rows.segments and not rows.is_ddl
        ddl = next_plan(planner, rows.end)
        assert ddl.is_ddl and (ddl.end.file, ddl.end.pos) == _head(mariadb)

        mariadb.execute(f"INSERT INTO `{fresh_db}`.other VALUES (2, 0, 0)")
        assert planner.next_batch(ddl.end) is None
        conn = mariadb.connect(fresh_db)
        try:
            with conn.cursor() as cur:
                for sql in (
                    "XA START 'q1'",
                    "INSERT INTO other VALUES (3, 0, 0)",
                    "XA END 'q1'",
                    "XA PREPARE 'q1'",
                ):
                    cur.execute(sql)
            prepared = next_plan(planner, ddl.end)
            assert not prepared.segments and len(prepared.end.xa) == 1
            assert (prepared.end.file, prepared.end.pos) == _head(mariadb)
            with conn.cursor() as cur:
                cur.execute("XA COMMIT 'q1'")
        finally:
            conn.close()
        committed = next_plan(planner, prepared.end)
        assert not committed.segments and committed.end.xa == ()


def test_a_changefeed_with_target_ts_finishes_through_a_span_of_other_tables(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Target-ts a few seconds ahead, and only other tables written until it passes: the spans
    leave no batch but what target-ts needs, the driver's marks stop at target-ts, and the
    changefeed finishes there."""
    with _feed(mariadb, fresh_db, tmp_path, target_in_s=3) as (start, driver, planner):
        target = planner.spec.target_ts
        assert target is not None

        def finished() -> bool:
            nonlocal at
            written.append(len(written))
            mariadb.execute(f"INSERT INTO `{fresh_db}`.other VALUES ({written[-1]}, 0)")
            plan = planner.next_batch(at)
            if plan is not None:  # Spark runs it: the sink commits it
                assert not plan.segments, "nothing captured was written"
                seen.append(plan)
                driver.commit(plan, len(seen))
                at = plan.end
            driver.running.mark()
            return driver.running.finished()

        at = start
        seen: list[BatchPlan] = []
        written: list[int] = []
        wait_until(finished, timeout=20, interval=0.3, what="the changefeed to finish at target-ts")
        # the last raise, a driver's mark or the planner's resolved batch, is target-ts exactly
        assert driver.running.checkpoint_ts == target
        # before target-ts no batch; after it, one past the rows up to it, one to target-ts at most
        assert len(seen) <= 2 < len(written) - 5, (len(seen), len(written))
