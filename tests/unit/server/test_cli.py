"""CLI verbs: local refusals before any request, table/JSON rendering, client error mapping."""

from __future__ import annotations

import io
import json

import httpx
import pytest

from sparkcdc.cli.main import build_parser, main
from sparkcdc.errors import ChangefeedNotFound, ChangefeedStateError, SinkURIError, SparkCdcError
from sparkcdc.server.client import error_from_response
from sparkcdc.server.render import emit, table
from sparkcdc.services.common import free_port


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_local_refusals_need_no_server(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    base = ["cli", "changefeed", "create", "--server", dead, "--sink-uri", "file:///x?protocol=csv"]
    rc, _, err = run([*base, "--upstream-uri", "mysql://r@h:1/", "-c", "no_underscores"], capsys)
    assert rc == 2 and "[CDC:ErrInvalidChangefeedID]" in err
    rc, _, err = run([*base, "--upstream-uri", "mysql://r@h:1/", "--database", "app"], capsys)
    assert rc == 2 and "--database and --table go together" in err
    rc, _, err = run(base, capsys)
    assert rc == 2 and "missing --upstream-uri" in err
    rc, _, err = run([*base, "--upstream-uri", "mysql://r@h:1/", "--start-ts", "-3"], capsys)
    assert rc == 2 and "negative" in err
    rc, _, err = run(["cli", "changefeed", "update", "--server", dead, "-c", "a"], capsys)
    assert rc == 2 and "nothing to update" in err
    rc, _, err = run(["cli", "changefeed", "list", "--server", dead], capsys)
    assert rc == 3 and "[CDC:ErrServerUnreachable]" in err and dead in err


def test_every_verb_is_registered() -> None:
    parser = build_parser()
    for verb in ("create", "list", "query", "pause", "resume", "update", "remove", "statistics"):
        args = parser.parse_args(
            ["cli", "changefeed", verb, "-c", "a", *(["--sink-uri", "s"] if verb == "create" else [])]
            if verb not in ("list",)
            else ["cli", "changefeed", "list"]
        )
        assert callable(args.func) and args.server == "http://127.0.0.1:8300" and args.output == "json"
    assert callable(parser.parse_args(["cli", "capture", "list"]).func)
    srv = parser.parse_args(["server"])
    assert (srv.listen, srv.lease_seconds, srv.spark_master) == ("127.0.0.1:8300", 10.0, None)
    assert parser.parse_args(["cli", "changefeed", "list"]).namespace is None
    assert parser.parse_args(["cli", "changefeed", "query", "-c", "a"]).namespace == "default"


def test_table_and_json_output() -> None:
    rows = [
        {"id": "a", "state": "normal", "error": None, "changefeeds": ["x", "y"]},
        {
            "id": "long-name",
            "state": "failed",
            "error": {"code": "CDC:E", "message": "boom"},
            "changefeeds": [],
        },
    ]
    text = table(rows, ["id", "state", "error", "changefeeds"])
    lines = text.splitlines()
    assert lines[0].split() == ["ID", "STATE", "ERROR", "CHANGEFEEDS"]
    assert lines[1].split() == ["a", "normal", "-", "x,", "y"]
    assert "[CDC:E] boom" in lines[2]
    buf = io.StringIO()
    emit({"id": "a", "n": 1}, "json", out=buf)
    assert json.loads(buf.getvalue()) == {"id": "a", "n": 1}
    buf = io.StringIO()
    emit({"id": "a", "config": {"k": 1}}, "table", out=buf)
    assert buf.getvalue().splitlines() == ["id      a", 'config  {"k": 1}']


@pytest.mark.parametrize(
    ("status", "body", "cls", "code"),
    [
        (404, {"error_code": "CDC:ErrChangeFeedNotExists", "error_msg": "m"}, ChangefeedNotFound, None),
        (409, {"error_code": "CDC:ErrChangefeedUpdateRefused", "error_msg": "m"}, ChangefeedStateError, None),
        (400, {"error_code": "CDC:ErrSinkURIInvalid", "error_msg": "m"}, SinkURIError, None),
        (400, {"error_code": "CDC:ErrSomethingNew", "error_msg": "m"}, SparkCdcError, "CDC:ErrSomethingNew"),
        (502, "<html>bad gateway</html>", SparkCdcError, "CDC:ErrHTTP"),
    ],
)
def test_error_bodies_map_back_to_error_classes(
    status: int, body: object, cls: type, code: str | None
) -> None:
    resp = httpx.Response(status, json=body) if isinstance(body, dict) else httpx.Response(status, text=body)
    err = error_from_response(resp)
    assert isinstance(err, cls)
    if code:
        assert err.code == code
