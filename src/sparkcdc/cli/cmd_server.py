"""``sparkcdc server``: the HTTP API and the changefeed scheduler."""

from __future__ import annotations

import argparse
import os

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.restart import DEFAULT_ERROR_STUCK_SECONDS


def parse_spark_conf(pairs: list[str]) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` flags as a dict (``sparkcdc server`` and ``sparkcdc run``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"invalid --spark-conf {pair!r}: expected KEY=VALUE, e.g. spark.executor.memory=2g"
            )
        out[key.strip()] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Start the server and serve until interrupted."""
    from sparkcdc.server.main import ServerOptions, run_server
    from sparkcdc.server.runner import default_server_master

    opts = ServerOptions(
        listen=args.listen,
        meta_uri=args.meta_uri,
        spark_master=args.spark_master or default_server_master(),
        spark_conf=parse_spark_conf(args.spark_conf),
        auth_token=args.auth_token,
        lease_seconds=args.lease_seconds,
        data_dir=args.data_dir,
        advertise_addr=args.advertise_addr,
        max_changefeeds=args.max_changefeeds,
        error_stuck_seconds=args.error_stuck_seconds,
        **({} if args.binlog_relay_mb is None else {"binlog_relay_mb": args.binlog_relay_mb}),
        debug=bool(getattr(args, "debug", False)),
    )
    return run_server(opts)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``server`` command."""
    p = sub.add_parser("server", help="run a sparkcdc server (HTTP API /api/v2 + changefeed scheduler)")
    p.add_argument(
        "--listen", default="127.0.0.1:8300", help="HOST:PORT to serve the API on (default %(default)s)"
    )
    p.add_argument(
        "--meta-uri",
        default=os.environ.get("SPARKCDC_META_URI", "sqlite:///sparkcdc-meta.db"),
        help="meta database: sqlite:///path (one server) or postgresql://user:pass@host:port/db (several servers)",
    )
    p.add_argument(
        "--spark-master",
        default=None,
        help="Spark master URL (default local[4 x cores]: a sink waiting on its downstream holds its task slots)",
    )
    p.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting"
    )
    p.add_argument(
        "--auth-token",
        default=os.environ.get("SPARKCDC_AUTH_TOKEN"),
        help="require 'Authorization: Bearer TOKEN' on every API route except health (env SPARKCDC_AUTH_TOKEN)",
    )
    p.add_argument(
        "--lease-seconds", type=float, default=10.0, help="changefeed lease length (default %(default)s)"
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="where running changefeeds keep their state: a local path (a shared mount on a cluster) or "
        "s3://bucket/prefix?..., gcs://..., azure://... (default: sparkcdc-data/<meta database identity> "
        "in the temp dir)",
    )
    p.add_argument("--advertise-addr", default=None, help="HOST:PORT other tools see (default: --listen)")
    p.add_argument(
        "--max-changefeeds",
        type=int,
        default=None,
        help="run at most this many changefeeds here (0: serve the API only)",
    )
    p.add_argument(
        "--error-stuck-seconds",
        type=float,
        default=DEFAULT_ERROR_STUCK_SECONDS,
        help="a changefeed that keeps failing with passing errors (upstream or sink down) for this long "
        "without progress goes to failed (default %(default)s; TiCDC's changefeed-error-stuck-duration)",
    )
    p.add_argument(
        "--binlog-relay-mb",
        type=int,
        default=None,
        help="with a local Spark master, the server reads each upstream's binlog once and keeps up to this "
        "many MB of it on local disk for its changefeeds (default 256; 0: each reads its own)",
    )
    p.set_defaults(func=run)
