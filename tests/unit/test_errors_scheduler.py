"""The server's scheduler bounds the retries of errors sparkcdc does not recognise (real SQLite meta store)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import MAX_UNCLASSIFIED_RETRIES, SinkUnavailable, SparkCdcError, UnclassifiedError
from sparkcdc.meta import ChangefeedState, MetaStore, NewChangefeed
from sparkcdc.pipeline.spec import ChangefeedSpec
from sparkcdc.server.scheduler import Scheduler


class Handle:
    def __init__(self, on_progress: Callable[[Any], None]) -> None:
        self.report = on_progress
        self.error: SparkCdcError | None = None
        self.active = True

    def stop(self) -> None:
        self.active = False

    def is_active(self) -> bool:
        return self.active

    def exception(self) -> SparkCdcError | None:
        return self.error

    def finished(self) -> bool:
        return False


class Runner:
    """Starts fail with ``fail()`` while it is set; otherwise a handle is returned."""

    def __init__(self, fail: Callable[[], BaseException] | None = None) -> None:
        self.fail = fail
        self.starts = 0
        self.handles: list[Handle] = []

    def start(
        self,
        spec: ChangefeedSpec,
        on_progress: Callable[[Any], None],
        on_resolved: object = None,
        on_planned: object = None,
    ) -> Handle:
        self.starts += 1
        if self.fail is not None:
            raise self.fail()
        h = Handle(on_progress)
        self.handles.append(h)
        return h

    def shutdown(self) -> None:
        pass


class Prog:
    def __init__(self, checkpoint_ts: int) -> None:
        self.checkpoint_ts = self.resolved_ts = checkpoint_ts
        self.rows_total = 0
        self.rows_per_sec = self.lag_s = 0.0


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MetaStore]:
    s = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    s.create_changefeed(
        NewChangefeed(
            id="cf-1",
            upstream_uri="mysql://root@127.0.0.1:3306/",
            sink_uri="file:///tmp/out?protocol=csv",
            config={},
            start_ts=100,
        )
    )
    yield s
    s.close()


def scheduler(store: MetaStore, runner: Runner, tmp_path: Path) -> Scheduler:
    return Scheduler(
        store,
        runner,
        server_id="srv-a",
        address="127.0.0.1:1",
        data_dir=tmp_path / "data",
        lease_seconds=30,
        backoff_base=0.001,
        backoff_max=0.001,
    )


def run_until(s: Scheduler, done: Callable[[], bool], ticks: int = 60) -> None:
    for _ in range(ticks):
        s.tick()
        for t in list(s.tasks.values()):
            if t.pending is not None:
                t.pending.exception(timeout=5)
        if done():
            return
        time.sleep(0.003)


def test_an_unrecognised_start_failure_fails_the_changefeed_after_the_bound(
    store: MetaStore, tmp_path: Path
) -> None:
    runner = Runner(fail=lambda: ValueError("plain boom"))
    s = scheduler(store, runner, tmp_path)
    run_until(s, lambda: store.get_changefeed("cf-1").state == ChangefeedState.FAILED)
    row = store.get_changefeed("cf-1")
    assert row.state == ChangefeedState.FAILED and row.error is not None
    assert runner.starts == MAX_UNCLASSIFIED_RETRIES + 1
    assert row.error["code"] == "CDC:ErrUnknown"
    assert row.error["message"] == (
        "retried 5 times, still failing with an error sparkcdc does not recognise: ValueError: plain boom"
    )


def test_a_known_passing_fault_keeps_being_retried(store: MetaStore, tmp_path: Path) -> None:
    runner = Runner(fail=lambda: SinkUnavailable("sink down"))
    s = scheduler(store, runner, tmp_path)
    run_until(s, lambda: runner.starts > 3 * MAX_UNCLASSIFIED_RETRIES)
    row = store.get_changefeed("cf-1")
    assert row.state == ChangefeedState.NORMAL and "CDC:ErrSinkUnavailable" in (row.warning or "")


def test_progress_between_unrecognised_failures_resets_the_count(store: MetaStore, tmp_path: Path) -> None:
    runner = Runner()
    s = scheduler(store, runner, tmp_path)

    def fail_running_query() -> None:
        """The running query stops with an unrecognised error; wait until it is restarted or failed."""
        n = len(runner.handles)
        runner.handles[-1].error = UnclassifiedError("ValueError: flaky")
        run_until(
            s,
            lambda: len(runner.handles) > n or store.get_changefeed("cf-1").state == ChangefeedState.FAILED,
        )

    def at_checkpoint(ts: int) -> Callable[[], bool]:
        return lambda: store.get_changefeed("cf-1").checkpoint_ts == ts

    run_until(s, lambda: bool(runner.handles))
    for checkpoint in (200, 300):
        for _ in range(MAX_UNCLASSIFIED_RETRIES):
            fail_running_query()
        runner.handles[-1].report(Prog(checkpoint))  # the restarted query makes progress
        run_until(s, at_checkpoint(checkpoint))
    assert store.get_changefeed("cf-1").state == ChangefeedState.NORMAL
    assert len(runner.handles) == 1 + 2 * MAX_UNCLASSIFIED_RETRIES
    # Without progress in between, MAX + 1 failures in a row fail it.
    for _ in range(MAX_UNCLASSIFIED_RETRIES + 1):
        fail_running_query()
    row = store.get_changefeed("cf-1")
    assert row.state == ChangefeedState.FAILED and row.error is not None
    assert row.error["message"].startswith("retried 5 times, still failing")
    assert len(runner.handles) == 1 + 3 * MAX_UNCLASSIFIED_RETRIES


def test_a_query_that_stopped_without_an_error_is_unclassified(store: MetaStore, tmp_path: Path) -> None:
    runner = Runner()
    s = scheduler(store, runner, tmp_path)
    run_until(s, lambda: bool(runner.handles))
    runner.handles[0].active = False
    run_until(s, lambda: len(runner.handles) > 1)
    assert "CDC:ErrUnknown" in (store.get_changefeed("cf-1").warning or "")
