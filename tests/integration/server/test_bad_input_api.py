"""The HTTP API refuses every bad request in one line: the catalogue.

One real ``sparkcdc server`` (SQLite meta, bearer token) answers every case. Each
case is one bad request; the answer must come fast, with the expected status, in
TiCDC's error shape (``error_code``, ``error_msg``), as one line that names the bad
value and what is allowed, without any password or the token. Afterwards the
server log holds one line per refusal and no traceback.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.server.conftest import ServerProc

pytestmark = pytest.mark.integration

TOKEN = "tok-Bad-Input-4242"
SECRET = "Pw-Api-Secret-9931"
UP = f"mysql://cdc:{SECRET}@127.0.0.1:1/"
SINK = f"mysql://cdc:{SECRET}@127.0.0.1:1/"
FAST = 30.0
LONG_ID = "a" * 200


@dataclass(frozen=True)
class Case:
    """One bad request and what its answer must say."""

    name: str
    method: str
    path: str
    status: int
    fragments: tuple[str, ...]
    json: Any = None
    content: bytes | None = None
    chunked: bool = False
    token: str | None = TOKEN


def _big_body() -> bytes:
    # Valid JSON up to the limit and past it, with a password inside: the answer must not echo it.
    return b'{"sink_uri": "' + UP.encode() + b'", "pad": "' + b"x" * (1 << 20) + b'"}'


CASES = [
    Case(
        "state-filter-unknown",
        "GET",
        "/changefeeds?state=bogus",
        400,
        ("state='bogus'", "normal, stopped, failed, finished, removed"),
    ),
    Case("all-not-boolean", "GET", "/changefeeds?all=maybe", 400, ("all='maybe'", "true or false")),
    Case(
        "list-unknown-parameter",
        "GET",
        "/changefeeds?stat=normal",
        400,
        ("'stat'", "allowed: namespace, all, state"),
    ),
    Case(
        "list-bad-namespace", "GET", "/changefeeds?namespace=a_b", 400, ("namespace 'a_b'", "letters, digits")
    ),
    Case("get-bad-id", "GET", "/changefeeds/a_b", 400, ("changefeed id 'a_b'", "^[a-zA-Z0-9]+")),
    Case("get-id-200-chars", "GET", f"/changefeeds/{LONG_ID}", 400, ("(200 characters)", "at most 128")),
    Case(
        "status-unknown-parameter",
        "GET",
        "/changefeeds/ok/status?verbose=1",
        400,
        ("'verbose'", "allowed: namespace"),
    ),
    Case("captures-unknown-parameter", "GET", "/captures?all=1", 400, ("'all'", "takes none")),
    Case("get-missing", "GET", "/changefeeds/no-such-feed", 404, ("'no-such-feed' does not exist", "list")),
    Case(
        "json-malformed",
        "POST",
        "/changefeeds",
        400,
        ("not valid JSON", "line 1 column 2"),
        content=b'{bad, "sink_uri": "' + UP.encode() + b'"',
    ),
    Case("json-not-object", "POST", "/changefeeds", 400, ("JSON object", "got list"), json=[1, 2]),
    Case(
        "json-nested-too-deeply",
        "POST",
        "/changefeeds",
        400,
        ("nested too deeply",),
        content=b"[" * 200_000 + b"]" * 200_000,
    ),
    Case("body-not-utf8", "POST", "/changefeeds", 400, ("not UTF-8",), content=b"\xff\xfe{}"),
    Case("body-over-1mib", "POST", "/changefeeds", 413, ("larger than 1048576 bytes",), content=_big_body()),
    Case(
        "body-over-1mib-chunked",
        "POST",
        "/changefeeds",
        413,
        ("larger than 1048576 bytes",),
        content=_big_body(),
        chunked=True,
    ),
    Case(
        "create-unknown-field",
        "POST",
        "/changefeeds",
        400,
        ("'sinkuri'", "allowed:", "'sink_uri'"),
        json={"changefeed_id": "ok", "sinkuri": SINK, "upstream_uri": UP},
    ),
    Case(
        "create-bad-id",
        "POST",
        "/changefeeds",
        400,
        ("changefeed id 'a--b'",),
        json={"changefeed_id": "a--b", "sink_uri": SINK, "upstream_uri": UP},
    ),
    Case(
        "start-ts-not-integer",
        "POST",
        "/changefeeds",
        400,
        ("start_ts 'abc'", "non-negative integer"),
        json={"changefeed_id": "ok", "start_ts": "abc", "sink_uri": SINK, "upstream_uri": UP},
    ),
    Case(
        "start-ts-negative",
        "POST",
        "/changefeeds",
        400,
        ("start_ts -1", "non-negative integer"),
        json={"changefeed_id": "ok", "start_ts": -1, "sink_uri": SINK, "upstream_uri": UP},
    ),
    Case(
        "target-before-start",
        "POST",
        "/changefeeds",
        400,
        ("start-ts 10", "target-ts 5"),
        json={"changefeed_id": "ok", "start_ts": 10, "target_ts": 5, "sink_uri": SINK, "upstream_uri": UP},
    ),
    Case(
        "sink-uri-not-string",
        "POST",
        "/changefeeds",
        400,
        ("sink_uri 5", "expected a string"),
        json={"changefeed_id": "ok", "sink_uri": 5, "upstream_uri": UP},
    ),
    Case(
        "replica-config-not-object",
        "POST",
        "/changefeeds",
        400,
        ("replica_config", "object", "str"),
        json={"changefeed_id": "ok", "sink_uri": SINK, "upstream_uri": UP, "replica_config": "x"},
    ),
    Case(
        "replica-config-unknown-key",
        "POST",
        "/changefeeds",
        400,
        ("bogus-key",),
        json={
            "changefeed_id": "ok",
            "sink_uri": SINK,
            "upstream_uri": UP,
            "replica_config": {"bogus-key": 1},
        },
    ),
    Case(
        "sink-scheme",
        "POST",
        "/changefeeds",
        400,
        ("'ftp'", "kafka"),
        json={"changefeed_id": "ok", "sink_uri": f"ftp://u:{SECRET}@h/x", "upstream_uri": UP},
    ),
    Case(
        "subscription-without-table",
        "POST",
        "/changefeeds",
        400,
        ("table is None", "--table"),
        json={"changefeed_id": "ok", "sink_uri": SINK, "upstream_uri": UP, "database": "shop"},
    ),
    Case("update-unknown-field", "PUT", "/changefeeds/ok", 400, ("'sink'", "allowed:"), json={"sink": SINK}),
    Case("update-nothing", "PUT", "/changefeeds/ok", 400, ("nothing to update", "sink_uri"), json={}),
    Case(
        "resume-ts-not-integer",
        "POST",
        "/changefeeds/ok/resume",
        400,
        ("overwrite_checkpoint_ts 'abc'", "positive integer"),
        json={"overwrite_checkpoint_ts": "abc"},
    ),
    Case(
        "resume-unknown-field",
        "POST",
        "/changefeeds/ok/resume",
        400,
        ("'checkpoint_ts'", "overwrite_checkpoint_ts"),
        json={"checkpoint_ts": 5},
    ),
    Case("pause-bad-namespace", "POST", "/changefeeds/ok/pause?namespace=a..b", 400, ("namespace 'a..b'",)),
    Case("delete-bad-id", "DELETE", "/changefeeds/a%20b", 400, ("changefeed id 'a b'",)),
    Case("unknown-route", "GET", "/changefeed", 404, ("/api/v2/changefeed", "the API lives under /api/v2")),
    Case("wrong-method", "PATCH", "/changefeeds/ok", 405, ("PATCH", "/api/v2/changefeeds/ok")),
    Case(
        "wrong-token", "GET", "/changefeeds", 401, ("wrong bearer token", "--auth-token"), token="nope-Tok-55"
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    work: Path = tmp_path_factory.mktemp("bad-input-api")
    srv = ServerProc(f"sqlite:///{work / 'meta.db'}", work, token=TOKEN, lease=5).start()
    yield srv
    rc = srv.stop()
    log = srv.log()
    assert rc == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert SECRET not in log and TOKEN not in log, "a secret reached the server log"
    refused = [line for line in log.splitlines() if " refused (" in line]
    assert len(refused) >= len([c for c in CASES if c.status in (400, 413)]), log[-3000:]


def _send(server: ServerProc, case: Case) -> httpx.Response:
    headers = {"Authorization": f"Bearer {case.token}"} if case.token else {}
    with httpx.Client(base_url=f"{server.url}/api/v2", headers=headers, timeout=FAST) as http:
        if case.chunked:
            body = case.content or b""
            chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))
            return http.request(case.method, case.path, content=chunks)
        return http.request(case.method, case.path, json=case.json, content=case.content)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_request_is_refused_in_one_line(server: ServerProc, case: Case) -> None:
    t0 = time.monotonic()
    resp = _send(server, case)
    elapsed = time.monotonic() - t0
    assert elapsed < FAST, f"{case.name}: answered after {elapsed:.1f}s"
    assert resp.status_code == case.status, resp.text
    body = resp.json()
    assert set(body) == {"error_code", "error_msg"}, body
    assert body["error_code"].startswith("CDC:Err"), body
    msg = body["error_msg"]
    assert "\n" not in msg and len(msg) < 600, msg
    for fragment in case.fragments:
        assert fragment in msg, f"{case.name}: {fragment!r} not in {msg!r}"
    for secret in (SECRET, TOKEN, "x" * 100):
        assert secret not in resp.text, f"{case.name}: the answer echoes {secret[:20]!r}"


def test_catalogue_size() -> None:
    assert len(CASES) >= 20
