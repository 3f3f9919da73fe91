"""An upstream that cannot give FULL ROW changes, or a captured SEQUENCE / system-versioned table, is refused.

At start, ``sparkcdc run`` and ``sparkcdc cli changefeed create`` (against a real ``sparkcdc
server``) print one line, ``Error: [CDC:Err...] ...``, naming the variable, its value and the
``SET GLOBAL`` fix with the my.cnf line, or the tables and the filter rules that leave them out; no
traceback. The server variables are changed on a MariaDB of this module's own. Mid-stream, a
running ``sparkcdc run`` that has delivered rows while the rows of a sequence and a system-versioned
table outside its filter went by, fails naming a sequence created in its database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.bad_input import FAST, cli, module_server
from tests.integration.server.conftest import ServerProc, _env

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


@pytest.fixture(scope="module")
def private_db() -> Iterator[LocalMariaDB]:
    """A server of this module's own: its global settings change here."""
    with LocalMariaDB() as db:
        yield db


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    yield from module_server(tmp_path_factory.mktemp("bad-upstream-server"))


def _run_and_create(upstream: str, server: ServerProc, tmp: Path, name: str, config: str = "") -> list[str]:
    """``sparkcdc run`` and ``sparkcdc cli changefeed create`` (in parallel): the one line each printed."""
    tmp.mkdir(parents=True, exist_ok=True)
    extra: list[str] = []
    if config:
        (tmp / f"{name}.toml").write_text(config)
        extra = ["--config", str(tmp / f"{name}.toml")]
    sink = f"file://{tmp / (name + '-sink')}?protocol=csv"
    run = [
        "run",
        "--upstream-uri",
        upstream,
        "--sink-uri",
        sink,
        "--data-dir",
        str(tmp / f"{name}-data"),
        *extra,
    ]
    # the server checks (and so makes) the sink folder before it reaches the upstream: a folder of its own
    create = ["cli", "changefeed", "create", "-c", name, "--server", server.url, "--upstream-uri", upstream]
    create += ["--sink-uri", f"file://{tmp / (name + '-server-sink')}?protocol=csv", *extra]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda argv: cli(argv, tmp), [run, create]))
    lines = []
    for argv, (rc, out, seconds) in zip((run, create), results, strict=True):
        what = " ".join(argv[:3])
        got = [line for line in out.splitlines() if line.strip()]
        assert rc != 0, f"{what}: exit 0: {out}"
        assert len(got) == 1 and got[0].startswith("Error: [CDC:Err"), f"{what}: {out}"
        assert "Traceback" not in out, out
        assert seconds < FAST, f"{what}: refused after {seconds:.1f}s"
        lines.append(got[0])
    assert not (tmp / f"{name}-sink").exists(), "sparkcdc run may write nothing before the refusal"
    return lines


@pytest.mark.parametrize(
    ("variable", "bad"),
    [
        ("binlog_format", "STATEMENT"),
        ("binlog_format", "MIXED"),
        ("binlog_row_image", "MINIMAL"),
        ("binlog_row_image", "NOBLOB"),
        ("binlog_row_metadata", "MINIMAL"),
        ("binlog_row_metadata", "NO_LOG"),
    ],
)
def test_a_setting_that_loses_rows_is_refused_in_one_line(
    private_db: LocalMariaDB, server: ServerProc, tmp_path: Path, variable: str, bad: str
) -> None:
    good = {"binlog_format": "ROW"}.get(variable, "FULL")
    private_db.execute(f"SET GLOBAL {variable} = '{bad}'")
    try:
        lines = _run_and_create(private_db.uri, server, tmp_path, "bad-setting")
    finally:
        private_db.execute(f"SET GLOBAL {variable} = '{good}'")
    for line in lines:
        assert line.startswith(f"Error: [CDC:ErrUpstreamSetup] {variable} is {bad} on upstream 127.0.0.1:"), (
            line
        )
        assert f"run SET GLOBAL {variable}={good}" in line, line
        assert f"{variable}={good} under [mysqld] in my.cnf" in line, line


def test_binary_logging_off_is_refused_in_one_line(
    downstream: LocalMariaDB, server: ServerProc, tmp_path: Path
) -> None:
    """The e2e ``downstream`` server runs without a binlog."""
    for line in _run_and_create(downstream.uri, server, tmp_path, "no-binlog"):
        assert line.startswith(
            f"Error: [CDC:ErrUpstreamSetup] binary logging is off on upstream 127.0.0.1:{downstream.port} "
            "(log_bin is OFF)"
        ), line
        assert "log_bin=mysql-bin" in line and "under [mysqld] in my.cnf" in line and "--log-bin" in line, (
            line
        )


def test_a_captured_sequence_or_system_versioned_table_is_refused_by_name(
    private_db: LocalMariaDB, server: ServerProc, tmp_path: Path
) -> None:
    private_db.execute(
        "DROP DATABASE IF EXISTS shop",
        "CREATE DATABASE shop",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY)",
        "CREATE SEQUENCE shop.order_ids",
        "CREATE TABLE shop.prices (id INT PRIMARY KEY, price INT) WITH SYSTEM VERSIONING",
    )
    try:
        lines = _run_and_create(private_db.uri, server, tmp_path, "captures-seq")
        lines += _run_and_create(
            private_db.uri,
            server,
            tmp_path,
            "captures-prices",
            '[filter]\nrules = ["shop.*", "!shop.order_ids"]\n',
        )
        for line in lines:
            assert line.startswith("Error: [CDC:ErrInvalidConfig] the changefeed's table filter captures "), (
                line
            )
            assert "system-versioned table `shop`.`prices`" in line and "'!shop.prices'" in line, line
            assert "[filter] rules" in line and "orders" not in line, line
        for line in lines[:2]:
            assert "sequence `shop`.`order_ids`" in line and "'!shop.order_ids'" in line, line
        for line in lines[2:]:
            assert "order_ids" not in line, line
    finally:
        private_db.execute("DROP DATABASE IF EXISTS shop")


def _sink_files(sink: Path) -> list[Path]:
    return [p for p in sink.rglob("*") if p.is_file()] if sink.exists() else []


def test_a_sequence_created_while_running_fails_the_changefeed_by_name(
    private_db: LocalMariaDB, tmp_path: Path
) -> None:
    """Rows of a sequence and a system-versioned table outside the filter go by; a new sequence stops it."""
    private_db.execute(
        "DROP DATABASE IF EXISTS live",
        "CREATE DATABASE live",
        "CREATE TABLE live.orders (id INT PRIMARY KEY, note VARCHAR(40))",
        "CREATE SEQUENCE live.order_ids",
        "CREATE TABLE live.prices (id INT PRIMARY KEY, price INT) WITH SYSTEM VERSIONING",
    )
    (tmp_path / "cf.toml").write_text('[filter]\nrules = ["live.*", "!live.order_ids", "!live.prices"]\n')
    sink = tmp_path / "sink"
    log_path = tmp_path / "run.log"
    env = dict(_env(), SPARKCDC_SPARK_MASTER="local[1]", PYSPARK_DRIVER_PYTHON=sys.executable)
    argv = [sys.executable, "-m", "sparkcdc.cli.main", "run", "--upstream-uri", private_db.uri]
    argv += [
        "--sink-uri",
        f"file://{sink}?protocol=csv&flush-interval=2s",
        "--data-dir",
        str(tmp_path / "data"),
    ]
    argv += ["--config", str(tmp_path / "cf.toml"), "-c", "live-feed"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        wait_until(
            lambda: "started" in log_path.read_text(errors="replace") or proc.poll() is not None,
            timeout=240,
            what="sparkcdc run to start",
        )
        assert proc.poll() is None, log_path.read_text(errors="replace")
        private_db.execute(
            "INSERT INTO live.orders VALUES (1, 'first-order')",
            "SELECT NEXTVAL(live.order_ids)",
            "INSERT INTO live.prices VALUES (1, 10)",
            "UPDATE live.prices SET price = 11 WHERE id = 1",
            "INSERT INTO live.orders VALUES (2, 'second-order')",
        )

        def delivered() -> bool:
            assert proc.poll() is None, log_path.read_text(errors="replace")
            text = "".join(p.read_text(errors="replace") for p in _sink_files(sink) if p.suffix == ".csv")
            return "first-order" in text and "second-order" in text

        wait_until(delivered, timeout=180, what="the orders rows in the sink")
        assert not [p for p in _sink_files(sink) if "order_ids" in str(p) or "prices" in str(p)]
        private_db.execute("CREATE SEQUENCE live.invoice_ids")
        wait_until(lambda: proc.poll() is not None, timeout=180, what="sparkcdc run to stop")
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(60)
        private_db.execute("DROP DATABASE IF EXISTS live")
    out = log_path.read_text(errors="replace")
    assert proc.returncode not in (0, None), out
    last = [line for line in out.splitlines() if line.strip()][-1]
    assert last.startswith("Error: [CDC:ErrSchemaMismatch] DDL at commit ts "), out
    assert "on sequence `live`.`invoice_ids`, in a database the changefeed captures" in last, last
    assert "'!live.invoice_ids'" in last, last
    assert "Traceback" not in out, out
    assert os.path.isdir(sink)
