"""The resolved ts of a reader at the binlog head: a ts below every later transaction's commit_ts.

A transaction's commit_ts comes from the header second of the event that starts it in the
binlog (``capture.offset``): the start of the statement that committed it. When a reader
finds nothing after its offset, a transaction it has not seen either is still open in InnoDB
(``information_schema.INNODB_TRX`` lists it with the second it started) or has not started
yet. Reading the upstream clock and the open transactions *before* the scan that finds the
binlog idle therefore bounds the header second of every later transaction from below by

    S = min(floor(now - TICK_MARGIN), floor(oldest writing transaction's start) - 1)

(the margin and the extra second cover a statement that started just before the reading
and had not reached InnoDB yet), and ``base(S) - 1`` — the last ts of second ``S - 1`` — is
below the commit_ts the binlog alone gives each of them. The planner raises the chain state
(``Offset.ts``) to that value; a transaction whose header is older still (``SET TIMESTAMP``,
a replica's applier, a statement that waited longer before touching InnoDB) then gets
previous + 1, so the bound holds for every later transaction whatever its header says.

Autocommit reads (``trx_autocommit_non_locking``) and ``READ ONLY`` transactions never write
and do not hold the bound back. The clock is read at most once per upstream second, just
after the second (minus the margin) turned: the bound cannot move in between.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from decimal import Decimal

import pymysql

from sparkcdc.capture.offset import base_ts
from sparkcdc.capture.upstream import ER_SPECIFIC_ACCESS_DENIED, UpstreamConfig
from sparkcdc.errors import SparkCdcError

log = logging.getLogger(__name__)

TICK_MARGIN_US = 200_000
"""How long (µs) a statement may take from its start to its InnoDB transaction without being missed."""
AFTER_TICK_S = 0.01
"""Read the clock this long after the bound may have moved (the local and upstream clocks may differ)."""
RETRY_S = 5.0
"""After a failed reading (the upstream is away), try again this much later."""
DENIED_RETRY_S = 60.0
"""After the upstream refused INNODB_TRX (no PROCESS privilege), try again this much later."""

CLOCK_SQL = (
    "SELECT UNIX_TIMESTAMP(NOW(6)),"
    " (SELECT UNIX_TIMESTAMP(MIN(trx_started)) FROM information_schema.INNODB_TRX"
    " WHERE trx_autocommit_non_locking = 0 AND trx_is_read_only = 0)"
)
"""The upstream's clock and the start second of its oldest transaction that may still write."""


def resolved_bound(now_us: int, oldest_trx_s: int | None) -> int:
    """The resolved ts for a clock reading ``now_us`` (µs) with the oldest open transaction started at ``oldest_trx_s``."""
    second = (now_us - TICK_MARGIN_US) // 1_000_000
    if oldest_trx_s is not None:
        second = min(second, oldest_trx_s - 1)
    return base_ts(second) - 1


def until_next_bound(now_us: int) -> float:
    """Seconds from a clock reading ``now_us`` until ``resolved_bound`` can give a larger value."""
    into_second = (now_us - TICK_MARGIN_US) % 1_000_000
    return (1_000_000 - into_second) / 1_000_000 + AFTER_TICK_S


class UpstreamClock:
    """Reads the upstream's resolved bound, at most once per upstream second, over one kept connection."""

    def __init__(self, up: UpstreamConfig, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.up = up
        self._monotonic = monotonic
        self._conn: pymysql.connections.Connection | None = None
        self._next_at = 0.0
        self._warned = False
        self._no_head = False

    def monotonic(self) -> float:
        """The clock this one times its readings with (``time.monotonic`` unless a test gives one)."""
        return self._monotonic()

    @property
    def next_at(self) -> float:
        """When (``monotonic``) a reading could give a larger bound than the last one."""
        return self._next_at

    def due(self) -> bool:
        """Whether a reading now could give a larger bound than the last one."""
        return self._monotonic() >= self._next_at

    def until_due(self) -> float:
        """Seconds until ``due`` (0 when it is)."""
        return max(0.0, self._next_at - self._monotonic())

    def resolved_bound(self) -> int | None:
        """Read the clock and the open transactions now: the bound, or None if the upstream cannot tell."""
        try:
            now_us, oldest = self._read()
        except pymysql.err.MySQLError as exc:
            self.close()
            code = exc.args[0] if exc.args else 0
            if code == ER_SPECIFIC_ACCESS_DENIED:
                self._next_at = self._monotonic() + DENIED_RETRY_S
                self._warn(
                    f"the upstream refused information_schema.INNODB_TRX ({exc.args[-1]}): an idle "
                    f"changefeed's checkpoint cannot follow the clock; run GRANT PROCESS ON *.* TO {self.up.user!r}"
                )
            else:
                self._next_at = self._monotonic() + RETRY_S
                self._warn(f"cannot read the upstream clock: {exc}")
            return None
        except SparkCdcError as exc:
            self._next_at = self._monotonic() + RETRY_S
            self._warn(f"cannot read the upstream clock: {exc.message}")
            return None
        self._warned = False
        self._next_at = self._monotonic() + until_next_bound(now_us)
        return resolved_bound(now_us, oldest)

    @property
    def no_head(self) -> bool:
        """The upstream refused ``SHOW MASTER STATUS`` (a missing privilege): no head is read."""
        return self._no_head

    def binlog_head(self) -> tuple[str, int] | None:
        """The binlog's end now (``SHOW MASTER STATUS`` over the kept connection), None when the
        upstream does not tell (the caller then scans the binlog instead)."""
        from sparkcdc.capture.upstream import master_status

        if self._no_head:
            return None
        for _attempt in range(2):
            if self._conn is None:
                try:
                    self._conn = self.up.connect()
                except (pymysql.err.MySQLError, SparkCdcError):
                    return None
            try:
                return master_status(self._conn)
            except pymysql.err.OperationalError:
                self.close()  # the kept connection went away: one new try
            except (pymysql.err.MySQLError, SparkCdcError):
                self._no_head = True  # refused (a missing privilege): scanning works without it
                return None
        return None

    def _read(self) -> tuple[int, int | None]:
        if self._conn is not None:
            try:
                return self._query(self._conn)
            except pymysql.err.OperationalError:
                self.close()  # the kept connection went away (a restart, a timeout): one new try
        self._conn = self.up.connect()
        return self._query(self._conn)

    @staticmethod
    def _query(conn: pymysql.connections.Connection) -> tuple[int, int | None]:
        with conn.cursor() as cur:
            cur.execute(CLOCK_SQL)
            row = cur.fetchone()
        assert row is not None
        now, oldest = row
        return int(Decimal(now) * 1_000_000), (int(oldest) if oldest is not None else None)

    def _warn(self, message: str) -> None:
        # Once per run of failures: an idle changefeed would otherwise log it every few seconds.
        if not self._warned:
            log.warning("%s", message)
            self._warned = True

    def close(self) -> None:
        """Close the connection (the next reading opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except pymysql.err.Error:
                pass  # already broken; nothing to release


class SharedClock:
    """One ``UpstreamClock`` reading per upstream second for every changefeed of a process.

    Each idle changefeed's marker reads the clock, then the binlog head, once per upstream second
    (``RunningChangefeed.mark``). Twenty changefeeds on one upstream asked it forty times a second
    (``INNODB_TRX`` and ``SHOW MASTER STATUS``) for the same answer. Here the first marker of a
    second reads both, in that order, over one kept connection; the others take that reading.

    A reading taken before a changefeed's own scan serves it as well as one taken after: the mark
    raises only when the head of the reading equals the head its last empty scan started from, so
    every transaction in the binlog at the clock reading lies before that changefeed's end.
    """

    def __init__(self, up: UpstreamConfig, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.clock = UpstreamClock(up, monotonic)
        self._lock = threading.Lock()
        self._reading: tuple[int | None, tuple[str, int] | None, float] | None = None
        self.users = 0

    def read(self) -> tuple[int | None, tuple[str, int] | None, float]:
        """``(bound, head, next_at)``: the bound (None when the upstream cannot tell), the head read
        after it (None when not read) and when a reading could give a larger bound."""
        with self._lock:
            if self._reading is None or self.clock.due():
                bound = self.clock.resolved_bound()
                head = self.clock.binlog_head() if bound is not None else None
                self._reading = (bound, head, self.clock.next_at)
            return self._reading

    def close(self) -> None:
        with self._lock:
            self._reading = None
            self.clock.close()


class SharedClockUser:
    """A changefeed's view of a ``SharedClock``, with ``UpstreamClock``'s interface for its marker.

    ``resolved_bound`` takes the shared reading of this upstream second (or makes it), and
    ``binlog_head`` gives the head of that same reading: read after its clock, as the mark needs.
    """

    def __init__(self, shared: SharedClock, release: Callable[[], None]) -> None:
        self._shared = shared
        self._release = release
        self._next_at = 0.0
        self._head: tuple[str, int] | None = None
        self._closed = False

    def _now(self) -> float:
        return self._shared.clock.monotonic()

    def due(self) -> bool:
        return self._now() >= self._next_at

    def until_due(self) -> float:
        return max(0.0, self._next_at - self._now())

    def resolved_bound(self) -> int | None:
        bound, self._head, self._next_at = self._shared.read()
        return bound

    def binlog_head(self) -> tuple[str, int] | None:
        """The head of the reading ``resolved_bound`` last took (read after its clock)."""
        return self._head

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._release()


_shared_clocks: dict[UpstreamConfig, SharedClock] = {}
_shared_lock = threading.Lock()


def shared_clock(up: UpstreamConfig) -> SharedClockUser:
    """A view of this process's ``SharedClock`` of ``up`` (made for the first user, closed with the last)."""
    with _shared_lock:
        shared = _shared_clocks.get(up)
        if shared is None:
            shared = _shared_clocks[up] = SharedClock(up)
        shared.users += 1

    def release() -> None:
        with _shared_lock:
            shared.users -= 1
            if shared.users > 0:
                return
            if _shared_clocks.get(up) is shared:
                del _shared_clocks[up]
        shared.close()

    return SharedClockUser(shared, release)
