"""Where a snapshot's state lives and how a finished one is recognised (data dir or meta database)."""

from __future__ import annotations

import json
from pathlib import Path

from sparkcdc.meta import MetaStore, NewChangefeed
from sparkcdc.pipeline.snapshot import FileRangeStore, InitialSnapshot, MetaRangeStore


def _job(snapshot_dir: Path, store: object = None) -> InitialSnapshot:
    return InitialSnapshot(
        None,
        changefeed_id="cf",
        upstream_uri="mysql://root:@127.0.0.1:3306/",
        checkpoint_dir=str(snapshot_dir.parent / "epoch-7"),
        snapshot_dir=str(snapshot_dir),
        history_path="",
        handover=None,  # type: ignore[arg-type]
        filter_rules=["*.*"],
        store=store,  # type: ignore[arg-type]
    )


def test_the_snapshot_lives_in_the_folder_given_not_in_the_claims(tmp_path: Path) -> None:
    snap = tmp_path / "cf" / "snapshot"
    job = _job(snap)
    assert job.state.location == str(snap) and job.spool_dir == str(snap / "rows")
    assert isinstance(job.store, FileRangeStore) and job.store.directory == str(snap / "ranges")
    assert not job.is_done()
    snap.mkdir(parents=True)
    (snap / "done.json").write_text(json.dumps({"rows_written": 4}))
    assert job.is_done() and job.done_report() == {"rows_written": 4}


def test_without_a_folder_the_snapshot_is_under_the_checkpoint_dir(tmp_path: Path) -> None:
    job = InitialSnapshot(
        None,
        changefeed_id="cf",
        upstream_uri="mysql://root:@127.0.0.1:3306/",
        checkpoint_dir=str(tmp_path),
        history_path="",
        handover=None,  # type: ignore[arg-type]
        filter_rules=["*.*"],
    )
    assert job.state.location == str(tmp_path / "snapshot")


def test_a_snapshot_recorded_done_in_the_meta_database_counts_without_done_json(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'meta.db'}"
    meta = MetaStore.open(uri)
    cf = meta.create_changefeed(NewChangefeed("cf", "mysql://u@h:1/", "file:///x?protocol=csv", {}))
    store = MetaRangeStore(uri, "cf", "default", cf.uid)
    job = _job(tmp_path / "elsewhere" / "snapshot", store)
    assert not job.is_done()
    store.save_done({"rows_written": 9})
    assert job.is_done() and job.done_report() == {"rows_written": 9}
    # a record of another identity (a removed changefeed with this id) does not count
    assert not _job(tmp_path / "x" / "snapshot", MetaRangeStore(uri, "cf", "default", "other")).is_done()
    meta.close()
