"""How often a running changefeed asks the JVM whether its query still runs (``_query_ended``).

The monitor, the marker and the scheduler each asked once a second: three calls into the JVM per
idle changefeed. The query here is a stand-in that counts the calls (a real query answers the same
``isActive``; the e2e tests run real ones through the same path).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.pipeline import changefeed as changefeed_module
from sparkcdc.pipeline.changefeed import RunningChangefeed
from sparkcdc.pipeline.spec import ChangefeedSpec
from sparkcdc.sink import create_sink


class CountingQuery:
    def __init__(self) -> None:
        self.asked = 0
        self.running = True

    @property
    def isActive(self) -> bool:
        self.asked += 1
        return self.running

    def stop(self) -> None:
        self.running = False


def _running(tmp_path: Path) -> RunningChangefeed:
    spec = ChangefeedSpec(
        "liveness",
        "mysql://root@127.0.0.1:1/",
        f"file://{tmp_path / 'sink'}?protocol=csv",
        checkpoint_dir=str(tmp_path / "data"),
    )
    sink = create_sink(spec.sink_uri, spec.config, spec.changefeed_id)
    return RunningChangefeed(
        spec, sink, UpstreamConfig.from_uri(spec.upstream_uri), Offset("b.000001", 4, 1), None
    )


def test_the_jvm_is_asked_at_most_once_per_check_interval_while_the_query_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changefeed_module, "ACTIVE_CHECK_S", 0.3)
    running = _running(tmp_path)
    assert not running.is_active(), "no query yet"
    query = running.query = CountingQuery()
    assert all(running.is_active() for _ in range(50))
    assert query.asked == 1, "fifty asks in a moment: one call into the JVM"
    time.sleep(0.35)  # past ACTIVE_CHECK_S: the next ask goes to the JVM again
    assert running.is_active() and query.asked == 2
    # It ended (say, it failed): seen at the next call into the JVM, and never asked again after.
    query.running = False
    time.sleep(0.35)
    assert not running.is_active() and query.asked == 3
    assert not running.is_active() and running.wait(0) is False and query.asked == 3


def test_a_stopped_query_is_not_active_at_once(tmp_path: Path) -> None:
    running = _running(tmp_path)
    query = running.query = CountingQuery()
    assert running.is_active()
    running.stop()
    assert not running.is_active() and query.asked == 1
