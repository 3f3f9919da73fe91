"""The storage sink's settings: the sink URI merged over ``[sink]``/``[sink.cloud-storage-config]``."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI, parse_duration, redact_uri
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.storage.backend import StorageBackend
from sparkcdc.sink.storage.layout import EXTENSIONS, check_date_separator, effective_index_width

log = logging.getLogger(__name__)

PROTOCOLS = ("csv", "canal-json")
DEFAULT_WORKER_COUNT = 16
MAX_WORKER_COUNT = 512
DEFAULT_FLUSH_INTERVAL = 5.0
MIN_FLUSH_INTERVAL = 2.0
MAX_FLUSH_INTERVAL = 600.0
DEFAULT_FILE_SIZE = 64 * 1024 * 1024
MIN_FILE_SIZE = 1024 * 1024
MAX_FILE_SIZE = 512 * 1024 * 1024


@dataclass
class StorageSettings:
    """Everything the storage sink's driver and writers need (picklable)."""

    backend: StorageBackend
    protocol: str
    worker_count: int = DEFAULT_WORKER_COUNT
    flush_interval: float = DEFAULT_FLUSH_INTERVAL
    file_size: int = DEFAULT_FILE_SIZE
    file_index_width: int = 20
    date_separator: str = "day"
    enable_partition_separator: bool = True
    transaction_atomicity: str = "none"
    enable_tidb_extension: bool = False
    output_column_id: bool = False
    output_raw_change_event: bool = False

    @property
    def extension(self) -> str:
        """``.csv`` or ``.json``."""
        return EXTENSIONS[self.protocol]

    @classmethod
    def from_uri(cls, uri: str, config: ReplicaConfig) -> StorageSettings:
        """Parse and validate a storage sink URI against the changefeed config."""
        p = ParsedURI.parse(uri)
        shown = redact_uri(uri)
        protocol = p.get_str("protocol") or config.sink.protocol
        if not protocol:
            raise SinkURIError(
                f"storage sink URI {shown!r} needs a protocol: add ?protocol=csv or ?protocol=canal-json"
            )
        if protocol not in PROTOCOLS:
            raise SinkURIError(
                f"protocol {protocol!r} is not supported by the storage sink (in {shown!r}); "
                f"use one of: {', '.join(PROTOCOLS)}"
            )
        cs = config.sink.cloud_storage_config
        worker_count = _worker_count(p.get_int("worker-count"), cs.worker_count)
        flush_interval = _flush_interval(p.get_str("flush-interval"), cs.flush_interval)
        file_size = _file_size(p.get_int("file-size"), cs.file_size)
        ext = p.get_bool("enable-tidb-extension", False)
        backend = StorageBackend.from_uri(p)
        p.reject_unknown()
        check_date_separator(config.sink.date_separator)
        if cs.file_expiration_days < 0:
            raise ConfigError(
                f"invalid sink.cloud-storage-config.file-expiration-days {cs.file_expiration_days}: must be >= 0"
            )
        if cs.file_expiration_days > 0:
            raise ConfigError(
                f"sink.cloud-storage-config.file-expiration-days = {cs.file_expiration_days} is not "
                "supported by sparkcdc yet; remove it (0 keeps every file) and expire files with a "
                "bucket lifecycle rule instead"
            )
        atomicity = config.sink.transaction_atomicity or "none"
        return cls(
            backend=backend,
            protocol=protocol,
            worker_count=worker_count,
            flush_interval=flush_interval,
            file_size=file_size,
            file_index_width=effective_index_width(config.sink.file_index_digit),
            date_separator=config.sink.date_separator,
            enable_partition_separator=config.sink.enable_partition_separator,
            transaction_atomicity=atomicity,
            enable_tidb_extension=bool(ext),
            output_column_id=cs.output_column_id,
            output_raw_change_event=cs.output_raw_change_event,
        )


def _worker_count(uri_value: int | None, cfg_value: int | None) -> int:
    n = uri_value if uri_value is not None else cfg_value
    if n is None:
        return DEFAULT_WORKER_COUNT
    if n <= 0:
        raise SinkURIError(
            f"invalid worker-count {n} (CDC:ErrStorageSinkInvalidConfig): it must be greater than 0 "
            f"(1..{MAX_WORKER_COUNT})"
        )
    if n > MAX_WORKER_COUNT:
        log.warning("worker-count %d is too large; using %d", n, MAX_WORKER_COUNT)
        return MAX_WORKER_COUNT
    return n


def _flush_interval(uri_value: str | None, cfg_value: str | None) -> float:
    text = uri_value if uri_value is not None else cfg_value
    if not text:
        return DEFAULT_FLUSH_INTERVAL
    seconds = parse_duration(text, "flush-interval")
    if seconds > MAX_FLUSH_INTERVAL:
        log.warning("flush-interval %s is too large; using 10m", text)
        return MAX_FLUSH_INTERVAL
    if seconds < MIN_FLUSH_INTERVAL:
        log.warning("flush-interval %s is too small; using 2s", text)
        return MIN_FLUSH_INTERVAL
    return seconds


def _file_size(uri_value: int | None, cfg_value: int | None) -> int:
    n = uri_value if uri_value is not None else cfg_value
    if n is None:
        return DEFAULT_FILE_SIZE
    if n > MAX_FILE_SIZE:
        log.warning("file-size %d is too large; using %d", n, MAX_FILE_SIZE)
        return MAX_FILE_SIZE
    if n < MIN_FILE_SIZE:
        log.warning("file-size %d is too small; using %d", n, MIN_FILE_SIZE)
        return MIN_FILE_SIZE
    return n
