"""MySQL 8 server versions, the binlog status statement chosen by version, and the MySQL-only setup checks.

The checks shared with MariaDB (log_bin, binlog_format, binlog_row_image, binlog_row_metadata,
privileges) run against the real MariaDB in tests/integration/capture/test_bad_setup.py; here
they are fed MySQL's variables to pin the MySQL wording of each fix.
"""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from sparkcdc.capture.upstream import (
    ServerVersion,
    UpstreamConfig,
    check_privileges,
    check_setup,
    master_status,
)
from sparkcdc.errors import UpstreamSetupError

MYSQL84 = ServerVersion.parse("8.4.3")
MYSQL80 = ServerVersion.parse("8.0.36-log")
MARIADB = ServerVersion.parse("5.5.5-10.11.6-MariaDB-log")

GOOD_MYSQL = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
    "gtid_mode": "ON",
    "enforce_gtid_consistency": "ON",
    "binlog_row_value_options": "",
    "binlog_transaction_compression": "ON",
}


@pytest.mark.parametrize(
    ("text", "mariadb", "version", "sql"),
    [
        ("8.4.3", False, (8, 4, 3), "SHOW BINARY LOG STATUS"),
        ("8.2.0", False, (8, 2, 0), "SHOW BINARY LOG STATUS"),
        ("8.1.0", False, (8, 1, 0), "SHOW MASTER STATUS"),
        ("8.0.36-log", False, (8, 0, 36), "SHOW MASTER STATUS"),
        ("5.7.44-log", False, (5, 7, 44), "SHOW MASTER STATUS"),
        ("9.1.0-commercial", False, (9, 1, 0), "SHOW BINARY LOG STATUS"),
        ("10.11.6-MariaDB-log", True, (10, 11, 6), "SHOW MASTER STATUS"),
        ("5.5.5-10.11.6-MariaDB", True, (10, 11, 6), "SHOW MASTER STATUS"),
        ("11.4.2-MariaDB-ubu2404", True, (11, 4, 2), "SHOW MASTER STATUS"),
    ],
)
def test_versions_and_status_statement(
    text: str, mariadb: bool, version: tuple[int, int, int], sql: str
) -> None:
    v = ServerVersion.parse(text)
    assert (v.mariadb, v.version, v.binlog_status_sql) == (mariadb, version, sql)
    assert v.mysql8 == (not mariadb and version >= (8, 0, 0))


class _Cursor:
    def __init__(self, conn: _Conn) -> None:
        self.conn = conn

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *a: object) -> None:
        pass

    def execute(self, sql: str, args: Any = None) -> None:
        self.conn.sql.append(sql)
        if self.conn.refuse:
            raise pymysql.err.OperationalError(
                1227, "Access denied; you need (at least one of) the REPLICATION CLIENT privilege(s)"
            )

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.conn.row


class _Conn:
    def __init__(
        self, version: str, row: tuple[Any, ...] | None = ("binlog.000007", 1570), refuse: bool = False
    ) -> None:
        self.server_version = version
        self.row = row
        self.refuse = refuse
        self.user = "cdc"
        self.sql: list[str] = []

    def cursor(self) -> _Cursor:
        return _Cursor(self)


@pytest.mark.parametrize(
    ("version", "sql"),
    [
        ("8.4.3", "SHOW BINARY LOG STATUS"),
        ("8.0.36", "SHOW MASTER STATUS"),
        ("5.5.5-10.11.6-MariaDB", "SHOW MASTER STATUS"),
    ],
)
def test_master_status_asks_what_the_server_has(version: str, sql: str) -> None:
    conn = _Conn(version)
    assert master_status(conn) == ("binlog.000007", 1570)  # type: ignore[arg-type]
    assert conn.sql == [sql]
    with pytest.raises(
        UpstreamSetupError, match=f"{sql} was refused.*GRANT REPLICATION SLAVE, REPLICATION CLIENT"
    ):
        master_status(_Conn(version, refuse=True))  # type: ignore[arg-type]
    with pytest.raises(UpstreamSetupError, match=f"{sql} returned nothing: binary logging is off"):
        master_status(_Conn(version, row=None))  # type: ignore[arg-type]


def test_good_mysql_setup_passes() -> None:
    check_setup(MYSQL84, GOOD_MYSQL, "db:3306", need_gtid=True)
    check_setup(MYSQL80, GOOD_MYSQL, "db:3306")


@pytest.mark.parametrize(
    ("name", "value", "pattern"),
    [
        (
            "log_bin",
            "OFF",
            r"binary logging is off on upstream db:3306.*on by default in MySQL 8.*--skip-log-bin",
        ),
        (
            "binlog_format",
            "MIXED",
            r"binlog_format is MIXED .*needs ROW; run SET PERSIST binlog_format=ROW\n",
        ),
        (
            "binlog_row_image",
            "MINIMAL",
            r"binlog_row_image is MINIMAL .*FULL.*; run SET PERSIST binlog_row_image=FULL\n",
        ),
        ("binlog_row_image", "NOBLOB", r"binlog_row_image is NOBLOB"),
        (
            "binlog_row_metadata",
            "MINIMAL",
            r"binlog_row_metadata is MINIMAL .*SET PERSIST binlog_row_metadata=FULL\n",
        ),
        (
            "binlog_row_value_options",
            "PARTIAL_JSON",
            r"binlog_row_value_options is PARTIAL_JSON .*PARTIAL_UPDATE_ROWS_EVENT.*SET PERSIST binlog_row_value_options=''",
        ),
    ],
)
def test_each_bad_mysql_variable_names_the_mysql_fix(name: str, value: str, pattern: str) -> None:
    with pytest.raises(UpstreamSetupError, match=pattern):
        check_setup(MYSQL84, {**GOOD_MYSQL, name: value}, "db:3306")


def test_mariadb_wording_is_unchanged() -> None:
    maria = {
        k: v
        for k, v in GOOD_MYSQL.items()
        if not k.startswith(("gtid", "enforce", "binlog_row_value", "binlog_trans"))
    }
    check_setup(MARIADB, maria, "m:3306")
    with pytest.raises(
        UpstreamSetupError,
        match=r"SET GLOBAL binlog_format=ROW \(and set it in the server config: binlog_format=ROW under "
        r"\[mysqld\] in my.cnf, to keep it across restarts\)",
    ):
        check_setup(MARIADB, {**maria, "binlog_format": "STATEMENT"}, "m:3306")
    with pytest.raises(UpstreamSetupError, match=r"start the server with --log-bin --binlog-format=ROW"):
        check_setup(MARIADB, {**maria, "log_bin": "OFF"}, "m:3306")


@pytest.mark.parametrize("mode", ["OFF", "OFF_PERMISSIVE", "ON_PERMISSIVE"])
def test_gtid_start_needs_gtid_mode_on(mode: str) -> None:
    check_setup(MYSQL84, {**GOOD_MYSQL, "gtid_mode": mode}, "db:3306")  # fine without a GTID start
    with pytest.raises(
        UpstreamSetupError,
        match=f"gtid_mode is {mode} .*SET PERSIST enforce_gtid_consistency=ON.*--start-position",
    ):
        check_setup(MYSQL84, {**GOOD_MYSQL, "gtid_mode": mode}, "db:3306", need_gtid=True)


def test_gtid_set_on_mariadb_is_refused() -> None:
    maria = {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
    }
    with pytest.raises(UpstreamSetupError, match=r"MariaDB 10.11.6\) has no MySQL GTIDs.*DOMAIN-SERVER-SEQ"):
        check_setup(MARIADB, maria, "m:3306", need_gtid=True)


@pytest.mark.parametrize(
    ("grants", "missing"),
    [
        ("GRANT SELECT ON *.* TO `cdc`@`%`", "REPLICATION SLAVE, REPLICATION CLIENT"),
        ("GRANT SELECT, REPLICATION SLAVE ON *.* TO `cdc`@`%`", "REPLICATION CLIENT"),
        ("GRANT SELECT, REPLICATION CLIENT ON *.* TO `cdc`@`%`", "REPLICATION SLAVE"),
    ],
)
def test_mysql_grants(grants: str, missing: str) -> None:
    up = UpstreamConfig("db", 3306, "cdc", "x")
    with pytest.raises(UpstreamSetupError, match=f"lacks {missing}; run GRANT {missing}, SELECT ON"):
        check_privileges(grants.upper(), up)
    # MySQL 8's SHOW GRANTS lists static privileges in one line and dynamic ones in another
    check_privileges(
        "GRANT SELECT, PROCESS, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `CDC`@`%` "
        "GRANT BACKUP_ADMIN ON *.* TO `CDC`@`%`",
        up,
    )


@pytest.mark.parametrize(
    ("grants", "lacks", "fix"),
    [
        ("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`", "SELECT", "SELECT"),
        (
            "GRANT REPLICATION CLIENT ON *.* TO `cdc`@`%`",
            "REPLICATION SLAVE, SELECT",
            "REPLICATION SLAVE, SELECT",
        ),
        # a role grant or WITH GRANT OPTION is no SELECT
        (
            "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%` WITH GRANT OPTION GRANT `r` TO `cdc`@`%`",
            "SELECT",
            "SELECT",
        ),
    ],
)
def test_a_user_without_select_is_refused_naming_it(grants: str, lacks: str, fix: str) -> None:
    up = UpstreamConfig("db", 3306, "cdc", "x")
    with pytest.raises(UpstreamSetupError) as exc:
        check_privileges(grants.upper(), up)
    assert (
        str(exc.value) == f"user 'cdc' on upstream db:3306 lacks {lacks}; run GRANT {fix} ON *.* TO 'cdc'@'%'"
    )


@pytest.mark.parametrize(
    "select",
    [
        "GRANT SELECT ON `shop`.* TO `cdc`@`%`",
        "GRANT SELECT (`a`, `b`) ON `shop`.`t` TO `cdc`@`%`",
        "GRANT ALL PRIVILEGES ON `shop`.* TO `cdc`@`%`",
        "GRANT INSERT, SELECT ON `shop`.* TO `cdc`@`%`",
    ],
)
def test_select_on_a_database_or_columns_is_enough(select: str) -> None:
    grants = f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, PROCESS ON *.* TO `cdc`@`%` {select}"
    check_privileges(grants.upper(), UpstreamConfig("db", 3306, "cdc", "x"))
