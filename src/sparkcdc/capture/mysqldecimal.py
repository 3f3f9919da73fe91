"""MySQL's binary DECIMAL (row images, and DECIMAL values inside binary JSON).

Groups of nine digits take 4 bytes big-endian, a leading/trailing partial group fewer
(``DIG2BYTES``); the sign is the top bit of the first byte flipped, and a negative value has
every byte inverted.
"""

from __future__ import annotations

from decimal import Decimal

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a binary DECIMAL(precision, scale)."""
    intg = precision - scale
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (scale // 9) * 4 + DIG2BYTES[scale % 9]


_DEC_LAYOUTS: dict[
    tuple[int, int], tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]
] = {}


def _decimal_layout(
    precision: int, scale: int
) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    """(offset, size, digits) of the integer groups and of the fraction groups."""
    key = (precision, scale)
    got = _DEC_LAYOUTS.get(key)
    if got is not None:
        return got
    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    p = 0
    ints: list[tuple[int, int, int]] = []
    if intg0x:
        ints.append((p, DIG2BYTES[intg0x], intg0x))
        p += DIG2BYTES[intg0x]
    for _ in range(intg0):
        ints.append((p, 4, 9))
        p += 4
    fracs: list[tuple[int, int, int]] = []
    for _ in range(frac0):
        fracs.append((p, 4, 9))
        p += 4
    if frac0x:
        fracs.append((p, DIG2BYTES[frac0x], frac0x))
    got = _DEC_LAYOUTS[key] = (tuple(ints), tuple(fracs))
    return got


def decode_decimal(raw: bytes, precision: int, scale: int) -> Decimal:
    """MySQL's binary DECIMAL format to a Decimal with exactly ``scale`` digits."""
    ints, fracs = _decimal_layout(precision, scale)
    positive = bool(raw[0] & 0x80)
    b = bytearray(raw) if positive else bytearray(x ^ 0xFF for x in raw)
    b[0] ^= 0x80
    iv = 0
    for off, size, digits in ints:
        iv = iv * 10**digits + int.from_bytes(b[off : off + size], "big")
    if not scale:
        return Decimal(iv if positive else -iv)
    fv = 0
    for off, size, digits in fracs:
        fv = fv * 10**digits + int.from_bytes(b[off : off + size], "big")
    text = "%d.%0*d" % (iv, scale, fv)
    return Decimal(text if positive else "-" + text)
