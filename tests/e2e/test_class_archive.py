"""e2e: the first ``sparkcdc run`` leaves a class data archive of Spark's classes; the next maps it.

With ``SPARKCDC_JVM_CACHE`` pointing at an empty folder, a one-row run to ``--target-ts`` exits 0
and leaves exactly one archive there (the file its driver JVM wrote on exit, kept once the JVM
exited normally; no temporary file left). A second run with the same cache replicates the same
row into another folder with that archive in place, and leaves the archive as it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import run_args, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_cds"


def _run(uri: str, out: Path, data: Path, cache: Path, start_ts: int, target_ts: int, cid: str) -> None:
    args = run_args(
        uri,
        f"file://{out}?protocol=csv",
        cid,
        data,
        "--start-ts",
        str(start_ts),
        "--target-ts",
        str(target_ts),
    )
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["SPARKCDC_JVM_CACHE"] = str(cache)
    res = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    said = res.stdout + res.stderr
    assert "[warning][cds" not in said and "[error][cds" not in said, "the JVM spoke of its archive"
    rows = [line for p in sorted(out.rglob("CDC*.csv")) for line in p.read_text().splitlines()]
    assert rows == ['"I","t","e2e_cds",1,"one"']


def test_first_run_leaves_an_archive_the_next_run_uses(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.t (id INT PRIMARY KEY, v VARCHAR(8))",
    )
    start_ts = tso(mariadb.uri)
    mariadb.execute(f"INSERT INTO {SCHEMA}.t VALUES (1, 'one')")
    target_ts = tso(mariadb.uri)
    cache = tmp_path / "cache"

    _run(mariadb.uri, tmp_path / "out1", tmp_path / "data", cache, start_ts, target_ts, "archive-first")
    archives = sorted(cache.iterdir())
    assert [p.suffix for p in archives] == [".jsa"], archives
    size, mtime = archives[0].stat().st_size, archives[0].stat().st_mtime_ns
    assert size > 1 << 20

    _run(mariadb.uri, tmp_path / "out2", tmp_path / "data", cache, start_ts, target_ts, "archive-second")
    assert sorted(cache.iterdir()) == archives
    assert (archives[0].stat().st_size, archives[0].stat().st_mtime_ns) == (size, mtime)
