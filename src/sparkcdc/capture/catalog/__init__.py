"""The schema catalog: the current shape of every captured table, kept in step with DDL.

``SchemaCatalog`` is loaded from the upstream (``SHOW CREATE TABLE``) when capture
starts and then follows every DDL statement the binlog carries
(``apply_ddl``), producing the ``DDLEvent`` each statement means. Shapes are
exactly what MariaDB 10.11 reports, so ``reconcile`` can hold them against the
binlog's table maps and fail loudly on any drift.

Names follow ``lower_case_table_names=0``: databases and tables are
case-sensitive, columns and indexes are not.

The package owns:

- ``SchemaCatalog`` (here): the tracked databases and tables, loading from the
  upstream, persistence (``to_dict``/``from_dict``) and ``apply_ddl``;
- ``table``: one table's shape from CREATE TABLE (``build_table``,
  ``parse_create_table``, ``TableMeta``) and the working copy an ALTER edits;
- ``apply``: what each DDL statement does to the catalog and the ``DDLEvent`` it yields;
- ``table_maps``: ``reconcile``, the tracked shape held against a binlog table map;
- ``scope``: the tables a DDL writes, so that a table the changefeed's filter leaves out
  (``captured``) never fails it: its shape is skipped at load, its failing DDL forgotten.

It imports the DDL parser (``sparkcdc.capture.ddl``), ``sparkcdc.model`` and
``sparkcdc.errors``, nothing else from sparkcdc. This module imports its submodules;
they name ``SchemaCatalog`` only for type checking, so the imports form no cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sparkcdc.capture.catalog.apply import DDLApplier, alter_table_charset
from sparkcdc.capture.catalog.scope import TableMatch, outside, unparsed_table, written_tables
from sparkcdc.capture.catalog.table import (
    MAX_KEY_BYTES,
    IndexFlags,
    TableMeta,
    build_table,
    parse_create_table,
    parse_create_table_meta,
    qualified,
    table_charset,
)
from sparkcdc.capture.catalog.table_maps import BINLOG_TYPES, reconcile
from sparkcdc.capture.ddl import (
    SERVER_CHARSET,
    AlterTable,
    CreateTable,
    Ignored,
    parse_statement,
    quote_ident,
    resolve_charset,
)
from sparkcdc.errors import SchemaError
from sparkcdc.model.events import DDLEvent
from sparkcdc.model.schema import TableInfo

__all__ = [
    "BINLOG_TYPES",
    "MAX_KEY_BYTES",
    "SYSTEM_SCHEMAS",
    "IndexFlags",
    "SchemaCatalog",
    "TableMatch",
    "TableMeta",
    "build_table",
    "parse_create_table",
    "reconcile",
]

log = logging.getLogger(__name__)

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def show_create_table(cur: Any, schema: str, table: str) -> str:
    """The table's ``SHOW CREATE TABLE`` text, its raw bytes kept.

    The server prints the literals of binary columns (ENUM/SET elements, DEFAULTs) as the bytes
    they are, which need not be UTF-8 (``VARBINARY(4) DEFAULT 0xE9``). The text is read as bytes
    (``character_set_results = binary``: the server's UTF-8 text, unconverted) and decoded with
    ``surrogateescape``, so such a literal keeps its bytes where ``build_column`` reads it.
    """
    cur.execute("SELECT @@SESSION.character_set_results")
    row = cur.fetchone()
    results = row[0] if row else None
    cur.execute("SET SESSION character_set_results = binary")
    try:
        cur.execute(f"SHOW CREATE TABLE {qualified(schema, table)}")
        got = cur.fetchone()
    finally:
        cur.execute("SET SESSION character_set_results = %s", (results,))
    text = got[1]
    return text.decode("utf-8", "surrogateescape") if isinstance(text, bytes | bytearray) else str(text)


class SchemaCatalog:
    """The current shape of every tracked table, and the set of databases."""

    def __init__(
        self,
        *,
        server_charset: str = SERVER_CHARSET,
        server_collation: str | None = None,
        scope: Iterable[str] | None = None,
        captured: TableMatch | None = None,
    ) -> None:
        """``captured``: the changefeed's table filter; None captures every table (any failure fails)."""
        resolved = resolve_charset(server_charset, server_collation, None)
        assert resolved is not None
        self.server_charset, self.server_collation = resolved
        self.scope: frozenset[str] | None = frozenset(scope) if scope is not None else None
        """The databases this catalog follows (None: every non-system database)."""
        self._dbs: dict[str, tuple[str, str]] = {}
        self._tables: dict[tuple[str, str], TableInfo] = {}
        self._meta: dict[tuple[str, str], TableMeta] = {}
        self.applied_ts = 0
        """The commit_ts the catalog is current at: its load version or the last DDL applied."""
        self.captured = captured
        """The changefeed's table filter (not persisted): a table outside it never fails the catalog."""
        self.forgotten: list[tuple[str, str]] = []
        """The tables the last ``apply_ddl`` forgot: outside the filter, their DDL failed to apply."""

    # -- reading -----------------------------------------------------------------------------
    def get(self, schema: str, table: str) -> TableInfo | None:
        """The table's current shape, None if not tracked."""
        return self._tables.get((schema, table))

    def meta(self, schema: str, table: str) -> TableMeta | None:
        """The table's default collation and index flags (what TableInfo does not carry)."""
        return self._meta.get((schema, table))

    def tables(self) -> list[TableInfo]:
        """Every tracked table, sorted by (schema, table)."""
        return [self._tables[k] for k in sorted(self._tables)]

    def databases(self) -> set[str]:
        """The tracked databases."""
        return set(self._dbs)

    def database_charset(self, schema: str) -> tuple[str, str] | None:
        """(charset, collation) defaults of a database, None if unknown."""
        return self._dbs.get(schema)

    def column_charset(self, st: Any, default_schema: str | None) -> tuple[str, str] | None:
        """The (charset, collation) a column of the ``CREATE TABLE`` or ``ALTER TABLE`` ``st`` gets
        when it names none: the table's default as the statement leaves it (the database's for a
        new table). None when the catalog knows neither, or for another statement."""
        try:
            if isinstance(st, CreateTable) and st.like is None:
                schema, _ = st.name.resolve(default_schema, "")
                db = self._dbs.get(schema)
                if db is None:
                    return None
                return resolve_charset(st.options.charset, st.options.collation, db) or db
            if isinstance(st, AlterTable):
                schema, table = st.name.resolve(default_schema, "")
                info = self._tables.get((schema, table))
                if info is None:
                    return None
                return alter_table_charset(
                    st, table_charset(info, self._meta.get((schema, table)) or TableMeta())
                )
        except SchemaError:  # a table name without a database and no default one
            return None
        return None

    def tracks(self, schema: str) -> bool:
        """Whether DDL in this database is followed (not a system schema, inside the scope)."""
        if schema.lower() in SYSTEM_SCHEMAS:
            return False
        return self.scope is None or schema in self.scope

    # -- writing -----------------------------------------------------------------------------
    def add_database(self, name: str, charset: str | None = None, collation: str | None = None) -> None:
        """Register a database with its default charset/collation (server defaults if not given)."""
        resolved = resolve_charset(charset, collation, (self.server_charset, self.server_collation))
        assert resolved is not None
        self._dbs[name] = resolved

    def put(self, info: TableInfo, meta: TableMeta | None = None) -> None:
        """Track a table shape (its database is registered if new)."""
        if info.schema not in self._dbs:
            self.add_database(info.schema)
        key = (info.schema, info.table)
        self._tables[key] = info
        if meta is None:
            cs = info.charset or self.server_charset
            meta = TableMeta(resolve_charset(cs, None, None)[1])  # type: ignore[index]
        self._meta[key] = meta

    def _remove(self, schema: str, table: str) -> None:
        self._tables.pop((schema, table), None)
        self._meta.pop((schema, table), None)

    def remove(self, schema: str, table: str) -> None:
        """Forget a table's shape (a CREATE TABLE read from the binlog is about to define it again)."""
        self._remove(schema, table)

    @classmethod
    def load_from_upstream(
        cls,
        conn: Any,
        schemas: list[str] | None = None,
        version: int = 0,
        captured: TableMatch | None = None,
    ) -> SchemaCatalog:
        """Load every base table of the given (default: all non-system) databases via SHOW CREATE TABLE.

        A table whose definition cannot be read (a type sparkcdc does not know) fails the load
        with its name when ``captured`` selects it, and is left untracked when it does not.
        """
        with conn.cursor() as cur:
            cur.execute("SELECT @@character_set_server, @@collation_server")
            row = cur.fetchone()
            cat = cls(server_charset=row[0], server_collation=row[1], scope=schemas, captured=captured)
            cat.applied_ts = version
            cur.execute(
                "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA"
            )
            db_rows = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
            cur.execute("SHOW DATABASES")
            names = [r[0] for r in cur.fetchall()]
            wanted = [n for n in names if cat.tracks(n)]
            if schemas is not None:
                missing = sorted(set(schemas) - set(names))
                if missing:
                    raise SchemaError(
                        f"databases {missing} do not exist upstream; create them or remove them from the filter"
                    )
            for db in wanted:
                cs, co = db_rows.get(db, (cat.server_charset, cat.server_collation))
                cat.add_database(db, cs, co)
                cur.execute(f"SHOW FULL TABLES FROM {quote_ident(db)} WHERE Table_type = 'BASE TABLE'")
                tables = sorted(r[0] for r in cur.fetchall())
                for t in tables:
                    ddl = show_create_table(cur, db, t)
                    try:
                        info, meta = parse_create_table_meta(ddl, db, version, cs, co)
                    except SchemaError as e:
                        if not outside([(db, t)], captured):
                            raise SchemaError(
                                f"table {qualified(db, t)} cannot be captured: {e.message}"
                            ) from e
                        log.warning(
                            "table %s is not tracked (the changefeed's filter leaves it out): %s",
                            qualified(db, t),
                            e.message,
                        )
                        continue
                    cat.put(info, meta)
        return cat

    # -- persistence -------------------------------------------------------------------------
    def snapshot(self) -> SchemaCatalog:
        """An independent copy of the catalog."""
        cat = SchemaCatalog.from_dict(self.to_dict())
        cat.captured = self.captured
        return cat

    def to_dict(self) -> dict[str, Any]:
        """The whole catalog as a JSON-able dict."""
        return {
            "server_charset": self.server_charset,
            "server_collation": self.server_collation,
            "scope": sorted(self.scope) if self.scope is not None else None,
            "applied_ts": self.applied_ts,
            "databases": {k: list(v) for k, v in sorted(self._dbs.items())},
            "tables": [
                {"info": self._tables[k].to_dict(), "meta": self._meta[k].to_dict()}
                for k in sorted(self._tables)
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SchemaCatalog:
        """Inverse of ``to_dict``."""
        cat = cls(
            server_charset=d.get("server_charset", SERVER_CHARSET),
            server_collation=d.get("server_collation"),
            scope=d.get("scope"),
        )
        cat.applied_ts = int(d.get("applied_ts", 0))
        for name, (cs, co) in d.get("databases", {}).items():
            cat._dbs[name] = (cs, co)
        for t in d.get("tables", []):
            cat.put(TableInfo.from_dict(t["info"]), TableMeta.from_dict(t.get("meta")))
        return cat

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SchemaCatalog) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    # -- DDL ---------------------------------------------------------------------------------
    def apply_ddl(self, query: str, default_schema: str | None, commit_ts: int) -> list[DDLEvent]:
        """Apply one statement from a binlog QUERY event; return the DDLEvents it produced.

        Non-DDL statements (BEGIN, DML, GRANT, SET ...) return [] and change nothing.
        A DDL on a tracked database's table the catalog does not know raises SchemaError.
        A statement that cannot be parsed or applied, but writes only tables outside
        ``captured``, forgets those tables (``forgotten``) and returns [].
        """
        self.forgotten = []
        try:
            stmt = parse_statement(query)
        except SchemaError as e:
            one = unparsed_table(query, default_schema or None)
            if one is None or not outside([one], self.captured):
                raise
            return self._forget([one], query, commit_ts, e)
        if isinstance(stmt, Ignored):
            return []
        ctx = DDLApplier(self, query, default_schema or None, commit_ts)
        saved = (dict(self._dbs), dict(self._tables), dict(self._meta))
        try:
            events = ctx.run(stmt)
        except BaseException as e:
            # a statement applies entirely or not at all
            self._dbs, self._tables, self._meta = saved
            if isinstance(e, SchemaError):
                tables = written_tables(stmt, default_schema or None, query)
                if tables is not None and outside(tables, self.captured):
                    return self._forget(tables, query, commit_ts, e)
            raise
        self.applied_ts = max(self.applied_ts, commit_ts)
        return events

    def _forget(
        self, tables: list[tuple[str, str]], query: str, commit_ts: int, why: SchemaError
    ) -> list[DDLEvent]:
        """Stop tracking tables outside the filter whose DDL failed; their shape is unknown from here."""
        for key in tables:
            self._remove(*key)
        self.forgotten = list(dict.fromkeys(tables))
        self.applied_ts = max(self.applied_ts, commit_ts)
        log.warning(
            "DDL at commit_ts %d on %s, which the changefeed's filter leaves out, is not applied: %s",
            commit_ts,
            ", ".join(qualified(*k) for k in self.forgotten),
            why.message,
        )
        return []
