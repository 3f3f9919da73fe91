"""Binlog offsets: a transaction boundary plus the commit_ts chain state there.

``commit_ts`` is derived from the binlog alone, so every replay computes the same
value: per binlog file the chain starts at ``base(FDE second) + 2**17`` — or, when
the previous file was created in the same second, at that file's last commit_ts
if larger (files rotated within one second still follow each other) — and each
transaction gets ``max(previous + 1, base(its header second))`` where
``base(s) = s * 1000 << 18``. An offset carries ``ts`` = the chain state there: the
commit_ts of the last transaction before it, or a larger resolved ts the planner raised it
to at the binlog head (``capture.resolved``), so a reader can resume mid-file without
rescanning and every later transaction exceeds ``ts``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkcdc.model.ts import LOGICAL_BITS

FILE_SLACK = 1 << 17
"""Logical headroom at a file start so its first transaction sorts after the previous file's last."""


def base_ts(seconds: int) -> int:
    """The smallest commit_ts in a whole second."""
    return (seconds * 1000) << LOGICAL_BITS


def file_start_ts(fde_seconds: int) -> int:
    """Chain state at the start of a binlog file created at ``fde_seconds`` (before the same-second rule)."""
    return base_ts(fde_seconds) + FILE_SLACK


def next_ts(prev: int, header_seconds: int) -> int:
    """The commit_ts of the next transaction."""
    b = base_ts(header_seconds)
    return b if b > prev else prev + 1


_SEQ = re.compile(r"\.(\d+)$")


def file_seq(name: str) -> int:
    """The numeric suffix of a binlog file name (mysql-bin.000012 → 12)."""
    m = _SEQ.search(name)
    return int(m.group(1)) if m else 0


@dataclass(frozen=True, slots=True)
class Offset:
    """A transaction boundary in the binlog and the chain state (last commit_ts) there."""

    file: str
    pos: int
    ts: int
    xa: tuple[tuple[str, str, int], ...] = ()
    """The XA transactions prepared before this boundary and not yet committed or rolled back:
    ``(xid, file, pos)`` with the start of each prepared transaction, whose rows ``XA COMMIT``
    delivers (they stay in the binlog until then)."""

    def key(self) -> tuple[int, int]:
        """Sort key: (file sequence, position)."""
        return (file_seq(self.file), self.pos)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        d: dict[str, Any] = {"file": self.file, "pos": self.pos, "ts": self.ts}
        if self.xa:
            d["xa"] = [list(x) for x in self.xa]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Offset:
        """Inverse of ``to_json``."""
        xa = tuple((str(x), str(f), int(p)) for x, f, p in d.get("xa") or ())
        return cls(str(d["file"]), int(d["pos"]), int(d["ts"]), xa)

    def __str__(self) -> str:
        open_xa = f" (+{len(self.xa)} prepared XA)" if self.xa else ""
        return f"{self.file}:{self.pos}@{self.ts}{open_xa}"
