"""Storage sink options outside TiCDC's limits are refused, from the URI and from the TOML."""

from __future__ import annotations

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.storage.config import OPTIONS, StorageSettings

URI = "file:///tmp/x?protocol=csv"
SECTION = "[sink.cloud-storage-config]\n"
RANGES = {
    "worker-count": "an integer greater than 0 and at most 512",
    "flush-interval": "at least 2s and at most 10m",
    "file-size": "at least 1 MiB and at most 512 MiB",
}


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("worker-count", "0", "0"),
        ("worker-count", "513", "513"),
        ("worker-count", "-1", "-1"),
        ("worker-count", "four", "'four'"),
        ("flush-interval", "1ms", "'1ms'"),
        ("flush-interval", "1999ms", "'1999ms'"),
        ("flush-interval", "10m1s", "'10m1s'"),
        ("flush-interval", "5", "'5'"),
        ("file-size", "0", "0"),
        ("file-size", "1048575", "1048575"),
        ("file-size", "536870913", "536870913"),
        ("file-size", "1GiB", "'1GiB'"),
    ],
)
def test_uri_values_outside_the_limits_are_refused(key: str, value: str, shown: str) -> None:
    with pytest.raises(SinkURIError) as exc:
        StorageSettings.from_uri(f"{URI}&{key}={value}", ReplicaConfig())
    assert f"invalid {key} {shown} in the sink URI: expected " in str(exc.value)
    assert RANGES[key] in str(exc.value)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            "worker-count = 1000",
            "invalid sink.cloud-storage-config.worker-count 1000 in the changefeed config",
        ),
        ("worker-count = 0", "invalid sink.cloud-storage-config.worker-count 0 in the changefeed config"),
        (
            "flush-interval = '1ms'",
            "invalid sink.cloud-storage-config.flush-interval '1ms' in the changefeed",
        ),
        ("flush-interval = '1h'", "invalid sink.cloud-storage-config.flush-interval '1h' in the changefeed"),
        ("file-size = 0", "invalid sink.cloud-storage-config.file-size 0 in the changefeed config"),
        (
            "file-size = 1073741824",
            "invalid sink.cloud-storage-config.file-size 1073741824 in the changefeed",
        ),
    ],
)
def test_toml_values_outside_the_limits_are_refused(toml: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        StorageSettings.from_uri(URI, ReplicaConfig.from_toml(SECTION + toml))
    assert message in str(exc.value)


@pytest.mark.parametrize(
    ("query", "values"),
    [
        ("worker-count=1&flush-interval=2s&file-size=1048576", (1, 2.0, 1 << 20)),
        ("worker-count=512&flush-interval=10m&file-size=536870912", (512, 600.0, 512 << 20)),
        ("file-size=64MiB&flush-interval=1m30s", (16, 90.0, 64 << 20)),
    ],
)
def test_the_limits_themselves_are_accepted(query: str, values: tuple[int, float, int]) -> None:
    s = StorageSettings.from_uri(f"{URI}&{query}", ReplicaConfig())
    assert (s.worker_count, s.flush_interval, s.file_size) == values


def test_a_valid_uri_value_wins_over_a_bad_toml_value() -> None:
    cfg = ReplicaConfig.from_toml(SECTION + "worker-count = 0\nfile-size = 1\n")
    s = StorageSettings.from_uri(f"{URI}&worker-count=3&file-size=2097152", cfg)
    assert (s.worker_count, s.file_size) == (3, 2 << 20)


def test_the_table_names_every_sink_parameter() -> None:
    assert OPTIONS.names == (
        "protocol",
        "worker-count",
        "flush-interval",
        "file-size",
        "enable-tidb-extension",
    )
