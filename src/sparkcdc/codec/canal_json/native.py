"""The binding of the C row renderer (``codec._canaljson``) to a table's layout.

``native_rows(layout)`` builds, once per table, the ``Columns`` objects that
write a whole row message in C, or returns None when the extension is not built.
``Columns.message`` and ``Columns.message_changed`` return None for an image the
C code does not take (not a tuple of the table's width): the encoder then
renders that row with the reference, by that explicit answer. Every other
failure raises.
"""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sparkcdc.codec.canal_json.reference import ColumnLayout, TableLayout, enum_tokens
from sparkcdc.model.schema import BLOB_TYPES, INT_TYPES, ColumnInfo, TableInfo

if TYPE_CHECKING:
    from sparkcdc.codec import _canaljson

log = logging.getLogger(__name__)

try:
    from sparkcdc.codec import _canaljson as EXTENSION
except ImportError as _exc:  # not built (a source checkout without the compile step)
    EXTENSION = None  # type: ignore[assignment]
    log.warning(
        "the C canal-json renderer (sparkcdc.codec._canaljson) is not built: %s; rows are rendered "
        "by the Python reference (codec.canal_json.reference), several times slower",
        _exc,
    )
"""The C extension module, None when it is not built (tests set it to None to run the fallback)."""


def native_rows(layout: TableLayout) -> NativeRows | None:
    """The C renderers of a table's row messages, None when the extension is not built."""
    if EXTENSION is None:
        return None
    return NativeRows(
        native_columns(layout.cols, layout.table), native_columns(layout.handle_cols, layout.table)
    )


def _column_kind(col: ColumnInfo) -> int:
    """The C renderer's kind for a column; FLOAT, SET and the rest use the reference formatter."""
    assert EXTENSION is not None
    t = col.type
    if t in INT_TYPES or t in ("year", "bit"):
        return EXTENSION.R_INT
    if t == "double":
        return EXTENSION.R_DOUBLE
    if t == "decimal":
        return EXTENSION.R_DECIMAL
    if t in BLOB_TYPES:
        return EXTENSION.R_BYTES
    if t == "enum":
        return EXTENSION.R_ENUM
    if t in ("float", "set"):
        return EXTENSION.R_OTHER
    return EXTENSION.R_STR  # text, JSON, dates and times (strings in the model)


def native_columns(cols: list[ColumnLayout], table: TableInfo) -> _canaljson.Columns:
    """The C renderer of ``cols`` (the columns of one ``data``/``old`` object) of ``table``'s rows."""
    assert EXTENSION is not None
    spec: list[tuple[int, int, bytes, int, Any, dict[str, str] | None]] = []
    for c in cols:
        col = table.columns[c.index]
        kind = _column_kind(col)
        scale = col.scale if kind == EXTENSION.R_DECIMAL and col.scale is not None else -1
        tokens = enum_tokens(col) if kind == EXTENSION.R_ENUM else None
        spec.append((kind, c.index, c.key.encode(), scale, c.fmt, tokens))
    return EXTENSION.Columns(len(table.columns), spec, Decimal)


class NativeRows:
    """One table's row messages written in C: all columns, or only the handle-key columns."""

    __slots__ = ("all", "handle")

    def __init__(self, all_columns: _canaljson.Columns, handle_columns: _canaljson.Columns) -> None:
        self.all = all_columns
        self.handle = handle_columns
