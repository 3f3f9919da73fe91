"""``sparkcdc cli capture list``: the running servers (TiCDC calls them captures)."""

from __future__ import annotations

import argparse

from sparkcdc.server.render import add_client_args, client_of, emit

COLUMNS = ["id", "address", "is_owner", "version", "changefeeds"]


def cmd_list(args: argparse.Namespace) -> int:
    """List the live servers and the changefeeds each one runs."""
    with client_of(args) as client:
        data = client.captures()
    emit(data["items"], args.output, COLUMNS)
    return 0


def register(groups: argparse._SubParsersAction) -> None:
    """Add ``cli capture`` and its verbs."""
    p = groups.add_parser("capture", help="list the running servers")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    v = verbs.add_parser("list", help="list the live servers")
    add_client_args(v)
    v.set_defaults(func=cmd_list)
