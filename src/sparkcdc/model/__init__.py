"""Shared vocabulary: commit timestamps, table shapes and change events.

Owns the data types every layer passes around (``RowChange``, ``DDLEvent``, ``TableInfo``, ``CommitTs``).
Imports nothing from sparkcdc: it is the bottom layer.
"""

from sparkcdc.model.events import BinlogPosition, DDLEvent, DDLType, Event, Op, Resolved, Row, RowChange
from sparkcdc.model.schema import ColumnInfo, IndexInfo, TableInfo
from sparkcdc.model.ts import CommitTs, TableVersion, compose_ts, physical_ms

__all__ = [
    "BinlogPosition",
    "ColumnInfo",
    "CommitTs",
    "DDLEvent",
    "DDLType",
    "Event",
    "IndexInfo",
    "Op",
    "Resolved",
    "Row",
    "RowChange",
    "TableInfo",
    "TableVersion",
    "compose_ts",
    "physical_ms",
]
