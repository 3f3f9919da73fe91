"""``pipeline/runner_site``: the ``sitecustomize`` of the processes Spark starts for the data source.

Each streaming query has a source runner process (one per changefeed). PySpark's runner module
imports PyArrow through ``plan_data_source_read`` for a reader sparkcdc does not have; the
stand-in keeps it out until something uses it. Each check runs a fresh interpreter with the
folder on its ``PYTHONPATH``, as Spark starts one. ``tests/e2e/test_dataframe_source.py`` looks
at the real runner of a running query.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from sparkcdc.pipeline.spark import RUNNER_SITE

RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def _python(args: list[str], *path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, path), *sys.path[1:]])}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120)


def test_the_runner_module_imports_without_pyarrow_and_the_real_module_loads_on_use() -> None:
    code = textwrap.dedent(
        f"""
        import sys
        import sitecustomize
        sitecustomize.defer_planner_module()  # what it does at start in a runner
        import {RUNNER} as runner
        print("pyarrow" in sys.modules, "numpy" in sys.modules)
        from pyspark.sql.types import StructType
        print(list(runner.records_to_arrow_batches(iter([]), 8, StructType([]), None)))
        real = sys.modules["pyspark.sql.worker.plan_data_source_read"]
        print("pyarrow" in sys.modules, hasattr(real, "pa"), type(real).__name__)
        """
    )
    out = _python(["-c", code], RUNNER_SITE)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["False False", "[]", "True True module"], out.stderr[-3000:]


def test_an_attribute_of_the_stand_in_loads_the_real_module() -> None:
    code = textwrap.dedent(
        """
        import sys
        import sitecustomize
        sitecustomize.defer_planner_module()
        import pyspark.sql.worker.plan_data_source_read as m
        print("pyarrow" in sys.modules)
        print(m.pa.__name__, "pyarrow" in sys.modules)
        """
    )
    out = _python(["-c", code], RUNNER_SITE)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["False", "pyarrow True"], out.stderr[-3000:]


def test_a_started_runner_leaves_pyarrow_out_and_other_processes_are_left_as_they_are() -> None:
    """``-X importtime`` lists every import: the runner's start (it then fails to connect to a
    Spark that is not there) has no PyArrow; any other process has the real module on import."""
    started = _python(["-X", "importtime", "-m", RUNNER], RUNNER_SITE)
    imports = [
        line.rsplit("|", 1)[-1].strip()
        for line in started.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "pyspark.sql.streaming.datasource" in imports and "sitecustomize" in imports, started.stderr[
        -3000:
    ]
    assert not [m for m in imports if m.split(".")[0] in ("pyarrow", "numpy")]
    other = _python(
        [
            "-c",
            "import sys; import pyspark.sql.worker.plan_data_source_read as m; print(type(m).__name__, 'pyarrow' in sys.modules)",
        ],
        RUNNER_SITE,
    )
    assert other.stdout.split() == ["module", "True"], other.stderr[-3000:]


def test_the_sitecustomize_it_hides_still_runs(tmp_path: Path) -> None:
    """A distribution's own ``sitecustomize`` later on the path is imported after this one."""
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.NEXT_SITE_RAN = True\n")
    out = _python(
        ["-c", "import builtins; print(getattr(builtins, 'NEXT_SITE_RAN', False))"], RUNNER_SITE, tmp_path
    )
    assert out.stdout.split() == ["True"], out.stderr[-3000:]
    alone = _python(["-c", "import sys; print(sys.modules['sitecustomize'].__file__)"], RUNNER_SITE)
    assert alone.stdout.strip() == str(RUNNER_SITE / "sitecustomize.py"), alone.stderr[-3000:]
