"""`sparkcdc run` refuses bad input before anything starts.

Each case runs the real command with one bad input and everything else valid
(a real upstream). The refusal must be fast, exit non-zero, name the bad
key/value and what is allowed, and leave no trace: no sink directory, no data
directory. ``JAVA_HOME`` points nowhere, so had Spark been started the command
would fail with a Java gateway error instead of the expected message.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkcdc.services.common import free_port
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

FAST = 30.0


def _refused(args: list[str], tmp_path: Path) -> tuple[int, str, float]:
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "no-java"), SPARKCDC_SPARK_MASTER="local[1]")
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "run", *args, "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    return res.returncode, res.stdout + res.stderr, time.monotonic() - t0


def _toml(tmp_path: Path, body: str) -> str:
    p = tmp_path / "changefeed.toml"
    p.write_text(body)
    return str(p)


# (case id, builder of the extra arguments from (tmp_path, sink dir), expected fragments of the message)
Case = tuple[str, Callable[[Path, str], list[str]], list[str]]
CASES: list[Case] = [
    (
        "sink-scheme",
        lambda t, d: ["--sink-uri", f"ftp://{d}?protocol=csv"],
        ["sink URI scheme 'ftp'", "file", "s3", "kafka", "mysql"],
    ),
    (
        "storage-protocol",
        lambda t, d: ["--sink-uri", f"file://{d}?protocol=avro2"],
        ["protocol 'avro2'", "csv, canal-json"],
    ),
    (
        "missing-protocol",
        lambda t, d: ["--sink-uri", f"file://{d}"],
        ["needs a protocol", "?protocol=csv"],
    ),
    (
        "kafka-protocol",
        lambda t, d: ["--sink-uri", "kafka://127.0.0.1:9/topic?protocol=canal-jsn"],
        ["canal-jsn", "canal-json"],
    ),
    (
        "unknown-uri-parameter",
        lambda t, d: ["--sink-uri", f"file://{d}?protocol=csv&flush-intervall=5s"],
        ["'flush-intervall'", "supported:", "flush-interval", "worker-count"],
    ),
    (
        "worker-count-zero",
        lambda t, d: ["--sink-uri", f"file://{d}?protocol=csv&worker-count=0"],
        ["worker-count 0", "greater than 0"],
    ),
    (
        "bad-duration",
        lambda t, d: ["--sink-uri", f"file://{d}?protocol=csv&flush-interval=soon"],
        ["'soon'", "flush-interval", "duration like 5s"],
    ),
    (
        "unknown-toml-key",
        lambda t, d: [
            "--sink-uri",
            f"file://{d}?protocol=csv",
            "--config",
            _toml(t, "[sink]\nprotocl = 'csv'\n"),
        ],
        ["'sink.protocl'", "allowed keys", "protocol"],
    ),
    (
        "toml-bad-value",
        lambda t, d: [
            "--sink-uri",
            f"file://{d}?protocol=csv",
            "--config",
            _toml(t, "[sink]\ndate-separator = 'week'\n"),
        ],
        ["'week'", "none, year, month, day"],
    ),
    (
        "csv-delimiter",
        lambda t, d: [
            "--sink-uri",
            f"file://{d}?protocol=csv",
            "--config",
            _toml(t, "[sink.csv]\ndelimiter = 'abcd'\n"),
        ],
        ["delimiter='abcd'", "1 to 3 bytes"],
    ),
    (
        "filter-rule",
        lambda t, d: [
            "--sink-uri",
            f"file://{d}?protocol=csv",
            "--config",
            _toml(t, "[filter]\nrules = ['db']\n"),
        ],
        ["'db'", "wrong table pattern", "schema.table"],
    ),
    (
        "changefeed-id",
        lambda t, d: ["--sink-uri", f"file://{d}?protocol=csv", "-c", "bad_id!"],
        ["'bad_id!'", "^[a-zA-Z0-9]+(\\-[a-zA-Z0-9]+)*$"],
    ),
    (
        "target-before-start",
        lambda t, d: ["--sink-uri", f"file://{d}?protocol=csv", "--start-ts", "100", "--target-ts", "50"],
        ["the start-ts 100 is larger than or equal to the target-ts 50", "choose a target-ts after"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_option_is_refused_before_anything_starts(
    case: Case, mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    _, build, expected = case
    sink_dir = str(tmp_path / "sink")
    rc, out, seconds = _refused(["--upstream-uri", mariadb.uri, *build(tmp_path, sink_dir)], tmp_path)
    assert rc != 0, out
    for fragment in expected:
        assert fragment in out, f"{fragment!r} missing from:\n{out}"
    assert out.strip().startswith("Error: [CDC:Err"), out
    assert "Traceback" not in out and "JAVA_GATEWAY" not in out, out
    assert seconds < FAST, f"refusal took {seconds:.1f}s"
    assert not os.path.exists(sink_dir) and not (tmp_path / "data").exists()


def test_unreachable_upstream_is_refused_before_spark(tmp_path: Path) -> None:
    port = free_port()
    rc, out, seconds = _refused(
        [
            "--upstream-uri",
            f"mysql://root:@127.0.0.1:{port}/",
            "--sink-uri",
            f"file://{tmp_path / 'sink'}?protocol=csv",
        ],
        tmp_path,
    )
    assert rc != 0
    assert f"cannot connect to upstream 127.0.0.1:{port}" in out and "--upstream-uri" in out, out
    assert "JAVA_GATEWAY" not in out and seconds < FAST
    assert not (tmp_path / "sink").exists() and not (tmp_path / "data").exists()


def test_wrong_password_is_refused_before_spark(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    uri = f"mysql://root:not-the-password@127.0.0.1:{mariadb.port}/"
    rc, out, seconds = _refused(
        ["--upstream-uri", uri, "--sink-uri", f"file://{tmp_path / 's'}?protocol=csv"], tmp_path
    )
    assert rc != 0
    assert "refused user 'root'" in out and "check the user and password" in out, out
    assert "not-the-password" not in out, "the password must not be printed"
    assert "JAVA_GATEWAY" not in out and seconds < FAST


def test_user_without_replication_privileges_is_refused(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "DROP USER IF EXISTS 'e2e_norepl'@'%'",
        "CREATE USER 'e2e_norepl'@'%' IDENTIFIED BY 'pw'",
        "GRANT SELECT ON *.* TO 'e2e_norepl'@'%'",
    )
    try:
        uri = f"mysql://e2e_norepl:pw@127.0.0.1:{mariadb.port}/"
        rc, out, _ = _refused(
            ["--upstream-uri", uri, "--sink-uri", f"file://{tmp_path / 's'}?protocol=csv"], tmp_path
        )
    finally:
        mariadb.execute("DROP USER IF EXISTS 'e2e_norepl'@'%'")
    assert rc != 0
    assert "lacks REPLICATION SLAVE" in out and "GRANT REPLICATION SLAVE" in out, out
    assert "JAVA_GATEWAY" not in out


def test_upstream_without_binlog_is_refused(downstream: LocalMariaDB, tmp_path: Path) -> None:
    rc, out, _ = _refused(
        ["--upstream-uri", downstream.uri, "--sink-uri", f"file://{tmp_path / 's'}?protocol=csv"], tmp_path
    )
    assert rc != 0
    assert "binary logging is off" in out and "--log-bin --binlog-format=ROW" in out, out
    assert "JAVA_GATEWAY" not in out


DATA_DIR_CASES: list[tuple[str, Callable[[Path], str], list[str]]] = [
    ("a-file", lambda t: str(t / "afile"), ["is a file, not a directory"]),
    ("below-a-file", lambda t: str(t / "afile" / "state"), ["cannot create the data dir"]),
    ("unknown-scheme", lambda t: "hdfs://nn:8020/state", ["scheme 'hdfs' is not supported", "s3://"]),
    (
        "unknown-parameter",
        lambda t: "s3://b/state?secret-access-key=TOPSECRET&access-key=a&regoin=x",
        ["'regoin'", "supported:"],
    ),
]


@pytest.mark.parametrize("case", DATA_DIR_CASES, ids=[c[0] for c in DATA_DIR_CASES])
def test_a_bad_data_dir_is_refused_before_spark(
    case: tuple[str, Callable[[Path], str], list[str]], mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    _, build, expected = case
    (tmp_path / "afile").write_text("not a folder")
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "no-java"), SPARKCDC_SPARK_MASTER="local[1]")
    t0 = time.monotonic()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkcdc.cli.main",
            "run",
            "--upstream-uri",
            mariadb.uri,
            "--sink-uri",
            f"file://{tmp_path / 'sink'}?protocol=csv",
            "--data-dir",
            build(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert out.strip().startswith("Error: [CDC:Err") and len(out.strip().splitlines()) == 1, out
    for fragment in expected:
        assert fragment in out, f"{fragment!r} missing from:\n{out}"
    assert "TOPSECRET" not in out and "JAVA_GATEWAY" not in out
    assert time.monotonic() - t0 < FAST
