"""canal-json row messages rendered in C (see _canaljson.c and canal_json.native)."""

from collections.abc import Callable, Sequence
from typing import Any

R_INT: int
R_DOUBLE: int
R_DECIMAL: int
R_BYTES: int
R_STR: int
R_ENUM: int
R_OTHER: int

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

def json_str(s: str) -> bytes: ...
def json_latin1(b: bytes) -> bytes: ...
