"""Scheduler lifecycle against a real SQLite meta store.

The runner is a test double: these tests cover only the lifecycle logic (claim,
start, progress, pause, retry, fail, finish, fencing); the integration tests
run the real Spark pipeline.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import SinkError, SinkUnavailable, SparkCdcError
from sparkcdc.meta import ChangefeedState, MetaStore, NewChangefeed
from sparkcdc.pipeline.spec import ChangefeedSpec
from sparkcdc.server.scheduler import Scheduler


@dataclass
class Prog:
    checkpoint_ts: int
    resolved_ts: int
    rows_total: int = 0
    rows_per_sec: float = 0.0
    lag_s: float = 0.0


class FakeHandle:
    def __init__(
        self,
        spec: ChangefeedSpec,
        on_progress: Callable[[Prog], None],
        on_resolved: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> None:
        self.spec = spec
        self.report = on_progress
        self.resolved = on_resolved
        """What the pipeline's batch writer calls before the sink publishes a raised chain state."""
        self.planned: Callable[[dict[str, Any]], None] | None = None
        """What it calls before the writers of a batch with rows run."""
        self.active = True
        self.error: SparkCdcError | None = None
        self.done = False
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        self.active = False

    def is_active(self) -> bool:
        return self.active

    def exception(self) -> SparkCdcError | None:
        return self.error

    def finished(self) -> bool:
        return self.done


class FakeRunner:
    def __init__(self) -> None:
        self.handles: list[FakeHandle] = []
        self.fail_with: dict[str, SparkCdcError] = {}
        self.shut = False

    def start(
        self,
        spec: ChangefeedSpec,
        on_progress: Callable[[Prog], None],
        on_resolved: Callable[[int, dict[str, Any]], None] | None = None,
        on_planned: Callable[[dict[str, Any]], None] | None = None,
    ) -> FakeHandle:
        if spec.changefeed_id in self.fail_with:
            raise self.fail_with[spec.changefeed_id]
        h = FakeHandle(spec, on_progress, on_resolved)
        h.planned = on_planned
        self.handles.append(h)
        return h

    def shutdown(self) -> None:
        self.shut = True

    def of(self, cf_id: str) -> list[FakeHandle]:
        return [h for h in self.handles if h.spec.changefeed_id == cf_id]


@pytest.fixture()
def uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'meta.db'}"


@pytest.fixture()
def store(uri: str) -> MetaStore:
    s = MetaStore.open(uri)
    yield s
    s.close()


def make(store: MetaStore, runner: FakeRunner, tmp_path: Path, **kw: object) -> Scheduler:
    opts: dict[str, object] = dict(
        server_id="srv-a",
        address="127.0.0.1:1",
        data_dir=tmp_path / "data",
        lease_seconds=5,
        backoff_base=0.01,
    )
    opts.update(kw)
    return Scheduler(store, runner, **opts)  # type: ignore[arg-type]


def settle(s: Scheduler, rounds: int = 3) -> None:
    """Tick, wait for in-flight starts/stops, and tick again."""
    for _ in range(rounds):
        s.tick()
        for t in list(s.tasks.values()):
            if t.pending is not None:
                t.pending.exception(timeout=5)


def create(store: MetaStore, cf_id: str = "cf-1", **kw: object) -> None:
    args: dict[str, object] = dict(
        id=cf_id,
        upstream_uri="mysql://root:topsecret@127.0.0.1:3306/",
        sink_uri="file:///tmp/out?protocol=csv",
        config={"filter": {"rules": ["app.*"]}},
        start_ts=100,
    )
    args.update(kw)
    store.create_changefeed(NewChangefeed(**args))  # type: ignore[arg-type]


def test_claims_starts_from_the_checkpoint_and_records_progress(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    (h,) = runner.handles
    assert h.spec.start_ts == 100 and h.spec.target_ts is None
    assert (h.spec.namespace, h.spec.meta_uri) == ("default", store.uri)
    assert h.spec.changefeed_uid == store.get_changefeed("cf-1").uid
    assert h.spec.config.filter.rules == ["app.*"]
    assert Path(h.spec.checkpoint_dir) == tmp_path / "data" / "changefeeds" / "default" / "cf-1" / "epoch-1"
    row = store.get_changefeed("cf-1")
    assert row.owner == "srv-a" and row.epoch == 1
    h.report(Prog(checkpoint_ts=500, resolved_ts=600, rows_total=7, rows_per_sec=1.5, lag_s=0.2))
    settle(s, 1)
    row = store.get_changefeed("cf-1")
    assert (row.checkpoint_ts, row.resolved_ts) == (500, 600)
    assert row.stats == {"rows_total": 7, "rows_per_sec": 1.5, "lag_s": 0.2}
    # an older report never moves the checkpoint back
    h.report(Prog(checkpoint_ts=400, resolved_ts=400))
    settle(s, 1)
    assert store.get_changefeed("cf-1").checkpoint_ts == 500
    assert [x.id for x in store.list_servers()] == ["srv-a"]


def test_pause_stops_and_releases_then_resume_restarts_from_the_checkpoint(
    store: MetaStore, tmp_path: Path
) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    runner.handles[0].report(Prog(checkpoint_ts=800, resolved_ts=800))
    settle(s, 1)
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.STOPPED)
    settle(s)
    row = store.get_changefeed("cf-1")
    assert runner.handles[0].stopped
    assert row.state == ChangefeedState.STOPPED and row.owner is None and row.checkpoint_ts == 800
    assert s.tasks == {}
    stale = Path(runner.handles[0].spec.checkpoint_dir)
    stale.mkdir(parents=True)
    store.update_changefeed(row, state=ChangefeedState.NORMAL)
    settle(s)
    assert len(runner.handles) == 2 and runner.handles[1].spec.start_ts == 800
    assert runner.handles[1].spec.checkpoint_dir.endswith("epoch-2")
    assert not stale.exists()  # a new claim never resumes from an older local Spark checkpoint


def test_an_update_takes_effect_at_the_next_claim(store: MetaStore, tmp_path: Path) -> None:
    """The claim after ``update`` starts with the new upstream URI, sink and config, from the
    checkpoint, and hands the pipeline the upstream identity the meta database records."""
    runner = FakeRunner()
    seen = {"server_uuid": None, "server_id": 1, "binlog": "/var/lib/mysql/mysql-bin", "address": "db:3306"}
    create(store, upstream=seen)
    s = make(store, runner, tmp_path)
    settle(s)
    runner.handles[0].report(Prog(checkpoint_ts=800, resolved_ts=800))
    settle(s, 1)
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.STOPPED)
    settle(s)
    moved = {**seen, "address": "db-new:3306"}
    store.update_changefeed(
        store.get_changefeed("cf-1"),
        upstream_uri="mysql://root:topsecret@db-new:3306/",
        upstream=moved,
        sink_uri="file:///tmp/elsewhere?protocol=canal-json",
        config={"filter": {"rules": ["app.orders"]}},
    )
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.NORMAL)
    settle(s)
    spec = runner.handles[1].spec
    assert (spec.upstream_uri, spec.sink_uri) == (
        "mysql://root:topsecret@db-new:3306/",
        "file:///tmp/elsewhere?protocol=canal-json",
    )
    assert spec.config.filter.rules == ["app.orders"] and spec.start_ts == 800
    assert spec.upstream_identity == moved


def test_a_new_claim_resumes_after_the_last_committed_batch_offset(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    end = {"file": "mysql-bin.000002", "pos": 4711, "ts": 900}
    prog = Prog(checkpoint_ts=800, resolved_ts=800, rows_total=3)
    prog.checkpoint_end = end  # type: ignore[attr-defined]
    runner.handles[0].report(prog)
    settle(s, 1)
    row = store.get_changefeed("cf-1")
    assert row.stats["checkpoint_end"] == end
    store.update_changefeed(row, state=ChangefeedState.STOPPED)
    settle(s)
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.NORMAL)
    settle(s)
    h = runner.handles[1]
    assert h.spec.start_ts == 800
    # the new claim's folder holds the pipeline's checkpoint.json: the query starts at that offset
    saved = json.loads((Path(h.spec.checkpoint_dir) / "checkpoint.json").read_text())
    assert saved == {"checkpoint_ts": 800, "end": end, "rows_total": 3}


def running_at(
    store: MetaStore, runner: FakeRunner, tmp_path: Path, end: dict[str, Any]
) -> tuple[Scheduler, FakeHandle]:
    """cf-1 claimed and running on srv-a, its progress reported at ``end`` (checkpoint 800)."""
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    h = runner.handles[0]
    prog = Prog(checkpoint_ts=800, resolved_ts=800)
    prog.checkpoint_end = end  # type: ignore[attr-defined]
    h.report(prog)
    settle(s, 1)
    return s, h


def claimed_by_b(uri: str, tmp_path: Path) -> tuple[Scheduler, MetaStore, FakeHandle]:
    """Another server (srv-b, its own store) claims cf-1 after srv-a released it."""
    runner_b = FakeRunner()
    other = MetaStore.open(uri)
    b = make(other, runner_b, tmp_path, server_id="srv-b")
    settle(b)
    (hb,) = runner_b.handles
    return b, other, hb


def test_a_raised_chain_state_is_in_the_meta_database_before_the_sink_publishes_it(
    uri: str, store: MetaStore, tmp_path: Path
) -> None:
    """The batch writer's hook records the offset at once; a later tick with older progress keeps it;
    the next owner starts there; the old owner's hook then refuses, so its batch is never published."""
    s, h = running_at(store, FakeRunner(), tmp_path, {"file": "mysql-bin.000002", "pos": 4711, "ts": 800})
    raised = {"file": "mysql-bin.000002", "pos": 4711, "ts": 950}  # an idle batch: same position
    assert h.resolved is not None
    h.resolved(950, raised)
    row = store.get_changefeed("cf-1")
    assert (row.checkpoint_ts, row.stats["checkpoint_end"]) == (950, raised)
    settle(s, 2)  # ticks while the progress still says 800
    row = store.get_changefeed("cf-1")
    assert (row.checkpoint_ts, row.stats["checkpoint_end"]) == (950, raised)
    # The claim's own row, as its last write left it, is swapped without a read first.
    reads: list[Any] = []
    read = s.store.get_changefeed
    s.store.get_changefeed = lambda *a, **k: reads.append(a) or read(*a, **k)  # type: ignore[method-assign]
    raised = {"file": "mysql-bin.000002", "pos": 4711, "ts": 960}
    h.resolved(960, raised)
    assert reads == [] and store.get_changefeed("cf-1").stats["checkpoint_end"] == raised
    s.store.get_changefeed = read  # type: ignore[method-assign]

    s.shutdown()  # releases: another server claims it
    b, other, hb = claimed_by_b(uri, tmp_path)
    saved = json.loads((Path(hb.spec.checkpoint_dir) / "checkpoint.json").read_text())
    assert (saved["checkpoint_ts"], saved["end"]) == (960, raised)
    with pytest.raises(SparkCdcError) as err:
        h.resolved(960, raised)  # recorded already, says the old claim's row: the read fences it
    assert err.value.code == "CDC:ErrOwnerChanged"
    with pytest.raises(SparkCdcError) as err:
        h.resolved(990, {"file": "mysql-bin.000002", "pos": 4711, "ts": 990})
    assert err.value.code == "CDC:ErrOwnerChanged" and "epoch 1" in err.value.message
    assert store.get_changefeed("cf-1").stats["checkpoint_end"] == raised
    b.shutdown()
    other.close()


def test_a_tick_leaves_out_a_renewal_that_would_only_extend_a_fresh_lease(
    store: MetaStore, tmp_path: Path
) -> None:
    """An idle changefeed's marks record its checkpoint (and renew the lease) each second: the tick
    writes nothing then, until a value changes or a third of the lease is gone."""
    now = [1000.0]
    create(store)
    s = make(store, FakeRunner(), tmp_path, lease_seconds=30, clock=lambda: now[0])
    settle(s)
    (h,) = s.runner.handles  # type: ignore[attr-defined]
    end = {"file": "mysql-bin.000002", "pos": 4711, "ts": 800}
    prog = Prog(checkpoint_ts=800, resolved_ts=800)
    prog.checkpoint_end = end  # type: ignore[attr-defined]
    h.report(prog)
    settle(s, 1)
    assert h.resolved is not None
    for ts in (900, 1000):  # a mark each second: its record, then the tick's progress
        raised = {**end, "ts": ts}
        h.resolved(ts, raised)
        prog = Prog(checkpoint_ts=ts, resolved_ts=ts)
        prog.checkpoint_end = raised  # type: ignore[attr-defined]
        h.report(prog)
        version = store.get_changefeed("cf-1").version
        now[0] += 1
        s.tick()
        row = store.get_changefeed("cf-1")
        assert (row.version, row.checkpoint_ts, row.resolved_ts) == (version, ts, ts), "nothing new: no write"
    # a warning is written at once
    s.tasks[("default", "cf-1")].warning = "a transient error"
    s.tick()
    row = store.get_changefeed("cf-1")
    assert row.version == version + 1 and row.warning == "a transient error"
    # and a lease a third gone is renewed even when nothing changed
    version, expires = row.version, row.lease_expire_at
    now[0] += 30 / 3
    s.tick()
    row = store.get_changefeed("cf-1")
    assert row.version == version + 1 and row.lease_expire_at is not None and expires is not None
    assert row.lease_expire_at > expires
    s.shutdown()


def test_a_batch_being_written_is_recorded_and_the_next_claim_from_its_start_plans_it_again(
    uri: str, store: MetaStore, tmp_path: Path
) -> None:
    s, h = running_at(store, FakeRunner(), tmp_path, {"file": "mysql-bin.000002", "pos": 4711, "ts": 800})
    # A batch committed since the last renewal: the next one starts at its end, which the record
    # makes the meta database's offset as well.
    committed = {"file": "mysql-bin.000002", "pos": 5000, "ts": 840}
    planned = {"start": committed, "end": {"file": "mysql-bin.000002", "pos": 9000, "ts": 870}}
    assert h.planned is not None
    h.planned(planned)
    settle(s, 2)  # the ticks keep the record (the progress they report still says 4711)
    row = store.get_changefeed("cf-1")
    assert row.stats["planned"] == planned
    assert (row.stats["checkpoint_end"], row.checkpoint_ts) == (committed, 840)
    s.shutdown()
    b, other, hb = claimed_by_b(uri, tmp_path)
    claim = Path(hb.spec.checkpoint_dir)
    assert json.loads((claim / "start.json").read_text()) == committed
    assert json.loads((claim / "planned.json").read_text()) == planned
    b.shutdown()
    other.close()


def test_a_claim_starts_from_the_newest_record_an_earlier_claim_left(
    store: MetaStore, tmp_path: Path
) -> None:
    """A shared data dir keeps the older claim's checkpoint.json: newer than the meta database's offset
    (its owner died before the next renewal), it is where the next claim starts."""
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    h = runner.handles[0]
    meta_end = {"file": "mysql-bin.000002", "pos": 100, "ts": 800}
    prog = Prog(checkpoint_ts=800, resolved_ts=800, rows_total=2)
    prog.checkpoint_end = meta_end  # type: ignore[attr-defined]
    h.report(prog)
    settle(s, 1)
    newer_end = {"file": "mysql-bin.000003", "pos": 4, "ts": 870}
    epoch1 = Path(h.spec.checkpoint_dir)
    epoch1.mkdir(parents=True, exist_ok=True)  # the pipeline's folder (this runner writes nothing)
    (epoch1 / "checkpoint.json").write_text(
        json.dumps({"checkpoint_ts": 870, "end": newer_end, "rows_total": 5})
    )
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.STOPPED)
    settle(s)
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.NORMAL)
    settle(s)
    h2 = runner.handles[1]
    saved = json.loads((Path(h2.spec.checkpoint_dir) / "checkpoint.json").read_text())
    assert saved == {"checkpoint_ts": 870, "end": newer_end, "rows_total": 5}
    assert json.loads((Path(h2.spec.checkpoint_dir) / "start.json").read_text()) == newer_end
    assert not epoch1.exists(), "the older claim's folder stays after its record was read"


def test_records_of_another_upstream_refuse_the_claim_naming_both(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    h = runner.handles[0]
    prog = Prog(checkpoint_ts=800, resolved_ts=800)
    prog.checkpoint_end = {"file": "mysql-bin.000002", "pos": 100, "ts": 800}  # type: ignore[attr-defined]
    h.report(prog)
    settle(s, 1)
    Path(h.spec.checkpoint_dir).mkdir(parents=True, exist_ok=True)
    (Path(h.spec.checkpoint_dir) / "checkpoint.json").write_text(
        json.dumps({"checkpoint_ts": 5, "end": {"file": "other-bin.000001", "pos": 4, "ts": 5}})
    )
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.STOPPED)
    settle(s)
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.NORMAL)
    settle(s)
    row = store.get_changefeed("cf-1")
    assert row.state == ChangefeedState.FAILED and row.error["code"] == "CDC:ErrResumeEvidenceMismatch"
    assert "mysql-bin.000002:100" in row.error["message"] and "other-bin.000001:4" in row.error["message"]
    assert len(runner.handles) == 1


def test_transient_error_shows_a_warning_and_retries_with_backoff(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path, backoff_base=0.2)
    settle(s)
    runner.handles[0].error = SinkUnavailable("kafka at 127.0.0.1:1 is down; password=topsecret")
    settle(s, 2)
    row = store.get_changefeed("cf-1")
    assert row.state == ChangefeedState.NORMAL and row.owner == "srv-a"
    assert row.warning is not None and "CDC:ErrSinkUnavailable" in row.warning
    assert "topsecret" not in row.warning
    assert runner.handles[0].stopped and len(runner.handles) == 1  # backoff: not restarted yet
    time.sleep(0.25)
    settle(s)
    assert len(runner.handles) == 2
    runner.handles[1].report(Prog(checkpoint_ts=900, resolved_ts=900))
    settle(s, 1)
    row = store.get_changefeed("cf-1")
    assert row.warning is None and row.checkpoint_ts == 900


def test_permanent_error_fails_one_changefeed_and_the_others_keep_running(
    store: MetaStore, tmp_path: Path
) -> None:
    runner = FakeRunner()
    runner.fail_with["bad"] = SinkError("the sink refused user 'u' with password topsecret")
    create(store, "good")
    create(store, "bad")
    s = make(store, runner, tmp_path)
    settle(s)
    bad = store.get_changefeed("bad")
    assert bad.state == ChangefeedState.FAILED and bad.owner is None
    assert bad.error is not None and bad.error["code"] == "CDC:ErrSinkFailed"
    assert "topsecret" not in bad.error["message"] and "refused user" in bad.error["message"]
    good = store.get_changefeed("good")
    assert good.state == ChangefeedState.NORMAL and good.owner == "srv-a"
    assert [h.spec.changefeed_id for h in runner.handles] == ["good"] and runner.handles[0].active


def test_a_runner_that_raises_outside_sparkcdc_errors_is_retried(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path, backoff_base=5)
    settle(s)

    def boom() -> bool:
        raise RuntimeError("py4j went away")

    runner.handles[0].is_active = boom  # type: ignore[method-assign]
    settle(s, 2)
    row = store.get_changefeed("cf-1")
    assert row.state == ChangefeedState.NORMAL and "py4j went away" in (row.warning or "")


def test_errors_without_progress_for_too_long_fail_the_changefeed(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    runner.fail_with["cf-1"] = SinkUnavailable("still down")
    create(store)
    s = make(store, runner, tmp_path, error_stuck_seconds=0)
    settle(s)
    row = store.get_changefeed("cf-1")
    assert row.state == ChangefeedState.FAILED and "still down" in row.error["message"]  # type: ignore[index]


def test_target_reached_finishes_the_changefeed(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store, "a", target_ts=1000)
    create(store, "b")
    s = make(store, runner, tmp_path)
    settle(s)
    (ha,) = runner.of("a")
    ha.report(Prog(checkpoint_ts=1000, resolved_ts=1000))
    (hb,) = runner.of("b")
    hb.done = True
    settle(s)
    for cf_id, h in (("a", ha), ("b", hb)):
        row = store.get_changefeed(cf_id)
        assert row.state == ChangefeedState.FINISHED and row.owner is None, cf_id
        assert h.stopped
    assert store.get_changefeed("a").checkpoint_ts == 1000


def test_remove_stops_releases_and_deletes_local_state(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    ckpt = Path(runner.handles[0].spec.checkpoint_dir)
    ckpt.mkdir(parents=True)
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.REMOVED)
    settle(s)
    (row,) = store.list_changefeeds(include_removed=True)
    assert row.state == ChangefeedState.REMOVED and row.owner is None
    assert runner.handles[0].stopped and not ckpt.exists()


def test_a_server_that_lost_its_lease_stops_without_writing(
    uri: str, store: MetaStore, tmp_path: Path
) -> None:
    runner_a, runner_b = FakeRunner(), FakeRunner()
    create(store)
    a = make(store, runner_a, tmp_path, lease_seconds=0.3)
    settle(a)
    time.sleep(0.4)  # server a stalls past its lease
    other = MetaStore.open(uri)
    b = make(other, runner_b, tmp_path / "b", server_id="srv-b", lease_seconds=5)
    settle(b)
    assert store.get_changefeed("cf-1").owner == "srv-b"
    a.tick()
    assert a.tasks == {}
    deadline = time.monotonic() + 5
    while not runner_a.handles[0].stopped:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    row = store.get_changefeed("cf-1")
    assert row.owner == "srv-b" and row.epoch == 2
    assert runner_b.handles[0].spec.checkpoint_dir.endswith("epoch-2")
    other.close()


def test_meta_database_loss_fences_running_changefeeds(uri: str, store: MetaStore, tmp_path: Path) -> None:
    now = [1000.0]
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path, clock=lambda: now[0])
    settle(s)
    db = Path(uri.removeprefix("sqlite:///"))
    os.rename(db, db.with_suffix(".moved"))  # a real fault: the meta database is gone
    s.tick()
    assert s.tasks and not runner.handles[0].stopped  # within the lease: keep running
    now[0] += 10
    s.tick()
    assert s.tasks == {} and s.last_tick_error is not None
    deadline = time.monotonic() + 5
    while not runner.handles[0].stopped:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_shutdown_releases_leases_for_immediate_takeover(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    runner.handles[0].report(Prog(checkpoint_ts=4242, resolved_ts=4242))
    s.shutdown()
    row = store.get_changefeed("cf-1")
    assert row.owner is None and row.state == ChangefeedState.NORMAL and row.checkpoint_ts == 4242
    assert runner.handles[0].stopped and runner.shut
    assert store.list_servers() == []
    assert [c.id for c in store.claimable_changefeeds()] == ["cf-1"]


def test_background_thread_claims_without_manual_ticks(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    s = make(store, runner, tmp_path, tick_seconds=0.05)
    s.start()
    try:
        create(store)
        deadline = time.monotonic() + 10
        while not runner.handles:
            assert time.monotonic() < deadline, "not claimed"
            time.sleep(0.02)
        assert threading.active_count() >= 2
    finally:
        s.shutdown()
    assert store.get_changefeed("cf-1").owner is None


def test_max_changefeeds_limits_claims(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store, "a")
    create(store, "b")
    s = make(store, runner, tmp_path, max_changefeeds=1)
    settle(s)
    assert len(s.tasks) == 1 and len(store.claimable_changefeeds()) == 1


def test_two_servers_spread_changefeeds_but_never_starve_one(
    uri: str, store: MetaStore, tmp_path: Path
) -> None:
    now = [0.0]
    other = MetaStore.open(uri)
    ra, rb = FakeRunner(), FakeRunner()
    a = make(store, ra, tmp_path / "a", clock=lambda: now[0])
    b = make(other, rb, tmp_path / "b", server_id="srv-b", clock=lambda: now[0])
    b.tick()  # b is alive (heartbeat) with nothing to run
    create(store, "first")
    settle(a)
    create(store, "second")
    settle(a)  # a already runs one and b runs none: a leaves "second" to b for a while
    assert [h.spec.changefeed_id for h in ra.handles] == ["first"]
    settle(b)
    assert [h.spec.changefeed_id for h in rb.handles] == ["second"]
    # a live server that never claims (API only) delays a new changefeed by the grace period only
    store.heartbeat_server("srv-api-only", "127.0.0.1:3", "0.1")
    create(store, "third")
    settle(a)
    assert len(ra.handles) == 1
    now[0] += a.claim_grace + 0.1
    settle(a)
    assert [h.spec.changefeed_id for h in ra.handles] == ["first", "third"]
    other.close()


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_error_is_one_coded_line_traceback_only_with_debug(
    store: MetaStore, tmp_path: Path, caplog: pytest.LogCaptureFixture, debug: bool
) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path, debug=debug)
    settle(s)
    (handle,) = runner.of("cf-1")

    def broken() -> SparkCdcError | None:
        raise RuntimeError("boom at mysql://root:topsecret@127.0.0.1:3306/\nsecond line")

    handle.exception = broken  # type: ignore[method-assign]
    with caplog.at_level("WARNING", logger="sparkcdc.server.scheduler"):
        s.tick()
    records = [r for r in caplog.records if "boom" in r.getMessage()]
    assert records, caplog.text
    for rec in records:  # the fault, then the retry it leads to
        msg = rec.getMessage()
        assert "[CDC:ErrUnknown] RuntimeError: boom at mysql://root:xxxxx@" in msg
        assert "\n" not in msg and "topsecret" not in msg
    assert (records[0].exc_info is not None) is debug
    s.shutdown()


def test_the_spark_runner_hands_both_durability_hooks_to_the_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scheduler's records of a raised chain state and of a batch being written reach the pipeline."""
    import sparkcdc.pipeline.changefeed as pipeline
    from sparkcdc.server.runner import SparkChangefeedRunner

    seen: dict[str, Any] = {}

    def fake_start(spark: Any, spec: Any, on_progress: Any, **hooks: Any) -> str:
        seen.update(hooks)
        return "handle"

    monkeypatch.setattr(pipeline, "start_changefeed", fake_start)
    runner = SparkChangefeedRunner(relay_max_bytes=0)
    monkeypatch.setattr(runner, "spark", lambda: None)

    def resolved(ts: int, end: dict[str, Any]) -> None:
        return None

    def planned(record: dict[str, Any]) -> None:
        return None

    spec = ChangefeedSpec("cf-1", "mysql://u@h:1/", "file:///tmp/x?protocol=csv")
    assert runner.start(spec, lambda p: None, resolved, planned) == "handle"
    assert seen == {"on_resolved": resolved, "on_planned": planned}


def test_the_spark_runner_gives_a_changefeed_its_upstream_s_relay_until_it_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a local master each changefeed gets the relay of its upstream; the last stop ends it.
    (No upstream answers on the port: the relay keeps trying to connect, which is all this needs.)"""
    import sparkcdc.pipeline.changefeed as pipeline
    from sparkcdc.server.runner import SparkChangefeedRunner

    specs: list[ChangefeedSpec] = []
    stopped: list[str] = []

    class Handle:
        def __init__(self, cf: str) -> None:
            self.cf = cf

        def stop(self) -> None:
            stopped.append(self.cf)

    def fake_start(spark: Any, spec: ChangefeedSpec, on_progress: Any, **hooks: Any) -> Handle:
        specs.append(spec)
        return Handle(spec.changefeed_id)

    monkeypatch.setattr(pipeline, "start_changefeed", fake_start)
    runner = SparkChangefeedRunner("local[2]")
    monkeypatch.setattr(runner, "spark", lambda: None)
    upstream = "mysql://u@127.0.0.1:1/"
    try:
        a = runner.start(ChangefeedSpec("a", upstream, "file:///tmp/x?protocol=csv"), lambda p: None)
        b = runner.start(ChangefeedSpec("b", upstream, "file:///tmp/y?protocol=csv"), lambda p: None)
        assert specs[0].relay_dir and specs[0].relay_dir == specs[1].relay_dir
        assert runner.relays is not None and runner.relays.users(upstream) == 2
        a.stop()
        a.stop()  # a second stop releases nothing more
        assert stopped == ["a", "a"] and runner.relays.users(upstream) == 1
        b.stop()
        assert runner.relays.users(upstream) == 0
    finally:
        runner.shutdown()
    assert SparkChangefeedRunner("spark://127.0.0.1:7077").relays is None  # executors elsewhere
