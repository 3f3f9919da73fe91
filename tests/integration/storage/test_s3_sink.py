"""The storage sink against a real S3 server (moto_server on 127.0.0.1)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SinkError, SinkUnavailable
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, RowChange, TableInfo
from sparkcdc.services.common import free_port
from sparkcdc.services.s3 import LocalS3
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.storage import StorageSink

pytestmark = pytest.mark.integration

V1 = 440000000000000000


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        yield server


def table() -> TableInfo:
    return TableInfo(
        "shop",
        "orders",
        (ColumnInfo("id", "bigint", nullable=False), ColumnInfo("note", "varchar", length=64)),
        (IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        version=V1,
    )


def test_s3_layout_index_and_metadata(s3: LocalS3) -> None:
    s3.create_bucket("cdc1")
    cfg = ReplicaConfig.from_toml("[sink]\ndate-separator = 'none'\nfile-index-digit = 6")
    uri = s3.sink_uri("cdc1/prefix/a", protocol="canal-json", **{"enable-tidb-extension": "true"})
    sink = create_sink(uri, cfg, "cf")
    assert isinstance(sink, StorageSink)
    sink.check()
    info = table()
    sink.apply_ddl(
        DDLEvent(
            "CREATE TABLE orders (id bigint primary key, note varchar(64))",
            "shop",
            "orders",
            DDLType.CREATE_TABLE,
            V1,
            V1,
            info,
        )
    )
    for batch in range(2):
        w = sink.open_writer(WriterContext("cf", batch, 0))
        for i in range(3):
            n = batch * 3 + i
            w.write(RowChange("I", "shop", "orders", V1, V1 + 1 + n, None, (n, f"note {n}")), info)
        msg = w.close()
        assert msg["files"] == [f"shop/orders/{V1}/CDC00000{batch + 1}.json"]
        sink.flush_metadata(V1 + 3 * (batch + 1))

    fs = s3.filesystem()
    root = "cdc1/prefix/a"
    files = sorted(p[len(root) + 1 :] for p in fs.find(root))
    assert files == [
        "metadata",
        f"shop/orders/{V1}/CDC000001.json",
        f"shop/orders/{V1}/CDC000002.json",
        f"shop/orders/{V1}/meta/CDC.index",
        next(f for f in files if f.startswith("shop/orders/meta/schema_")),
    ]
    assert fs.cat_file(f"{root}/metadata") == b'{"checkpoint-ts":%d}' % (V1 + 6)
    assert fs.cat_file(f"{root}/shop/orders/{V1}/meta/CDC.index") == b"CDC000002.json\n"
    msgs = [json.loads(x) for x in fs.cat_file(f"{root}/shop/orders/{V1}/CDC000002.json").split(b"\r\n") if x]
    assert [m["data"][0]["note"] for m in msgs] == ["note 3", "note 4", "note 5"]

    # a restarted changefeed (new sink object, empty caches) continues the numbering from the index
    sink2 = create_sink(uri, cfg, "cf")
    w = sink2.open_writer(WriterContext("cf", 9, 0))
    w.write(RowChange("D", "shop", "orders", V1, V1 + 10, (0, "note 0"), None), info)
    assert w.close()["files"] == [f"shop/orders/{V1}/CDC000003.json"]
    assert sink2.backend.walk_files()[f"shop/orders/{V1}/CDC000003.json"] > 0


def test_s3_missing_bucket_and_unreachable_endpoint_are_reported(s3: LocalS3) -> None:
    sink = create_sink(s3.sink_uri("no-such-bucket/x", protocol="csv"), ReplicaConfig(), "cf")
    assert sink.backend.walk_files() == {}
    with pytest.raises(SinkError, match=r"bucket 'no-such-bucket' of storage URI .* does not exist"):
        sink.check()
    dead = f"s3://b/x?protocol=csv&endpoint=http://127.0.0.1:{free_port()}&access-key=a&secret-access-key=b"
    with pytest.raises(SinkUnavailable, match="cannot reach the storage"):
        create_sink(dead, ReplicaConfig(), "cf").check()


def _uploads(s3: LocalS3, bucket: str) -> list[str]:
    """Keys of the multipart uploads in progress in a bucket."""
    import boto3

    from sparkcdc.services.s3 import ACCESS_KEY, REGION, SECRET_KEY

    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )
    return [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def test_a_large_file_streams_as_a_multipart_upload_and_an_abort_leaves_nothing(
    s3: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the writer's buffer, rows go out in parts of 5 MiB; the object appears only when complete."""
    from sparkcdc.sink import objectstore

    monkeypatch.setattr(objectstore, "STREAM_BLOCK_BYTES", 5 * 1024 * 1024)
    s3.create_bucket("cdc-stream")
    cfg = ReplicaConfig.from_toml("[sink]\ndate-separator = 'none'")
    sink = create_sink(s3.sink_uri("cdc-stream/p", protocol="csv"), cfg, "cf")
    info = table()
    note = "n" * 60
    n = 150_000  # about 12 MB of CSV: two parts sent before the writer closes
    fs = s3.filesystem()

    w = sink.open_writer(WriterContext("cf", 0, 0))
    for i in range(n):
        w.write(RowChange("I", "shop", "orders", V1, V1 + 1 + i, None, (i, note)), info)
    assert _uploads(s3, "cdc-stream") == [f"p/shop/orders/{V1}/CDC00000000000000000001.csv"]
    assert not fs.exists(f"cdc-stream/p/shop/orders/{V1}/CDC00000000000000000001.csv")
    msg = w.close()
    assert msg["files"] == [f"shop/orders/{V1}/CDC00000000000000000001.csv"] and msg["rows"] == n
    assert _uploads(s3, "cdc-stream") == []
    body = fs.cat_file(f"cdc-stream/p/{msg['files'][0]}")
    assert len(body) == msg["bytes"] > 10 * 1024 * 1024
    ids = [int(line.split(b",")[3]) for line in body.splitlines()]
    assert ids == list(range(n))

    w = sink.open_writer(WriterContext("cf", 1, 0))
    for i in range(n):
        w.write(RowChange("I", "shop", "orders", V1, V1 + n + 1 + i, None, (i, note)), info)
    assert len(_uploads(s3, "cdc-stream")) == 1
    w.abort()
    assert _uploads(s3, "cdc-stream") == []
    assert not fs.exists(f"cdc-stream/p/shop/orders/{V1}/CDC00000000000000000002.csv")
