"""Arrow columns from buffers: equal to ``pa.array``'s, built without importing pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from sparkcdc.pipeline.arrow_columns import batch, binaries, ints, strings


@pytest.mark.parametrize(
    "values",
    [[], [""], ["a"], ["ä€😀", "", "x" * 10_000, "tab\tnew\nline"], [f"row-{i}" for i in range(5000)]],
)
def test_strings_equal_pyarrow_conversion(values: list[str]) -> None:
    got = strings(values)
    got.validate(full=True)
    assert got.type == pa.string()
    assert got.equals(pa.array(values, pa.string()))
    assert got.to_pylist() == values


@pytest.mark.parametrize("values", [[], [b""], [b"\x00\xff", b"", b"abc" * 1000]])
def test_binaries_equal_pyarrow_conversion(values: list[bytes]) -> None:
    got = binaries(values)
    got.validate(full=True)
    assert got.equals(pa.array(values, pa.binary()))


@pytest.mark.parametrize(
    ("values", "type"),
    [
        ([], pa.int64()),
        ([0, -1, 2**63 - 1, -(2**63)], pa.int64()),
        ([470699655036927999, 3, 7], pa.int64()),
        ([0, -1, 2**31 - 1, -(2**31)], pa.int32()),
    ],
)
def test_ints_equal_pyarrow_conversion(values: list[int], type: pa.DataType) -> None:
    got = ints(values, type)
    got.validate(full=True)
    assert got.equals(pa.array(values, type))


def test_ints_refuse_a_value_out_of_range() -> None:
    with pytest.raises(OverflowError):
        ints([2**31], pa.int32())


def test_batch_keeps_the_column_names_in_order() -> None:
    rb = batch({"b": ints([1, 2], pa.int64()), "a": strings(["x", "y"])})
    assert rb.schema.names == ["b", "a"]
    assert rb.to_pydict() == {"b": [1, 2], "a": ["x", "y"]}


def test_a_worker_building_the_sources_and_writers_batches_does_not_import_pandas() -> None:
    """The point of the module: an executor's Python worker stays without pandas (about 50 MB)."""
    code = textwrap.dedent(
        """
        import sys
        import pyarrow as pa
        from sparkcdc.pipeline.arrow_columns import batch, strings
        from sparkcdc.pipeline.source import _rows_batch
        rb = _rows_batch([[1, 2], [0, 1], ["I", "D"], ["db", "db"], ["t", "t"], [3, 3], [b"p", b"q"]])
        assert rb.schema.names == ["commit_ts", "seq", "op", "schema", "table", "table_version", "payload"]
        assert rb.column("op").to_pylist() == ["I", "D"]
        batch({"msg": strings(["m"])}).to_pydict()
        print("pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
