"""The one restart policy ``sparkcdc run`` and the server's scheduler both follow."""

from __future__ import annotations

import ast
import traceback
from pathlib import Path

import pytest

from sparkcdc.errors import (
    MAX_UNCLASSIFIED_RETRIES,
    ConfigError,
    PermanentError,
    SinkUnavailable,
    SparkCdcError,
    TransientError,
    UnclassifiedError,
)
from sparkcdc.pipeline.restart import Fail, Restart, RestartPolicy, check_error_stuck_seconds

SRC = Path(__file__).resolve().parents[3] / "src" / "sparkcdc"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_passing_fault_restarts_after_a_doubling_backoff_up_to_the_cap() -> None:
    policy = RestartPolicy(backoff_base=1, backoff_max=5, clock=Clock())
    delays = []
    for _ in range(5):
        d = policy.failed(TransientError("sink down", code="CDC:ErrSinkUnavailable"))
        assert isinstance(d, Restart)
        delays.append(d.delay)
    assert delays == [1, 2, 4, 5, 5]
    assert d.attempt == 5 and d.unclassified == 0
    assert d.describe() == "retrying in 5s (attempt 5)"


def test_a_permanent_error_fails_at_once_as_it_is() -> None:
    err = PermanentError("bad table", code="CDC:ErrSchemaMismatch")
    d = RestartPolicy(clock=Clock()).failed(err)
    assert isinstance(d, Fail) and d.error is err and d.cause is err and d.stuck_seconds is None


def test_unrecognised_errors_are_retried_a_bounded_number_of_times() -> None:
    policy = RestartPolicy(clock=Clock())
    for n in range(1, MAX_UNCLASSIFIED_RETRIES + 1):
        d = policy.failed(UnclassifiedError("boom"))
        assert isinstance(d, Restart) and d.unclassified == n
        assert f"{n} of {MAX_UNCLASSIFIED_RETRIES} retries for an unrecognised error" in d.describe()
    d = policy.failed(UnclassifiedError("boom"))
    assert isinstance(d, Fail) and isinstance(d.error, PermanentError)
    assert "boom" in d.error.message and f"retried {MAX_UNCLASSIFIED_RETRIES} times" in d.error.message


def test_errors_without_progress_for_the_stuck_limit_fail_with_the_last_one() -> None:
    clock = Clock()
    policy = RestartPolicy(error_stuck_seconds=60, clock=clock)
    assert isinstance(policy.failed(TransientError("down", code="CDC:ErrUpstreamUnavailable")), Restart)
    clock.now += 59
    assert isinstance(policy.failed(TransientError("down", code="CDC:ErrUpstreamUnavailable")), Restart)
    clock.now += 1
    d = policy.failed(TransientError("still down", code="CDC:ErrUpstreamUnavailable"))
    assert isinstance(d, Fail) and d.stuck_seconds == 60
    assert d.error.code == "CDC:ErrUpstreamUnavailable"
    assert d.error.message == "errors for 60s without progress (--error-stuck-seconds); last: still down"


def test_progress_forgets_the_failures_before_it() -> None:
    clock = Clock()
    policy = RestartPolicy(backoff_base=1, error_stuck_seconds=60, clock=clock)
    for _ in range(3):
        policy.failed(UnclassifiedError("boom"))
    assert policy.failing
    clock.now += 100
    policy.progressed()
    assert not policy.failing
    d = policy.failed(UnclassifiedError("boom"))
    assert isinstance(d, Restart) and (d.delay, d.attempt, d.unclassified) == (1, 1, 1)


def test_a_spark_failure_is_judged_by_the_sparkcdc_error_it_carries() -> None:
    """The marker a worker's traceback carries (``errors.MARKER``), wrapped in the JVM's text."""
    try:
        raise PermanentError("column c changed", code="CDC:ErrSchemaMismatch")
    except PermanentError as exc:
        worker = "".join(traceback.format_exception(exc))
    carried = RuntimeError(f"org.apache.spark.SparkException: Job aborted\n{worker}")
    d = RestartPolicy(clock=Clock()).failed(carried)
    assert isinstance(d, Fail) and d.error.code == "CDC:ErrSchemaMismatch"
    assert d.error.message == "column c changed"


@pytest.mark.parametrize("value", [0, 0.5, float("nan"), float("inf")])
def test_a_stuck_limit_under_a_second_or_not_a_number_is_refused(value: float) -> None:
    with pytest.raises(ConfigError, match="--error-stuck-seconds"):
        check_error_stuck_seconds(value)


def test_the_cli_and_the_scheduler_decide_restarts_through_the_policy_alone() -> None:
    """Neither front end computes a backoff or a verdict of its own."""
    for rel in ("cli/cmd_run.py", "server/scheduler.py"):
        tree = ast.parse((SRC / rel).read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
        }
        assert "RestartPolicy" in names, rel
        assert "retry_verdict" not in names, rel
        assert not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(tree)), rel


class _Running:
    """A changefeed whose stop fails on the sink's close, as a storage sink's last ``metadata``
    write does during an S3 outage. A stand-in: ``tests/faults/test_s3_faults.py`` meets this with
    a real 503 only when the stop falls inside the outage, which the test cannot time."""

    def __init__(self, failure: SparkCdcError | None) -> None:
        self.failure = failure

    def stop(self) -> None:
        raise SinkUnavailable("cannot write 'bucket/cdc/metadata' in the storage sink: [Errno 16] 503")

    def exception(self) -> SparkCdcError | None:
        return self.failure


class _Out:
    def __init__(self) -> None:
        self.said: list[str] = []

    def say(self, message: str) -> None:
        self.said.append(message)


def test_a_failed_query_whose_stop_fails_too_is_restarted_by_its_own_error() -> None:
    """``sparkcdc run`` exited 3 with the stop's error instead of retrying the query's (seen under load)."""
    from sparkcdc.cli.cmd_run import _stop

    out = _Out()
    _stop(_Running(SinkUnavailable("cannot read 'x/CDC.index' in the storage sink: 503")), out)
    assert out.said == [
        "warning: [CDC:ErrSinkUnavailable] stopping the failed changefeed: cannot write "
        "'bucket/cdc/metadata' in the storage sink: [Errno 16] 503"
    ]
    with pytest.raises(SinkUnavailable):  # a query that did not fail: the stop's error is the run's
        _stop(_Running(None), _Out())
