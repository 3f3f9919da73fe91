"""Seed 003's subscribe key: a subscriber name is unique per (namespace, database, table), not globally."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Column, MetaData, String, Table, insert, text

from sparkcdc.errors import ChangefeedExists
from sparkcdc.meta import ChangefeedState, MetaStore, NewChangefeed
from sparkcdc.meta.tables import changefeeds, metadata, schema_migrations
from sparkcdc.server.service import subscription_rule


def sub(cf_id: str, name: str, db: str, table: str, namespace: str = "default") -> NewChangefeed:
    return NewChangefeed(
        id=cf_id,
        namespace=namespace,
        upstream_uri="mysql://root:pw@127.0.0.1:3306/",
        sink_uri="file:///tmp/x?protocol=csv",
        config={"filter": {"rules": [subscription_rule(db, table)]}},
        start_ts=100,
        subscriber_name=name,
        subscribed_table=(db, table),
    )


def test_one_name_subscribes_to_several_tables_once_each(tmp_path: Path) -> None:
    store = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    store.create_changefeed(sub("orders-feed", "billing", "shop", "orders"))
    store.create_changefeed(sub("items-feed", "billing", "shop", "items"))
    store.create_changefeed(sub("orders-other-ns", "billing", "shop", "orders", namespace="team-b"))
    with pytest.raises(ChangefeedExists, match="subscriber 'billing' already has changefeed 'orders-feed'"):
        store.create_changefeed(sub("orders-again", "billing", "shop", "orders"))
    # removing frees the name on that table
    store.update_changefeed(
        store.get_changefeed("orders-feed"), state=ChangefeedState.REMOVED, subscriber_name=None
    )
    again = store.create_changefeed(sub("orders-again", "billing", "shop", "orders"))
    assert again.subscriber_name == "billing"
    store.close()


def test_migration_3_keeps_subscribers_and_lifts_the_global_key(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'meta.db'}"
    # a version 2 database: subscriber_name unique across the whole database
    old = MetaData()
    for t in metadata.tables.values():
        if t.name != "changefeeds":
            t.to_metadata(old)
    gone = {"subscriber", "subscribed_schema", "subscribed_table"}
    cols = [c._copy() for c in changefeeds.columns if c.name not in gone]
    v2 = Table("changefeeds", old, *cols, Column("subscriber_name", String(255), unique=True))
    store = MetaStore.open(uri)
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE changefeeds"))
        v2.create(conn)
        conn.execute(schema_migrations.delete().where(schema_migrations.c.version == 3))
        conn.execute(
            insert(v2).values(
                namespace="default",
                id="orders-feed",
                upstream_uri="mysql://u@127.0.0.1:3306/",
                sink_uri="file:///tmp/x?protocol=csv",
                config={"filter": {"rules": [subscription_rule("shop", "orders")]}},
                state="normal",
                epoch=0,
                version=1,
                checkpoint_ts=0,
                resolved_ts=0,
                subscriber_name="billing",
                created_at=0.0,
                updated_at=0.0,
                uid="u-1",
            )
        )
    store.close()
    store = MetaStore.open(uri)
    assert store.get_changefeed("orders-feed").subscriber_name == "billing"
    store.create_changefeed(sub("items-feed", "billing", "shop", "items"))
    with pytest.raises(ChangefeedExists, match="subscriber 'billing'"):
        store.create_changefeed(sub("orders-again", "billing", "shop", "orders"))
    store.close()
