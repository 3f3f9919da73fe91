"""MySQL sink URI and [sink.mysql-config] validation (no database)."""

from __future__ import annotations

import pickle

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SinkURIError
from sparkcdc.sink import create_sink
from sparkcdc.sink.mysql import MySQLSink, parse_mysql_sink


def test_defaults_follow_ticdc() -> None:
    s = parse_mysql_sink("mysql://root:pw@db.example:3306/", ReplicaConfig())
    assert (s.worker_count, s.max_txn_row, s.max_multi_update_row, s.safe_mode) == (16, 256, 40, False)
    assert s.transaction_atomicity == "none" and s.progress_table
    assert not parse_mysql_sink("mysql://h:1/?progress-table=false", ReplicaConfig()).progress_table
    assert (s.conn.host, s.conn.port, s.conn.user, s.conn.password) == ("db.example", 3306, "root", "pw")
    assert s.conn.time_zone == "+00:00"  # the changefeed's UTC
    assert s.conn.read_timeout == 120.0 and s.conn.connect_timeout == 120.0
    t = parse_mysql_sink("tidb+ssl://u@h/", ReplicaConfig())
    assert (t.conn.port, t.conn.user, t.conn.ssl, t.is_tidb) == (4000, "u", True, True)


def test_every_parameter_is_read() -> None:
    uri = (
        "mysql://u:p@h1:1,h2:2/?worker-count=4&max-txn-row=10&max-multi-update-row=5"
        "&max-multi-update-row-size=100&safe-mode=true&transaction-atomicity=table&time-zone=UTC"
        "&read-timeout=5s&write-timeout=6s&timeout=7s&batch-dml-enable=false&multi-stmt-enable=false"
        "&cache-prep-stmts=false&tidb-txn-mode=pessimistic&ssl-ca=/ca.pem&ssl-cert=/c.pem&ssl-key=/k.pem"
    )
    s = parse_mysql_sink(uri, ReplicaConfig())
    assert (s.worker_count, s.max_txn_row, s.max_multi_update_row, s.max_multi_update_row_size) == (
        4,
        10,
        5,
        100,
    )
    assert s.safe_mode and s.transaction_atomicity == "table"
    assert not s.batch_dml and not s.multi_statement and not s.conn.multi_statements
    assert (s.conn.read_timeout, s.conn.write_timeout, s.conn.connect_timeout) == (5.0, 6.0, 7.0)
    assert s.conn.extra_hosts == (("h2", 2),) and s.conn.tidb_txn_mode == "pessimistic"
    assert (s.conn.ssl_ca, s.conn.ssl_cert, s.conn.ssl_key) == ("/ca.pem", "/c.pem", "/k.pem")


def test_config_file_values_apply_and_the_uri_wins() -> None:
    cfg = ReplicaConfig.from_toml(
        "[sink]\nsafe-mode = true\ntransaction-atomicity = 'table'\n"
        "[sink.mysql-config]\nworker-count = 3\nmax-txn-row = 7\n"
    )
    s = parse_mysql_sink("mysql://h:1/?max-txn-row=9", cfg)
    assert (s.worker_count, s.max_txn_row, s.safe_mode, s.transaction_atomicity) == (3, 9, True, "table")
    assert not parse_mysql_sink("mysql://h:1/?safe-mode=false", cfg).safe_mode


@pytest.mark.parametrize(
    ("uri", "match"),
    [
        ("mysql://h:1/?protocol=canal-json", "protocol"),
        ("mysql://h:1/?worker-count=0", "worker-count"),
        ("mysql://h:1/?max-txn-row=abc", "max-txn-row"),
        ("mysql://h:1/?safe-mode=maybe", "safe-mode"),
        ("mysql://h:1/?transaction-atomicity=global", "transaction-atomicity"),
        ("mysql://h:1/?tidb-txn-mode=fast", "tidb-txn-mode"),
        ("mysql://h:1/?read-timeout=soon", "read-timeout"),
        ("mysql://h:1/?max-multi-update-row-size=-1", "max-multi-update-row-size"),
        ("mysql://h:1/?worker_count=2", "unknown sink URI parameter"),
        ("mysql://h:1/?time-zone=Asia/Shanghai", "differs from the changefeed time zone"),
        ("mysql://h:1/?ssl-cert=/c.pem", "ssl-cert and ssl-key"),
        ("mysql://h:1/db", "path"),
        ("mysql:///", "no host"),
    ],
)
def test_bad_values_are_refused_with_the_key(uri: str, match: str) -> None:
    with pytest.raises(SinkURIError, match=match):
        parse_mysql_sink(uri, ReplicaConfig())


def test_too_large_values_are_refused() -> None:
    with pytest.raises(SinkURIError, match=r"invalid worker-count 5000 in the sink URI.*at most 1024"):
        parse_mysql_sink("mysql://h:1/?worker-count=5000", ReplicaConfig())
    with pytest.raises(SinkURIError, match=r"invalid max-txn-row 99999 in the sink URI.*at most 2048"):
        parse_mysql_sink("mysql://h:1/?max-txn-row=99999", ReplicaConfig())


def test_time_zone_empty_keeps_downstream_and_errors_redact_the_password() -> None:
    assert parse_mysql_sink("mysql://h:1/?time-zone=", ReplicaConfig()).conn.time_zone is None
    with pytest.raises(SinkURIError) as ei:
        parse_mysql_sink("mysql://u:s3cret@h:1/?bogus=1", ReplicaConfig())
    assert "s3cret" not in str(ei.value) and "bogus" in str(ei.value)


def test_registry_builds_a_picklable_sink() -> None:
    sink = create_sink("mysql://u:p@h:1/?worker-count=3", ReplicaConfig(), "cf-1")
    assert isinstance(sink, MySQLSink) and sink.num_writers == 3
    copy = pickle.loads(pickle.dumps(sink))
    assert copy.settings == sink.settings and copy.replicating_ts == sink.replicating_ts
    assert {sink.route(_row("s", "t"), None) for _ in range(3)} == {sink.route(_row("s", "t"), None)}  # type: ignore[arg-type]


def _row(schema: str, table: str):  # type: ignore[no-untyped-def]
    from sparkcdc.model import RowChange

    return RowChange(
        op="I", schema=schema, table=table, table_version=0, commit_ts=1, before=None, after=(1,)
    )
