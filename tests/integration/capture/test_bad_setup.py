"""Bad upstream setups fail fast with a message that names the problem and the fix; nothing hangs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import BinlogStream
from sparkcdc.capture.reader import RowReader
from sparkcdc.capture.start import head_offset, offset_for_position, offset_for_ts, query_tso
from sparkcdc.capture.upstream import UpstreamConfig, check_upstream
from sparkcdc.errors import BinlogPurgedError, SparkCdcError, UpstreamSetupError, UpstreamUnavailable
from sparkcdc.model.ts import physical_ms
from sparkcdc.services.common import free_port, wait_until
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DEADLINE_S = 15.0
"""Every bad setup must be reported within this many seconds."""


@pytest.fixture(scope="module")
def private_db() -> Iterator[LocalMariaDB]:
    """A server of this module's own: its global settings, users and binlog files change here."""
    with LocalMariaDB() as db:
        yield db


def _fails_fast(
    kind: type[SparkCdcError], pattern: str, action: Callable[[], Any]
) -> pytest.ExceptionInfo[SparkCdcError]:
    t0 = time.monotonic()
    with pytest.raises(kind, match=pattern) as info:
        action()
    elapsed = time.monotonic() - t0
    assert elapsed < DEADLINE_S, f"took {elapsed:.1f}s to report {info.value}"
    return info


def _read_all(up: UpstreamConfig, start: Offset, *, blocking: bool = False) -> list[object]:
    return list(RowReader(up, start, blocking=blocking, heartbeat_s=0.5).events())


def test_binlog_off() -> None:
    with LocalMariaDB(binlog=False) as db:
        up = UpstreamConfig.from_uri(db.uri)
        _fails_fast(UpstreamSetupError, r"binary logging is off.*--log-bin", lambda: check_upstream(up))
        _fails_fast(UpstreamSetupError, r"binary logging is off", lambda: query_tso(up))


@pytest.mark.parametrize(
    ("variable", "bad", "pattern"),
    [
        (
            "binlog_format",
            "STATEMENT",
            r"binlog_format is STATEMENT.*needs ROW.*SET GLOBAL binlog_format=ROW",
        ),
        ("binlog_format", "MIXED", r"binlog_format is MIXED.*needs ROW.*SET GLOBAL binlog_format=ROW"),
        (
            "binlog_row_image",
            "MINIMAL",
            r"binlog_row_image is MINIMAL.*FULL.*SET GLOBAL binlog_row_image=FULL",
        ),
        (
            "binlog_row_metadata",
            "MINIMAL",
            r"binlog_row_metadata is MINIMAL.*FULL.*SET GLOBAL binlog_row_metadata=FULL",
        ),
    ],
)
def test_binlog_settings_not_fit_for_cdc(
    private_db: LocalMariaDB, variable: str, bad: str, pattern: str
) -> None:
    up = UpstreamConfig.from_uri(private_db.uri)
    [(good,)] = private_db.query(f"SELECT @@GLOBAL.{variable}")
    private_db.execute(f"SET GLOBAL {variable} = '{bad}'")
    try:
        # check_upstream opens a new connection, which sees the new global value.
        _fails_fast(UpstreamSetupError, pattern, lambda: check_upstream(up))
    finally:
        private_db.execute(f"SET GLOBAL {variable} = '{good}'")
    assert check_upstream(up)["row_metadata"] == "FULL"


def test_user_without_replication_privileges(private_db: LocalMariaDB) -> None:
    private_db.execute(
        "DROP USER IF EXISTS 'cdc_ro'@'%'",
        "CREATE USER 'cdc_ro'@'%' IDENTIFIED BY 'ro-pass'",
        "GRANT SELECT ON *.* TO 'cdc_ro'@'%'",
    )
    try:
        up = UpstreamConfig.from_uri(f"mysql://cdc_ro:ro-pass@127.0.0.1:{private_db.port}/")
        _fails_fast(
            UpstreamSetupError,
            r"'cdc_ro'.*lacks REPLICATION SLAVE, REPLICATION CLIENT.*GRANT REPLICATION SLAVE, REPLICATION CLIENT",
            lambda: check_upstream(up),
        )
        # Skipping the check does not turn the refusal into a retried (transient) fault either.
        _fails_fast(
            UpstreamSetupError, r"REPLICATION SLAVE", lambda: _read_all(up, Offset("mysql-bin.000001", 4, 0))
        )
        _fails_fast(UpstreamSetupError, r"BINLOG MONITOR|REPLICATION CLIENT", lambda: query_tso(up))
    finally:
        private_db.execute("DROP USER IF EXISTS 'cdc_ro'@'%'")


def test_wrong_password(private_db: LocalMariaDB) -> None:
    up = UpstreamConfig.from_uri(f"mysql://root:not-the-password@127.0.0.1:{private_db.port}/")
    info = _fails_fast(
        UpstreamSetupError, r"refused user 'root'.*check the user and password", lambda: check_upstream(up)
    )
    assert "not-the-password" not in str(info.value), "the message must not echo the password"
    _fails_fast(UpstreamSetupError, r"check the user and password", lambda: query_tso(up))


def test_unreachable_port() -> None:
    port = free_port()  # nobody listens here
    up = UpstreamConfig.from_uri(f"mysql://root:@127.0.0.1:{port}/?connect-timeout=3")
    info = _fails_fast(
        UpstreamUnavailable,
        rf"cannot connect to upstream 127.0.0.1:{port}.*server is running",
        lambda: check_upstream(up),
    )
    assert info.value.transient
    _fails_fast(
        UpstreamUnavailable, r"cannot connect", lambda: _read_all(up, Offset("mysql-bin.000001", 4, 0))
    )
    _fails_fast(UpstreamUnavailable, r"cannot connect", lambda: query_tso(up))


def _purge_to(db: LocalMariaDB, keep_from: str) -> None:
    """PURGE until the server really dropped the older files (it keeps them until its binlog checkpoint moves)."""

    def purged() -> bool:
        db.execute(f"PURGE BINARY LOGS TO '{keep_from}'")
        return db.query("SHOW BINARY LOGS")[0][0] == keep_from

    wait_until(purged, timeout=30, what=f"PURGE BINARY LOGS TO '{keep_from}'", interval=0.3)


def test_start_position_in_a_purged_binlog_file(private_db: LocalMariaDB) -> None:
    up = UpstreamConfig.from_uri(private_db.uri)
    private_db.execute(
        "CREATE DATABASE IF NOT EXISTS purge_db",
        "CREATE TABLE IF NOT EXISTS purge_db.t (id INT PRIMARY KEY)",
        "REPLACE INTO purge_db.t VALUES (1)",
    )
    old = head_offset(up)
    private_db.execute("REPLACE INTO purge_db.t VALUES (2)")
    old_ts = head_offset(up).ts
    # The kept file must start in a later second than old_ts: binlog headers have whole seconds, and a
    # file created in the same second as a purged one cannot know where the purged chain ended.
    wait_until(
        lambda: int(private_db.query("SELECT UNIX_TIMESTAMP()")[0][0]) * 1000 > physical_ms(old_ts),
        timeout=10,
        what="the upstream clock to pass old_ts's second",
    )
    private_db.execute("FLUSH BINARY LOGS", "REPLACE INTO purge_db.t VALUES (3)", "FLUSH BINARY LOGS")
    keep = head_offset(up).file
    private_db.execute("REPLACE INTO purge_db.t VALUES (4)")
    _purge_to(private_db, keep)
    assert old.file not in [r[0] for r in private_db.query("SHOW BINARY LOGS")]

    fix = r"no longer in the upstream binlog.*--start-ts"
    _fails_fast(BinlogPurgedError, fix, lambda: _read_all(up, old))
    _fails_fast(BinlogPurgedError, fix, lambda: _read_all(up, old, blocking=True))
    _fails_fast(BinlogPurgedError, r"purged|no longer", lambda: offset_for_position(up, old.file, old.pos))
    _fails_fast(
        BinlogPurgedError,
        rf"start-ts {old_ts} is older than the oldest binlog file.*{keep}.*later --start-ts",
        lambda: offset_for_ts(up, old_ts),
    )
    # A GTID whose transactions were purged is refused the same way.
    [(gtid_pos,)] = private_db.query("SELECT @@GLOBAL.gtid_binlog_pos")
    domain, server, _seq = str(gtid_pos).split("-")
    with BinlogStream(up, "", 4, gtid=f"{domain}-{server}-1", blocking=False) as stream:
        _fails_fast(BinlogPurgedError, r"no longer in the upstream binlog", lambda: list(stream.events()))
    # Starting at a ts the remaining files still cover works.
    assert offset_for_ts(up, head_offset(up).ts) == head_offset(up)
