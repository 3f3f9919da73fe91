"""What the fault tests share: a ``sparkcdc run``'s checkpoint, restarts, waits."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sparkcdc.services.common import stop_process, wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import CliProcess, round_tables_sql, table_rows


def checkpoint(data_dir: Path, changefeed: str) -> dict[str, Any]:
    """The changefeed's ``checkpoint.json`` ({} before the first committed batch)."""
    try:
        return dict(json.loads((data_dir / changefeed / "checkpoint.json").read_text()))
    except (OSError, ValueError):
        return {}


def wait_checkpoint(
    run: CliProcess, data_dir: Path, changefeed: str, ts: int, timeout: float, what: str
) -> dict[str, Any]:
    """Wait until the run's checkpoint reaches ``ts``; fail at once if the run exits."""

    def reached() -> dict[str, Any] | None:
        if run.proc.poll() is not None:
            raise AssertionError(f"sparkcdc run exited with {run.proc.returncode}:\n{run.output()[-4000:]}")
        cp = checkpoint(data_dir, changefeed)
        return cp if int(cp.get("checkpoint_ts", 0)) >= ts else None

    try:
        return wait_until(reached, timeout=timeout, what=what, interval=0.3)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{run.output()[-4000:]}") from None


def create_round_tables(db: LocalMariaDB, schema: str) -> None:
    """The ``ROUND_TABLES`` of the e2e rounds workload in a new ``schema``."""
    db.execute(f"DROP DATABASE IF EXISTS {schema}", *round_tables_sql(schema))


def restart_mariadb(db: LocalMariaDB, down_for: float = 0.0) -> None:
    """Stop the server cleanly (its data dir stays), wait ``down_for`` seconds, start it on the same port."""
    stop_process(db.proc, grace=30)
    db.proc = None
    if down_for:
        time.sleep(down_for)  # the outage itself, not a synchronisation
    db.start()


def assert_rows_equal(up: LocalMariaDB, down: LocalMariaDB, schema: str) -> None:
    """Every row of the rounds tables is the same upstream and downstream."""
    want, got = table_rows(up, schema), table_rows(down, schema)
    for t in want:
        assert got[t] == want[t], (
            f"{schema}.{t}: {len(want[t])} rows upstream, {len(got[t])} downstream; "
            f"first missing {[r for r in want[t] if r not in got[t]][:2]}, "
            f"first extra {[r for r in got[t] if r not in want[t]][:2]}"
        )
