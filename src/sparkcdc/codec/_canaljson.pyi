"""canal-json row messages and CSV records rendered in C (see _canaljson.c, canal_json.native, csv)."""

from collections.abc import Callable, Sequence
from typing import Any

R_INT: int
R_DOUBLE: int
R_DECIMAL: int
R_BYTES: int
R_STR: int
R_ENUM: int
R_OTHER: int
F_INT: int
F_DOUBLE: int
F_DECIMAL: int
F_TEXT: int
F_BINARY: int
F_OTHER: int

class Columns:
    """The columns of one canal-json data/old object: (kind, index, key, scale, fmt, map) each."""

    @property
    def width(self) -> int: ...
    def __init__(
        self,
        width: int,
        columns: Sequence[tuple[int, int, bytes, int, Callable[[Any], str], dict[str, str] | None]],
        decimal_type: type,
    ) -> None: ...
    def render(self, img: tuple[Any, ...]) -> bytes | None: ...
    def message(
        self, prefix: str, before: tuple[Any, ...] | None, middle: str, img: tuple[Any, ...], suffix: str
    ) -> bytes | None: ...
    def message_changed(
        self, prefix: str, before: tuple[Any, ...], middle: str, img: tuple[Any, ...], suffix: str
    ) -> bytes | None: ...
    def messages(
        self,
        rows: Sequence[Any],
        ts: int,
        insert: str | None,
        update: str | None,
        delete: str | None,
        middle: str,
        suffix: str,
        promotions: tuple[tuple[int, int], ...],
        fallback: Callable[[Any], bytes],
    ) -> list[bytes]: ...

def json_str(s: str) -> bytes: ...
def json_latin1(b: bytes) -> bytes: ...

class CsvFields:
    """One table's CSV value fields: (kind, scale, fmt) of every column, in order."""

    @property
    def width(self) -> int: ...
    def __init__(
        self,
        columns: Sequence[tuple[int, int, Callable[[Any], str]]],
        decimal_type: type,
        delimiter: bytes,
        quote: bytes,
        null: bytes,
        hex: bool,
    ) -> None: ...
    def record(self, head: str, img: tuple[Any, ...], end: str) -> bytes | None: ...
