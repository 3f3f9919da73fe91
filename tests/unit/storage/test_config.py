"""Storage sink URI validation: protocol, worker-count, flush-interval, file-size, backends."""

from __future__ import annotations

import pickle

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.objectstore import StorageBackend
from sparkcdc.sink.storage.config import StorageSettings


def settings(uri: str, toml: str = "") -> StorageSettings:
    return StorageSettings.from_uri(uri, ReplicaConfig.from_toml(toml))


def test_defaults() -> None:
    s = settings("file:///tmp/x?protocol=csv")
    assert (s.worker_count, s.flush_interval, s.file_size) == (16, None, 64 * 1024 * 1024)
    assert (s.file_index_width, s.date_separator, s.extension) == (20, "day", ".csv")
    assert s.backend.scheme == "file" and s.backend.root == "/tmp/x"
    assert settings("file:///tmp/x?protocol=canal-json").extension == ".json"


def test_protocol_is_required_and_closed() -> None:
    with pytest.raises(SinkURIError, match=r"needs a protocol: add \?protocol=csv"):
        settings("file:///tmp/x")
    with pytest.raises(
        SinkURIError, match=r"protocol 'avro' is not supported by the storage sink.*csv, canal-json"
    ):
        settings("file:///tmp/x?protocol=avro")
    assert settings("file:///tmp/x", '[sink]\nprotocol = "canal-json"').protocol == "canal-json"


def test_unknown_parameter_is_refused() -> None:
    with pytest.raises(SinkURIError, match=r"unknown sink URI parameter.*'flush-intervl'"):
        settings("file:///tmp/x?protocol=csv&flush-intervl=5s")


@pytest.mark.parametrize("n", ["0", "-3"])
def test_worker_count_must_be_positive(n: str) -> None:
    with pytest.raises(SinkURIError, match=f"invalid worker-count {n}.*greater than 0"):
        settings(f"file:///tmp/x?protocol=csv&worker-count={n}")


def test_worker_count_above_the_limit_is_refused_and_uri_wins_over_config() -> None:
    with pytest.raises(SinkURIError, match=r"invalid worker-count 1000 in the sink URI.*at most 512"):
        settings("file:///tmp/x?protocol=csv&worker-count=1000")
    toml = "[sink.cloud-storage-config]\nworker-count = 4\nflush-interval = '30s'\nfile-size = 2097152\n"
    s = settings("file:///tmp/x?protocol=csv", toml)
    assert (s.worker_count, s.flush_interval, s.file_size) == (4, 30.0, 2097152)
    s = settings("file:///tmp/x?protocol=csv&worker-count=2&flush-interval=3s&file-size=3145728", toml)
    assert (s.worker_count, s.flush_interval, s.file_size) == (2, 3.0, 3145728)


@pytest.mark.parametrize(("value", "seconds"), [("2s", 2.0), ("1m30s", 90.0), ("10m", 600.0)])
def test_flush_interval_within_limits(value: str, seconds: float) -> None:
    assert settings(f"file:///tmp/x?protocol=csv&flush-interval={value}").flush_interval == seconds


@pytest.mark.parametrize("value", ["1s", "500ms", "11m"])
def test_flush_interval_outside_limits_is_refused(value: str) -> None:
    with pytest.raises(SinkURIError, match=f"invalid flush-interval '{value}'.*at least 2s and at most 10m"):
        settings(f"file:///tmp/x?protocol=csv&flush-interval={value}")


def test_flush_interval_must_be_a_duration() -> None:
    with pytest.raises(
        SinkURIError, match="invalid flush-interval 'soon' in the sink URI: expected a duration"
    ):
        settings("file:///tmp/x?protocol=csv&flush-interval=soon")


@pytest.mark.parametrize(
    ("value", "size"), [("1048576", 1 << 20), ("5000000", 5000000), ("512MiB", 512 << 20)]
)
def test_file_size_within_limits(value: str, size: int) -> None:
    assert settings(f"file:///tmp/x?protocol=csv&file-size={value}").file_size == size


@pytest.mark.parametrize("value", ["1", "1048575", str(1 << 30)])
def test_file_size_outside_limits_is_refused(value: str) -> None:
    with pytest.raises(
        SinkURIError, match=f"invalid file-size {value} in the sink URI.*at least 1 MiB and at most 512 MiB"
    ):
        settings(f"file:///tmp/x?protocol=csv&file-size={value}")


def test_file_index_digit_and_date_separator_from_config() -> None:
    assert settings("file:///tmp/x?protocol=csv", "[sink]\nfile-index-digit = 6").file_index_width == 6
    with pytest.raises(
        ConfigError, match=r"invalid value 3 for 'sink.file-index-digit'; allowed: an integer from 6 to 20"
    ):
        settings("file:///tmp/x?protocol=csv", "[sink]\nfile-index-digit = 3")
    assert settings("file:///tmp/x?protocol=csv", "[sink]\ndate-separator = 'none'").date_separator == "none"
    with pytest.raises(ConfigError, match="date-separator"):
        settings("file:///tmp/x?protocol=csv", "[sink]\ndate-separator = 'week'")


def test_enable_tidb_extension() -> None:
    assert settings("file:///tmp/x?protocol=canal-json&enable-tidb-extension=true").enable_tidb_extension
    with pytest.raises(SinkURIError, match="expected true or false"):
        settings("file:///tmp/x?protocol=canal-json&enable-tidb-extension=yes")


def test_s3_uri() -> None:
    s = settings(
        "s3://bucket/a/b?protocol=csv&endpoint=http://127.0.0.1:9000&access-key=AK&secret-access-key=SK"
        "&region=us-east-1&force-path-style=true"
    )
    b = s.backend
    assert (b.scheme, b.root) == ("s3", "bucket/a/b")
    assert b.options["key"] == "AK" and b.options["secret"] == "SK"
    assert b.options["endpoint_url"] == "http://127.0.0.1:9000"
    assert b.options["client_kwargs"] == {"region_name": "us-east-1"}
    assert "SK" not in b.display
    assert pickle.loads(pickle.dumps(s)).backend.root == "bucket/a/b"


def test_s3_uri_errors() -> None:
    with pytest.raises(SinkURIError, match="has no bucket"):
        settings("s3:///prefix?protocol=csv")
    with pytest.raises(SinkURIError, match="access-key and secret-access-key must be given together"):
        settings("s3://b/p?protocol=csv&access-key=AK")
    with pytest.raises(SinkURIError, match=r"invalid endpoint '127.0.0.1:9000'"):
        settings("s3://b/p?protocol=csv&endpoint=127.0.0.1:9000")


def test_gcs_and_azure_uris() -> None:
    assert settings("gcs://bkt/p?protocol=csv&credentials-file=/k.json").backend.options == {
        "token": "/k.json"
    }
    assert settings("gs://bkt/p?protocol=csv").backend.scheme == "gcs"
    az = settings("azure://container/p?protocol=csv&account-name=acct&sas-token=sv%3Dx").backend
    assert (az.scheme, az.root, az.options) == (
        "azure",
        "container/p",
        {"account_name": "acct", "sas_token": "sv=x"},
    )
    assert (
        settings("azblob://c/p?protocol=csv&account-name=a&account-key=k").backend.options["account_key"]
        == "k"
    )
    with pytest.raises(SinkURIError, match="needs sas-token=<token> or account-key=<key>"):
        settings("azure://c/p?protocol=csv&account-name=a")
    with pytest.raises(SinkURIError, match="either sas-token or account-key, not both"):
        settings("azure://c/p?protocol=csv&account-name=a&account-key=k&sas-token=t")


def test_missing_optional_backend_names_the_extra() -> None:
    b = settings("gcs://bkt/p?protocol=csv").backend
    try:
        import gcsfs  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(Exception, match=r"pip install 'sparkcdc\[gcs\]'"):
            _ = b.fs
    else:  # pragma: no cover - depends on the environment
        assert b.fs is not None


def test_backend_is_picklable_without_its_filesystem(tmp_path: object) -> None:
    b = StorageBackend("file", "/tmp/x")
    _ = b.fs
    assert pickle.loads(pickle.dumps(b))._fs is None
