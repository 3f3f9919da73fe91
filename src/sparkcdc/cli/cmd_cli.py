"""``sparkcdc cli <group> <verb>``: TiCDC-style control verbs; groups live in ``cli_<group>.py``."""

from __future__ import annotations

import argparse

from sparkcdc.cli.main import discover


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``cli`` command and its discovered groups."""
    p = sub.add_parser("cli", help="control verbs (changefeed, capture, tso)")
    groups = p.add_subparsers(dest="group", metavar="GROUP")
    groups.required = True
    discover(groups, "cli_")
