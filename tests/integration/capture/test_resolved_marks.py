"""Resolved marks from the driver (``pipeline/marks.py``): an idle changefeed's checkpoint follows the
clock without a batch, and the chain state the driver raises orders later transactions above it in
the planner of another process and on every replay.

The planner and the driver's ``RunningChangefeed.mark`` run here without Spark, against a real
upstream and a file storage sink, the way the source's runner and the driver share the marks file.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.relay import RelayWriter
from sparkcdc.capture.start import head_offset
from sparkcdc.model import RowChange
from sparkcdc.model.ts import physical_ms
from sparkcdc.pipeline.changefeed import RunningChangefeed
from sparkcdc.pipeline.marks import read_marks
from sparkcdc.pipeline.plan import BatchPlan, Planner
from sparkcdc.pipeline.resume import spark_log_end
from sparkcdc.pipeline.spec import ChangefeedSpec
from sparkcdc.pipeline.writer import BatchResult
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.sink import create_sink

from .helpers import next_plan, old_insert, upstream
from .helpers import planner as make_planner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class Driver:
    """A changefeed's driver side without Spark: its ``RunningChangefeed`` and a storage sink."""

    def __init__(self, db: LocalMariaDB, tmp_path: Path, start: Offset, target_ts: int | None = None) -> None:
        self.marks_dir = str(tmp_path / "data" / "spark")
        self.sink_dir = tmp_path / "sink"
        spec = ChangefeedSpec(
            "marks",
            db.uri,
            f"file://{self.sink_dir}?protocol=csv",
            target_ts=target_ts,
            checkpoint_dir=str(tmp_path / "data"),
        )
        sink = create_sink(spec.sink_uri, spec.config, spec.changefeed_id)
        self.running = RunningChangefeed(spec, sink, upstream(db), start, None)
        self.running.use_marks(self.marks_dir)
        self.data = tmp_path / "data"

    def mark(self, timeout: float = 5) -> None:
        """Mark as the marker thread does, until the clock gives a larger bound."""
        wait_until(self.running.mark, timeout=timeout, what="a resolved mark", interval=0.05)

    def commit(self, plan: BatchPlan, batch_id: int) -> None:
        """What the batch writer reports once the sink holds a batch."""
        self.running.on_commit(BatchResult(batch_id, plan.end.ts, plan.end_json(), 1, 0, 0.0))

    def checkpoint(self) -> dict[str, object]:
        return dict(json.loads((self.data / "checkpoint.json").read_text()))

    def metadata_ts(self) -> int:
        return int(json.loads((self.sink_dir / "metadata").read_text())["checkpoint-ts"])


@contextmanager
def _idle_feed(
    db: LocalMariaDB, schema: str, tmp_path: Path, target_after: int | None = None, relay: bool = False
) -> Iterator[tuple[Offset, Driver, Planner]]:
    """A table ``t`` in ``schema``, then a changefeed from the binlog head: its start, its driver
    side and its planner (with ``target_after``: target-ts that far above the start; with
    ``relay``: the planner reads a binlog relay of ``db``, as under a server)."""
    db.execute(f"CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)")
    start = head_offset(upstream(db))
    target = start.ts + target_after if target_after is not None else None
    writer = RelayWriter(upstream(db), tmp_path / "relay").start() if relay else None
    if writer is not None:
        # It starts with the recent binlog files (the session's server has written a lot): the
        # wait below counts on a relay that holds the head, so it grows only with new writes.
        file, pos = db.query("SHOW MASTER STATUS")[0][:2]
        head = Offset(str(file), int(pos), 0).key()
        wait_until(
            lambda: writer.error is not None or Offset(writer.file or "", writer.pos, 0).key() >= head,
            timeout=60,
            what="the relay at the binlog head",
        )
        assert writer.error is None, writer.error
    driver = Driver(db, tmp_path, start, target_ts=target)
    planner = make_planner(
        db, tmp_path, start, marks_dir=driver.marks_dir, relay_dir=str(tmp_path / "relay") if relay else ""
    )
    try:
        yield start, driver, planner
    finally:
        planner.clock.close()
        driver.running.stop()
        if writer is not None:
            writer.stop()


def _commit_ts(db: LocalMariaDB, plan: BatchPlan, schema: str) -> list[int]:
    return [
        ev.commit_ts
        for ev in RowReader(upstream(db), plan.start, plan.end, shapes=TableShapes()).events()
        if isinstance(ev, RowChange) and ev.schema == schema
    ]


def test_the_driver_raises_an_idle_chain_state_that_the_planner_and_a_replay_plan_from(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    with _idle_feed(mariadb, fresh_db, tmp_path) as (start, driver, planner):
        # Nothing was planned yet from the start: the driver does not know it is idle.
        assert not driver.running.mark()
        # Idle: no batch, and the planner records where its scan found nothing.
        assert planner.next_batch(start) is None
        quiet = read_marks(driver.marks_dir).quiet
        assert quiet is not None and quiet.at(start)

        # The driver raises the chain state there; durable before the sink publishes it.
        driver.mark()
        now_ms = time.time() * 1000
        [raised] = read_marks(driver.marks_dir).raised
        assert (raised.file, raised.pos) == (start.file, start.pos) and raised.ts > start.ts
        assert now_ms - 2300 < physical_ms(raised.ts) < now_ms, "the mark is the last second, not older"
        assert driver.checkpoint()["checkpoint_ts"] == raised.ts
        assert driver.checkpoint()["end"] == raised.to_json()
        assert driver.metadata_ts() == raised.ts
        assert driver.running.checkpoint_ts == raised.ts
        # It follows the clock: the next upstream second raises it again, at the same position.
        first = raised
        driver.mark()
        [raised] = read_marks(driver.marks_dir).raised
        assert physical_ms(raised.ts) >= physical_ms(first.ts) + 1000
        assert (raised.file, raised.pos) == (first.file, first.pos)

        # A transaction with a minute-old header: Spark asks from its own (lower) start; the plan
        # starts from the raised state, and the row comes above the published checkpoint.
        published = driver.running.checkpoint_ts
        old_insert(mariadb, fresh_db, "(1)", 60)
        plan = next_plan(planner, start)
        assert plan.segments and plan.start == raised
        assert _commit_ts(mariadb, plan, fresh_db) == [raised.ts + 1]
        assert raised.ts + 1 > published

        # Planned and not committed: no mark, though the planner already found the head quiet after it.
        assert planner.next_batch(plan.end) is None
        assert not driver.running.mark()
        driver.commit(plan, 0)
        driver.mark()
        marks = read_marks(driver.marks_dir)
        assert [(r.file, r.pos) for r in marks.raised] == [
            (start.file, start.pos),
            (plan.end.file, plan.end.pos),
        ]
        after = marks.raise_start(plan.end)
        assert after.ts > plan.end.ts == raised.ts + 1

        # A replay of the batch after a restart (Spark's logged start, a new planner process):
        # planned from the chain state raised at its start, so its row keeps its commit_ts.
        again = make_planner(mariadb, tmp_path, start, marks_dir=driver.marks_dir).plan(
            start.to_json(), plan.end_json()
        )
        assert again.start == raised
        assert _commit_ts(mariadb, again, fresh_db) == [raised.ts + 1]

        # A resume reads Spark's offset log raised by the marks: it is as new as checkpoint.json.
        offsets = Path(driver.marks_dir) / "offsets"
        offsets.mkdir()
        (offsets / "0").write_text("v1\n{}\n" + json.dumps(plan.end_json()) + "\n")
        logged = spark_log_end(driver.marks_dir)
        assert logged is not None and Offset.from_json(logged.end) == after
        assert driver.checkpoint()["end"] == after.to_json()


def test_a_mark_stops_at_target_ts_and_finishes_the_changefeed(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    with _idle_feed(mariadb, fresh_db, tmp_path, target_after=5) as (start, driver, planner):
        target = start.ts + 5
        assert planner.next_batch(start) is None
        driver.mark()
        assert read_marks(driver.marks_dir).raised[-1].ts == target
        assert driver.running.finished()
        assert driver.metadata_ts() == target
        assert planner.next_batch(start) is None, "nothing is planned past target-ts"


@pytest.mark.parametrize("relay", [False, True], ids=["upstream", "relay"])
def test_an_idle_ask_waits_for_a_write_while_the_driver_marks(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, relay: bool
) -> None:
    # The source's latestOffset waits on an idle binlog (Planner.next_batch's ``wait``): without
    # the marks lock, so the driver publishes resolved marks meanwhile; a write ends the wait.
    # With a relay, the wait reads the head once and then watches the relay's newest file.
    with _idle_feed(mariadb, fresh_db, tmp_path, relay=relay) as (start, driver, planner):
        # The query's first ask answers at once: Spark runs a new query's first batch on it, and
        # the query holds a start slot until then.
        asked = time.monotonic()
        assert planner.next_batch(start, wait=120) is None
        assert time.monotonic() - asked < 10, "the first ask did not wait"
        heads = 0
        read_head = planner.clock.binlog_head

        def counted() -> tuple[str, int] | None:
            nonlocal heads
            heads += 1
            return read_head()

        planner.clock.binlog_head = counted  # type: ignore[method-assign]
        got: list[BatchPlan | None] = []
        asker = threading.Thread(target=lambda: got.append(planner.next_batch(start, wait=120)), daemon=True)
        assert planner.next_batch(start, wait=1.0) is None, "nothing written: no batch after the wait"
        # the plan reads the head once (where the first ask's scan found nothing, it does not scan
        # again); the wait five times from the upstream, or once beside the relay
        assert heads == (2 if relay else 6), heads
        asker.start()
        driver.mark()
        driver.mark()  # the next upstream second: two marks while the ask waits
        [raised] = read_marks(driver.marks_dir).raised
        assert driver.running.checkpoint_ts == raised.ts
        assert asker.is_alive() and not got, "nothing written: the ask still waits"
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
        asker.join(30)
        assert not asker.is_alive(), "the write ended the wait"
        [plan] = got
        assert plan is not None and plan.segments
        assert plan.start == raised, "planned from the chain state the driver raised during the wait"
        [ts] = _commit_ts(mariadb, plan, fresh_db)
        assert ts > raised.ts == driver.running.checkpoint_ts, "the row comes above the published checkpoint"


@pytest.mark.parametrize("relay", [False, True], ids=["upstream", "relay"])
def test_a_stop_ends_an_idle_ask_at_once(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path, relay: bool
) -> None:
    # Spark's stop of a query waits for the source's call in progress, which an idle binlog holds
    # for up to IDLE_WAIT_S; the driver's stop (Marks.ask_stop) ends the wait within a look.
    with _idle_feed(mariadb, fresh_db, tmp_path, relay=relay) as (start, driver, planner):
        assert planner.next_batch(start) is None, "nothing written: the ask will wait"
        got: list[BatchPlan | None] = []
        asker = threading.Thread(target=lambda: got.append(planner.next_batch(start, wait=120)), daemon=True)
        asker.start()
        asker.join(1.5)
        assert asker.is_alive() and not got, "nothing written: the ask waits"
        marks = driver.running.marks
        assert marks is not None
        asked = time.monotonic()
        marks.ask_stop()
        asker.join(30)
        took = time.monotonic() - asked
        assert not asker.is_alive() and got == [None], "the stop ended the wait with nothing planned"
        assert took < 1.0, f"the stop took {took:.2f}s to end the wait"
        # the next run's start clears it: its waits are not cut short
        assert driver.running._clock is not None
        driver.running._clock.close()
        driver.running.use_marks(driver.marks_dir)
        assert not driver.running.marks.stopping()


def test_a_storage_sink_is_marked_as_often_as_it_writes_its_metadata(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    # The storage sink writes ``metadata`` at most every 2 s (TiCDC's throttle), so the driver marks
    # it every 2 upstream seconds, and each mark is a ``metadata`` file: not a durable raise a
    # second of which every other one published nothing.
    with _idle_feed(mariadb, fresh_db, tmp_path) as (start, driver, planner):
        assert driver.running.sink.capabilities.resolved_every_s == 2.0
        published = []
        for _ in range(3):
            assert planner.next_batch(start) is None
            driver.mark(timeout=10)
            assert driver.metadata_ts() == driver.running.checkpoint_ts, "every mark is published"
            published.append(physical_ms(driver.running.checkpoint_ts))
            assert not driver.running.mark(), "the same upstream second: nothing more"
        steps = [b - a for a, b in itertools.pairwise(published)]
        assert all(step >= 2000 for step in steps), steps
