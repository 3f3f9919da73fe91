"""Changefeeds of one ``sparkcdc server``, each capturing its own table: creating them, their
states, what a failure needs from the server's log, and rows in their CSV sinks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.server.conftest import ServerProc


def table_of(cf: str) -> str:
    """The table changefeed ``cf`` captures."""
    return cf.replace("-", "_")


def log_causes(log: str) -> str:
    """What a failure needs from the server's log: each error line and the first lines of each
    Python traceback and Java cause (a Spark stack trace is thousands of lines; its tail tells little)."""
    keep: list[str] = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if " ERROR " in line or " WARNING " in line or line.startswith(("Caused by:", "Traceback")):
            keep.extend(lines[i : i + (12 if line.startswith("Traceback") else 2)])
        elif re.match(r"^[\w.]+(Error|Exception)\b", line):
            keep.append(line)
    text = "\n".join(dict.fromkeys(keep))
    return text[-12000:] if text else log[-4000:]


def in_csv_sink(folder: Path, needle: str) -> bool:
    return any(needle in f.read_text(errors="replace") for f in folder.rglob("*.csv"))


def create_changefeeds(
    server: ServerProc, mariadb: LocalMariaDB, schema: str, sinks: dict[str, str]
) -> dict[str, int]:
    """Create one changefeed per ``sinks`` item (id → sink URI), each capturing ``schema``'s table
    ``table_of(id)``; their checkpoint-ts at creation."""
    created: dict[str, int] = {}
    with server.client() as c:
        for cf, sink in sinks.items():
            body = {
                "changefeed_id": cf,
                "upstream_uri": mariadb.uri,
                "sink_uri": sink,
                "replica_config": {"filter": {"rules": [f"{schema}.{table_of(cf)}"]}},
            }
            created[cf] = int(c.create_changefeed(body)["checkpoint_ts"])
    return created


def states(server: ServerProc) -> dict[str, dict[str, Any]]:
    """The server's changefeeds by id, as ``GET /changefeeds`` lists them."""
    with server.client() as c:
        return {cf["id"]: cf for cf in c.list_changefeeds()["items"]}
