"""MariaDB's COMPRESSED columns (binlog types 140 and 141): the stored form is inflated to the value.

The stored form is MariaDB's (``sql/field_comp.cc``): empty stays empty; else a header byte
with the method in its high nibble, 0 for bytes stored as they are and 8 for zlib; for zlib
the low 3 bits count the bytes of the original length (big-endian, after the header) and bit 3
marks a raw deflate stream (``column_compression_zlib_wrap`` off, the default). The live
server's own compressed values go through every path in ``tests/oracle`` (form
``compressed_columns``).
"""

from __future__ import annotations

import zlib

import pytest

from sparkcdc.capture import tablemap as t
from sparkcdc.capture.rowcodec import column_uncompress
from sparkcdc.capture.tablemap import TableMap
from sparkcdc.errors import DecodeError

TM = TableMap(1, "db", "t", [t.T_VARCHAR_COMPRESSED], [300], [True], real_types=[t.T_VARCHAR_COMPRESSED])
TM.names = ["doc"]


def stored_zlib(value: bytes, wrap: bool) -> bytes:
    nlen = (len(value).bit_length() + 7) // 8
    c = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS if wrap else -zlib.MAX_WBITS)
    body = c.compress(value) + c.flush()
    return bytes([0x80 + nlen + (0 if wrap else 8)]) + len(value).to_bytes(nlen, "big") + body


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("value", [b"ab", "é😀 ".encode() * 500, bytes(range(256)) * 300])
def test_zlib_values_inflate(value: bytes, wrap: bool) -> None:
    assert column_uncompress(stored_zlib(value, wrap), TM, 0) == value


def test_values_stored_as_they_are_and_empty() -> None:
    assert column_uncompress(b"\x00short", TM, 0) == b"short"
    assert column_uncompress(b"\x00", TM, 0) == b""
    assert column_uncompress(b"", TM, 0) == b""


def test_an_unknown_method_or_a_wrong_length_fails_by_column() -> None:
    with pytest.raises(DecodeError, match=r"db\.t\.doc is compressed with method 9"):
        column_uncompress(b"\x91\x02xx", TM, 0)
    bad = bytearray(stored_zlib(b"hello world", False))
    bad[1] = 99  # the declared length
    with pytest.raises(DecodeError, match=r"db\.t\.doc: .* inflates to 11 bytes, not the 99"):
        column_uncompress(bytes(bad), TM, 0)
    with pytest.raises(DecodeError, match=r"db\.t\.doc: its zlib-compressed value does not inflate"):
        column_uncompress(b"\x89\x0b" + b"garbage!", TM, 0)
