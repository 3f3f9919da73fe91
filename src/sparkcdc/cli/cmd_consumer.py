"""``sparkcdc consumer``: replay a sink's output into MySQL (storage files or Kafka messages)."""

from __future__ import annotations

import argparse
import importlib
import signal
import threading
from typing import Any
from urllib.parse import urlsplit

from sparkcdc.config.options import not_supported
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import parse_duration, redact_uri
from sparkcdc.errors import ConfigError
from sparkcdc.sink.objectstore import STORAGE_SCHEMES
from sparkcdc.sink.storage.layout import MAX_FILE_INDEX_WIDTH, MIN_FILE_INDEX_WIDTH

KAFKA_SCHEMES = ("kafka", "kafka+ssl")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``consumer`` command."""
    p = sub.add_parser(
        "consumer",
        help="replay storage files or Kafka messages into MySQL",
        description="Apply a changefeed's output (file/s3/gcs/azure storage, or kafka) to a MySQL downstream.",
    )
    p.add_argument(
        "--upstream-uri", required=True, help="storage URI (s3://bucket/prefix?protocol=csv) or kafka://"
    )
    p.add_argument("--downstream-uri", required=True, help="mysql://user:password@host:port/")
    p.add_argument(
        "--config", help="changefeed TOML (the [sink] and [sink.csv] options the files were written with)"
    )
    p.add_argument("--flush-interval", default="10s", help="time between rounds (default 10s)")
    p.add_argument("--file-index-width", type=int, default=20, help="data file number width (default 20)")
    p.add_argument(
        "--progress-schema",
        default="sparkcdc_consumer",
        help="downstream schema of the consumer's progress table",
    )
    p.add_argument("--once", action="store_true", help="apply what is there up to the checkpoint, then exit")
    p.add_argument(
        "--source-wait",
        default="10m",
        help="storage: how long a running consumer waits for the sink's first metadata file before it "
        "exits with an error (default 10m; --once does not wait)",
    )
    p.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="print the traceback of an error"
    )
    p.set_defaults(func=run)


def _scheme(uri: str) -> str:
    """The scheme of an ``--upstream-uri``; refused in one line when it has none."""
    try:
        scheme = urlsplit(uri).scheme.lower()
    except ValueError:
        scheme = uri.partition("://")[0].lower() if "://" in uri else ""
    if not scheme:
        raise ConfigError(
            f"--upstream-uri {redact_uri(uri)!r} has no scheme; use one of: "
            f"{', '.join(f'{s}://' for s in STORAGE_SCHEMES + KAFKA_SCHEMES)}"
        )
    return scheme


def _config(path: str | None) -> ReplicaConfig:
    return ReplicaConfig.from_file(path) if path else ReplicaConfig()


def run(args: argparse.Namespace) -> int:
    """Dispatch on the upstream URI scheme."""
    scheme = _scheme(args.upstream_uri)
    interval = parse_duration(args.flush_interval, "--flush-interval")
    source_wait = parse_duration(args.source_wait, "--source-wait")
    if not MIN_FILE_INDEX_WIDTH <= args.file_index_width <= MAX_FILE_INDEX_WIDTH:
        raise ConfigError(
            f"invalid --file-index-width {args.file_index_width}: must be from {MIN_FILE_INDEX_WIDTH} to "
            f"{MAX_FILE_INDEX_WIDTH} (the sink's file-index-digit)"
        )
    if interval <= 0:
        raise ConfigError(f"invalid --flush-interval {args.flush_interval!r}: must be more than 0s, e.g. 10s")
    if scheme in KAFKA_SCHEMES:
        module: Any = importlib.import_module("sparkcdc.consumer.kafka")
        return int(module.run_from_args(args) or 0)
    if scheme not in STORAGE_SCHEMES:
        raise not_supported(
            f"--upstream-uri scheme {scheme!r}",
            fix=f"use one of: {', '.join(STORAGE_SCHEMES + KAFKA_SCHEMES)}",
        )
    from sparkcdc.consumer.storage import StorageConsumer

    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    with StorageConsumer(
        args.upstream_uri,
        args.downstream_uri,
        _config(args.config),
        file_index_width=args.file_index_width,
        progress_schema=args.progress_schema,
    ) as consumer:
        stats = consumer.run(flush_interval=interval, once=args.once, stop=stop, source_wait=source_wait)
    print(
        f"checkpoint-ts {stats.checkpoint_ts}: applied {stats.ddls} DDL, {stats.rows} rows from "
        f"{stats.files} files ({stats.rows_dropped} replayed rows dropped, {stats.rows_pending} rows wait "
        "for the next checkpoint)"
    )
    return 0
