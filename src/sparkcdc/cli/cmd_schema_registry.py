"""``sparkcdc schema-registry``: run the Confluent-compatible Avro schema registry."""

from __future__ import annotations

import argparse

from sparkcdc.errors import ConfigError


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` → (host, port); ConfigError naming the value otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"invalid --listen {text!r}: expected host:port, like 127.0.0.1:8081")
    return host.strip("[]"), int(port)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from sparkcdc.registry.server import serve

    host, port = parse_listen(args.listen)
    serve(host, port, args.meta_uri, log_level=args.log_level)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``schema-registry`` command."""
    p = sub.add_parser(
        "schema-registry",
        help="run a Confluent-compatible Avro schema registry (for the avro protocol)",
        description="A Confluent-compatible schema registry: subjects, versions, global ids, "
        "compatibility levels, stored durably in --meta-uri.",
    )
    p.add_argument(
        "--listen", default="127.0.0.1:8081", help="host:port to listen on (default 127.0.0.1:8081)"
    )
    p.add_argument(
        "--meta-uri",
        default="sqlite:///schema-registry.db",
        help="where schemas are stored: sqlite:///path (default sqlite:///schema-registry.db), "
        "postgresql://user:pass@host/db or mysql://user:pass@host/db",
    )
    p.set_defaults(func=run)
