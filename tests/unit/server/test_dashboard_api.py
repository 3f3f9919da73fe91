"""The dashboard's routes in-process: static files, /metrics, history and snapshot ranges (SQLite meta)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from sparkcdc.meta import ChangefeedState, MetaStore, NewChangefeed
from sparkcdc.meta.models import RangeProgress, RangeStage
from sparkcdc.metrics import ChangefeedMetrics
from sparkcdc.model.ts import compose_ts
from sparkcdc.server.app import DASHBOARD_DIR, ServerState, create_app
from sparkcdc.server.history import ChangefeedHistory
from sparkcdc.server.service import ChangefeedService

TOKEN = "dash-token"


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MetaStore]:
    s = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    s.heartbeat_server("srv-1", "127.0.0.1:8300", "0.1.0")
    yield s
    s.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def app_of(store: MetaStore, clock: Clock) -> tuple[TestClient, ChangefeedMetrics, ChangefeedHistory]:
    metrics = ChangefeedMetrics()
    history = ChangefeedHistory(store, metrics, window_s=60, interval_s=5, clock=clock)
    state = ServerState(
        store=store,
        service=ChangefeedService(store),
        server_id="srv-1",
        address="127.0.0.1:8300",
        lease_seconds=10,
        auth_token=TOKEN,
        metrics=metrics,
        history=history,
    )
    return TestClient(create_app(state), raise_server_exceptions=False), metrics, history


def put(store: MetaStore, tmp_path: Path, cf_id: str) -> None:
    store.create_changefeed(
        NewChangefeed(
            id=cf_id,
            upstream_uri="mysql://cdc:pw@127.0.0.1:3306/",
            sink_uri=f"file://{tmp_path}/out?protocol=csv",
            config={},
            start_ts=1000,
        )
    )


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_static_files_are_public_and_the_data_needs_the_token(store: MetaStore) -> None:
    client, _, _ = app_of(store, Clock())
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    # everything the page loads is served from the package: no other origin
    for ref in ("/dashboard/app.js", "/dashboard/app.css"):
        assert ref in page.text
        got = client.get(ref)
        assert got.status_code == 200 and got.content == (DASHBOARD_DIR / ref.rsplit("/", 1)[1]).read_bytes()
    assert "http://" not in page.text and "https://" not in page.text
    assert "https://" not in client.get("/dashboard/app.js").text
    assert client.get("/dashboard/secret.py").status_code == 404
    assert client.get("/dashboard/..%2Fapp.py").status_code == 404
    for path in ("/metrics", "/api/v2/changefeeds", "/api/v2/changefeeds/x/history"):
        assert client.get(path).status_code == 401, path


def test_history_samples_the_meta_database(store: MetaStore, tmp_path: Path) -> None:
    clock = Clock()
    client, _, history = app_of(store, clock)
    put(store, tmp_path, "cf-1")
    cf = store.get_changefeed("cf-1")
    claimed = store.claim_changefeed(cf, "srv-1", 10)
    ckpt = compose_ts(int(clock.now * 1000) - 4000, 0)
    store.renew_lease(
        claimed,
        "srv-1",
        10,
        checkpoint_ts=ckpt,
        resolved_ts=ckpt,
        stats={"rows_total": 120, "rows_per_sec": 40.0, "lag_s": 4.0},
    )
    start = clock.now
    for _ in range(20):  # 100 s of samples; the window keeps the last 60 s
        clock.now += 5
        history.sample()
    body = client.get("/api/v2/changefeeds/cf-1/history", headers=AUTH).json()
    assert body["window_s"] == 60 and body["interval_s"] == 5
    times = [p["time"] for p in body["items"]]
    assert len(times) == 13 and times[-1] == clock.now and times[0] == clock.now - 60
    last = body["items"][-1]
    assert last["state"] == "normal" and last["lag_s"] == 4.0 and last["rows_per_sec"] == 40.0
    assert last["rows_total"] == 120 and last["checkpoint_ts"] == ckpt
    text = client.get("/metrics", headers=AUTH).text
    assert 'ticdc_owner_status{changefeed="cf-1",namespace="default"} 0.0' in text
    # paused: no throughput, and the lag is the real distance to the checkpoint
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.STOPPED)
    clock.now += 5
    history.sample()
    last = client.get("/api/v2/changefeeds/cf-1/history", headers=AUTH).json()["items"][-1]
    assert (
        last["state"] == "stopped"
        and last["rows_per_sec"] == 0.0
        and last["lag_s"] == pytest.approx(clock.now - start + 4.0)
    )
    assert (
        'ticdc_owner_status{changefeed="cf-1",namespace="default"} 3.0'
        in client.get("/metrics", headers=AUTH).text
    )
    # removed: its samples and series go
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.REMOVED)
    history.sample()
    assert history.points("default", "cf-1") == []
    assert "cf-1" not in client.get("/metrics", headers=AUTH).text
    assert client.get("/api/v2/changefeeds/nope/history", headers=AUTH).status_code == 404


def test_snapshot_ranges_by_table(store: MetaStore, tmp_path: Path) -> None:
    client, _, _ = app_of(store, Clock())
    put(store, tmp_path, "cf-2")
    ranges = [
        ("orders", 1, "done", 100, 100, None),
        ("orders", 2, "snapshot", 40, 100, None),
        ("orders", 3, "split", 0, 100, None),
        ("orders", 4, "snapshot", 0, 50, 3),
        ("customers", 1, "done", 30, 25, None),
    ]
    for table, rid, stage, copied, estimated, parent in ranges:
        store.save_range_progress(
            RangeProgress(
                changefeed_id="cf-2",
                schema="shop",
                table=table,
                range_id=rid,
                stage=RangeStage.SNAPSHOT,
                snapshot_version=5,
                last_log_position={
                    "snapshot": {"after": None, "upto": None, "stage": stage, "estimated_rows": estimated}
                },
                rows_copied=copied,
                parent_range_id=parent,
            )
        )
    body = client.get("/api/v2/changefeeds/cf-2/snapshot", headers=AUTH).json()
    tables = {t["table"]: t for t in body["items"]}
    assert body["total"] == 2 and set(tables) == {"orders", "customers"}
    orders = tables["orders"]
    assert [r["range_id"] for r in orders["ranges"]] == [1, 2, 4]  # the split range lives on in 4
    assert (orders["ranges_done"], orders["ranges_total"], orders["rows_copied"]) == (1, 3, 140)
    assert orders["estimated_rows"] == 250 and orders["ranges"][0]["done"] is True
    assert (tables["customers"]["ranges_done"], tables["customers"]["ranges_total"]) == (1, 1)
