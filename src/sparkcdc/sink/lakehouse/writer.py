"""``LakehouseWriter``: the executor side, turning a route group's rows into staged change frames.

Each table's frame (``ChangeFrame``) is written as one Parquet file under
``_sparkcdc_staging/<changefeed>/<batch>/`` in the warehouse or root; the commit message names the
files, and the driver applies them to the tables at commit.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.base import PartitionWriter, WriterContext
from sparkcdc.sink.lakehouse.changes import ChangeFrame
from sparkcdc.sink.lakehouse.config import STAGING_DIR, LakehouseSettings


def batch_staging_dir(changefeed_id: str, batch_id: int) -> str:
    """The staging directory of one batch (relative to the warehouse or root)."""
    return f"{STAGING_DIR}/{changefeed_id}/{batch_id}"


def frame_bytes(frame: pa.Table) -> bytes:
    """A change frame as Parquet bytes."""
    sink = pa.BufferOutputStream()
    pq.write_table(frame, sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def read_frame(data: bytes) -> pa.Table:
    """Inverse of ``frame_bytes``."""
    return pq.read_table(pa.BufferReader(data))


class LakehouseWriter(PartitionWriter):
    """Buffers one change frame per table shape; ``close`` stages them."""

    def __init__(self, settings: LakehouseSettings, ctx: WriterContext) -> None:
        self.settings = settings
        self.ctx = ctx
        self.frames: dict[tuple[str, str, int], ChangeFrame] = {}

    def _frame(self, table: TableInfo) -> ChangeFrame:
        key = (table.schema, table.table, table.version)
        f = self.frames.get(key)
        if f is None:
            f = self.frames[key] = ChangeFrame(table, self.settings.mode, self.settings.time_zone)
        return f

    def write(self, row: RowChange, table: TableInfo) -> None:
        """Add one row change to its table's frame."""
        self._frame(table).add(row)

    def write_rows(self, rows: list[RowChange], table: TableInfo) -> None:
        """Add consecutive row changes of one table."""
        f = self._frame(table)
        for row in rows:
            f.add(row)

    def close(self) -> dict[str, Any]:
        """Stage every frame; the message lists them with their table shapes."""
        ctx = self.ctx
        base = (
            f"{batch_staging_dir(ctx.changefeed_id, ctx.batch_id)}/"
            f"{ctx.segment}-{ctx.writer_id}-{ctx.task_attempt}-{uuid.uuid4().hex[:12]}"
        )
        staged = []
        for i, f in enumerate(self.frames.values()):
            path = f"{base}/{i}.parquet"
            self.settings.backend.write(path, frame_bytes(f.to_arrow()))
            staged.append({"path": path, "rows": f.rows, "info": f.info.to_dict()})
        self.frames.clear()
        return {"staged": staged}

    def abort(self) -> None:
        """Drop the buffered frames (staged files of a failed attempt go with the batch's directory)."""
        self.frames.clear()
