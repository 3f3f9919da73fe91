"""MySQL sink options outside TiCDC's limits are refused (TiCDC lowers them), from the URI and the TOML."""

from __future__ import annotations

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.mysql import parse_mysql_sink

URI = "mysql://root@h:3306/"


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("worker-count", "0", "an integer greater than 0 and at most 1024"),
        ("worker-count", "1025", "an integer greater than 0 and at most 1024"),
        ("max-txn-row", "0", "an integer greater than 0 and at most 2048"),
        ("max-txn-row", "2049", "an integer greater than 0 and at most 2048"),
        ("max-multi-update-row", "0", "an integer greater than 0 and at most 256"),
        ("max-multi-update-row", "257", "an integer greater than 0 and at most 256"),
        ("max-multi-update-row-size", "-1", "an integer at least 0 and at most 8192"),
        ("max-multi-update-row-size", "8193", "an integer at least 0 and at most 8192"),
        ("read-timeout", "0s", "a duration like 5s, 200ms or 1m30s, greater than 0s"),
        ("write-timeout", "0ms", "greater than 0s"),
        ("timeout", "later", "a duration like 5s"),
        ("tidb-txn-mode", "fast", "one of: optimistic, pessimistic"),
        ("transaction-atomicity", "global", "one of: none, table"),
        ("safe-mode", "maybe", "true or false"),
        ("batch-dml-enable", "on", "true or false"),
    ],
)
def test_uri_values_outside_the_limits_are_refused(key: str, value: str, expected: str) -> None:
    with pytest.raises(SinkURIError) as exc:
        parse_mysql_sink(f"{URI}?{key}={value}", ReplicaConfig())
    message = str(exc.value)
    assert message.startswith(f"invalid {key} ") and f"{value}" in message
    assert "in the sink URI: expected " in message and expected in message


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("worker-count = 2000", "invalid sink.mysql-config.worker-count 2000 in the changefeed config"),
        ("max-txn-row = 0", "invalid sink.mysql-config.max-txn-row 0 in the changefeed config"),
        ("max-multi-update-row = 300", "invalid sink.mysql-config.max-multi-update-row 300"),
        ("max-multi-update-row-size = 9000", "invalid sink.mysql-config.max-multi-update-row-size 9000"),
        ("read-timeout = '0s'", "invalid sink.mysql-config.read-timeout '0s' in the changefeed config"),
        ("tidb-txn-mode = 'fast'", "invalid sink.mysql-config.tidb-txn-mode 'fast'"),
    ],
)
def test_toml_values_outside_the_limits_are_refused(toml: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_mysql_sink(URI, ReplicaConfig.from_toml("[sink.mysql-config]\n" + toml))
    assert message in str(exc.value)


def test_the_limits_themselves_are_accepted_and_txn_mode_is_case_insensitive() -> None:
    s = parse_mysql_sink(
        f"{URI}?worker-count=1024&max-txn-row=2048&max-multi-update-row=256&max-multi-update-row-size=0"
        "&tidb-txn-mode=Pessimistic",
        ReplicaConfig(),
    )
    assert (s.worker_count, s.max_txn_row, s.max_multi_update_row, s.max_multi_update_row_size) == (
        1024,
        2048,
        256,
        0,
    )
    assert s.conn.tidb_txn_mode == "pessimistic"
    s = parse_mysql_sink(f"{URI}?worker-count=1&max-txn-row=1&max-multi-update-row=1", ReplicaConfig())
    assert (s.worker_count, s.max_txn_row, s.max_multi_update_row) == (1, 1, 1)


def test_config_file_timeouts_and_switches_apply() -> None:
    cfg = ReplicaConfig.from_toml(
        "[sink.mysql-config]\nread-timeout = '5s'\nenable-batch-dml = false\ntime-zone = ''\n"
    )
    s = parse_mysql_sink(URI, cfg)
    assert (s.conn.read_timeout, s.conn.write_timeout, s.batch_dml, s.conn.time_zone) == (
        5.0,
        120.0,
        False,
        None,
    )
    with pytest.raises(SinkURIError, match=r"time-zone 'Asia/Tokyo' in \[sink.mysql-config\] differs"):
        parse_mysql_sink(URI, ReplicaConfig.from_toml("[sink.mysql-config]\ntime-zone = 'Asia/Tokyo'\n"))
