"""Resolved marks from the driver: an idle changefeed's checkpoint follows the clock without a batch.

While the upstream is idle, a batch without transactions only raises the chain state at the
batch start to the upstream's resolved bound, and the sink publishes that as its checkpoint
(``plan.py``). As a Spark micro-batch it cost about two thirds of an idle changefeed's CPU (offset
and commit logs, planning, listeners: ``bench/density/idle_cost.py``). Here the driver does the
same without Spark: ``RunningChangefeed``'s marker thread reads the clock, then the binlog head,
and when nothing was committed after the last batch's end it raises the chain state there, saves
it (this file, then ``checkpoint.json`` and the meta database) and has the sink publish it.

The planner runs in another process (the source's Python runner) and must see the raised state:
a plan from the lower chain state would give a transaction with an older binlog header a
commit_ts below the published checkpoint. So the two share a file beside Spark's offset log,
under one lock (``fcntl.flock``; both run on the driver's host):

- ``raised``: the offsets whose chain state the driver raised, the newest of each of the last
  ``KEEP_RAISED`` positions. The planner plans from Spark's start raised to the one at the same
  position, and so does a replay of a batch after a restart (the file lives with the offset log,
  and ``resume.spark_log_end`` reads it too).
- ``quiet``: the planner's last scan that found nothing to capture: its start and the binlog head
  read before it. The driver raises only at that start, when it is the last committed batch's end
  (no batch is planned and unwritten) and the head is still there (nothing committed since).
- A quiet scan may have passed transactions of tables the changefeed does not capture (a *quiet
  span*, ``plan.py``): the planner leaves them to a later batch rather than run one that moves
  the position past them, up to a bound. Other tables of a busy upstream move the head all the
  time, so such a record also carries the resolved bound of a clock reading the planner took
  before it read that head. The driver raises to it when the head moved since: every transaction
  committed before the reading is inside the span, and none there is captured. A later plan
  from the raised start scans the span again, and the chain state through it starts from the
  raised ts, so every transaction after it still gets a larger commit_ts.

Planning and a mark each hold the lock throughout, so a plan never interleaves with a mark.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from sparkcdc.capture.offset import Offset

MARKS_FILE = "sparkcdc-marks.json"
LOCK_FILE = "sparkcdc-marks.lock"
STOP_FILE = "sparkcdc-stopping"
"""Made by the driver as it stops the query: the planner's idle wait then answers at once."""
KEEP_RAISED = 8
"""Positions whose raised chain state the file keeps: a replay plans a batch from its start again."""


@dataclass
class Quiet:
    """A scan from ``start`` found nothing to capture up to ``head``, the binlog's end read before it."""

    file: str
    pos: int
    head: tuple[str, int]
    resolved: int | None = None
    """The resolved bound of a clock reading the planner took before it read ``head``, when the scan
    passed transactions of tables the changefeed does not capture: every transaction committed
    before that reading is below ``head``, so the driver may publish it although the head moved."""

    def at(self, end: Offset) -> bool:
        """Whether the scan started at ``end``'s position."""
        return (self.file, self.pos) == (end.file, end.pos)


@dataclass
class MarkState:
    """The shared state, read under the lock; changes are written when the lock is released."""

    raised: list[Offset] = field(default_factory=list)
    """Oldest first, one per position."""
    quiet: Quiet | None = None

    def raise_start(self, start: Offset) -> Offset:
        """``start`` with the raised chain state when the driver raised it at the same position."""
        for r in self.raised:
            if (r.file, r.pos) == (start.file, start.pos) and r.ts > start.ts:
                return replace(start, ts=r.ts)
        return start

    def add_raised(self, end: Offset) -> None:
        """Record a raised chain state (replacing an older one at its position)."""
        kept = [r for r in self.raised if (r.file, r.pos) != (end.file, end.pos)]
        self.raised = [*kept, end][-KEEP_RAISED:]

    def to_json(self) -> dict[str, Any]:
        q = self.quiet
        return {
            "raised": [r.to_json() for r in self.raised],
            "quiet": [q.file, q.pos, q.head[0], q.head[1], q.resolved] if q is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MarkState:
        q = d.get("quiet")
        return cls(
            [Offset.from_json(r) for r in d.get("raised") or []],
            Quiet(
                str(q[0]),
                int(q[1]),
                (str(q[2]), int(q[3])),
                int(q[4]) if len(q) > 4 and q[4] is not None else None,
            )
            if q
            else None,
        )


def raised_end(end: Offset, resolved: int, target_ts: int | None) -> Offset | None:
    """``end`` with its chain state raised to ``resolved`` (capped at target-ts), or None when that
    does not raise it: the one rule for a planner's resolved batch and the driver's mark."""
    if target_ts is not None:
        resolved = min(resolved, target_ts)
    return replace(end, ts=resolved) if resolved > end.ts else None


def read_marks(directory: str) -> MarkState:
    """The state in ``directory`` without the lock (a start reads it before any query runs)."""
    try:
        with open(os.path.join(directory, MARKS_FILE), encoding="utf-8") as f:
            return MarkState.from_json(json.load(f))
    except FileNotFoundError:
        return MarkState()
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return MarkState()  # a half-written file: nothing was published from it (written first)


class Marks:
    """The shared file of one changefeed's Spark checkpoint directory, opened by either process."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._on_disk: dict[str, Any] | None = None
        """What the file holds, as this process last read or wrote it under the lock."""

    @contextmanager
    def locked(self) -> Iterator[MarkState]:
        """The state under the lock; what the caller changes in it is written before the lock goes
        (``flush`` writes it at once)."""
        if self._fd is None:
            os.makedirs(self.directory, exist_ok=True)
            self._fd = os.open(os.path.join(self.directory, LOCK_FILE), os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            state = read_marks(self.directory)
            self._on_disk = state.to_json()
            yield state
            self.flush(state)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def flush(self, state: MarkState) -> None:
        """Write ``state`` now, durably, when it changed (only under ``locked``)."""
        d = state.to_json()
        if d != self._on_disk:
            self._write(d)
            self._on_disk = d

    def _write(self, d: dict[str, Any]) -> None:
        path = os.path.join(self.directory, MARKS_FILE)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(d, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def stopping(self) -> bool:
        """Whether the driver stops the query (``ask_stop``): an idle ask ends its wait."""
        return os.path.exists(os.path.join(self.directory, STOP_FILE))

    def ask_stop(self) -> None:
        """Tell the planner the query stops: Spark's stop waits for the source's call in progress,
        which an idle binlog holds for up to ``plan.IDLE_WAIT_S``."""
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, STOP_FILE), "w", encoding="utf-8"):
            pass

    def clear_stop(self) -> None:
        """Before a query starts: an earlier run's stop does not end its waits."""
        try:
            os.unlink(os.path.join(self.directory, STOP_FILE))
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Release the lock file (the next ``locked`` opens it again)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
