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
