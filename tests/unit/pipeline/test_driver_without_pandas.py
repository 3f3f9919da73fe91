"""The driver runs a batch's Arrow functions without importing pandas, and NumPy values still convert.

PySpark's ``mapInArrow`` checks the pandas version (an import of pandas), and its py4j converters for
NumPy values import ``pyspark.testing.utils`` (pandas again) to look at any argument; both are taken
around in ``pipeline/spark.py``. A real local Spark runs ``map_in_arrow`` in a fresh process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.spark


def test_a_driver_runs_map_in_arrow_without_pandas_and_numpy_values_still_convert() -> None:
    code = textwrap.dedent(
        """
        import sys
        import pyarrow as pa
        from sparkcdc.pipeline.spark import get_spark, map_in_arrow

        def double(batches):
            for b in batches:
                yield pa.RecordBatch.from_arrays([pa.array([2 * v for v in b.column(0).to_pylist()], pa.int64())], names=["x"])

        spark = get_spark("local[1]", conf={"spark.executorEnv.PYSPARK_PYTHON": sys.executable})
        try:
            out = map_in_arrow(spark.range(4).toDF("x"), double, "x long")
            print(sorted(r.x for r in out.collect()))
            print("pandas" in sys.modules)
            import numpy as np

            arr = np.array([3, 1, 2], dtype="int32")
            print(spark.sparkContext._jvm.java.util.Arrays.toString(arr))
            print(spark.sparkContext._jvm.java.lang.String.valueOf(np.int64(7)))
        finally:
            spark.stop()
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.splitlines() == ["[0, 2, 4, 6]", "False", "[3, 1, 2]", "7"], out.stderr[-4000:]


def test_a_half_imported_numpy_answers_no_instead_of_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changefeeds started at once: one thread imports NumPy while another's py4j call asks the probe.

    The module is in ``sys.modules`` before its types exist; the probe must not touch them then
    (it raised ``AttributeError: partially initialized module 'numpy' has no attribute 'ndarray'``).
    """
    import types

    from sparkcdc.pipeline.spark import _NumpyProbe

    class Inner:
        def can_convert(self, obj: object) -> bool:
            raise AssertionError("asked about a value that cannot be a NumPy one")

    monkeypatch.setitem(sys.modules, "numpy", types.ModuleType("numpy"))  # half imported: no types yet
    assert _NumpyProbe(Inner()).can_convert([1, 2]) is False
