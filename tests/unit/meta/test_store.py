"""MetaStore on SQLite: migrations, CAS updates, leases, range progress, schema history, servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import event, select

from sparkcdc.errors import ChangefeedExists, ChangefeedNotFound, ConfigError, ConflictError, SchemaError
from sparkcdc.meta import (
    ChangefeedState,
    MetaStore,
    NewChangefeed,
    RangeProgress,
    RangeStage,
    SchemaVersion,
)
from sparkcdc.meta.migrations import MIGRATIONS, latest_version, migrate
from sparkcdc.meta.tables import schema_migrations


@pytest.fixture()
def uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'meta.db'}"


@pytest.fixture()
def store(uri: str) -> MetaStore:
    s = MetaStore.open(uri)
    yield s
    s.close()


def new(cf_id: str = "cf-1", **kw: object) -> NewChangefeed:
    base = dict(
        id=cf_id,
        upstream_uri="mysql://root:pw@127.0.0.1:3306/",
        sink_uri="file:///tmp/x?protocol=csv",
        config={"case-sensitive": False},
        start_ts=100,
    )
    base.update(kw)
    return NewChangefeed(**base)  # type: ignore[arg-type]


# ---------------------------------------------------------------- migrations


def test_migrations_are_recorded_once_and_reopening_applies_nothing(uri: str) -> None:
    s1 = MetaStore.open(uri)
    assert migrate(s1.engine) == []
    s2 = MetaStore.open(uri)
    with s2.engine.connect() as conn:
        versions = list(conn.execute(select(schema_migrations.c.version)).scalars())
    assert versions == [m[0] for m in MIGRATIONS]
    assert latest_version() == versions[-1]
    s1.close()
    s2.close()


def test_concurrent_opens_of_a_fresh_database_migrate_exactly_once(uri: str) -> None:
    errors: list[BaseException] = []
    stores: list[MetaStore] = []

    def open_one() -> None:
        try:
            stores.append(MetaStore.open(uri))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with stores[0].engine.connect() as conn:
        versions = list(conn.execute(select(schema_migrations.c.version)).scalars())
    assert versions == [m[0] for m in MIGRATIONS]
    for s in stores:
        s.close()


def test_a_database_newer_than_the_code_is_refused(store: MetaStore, uri: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(schema_migrations.insert().values(version=999, name="future", applied_at=0.0))
    with pytest.raises(ConfigError, match="newer than this sparkcdc"):
        MetaStore.open(uri)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("mongodb://h/db", "not supported"),
        ("sqlite:///:memory:", "no file path"),
        ("sqlite://", "no file path"),
    ],
)
def test_bad_meta_uris_are_refused_with_the_fix(bad: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        MetaStore.open(bad)


def test_meta_uri_password_is_redacted_in_errors() -> None:
    with pytest.raises(ConfigError) as ei:
        MetaStore.open("mongodb://u:hunter22@h/db")
    assert "hunter22" not in str(ei.value)


def test_sqlite_uses_wal(store: MetaStore) -> None:
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_sqlite_connections_are_kept_between_transactions(store: MetaStore) -> None:
    opened: list[int] = []
    event.listen(store.engine, "connect", lambda *_: opened.append(1))
    store.create_changefeed(new())
    for _ in range(20):
        store.get_changefeed("cf-1")
    assert len(opened) <= 1, "one connection serves transaction after transaction"


def test_a_replaced_sqlite_file_is_read_as_it_now_is(store: MetaStore, tmp_path: Path, uri: str) -> None:
    # A pooled connection holds the file it opened; the one at the path now is what counts.
    other = MetaStore.open(f"sqlite:///{tmp_path / 'other.db'}")
    other.create_changefeed(new("cf-other"))
    other.close()
    store.create_changefeed(new("cf-1"))
    assert [cf.id for cf in store.list_changefeeds()] == ["cf-1"]
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp_path / 'meta.db'}{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "other.db", tmp_path / "meta.db.new")
    os.replace(tmp_path / "meta.db.new", tmp_path / "meta.db")
    assert [cf.id for cf in store.list_changefeeds()] == ["cf-other"]


def test_a_forked_child_opens_its_own_sqlite_connection(store: MetaStore) -> None:
    store.create_changefeed(new())
    store.get_changefeed("cf-1")  # the pool keeps this process's connection
    pid = os.fork()
    if pid == 0:  # the child: its reads use a connection of its own, the parent's stays untouched
        code = 1
        try:
            code = 0 if store.get_changefeed("cf-1").id == "cf-1" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.update_changefeed(store.get_changefeed("cf-1"), state=ChangefeedState.STOPPED)
    assert store.get_changefeed("cf-1").state == ChangefeedState.STOPPED


# ---------------------------------------------------------------- changefeeds


def test_create_get_list(store: MetaStore) -> None:
    cf = store.create_changefeed(new("a", subscriber_name="orders"))
    assert cf.state == ChangefeedState.NORMAL
    assert (cf.checkpoint_ts, cf.resolved_ts, cf.version, cf.epoch) == (100, 100, 1, 0)
    assert cf.owner is None and cf.subscriber_name == "orders"
    store.create_changefeed(new("b", namespace="other"))
    assert store.get_changefeed("a").config == {"case-sensitive": False}
    assert [c.id for c in store.list_changefeeds()] == ["a", "b"]
    assert [c.id for c in store.list_changefeeds("other")] == ["b"]


def test_a_tick_reads_the_rows_of_its_changefeeds_at_once(store: MetaStore) -> None:
    store.create_changefeed(new("a"))
    store.create_changefeed(new("a", namespace="other"))
    b = store.create_changefeed(new("b"))
    store.update_changefeed(b, state=ChangefeedState.REMOVED)
    rows = store.changefeeds_by_key([("default", "a"), ("default", "b"), ("default", "gone")])
    assert sorted(rows) == [("default", "a"), ("default", "b")], "the other namespace's a is not asked for"
    assert rows[("default", "b")].state == ChangefeedState.REMOVED, "a tombstone is read too"
    assert store.changefeeds_by_key([]) == {}
    for i in range(600):  # more ids than one query binds
        store.create_changefeed(new(f"many-{i}"))
    assert len(store.changefeeds_by_key(("default", f"many-{i}") for i in range(600))) == 600


def test_duplicate_id_and_subscriber_are_refused(store: MetaStore) -> None:
    store.create_changefeed(new("a", subscriber_name="orders"))
    with pytest.raises(ChangefeedExists, match="already exists"):
        store.create_changefeed(new("a"))
    with pytest.raises(ChangefeedExists, match="subscriber 'orders'"):
        store.create_changefeed(new("b", subscriber_name="orders"))
    # the same id in another namespace is a different changefeed
    store.create_changefeed(new("a", namespace="ns2"))


def test_unknown_changefeed(store: MetaStore) -> None:
    with pytest.raises(ChangefeedNotFound, match="'nope'"):
        store.get_changefeed("nope")


def test_cas_update_with_a_stale_version_conflicts(store: MetaStore) -> None:
    cf = store.create_changefeed(new())
    moved = store.update_changefeed(cf, state=ChangefeedState.STOPPED)
    assert moved.version == cf.version + 1 and moved.state == ChangefeedState.STOPPED
    with pytest.raises(ConflictError, match="expected version 1"):
        store.update_changefeed(cf, sink_uri="file:///other")
    assert store.get_changefeed(cf.id).sink_uri == cf.sink_uri


def test_checkpoint_never_goes_backwards_unless_overwritten(store: MetaStore) -> None:
    cf = store.create_changefeed(new())
    cf = store.update_changefeed(cf, checkpoint_ts=500, resolved_ts=600)
    cf = store.update_changefeed(cf, checkpoint_ts=300, resolved_ts=200)
    assert (cf.checkpoint_ts, cf.resolved_ts) == (500, 600)
    cf = store.update_changefeed(cf, overwrite_checkpoint=True, checkpoint_ts=150, resolved_ts=150)
    assert (cf.checkpoint_ts, cf.resolved_ts) == (150, 150)


def test_unknown_columns_cannot_be_updated(store: MetaStore) -> None:
    cf = store.create_changefeed(new())
    with pytest.raises(ValueError, match="version"):
        store.update_changefeed(cf, version=7)


def test_removed_tombstone_is_hidden_and_its_id_reusable_once_released(store: MetaStore) -> None:
    cf = store.create_changefeed(new("a", subscriber_name="s"))
    cf = store.claim_changefeed(cf, "srv-1", 30)
    cf = store.update_changefeed(cf, state=ChangefeedState.REMOVED, subscriber_name=None)
    with pytest.raises(ChangefeedNotFound):
        store.get_changefeed("a")
    assert store.list_changefeeds() == []
    assert [c.state for c in store.list_changefeeds(include_removed=True)] == [ChangefeedState.REMOVED]
    with pytest.raises(ChangefeedExists, match="still being removed"):
        store.create_changefeed(new("a"))
    store.release_changefeed(cf, "srv-1")
    again = store.create_changefeed(new("a", subscriber_name="s"))
    assert again.state == ChangefeedState.NORMAL and again.version == 1


def test_delete_removes_progress(store: MetaStore) -> None:
    cf = store.create_changefeed(new())
    store.save_range_progress(RangeProgress(cf.id, "db", "t", 1))
    store.delete_changefeed(cf)
    assert store.get_range_progress(cf.id) == []
    with pytest.raises(ChangefeedNotFound):
        store.delete_changefeed(cf)


# ---------------------------------------------------------------- leases


def test_claim_race_between_two_stores_has_one_winner(uri: str) -> None:
    a, b = MetaStore.open(uri), MetaStore.open(uri)
    a.create_changefeed(new())
    seen_a, seen_b = a.claimable_changefeeds(), b.claimable_changefeeds()
    assert [c.id for c in seen_a] == [c.id for c in seen_b] == ["cf-1"]
    results: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def claim(name: str, store: MetaStore, row: object) -> None:
        barrier.wait()
        try:
            results[name] = store.claim_changefeed(row, name, 30)  # type: ignore[arg-type]
        except ConflictError as exc:
            results[name] = exc

    ts = [
        threading.Thread(target=claim, args=("srv-a", a, seen_a[0])),
        threading.Thread(target=claim, args=("srv-b", b, seen_b[0])),
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    winners = [n for n, r in results.items() if not isinstance(r, ConflictError)]
    assert len(winners) == 1
    row = a.get_changefeed("cf-1")
    assert row.owner == winners[0] and row.epoch == 1
    assert a.claimable_changefeeds() == []
    a.close()
    b.close()


def test_expired_lease_is_claimable_and_the_old_owner_is_fenced(uri: str) -> None:
    a, b = MetaStore.open(uri), MetaStore.open(uri)
    cf = a.create_changefeed(new())
    mine = a.claim_changefeed(cf, "srv-a", 0.3)
    assert b.claimable_changefeeds() == []
    with pytest.raises(ConflictError):
        b.claim_changefeed(mine, "srv-b", 10)  # the lease is still valid
    deadline = time.monotonic() + 5
    while not b.claimable_changefeeds():
        assert time.monotonic() < deadline, "lease never expired"
        time.sleep(0.05)
    theirs = b.claim_changefeed(b.claimable_changefeeds()[0], "srv-b", 10)
    assert theirs.owner == "srv-b" and theirs.epoch == mine.epoch + 1
    with pytest.raises(ConflictError):
        a.renew_lease(mine, "srv-a", 10, checkpoint_ts=999)
    assert a.get_changefeed(cf.id).checkpoint_ts == 100
    a.close()
    b.close()


def test_renew_records_progress_and_only_the_owner_may_renew(store: MetaStore) -> None:
    cf = store.claim_changefeed(store.create_changefeed(new()), "srv-a", 10)
    with pytest.raises(ConflictError):
        store.renew_lease(cf, "srv-b", 10)
    renewed = store.renew_lease(cf, "srv-a", 10, checkpoint_ts=700, resolved_ts=800, stats={"rows_total": 3})
    assert (renewed.checkpoint_ts, renewed.resolved_ts, renewed.stats) == (700, 800, {"rows_total": 3})
    assert renewed.lease_expire_at is not None and renewed.lease_expire_at > cf.lease_expire_at  # type: ignore[operator]
    back = store.renew_lease(renewed, "srv-a", 10, checkpoint_ts=10)
    assert back.checkpoint_ts == 700


def test_only_normal_changefeeds_are_claimed(store: MetaStore) -> None:
    cf = store.create_changefeed(new())
    stopped = store.update_changefeed(cf, state=ChangefeedState.STOPPED)
    assert store.claimable_changefeeds() == []
    with pytest.raises(ConflictError):
        store.claim_changefeed(stopped, "srv-a", 10)


def test_release_frees_the_changefeed_and_records_the_final_state(store: MetaStore) -> None:
    cf = store.claim_changefeed(store.create_changefeed(new()), "srv-a", 10)
    out = store.release_changefeed(
        cf, "srv-a", state=ChangefeedState.FAILED, error={"code": "X", "message": "m"}, checkpoint_ts=900
    )
    assert out.owner is None and out.lease_expire_at is None
    assert out.state == ChangefeedState.FAILED and out.error == {"code": "X", "message": "m"}
    assert out.checkpoint_ts == 900
    assert store.owned_changefeeds("srv-a") == []


# ---------------------------------------------------------------- range progress


def test_range_progress_cas_and_split_inheritance(store: MetaStore) -> None:
    p = store.save_range_progress(
        RangeProgress("cf-1", "db", "t", 1, snapshot_version=50, last_snapshot_key=[10])
    )
    assert p.version == 1 and p.stage == RangeStage.SNAPSHOT
    p2 = store.save_range_progress(
        RangeProgress(
            "cf-1",
            "db",
            "t",
            1,
            stage=RangeStage.LOG,
            snapshot_version=50,
            last_log_position={"file": "mysql-bin.000001", "pos": 400},
            rows_copied=20,
            version=p.version,
        )
    )
    assert p2.version == 2 and p2.stage == RangeStage.LOG and p2.rows_copied == 20
    with pytest.raises(ConflictError, match="changed concurrently"):
        store.save_range_progress(RangeProgress("cf-1", "db", "t", 1, version=p.version))
    with pytest.raises(ConflictError, match="already exists"):
        store.save_range_progress(RangeProgress("cf-1", "db", "t", 1))
    kids = store.split_range(p2, [2, 3])
    assert [
        (k.range_id, k.parent_range_id, k.stage, k.snapshot_version, k.last_log_position) for k in kids
    ] == [
        (2, 1, RangeStage.LOG, 50, {"file": "mysql-bin.000001", "pos": 400}),
        (3, 1, RangeStage.LOG, 50, {"file": "mysql-bin.000001", "pos": 400}),
    ]
    # a retried split keeps what the children already have
    moved = store.save_range_progress(
        RangeProgress("cf-1", "db", "t", 2, rows_copied=5, version=kids[0].version)
    )
    again = store.split_range(p2, [2])
    assert again[0].rows_copied == moved.rows_copied == 5
    assert [r.range_id for r in store.get_range_progress("cf-1", schema="db", table="t")] == [1, 2, 3]


# ---------------------------------------------------------------- schema history


def test_schema_history_is_idempotent_and_refuses_a_different_shape(store: MetaStore) -> None:
    v1 = SchemaVersion("up-1", "db", "t", 100, {"columns": ["a"]}, "CREATE TABLE t (a INT)")
    v2 = SchemaVersion("up-1", "db", "t", 200, {"columns": ["a", "b"]}, "ALTER TABLE t ADD b INT")
    assert store.add_schema_version(v1) is True
    assert store.add_schema_version(v1) is False
    assert store.add_schema_version(v2) is True
    with pytest.raises(SchemaError, match="different shape"):
        store.add_schema_version(
            SchemaVersion("up-1", "db", "t", 200, {"columns": ["x"]}, "ALTER TABLE t ADD x INT")
        )
    assert [v.version for v in store.schema_history("up-1", "db", "t")] == [100, 200]
    assert store.schema_at("up-1", "db", "t", 150).version == 100  # type: ignore[union-attr]
    assert store.schema_at("up-1", "db", "t", 200).version == 200  # type: ignore[union-attr]
    assert store.schema_at("up-1", "db", "t", 99) is None
    assert store.schema_history("up-2") == []


# ---------------------------------------------------------------- servers


def test_servers_heartbeat_list_and_prune(store: MetaStore) -> None:
    store.heartbeat_server("s1", "127.0.0.1:1", "0.1")
    store.heartbeat_server("s2", "127.0.0.1:2", "0.1")
    cf = store.claim_changefeed(store.create_changefeed(new()), "s2", 30)
    servers = {s.id: s for s in store.list_servers(alive_within=60)}
    assert set(servers) == {"s1", "s2"}
    assert servers["s2"].owned == [cf.id] and servers["s1"].owned == []
    first = servers["s1"].heartbeat_at
    time.sleep(0.01)
    store.heartbeat_server("s1", "127.0.0.1:1", "0.1")
    assert {s.id: s for s in store.list_servers()}["s1"].heartbeat_at > first
    time.sleep(0.3)
    store.heartbeat_server("s1", "127.0.0.1:1", "0.1")
    assert [s.id for s in store.list_servers(alive_within=0.2)] == ["s1"]
    assert store.prune_servers(0.2) == 1
    store.remove_server("s1")
    assert store.list_servers() == []


def test_opening_the_store_again_keeps_this_process_s_lock_on_the_database(uri: str, tmp_path: Path) -> None:
    # Closing any descriptor of the database file drops every POSIX lock this process holds on it
    # (SQLite's "How To Corrupt An SQLite Database File", 2.2). In WAL mode an open connection holds
    # a shared lock on the file, so that the last connection to close, in any process, is the one
    # that removes the WAL file; a second open in this process must not read the file's header and
    # so drop it.
    store = MetaStore.open(uri)
    wal = tmp_path / "meta.db-wal"
    probe = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.execute('SELECT 1 FROM changefeeds').fetchall()\nc.close()\n"
    try:
        with store.engine.connect() as conn:  # a connection of this process stays open throughout
            conn.execute(select(schema_migrations)).fetchall()
            assert wal.exists()
            MetaStore.open(uri, apply_migrations=False).close()
            subprocess.run([sys.executable, "-c", probe, str(tmp_path / "meta.db")], check=True, timeout=60)
            assert wal.exists(), "another process took itself for the last connection and removed the WAL"
    finally:
        store.close()
