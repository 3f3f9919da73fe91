"""e2e: ``[[filter.event-filters]]`` with a real MariaDB and the storage (file) sink.

A changefeed is started at the binlog head, then two tables are written while it
streams. The event filter drops the deletes of ``orders`` and its ``ALTER TABLE
… ADD COLUMN`` (``ignore-sql``); ``items`` is not matched. Downstream:

* ``orders`` has its inserts and updates, no delete;
* ``items`` has its deletes;
* no schema file of ``orders`` carries the ADD COLUMN statement (``items``'s own
  ADD COLUMN, not matched, is written as usual), yet the rows written after it are
  in a new table version whose schema has the new column, and their values are
  decoded with it: the filtered DDL still changed the tracked schema.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import tso, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_evfilter"
ORDERS_ADD = f"ALTER TABLE `{SCHEMA}`.orders ADD COLUMN note VARCHAR(20) NULL"
ITEMS_ADD = f"ALTER TABLE `{SCHEMA}`.items ADD COLUMN qty INT NULL"

CONFIG = f"""
[filter]
rules = ["{SCHEMA}.*"]

[[filter.event-filters]]
matcher = ["{SCHEMA}.orders"]
ignore-event = ["delete"]
ignore-sql = ["^ALTER TABLE .* ADD COLUMN"]

[sink.csv]
include-commit-ts = true
"""


def _records(root: Path, table: str) -> list[tuple[str, int, list[str]]]:
    """(op, table version, values) of every CSV record of a table, in commit order."""
    out: list[tuple[int, str, int, list[str]]] = []
    for path in sorted((root / SCHEMA / table).rglob("CDC*.csv")):
        version = int(path.relative_to(root / SCHEMA / table).parts[0])
        for rec in csv.reader(io.StringIO(path.read_bytes().decode(), newline="")):
            assert rec[1:3] == [table, SCHEMA], rec
            out.append((int(rec[3]), rec[0], version, rec[4:]))
    out.sort(key=lambda r: r[0])
    return [(op, version, values) for _ts, op, version, values in out]


def _schema_files(root: Path, table: str) -> list[dict[str, Any]]:
    meta = root / SCHEMA / table / "meta"
    return [json.loads(p.read_bytes()) for p in sorted(meta.glob("schema_*.json"))]


def test_event_filter_drops_deletes_and_a_ddl_but_tracks_the_schema(
    spark: Any, mariadb: LocalMariaDB, tmp_path: Path
) -> None:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import start_changefeed
    from sparkcdc.pipeline.spec import ChangefeedSpec

    mariadb.execute(
        f"DROP DATABASE IF EXISTS `{SCHEMA}`",
        f"CREATE DATABASE `{SCHEMA}`",
        f"CREATE TABLE `{SCHEMA}`.orders (id INT PRIMARY KEY, v VARCHAR(20))",
        f"CREATE TABLE `{SCHEMA}`.items (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    config = tmp_path / "cf.toml"
    config.write_text(CONFIG)
    out = tmp_path / "out"
    spec = ChangefeedSpec(
        changefeed_id="e2e-evfilter",
        upstream_uri=mariadb.uri,
        sink_uri=f"file://{out}?protocol=csv",
        config=ReplicaConfig.from_file(config),
        start_ts=tso(mariadb.uri),
        checkpoint_dir=str(tmp_path / "state"),
    )
    running = start_changefeed(spark, spec)  # the schema history starts from the tables above
    try:
        for table in ("orders", "items"):
            mariadb.execute(
                f"INSERT INTO `{SCHEMA}`.{table} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
                f"UPDATE `{SCHEMA}`.{table} SET v = 'b2' WHERE id = 2",
                f"DELETE FROM `{SCHEMA}`.{table} WHERE id = 3",
            )
        mariadb.execute(
            ORDERS_ADD,
            ITEMS_ADD,
            f"INSERT INTO `{SCHEMA}`.orders VALUES (5, 'e', 'new')",
            f"UPDATE `{SCHEMA}`.orders SET note = 'n1' WHERE id = 1",
            f"DELETE FROM `{SCHEMA}`.orders WHERE id = 4",
            f"INSERT INTO `{SCHEMA}`.items VALUES (5, 'e', 7)",
            f"DELETE FROM `{SCHEMA}`.items WHERE id = 4",
        )
        head = tso(mariadb.uri)
        wait_for(lambda: running.progress().checkpoint_ts >= head, 240, "the changefeed to reach the head")
        assert running.exception() is None
    finally:
        running.stop()

    orders = _records(out, "orders")
    assert [(op, values) for op, _v, values in orders] == [
        ("I", ["1", "a"]),
        ("I", ["2", "b"]),
        ("I", ["3", "c"]),
        ("I", ["4", "d"]),
        ("U", ["2", "b2"]),
        ("I", ["5", "e", "new"]),
        ("U", ["1", "a", "n1"]),
    ]  # no delete of orders, and the rows after ADD COLUMN carry the new column
    before, after = (
        {v for _op, v, vals in orders if len(vals) == 2},
        {v for _op, v, vals in orders if len(vals) == 3},
    )
    assert len(before) == 1 and len(after) == 1 and after != before, (before, after)

    items = _records(out, "items")
    assert [(op, values) for op, _v, values in items] == [
        ("I", ["1", "a"]),
        ("I", ["2", "b"]),
        ("I", ["3", "c"]),
        ("I", ["4", "d"]),
        ("U", ["2", "b2"]),
        ("D", ["3", "c"]),
        ("I", ["5", "e", "7"]),
        ("D", ["4", "d", "\\N"]),
    ]  # the other table's deletes arrive

    order_schemas = _schema_files(out, "orders")
    assert not [s for s in order_schemas if "ADD COLUMN" in s["Query"].upper()], order_schemas
    (new_version,) = after
    new_shape = [s for s in order_schemas if s["TableVersion"] == new_version]
    assert len(new_shape) == 1 and new_shape[0]["Query"] == "", order_schemas
    assert [c["ColumnName"] for c in new_shape[0]["TableColumns"]] == ["id", "v", "note"]
    item_queries = [s["Query"] for s in _schema_files(out, "items")]
    assert any("ADD COLUMN qty" in q for q in item_queries), item_queries
