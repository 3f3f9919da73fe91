"""Storage consumer pieces that need no database: canal-json file decoding, CREATE TABLE, CLI dispatch."""

from __future__ import annotations

import pytest

from sparkcdc.cli.main import main as cli_main
from sparkcdc.codec.canal_json import CanalJsonEncoder
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.storage import create_table_sql, decode_canal_json_file
from sparkcdc.errors import SinkError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.sink.storage.schema_file import TableDefinition

INFO = TableInfo(
    "db",
    "t",
    (
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("e", "enum", elements=("a", "b")),
        ColumnInfo("bin", "varbinary", length=4),
        ColumnInfo("v", "varchar", length=8),
    ),
    (IndexInfo("PRIMARY", ("id",), True, True),),
    version=5,
)


def test_canal_json_file_round_trip() -> None:
    enc = CanalJsonEncoder(ReplicaConfig(), enable_tidb_extension=True)
    rows = [
        RowChange("I", "db", "t", 5, 100, None, (1, "b", b"\x00\xff", "x")),
        RowChange("U", "db", "t", 5, 101, (1, "b", b"\x00\xff", "x"), (1, "a", b"\x01", None)),
        RowChange("D", "db", "t", 5, 102, (1, "a", b"\x01", None), None),
    ]
    data = b"".join(enc.encode_row(r, INFO) + b"\r\n" for r in rows)
    schema_info = TableDefinition.from_table_info(INFO, 5).to_table_info()  # what the consumer knows
    got = list(decode_canal_json_file(data, schema_info))
    assert [(r.op, r.commit_ts) for r in got] == [("I", 100), ("U", 101), ("D", 102)]
    # ENUM comes back as its 1-based index (MySQL accepts it), binary as bytes
    assert got[0].after == ("1", 2, b"\x00\xff", "x")
    assert got[1].before == ("1", 2, b"\x00\xff", "x") and got[1].after == ("1", 1, b"\x01", None)
    assert got[2].before == ("1", 1, b"\x01", None) and got[2].after is None


def test_create_table_sql_from_schema_file() -> None:
    info = TableInfo(
        "db",
        "t",
        (
            ColumnInfo("id", "bigint", unsigned=True, nullable=False),
            ColumnInfo("p", "decimal", precision=12, scale=3),
            ColumnInfo("dt", "datetime", fsp=6),
            ColumnInfo("name", "varchar", length=40),
            ColumnInfo("f", "float"),
        ),
        (IndexInfo("PRIMARY", ("id",), True, True),),
    )
    sql = create_table_sql(TableDefinition.from_table_info(info, 9))
    assert sql == (
        "CREATE TABLE IF NOT EXISTS `t` (`id` BIGINT UNSIGNED NOT NULL, `p` DECIMAL(12,3), `dt` DATETIME(6), "
        "`name` VARCHAR(40), `f` FLOAT, PRIMARY KEY (`id`))"
    )
    with pytest.raises(
        SinkError, match=r"cannot describe the ENUM column 'e'.*create the table downstream first"
    ):
        create_table_sql(TableDefinition.from_table_info(INFO, 5))


def test_consumer_cli_refuses_unknown_scheme(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(
        ["consumer", "--upstream-uri", "ftp://x/y", "--downstream-uri", "mysql://root@127.0.0.1:1/", "--once"]
    )
    assert rc == 2
    assert "--upstream-uri scheme 'ftp' is not supported by sparkcdc; use one of" in capsys.readouterr().err
