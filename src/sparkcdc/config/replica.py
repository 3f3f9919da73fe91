"""``ReplicaConfig``: the changefeed TOML (TiCDC's shape), closed and typed.

Every key is checked: an unknown key, a value of the wrong type or a value
outside its allowed set is refused with the key, the value and what is allowed.
TOML keys use dashes; the dataclass fields use underscores.

What a key allows is declared on its field (``_limits``: a range, a set of values,
non-empty) and checked in one place (``_check_field``) while the input is read.
A TiCDC key sparkcdc does not implement stays declared, so it is refused as
such, not as unknown (``_unsupported``): when its value is given it is refused,
unless the key is ``honoured`` and the value is the one sparkcdc always behaves
as (``enable-old-value = true``). ``to_dict`` leaves those keys out.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkcdc.config.dispatch_rule import DispatchRule, check_dispatch_rule, check_partition_alias
from sparkcdc.config.options import not_supported, show_value
from sparkcdc.errors import ConfigError, FilterRuleError
from sparkcdc.event_filter import compile_rule
from sparkcdc.filter import TableFilter


def _limits(
    *,
    lo: int | None = None,
    hi: int | None = None,
    choices: tuple[str, ...] | None = None,
    nonempty: bool = False,
) -> dict[str, Any]:
    """Field metadata: what a value may be (``lo``..``hi`` for integers, one of ``choices``, ``nonempty``)."""
    return {"lo": lo, "hi": hi, "choices": choices, "nonempty": nonempty}


def _unsupported(why: str, *, honoured: bool = False) -> dict[str, Any]:
    """Field metadata: a TiCDC key sparkcdc does not implement (``why``).

    ``honoured``: sparkcdc always behaves as the field's default, so giving the default is accepted.
    """
    return {"unsupported": why, "honoured": honoured}


@dataclass
class CSVConfig:
    """``[sink.csv]``."""

    delimiter: str = field(default=",", metadata=_limits(nonempty=True))
    quote: str = '"'
    null: str = "\\N"
    include_commit_ts: bool = False
    binary_encoding_method: str = field(default="base64", metadata=_limits(choices=("base64", "hex")))
    output_old_value: bool = False
    output_handle_key: bool = False
    output_field_header: bool = False


@dataclass
class ColumnSelector:
    """One ``[[sink.column-selectors]]`` rule."""

    matcher: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)


@dataclass
class LargeMessageHandleConfig:
    """``[sink.kafka-config.large-message-handle]``."""

    large_message_handle_option: str = "none"
    large_message_handle_compression: str = "none"
    claim_check_storage_uri: str = ""
    claim_check_raw_value: bool = False


MAX_BATCH_SIZE_WHY = "canal-json and avro send one event per message; only TiCDC's open protocol batches"
FLUSH_CONCURRENCY_WHY = "each Spark task writes a data file in one upload"
CLEANUP_CRON_WHY = "sparkcdc expires no files (file-expiration-days), so it runs no cleanup"
FILE_EXPIRATION_WHY = "0 keeps every file; expire files with a bucket lifecycle rule instead"


@dataclass
class CodecConfig:
    """``[sink.kafka-config.codec-config]``."""

    enable_tidb_extension: bool | None = None
    max_batch_size: int = field(default=1, metadata=_unsupported(MAX_BATCH_SIZE_WHY, honoured=True))
    avro_enable_watermark: bool | None = None
    avro_decimal_handling_mode: str | None = None
    avro_bigint_unsigned_handling_mode: str | None = None
    encoding_format: str | None = None


@dataclass
class KafkaConfig:
    """``[sink.kafka-config]``: URI keys may be set here too (the URI wins)."""

    partition_num: int | None = None
    replication_factor: int | None = None
    kafka_version: str | None = None
    max_message_bytes: int | None = None
    compression: str | None = None
    kafka_client_id: str | None = None
    auto_create_topic: bool | None = None
    dial_timeout: str | None = None
    read_timeout: str | None = None
    write_timeout: str | None = None
    required_acks: int | None = None
    sasl_user: str | None = None
    sasl_password: str | None = None
    sasl_mechanism: str | None = None
    enable_tls: bool | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure_skip_verify: bool | None = None
    output_raw_change_event: bool = False
    codec_config: CodecConfig = field(default_factory=CodecConfig)
    large_message_handle: LargeMessageHandleConfig = field(default_factory=LargeMessageHandleConfig)


@dataclass
class CloudStorageConfig:
    """``[sink.cloud-storage-config]`` (URI parameters win)."""

    worker_count: int | None = None
    flush_interval: str | None = None
    file_size: int | None = None
    flush_concurrency: int = field(default=1, metadata=_unsupported(FLUSH_CONCURRENCY_WHY, honoured=True))
    file_expiration_days: int = field(default=0, metadata=_unsupported(FILE_EXPIRATION_WHY, honoured=True))
    file_cleanup_cron_spec: str = field(
        default="0 0 2 * * *", metadata=_unsupported(CLEANUP_CRON_WHY, honoured=True)
    )
    output_column_id: bool = False
    output_raw_change_event: bool = False


@dataclass
class MySQLConfig:
    """``[sink.mysql-config]`` (URI parameters win)."""

    worker_count: int | None = None
    max_txn_row: int | None = None
    max_multi_update_row_size: int | None = None
    max_multi_update_row: int | None = None
    tidb_txn_mode: str | None = None
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    time_zone: str | None = None
    write_timeout: str | None = None
    read_timeout: str | None = None
    timeout: str | None = None
    enable_batch_dml: bool | None = None
    enable_multi_statement: bool | None = None
    enable_cache_prepared_statement: bool | None = None


@dataclass
class SinkConfig:
    """``[sink]``."""

    protocol: str | None = None
    dispatchers: list[DispatchRule] = field(default_factory=list)
    column_selectors: list[ColumnSelector] = field(
        default_factory=list, metadata=_unsupported("every column is written", honoured=True)
    )
    schema_registry: str | None = None
    encoder_concurrency: int = field(
        default=32, metadata=_unsupported("Spark tasks encode; their number is Spark's parallelism")
    )
    terminator: str = field(default="\r\n", metadata=_limits(nonempty=True))
    date_separator: str = field(default="day", metadata=_limits(choices=("none", "year", "month", "day")))
    enable_partition_separator: bool = field(
        default=False,
        metadata=_unsupported(
            "the binlog carries no partition id, so no partition directories", honoured=True
        ),
    )
    file_index_digit: int = field(default=20, metadata=_limits(lo=6, hi=20))
    transaction_atomicity: str = field(default="", metadata=_limits(choices=("", "none", "table")))
    only_output_updated_columns: bool = False
    delete_only_output_handle_key_columns: bool = False
    content_compatible: bool = False
    safe_mode: bool = False
    enable_kafka_sink_v2: bool = field(
        default=False,
        metadata=_unsupported("the Kafka sink always uses librdkafka (confluent-kafka)", honoured=True),
    )
    csv: CSVConfig = field(default_factory=CSVConfig)
    kafka_config: KafkaConfig = field(default_factory=KafkaConfig)
    cloud_storage_config: CloudStorageConfig = field(default_factory=CloudStorageConfig)
    mysql_config: MySQLConfig = field(default_factory=MySQLConfig)


_NO_EXPR = "SQL value expressions are not evaluated; filter by event kind (ignore-event) instead"


@dataclass
class EventFilterRule:
    """One ``[[filter.event-filters]]`` rule."""

    matcher: list[str] = field(default_factory=list)
    ignore_event: list[str] = field(default_factory=list)
    ignore_sql: list[str] = field(default_factory=list)
    ignore_insert_value_expr: str = field(default="", metadata=_unsupported(_NO_EXPR, honoured=True))
    ignore_update_new_value_expr: str = field(default="", metadata=_unsupported(_NO_EXPR, honoured=True))
    ignore_update_old_value_expr: str = field(default="", metadata=_unsupported(_NO_EXPR, honoured=True))
    ignore_delete_value_expr: str = field(default="", metadata=_unsupported(_NO_EXPR, honoured=True))


@dataclass
class FilterConfig:
    """``[filter]``."""

    rules: list[str] = field(default_factory=lambda: ["*.*"], metadata=_limits(nonempty=True))
    ignore_txn_start_ts: list[int] = field(
        default_factory=list,
        metadata=_unsupported("MariaDB/MySQL transactions have no TiDB start-ts", honoured=True),
    )
    event_filters: list[EventFilterRule] = field(default_factory=list)


@dataclass
class MounterConfig:
    """``[mounter]``."""

    worker_num: int = field(
        default=16, metadata=_unsupported("Spark tasks decode the rows; their number is Spark's parallelism")
    )


@dataclass
class SnapshotConfig:
    """``[snapshot]``: copy existing rows before streaming the binlog."""

    mode: str = field(default="never", metadata=_limits(choices=("never", "initial")))
    chunk_size: int = field(default=50000, metadata=_limits(lo=1))
    parallelism: int = field(default=0, metadata=_limits(lo=0))
    """Range tasks at once; 0: Spark's default parallelism."""
    upstream_render: bool = True
    """With a CSV storage sink, the upstream renders each chunk's records (``codec.csv_sql``)."""


@dataclass
class ReplicaConfig:
    """The whole changefeed configuration."""

    case_sensitive: bool = False
    force_replicate: bool = False
    """Read only to refuse options that need a handle key; tables without one are always replicated."""
    memory_quota: int = field(
        default=1073741824,
        metadata=_unsupported("memory is Spark's: spark.driver.memory, spark.executor.memory"),
    )
    enable_sync_point: bool = field(
        default=False, metadata=_unsupported("sparkcdc writes no sync points", honoured=True)
    )
    enable_old_value: bool = field(
        default=True, metadata=_unsupported("row changes always carry their old values", honoured=True)
    )
    check_gc_safe_point: bool = field(
        default=True,
        metadata=_unsupported(
            "the start point is always checked against the upstream's binary logs", honoured=True
        ),
    )
    time_zone: str = "UTC"
    filter: FilterConfig = field(default_factory=FilterConfig)
    mounter: MounterConfig = field(default_factory=MounterConfig)
    sink: SinkConfig = field(default_factory=SinkConfig)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicaConfig:
        """Build from parsed TOML/JSON; unknown keys and wrong types raise ConfigError."""
        cfg = _build(cls, data, "")
        validate(cfg)
        return cfg

    @classmethod
    def from_toml(cls, text: str, source: str = "config") -> ReplicaConfig:
        """Parse TOML text."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: invalid TOML: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: str | Path) -> ReplicaConfig:
        """Read a TOML file."""
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {str(p)!r}: {exc.strerror}") from exc
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {str(p)!r} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                f"{exc.start}); give a TOML file"
            ) from None
        return cls.from_toml(text, str(p))

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> ReplicaConfig:
        """A config stored in the meta database: ``from_dict`` without the unsupported keys.

        Older versions accepted those keys, ignored them and stored every key; a stored changefeed
        keeps running as it did. What a user submits goes through ``from_dict`` and is refused."""
        return cls.from_dict(_drop_unsupported(cls, data))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict with dashed keys (the inverse of ``from_dict``)."""
        return _dump(self)


def _dump(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if "unsupported" in f.metadata:
                continue  # always its default once loaded
            value = _dump(getattr(obj, f.name))
            if value == {} and dataclasses.is_dataclass(getattr(obj, f.name)):
                continue  # a table of unsupported keys only ([mounter])
            out[f.name.replace("_", "-")] = value
        return out
    if isinstance(obj, list):
        return [_dump(v) for v in obj]
    return obj


def _drop_unsupported(cls: type, data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        f = fields.get(raw_key.replace("-", "_")) if isinstance(raw_key, str) else None
        if f is not None and "unsupported" in f.metadata:
            continue
        if f is not None and dataclasses.is_dataclass(hints[f.name]) and isinstance(value, dict):
            value = _drop_unsupported(hints[f.name], value)
        out[raw_key] = value
    return out


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", str(t))


def _build(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"config key {path or '<root>'!r} must be a table, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for raw_key, value in data.items():
        name = raw_key.replace("-", "_")
        key_path = f"{path}.{raw_key}" if path else raw_key
        if name not in fields:
            allowed = ", ".join(sorted(f.replace("_", "-") for f in fields))
            raise ConfigError(f"unknown config key {key_path!r}; allowed keys here: {allowed}")
        kwargs[name] = _coerce(hints[name], value, key_path)
        _check_field(fields[name], kwargs[name], key_path)
    return cls(**kwargs)


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


_toml_value = show_value


def _check_field(f: dataclasses.Field[Any], value: Any, path: str) -> None:
    """The one check of a value against what its field declares."""
    meta = f.metadata
    why = meta.get("unsupported")
    if why is not None:
        default = _default_of(f)
        if meta.get("honoured") and value == default:
            return
        also = f"sparkcdc always behaves as {_toml_value(default)}: {why}" if meta.get("honoured") else why
        raise not_supported(f"config key {path!r}", also, ticdc=True)
    lo, hi, choices = meta.get("lo"), meta.get("hi"), meta.get("choices")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if hi is None:
            allowed = f"an integer >= {lo}"
        elif lo is None:
            allowed = f"an integer <= {hi}"
        else:
            allowed = f"an integer from {lo} to {hi}"
        raise ConfigError(f"invalid value {value!r} for {path!r}; allowed: {allowed}")
    if choices is not None and value not in choices:
        raise ConfigError(f"invalid value {value!r} for {path!r}; allowed: {', '.join(choices)}")
    if meta.get("nonempty") and not value:
        example = _toml_value(_default_of(f)) if not isinstance(value, list) else repr(_default_of(f))
        raise ConfigError(f"invalid value {value!r} for {path!r}; allowed: a non-empty value, e.g. {example}")


def _coerce(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(args[0], value, path)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path)  # type: ignore[arg-type]
    if origin is list:
        (inner,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"config key {path!r} must be a list, got {value!r}")
        return [_coerce(inner, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"config key {path!r} must be true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config key {path!r} must be an integer, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"config key {path!r} must be a string, got {value!r}")
        return value
    raise ConfigError(f"config key {path!r}: unsupported type {_type_name(tp)}")


def validate(cfg: ReplicaConfig) -> None:
    """Cross-field checks that do not depend on the sink (single values are checked by ``_check_field``)."""
    s = cfg.sink
    for i, rule in enumerate(s.dispatchers):
        check_partition_alias(rule, f"sink.dispatchers[{i}]")
    _validate_csv_null(s.csv)
    _validate_rules(cfg)
    if not is_time_zone(cfg.time_zone):
        raise ConfigError(
            f"unknown time zone {cfg.time_zone!r} for 'time-zone'; use an IANA name such as UTC or "
            "Asia/Shanghai, or an offset such as +08:00"
        )


def is_time_zone(name: str) -> bool:
    """Whether ``name`` is a time zone rows can be rendered in: an IANA name, or an offset like ``+08:00``."""
    if re.fullmatch(r"[+-]\d{1,2}:\d{2}", name):
        return True
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _validate_csv_null(csv: CSVConfig) -> None:
    """A null string holding the delimiter or the quote would read back as something else."""
    for name, other in (("delimiter", csv.delimiter), ("quote", csv.quote)):
        if other and other in csv.null:
            raise ConfigError(
                f"invalid value {csv.null!r} for 'sink.csv.null': it contains the {name} {other!r}; "
                "allowed: a string without the delimiter and the quote, e.g. '\\N'"
            )


def _validate_rules(cfg: ReplicaConfig) -> None:
    """Parse every table-filter rule and dispatcher so a bad one is refused at load time."""

    def parse(rules: list[str], where: str) -> None:
        for i, rule in enumerate(rules):
            if not isinstance(rule, str) or not rule.strip():
                raise FilterRuleError(
                    f"{where}[{i}] is {rule!r}: an empty rule matches no table; give a pattern such as "
                    "'db.*' or '*.*', or leave the key out to replicate every table"
                )
        try:
            TableFilter(rules, cfg.case_sensitive)
        except FilterRuleError as exc:
            raise FilterRuleError(f"{where}: {exc.message}") from None

    parse(cfg.filter.rules, "filter.rules")
    for i, ev in enumerate(cfg.filter.event_filters):
        compile_rule(
            ev.matcher,
            ev.ignore_event,
            ev.ignore_sql,
            case_sensitive=cfg.case_sensitive,
            where=f"filter.event-filters[{i}]",
        )
    for i, rule in enumerate(cfg.sink.dispatchers):
        # the sink builds the real EventRouter (it knows the default topic) from the same parse
        check_dispatch_rule(
            rule,
            protocol=cfg.sink.protocol,
            case_sensitive=cfg.case_sensitive,
            where=f"sink.dispatchers[{i}]",
        )
