"""Named points where a test or the torture bench kills the process (TiCDC's failpoints, reduced).

``SPARKCDC_FAILPOINTS`` lists ``name=probability`` pairs, comma-separated, for example
``after-sink-commit=0.05``. Each time the code passes a listed point it draws a number; under
the probability, the process and everything it started get SIGKILL there (the server or
``sparkcdc run`` with its Spark JVM and Spark's Python workers, which run in groups of their
own), as a power cut at that instant would. Unset, a point costs one dictionary
lookup. The points:

- ``after-sink-commit``: a batch is published by the sink (storage ``metadata``, Kafka
  watermarks, MySQL progress rows, lakehouse tags, HTTP posts), its checkpoint is not saved yet.
"""

from __future__ import annotations

import os
import random
import signal

ENV = "SPARKCDC_FAILPOINTS"
POINTS = frozenset({"after-sink-commit"})


def _parse(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, prob = item.partition("=")
        if name not in POINTS:
            raise ValueError(f"unknown failpoint {name!r} in {ENV}; known: {sorted(POINTS)}")
        out[name] = float(prob or 1)
    return out


_ARMED = _parse(os.environ.get(ENV, ""))


def hit(name: str) -> None:
    """Kill this process and its descendants here when ``name`` is armed and the draw says so."""
    prob = _ARMED.get(name)
    if prob is None or random.random() >= prob:
        return
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass
    os.kill(os.getpid(), signal.SIGKILL)
