"""The resolved ts of an idle binlog: it follows the upstream clock, open transactions hold it back,
and the chain state it raises gives later transactions larger commit_ts on every replay."""

from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path

import pytest

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.resolved import UpstreamClock, shared_clock
from sparkcdc.capture.start import head_offset, offset_for_ts
from sparkcdc.capture.upstream import UpstreamConfig, check_upstream
from sparkcdc.model import RowChange
from sparkcdc.model.ts import physical_ms
from sparkcdc.pipeline.plan import Planner, SourceSpec
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB

from .helpers import next_plan as _next_plan
from .helpers import old_insert as _old_insert
from .helpers import planner as _planner
from .helpers import upstream

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _rows(up: UpstreamConfig, start: Offset, end: Offset, schema: str) -> list[RowChange]:
    return [
        ev
        for ev in RowReader(up, start, end, shapes=TableShapes()).events()
        if isinstance(ev, RowChange) and ev.schema == schema
    ]


def test_an_idle_binlog_resolves_to_the_clock_about_once_a_second(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    start = head_offset(up)
    planner = _planner(mariadb, tmp_path, start)
    plan = _next_plan(planner, start)
    now_ms = time.time() * 1000
    assert not plan.segments and not plan.is_ddl
    assert plan.end_json()["segments"] == 0
    assert (plan.end.file, plan.end.pos) == (start.file, start.pos)
    assert plan.end.ts > start.ts
    assert now_ms - 1300 < physical_ms(plan.end.ts) < now_ms, "the resolved ts is the last second, not older"
    assert planner.plan(plan.start.to_json(), plan.end_json()).segments == []

    # Polled like a 50 ms trigger for 3.5 s: a new resolved ts about once per upstream second.
    ends = [plan.end]
    deadline = time.monotonic() + 3.5
    while time.monotonic() < deadline:
        nxt = planner.next_batch(ends[-1])
        if nxt is not None:
            ends.append(nxt.end)
        time.sleep(0.05)  # the trigger interval of this simulated query, not a readiness wait
    advances = len(ends) - 1
    assert 2 <= advances <= 5, f"{advances} resolved batches in 3.5 s"
    assert all(a.ts < b.ts for a, b in itertools.pairwise(ends))
    assert {(e.file, e.pos) for e in ends} == {(start.file, start.pos)}


def test_the_raised_chain_state_orders_later_transactions_above_it_on_every_replay(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    start = head_offset(up)
    planner = _planner(mariadb, tmp_path, start)
    resolved = _next_plan(planner, start).end

    # An ordinary transaction after the advance: the commit_ts the binlog alone gives it.
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    first = _next_plan(planner, resolved)
    assert first.segments and first.start == resolved
    [row1] = _rows(up, first.start, first.end, fresh_db)
    assert row1.commit_ts > resolved.ts
    assert [r.commit_ts for r in _rows(up, start, first.end, fresh_db)] == [row1.commit_ts]

    # Idle again, then a transaction whose header second is a minute old.
    resolved2 = _next_plan(planner, first.end).end
    assert resolved2.ts > row1.commit_ts
    _old_insert(mariadb, fresh_db, "(2)", 60)
    second = _next_plan(planner, resolved2)
    [row2] = _rows(up, second.start, second.end, fresh_db)
    assert row2.commit_ts == resolved2.ts + 1, "above the resolved ts already published"
    # Without the raised chain state (a read from before the advance) it would have fallen below it.
    from_before = _rows(up, first.end, second.end, fresh_db)
    assert [r.after for r in from_before] == [(2,)] and from_before[0].commit_ts < resolved2.ts

    # A restarted planner replans the batch from Spark's offsets; the replay derives the same commit_ts.
    again = _planner(mariadb, tmp_path, start).plan(second.start.to_json(), second.end_json())
    assert [(s.start, s.end) for s in again.segments] == [(s.start, s.end) for s in second.segments]
    assert [r.commit_ts for r in _rows(up, again.start, again.end, fresh_db)] == [row2.commit_ts]
    # A start from that checkpoint ts (what a server resumes from) continues above it too.
    assert offset_for_ts(up, resolved2.ts).ts >= resolved2.ts


def test_an_open_transaction_holds_the_resolved_ts_back_until_it_commits(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    start = head_offset(up)
    planner = _planner(mariadb, tmp_path, start)
    at = _next_plan(planner, start).end
    conn = mariadb.connect(fresh_db)
    try:
        with conn.cursor() as cur:
            opened_s = int(time.time())
            cur.execute("BEGIN")
            cur.execute("INSERT INTO t VALUES (1)")
            # 3 s open: any resolved ts stays before the second the transaction started in.
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                nxt = planner.next_batch(at)
                if nxt is not None:
                    assert not nxt.segments, "the open transaction is not in the binlog"
                    assert physical_ms(nxt.end.ts) < opened_s * 1000
                    at = nxt.end
                time.sleep(0.05)  # the trigger interval of this simulated query, not a readiness wait
            held = at.ts
            cur.execute("COMMIT")
    finally:
        conn.close()
    batch = _next_plan(planner, at)
    [row] = _rows(up, batch.start, batch.end, fresh_db)
    assert row.commit_ts > held
    after = _next_plan(planner, batch.end)
    assert not after.segments and after.end.ts > row.commit_ts


def test_target_ts_is_resolved_exactly(mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path) -> None:
    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    start = head_offset(up)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    mid = head_offset(up)
    second = int(time.time())
    wait_until(lambda: int(time.time()) > second, timeout=3, what="the next second")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2)")
    target = head_offset(up).ts - 1
    assert mid.ts < target

    # The next transaction lies beyond target-ts: everything up to it is out, at once.
    planner = _planner(mariadb, tmp_path, start, target_ts=target)
    assert _next_plan(planner, start).end == mid
    tail = _next_plan(planner, mid)
    assert not tail.segments and tail.end == Offset(mid.file, mid.pos, target)
    assert planner.next_batch(tail.end) is None

    # An idle binlog and a target-ts 1.5 s ahead: the resolved ts stops at it once the clock passed it.
    head = head_offset(up)
    target = (int((time.time() + 1.5) * 1000)) << 18
    planner = _planner(mariadb, tmp_path, head, target_ts=target)
    at = head
    while at.ts < target:
        at = _next_plan(planner, at, timeout=6).end
        assert at.ts <= target
    assert time.time() * 1000 > physical_ms(target)
    assert planner.next_batch(at) is None


def test_clock_reading_without_the_process_privilege_gives_no_bound(
    mariadb: LocalMariaDB, caplog: pytest.LogCaptureFixture
) -> None:
    mariadb.execute(
        "CREATE USER IF NOT EXISTS 'noproc'@'%' IDENTIFIED BY 'pw'",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'noproc'@'%'",
    )
    base = UpstreamConfig.from_uri(mariadb.uri)
    noproc = UpstreamConfig(base.host, base.port, "noproc", "pw")
    clock = UpstreamClock(noproc)
    try:
        with caplog.at_level(logging.WARNING, logger="sparkcdc.capture"):
            check_upstream(noproc)  # a warning at start, not a refusal
            assert "lacks PROCESS" in caplog.text
            caplog.clear()
            assert clock.resolved_bound() is None
        assert not clock.due(), "a refused reading is not retried at once"
        assert "GRANT PROCESS ON *.* TO 'noproc'" in caplog.text
    finally:
        clock.close()
        mariadb.execute("DROP USER IF EXISTS 'noproc'@'%'")


def test_a_resume_plans_the_batch_an_earlier_run_planned_from_its_start(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """``first_batch`` (``planned.json``): the first batch from that start ends where the earlier one did,
    though more transactions came since; later batches are planned as usual."""
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    up = upstream(mariadb)
    start = head_offset(up)
    for i in (1, 2):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES ({i})")
    earlier = _next_plan(_planner(mariadb, tmp_path, start), start)
    assert [r.after for r in _rows(up, earlier.start, earlier.end, fresh_db)] == [(1,), (2,)]
    for i in (3, 4):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES ({i})")

    fresh = _next_plan(_planner(mariadb, tmp_path / "fresh", start), start)
    assert fresh.end.key() > earlier.end.key(), "without the record the batch takes everything new"
    spec = SourceSpec(
        changefeed_id="resolved",
        upstream_uri=mariadb.uri,
        start=start.to_json(),
        history_path=str(tmp_path / "again.jsonl"),
        first_batch={"start": start.to_json(), "end": earlier.end.to_json()},
    )
    planner = Planner(spec)
    again = _next_plan(planner, start)
    assert again.end == earlier.end
    rest = _next_plan(planner, again.end)
    assert [r.after for r in _rows(up, rest.start, rest.end, fresh_db)] == [(3,), (4,)]
    # A record of another start changes nothing.
    other = SourceSpec(**{**spec.to_json(), "history_path": str(tmp_path / "other.jsonl")})
    other.first_batch = {"start": earlier.end.to_json(), "end": rest.end.to_json()}
    assert _next_plan(Planner(other), start).end == fresh.end


def test_an_idle_binlog_is_not_scanned_again_while_its_head_stays(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    """Spark asks for the next batch every trigger (200 ms): while the binlog head has not moved
    since a scan from the same start found nothing, the planner opens no binlog dump at all, and
    the resolved ts still follows the clock; the first transaction after that is planned at once."""
    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    start = head_offset(up)
    planner = _planner(mariadb, tmp_path, start)
    scans: list[Offset] = []
    real_scan = planner.scanner.scan

    def counted(at: Offset, **kw: object) -> object:
        scans.append(at)
        return real_scan(at, **kw)  # type: ignore[arg-type]

    planner.scanner.scan = counted  # type: ignore[method-assign]
    at = start
    deadline = time.monotonic() + 2.5
    resolved = 0
    while time.monotonic() < deadline:
        nxt = planner.next_batch(at)
        if nxt is not None:
            assert not nxt.segments and (nxt.end.file, nxt.end.pos) == (start.file, start.pos)
            at, resolved = nxt.end, resolved + 1
        time.sleep(0.05)  # the trigger interval of this simulated query, not a readiness wait
    assert resolved >= 1, "the resolved ts follows the clock without scans"
    assert len(scans) == 1, f"{len(scans)} scans in 2.5 s of polls of a quiet binlog"
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)")
    plan = _next_plan(planner, at)
    assert plan.segments and plan.end.key() > at.key()
    assert [r.after for r in _rows(up, at, plan.end, fresh_db)] == [(1,)]


def _status(mariadb: LocalMariaDB, name: str) -> int:
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SHOW GLOBAL STATUS LIKE '{name}'")
            row = cur.fetchone()
    finally:
        conn.close()
    return int(row[1]) if row else 0


HEAD_STATUS = "Com_show_binlog_status"
"""The server's count of ``SHOW MASTER STATUS`` (MariaDB counts it as ``SHOW BINLOG STATUS``)."""


def test_the_changefeeds_of_a_process_share_one_clock_reading_per_upstream_second(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    """Twenty markers on one upstream: the server's own counters show one clock and one head
    query per upstream second, and each marker's head comes from its bound's reading."""
    up = upstream(mariadb)
    users = [shared_clock(up) for _ in range(20)]
    try:
        head_stat = HEAD_STATUS
        heads0 = _status(mariadb, head_stat)
        conns0 = _status(mariadb, "Connections")
        marks = 0
        deadline = time.monotonic() + 3.5
        seconds = set()
        while time.monotonic() < deadline:
            for u in users:
                if u.due():
                    bound = u.resolved_bound()
                    assert bound is not None and u.binlog_head() is not None
                    seconds.add(bound)
                    marks += 1
            time.sleep(0.02)
        heads = _status(mariadb, head_stat) - heads0
        assert marks >= 20 * 3, marks
        assert 3 <= len(seconds) <= 5 and len(seconds) - 1 <= heads <= len(seconds) + 1, (heads, seconds)
        assert _status(mariadb, "Connections") - conns0 <= 2 + 1, "one kept connection for all"
        # a write moves the head: the next second's reading shows it to every marker
        mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
        before = users[0].binlog_head()
        wait_until(lambda: users[0].due(), timeout=3, interval=0.02, what="the next upstream second")
        users[0].resolved_bound()
        assert users[0].binlog_head() != before
        wait_until(lambda: users[1].due(), timeout=3, interval=0.02, what="the second marker's turn")
        users[1].resolved_bound()
        assert users[1].binlog_head() == users[0].binlog_head()
    finally:
        for u in users:
            u.close()
    again = shared_clock(up)  # the last user closed it: a new one reads afresh
    try:
        assert again._shared.users == 1 and again._shared is not users[0]._shared
    finally:
        again.close()
