"""Options that did nothing are honoured or refused by name, in one "not supported" wording."""

from __future__ import annotations

import pytest

from sparkcdc.config.options import not_supported
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.base import batch_trigger
from sparkcdc.sink.kafka.config import KafkaOptions
from sparkcdc.sink.storage.config import StorageSettings
from sparkcdc.sink.storage.sink import StorageSink

TICDC = "is accepted by TiCDC, not supported by sparkcdc; remove it (sparkcdc always behaves as "
KAFKA = "kafka://127.0.0.1:9092/t?protocol=canal-json"


def _kafka(params: str = "", toml: str = "") -> KafkaOptions:
    return KafkaOptions.parse(KAFKA + params, ReplicaConfig.from_toml(toml))


def test_max_batch_size_is_refused_by_name_in_the_uri_and_in_toml() -> None:
    with pytest.raises(SinkURIError) as exc:
        _kafka("&max-batch-size=16")
    assert str(exc.value).startswith(f"sink URI parameter 'max-batch-size' {TICDC}1: ")
    with pytest.raises(ConfigError) as toml_exc:
        _kafka(toml="[sink.kafka-config.codec-config]\nmax-batch-size = 16\n")
    assert str(toml_exc.value).startswith(
        f"config key 'sink.kafka-config.codec-config.max-batch-size' {TICDC}1: "
    )
    # the one value sparkcdc behaves as is accepted (one event per message)
    _kafka("&max-batch-size=1")
    _kafka(toml="[sink.kafka-config.codec-config]\nmax-batch-size = 1\n")


def test_kafka_version_is_librdkafkas_broker_version_fallback() -> None:
    assert _kafka().producer_config()["broker.version.fallback"] == "2.4.0"
    assert _kafka("&kafka-version=3.6.1").producer_config()["broker.version.fallback"] == "3.6.1"
    toml = "[sink.kafka-config]\nkafka-version = '2.8.1'\n"
    assert _kafka(toml=toml).common_config()["broker.version.fallback"] == "2.8.1"
    with pytest.raises(SinkURIError, match="invalid kafka-version 'three'"):
        _kafka("&kafka-version=three")


@pytest.mark.parametrize(
    ("toml", "key", "honoured"),
    [
        ("flush-concurrency = 4", "sink.cloud-storage-config.flush-concurrency", "1"),
        (
            "file-cleanup-cron-spec = '0 0 3 * * *'",
            "sink.cloud-storage-config.file-cleanup-cron-spec",
            "'0 0 2 * * *'",
        ),
        ("file-expiration-days = 7", "sink.cloud-storage-config.file-expiration-days", "0"),
    ],
)
def test_storage_keys_without_effect_are_refused_by_name(toml: str, key: str, honoured: str) -> None:
    with pytest.raises(ConfigError) as exc:
        ReplicaConfig.from_toml("[sink.cloud-storage-config]\n" + toml + "\n")
    assert str(exc.value).startswith(f"config key {key!r} {TICDC}{honoured}: ")


def test_storage_keys_at_the_value_sparkcdc_behaves_as_are_accepted() -> None:
    cfg = ReplicaConfig.from_toml(
        "[sink.cloud-storage-config]\nflush-concurrency = 1\nfile-cleanup-cron-spec = '0 0 2 * * *'\n"
        "file-expiration-days = 0\n"
    )
    assert "flush-concurrency" not in cfg.to_dict()["sink"]["cloud-storage-config"]
    # a stored config of an older version (which ignored them) keeps loading
    stored = ReplicaConfig().to_dict()
    stored["sink"]["cloud-storage-config"]["flush-concurrency"] = 8
    stored["sink"]["kafka-config"]["codec-config"]["max-batch-size"] = 16
    ReplicaConfig.from_stored(stored)


def test_flush_interval_spaces_the_storage_sinks_batches() -> None:
    cfg = ReplicaConfig()
    assert StorageSink("file:///tmp/x?protocol=csv", cfg).batch_interval is None
    sink = StorageSink("file:///tmp/x?protocol=csv&flush-interval=30s", cfg)
    assert sink.batch_interval == 30.0
    toml = ReplicaConfig.from_toml("[sink.cloud-storage-config]\nflush-interval = '1m'\n")
    assert StorageSettings.from_uri("file:///tmp/x?protocol=csv", toml).flush_interval == 60.0
    # the Spark trigger: the longer of --trigger-interval and flush-interval
    assert batch_trigger("200 milliseconds", None) == "200 milliseconds"
    assert batch_trigger("200 milliseconds", 30.0) == "30000 milliseconds"
    assert batch_trigger("1 minute", 30.0) == "1 minute"
    assert (
        batch_trigger("interval 10 seconds 500 milliseconds", 10.0) == "interval 10 seconds 500 milliseconds"
    )
    assert batch_trigger("2 seconds", 2.5) == "2500 milliseconds"


def test_one_wording_for_not_supported() -> None:
    uri = not_supported("sink URI parameter 'x'", "why", uri=True, ticdc=True)
    assert isinstance(uri, SinkURIError)
    assert (
        str(uri) == "sink URI parameter 'x' is accepted by TiCDC, not supported by sparkcdc; remove it (why)"
    )
    assert str(not_supported("value 'v'", fix="use w")) == "value 'v' is not supported by sparkcdc; use w"


def test_mysql_sinks_protocol_parameter_uses_the_wording() -> None:
    from sparkcdc.sink.mysql.config import parse_mysql_sink

    with pytest.raises(SinkURIError) as exc:
        parse_mysql_sink("mysql://root:Pw-123@127.0.0.1:3306/?protocol=csv", ReplicaConfig())
    assert "sink URI parameter 'protocol' (in " in str(exc.value)
    assert "is not supported by sparkcdc; remove it (the MySQL sink writes SQL, not messages)" in str(
        exc.value
    )
    assert "Pw-123" not in str(exc.value)
