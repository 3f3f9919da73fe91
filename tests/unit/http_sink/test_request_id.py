"""HTTP request ids and request ends come from the rows, never from Spark's batch ids."""

from __future__ import annotations

from sparkcdc.model import RowChange
from sparkcdc.sink.http.writer import ends_request, rows_request_id


def test_request_id_names_changefeed_first_and_last_row_count_and_table() -> None:
    rid = rows_request_id("cf1", (100, 0), (105, 2), 9, ("shop", "orders"))
    assert rid == "cf1:rows:100.0-105.2:9:shop.orders"
    assert rows_request_id("cf1", (100, 0), (105, 2), 9, None) == "cf1:rows:100.0-105.2:9"


def test_request_id_differs_for_different_rows() -> None:
    base = rows_request_id("cf", (100, 0), (105, 2), 9, None)
    others = {
        rows_request_id("cf", (100, 1), (105, 2), 8, None),
        rows_request_id("cf", (100, 0), (105, 1), 8, None),
        rows_request_id("cf", (100, 0), (106, 0), 10, None),
        rows_request_id("cf2", (100, 0), (105, 2), 9, None),
        rows_request_id("cf", (100, 0), (105, 2), 9, ("shop", "orders")),
    }
    assert base not in others and len(others) == 5


def test_request_id_is_ascii_for_any_table_name() -> None:
    rid = rows_request_id("cf", (1, 0), (1, 0), 1, ("库", "tab le:1"))
    assert rid.isascii() and rid.endswith(":%E5%BA%93.tab%20le%3A1")


def test_request_ends_depend_on_the_row_alone() -> None:
    rows = [RowChange("I", "s", "t", 0, (1 << 30) + i // 4, None, (i,), seq=i % 4) for i in range(20_000)]
    cuts = [r for r in rows if ends_request(r, 256)]
    # About one row in batch-size ends a request, and always the same rows.
    assert 40 <= len(cuts) <= 120
    assert cuts == [r for r in rows if ends_request(r, 256)]
    assert all(ends_request(r, 1) for r in rows[:10])
