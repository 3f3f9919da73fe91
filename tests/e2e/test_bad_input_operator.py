"""The last bad inputs an operator meets: each is answered in one coded line within 30 s, no secret shown.

Every case runs the real command (a subprocess) against real services: the session MariaDB, a
``sparkcdc server`` of this module, and sockets the tests start themselves for the servers that are
not MySQL (one that accepts and never answers, one that greets like an SSH server). A consumer on
an empty storage directory keeps running and says every 30 s that it waits; the API answers a
10 MB body with 413 instead of dropping the connection.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.bad_input import FAST, cli, module_server
from tests.integration.server.conftest import ServerProc, _env

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

SECRET = "Op-Secret-4471"
SSH_BANNER = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n"


class FakePort:
    """A TCP port on 127.0.0.1 that accepts connections and sends ``greeting`` (or nothing), then stays silent."""

    def __init__(self, greeting: bytes = b"") -> None:
        self.greeting = greeting
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)
            if self.greeting:
                conn.sendall(self.greeting)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture()
def silent_port() -> Iterator[FakePort]:
    port = FakePort()
    yield port
    port.close()


@pytest.fixture()
def ssh_port() -> Iterator[FakePort]:
    port = FakePort(SSH_BANNER)
    yield port
    port.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    yield from module_server(tmp_path_factory.mktemp("operator-server"))


def _one_line(argv: list[str], cwd: Path) -> str:
    """The one ``Error: [CDC:Err...]`` line a refused command prints, checked for speed and secrets."""
    rc, out, seconds = cli(argv, cwd)
    lines = [line for line in out.splitlines() if line.strip()]
    assert rc != 0, out
    assert len(lines) == 1 and lines[0].startswith("Error: [CDC:Err"), out
    assert "Traceback" not in out and SECRET not in out, out
    assert seconds < FAST, f"refused after {seconds:.1f}s: {out}"
    return lines[0]


def _run(upstream: str, tmp: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--upstream-uri",
        upstream,
        "--sink-uri",
        f"file://{tmp / 'sink'}?protocol=csv",
        "--data-dir",
        str(tmp / "data"),
        *extra,
    ]


def _create(upstream: str, server: ServerProc, tmp: Path, name: str, *extra: str) -> list[str]:
    return [
        "cli",
        "changefeed",
        "create",
        "-c",
        name,
        "--server",
        server.url,
        "--upstream-uri",
        upstream,
        "--sink-uri",
        f"file://{tmp / (name + '-server-sink')}?protocol=csv",
        *extra,
    ]


# --- upstream ------------------------------------------------------------------------------------


def test_an_upstream_user_without_select_is_told_the_grant(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "DROP USER IF EXISTS 'op_nosel'@'%'",
        f"CREATE USER 'op_nosel'@'%' IDENTIFIED BY '{SECRET}'",
        "GRANT REPLICATION SLAVE, BINLOG MONITOR, PROCESS ON *.* TO 'op_nosel'@'%'",
    )
    try:
        line = _one_line(_run(f"mysql://op_nosel:{SECRET}@127.0.0.1:{mariadb.port}/", tmp_path), tmp_path)
    finally:
        mariadb.execute("DROP USER IF EXISTS 'op_nosel'@'%'")
    assert line == (
        f"Error: [CDC:ErrUpstreamSetup] user 'op_nosel' on upstream 127.0.0.1:{mariadb.port} lacks SELECT; "
        "run GRANT SELECT ON *.* TO 'op_nosel'@'%'"
    )
    assert not (tmp_path / "sink").exists()


def test_an_upstream_port_of_another_protocol_is_named_with_what_answered(
    ssh_port: FakePort, server: ServerProc, tmp_path: Path
) -> None:
    upstream = f"mysql://cdc:{SECRET}@127.0.0.1:{ssh_port.port}/"
    lines = [_one_line(_run(upstream, tmp_path), tmp_path)]
    lines.append(_one_line(_create(upstream, server, tmp_path, "ssh-port"), tmp_path))
    for line in lines:
        assert line.startswith(
            f"Error: [CDC:ErrUpstreamSetup] upstream 127.0.0.1:{ssh_port.port} is not a MySQL or MariaDB "
            "server: it answered 'SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13' (an SSH server); "
            "check the port in --upstream-uri"
        ), line


def test_a_target_ts_before_now_without_a_start_ts_is_refused_like_the_server(
    mariadb: LocalMariaDB, server: ServerProc, tmp_path: Path
) -> None:
    """Without --start-ts the changefeed starts now: a target-ts before that is refused by run and create."""
    run_line = _one_line(_run(mariadb.uri, tmp_path, "--target-ts", "1000"), tmp_path)
    create_line = _one_line(
        _create(mariadb.uri, server, tmp_path, "old-target", "--target-ts", "1000"), tmp_path
    )
    for line in (run_line, create_line):
        assert line.startswith(
            "Error: [CDC:ErrTargetTsBeforeStartTs] the target-ts 1000 is not after the start-ts "
        ), line
        assert line.endswith(" (now, when --start-ts is omitted); choose a later target-ts"), line
    # the same words, only the ts of "now" differs
    assert run_line.split("start-ts ")[0] == create_line.split("start-ts ")[0]
    assert not (tmp_path / "sink").exists() and not (tmp_path / "data" / "default" / "start.json").exists()


# --- consumer ------------------------------------------------------------------------------------


def _storage_output(root: Path) -> Path:
    """A storage sink's output: the checkpoint and one CSV data file."""
    (root / "db" / "t" / "1" / "2026-01-01").mkdir(parents=True)
    (root / "db" / "t" / "1" / "2026-01-01" / "CDC00000000000000000001.csv").write_text('"I","t","db",5,1\n')
    (root / "metadata").write_text('{"checkpoint-ts": 5}')
    return root


def test_a_consumer_whose_downstream_never_answers_gives_up_in_one_line(
    silent_port: FakePort, tmp_path: Path
) -> None:
    store = _storage_output(tmp_path / "store")
    down = f"mysql://root:{SECRET}@127.0.0.1:{silent_port.port}/"
    argv = ["consumer", "--upstream-uri", f"file://{store}?protocol=csv", "--downstream-uri", down, "--once"]
    line = _one_line(argv, tmp_path)
    assert line.startswith(
        f"Error: [CDC:ErrSinkUnavailable] connecting to the downstream root@127.0.0.1:{silent_port.port}: "
        "the downstream is unavailable"
    ), line
    assert "timed out" in line, line
    assert silent_port.accepted, "the consumer never reached the port"


def test_a_consumer_on_an_empty_directory_says_it_waits_every_30s(
    downstream: LocalMariaDB, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [
        sys.executable,
        "-m",
        "sparkcdc.cli.main",
        "consumer",
        "--upstream-uri",
        f"file://{empty}?protocol=csv",
    ]
    argv += ["--downstream-uri", downstream.uri, "--flush-interval", "1s", "--source-wait", "10m"]
    log_path = tmp_path / "consumer.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=tmp_path)
    waits: list[float] = []
    try:
        t0 = time.monotonic()
        deadline = t0 + 60
        while time.monotonic() < deadline and len(waits) < 2:
            assert proc.poll() is None, log_path.read_text()
            seen = [
                line for line in log_path.read_text().splitlines() if "waiting for the changefeed" in line
            ]
            if len(seen) > len(waits):
                waits.append(time.monotonic() - t0)
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out = log_path.read_text()
    lines = [line for line in out.splitlines() if "waiting for the changefeed" in line]
    assert len(lines) == 2, out
    assert waits[0] < FAST, out  # said at once, not only when it gives up
    assert 29 <= waits[1] - waits[0] <= 35, waits
    for line in lines:
        assert " INFO sparkcdc.consumer.storage: no metadata file in " in line, line
        assert "yet: waiting for the changefeed's first checkpoint (gives up in " in line, line
        assert "--source-wait" in line, line
    assert "Traceback" not in out, out


# --- API -----------------------------------------------------------------------------------------


def _post(server: ServerProc, body: bytes, chunked: bool) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=FAST)
    try:
        if chunked:
            pieces = (body[i : i + (1 << 20)] for i in range(0, len(body), 1 << 20))
            conn.request("POST", "/api/v2/changefeeds", body=pieces, encode_chunked=True)
        else:
            conn.request(
                "POST", "/api/v2/changefeeds", body=body, headers={"Content-Type": "application/json"}
            )
        res = conn.getresponse()
        return res.status, json.loads(res.read())
    finally:
        conn.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_10mb_body_is_answered_413(server: ServerProc, chunked: bool) -> None:
    body = b'{"sink_uri": "mysql://root:' + SECRET.encode() + b'@h/", "pad": "' + b"x" * (10 << 20) + b'"}'
    t0 = time.monotonic()
    status, answer = _post(server, body, chunked)
    assert time.monotonic() - t0 < FAST
    assert status == 413, answer
    assert answer["error_code"] == "CDC:ErrAPIBodyTooLarge", answer
    assert "larger than 1048576 bytes" in answer["error_msg"] and SECRET not in json.dumps(answer)
    # the server still answers on a new connection
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=FAST)
    conn.request("GET", "/api/v2/health")
    assert conn.getresponse().status == 200
    conn.close()
