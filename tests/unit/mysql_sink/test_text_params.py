"""How the MySQL sink sends text of a column in a charset other than UTF-8: as the bytes capture
read, so the downstream stores exactly those (``statements._param_fn``)."""

from __future__ import annotations

from sparkcdc.capture.charsets import CODECS
from sparkcdc.model import ColumnInfo
from sparkcdc.sink.mysql.statements import _param_fn


def _send(charset: str, raw: bytes) -> object:
    """What the sink sends for a value capture decoded from ``raw`` (bytes of ``charset``)."""
    fn = _param_fn(ColumnInfo("c", "varchar", length=20, charset=charset, collation=f"{charset}_bin"))
    assert fn is not None
    return fn(raw.decode(CODECS[charset], "surrogateescape"))


def test_utf16_and_ucs2_units_python_cannot_read_go_back_as_their_bytes() -> None:
    # MariaDB's ucs2 holds a lone surrogate unit (main/ctype_utf16: 0xDF84); Python's decoder
    # escapes its two bytes, and Python's UTF-16 encoder refuses surrogateescape
    for charset, raw in (
        ("ucs2", bytes.fromhex("0061DF84")),
        ("utf16", bytes.fromhex("DF840061DBDB00E4")),
        ("utf16le", bytes.fromhex("610084DF")),
    ):
        assert _send(charset, raw) == raw, charset


def test_readable_text_is_sent_as_its_bytes_and_ascii_as_text() -> None:
    assert _send("utf16", "ü€😀".encode("utf-16-be")) == "ü€😀".encode("utf-16-be")
    assert _send("utf32", "😀x".encode("utf-32-be")) == "😀x".encode("utf-32-be")
    assert _send("utf16", "plain".encode("utf-16-be")) == "plain"
    assert _send("sjis", bytes.fromhex("815F")) == bytes.fromhex("815F")
    # UTF-8 and latin1 columns need no conversion
    assert _param_fn(ColumnInfo("c", "varchar", length=5, charset="utf8mb4", collation="utf8mb4_bin")) is None
