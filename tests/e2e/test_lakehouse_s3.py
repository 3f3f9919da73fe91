"""The lakehouse sinks on a moto S3 server, Iceberg with its SQL catalog on a real PostgreSQL.

The sink is driven the way the pipeline drives it (writers stage change frames, the driver
commits them, DDLs between batches), without Spark: the S3 paths, credentials and the catalog
are what is under test. A replayed batch is recognised on S3 too, and a fresh reader (pyiceberg
through the PostgreSQL catalog, deltalake with its own S3 options) sees the upstream's last state.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import pytest

from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, TableInfo
from sparkcdc.services.postgres import LocalPostgres
from sparkcdc.services.s3 import LocalS3
from tests.unit.lakehouse.helpers import INFO, dele, ins, make_sink, row, rows_of, run_batch, upd

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


@pytest.fixture(scope="module")
def pg() -> Iterator[LocalPostgres]:
    with LocalPostgres() as server:
        yield server


def _scenario(uri: str) -> Any:
    """Two batches (one replayed), ADD COLUMN, a third batch: returns the sink."""
    sink = make_sink(uri)
    run_batch(sink, 0, [ins(10, row(1)), ins(10, row(2), 1), ins(10, row(3), 2)], 10)
    b1 = [upd(11, row(1), row(1, "u")), dele(11, row(2), 1), upd(12, row(3), row(30))]
    run_batch(sink, 1, b1, 12)
    run_batch(sink, 1, b1, 12)  # replayed after a crash
    info = TableInfo("shop", "items", (*INFO.columns, ColumnInfo("qty", "bigint")), INFO.indexes, version=13)
    sink.apply_ddl(
        DDLEvent("ALTER TABLE items ADD qty BIGINT", "shop", "items", DDLType.ALTER_TABLE, 13, 13, info)
    )
    run_batch(sink, 2, [ins(14, (4, "n4", Decimal("9.99"), 2**40))], 14, info)
    return sink


WANT = [(1, "u1", None), (4, "n4", 2**40), (30, "n30", None)]


def test_iceberg_on_s3_with_a_postgresql_catalog(local_s3: LocalS3, pg: LocalPostgres) -> None:
    local_s3.create_bucket("lake-ice")
    catalog = pg.create_database("iceberg_catalog")
    # A URI in a query parameter is percent-encoded (its user and password hold : and @).
    uri = local_s3.sink_uri("lake-ice/wh", **{"catalog-uri": quote(catalog, safe="")})
    uri = uri.replace("s3://", "iceberg://", 1)
    sink = _scenario(uri)
    sink.close()

    from pyiceberg.catalog.sql import SqlCatalog

    from sparkcdc.sink.lakehouse.iceberg import sqlalchemy_url

    props = sink.settings.s3_io_properties()
    cat = SqlCatalog("sparkcdc", uri=sqlalchemy_url(catalog), warehouse="s3://lake-ice/wh", **props)
    table = cat.load_table(("default", "shop_items"))
    assert table.metadata_location.startswith("s3://lake-ice/wh/")
    assert rows_of(table.scan().to_arrow(), "id", "name", "qty") == WANT
    assert not local_s3.filesystem().exists("lake-ice/wh/_sparkcdc_staging/cf-unit/1")


def test_delta_on_s3(local_s3: LocalS3) -> None:
    local_s3.create_bucket("lake-delta")
    uri = local_s3.sink_uri("lake-delta/root").replace("s3://", "delta://", 1)
    sink = _scenario(uri)

    from deltalake import DeltaTable

    t = DeltaTable("s3://lake-delta/root/shop_items", storage_options=sink.settings.delta_storage_options())
    assert rows_of(t.to_pyarrow_table(), "id", "name", "qty") == WANT
    assert t.transaction_version("sparkcdc:cf-unit") == 14
