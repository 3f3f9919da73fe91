"""An upstream MariaDB and a native replica of it: the oracle the workloads are checked against.

``native_pair()`` starts both and makes the second a GTID replica of the first;
``check_native(upstream, replica, databases)`` waits until the replica applied everything, fails
on any replication error and compares the databases row by row (``tablediff``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sparkcdc.services.mariadb import LocalMariaDB
from tests.oracle.tablediff import assert_same, count_rows


@contextmanager
def native_pair(extra_args: tuple[str, ...] = ()) -> Iterator[tuple[LocalMariaDB, LocalMariaDB]]:
    """(upstream, replica), both with ``extra_args``, the replica replicating natively."""
    with LocalMariaDB(extra_args=extra_args) as upstream:
        with LocalMariaDB(server_id=2, extra_args=extra_args) as replica:
            replica.replicate_from(upstream)
            yield upstream, replica


def check_native(
    upstream: LocalMariaDB, replica: LocalMariaDB, databases: list[str], *, timeout: float = 180.0
) -> tuple[int, int]:
    """Assert the replica caught up without an error and holds the same tables; (tables, rows) compared."""
    replica.wait_caught_up(upstream, timeout=timeout)
    status = replica.slave_status()
    assert status.get("Slave_SQL_Running") == "Yes", status
    assert not status.get("Last_SQL_Error"), f"replica SQL error: {status.get('Last_SQL_Error')}"
    assert not status.get("Last_IO_Error"), f"replica IO error: {status.get('Last_IO_Error')}"
    assert_same(upstream, replica, databases)
    return count_rows(replica, databases)
