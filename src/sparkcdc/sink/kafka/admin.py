"""Topic administration for the Kafka sink: partition counts, auto-creation, size limits.

Works against any Kafka-protocol broker. Brokers that do not report configs
through ``describe_configs`` (Tansu, some managed services) simply leave the
configured ``max-message-bytes`` in force.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sparkcdc.errors import ConfigError, SinkError, SinkUnavailable
from sparkcdc.sink.kafka.config import DEFAULT_PARTITION_NUM, KafkaOptions

log = logging.getLogger(__name__)

TOPIC_MAX_MESSAGE_BYTES = "max.message.bytes"
BROKER_MESSAGE_MAX_BYTES = "message.max.bytes"
SIZE_HEADROOM = 128
"""TiCDC keeps this many bytes below the broker's/topic's limit for the record batch header."""


class KafkaAdmin:
    """A thin, error-mapping wrapper around confluent-kafka's AdminClient."""

    def __init__(self, options: KafkaOptions, timeout: float | None = None) -> None:
        from confluent_kafka.admin import AdminClient

        self.options = options
        self.timeout = (
            timeout if timeout is not None else max(options.dial_timeout, options.read_timeout, 5.0)
        )
        self._client: Any = AdminClient(options.admin_config())

    def _metadata(self) -> Any:
        from confluent_kafka import KafkaException

        try:
            return self._client.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise SinkUnavailable(
                f"cannot reach the Kafka brokers {self.options.bootstrap_servers} within {self.timeout:.0f}s: "
                f"{exc.args[0] if exc.args else exc}; check that they run and that the sink URI's "
                "host:port list and TLS/SASL settings are right"
            ) from exc

    def partition_counts(self) -> dict[str, int]:
        """Every visible topic and its partition count."""
        md = self._metadata()
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def partition_count(self, topic: str) -> int | None:
        """A topic's partition count, or None if it does not exist."""
        return self.partition_counts().get(topic)

    def broker_ids(self) -> list[int]:
        """The ids of the brokers in the cluster metadata."""
        return sorted(self._metadata().brokers)

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> int:
        """Create a topic and wait until it is visible; returns its partition count.

        A topic that appeared meanwhile (another writer created it) is fine.
        """
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        futures = self._client.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
            request_timeout=self.timeout,
        )
        try:
            futures[topic].result(timeout=self.timeout + 5)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            code = err.code() if isinstance(err, KafkaError) else None
            if code != KafkaError.TOPIC_ALREADY_EXISTS:
                if code in (
                    KafkaError.INVALID_REPLICATION_FACTOR,
                    KafkaError.INVALID_PARTITIONS,
                    KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                    KafkaError.TOPIC_EXCEPTION,
                    KafkaError.POLICY_VIOLATION,
                ):
                    raise SinkError(
                        f"cannot create Kafka topic {topic!r} with {partitions} partition(s) and "
                        f"replication factor {replication_factor}: {err}; fix partition-num/"
                        "replication-factor or the broker ACLs, or create the topic yourself"
                    ) from exc
                raise SinkUnavailable(f"cannot create Kafka topic {topic!r}: {err}") from exc
        deadline = time.monotonic() + self.timeout
        while True:
            n = self.partition_count(topic)
            if n:
                log.info("created Kafka topic %s with %d partition(s)", topic, n)
                return n
            if time.monotonic() >= deadline:
                raise SinkUnavailable(
                    f"Kafka topic {topic!r} was created but is not visible after {self.timeout:.0f}s"
                )
            time.sleep(0.1)

    def ensure_topic(self, topic: str, *, is_default: bool) -> int:
        """The number of partitions the sink uses for ``topic``, creating it if allowed.

        For the default topic TiCDC's rules apply: an explicit ``partition-num``
        larger than the real count is refused, a smaller one uses only the
        first n partitions. Other (dispatched) topics use their real count.
        """
        opts = self.options
        real = self.partition_count(topic)
        if real is None:
            if not opts.auto_create_topic:
                raise SinkError(
                    f"Kafka topic {topic!r} does not exist and auto-create-topic is false: create it "
                    "(kafka-topics.sh --create ...) or set auto-create-topic=true in the sink URI"
                )
            want = opts.partition_num or DEFAULT_PARTITION_NUM
            return self.create_topic(topic, want, opts.replication_factor)
        if not is_default or opts.partition_num is None:
            return real
        if opts.partition_num > real:
            raise ConfigError(
                f"the number of partition ({opts.partition_num}) specified in sink-uri is more than that of "
                f"actual topic ({real}); lower partition-num to at most {real} or add partitions to "
                f"topic {topic!r}",
                code="CDC:ErrKafkaInvalidPartitionNum",
            )
        if opts.partition_num < real:
            log.warning(
                "number of partition specified in sink-uri (%d) is less than that of the actual topic %s (%d); "
                "some partitions will not have messages dispatched to",
                opts.partition_num,
                topic,
                real,
            )
        return opts.partition_num

    def _describe(self, restype: str, name: str, key: str) -> int | None:
        from confluent_kafka.admin import ConfigResource

        try:
            futures = self._client.describe_configs(
                [ConfigResource(restype, name)], request_timeout=min(self.timeout, 5.0)
            )
            entries = next(iter(futures.values())).result(timeout=min(self.timeout, 5.0) + 1)
        except Exception as exc:  # not every broker answers describe_configs; the caller falls back
            log.info("describe_configs(%s %s) failed (%s); keeping the configured limit", restype, name, exc)
            return None
        entry = entries.get(key)
        if entry is None or entry.value in (None, ""):
            return None
        try:
            return int(entry.value)
        except ValueError:
            return None

    def topic_max_message_bytes(self, topic: str) -> int | None:
        """The topic's ``max.message.bytes``, or None when the broker does not say."""
        return self._describe("topic", topic, TOPIC_MAX_MESSAGE_BYTES)

    def broker_message_max_bytes(self) -> int | None:
        """The first broker's ``message.max.bytes``, or None when it does not say."""
        ids = self.broker_ids()
        if not ids:
            return None
        return self._describe("broker", str(ids[0]), BROKER_MESSAGE_MAX_BYTES)

    def effective_max_message_bytes(self, topic: str, topic_exists: bool) -> int:
        """min(max-message-bytes, the topic's or broker's limit − 128), as TiCDC does."""
        configured = self.options.max_message_bytes
        limit = self.topic_max_message_bytes(topic) if topic_exists else None
        if limit is None:
            limit = self.broker_message_max_bytes()
        if limit is None:
            return configured
        effective = min(configured, limit - SIZE_HEADROOM)
        if effective < configured:
            log.warning(
                "the broker's limit for topic %s (%d bytes) is below max-message-bytes (%d); using %d",
                topic,
                limit,
                configured,
                effective,
            )
        return max(1, effective)
