"""``StorageSink``: TiCDC's storage sink layout on any fsspec filesystem (spec §3).

The root ``metadata`` file never moves backwards: before its first write the sink reads the
``checkpoint-ts`` already there, and it writes only larger values. A changefeed resumed from an
older position (a failover whose meta database lags what was published, a lost Spark
checkpoint) writes its replayed rows again (at-least-once), but ``metadata`` keeps the larger
mark until the replay passes it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from sparkcdc.errors import DecodeError
from sparkcdc.model import DDLEvent, DDLType
from sparkcdc.model.ts import physical_ms
from sparkcdc.sink.base import PartitionWriter, Sink, SinkCapabilities, WriterContext
from sparkcdc.sink.storage.config import StorageSettings
from sparkcdc.sink.storage.encoding import RowEncoder
from sparkcdc.sink.storage.layout import (
    METADATA_FILE,
    metadata_body,
    parse_metadata,
    parse_schema_file_path,
    schema_meta_dir,
)
from sparkcdc.sink.storage.schema_file import TableDefinition
from sparkcdc.sink.storage.writer import StorageWriter, publish_staged, staging_dir

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig

log = logging.getLogger(__name__)

METADATA_MIN_INTERVAL = 2.0
"""Seconds between two ``metadata`` writes (TiCDC's throttle); ``flush_metadata`` bypasses it."""

_SCHEMA_LEVEL = frozenset({DDLType.CREATE_SCHEMA, DDLType.DROP_SCHEMA, DDLType.ALTER_SCHEMA})


class StorageSink(Sink):
    """Writes CSV or canal-json files, schema files and the ``metadata`` checkpoint."""

    scheme = "file"

    def __init__(self, uri: str, config: ReplicaConfig, changefeed_id: str = "default") -> None:
        super().__init__(uri, config, changefeed_id)
        self.settings = StorageSettings.from_uri(uri, config)
        self.scheme = self.settings.backend.scheme
        # Building the encoder validates the [sink.csv]/codec options now, on the driver.
        self.encoder = RowEncoder(self.settings.protocol, config, self.settings.enable_tidb_extension)
        self._last_metadata_time = 0.0
        self._last_checkpoint: int | None = None
        self._pending_checkpoint: int | None = None
        self._published: int | None = None
        """The ``checkpoint-ts`` in ``metadata`` (read before the first write; 0 when there is none)."""

    @property
    def num_writers(self) -> int:
        """``worker-count``: rows are grouped by crc32(schema‖table) % worker-count."""
        return self.settings.worker_count

    @property
    def batch_interval(self) -> float | None:
        """``flush-interval`` in seconds when given: batches, so files, are cut at most this often."""
        return self.settings.flush_interval

    @property
    def backend(self) -> Any:
        """The storage backend (root + fsspec filesystem)."""
        return self.settings.backend

    def check(self) -> None:
        """Reach the storage (a local directory is created; a bucket must exist)."""
        self.settings.backend.check()

    def apply_ddl(self, ddl: DDLEvent) -> None:
        """Write the DDL's table or database schema file."""
        version = ddl.table_version or ddl.commit_ts
        if ddl.table_version != version:
            ddl = _with_version(ddl, version)
        if ddl.ddl_type in _SCHEMA_LEVEL or not ddl.table:
            d = TableDefinition.from_ddl(_schema_level(ddl), None, self.settings.output_column_id)
        else:
            info = ddl.table_info
            d = TableDefinition.from_ddl(ddl, info, self.settings.output_column_id)
            if info is None:
                # DROP TABLE/VIEW carry no new shape; TiCDC writes the dropped table's columns.
                prev = self._latest_table_definition(ddl.schema, ddl.table)
                if prev is not None:
                    d.columns, d.total_columns = prev.columns, prev.total_columns
        path = d.path()
        self.settings.backend.write(path, d.marshal())
        log.info("storage sink: wrote schema file %s for DDL %r", path, ddl.query)

    def _latest_table_definition(self, schema: str, table: str) -> TableDefinition | None:
        meta = schema_meta_dir(schema, table)
        best: tuple[int, str] | None = None
        for name in self.settings.backend.list_dir(meta):
            parsed = parse_schema_file_path(f"{meta}/{name}")
            if parsed and (best is None or parsed[2] > best[0]):
                best = (parsed[2], f"{meta}/{name}")
        if best is None:
            return None
        data = self.settings.backend.read(best[1])
        return TableDefinition.parse(data, best[1]) if data else None

    def open_writer(self, ctx: WriterContext) -> PartitionWriter:
        """A writer for one route group of one batch."""
        return StorageWriter(self.settings, ctx, self.encoder)

    def commit(self, batch_id: int, messages: list[dict[str, Any]], checkpoint_ts: int) -> None:
        """Publish staged files in segment order, then record ``checkpoint_ts`` in ``metadata``.

        ``metadata`` is written every 2 s, on the local clock or the checkpoint's (``_metadata_due``).
        """
        staged = [entry for m in messages for entry in m.get("staged", ())]
        if staged:
            publish_staged(self.settings, staged, checkpoint_ts)
            # Also drops what failed task attempts of this batch left behind.
            self.settings.backend.remove_tree(staging_dir(self.changefeed_id, batch_id))
        files = sum(len(m.get("files", ())) + len(m.get("staged", ())) for m in messages)
        rows = sum(int(m.get("rows", 0)) for m in messages)
        log.debug("storage sink: batch %d committed %d rows in %d files", batch_id, rows, files)
        if not self._metadata_due(checkpoint_ts):
            self._pending_checkpoint = checkpoint_ts
            return
        self.flush_metadata(checkpoint_ts)

    def _metadata_due(self, checkpoint_ts: int) -> bool:
        """Whether ``checkpoint_ts`` goes to ``metadata`` now: METADATA_MIN_INTERVAL passed on the
        local clock or in the checkpoint's physical time since the last file.

        The second test keeps an idle changefeed's file one interval behind its checkpoint: its
        batches commit once per upstream second, and the local clock alone lets the commit that
        lands just short of the interval go by, so a file could wait for a third commit.
        """
        if time.monotonic() - self._last_metadata_time >= METADATA_MIN_INTERVAL:
            return True
        last = self._last_checkpoint
        return last is None or physical_ms(checkpoint_ts) - physical_ms(last) >= METADATA_MIN_INTERVAL * 1000

    @property
    def capabilities(self) -> SinkCapabilities:
        backend = self.settings.backend
        return SinkCapabilities(
            segments="parallel",
            resume_evidence="the metadata file's checkpoint-ts",
            idempotence="a batch written again skips the records its data files already hold (by commit_ts)",
            executors_write_files=backend if backend.scheme == "file" else None,
            upstream_rendered_csv=self.settings.protocol == "csv",
            resolved_every_s=METADATA_MIN_INTERVAL,
        )

    def published_checkpoint(self) -> int:
        """The ``checkpoint-ts`` of the ``metadata`` file in storage (0 when there is none yet).

        Read once, before the sink's first ``metadata`` write; then the sink's own last write.
        """
        if self._published is None:
            data = self.settings.backend.read(METADATA_FILE)
            if not data:
                self._published = 0
            else:
                try:
                    self._published = parse_metadata(data)
                except DecodeError as exc:
                    raise DecodeError(
                        f"{exc}; the storage sink's {METADATA_FILE} file at the root of "
                        f"{self.settings.backend.display or self.settings.backend.root} is not a checkpoint it can "
                        "guard: fix or "
                        "remove it (the next commit writes it again)"
                    ) from exc
                log.info(
                    "storage sink: %s already holds checkpoint-ts %d; it is only ever moved forward",
                    METADATA_FILE,
                    self._published,
                )
        return self._published

    def flush_metadata(self, checkpoint_ts: int | None = None) -> None:
        """Write ``metadata`` now (the last throttled checkpoint when ``checkpoint_ts`` is None).

        A value at or below the published ``checkpoint-ts`` is not written: the mark never goes back.
        """
        ts = checkpoint_ts if checkpoint_ts is not None else self._pending_checkpoint
        if ts is None:
            return
        published = self.published_checkpoint()
        if ts <= published:
            if ts < published:
                log.info(
                    "storage sink: checkpoint-ts %d is behind the published %d (a replay); %s unchanged",
                    ts,
                    published,
                    METADATA_FILE,
                )
            self._last_checkpoint = ts
            self._pending_checkpoint = None
            return
        # The throttle counts from the start of a write, so a slow write (an fsync, a PUT) does not
        # stretch the interval between two ``metadata`` files.
        started = time.monotonic()
        self.settings.backend.write(METADATA_FILE, metadata_body(ts))
        self._last_metadata_time = started
        log.debug("storage sink: metadata checkpoint-ts %d written in %.3fs", ts, time.monotonic() - started)
        self._last_checkpoint = ts
        self._published = ts
        self._pending_checkpoint = None

    def close(self) -> None:
        """Write a checkpoint that the throttle held back."""
        if self._pending_checkpoint is not None:
            self.flush_metadata()


def _with_version(ddl: DDLEvent, version: int) -> DDLEvent:
    return dataclasses.replace(ddl, table_version=version)


def _schema_level(ddl: DDLEvent) -> DDLEvent:
    return dataclasses.replace(ddl, table="", table_info=None)
