"""Identities in the meta database: the database's own, each changefeed's, and the snapshot-done record."""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy import delete, insert, select, text

from sparkcdc.meta import ChangefeedState, MetaStore, NewChangefeed, RangeProgress
from sparkcdc.meta.tables import changefeeds, schema_migrations


def _new(cf_id: str = "cf-1") -> NewChangefeed:
    return NewChangefeed(
        id=cf_id,
        upstream_uri="mysql://root:pw@127.0.0.1:3306/",
        sink_uri="file:///tmp/x?protocol=csv",
        config={},
        start_ts=100,
    )


def test_the_meta_database_has_one_lasting_identity(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'meta.db'}"
    a, b = MetaStore.open(uri), MetaStore.open(uri)
    first = a.identity()
    assert uuid.UUID(first) and b.identity() == first and MetaStore.open(uri).identity() == first
    other = MetaStore.open(f"sqlite:///{tmp_path / 'other.db'}")
    assert other.identity() != first
    for s in (a, b, other):
        s.close()


def test_a_created_changefeed_has_an_identity_and_a_re_created_one_another(tmp_path: Path) -> None:
    store = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    cf = store.create_changefeed(_new())
    assert uuid.UUID(cf.uid) and store.get_changefeed("cf-1").uid == cf.uid
    store.save_range_progress(RangeProgress(cf.id, "db", "t", 1))
    store.save_snapshot_report(cf.id, cf.namespace, cf.uid, {"rows_written": 3})
    assert store.snapshot_report(cf.id, cf.namespace, cf.uid) == {"rows_written": 3}
    store.update_changefeed(cf, state=ChangefeedState.REMOVED)
    again = store.create_changefeed(_new())
    assert again.uid != cf.uid
    # nothing of the removed changefeed's snapshot carries over to the new one
    assert store.get_range_progress("cf-1") == []
    assert store.snapshot_report(cf.id, cf.namespace, cf.uid) is None
    assert store.snapshot_report(again.id, again.namespace, again.uid) is None
    store.close()


def test_a_snapshot_record_of_another_identity_does_not_count(tmp_path: Path) -> None:
    store = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    cf = store.create_changefeed(_new())
    store.save_snapshot_report(cf.id, cf.namespace, "someone-else", {"rows_written": 1})
    assert store.snapshot_report(cf.id, cf.namespace, cf.uid) is None
    store.save_snapshot_report(cf.id, cf.namespace, cf.uid, {"rows_written": 2})
    assert store.snapshot_report(cf.id, cf.namespace, cf.uid) == {"rows_written": 2}
    store.delete_changefeed(store.get_changefeed("cf-1"))
    assert store.snapshot_report(cf.id, cf.namespace, cf.uid) is None
    store.close()


def test_migration_2_gives_existing_changefeeds_an_identity(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'meta.db'}"
    store = MetaStore.open(uri)
    store.create_changefeed(_new("old-1"))
    store.create_changefeed(_new("old-2"))
    # Back to the shape of version 1: no uid column, no snapshot_done and meta_info tables.
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE changefeeds DROP COLUMN uid"))
        conn.execute(text("DROP TABLE snapshot_done"))
        conn.execute(text("DROP TABLE meta_info"))
        conn.execute(delete(schema_migrations).where(schema_migrations.c.version == 2))
    store.close()
    store = MetaStore.open(uri)
    uids = [cf.uid for cf in store.list_changefeeds()]
    assert len(set(uids)) == 2 and all(uuid.UUID(u) for u in uids)
    with store.engine.connect() as conn:
        assert sorted(conn.execute(select(schema_migrations.c.version)).scalars()) == [1, 2, 3, 4]
        # the column is there for new rows too
        conn.execute(
            insert(changefeeds).values(
                namespace="default",
                id="raw",
                upstream_uri="u",
                sink_uri="s",
                config={},
                state="stopped",
                epoch=0,
                version=1,
                checkpoint_ts=0,
                resolved_ts=0,
                created_at=0,
                updated_at=0,
                uid="x",
            )
        )
    assert uuid.UUID(store.identity())
    store.close()


def test_migration_4_adds_the_upstream_identity_empty_until_a_claim_records_it(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'meta.db'}"
    store = MetaStore.open(uri)
    store.create_changefeed(_new("old-1"))
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE changefeeds DROP COLUMN upstream"))
        conn.execute(delete(schema_migrations).where(schema_migrations.c.version == 4))
    store.close()
    store = MetaStore.open(uri)
    (cf,) = store.list_changefeeds()
    assert cf.upstream is None
    seen = {"server_uuid": None, "server_id": 7, "binlog": "/var/lib/mysql/mysql-bin", "address": "db:3306"}
    assert store.update_changefeed(cf, upstream=seen).upstream == seen
    store.close()
