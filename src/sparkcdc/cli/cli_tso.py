"""``sparkcdc cli tso query``: a ts every later transaction exceeds."""

from __future__ import annotations

import argparse

from sparkcdc.capture.start import query_tso
from sparkcdc.capture.upstream import UpstreamConfig


def register(groups: argparse._SubParsersAction) -> None:
    """Add ``cli tso query``."""
    p = groups.add_parser("tso", help="timestamps")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    q = verbs.add_parser("query", help="print a ts that every transaction committed later exceeds")
    q.add_argument("--upstream-uri", required=True, help="mysql://user:pass@host:port/")
    q.set_defaults(func=_query)


def _query(args: argparse.Namespace) -> int:
    print(query_tso(UpstreamConfig.from_uri(args.upstream_uri)))
    return 0
