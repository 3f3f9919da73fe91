"""Twenty changefeeds on one server, created at the same moment: every one starts without a
restart, each delivers its own table, removing one leaves the others running, and one whose sink
fails does not hold its siblings back.

One ``sparkcdc server`` (SQLite meta) and one upstream; changefeed ``cf-i`` captures table ``t<i>``
into a CSV storage sink of its own, except ``cf-mysql``, whose sink is a MariaDB that the test
stops halfway. A start race (a module imported from several threads at once, any shared first-use
state) shows up as a restart in ``sparkcdc_changefeed_retries`` of ``/metrics``.
"""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.server.conftest import ServerProc

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_many"
N = 20
"""The CSV changefeeds; ``cf-mysql`` is one more."""


def _retries(server: ServerProc) -> float:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("sparkcdc_changefeed_retries_total")
    )


def _in_sink(folder: Path, needle: str) -> bool:
    return any(needle in f.read_text(errors="replace") for f in folder.rglob("*.csv"))


def test_twenty_changefeeds_created_at_once(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        *(f"CREATE TABLE {SCHEMA}.t{i} (id INT PRIMARY KEY, v VARCHAR(40))" for i in range(N)),
        f"CREATE TABLE {SCHEMA}.tm (id INT PRIMARY KEY, v VARCHAR(40))",
    )
    sinks = {f"cf-{i}": tmp_path / f"sink-{i}" for i in range(N)}
    tables = {f"cf-{i}": f"t{i}" for i in range(N)} | {"cf-mysql": "tm"}
    with LocalMariaDB(binlog=False) as down:
        # the tables exist before the changefeeds start: the MySQL sink's one is created by hand
        down.execute(
            f"CREATE DATABASE {SCHEMA}", f"CREATE TABLE {SCHEMA}.tm (id INT PRIMARY KEY, v VARCHAR(40))"
        )
        server = ServerProc(f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, lease=10).start(timeout=120)
        try:
            bodies: dict[str, dict[str, Any]] = {
                cf: {
                    "changefeed_id": cf,
                    "upstream_uri": mariadb.uri,
                    "sink_uri": (
                        f"file://{sinks[cf]}?protocol=csv"
                        if cf in sinks
                        else f"mysql://root:@127.0.0.1:{down.port}/?worker-count=1"
                    ),
                    "replica_config": {"filter": {"rules": [f"{SCHEMA}.{tables[cf]}"]}},
                }
                for cf in tables
            }
            created: dict[str, int] = {}
            errors: list[str] = []

            def create(cf: str) -> None:
                try:
                    with server.client() as c:
                        created[cf] = int(c.create_changefeed(bodies[cf])["checkpoint_ts"])
                except Exception as exc:  # collected: the assertion below names it
                    errors.append(f"{cf}: {exc}")

            threads = [threading.Thread(target=create, args=(cf,)) for cf in bodies]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors

            def states() -> dict[str, dict[str, Any]]:
                with server.client() as c:
                    return {cf["id"]: cf for cf in c.list_changefeeds()["items"]}

            def all_past_their_start() -> bool:
                now = states()
                failed = {k: v["error"] for k, v in now.items() if v["state"] == "failed"}
                assert not failed, failed
                return all(
                    now[cf]["state"] == "normal" and int(now[cf]["checkpoint_tso"]) > created[cf]
                    for cf in bodies
                )

            wait_until(
                all_past_their_start,
                timeout=300,
                interval=1.0,
                what=f"{len(bodies)} changefeeds running",
                on_timeout=lambda: server.log()[-4000:],
            )
            assert _retries(server) == 0, server.log()[-4000:]
            assert "partially initialized module" not in server.log()

            # each delivers its own table and nothing of the others
            mariadb.execute(*(f"INSERT INTO {SCHEMA}.{t} VALUES (1, '{cf}-one')" for cf, t in tables.items()))
            wait_until(
                lambda: (
                    all(_in_sink(sinks[cf], f"{cf}-one") for cf in sinks)
                    and down.query(f"SELECT v FROM {SCHEMA}.tm") == [("cf-mysql-one",)]
                ),
                timeout=120,
                interval=0.5,
                what="a row in every sink",
                on_timeout=lambda: server.log()[-4000:],
            )
            for cf, folder in sinks.items():
                others = [o for o in tables if o != cf and _in_sink(folder, f"{o}-one")]
                assert not others, f"{cf}'s sink holds rows of {others}"

            # one removed while the others run; the MySQL sink's downstream goes away
            with server.client() as c:
                c.remove("cf-0")
            down.kill()
            mariadb.execute(*(f"INSERT INTO {SCHEMA}.{t} VALUES (2, '{cf}-two')" for cf, t in tables.items()))
            wait_until(
                lambda: all(_in_sink(sinks[cf], f"{cf}-two") for cf in sinks if cf != "cf-0"),
                timeout=120,
                interval=0.5,
                what="the second row in every running CSV sink while cf-mysql's sink is down",
                on_timeout=lambda: server.log()[-4000:],
            )
            assert not _in_sink(sinks["cf-0"], "cf-0-two"), "a removed changefeed stopped writing"
            now = states()
            assert "cf-0" not in now
            assert all(now[cf]["state"] == "normal" for cf in tables if cf != "cf-0"), now
        finally:
            server.stop()
