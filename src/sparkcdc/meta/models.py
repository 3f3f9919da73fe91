"""Records of the meta database as plain dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ChangefeedState(StrEnum):
    """The lifecycle of a changefeed (TiCDC's names)."""

    NORMAL = "normal"
    """Wanted running: some server owns it (or will claim it) and runs it."""
    STOPPED = "stopped"
    """Paused by the user."""
    FAILED = "failed"
    """A permanent error stopped it; ``error`` says why."""
    FINISHED = "finished"
    """The checkpoint reached ``target_ts``."""
    REMOVED = "removed"
    """Removed by the user; kept as a tombstone (``list --all`` shows it)."""


class RangeStage(StrEnum):
    """Where a key range of a subscribed table is: copying its snapshot or following the log."""

    SNAPSHOT = "snapshot"
    LOG = "log"


@dataclass(frozen=True)
class ChangefeedInfo:
    """One row of ``changefeeds``."""

    namespace: str
    id: str
    upstream_uri: str
    sink_uri: str
    config: dict[str, Any]
    state: ChangefeedState
    error: dict[str, Any] | None
    warning: str | None
    owner: str | None
    lease_expire_at: float | None
    epoch: int
    version: int
    start_ts: int | None
    target_ts: int | None
    checkpoint_ts: int
    resolved_ts: int
    subscriber_name: str | None
    stats: dict[str, Any]
    created_at: float
    updated_at: float
    uid: str = ""
    """The changefeed's identity, given at creation: a new changefeed with the same id has another."""
    upstream: dict[str, Any] | None = None
    """The upstream server its offsets belong to (``UpstreamIdentity.to_json``); None: not recorded yet."""

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, id)."""
        return (self.namespace, self.id)

    def lease_valid(self, now: float) -> bool:
        """Whether an owner holds an unexpired lease at ``now``."""
        return self.owner is not None and self.lease_expire_at is not None and self.lease_expire_at > now


@dataclass(frozen=True)
class NewChangefeed:
    """What ``MetaStore.create_changefeed`` needs; the rest starts at its defaults."""

    id: str
    upstream_uri: str
    sink_uri: str
    config: dict[str, Any]
    namespace: str = "default"
    start_ts: int | None = None
    target_ts: int | None = None
    subscriber_name: str | None = None
    subscribed_table: tuple[str, str] | None = None
    """(schema, table) of a subscription: its subscriber name is unique per table (None: no table)."""
    upstream: dict[str, Any] | None = None
    """The upstream server's identity, when the creator read it."""


@dataclass(frozen=True)
class RangeProgress:
    """Progress of one key range of one table in one changefeed (seed design: per-range pull)."""

    changefeed_id: str
    schema: str
    table: str
    range_id: int
    stage: RangeStage = RangeStage.SNAPSHOT
    snapshot_version: int | None = None
    last_snapshot_key: Any = None
    last_log_position: dict[str, Any] | None = None
    rows_copied: int = 0
    parent_range_id: int | None = None
    namespace: str = "default"
    version: int = 0
    updated_at: float = 0.0


@dataclass(frozen=True)
class SchemaVersion:
    """One table version in an upstream's schema history."""

    upstream_id: str
    schema: str
    table: str
    version: int
    table_info: dict[str, Any] | None
    query: str
    created_at: float = 0.0


@dataclass(frozen=True)
class ServerInfo:
    """One row of ``servers`` (a running cdc server, TiCDC's capture)."""

    id: str
    address: str
    version: str
    pid: int
    heartbeat_at: float
    started_at: float
    owned: list[str] = field(default_factory=list)
