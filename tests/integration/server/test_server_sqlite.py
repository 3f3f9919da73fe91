"""A real ``sparkcdc server`` (SQLite meta, bearer token) driven through the CLI and the API.

Covers every verb and state transition with the real Spark pipeline, the bad
inputs, and that no password ever shows in a response, CLI output or log line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sparkcdc.errors import (
    AuthError,
    ChangefeedExists,
    ChangefeedNotFound,
    ChangefeedStateError,
    ConfigError,
    SinkURIError,
)
from sparkcdc.model.ts import compose_ts
from sparkcdc.services.common import free_port, wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.server.conftest import ServerProc, status_of

pytestmark = pytest.mark.integration

TOKEN = "tok-Integration-77"
UP_SECRET = "Up-Secret-3141"
SINK_SECRET = "Sink-Secret-2718"
DB = "srv_it"
SECRETS = (UP_SECRET, SINK_SECRET, TOKEN)
SEEN: list[str] = []  # every CLI output and API body, checked for secrets


@pytest.fixture(scope="module")
def upstream(mariadb: LocalMariaDB) -> Iterator[LocalMariaDB]:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, item VARCHAR(40))",
        f"CREATE TABLE {DB}.other (id INT PRIMARY KEY)",
        "DROP USER IF EXISTS 'cdc_up'@'%'",
        f"CREATE USER 'cdc_up'@'%' IDENTIFIED BY '{UP_SECRET}'",
        "GRANT ALL PRIVILEGES ON *.* TO 'cdc_up'@'%'",
        "DROP USER IF EXISTS 'cdc_sink'@'%'",
        f"CREATE USER 'cdc_sink'@'%' IDENTIFIED BY '{SINK_SECRET}'",
        "GRANT ALL PRIVILEGES ON *.* TO 'cdc_sink'@'%'",
    )
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, upstream: LocalMariaDB) -> Iterator[ServerProc]:
    work = tmp_path_factory.mktemp("server-sqlite")
    srv = ServerProc(f"sqlite:///{work / 'meta.db'}", work, token=TOKEN, lease=5).start()
    yield srv
    rc = srv.stop()
    log = srv.log()
    for secret in (UP_SECRET, SINK_SECRET):
        assert secret not in log, "a password reached the server log"
    assert rc == 0, log[-3000:]


def up_uri(db: LocalMariaDB, password: str = UP_SECRET) -> str:
    return f"mysql://cdc_up:{password}@127.0.0.1:{db.port}/"


def sink_uri(db: LocalMariaDB) -> str:
    return f"mysql://cdc_sink:{SINK_SECRET}@127.0.0.1:{db.port}/"


def cli(server: ServerProc, *args: str, ok: bool = True, token: bool = True) -> Any:
    res = server.cli(*args, token=token)
    SEEN.extend([res.stdout, res.stderr])
    if ok:
        assert res.returncode == 0, f"{args}: rc={res.returncode}\n{res.stdout}\n{res.stderr}"
        return json.loads(res.stdout) if res.stdout.strip().startswith(("{", "[")) else res.stdout
    return res


def refused(server: ServerProc, rc: int, code: str, *args: str, token: bool = True) -> str:
    res = cli(server, *args, ok=False, token=token)
    assert res.returncode == rc, f"{args}: rc={res.returncode}\n{res.stdout}\n{res.stderr}"
    assert f"[{code}]" in res.stderr, res.stderr
    return str(res.stderr)


def api(server: ServerProc, method: str, path: str, **kw: Any) -> Any:
    with server.client() as c:
        out = c.request(method, path, **kw)
    SEEN.append(json.dumps(out))
    return out


def no_secrets() -> None:
    for text in SEEN:
        for secret in SECRETS[:2]:
            assert secret not in text, f"secret leaked in: {text[:500]}"


def wait_status(server: ServerProc, cf_id: str, pred: Any, what: str, timeout: float = 300) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        st = status_of(server, cf_id)
        return st if pred(st) else None

    def last() -> str:
        return f"status {status_of(server, cf_id)}\n{server.log()[-4000:]}"

    st = wait_until(probe, timeout=timeout, interval=0.5, what=what, on_timeout=last)
    SEEN.append(json.dumps(st))
    return st


# ---------------------------------------------------------------- bad input (no Spark needed)


def test_bad_inputs_are_refused(server: ServerProc, upstream: LocalMariaDB, tmp_path: Path) -> None:
    out = f"file://{tmp_path}/bad?protocol=canal-json"
    up = up_uri(upstream)
    create = ("changefeed", "create", "--upstream-uri", up)
    # the console script itself, once
    res = server.cli(*create, "--sink-uri", out, "-c", "Bad_Id", subprocess_=True)
    assert res.returncode == 2 and "[CDC:ErrInvalidChangefeedID]" in res.stderr, res.stderr
    refused(server, 2, "CDC:ErrInvalidChangefeedID", *create, "--sink-uri", out, "-c", "Bad_Id")
    refused(server, 2, "CDC:ErrSinkURIInvalid", *create, "--sink-uri", out + "&no-such-param=1", "-c", "x1")
    refused(server, 2, "CDC:ErrSinkURIInvalid", *create, "--sink-uri", "ftp://h/x", "-c", "x1")
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[sink]\nno-such-option = 1\n")
    refused(
        server, 2, "CDC:ErrInvalidConfig", *create, "--sink-uri", out, "-c", "x1", "--config", str(bad_toml)
    )
    bad_rule = tmp_path / "rule.toml"
    bad_rule.write_text('[filter]\nrules = ["db.t#x"]\n')
    refused(
        server,
        2,
        "CDC:ErrFilterRuleInvalid",
        *create,
        "--sink-uri",
        out,
        "-c",
        "x1",
        "--config",
        str(bad_rule),
    )
    # an unreachable upstream and sink are transient (exit 3); a wrong password is a setup error
    closed = free_port()
    refused(
        server,
        3,
        "CDC:ErrUpstreamUnavailable",
        "changefeed",
        "create",
        "--sink-uri",
        out,
        "--upstream-uri",
        f"mysql://cdc_up:{UP_SECRET}@127.0.0.1:{closed}/",
    )
    refused(
        server,
        2,
        "CDC:ErrUpstreamSetup",
        "changefeed",
        "create",
        "--sink-uri",
        out,
        "--upstream-uri",
        up_uri(upstream, "wrong-pw-1"),
    )
    refused(
        server,
        3,
        "CDC:ErrSinkUnavailable",
        *create,
        "--sink-uri",
        f"mysql://cdc_sink:{SINK_SECRET}@127.0.0.1:{closed}/",
    )
    refused(server, 2, "CDC:ErrInvalidConfig", *create, "--sink-uri", out, "--database", DB)
    refused(
        server,
        2,
        "CDC:ErrTargetTsBeforeStartTs",
        *create,
        "--sink-uri",
        out,
        "--start-ts",
        "500",
        "--target-ts",
        "400",
    )
    for verb in ("query", "pause", "resume", "remove", "statistics"):
        refused(server, 2, "CDC:ErrChangeFeedNotExists", "changefeed", verb, "-c", "ghost")
    refused(
        server, 2, "CDC:ErrChangeFeedNotExists", "changefeed", "update", "-c", "ghost", "--target-ts", "9"
    )
    # auth: missing and wrong tokens
    refused(server, 2, "CDC:ErrUnauthorized", "changefeed", "list", token=False)
    refused(server, 2, "CDC:ErrUnauthorized", "capture", "list", "--auth-token", "wrong", token=False)
    assert httpx.get(f"{server.url}/api/v2/health").status_code == 200
    assert httpx.get(f"{server.url}/api/v2/changefeeds").status_code == 401
    with pytest.raises(AuthError):
        from sparkcdc.server.client import ApiClient

        ApiClient(server.url).list_changefeeds()
    # the API answers the same refusals with 4xx bodies
    with server.client() as c:
        with pytest.raises(ConfigError) as ei:
            c.create_changefeed({"changefeed_id": "bad id", "sink_uri": out, "upstream_uri": up})
        assert ei.value.code == "CDC:ErrInvalidChangefeedID"
        with pytest.raises(SinkURIError):
            c.create_changefeed(
                {"changefeed_id": "x2", "sink_uri": "file:///x?protocol=nope", "upstream_uri": up}
            )
        with pytest.raises(ConfigError, match="unknown config key"):
            c.create_changefeed(
                {"changefeed_id": "x2", "sink_uri": out, "upstream_uri": up, "replica_config": {"bogus": 1}}
            )
        with pytest.raises(ChangefeedNotFound):
            c.get_changefeed("ghost")
    assert cli(server, "changefeed", "list") == []
    no_secrets()


# ---------------------------------------------------------------- the whole lifecycle with Spark


def test_lifecycle_through_the_cli(server: ServerProc, upstream: LocalMariaDB, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    sink = f"file://{out_dir}?protocol=canal-json"
    created = cli(
        server,
        "changefeed",
        "create",
        "-c",
        "orders-feed",
        "--sink-uri",
        sink,
        "--upstream-uri",
        up_uri(upstream),
        "--subscriber",
        "orders-sub",
        "--database",
        DB,
        "--table",
        "orders",
    )
    assert created["id"] == "orders-feed" and created["state"] == "normal"
    assert created["config"]["filter"]["rules"] == [f"`{DB}`.`orders`"]
    assert created["upstream_uri"] == f"mysql://cdc_up:xxxxx@127.0.0.1:{upstream.port}/"
    assert created["subscriber_name"] == "orders-sub" and created["start_ts"] > 0
    # the same subscriber, or the same id, cannot be created twice
    refused(
        server,
        2,
        "CDC:ErrChangeFeedAlreadyExists",
        "changefeed",
        "create",
        "--sink-uri",
        sink,
        "--upstream-uri",
        up_uri(upstream),
        "--subscriber",
        "orders-sub",
        "--database",
        DB,
        "--table",
        "orders",
    )
    refused(
        server,
        2,
        "CDC:ErrChangeFeedAlreadyExists",
        "changefeed",
        "create",
        "-c",
        "orders-feed",
        "--sink-uri",
        sink,
        "--upstream-uri",
        up_uri(upstream),
    )

    upstream.execute(
        f"INSERT INTO {DB}.orders VALUES (1, 'apple'), (2, 'pear')", f"INSERT INTO {DB}.other VALUES (1)"
    )
    st = wait_status(
        server,
        "orders-feed",
        lambda s: s["stats"].get("rows_total", 0) >= 2 and s["owner"],
        "rows replicated",
    )
    assert st["state"] == "normal" and st["last_error"] is None
    assert (out_dir / DB / "orders").is_dir() and not (out_dir / DB / "other").exists()
    owner = st["owner"]
    caps = cli(server, "capture", "list")
    assert [(c["id"], c["changefeeds"]) for c in caps] == [(owner, ["orders-feed"])]

    # update is refused while it runs
    refused(
        server,
        2,
        "CDC:ErrChangefeedUpdateRefused",
        "changefeed",
        "update",
        "-c",
        "orders-feed",
        "--target-ts",
        str(2**62),
    )
    paused = cli(server, "changefeed", "pause", "-c", "orders-feed")
    assert paused["state"] == "stopped"
    st = wait_status(server, "orders-feed", lambda s: s["owner"] is None, "released after pause", 60)
    checkpoint = st["checkpoint_ts"]
    assert checkpoint >= created["start_ts"]
    updated = cli(server, "changefeed", "update", "-c", "orders-feed", "--target-ts", str(2**62))
    assert updated["target_ts"] == 2**62 and updated["state"] == "stopped"
    assert updated["config"]["filter"]["rules"] == [f"`{DB}`.`orders`"]  # the subscription is kept

    resumed = cli(server, "changefeed", "resume", "-c", "orders-feed")
    assert resumed["state"] == "normal"
    upstream.execute(f"INSERT INTO {DB}.orders VALUES (3, 'plum')")
    st = wait_status(
        server,
        "orders-feed",
        lambda s: s["owner"] and s["checkpoint_ts"] > checkpoint,
        "progress after resume",
    )
    q = cli(server, "changefeed", "query", "-c", "orders-feed", "-s")
    assert q["state"] == "normal" and q["checkpoint_tso"] >= st["checkpoint_ts"]
    full = cli(server, "changefeed", "query", "-c", "orders-feed")
    assert full["sink_uri"] == sink and full["epoch"] == 2
    table = cli(server, "changefeed", "list", "--output", "table")
    assert "ORDERS-FEED" not in table and "orders-feed" in table and "CHECKPOINT_TSO" in table
    stats = cli(server, "changefeed", "statistics", "-c", "orders-feed")
    assert stats["state"] == "normal" and "lag_s" in stats

    removed = cli(server, "changefeed", "remove", "-c", "orders-feed")
    assert removed["removed"] is True
    refused(server, 2, "CDC:ErrChangeFeedNotExists", "changefeed", "query", "-c", "orders-feed")
    everything = cli(server, "changefeed", "list", "--all")
    assert [(i["id"], i["state"]) for i in everything] == [("orders-feed", "removed")]
    # once its owner released the tombstone, the subscriber name is free again
    with server.client() as c:
        wait_until(lambda: not c.captures()["items"][0]["changefeeds"], timeout=60, what="remove released")
    no_secrets()


def test_permanent_error_fails_one_changefeed_while_another_runs(
    server: ServerProc, upstream: LocalMariaDB, tmp_path: Path
) -> None:
    upstream.execute(
        "DROP USER IF EXISTS 'doomed'@'%'",
        "CREATE USER 'doomed'@'%' IDENTIFIED BY 'doomed-pw-1'",
        "GRANT ALL PRIVILEGES ON *.* TO 'doomed'@'%'",
    )
    doomed_up = f"mysql://doomed:doomed-pw-1@127.0.0.1:{upstream.port}/"
    cfg = {"filter": {"rules": [f"{DB}.*"]}}
    api(
        server,
        "POST",
        "/changefeeds",
        json={
            "changefeed_id": "healthy",
            "upstream_uri": up_uri(upstream),
            "sink_uri": f"file://{tmp_path}/healthy?protocol=canal-json",
            "replica_config": cfg,
        },
    )
    api(
        server,
        "POST",
        "/changefeeds",
        json={
            "changefeed_id": "doomed",
            "upstream_uri": doomed_up,
            "sink_uri": f"file://{tmp_path}/doomed?protocol=canal-json",
            "replica_config": cfg,
        },
    )
    wait_status(server, "doomed", lambda s: s["owner"], "doomed claimed")
    api(server, "POST", "/changefeeds/doomed/pause")
    wait_status(server, "doomed", lambda s: s["owner"] is None, "doomed released")
    upstream.execute("DROP USER 'doomed'@'%'")
    api(server, "POST", "/changefeeds/doomed/resume")
    failed = wait_status(server, "doomed", lambda s: s["state"] == "failed", "doomed failed")
    assert failed["last_error"]["code"] == "CDC:ErrUpstreamSetup"
    assert "doomed-pw-1" not in json.dumps(failed) and failed["owner"] is None
    # the other changefeed keeps replicating
    before = status_of(server, "healthy")["checkpoint_ts"]
    upstream.execute(f"INSERT INTO {DB}.other VALUES (100)")
    wait_status(
        server,
        "healthy",
        lambda s: s["state"] == "normal" and s["checkpoint_ts"] > before,
        "healthy progresses",
    )
    # failed → update allowed → resume works once the cause is fixed
    with server.client() as c:
        with pytest.raises(ChangefeedStateError):
            c.update_changefeed("healthy", {"target_ts": 2**62})
        upstream.execute(
            "CREATE USER 'doomed'@'%' IDENTIFIED BY 'doomed-pw-1'",
            "GRANT ALL PRIVILEGES ON *.* TO 'doomed'@'%'",
        )
        c.update_changefeed("doomed", {"target_ts": 2**62})
        c.resume("doomed")
    st = wait_status(server, "doomed", lambda s: s["state"] == "normal" and s["owner"], "doomed resumed")
    assert st["last_error"] is None
    for cf_id in ("healthy", "doomed"):
        api(server, "DELETE", f"/changefeeds/{cf_id}")
    no_secrets()


def test_target_ts_finishes(server: ServerProc, upstream: LocalMariaDB, tmp_path: Path) -> None:
    target = compose_ts(int(time.time() * 1000) + 2000)
    api(
        server,
        "POST",
        "/changefeeds",
        json={
            "changefeed_id": "until-soon",
            "upstream_uri": up_uri(upstream),
            "sink_uri": f"file://{tmp_path}/fin?protocol=canal-json",
            "target_ts": target,
            "replica_config": {"filter": {"rules": [f"{DB}.*"]}},
        },
    )
    upstream.execute(f"INSERT INTO {DB}.other VALUES (200)")
    st = wait_status(server, "until-soon", lambda s: s["state"] == "finished", "finished at target-ts")
    assert st["owner"] is None and st["checkpoint_ts"] <= target
    with server.client() as c:
        with pytest.raises(ChangefeedStateError):
            c.pause("until-soon")
        with pytest.raises(ChangefeedExists):
            c.create_changefeed(
                {
                    "changefeed_id": "until-soon",
                    "upstream_uri": up_uri(upstream),
                    "sink_uri": f"file://{tmp_path}/fin?protocol=canal-json",
                }
            )
        c.remove("until-soon")
    no_secrets()


def test_an_idle_changefeed_checkpoint_follows_the_clock(
    server: ServerProc, upstream: LocalMariaDB, tmp_path: Path
) -> None:
    from sparkcdc.capture.start import query_tso
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.model.ts import physical_ms

    sink = f"file://{tmp_path}/idle?protocol=canal-json"
    cli(
        server,
        "changefeed",
        "create",
        "-c",
        "idle-feed",
        "--sink-uri",
        sink,
        "--upstream-uri",
        up_uri(upstream),
    )
    upstream.execute(f"INSERT INTO {DB}.other VALUES (300)")
    tso = query_tso(UpstreamConfig.from_uri(up_uri(upstream)))

    def checkpoint() -> int:
        return int(cli(server, "changefeed", "query", "-c", "idle-feed", "-s")["checkpoint_tso"])

    wait_until(lambda: checkpoint() >= tso, timeout=180, interval=0.5, what="the checkpoint to reach the tso")
    # Nothing is written any more: `changefeed query` still shows the checkpoint moving with the clock.
    first = checkpoint()
    wait_until(
        lambda: physical_ms(checkpoint()) >= physical_ms(first) + 3000,
        timeout=30,
        interval=0.5,
        what="the checkpoint of an idle changefeed to move",
    )
    assert time.time() - physical_ms(checkpoint()) / 1000 < 10
    cli(server, "changefeed", "remove", "-c", "idle-feed")
    no_secrets()


def test_sink_outage_shows_a_warning_and_recovers(
    server: ServerProc, upstream: LocalMariaDB, tmp_path: Path
) -> None:
    down = LocalMariaDB(datadir=str(tmp_path / "downstream")).start()
    try:
        down.execute(
            f"CREATE DATABASE {DB}", f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, item VARCHAR(40))"
        )
        down.execute(
            f"CREATE USER 'cdc_sink'@'%' IDENTIFIED BY '{SINK_SECRET}'",
            "GRANT ALL PRIVILEGES ON *.* TO 'cdc_sink'@'%'",
        )
        created = api(
            server,
            "POST",
            "/changefeeds",
            json={
                "changefeed_id": "to-mysql",
                "upstream_uri": up_uri(upstream),
                "sink_uri": sink_uri(down),
                "database": DB,
                "table": "orders",
            },
        )
        assert created["sink_uri"] == f"mysql://cdc_sink:xxxxx@127.0.0.1:{down.port}/"
        wait_status(server, "to-mysql", lambda s: s["owner"] and s["stats"], "to-mysql running")
        down.kill()
        upstream.execute(f"INSERT INTO {DB}.orders VALUES (10, 'during outage')")
        warned = wait_status(
            server, "to-mysql", lambda s: s["last_warning"], "a warning while the sink is down"
        )
        assert warned["state"] == "normal" and warned["last_error"] is None
        assert "CDC:ErrSinkUnavailable" in warned["last_warning"] or "Unavailable" in warned["last_warning"]
        assert SINK_SECRET not in json.dumps(warned)
        # the retries are counted by the warning's error code on /metrics
        code = warned["last_warning"][1 : warned["last_warning"].index("]")]
        metrics = httpx.get(
            f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
        ).text
        for name in ("sparkcdc_changefeed_errors_total", "sparkcdc_changefeed_retries_total"):
            series = f'{name}{{changefeed="to-mysql",code="{code}",namespace="default"}}'
            assert series in metrics and float(metrics.split(series, 1)[1].split()[0]) >= 1, metrics[-3000:]
        down.start()
        wait_until(
            lambda: down.query(f"SELECT item FROM {DB}.orders WHERE id = 10") == [("during outage",)],
            timeout=150,
            interval=0.5,
            what="row applied after the sink came back",
            on_timeout=lambda: json.dumps(status_of(server, "to-mysql")),
        )
        wait_status(server, "to-mysql", lambda s: s["last_warning"] is None, "warning cleared")
        api(server, "DELETE", "/changefeeds/to-mysql")
    finally:
        down.stop()
    no_secrets()
