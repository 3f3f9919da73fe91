"""How much of its binlog backlog a changefeed has read, in binlog bytes.

A catch-up's share and ETA come from bytes, not from the lag: a backlog written in 45 s and read
4 minutes later has a lag that shrinks by 45 s over the whole catch-up, while its bytes shrink in
step with the work. The backlog runs from the offset a run started at to the binlog's head (the
sizes ``SHOW BINARY LOGS`` lists), or to the offset of its target-ts when one is given; what is
done runs from the same start to the end offset of the last committed batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pymysql

from sparkcdc.capture.offset import Offset, file_seq
from sparkcdc.capture.upstream import UpstreamConfig, binary_logs
from sparkcdc.errors import TransientError
from sparkcdc.model.ts import physical_ms

log = logging.getLogger(__name__)

Position = tuple[str, int]
"""A binlog position: (file name, byte offset in it)."""

BinlogFiles = Sequence[tuple[str, int]]
"""The binlog files with their sizes, oldest first (``capture.upstream.binary_logs``)."""


def bytes_between(files: BinlogFiles, start: Position, end: Position) -> int:
    """The binlog bytes from ``start`` to ``end`` across files; 0 when ``end`` is not after ``start``.

    A file the list no longer has (purged) counts as ending at the position given in it.
    """
    (start_file, start_pos), (end_file, end_pos) = start, end
    first, last = file_seq(start_file), file_seq(end_file)
    if (last, end_pos) <= (first, start_pos):
        return 0
    if first == last:
        return end_pos - start_pos
    sizes = dict(files)
    total = max(0, sizes.get(start_file, start_pos) - start_pos)
    total += sum(size for name, size in files if first < file_seq(name) < last)
    return total + end_pos


def head_of(files: BinlogFiles) -> Position | None:
    """The end of the newest binlog file (None without files)."""
    return (files[-1][0], files[-1][1]) if files else None


@dataclass(frozen=True)
class Backlog:
    """Bytes read and bytes to read, from a run's start offset."""

    done: int
    total: int


def backlog_of(files: BinlogFiles, start: Position, end: Position, goal: Position | None) -> Backlog | None:
    """The backlog from ``start``: done up to ``end``, in total up to ``goal`` (the head when None)."""
    goal = goal if goal is not None else head_of(files)
    if goal is None:
        return None
    done = bytes_between(files, start, end)
    # The head was read before the last commit: a batch may end after it.
    return Backlog(done, max(done, bytes_between(files, start, goal)))


class BacklogProbe:
    """Reads the binlog files' sizes (each ``probe``) and, once it is in the binlog, the target-ts offset."""

    def __init__(self, up: UpstreamConfig, target_ts: int | None = None) -> None:
        self.up = up
        self.target_ts = target_ts
        self.files: list[tuple[str, int]] = []
        self.goal: Position | None = None
        """The target-ts offset, once found (the head is the goal until then)."""
        self._conn: pymysql.connections.Connection | None = None

    def probe(self) -> None:
        """Refresh the files' sizes (and find the target-ts offset once its time has passed)."""
        try:
            if self._conn is None:
                self._conn = self.up.connect()
            self.files = binary_logs(self._conn)
        except pymysql.err.Error as exc:  # a dropped connection: reconnect on the next probe
            self.close()
            raise TransientError(f"could not list the binlog files: {exc}") from exc
        target = self.target_ts
        # Transactions up to the target-ts are all in the binlog once its time has passed (a second's
        # margin for the binlog header's whole seconds); before that, the head is as far as is known.
        if target is not None and self.goal is None and physical_ms(target) / 1000.0 < time.time() - 1.0:
            from sparkcdc.capture.start import offset_for_ts

            boundary: Offset = offset_for_ts(self.up, target)
            self.goal = (boundary.file, boundary.pos)

    def close(self) -> None:
        """Close the probe's connection."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except pymysql.err.Error:  # already broken
                log.debug("closing the backlog probe's connection", exc_info=True)
