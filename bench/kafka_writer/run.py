"""Kafka writer benchmark: the Kafka sink's per-row path (canal-json encode + produce) alone.

Usage (from the repository root)::

    .venv/bin/python bench/kafka_writer/run.py [--rows 200000] [--repeat 3] [--query "..."]

Starts a private Tansu broker on 127.0.0.1, builds the Kafka sink from a
``kafka://`` URI (``protocol=canal-json`` plus ``--query``), makes N synthetic
row changes in the shapes of ``bench/storage/run.py``'s two tables (a 13-column
``orders`` table of mixed types and a 4-column ``events`` table with JSON; 45 %
order inserts and 15 % event inserts in 1,000-row transactions, 25 % updates,
bulk and 2,000 single-row transactions, 15 % deletes), and pushes them through
``sink.open_writer(...).write/close`` the way the pipeline does (rows grouped by
``route()``, one writer per group, ``close()`` waits for every acknowledgement).

Each repetition runs two candidates, alternating, on fresh topics:

* **reference**: the writer as it was before the optimisation
  (``ReferenceKafkaPartitionWriter`` below: per-row routing, a delivery closure per
  message) with the reference canal-json encoder (``ReferenceCanalJsonEncoder``);
* **compiled**: the default writer (per-table compiled encoders, batched produce).

It prints rows/s (write + close) for both, their best and median, and checks
that both wrote the same message bytes (``ts``, the wall clock, masked).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shapes import EVENTS, ORDERS

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import RowChange, TableInfo, compose_ts

CHUNK = 1000
SINGLE_ROW_TXNS = 2000
BASE_MS = 1_735_689_600_000

_STATES = ("new", "paid", "shipped", "done")
_KINDS = ("created", "paid", "sent")


def _order(seq: int) -> tuple[Any, ...]:
    import hashlib

    created_s = 1_704_067_200 + seq
    micro = (seq * 7919) % 1_000_000
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(created_s)) + f".{micro:06d}"
    updated = (
        None
        if seq % 3 == 0
        else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_717_200_000 + seq)) + ".000"
    )
    day = time.strftime("%Y-%m-%d", time.gmtime(1_577_836_800 + (seq % 3000) * 86400))
    return (
        seq,
        seq % 128 - 64,
        seq * 3,
        seq * 1_000_003,
        (Decimal(seq) / 7).quantize(Decimal("0.0001")),
        seq * 1.5,
        f"order-{seq}-" + "x" * (seq % 20),
        created,
        updated,
        day,
        hashlib.sha1(str(seq).encode()).digest(),
        _STATES[seq % 4],
        None if seq % 5 == 0 else f"n{seq}",
    )


def _event(seq: int) -> tuple[Any, ...]:
    return (seq, seq % 50000, _KINDS[seq % 3], '{"seq": %d, "ok": true}' % seq)


def make_workload(rows: int) -> list[tuple[RowChange, TableInfo]]:
    """N row changes in commit order: bulk inserts, bulk and single-row updates, bulk deletes."""
    n_ord = rows * 45 // 100
    n_evt = rows * 15 // 100
    n_del = rows * 15 // 100
    n_upd = rows - n_ord - n_evt - n_del
    singles = min(SINGLE_ROW_TXNS, n_upd // 2)
    out: list[tuple[RowChange, TableInfo]] = []
    orders: dict[int, tuple[Any, ...]] = {}
    txn = 0

    def next_ts() -> int:
        nonlocal txn
        txn += 1
        return compose_ts(BASE_MS + txn, 0)

    def chunks(lo: int, hi: int) -> list[tuple[int, int]]:
        return [(a, min(a + CHUNK - 1, hi)) for a in range(lo, hi + 1, CHUNK)]

    def emit(ts: int, items: list[tuple[str, TableInfo, Any, Any]]) -> None:
        for seq, (op, table, before, after) in enumerate(items):
            out.append((RowChange(op, table.schema, table.table, 1, ts, before, after, seq), table))  # type: ignore[arg-type]

    evt = chunks(1, n_evt)
    ord_chunks = chunks(1, n_ord)
    for k, (a, b) in enumerate(ord_chunks):
        items: list[tuple[str, TableInfo, Any, Any]] = []
        for i in range(a, b + 1):
            orders[i] = _order(i)
            items.append(("I", ORDERS, None, orders[i]))
        emit(next_ts(), items)
        if k < len(evt):
            emit(next_ts(), [("I", EVENTS, None, _event(i)) for i in range(evt[k][0], evt[k][1] + 1)])
    for a, b in evt[len(ord_chunks) :]:
        emit(next_ts(), [("I", EVENTS, None, _event(i)) for i in range(a, b + 1)])
    bulk_upd = chunks(1, n_upd - singles)
    dels = chunks(n_ord - n_del + 1, n_ord)
    for k in range(max(len(bulk_upd), len(dels))):
        if k < len(bulk_upd):
            items = []
            for i in range(bulk_upd[k][0], bulk_upd[k][1] + 1):
                old = orders[i]
                new = list(old)
                new[2] = old[2] + 1
                new[4] = old[4] * 2
                new[6] = old[6] + "!"
                new[8] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_735_689_600 + i)) + ".000"
                new[11] = "paid"
                orders[i] = tuple(new)
                items.append(("U", ORDERS, old, orders[i]))
            emit(next_ts(), items)
        if k < len(dels):
            emit(next_ts(), [("D", ORDERS, orders.pop(i), None) for i in range(dels[k][0], dels[k][1] + 1)])
    for i in range(singles):
        key = n_upd - singles + 1 + i
        old = orders[key]
        new = list(old)
        new[12] = "single"
        new[3] = old[3] + 1
        orders[key] = tuple(new)
        emit(next_ts(), [("U", ORDERS, old, orders[key])])
    return out


def build_sink(broker: Any, topic: str, query: str, toml: str = "") -> Any:
    """The Kafka sink for a topic on the broker, checked (topic created)."""
    from sparkcdc.sink import create_sink

    sink = create_sink(broker.sink_uri(topic, query), ReplicaConfig.from_toml(toml), "bench")
    sink.check()
    return sink


class ReferenceKafkaPartitionWriter:
    """The writer before the optimisation: per-row routing and split checks, a closure per message.

    Kept here (not in the package) only to measure against; it encodes with
    ``ReferenceCanalJsonEncoder`` and produces through the same shared producer.
    """

    _OP_ORDER = {"D": 0, "U": 1, "I": 2}

    def __init__(self, sink: Any, ctx: Any) -> None:
        from sparkcdc.codec.canal_json import ReferenceCanalJsonEncoder
        from sparkcdc.sink.kafka.encoders import MessageEncoder
        from sparkcdc.sink.kafka.large_message import LargeMessageHandler
        from sparkcdc.sink.kafka.producer import DeliveryTracker, get_producer

        self.sink = sink
        self.ctx = ctx
        reference = ReferenceCanalJsonEncoder(
            sink.config,
            sink.options.enable_tidb_extension,
            only_output_updated_columns=sink.options.only_output_updated_columns,
            content_compatible=sink.options.content_compatible,
        )
        self.encoder = MessageEncoder(sink.options, sink.config, codec=reference)
        self.tracker = DeliveryTracker(get_producer(sink.options), sink.max_message_bytes)
        self.large = LargeMessageHandler(
            sink.options.large_message, sink.max_message_bytes, sink.options.protocol
        )
        self.topics: dict[str, int] = {}
        self._txn: list[tuple[RowChange, TableInfo]] = []
        self._txn_ts: int | None = None
        self._txn_split = False
        self.rows = 0

    def _produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        from sparkcdc.sink.kafka.producer import delivery_error

        t = self.tracker
        producer = t.shared.producer
        size = len(key or b"") + len(value or b"")

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                t.acked += 1
                t.shared.state.on_delivered()
            else:
                t.failed += 1
                if len(t.errors) < 10:
                    t.errors.append(delivery_error(err, topic, partition, size, t.max_message_bytes))

        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        t.sent += 1
        t.bytes += size
        if t.sent % 1000 == 0:
            producer.poll(0)

    def write(self, row: RowChange, table: TableInfo) -> None:
        if self._txn_ts is not None and row.commit_ts != self._txn_ts:
            self._flush_txn()
        self._txn_ts = row.commit_ts
        parts = self.sink.expand(row, table)
        if len(parts) > 1:
            self._txn_split = True
        for part in parts:
            self._txn.append((part, table))
        self.rows += 1

    def _flush_txn(self) -> None:
        txn = self._txn
        if self._txn_split:
            txn = sorted(txn, key=lambda rt: self._OP_ORDER[rt[0].op])
        sink = self.sink
        for row, table in txn:
            topic, partition = sink.destination(row, table)
            if topic not in self.topics:
                self.topics[topic] = sink.num_partitions_of(topic)
            messages = self.encoder.encode_row(row, table, topic)
            for key, value in self.large.check(self.encoder, row, table, messages):
                self._produce(topic, partition, key, value)
        self._txn = []
        self._txn_ts = None
        self._txn_split = False

    def close(self) -> dict[str, Any]:
        if self._txn:
            self._flush_txn()
        self.tracker.wait()
        return {"rows": self.rows, "messages": self.tracker.sent, "topics": self.topics}


def push(
    sink: Any, rows: list[tuple[RowChange, TableInfo]], reference: bool = False
) -> tuple[float, float, list[dict[str, Any]]]:
    """What the pipeline does with one batch: rows grouped by route() (not timed), then each group's
    write + close, timed: (wall seconds, CPU seconds of this process incl. librdkafka's threads, messages)."""
    from sparkcdc.sink.base import WriterContext

    groups: dict[int, list[tuple[RowChange, TableInfo]]] = {}
    for row, table in rows:
        groups.setdefault(sink.route(row, table), []).append((row, table))
    out = []
    seconds = cpu = 0.0
    for g, items in sorted(groups.items()):
        ctx = WriterContext("bench", 0, g)
        t0, c0 = time.perf_counter(), time.process_time()
        w = ReferenceKafkaPartitionWriter(sink, ctx) if reference else sink.open_writer(ctx)
        for row, table in items:
            w.write(row, table)
        out.append(w.close())
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
    return seconds, cpu, out


_TS = re.compile(rb',"ts":\d+,')


def read_topic(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 120.0
) -> list[bytes]:
    """Every message value of a topic, partition by partition, ``ts`` masked."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-" + uuid.uuid4().hex[:8],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    by_part: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        got = 0
        while got < expect:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {got} of {expect} messages of {topic}")
            for m in c.consume(10000, 0.5):
                if m.error() is None:
                    by_part[int(m.partition() or 0)].append(_TS.sub(b',"ts":0,', m.value() or b""))
                    got += 1
    finally:
        c.close()
    return [v for p in sorted(by_part) for v in by_part[p]]


def split_figures(sink: Any, rows: list[tuple[RowChange, TableInfo]], repeat: int = 3) -> None:
    """Where the compiled writer's CPU goes: encoding alone (runs of one table and transaction through
    the writer's run encoders, key-changing UPDATEs split) and producing the encoded values alone."""
    from sparkcdc.sink.base import WriterContext
    from sparkcdc.sink.kafka.producer import get_producer

    w = sink.open_writer(WriterContext("bench", 0, 0))
    runs: list[tuple[list[RowChange], Any]] = []
    for row, table in rows:
        tr = w._route_of(row, table)
        parts = sink.split(row, table, tr.key_indexes) if row.op == "U" else None
        if runs and runs[-1][1] is tr and runs[-1][0][-1].commit_ts == row.commit_ts:
            runs[-1][0].extend(parts or [row])
        else:
            runs.append((list(parts or [row]), tr))
    n = len(rows)
    best = float("inf")
    values: list[bytes] = []
    for _ in range(repeat):
        c0 = time.process_time()
        values = [v for run, tr in runs for v in tr.encode_rows(run)]
        best = min(best, time.process_time() - c0)
    print(f"split: encoding alone (run encoders)       {best / n * 1e6:5.2f} us/row CPU")
    producer = get_producer(sink.options).producer
    topic = sink.options.topic
    best = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        for i, v in enumerate(values):
            while True:
                try:
                    producer.produce(topic, v, None, i % 3)
                    break
                except BufferError:
                    producer.poll(0.01)
            if not i % 1000:
                producer.poll(0)
        producer.flush()
        best = min(best, time.process_time() - c0)
    print(
        f"split: producing alone (no callback, flush) {best / n * 1e6:5.2f} us/row CPU (librdkafka threads included)"
    )


def main() -> None:
    """Run both candidates and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--query", default="", help="extra sink-URI parameters, e.g. enable-tidb-extension=true")
    ap.add_argument("--no-verify", action="store_true", help="skip reading the topics back")
    ap.add_argument(
        "--split",
        action="store_true",
        help="also time, in CPU us per row, the compiled writer's encoding alone and producing alone",
    )
    args = ap.parse_args()

    from sparkcdc.services.tansu import LocalTansu
    from sparkcdc.sink.kafka.producer import close_all_producers

    t0 = time.monotonic()
    rows = make_workload(args.rows)
    print(f"workload: {len(rows)} row changes built in {time.monotonic() - t0:.1f}s", flush=True)
    query = "protocol=canal-json" + ("&" + args.query if args.query else "")
    results: dict[str, list[float]] = {"reference": [], "compiled": []}
    cpu_results: dict[str, list[float]] = {"reference": [], "compiled": []}
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    with LocalTansu() as broker:
        # warm up the producer connection and topic metadata paths once
        push(build_sink(broker, "bench-warmup", query), rows[:2000])
        topics: dict[str, str] = {}
        for r in range(args.repeat):
            for name in ("reference", "compiled") if r % 2 == 0 else ("compiled", "reference"):
                topic = f"bench-{name}-{r}"
                sink = build_sink(broker, topic, query)
                dt, cpu, msgs = push(sink, rows, reference=name == "reference")
                sent = sum(m["messages"] for m in msgs)
                assert sum(m["rows"] for m in msgs) == len(rows), msgs
                results[name].append(len(rows) / dt)
                cpu_results[name].append(len(rows) / cpu)
                topics[name] = topic
                print(
                    f"  run {r + 1} {name:9s}: {dt:6.2f}s wall {len(rows) / dt:9,.0f} rows/s | "
                    f"{cpu:6.2f}s CPU {len(rows) / cpu:9,.0f} rows/CPU-s  ({sent} messages)",
                    flush=True,
                )
        if not args.no_verify:
            n = sink.partitions[sink.options.topic]
            ref = read_topic(broker.bootstrap, topics["reference"], n, sent)
            new = read_topic(broker.bootstrap, topics["compiled"], n, sent)
            assert len(ref) == len(new) == sent, (len(ref), len(new), sent)
            same = ref == new
            print(f"message bytes identical (ts masked): {same} ({len(new)} messages)")
            if not same:
                sys.exit(1)
        if args.split:
            split_figures(build_sink(broker, "bench-split", query), rows)
        close_all_producers(5)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    for label, res in (("wall", results), ("CPU", cpu_results)):
        ref_best, new_best = max(res["reference"]), max(res["compiled"])
        ref_med, new_med = statistics.median(res["reference"]), statistics.median(res["compiled"])
        print(
            f"{label:4s} rows/s  reference best {ref_best:,.0f} median {ref_med:,.0f} | "
            f"compiled best {new_best:,.0f} median {new_med:,.0f} | "
            f"speed-up best {new_best / ref_best:.2f}x median {new_med / ref_med:.2f}x"
        )


if __name__ == "__main__":
    main()
