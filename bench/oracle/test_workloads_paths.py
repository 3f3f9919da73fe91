"""Workloads no one here wrote, through sparkcdc's three paths, against MariaDB's native replica.

One capture on an upstream with mtr's server defaults (``mtr.SERVER_ARGS``: latin1, MyISAM by
default): every file of ``mtr_files.txt`` replayed by ``mariadb-test`` (each file a segment of its
own, so a failing file fails its own test), then a slice of the seeded random workload
(``random_workload``: concurrent savepoints, XA, key chains, MyISAM/Aria beside InnoDB, DDL in
between; the seed is printed and can be set with ``SPARKCDC_ORACLE_SEED``). Each database the files
and the workload wrote is its own test per path. ``bench/oracle`` runs the random workload for
longer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.oracle import mtr
from tests.oracle.harness import PATHS, Capture, Oracle, Segment
from tests.oracle.random_workload import run_random

from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

ONLY = [f for f in os.environ.get("SPARKCDC_ORACLE_MTR_ONLY", "").split(",") if f.strip()]
"""A subset of the list to replay (``main/ctype_sjis_innodb,main/delete_innodb``; ``.test`` optional)."""
FILES = [
    f
    for f in mtr.list_files()
    if not ONLY or any(f.removesuffix(".test") == o.strip().removesuffix(".test") for o in ONLY)
]
assert FILES or not ONLY, f"SPARKCDC_ORACLE_MTR_ONLY names no listed file: {ONLY}"
RANDOM_DB = "rw_slice"
RANDOM_SECONDS = float(os.environ.get("SPARKCDC_ORACLE_RANDOM_SECONDS", "45"))
SEED = int(os.environ.get("SPARKCDC_ORACLE_SEED", "20261127"))
DATABASES = [mtr.database_for(f) for f in FILES]


def _mtr_segment(file: str, log_dir: Path) -> Segment:
    def write(up: LocalMariaDB) -> None:
        run = mtr.run_file(up, file, log_dir=log_dir)
        if run.timed_out:
            raise mtr.MtrReplayError(f"{file} ran longer than its timeout:\n{run.output_tail}")

    return Segment(mtr.database_for(file), write, (mtr.database_for(file),))


def _random_segment() -> Segment:
    def write(up: LocalMariaDB) -> None:
        stats = run_random(up, seed=SEED, seconds=RANDOM_SECONDS, database=RANDOM_DB)
        assert not stats.unexpected, f"the random workload met unexpected errors: {stats.unexpected[:5]}"
        print(
            f"random workload seed {SEED}: {stats.committed} committed, {stats.rolled_back} rolled back, "
            f"{stats.ddls} DDLs"
        )

    return Segment(RANDOM_DB, write, (RANDOM_DB,))


@pytest.fixture(scope="module")
def workloads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Capture | BaseException]:
    """The mtr files and the random slice, written and delivered through the three paths once."""
    root = tmp_path_factory.mktemp("oracle-workloads")
    with Oracle(root, server_args=mtr.SERVER_ARGS) as oracle:
        mtr.prepare_server(oracle.upstream)
        # the random slice first: a file whose values a path cannot carry stops that path's consumer
        # for every later segment (mtr_files.txt lists such a file last)
        segments = [_random_segment()] + [_mtr_segment(f, root / "mtr-logs") for f in FILES]
        got: Capture | BaseException
        try:
            got = oracle.capture("workloads", segments, [*DATABASES, RANDOM_DB])
        except Exception as exc:  # every test fails with it
            got = exc
        yield got


def _captured(got: Capture | BaseException) -> Capture:
    if isinstance(got, BaseException):
        raise AssertionError(f"the workloads could not be captured: {got!r}") from got
    return got


CASES = [(db, p) for db in [*DATABASES, RANDOM_DB] for p in PATHS]


@pytest.mark.parametrize(("database", "path"), CASES, ids=[f"{db}-{p}" for db, p in CASES])
def test_workload_equals_native_replica(database: str, path: str, workloads: Capture | BaseException) -> None:
    _captured(workloads).assert_equal(path, database, segment=database)


@pytest.mark.parametrize("path", PATHS)
def test_path_delivers_the_whole_workload_range(path: str, workloads: Capture | BaseException) -> None:
    _captured(workloads).assert_ran(path)
