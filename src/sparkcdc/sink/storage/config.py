"""The storage sink's settings: the sink URI merged over ``[sink]``/``[sink.cloud-storage-config]``.

``OPTIONS`` declares the sink's URI parameters (the URI wins over the TOML section) with
TiCDC's limits (``tiflow:pkg/sink/cloudstorage/config.go``); a value outside them is refused,
where TiCDC lowers or raises it to the nearest limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcdc.config.options import MIB, Kind, Option, OptionTable, resolve
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import SinkURIError
from sparkcdc.sink.objectstore import StorageBackend
from sparkcdc.sink.storage.layout import EXTENSIONS, check_date_separator, effective_index_width

PROTOCOLS = ("csv", "canal-json")
DEFAULT_WORKER_COUNT = 16
MAX_WORKER_COUNT = 512
MIN_FLUSH_INTERVAL = 2.0
MAX_FLUSH_INTERVAL = 600.0
DEFAULT_FILE_SIZE = 64 * MIB
MIN_FILE_SIZE = 1 * MIB
MAX_FILE_SIZE = 512 * MIB

OPTIONS = OptionTable(
    Option("protocol", Kind.STR, toml="protocol", help="csv or canal-json (required)"),
    Option(
        "worker-count",
        Kind.INT,
        DEFAULT_WORKER_COUNT,
        toml="cloud-storage-config.worker-count",
        gt=0,
        le=MAX_WORKER_COUNT,
        help="writers a task groups its tables into",
    ),
    Option(
        "flush-interval",
        Kind.DURATION,
        None,
        toml="cloud-storage-config.flush-interval",
        ge=MIN_FLUSH_INTERVAL,
        le=MAX_FLUSH_INTERVAL,
        help="write a batch (and its files) at most this often; unset: every micro-batch",
    ),
    Option(
        "file-size",
        Kind.SIZE,
        DEFAULT_FILE_SIZE,
        toml="cloud-storage-config.file-size",
        ge=MIN_FILE_SIZE,
        le=MAX_FILE_SIZE,
        help="a data file is cut once it reaches this size",
    ),
    Option("enable-tidb-extension", Kind.BOOL, False, help="canal-json: add _tidb (commitTs)"),
)
"""The storage sink's URI parameters, besides the backend's own (``StorageBackend.from_uri``)."""


@dataclass
class StorageSettings:
    """Everything the storage sink's driver and writers need (picklable)."""

    backend: StorageBackend
    protocol: str
    worker_count: int = DEFAULT_WORKER_COUNT
    flush_interval: float | None = None
    """``flush-interval`` in seconds, when given: the changefeed's micro-batches are at least this far apart."""
    file_size: int = DEFAULT_FILE_SIZE
    file_index_width: int = 20
    date_separator: str = "day"
    enable_partition_separator: bool = True
    transaction_atomicity: str = "none"
    enable_tidb_extension: bool = False
    output_column_id: bool = False
    output_raw_change_event: bool = False
    time_zone: str = "UTC"
    """The changefeed's ``time-zone``: date directories are the commit dates in it."""

    @property
    def extension(self) -> str:
        """``.csv`` or ``.json``."""
        return EXTENSIONS[self.protocol]

    @classmethod
    def from_uri(cls, uri: str, config: ReplicaConfig) -> StorageSettings:
        """Parse and validate a storage sink URI against the changefeed config."""
        p = ParsedURI.parse(uri)
        shown = redact_uri(uri)
        opts = resolve(OPTIONS, p, config.sink, where="sink")
        protocol = opts["protocol"]
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
        backend = StorageBackend.from_uri(p)
        p.reject_unknown()
        check_date_separator(config.sink.date_separator)
        atomicity = config.sink.transaction_atomicity or "none"
        return cls(
            backend=backend,
            protocol=protocol,
            worker_count=opts["worker-count"],
            flush_interval=opts["flush-interval"],
            file_size=opts["file-size"],
            file_index_width=effective_index_width(config.sink.file_index_digit),
            date_separator=config.sink.date_separator,
            enable_partition_separator=config.sink.enable_partition_separator,
            transaction_atomicity=atomicity,
            enable_tidb_extension=opts["enable-tidb-extension"],
            output_column_id=cs.output_column_id,
            output_raw_change_event=cs.output_raw_change_event,
            time_zone=config.time_zone,
        )
