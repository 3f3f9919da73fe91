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

import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.postgres import LocalPostgres
from tests.e2e.failover import fail_over_under_load
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
    try:
        f = fail_over_under_load(servers, "failover", mariadb, downstream, SCHEMA, LEASE)
        final = status_of(servers[f.survivor], "failover")
        assert final["state"] == "normal" and final["checkpoint_ts"] >= f.first["checkpoint_ts"]
        with servers[f.survivor].client() as c:
            detail = c.get_changefeed("failover")
            assert detail["epoch"] == 2 and detail["owner"] == f.ids[f.survivor]
            # the dead server stops being listed once its heartbeat is old
            wait_until(
                lambda: [i["id"] for i in c.captures()["items"]] == [f.ids[f.survivor]],
                timeout=LEASE * 10,
                what="dead server dropped from captures",
            )
    finally:
        for s in servers.values():
            s.stop()
        mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
