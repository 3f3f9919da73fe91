"""The meta database: changefeeds (subscriptions), per-range progress, schema history, servers, leases."""

from sparkcdc.meta.models import (
    ChangefeedInfo,
    ChangefeedState,
    NewChangefeed,
    RangeProgress,
    RangeStage,
    SchemaVersion,
    ServerInfo,
)
from sparkcdc.meta.store import MetaStore

__all__ = [
    "ChangefeedInfo",
    "ChangefeedState",
    "MetaStore",
    "NewChangefeed",
    "RangeProgress",
    "RangeStage",
    "SchemaVersion",
    "ServerInfo",
]
