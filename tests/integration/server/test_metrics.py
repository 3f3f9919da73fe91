"""Prometheus metrics scraped while changefeeds run: a server's ``/metrics`` and ``sparkcdc run --metrics-listen``.

Rows are written upstream in rounds; after each round the scrape must show the figures moved:
rows by table and op, the checkpoint gauge, the batch and sink-write histograms. ``sparkcdc run``
also runs with its stdout on a pseudo-terminal (the live progress bar must be drawn there) and
with ``--log-format json`` (its own log lines are JSON objects).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkcdc.services.common import free_port, wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.server.conftest import SRC, ServerProc, status_of

pytestmark = [pytest.mark.integration, pytest.mark.spark]

TOKEN = "metrics-token-5"
DB = "metrics_it"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def upstream(mariadb: LocalMariaDB) -> Iterator[LocalMariaDB]:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, item VARCHAR(40))",
        f"CREATE TABLE {DB}.runs (id INT PRIMARY KEY, item VARCHAR(40))",
    )
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")


def scrape(url: str, token: str | None = None) -> Samples:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = httpx.get(url, headers=headers, timeout=5)
    resp.raise_for_status()
    out: Samples = {}
    for fam in text_string_to_metric_families(resp.text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def rows(samples: Samples, cf: str, table: str, op: str) -> float:
    got = value(
        samples,
        "sparkcdc_changefeed_rows_total",
        namespace="default",
        changefeed=cf,
        schema=DB,
        table=table,
        op=op,
    )
    return got or 0.0


def write_round(db: LocalMariaDB, table: str, first: int, n: int) -> None:
    db.execute(
        f"INSERT INTO {DB}.{table} VALUES "
        + ", ".join(f"({i}, 'item {i}')" for i in range(first, first + n)),
        f"UPDATE {DB}.{table} SET item = 'changed' WHERE id BETWEEN {first} AND {first + 9}",
        f"DELETE FROM {DB}.{table} WHERE id BETWEEN {first + 10} AND {first + 14}",
    )


def assert_rounds_move_the_metrics(
    scrape_now: Callable[[], Samples], db: LocalMariaDB, cf: str, table: str, logs: Callable[[], str]
) -> None:
    """Write two rounds; after each, the rows by op, the checkpoint and the histograms have moved.

    ``ticdc_owner_checkpoint_ts`` is in milliseconds, and a transaction's commit_ts is its binlog
    header's second (plus a counter below the milliseconds): the second round is written in a
    later upstream second than the first, or its checkpoint can show the same value."""
    labels = {"namespace": "default", "changefeed": cf}
    before: Samples | None = None
    written_s = 0
    for round_no, first in enumerate((1, 1001)):
        wait_until(
            lambda after=written_s: int(db.query("SELECT UNIX_TIMESTAMP()")[0][0]) > after,
            timeout=10,
            interval=0.1,
            what="the upstream's next second",
        )
        write_round(db, table, first, 50)
        written_s = int(db.query("SELECT UNIX_TIMESTAMP()")[0][0])
        n = round_no + 1

        def moved(n: int = n) -> Samples | None:
            got = scrape_now()
            ok = (
                rows(got, cf, table, "insert") >= 50 * n
                and rows(got, cf, table, "update") >= 10 * n
                and rows(got, cf, table, "delete") >= 5 * n
            )
            return got if ok else None

        got = wait_until(
            moved, timeout=180, interval=0.5, what=f"round {round_no} in the metrics of {cf}", on_timeout=logs
        )
        ckpt = value(got, "ticdc_owner_checkpoint_ts", **labels)
        batches = value(got, "sparkcdc_batch_duration_seconds_count", **labels)
        sink_writes = value(got, "sparkcdc_sink_write_duration_seconds_count", **labels)
        size = value(got, "sparkcdc_changefeed_bytes_total", **labels, schema=DB, table=table, op="insert")
        assert ckpt and batches and sink_writes and size
        assert value(got, "ticdc_owner_checkpoint_ts_lag", **labels) is not None
        assert value(got, "ticdc_owner_resolved_ts_lag", **labels) is not None
        if before is not None:
            assert ckpt > (value(before, "ticdc_owner_checkpoint_ts", **labels) or 0)
            assert batches > (value(before, "sparkcdc_batch_duration_seconds_count", **labels) or 0)
            assert size > (
                value(
                    before, "sparkcdc_changefeed_bytes_total", **labels, schema=DB, table=table, op="insert"
                )
                or 0
            )
        before = got


def test_server_metrics_move_while_a_changefeed_runs(upstream: LocalMariaDB, tmp_path: Path) -> None:
    server = ServerProc(f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, token=TOKEN, lease=5).start()
    url = f"{server.url}/metrics"
    try:
        assert httpx.get(url, timeout=5).status_code == 401  # the API's token guards it too
        with server.client() as c:
            c.create_changefeed(
                {
                    "changefeed_id": "metrics-feed",
                    "upstream_uri": upstream.uri,
                    "sink_uri": f"file://{tmp_path / 'out'}?protocol=csv",
                    "replica_config": {"filter": {"rules": [f"{DB}.orders"]}},
                }
            )
        wait_until(
            lambda: status_of(server, "metrics-feed")["stats"],
            timeout=240,
            interval=0.5,
            what="the changefeed running",
            on_timeout=lambda: server.log()[-3000:],
        )
        assert_rounds_move_the_metrics(
            lambda: scrape(url, TOKEN), upstream, "metrics-feed", "orders", lambda: server.log()[-3000:]
        )
        labels = {"namespace": "default", "changefeed": "metrics-feed"}
        assert value(scrape(url, TOKEN), "ticdc_owner_status", **labels) == 0
        with server.client() as c:
            c.pause("metrics-feed")

        def paused() -> Samples | None:
            got = scrape(url, TOKEN)
            # stopped (TiCDC's 3), and the series of the run this server gave up are gone
            gone = value(got, "sparkcdc_batch_duration_seconds_count", **labels) is None
            return got if value(got, "ticdc_owner_status", **labels) == 3 and gone else None

        wait_until(paused, timeout=120, interval=0.5, what="the paused state in the metrics")
    finally:
        rc = server.stop()
    assert rc == 0, server.log()[-3000:]


class PtyReader(threading.Thread):
    """Collects what a child writes to its pseudo-terminal."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.data = bytearray()

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not chunk:
                return
            self.data.extend(chunk)


def test_run_serves_metrics_draws_a_bar_and_logs_json(upstream: LocalMariaDB, tmp_path: Path) -> None:
    port = free_port()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    reader = PtyReader(master)
    reader.start()
    stderr_path = tmp_path / "stderr.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NO_COLOR", None)
    config = tmp_path / "changefeed.toml"
    config.write_text(f'[filter]\nrules = ["{DB}.runs"]\n')
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sparkcdc.cli.main",
                "run",
                "--upstream-uri",
                upstream.uri,
                "--sink-uri",
                f"file://{tmp_path / 'out'}?protocol=csv",
                "--config",
                str(config),
                "-c",
                "run-metrics",
                "--data-dir",
                str(tmp_path / "data"),
                "--master",
                "local[2]",
                "--spark-conf",
                "spark.driver.memory=1g",
                "--metrics-listen",
                f"127.0.0.1:{port}",
                "--log-format",
                "json",
            ],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=err,
            env=env,
            cwd=tmp_path,
            start_new_session=True,
        )
    os.close(slave)

    def records() -> list[dict[str, object]]:
        lines = stderr_path.read_text(errors="replace").splitlines()
        # Spark's JVM writes to the same stderr; sparkcdc's own lines are JSON objects
        return [json.loads(line) for line in lines if line.startswith("{")]

    def started() -> bool:
        if proc.poll() is not None:
            raise AssertionError(
                f"sparkcdc run exited with {proc.returncode}: {stderr_path.read_text()[-3000:]}"
            )
        return any("started; data dir" in str(r.get("message")) for r in records())

    try:
        wait_until(started, timeout=240, interval=0.5, what="sparkcdc run to start")
        url = f"http://127.0.0.1:{port}/metrics"
        assert_rounds_move_the_metrics(
            lambda: scrape(url), upstream, "run-metrics", "runs", lambda: stderr_path.read_text()[-3000:]
        )
        labels = {"namespace": "default", "changefeed": "run-metrics"}
        assert value(scrape(url), "ticdc_owner_status", **labels) == 0
        wait_until(
            lambda: b"rows/s" in reader.data and b"lag" in reader.data,
            timeout=60,
            what="the live progress line on the terminal",
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=120)
        reader.join(10)
        os.close(master)
    screen = reader.data.decode(errors="replace")
    assert "run-metrics: " in screen and "━" in screen, screen[-2000:]  # rich's bar
    assert "ETA" in screen and "rows/s" in screen and "\x1b[" in screen
    started_record = next(r for r in records() if "started; data dir" in str(r["message"]))
    assert started_record["changefeed"] == "run-metrics" and started_record["level"] == "info"
    assert {"time", "logger"} <= set(started_record)
    assert rc == 128 + signal.SIGTERM, stderr_path.read_text()[-3000:]


def test_rows_of_the_first_batch_are_counted_once(upstream: LocalMariaDB, tmp_path: Path) -> None:
    """2 rows right after create (the first batch), 3 later: the counter says 5, as the stats do."""
    server = ServerProc(f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, token=TOKEN, lease=5).start()
    url = f"{server.url}/metrics"
    upstream.execute(f"DELETE FROM {DB}.runs WHERE id >= 5000")
    try:
        with server.client() as c:
            c.create_changefeed(
                {
                    "changefeed_id": "first-batch",
                    "upstream_uri": upstream.uri,
                    "sink_uri": f"file://{tmp_path / 'out'}?protocol=csv",
                    "replica_config": {"filter": {"rules": [f"{DB}.runs"]}},
                }
            )
        upstream.execute(f"INSERT INTO {DB}.runs VALUES (5000, 'a'), (5001, 'b')")

        def counted(n: int) -> float | None:
            got = rows(scrape(url, TOKEN), "first-batch", "runs", "insert")
            done = status_of(server, "first-batch")["stats"].get("rows_total", 0) >= n
            return got if done and got >= n else None

        wait_until(
            lambda: counted(2), timeout=240, interval=0.5, what="the first batch", on_timeout=server.log
        )
        upstream.execute(f"INSERT INTO {DB}.runs VALUES (5002, 'c'), (5003, 'd'), (5004, 'e')")
        wait_until(
            lambda: counted(5), timeout=120, interval=0.5, what="the later rows", on_timeout=server.log
        )
        # a second's worth of periodic reports later, still exactly once
        wait_until(
            lambda: status_of(server, "first-batch")["stats"].get("lag_s") is not None,
            timeout=30,
            what="a periodic report",
        )
        assert rows(scrape(url, TOKEN), "first-batch", "runs", "insert") == 5
        assert status_of(server, "first-batch")["stats"]["rows_total"] == 5
    finally:
        rc = server.stop()
    assert rc == 0, server.log()[-3000:]
