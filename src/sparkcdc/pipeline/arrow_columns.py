"""Arrow columns built from their buffers, for the executors' Python workers.

``pyarrow.array(list)`` first asks whether the list is a pandas object, and to ask it imports
pandas: about 50 MB more resident memory in every Python worker that calls it once (and Spark's
own conversion of tuples yielded by a data source reader calls it). Nothing on the executors
needs pandas, so the columns a worker hands to Spark are built here from their buffers instead:
the same arrays, without the import. Both paths give equal arrays (``tests/unit/pipeline``).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate

import pyarrow as pa

_MAX_OFFSET = 2**31 - 1


def binaries(values: Sequence[bytes], type: pa.DataType | None = None) -> pa.Array:
    """A binary column (or ``type``, a binary-layout type such as ``pa.string()`` for UTF-8 bytes)."""
    data = b"".join(values)
    if len(data) > _MAX_OFFSET:
        # past 32-bit offsets pyarrow chunks the column itself
        return pa.array(values, type or pa.binary())
    offsets = array("i", [0])
    offsets.extend(accumulate(map(len, values)))
    return pa.Array.from_buffers(
        type or pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def strings(values: Sequence[str]) -> pa.Array:
    """A UTF-8 string column, no value null."""
    return binaries([v.encode() for v in values], pa.string())


def ints(values: Sequence[int], type: pa.DataType) -> pa.Array:
    """An integer column of ``type`` (``pa.int64()`` or ``pa.int32()``), no value null."""
    code = {64: "q", 32: "i"}[type.bit_width]
    return pa.Array.from_buffers(type, len(values), [None, pa.py_buffer(array(code, values))])


def batch(columns: dict[str, pa.Array]) -> pa.RecordBatch:
    """A record batch of the named columns."""
    return pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
