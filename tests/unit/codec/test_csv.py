"""CSV: TiCDC's records byte for byte, every option, validation and lossless round trips."""

from __future__ import annotations

import math
import pickle
import random
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.codec.csv import CSVDecoder, CSVEncoder, validate_csv_config
from sparkcdc.codec.values import to_float32
from sparkcdc.config.replica import CSVConfig, ReplicaConfig
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from tests.unit.codec.tables import ALL_TYPES, TS, delete, full_row, insert, null_row, small_row, update

EMPLOYEE = TableInfo(
    "hr",
    "employee",
    (
        ColumnInfo("Id", "int", nullable=False),
        ColumnInfo("LastName", "varchar", length=20),
        ColumnInfo("FirstName", "varchar", length=30),
        ColumnInfo("HireDate", "date"),
        ColumnInfo("OfficeLocation", "varchar", length=20),
    ),
    indexes=(IndexInfo("PRIMARY", ("Id",), unique=True, primary=True),),
)


def _row(op: str, ts: int, values: tuple[Any, ...], table: TableInfo = EMPLOYEE) -> RowChange:
    before = values if op == "D" else None
    after = None if op == "D" else values
    return RowChange(op, table.schema, table.table, 0, ts, before, after)  # type: ignore[arg-type]


def test_design_doc_example() -> None:
    enc = CSVEncoder(CSVConfig(include_commit_ts=True), "\n")
    rows = [
        ("I", 433305438660591626, (101, "Smith", "Bob", "2014-06-04", "New York")),
        ("U", 433305438660591627, (101, "Smith", "Bob", "2015-10-08", "Los Angeles")),
        ("D", 433305438660591629, (101, "Smith", "Bob", "2017-03-13", "Dallas")),
        ("I", 433305438660591630, (102, "Alex", "Alice", "2017-03-14", "Shanghai")),
        ("U", 433305438660591630, (102, "Alex", "Alice", "2018-06-15", "Beijing")),
    ]
    out = b"".join(enc.encode_row(_row(op, ts, v), EMPLOYEE) for op, ts, v in rows)
    assert out == (
        b'"I","employee","hr",433305438660591626,101,"Smith","Bob","2014-06-04","New York"\n'
        b'"U","employee","hr",433305438660591627,101,"Smith","Bob","2015-10-08","Los Angeles"\n'
        b'"D","employee","hr",433305438660591629,101,"Smith","Bob","2017-03-13","Dallas"\n'
        b'"I","employee","hr",433305438660591630,102,"Alex","Alice","2017-03-14","Shanghai"\n'
        b'"U","employee","hr",433305438660591630,102,"Alex","Alice","2018-06-15","Beijing"\n'
    )
    back = list(CSVDecoder(CSVConfig(include_commit_ts=True), "\n").decode(out, EMPLOYEE))
    assert [(r.op, r.commit_ts, r.values) for r in back] == rows


def test_default_terminator_is_crlf_and_commit_ts_off() -> None:
    enc = CSVEncoder.from_config(ReplicaConfig())
    out = enc.encode_row(_row("I", TS, (1, "a", None, "2014-06-04", "b")), EMPLOYEE)
    assert out == b'"I","employee","hr",1,"a",\\N,"2014-06-04","b"\r\n'


def _two_col(name1: str = "a", type1: str = "varchar", type2: str = "varchar") -> TableInfo:
    return TableInfo("test", "tbl", (ColumnInfo(name1, type1), ColumnInfo("b", type2)))


# Cases from TiCDC's csv_message_test.go (TestCSVMessageEncode).
TICDC_CASES = [
    (
        CSVConfig(delimiter=",", quote='"', include_commit_ts=True),
        "\n",
        "I",
        (
            TableInfo("test", "table1", (ColumnInfo("a", "int"), ColumnInfo("b", "varchar"))),
            (123, "hello,world"),
        ),
        b'"I","table1","test",435661838416609281,123,"hello,world"\n',
    ),
    (
        CSVConfig(delimiter="!", quote="", include_commit_ts=True),
        "\n",
        "U",
        (
            TableInfo("test", "table2", (ColumnInfo("a", "varchar"), ColumnInfo("b", "varchar"))),
            ("a!b!c", "def"),
        ),
        b"U!table2!test!435661838416609281!a\\!b\\!c!def\n",
    ),
    (
        CSVConfig(delimiter="!", quote="", include_commit_ts=True, output_old_value=True),
        "\n",
        "I",
        (
            TableInfo("test", "table2", (ColumnInfo("a", "varchar"), ColumnInfo("b", "varchar"))),
            ("a!b!c", "def"),
        ),
        b"I!table2!test!435661838416609281!false!a\\!b\\!c!def\n",
    ),
    (
        CSVConfig(delimiter=",", quote='"', include_commit_ts=True),
        "\n",
        "U",
        (
            TableInfo(
                "test",
                "table3",
                (ColumnInfo("a", "varchar"), ColumnInfo("b", "varchar"), ColumnInfo("c", "datetime")),
            ),
            ("a,b,c", "def", "2022-08-31 17:07:00"),
        ),
        b'"U","table3","test",435661838416609281,"a,b,c","def","2022-08-31 17:07:00"\n',
    ),
    (
        CSVConfig(delimiter="[*]", quote=""),
        "\r\n",
        "D",
        (
            TableInfo("test", "table4", (ColumnInfo("a", "varchar"), ColumnInfo("b", "varchar"))),
            ("a[*]b[*]c", "def"),
        ),
        b"D[*]table4[*]test[*]a\\[\\*\\]b\\[\\*\\]c[*]def\r\n",
    ),
    (
        CSVConfig(delimiter="[*]", quote="'"),
        "\n",
        "I",
        (
            TableInfo(
                "test",
                "table5",
                (
                    ColumnInfo("a", "varchar"),
                    ColumnInfo("b", "varchar"),
                    ColumnInfo("c", "int"),
                    ColumnInfo("d", "double"),
                ),
            ),
            ("a[*]b[*]c", "def", None, 12345.678),
        ),
        b"'I'[*]'table5'[*]'test'[*]'a[*]b[*]c'[*]'def'[*]\\N[*]12345.678\n",
    ),
    (
        CSVConfig(delimiter=",", quote="", include_commit_ts=True),
        "\n",
        "U",
        (
            TableInfo("test", "table6", (ColumnInfo("a", "varchar"), ColumnInfo("b", "varchar"))),
            ("a\\b\\c", "def\n"),
        ),
        b"U,table6,test,435661838416609281,a\\\\b\\\\c,def\\n\n",
    ),
    (
        CSVConfig(delimiter=",", quote="'"),
        "\n",
        "I",
        (
            TableInfo(
                "test",
                "table7",
                (ColumnInfo("a", "varchar"), ColumnInfo("b", "varchar"), ColumnInfo("c", "text")),
            ),
            ("\\", "\\\r", "\\\\"),
        ),
        b"'I','table7','test','\\','\\\r','\\\\'\n",
    ),
    (
        CSVConfig(delimiter="\t", quote='"', include_commit_ts=True),
        "\n",
        "D",
        (
            TableInfo(
                "test",
                "table8",
                (ColumnInfo("a", "varchar"), ColumnInfo("b", "double"), ColumnInfo("c", "varchar")),
            ),
            ("a\tb", 123.456, "你好，世界"),
        ),
        '"D"\t"table8"\t"test"\t435661838416609281\t"a\tb"\t123.456\t"你好，世界"\n'.encode(),
    ),
]


@pytest.mark.parametrize(("csv", "term", "op", "table_values", "expected"), TICDC_CASES)
def test_ticdc_message_cases(
    csv: CSVConfig, term: str, op: str, table_values: tuple[TableInfo, tuple[Any, ...]], expected: bytes
) -> None:
    table, values = table_values
    row = _row(op, 435661838416609281, values, table)
    if op == "U":
        row = RowChange("U", "test", table.table, 0, 435661838416609281, values, values)
    out = CSVEncoder(csv, term).encode_row(row, table)
    assert out == expected
    (rec,) = CSVDecoder(csv, term).decode(out, table)
    assert rec.op == op and rec.values == values and rec.table == table.table and rec.schema == "test"


# Cases from TiCDC's TestConvertToCSVType (values as the CSV field text).
VALUE_CASES: list[tuple[ColumnInfo, Any, str, str]] = [
    (ColumnInfo("c", "tinyint"), 1, "1", "base64"),
    (ColumnInfo("c", "bigint", unsigned=True), 18446744073709551615, "18446744073709551615", "base64"),
    (ColumnInfo("c", "float"), to_float32(3.14), "3.14", "base64"),
    (ColumnInfo("c", "double"), 3.14, "3.14", "base64"),
    (ColumnInfo("c", "double"), 1000000.0, "1e+06", "base64"),
    (ColumnInfo("c", "float"), to_float32(1e-5), "1e-05", "base64"),
    (ColumnInfo("c", "bit", length=16), 683, "683", "base64"),
    (
        ColumnInfo("c", "decimal", precision=20, scale=7),
        Decimal("129012.1230000"),
        '"129012.1230000"',
        "base64",
    ),
    (ColumnInfo("c", "tinytext"), "hello world", '"hello world"', "base64"),
    (ColumnInfo("c", "json"), '{"key": "value"}', '"{""key"": ""value""}"', "base64"),
    (ColumnInfo("c", "tinyblob"), b"hello world", '"aGVsbG8gd29ybGQ="', "base64"),
    (ColumnInfo("c", "binary", length=11), b"hello world", '"aGVsbG8gd29ybGQ="', "base64"),
    (ColumnInfo("c", "varbinary"), b"hello world", '"68656c6c6f20776f726c64"', "hex"),
    (ColumnInfo("c", "longblob"), b"\xff\x00", '"ff00"', "hex"),
    (ColumnInfo("c", "enum", elements=("a,", "b")), "a,", '"a,"', "base64"),
    (ColumnInfo("c", "set", elements=("a", "b", "c", "d")), "a,d", '"a,d"', "base64"),
    (ColumnInfo("c", "date"), "2000-01-01", '"2000-01-01"', "base64"),
    (ColumnInfo("c", "datetime"), "2015-12-20 23:58:58", '"2015-12-20 23:58:58"', "base64"),
    (
        ColumnInfo("c", "timestamp", fsp=6),
        "1973-12-30 15:30:00.123456",
        '"1973-12-30 15:30:00.123456"',
        "base64",
    ),
    (ColumnInfo("c", "time"), "23:59:59", '"23:59:59"', "base64"),
    (ColumnInfo("c", "year"), 1970, "1970", "base64"),
    (ColumnInfo("c", "int"), None, "\\N", "base64"),
]


@pytest.mark.parametrize(("col", "value", "field", "binenc"), VALUE_CASES)
def test_value_rendering_per_type(col: ColumnInfo, value: Any, field: str, binenc: str) -> None:
    table = TableInfo("s", "t", (col,))
    csv = CSVConfig(binary_encoding_method=binenc)
    out = CSVEncoder(csv, "\n").encode_row(insert((value,), table), table)
    assert out == f'"I","t","s",{field}\n'.encode()
    (rec,) = CSVDecoder(csv, "\n").decode(out, table)
    assert rec.values == (value,)


def test_output_old_value_splits_update_into_delete_then_insert() -> None:
    csv = CSVConfig(include_commit_ts=True, output_old_value=True)
    enc = CSVEncoder(csv, "\n")
    before = (101, "Smith", "Bob", "2014-06-04", "New York")
    after = (101, "Smith", "Bob", "2015-10-08", "Los Angeles")
    out = enc.encode_row(RowChange("U", "hr", "employee", 0, 5, before, after), EMPLOYEE)
    assert out == (
        b'"D","employee","hr",5,true,101,"Smith","Bob","2014-06-04","New York"\n'
        b'"I","employee","hr",5,true,101,"Smith","Bob","2015-10-08","Los Angeles"\n'
    )
    ins = enc.encode_row(_row("I", 6, after), EMPLOYEE)
    assert ins == b'"I","employee","hr",6,false,101,"Smith","Bob","2015-10-08","Los Angeles"\n'
    recs = list(CSVDecoder(csv, "\n").decode(out + ins, EMPLOYEE))
    assert [(r.op, r.is_update, r.values) for r in recs] == [
        ("D", True, before),
        ("I", True, after),
        ("I", False, after),
    ]


def test_output_handle_key_field() -> None:
    csv = CSVConfig(output_handle_key=True)
    out = CSVEncoder(csv, "\n").encode_row(_row("I", 1, (7, "a", "b", "2020-01-01", "c")), EMPLOYEE)
    assert out == b'"I","employee","hr","7",7,"a","b","2020-01-01","c"\n'
    (rec,) = CSVDecoder(csv, "\n").decode(out, EMPLOYEE)
    assert rec.handle_key == "7" and rec.values[0] == 7
    composite = TableInfo(
        "s",
        "t",
        (ColumnInfo("a", "varchar", nullable=False), ColumnInfo("b", "int", nullable=False)),
        indexes=(IndexInfo("PRIMARY", ("a", "b"), unique=True, primary=True),),
    )
    out2 = CSVEncoder(csv, "\n").encode_row(insert(("x", 2), composite), composite)
    assert out2 == b'"I","t","s","{x, 2}","x",2\n'


@pytest.mark.parametrize(
    ("commit_ts", "old_value", "delim", "term", "expected"),
    [
        (
            True,
            True,
            " ",
            "",
            "ticdc-meta$operation ticdc-meta$table ticdc-meta$schema ticdc-meta$commit-ts ticdc-meta$is-update col1 col2",
        ),
        (
            True,
            False,
            " ",
            "",
            "ticdc-meta$operation ticdc-meta$table ticdc-meta$schema ticdc-meta$commit-ts col1 col2",
        ),
        (False, False, " ", "", "ticdc-meta$operation ticdc-meta$table ticdc-meta$schema col1 col2"),
        (False, False, ",", "", "ticdc-meta$operation,ticdc-meta$table,ticdc-meta$schema,col1,col2"),
        (False, False, ",", "\n", "ticdc-meta$operation,ticdc-meta$table,ticdc-meta$schema,col1,col2\n"),
    ],
)
def test_header_like_ticdc(commit_ts: bool, old_value: bool, delim: str, term: str, expected: str) -> None:
    table = TableInfo("s", "t", (ColumnInfo("col1", "int"), ColumnInfo("col2", "int")))
    csv = CSVConfig(
        delimiter=delim, include_commit_ts=commit_ts, output_old_value=old_value, output_field_header=True
    )
    assert CSVEncoder(csv, term).header(table) == expected.encode()
    assert CSVEncoder(CSVConfig(delimiter=delim), term).header(table) == b""


def test_decoder_skips_the_header_line() -> None:
    csv = CSVConfig(include_commit_ts=True, output_field_header=True)
    enc = CSVEncoder(csv, "\r\n")
    data = enc.header(EMPLOYEE) + enc.encode_row(_row("I", 3, (1, "a", "b", "2020-01-01", "c")), EMPLOYEE)
    recs = list(CSVDecoder(csv, "\r\n").decode(data, EMPLOYEE))
    assert [r.values for r in recs] == [(1, "a", "b", "2020-01-01", "c")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quote": "***"}, "csv config quote contains more than one character: quote='\\*\\*\\*'"),
        ({"quote": "«"}, "csv config quote contains more than one character"),
        ({"quote": "\n"}, "csv config quote cannot be line break character"),
        ({"quote": "'", "delimiter": ""}, "csv config delimiter cannot be empty"),
        (
            {"quote": "'", "delimiter": "\r"},
            "csv config delimiter contains line break characters: delimiter='\\\\r'",
        ),
        ({"quote": "'", "delimiter": "a\n"}, "csv config delimiter contains line break characters"),
        (
            {"quote": "'", "delimiter": "FEFA"},
            "csv config delimiter contains more than three characters, note that escape sequences can only be used in double quotes in toml configuration items: delimiter='FEFA'",
        ),
        (
            {"quote": "'", "delimiter": "'"},
            "csv config quote and delimiter has common characters which is not allowed",
        ),
        (
            {"quote": "E", "delimiter": "FE"},
            "csv config quote and delimiter has common characters which is not allowed: quote='E', delimiter='FE'",
        ),
        (
            {"binary_encoding_method": "invalid"},
            "csv config binary-encoding-method can only be hex or base64: binary-encoding-method='invalid'",
        ),
    ],
)
def test_validation_errors(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        CSVEncoder(CSVConfig(**kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delimiter": "FE"},
        {"delimiter": "|@|"},
        {"quote": "", "delimiter": "\t"},
        {"binary_encoding_method": "hex"},
    ],
)
def test_valid_configs(kwargs: dict[str, str]) -> None:
    validate_csv_config(CSVConfig(**kwargs))  # type: ignore[arg-type]


def test_delete_only_output_handle_key_columns_is_refused_for_csv() -> None:
    cfg = ReplicaConfig.from_dict({"sink": {"delete-only-output-handle-key-columns": True}})
    with pytest.raises(ConfigError, match="CSV protocol always output all columns for the delete event"):
        CSVEncoder.from_config(cfg)


CONFIGS = [
    (CSVConfig(), "\r\n"),
    (CSVConfig(include_commit_ts=True, output_old_value=True, output_handle_key=True), "\n"),
    (CSVConfig(quote="", delimiter=","), "\n"),
    (CSVConfig(quote="", delimiter="|@|", null="NULL", include_commit_ts=True), "\r\n"),
    (CSVConfig(quote="'", delimiter="\t", binary_encoding_method="hex"), "\r"),
    (CSVConfig(quote='"', delimiter="##", null="<null>", output_old_value=True), "\r\n"),
]


@pytest.mark.parametrize(("csv", "term"), CONFIGS)
def test_round_trip_every_type_every_option(csv: CSVConfig, term: str) -> None:
    enc = CSVEncoder(csv, term)
    dec = CSVDecoder(csv, term)
    changes = [
        insert(full_row()),
        insert(null_row()),
        insert(small_row()),
        delete(full_row(4)),
        update(small_row(5), full_row(5)),
    ]
    data = b"".join(enc.encode_row(c, ALL_TYPES) for c in changes)
    recs = list(dec.decode(data, ALL_TYPES))
    expected: list[tuple[str, tuple[Any, ...]]] = []
    for c in changes:
        assert c.image is not None
        if c.op == "U" and csv.output_old_value:
            assert c.before is not None
            expected += [("D", c.before), ("I", c.image)]
        else:
            expected.append((c.op, c.image))
    assert [(r.op, r.values) for r in recs] == expected
    for rec, (_, values) in zip(recs, expected, strict=True):
        for got, want, col in zip(rec.values, values, ALL_TYPES.columns, strict=True):
            assert type(got) is type(want), col.name
        if csv.include_commit_ts:
            assert rec.commit_ts == TS
        else:
            assert rec.commit_ts is None


def test_round_trip_random_floats_and_awkward_strings() -> None:
    rng = random.Random(11)
    table = TableInfo(
        "s", "t", (ColumnInfo("f", "float"), ColumnInfo("d", "double"), ColumnInfo("s", "varchar"))
    )
    alphabet = ['"', "'", ",", "\\", "\r", "\n", "\t", "N", "a", "é", "😀", "|", "\udcff"]
    for csv in (CSVConfig(), CSVConfig(quote="", delimiter="|")):
        enc, dec = CSVEncoder(csv, "\r\n"), CSVDecoder(csv, "\r\n")
        rows = []
        for _ in range(300):
            f = to_float32(rng.uniform(-1, 1) * 10 ** rng.randint(-40, 38))
            d = rng.uniform(-1, 1) * 10 ** rng.randint(-300, 300)
            s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
            rows.append((f if not math.isinf(f) else 1.0, d, s))
        data = b"".join(enc.encode_row(insert(r, table), table) for r in rows)
        assert [rec.values for rec in dec.decode(data, table)] == rows


def test_string_that_looks_like_null_stays_a_string() -> None:
    table = TableInfo("s", "t", (ColumnInfo("a", "varchar"), ColumnInfo("b", "varchar")))
    for csv in (CSVConfig(), CSVConfig(quote="")):
        enc, dec = CSVEncoder(csv, "\n"), CSVDecoder(csv, "\n")
        data = enc.encode_row(insert(("\\N", None), table), table)
        (rec,) = dec.decode(data, table)
        assert rec.values == ("\\N", None)


def test_decode_errors_name_the_problem() -> None:
    dec = CSVDecoder(CSVConfig(include_commit_ts=True), "\n")
    with pytest.raises(DecodeError, match="6 fields but 4 meta fields \\+ 5 columns"):
        list(dec.decode(b'"I","employee","hr",1,2,"x"\n', EMPLOYEE))
    with pytest.raises(
        DecodeError, match="the 4th column\\(hello world\\) of csv row should be a valid commit-ts"
    ):
        list(dec.decode(b'"I","employee","hr","hello world",1,"a","b","c","d"\n', EMPLOYEE))
    with pytest.raises(DecodeError, match="unterminated quoted CSV field"):
        list(dec.decode(b'"I","employee', EMPLOYEE))
    with pytest.raises(DecodeError, match="invalid CSV operation type 'X'"):
        list(dec.decode(b'"X","employee","hr",1,1,"a","b","c","d"\n', EMPLOYEE))
    with pytest.raises(DecodeError, match="is not a valid int for column 'Id'"):
        list(dec.decode(b'"I","employee","hr",1,"x","a","b","c","d"\n', EMPLOYEE))
    with pytest.raises(DecodeError, match="after a CSV field"):
        list(dec.decode(b'"I"x,"employee"\n', EMPLOYEE))


def test_last_record_without_terminator_and_to_row_change() -> None:
    dec = CSVDecoder(CSVConfig(), "\r\n")
    (rec,) = dec.decode(b'"D","employee","hr",1,"a","b","2020-01-01","c"', EMPLOYEE)
    change = rec.to_row_change(EMPLOYEE, seq=3)
    assert change.op == "D" and change.before == (1, "a", "b", "2020-01-01", "c") and change.after is None
    assert change.seq == 3


def test_encoder_is_picklable() -> None:
    for csv in (CSVConfig(), CSVConfig(quote="")):
        enc = pickle.loads(pickle.dumps(CSVEncoder(csv, "\n")))
        assert enc.encode_row(insert(("a,\\", "b"), _two_col()), _two_col()).startswith(
            b'"I"' if csv.quote else b"I,"
        )
