"""A CSV record renderer straight from the spec (§3), value by value: the oracle for ``CSVEncoder``.

Deliberately naive and independent of ``codec.csv_kinds``: every value is rendered by its
Python type (a FLOAT column's floats as float32), meta fields are joined as a list. The
encoder's per-column formatters must give the same bytes, and raise the same errors.
"""

from __future__ import annotations

import base64
import re
from decimal import Decimal
from typing import Any

from sparkcdc.codec.csv import CSVEncoder
from sparkcdc.codec.values import decimal_text, go_g_format
from sparkcdc.errors import DecodeError
from sparkcdc.model import ColumnInfo, RowChange, TableInfo
from sparkcdc.model.schema import INT_TYPES


def _string(enc: CSVEncoder, s: str) -> str:
    if enc.quote:
        return enc.quote + s.replace(enc.quote, enc.quote * 2) + enc.quote
    d = enc.delimiter
    repl = {"\\": "\\\\", "\r": "\\r", "\n": "\\n", d: "".join("\\" + ch for ch in d)}
    return re.sub(re.escape(d) + r"|[\\\r\n]", lambda m: repl[m.group()], s)


def _binary(enc: CSVEncoder, v: bytes) -> str:
    return v.hex() if enc.binary_encoding == "hex" else base64.b64encode(v).decode("ascii")


def _value(enc: CSVEncoder, v: Any, col: ColumnInfo) -> str:
    if v is None:
        return enc.null
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_g_format(v, 32 if col.type == "float" else 64)
    if isinstance(v, bytes | bytearray | memoryview):
        return _string(enc, _binary(enc, bytes(v)))
    if isinstance(v, Decimal):
        return _string(enc, decimal_text(v, col.scale))
    return _string(enc, str(v))


def _handle_key(enc: CSVEncoder, image: tuple[Any, ...], table: TableInfo) -> str:
    idx = table.handle_key_index
    if not idx:
        return enc.null
    if len(idx) == 1 and table.columns[idx[0]].type in INT_TYPES:
        return _string(enc, str(image[idx[0]]))
    parts = []
    for i in idx:
        v = image[i]
        parts.append(_binary(enc, v) if isinstance(v, bytes) else ("" if v is None else str(v)))
    return _string(enc, "{" + ", ".join(parts) + "}")


def _record(
    enc: CSVEncoder, op: str, row: RowChange, table: TableInfo, image: tuple[Any, ...], is_update: bool
) -> str:
    if len(image) != len(table.columns):
        raise DecodeError(
            f"row for {row.schema}.{row.table} has {len(image)} values but the table has "
            f"{len(table.columns)} columns at version {table.version}"
        )
    fields = [_string(enc, op), _string(enc, row.table), _string(enc, row.schema)]
    if enc.include_commit_ts:
        fields.append(str(row.commit_ts))
    if enc.output_old_value:
        fields.append("true" if is_update else "false")
    if enc.output_handle_key:
        fields.append(_handle_key(enc, image, table))
    fields += [_value(enc, v, col) for v, col in zip(image, table.columns, strict=True)]
    return enc.delimiter.join(fields) + enc.terminator


def encode_row(enc: CSVEncoder, row: RowChange, table: TableInfo) -> bytes:
    """The bytes ``enc.encode_row(row, table)`` must write (or the error it must raise)."""
    if len(table.columns) == 0:
        raise DecodeError(f"table {row.schema}.{row.table} has no columns; cannot encode a CSV row")
    image = row.before if row.op == "D" else row.after
    if image is None:
        raise DecodeError(
            f"{row.op} row change for {row.schema}.{row.table} at commit_ts {row.commit_ts} has no "
            "row image; the capture must emit full row images"
        )
    if row.op != "U":
        text = _record(enc, row.op, row, table, image, False)
    elif enc.output_old_value and row.before is not None:
        text = _record(enc, "I", row, table, image, True)  # checks the new image first
        text = _record(enc, "D", row, table, row.before, True) + text
    else:
        text = _record(enc, "U", row, table, image, True)
    return text.encode("utf-8", "surrogateescape")
