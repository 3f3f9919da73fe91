"""Binlog bytes between offsets across files: the backlog a catch-up's share and ETA come from."""

from __future__ import annotations

from sparkcdc.pipeline.backlog import Backlog, backlog_of, bytes_between, head_of

FILES = [
    ("mysql-bin.000007", 1000),
    ("mysql-bin.000008", 300),
    ("mysql-bin.000009", 5000),
    ("mysql-bin.000010", 250),
]


def test_bytes_within_one_file() -> None:
    assert bytes_between(FILES, ("mysql-bin.000009", 120), ("mysql-bin.000009", 4120)) == 4000
    assert bytes_between(FILES, ("mysql-bin.000009", 120), ("mysql-bin.000009", 120)) == 0


def test_bytes_across_several_files() -> None:
    # the rest of 000007, all of 000008 and 000009, then 000010 up to 200
    assert (
        bytes_between(FILES, ("mysql-bin.000007", 400), ("mysql-bin.000010", 200)) == 600 + 300 + 5000 + 200
    )
    # into the next file only
    assert bytes_between(FILES, ("mysql-bin.000008", 100), ("mysql-bin.000009", 4)) == 200 + 4


def test_file_order_is_by_number_not_by_name() -> None:
    files = [("bin.999999", 100), ("bin.1000000", 50)]
    assert bytes_between(files, ("bin.999999", 60), ("bin.1000000", 10)) == 40 + 10
    assert bytes_between(files, ("bin.1000000", 10), ("bin.999999", 60)) == 0


def test_an_end_before_the_start_is_no_bytes() -> None:
    assert bytes_between(FILES, ("mysql-bin.000009", 300), ("mysql-bin.000008", 200)) == 0


def test_a_purged_start_file_counts_from_the_next() -> None:
    files = FILES[2:]
    assert bytes_between(files, ("mysql-bin.000008", 100), ("mysql-bin.000010", 50)) == 5000 + 50


def test_backlog_to_the_head_or_to_a_goal() -> None:
    start = ("mysql-bin.000007", 400)
    assert head_of(FILES) == ("mysql-bin.000010", 250)
    assert backlog_of(FILES, start, ("mysql-bin.000008", 300), None) == Backlog(900, 600 + 300 + 5000 + 250)
    # a target-ts offset in 000009
    assert backlog_of(FILES, start, ("mysql-bin.000008", 300), ("mysql-bin.000009", 1000)) == Backlog(
        900, 1900
    )
    # a batch that ended after the head last probed: all read
    late = backlog_of(FILES, start, ("mysql-bin.000011", 40), None)
    assert late is not None and late.done == late.total
    assert backlog_of([], start, start, None) is None
