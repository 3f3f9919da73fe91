from decimal import Decimal

from sparkcdc.model import ColumnInfo, IndexInfo, TableInfo, compose_ts, physical_ms
from sparkcdc.model.ts import logical


def _table() -> TableInfo:
    return TableInfo(
        schema="s",
        table="t",
        columns=(
            ColumnInfo("id", "int", nullable=True),
            ColumnInfo("code", "varchar", length=8, nullable=False, charset="utf8mb4"),
            ColumnInfo("price", "decimal", precision=10, scale=2),
            ColumnInfo("e", "enum", elements=("a", "b,c")),
        ),
        indexes=(IndexInfo("uk_id", ("id",), unique=True), IndexInfo("uk_code", ("code",), unique=True)),
        version=7,
    )


def test_commit_ts_parts_round_trip() -> None:
    ts = compose_ts(1640007049196, 2)
    assert ts == 429918007904436226
    assert physical_ms(ts) == 1640007049196
    assert logical(ts) == 2


def test_handle_key_skips_nullable_unique_key() -> None:
    t = _table()
    assert t.primary_key == ()
    assert t.handle_key == ("code",)
    assert t.handle_key_index == (1,)
    assert t.column("CODE").name == "code"


def test_table_info_round_trips_through_dict() -> None:
    t = _table()
    back = TableInfo.from_dict(t.to_dict())
    assert back == t
    assert back.index_of("price") == 2
    assert back.column("e").elements == ("a", "b,c")
    assert t.column("price").full_type() == "decimal(10,2)"
    assert Decimal("1.5")  # values stay Decimal in row images (documented on ColumnInfo)
