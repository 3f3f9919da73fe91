"""Run by Python as it starts each process Spark starts for the sparkcdc data source.

``pipeline/spark.py`` (``register_data_source``) puts this folder on the ``PYTHONPATH`` of the
data source's environment, after Spark's own archives and before Python's paths, so this module
is the ``sitecustomize`` of those processes only: each streaming query's source runner on the
driver, and the workers that plan and read it.

In a **streaming source runner** it defers ``pyspark.sql.worker.plan_data_source_read``. The
runner imports ``records_to_arrow_batches`` from it, and that module imports PyArrow (and with it
NumPy) at its top: 41 MB resident per runner, which is per changefeed. The runner calls the
function only to prefetch a ``SimpleDataSourceStreamReader``'s rows; sparkcdc's reader is a
``DataSourceStreamReader``, so the runner never does. The deferred module imports the real one on
first use (a call or any attribute), so a reader that needs it gets it.

Every other process is left as it is. Python imports the first ``sitecustomize`` on its path, so
this one then imports the next (a distribution's own), as Python would have.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from typing import Any

RUNNER_MODULE = "pyspark.sql.streaming.python_streaming_source_runner"
DEFERRED_MODULE = "pyspark.sql.worker.plan_data_source_read"


class _Deferred(types.ModuleType):
    """Stands in ``sys.modules`` for ``DEFERRED_MODULE`` until something uses it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            # What the import system asks of any module (``__path__`` for ``from … import``).
            raise AttributeError(name)
        return getattr(_load_deferred(), name)


def _load_deferred() -> types.ModuleType:
    if isinstance(sys.modules.get(DEFERRED_MODULE), _Deferred):
        del sys.modules[DEFERRED_MODULE]
    return importlib.import_module(DEFERRED_MODULE)


def records_to_arrow_batches(*args: Any, **kwargs: Any) -> Any:
    return _load_deferred().records_to_arrow_batches(*args, **kwargs)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the stand-in for ``DEFERRED_MODULE``, once; the next import of it finds the real one.

    A finder, not an entry in ``sys.modules``: the import system then imports the parent packages
    and sets the stand-in on its package, as for any module.
    """

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != DEFERRED_MODULE:
            return None
        sys.meta_path.remove(self)
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: Any) -> types.ModuleType:
        return _Deferred(spec.name, "Imported on first use (sparkcdc runner_site).")

    def exec_module(self, module: types.ModuleType) -> None:
        module.records_to_arrow_batches = records_to_arrow_batches  # type: ignore[attr-defined]


def defer_planner_module() -> None:
    """Make the next import of ``DEFERRED_MODULE`` give the stand-in (unless it is imported)."""
    if DEFERRED_MODULE not in sys.modules:
        sys.meta_path.insert(0, _StandInFinder())


def _import_next_sitecustomize() -> None:
    """Import the ``sitecustomize`` this one hides, if there is one (as ``site`` would)."""
    here = os.path.dirname(os.path.abspath(__file__))
    this = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if os.path.abspath(p or os.curdir) != here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
        if this is not None:
            sys.modules["sitecustomize"] = this
    finally:
        sys.path[:] = saved


if RUNNER_MODULE in getattr(sys, "orig_argv", ()):
    defer_planner_module()
_import_next_sitecustomize()
