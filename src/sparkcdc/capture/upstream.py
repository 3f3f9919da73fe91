"""The upstream MySQL/MariaDB: URI parsing, connections, and setup checks that fail early."""

from __future__ import annotations

import itertools
import logging
import os
import random
import re
import socket
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pymysql

from sparkcdc import mysql_client
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
    ssl_mode: str = "preferred"
    """TLS: disabled, preferred (TLS when the server offers it), required, verify-ca, verify-identity."""
    ssl_ca: str = ""
    ssl_cert: str = ""
    ssl_key: str = ""

    @classmethod
    def from_uri(cls, uri: str) -> UpstreamConfig:
        """Parse ``mysql://user:pass@host:port/?time-zone=UTC&connect-timeout=10s&read-timeout=60s``.

        TLS: ``ssl-mode`` (disabled | preferred, the default | required | verify-ca | verify-identity),
        ``ssl-ca`` (a PEM file; implies verify-ca), ``ssl-cert`` and ``ssl-key`` (a client certificate).
        """
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
            **_tls_params(params, redact_uri(uri)),
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
        params.update(self._tls())
        params.update(kw)
        # The handshake is bounded by the connect timeout (a port that accepts and never answers),
        # the queries afterwards by the read timeout.
        wanted = params["read_timeout"]
        params["read_timeout"] = min(self.connect_timeout, wanted) if wanted else self.connect_timeout
        try:
            conn = mysql_client.connect(**params)
            conn._read_timeout = wanted
            return conn
        except (pymysql.err.InternalError, struct.error, IndexError, UnicodeDecodeError) as exc:
            # The handshake did not parse: something else listens on the port (SSH, HTTP, ...).
            raise UpstreamSetupError(
                f"upstream {self.host}:{self.port} is not a MySQL or MariaDB server: it answered "
                f"{what_answered(self.host, self.port, self.connect_timeout)}; check the port in --upstream-uri "
                "(MySQL and MariaDB listen on 3306 by default)"
            ) from exc
        except RuntimeError as exc:
            # PyMySQL without the cryptography package cannot answer caching_sha2_password's RSA exchange.
            raise UpstreamSetupError(
                f"cannot log in to upstream {self.redacted} as {self.user!r}: {exc}; install the "
                "'cryptography' package (a sparkcdc dependency) or connect over TLS (?ssl-mode=required)"
            ) from exc
        except pymysql.err.OperationalError as exc:
            code = exc.args[0] if exc.args else 0
            if code == ER_ACCESS_DENIED:
                raise UpstreamSetupError(
                    f"upstream {self.redacted} refused user {self.user!r}: {exc.args[1]}; "
                    "check the user and password in --upstream-uri"
                ) from exc
            if code in (CR_AUTH_PLUGIN_CANNOT_LOAD, CR_AUTH_PLUGIN_ERR, ER_NOT_SUPPORTED_AUTH_MODE):
                raise UpstreamSetupError(
                    f"upstream {self.redacted} could not authenticate {self.user!r}: {exc.args[-1]}; MySQL 8's "
                    "caching_sha2_password needs TLS (?ssl-mode=required) or the server's RSA key pair "
                    "(caching_sha2_password_auto_generate_rsa_keys=ON)"
                ) from exc
            if code == CR_SSL_CONNECTION_ERROR or isinstance(exc.__context__, ssl.SSLError):
                raise UpstreamSetupError(
                    f"TLS to upstream {self.host}:{self.port} failed (ssl-mode={self.ssl_mode}): {exc.args[-1]}; "
                    "check ssl-ca/ssl-cert/ssl-key in --upstream-uri, that the server has TLS on, or lower ssl-mode"
                ) from exc
            raise UpstreamUnavailable(
                f"cannot connect to upstream {self.host}:{self.port}: {exc.args[-1]}; "
                "check that the server is running and the host/port in --upstream-uri"
            ) from exc

    def _tls(self) -> dict[str, Any]:
        """PyMySQL's TLS arguments for ``ssl_mode``."""
        if self.ssl_mode == "disabled":
            return {"ssl_disabled": True}
        if self.ssl_mode == "preferred" and not (self.ssl_cert or self.ssl_key):
            return {}  # PyMySQL's default: TLS without verification when the server offers it
        ctx = ssl.create_default_context(cafile=self.ssl_ca or None)
        if self.ssl_mode in ("preferred", "required"):
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = self.ssl_mode == "verify-identity"
        if self.ssl_cert:
            ctx.load_cert_chain(self.ssl_cert, self.ssl_key or None)
        return {"ssl": ctx}


UPSTREAM_PARAMS = (
    "time-zone",
    "connect-timeout",
    "read-timeout",
    "ssl-mode",
    "ssl-ca",
    "ssl-cert",
    "ssl-key",
)
SSL_MODES = ("disabled", "preferred", "required", "verify-ca", "verify-identity")
CR_SSL_CONNECTION_ERROR = 2026
CR_AUTH_PLUGIN_CANNOT_LOAD = 2059
CR_AUTH_PLUGIN_ERR = 2061
ER_NOT_SUPPORTED_AUTH_MODE = 1251


def _tls_params(params: dict[str, str], shown: str) -> dict[str, str]:
    """The TLS fields of an upstream URI, checked: a known mode, readable files, a CA for verify-*."""
    ca, cert, key = params.get("ssl-ca", ""), params.get("ssl-cert", ""), params.get("ssl-key", "")
    mode = params.get("ssl-mode", "verify-ca" if ca else "preferred").lower()
    if mode not in SSL_MODES:
        raise ConfigError(
            f"invalid ssl-mode {params.get('ssl-mode')!r} in upstream URI {shown!r}; use one of {', '.join(SSL_MODES)}"
        )
    if mode in ("verify-ca", "verify-identity") and not ca:
        raise ConfigError(
            f"ssl-mode={mode} in upstream URI {shown!r} needs ssl-ca=<PEM file of the server's CA>"
        )
    if mode == "disabled" and (ca or cert or key):
        raise ConfigError(
            f"upstream URI {shown!r} sets ssl-mode=disabled together with ssl-ca/ssl-cert/ssl-key"
        )
    if bool(cert) != bool(key):
        raise ConfigError(
            f"upstream URI {shown!r} needs ssl-cert and ssl-key together (a client certificate)"
        )
    for name, path in (("ssl-ca", ca), ("ssl-cert", cert), ("ssl-key", key)):
        if path and not os.path.isfile(path):
            raise ConfigError(f"{name} file {path!r} in upstream URI {shown!r} does not exist")
    return {"ssl_mode": mode, "ssl_ca": ca, "ssl_cert": cert, "ssl_key": key}


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


@dataclass(frozen=True)
class ServerVersion:
    """Which server the upstream is (MySQL or MariaDB) and its version, from the handshake or VERSION()."""

    mariadb: bool
    version: tuple[int, int, int]
    text: str

    @classmethod
    def parse(cls, text: str) -> ServerVersion:
        """``8.4.3``, ``8.0.36-log``, ``10.11.6-MariaDB-log`` or the handshake's ``5.5.5-10.11.6-MariaDB``."""
        mariadb = "mariadb" in text.lower()
        core = text[6:] if mariadb and text.startswith("5.5.5-") else text
        m = re.match(r"(\d+)\.(\d+)\.(\d+)", core)
        if m is None:
            m = re.match(r"(\d+)\.(\d+)()", core)
        nums = tuple(int(g) if g else 0 for g in m.groups()) if m else (0, 0, 0)
        return cls(mariadb, nums, text)  # type: ignore[arg-type]

    @property
    def mysql8(self) -> bool:
        """MySQL 8.0 or later (binary JSON, compressed transactions, GTID sets, caching_sha2_password)."""
        return not self.mariadb and self.version >= (8, 0, 0)

    @property
    def binlog_status_sql(self) -> str:
        """The statement that shows the binlog's current file and position on this server.

        MySQL 8.2 added SHOW BINARY LOG STATUS and 8.4 removed SHOW MASTER STATUS; MariaDB and older
        MySQL servers have SHOW MASTER STATUS.
        """
        if not self.mariadb and self.version >= (8, 2, 0):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"

    def __str__(self) -> str:
        return f"{'MariaDB' if self.mariadb else 'MySQL'} {'.'.join(map(str, self.version))}"


def server_version(conn: pymysql.connections.Connection) -> ServerVersion:
    """The upstream's version from the connection's handshake (no query)."""
    text = conn.server_version
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    return ServerVersion.parse(str(text or ""))


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


_SETUP_VARIABLES = (
    "version",
    "log_bin",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "server_id",
    # MySQL only (absent on MariaDB):
    "gtid_mode",
    "enforce_gtid_consistency",
    "binlog_row_value_options",
    "binlog_transaction_compression",
)


def _set_fix(ver: ServerVersion, name: str, value: str) -> str:
    """How to set a server variable for good, in the server's own words."""
    if ver.mysql8:
        return f"run SET PERSIST {name}={value}"
    return (
        f"run SET GLOBAL {name}={value} (and set it in the server config: {name}={value} under [mysqld] "
        "in my.cnf, to keep it across restarts); sessions opened before keep their old value until they reconnect"
    )


def check_setup(
    ver: ServerVersion, variables: dict[str, str], where: str, *, need_gtid: bool = False
) -> None:
    """Raise UpstreamSetupError naming the variable, its value and the fix if the server does not suit CDC.

    ``variables``: lower-case name → value as SHOW GLOBAL VARIABLES prints it (a variable the server
    does not have is missing); ``need_gtid``: the changefeed starts from a MySQL GTID set.
    """

    def val(name: str) -> str | None:
        v = variables.get(name)
        return None if v is None else str(v).upper()

    log_bin = val("log_bin")
    if log_bin not in ("ON", "1"):
        if ver.mysql8:
            fix = (
                "binary logging is on by default in MySQL 8: remove --skip-log-bin / --disable-log-bin "
                "(or skip-log-bin in my.cnf) and restart the server"
            )
        else:
            fix = (
                "log_bin cannot be set at run time: add log_bin=mysql-bin, binlog_format=ROW, "
                "binlog_row_image=FULL and binlog_row_metadata=FULL under [mysqld] in my.cnf (or start "
                "the server with --log-bin --binlog-format=ROW --binlog-row-image=FULL "
                "--binlog-row-metadata=FULL) and restart it"
            )
        raise UpstreamSetupError(
            f"binary logging is off on upstream {where} (log_bin is {log_bin or 'OFF'}), CDC reads the binlog; {fix}"
        )
    fmt = val("binlog_format")
    if fmt is not None and fmt != "ROW":
        raise UpstreamSetupError(
            f"binlog_format is {fmt} on upstream {where} (row changes logged as statements cannot be "
            f"delivered), CDC needs ROW; {_set_fix(ver, 'binlog_format', 'ROW')}"
        )
    image = val("binlog_row_image")
    if image is not None and image != "FULL":
        raise UpstreamSetupError(
            f"binlog_row_image is {image} on upstream {where}, CDC needs FULL before/after images "
            f"(every column of every changed row); {_set_fix(ver, 'binlog_row_image', 'FULL')}"
        )
    meta = val("binlog_row_metadata")
    if meta is not None and meta != "FULL":
        raise UpstreamSetupError(
            f"binlog_row_metadata is {meta} on upstream {where}, CDC needs FULL "
            f"(column names and types in every table map); {_set_fix(ver, 'binlog_row_metadata', 'FULL')}"
        )
    options = val("binlog_row_value_options")
    if options is not None and "PARTIAL_JSON" in options:
        raise UpstreamSetupError(
            f"binlog_row_value_options is PARTIAL_JSON on upstream {where}: JSON updates are logged as diffs "
            "(PARTIAL_UPDATE_ROWS_EVENT), which sparkcdc does not apply; run SET PERSIST binlog_row_value_options=''"
        )
    if need_gtid:
        mode = val("gtid_mode")
        if mode is None:
            raise UpstreamSetupError(
                f"upstream {where} ({ver}) has no MySQL GTIDs: --start-gtid takes a MariaDB GTID position "
                "DOMAIN-SERVER-SEQ there, or use --start-position FILE:POS"
            )
        if mode != "ON":
            raise UpstreamSetupError(
                f"gtid_mode is {mode} on upstream {where}: a start from a MySQL GTID set needs gtid_mode=ON "
                "(transactions without a GTID could be skipped); run SET PERSIST enforce_gtid_consistency=ON, "
                "then SET PERSIST gtid_mode=OFF_PERMISSIVE, ON_PERMISSIVE, ON one step at a time, or start "
                "from --start-position FILE:POS instead"
            )


def check_upstream(
    up: UpstreamConfig, *, need_gtid: bool = False, captures: Callable[[str, str], bool] | None = None
) -> dict[str, Any]:
    """Verify the upstream is fit for CDC; raise UpstreamSetupError naming the fix.

    ``need_gtid``: the changefeed starts from a MySQL GTID set (gtid_mode must be ON).
    ``captures``: the changefeed's table filter (``TableFilter.match``): a sequence or a
    system-versioned table it captures is refused (``check_unsupported_tables``).
    """
    conn = up.connect()
    try:
        ver = server_version(conn)
        with conn.cursor() as cur:
            names = ", ".join(f"'{n}'" for n in _SETUP_VARIABLES)
            cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
            variables = {str(r[0]).lower(): str(r[1]) for r in cur.fetchall()}
        facts: dict[str, Any] = {
            "version": variables.get("version", ver.text),
            "server_id": int(variables.get("server_id", "0") or 0),
            "mariadb": ver.mariadb,
            "server": str(ver),
            "row_metadata": str(variables.get("binlog_row_metadata", "UNSUPPORTED")).upper(),
            "gtid_mode": variables.get("gtid_mode"),
            "transaction_compression": variables.get("binlog_transaction_compression"),
        }
        check_setup(ver, variables, f"{up.host}:{up.port}", need_gtid=need_gtid)
        with conn.cursor() as cur:
            cur.execute("SHOW GRANTS FOR CURRENT_USER()")
            grants = " ".join(str(r[0]).upper() for r in cur.fetchall())
        check_privileges(grants, up)
        if captures is not None and ver.mariadb:
            check_unsupported_tables(unsupported_tables(conn), captures, f"{up.host}:{up.port}")
        return facts
    finally:
        conn.close()


UNSUPPORTED_TABLE_TYPES = {"SEQUENCE": "sequence", "SYSTEM VERSIONED": "system-versioned table"}
"""MariaDB's information_schema.TABLES.TABLE_TYPE of tables whose rows sparkcdc does not deliver yet.

A SEQUENCE is a one-row table that NEXTVAL rewrites; a system-versioned table logs history rows and
has hidden row_start/row_end columns. Neither maps onto the changes of an ordinary table.
"""


def unsupported_tables(conn: pymysql.connections.Connection) -> list[tuple[str, str, str]]:
    """(database, table, kind) of every sequence and system-versioned table on a MariaDB server."""
    types = ", ".join(f"'{t}'" for t in UNSUPPORTED_TABLE_TYPES)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES "
            f"WHERE TABLE_TYPE IN ({types}) ORDER BY TABLE_SCHEMA, TABLE_NAME"
        )
        return [(str(r[0]), str(r[1]), UNSUPPORTED_TABLE_TYPES[str(r[2])]) for r in cur.fetchall()]


def exclusion_rule(schema: str, table: str) -> str:
    """The ``[filter] rules`` entry that leaves one table out (names quoted when they need it)."""

    def part(name: str) -> str:
        if re.fullmatch(r"[A-Za-z0-9_$]+", name):
            return name
        return "`" + name.replace("`", "``") + "`"

    return f"!{part(schema)}.{part(table)}"


_SHOWN_TABLES = 10
"""How many refused tables a message names."""


def check_unsupported_tables(
    tables: list[tuple[str, str, str]], captures: Callable[[str, str], bool], where: str
) -> None:
    """Raise ConfigError naming the sequences and system-versioned tables the filter captures."""
    hit = [(s, t, kind) for s, t, kind in tables if captures(s, t)]
    if not hit:
        return
    shown = hit[:_SHOWN_TABLES]
    names = ", ".join(f"{kind} {quote_name(s, t)}" for s, t, kind in shown)
    rules = ", ".join(repr(exclusion_rule(s, t)) for s, t, _ in shown)
    more = f" and {len(hit) - len(shown)} more" if len(hit) > len(shown) else ""
    raise ConfigError(
        f"the changefeed's table filter captures {names}{more} on upstream {where}: sparkcdc does not "
        f"deliver the rows of sequences and system-versioned tables yet; exclude them in [filter] rules "
        f"(add {rules}{more and ' and the others'})"
    )


def quote_name(schema: str, table: str) -> str:
    """``db.table`` as a message shows it (backquoted)."""
    return "`" + schema.replace("`", "``") + "`.`" + table.replace("`", "``") + "`"


def what_answered(host: str, port: int, timeout: float) -> str:
    """What a non-MySQL server sends first on connect: its first line, quoted, or its first bytes in hex."""
    try:
        with socket.create_connection((host, port), timeout=min(timeout, 5.0)) as sock:
            sock.settimeout(min(timeout, 5.0))
            data = sock.recv(256)
    except OSError as exc:
        return f"something sparkcdc cannot read ({exc.strerror or type(exc).__name__})"
    line = data.split(b"\n", 1)[0].rstrip(b"\r")[:80]
    if line and all(32 <= b < 127 for b in line):
        text = line.decode("ascii")
        kind = " (an SSH server)" if text.startswith("SSH-") else ""
        return f"{text!r}{kind}"
    return f"bytes {data[:16].hex(' ')}" if data else "nothing"


def check_privileges(grants: str, up: UpstreamConfig) -> None:
    """Raise UpstreamSetupError if ``grants`` (SHOW GRANTS, upper case) lack a replication privilege or SELECT.

    The same on MySQL and MariaDB: REPLICATION SLAVE (MySQL's alias REPLICATION REPLICA) to read the
    binlog, REPLICATION CLIENT (MariaDB's BINLOG MONITOR; SUPER) for SHOW MASTER STATUS / SHOW BINARY
    LOG STATUS and SHOW BINARY LOGS. Privileges granted through a MySQL role are not listed by SHOW
    GRANTS unless the role is the user's default; grant them to the user directly.
    """
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
    # SELECT (on *.* or on the captured databases) reads table definitions and snapshot rows.
    granted = (g.partition(" ON ")[0] for g in re.split(r"(?:^|\s)GRANT\s", grants) if " ON " in g)
    if not any(
        p.split("(")[0].strip() in ("SELECT", "ALL PRIVILEGES", "ALL") for g in granted for p in g.split(",")
    ):
        missing.append("SELECT")
    if missing:
        fix = missing if "SELECT" in missing else [*missing, "SELECT"]
        raise UpstreamSetupError(
            f"user {up.user!r} on upstream {up.host}:{up.port} lacks {', '.join(missing)}; "
            f"run GRANT {', '.join(fix)} ON *.* TO {up.user!r}@'%'"
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


def master_status(conn: pymysql.connections.Connection) -> tuple[str, int]:
    """The current end of the binlog (a transaction boundary).

    Asked with the statement the server has (``ServerVersion.binlog_status_sql``): SHOW BINARY LOG
    STATUS on MySQL 8.2+ (8.4 removed SHOW MASTER STATUS), SHOW MASTER STATUS elsewhere.
    """
    sql = server_version(conn).binlog_status_sql
    try:
        row = query_one(conn, sql)
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
            user = getattr(conn, "user", "the CDC user")
            if isinstance(user, bytes):
                user = user.decode("utf-8", "replace")
            raise UpstreamSetupError(
                f"{sql} was refused: {exc.args[-1]}; run GRANT REPLICATION SLAVE, "
                f"REPLICATION CLIENT ON *.* TO {user!r}@'%'"
            ) from exc
        raise
    if not row:
        raise UpstreamSetupError(f"{sql} returned nothing: binary logging is off upstream")
    return str(row[0]), int(row[1])


def binary_logs(conn: pymysql.connections.Connection) -> list[tuple[str, int]]:
    """The binlog files the server still has, oldest first, with their sizes."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(str(r[0]), int(r[1])) for r in cur.fetchall()]
