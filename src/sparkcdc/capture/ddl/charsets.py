"""Character sets and collations as MariaDB 10.11 knows them: default collation and bytes per character."""

from __future__ import annotations

CHARSETS: dict[str, tuple[str, int]] = {
    "armscii8": ("armscii8_general_ci", 1),
    "ascii": ("ascii_general_ci", 1),
    "big5": ("big5_chinese_ci", 2),
    "binary": ("binary", 1),
    "cp1250": ("cp1250_general_ci", 1),
    "cp1251": ("cp1251_general_ci", 1),
    "cp1256": ("cp1256_general_ci", 1),
    "cp1257": ("cp1257_general_ci", 1),
    "cp850": ("cp850_general_ci", 1),
    "cp852": ("cp852_general_ci", 1),
    "cp866": ("cp866_general_ci", 1),
    "cp932": ("cp932_japanese_ci", 2),
    "dec8": ("dec8_swedish_ci", 1),
    "eucjpms": ("eucjpms_japanese_ci", 3),
    "euckr": ("euckr_korean_ci", 2),
    "gb2312": ("gb2312_chinese_ci", 2),
    "gbk": ("gbk_chinese_ci", 2),
    "geostd8": ("geostd8_general_ci", 1),
    "greek": ("greek_general_ci", 1),
    "hebrew": ("hebrew_general_ci", 1),
    "hp8": ("hp8_english_ci", 1),
    "keybcs2": ("keybcs2_general_ci", 1),
    "koi8r": ("koi8r_general_ci", 1),
    "koi8u": ("koi8u_general_ci", 1),
    "latin1": ("latin1_swedish_ci", 1),
    "latin2": ("latin2_general_ci", 1),
    "latin5": ("latin5_turkish_ci", 1),
    "latin7": ("latin7_general_ci", 1),
    "macce": ("macce_general_ci", 1),
    "macroman": ("macroman_general_ci", 1),
    "sjis": ("sjis_japanese_ci", 2),
    "swe7": ("swe7_swedish_ci", 1),
    "tis620": ("tis620_thai_ci", 1),
    "ucs2": ("ucs2_general_ci", 2),
    "ujis": ("ujis_japanese_ci", 3),
    "utf16": ("utf16_general_ci", 4),
    "utf16le": ("utf16le_general_ci", 4),
    "utf32": ("utf32_general_ci", 4),
    "utf8mb3": ("utf8mb3_general_ci", 3),
    "utf8mb4": ("utf8mb4_general_ci", 4),
}

SERVER_CHARSET = "utf8mb4"
SERVER_COLLATION = "utf8mb4_general_ci"


def normalize_charset(name: str) -> str:
    """The canonical charset name (``utf8`` is ``utf8mb3`` in MariaDB 10.6+)."""
    n = name.lower()
    if n == "utf8":
        return "utf8mb3"
    return n


def normalize_collation(name: str) -> str:
    """The canonical collation name (``utf8_bin`` is ``utf8mb3_bin``)."""
    n = name.lower()
    if n.startswith("utf8_"):
        return "utf8mb3_" + n[5:]
    return n


def charset_of_collation(collation: str) -> str:
    """The charset a collation belongs to."""
    c = normalize_collation(collation)
    if c == "binary":
        return "binary"
    for cs in sorted(CHARSETS, key=len, reverse=True):
        if c.startswith(cs + "_"):
            return cs
    return c.split("_", 1)[0]


def default_collation(charset: str) -> str:
    """The default collation of a charset in MariaDB 10.11."""
    cs = normalize_charset(charset)
    if cs in CHARSETS:
        return CHARSETS[cs][0]
    return cs + "_general_ci"


def mbmaxlen(charset: str | None) -> int:
    """Bytes per character of a charset (1 for binary/unknown)."""
    if not charset:
        return 1
    return CHARSETS.get(normalize_charset(charset), ("", 4))[1]


def resolve_charset(
    charset: str | None, collation: str | None, fallback: tuple[str, str] | None = None
) -> tuple[str, str] | None:
    """Complete a (charset, collation) pair the way the server does; None when neither is known."""
    cs = normalize_charset(charset) if charset else None
    co = normalize_collation(collation) if collation else None
    if cs is None and co is None:
        return fallback
    if cs is None:
        assert co is not None
        cs = charset_of_collation(co)
    if co is None:
        co = default_collation(cs)
    return cs, co
