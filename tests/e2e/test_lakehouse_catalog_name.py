"""e2e: ``iceberg://…?catalog-name=…`` writes into a user's own SQL catalog, which opens the tables.

A SQL catalog files each table under the catalog's name, so a reader sees the tables only when it
opens the catalog by the name the sink wrote them with. The user already keeps a SQLite catalog
``lake`` with a table of their own; a changefeed with ``catalog-uri`` pointing at that file and
``catalog-name=lake`` snapshots and streams an upstream table into it. The user's
``SqlCatalog("lake", …)`` then lists both tables and reads the changefeed's table equal to the
upstream, while the same file opened as ``sparkcdc`` (the default name) holds none of them.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import CliProcess, run_args, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_lake_catalog"
CATALOG = "lake"


def _sql(db: LocalMariaDB, *statements: str) -> None:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
        conn.commit()
    finally:
        conn.close()


def _upstream_rows(db: LocalMariaDB) -> list[tuple[int, str, int]]:
    conn = db.connect(SCHEMA)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, name, qty FROM items ORDER BY id")
            return [(int(i), str(n), int(q)) for i, n, q in cur.fetchall()]
    finally:
        conn.close()


def test_a_users_catalog_opens_the_tables_by_its_name(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog_db = tmp_path / "users-catalog.db"
    catalog_props = {"uri": f"sqlite:///{catalog_db}", "warehouse": f"file://{warehouse}"}

    # The user's own catalog, with a table of its own, before the changefeed exists.
    own = SqlCatalog(CATALOG, **catalog_props)
    own.create_namespace("analytics")
    mine = own.create_table(("analytics", "notes"), schema=pa.schema([pa.field("note", pa.string())]))
    mine.append(pa.table({"note": ["kept by the user"]}))
    own.engine.dispose()

    _sql(
        mariadb,
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.items (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL, qty INT NOT NULL)",
        f"INSERT INTO {SCHEMA}.items VALUES " + ", ".join(f"({i}, 'item {i}', {i})" for i in range(1, 21)),
    )
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n[snapshot]\nmode = "initial"\n')
    sink_uri = (
        f"iceberg://{warehouse}?catalog-uri=sqlite:///{catalog_db}&catalog-name={CATALOG}&namespace=cdc"
    )
    run = CliProcess(
        [*run_args(mariadb.uri, sink_uri, "lake-catalog", tmp_path / "data", config=config)],
        tmp_path / "run.log",
    )
    try:
        run.wait_started(timeout=240)
        _sql(
            mariadb,
            f"UPDATE {SCHEMA}.items SET qty = qty * 10 WHERE id % 3 = 0",
            f"DELETE FROM {SCHEMA}.items WHERE id % 5 = 0",
            f"INSERT INTO {SCHEMA}.items VALUES (100, 'streamed', 7)",
        )
    finally:
        run.stop()
    target = tso(mariadb.uri)
    finish = CliProcess(
        [
            *run_args(mariadb.uri, sink_uri, "lake-catalog", tmp_path / "data", config=config),
            "--target-ts",
            str(target),
        ],
        tmp_path / "run2.log",
    )
    try:
        rc = finish.wait(timeout=300)
        assert rc == 0, f"the run failed ({rc}):\n{finish.output()[-4000:]}"
    finally:
        finish.stop()

    user = SqlCatalog(CATALOG, **catalog_props)
    try:
        assert sorted(user.list_namespaces()) == [("analytics",), ("cdc",)]
        assert user.list_tables("cdc") == [("cdc", f"{SCHEMA}_items")]
        assert user.load_table(("analytics", "notes")).scan().to_arrow().to_pylist() == [
            {"note": "kept by the user"}
        ]
        got = user.load_table(("cdc", f"{SCHEMA}_items")).scan().to_arrow()
        rows = sorted((r["id"], r["name"], r["qty"]) for r in got.to_pylist())
        want = _upstream_rows(mariadb)
        assert rows == want, f"the Iceberg table differs from the upstream: {rows} != {want}"
        assert (100, "streamed", 7) in rows and (15, "item 15", 150) not in rows
    finally:
        user.engine.dispose()

    other = SqlCatalog("sparkcdc", **catalog_props)
    try:
        assert not other.table_exists(("cdc", f"{SCHEMA}_items"))
        assert not other.table_exists(("analytics", "notes"))
    finally:
        other.engine.dispose()
