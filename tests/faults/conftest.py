"""Fault fixtures: an upstream and a downstream MariaDB of each module's own (faults restart them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sparkcdc.services.mariadb import LocalMariaDB


@pytest.fixture(scope="module")
def upstream() -> Iterator[LocalMariaDB]:
    """A MariaDB with a ROW binlog for one module: its faults (restarts, purges) touch no other test."""
    with LocalMariaDB() as db:
        yield db


@pytest.fixture(scope="module")
def replica() -> Iterator[LocalMariaDB]:
    """A MariaDB without binlog that the consumer (or the MySQL sink) writes into."""
    with LocalMariaDB(binlog=False) as db:
        yield db
