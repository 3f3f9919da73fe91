"""A changefeed's state in the server's data dir: its own across claims, never another changefeed's.

The runner is the test double of ``test_scheduler``; the meta store is a real SQLite one. The
Spark pipeline's side (the snapshot continuing its ranges) is ``tests/e2e/test_snapshot_lifecycle.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.meta import ChangefeedState, MetaStore
from sparkcdc.pipeline.state import IDENTITY_FILE, STATE_MISMATCH
from tests.unit.server.test_scheduler import FakeRunner, Prog, create, make, settle

INITIAL = {"filter": {"rules": ["app.*"]}, "snapshot": {"mode": "initial"}}
HANDOVER = {"file": "mysql-bin.000001", "pos": 1000, "ts": 700}


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MetaStore]:
    s = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    yield s
    s.close()


def _cf_dir(tmp_path: Path, cf_id: str = "cf-1") -> Path:
    return tmp_path / "data" / "changefeeds" / "default" / cf_id


def _pause_resume(store: MetaStore, s: object) -> None:
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.STOPPED)
    settle(s)  # type: ignore[arg-type]
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.NORMAL)
    settle(s)  # type: ignore[arg-type]


def test_the_snapshot_folder_is_the_changefeeds_and_outlives_its_claims(
    store: MetaStore, tmp_path: Path
) -> None:
    runner = FakeRunner()
    create(store, config=INITIAL)
    s = make(store, runner, tmp_path)
    settle(s)
    h1 = runner.handles[0]
    snap = _cf_dir(tmp_path) / "snapshot"
    assert Path(h1.spec.snapshot_dir) == snap and h1.spec.changefeed_uid == store.get_changefeed("cf-1").uid
    ident = json.loads((_cf_dir(tmp_path) / IDENTITY_FILE).read_text())
    assert ident == {"changefeed_uid": store.get_changefeed("cf-1").uid, "meta_uid": store.identity()}
    # The snapshot was planned at HANDOVER; the claim is paused before it finished.
    snap.mkdir(parents=True)
    (snap / "plan.json").write_text(json.dumps({"handover": HANDOVER}))
    (snap / "ranges").mkdir()
    (snap / "ranges" / "1.json").write_text("{}")
    h1.report(Prog(checkpoint_ts=700, resolved_ts=700))
    _pause_resume(store, s)
    h2 = runner.handles[1]
    claim2 = Path(h2.spec.checkpoint_dir)
    assert claim2.name == "epoch-2" and not Path(h1.spec.checkpoint_dir).exists()
    # the snapshot's state is kept, and the new claim continues it at the handover point it was planned for
    assert (snap / "plan.json").exists() and (snap / "ranges" / "1.json").exists()
    assert json.loads((claim2 / "start.json").read_text()) == HANDOVER
    assert not (claim2 / "checkpoint.json").exists()


def test_after_the_snapshot_a_claim_resumes_at_the_committed_offset(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store, config=INITIAL)
    s = make(store, runner, tmp_path)
    settle(s)
    snap = _cf_dir(tmp_path) / "snapshot"
    snap.mkdir(parents=True)
    (snap / "done.json").write_text(json.dumps({"handover": HANDOVER, "rows_written": 5}))
    end = {"file": "mysql-bin.000002", "pos": 4711, "ts": 900}
    prog = Prog(checkpoint_ts=900, resolved_ts=900, rows_total=5)
    prog.checkpoint_end = end  # type: ignore[attr-defined]
    runner.handles[0].report(prog)
    settle(s, 1)
    _pause_resume(store, s)
    claim = Path(runner.handles[1].spec.checkpoint_dir)
    assert json.loads((claim / "start.json").read_text()) == end
    assert json.loads((claim / "checkpoint.json").read_text()) == {
        "checkpoint_ts": 900,
        "end": end,
        "rows_total": 5,
    }


def test_a_snapshot_recorded_done_in_the_meta_database_is_not_copied_by_a_server_without_its_files(
    store: MetaStore, tmp_path: Path
) -> None:
    # Another server (another data dir) finished the snapshot; no batch was reported since.
    create(store, config=INITIAL)
    row = store.get_changefeed("cf-1")
    store.save_snapshot_report("cf-1", "default", row.uid, {"handover": HANDOVER, "rows_written": 5})
    runner = FakeRunner()
    s = make(store, runner, tmp_path)
    settle(s)
    claim = Path(runner.handles[0].spec.checkpoint_dir)
    assert json.loads((claim / "start.json").read_text()) == HANDOVER
    assert json.loads((claim / "checkpoint.json").read_text())["end"] == HANDOVER


def test_state_of_another_meta_databases_changefeed_is_refused_in_one_coded_line(
    store: MetaStore, tmp_path: Path
) -> None:
    folder = _cf_dir(tmp_path)
    (folder / "epoch-1").mkdir(parents=True)
    (folder / "epoch-1" / "checkpoint.json").write_text('{"checkpoint_ts": 5}')
    (folder / IDENTITY_FILE).write_text(json.dumps({"changefeed_uid": "uid-old", "meta_uid": "meta-old"}))
    create(store)
    runner = FakeRunner()
    s = make(store, runner, tmp_path)
    settle(s)
    row = store.get_changefeed("cf-1")
    assert runner.handles == [] and row.state == ChangefeedState.FAILED
    assert row.error is not None and row.error["code"] == STATE_MISMATCH
    msg = row.error["message"]
    assert "\n" not in msg
    for named in ("uid-old", "meta-old", row.uid, store.identity()):
        assert named in msg
    # nothing of the other changefeed's state was touched
    assert (folder / "epoch-1" / "checkpoint.json").exists()


def test_a_folder_left_by_a_removed_changefeed_is_moved_aside_and_the_new_one_starts_afresh(
    store: MetaStore, tmp_path: Path
) -> None:
    create(store, config=INITIAL)
    old = store.get_changefeed("cf-1")
    folder = _cf_dir(tmp_path)
    (folder / "snapshot").mkdir(parents=True)
    (folder / "snapshot" / "done.json").write_text(json.dumps({"handover": HANDOVER}))
    (folder / IDENTITY_FILE).write_text(json.dumps({"changefeed_uid": old.uid, "meta_uid": store.identity()}))
    # removed while no server ran it (nobody cleaned its folder), then created again with the same id
    store.update_changefeed(old, state=ChangefeedState.REMOVED)
    create(store, config=INITIAL)
    runner = FakeRunner()
    s = make(store, runner, tmp_path)
    settle(s)
    (h,) = runner.handles
    new_uid = store.get_changefeed("cf-1").uid
    assert new_uid != old.uid and h.spec.changefeed_uid == new_uid
    assert not (folder / "snapshot").exists() and not (Path(h.spec.checkpoint_dir) / "start.json").exists()
    assert json.loads((folder / IDENTITY_FILE).read_text())["changefeed_uid"] == new_uid
    (aside,) = [p for p in folder.parent.iterdir() if p.name.startswith("cf-1.replaced-")]
    assert (aside / "snapshot" / "done.json").exists()


def test_a_folder_without_an_identity_is_moved_aside(store: MetaStore, tmp_path: Path) -> None:
    # e.g. an older server's claim folder, numbered like this meta database's first claim
    folder = _cf_dir(tmp_path)
    (folder / "epoch-1").mkdir(parents=True)
    (folder / "epoch-1" / "start.json").write_text(json.dumps({"file": "binlog.000001", "pos": 1687}))
    create(store)
    runner = FakeRunner()
    s = make(store, runner, tmp_path)
    settle(s)
    (h,) = runner.handles
    assert h.spec.checkpoint_dir.endswith("epoch-1")
    assert not (Path(h.spec.checkpoint_dir) / "start.json").exists()
    assert [p.name.startswith("cf-1.replaced-") for p in folder.parent.iterdir() if p != folder] == [True]


def test_an_upstream_is_the_same_server_by_uuid_or_by_server_id_and_binlog_path() -> None:
    from sparkcdc.pipeline.state import UpstreamIdentity

    maria = UpstreamIdentity(None, 1, "/var/lib/mysql/mysql-bin", "a:3306")
    assert maria.same_server(UpstreamIdentity(None, 1, "/var/lib/mysql/mysql-bin", "b:3306"))  # it moved
    assert not maria.same_server(UpstreamIdentity(None, 1, "/srv/other/mysql-bin", "a:3306"))
    assert not maria.same_server(UpstreamIdentity(None, 2, "/var/lib/mysql/mysql-bin", "a:3306"))
    mysql = UpstreamIdentity("u-1", 1, "/var/lib/mysql/binlog")
    assert mysql.same_server(UpstreamIdentity("u-1", 7, "/x/binlog")) and not mysql.same_server(
        UpstreamIdentity("u-2", 1, "/var/lib/mysql/binlog")
    )
    assert UpstreamIdentity.from_json(maria.to_json()) == maria


def test_run_records_its_upstream_and_refuses_another(tmp_path: Path) -> None:
    from sparkcdc.errors import ConfigError
    from sparkcdc.pipeline.state import StateDir, UpstreamIdentity, check_upstream_identity

    folder = StateDir.parse(str(tmp_path / "cf"))
    first = UpstreamIdentity(None, 1, "/a/mysql-bin", "127.0.0.1:1")
    check_upstream_identity(folder, "cf", first)
    check_upstream_identity(folder, "cf", first)  # the same upstream again
    other = UpstreamIdentity(None, 1, "/b/mysql-bin", "127.0.0.1:2")
    with pytest.raises(ConfigError) as err:
        check_upstream_identity(folder, "cf", other)
    assert err.value.code == STATE_MISMATCH and "/a/mysql-bin" in err.value.message
    assert "/b/mysql-bin" in err.value.message and "\n" not in err.value.message


def test_a_resume_with_a_new_checkpoint_starts_there_and_does_not_copy_the_snapshot_again(
    store: MetaStore, tmp_path: Path
) -> None:
    from sparkcdc.server.service import ChangefeedService

    runner = FakeRunner()
    create(store, config=INITIAL)
    s = make(store, runner, tmp_path)
    settle(s)
    snap = _cf_dir(tmp_path) / "snapshot"
    snap.mkdir(parents=True)
    (snap / "done.json").write_text(json.dumps({"handover": HANDOVER}))
    prog = Prog(checkpoint_ts=900, resolved_ts=900)
    prog.checkpoint_end = {"file": "mysql-bin.000002", "pos": 4711, "ts": 900}  # type: ignore[attr-defined]
    runner.handles[0].report(prog)
    settle(s, 1)
    service = ChangefeedService(store)
    service.pause("cf-1", "default")
    settle(s)
    service.resume("cf-1", "default", overwrite_checkpoint_ts=1500)
    settle(s)
    h = runner.handles[1]
    assert h.spec.start_ts == 1500 and "checkpoint_end" not in store.get_changefeed("cf-1").stats
    claim = Path(h.spec.checkpoint_dir)
    assert not (claim / "start.json").exists() and not (claim / "checkpoint.json").exists()
