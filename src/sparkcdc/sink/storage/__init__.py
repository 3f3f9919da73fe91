"""The storage sink: TiCDC's file layout on local disk, S3, GCS or Azure (spec §3).

- ``config.py``: the sink's options (``OPTIONS``, ``StorageSettings``: URI over
  ``[sink.cloud-storage-config]``);
- ``sink.py``: ``StorageSink``, the driver side (schema files, DDL, publishing staged files,
  the ``metadata`` checkpoint on commit);
- ``writer.py``: ``StorageWriter``, the executor side (data files and their index, staging);
- ``sparkcdc.sink.objectstore`` (shared): object storage through fsspec (file, s3, gcs, azure);
- ``layout.py``: TiCDC's data, index, schema and metadata paths;
- ``schema_file.py``: schema files (``TableDefinition``, its checksum and inverse);
- ``encoding.py``: the row encoding of data files (one value per line).
"""

from sparkcdc.sink.objectstore import STORAGE_SCHEMES, StorageBackend
from sparkcdc.sink.storage.config import StorageSettings
from sparkcdc.sink.storage.schema_file import TableDefinition
from sparkcdc.sink.storage.sink import StorageSink
from sparkcdc.sink.storage.writer import StorageWriter, ensure_table_schema, next_file_index

__all__ = [
    "STORAGE_SCHEMES",
    "StorageBackend",
    "StorageSettings",
    "StorageSink",
    "StorageWriter",
    "TableDefinition",
    "ensure_table_schema",
    "next_file_index",
]
