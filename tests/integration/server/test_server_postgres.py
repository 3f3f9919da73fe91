"""Two servers on one real PostgreSQL meta database: any server answers any request.

Both run with ``--max-changefeeds 0`` (API only, no Spark): this module checks the
meta database and the API across servers; the failover e2e test runs changefeeds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import ChangefeedExists, ChangefeedNotFound, ChangefeedStateError, SparkCdcError
from sparkcdc.meta import MetaStore
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.postgres import LocalPostgres
from tests.integration.server.conftest import ServerProc

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pg() -> Iterator[LocalPostgres]:
    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="module")
def servers(pg: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServerProc]]:
    work = tmp_path_factory.mktemp("server-pg")
    uri = pg.create_database("meta")
    pair = [ServerProc(uri, work, lease=3, extra=("--max-changefeeds", "0"), name=n) for n in ("a", "b")]
    # start both at once: they migrate the empty database concurrently
    threads = [threading.Thread(target=s.start) for s in pair]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s.proc is not None and s.proc.poll() is None for s in pair), [s.log()[-2000:] for s in pair]
    yield pair
    for s in pair:
        s.stop()
        assert pg.password not in s.log(), "the meta database password reached a log"


def body(cf_id: str, mariadb: LocalMariaDB, tmp_path: Path, **kw: Any) -> dict[str, Any]:
    return {
        "changefeed_id": cf_id,
        "upstream_uri": mariadb.uri,
        "sink_uri": f"file://{tmp_path}/{cf_id}?protocol=canal-json",
        **kw,
    }


def test_migrations_ran_once_and_both_servers_are_captures(
    pg: LocalPostgres, servers: list[ServerProc]
) -> None:
    with pg.connect("meta") as conn:
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    a, b = servers
    for s in servers:
        with s.client() as c:
            caps = c.captures()
            assert caps["total"] == 2
            assert {i["address"] for i in caps["items"]} == {f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"}
            assert sum(i["is_owner"] for i in caps["items"]) == 1
            st = c.status()
            assert st["meta_backend"] == "postgresql"
    assert "postgresql://sparkcdc:xxxxx@127.0.0.1" in a.log()


def test_verbs_on_either_server(servers: list[ServerProc], mariadb: LocalMariaDB, tmp_path: Path) -> None:
    a, b = servers
    with a.client() as ca, b.client() as cb:
        created = ca.create_changefeed(body("pg-feed", mariadb, tmp_path))
        assert created["state"] == "normal" and created["owner"] is None  # nobody claims: max 0
        assert cb.get_changefeed("pg-feed")["start_ts"] == created["start_ts"]
        with pytest.raises(ChangefeedStateError):
            cb.update_changefeed("pg-feed", {"target_ts": 2**62})
        cb.pause("pg-feed")
        assert ca.changefeed_status("pg-feed")["state"] == "stopped"
        updated = ca.update_changefeed("pg-feed", {"target_ts": 2**62})
        assert updated["target_ts"] == 2**62
        new_ckpt = created["start_ts"] + 1
        ca.resume("pg-feed", overwrite_checkpoint_ts=new_ckpt)
        st = cb.changefeed_status("pg-feed")
        assert (st["state"], st["checkpoint_ts"]) == ("normal", new_ckpt)
        assert [i["id"] for i in cb.list_changefeeds()["items"]] == ["pg-feed"]
        cb.remove("pg-feed")
        with pytest.raises(ChangefeedNotFound):
            ca.get_changefeed("pg-feed")
        assert [(i["id"], i["state"]) for i in ca.list_changefeeds(all=True)["items"]] == [
            ("pg-feed", "removed")
        ]


def test_concurrent_creates_of_one_id_have_one_winner(
    servers: list[ServerProc], mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    results: list[object] = []
    barrier = threading.Barrier(2)

    def create(server: ServerProc) -> None:
        with server.client() as c:
            barrier.wait()
            try:
                results.append(
                    c.create_changefeed(body("raced", mariadb, tmp_path, subscriber_name="raced-sub"))
                )
            except SparkCdcError as exc:
                results.append(exc)

    threads = [threading.Thread(target=create, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(r, dict) for r in results) == 1, results
    assert sum(isinstance(r, ChangefeedExists) for r in results) == 1, results
    with servers[1].client() as c:
        with pytest.raises(ChangefeedExists):
            c.create_changefeed(body("other-id", mariadb, tmp_path, subscriber_name="raced-sub"))
        c.remove("raced")


def test_a_stopped_server_leaves_the_captures(
    pg: LocalPostgres, servers: list[ServerProc], tmp_path: Path
) -> None:
    extra = ServerProc(pg.uri("meta"), tmp_path, lease=3, extra=("--max-changefeeds", "0"), name="c").start()
    a = servers[0]
    with a.client() as c:
        wait_until(lambda: c.captures()["total"] == 3, timeout=20, what="third capture")
        extra.stop()
        assert c.captures()["total"] == 2
    store = MetaStore.open(pg.uri("meta"))
    try:
        assert len(store.list_servers()) == 2
    finally:
        store.close()
