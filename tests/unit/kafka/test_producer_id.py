"""A new producer asks for its idempotent producer id at once (``SharedProducer.ask_for_id``).

How much sooner its first message is acknowledged is bench/kafka/first_message.py's figure; here,
that the ask never costs a producer more than its bound where no broker answers, and that a
producer made against a live broker delivers.
"""

from __future__ import annotations

import socket
import time

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.services.common import free_port
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.config import KafkaOptions
from sparkcdc.sink.kafka.producer import ID_ASK_S, DeliveryTracker, SharedProducer


def test_a_producer_without_a_broker_is_made_within_the_asks_bound() -> None:
    port = free_port()
    with socket.socket() as s:  # nothing listens there
        assert s.connect_ex(("127.0.0.1", port)) != 0
    options = KafkaOptions.parse(f"kafka://127.0.0.1:{port}/t?protocol=canal-json", ReplicaConfig(), "cf")
    t0 = time.monotonic()
    shared = SharedProducer(options)
    took = time.monotonic() - t0
    try:
        assert took < 2 * ID_ASK_S + 1.0, f"making the producer took {took:.2f}s"
        tracker = DeliveryTracker(shared, 1 << 20)
        tracker.produce("t", 0, None, b"waits in the queue")
        assert (tracker.sent, tracker.acked, tracker.failed) == (1, 0, 0), "the message waits for the broker"
    finally:
        shared.producer.purge()


def test_a_new_producer_delivers_its_first_message(tansu: LocalTansu) -> None:
    sink = create_sink(
        tansu.sink_uri("first-id", "protocol=canal-json&partition-num=1"), ReplicaConfig(), "cf"
    )
    assert isinstance(sink, KafkaSink)
    sink.check()
    shared = SharedProducer(sink.options)
    tracker = DeliveryTracker(shared, sink.max_message_bytes)
    tracker.produce("first-id", 0, None, b"first")
    tracker.wait(timeout=30)
    assert (tracker.sent, tracker.acked, tracker.failed) == (1, 1, 0)
