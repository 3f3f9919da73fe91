"""A batch of transactions that change no captured table has no segments (no task decodes it).

On a server whose changefeeds capture different tables of one upstream, each write reached every
changefeed's planner, and each planned a batch with tasks that decoded rows only to drop them all.
The planner now plans such a batch without segments: it moves the checkpoint past them as a
resolved batch does. The binlog is MariaDB's, written by the statements below; which transactions
keep segments is checked against what each changed (an XA transaction's rows are logged at its
PREPARE, apart from its COMMIT).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.capture.start import head_offset
from sparkcdc.services.mariadb import LocalMariaDB

from .helpers import next_plan, planner, read_all, upstream

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _session(mariadb: LocalMariaDB, db: str, *statements: str) -> None:
    conn = mariadb.connect(db)
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
        if not statements[-1].startswith("XA"):
            conn.commit()
    finally:
        conn.close()


def test_a_batch_of_other_tables_has_no_segments_and_moves_the_checkpoint(
    mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path
) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)",
        f"CREATE TABLE `{fresh_db}`.other (id INT PRIMARY KEY)",
    )
    start = head_offset(upstream(mariadb))
    p = planner(mariadb, tmp_path, start, filter_rules=[f"{fresh_db}.t"])

    _session(mariadb, fresh_db, "INSERT INTO other VALUES (1), (2)")
    other = next_plan(p, start)
    assert not other.segments and not other.is_ddl and not other.tables
    assert other.end.key() > start.key() and other.end.ts > start.ts  # past it, with its commit_ts
    assert p.plan(other.start.to_json(), other.end_json()).segments == []

    def step(*statements: str) -> bool:
        """Run one session; the batch planned for exactly what it logged: whether it has segments."""
        nonlocal at
        _session(mariadb, fresh_db, *statements)
        head = head_offset(upstream(mariadb))
        plan = next_plan(p, at)
        assert (plan.end.file, plan.end.pos) == (head.file, head.pos)
        at = plan.end
        return bool(plan.segments)

    at = other.end
    assert step("INSERT INTO other VALUES (3)", "INSERT INTO t VALUES (3)")
    assert not step("INSERT INTO other VALUES (4)", "DELETE FROM other WHERE id = 1")
    # XA: the rows are logged at PREPARE (an event group of its own), the COMMIT apart: the COMMIT's
    # batch keeps segments for a captured table, and has none for one outside the filter.
    step("XA START 'x1'", "INSERT INTO t VALUES (4)", "XA END 'x1'", "XA PREPARE 'x1'")
    assert step("XA COMMIT 'x1'")
    assert not step("XA START 'x2'", "INSERT INTO other VALUES (5)", "XA END 'x2'", "XA PREPARE 'x2'")
    assert not step("XA COMMIT 'x2'")
    # the captured rows: t's, which the batches with segments above decode
    rows = [ev for ev in read_all(mariadb, start, fresh_db) if ev.table == "t"]
    assert sorted(ev.after[0] for ev in rows) == [3, 4]
