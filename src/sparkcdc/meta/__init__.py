"""The meta database: changefeeds (subscriptions), per-range progress, schema history, servers, leases.

Owns the tables (defined once in ``tables.py``), migrations, and compare-and-swap updates.
May import: ``errors``, ``config``; never capture, sink, pipeline or server.
"""

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
