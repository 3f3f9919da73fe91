"""A librdkafka producer with per-writer delivery tracking.

One ``confluent_kafka.Producer`` is shared per process and configuration (Spark
reuses Python workers across tasks). Each writer holds a ``DeliveryTracker``:
every message it produces is counted, a failure arrives through ``on_delivery``
(librdkafka reports failures only: ``delivery.report.only.error``), and
``wait()`` returns only once the producer's queue is empty, every message
acknowledged or failed, and none of the writer's failed — otherwise it raises,
so the batch is retried and the checkpoint does not move.

While the brokers are unreachable librdkafka keeps retrying on its own; the
state is logged once when it goes down and once when it comes back, and a
message that is still unacknowledged after ``message-timeout`` fails the batch
with a transient ``SinkUnavailable``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sparkcdc.errors import MessageTooLargeError, SinkError, SinkUnavailable
from sparkcdc.sink.kafka.config import KafkaOptions

log = logging.getLogger(__name__)


class BrokerState:
    """Whether the brokers are reachable, from librdkafka's error callback (logged on change)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.down_since: float | None = None
        self.last_error: str = ""

    def on_error(self, err: Any) -> None:
        """librdkafka ``error_cb``."""
        from confluent_kafka import KafkaError

        code = err.code()
        self.last_error = str(err)
        if code in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE):
            if self.down_since is None:
                self.down_since = time.monotonic()
                log.warning(
                    "Kafka brokers %s unreachable (%s); librdkafka keeps retrying, messages wait in the queue",
                    self.bootstrap,
                    err.str(),
                )
        elif err.fatal():
            log.error("Kafka producer fatal error: %s", err.str())
        else:
            log.warning("Kafka client error: %s", err.str())

    def on_delivered(self) -> None:
        """A message was acknowledged: the brokers are reachable."""
        if self.down_since is not None:
            log.warning(
                "Kafka brokers %s reachable again after %.1fs",
                self.bootstrap,
                time.monotonic() - self.down_since,
            )
            self.down_since = None

    @property
    def down(self) -> bool:
        """True while the last connection attempts failed."""
        return self.down_since is not None


ID_ASK_S = 1.0
"""How long each of a new idempotent producer's two metadata requests may wait (``ask_for_id``)."""


class SharedProducer:
    """A librdkafka producer and its broker state."""

    def __init__(self, options: KafkaOptions) -> None:
        from confluent_kafka import Producer

        self.options = options
        self.state = BrokerState(options.bootstrap_servers)
        conf = options.producer_config()
        conf["error_cb"] = self.state.on_error
        self.producer: Any = Producer(conf)
        self.broken = False
        if conf.get("enable.idempotence"):
            self.ask_for_id()

    def ask_for_id(self) -> None:
        """Have a new idempotent producer get its producer id now, not half a second later.

        librdkafka asks for the id when the producer starts, before any broker connection is up,
        and then again 500 ms later or when a metadata response comes in over a connection that
        is up; a message waits for the id. So the first message of every fresh Spark Python worker
        (one after each quiet minute) came 0.5 s late. The first metadata request here connects
        to the bootstrap broker; the second comes back once a broker connection is up, and
        librdkafka asks for the id on it (bench/kafka/first_message.py: 0.05 s against 0.5 s to
        the first acknowledgement). Brokers that do not answer make each request wait at most
        ``ID_ASK_S``; the messages then wait in the queue as they did before.
        """
        deadline = time.monotonic() + 2 * ID_ASK_S
        for _ in range(2):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                self.producer.list_topics(self.options.topic, timeout=min(ID_ASK_S, left))
            except Exception as exc:  # unreachable: librdkafka keeps trying, BrokerState reports it
                log.debug("metadata for a new Kafka producer: %s", exc)
                return

    def close(self, timeout: float = 5.0) -> None:
        """Flush briefly and drop the producer (pending messages are purged)."""
        try:
            self.producer.flush(timeout)
            self.producer.purge()
        except Exception as exc:  # closing a broken producer: nothing left to deliver or report
            log.debug("closing a Kafka producer: %s", exc)


_LOCK = threading.Lock()
_PRODUCERS: dict[tuple[Any, ...], SharedProducer] = {}


def _cache_key(options: KafkaOptions) -> tuple[Any, ...]:
    return tuple(sorted((k, str(v)) for k, v in options.producer_config().items()))


def get_producer(options: KafkaOptions) -> SharedProducer:
    """The process-wide producer for these options (created on first use)."""
    key = _cache_key(options)
    with _LOCK:
        sp = _PRODUCERS.get(key)
        if sp is None or sp.broken:
            if sp is not None:
                sp.close(0)
            sp = SharedProducer(options)
            _PRODUCERS[key] = sp
        return sp


def discard_producer(sp: SharedProducer) -> None:
    """Forget a producer after a delivery failure, so the retry starts with a fresh one."""
    with _LOCK:
        sp.broken = True
        for k, v in list(_PRODUCERS.items()):
            if v is sp:
                del _PRODUCERS[k]
    sp.close(0)


def close_all_producers(timeout: float = 10.0) -> None:
    """Flush and drop every cached producer (tests, shutdown)."""
    with _LOCK:
        items = list(_PRODUCERS.values())
        _PRODUCERS.clear()
    for sp in items:
        sp.close(timeout)


def delivery_error(err: Any, topic: str, partition: int, size: int, max_bytes: int) -> Exception:
    """Map a librdkafka delivery error to a sparkcdc error (transient or permanent)."""
    from confluent_kafka import KafkaError

    code = err.code()
    where = f"topic {topic!r} partition {partition}"
    if code in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE):
        return MessageTooLargeError(
            f"Kafka refused a {size}-byte message to {where} as too large ({err.str()}); the sink allows "
            f"{max_bytes} bytes: raise the topic's max.message.bytes or lower max-message-bytes so that "
            "large-message-handle-option applies"
        )
    if code == KafkaError._MSG_TIMED_OUT:
        return SinkUnavailable(
            f"a message to {where} was not acknowledged within message-timeout: {err.str()}; "
            "the brokers were unreachable or too slow (the batch will be retried)"
        )
    if code in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
        KafkaError.INVALID_RECORD,
        KafkaError.UNSUPPORTED_VERSION,
    ):
        return SinkError(
            f"Kafka refused a message to {where}: {err.str()}; check the ACLs/credentials and topic"
        )
    if code == KafkaError._UNKNOWN_PARTITION:
        return SinkError(
            f"Kafka has no {where}: {err.str()}; partitions were removed or the topic was recreated smaller"
        )
    return SinkUnavailable(f"delivery to {where} failed: {err.str()} (the batch will be retried)")


class DeliveryTracker:
    """Counts one writer's messages and their acknowledgements on a shared producer."""

    def __init__(self, shared: SharedProducer, max_message_bytes: int) -> None:
        self.shared = shared
        self.max_message_bytes = max_message_bytes
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.bytes = 0
        self.errors: list[Exception] = []
        # one bound callback for every message (the message itself names its topic and partition)
        self.on_delivery = self._delivered
        self._producer = shared.producer

    def _delivered(self, err: Any, msg: Any) -> None:
        """librdkafka delivery report of one of this tracker's messages (failures only:
        ``delivery.report.only.error``; ``wait`` counts the acknowledged)."""
        if err is None:
            return
        self.failed += 1
        if len(self.errors) < 10:
            size = len(msg.key() or b"") + len(msg.value() or b"")
            partition = msg.partition()
            self.errors.append(
                delivery_error(
                    err,
                    msg.topic() or "",
                    -1 if partition is None else partition,
                    size,
                    self.max_message_bytes,
                )
            )

    def produce(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Queue one message (waits while librdkafka's local queue is full)."""
        producer = self._producer
        extra = {"headers": headers} if headers else {}
        try:
            producer.produce(
                topic, value=value, key=key, partition=partition, on_delivery=self.on_delivery, **extra
            )
        except BufferError:
            while True:
                # local queue full: serve delivery reports until there is room
                producer.poll(0.1)
                try:
                    producer.produce(
                        topic,
                        value=value,
                        key=key,
                        partition=partition,
                        on_delivery=self.on_delivery,
                        **extra,
                    )
                    break
                except BufferError:
                    continue
        self.sent += 1
        self.bytes += (len(key) if key else 0) + (len(value) if value else 0)
        if not self.sent % 1000:
            producer.poll(0)

    def produce_all(
        self, messages: list[tuple[str, int, bytes | None, bytes | None, list[tuple[str, bytes]] | None]]
    ) -> None:
        """``produce`` each (topic, partition, key, value, headers), in order; those without headers
        straight through the producer (the common case inline)."""
        producer = self._producer
        on_delivery = self.on_delivery
        sent = nbytes = 0
        try:
            for i, (topic, partition, key, value, headers) in enumerate(messages):
                if headers is None:
                    try:
                        producer.produce(topic, value, key, partition, on_delivery)
                        sent += 1
                        nbytes += (len(key) if key else 0) + (len(value) if value else 0)
                    except BufferError:
                        self.produce(topic, partition, key, value)
                else:
                    self.produce(topic, partition, key, value, headers)
                if not i % 1000:
                    producer.poll(0)
        finally:
            self.sent += sent
            self.bytes += nbytes

    @property
    def outstanding(self) -> int:
        """Messages the producer still holds, neither acknowledged nor failed: this writer's, and
        those of any other writer on the same producer (one task at a time in a Python worker)."""
        return len(self._producer)

    def wait(self, timeout: float | None = None) -> None:
        """Block until every produced message is acknowledged; raise the first failure.

        A failure also discards the shared producer so a retried batch starts clean.
        """
        opts = self.shared.options
        limit = timeout if timeout is not None else opts.message_timeout + 30.0
        deadline = time.monotonic() + limit
        producer = self.shared.producer
        last_note = time.monotonic()
        while self.sent and self.outstanding > 0:
            producer.flush(1.0)
            now = time.monotonic()
            if self.shared.state.down and now - last_note >= 10.0:
                last_note = now
                log.warning(
                    "waiting for Kafka brokers %s: %d message(s) unacknowledged, down for %.0fs (last error: %s)",
                    opts.bootstrap_servers,
                    self.outstanding,
                    now - (self.shared.state.down_since or now),
                    self.shared.state.last_error,
                )
            if now >= deadline:
                discard_producer(self.shared)
                raise SinkUnavailable(
                    f"{self.outstanding} message(s) to Kafka {opts.bootstrap_servers} not acknowledged after "
                    f"{limit:.0f}s (last error: {self.shared.state.last_error or 'none'}); the batch will be retried"
                )
        self.acked = self.sent - self.failed
        if not self.failed and self.sent and self.shared.state.down_since is not None:
            self.shared.state.on_delivered()
        if self.failed:
            discard_producer(self.shared)
            first = self.errors[0] if self.errors else SinkUnavailable("Kafka delivery failed")
            if self.failed > 1:
                first.args = (f"{first.args[0]} ({self.failed} message(s) failed in this batch)",)
            raise first
