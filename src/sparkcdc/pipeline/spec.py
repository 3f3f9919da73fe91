"""What a changefeed replicates, from where, to where: the one request ``run`` and the server start.

Light to import (no Spark): the server's scheduler builds one for every claim, ``sparkcdc run``
for its one changefeed, and both hand it to ``pipeline.changefeed.start_changefeed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkcdc.config.replica import ReplicaConfig


@dataclass
class ChangefeedSpec:
    """What to replicate, from where, to where."""

    changefeed_id: str
    upstream_uri: str
    sink_uri: str
    config: ReplicaConfig = field(default_factory=ReplicaConfig)
    start_ts: int | None = None
    target_ts: int | None = None
    checkpoint_dir: str = ""
    start_position: str | None = None
    """``file:pos`` of a transaction boundary to start after (instead of start_ts)."""
    start_gtid: str | None = None
    """A MariaDB GTID position to start after (instead of start_ts)."""
    trigger_interval: str = "200 milliseconds"
    max_batch_bytes: int = 64 << 20
    meta_uri: str = ""
    """The meta database (the server sets it): the initial snapshot keeps its range progress there."""
    namespace: str = "default"
    snapshot_dir: str = ""
    """The initial snapshot's folder (default ``<checkpoint_dir>/snapshot``); the server gives the
    changefeed's own, which outlives each claim's ``checkpoint_dir``."""
    changefeed_uid: str = ""
    """The changefeed's identity in the meta database (the server sets it)."""
    upstream_identity: dict[str, Any] | None = None
    """The upstream server the changefeed's offsets belong to, as the meta database records it (the
    server sets it; ``run`` keeps it in its data dir): a start on another server is refused."""
    relay_dir: str = ""
    """The server's binlog relay of the upstream (``capture/relay.py``; the server's runner sets it)."""
