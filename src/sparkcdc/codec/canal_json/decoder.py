"""canal-json decoding: a message back into its fields, values and ``RowChange``."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import orjson

from sparkcdc.codec.canal_json.messages import TIDB_WATERMARK
from sparkcdc.codec.canal_types import base_type_of, is_binary_mysql_type
from sparkcdc.codec.values import enum_name, set_names, to_float32
from sparkcdc.errors import DecodeError
from sparkcdc.model.events import Op, RowChange
from sparkcdc.model.schema import BLOB_TYPES, INT_TYPES, ColumnInfo, TableInfo


@dataclass
class CanalMessage:
    """One decoded canal-json message."""

    kind: Literal["dml", "ddl", "watermark"]
    database: str
    table: str
    type: str
    pk_names: list[str] | None
    is_ddl: bool
    es: int
    ts: int
    sql: str
    sql_type: dict[str, int] | None
    mysql_type: dict[str, str] | None
    data: list[dict[str, str | None]] | None
    old: list[dict[str, str | None]] | None
    commit_ts: int | None = None
    watermark_ts: int | None = None
    only_handle_key: bool = False
    claim_check_location: str | None = None


def decode_canal_json(data: bytes) -> CanalMessage:
    """Parse one canal-json message (kind: ``isDdl`` → ddl; ``TIDB_WATERMARK`` → watermark; else dml)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"not a canal-json message: {exc}; first bytes: {bytes(data[:80])!r}") from exc
    if not isinstance(obj, dict):
        raise DecodeError(f"a canal-json message must be a JSON object, got {type(obj).__name__}")
    ext = obj.get("_tidb") or {}
    if not isinstance(ext, dict):
        raise DecodeError(f"canal-json _tidb must be an object, got {ext!r}")
    is_ddl = bool(obj.get("isDdl", False))
    typ = obj.get("type") or ""
    kind: Literal["dml", "ddl", "watermark"]
    if is_ddl:
        kind = "ddl"
    elif typ == TIDB_WATERMARK:
        kind = "watermark"
    else:
        kind = "dml"
        if typ not in ("INSERT", "UPDATE", "DELETE") and "claimCheckLocation" not in ext:
            raise DecodeError(
                f"canal-json DML message has unknown type {typ!r}; expected INSERT, UPDATE or DELETE"
            )
    return CanalMessage(
        kind=kind,
        database=obj.get("database") or "",
        table=obj.get("table") or "",
        type=typ,
        pk_names=obj.get("pkNames"),
        is_ddl=is_ddl,
        es=int(obj.get("es") or 0),
        ts=int(obj.get("ts") or 0),
        sql=obj.get("sql") or "",
        sql_type=obj.get("sqlType"),
        mysql_type=obj.get("mysqlType"),
        data=obj.get("data"),
        old=obj.get("old"),
        commit_ts=ext.get("commitTs"),
        watermark_ts=ext.get("watermarkTs"),
        only_handle_key=bool(ext.get("onlyHandleKey", False)),
        claim_check_location=ext.get("claimCheckLocation"),
    )


def canal_value_to_python(value: str | None, mysql_type: str, column: ColumnInfo | None = None) -> Any:
    """A canal string as a MySQL query parameter: binary → bytes, ENUM/SET → names (or ints), BIT → int."""
    if value is None:
        return None
    base = base_type_of(mysql_type)
    if is_binary_mysql_type(mysql_type):
        return _latin1_bytes(value)
    try:
        if base == "enum":
            return enum_name(column, int(value)) if column is not None else int(value)
        if base == "set":
            return set_names(column, int(value)) if column is not None else int(value)
        if base in ("bit", "year"):
            # YEAR as a number: MySQL reads the string '0' as 2000, the number 0 as 0000.
            return int(value)
    except ValueError as exc:
        raise DecodeError(f"canal-json value {value!r} is not a valid {mysql_type}: {exc}") from exc
    return value


def _latin1_bytes(value: str) -> bytes:
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise DecodeError(
            f"binary canal-json value {value[:40]!r} holds a character above U+00FF; "
            "binary values must be ISO-8859-1 encoded bytes"
        ) from exc


def canal_value_to_model(value: str | None, column: ColumnInfo) -> Any:
    """A canal string as the model's Python value for the column (inverse of ``canal_value``)."""
    if value is None:
        return None
    t = column.type
    try:
        if t in INT_TYPES or t in ("year", "bit"):
            return int(value)
        if t == "float":
            return to_float32(float(value))
        if t == "double":
            return float(value)
        if t == "decimal":
            return Decimal(value)
        if t in BLOB_TYPES:
            return _latin1_bytes(value)
        if t == "enum":
            return enum_name(column, int(value))
        if t == "set":
            return set_names(column, int(value))
    except (ValueError, ArithmeticError) as exc:
        raise DecodeError(
            f"canal-json value {value!r} is not a valid {column.type} for column {column.name!r}"
        ) from exc
    return value


_OPS: dict[str, Op] = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}


def canal_message_to_row_change(msg: CanalMessage, table: TableInfo) -> RowChange:
    """Rebuild a RowChange from a DML message using the table's columns (missing columns become None).

    For an UPDATE whose ``old`` holds only the changed columns, the other
    pre-image values are taken from ``data``.
    """
    if msg.kind != "dml" or msg.type not in _OPS:
        raise DecodeError(f"canal-json message of type {msg.type!r} is not a row change")
    op = _OPS[msg.type]
    data = (msg.data or [{}])[0]
    cols = table.columns

    def image(values: dict[str, str | None], fallback: dict[str, str | None] | None) -> tuple[Any, ...]:
        out = []
        for c in cols:
            if c.name in values:
                raw = values[c.name]
            elif fallback is not None:
                raw = fallback.get(c.name)
            else:
                raw = None
            out.append(canal_value_to_model(raw, c))
        return tuple(out)

    after: tuple[Any, ...] | None = image(data, None)
    before: tuple[Any, ...] | None = None
    if op == "D":
        before, after = after, None
    elif op == "U" and msg.old:
        before = image(msg.old[0], data)
    return RowChange(
        op=op,
        schema=msg.database,
        table=msg.table,
        table_version=table.version,
        commit_ts=msg.commit_ts or 0,
        before=before,
        after=after,
    )
