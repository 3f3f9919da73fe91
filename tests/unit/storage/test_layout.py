"""Storage layout: data/index/schema paths, file numbering width, date directories, metadata."""

from __future__ import annotations

import time

import pytest

from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.sink.storage.layout import (
    DataDir,
    check_date_separator,
    data_file_name,
    date_str,
    effective_index_width,
    metadata_body,
    parse_data_path,
    parse_index_file,
    parse_metadata,
    parse_schema_file_path,
    schema_file_path,
)


def test_data_file_name_default_width_is_20() -> None:
    assert data_file_name(1, ".csv", effective_index_width(20)) == "CDC00000000000000000001.csv"
    assert data_file_name(1, ".json", 6) == "CDC000001.json"


@pytest.mark.parametrize(
    ("width", "expected"), [(6, 6), (10, 10), (20, 20), (5, 20), (21, 20), (0, 20), (-1, 20)]
)
def test_index_width_out_of_range_means_20(width: int, expected: int) -> None:
    assert effective_index_width(width) == expected


def test_data_dir_paths() -> None:
    d = DataDir("db", "t", 441349361156227074, None, "2023-05-09")
    assert d.path == "db/t/441349361156227074/2023-05-09"
    assert d.index_path == "db/t/441349361156227074/2023-05-09/meta/CDC.index"
    assert d.file_path(3, ".csv", 6) == "db/t/441349361156227074/2023-05-09/CDC000003.csv"
    assert DataDir("db", "t", 7).path == "db/t/7"
    assert DataDir("db", "t", 7, 13, "2023").path == "db/t/7/13/2023"


@pytest.mark.parametrize(
    ("sep", "fmt"),
    [("none", ""), ("year", "%Y"), ("month", "%Y-%m"), ("day", "%Y-%m-%d")],
)
def test_date_separator_uses_local_wall_clock(sep: str, fmt: str) -> None:
    now = 1_700_000_000.0
    expected = time.strftime(fmt, time.localtime(now)) if fmt else ""
    assert date_str(sep, now) == expected


def test_date_separator_formats_fixed_instant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        now = 1_683_600_000.0  # 2023-05-09 02:40:00 UTC
        assert date_str("day", now) == "2023-05-09"
        assert date_str("month", now) == "2023-05"
        assert date_str("year", now) == "2023"
        assert date_str("none", now) == ""
    finally:
        monkeypatch.undo()
        time.tzset()


def test_invalid_date_separator_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"invalid date-separator 'week'.*none, year, month, day"):
        check_date_separator("week")


@pytest.mark.parametrize(
    ("path", "sep", "expected"),
    [
        ("db/t/100/CDC000001.csv", "none", (DataDir("db", "t", 100), 1, ".csv")),
        ("db/t/100/5/CDC000002.json", "none", (DataDir("db", "t", 100, 5), 2, ".json")),
        (
            "db/t/100/2024-01-02/CDC00000000000000000009.csv",
            "day",
            (DataDir("db", "t", 100, None, "2024-01-02"), 9, ".csv"),
        ),
        ("db/t/100/7/2024-01/CDC000001.csv", "month", (DataDir("db", "t", 100, 7, "2024-01"), 1, ".csv")),
        ("db/t/100/2024/CDC000001.csv", "year", (DataDir("db", "t", 100, None, "2024"), 1, ".csv")),
    ],
)
def test_parse_data_path(path: str, sep: str, expected: tuple[DataDir, int, str]) -> None:
    assert parse_data_path(path, sep) == expected


@pytest.mark.parametrize(
    ("path", "sep"),
    [
        ("metadata", "day"),
        ("db/t/meta/schema_1_0000000001.json", "day"),
        ("db/t/100/meta/CDC.index", "none"),
        ("db/t/100/CDC000001.csv", "day"),  # a day directory is required
        ("db/t/v1/CDC000001.csv", "none"),
    ],
)
def test_parse_data_path_rejects_other_files(path: str, sep: str) -> None:
    assert parse_data_path(path, sep) is None


def test_schema_file_paths() -> None:
    assert schema_file_path("schema1", "", 100, 3233644819) == "schema1/meta/schema_100_3233644819.json"
    assert (
        schema_file_path("schema1", "table1", 100, 785427252)
        == "schema1/table1/meta/schema_100_0785427252.json"
    )
    assert parse_schema_file_path("schema1/table1/meta/schema_100_0785427252.json") == (
        "schema1",
        "table1",
        100,
        785427252,
    )
    assert parse_schema_file_path("schema1/meta/schema_100_3233644819.json") == (
        "schema1",
        "",
        100,
        3233644819,
    )
    assert parse_schema_file_path("schema1/table1/meta/CDC.index") is None
    with pytest.raises(ValueError):
        schema_file_path("s", "t", 0, 1)


def test_index_file_body() -> None:
    assert parse_index_file(b"CDC000005.csv\n", ".csv") == 5
    assert parse_index_file(b"CDC00000000000000000012.json\n", ".json") == 12
    with pytest.raises(DecodeError, match=r"invalid index file content 'CDC5.csv'"):
        parse_index_file(b"CDC5.csv\n", ".csv")
    with pytest.raises(DecodeError):
        parse_index_file(b"CDC000005.json\n", ".csv")


def test_metadata_is_compact_without_newline() -> None:
    assert metadata_body(433305438660591626) == b'{"checkpoint-ts":433305438660591626}'
    assert parse_metadata(b'{"checkpoint-ts":433305438660591626}') == 433305438660591626
    assert parse_metadata(b'{\n  "checkpoint-ts": 5\n}') == 5
    with pytest.raises(DecodeError):
        parse_metadata(b"{}")
