"""The retry decision of ``sparkcdc run`` and the server: unrecognised errors are retried a bounded number of times."""

from __future__ import annotations

import pytest

from sparkcdc.errors import (
    MAX_UNCLASSIFIED_RETRIES,
    ConflictError,
    PermanentError,
    SinkError,
    SinkUnavailable,
    SparkCdcError,
    UnclassifiedError,
    UpstreamUnavailable,
    retry_verdict,
)


def failures_until_given_up(err: SparkCdcError, limit: int = MAX_UNCLASSIFIED_RETRIES) -> int | None:
    """Drive the decision the way the run loop does; how many failures end it (None: still retrying)."""
    unclassified = 0
    for failure in range(1, 100):
        if retry_verdict(err, unclassified, limit) is not None:
            return failure
        if isinstance(err, UnclassifiedError):
            unclassified += 1
    return None


def test_an_unclassified_error_is_retried_max_times_then_fails() -> None:
    assert MAX_UNCLASSIFIED_RETRIES == 5
    err = UnclassifiedError("ValueError: boom\nmore detail")
    assert failures_until_given_up(err) == MAX_UNCLASSIFIED_RETRIES + 1
    for retries in range(MAX_UNCLASSIFIED_RETRIES):
        assert retry_verdict(err, retries) is None
    final = retry_verdict(err, MAX_UNCLASSIFIED_RETRIES)
    assert isinstance(final, PermanentError) and not final.transient
    assert final.code == "CDC:ErrUnknown"
    assert final.message == (
        "retried 5 times, still failing with an error sparkcdc does not recognise: ValueError: boom"
    )


def test_the_bound_is_a_parameter() -> None:
    assert failures_until_given_up(UnclassifiedError("x"), limit=0) == 1
    assert failures_until_given_up(UnclassifiedError("x"), limit=2) == 3


@pytest.mark.parametrize(
    "err", [SinkUnavailable("down"), UpstreamUnavailable("restarting"), ConflictError("lost a CAS")]
)
def test_known_passing_faults_are_retried_without_a_bound(err: SparkCdcError) -> None:
    assert failures_until_given_up(err) is None
    assert retry_verdict(err, 1000) is None  # even after many unclassified ones in between


@pytest.mark.parametrize("err", [SinkError("refused"), PermanentError("no"), SparkCdcError("base")])
def test_permanent_errors_fail_at_once_as_they_are(err: SparkCdcError) -> None:
    assert retry_verdict(err, 0) is err
