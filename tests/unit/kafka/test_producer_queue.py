"""The producer's local queue is bounded: a writer that outruns the broker waits, it does not buffer.

librdkafka's default queue (100,000 messages) let a writer hold most of a segment's messages in its
Python worker while the broker caught up; the sink's producer holds ``PRODUCER_QUEUE_MESSAGES``.
Against a real broker: the queue never holds more, and every message is acknowledged.
"""

from __future__ import annotations

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.config import PRODUCER_QUEUE_MESSAGES
from sparkcdc.sink.kafka.producer import DeliveryTracker, get_producer


def test_a_full_queue_waits_for_the_broker_and_loses_nothing(tansu: LocalTansu) -> None:
    topic = "queue-bound"
    sink = create_sink(tansu.sink_uri(topic, "protocol=canal-json&partition-num=1"), ReplicaConfig(), "cf")
    assert isinstance(sink, KafkaSink)
    sink.check()
    shared = get_producer(sink.options)
    tracker = DeliveryTracker(shared, sink.max_message_bytes)
    n = 3 * PRODUCER_QUEUE_MESSAGES
    value = b'{"data":[{"id":"1","v":"' + b"x" * 300 + b'"}]}'
    most = 0
    for i in range(n):
        tracker.produce(topic, 0, None, value)
        if i % 500 == 0:
            most = max(most, len(shared.producer))
    tracker.wait(timeout=120)
    assert (tracker.sent, tracker.acked, tracker.failed) == (n, n, 0)
    assert 0 < most <= PRODUCER_QUEUE_MESSAGES
