"""Row images of ROWS events decoded in C (see _rowdecode.c and rowcodec.RowDecoder.layout_for)."""

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

K_INT8: int
K_UINT8: int
K_INT16: int
K_UINT16: int
K_INT24: int
K_UINT24: int
K_INT32: int
K_UINT32: int
K_INT64: int
K_UINT64: int
K_YEAR: int
K_FLOAT: int
K_DOUBLE: int
K_DECIMAL: int
K_DATE: int
K_DATETIME2: int
K_DATETIME: int
K_TIMESTAMP2: int
K_TIMESTAMP: int
K_TIME2: int
K_TIME: int
K_BIT: int
K_ENUM: int
K_SET: int
K_STRING: int
K_JSON: int
K_UUID: int
K_INET4: int
K_INET6: int

class Layout:
    """The columns present in one row image: (kind, index, a, b, obj) each, in column order."""

    @property
    def npresent(self) -> int: ...
    def __init__(
        self,
        schema: str,
        table: str,
        ncol: int,
        columns: Sequence[tuple[int, int, int, int, Any]],
        error: Callable[[str], BaseException],
        decimal_fallback: Callable[[bytes, int, int], Decimal],
    ) -> None: ...

def decode_rows(
    layout1: Layout, layout2: Layout | None, body: bytes, pos: int, op: str
) -> list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]: ...
def row_changes(
    cls: type,
    op: str,
    schema: str,
    table: str,
    version: int,
    ts: int,
    images: list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]],
    seq0: int,
    pos: Any,
) -> list[Any]: ...
