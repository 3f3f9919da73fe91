"""``LakehouseSink``: ``iceberg://`` and ``delta://`` tables, one per upstream table.

Writers stage change frames in executors; ``commit`` applies them table by table on the driver
(``TableApplier``), each in one table commit that records the changefeed id and the batch's
checkpoint-ts, so a batch replayed after a crash is skipped where it was committed: every table is
the upstream at some checkpoint, with no duplicate, whenever the process dies.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from sparkcdc.errors import SinkError
from sparkcdc.model import DDLEvent, TableInfo
from sparkcdc.sink.base import PartitionWriter, Sink, SinkCapabilities, WriterContext
from sparkcdc.sink.lakehouse.changes import TableApplier, TableFormat
from sparkcdc.sink.lakehouse.config import LakehouseSettings
from sparkcdc.sink.lakehouse.writer import LakehouseWriter, batch_staging_dir, read_frame

if TYPE_CHECKING:
    import pyarrow as pa

    from sparkcdc.config.replica import ReplicaConfig

log = logging.getLogger(__name__)


def make_format(settings: LakehouseSettings) -> TableFormat:
    """The table format of the settings (Iceberg with its catalog, or Delta)."""
    if settings.format == "iceberg":
        from sparkcdc.sink.lakehouse.iceberg import IcebergFormat

        io = settings.s3_io_properties() if settings.backend.scheme == "s3" else {}
        return IcebergFormat(
            settings.catalog_uri,
            settings.root_uri,
            settings.namespace,
            io,
            catalog_name=settings.catalog_name,
        )
    from sparkcdc.sink.lakehouse.delta import DeltaFormat

    if settings.backend.scheme == "s3":
        return DeltaFormat(settings.root_uri, settings.delta_storage_options())
    return DeltaFormat(settings.backend.root)


class LakehouseSink(Sink):
    """Iceberg or Delta tables that mirror (upsert) or log (changelog) the upstream tables."""

    scheme = "iceberg"

    def __init__(self, uri: str, config: ReplicaConfig, changefeed_id: str = "default") -> None:
        super().__init__(uri, config, changefeed_id)
        self.settings = LakehouseSettings.from_uri(uri, config)
        self.scheme = self.settings.format
        self._applier: TableApplier | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_applier"] = None  # catalogs and table handles stay on the driver
        return state

    @property
    def applier(self) -> TableApplier:
        """The driver's apply-changes core over this sink's table format."""
        if self._applier is None:
            s = self.settings
            self._applier = TableApplier(make_format(s), s.mode, s.table_name, self.changefeed_id)
        return self._applier

    @property
    def num_writers(self) -> int:
        """``worker-count``: tables are spread over that many writers."""
        return self.settings.worker_count

    @property
    def capabilities(self) -> SinkCapabilities:
        return SinkCapabilities(
            resume_evidence="each table's tag (the last commit_ts applied)",
            idempotence="rows at or below a table's tag are not applied again",
        )

    def check(self) -> None:
        """Reach the warehouse (and the Iceberg catalog)."""
        self.settings.backend.check()
        if self.settings.format == "iceberg":
            self.applier.fmt.exists("sparkcdc_check")

    def open_writer(self, ctx: WriterContext) -> PartitionWriter:
        """A writer staging change frames for one route group."""
        return LakehouseWriter(self.settings, ctx)

    def apply_ddl(self, ddl: DDLEvent) -> None:
        """Evolve or empty the DDL's table."""
        self.applier.apply_ddl(ddl)

    def commit(self, batch_id: int, messages: list[dict[str, Any]], checkpoint_ts: int) -> None:
        """Apply the staged frames, one table commit each, then drop the staging directory."""
        staged: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for m in messages:
            for entry in m.get("staged", ()):
                info = entry["info"]
                staged[(info["schema"], info["table"])].append(entry)
        backend = self.settings.backend
        for (schema, table), entries in staged.items():
            frames: list[pa.Table] = []
            for e in entries:
                data = backend.read(e["path"])
                if data is None:
                    raise SinkError(
                        f"staged changes {backend.full(e['path'])!r} of table {schema}.{table} are missing; "
                        "the batch is replayed when the changefeed restarts"
                    )
                frames.append(read_frame(data))
            info = TableInfo.from_dict(entries[-1]["info"])
            self.applier.apply(info, frames, checkpoint_ts)
        if staged:
            backend.remove_tree(batch_staging_dir(self.changefeed_id, batch_id))
        rows = sum(int(e["rows"]) for es in staged.values() for e in es)
        log.debug(
            "%s sink: batch %d applied %d row changes to %d tables", self.scheme, batch_id, rows, len(staged)
        )

    def close(self) -> None:
        """Release the catalog."""
        if self._applier is not None:
            self._applier.fmt.close()
            self._applier = None
