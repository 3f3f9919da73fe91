"""``sparkcdc consumer``: replay a sink's output into MySQL (storage files or Kafka messages)."""

from __future__ import annotations

import argparse
import importlib
import signal
import threading
from typing import Any
from urllib.parse import urlsplit

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import parse_duration
from sparkcdc.errors import ConfigError
from sparkcdc.sink.objectstore import STORAGE_SCHEMES

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
    p.set_defaults(func=run)


def _config(path: str | None) -> ReplicaConfig:
    return ReplicaConfig.from_file(path) if path else ReplicaConfig()


def run(args: argparse.Namespace) -> int:
    """Dispatch on the upstream URI scheme."""
    scheme = urlsplit(args.upstream_uri).scheme.lower()
    interval = parse_duration(args.flush_interval, "flush-interval")
    if scheme in KAFKA_SCHEMES:
        module: Any = importlib.import_module("sparkcdc.consumer.kafka")
        return int(module.run_from_args(args) or 0)
    if scheme not in STORAGE_SCHEMES:
        raise ConfigError(
            f"unsupported --upstream-uri scheme {scheme!r}; use one of: {', '.join(STORAGE_SCHEMES + KAFKA_SCHEMES)}"
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
        stats = consumer.run(flush_interval=interval, once=args.once, stop=stop)
    print(
        f"checkpoint-ts {stats.checkpoint_ts}: applied {stats.ddls} DDL, {stats.rows} rows from "
        f"{stats.files} files ({stats.rows_dropped} replayed rows dropped, {stats.rows_pending} rows wait "
        "for the next checkpoint)"
    )
    return 0
