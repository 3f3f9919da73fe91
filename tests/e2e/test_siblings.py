"""Changefeeds on one server do not depend on each other: one whose sink fails, and one removed
while the others run, leave the others delivering.

One ``sparkcdc server`` (SQLite meta), one upstream, four changefeeds each capturing its own table:
three to CSV storage sinks, one to an HTTP endpoint the test runs, which starts answering 500
once every changefeed runs. The failing one reports the endpoint's status and retries; the CSV
ones deliver every row meanwhile. Then one CSV changefeed is removed: the two left keep
delivering, its sink gets nothing more, and the server lists it no more.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.common import free_port, port_open, wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.server.conftest import ServerProc

from .server_feeds import create_changefeeds, in_csv_sink, log_causes, table_of
from .server_feeds import states as server_states

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_siblings"


class FailingEndpoint:
    """An HTTP endpoint on 127.0.0.1 that answers 200 until ``fail`` is set, then 500."""

    def __init__(self) -> None:
        self.port = free_port()
        self.fail = threading.Event()
        self.refused = 0
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FailingEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = 500 if endpoint.fail.is_set() else 200
                if status == 500:
                    endpoint.refused += 1
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if status == 500 else b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                return None

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        wait_until(lambda: port_open("127.0.0.1", self.port), timeout=10, what="HTTP endpoint")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture()
def endpoint() -> Iterator[FailingEndpoint]:
    e = FailingEndpoint().start()
    yield e
    e.stop()


def test_a_failing_sink_and_a_removal_leave_the_other_changefeeds_delivering(
    mariadb: LocalMariaDB, endpoint: FailingEndpoint, tmp_path: Path
) -> None:
    failing, csv = "bad-http", ("csv-a", "csv-b", "csv-c")
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        *(
            f"CREATE TABLE {SCHEMA}.{table_of(cf)} (id INT PRIMARY KEY, v VARCHAR(40))"
            for cf in (failing, *csv)
        ),
    )
    server = ServerProc(f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, lease=10).start(timeout=120)
    try:
        sinks = {
            failing: f"http://127.0.0.1:{endpoint.port}/{failing}?protocol=canal-json&max-retries=1&backoff=100ms"
        }
        sinks |= {cf: f"file://{tmp_path / cf}?protocol=csv" for cf in csv}
        created = create_changefeeds(server, mariadb, SCHEMA, sinks)

        def states() -> dict[str, dict[str, Any]]:
            return server_states(server)

        def running(cfs: tuple[str, ...]) -> bool:
            now = states()
            return all(
                now[cf]["state"] == "normal" and int(now[cf]["checkpoint_tso"]) > created[cf] for cf in cfs
            )

        wait_until(
            lambda: running((failing, *csv)),
            timeout=240,
            interval=1.0,
            what="4 changefeeds running",
            on_timeout=lambda: log_causes(server.log()),
        )

        # the endpoint answers 500: the failing changefeed says so and retries; the others deliver
        endpoint.fail.set()
        for n in range(3):
            mariadb.execute(
                *(f"INSERT INTO {SCHEMA}.{table_of(cf)} VALUES ({n}, '{cf}-{n}')" for cf in (failing, *csv))
            )
            wait_until(
                lambda n=n: all(in_csv_sink(tmp_path / cf, f"{cf}-{n}") for cf in csv),
                timeout=60,
                interval=0.2,
                what=f"row {n} in the CSV sinks while the HTTP sink fails",
                on_timeout=lambda: log_causes(server.log()),
            )

        def reported() -> bool:
            bad = states()[failing]
            said = f"{bad.get('warning') or ''} {bad.get('error') or ''}"
            return endpoint.refused > 0 and "500" in said

        wait_until(
            reported,
            timeout=120,
            interval=0.5,
            what="the failing changefeed to report the endpoint's 500",
            on_timeout=lambda: f"{states()[failing]}\n{log_causes(server.log())}",
        )
        now = states()
        assert all(now[cf]["state"] == "normal" and not now[cf]["error"] for cf in csv), now

        # csv-b is removed while the others run: they keep delivering, it gets nothing more
        removed, kept = "csv-b", ("csv-a", "csv-c")
        with server.client() as c:
            c.remove(removed)
        wait_until(
            lambda: removed not in states(),
            timeout=60,
            interval=0.5,
            what="the removed changefeed gone from the server's list",
            on_timeout=lambda: log_causes(server.log()),
        )
        mariadb.execute(*(f"INSERT INTO {SCHEMA}.{table_of(cf)} VALUES (10, '{cf}-after')" for cf in csv))
        wait_until(
            lambda: all(in_csv_sink(tmp_path / cf, f"{cf}-after") for cf in kept),
            timeout=60,
            interval=0.2,
            what="the rows after the removal in the sinks of the changefeeds left",
            on_timeout=lambda: log_causes(server.log()),
        )
        # the kept changefeeds' checkpoints pass the row: by then the removed one, had it still
        # run, would have written it as well
        after_row = max(int(states()[cf]["checkpoint_tso"]) for cf in kept)
        wait_until(
            lambda: all(int(states()[cf]["checkpoint_tso"]) > after_row for cf in kept),
            timeout=30,
            interval=0.5,
            what="the kept checkpoints moving on",
        )
        assert not in_csv_sink(tmp_path / removed, f"{removed}-after")
        assert all(in_csv_sink(tmp_path / removed, f"{removed}-{n}") for n in range(3))
    finally:
        server.stop()
