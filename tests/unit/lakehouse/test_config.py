"""Lakehouse sink URIs: defaults, the closed parameter set, catalogs and S3."""

from __future__ import annotations

import pickle

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SinkURIError
from sparkcdc.sink import SINKS, create_sink
from sparkcdc.sink.lakehouse.config import LakehouseSettings
from sparkcdc.sink.lakehouse.iceberg import IcebergFormat
from sparkcdc.sink.lakehouse.sink import make_format


def settings(uri: str) -> LakehouseSettings:
    return LakehouseSettings.from_uri(uri, ReplicaConfig())


def test_registered() -> None:
    assert SINKS["iceberg"] == SINKS["delta"] == "sparkcdc.sink.lakehouse:LakehouseSink"


def test_iceberg_defaults_keep_a_sqlite_catalog_in_the_warehouse() -> None:
    s = settings("iceberg:///tmp/wh")
    assert (s.format, s.mode, s.table_name, s.namespace) == (
        "iceberg",
        "upsert",
        "{schema}_{table}",
        "default",
    )
    assert s.catalog_uri == "sqlite:////tmp/wh/sparkcdc-catalog.db"
    assert s.catalog_name == "sparkcdc"
    assert s.root_uri == "file:///tmp/wh"


def test_iceberg_catalog_uri_and_options() -> None:
    s = settings(
        "iceberg:///tmp/wh?catalog-uri=sqlite:////tmp/c.db&mode=changelog&namespace=cdc&table-name=t_{table}"
    )
    assert (s.catalog_uri, s.mode, s.namespace, s.table_name) == (
        "sqlite:////tmp/c.db",
        "changelog",
        "cdc",
        "t_{table}",
    )


@pytest.mark.parametrize("name", ["lake", "my_lake-2", "_x", "L" * 255])
def test_iceberg_catalog_name(name: str) -> None:
    s = settings(f"iceberg:///tmp/wh?catalog-uri=sqlite:////tmp/c.db&catalog-name={name}")
    assert s.catalog_name == name
    fmt = make_format(s)
    assert isinstance(fmt, IcebergFormat) and fmt.catalog_name == name


@pytest.mark.parametrize("name", ["", "my lake", "lake.prod", "2lake", "-lake", "lak%C3%A9", "L" * 256])
def test_iceberg_catalog_name_refused(name: str) -> None:
    with pytest.raises(SinkURIError) as err:
        settings(f"iceberg:///tmp/wh?catalog-name={name}")
    assert "invalid catalog-name" in str(err.value)
    assert "letters, digits, _ and - starting with a letter or _, at most 255 characters" in str(err.value)


def test_delta_root_and_s3() -> None:
    s = settings("delta:///tmp/root?worker-count=2")
    assert (s.format, s.backend.scheme, s.backend.root, s.worker_count) == ("delta", "file", "/tmp/root", 2)
    s3 = settings("delta://bucket/pre?endpoint=http://127.0.0.1:9&access-key=a&secret-access-key=b")
    assert (s3.backend.scheme, s3.root_uri) == ("s3", "s3://bucket/pre")
    opts = s3.delta_storage_options()
    assert opts["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9" and opts["AWS_ALLOW_HTTP"] == "true"
    assert opts["AWS_ACCESS_KEY_ID"] == "a"


@pytest.mark.parametrize(
    ("uri", "match"),
    [
        ("delta:///tmp/r?bogus=1", r"unknown sink URI parameter\(s\) 'bogus'.*supported: .*mode"),
        ("delta:///tmp/r?catalog-uri=sqlite:////x.db", r"unknown sink URI parameter\(s\) 'catalog-uri'"),
        ("delta:///tmp/r?catalog-name=lake", r"unknown sink URI parameter\(s\) 'catalog-name'"),
        ("iceberg:///tmp/r?mode=merge", r"mode.*'merge'.*upsert.*changelog"),
        ("iceberg:///tmp/r?table-name={db}_{table}", r"unknown placeholder\(s\) \{db\}"),
        ("iceberg:///tmp/r?table-name=fixed", r"table-name"),
        ("iceberg:///tmp/r?worker-count=0", r"worker-count"),
        ("iceberg://bucket/p?endpoint=http://127.0.0.1:9", r"needs a catalog: add catalog-uri=postgresql://"),
        ("iceberg:///tmp/r?catalog-uri=mysql://h/db", r"invalid catalog-uri.*use sqlite:////abs/catalog.db"),
    ],
)
def test_refused(uri: str, match: str) -> None:
    with pytest.raises(SinkURIError, match=match):
        settings(uri)


def test_catalog_password_is_not_shown() -> None:
    with pytest.raises(SinkURIError) as err:
        settings("iceberg:///tmp/r?catalog-uri=mysql://u:topsecret@h/db")
    assert "topsecret" not in str(err.value)


def test_sink_pickles_without_its_catalog(tmp_path: object) -> None:
    sink = create_sink(f"iceberg://{tmp_path}/wh", ReplicaConfig(), "cf")
    sink.check()
    assert sink.applier.fmt.exists("nothing") is False  # type: ignore[attr-defined]
    clone = pickle.loads(pickle.dumps(sink))
    assert clone._applier is None and clone.settings == sink.settings  # type: ignore[attr-defined]
