"""e2e failover: two servers on one PostgreSQL meta database, kill -9 the owner mid-stream.

The changefeed (MariaDB → Spark → MySQL sink → a second MariaDB) runs on
whichever server claims it first. While a steady load writes upstream, that
server's whole process group (server and Spark JVM) is killed with SIGKILL; the
other server claims the changefeed once the lease expires and resumes from the
checkpoint in the meta database. In the end the downstream equals the upstream.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.postgres import LocalPostgres
from tests.e2e.workload import SteadyLoad, Workload, diff_tables
from tests.integration.server.conftest import ServerProc, status_of

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_failover"
LEASE = 4


@pytest.fixture(scope="module")
def downstream() -> Iterator[LocalMariaDB]:
    with LocalMariaDB(binlog=False) as db:
        yield db


@pytest.fixture(scope="module")
def pg() -> Iterator[LocalPostgres]:
    with LocalPostgres() as server:
        yield server


def test_failover_after_kill9_of_the_owner(
    mariadb: LocalMariaDB, downstream: LocalMariaDB, pg: LocalPostgres, tmp_path: Path
) -> None:
    meta = pg.create_database("failover_meta")
    servers = {n: ServerProc(meta, tmp_path, lease=LEASE, name=n).start() for n in ("a", "b")}
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
    load: SteadyLoad | None = None
    try:
        any_server = servers["a"]
        with any_server.client() as c:
            c.create_changefeed(
                {
                    "changefeed_id": "failover",
                    "upstream_uri": mariadb.uri,
                    "sink_uri": f"mysql://root:@127.0.0.1:{downstream.port}/?worker-count=4",
                    "replica_config": {"filter": {"rules": [f"{SCHEMA}.*"]}},
                }
            )
        # schema and rows, DDL included, all come through the changefeed
        Workload(mariadb, SCHEMA, rows=60).run()

        def logs() -> str:
            return "\n".join(f"--- {n}\n{s.log()[-3000:]}" for n, s in servers.items())

        def in_sync() -> bool:
            return not diff_tables(mariadb, downstream, SCHEMA)

        wait_until(in_sync, timeout=240, interval=1.0, what="first sync", on_timeout=logs)
        first = status_of(any_server, "failover")
        ids = {}
        for n, s in servers.items():
            with s.client() as c:
                ids[n] = c.status()["id"]
        owner = next(n for n, i in ids.items() if i == first["owner"])
        survivor = "b" if owner == "a" else "a"

        load = SteadyLoad(mariadb, SCHEMA, pause=0.01)
        load.start()
        wait_until(lambda: load.transactions > 50, timeout=60, what="load running")
        servers[owner].kill9()

        def claimed_by_survivor() -> dict[str, Any] | None:
            st = status_of(servers[survivor], "failover")
            return st if st["owner"] and st["owner"] != first["owner"] else None

        took = wait_until(
            claimed_by_survivor, timeout=LEASE * 10, interval=0.5, what="takeover", on_timeout=logs
        )
        assert took["state"] == "normal"
        wait_until(lambda: load.transactions > 150, timeout=60, what="more load after the kill")
        written = load.stop()
        load = None
        wait_until(in_sync, timeout=300, interval=1.0, what="downstream equals upstream", on_timeout=logs)
        assert written > 150
        final = status_of(servers[survivor], "failover")
        assert final["state"] == "normal" and final["checkpoint_ts"] >= first["checkpoint_ts"]
        with servers[survivor].client() as c:
            detail = c.get_changefeed("failover")
            assert detail["epoch"] == 2 and detail["owner"] == ids[survivor]
            # the dead server stops being listed once its heartbeat is old
            wait_until(
                lambda: [i["id"] for i in c.captures()["items"]] == [ids[survivor]],
                timeout=LEASE * 10,
                what="dead server dropped from captures",
            )
    finally:
        if load is not None:
            load.stop()
        for s in servers.values():
            s.stop()
        mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
