"""The canal-json encoders: one message per row change, DDL or watermark.

``CanalJsonEncoder`` is the production encoder: it writes row messages with the
C extension (``native``) and takes the reference (``reference.render_columns``)
only when the extension is not built or, row by row, when the C code answers
that it does not take an image. ``ReferenceCanalJsonEncoder`` renders every row
with the reference; the equivalence tests compare the two byte for byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sparkcdc.codec.base import CodecOptions, Encoder, KeyValue, RowsEncoder
from sparkcdc.codec.canal_json.messages import ddl_message, watermark_message
from sparkcdc.codec.canal_json.native import NativeRows, native_rows
from sparkcdc.codec.canal_json.reference import TableLayout, json_str, render_columns
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model.events import DDLEvent, RowChange
from sparkcdc.model.schema import TableInfo

_MAX_TABLES = 4096
"""Per-table state kept at most (the cache is emptied beyond it)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _TableRows:
    """One table's row messages for one encoder: its layout and, when built, its C renderers."""

    __slots__ = ("layout", "name", "native", "schema", "table")

    def __init__(self, layout: TableLayout, native: NativeRows | None) -> None:
        self.layout = layout
        self.native = native
        self.table = layout.table
        self.schema = layout.schema
        self.name = layout.name


class ReferenceCanalJsonEncoder(Encoder):
    """Encodes row changes, DDLs and watermarks as TiCDC canal-json messages (one message each).

    Rows are rendered by the Python reference (``reference.render_columns``);
    ``CanalJsonEncoder`` writes the same bytes with the C extension.
    """

    protocol = "canal-json"

    @classmethod
    def build(cls, config: ReplicaConfig, options: CodecOptions) -> ReferenceCanalJsonEncoder:
        """The encoder of a sink (``codec.base.build_encoder``)."""
        return cls(
            config,
            options.enable_tidb_extension,
            only_output_updated_columns=options.only_output_updated_columns,
            content_compatible=options.content_compatible,
        )

    def __init__(
        self,
        config: ReplicaConfig | None = None,
        enable_tidb_extension: bool = False,
        *,
        only_output_updated_columns: bool | None = None,
        content_compatible: bool | None = None,
        delete_only_output_handle_key_columns: bool | None = None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        sink = (config or ReplicaConfig()).sink
        self.enable_tidb_extension = enable_tidb_extension
        self.content_compatible = (
            sink.content_compatible if content_compatible is None else content_compatible
        )
        only_updated = (
            sink.only_output_updated_columns
            if only_output_updated_columns is None
            else only_output_updated_columns
        )
        # content-compatible forces only-output-updated-columns (TiCDC mergeConfig).
        self.only_output_updated_columns = only_updated or self.content_compatible
        self.delete_only_output_handle_key_columns = (
            sink.delete_only_output_handle_key_columns
            if delete_only_output_handle_key_columns is None
            else delete_only_output_handle_key_columns
        )
        self._now_ms = now_ms or _now_ms
        self._tables: dict[int, _TableRows] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_tables"] = {}
        return state

    # -------------------------------------------------------------- rows

    def _native_rows(self, layout: TableLayout) -> NativeRows | None:
        """No C renderer: every row is rendered by the reference."""
        return None

    def _table_rows(self, row: RowChange, table: TableInfo) -> _TableRows:
        rows = self._tables.get(id(table))
        if rows is None or rows.table is not table or rows.schema != row.schema or rows.name != row.table:
            if len(table.columns) == 0:
                raise DecodeError(
                    f"table {row.schema}.{row.table} has no columns; cannot encode a canal-json row"
                )
            layout = TableLayout(table, row.schema, row.table, self.content_compatible)
            rows = _TableRows(layout, self._native_rows(layout))
            if len(self._tables) > _MAX_TABLES:
                self._tables.clear()
            self._tables[id(table)] = rows
        return rows

    def encode_row(self, row: RowChange, table: TableInfo) -> bytes:
        """One canal-json DML message for a row change."""
        rows = self._tables.get(id(table))
        if rows is None or rows.table is not table or rows.schema != row.schema or rows.name != row.table:
            rows = self._table_rows(row, table)
        return self._encode(rows, row, None)

    def messages(self, row: RowChange, table: TableInfo, topic: str = "") -> list[KeyValue]:
        """One message, key null."""
        return [(None, self.encode_row(row, table))]

    def value_encoder(self, row: RowChange, table: TableInfo) -> Callable[[RowChange], bytes]:
        """``row_encoder``: every canal-json row is one keyless message."""
        return self.row_encoder(row, table)

    def row_encoder(self, row: RowChange, table: TableInfo) -> Callable[[RowChange], bytes]:
        """``encode_row`` bound to one table: for rows with the same schema, table name and ``table``."""
        rows = self._table_rows(row, table)
        encode = self._encode

        def encode_table_row(r: RowChange) -> bytes:
            return encode(rows, r, None)

        return encode_table_row

    def rows_encoder(self, row: RowChange, table: TableInfo) -> RowsEncoder:
        """``row_encoder`` for lists of row changes that share ``row``'s commit_ts (a run of one transaction).

        With the C renderer, a list is one call (``Columns.messages``) that writes every INSERT,
        DELETE and UPDATE message from prefixes made once per list; a row it does not take (another
        commit_ts, an UNSIGNED value that changes the ``sqlType``, only-output-updated-columns
        UPDATEs, handle-key-only DELETEs, odd images) is rendered by ``encode_row``'s path.
        """
        rows = self._table_rows(row, table)
        encode = self._encode

        def encode_one(r: RowChange) -> bytes:
            return encode(rows, r, None)

        native = rows.native
        if native is None:

            def encode_each(rs: list[RowChange]) -> list[bytes]:
                return [encode(rows, r, None) for r in rs]

            return encode_each
        layout = rows.layout
        columns = native.all
        promotions = layout.promotions
        sql_type = layout.static_sql_type(False)
        updates = not self.only_output_updated_columns
        deletes = not self.delete_only_output_handle_key_columns
        head, tail_of = self._head, self._tail

        def encode_rows(rs: list[RowChange]) -> list[bytes]:
            if not rs:
                return []
            ts = rs[0].commit_ts
            insert = head(layout, "INSERT", ts, sql_type, False) + 'null,"data":[{'
            update = head(layout, "UPDATE", ts, sql_type, False) + "[{" if updates else None
            delete = head(layout, "DELETE", ts, sql_type, False) + 'null,"data":[{' if deletes else None
            return columns.messages(
                rs, ts, insert, update, delete, '}],"data":[{', tail_of(ts, None), promotions, encode_one
            )

        return encode_rows

    def encode_row_handle_key_only(self, row: RowChange, table: TableInfo) -> bytes:
        """The large-message form: only handle-key columns and ``_tidb.onlyHandleKey=true``."""
        self._require_extension("large-message-handle-option=handle-key-only")
        return self._encode(self._table_rows(row, table), row, ',"onlyHandleKey":true')

    def encode_row_claim_check(self, row: RowChange, table: TableInfo, location: str) -> bytes:
        """The claim-check form: only handle-key columns and ``_tidb.claimCheckLocation``."""
        self._require_extension("large-message-handle-option=claim-check")
        return self._encode(self._table_rows(row, table), row, ',"claimCheckLocation":' + json_str(location))

    def _require_extension(self, what: str) -> None:
        if not self.enable_tidb_extension:
            raise ConfigError(
                f"canal-json {what} needs the TiDB extension; set enable-tidb-extension=true "
                "in the sink URI or [sink.kafka-config.codec-config]"
            )

    def _head(self, layout: TableLayout, kind: str, ts: int, sql_type: str, only_handle: bool) -> str:
        """A DML message up to its ``old`` value: ``{"id":0,…,"type":"<kind>",…,"old":``."""
        return (
            f'{layout.head}{kind}","es":{ts >> 18},"ts":{self._now_ms()},"sql":"",'
            f'"sqlType":{sql_type},"mysqlType":{layout.mysql_type[only_handle]},"old":'
        )

    def _tail(self, ts: int, too_large: str | None) -> str:
        """A DML message after its ``data`` columns (``too_large``: a large-message form's ``_tidb`` fields)."""
        if self.enable_tidb_extension:
            return f'}}],"_tidb":{{"commitTs":{ts}{too_large or ""}}}}}'
        return "}]}"

    def _encode(self, rows: _TableRows, row: RowChange, too_large: str | None) -> bytes:
        """The message: everything but the ``old`` and ``data`` columns here, those by the renderer.

        ``too_large``: None, or the ``_tidb`` fields of a large-message form (which
        lists only the handle-key columns).
        """
        layout = rows.layout
        op = row.op
        before = None
        if op == "D":
            image = row.before
            kind = "DELETE"
            only_handle = too_large is not None or self.delete_only_output_handle_key_columns
        else:
            image = row.after
            if op == "I" or row.before is None:
                kind = "INSERT"
            else:
                kind = "UPDATE"
                before = row.before
            only_handle = too_large is not None
        if image is None:
            raise DecodeError(
                f"{kind} row change for {row.schema}.{row.table} at commit_ts {row.commit_ts} has no "
                f"{'pre' if op == 'D' else 'post'}-image; the capture must emit full row images"
            )
        ts = row.commit_ts
        head = self._head(layout, kind, ts, layout.sql_type(image, only_handle), only_handle)
        tail = self._tail(ts, too_large)
        native = rows.native
        if native is not None:
            columns = native.handle if only_handle else native.all
            if before is None:
                out = columns.message(head + 'null,"data":[{', None, "", image, tail)
            elif self.only_output_updated_columns:
                out = columns.message_changed(head + "[{", before, '}],"data":[{', image, tail)
            else:
                out = columns.message(head + "[{", before, '}],"data":[{', image, tail)
            if out is not None:
                return out
            # None: the C code does not take this image (not a tuple of the table's width)
        changed_only = self.only_output_updated_columns
        return render_columns(layout.columns(only_handle), head, before, image, changed_only, tail)

    # -------------------------------------------------------------- DDL / watermark

    def encode_ddl(self, ddl: DDLEvent) -> bytes:
        """One canal-json DDL message."""
        return ddl_message(ddl, self._now_ms(), self.enable_tidb_extension)

    def encode_watermark(self, ts: int) -> bytes | None:
        """A TIDB_WATERMARK message (None when the TiDB extension is off: TiCDC sends none)."""
        if not self.enable_tidb_extension:
            return None
        return watermark_message(ts, self._now_ms())


class CanalJsonEncoder(ReferenceCanalJsonEncoder):
    """The canal-json encoder: the reference's messages, rows written by the C extension when it is built."""

    def _native_rows(self, layout: TableLayout) -> NativeRows | None:
        """The C renderers of the table (None when the extension is not built: rows take the reference)."""
        return native_rows(layout)
