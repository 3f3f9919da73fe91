"""Dispatchers: the topic and partition of every event, by TiCDC's ``[[sink.dispatchers]]`` rules.

Owns topic expressions, partition hashes (TiCDC-compatible) and the event router.
May import: ``errors``, ``model``, ``config``, ``filter``; never sink or above.
"""

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
