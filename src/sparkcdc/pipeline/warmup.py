"""The executors' Python workers, started while a query starts: its first batch finds them ready.

The first batch of a new query would start them itself, after its plan: Spark's Python
daemon, then one worker a Python stage of a task (the source's ``read`` and the batch
writer), each importing pyarrow and sparkcdc; seconds on a busy machine. Spark keeps a worker
for the next task (``spark.python.worker.reuse``), so a tiny job run in a thread while the
query starts (its source's Python runner, the first plan) leaves them ready.

Measured (bench/startup): a job that also read a Python data source, to start the
``plan_data_source_read`` planner worker the source needs, made the start slower: its own
chain of Python processes ran as long as the query's, competed with it for the cores, and the
query took none of its workers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

log = logging.getLogger(__name__)

SCHEMA = "id long"


def warm_python_workers(spark: Any, modules: Sequence[str]) -> threading.Thread:
    """Start, in a thread, the Python workers a query's first task runs in; import ``modules`` in each.

    One task chaining two ``mapInArrow`` functions, as a batch's task chains the source's read
    and the writer: two workers, what a one-segment batch needs. Not one per core: on a busy
    machine the workers a first batch may not need took the cores from the query's start
    (bench/startup). A failure only costs the time it would have saved.
    """
    names = list(modules)
    n = 1

    def load(batches: Iterator[Any]) -> Iterator[Any]:
        import importlib

        for name in names:
            importlib.import_module(name)
        yield from batches

    def run() -> None:
        t0 = time.monotonic()
        try:
            spark.range(0, n, 1, n).mapInArrow(load, SCHEMA).mapInArrow(load, SCHEMA).collect()
        except Exception as exc:  # e.g. the session stopped meanwhile: the first batch starts them
            log.debug("warming the Python workers failed: %s", exc)
            return
        log.debug("%d Python workers warm in %.2fs", 2 * n, time.monotonic() - t0)

    thread = threading.Thread(target=run, name="sparkcdc-warm-workers", daemon=True)
    thread.start()
    return thread
