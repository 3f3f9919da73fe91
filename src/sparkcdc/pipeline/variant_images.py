"""Row images as Spark VARIANTs: the ``before``/``after`` of the public change stream.

An image is the object canal-json writes as a message's ``data``: column name → the column's
canal-json string (``codec.values.canal_value``), or null. ``reference_variant`` is its
definition: PySpark's own builder (``VariantVal.parseJson``) over the canal-json reference's
text of the object (``codec.canal_json.reference``). It parses JSON for every row, so the
stream writes the same variant directly with ``ImageVariants``: the metadata (the column
names) is built once per table shape by that same builder, and each row's value is one
object of strings and nulls in Spark's variant binary format. The unit tests hold the two
equal.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.types import VariantVal

from sparkcdc.codec.values import canal_value
from sparkcdc.errors import DecodeError
from sparkcdc.model.schema import TableInfo

_OBJECT = 2
"""Basic type of a variant object (the low two bits of a value's header)."""
_SHORT_STRING = 1
"""Basic type of a string of at most 63 bytes, its length in the header's upper six bits."""
_LONG_STRING = 16 << 2
"""Header of a primitive string (type 16): a 4-byte length follows."""
_NULL = b"\x00"
"""A primitive null."""
_U24_MAX = 0xFFFFFF
"""The largest offset a variant object holds (PySpark's and Spark's builders stop there: 16 MiB)."""


def _int_size(value: int) -> int:
    return 1 if value <= 0xFF else 2 if value <= 0xFFFF else 3


def canal_object_text(info: TableInfo, image: tuple[Any, ...]) -> str:
    """The canal-json ``data`` object of one image, by the reference renderer."""
    from sparkcdc.codec.canal_json.reference import TableLayout, column_tokens

    cells = TableLayout(info, info.schema, info.table, False).cols
    return "{" + ",".join(column_tokens(cells, image)) + "}"


def reference_variant(info: TableInfo, image: tuple[Any, ...]) -> VariantVal:
    """The definition of an image's variant: PySpark's builder over its canal-json object."""
    return VariantVal.parseJson(canal_object_text(info, image))


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (bytes that were not UTF-8): the replacement characters canal-json writes.
        from sparkcdc.codec.canal_json.reference import json_str

        decoded: str = json.loads(json_str(text))
        return decoded.encode("utf-8")


class ImageVariants:
    """One table shape's images as VARIANT (value, metadata) pairs, equal to ``reference_variant``'s."""

    def __init__(self, info: TableInfo) -> None:
        self.info = info
        names = [c.name for c in info.columns]
        template = "{" + ",".join(json.dumps(n) + ":null" for n in names) + "}"
        self.metadata: bytes = VariantVal.parseJson(template).metadata
        """The dictionary of the column names, each with its column's position as its id."""
        # An object lists its fields by key; the dictionary ids are the column positions.
        self.order = sorted(range(len(names)), key=lambda i: names[i])
        self.columns = [info.columns[i] for i in self.order]
        n = len(names)
        large = n > 0xFF
        id_size = _int_size(max(n - 1, 0))
        self._count = n.to_bytes(4 if large else 1, "little")
        self._ids = b"".join(i.to_bytes(id_size, "little") for i in self.order)
        self._header = (int(large) << 6) | ((id_size - 1) << 4) | _OBJECT

    def value(self, image: tuple[Any, ...]) -> bytes:
        """The variant value of one image (its metadata is ``self.metadata``)."""
        parts: list[bytes] = []
        offsets: list[int] = []
        size = 0
        for i, col in zip(self.order, self.columns, strict=True):
            v = image[i]
            offsets.append(size)
            if v is None:
                parts.append(_NULL)
                size += 1
                continue
            text = canal_value(v, col)
            assert text is not None  # None only for NULL
            data = _utf8(text)
            head = (
                bytes(((len(data) << 2) | _SHORT_STRING,))
                if len(data) <= 0x3F
                else bytes((_LONG_STRING,)) + len(data).to_bytes(4, "little")
            )
            parts.append(head)
            parts.append(data)
            size += len(head) + len(data)
        if size > _U24_MAX:
            raise DecodeError(
                f"{self.info.schema}.{self.info.table}: a row image of {size} bytes exceeds the 16 MiB a "
                "VARIANT holds; leave the table out of the stream's filter (or read it with option table)"
            )
        offset_size = _int_size(size)
        offsets.append(size)
        head = bytes((self._header | ((offset_size - 1) << 2),)) + self._count + self._ids
        return head + b"".join(o.to_bytes(offset_size, "little") for o in offsets) + b"".join(parts)
