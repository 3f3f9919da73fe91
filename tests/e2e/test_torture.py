"""e2e: the crash-and-failover torture scenario, short (``tests/e2e/torture.py``; long: bench/torture).

A minute of workload with old-header transactions through five changefeeds on two servers, one
fault of each kind (kill -9 of an owner, of a Spark Python worker, and a server that kills itself
between a sink's publish and its checkpoint save); every replica equals the upstream, every
change reaches the HTTP receiver and the changelog table once, no published checkpoint goes
back, and the finished snapshot is never read again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.torture import run_torture

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]


def test_crashes_and_failovers_lose_nothing_and_repeat_nothing(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    report = run_torture(mariadb, tmp_path, seconds=60, faults=3, seed=20261128)
    print(report.line(), *report.renumbered, sep="\n  ")
    assert not report.problems, "\n".join([report.line(), *report.problems])
    kinds = {f.split(":", 1)[0] for f in report.faults}
    assert {"owner", "worker", "failpoint"} <= kinds and not report.missed, report.line()
    assert report.transactions > 100 and report.old_headers > 10 and report.lock_waits > 5, report.line()
    # every transaction changes at least two rows, each seen by both the receiver and the changelog
    assert min(report.http_changes, report.changelog_rows) >= 2 * report.transactions, report.line()
