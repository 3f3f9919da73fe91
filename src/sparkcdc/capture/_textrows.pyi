"""Text-protocol result rows split and converted in C (see _textrows.c and capture.snapshot.TextRowReader)."""

from typing import Any

T_INT: int
T_DOUBLE: int
T_FLOAT32: int
T_DECIMAL: int
T_TEXT: int
T_BYTES: int
T_BIT: int
T_CALL: int
S_MORE: int
S_EOF: int
S_ERROR: int
S_BIG: int
MAX_PACKET: int

def parse_rows(
    data: bytes | bytearray | memoryview, pos: int, seq: int, kinds: tuple[int, ...], objs: tuple[Any, ...]
) -> tuple[list[tuple[Any, ...]], int, int, int]: ...
def parse_row(
    payload: bytes | bytearray | memoryview, kinds: tuple[int, ...], objs: tuple[Any, ...]
) -> tuple[Any, ...]: ...
