"""HTTP sink URI validation (no server)."""

from __future__ import annotations

import pickle

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SinkURIError
from sparkcdc.model import RowChange
from sparkcdc.sink import create_sink
from sparkcdc.sink.http import HTTPSink, parse_http_sink


def test_defaults_and_endpoint() -> None:
    s = parse_http_sink("http://h:8080/hook", ReplicaConfig())
    assert s.endpoint == "http://h:8080/hook"
    assert (s.protocol, s.batch_size, s.timeout, s.max_retries, s.backoff) == (
        "canal-json",
        256,
        10.0,
        5,
        0.5,
    )
    assert s.auth_header is None and s.verify and not s.enable_tidb_extension
    assert parse_http_sink("https://h", ReplicaConfig()).endpoint == "https://h/"


def test_all_parameters() -> None:
    s = parse_http_sink(
        "https://h:1/p?protocol=canal-json&batch-size=5&timeout=1m30s&max-retries=0&backoff=200ms"
        "&auth-header=Token%20abc&enable-tidb-extension=true&insecure-skip-verify=true",
        ReplicaConfig(),
    )
    assert (s.batch_size, s.timeout, s.max_retries, s.backoff) == (5, 90.0, 0, 0.2)
    assert s.auth_header == "Token abc" and s.enable_tidb_extension and not s.verify
    assert s.endpoint == "https://h:1/p"  # the query (and its secret) never reaches the request line
    assert "abc" not in repr(s) and "abc" not in s.uri_redacted


@pytest.mark.parametrize(
    ("uri", "match"),
    [
        ("http://h/p?protocol=avro", "protocol"),
        ("http://h/p?batch-size=0", "batch-size"),
        ("http://h/p?timeout=fast", "timeout"),
        ("http://h/p?max-retries=-1", "max-retries"),
        ("http://h/p?auth_header=x", "unknown sink URI parameter"),
        ("http://h/p?ca=/x.pem", "https"),
        ("https://h/p?ca=/x.pem&insecure-skip-verify=true", "keep one"),
        ("http://u:pw@h/p", "auth-header"),
        ("http://h1,h2/p", "exactly one host"),
        ("http://h/p?auth-header=", "auth-header"),
    ],
)
def test_bad_values_are_refused(uri: str, match: str) -> None:
    with pytest.raises(SinkURIError, match=match):
        parse_http_sink(uri, ReplicaConfig())


def test_single_ordered_writer_and_pickle() -> None:
    sink = create_sink("http://h:1/p?auth-header=Bearer%20zz", ReplicaConfig(), "cf")
    assert isinstance(sink, HTTPSink) and sink.num_writers == 1
    row = RowChange("I", "a", "b", 0, 1, None, (1,))
    assert sink.route(row, None) == 0  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(sink)).settings == sink.settings
    assert "zz" not in repr(sink)
