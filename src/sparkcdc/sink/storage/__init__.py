"""The storage sink: TiCDC's file layout on local disk, S3, GCS or Azure (spec §3)."""

from sparkcdc.sink.storage.backend import STORAGE_SCHEMES, StorageBackend
from sparkcdc.sink.storage.schema_file import TableDefinition
from sparkcdc.sink.storage.settings import StorageSettings
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
