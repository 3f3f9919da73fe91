"""Oracle fixtures: the upstream, its native replica, the three sparkcdc replicas and a Kafka broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oracle.harness import Oracle


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    """One oracle for the session: each workload captures its own binlog range on it."""
    with Oracle(tmp_path_factory.mktemp("oracle")) as o:
        yield o
