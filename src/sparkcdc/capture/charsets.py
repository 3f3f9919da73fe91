"""Character sets of captured text: collation id → charset → the Python codec that reads its bytes.

Binlog table maps give each text column's collation id (optional metadata DEFAULT_CHARSET /
COLUMN_CHARSET, and ENUM_AND_SET_* for ENUM and SET elements). ``COLLATION_IDS`` lists every id
of MariaDB 10.11 (``information_schema.COLLATION_CHARACTER_SET_APPLICABILITY``: the UCA 14.0
collations from 2048 up too, which ``COLLATIONS`` leaves out; and ``filename``, 17, the server's
charset of file names, which a column may be declared in) and MySQL 8.4's additions (gb18030, the
``utf8mb4_0900`` collations, ``utf8mb3_tolower_ci``); the two never give one id two charsets.

A charset is read with the codec whose table is the server's: MySQL's ``latin1`` is cp1252 with
the five bytes cp1252 leaves undefined read as the control characters of the same number (the
codec ``mysql_latin1`` registered here), ``ucs2``/``utf16``/``utf32`` are big-endian. A charset
without such a codec (``NO_CODEC``), or an id outside the list, fails the column by name: text
read with the wrong table would be delivered changed, and nothing says so downstream.
"""

from __future__ import annotations

import codecs
from typing import Any

from sparkcdc.errors import DecodeError

COLLATION_IDS: dict[str, tuple[int | tuple[int, int], ...]] = {
    "armscii8": (32, 64, 1056, 1088),
    "ascii": (11, 65, 1035, 1089),
    "big5": (1, 84, 1025, 1108),
    "binary": (63,),
    "cp1250": (26, 34, 44, 66, 99, 1050, 1090),
    "cp1251": (14, 23, (50, 52), (1074, 1075)),
    "cp1256": (57, 67, 1081, 1091),
    "cp1257": (29, (58, 59), (1082, 1083)),
    "cp850": (4, 80, 1028, 1104),
    "cp852": (40, 81, 1064, 1105),
    "cp866": (36, 68, 1060, 1092),
    "cp932": ((95, 96), (1119, 1120)),
    "dec8": (3, 69, 1027, 1093),
    "eucjpms": ((97, 98), (1121, 1122)),
    "filename": (17,),
    "euckr": (19, 85, 1043, 1109),
    "gb18030": ((248, 250),),
    "gb2312": (24, 86, 1048, 1110),
    "gbk": (28, 87, 1052, 1111),
    "geostd8": ((92, 93), (1116, 1117)),
    "greek": (25, 70, 1049, 1094),
    "hebrew": (16, 71, 1040, 1095),
    "hp8": (6, 72, 1030, 1096),
    "keybcs2": (37, 73, 1061, 1097),
    "koi8r": (7, 74, 1031, 1098),
    "koi8u": (22, 75, 1046, 1099),
    "latin1": (5, 8, 15, 31, (47, 49), 94, 1032, 1071),
    "latin2": (2, 9, 21, 27, 77, 1033, 1101),
    "latin5": (30, 78, 1054, 1102),
    "latin7": (20, (41, 42), 79, 1065, 1103),
    "macce": (38, 43, 1062, 1067),
    "macroman": (39, 53, 1063, 1077),
    "sjis": (13, 88, 1037, 1112),
    "swe7": (10, 82, 1034, 1106),
    "tis620": (18, 89, 1042, 1113),
    "ucs2": (35, 90, (128, 151), 159, (640, 642), 1059, 1114, 1152, 1174, (2560, 2727), (2744, 2759)),
    "ujis": (12, 91, 1036, 1115),
    "utf16": ((54, 55), (101, 124), (672, 674), (1078, 1079), 1125, 1147, (2816, 2983), (3000, 3015)),
    "utf16le": (56, 62, 1080, 1086),
    "utf32": ((60, 61), (160, 183), (736, 738), (1084, 1085), 1184, 1206, (3072, 3239), (3256, 3271)),
    "utf8mb3": (33, 76, 83, (192, 215), 223, (576, 578), 1057, 1107, 1216, 1238, (2048, 2215), (2232, 2247)),
    "utf8mb4": (
        (45, 46),
        (224, 247),
        (255, 323),
        (608, 610),
        (1069, 1070),
        1248,
        1270,
        (2304, 2471),
        (2488, 2503),
    ),
}

CODECS: dict[str, str] = {
    "ascii": "ascii",
    "big5": "big5",
    "binary": "binary",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "cp932": "cp932",
    "euckr": "euc_kr",
    "gb18030": "gb18030",
    "gb2312": "gb2312",
    "gbk": "gbk",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "hp8": "hp_roman8",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "latin1": "mysql_latin1",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "macce": "mac_latin2",
    "macroman": "mac_roman",
    "sjis": "shift_jis",
    "tis620": "tis_620",
    "ucs2": "utf-16-be",
    "ujis": "euc_jp",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "utf8mb3": "utf-8",
    "utf8mb4": "utf-8",
}
"""The Python codec of each charset that has one with the server's table."""

NO_CODEC = frozenset(COLLATION_IDS) - frozenset(CODECS)
"""Charsets Python has no codec with the server's table for (dec8, swe7, keybcs2, armscii8, geostd8,
eucjpms, filename)."""

_CHARSET_OF: dict[int, str] = {}
for _name, _ids in COLLATION_IDS.items():
    for _entry in _ids:
        _lo, _hi = _entry if isinstance(_entry, tuple) else (_entry, _entry)
        for _id in range(_lo, _hi + 1):
            _CHARSET_OF[_id] = _name


def charset_of(collation_id: int) -> str | None:
    """The charset of a collation id (None for an id neither server has)."""
    return _CHARSET_OF.get(collation_id)


def codec_of(collation_id: int) -> str:
    """The Python codec for text of ``collation_id`` ('binary' for bytes); DecodeError when there is none
    (callers add which column)."""
    charset = _CHARSET_OF.get(collation_id)
    if charset is None:
        raise DecodeError(
            f"collation id {collation_id}, which neither MariaDB 10.11 nor MySQL 8.4 has: sparkcdc cannot "
            "tell its character set"
        )
    codec = CODECS.get(charset)
    if codec is None:
        raise DecodeError(
            f"character set {charset}, which sparkcdc cannot read (Python has no codec with its table); "
            "convert the column to utf8mb4 or leave the table out of the changefeed's filter"
        )
    return codec


def charset_codec(charset: str, what: str) -> str:
    """The Python codec of a charset name as DDL spells it; ``what`` names the column for errors."""
    name = charset.lower()
    if name == "utf8":
        name = "utf8mb3"
    codec = CODECS.get(name)
    if codec is None:
        raise DecodeError(f"{what} is in character set {charset}, which sparkcdc cannot read")
    return codec


# MySQL's latin1: cp1252, except 0x81, 0x8D, 0x8F, 0x90 and 0x9D (undefined there) are U+0081 ...
_LATIN1_TABLE = "".join(
    chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252") for b in range(256)
)
_LATIN1_ENCODE = codecs.charmap_build(_LATIN1_TABLE)


def _mysql_latin1(name: str) -> codecs.CodecInfo | None:
    if name != "mysql_latin1":
        return None

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        return codecs.charmap_encode(text, errors, _LATIN1_ENCODE)

    def decode(data: Any, errors: str = "strict", /) -> tuple[str, int]:
        return codecs.charmap_decode(data, errors, _LATIN1_TABLE)

    return codecs.CodecInfo(encode, decode, name="mysql_latin1")


codecs.register(_mysql_latin1)
