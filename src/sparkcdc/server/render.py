"""Shared pieces of the ``sparkcdc cli`` verbs: server flags, the API client, JSON or table output."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

from sparkcdc.server.client import DEFAULT_SERVER, ApiClient


def add_client_args(p: argparse.ArgumentParser) -> None:
    """``--server``, ``--auth-token``, ``--output``."""
    p.add_argument(
        "--server",
        default=os.environ.get("SPARKCDC_SERVER", DEFAULT_SERVER),
        help="address of a sparkcdc server (default %(default)s, env SPARKCDC_SERVER)",
    )
    p.add_argument(
        "--auth-token",
        default=os.environ.get("SPARKCDC_AUTH_TOKEN"),
        help="bearer token of a server started with --auth-token (env SPARKCDC_AUTH_TOKEN)",
    )
    p.add_argument(
        "--output", "-o", choices=["json", "table"], default="json", help="output format (default json)"
    )


def client_of(args: argparse.Namespace) -> ApiClient:
    """An ApiClient for the parsed ``--server``/``--auth-token``."""
    return ApiClient(args.server, args.auth_token)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict):
        if set(v) >= {"code", "message"}:
            return f"[{v['code']}] {v['message']}"
        return json.dumps(v, sort_keys=True)
    if isinstance(v, list):
        return ", ".join(_cell(x) for x in v) or "-"
    return str(v)


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A plain-text table with a header row."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c.upper())] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def key_values(obj: dict[str, Any]) -> str:
    """One ``KEY  value`` line per field (nested config as compact JSON)."""
    width = max((len(k) for k in obj), default=0)
    return "\n".join(f"{k.ljust(width)}  {_cell(v)}" for k, v in obj.items())


def emit(data: Any, output: str, columns: list[str] | None = None, out: TextIO | None = None) -> None:
    """Print ``data`` as indented JSON, or as a table (lists) / key-value lines (objects)."""
    out = out or sys.stdout
    if output == "table":
        if isinstance(data, list):
            print(table(data, columns or sorted({k for r in data for k in r})), file=out)
        elif isinstance(data, dict):
            print(key_values(data), file=out)
        else:
            print(data, file=out)
        return
    print(json.dumps(data, indent=2, sort_keys=False), file=out)
