"""Executor side of the MySQL sink: ``MySQLWriter`` applies one route group's rows.

A writer buffers rows and hands them to a ``MySQLApplier`` at transaction boundaries (batched
statements, downstream transactions of up to ``max-txn-row`` rows); ``close()`` returns once
everything is committed downstream. ``make_applier`` builds that applier from the sink's settings
(the driver's DDL applier too), ``applier_from_uri`` from a sink URI (for the consumers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.base import PartitionWriter, WriterContext
from sparkcdc.sink.mysql.applier import MySQLApplier, Pair
from sparkcdc.sink.mysql.config import MySQLSinkSettings, parse_mysql_sink

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig


def make_applier(settings: MySQLSinkSettings, progress_id: str | None = None) -> MySQLApplier:
    """An applier configured from the sink settings (``progress_id`` enables the progress table)."""
    return MySQLApplier(
        settings.conn,
        safe_mode=settings.safe_mode,
        max_txn_row=settings.max_txn_row,
        split_txn=settings.transaction_atomicity != "table",
        batch_dml=settings.batch_dml,
        multi_statement=settings.multi_statement,
        max_multi_update_row=settings.max_multi_update_row,
        progress_id=progress_id if settings.progress_table else None,
    )


def applier_from_uri(uri: str, config: ReplicaConfig | None = None) -> MySQLApplier:
    """An applier for a ``mysql://`` URI with the sink's parameters (for the consumers)."""
    from sparkcdc.config.replica import ReplicaConfig

    return make_applier(parse_mysql_sink(uri, config or ReplicaConfig()))


class MySQLWriter(PartitionWriter):
    """Buffers one route group's rows and applies them at transaction boundaries."""

    def __init__(self, settings: MySQLSinkSettings, ctx: WriterContext, replicating_ts: int | None) -> None:
        self.ctx = ctx
        self.replicating_ts = replicating_ts
        self.applier = make_applier(settings, ctx.changefeed_id)
        self.flush_rows = max(1024, 4 * settings.max_txn_row)
        self.buf: list[Pair] = []
        self.rows = 0
        self.max_commit_ts = 0

    def write(self, row: RowChange, table: TableInfo) -> None:
        """Buffer one row; apply the buffer first when it is full and a new transaction starts."""
        if len(self.buf) >= self.flush_rows and row.commit_ts != self.buf[-1][0].commit_ts:
            self._flush()
        self.buf.append((row, table))

    def _flush(self) -> None:
        if not self.buf:
            return
        self.rows += self.applier.apply_rows(self.buf, self.replicating_ts)
        self.max_commit_ts = max(self.max_commit_ts, self.buf[-1][0].commit_ts)
        self.buf = []

    def close(self) -> dict[str, Any]:
        """Apply what is left and report what was written."""
        try:
            self._flush()
            stats = self.applier.stats
            return {
                "writer_id": self.ctx.writer_id,
                "rows": self.rows,
                "max_commit_ts": self.max_commit_ts,
                "txns": stats.txns,
                "safe_retries": stats.safe_retries,
                "retries": stats.retries,
                "rows_skipped": stats.rows_skipped,
            }
        finally:
            self.applier.close()

    def abort(self) -> None:
        """Drop the buffer and the connection (uncommitted work rolls back downstream)."""
        self.buf = []
        self.applier.close()
