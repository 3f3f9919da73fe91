"""HTTP sink options outside their limits are refused (a backoff above 30s was lowered before)."""

from __future__ import annotations

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.http import parse_http_sink
from sparkcdc.sink.http.config import OPTIONS


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("batch-size", "0", "an integer at least 1 and at most 100000"),
        ("batch-size", "100001", "an integer at least 1 and at most 100000"),
        ("max-retries", "-1", "an integer at least 0 and at most 100"),
        ("max-retries", "101", "at most 100"),
        ("timeout", "0s", "a duration like 5s, 200ms or 1m30s, greater than 0s"),
        ("timeout", "10", "a duration like 5s"),
        ("backoff", "31s", "a duration like 5s, 200ms or 1m30s, at least 0s and at most 30s"),
        ("backoff", "1h", "at most 30s"),
        ("protocol", "avro", "one of: canal-json"),
        ("enable-tidb-extension", "yes", "true or false"),
        ("insecure-skip-verify", "2", "true or false"),
    ],
)
def test_uri_values_outside_the_limits_are_refused(key: str, value: str, expected: str) -> None:
    with pytest.raises(SinkURIError) as exc:
        parse_http_sink(f"https://h/p?{key}={value}", ReplicaConfig())
    message = str(exc.value)
    assert message.startswith(f"invalid {key} ") and value in message
    assert "in the sink URI: expected " in message and expected in message


def test_the_limits_themselves_are_accepted() -> None:
    s = parse_http_sink(
        "http://h/p?batch-size=100000&max-retries=100&backoff=30s&timeout=1ms", ReplicaConfig()
    )
    assert (s.batch_size, s.max_retries, s.backoff, s.timeout) == (100000, 100, 30.0, 0.001)
    s = parse_http_sink("http://h/p?batch-size=1&max-retries=0&backoff=0s", ReplicaConfig())
    assert (s.batch_size, s.max_retries, s.backoff) == (1, 0, 0.0)


def test_config_values_apply_and_are_checked() -> None:
    cfg = ReplicaConfig.from_toml(
        "[sink]\nprotocol = 'canal-json'\n[sink.kafka-config.codec-config]\nenable-tidb-extension = true\n"
    )
    s = parse_http_sink("http://h/p", cfg)
    assert s.enable_tidb_extension and s.protocol == "canal-json"
    assert not parse_http_sink("http://h/p?enable-tidb-extension=false", cfg).enable_tidb_extension
    with pytest.raises(ConfigError, match=r"invalid sink\.protocol 'avro' in the changefeed config"):
        parse_http_sink("http://h/p", ReplicaConfig.from_toml("[sink]\nprotocol = 'avro'\n"))


def test_the_auth_header_is_never_shown() -> None:
    assert OPTIONS["auth-header"].secret
