"""``ImageVariants`` writes what its definition, PySpark's builder over the canal-json object, writes."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.types import VariantVal

from sparkcdc.errors import DecodeError
from sparkcdc.model.schema import ColumnInfo, IndexInfo, TableInfo
from sparkcdc.pipeline.variant_images import ImageVariants, canal_object_text, reference_variant

COLUMNS = (
    ColumnInfo("id", "int"),
    ColumnInfo("tiu", "tinyint", unsigned=True),
    ColumnInfo("biu", "bigint", unsigned=True),
    ColumnInfo("f", "float"),
    ColumnInfo("d", "double"),
    ColumnInfo("dec", "decimal", precision=65, scale=30),
    ColumnInfo("dt", "date"),
    ColumnInfo("dt3", "datetime", fsp=3),
    ColumnInfo("ts", "timestamp", fsp=6),
    ColumnInfo("tm", "time"),
    ColumnInfo("y", "year"),
    ColumnInfo("vc", "varchar", length=300, charset="utf8mb4"),
    ColumnInfo("Zed", "text", charset="utf8mb4"),
    ColumnInfo("vb", "varbinary", length=300),
    ColumnInfo("b64", "bit", length=64),
    ColumnInfo("e", "enum", elements=("a", "b,c", "é")),
    ColumnInfo("s", "set", elements=("x", "y", "z")),
    ColumnInfo("j", "json"),
    ColumnInfo("a b`c", "char", length=3),
)
TABLE = TableInfo("shop", "all", COLUMNS, (IndexInfo("PRIMARY", ("id",), True, True),))

IMAGES: list[tuple[Any, ...]] = [
    (
        -1, 255, 2**64 - 1, 3.14, 1.7976931348623157e308, Decimal("-0.000000000000000000000000000001"),
        "0000-00-00", "2024-02-29 12:34:56.789", "2038-01-19 03:14:07.999999", "-838:59:59", 2155,
        "😀 ok <&> \"q\" \\ \n\t", "x" * 70, bytes(range(256)), 2**64 - 1, "b,c", "x,z", '{"k": [1, 2.5]}', "a`b",
    ),
    (0, 0, 0, -0.0, 1e-300, Decimal("0E-30"), "2024-01-01", "0000-00-00 00:00:00.000", "1970-01-01 00:00:01.000000",
     "00:00:00", 0, "", "", b"", 0, "", "", "[]", ""),
    (1,) + (None,) * (len(COLUMNS) - 1),
    (2, None, None, None, None, None, None, None, None, None, None, "bad \udcff byte \ud800", "é" * 40000,
     b"\x00" * 70000, None, "é", "x,y,z", None, None),
]  # fmt: skip


def _same(info: TableInfo, image: tuple[Any, ...]) -> None:
    enc = ImageVariants(info)
    got = VariantVal(enc.value(image), enc.metadata)
    want = reference_variant(info, image)
    assert got.toPython() == want.toPython()
    assert got.toJson() == want.toJson()
    assert got.toPython() == json.loads(canal_object_text(info, image))


@pytest.mark.parametrize("image", IMAGES, ids=["limits", "zeros", "nulls", "long and odd text"])
def test_every_type_as_its_definition_writes_it(image: tuple[Any, ...]) -> None:
    _same(TABLE, image)


def test_a_wide_table_is_a_large_object() -> None:
    wide = TableInfo("s", "wide", tuple(ColumnInfo(f"c{i:03d}", "int") for i in range(300)))
    _same(wide, tuple(range(300)))
    _same(wide, tuple(None if i % 2 else i for i in range(300)))


def test_an_image_over_16_mib_is_refused_by_name() -> None:
    table = TableInfo("s", "blobs", (ColumnInfo("b", "longblob"),))
    with pytest.raises(DecodeError, match=r"s\.blobs: a row image of \d+ bytes exceeds the 16 MiB"):
        ImageVariants(table).value((b"x" * (1 << 24),))
