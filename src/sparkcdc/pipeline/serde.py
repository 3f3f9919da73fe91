"""Serialisation of events between the source, Spark and the writers."""

from __future__ import annotations

import pickle
from typing import Any

from sparkcdc.model import DDLEvent, DDLType, TableInfo

# Columns of the stream: one row per RowChange.
SOURCE_SCHEMA = (
    "commit_ts long, seq long, op string, `schema` string, `table` string, table_version long, payload binary"
)
COLUMNS = ("commit_ts", "seq", "op", "schema", "table", "table_version", "payload")


def dump_images(before: Any, after: Any, shape: bytes | None = None) -> bytes:
    """The payload of a row: its before/after images and, rarely, its own table shape."""
    return pickle.dumps((before, after, shape), protocol=5)


def load_images(payload: bytes) -> tuple[Any, Any, bytes | None]:
    """Inverse of ``dump_images``."""
    before, after, shape = pickle.loads(payload)
    return before, after, shape


def ddl_to_dict(d: DDLEvent) -> dict[str, Any]:
    """A JSON-able DDLEvent (offsets carry the DDL that a batch applies)."""
    return {
        "query": d.query,
        "schema": d.schema,
        "table": d.table,
        "ddl_type": str(d.ddl_type),
        "commit_ts": d.commit_ts,
        "table_version": d.table_version,
        "table_info": d.table_info.to_dict() if d.table_info is not None else None,
        "old_schema": d.old_schema,
        "old_table": d.old_table,
        "seq": d.seq,
        "sql_mode": d.sql_mode,
    }


def ddl_from_dict(d: dict[str, Any]) -> DDLEvent:
    """Inverse of ``ddl_to_dict``."""
    info = d.get("table_info")
    return DDLEvent(
        query=d["query"],
        schema=d["schema"],
        table=d["table"],
        ddl_type=DDLType(d["ddl_type"]),
        commit_ts=int(d["commit_ts"]),
        table_version=int(d["table_version"]),
        table_info=TableInfo.from_dict(info) if info else None,
        old_schema=d.get("old_schema"),
        old_table=d.get("old_table"),
        seq=int(d.get("seq", 0)),
        sql_mode=d.get("sql_mode"),
    )
