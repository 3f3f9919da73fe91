"""What a delivery report per message costs the producing process.

    .venv/bin/python bench/kafka/delivery_reports.py [--messages 400000] [--rounds 2]

Starts a Tansu broker on 127.0.0.1, then sends ``--messages`` canal-json messages of the size
bench/scale's workload makes to a 3-partition topic, with the sink's producer settings
(``KafkaOptions.producer_config``: idempotence, acks=all, its bounded queue), once with a Python
delivery callback per message (the baseline: ``delivery.report.only.error`` off) and once with
failures-only reports (the sink's setting), alternating, ``--rounds`` times each. Prints wall
time and the CPU seconds of this process (librdkafka's threads included; the broker's not), with
the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink.kafka.config import KafkaOptions

VALUE = (
    b'{"id":0,"database":"bench","table":"t","pkNames":["id"],"isDdl":false,"type":"UPDATE",'
    b'"es":1700000000000,"ts":1700000000001,"sql":"","sqlType":{"id":4,"v":12},'
    b'"mysqlType":{"id":"int","v":"varchar"},"data":[{"id":"1","v":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}],'
    b'"old":[{"v":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"}]}'
)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _send(bootstrap: str, topic: str, n: int, every_report: bool) -> tuple[float, float, int]:
    from confluent_kafka import Producer

    options = KafkaOptions.parse(f"kafka://{bootstrap}/{topic}?protocol=canal-json", ReplicaConfig())
    conf = options.producer_config()
    conf["delivery.report.only.error"] = not every_report
    producer = Producer(conf)
    reports = [0]

    def on_delivery(err: object, msg: object) -> None:
        reports[0] += 1

    t0, c0 = time.monotonic(), _cpu()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, VALUE, None, i % 3, on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if not i % 1000:
            producer.poll(0)
    while len(producer):
        producer.flush(1.0)
    return time.monotonic() - t0, _cpu() - c0, reports[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    with LocalTansu() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("delivery-reports", 3, 1)])["delivery-reports"].result()
        best: dict[str, float] = {}
        for r in range(args.rounds):
            for every_report in (True, False):
                name = "a report per message" if every_report else "failures only"
                load = os.getloadavg()[0]
                wall, cpu, reports = _send(broker.bootstrap, "delivery-reports", args.messages, every_report)
                best[name] = min(best.get(name, cpu), cpu)
                print(
                    f"round {r + 1} {name:22} | {args.messages:,} messages | wall {wall:5.2f}s | "
                    f"CPU {cpu:5.2f}s | {reports:,} callbacks | load {load:.2f}→{os.getloadavg()[0]:.2f}",
                    flush=True,
                )
        base, only = best["a report per message"], best["failures only"]
        print(
            f"best CPU: {base:.2f}s with a report per message, {only:.2f}s failures only ({only / base:.2f}x)"
        )


if __name__ == "__main__":
    main()
