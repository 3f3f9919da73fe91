"""The /api/v2 app in-process (Starlette TestClient) on a real SQLite meta store.

Creating a changefeed successfully needs a real upstream (tests/integration/server);
here changefeeds are put in the store directly, and every refusal is checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from sparkcdc.meta import ChangefeedState, MetaStore, NewChangefeed
from sparkcdc.server.app import ServerState, create_app
from sparkcdc.server.service import ChangefeedService

TOKEN = "s3cr3t-token"
SECRET = "Pa55word-xyz"


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MetaStore]:
    s = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    s.heartbeat_server("srv-1", "127.0.0.1:8300", "0.1.0")
    yield s
    s.close()


def make_client(store: MetaStore, token: str | None = TOKEN) -> TestClient:
    state = ServerState(
        store=store,
        service=ChangefeedService(store),
        server_id="srv-1",
        address="127.0.0.1:8300",
        lease_seconds=10,
        auth_token=token,
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return TestClient(create_app(state), headers=headers, raise_server_exceptions=False)


@pytest.fixture()
def client(store: MetaStore) -> TestClient:
    return make_client(store)


def put(store: MetaStore, tmp_path: Path, cf_id: str = "cf-1", **kw: Any) -> None:
    args: dict[str, Any] = dict(
        id=cf_id,
        upstream_uri=f"mysql://cdc:{SECRET}@127.0.0.1:3306/",
        sink_uri=f"file://{tmp_path}/out?protocol=canal-json",
        config={
            "sink": {"kafka-config": {"sasl-password": SECRET}, "schema-registry": f"http://u:{SECRET}@h:1"}
        },
        start_ts=1000,
    )
    args.update(kw)
    store.create_changefeed(NewChangefeed(**args))


def err(resp: Any, status: int, code: str, *fragments: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error_code", "error_msg"}
    assert body["error_code"] == code, body
    for f in fragments:
        assert f in body["error_msg"], body
    return str(body["error_msg"])


VALID = {
    "changefeed_id": "new-cf",
    "upstream_uri": "mysql://root:@127.0.0.1:1/",
    "sink_uri": "file:///tmp/sparkcdc-unit?protocol=canal-json",
}


# ---------------------------------------------------------------- auth and routing


def test_health_is_public_everything_else_needs_the_token(store: MetaStore) -> None:
    anon = make_client(store, None)
    anon.headers.clear()
    app = make_client(store)
    no_token = TestClient(app.app, raise_server_exceptions=False)
    assert no_token.get("/api/v2/health").json() == {}
    for method, path in [
        ("GET", "/api/v2/status"),
        ("GET", "/api/v2/captures"),
        ("GET", "/api/v2/changefeeds"),
        ("POST", "/api/v2/changefeeds"),
        ("GET", "/api/v2/changefeeds/x"),
        ("PUT", "/api/v2/changefeeds/x"),
        ("DELETE", "/api/v2/changefeeds/x"),
        ("GET", "/api/v2/changefeeds/x/status"),
        ("POST", "/api/v2/changefeeds/x/pause"),
        ("POST", "/api/v2/changefeeds/x/resume"),
    ]:
        err(no_token.request(method, path), 401, "CDC:ErrUnauthorized", "bearer token")
    wrong = TestClient(app.app, headers={"Authorization": "Bearer nope"}, raise_server_exceptions=False)
    err(wrong.get("/api/v2/status"), 401, "CDC:ErrUnauthorized", "wrong bearer token")
    basic = TestClient(app.app, headers={"Authorization": f"Basic {TOKEN}"}, raise_server_exceptions=False)
    err(basic.get("/api/v2/status"), 401, "CDC:ErrUnauthorized")
    assert app.get("/api/v2/status").status_code == 200
    # without --auth-token nothing is required
    assert TestClient(make_client(store, None).app).get("/api/v2/changefeeds").status_code == 200


def test_status_and_captures(client: TestClient) -> None:
    st = client.get("/api/v2/status").json()
    assert st["id"] == "srv-1" and st["is_owner"] is True and st["meta_backend"] == "sqlite"
    caps = client.get("/api/v2/captures").json()
    assert caps["total"] == 1
    assert caps["items"][0] | {"heartbeat_at": 0, "started_at": 0, "pid": 0} == {
        "id": "srv-1",
        "is_owner": True,
        "address": "127.0.0.1:8300",
        "cluster_id": "default",
        "version": "0.1.0",
        "pid": 0,
        "started_at": 0,
        "heartbeat_at": 0,
        "changefeeds": [],
    }


def test_unknown_routes_and_methods_answer_json(client: TestClient) -> None:
    err(client.get("/api/v1/changefeeds"), 404, "CDC:ErrNotFound", "/api/v2")
    err(client.patch("/api/v2/changefeeds/x"), 405, "CDC:ErrMethodNotAllowed")


# ---------------------------------------------------------------- create refusals


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ({**VALID, "changefeed_id": "bad_id"}, "CDC:ErrInvalidChangefeedID", "'bad_id'"),
        ({**VALID, "changefeed_id": "-lead"}, "CDC:ErrInvalidChangefeedID", "letters, digits"),
        ({**VALID, "changefeed_id": "a" * 129}, "CDC:ErrInvalidChangefeedID", "128"),
        ({**VALID, "namespace": "bad ns"}, "CDC:ErrAPIInvalidParam", "namespace"),
        ({**VALID, "bogus": 1}, "CDC:ErrAPIInvalidParam", "bogus"),
        ({**VALID, "start_ts": -5}, "CDC:ErrAPIInvalidParam", "start_ts"),
        ({**VALID, "start_ts": "12"}, "CDC:ErrAPIInvalidParam", "start_ts"),
        ({**VALID, "start_ts": 50, "target_ts": 40}, "CDC:ErrTargetTsBeforeStartTs", "target-ts 40"),
        ({**VALID, "replica_config": {"no-such-key": 1}}, "CDC:ErrInvalidConfig", "'no-such-key'"),
        ({**VALID, "replica_config": {"filter": {"rules": ["a%b.c"]}}}, "CDC:ErrFilterRuleInvalid", "a%b.c"),
        ({**VALID, "replica_config": {"sink": {"date-separator": "week"}}}, "CDC:ErrInvalidConfig", "week"),
        ({**VALID, "replica_config": []}, "CDC:ErrAPIInvalidParam", "replica_config"),
        ({**VALID, "sink_uri": "ftp://h/x"}, "CDC:ErrSinkURIInvalid", "'ftp'"),
        ({**VALID, "sink_uri": "file:///tmp/x?protocol=csv&bogus=1"}, "CDC:ErrSinkURIInvalid", "bogus"),
        ({**VALID, "sink_uri": "file:///tmp/x?protocol=avro"}, "CDC:ErrSinkURIInvalid", "avro"),
        ({**VALID, "sink_uri": ""}, "CDC:ErrSinkURIInvalid", "missing sink URI"),
        ({**VALID, "upstream_uri": "postgres://h/x"}, "CDC:ErrInvalidConfig", "postgres"),
        ({**VALID, "upstream_uri": None}, "CDC:ErrInvalidConfig", "--upstream-uri"),
        ({**VALID, "database": "app"}, "CDC:ErrAPIInvalidParam", "both database and table"),
        (
            {**VALID, "database": "app", "table": "t", "replica_config": {"filter": {"rules": ["x.*"]}}},
            "CDC:ErrInvalidConfig",
            "use one or the other",
        ),
        ({**VALID, "subscriber_name": ""}, "CDC:ErrAPIInvalidParam", "subscriber_name"),
    ],
)
def test_create_refuses_bad_input_with_400(
    client: TestClient, body: dict[str, Any], code: str, fragment: str
) -> None:
    err(client.post("/api/v2/changefeeds", json=body), 400, code, fragment)
    assert client.get("/api/v2/changefeeds").json()["total"] == 0


def test_create_refuses_malformed_bodies(client: TestClient) -> None:
    err(client.post("/api/v2/changefeeds", content=b"{nope"), 400, "CDC:ErrAPIInvalidParam", "not valid JSON")
    err(client.post("/api/v2/changefeeds", json=[1]), 400, "CDC:ErrAPIInvalidParam", "JSON object")


def test_create_refuses_duplicate_id_and_subscriber(
    client: TestClient, store: MetaStore, tmp_path: Path
) -> None:
    put(store, tmp_path, "taken", subscriber_name="orders-sub")
    err(
        client.post("/api/v2/changefeeds", json={**VALID, "changefeed_id": "taken"}),
        409,
        "CDC:ErrChangeFeedAlreadyExists",
        "'taken'",
    )
    err(
        client.post("/api/v2/changefeeds", json={**VALID, "subscriber_name": "orders-sub"}),
        409,
        "CDC:ErrChangeFeedAlreadyExists",
        "orders-sub",
    )


def test_secrets_in_a_refused_sink_uri_are_not_echoed(client: TestClient) -> None:
    body = {**VALID, "sink_uri": f"mysql://u:{SECRET}@127.0.0.1:1/?bogus-param=1"}
    resp = client.post("/api/v2/changefeeds", json=body)
    assert resp.status_code == 400 and SECRET not in resp.text


# ---------------------------------------------------------------- reading and verbs


def test_get_list_status_are_redacted(client: TestClient, store: MetaStore, tmp_path: Path) -> None:
    put(store, tmp_path)
    store.update_changefeed(store.get_changefeed("cf-1"), warning=f"sink said: password {SECRET} wrong")
    detail = client.get("/api/v2/changefeeds/cf-1").json()
    assert detail["id"] == "cf-1" and detail["state"] == "normal"
    assert detail["upstream_uri"] == "mysql://cdc:xxxxx@127.0.0.1:3306/"
    assert detail["config"]["sink"]["kafka-config"]["sasl-password"] == "xxxxx"
    assert detail["checkpoint_ts"] == 1000 and detail["checkpoint_time"].startswith("1970-01-01")
    for path in ("/api/v2/changefeeds/cf-1", "/api/v2/changefeeds", "/api/v2/changefeeds/cf-1/status"):
        text = client.get(path).text
        assert SECRET not in text, path
    items = client.get("/api/v2/changefeeds").json()["items"]
    assert [(i["id"], i["state"], i["checkpoint_tso"]) for i in items] == [("cf-1", "normal", 1000)]
    st = client.get("/api/v2/changefeeds/cf-1/status").json()
    assert st["state"] == "normal" and "xxxxx" in st["last_warning"]


def test_unknown_changefeed_is_404_for_every_verb(client: TestClient) -> None:
    for method, path, body in [
        ("GET", "/api/v2/changefeeds/ghost", None),
        ("GET", "/api/v2/changefeeds/ghost/status", None),
        ("PUT", "/api/v2/changefeeds/ghost", {"target_ts": 5}),
        ("DELETE", "/api/v2/changefeeds/ghost", None),
        ("POST", "/api/v2/changefeeds/ghost/pause", None),
        ("POST", "/api/v2/changefeeds/ghost/resume", None),
    ]:
        err(client.request(method, path, json=body), 404, "CDC:ErrChangeFeedNotExists", "'ghost'")


def test_state_transitions(client: TestClient, store: MetaStore, tmp_path: Path) -> None:
    put(store, tmp_path)
    base = "/api/v2/changefeeds/cf-1"
    # update only while stopped or failed
    err(client.put(base, json={"target_ts": 99999}), 409, "CDC:ErrChangefeedUpdateRefused", "pause it first")
    # resume of a normal changefeed is a no-op, with a new checkpoint it is refused
    assert client.post(f"{base}/resume").status_code == 200
    err(
        client.post(f"{base}/resume", json={"overwrite_checkpoint_ts": 5}),
        409,
        "CDC:ErrChangefeedUpdateRefused",
    )
    assert client.post(f"{base}/pause").status_code == 200
    assert client.get(f"{base}/status").json()["state"] == "stopped"
    assert client.post(f"{base}/pause").status_code == 200  # idempotent
    new_sink = f"file://{tmp_path}/other?protocol=csv"
    upd = client.put(base, json={"sink_uri": new_sink, "target_ts": 99999})
    assert upd.status_code == 200, upd.text
    assert upd.json()["sink_uri"] == new_sink and upd.json()["target_ts"] == 99999
    err(client.put(base, json={"sink_uri": "kafka://h:1/"}), 400, "CDC:ErrSinkURIInvalid")
    err(client.put(base, json={"target_ts": 10}), 400, "CDC:ErrTargetTsBeforeStartTs", "checkpoint-ts 1000")
    err(client.put(base, json={}), 400, "CDC:ErrAPIInvalidParam", "nothing to update")
    err(client.put(base, json={"state": "normal"}), 400, "CDC:ErrAPIInvalidParam", "state")
    assert client.get(base).json()["sink_uri"] == new_sink
    err(client.post(f"{base}/resume", json={"overwrite_checkpoint_ts": -1}), 400, "CDC:ErrAPIInvalidParam")
    err(
        client.post(f"{base}/resume", json={"overwrite_checkpoint_ts": 99999}),
        400,
        "CDC:ErrTargetTsBeforeStartTs",
    )
    err(client.post(f"{base}/resume", json={"foo": 1}), 400, "CDC:ErrAPIInvalidParam", "foo")
    assert client.post(f"{base}/resume", json={"overwrite_checkpoint_ts": 500}).status_code == 200
    st = client.get(f"{base}/status").json()
    assert (st["state"], st["checkpoint_ts"], st["resolved_ts"]) == ("normal", 500, 500)
    # failed → pause → stopped; failed → resume clears the error
    cf = store.get_changefeed("cf-1")
    store.update_changefeed(
        cf, state=ChangefeedState.FAILED, error={"code": "CDC:ErrSinkFailed", "message": "m"}
    )
    assert client.get(base).json()["error"]["code"] == "CDC:ErrSinkFailed"
    assert client.post(f"{base}/resume").status_code == 200
    detail = client.get(base).json()
    assert detail["state"] == "normal" and detail["error"] is None
    # finished cannot be paused or resumed
    cf = store.get_changefeed("cf-1")
    store.update_changefeed(cf, state=ChangefeedState.FINISHED)
    err(client.post(f"{base}/pause"), 409, "CDC:ErrChangefeedUpdateRefused", "finished")
    err(client.post(f"{base}/resume"), 409, "CDC:ErrChangefeedUpdateRefused", "finished")
    # remove → gone, but listed with all=true
    assert client.delete(base).status_code == 200
    err(client.get(base), 404, "CDC:ErrChangeFeedNotExists")
    err(client.delete(base), 404, "CDC:ErrChangeFeedNotExists")
    assert client.get("/api/v2/changefeeds").json()["total"] == 0
    removed = client.get("/api/v2/changefeeds", params={"all": "true"}).json()["items"]
    assert [(i["id"], i["state"]) for i in removed] == [("cf-1", "removed")]


def test_resume_with_new_checkpoint_waits_for_the_old_owner(
    client: TestClient, store: MetaStore, tmp_path: Path
) -> None:
    put(store, tmp_path)
    cf = store.claim_changefeed(store.get_changefeed("cf-1"), "srv-other", 60)
    store.update_changefeed(cf, state=ChangefeedState.STOPPED)
    err(
        client.post("/api/v2/changefeeds/cf-1/resume", json={"overwrite_checkpoint_ts": 1500}),
        409,
        "CDC:ErrChangefeedUpdateRefused",
        "still being stopped",
    )
    # a plain resume is fine: the owner sees it normal again and keeps it
    assert client.post("/api/v2/changefeeds/cf-1/resume").status_code == 200


def test_namespaces_are_separate(client: TestClient, store: MetaStore, tmp_path: Path) -> None:
    put(store, tmp_path, "same")
    put(store, tmp_path, "same", namespace="team-b")
    assert client.post("/api/v2/changefeeds/same/pause", params={"namespace": "team-b"}).status_code == 200
    assert client.get("/api/v2/changefeeds/same").json()["state"] == "normal"
    assert client.get("/api/v2/changefeeds/same", params={"namespace": "team-b"}).json()["state"] == "stopped"
    assert client.get("/api/v2/changefeeds", params={"namespace": "team-b"}).json()["total"] == 1
    assert client.get("/api/v2/changefeeds").json()["total"] == 2


def test_meta_database_loss_is_a_503(client: TestClient, store: MetaStore) -> None:
    db = Path(str(store.engine.url.database))
    db.rename(db.with_suffix(".gone"))  # a real fault: the meta database file disappears
    err(client.get("/api/v2/changefeeds"), 503, "CDC:ErrMetaStoreUnavailable", "retry shortly")
    assert client.get("/api/v2/health").status_code == 200


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_error_is_a_500_and_one_log_line(
    store: MetaStore, caplog: pytest.LogCaptureFixture, debug: bool
) -> None:
    class Broken(ChangefeedService):
        def summary(self, cf: Any) -> dict[str, Any]:
            raise RuntimeError(f"boom with mysql://cdc:{SECRET}@h:1/\nand more")

    store.create_changefeed(
        NewChangefeed(id="cf-1", upstream_uri="mysql://h/", sink_uri="file:///x?protocol=csv", config={})
    )
    state = ServerState(
        store=store, service=Broken(store), server_id="srv-1", address="a:1", lease_seconds=10, debug=debug
    )
    client = TestClient(create_app(state), raise_server_exceptions=True)  # nothing may escape the app
    with caplog.at_level("INFO"):
        resp = client.get("/api/v2/changefeeds")
    err(resp, 500, "CDC:ErrInternalServerError", "internal error: RuntimeError")
    (rec,) = [r for r in caplog.records if "boom" in r.getMessage()]
    assert rec.getMessage() == (
        "internal error on GET /api/v2/changefeeds: [CDC:ErrUnknown] RuntimeError: boom with mysql://cdc:xxxxx@h:1/"
    )
    assert (rec.exc_info is not None) is debug
    assert SECRET not in resp.text
