"""The TiCDC-shaped commit timestamp: ``physical_ms << 18 | logical``."""

from __future__ import annotations

import time
from typing import NewType

CommitTs = NewType("CommitTs", int)
"""A commit timestamp: strictly increasing per upstream in commit order."""

TableVersion = NewType("TableVersion", int)
"""The commit_ts of the DDL that produced a table's current shape."""

LOGICAL_BITS = 18
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1


def compose_ts(physical_ms: int, logical: int = 0) -> CommitTs:
    """Build a commit_ts from a physical time in milliseconds and a logical counter."""
    if physical_ms < 0 or not 0 <= logical <= LOGICAL_MASK:
        raise ValueError(f"invalid ts parts physical_ms={physical_ms} logical={logical}")
    return CommitTs((physical_ms << LOGICAL_BITS) | logical)


def physical_ms(ts: int) -> int:
    """The commit time in milliseconds since the epoch."""
    return ts >> LOGICAL_BITS


def logical(ts: int) -> int:
    """The logical part of a commit_ts."""
    return ts & LOGICAL_MASK


def ts_from_seconds(seconds: float) -> CommitTs:
    """The smallest commit_ts at a given Unix time (seconds)."""
    return compose_ts(int(seconds * 1000), 0)


def now_ts() -> CommitTs:
    """A commit_ts for the local clock now (for lag figures, never for ordering)."""
    return ts_from_seconds(time.time())
