"""The last watermark the Kafka sink published, read back from its default topic.

Every committed batch's watermark goes to every partition of the default topic (``KafkaSink.commit``),
so the newest watermark message in those partitions is the largest mark the sink ever published,
whatever the meta database or the Spark checkpoint remember. A changefeed resumed from an older
position (a failover whose meta database lags, a lost Spark checkpoint) reads it back before its
first watermark and publishes none that is not larger: replayed rows are sent again
(at-least-once), the mark never goes backwards.

Each partition is read backwards from its end, in windows that grow fourfold, until a watermark
turns up: what follows the last watermark is at most the rows of the batches written since, so
the read is short.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from sparkcdc.codec.avro import CHECKPOINT_BYTE
from sparkcdc.codec.canal_json.decoder import decode_canal_json
from sparkcdc.codec.canal_json.messages import TIDB_WATERMARK
from sparkcdc.errors import DecodeError, SinkUnavailable
from sparkcdc.sink.kafka.config import KafkaOptions

log = logging.getLogger(__name__)

FIRST_WINDOW = 64
"""Messages read at the end of a partition first; each further window is four times larger."""
MAX_SCAN = 2_000_000
"""Messages read back per partition at most before giving up on finding a watermark there."""
_CANAL_MARK = TIDB_WATERMARK.encode()


def decode_watermark(protocol: str, value: bytes | None) -> int | None:
    """The ts of a watermark message of ``protocol`` (canal-json ``TIDB_WATERMARK``, avro ``0x02``
    + 8-byte ts), or None for any other message."""
    if not value:
        return None
    if protocol == "canal-json":
        if _CANAL_MARK not in value:
            return None
        try:
            msg = decode_canal_json(value)
        except DecodeError:
            return None
        return int(msg.watermark_ts) if msg.kind == "watermark" and msg.watermark_ts else None
    if protocol == "avro":
        if len(value) == 9 and value[0] == CHECKPOINT_BYTE:
            return int.from_bytes(value[1:], "big")
    return None


def last_published_watermark(options: KafkaOptions, topic: str, partitions: int) -> int | None:
    """The largest of the newest watermark of each of the first ``partitions`` partitions of
    ``topic`` (None when none holds one); SinkUnavailable when the brokers do not answer."""
    from confluent_kafka import Consumer

    conf = options.common_config()
    conf.update(
        {
            "group.id": f"sparkcdc-watermark-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    timeout = max(options.dial_timeout, options.read_timeout, 5.0)
    consumer: Any = Consumer(conf)
    try:
        best: int | None = None
        for p in range(partitions):
            found = _newest_in_partition(consumer, options, topic, p, timeout)
            if found is not None and (best is None or found > best):
                best = found
        return best
    finally:
        consumer.close()


def _newest_in_partition(
    consumer: Any, options: KafkaOptions, topic: str, partition: int, timeout: float
) -> int | None:
    from confluent_kafka import KafkaException, TopicPartition

    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
    except KafkaException as exc:
        raise _unreachable(options, topic, partition, exc) from exc
    end, window, scanned = high, FIRST_WINDOW, 0
    while end > low and scanned < MAX_SCAN:
        start = max(low, end - window)
        found = _newest_in_range(consumer, options, topic, partition, start, end, timeout)
        if found is not None:
            return found
        scanned += end - start
        end, window = start, window * 4
    if end > low:
        log.warning(
            "Kafka sink: no watermark in the last %d messages of %s[%d]; older ones are not read back",
            scanned,
            topic,
            partition,
        )
    return None


def _newest_in_range(
    consumer: Any, options: KafkaOptions, topic: str, partition: int, start: int, end: int, timeout: float
) -> int | None:
    """The newest watermark among the messages at offsets [start, end) of one partition."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    consumer.assign([TopicPartition(topic, partition, start)])
    newest: int | None = None
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise _unreachable(
                    options, topic, partition, f"offsets {start}..{end} not read within {timeout:.0f}s"
                )
            batch = consumer.consume(num_messages=min(1000, end - start), timeout=0.5)
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return newest
                    raise _unreachable(options, topic, partition, err.str())
                offset = m.offset()
                if offset >= end:
                    return newest
                ts = decode_watermark(options.protocol, m.value())
                if ts is not None:
                    newest = ts
                if offset >= end - 1:
                    return newest
            if batch:
                deadline = time.monotonic() + timeout
    except KafkaException as exc:
        raise _unreachable(options, topic, partition, exc) from exc
    finally:
        consumer.unassign()


def _unreachable(options: KafkaOptions, topic: str, partition: int, reason: object) -> SinkUnavailable:
    return SinkUnavailable(
        f"cannot read back the last published watermark from {topic}[{partition}] on "
        f"{options.bootstrap_servers}: {reason}; the sink reads it before its first watermark so that "
        "the mark never goes backwards: check that the brokers run and the sink URI's TLS/SASL settings"
    )
