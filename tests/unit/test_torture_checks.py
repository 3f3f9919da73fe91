"""The torture scenario's comparison of the HTTP and Iceberg outputs (``tests/e2e/torture.py``)."""

from __future__ import annotations

from tests.e2e.torture import _compare_in_commit_order


def test_equal_outputs_have_nothing_to_say() -> None:
    out = {("torture_t_inno", 100): ["id=5 v=u5"], ("torture_t_aria", 101): ["id=1 v=x"]}
    assert _compare_in_commit_order(out, dict(out)) == ([], [])


def test_a_raise_renumbers_an_old_header_transaction_and_the_ones_after_it_in_its_second() -> None:
    # The CI run of seed 20261128: the HTTP changefeed raised its chain to R = base(s) - 1 while
    # idle; the old-header transaction got R + 1 there and previous + 1 in the Iceberg changefeed,
    # and the next transaction, written in second s on another connection, base(s) + 1 and base(s).
    base = 1 << 30
    http = {
        ("torture_t_inno", 50): ["id=2 v=a"],
        ("torture_t_aria", base): ["id=1 v=old"],
        ("torture_t_inno", base + 1): ["id=3 v=b"],
        ("torture_t_nokey", base + 1): ["id=None v=c"],
        ("torture_t_inno", base + 2 * base): ["id=4 v=d"],
    }
    ice = {
        ("torture_t_inno", 50): ["id=2 v=a"],
        ("torture_t_aria", 51): ["id=1 v=old"],
        ("torture_t_inno", base): ["id=3 v=b"],
        ("torture_t_nokey", base): ["id=None v=c"],
        ("torture_t_inno", base + 2 * base): ["id=4 v=d"],
    }
    renumbered, problems = _compare_in_commit_order(http, ice)
    assert problems == []
    assert len(renumbered) == 2
    assert renumbered[0].startswith(f"{base} (HTTP) / 51 (Iceberg)")
    assert "torture_t_nokey" in renumbered[1]


def test_a_lost_transaction_is_a_problem_named_by_its_place() -> None:
    http = {
        ("torture_t_inno", 1): ["id=1 v=a"],
        ("torture_t_inno", 2): ["id=2 v=b"],
        ("torture_t_inno", 3): ["id=3 v=c"],
    }
    ice = {("torture_t_inno", 1): ["id=1 v=a"], ("torture_t_inno", 3): ["id=3 v=c"]}
    renumbered, problems = _compare_in_commit_order(http, ice)
    assert renumbered == []
    assert len(problems) == 1 and "transaction 2 in commit order" in problems[0]


def test_two_transactions_in_another_order_are_a_problem() -> None:
    http = {("torture_t_inno", 1): ["id=1 v=a"], ("torture_t_inno", 2): ["id=2 v=b"]}
    ice = {("torture_t_inno", 1): ["id=2 v=b"], ("torture_t_inno", 2): ["id=1 v=a"]}
    _renumbered, problems = _compare_in_commit_order(http, ice)
    assert len(problems) == 1 and "transaction 1 in commit order" in problems[0]


def test_a_transaction_one_side_splits_or_gives_other_rows_is_a_problem() -> None:
    # one side shows the inno and nokey rows as one transaction, the other as two
    http = {("torture_t_inno", 1): ["id=1 v=a"], ("torture_t_nokey", 1): ["id=None v=b"]}
    ice = {("torture_t_inno", 1): ["id=1 v=a"], ("torture_t_nokey", 2): ["id=None v=b"]}
    assert _compare_in_commit_order(http, ice)[1]
    # other rows under the same commit_ts
    assert _compare_in_commit_order(
        {("torture_t_inno", 1): ["id=1 v=a"]}, {("torture_t_inno", 1): ["id=1 v=z"]}
    )[1]


def test_extra_transactions_at_the_end_are_a_problem() -> None:
    http = {("torture_t_inno", 1): ["id=1 v=a"]}
    ice = {("torture_t_inno", 1): ["id=1 v=a"], ("torture_t_aria", 7): ["id=9 v=old"]}
    _renumbered, problems = _compare_in_commit_order(http, ice)
    assert problems == ["Iceberg has 1 more transactions, the first at commit_ts 7"]
