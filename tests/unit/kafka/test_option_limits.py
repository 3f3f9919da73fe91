"""Kafka sink options outside their limits are refused, from the URI and from ``[sink.kafka-config]``."""

from __future__ import annotations

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.kafka.config import MAX_MAX_MESSAGE_BYTES, OPTIONS, KafkaOptions

BASE = "kafka://127.0.0.1:9092/t?protocol=canal-json"


def parse(query: str = "", toml: str = "") -> KafkaOptions:
    return KafkaOptions.parse(f"{BASE}&{query}", ReplicaConfig.from_toml(toml), "cf")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("partition-num", "0", "an integer greater than 0 and at most 2147483647"),
        ("partition-num", "-2", "an integer greater than 0"),
        ("partition-num", "2147483648", "at most 2147483647"),
        ("replication-factor", "0", "an integer greater than 0 and at most 32767"),
        ("replication-factor", "40000", "at most 32767"),
        ("max-message-bytes", "0", "an integer greater than 0 and at most 999995904"),
        ("max-message-bytes", "1000000000", "at most 999995904"),
        ("max-message-bytes", "10MiB", "an integer"),
        ("max-batch-size", "0", "an integer greater than 0"),
        ("max-retry", "-1", "an integer at least 0"),
        ("dial-timeout", "0s", "at least 1s"),
        ("dial-timeout", "500ms", "at least 1s"),
        ("write-timeout", "999ms", "at least 1s"),
        ("read-timeout", "6m", "at least 1s and at most 5m"),
        ("write-timeout", "301s", "at most 5m"),
        ("message-timeout", "999ms", "at least 1s"),
        ("required-acks", "all", "one of: -1, 0, 1"),
        ("compression", "brotli", "one of: none, gzip, snappy, lz4, zstd"),
        ("sasl-mechanism", "NTLM", "one of: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER"),
        ("kafka-version", "3", "a Kafka version like 2.4.0"),
        ("auto-create-topic", "no", "true or false"),
    ],
)
def test_uri_values_outside_the_limits_are_refused(key: str, value: str, expected: str) -> None:
    with pytest.raises(SinkURIError) as exc:
        parse(f"{key}={value}")
    message = str(exc.value)
    assert message.startswith(f"invalid {key} ") and value in message
    assert "in the sink URI: expected " in message and expected in message


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("partition-num = 0", "invalid sink.kafka-config.partition-num 0 in the changefeed config"),
        ("replication-factor = 0", "invalid sink.kafka-config.replication-factor 0 in the changefeed config"),
        ("max-message-bytes = -1", "invalid sink.kafka-config.max-message-bytes -1 in the changefeed config"),
        ("required-acks = 2", "invalid sink.kafka-config.required-acks 2 in the changefeed config"),
        ("compression = 'brotli'", "invalid sink.kafka-config.compression 'brotli'"),
        ("dial-timeout = '10'", "invalid sink.kafka-config.dial-timeout '10' in the changefeed config"),
        (
            "[sink.kafka-config.codec-config]\nmax-batch-size = 0",
            "config key 'sink.kafka-config.codec-config.max-batch-size' is accepted by TiCDC, not supported",
        ),
    ],
)
def test_toml_values_outside_the_limits_are_refused(toml: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse(toml="[sink.kafka-config]\n" + toml)
    assert not isinstance(exc.value, SinkURIError)
    assert message in str(exc.value)


def test_the_limits_themselves_are_accepted() -> None:
    o = parse(
        f"partition-num=1&replication-factor=1&max-message-bytes={MAX_MAX_MESSAGE_BYTES}&max-batch-size=1"
        "&max-retry=0&read-timeout=5m&write-timeout=5m&message-timeout=1s&required-acks=0"
    )
    assert (o.partition_num, o.replication_factor, o.max_message_bytes) == (1, 1, MAX_MAX_MESSAGE_BYTES)
    assert (o.max_retry, o.read_timeout, o.message_timeout) == (0, 300.0, 1.0)
    assert o.producer_config()["message.max.bytes"] == 1_000_000_000
    o = parse("partition-num=2147483647&replication-factor=32767&sasl-mechanism=oauthbearer")
    assert (o.partition_num, o.replication_factor, o.sasl_mechanism) == (2147483647, 32767, "OAUTHBEARER")


def test_toml_values_apply_and_the_uri_wins() -> None:
    toml = (
        "[sink.kafka-config]\nreplication-factor = 3\nrequired-acks = 1\ndial-timeout = '3s'\n"
        "sasl-mechanism = 'scram-sha-256'\nsasl-user = 'u'\nsasl-password = 'p'\n"
        "kafka-version = '3.0.0'\n"
    )
    o = parse("required-acks=0", toml)
    assert (o.replication_factor, o.required_acks, o.dial_timeout, o.kafka_version) == (3, 0, 3.0, "3.0.0")
    assert (o.sasl_mechanism, o.sasl_user) == ("SCRAM-SHA-256", "u")


def test_secrets_are_not_echoed() -> None:
    with pytest.raises(SinkURIError) as exc:
        parse("sasl-mechanism=plain&sasl-user=u&sasl-password=hunter2&max-retry=x")
    assert "hunter2" not in str(exc.value)
    assert OPTIONS["sasl-password"].secret and OPTIONS["sasl-gssapi-password"].secret
