"""Dispatchers: the topic and partition of every event, by TiCDC's ``[[sink.dispatchers]]`` rules."""

from sparkcdc.dispatch.partition import VALID_RULES, DispatchError, PartitionDispatcher, value_bytes
from sparkcdc.dispatch.router import DispatchRoute, EventRouter, build_route
from sparkcdc.dispatch.topic import (
    KAFKA_TOPIC_MAX_LENGTH,
    TopicDispatcher,
    is_hard_coded,
    sanitize_topic_name,
    substitute,
    validate_topic_expression,
)

__all__ = [
    "KAFKA_TOPIC_MAX_LENGTH",
    "VALID_RULES",
    "DispatchError",
    "DispatchRoute",
    "EventRouter",
    "PartitionDispatcher",
    "TopicDispatcher",
    "build_route",
    "is_hard_coded",
    "sanitize_topic_name",
    "substitute",
    "validate_topic_expression",
    "value_bytes",
]
