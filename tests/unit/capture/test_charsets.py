"""Collation ids to codecs (``capture/charsets.py``): the server's tables, or a refusal by name.

The live server's text in these charsets goes through every path in ``tests/oracle`` (form
``more_charsets``); here the table itself.
"""

from __future__ import annotations

import pytest

from sparkcdc.capture import charsets as c
from sparkcdc.capture import tablemap as t
from sparkcdc.capture.tablemap import TableMap, column_codec
from sparkcdc.errors import DecodeError


def test_every_listed_charset_has_a_codec_or_is_refused() -> None:
    assert set(c.CODECS) | c.NO_CODEC == set(c.COLLATION_IDS)
    assert c.NO_CODEC == {"armscii8", "dec8", "eucjpms", "filename", "geostd8", "keybcs2", "swe7"}
    for codec in c.CODECS.values():
        if codec != "binary":
            "x".encode(codec)  # every codec exists


@pytest.mark.parametrize(
    ("collation_id", "codec"),
    [
        (8, "mysql_latin1"),
        (7, "koi8_r"),
        (35, "utf-16-be"),
        (54, "utf-16-be"),
        (56, "utf-16-le"),
        (60, "utf-32-be"),
        (33, "utf-8"),
        (255, "utf-8"),
        (1270, "utf-8"),
        (2048, "utf-8"),  # utf8mb3_uca1400_ai_ci (MariaDB 10.10+)
        (2304, "utf-8"),  # utf8mb4_uca1400_ai_ci
        (2560, "utf-16-be"),  # ucs2_uca1400_ai_ci
        (3271, "utf-32-be"),  # utf32_uca1400_croatian_nopad_as_cs
        (63, "binary"),
        (248, "gb18030"),
    ],
)
def test_ids_of_both_servers(collation_id: int, codec: str) -> None:
    assert c.codec_of(collation_id) == codec


def test_mysql_latin1_is_cp1252_with_the_five_gaps_passed_through() -> None:
    raw = bytes(range(256))
    text = raw.decode("mysql_latin1")
    assert text[0x80] == "€" and text[0x8A] == "Š" and text[0x81] == "\x81" and text[0xE9] == "é"
    assert text.encode("mysql_latin1") == raw


def test_an_unreadable_charset_or_id_fails_the_column_by_name() -> None:
    tm = TableMap(1, "db", "t", [t.T_VARCHAR, t.T_VARCHAR], [20, 20], [True, True])
    tm.names = ["old", "odd"]
    tm.charsets = [3, 4000]  # dec8_swedish_ci; an id no server has
    with pytest.raises(
        DecodeError, match=r"column db\.t\.old: character set dec8, which sparkcdc cannot read"
    ):
        column_codec(tm, 0)
    with pytest.raises(DecodeError, match=r"column db\.t\.odd: collation id 4000"):
        column_codec(tm, 1)
