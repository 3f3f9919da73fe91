"""Entry point of the ``sparkcdc`` console script."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import sparkcdc.cli as cli_pkg
from sparkcdc import __version__
from sparkcdc.cli.logs import LOG_FORMATS, configure
from sparkcdc.config.uri import scrub_secrets
from sparkcdc.errors import ConfigError, SparkCdcError, map_spark_error


def discover(parser_group: argparse._SubParsersAction, prefix: str) -> None:
    """Import every ``sparkcdc.cli.<prefix>*`` module and let it register its subcommand."""
    for mod in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith(prefix):
            module = importlib.import_module(f"sparkcdc.cli.{mod.name}")
            module.register(parser_group)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one coded line, like every other refusal."""

    def error(self, message: str) -> NoReturn:
        """Print ``Error: [CDC:ErrInvalidConfig] <prog>: <message>; see <prog> --help`` and exit 2."""
        line = f"Error: [{ConfigError.code}] {self.prog}: {message}; see {self.prog} --help"
        print(scrub_secrets(" ".join(line.split()), sys.argv[1:]), file=sys.stderr, flush=True)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser."""
    parser = _Parser(prog="sparkcdc", description="Change data capture on Apache Spark")
    parser.add_argument("--version", action="version", version=f"sparkcdc {__version__}")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--log-format", default="text", choices=LOG_FORMATS, help="log lines as text or one JSON object each"
    )
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error before its one-line message"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    discover(sub, "cmd_")
    return parser


def error_line(err: BaseException, argv: Sequence[str]) -> str:
    """The one line an error ends a command with: ``Error: [CODE] message``, secrets of ``argv`` masked.

    A sparkcdc error prints its code and message; anything else is unexpected and prints as
    ``[CDC:ErrUnknown] Type: message``.
    """
    if not isinstance(err, SparkCdcError):
        # A failure out of Spark may carry a sparkcdc error in its text; otherwise its summary line.
        err = map_spark_error(err)
    code, text = err.code, err.message
    text = "; ".join(line.strip() for line in text.splitlines() if line.strip()) or type(err).__name__
    return f"Error: [{code}] {scrub_secrets(text, list(argv))}"


def _report(err: BaseException, argv: Sequence[str], debug: bool) -> None:
    if debug:
        text = "".join(traceback.format_exception(err))
        print(scrub_secrets(text, list(argv)), file=sys.stderr, end="")
    print(error_line(err, argv), file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    configure(args.log_level, args.log_format)
    debug = bool(getattr(args, "debug", False))
    try:
        rc = args.func(args)
    except SparkCdcError as err:
        _report(err, argv, debug)
        return 2 if not err.transient else 3
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (``| head``): nothing more can be said there, and Python's
        # flush at exit must not print a traceback about it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as err:  # the last resort: one coded line instead of a traceback
        _report(err, argv, debug)
        return 1
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
