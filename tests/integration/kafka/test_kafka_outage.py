"""Broker outages: a batch waits for a broker that comes back, or fails transiently and is retried.

The broker keeps its state on (moto) S3, so a restart keeps its topics, messages and idempotent
producer ids, as a Kafka cluster's does. (On Tansu's memory storage a restart forgets the producer
id a writer got before the stop, and the writer's later messages are never acknowledged.)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SinkUnavailable, TransientError
from sparkcdc.model import RowChange, compose_ts
from sparkcdc.services.s3 import LocalS3
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.kafka import KafkaSink
from tests.integration.kafka.conftest import consume_all, person_table

pytestmark = pytest.mark.integration


@pytest.fixture()
def broker() -> Iterator[LocalTansu]:
    with LocalS3() as s3, LocalTansu.on_s3(s3) as b:
        yield b


def row(i: int) -> RowChange:
    return RowChange(
        "I", "test", "person", 1, compose_ts(1_700_000_000_000 + i), None, (i, f"n{i}", None, None)
    )


def restart_after(broker: LocalTansu, delay: float) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)  # the outage the test simulates
        broker.start()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_broker_down_mid_batch_loses_nothing(broker: LocalTansu, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sparkcdc.sink.kafka.producer")
    topic = "outage"
    sink = KafkaSink(broker.sink_uri(topic, "protocol=canal-json&partition-num=1"), ReplicaConfig(), "cf")
    sink.check()
    table = person_table()
    w = sink.open_writer(WriterContext("cf", 1, 0))
    for i in range(1, 51):
        w.write(row(i), table)
    broker.stop()
    for i in range(51, 201):
        w.write(row(i), table)
    restarter = restart_after(broker, 2.0)
    msg = w.close()
    restarter.join(timeout=30)
    assert msg["messages"] == 200
    got = consume_all(broker.bootstrap, topic, 1)[0]
    ids = [int(json.loads(m.value())["data"][0]["id"]) for m in got]
    assert ids == list(range(1, 201)), "what was produced before, during and after the outage, in order"
    assert "unreachable" in caplog.text and "reachable again" in caplog.text


def test_broker_down_longer_than_message_timeout_is_transient(broker: LocalTansu) -> None:
    topic = "timeout"
    uri = broker.sink_uri(topic, "protocol=canal-json&partition-num=1&message-timeout=2s")
    sink = KafkaSink(uri, ReplicaConfig(), "cf")
    sink.check()
    table = person_table()
    broker.stop()
    w = sink.open_writer(WriterContext("cf", 1, 0))
    for i in range(1, 11):
        w.write(row(i), table)
    started = time.monotonic()
    with pytest.raises(SinkUnavailable) as exc:
        w.close()
    assert isinstance(exc.value, TransientError)
    assert time.monotonic() - started < 30
    assert "not acknowledged" in str(exc.value) or "timed out" in str(exc.value).lower()
    # the pipeline retries the batch once the broker is back: nothing is missing
    broker.start()
    w = sink.open_writer(WriterContext("cf", 1, 0, task_attempt=1))
    for i in range(1, 11):
        w.write(row(i), table)
    assert w.close()["messages"] == 10
    got = consume_all(broker.bootstrap, topic, 1)[0]
    assert [int(json.loads(m.value())["data"][0]["id"]) for m in got] == list(range(1, 11))
