"""Downstream MySQL/MariaDB/TiDB connections: parameters, session setup and error mapping.

``ConnParams`` is a small picklable value: the driver builds it from the sink
URI and every executor opens its own connections from it. ``connect`` sets up
the session the way TiCDC's MySQL sink does (utf8mb4, READ COMMITTED,
foreign_key_checks=0, a relaxed sql_mode so zero dates and explicit zeros in
AUTO_INCREMENT columns replicate, the changefeed time zone). ``classify``
maps a driver error onto the transient/permanent sparkcdc errors, in one place.
"""

from __future__ import annotations

import base64
import binascii
import logging
import ssl as ssl_module
from dataclasses import dataclass, replace
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from sparkcdc import mysql_client
from sparkcdc.errors import ConfigError, SinkError, SinkUnavailable, SparkCdcError

log = logging.getLogger(__name__)

# MySQL error numbers the applier reacts to.
ER_ACCESS_DENIED = 1045
ER_BAD_DB = 1049
ER_DUP_ENTRY = 1062
ER_UNKNOWN_TIME_ZONE = 1298
ER_UNKNOWN_SYSTEM_VARIABLE = 1193

# A connection-level fault or a lock conflict: retrying on a fresh connection can succeed.
TRANSIENT_CODES = frozenset(
    {
        1040,  # too many connections
        1053,  # server shutdown in progress
        1205,  # lock wait timeout
        1213,  # deadlock
        1927,  # connection was killed (MariaDB)
        2003,  # can't connect
        2006,  # server has gone away
        2013,  # lost connection during query
        2014,  # commands out of sync (a broken connection)
        2055,  # lost connection at handshake
        4031,  # client disconnected by server (MySQL 8)
        8022,  # TiDB: write conflict in optimistic txn
        9007,  # TiDB: write conflict
    }
)

# sql_mode flags TiCDC removes/adds downstream (dm/pkg/utils AdjustSQLModeCompatible), so
# zero dates, invalid dates and explicit 0 in AUTO_INCREMENT columns replicate as they are.
# IGNORE_SPACE is deliberately not enabled: MySQL/MariaDB then treat built-in function
# names as reserved words, which breaks replaying upstream DDL such as ``CREATE TABLE count``.
_SQL_MODE_DISABLE = frozenset(
    {
        "NO_ZERO_IN_DATE",
        "NO_ZERO_DATE",
        "ERROR_FOR_DIVISION_BY_ZERO",
        "NO_AUTO_CREATE_USER",
        "STRICT_TRANS_TABLES",
        "STRICT_ALL_TABLES",
    }
)
_SQL_MODE_ENABLE = ("NO_AUTO_VALUE_ON_ZERO", "ALLOW_INVALID_DATES")


def adjust_sql_mode(mode: str, enable: tuple[str, ...] = _SQL_MODE_ENABLE) -> str:
    """The downstream sql_mode derived from the server's default (see the module docstring)."""
    flags = [f for f in mode.split(",") if f and f.upper() not in _SQL_MODE_DISABLE]
    for f in enable:
        if f not in (x.upper() for x in flags):
            flags.append(f)
    return ",".join(flags)


def ddl_sql_mode(server_default: str) -> str:
    """The sql_mode of a DDL whose upstream mode is unknown (TiCDC's formats do not carry it): the
    server's default, relaxed as for rows, but without NO_AUTO_VALUE_ON_ZERO, which the upstream
    session did not have unless its default did (an AUTO_INCREMENT column added over 0 values
    numbers them there)."""
    return adjust_sql_mode(server_default, ("ALLOW_INVALID_DATES",))


def mysql_time_zone(tz: str) -> str:
    """The session ``time_zone`` value for a changefeed time zone (UTC → ``+00:00``)."""
    if tz.upper() in ("UTC", "ETC/UTC", "Z", "GMT", "ETC/GMT", "UCT"):
        return "+00:00"
    return tz


@dataclass(frozen=True)
class ConnParams:
    """Where and how to connect downstream (picklable; nothing opens until ``connect``)."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""
    database: str | None = None
    extra_hosts: tuple[tuple[str, int], ...] = ()
    """Further ``host:port`` pairs tried in order when the first cannot be reached."""
    time_zone: str | None = "+00:00"
    """Session time zone for TIMESTAMP values; None keeps the downstream's own."""
    connect_timeout: float = 120.0
    read_timeout: float | None = 120.0
    write_timeout: float | None = 120.0
    ssl: bool = False
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    tidb_txn_mode: str | None = None
    """``optimistic``/``pessimistic``; set only when the downstream knows ``tidb_txn_mode``."""
    multi_statements: bool = True
    try_base64_password: bool = True
    """On "access denied", retry with the base64-decoded password (TiCDC does the same)."""

    def redacted(self) -> str:
        """``user@host:port`` for messages (never the password)."""
        return f"{self.user}@{self.host}:{self.port}"

    def with_password(self, password: str) -> ConnParams:
        """A copy with another password."""
        return replace(self, password=password, try_base64_password=False)


def _ssl_context(p: ConnParams) -> ssl_module.SSLContext | None:
    if not (p.ssl or p.ssl_ca):
        return None
    ctx = (
        ssl_module.create_default_context(cafile=p.ssl_ca)
        if p.ssl_ca
        else ssl_module.create_default_context()
    )
    if not p.ssl_ca:
        # +ssl without a CA: encrypt, but there is nothing to verify the server against.
        ctx.check_hostname = False
        ctx.verify_mode = ssl_module.CERT_NONE
    if p.ssl_cert:
        ctx.load_cert_chain(p.ssl_cert, p.ssl_key)
    return ctx


def _decoded_password(password: str) -> str | None:
    try:
        raw = base64.b64decode(password, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if text and text != password else None


def _open(p: ConnParams, host: str, port: int, password: str, autocommit: bool) -> pymysql.Connection:
    kwargs: dict[str, Any] = dict(
        host=host,
        port=port,
        user=p.user,
        password=password,
        database=p.database,
        charset="utf8mb4",
        autocommit=autocommit,
        connect_timeout=p.connect_timeout,
        # The handshake is bounded by the connect timeout too (a port that accepts and never
        # answers); the statements afterwards by the read timeout.
        read_timeout=min(p.connect_timeout, p.read_timeout) if p.read_timeout else p.connect_timeout,
        write_timeout=p.write_timeout,
        client_flag=CLIENT.MULTI_STATEMENTS if p.multi_statements else 0,
    )
    ctx = _ssl_context(p)
    if ctx is not None:
        kwargs["ssl"] = ctx
    conn = mysql_client.connect(**kwargs)
    conn._read_timeout = p.read_timeout
    return conn


def _setup_session(conn: pymysql.Connection, p: ConnParams) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode")
        row = cur.fetchone()
        mode = adjust_sql_mode(str(row[0]) if row and row[0] is not None else "")
        cur.execute("SET SESSION sql_mode = %s, SESSION foreign_key_checks = 0", (mode,))
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        try:
            # Rows the upstream committed are applied as they are, as a MariaDB replica applies row
            # events: a CHECK constraint is the upstream's to enforce (MariaDB only; MySQL has none).
            cur.execute("SET SESSION check_constraint_checks = 0")
        except pymysql.err.MySQLError as exc:
            if not (exc.args and exc.args[0] == ER_UNKNOWN_SYSTEM_VARIABLE):
                raise
        if p.time_zone:
            try:
                cur.execute("SET SESSION time_zone = %s", (p.time_zone,))
            except pymysql.err.MySQLError as exc:
                if exc.args and exc.args[0] == ER_UNKNOWN_TIME_ZONE:
                    raise ConfigError(
                        f"the downstream {p.redacted()} does not know time zone {p.time_zone!r}: load its "
                        "time zone tables (mysql_tzinfo_to_sql) or use an offset such as time-zone=+08:00"
                    ) from exc
                raise
        if p.tidb_txn_mode:
            try:
                cur.execute("SET SESSION tidb_txn_mode = %s", (p.tidb_txn_mode,))
            except pymysql.err.MySQLError as exc:
                # Not TiDB: the variable does not exist and the option has no meaning there.
                if not (exc.args and exc.args[0] == ER_UNKNOWN_SYSTEM_VARIABLE):
                    raise


def connect(p: ConnParams, *, autocommit: bool = False) -> tuple[pymysql.Connection, ConnParams]:
    """Open and set up a session; returns the connection and the params that worked.

    Hosts are tried in order; a wrong password is retried once base64-decoded.
    Raises ``SinkError`` for bad credentials and ``SinkUnavailable`` when no host answers.
    """
    hosts = [(p.host, p.port), *p.extra_hosts]
    last: BaseException | None = None
    for host, port in hosts:
        try:
            try:
                conn = _open(p, host, port, p.password, autocommit)
                used = p
            except pymysql.err.OperationalError as exc:
                decoded = _decoded_password(p.password) if p.try_base64_password else None
                if not (exc.args and exc.args[0] == ER_ACCESS_DENIED and decoded is not None):
                    raise
                conn = _open(p, host, port, decoded, autocommit)
                used = p.with_password(decoded)
            if (host, port) != (p.host, p.port):
                used = replace(used, host=host, port=port)
            try:
                _setup_session(conn, used)
            except BaseException:
                conn.close()
                raise
            return conn, used
        except pymysql.err.MySQLError as exc:
            err = classify(exc, f"connecting to the downstream {p.user}@{host}:{port}")
            if not err.transient:
                raise err from exc
            last = exc
    assert last is not None
    raise classify(last, f"connecting to the downstream {p.redacted()}") from last


def error_code(exc: BaseException) -> int | None:
    """The MySQL error number of a driver error, if it has one."""
    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return int(exc.args[0])
    return None


def classify(exc: BaseException, doing: str) -> SparkCdcError:
    """Map a driver error onto SinkUnavailable (retry) or SinkError (fail the changefeed)."""
    if isinstance(exc, SparkCdcError):
        return exc
    code = error_code(exc)
    detail = f"{type(exc).__name__}: {exc}"
    if code == ER_ACCESS_DENIED:
        return SinkError(
            f"{doing}: access denied ({detail}); check the user and password in the sink URI "
            "(the password may also be given base64-encoded)"
        )
    if (
        isinstance(exc, pymysql.err.InterfaceError)
        or code in TRANSIENT_CODES
        or (isinstance(exc, pymysql.err.OperationalError) and code is not None and code >= 2000)
    ):
        return SinkUnavailable(f"{doing}: the downstream is unavailable ({detail})")
    if isinstance(exc, (OSError, TimeoutError)):
        return SinkUnavailable(f"{doing}: network error ({detail})")
    return SinkError(f"{doing}: the downstream refused the statement ({detail})")
