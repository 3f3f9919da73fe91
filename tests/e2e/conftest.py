"""e2e fixtures: a downstream MariaDB, a local S3 server and an in-process Spark session.

The upstream is the session ``mariadb`` fixture of ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import LocalS3


@pytest.fixture(scope="session")
def downstream() -> Iterator[LocalMariaDB]:
    """A second MariaDB (no binlog) that consumers replay into."""
    with LocalMariaDB(binlog=False) as db:
        yield db


@pytest.fixture(scope="session")
def local_s3() -> Iterator[LocalS3]:
    """A moto S3 server on 127.0.0.1."""
    with LocalS3() as s3:
        yield s3


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """An in-process SparkSession on local[2] with the sparkcdc source registered."""
    from sparkcdc.pipeline.spark import get_spark

    session = get_spark("local[2]")
    yield session
    session.stop()
