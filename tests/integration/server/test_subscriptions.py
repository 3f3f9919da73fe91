"""Subscriptions through the API's service against a real upstream: a name is unique per table."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.errors import ChangefeedExists
from sparkcdc.meta import MetaStore
from sparkcdc.server.service import ChangefeedService
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration]


def test_one_subscriber_name_on_two_tables(mariadb: LocalMariaDB, fresh_db: str, tmp_path: Path) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.orders (id INT PRIMARY KEY)",
        f"CREATE TABLE `{fresh_db}`.items (id INT PRIMARY KEY)",
    )
    store = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    service = ChangefeedService(store)

    def create(cf_id: str, table: str) -> str:
        cf = service.create(
            {
                "changefeed_id": cf_id,
                "upstream_uri": mariadb.uri,
                "sink_uri": f"file://{tmp_path / cf_id}?protocol=canal-json",
                "subscriber_name": "billing",
                "database": fresh_db,
                "table": table,
            }
        )
        return str(cf.subscriber_name)

    try:
        assert create("orders-feed", "orders") == "billing"
        assert create("items-feed", "items") == "billing"
        with pytest.raises(ChangefeedExists) as info:
            create("orders-again", "orders")
        assert info.value.code == "CDC:ErrChangeFeedAlreadyExists"
        assert "subscriber 'billing' already has changefeed 'orders-feed'" in info.value.message
    finally:
        store.close()
