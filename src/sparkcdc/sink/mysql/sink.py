"""The MySQL sink: replicate into MySQL/MariaDB/TiDB with TiCDC's semantics.

- ``num_writers`` = ``worker-count``; rows are routed by table (the base
  default), so every row of a table goes through one writer, in commit order.
- Writers buffer rows and apply them in executors with ``MySQLApplier``
  (batched statements, downstream transactions of up to ``max-txn-row`` rows);
  ``close`` returns once everything is committed downstream.
- DDLs are applied on the driver, after every earlier row is committed.
- Rows with ``commit_ts <= replicating_ts`` are applied in safe mode (REPLACE),
  so replaying them after a restart is idempotent. ``replicating_ts`` defaults
  to the local clock when the sink is built (as TiCDC takes a fresh TSO when a
  table starts replicating): everything written before a restart is older. The
  pipeline may set it explicitly (e.g. from the upstream's current position).
  Later rows use INSERT/UPDATE/DELETE, and a duplicate key there re-applies the
  downstream transaction in safe mode.
- With ``progress-table=true`` (the default) each downstream transaction also
  records the last applied ``(commit_ts, seq)`` per table in
  ``sparkcdc.mysql_sink_progress`` (key: changefeed id, schema, table), and
  rows at or below it are skipped: a replayed batch is applied exactly once,
  tables without a primary key included. Re-creating a changefeed under the
  same id to re-apply old rows needs those progress rows deleted first.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sparkcdc.errors import SinkUnavailable
from sparkcdc.model.ts import now_ts
from sparkcdc.sink.base import PartitionWriter, Sink, SinkCapabilities, WriterContext
from sparkcdc.sink.mysql.config import parse_mysql_sink
from sparkcdc.sink.mysql.connection import classify, connect
from sparkcdc.sink.mysql.writer import MySQLWriter, make_applier

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.model import DDLEvent
    from sparkcdc.sink.mysql.applier import MySQLApplier

log = logging.getLogger(__name__)


class MySQLSink(Sink):
    """``mysql[+ssl]://`` and ``tidb[+ssl]://`` sinks (see the module docstring)."""

    scheme = "mysql"

    def __init__(self, uri: str, config: ReplicaConfig, changefeed_id: str = "default") -> None:
        super().__init__(uri, config, changefeed_id)
        self.settings = parse_mysql_sink(uri, config)
        self.replicating_ts: int | None = int(now_ts())
        self._ddl_applier: MySQLApplier | None = None
        self._last_ddl: tuple[int, str] | None = None
        """(commit_ts, query) of the DDL run last (one statement may come as an event per table)."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_ddl_applier"] = None  # a driver-side connection never travels to executors
        return state

    @property
    def num_writers(self) -> int:
        """One writer per ``worker-count``."""
        return self.settings.worker_count

    @property
    def capabilities(self) -> SinkCapabilities:
        if self.settings.progress_table:
            return SinkCapabilities(
                resume_evidence="the progress table (the last commit_ts and seq applied per table)",
                idempotence="rows at or below a table's progress row are skipped",
            )
        return SinkCapabilities(
            idempotence="rows older than the sink's start are applied in safe mode (REPLACE)"
        )

    def check(self) -> None:
        """Connect once: wrong credentials, an unreachable host or an unknown time zone fail here."""
        try:
            conn, used = connect(self.settings.conn, autocommit=True)
        except SinkUnavailable as exc:
            raise SinkUnavailable(
                f"cannot reach the MySQL sink {self.settings.uri_redacted}: {exc.message}. Check the host "
                "and port in the sink URI and that the server is running"
            ) from exc
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                row = cur.fetchone()
                log.info(
                    "MySQL sink %s: downstream version %s", self.settings.uri_redacted, row[0] if row else "?"
                )
        except Exception as exc:
            raise classify(exc, f"checking the MySQL sink {self.settings.uri_redacted}") from exc
        finally:
            conn.close()
        if used.password != self.settings.conn.password:
            log.info("MySQL sink %s: the password was base64-encoded", self.settings.uri_redacted)
            self.settings = replace(self.settings, conn=used)
        if self.settings.progress_table:
            applier = make_applier(self.settings, self.changefeed_id)
            try:
                applier.ensure_progress_table()
            except Exception as exc:
                err = classify(
                    exc, f"creating the progress table on the MySQL sink {self.settings.uri_redacted}"
                )
                raise type(err)(
                    f"{err.message}. Grant CREATE/INSERT/UPDATE/SELECT on the `sparkcdc` schema to the sink "
                    "user, or add progress-table=false to the sink URI (replays then rely on safe mode)"
                ) from exc
            finally:
                applier.close()

    def apply_ddl(self, ddl: DDLEvent) -> None:
        """Run the DDL downstream in its schema (already-applied DDLs are skipped).

        A statement that changes several tables (RENAME TABLE a TO b, c TO d; EXCHANGE PARTITION)
        comes as one event per table with the same query and commit_ts: it runs once.
        """
        key = (ddl.commit_ts, ddl.query)
        if key == self._last_ddl:
            return
        if self._ddl_applier is None:
            self._ddl_applier = make_applier(self.settings)
        self._ddl_applier.apply_ddl(ddl.schema or None, ddl.query, ddl.sql_mode)
        self._last_ddl = key

    def open_writer(self, ctx: WriterContext) -> PartitionWriter:
        """A writer applying one route group of one batch."""
        return MySQLWriter(self.settings, ctx, self.replicating_ts)

    def close(self) -> None:
        """Close the driver's DDL connection."""
        if self._ddl_applier is not None:
            self._ddl_applier.close()
            self._ddl_applier = None
