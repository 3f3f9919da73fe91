"""The MySQL sink's settings: the sink URI merged with ``[sink.mysql-config]`` (URI wins).

``mysql[+ssl]|tidb[+ssl]://user:pass@host:port[,host:port]/?worker-count=16&max-txn-row=256&…``
with TiCDC's parameters (spec §6, ``tiflow:pkg/sink/mysql/config.go``), declared in
``OPTIONS``: every value is checked; unknown parameters and ``protocol`` are refused.
TiCDC's hard maxima are limits: a larger value is refused (TiCDC lowers it with a
warning). As in TiCDC, the port defaults to 4000 and the user to ``root``. One parameter is sparkcdc's own:
``progress-table=true|false`` (default true) keeps per-table progress downstream
so that a replay after a restart is exactly-once (see ``applier``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcdc.config.options import Kind, Option, OptionTable, Source, not_supported, resolve
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import SinkURIError
from sparkcdc.sink.mysql.connection import ConnParams, mysql_time_zone

SCHEMES = ("mysql", "mysql+ssl", "tidb", "tidb+ssl")
DEFAULT_PORT = 4000
DEFAULT_WORKER_COUNT = 16
DEFAULT_MAX_TXN_ROW = 256
DEFAULT_MAX_MULTI_UPDATE_ROW = 40
DEFAULT_MAX_MULTI_UPDATE_ROW_SIZE = 1024
MAX_WORKER_COUNT = 1024
MAX_MAX_TXN_ROW = 2048
MAX_MAX_MULTI_UPDATE_ROW = 256
MAX_MAX_MULTI_UPDATE_ROW_SIZE = 8192
DEFAULT_TIMEOUT = 120.0
TXN_MODES = ("optimistic", "pessimistic")
ATOMICITY = ("none", "table")

_MC = "mysql-config."


def _timeout(name: str) -> Option:
    return Option(name, Kind.DURATION, DEFAULT_TIMEOUT, toml=_MC + name, gt=0)


OPTIONS = OptionTable(
    Option(
        "worker-count", Kind.INT, DEFAULT_WORKER_COUNT, toml=_MC + "worker-count", gt=0, le=MAX_WORKER_COUNT
    ),
    Option("max-txn-row", Kind.INT, DEFAULT_MAX_TXN_ROW, toml=_MC + "max-txn-row", gt=0, le=MAX_MAX_TXN_ROW),
    Option(
        "max-multi-update-row",
        Kind.INT,
        DEFAULT_MAX_MULTI_UPDATE_ROW,
        toml=_MC + "max-multi-update-row",
        gt=0,
        le=MAX_MAX_MULTI_UPDATE_ROW,
    ),
    Option(
        "max-multi-update-row-size",
        Kind.INT,
        DEFAULT_MAX_MULTI_UPDATE_ROW_SIZE,
        toml=_MC + "max-multi-update-row-size",
        ge=0,
        le=MAX_MAX_MULTI_UPDATE_ROW_SIZE,
    ),
    Option("tidb-txn-mode", Kind.ENUM, toml=_MC + "tidb-txn-mode", choices=TXN_MODES, fold_case=True),
    Option("safe-mode", Kind.BOOL, False, toml="safe-mode"),
    Option("transaction-atomicity", Kind.ENUM, "none", toml="transaction-atomicity", choices=ATOMICITY),
    Option("time-zone", Kind.STR, toml=_MC + "time-zone", help="empty: the downstream's own time zone"),
    Option("ssl-ca", Kind.STR, toml=_MC + "ssl-ca"),
    Option("ssl-cert", Kind.STR, toml=_MC + "ssl-cert"),
    Option("ssl-key", Kind.STR, toml=_MC + "ssl-key"),
    _timeout("read-timeout"),
    _timeout("write-timeout"),
    _timeout("timeout"),
    Option("batch-dml-enable", Kind.BOOL, True, toml=_MC + "enable-batch-dml"),
    Option("multi-stmt-enable", Kind.BOOL, True, toml=_MC + "enable-multi-statement"),
    Option("cache-prep-stmts", Kind.BOOL, True, toml=_MC + "enable-cache-prepared-statement"),
    Option(
        "progress-table", Kind.BOOL, True, help="keep per-table progress downstream (exactly-once replay)"
    ),
)
"""The MySQL sink's URI parameters and their ``[sink]``/``[sink.mysql-config]`` keys."""


@dataclass(frozen=True)
class MySQLSinkSettings:
    """Everything the MySQL sink and its writers need (picklable)."""

    conn: ConnParams
    worker_count: int = DEFAULT_WORKER_COUNT
    max_txn_row: int = DEFAULT_MAX_TXN_ROW
    max_multi_update_row: int = DEFAULT_MAX_MULTI_UPDATE_ROW
    max_multi_update_row_size: int = DEFAULT_MAX_MULTI_UPDATE_ROW_SIZE
    safe_mode: bool = False
    transaction_atomicity: str = "none"
    batch_dml: bool = True
    multi_statement: bool = True
    cache_prepared_statements: bool = True
    """Accepted for TiCDC compatibility; PyMySQL sends text statements, so it has no effect."""
    is_tidb: bool = False
    progress_table: bool = True
    """Record per-table progress downstream (``sparkcdc.mysql_sink_progress``) for exactly-once replay."""
    uri_redacted: str = field(default="", compare=False)


def _same_tz(a: str, b: str) -> bool:
    return mysql_time_zone(a).lower() == mysql_time_zone(b).lower()


def parse_mysql_sink(uri: str, config: ReplicaConfig) -> MySQLSinkSettings:
    """Validate a MySQL sink URI against the changefeed config; ConfigError names the bad value."""
    p = ParsedURI.parse(uri)
    red = redact_uri(uri)
    if p.scheme not in SCHEMES:
        raise SinkURIError(
            f"the MySQL sink does not handle scheme {p.scheme!r} in {red!r}; use one of {SCHEMES}"
        )
    if not p.hosts or not p.hosts[0][0]:
        raise SinkURIError(f"sink URI {red!r} has no host; use mysql://user:password@host:port/")
    if p.path not in ("", "/"):
        raise SinkURIError(
            f"sink URI {red!r} has a path {p.path!r}; the MySQL sink writes into the upstream schema "
            "names, so remove it (mysql://user:password@host:port/)"
        )
    if "protocol" in p.params:
        raise not_supported(
            f"sink URI parameter 'protocol' (in {red!r})", "the MySQL sink writes SQL, not messages", uri=True
        )
    if config.sink.protocol:
        raise SinkURIError(
            f"[sink] protocol = {config.sink.protocol!r} does not apply to the MySQL sink; remove it"
        )
    o = resolve(OPTIONS, p, config.sink, where="sink")
    tz_param = o["time-zone"]
    if tz_param is None:
        time_zone: str | None = mysql_time_zone(config.time_zone)
    elif tz_param == "":
        time_zone = None  # the downstream's own time zone, as in TiCDC
    else:
        if not _same_tz(tz_param, config.time_zone):
            where = "the sink URI" if o.source("time-zone") is Source.URI else "[sink.mysql-config]"
            raise SinkURIError(
                f"time-zone {tz_param!r} in {where} differs from the changefeed time zone "
                f"{config.time_zone!r}; TIMESTAMP values would shift. Use the same zone in both "
                "(or time-zone= to keep the downstream's own)"
            )
        time_zone = mysql_time_zone(tz_param)
    ssl_ca, ssl_cert, ssl_key = (o[k] or None for k in ("ssl-ca", "ssl-cert", "ssl-key"))
    if (ssl_cert is None) != (ssl_key is None):
        raise SinkURIError("ssl-cert and ssl-key must be given together (the client certificate and its key)")
    p.reject_unknown()

    host, port = p.hosts[0]
    extra = tuple((h, pt or DEFAULT_PORT) for h, pt in p.hosts[1:])
    conn = ConnParams(
        host=host,
        port=port or DEFAULT_PORT,
        user=p.username or "root",
        password=p.password or "",
        extra_hosts=extra,
        time_zone=time_zone,
        connect_timeout=o["timeout"],
        read_timeout=o["read-timeout"],
        write_timeout=o["write-timeout"],
        ssl=p.scheme.endswith("+ssl"),
        ssl_ca=ssl_ca,
        ssl_cert=ssl_cert,
        ssl_key=ssl_key,
        tidb_txn_mode=o["tidb-txn-mode"],
        multi_statements=o["multi-stmt-enable"],
    )
    return MySQLSinkSettings(
        conn=conn,
        worker_count=o["worker-count"],
        max_txn_row=o["max-txn-row"],
        max_multi_update_row=o["max-multi-update-row"],
        max_multi_update_row_size=o["max-multi-update-row-size"],
        safe_mode=o["safe-mode"],
        transaction_atomicity=o["transaction-atomicity"],
        batch_dml=o["batch-dml-enable"],
        multi_statement=o["multi-stmt-enable"],
        cache_prepared_statements=o["cache-prep-stmts"],
        is_tidb=p.scheme.startswith("tidb"),
        progress_table=o["progress-table"],
        uri_redacted=red,
    )
