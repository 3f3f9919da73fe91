"""e2e failover: two servers on one PostgreSQL meta database, kill -9 the owner mid-stream.

The changefeed (MariaDB → Spark → MySQL sink → a second MariaDB) runs on
whichever server claims it first. While a steady load writes upstream, that
server's whole process group (server and Spark JVM) is killed with SIGKILL; the
other server claims the changefeed once the lease expires and resumes from the
checkpoint in the meta database. In the end the downstream equals the upstream.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.model.ts import physical_ms
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


def _metadata_ts(sink: Path) -> int:
    try:
        return int(json.loads((sink / "metadata").read_bytes())["checkpoint-ts"])
    except (OSError, ValueError, KeyError):
        return 0


def _commit_ts_by_id(sink: Path) -> dict[int, list[int]]:
    """Every CSV record's commit_ts by the row's id (include-commit-ts: op, table, schema, ts, id, v)."""
    out: dict[int, list[int]] = defaultdict(list)
    for f in sorted(sink.rglob("CDC*.csv")):
        for r in csv.reader(io.StringIO(f.read_bytes().decode("utf-8"), newline="")):
            out[int(r[4])].append(int(r[3]))
    return out


def test_an_old_header_row_after_a_failover_while_idle_comes_above_every_published_checkpoint(
    mariadb: LocalMariaDB, pg: LocalPostgres, tmp_path: Path
) -> None:
    """Two servers with data dirs of their own (two hosts): the survivor starts from the meta database.

    While the upstream is idle, each batch raises the chain state and the storage sink publishes it
    in ``metadata``. The owner records each raise in the meta database before the sink publishes it,
    so the survivor starts at or after the last published checkpoint: a row written after the kill
    with a minute-old binlog header gets a commit_ts above it, and the storage consumer, which drops
    records at or below a checkpoint it has applied, keeps it.
    """
    schema = "e2e_failover_idle"
    meta = pg.create_database("failover_idle_meta")
    sink = tmp_path / "sink"
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.t (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    servers = {n: ServerProc(meta, tmp_path, lease=LEASE, name=n).start() for n in ("a", "b")}

    def logs() -> str:
        return "\n".join(f"--- {n}\n{s.log()[-3000:]}" for n, s in servers.items())

    try:
        with servers["a"].client() as c:
            c.create_changefeed(
                {
                    "changefeed_id": "idle-failover",
                    "upstream_uri": mariadb.uri,
                    "sink_uri": f"file://{sink}?protocol=csv",
                    "replica_config": {
                        "filter": {"rules": [f"{schema}.*"]},
                        "sink": {"csv": {"include-commit-ts": True}},
                    },
                }
            )
        for i in (1, 2, 3):
            mariadb.execute(f"INSERT INTO {schema}.t VALUES ({i}, 'row')")
        wait_until(lambda: len(_commit_ts_by_id(sink)) == 3, timeout=240, what="rows 1-3", on_timeout=logs)
        last_row = max(ts for v in _commit_ts_by_id(sink).values() for ts in v)
        # Idle: the published checkpoint follows the clock, seconds past the last row.
        wait_until(
            lambda: physical_ms(_metadata_ts(sink)) > physical_ms(last_row) + 3000,
            timeout=60,
            what="idle checkpoints in metadata",
            on_timeout=logs,
        )
        owner_id = status_of(servers["a"], "idle-failover")["owner"]
        ids = {}
        for n, s in servers.items():
            with s.client() as c:
                ids[c.status()["id"]] = n
        owner = ids[owner_id]
        survivor = "b" if owner == "a" else "a"
        # Kill right after a publish: the moment the meta database's offset would lag it most.
        before = _metadata_ts(sink)
        wait_until(lambda: _metadata_ts(sink) > before, timeout=30, what="a metadata publish")
        servers[owner].kill9()
        published = _metadata_ts(sink)
        conn = mariadb.connect(schema)
        try:
            with conn.cursor() as cur:
                cur.execute("SET timestamp = UNIX_TIMESTAMP() - 60")
                cur.execute("INSERT INTO t VALUES (4, 'old header')")
        finally:
            conn.close()
        got = wait_until(
            lambda: _commit_ts_by_id(sink).get(4),
            timeout=LEASE * 10 + 240,
            interval=0.5,
            what="row 4 through the survivor",
            on_timeout=logs,
        )
        assert status_of(servers[survivor], "idle-failover")["owner"] != owner_id
        assert min(got) > published, (
            f"row 4 came at commit_ts {min(got)}, at or below the checkpoint {published} the sink had "
            "published: a consumer would drop it"
        )
    finally:
        for s in servers.values():
            s.stop()
        mariadb.execute(f"DROP DATABASE IF EXISTS {schema}")
