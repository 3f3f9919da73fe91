"""The upstream MySQL/MariaDB: URI parsing, connections, and setup checks that fail early."""

from __future__ import annotations

import itertools
import logging
import os
import random
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pymysql

from sparkcdc.config.replica import is_time_zone
from sparkcdc.config.uri import parse_duration, redact_uri, unencoded_userinfo
from sparkcdc.errors import ConfigError, UpstreamSetupError, UpstreamUnavailable

log = logging.getLogger(__name__)

# MariaDB error codes that mean "the credentials are wrong" vs "cannot reach it".
ER_ACCESS_DENIED = 1045
ER_SPECIFIC_ACCESS_DENIED = 1227
CR_CONN_HOST_ERROR = 2003
CR_UNKNOWN_HOST = 2005
CR_SERVER_LOST = 2013
CR_SERVER_GONE = 2006


@dataclass(frozen=True)
class UpstreamConfig:
    """Connection facts of the upstream database (picklable, sent to Spark executors)."""

    host: str
    port: int
    user: str
    password: str
    time_zone: str = "UTC"
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    """Seconds a query waits for the server's answer (a port that accepts but never answers)."""
    uri: str = ""

    @classmethod
    def from_uri(cls, uri: str) -> UpstreamConfig:
        """Parse ``mysql://user:pass@host:port/?time-zone=UTC&connect-timeout=10s&read-timeout=60s``."""
        shape = "use mysql://user:password@host:port/ (percent-encode @ : / ? # in the password)"
        if unencoded_userinfo(uri):
            raise ConfigError(
                f"invalid upstream URI {redact_uri(uri)!r}: its user or password holds / ? or #; {shape}"
            )
        try:
            p = urlsplit(uri)
            port = 3306 if p.port is None else p.port
        except ValueError as exc:
            text = str(exc)
            reason = (
                "bad IPv6 host"
                if "IPv6" in text
                else "port out of range 1-65535"
                if "out of range" in text
                else "the port is not a number"
            )
            raise ConfigError(f"invalid upstream URI {redact_uri(uri)!r} ({reason}); {shape}") from exc
        if p.scheme not in ("mysql", "mariadb", "tidb"):
            raise ConfigError(f"invalid upstream URI scheme {p.scheme!r} in {redact_uri(uri)!r}; {shape}")
        if not p.hostname:
            raise ConfigError(f"upstream URI {redact_uri(uri)!r} has no host; {shape}")
        if not 1 <= port <= 65535:
            raise ConfigError(f"upstream URI {redact_uri(uri)!r}: port {port} is out of range 1-65535")
        params = dict(parse_qsl(p.query))
        unknown = set(params) - set(UPSTREAM_PARAMS)
        if unknown:
            raise ConfigError(
                f"unknown upstream URI parameter(s) {sorted(unknown)} in {redact_uri(uri)!r}; "
                f"supported: {', '.join(UPSTREAM_PARAMS)}"
            )
        return cls(
            host=p.hostname,
            port=port,
            user=unquote(p.username or "root"),
            password=unquote(p.password or ""),
            time_zone=_time_zone(params.get("time-zone", "UTC")),
            connect_timeout=_timeout(params, "connect-timeout", 10.0),
            read_timeout=_timeout(params, "read-timeout", 60.0),
            uri=uri,
        )

    @property
    def redacted(self) -> str:
        """The URI without its password."""
        return f"mysql://{self.user}:xxxxx@{self.host}:{self.port}/"

    def connect(self, **kw: Any) -> pymysql.connections.Connection:
        """A new connection; maps connection failures to clear sparkcdc errors."""
        params: dict[str, Any] = dict(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            autocommit=True,
            charset="utf8mb4",
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            write_timeout=self.read_timeout,
            init_command="SET time_zone = '+00:00'",
        )
        params.update(kw)
        # The handshake is bounded by the connect timeout (a port that accepts and never answers),
        # the queries afterwards by the read timeout.
        wanted = params["read_timeout"]
        params["read_timeout"] = min(self.connect_timeout, wanted) if wanted else self.connect_timeout
        try:
            conn = pymysql.connect(**params)
            conn._read_timeout = wanted
            return conn
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            if code == ER_ACCESS_DENIED:
                raise UpstreamSetupError(
                    f"upstream {self.redacted} refused user {self.user!r}: {exc.args[1]}; "
                    "check the user and password in --upstream-uri"
                ) from exc
            raise UpstreamUnavailable(
                f"cannot connect to upstream {self.host}:{self.port}: {exc.args[-1]}; "
                "check that the server is running and the host/port in --upstream-uri"
            ) from exc


UPSTREAM_PARAMS = ("time-zone", "connect-timeout", "read-timeout")


def _timeout(params: dict[str, str], key: str, default: float) -> float:
    """A timeout parameter in seconds: a number (``10``) or a duration (``10s``, ``500ms``)."""
    text = params.get(key)
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text, key)
        except ConfigError:
            seconds = -1.0
    if not 0 < seconds <= 86400:
        raise ConfigError(
            f"invalid value {text!r} for upstream URI parameter {key!r}: expected seconds (10) or a "
            "duration (10s, 500ms) between 1ms and 24h"
        )
    return seconds


def _time_zone(name: str) -> str:
    """A time zone the upstream URI names: an IANA name (Asia/Shanghai), SYSTEM or an offset (+08:00)."""
    if name.upper() != "SYSTEM" and not is_time_zone(name):
        raise ConfigError(
            f"unknown time zone {name!r} in the upstream URI parameter 'time-zone'; use an IANA name "
            "such as UTC or Asia/Shanghai, or an offset such as +08:00"
        )
    return name


_server_ids = itertools.count(random.randint(1_000_000, 2_000_000_000))


def new_server_id() -> int:
    """A fresh replication server_id: MariaDB drops an older connection reusing one."""
    return (next(_server_ids) ^ (os.getpid() << 8)) % 4_000_000_000 + 100


def query_one(conn: pymysql.connections.Connection, sql: str) -> tuple[Any, ...] | None:
    """The first row of a query."""
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
        return tuple(row) if row is not None else None


def check_upstream(up: UpstreamConfig) -> dict[str, Any]:
    """Verify the upstream is fit for CDC; raise UpstreamSetupError naming the fix."""
    conn = up.connect()
    try:
        facts: dict[str, Any] = {}
        row = query_one(
            conn,
            "SELECT @@version, @@log_bin, @@binlog_format, @@binlog_row_image, @@server_id",
        )
        assert row is not None
        version, log_bin, fmt, image, server_id = row
        facts.update(version=version, server_id=server_id)
        facts["mariadb"] = "mariadb" in str(version).lower()
        if not int(log_bin):
            raise UpstreamSetupError(
                f"binary logging is off on upstream {up.host}:{up.port}; "
                "start the server with --log-bin --binlog-format=ROW --binlog-row-image=FULL"
            )
        if str(fmt).upper() != "ROW":
            raise UpstreamSetupError(
                f"binlog_format is {fmt} on upstream {up.host}:{up.port}, CDC needs ROW; "
                "run SET GLOBAL binlog_format=ROW (and set it in the server config)"
            )
        if str(image).upper() != "FULL":
            raise UpstreamSetupError(
                f"binlog_row_image is {image} on upstream {up.host}:{up.port}, CDC needs FULL "
                "before/after images; run SET GLOBAL binlog_row_image=FULL"
            )
        meta = None
        try:
            meta = query_one(conn, "SELECT @@binlog_row_metadata")
        except pymysql.err.MySQLError:
            meta = None
        facts["row_metadata"] = str(meta[0]).upper() if meta else "UNSUPPORTED"
        if meta and str(meta[0]).upper() != "FULL":
            raise UpstreamSetupError(
                f"binlog_row_metadata is {meta[0]} on upstream {up.host}:{up.port}, CDC needs FULL "
                "(column names and types in every table map); run SET GLOBAL binlog_row_metadata=FULL"
            )
        _check_privileges(conn, up)
        return facts
    finally:
        conn.close()


def _check_privileges(conn: pymysql.connections.Connection, up: UpstreamConfig) -> None:
    with conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        grants = " ".join(str(r[0]).upper() for r in cur.fetchall())
    if "ALL PRIVILEGES ON *.*" in grants:
        return
    missing = [
        p
        for p, alts in (
            ("REPLICATION SLAVE", ("REPLICATION SLAVE", "REPLICATION REPLICA")),
            ("REPLICATION CLIENT", ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER")),
        )
        if not any(a in grants for a in alts)
    ]
    if missing:
        raise UpstreamSetupError(
            f"user {up.user!r} on upstream {up.host}:{up.port} lacks {', '.join(missing)}; "
            f"run GRANT {', '.join(missing)}, SELECT ON *.* TO {up.user!r}@'%'"
        )
    if "PROCESS" not in grants:
        log.warning(
            "user %r on upstream %s:%d lacks PROCESS (information_schema.INNODB_TRX): the checkpoint of an "
            "idle changefeed stays at its last transaction; run GRANT PROCESS ON *.* TO %r@'%%'",
            up.user,
            up.host,
            up.port,
            up.user,
        )
