"""Statement forms, each checked against MariaDB's native replica on the three sparkcdc paths.

The main workload writes every form of ``forms.FORMS`` into its own database in one
binlog range; the forms that need a server-wide binlog setting (compressed events, no
checksums) have a workload and range of their own, and so do the forms that span a stop and a
resume of every path's changefeed (``RESTART_FORMS``: XA transactions left prepared across it). Each workload runs once per module
and each path once per workload (one ``sparkcdc run``; a path that fails in a form runs
again after that form, see ``harness``), so every form is its own test per path: it
compares the form's database with the native replica's, and fails alone when only its
form is wrong. ``test_path_delivers_the_whole_range`` sums up each path's failures.
"""

from __future__ import annotations

import pytest

from tests.oracle.forms import (
    CHECKSUM_FORMS,
    COMPRESSED_FORMS,
    FORMS,
    RESTART_FORMS,
    RESTARTS,
    Form,
    segments,
)
from tests.oracle.harness import PATHS, Capture, Oracle

# The first test of a workload captures it: its runs, and the runs again after a failing form.
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(2400)]

WORKLOADS: dict[str, list[Form]] = {
    "forms": FORMS,
    "compressed": COMPRESSED_FORMS,
    "checksum": CHECKSUM_FORMS,
    "restart": RESTART_FORMS,
}
RESTART_AFTER: dict[str, tuple[str, ...]] = {"restart": RESTARTS}
"""Workloads whose runs stop after some forms and resume (an XA left open across the stop)."""


@pytest.fixture(scope="module")
def captures(oracle: Oracle) -> dict[str, Capture | BaseException]:
    """Each workload written and delivered through the three paths (captured on first use)."""
    return {}


def _capture(name: str, oracle: Oracle, captures: dict[str, Capture | BaseException]) -> Capture:
    if name not in captures:
        forms = WORKLOADS[name]
        try:
            captures[name] = oracle.capture(name, segments(forms), restarts=RESTART_AFTER.get(name, ()))
        except (Exception, pytest.fail.Exception) as exc:  # a timeout too: the workload's tests fail with it
            captures[name] = exc
    got = captures[name]
    if isinstance(got, BaseException):
        raise AssertionError(f"workload {name!r} could not be captured: {got!r}") from got
    return got


CASES = [(w, f, p) for w, forms in WORKLOADS.items() for f in forms for p in PATHS]


@pytest.mark.parametrize(("workload", "form", "path"), CASES, ids=[f"{f.name}-{p}" for _, f, p in CASES])
def test_form_equals_native_replica(
    workload: str, form: Form, path: str, oracle: Oracle, captures: dict[str, Capture | BaseException]
) -> None:
    cap = _capture(workload, oracle, captures)
    cap.assert_equal(path, form.database, segment=form.name)


RUN_CASES = [(w, p) for w in WORKLOADS for p in PATHS]


@pytest.mark.parametrize(("workload", "path"), RUN_CASES, ids=[f"{w}-{p}" for w, p in RUN_CASES])
def test_path_delivers_the_whole_range(
    workload: str, path: str, oracle: Oracle, captures: dict[str, Capture | BaseException]
) -> None:
    """The path's ``sparkcdc run`` reached the workload's target ts and its consumer ended cleanly."""
    cap = _capture(workload, oracle, captures)
    cap.assert_ran(path)
