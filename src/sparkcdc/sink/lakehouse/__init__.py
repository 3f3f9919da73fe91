"""The lakehouse sinks: ``iceberg://`` (pyiceberg, SQL catalog) and ``delta://`` (delta-rs).

- ``config.py``: URI parameters (``LakehouseSettings``);
- ``types.py``: MySQL column types to Arrow (and so Iceberg/Delta) types, row values to Arrow;
- ``changes.py``: the apply-changes core both formats share: change frames (upsert: the last
  change per key; changelog: every change), ``TableApplier`` (exactly-once commits, DDL as schema
  changes) and ``TableFormat``, the operations a format adapter provides;
- ``iceberg.py``, ``delta.py``: the two format adapters;
- ``writer.py``: ``LakehouseWriter``, the executor side (stages change frames as Parquet);
- ``sink.py``: ``LakehouseSink``, the driver side (applies staged frames at commit).
"""

from sparkcdc.sink.lakehouse.sink import LakehouseSink

__all__ = ["LakehouseSink"]
