"""A slice of the seeded random workload through sparkcdc's three paths, against the native replica.

Concurrent savepoints, XA, keys changed several times, MyISAM/Aria beside InnoDB, UUID/INET6/JSON
columns and DDL in between (``random_workload``); the seed is printed and can be set with
``SPARKCDC_ORACLE_SEED``. The workload itself is checked first: every form ran, nothing failed that
an application would not expect, and the native replica caught up without an error and equals the
upstream. ``bench/oracle/run.py`` runs it for longer, natively and through the paths.
"""

from __future__ import annotations

import os

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from tests.oracle.harness import PATHS, Capture, Oracle
from tests.oracle.native import check_native
from tests.oracle.random_workload import FEATURES, Stats, run_random
from tests.oracle.tablediff import base_tables

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SEED = int(os.environ.get("SPARKCDC_ORACLE_SEED", "20261127"))
SECONDS = float(os.environ.get("SPARKCDC_ORACLE_RANDOM_SECONDS", "15"))
DATABASE = "rw_paths"


@pytest.fixture(scope="module")
def written(oracle: Oracle) -> tuple[Capture, Stats]:
    """The random slice written on the session's oracle and delivered through the three paths."""
    done: list[Stats] = []

    def write(up: LocalMariaDB) -> None:
        done.append(run_random(up, seed=SEED, seconds=SECONDS, database=DATABASE))

    cap = oracle.capture("random-slice", write, [DATABASE])
    print(
        f"random slice seed {SEED}, {SECONDS:.0f} s: {done[0].summary()}; "
        + ", ".join(f"{k} {v:.0f} s" for k, v in cap.seconds.items())
    )
    return cap, done[0]


def test_the_workload_did_what_it_claims_and_replicates_natively(written: tuple[Capture, Stats]) -> None:
    cap, stats = written
    assert not stats.unexpected, f"the random workload met unexpected errors: {stats.unexpected[:5]}"
    step_forms = FEATURES - {"ddl", "nontransactional"}
    missing = sorted(f for f in step_forms if stats.forms[f] == 0)
    assert not missing, f"forms that never ran: {missing} ({stats.summary()})"
    assert stats.committed >= 200 and stats.rolled_back >= 10, stats.summary()
    assert stats.ddls >= 3 and any(k.startswith("ddl_") for k in stats.forms), stats.summary()
    tables, rows = check_native(cap.oracle.upstream, cap.oracle.replica, [DATABASE])
    assert tables == len(base_tables(cap.oracle.upstream, DATABASE)) >= 5
    assert rows > 100, f"only {rows} rows compared"


@pytest.mark.parametrize("path", PATHS)
def test_random_slice_equals_native_replica(path: str, written: tuple[Capture, Stats]) -> None:
    capture, _stats = written
    capture.assert_ran(path)
    capture.assert_equal(path, DATABASE)
