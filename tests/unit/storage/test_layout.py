"""Storage layout: data/index/schema paths, file numbering width, date directories, metadata."""

from __future__ import annotations

import pytest

from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model import compose_ts
from sparkcdc.sink.storage.layout import (
    DataDir,
    check_date_separator,
    commit_date,
    data_file_name,
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


MIDNIGHT_MS = 1_683_676_800_000  # 2023-05-10 00:00:00 UTC


@pytest.mark.parametrize(
    ("sep", "before", "after"),
    [
        ("none", "", ""),
        ("year", "2023", "2023"),
        ("month", "2023-05", "2023-05"),
        ("day", "2023-05-09", "2023-05-10"),
    ],
)
def test_commit_date_is_the_commit_ts_date_on_both_sides_of_midnight(
    sep: str, before: str, after: str
) -> None:
    last_of_day = compose_ts(MIDNIGHT_MS - 1, 5)
    first_of_day = compose_ts(MIDNIGHT_MS, 0)
    assert commit_date(sep, last_of_day) == before
    assert commit_date(sep, first_of_day) == after
    path = DataDir("db", "t", 7, None, commit_date(sep, last_of_day)).file_path(1, ".csv", 6)
    assert path == ("/".join(["db/t/7", before, "CDC000001.csv"]) if before else "db/t/7/CDC000001.csv")


def test_commit_date_at_year_and_month_ends() -> None:
    new_year_ms = 1_704_067_200_000  # 2024-01-01 00:00:00 UTC
    assert commit_date("year", compose_ts(new_year_ms - 1)) == "2023"
    assert commit_date("year", compose_ts(new_year_ms)) == "2024"
    assert commit_date("month", compose_ts(new_year_ms - 1)) == "2023-12"
    assert commit_date("month", compose_ts(new_year_ms)) == "2024-01"


def test_commit_date_follows_the_changefeed_time_zone() -> None:
    # 2023-05-09 23:30 UTC is already the 10th in Shanghai (+08:00) and still the 9th in New York.
    ts = compose_ts(MIDNIGHT_MS - 30 * 60_000)
    assert commit_date("day", ts, "UTC") == "2023-05-09"
    assert commit_date("day", ts, "Asia/Shanghai") == "2023-05-10"
    assert commit_date("day", ts, "+08:00") == "2023-05-10"
    assert commit_date("day", ts, "America/New_York") == "2023-05-09"
    assert commit_date("day", compose_ts(MIDNIGHT_MS + 60_000), "-01:30") == "2023-05-09"


def test_commit_date_never_goes_backwards_with_the_commit_ts() -> None:
    dates = [commit_date("day", compose_ts(MIDNIGHT_MS - 120_000 + i * 7_919, i % 3)) for i in range(40)]
    assert dates == sorted(dates) and dates[0] == "2023-05-09" and dates[-1] == "2023-05-10"


def test_commit_date_refuses_an_unknown_time_zone() -> None:
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        commit_date("day", compose_ts(MIDNIGHT_MS), "Mars/Olympus")


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
