"""MariaDB's own test files (``mtr_files.txt``) write real replicated data.

The list is replayed against an upstream started with mtr's defaults (``SERVER_ARGS``) while a
native replica follows it; the replica must catch up without a replication error and every table
of the databases the files wrote must exist on both with the same rows. The first tests check
the lists themselves without a server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.oracle.mtr import (
    SERVER_ARGS,
    _neutralize,
    databases_written,
    excluded_files,
    list_files,
    prepare_server,
    run_files,
    static_exclusion_reason,
    strip_trailing_drops,
    suite_root,
)
from tests.oracle.native import check_native, native_pair
from tests.oracle.tablediff import user_databases


def test_lists_are_consistent() -> None:
    files, excluded = list_files(), excluded_files()
    assert len(files) >= 60, len(files)
    assert len(set(files)) == len(files), "a file is listed twice"
    assert not set(files) & set(excluded), sorted(set(files) & set(excluded))
    root = suite_root()
    for f in files:
        assert (root / f).is_file(), f"{f} is not in this mariadb-test"
        assert f.split("/")[0] in ("main", "suite"), f
        reason = static_exclusion_reason(f)
        assert reason is None, f"{f} is listed but: {reason}"
    for f, reason in excluded.items():
        assert reason, f"{f} is excluded without a reason"


def test_replayed_copy_keeps_the_tables_and_the_binlog() -> None:
    text = (
        "create table t1 (a int);\ninsert into t1 values (1);\nreset master;\ndrop table t1;\n--echo # End\n"
    )
    copy = strip_trailing_drops(_neutralize(text))
    assert "insert into t1 values (1);" in copy
    assert "\ndrop table t1;" not in copy and "\nreset master;" not in copy
    # A DROP in the middle (followed by more work) stays; so does a qualified one at the end.
    middle = "drop table t1;\ncreate table t1 (b int);\ndrop table other.t2;\n"
    assert strip_trailing_drops(middle).startswith("drop table t1;\ncreate table t1")
    assert strip_trailing_drops(middle).endswith("drop table other.t2;\n")


@pytest.mark.integration
def test_mtr_files_replicate_natively(tmp_path: Path) -> None:
    files = list_files()
    with native_pair(SERVER_ARGS) as (upstream, replica):
        prepare_server(upstream)
        before = [d for d in user_databases(upstream) if d != "test"]
        runs = run_files(upstream, files, log_dir=tmp_path, timeout=60)
        skipped = [(r.file, r.output_tail[-200:]) for r in runs if r.skipped]
        assert not skipped, f"listed files the server skips (move them to mtr_excluded.txt): {skipped}"
        databases = databases_written(upstream, runs, before)
        assert len(databases) >= len(files) // 2, databases

        try:
            tables, rows = check_native(upstream, replica, databases)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n(each file's output is under {tmp_path})") from exc
        completed = sum(r.completed for r in runs)
        print(
            f"{len(files)} files ({completed} ran to the end) in {sum(r.seconds for r in runs):.0f}s: "
            f"{len(databases)} databases, {tables} tables, {rows} rows equal on the native replica"
        )
        # Most files clean up after themselves; the trailing DROPs left out keep enough to compare.
        assert tables >= len(files) // 2 and rows >= 250, (tables, rows)
