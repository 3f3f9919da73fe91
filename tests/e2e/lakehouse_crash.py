"""``python -m tests.e2e.lakehouse_crash N <sparkcdc args>``: ``sparkcdc`` that dies by SIGKILL mid-commit.

The lakehouse sink's driver applies a batch table by table; after the N-th table commit of this
process, the whole process group (the driver, Spark's JVM and its Python workers) is killed with
SIGKILL, leaving a batch applied to some tables and not to others, exactly where a crash hurts.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from sparkcdc.cli.main import main
from sparkcdc.sink.lakehouse.changes import TableApplier


def _arm(after: int) -> None:
    original = TableApplier.apply
    done = [0]

    def apply(self: TableApplier, *args: Any, **kwargs: Any) -> bool:
        applied = original(self, *args, **kwargs)
        if applied:
            done[0] += 1
            if done[0] >= after:
                print(f"lakehouse crash: SIGKILL after table commit {done[0]}", flush=True)
                os.killpg(os.getpgrp(), signal.SIGKILL)
        return applied

    TableApplier.apply = apply  # type: ignore[method-assign]


if __name__ == "__main__":
    _arm(int(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
