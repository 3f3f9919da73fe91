"""A real downstream MariaDB (no binlog) for the MySQL sink and applier tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.sink.mysql import ConnParams


@pytest.fixture(scope="session")
def downstream() -> Iterator[LocalMariaDB]:
    """A second MariaDB playing the downstream, for the whole session."""
    with LocalMariaDB(binlog=False) as db:
        yield db


@pytest.fixture()
def down_db(downstream: LocalMariaDB, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own on the downstream, dropped afterwards."""
    name = "d_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:50].lower()
    downstream.execute(f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`")
    yield name
    downstream.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture()
def conn_params(downstream: LocalMariaDB) -> ConnParams:
    """Connection parameters of the downstream."""
    return ConnParams(
        host=downstream.host, port=downstream.port, user=downstream.user, password=downstream.password
    )
