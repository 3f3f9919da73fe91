"""A slice of the seeded random workload through sparkcdc's three paths, against the native replica.

Concurrent savepoints, XA, keys changed several times, MyISAM/Aria beside InnoDB, UUID/INET6/JSON
columns and DDL in between (``random_workload``); the seed is printed and can be set with
``SPARKCDC_ORACLE_SEED``. ``bench/oracle/run.py --paths-only`` runs it for longer.
"""

from __future__ import annotations

import os

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from tests.oracle.harness import PATHS, Capture, Oracle
from tests.oracle.random_workload import run_random

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SEED = int(os.environ.get("SPARKCDC_ORACLE_SEED", "20261127"))
SECONDS = float(os.environ.get("SPARKCDC_ORACLE_RANDOM_SECONDS", "15"))
DATABASE = "rw_paths"


@pytest.fixture(scope="module")
def capture(oracle: Oracle) -> Capture:
    """The random slice written on the session's oracle and delivered through the three paths."""

    def write(up: LocalMariaDB) -> None:
        stats = run_random(up, seed=SEED, seconds=SECONDS, database=DATABASE)
        assert not stats.unexpected, f"the random workload met unexpected errors: {stats.unexpected[:5]}"

    cap = oracle.capture("random-slice", write, [DATABASE])
    print(
        f"random slice seed {SEED}, {SECONDS:.0f} s: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in cap.seconds.items())
    )
    return cap


@pytest.mark.parametrize("path", PATHS)
def test_random_slice_equals_native_replica(path: str, capture: Capture) -> None:
    capture.assert_ran(path)
    capture.assert_equal(path, DATABASE)
