"""Shared fixtures: real local services started on 127.0.0.1 and stopped after the tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.spark_cluster import LocalSparkCluster
from sparkcdc.services.tansu import LocalTansu

# Spark's Python workers must use this interpreter (see DESIGN.md, "Known traps").
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[LocalMariaDB]:
    """One upstream MariaDB with a ROW binlog for the whole session."""
    with LocalMariaDB() as db:
        yield db


@pytest.fixture()
def fresh_db(mariadb: LocalMariaDB, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own for one test, dropped afterwards."""
    name = "t_" + "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:50].lower()
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`", f"CREATE DATABASE `{name}`")
    yield name
    mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture(scope="module")
def tansu() -> Iterator[LocalTansu]:
    """One real Kafka-protocol broker (Tansu, in memory) for the module; topics are unique per test."""
    from sparkcdc.sink.kafka.producer import close_all_producers

    with LocalTansu() as broker:
        yield broker
    close_all_producers(1)


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[LocalSparkCluster]:
    """A Spark standalone master with two isolated one-core workers for the session (drivers run as subprocesses)."""
    with LocalSparkCluster(workers=2, cores=1) as cluster:
        yield cluster
