"""The failover scenario two tests share: two servers on one meta database, kill -9 the owner under load."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import SteadyLoad, Workload, diff_tables
from tests.integration.server.conftest import ServerProc, status_of


@dataclass
class Failover:
    """What happened: server ids by name, the killed owner, the survivor, the first status, rows written."""

    ids: dict[str, str]
    owner: str
    survivor: str
    first: dict[str, Any]
    written: int


def fail_over_under_load(
    servers: dict[str, ServerProc],
    changefeed: str,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    schema: str,
    lease: float,
    *,
    first_sync_timeout: float = 240,
    takeover_leases: float = 10,
) -> Failover:
    """Create a MySQL-sink changefeed, sync a workload, kill -9 its owner under load; the survivor catches up."""
    with servers["a"].client() as c:
        c.create_changefeed(
            {
                "changefeed_id": changefeed,
                "upstream_uri": mariadb.uri,
                "sink_uri": f"mysql://root:@127.0.0.1:{downstream.port}/?worker-count=4",
                "replica_config": {"filter": {"rules": [f"{schema}.*"]}},
            }
        )
    # schema and rows, DDL included, all come through the changefeed
    Workload(mariadb, schema, rows=60).run()

    def logs() -> str:
        return "\n".join(f"--- {n}\n{s.log()[-3000:]}" for n, s in servers.items())

    def in_sync() -> bool:
        return not diff_tables(mariadb, downstream, schema)

    wait_until(in_sync, timeout=first_sync_timeout, interval=1.0, what="first sync", on_timeout=logs)
    first = status_of(servers["a"], changefeed)
    ids = {}
    for n, s in servers.items():
        with s.client() as c:
            ids[n] = c.status()["id"]
    owner = next(n for n, i in ids.items() if i == first["owner"])
    survivor = "b" if owner == "a" else "a"
    load = SteadyLoad(mariadb, schema, pause=0.01)
    load.start()
    try:
        wait_until(lambda: load.transactions > 50, timeout=60, what="load running")
        servers[owner].kill9()

        def claimed_by_survivor() -> dict[str, Any] | None:
            st = status_of(servers[survivor], changefeed)
            return st if st["owner"] and st["owner"] != first["owner"] else None

        took = wait_until(
            claimed_by_survivor,
            timeout=lease * takeover_leases,
            interval=0.5,
            what="takeover",
            on_timeout=logs,
        )
        assert took["state"] == "normal"
        wait_until(lambda: load.transactions > 150, timeout=60, what="more load after the kill")
    finally:
        written = load.stop()
    wait_until(in_sync, timeout=300, interval=1.0, what="downstream equals upstream", on_timeout=logs)
    assert written > 150
    return Failover(ids, owner, survivor, first, written)
