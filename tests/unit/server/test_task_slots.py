"""A server's Spark settings: more task slots than cores, FAIR pools, a per-changefeed share.

``tests/e2e/test_slow_sink.py`` shows why: two changefeeds whose HTTP endpoint holds its requests
took both slots of the old ``local[2]`` default, and the CSV changefeeds beside them stopped.
"""

from __future__ import annotations

import pytest

from sparkcdc.pipeline.spark import CHANGEFEED_TASKS_KEY
from sparkcdc.server.main import ServerOptions
from sparkcdc.server.runner import (
    SLOTS_PER_CORE,
    SparkChangefeedRunner,
    check_spark_master,
    default_server_master,
    host_cores,
    server_spark_conf,
)


def test_the_default_master_has_more_slots_than_cores() -> None:
    cores = host_cores()
    assert default_server_master() == f"local[{SLOTS_PER_CORE * cores}]"
    assert check_spark_master(default_server_master())
    assert ServerOptions().spark_master == default_server_master()
    assert SparkChangefeedRunner().master == default_server_master()
    assert SparkChangefeedRunner("spark://m:7077").master == "spark://m:7077"


@pytest.mark.parametrize("master", ["local[8]", "local[*]", "local", "local[2,3]"])
def test_a_local_master_gives_a_changefeed_at_most_the_hosts_cores(master: str) -> None:
    conf = server_spark_conf(master, {"spark.driver.memory": "1g"})
    assert conf == {
        "spark.scheduler.mode": "FAIR",
        CHANGEFEED_TASKS_KEY: str(host_cores()),
        "spark.driver.memory": "1g",
    }


def test_a_cluster_master_keeps_its_parallelism_and_flags_win() -> None:
    assert server_spark_conf("spark://m:7077", {}) == {"spark.scheduler.mode": "FAIR"}
    given = {"spark.scheduler.mode": "FIFO", CHANGEFEED_TASKS_KEY: "3"}
    assert server_spark_conf("local[8]", given) == given
