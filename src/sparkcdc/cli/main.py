"""Entry point of the ``sparkcdc`` console script."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

import sparkcdc.cli as cli_pkg
from sparkcdc import __version__
from sparkcdc.cli.logs import LOG_FORMATS, configure
from sparkcdc.errors import SparkCdcError


def discover(parser_group: argparse._SubParsersAction, prefix: str) -> None:
    """Import every ``sparkcdc.cli.<prefix>*`` module and let it register its subcommand."""
    for mod in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith(prefix):
            module = importlib.import_module(f"sparkcdc.cli.{mod.name}")
            module.register(parser_group)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser."""
    parser = argparse.ArgumentParser(prog="sparkcdc", description="Change data capture on Apache Spark")
    parser.add_argument("--version", action="version", version=f"sparkcdc {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--log-format", default="text", choices=LOG_FORMATS, help="log lines as text or one JSON object each"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    discover(sub, "cmd_")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure(args.log_level, args.log_format)
    try:
        rc = args.func(args)
    except SparkCdcError as err:
        print(f"Error: [{err.code}] {err.message}", file=sys.stderr)
        return 2 if not err.transient else 3
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
