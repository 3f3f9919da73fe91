"""How long a fresh producer takes to its first acknowledged message.

    .venv/bin/python bench/kafka/first_message.py [--rounds 8]

Starts a Tansu broker on 127.0.0.1 and a 3-partition topic, then, ``--rounds`` times each and
alternating: creates a producer with the Kafka sink's settings (``KafkaOptions.producer_config``:
idempotent, acks=all), sends one message and waits for its acknowledgement. The baseline is
``confluent_kafka.Producer`` as is; the other is the sink's ``SharedProducer``, which asks for
the producer id at its creation (``SharedProducer.ask_for_id``). A fresh Spark Python worker (the
first task after a quiet minute) meets this on its first message. Prints each round's seconds
and the medians, with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink.kafka.config import KafkaOptions
from sparkcdc.sink.kafka.producer import SharedProducer


def _first_ack(options: KafkaOptions, topic: str, ask: bool) -> float:
    from confluent_kafka import Producer

    t0 = time.monotonic()
    producer = SharedProducer(options).producer if ask else Producer(options.producer_config())
    producer.produce(topic, b"first", None, 0)
    left = producer.flush(30)
    took = time.monotonic() - t0
    if left:
        raise RuntimeError(f"{left} message(s) not acknowledged within 30 s")
    return took


def main() -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()
    with LocalTansu() as broker:
        topic = "first-message"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until the topic exists
        for f in admin.create_topics([NewTopic(topic, 3, 1)]).values():
            f.result()
        options = KafkaOptions.parse(broker.sink_uri(topic), ReplicaConfig(), "bench")
        print(f"first acknowledged message of a fresh producer; load {os.getloadavg()[0]:.2f}")
        took: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for ask in (False, True):
                took[ask].append(_first_ack(options, topic, ask))
        for ask, what in (
            (False, "librdkafka's Producer (baseline)"),
            (True, "SharedProducer (asks for its id)"),
        ):
            rounds = " ".join(f"{t:.3f}" for t in took[ask])
            print(f"  {what}: median {statistics.median(took[ask]):.3f}s  [{rounds}]")
        ratio = statistics.median(took[True]) / statistics.median(took[False])
        print(f"  ratio {ratio:.2f}x; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
