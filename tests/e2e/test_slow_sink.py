"""A slow sink beside fast ones on one server: the fast changefeeds keep delivering while the slow
ones' requests hang, and the slow ones deliver everything once their endpoint answers again.

One ``sparkcdc server`` (SQLite meta, its default Spark master) and one upstream. Two changefeeds
post to an HTTP endpoint that the test holds: once closed, it keeps every request open (below
the sink's ``timeout``) until the test opens it. Two slow changefeeds, because the server's old
default master, ``local[2]``, had two task slots on a 2-core machine: the two hanging writer
tasks took both, and the CSV changefeeds beside them stopped (the row did not arrive in 30 s).
Now a server has more slots than cores and a changefeed's share of them is capped
(``server.runner.server_spark_conf``).

The server's binlog relay is bounded to 1 MB here, and more than that is written while the slow
ones hang: the fast ones read the relay, the slow ones find their position gone from it and read
the upstream themselves, and deliver every row (``capture/relay.py``).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
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

SCHEMA = "e2e_slow_sink"
HOLD = 90.0
"""The longest the endpoint keeps a request open; the sinks' timeout is above it."""


class Gate:
    """An HTTP endpoint on 127.0.0.1 that answers 200 while open and holds requests while closed."""

    def __init__(self) -> None:
        self.port = free_port()
        self.open = threading.Event()
        self.open.set()
        self.lock = threading.Lock()
        self.held = 0
        """Requests waiting for the gate right now."""
        self.bodies: list[tuple[str, Any]] = []
        """The paths and bodies answered with 200."""
        self._server: ThreadingHTTPServer | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def start(self) -> Gate:
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with gate.lock:
                    gate.held += 1
                try:
                    gate.open.wait(HOLD)
                finally:
                    with gate.lock:
                        gate.held -= 1
                with gate.lock:
                    gate.bodies.append((self.path, json.loads(raw)))
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the sink gave up on this request (its timeout) or the test ended
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                return None

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        wait_until(lambda: port_open("127.0.0.1", self.port), timeout=10, what="HTTP gate")
        return self

    def holds(self) -> int:
        with self.lock:
            return self.held

    def received(self, needle: str, path: str = "") -> bool:
        with self.lock:
            return any(needle in json.dumps(b) for p, b in self.bodies if p.startswith(path))

    def stop(self) -> None:
        self.open.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture()
def gate() -> Iterator[Gate]:
    g = Gate().start()
    yield g
    g.stop()


def test_a_slow_sink_does_not_hold_back_the_changefeeds_beside_it(
    mariadb: LocalMariaDB, gate: Gate, tmp_path: Path
) -> None:
    slow, fast = ("slow-1", "slow-2"), ("fast-1", "fast-2")
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        *(f"CREATE TABLE {SCHEMA}.{table_of(cf)} (id INT PRIMARY KEY, v VARCHAR(40))" for cf in slow + fast),
    )
    mariadb.execute(f"CREATE TABLE {SCHEMA}.filler (id INT PRIMARY KEY, b LONGBLOB)")
    # A binlog relay of 1 MB: while the slow ones hang, the binlog passes it (below)
    server = ServerProc(
        f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, lease=10, extra=("--binlog-relay-mb", "1")
    ).start(timeout=120)
    try:
        sinks = {cf: gate.url(cf) + f"?protocol=canal-json&timeout={int(HOLD) + 30}s" for cf in slow}
        sinks |= {cf: f"file://{tmp_path / cf}?protocol=csv" for cf in fast}
        created = create_changefeeds(server, mariadb, SCHEMA, sinks)

        def states() -> dict[str, dict[str, Any]]:
            return server_states(server)

        def running() -> bool:
            now = states()
            failed = {k: v["error"] for k, v in now.items() if v["state"] == "failed"}
            assert not failed, failed
            return all(
                now[cf]["state"] == "normal" and int(now[cf]["checkpoint_tso"]) > created[cf] for cf in now
            )

        wait_until(
            running,
            timeout=240,
            interval=1.0,
            what="4 changefeeds running",
            on_timeout=lambda: log_causes(server.log()),
        )

        # the endpoint stops answering; each slow changefeed gets a row and hangs in its request
        gate.open.clear()
        mariadb.execute(*(f"INSERT INTO {SCHEMA}.{table_of(cf)} VALUES (1, '{cf}-held')" for cf in slow))
        wait_until(
            lambda: running() and gate.holds() >= len(slow),
            timeout=60,
            interval=0.2,
            what="both slow changefeeds waiting on the endpoint",
            on_timeout=lambda: log_causes(server.log()),
        )
        stuck = {cf: int(states()[cf]["checkpoint_tso"]) for cf in slow}

        # the fast changefeeds deliver while the slow ones wait, again and again
        for n in range(3):
            t0 = time.monotonic()
            mariadb.execute(
                *(f"INSERT INTO {SCHEMA}.{table_of(cf)} VALUES ({10 + n}, '{cf}-{n}')" for cf in fast)
            )
            wait_until(
                lambda n=n: all(in_csv_sink(tmp_path / cf, f"{cf}-{n}") for cf in fast),
                timeout=30,
                interval=0.2,
                what=f"row {n} in the CSV sinks while the HTTP endpoint holds its requests",
                on_timeout=lambda: log_causes(server.log()),
            )
            assert time.monotonic() - t0 < 30
        assert gate.holds() >= 1, "the slow sinks were not held while the fast ones delivered"
        assert not any(gate.received(f"{cf}-held") for cf in slow)
        now = states()

        def fast_ahead() -> bool:
            # the fast checkpoints follow the clock; the slow ones cannot pass their held rows
            ckpt = {cf: int(v["checkpoint_tso"]) for cf, v in states().items()}
            return min(ckpt[cf] for cf in fast) > max(ckpt[cf] for cf in slow)

        wait_until(fast_ahead, timeout=30, interval=0.5, what="the fast checkpoints past the slow ones")
        assert all(now[cf]["state"] == "normal" for cf in slow + fast), now

        # More than the relay holds is written meanwhile, in new binlog files: the relay drops the
        # file the slow ones hang in, so they read the upstream themselves when they go on.
        held_file = str(mariadb.query("SHOW MASTER STATUS")[0][0])
        noise = "CONCAT(" + ", ".join(["RANDOM_BYTES(1024)"] * 64) + ")"  # 64 KB that do not compress
        for k in range(5):
            mariadb.execute(
                *(f"INSERT INTO {SCHEMA}.filler VALUES ({k * 10 + i}, {noise})" for i in range(8)),
                *(
                    f"INSERT INTO {SCHEMA}.{table_of(cf)} VALUES ({100 + k}, '{cf}-bulk-{k}')"
                    for cf in slow + fast
                ),
                "FLUSH BINARY LOGS",
            )
        wait_until(
            lambda: all(in_csv_sink(tmp_path / cf, f"{cf}-bulk-4") for cf in fast),
            timeout=60,
            interval=0.2,
            what="the rows written past the relay's bound in the fast sinks",
            on_timeout=lambda: log_causes(server.log()),
        )
        assert server.proc is not None
        relays = list(Path(tempfile.gettempdir(), f"sparkcdc-relay-{server.proc.pid}").glob("*/*.relay"))
        assert relays, "the server keeps no binlog relay"
        assert held_file not in {r.stem for r in relays}, f"the relay still holds {held_file}: {relays}"

        # the endpoint answers again: the slow ones deliver what they held and catch up
        gate.open.set()
        mariadb.execute(*(f"INSERT INTO {SCHEMA}.{table_of(cf)} VALUES (2, '{cf}-after')" for cf in slow))
        wait_until(
            lambda: all(
                gate.received(f"{cf}-held")
                and all(gate.received(f"{cf}-bulk-{k}") for k in range(5))
                and gate.received(f"{cf}-after")
                for cf in slow
            ),
            timeout=120,
            interval=0.5,
            what="the held rows and the next ones at the endpoint",
            on_timeout=lambda: log_causes(server.log()),
        )
        for cf in slow:  # each endpoint path got its own table's rows only
            other = next(o for o in slow if o != cf)
            assert not gate.received(f"{other}-", f"/{cf}")
            assert gate.received(f"{cf}-held", f"/{cf}")
        wait_until(
            lambda: all(int(states()[cf]["checkpoint_tso"]) > stuck[cf] for cf in slow),
            timeout=60,
            interval=0.5,
            what="the slow changefeeds' checkpoints moving again",
        )
    finally:
        server.stop()
