"""The MySQL sink's settings: the sink URI merged with ``[sink.mysql-config]`` (URI wins).

``mysql[+ssl]|tidb[+ssl]://user:pass@host:port[,host:port]/?worker-count=16&max-txn-row=256&…``
with TiCDC's parameters (spec §6, ``tiflow:pkg/sink/mysql/config.go``): every
value is checked; unknown parameters and ``protocol`` are refused. Like TiCDC,
values above a hard maximum are lowered to it with a warning, the port
defaults to 4000 and the user to ``root``. One parameter is sparkcdc's own:
``progress-table=true|false`` (default true) keeps per-table progress downstream
so that a replay after a restart is exactly-once (see ``applier``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI, parse_duration, redact_uri
from sparkcdc.errors import SinkURIError
from sparkcdc.sink.mysql.connection import ConnParams, mysql_time_zone

log = logging.getLogger(__name__)

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
DEFAULT_TIMEOUT = "2m"
TXN_MODES = ("optimistic", "pessimistic")
ATOMICITY = ("none", "table")


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


def _bounded(uri: ParsedURI, key: str, conf: int | None, default: int, lo: int, hi: int) -> int:
    v = uri.get_int(key)
    if v is None:
        v = conf
        where = f"[sink.mysql-config] {key}"
    else:
        where = f"sink URI parameter {key!r}"
    if v is None:
        return default
    if v < lo:
        raise SinkURIError(f"invalid {where} = {v}: it must be at least {lo}")
    if v > hi:
        log.warning("%s = %d is too large, using %d", where, v, hi)
        return hi
    return v


def _bool(uri: ParsedURI, key: str, conf: bool | None, default: bool) -> bool:
    v = uri.get_bool(key)
    if v is None:
        v = conf
    return default if v is None else v


def _duration(uri: ParsedURI, key: str, conf: str | None) -> float:
    v = uri.get(key)
    if v is None:
        v = conf if conf is not None else DEFAULT_TIMEOUT
    return parse_duration(v, key)


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
        raise SinkURIError(
            f"sink URI parameter 'protocol' is not supported by the MySQL sink (in {red!r}); remove it"
        )
    if config.sink.protocol:
        raise SinkURIError(
            f"[sink] protocol = {config.sink.protocol!r} does not apply to the MySQL sink; remove it"
        )
    mc = config.sink.mysql_config
    worker_count = _bounded(p, "worker-count", mc.worker_count, DEFAULT_WORKER_COUNT, 1, MAX_WORKER_COUNT)
    max_txn_row = _bounded(p, "max-txn-row", mc.max_txn_row, DEFAULT_MAX_TXN_ROW, 1, MAX_MAX_TXN_ROW)
    max_multi = _bounded(
        p,
        "max-multi-update-row",
        mc.max_multi_update_row,
        DEFAULT_MAX_MULTI_UPDATE_ROW,
        1,
        MAX_MAX_MULTI_UPDATE_ROW,
    )
    max_multi_size = _bounded(
        p,
        "max-multi-update-row-size",
        mc.max_multi_update_row_size,
        DEFAULT_MAX_MULTI_UPDATE_ROW_SIZE,
        0,
        MAX_MAX_MULTI_UPDATE_ROW_SIZE,
    )
    txn_mode = p.get("tidb-txn-mode")
    if txn_mode is None:
        txn_mode = mc.tidb_txn_mode
    if txn_mode is not None:
        txn_mode = txn_mode.lower()
        if txn_mode not in TXN_MODES:
            raise SinkURIError(f"invalid tidb-txn-mode {txn_mode!r}; allowed: {', '.join(TXN_MODES)}")
    safe_mode = _bool(p, "safe-mode", None, config.sink.safe_mode)
    atomicity = p.get("transaction-atomicity")
    if atomicity is None:
        atomicity = config.sink.transaction_atomicity
    atomicity = atomicity or "none"
    if atomicity not in ATOMICITY:
        raise SinkURIError(f"invalid transaction-atomicity {atomicity!r}; allowed: {', '.join(ATOMICITY)}")
    tz_param = p.get("time-zone")
    if tz_param is None:
        tz_param = mc.time_zone
    if tz_param is None:
        time_zone: str | None = mysql_time_zone(config.time_zone)
    elif tz_param == "":
        time_zone = None  # the downstream's own time zone, as in TiCDC
    else:
        if not _same_tz(tz_param, config.time_zone):
            raise SinkURIError(
                f"time-zone {tz_param!r} in the sink URI differs from the changefeed time zone "
                f"{config.time_zone!r}; TIMESTAMP values would shift. Use the same zone in both "
                "(or time-zone= to keep the downstream's own)"
            )
        time_zone = mysql_time_zone(tz_param)
    ssl_ca = p.get("ssl-ca") or mc.ssl_ca
    ssl_cert = p.get("ssl-cert") or mc.ssl_cert
    ssl_key = p.get("ssl-key") or mc.ssl_key
    if (ssl_cert is None) != (ssl_key is None):
        raise SinkURIError("ssl-cert and ssl-key must be given together (the client certificate and its key)")
    read_timeout = _duration(p, "read-timeout", mc.read_timeout)
    write_timeout = _duration(p, "write-timeout", mc.write_timeout)
    timeout = _duration(p, "timeout", mc.timeout)
    for key, val in (("read-timeout", read_timeout), ("write-timeout", write_timeout), ("timeout", timeout)):
        if val <= 0:
            raise SinkURIError(f"invalid {key} {val}s: it must be a positive duration like 30s or 2m")
    batch_dml = _bool(p, "batch-dml-enable", mc.enable_batch_dml, True)
    multi_stmt = _bool(p, "multi-stmt-enable", mc.enable_multi_statement, True)
    cache_prep = _bool(p, "cache-prep-stmts", mc.enable_cache_prepared_statement, True)
    progress_table = _bool(p, "progress-table", None, True)
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
        connect_timeout=timeout,
        read_timeout=read_timeout,
        write_timeout=write_timeout,
        ssl=p.scheme.endswith("+ssl"),
        ssl_ca=ssl_ca,
        ssl_cert=ssl_cert,
        ssl_key=ssl_key,
        tidb_txn_mode=txn_mode,
        multi_statements=multi_stmt,
    )
    return MySQLSinkSettings(
        conn=conn,
        worker_count=worker_count,
        max_txn_row=max_txn_row,
        max_multi_update_row=max_multi,
        max_multi_update_row_size=max_multi_size,
        safe_mode=safe_mode,
        transaction_atomicity=atomicity,
        batch_dml=batch_dml,
        multi_statement=multi_stmt,
        cache_prepared_statements=cache_prep,
        is_tidb=p.scheme.startswith("tidb"),
        progress_table=progress_table,
        uri_redacted=red,
    )
