"""Changefeeds of one server share its binlog relay, and each still equals the native replica.

One ``sparkcdc server`` (its default local Spark master, so it keeps one binlog relay per
upstream) runs two changefeeds on the oracle's upstream, each with its own filter, into the
oracle's MySQL downstream. Two seeded random workloads (``random_workload``: savepoints, XA, DDL,
MyISAM/Aria, keys changed several times) write both databases at once. The expected side is
MariaDB's native replica of the same upstream, not anything sparkcdc computed.

While the workloads run, the upstream's process list is read every 50 ms: the server holds one
binlog dump connection, the relay's; no segment task and no planner scan opens one of its own.
"""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest

from sparkcdc.services.common import wait_until
from tests.e2e.server_feeds import log_causes
from tests.e2e.server_feeds import states as server_states
from tests.integration.server.conftest import ServerProc
from tests.oracle.harness import Oracle
from tests.oracle.random_workload import Stats, run_random
from tests.oracle.tablediff import diff_databases

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SEED = 20261129
SECONDS = 10.0
DATABASES = ("relay_a", "relay_b")
DUMPS = "SELECT id, state FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'"


class DumpWatch:
    """Reads the upstream's process list every 50 ms; keeps the ids of its binlog dump connections."""

    def __init__(self, oracle: Oracle, ignore: set[int]) -> None:
        self.oracle = oracle
        self.ignore = ignore
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = self.oracle.upstream.connect()
        try:
            with conn.cursor() as cur:
                while not self._stop.wait(0.05):
                    cur.execute(DUMPS)
                    for dump_id, state in cur.fetchall():
                        if int(dump_id) not in self.ignore:
                            self.seen.setdefault(int(dump_id), str(state))
        finally:
            conn.close()

    def __enter__(self) -> DumpWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def _dump_ids(oracle: Oracle) -> set[int]:
    return {
        int(r[0]) for r in oracle.upstream.query("SHOW PROCESSLIST") if str(r[4]).startswith("Binlog Dump")
    }


def test_two_changefeeds_on_one_relay_each_equal_the_native_replica(oracle: Oracle, tmp_path: Path) -> None:
    up, downstream = oracle.upstream, oracle.downstreams["mysql"]
    # A fresh binlog file: the relay starts with it, so the changefeeds' starts are in the relay.
    up.execute("FLUSH BINARY LOGS", *(f"DROP DATABASE IF EXISTS {db}" for db in DATABASES))
    downstream.execute(*(f"DROP DATABASE IF EXISTS {db}" for db in DATABASES))
    native = _dump_ids(oracle)  # the native replica's own
    server = ServerProc(f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, lease=10).start(timeout=120)
    try:
        created: dict[str, int] = {}
        with server.client() as c:
            for db in DATABASES:
                cf = db.replace("_", "-")
                created[cf] = int(
                    c.create_changefeed(
                        {
                            "changefeed_id": cf,
                            "upstream_uri": up.uri,
                            "sink_uri": f"mysql://root:@127.0.0.1:{downstream.port}/",
                            "replica_config": {"filter": {"rules": [f"{db}.*"]}},
                        }
                    )["checkpoint_ts"]
                )

        def checkpoints_past(ts: dict[str, int]) -> bool:
            now = server_states(server)
            return all(
                now[cf]["state"] == "normal" and int(now[cf]["checkpoint_tso"]) > t for cf, t in ts.items()
            )

        wait_until(
            lambda: checkpoints_past(created),
            timeout=240,
            interval=1.0,
            what="both changefeeds running",
            on_timeout=lambda: log_causes(server.log()),
        )
        relay = _dump_ids(oracle) - native
        assert len(relay) == 1, f"expected the server's one relay connection, saw {sorted(relay)}"

        stats: list[Stats] = []
        failures: list[BaseException] = []

        def write(i: int, db: str) -> None:
            try:
                stats.append(run_random(up, seed=SEED + i, seconds=SECONDS, database=db, connections=3))
            except BaseException as exc:
                failures.append(exc)

        with DumpWatch(oracle, native) as writing:
            writers = [threading.Thread(target=write, args=(i, db)) for i, db in enumerate(DATABASES)]
            for t in writers:
                t.start()
            for t in writers:
                t.join()
        assert not failures, failures
        assert all(not s.unexpected for s in stats), [s.summary() for s in stats]
        target = oracle.tso()  # a dump of the test's own: between the two watches
        with DumpWatch(oracle, native) as catching_up:
            oracle.replica.wait_caught_up(up)
            wait_until(
                lambda: checkpoints_past(dict.fromkeys(created, target)),
                timeout=300,
                interval=1.0,
                what="both changefeeds past the end of the workloads",
                on_timeout=lambda: log_causes(server.log()),
            )
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as resp:
            exposed = resp.read().decode()
        shown = f'upstream="mysql://root:xxxxx@127.0.0.1:{up.port}/"'
        assert f"sparkcdc_binlog_relay_up{{{shown}}} 1.0" in exposed, exposed[-2000:]
        assert f"sparkcdc_binlog_relay_changefeeds{{{shown}}} 2.0" in exposed
        problems = diff_databases(oracle.replica, downstream, list(DATABASES))
        assert not problems, "\n".join(problems)
        for what, watch in (
            ("while the workloads ran", writing),
            ("while the changefeeds caught up", catching_up),
        ):
            assert set(watch.seen) == relay, (
                f"binlog dump connections besides the relay's ({sorted(relay)}) {what}: {watch.seen}"
            )
        print(", ".join(s.summary() for s in stats))
    finally:
        server.stop()
