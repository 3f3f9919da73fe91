"""The registry's REST API in-process (Starlette TestClient over a SQLite file)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from sparkcdc.registry.compat import LEVELS, incompatibilities, parse_schema
from sparkcdc.registry.server import SchemaRegistryApp
from sparkcdc.registry.store import RegistryStore


def _rec(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "r", "namespace": "n", "fields": list(fields)})


V1 = _rec({"name": "a", "type": "int"})
V2_DEFAULT = _rec({"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""})
V2_NO_DEFAULT = _rec({"name": "a", "type": "int"}, {"name": "b", "type": "string"})
V_LONG = _rec({"name": "a", "type": "long"})
V_DROP = _rec()


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    store = RegistryStore(f"sqlite:///{tmp_path / 'reg.db'}")
    with TestClient(SchemaRegistryApp(store).app) as c:
        yield c
    store.close()


def _register(c: TestClient, subject: str, schema: str) -> tuple[int, dict]:
    r = c.post(f"/subjects/{subject}/versions", json={"schema": schema})
    return r.status_code, r.json()


def test_root_is_exactly_empty_object(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and r.text == "{}"


def test_register_same_schema_same_id_and_ids_are_global(client: TestClient) -> None:
    assert _register(client, "s-value", V1) == (200, {"id": 1})
    assert _register(client, "s-value", V1) == (200, {"id": 1})
    assert client.get("/subjects/s-value/versions").json() == [1]
    # the same schema under another subject keeps its id; a new schema gets a new one
    assert _register(client, "t-value", V1) == (200, {"id": 1})
    assert _register(client, "s-value", V2_DEFAULT) == (200, {"id": 2})
    assert client.get("/subjects").json() == ["s-value", "t-value"]
    latest = client.get("/subjects/s-value/versions/latest").json()
    assert latest == {
        "subject": "s-value",
        "version": 2,
        "id": 2,
        "schema": json.dumps(json.loads(V2_DEFAULT), separators=(",", ":")),
    }
    assert client.get("/subjects/s-value/versions/1").json()["id"] == 1
    assert json.loads(client.get("/schemas/ids/2").json()["schema"]) == json.loads(V2_DEFAULT)
    assert client.get("/schemas/ids/1/versions").json() == [
        {"subject": "s-value", "version": 1},
        {"subject": "t-value", "version": 1},
    ]


def test_lookup(client: TestClient) -> None:
    _register(client, "s-value", V1)
    r = client.post("/subjects/s-value", json={"schema": V1})
    assert r.status_code == 200 and (r.json()["id"], r.json()["version"]) == (1, 1)
    r = client.post("/subjects/s-value", json={"schema": V_LONG})
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    r = client.post("/subjects/nope", json={"schema": V1})
    assert r.json() == {"error_code": 40401, "message": "Subject 'nope' not found."}


def test_error_bodies(client: TestClient) -> None:
    r = client.post("/subjects/s-value/versions", json={"schema": '{"type":"record","name":"x"}'})
    assert r.status_code == 422 and r.json()["error_code"] == 42201
    r = client.post("/subjects/s-value/versions", json={"schema": "not json"})
    assert r.json()["error_code"] == 42201
    assert client.get("/subjects/zz/versions").json()["error_code"] == 40401
    _register(client, "s-value", V1)
    assert client.get("/subjects/s-value/versions/9").json() == {
        "error_code": 40402,
        "message": "Version 9 not found.",
    }
    assert client.get("/subjects/s-value/versions/abc").json()["error_code"] == 42202
    assert client.get("/schemas/ids/77").json()["error_code"] == 40403
    assert client.get("/no/such/path").json() == {"error_code": 404, "message": "HTTP 404 Not Found"}


def test_config_levels(client: TestClient) -> None:
    assert client.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert client.put("/config", json={"compatibility": "full"}).json() == {"compatibility": "FULL"}
    assert client.get("/config").json() == {"compatibilityLevel": "FULL"}
    r = client.get("/config/s-value")
    assert r.status_code == 404 and r.json()["error_code"] == 40408
    assert client.get("/config/s-value?defaultToGlobal=true").json() == {"compatibilityLevel": "FULL"}
    assert client.put("/config/s-value", json={"compatibility": "NONE"}).json() == {"compatibility": "NONE"}
    assert client.get("/config/s-value").json() == {"compatibilityLevel": "NONE"}
    r = client.put("/config", json={"compatibility": "SOMETIMES"})
    assert r.status_code == 422 and r.json()["error_code"] == 42203


def test_incompatible_change_is_409_with_reason(client: TestClient) -> None:
    _register(client, "s-value", V1)
    code, body = _register(client, "s-value", V2_NO_DEFAULT)
    assert code == 409 and body["error_code"] == 409
    assert 'incompatible with an earlier schema for subject "s-value"' in body["message"]
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in body["message"] and "'b'" in body["message"]
    assert "{compatibility: 'BACKWARD'}" in body["message"]
    assert client.get("/subjects/s-value/versions").json() == [1]
    # a compatible evolution is a new version
    assert _register(client, "s-value", V2_DEFAULT) == (200, {"id": 2})
    assert client.get("/subjects/s-value/versions").json() == [1, 2]


def test_compatibility_endpoint(client: TestClient) -> None:
    _register(client, "s-value", V1)
    ok = client.post("/compatibility/subjects/s-value/versions/latest", json={"schema": V2_DEFAULT}).json()
    bad = client.post(
        "/compatibility/subjects/s-value/versions/1?verbose=true", json={"schema": V2_NO_DEFAULT}
    ).json()
    assert ok == {"is_compatible": True}
    assert bad["is_compatible"] is False and "READER_FIELD_MISSING_DEFAULT_VALUE" in bad["messages"][0]
    r = client.post("/compatibility/subjects/s-value/versions/5", json={"schema": V1})
    assert r.json()["error_code"] == 40402


def test_delete_subject_soft_then_permanent(client: TestClient) -> None:
    _register(client, "s-value", V1)
    assert client.delete("/subjects/s-value?permanent=true").json()["error_code"] == 40405
    assert client.delete("/subjects/s-value").json() == [1]
    assert client.get("/subjects").json() == []
    assert client.get("/subjects?deleted=true").json() == ["s-value"]
    assert client.delete("/subjects/s-value").json()["error_code"] == 40404
    # re-registering after a soft delete keeps the id, gets the next version
    assert _register(client, "s-value", V1) == (200, {"id": 1})
    assert client.get("/subjects/s-value/versions").json() == [2]
    client.delete("/subjects/s-value")
    assert client.delete("/subjects/s-value?permanent=true").json() == [1, 2]
    assert client.get("/subjects/s-value/versions?deleted=true").json()["error_code"] == 40401


def test_restart_keeps_ids(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'reg.db'}"
    with TestClient(SchemaRegistryApp(RegistryStore(uri)).app) as c:
        _register(c, "a-value", V1)
        _register(c, "a-value", V2_DEFAULT)
        c.put("/config/a-value", json={"compatibility": "FULL"})
    with TestClient(SchemaRegistryApp(RegistryStore(uri)).app) as c:
        assert _register(c, "a-value", V2_DEFAULT) == (200, {"id": 2})
        assert _register(c, "b-value", V_LONG) == (200, {"id": 3})
        assert c.get("/config/a-value").json() == {"compatibilityLevel": "FULL"}


# -- compatibility levels (Apache Avro's checker) --------------------------------------------------------


def _check(new: str, olds: list[str], level: str) -> bool:
    prev = [(i + 1, parse_schema(s)) for i, s in enumerate(olds)]
    return not incompatibilities(parse_schema(new), prev, level)


@pytest.mark.parametrize(
    ("new", "old", "level", "ok"),
    [
        (V2_DEFAULT, V1, "BACKWARD", True),
        (V2_NO_DEFAULT, V1, "BACKWARD", False),
        (V2_NO_DEFAULT, V1, "FORWARD", True),  # old reader ignores the new field
        (V_DROP, V1, "FORWARD", False),  # old reader needs a, new data lacks it
        (V_DROP, V1, "BACKWARD", True),
        (V2_DEFAULT, V1, "FULL", True),
        (V2_NO_DEFAULT, V1, "FULL", False),
        (V_LONG, V1, "BACKWARD", True),  # int promotes to long
        (V_LONG, V1, "FORWARD", False),
        (V2_NO_DEFAULT, V1, "NONE", True),
    ],
)
def test_levels(new: str, old: str, level: str, ok: bool) -> None:
    assert _check(new, [old], level) is ok


def test_transitive_checks_every_version() -> None:
    v1 = _rec({"name": "a", "type": "int"}, {"name": "b", "type": "string"})
    v2 = _rec({"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"})
    v3 = _rec({"name": "a", "type": "int"})  # drops b
    # FORWARD: old readers must read new data; v1 reader needs b (no default) -> fails; v2 has a default -> ok
    assert _check(v3, [v1, v2], "FORWARD") is True
    assert _check(v3, [v1, v2], "FORWARD_TRANSITIVE") is False
    assert set(LEVELS) == {
        "NONE",
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
    }
