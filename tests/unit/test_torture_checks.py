"""The torture scenario's comparison of the HTTP and Iceberg outputs (``tests/e2e/torture.py``)."""

from __future__ import annotations

from tests.e2e.torture import _pair_renumbered


def test_an_old_header_transaction_under_two_commit_ts_is_paired_not_a_problem() -> None:
    only_http = {("torture_t_aria", 100): ["id=1 v=old"]}
    only_ice = {("torture_t_aria", 250): ["id=1 v=old"]}
    pairs, http, ice = _pair_renumbered(only_http, only_ice)
    assert len(pairs) == 1 and "100 (HTTP) / 250 (Iceberg)" in pairs[0]
    assert http == [] and ice == []


def test_anything_else_stays_unpaired() -> None:
    # an ordinary write, a different table, different rows, and a transaction one side lacks
    only_http = {
        ("torture_t_inno", 100): ["id=5 v=u5"],
        ("torture_t_aria", 101): ["id=1 v=old"],
        ("torture_t_aria", 102): ["id=1 v=old", "id=2 v=old again"],
        ("torture_t_aria", 103): ["id=1 v=old"],
    }
    only_ice = {
        ("torture_t_inno", 200): ["id=5 v=u5"],
        ("torture_t_nokey", 201): ["id=1 v=old"],
        ("torture_t_aria", 202): ["id=2 v=old again"],
    }
    pairs, http, ice = _pair_renumbered(only_http, only_ice)
    assert pairs == []
    assert sorted(ts for _t, ts in http) == [100, 101, 102, 103]
    assert sorted(ts for _t, ts in ice) == [200, 201, 202]


def test_each_transaction_pairs_once_and_only_with_its_own_rows() -> None:
    only_http = {("torture_t_aria", 1): ["id=1 v=old"], ("torture_t_aria", 2): ["id=1 v=old"]}
    only_ice = {("torture_t_aria", 9): ["id=1 v=old"], ("torture_t_aria", 10): ["id=3 v=old"]}
    pairs, http, ice = _pair_renumbered(only_http, only_ice)
    assert len(pairs) == 1 and http == [("torture_t_aria", 2)] and ice == [("torture_t_aria", 10)]
