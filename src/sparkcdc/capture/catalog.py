"""The schema catalog: the current shape of every captured table, kept in step with DDL.

``SchemaCatalog`` is loaded from the upstream (``SHOW CREATE TABLE``) when capture
starts and then follows every DDL statement the binlog carries
(``apply_ddl``), producing the ``DDLEvent`` each statement means. Shapes are
exactly what MariaDB 10.11 reports, so ``reconcile`` can hold them against the
binlog's table maps and fail loudly on any drift.

Names follow ``lower_case_table_names=0``: databases and tables are
case-sensitive, columns and indexes are not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sparkcdc.capture.ddl import (
    CHARSET_TYPES,
    SERVER_CHARSET,
    SERVER_COLLATION,
    TEXT_MAX_BYTES,
    AlterDatabase,
    AlterSpec,
    AlterTable,
    ColumnDef,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropDatabase,
    DropIndex,
    DropTable,
    Ignored,
    IndexDef,
    RenameTable,
    TableName,
    TruncateTable,
    ViewStmt,
    _clip,
    build_column,
    mbmaxlen,
    normalize_default,
    parse_statement,
    quote_ident,
    resolve_charset,
    text_type_for_bytes,
    with_default,
)
from sparkcdc.errors import SchemaError
from sparkcdc.model.events import DDLEvent, DDLType
from sparkcdc.model.schema import ColumnInfo, IndexInfo, TableInfo

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

# InnoDB's largest index key (DYNAMIC row format); a UNIQUE key over more becomes a hash key.
MAX_KEY_BYTES = 3072


def _q(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


# --------------------------------------------------------------------------------------------
# Table facts TableInfo does not carry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexFlags:
    """Index facts that decide MariaDB's key order but are not in IndexInfo."""

    partial: bool = False
    long_hash: bool = False
    fulltext: bool = False
    generated: bool = False
    """Created by the server for a FOREIGN KEY; dropped when another index covers it."""


@dataclass(slots=True)
class TableMeta:
    """Per-table facts the catalog needs to apply later DDL: default collation and index flags."""

    collation: str | None = None
    index_flags: dict[str, IndexFlags] = field(default_factory=dict)
    """Keyed by lower-case index name."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "collation": self.collation,
            "index_flags": {
                k: [f.partial, f.long_hash, f.fulltext, f.generated]
                for k, f in self.index_flags.items()
                if f != IndexFlags()
            },
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TableMeta:
        """Inverse of ``to_dict``."""
        if not d:
            return cls()
        flags = {k: IndexFlags(*v) for k, v in (d.get("index_flags") or {}).items()}
        return cls(collation=d.get("collation"), index_flags=flags)


@dataclass(slots=True)
class _Idx:
    name: str
    columns: list[str]
    unique: bool = False
    primary: bool = False
    partial: bool = False
    long_hash: bool = False
    fulltext: bool = False
    generated_fk: bool = False


class _Work:
    """A mutable table while a statement is applied."""

    def __init__(
        self, schema: str, table: str, charset: str, collation: str, partitioned: bool = False
    ) -> None:
        self.schema = schema
        self.table = table
        self.columns: list[ColumnInfo] = []
        self.indexes: list[_Idx] = []
        self.charset = charset
        self.collation = collation
        self.partitioned = partitioned

    @classmethod
    def of(cls, info: TableInfo, meta: TableMeta) -> _Work:
        cs = info.charset or SERVER_CHARSET
        w = cls(info.schema, info.table, cs, meta.collation or resolve_charset(cs, None)[1], info.partitioned)  # type: ignore[index]
        w.columns = list(info.columns)
        for ix in info.indexes:
            f = meta.index_flags.get(ix.name.lower(), IndexFlags())
            w.indexes.append(
                _Idx(
                    ix.name,
                    list(ix.columns),
                    ix.unique,
                    ix.primary,
                    f.partial,
                    f.long_hash,
                    f.fulltext,
                    generated_fk=f.generated,
                )
            )
        return w

    # -- lookups ---------------------------------------------------------------------------
    def col_pos(self, name: str) -> int:
        n = name.lower()
        for i, c in enumerate(self.columns):
            if c.name.lower() == n:
                return i
        return -1

    def idx_pos(self, name: str) -> int:
        n = name.lower()
        for i, ix in enumerate(self.indexes):
            if ix.name.lower() == n:
                return i
        return -1

    def fail(self, what: str, query: str) -> SchemaError:
        return SchemaError(
            f"cannot apply DDL to {_q(self.schema, self.table)}: {what}; statement: {_clip(query)!r}. "
            "The tracked schema no longer matches the upstream: restart the changefeed from a new snapshot"
        )

    # -- columns ---------------------------------------------------------------------------
    def insert_column(self, col: ColumnInfo, position: tuple[str, str | None] | None, query: str) -> None:
        if position is None:
            self.columns.append(col)
        elif position[0] == "first":
            self.columns.insert(0, col)
        else:
            assert position[1] is not None
            p = self.col_pos(position[1])
            if p < 0:
                raise self.fail(f"AFTER column {position[1]!r} does not exist", query)
            self.columns.insert(p + 1, col)

    def rename_in_indexes(self, old: str, new: str) -> None:
        for ix in self.indexes:
            ix.columns = [new if c.lower() == old.lower() else c for c in ix.columns]

    # -- indexes ---------------------------------------------------------------------------
    def unique_index_name(self, base: str) -> str:
        names = {ix.name.lower() for ix in self.indexes}
        if base.lower() not in names and base.lower() != "primary":
            return base
        k = 2
        while f"{base}_{k}".lower() in names:
            k += 1
        return f"{base}_{k}"

    def add_index(self, idef: IndexDef, query: str) -> None:
        cols: list[str] = []
        partial = False
        nbytes = 0
        text_no_prefix = False
        for cname, prefix in idef.parts:
            p = self.col_pos(cname)
            if p < 0:
                raise self.fail(f"index column {cname!r} does not exist", query)
            col = self.columns[p]
            cols.append(col.name)
            nbytes += _key_bytes(col, prefix)
            if col.type in TEXT_MAX_BYTES or col.type in ("json", "geometry"):
                if prefix is None:
                    text_no_prefix = True
                else:
                    partial = True
            elif prefix is not None and col.length is not None and prefix < col.length:
                partial = True
        if idef.kind == "primary":
            if any(ix.primary for ix in self.indexes):
                raise self.fail("the table already has a PRIMARY KEY", query)
            self.indexes.append(_Idx("PRIMARY", cols, True, True, partial))
            return
        if idef.kind == "foreign":
            name = self.unique_index_name(idef.name or cols[0])
            self.indexes.append(_Idx(name, cols, generated_fk=True))
            return
        if idef.name is not None and self.idx_pos(idef.name) >= 0:
            if idef.if_not_exists:
                return
            raise self.fail(f"index {idef.name!r} already exists", query)
        # a generated FK index this one covers goes first, so its name is free again
        lc = [c.lower() for c in cols]
        self.indexes = [
            ix
            for ix in self.indexes
            if not (ix.generated_fk and [c.lower() for c in ix.columns] == lc[: len(ix.columns)])
        ]
        name = idef.name if idef.name is not None else self.unique_index_name(cols[0])
        unique = idef.kind == "unique"
        long_hash = unique and (idef.using_hash or text_no_prefix or nbytes > MAX_KEY_BYTES)
        self.indexes.append(_Idx(name, cols, unique, False, partial, long_hash, idef.kind == "fulltext"))

    def drop_index(self, name: str, if_exists: bool, query: str) -> None:
        p = self.idx_pos(name)
        if p < 0:
            if if_exists:
                return
            raise self.fail(f"index {name!r} does not exist", query)
        del self.indexes[p]

    def settle_foreign_key_indexes(self) -> None:
        """Drop FK-generated indexes another index covers (as MariaDB does, in CREATE and ALTER)."""
        keep: list[_Idx] = []
        for ix in self.indexes:
            if ix.generated_fk:
                lc = [c.lower() for c in ix.columns]
                covered = any(
                    other is not ix
                    and other in self.indexes
                    and not (other.generated_fk and len(other.columns) <= len(ix.columns))
                    and [c.lower() for c in other.columns[: len(lc)]] == lc
                    for other in self.indexes
                )
                if covered:
                    continue
            keep.append(ix)
        self.indexes = keep

    def adopt_foreign_key_index(self, idef: IndexDef) -> bool:
        """For a FOREIGN KEY next to an index that looks generated for it (SHOW CREATE TABLE prints
        generated indexes as plain KEYs named after the constraint or the first column), mark that
        index generated instead of adding another."""
        lc = [c.lower() for c, _ in idef.parts]
        first = lc[0]
        for ix in self.indexes:
            if ix.generated_fk or ix.unique or ix.fulltext or [c.lower() for c in ix.columns] != lc:
                continue
            n = ix.name.lower()
            if n == (idef.name or "").lower() or n == first or re.fullmatch(re.escape(first) + r"_\d+", n):
                ix.generated_fk = True
                return True
        return False

    def finish(self, version: int) -> tuple[TableInfo, TableMeta]:
        """Enforce PK NOT NULL, order indexes as MariaDB does, and freeze."""
        self.settle_foreign_key_indexes()
        pk = next((ix for ix in self.indexes if ix.primary), None)
        if pk is not None:
            pkl = {c.lower() for c in pk.columns}
            for i, c in enumerate(self.columns):
                if c.name.lower() in pkl and c.nullable:
                    self.columns[i] = with_default(replace(c, nullable=False), c.default)
        seen: set[str] = set()
        for c in self.columns:
            if c.name.lower() in seen:
                raise SchemaError(f"duplicate column {c.name!r} in {_q(self.schema, self.table)}")
            seen.add(c.name.lower())
        nullable = {c.name.lower(): c.nullable for c in self.columns}

        def sort_key(item: tuple[int, _Idx]) -> tuple[int, ...]:
            pos, ix = item
            if ix.unique:
                if ix.long_hash:
                    return (0, 1, 0, 0, 0, pos)
                null_part = any(nullable.get(c.lower(), True) for c in ix.columns) and not ix.primary
                return (0, 0, int(null_part), int(not ix.primary), int(ix.partial), pos)
            return (1, 0, 0, 0, int(ix.fulltext), pos)

        ordered = [ix for _, ix in sorted(enumerate(self.indexes), key=sort_key)]
        self.indexes = ordered
        info = TableInfo(
            schema=self.schema,
            table=self.table,
            columns=tuple(self.columns),
            indexes=tuple(IndexInfo(ix.name, tuple(ix.columns), ix.unique, ix.primary) for ix in ordered),
            version=version,
            charset=self.charset,
            partitioned=self.partitioned,
        )
        flags = {
            ix.name.lower(): IndexFlags(ix.partial, ix.long_hash, ix.fulltext, ix.generated_fk)
            for ix in ordered
            if ix.partial or ix.long_hash or ix.fulltext or ix.generated_fk
        }
        return info, TableMeta(self.collation, flags)


def _key_bytes(col: ColumnInfo, prefix: int | None) -> int:
    if col.type in ("char", "varchar") or col.type in CHARSET_TYPES:
        chars = prefix if prefix is not None else (col.length or 0)
        return chars * mbmaxlen(col.charset)
    if col.type in ("binary", "varbinary") or col.type in TEXT_MAX_BYTES:
        return prefix if prefix is not None else (col.length or 0)
    return 8


def _inline_indexes(cdef: ColumnDef) -> list[IndexDef]:
    out: list[IndexDef] = []
    if cdef.inline_primary:
        out.append(IndexDef("primary", "PRIMARY", [(cdef.name, None)]))
    if cdef.inline_unique:
        out.append(IndexDef("unique", None, [(cdef.name, None)]))
    if cdef.references:
        out.append(IndexDef("foreign", None, [(cdef.name, None)]))
    return out


def build_table(
    stmt: CreateTable, schema: str, db_default: tuple[str, str], version: int, query: str = ""
) -> tuple[TableInfo, TableMeta]:
    """The TableInfo (and catalog meta) a CREATE TABLE statement produces."""
    if stmt.options.as_select:
        raise SchemaError(
            f"CREATE TABLE ... SELECT is not supported by the schema tracker: {_clip(query)!r}; "
            "create the table first, then INSERT ... SELECT"
        )
    cs, co = resolve_charset(stmt.options.charset, stmt.options.collation, db_default) or db_default
    w = _Work(schema, stmt.name.name, cs, co, bool(stmt.options.partitioned))
    for item in stmt.items:
        if isinstance(item, ColumnDef):
            w.columns.append(build_column(item, (cs, co)))
    foreign: list[tuple[IndexDef, _Idx]] = []
    for item in stmt.items:
        for idef in _inline_indexes(item) if isinstance(item, ColumnDef) else [item]:
            w.add_index(idef, query)
            if idef.kind == "foreign":
                foreign.append((idef, w.indexes[-1]))
    # SHOW CREATE TABLE prints generated FK indexes as plain keys: recognise them
    for idef, generated in foreign:
        if w.adopt_foreign_key_index(idef):
            w.indexes.remove(generated)
    return w.finish(version)


def parse_create_table(
    sql: str,
    default_schema: str,
    version: int = 0,
    *,
    default_charset: str | None = None,
    default_collation: str | None = None,
) -> TableInfo:
    """Build a TableInfo from a CREATE TABLE statement (as users write it or SHOW CREATE TABLE prints it).

    ``default_charset``/``default_collation`` are the database defaults (utf8mb4 if not given).
    """
    info, _ = _parse_create_table_meta(sql, default_schema, version, default_charset, default_collation)
    return info


def _parse_create_table_meta(
    sql: str,
    default_schema: str,
    version: int,
    default_charset: str | None,
    default_collation: str | None,
) -> tuple[TableInfo, TableMeta]:
    stmt = parse_statement(sql)
    if not isinstance(stmt, CreateTable):
        raise SchemaError(f"not a CREATE TABLE statement: {_clip(sql)!r}")
    if stmt.like is not None:
        raise SchemaError(f"CREATE TABLE ... LIKE needs the source table's shape: {_clip(sql)!r}")
    schema, _ = stmt.name.resolve(default_schema, sql)
    db_default = resolve_charset(default_charset, default_collation, (SERVER_CHARSET, SERVER_COLLATION))
    assert db_default is not None
    return build_table(stmt, schema, db_default, version, sql)


# --------------------------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------------------------


class SchemaCatalog:
    """The current shape of every tracked table, and the set of databases."""

    def __init__(
        self,
        *,
        server_charset: str = SERVER_CHARSET,
        server_collation: str | None = None,
        scope: Iterable[str] | None = None,
    ) -> None:
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

    @classmethod
    def load_from_upstream(
        cls, conn: Any, schemas: list[str] | None = None, version: int = 0
    ) -> SchemaCatalog:
        """Load every base table of the given (default: all non-system) databases via SHOW CREATE TABLE."""
        with conn.cursor() as cur:
            cur.execute("SELECT @@character_set_server, @@collation_server")
            row = cur.fetchone()
            cat = cls(server_charset=row[0], server_collation=row[1], scope=schemas)
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
                    cur.execute(f"SHOW CREATE TABLE {_q(db, t)}")
                    ddl = cur.fetchone()[1]
                    info, meta = _parse_create_table_meta(ddl, db, version, cs, co)
                    cat.put(info, meta)
        return cat

    # -- persistence -------------------------------------------------------------------------
    def snapshot(self) -> SchemaCatalog:
        """An independent copy of the catalog."""
        return SchemaCatalog.from_dict(self.to_dict())

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
        """
        stmt = parse_statement(query)
        if isinstance(stmt, Ignored):
            return []
        ctx = _Apply(self, query, default_schema or None, commit_ts)
        saved = (dict(self._dbs), dict(self._tables), dict(self._meta))
        try:
            events = ctx.run(stmt)
        except BaseException:
            # a statement applies entirely or not at all
            self._dbs, self._tables, self._meta = saved
            raise
        self.applied_ts = max(self.applied_ts, commit_ts)
        return events


class _Apply:
    """Applies one parsed statement to a catalog."""

    def __init__(self, cat: SchemaCatalog, query: str, default_schema: str | None, ts: int) -> None:
        self.cat = cat
        self.query = query
        self.default_schema = default_schema
        self.ts = ts

    def event(
        self,
        ddl_type: DDLType,
        schema: str,
        table: str = "",
        info: TableInfo | None = None,
        old: tuple[str, str] | None = None,
    ) -> DDLEvent:
        return DDLEvent(
            query=self.query,
            schema=schema,
            table=table,
            ddl_type=ddl_type,
            commit_ts=self.ts,
            table_version=self.ts,
            table_info=info,
            old_schema=old[0] if old else None,
            old_table=old[1] if old else None,
        )

    def unknown(self, schema: str, table: str) -> SchemaError:
        return SchemaError(
            f"DDL on table {_q(schema, table)}, which the schema catalog does not know: "
            f"{_clip(self.query)!r}. The table was probably created before capture started and was not "
            "loaded; restart the changefeed so the catalog is reloaded from the upstream"
        )

    def resolve(self, name: TableName) -> tuple[str, str]:
        return name.resolve(self.default_schema, self.query)

    def db_default(self, schema: str) -> tuple[str, str]:
        d = self.cat.database_charset(schema)
        if d is None:
            raise SchemaError(
                f"database {quote_ident(schema)} is not known to the schema catalog: {_clip(self.query)!r}; "
                "restart the changefeed so the catalog is reloaded from the upstream"
            )
        return d

    def run(self, st: Any) -> list[DDLEvent]:
        if isinstance(st, CreateDatabase):
            return self.create_database(st)
        if isinstance(st, AlterDatabase):
            return self.alter_database(st)
        if isinstance(st, DropDatabase):
            return self.drop_database(st)
        if isinstance(st, CreateTable):
            return self.create_table(st)
        if isinstance(st, DropTable):
            return self.drop_table(st)
        if isinstance(st, TruncateTable):
            return self.truncate(st)
        if isinstance(st, RenameTable):
            return self.rename(st)
        if isinstance(st, AlterTable):
            return self.alter_table(st)
        if isinstance(st, CreateIndex):
            return self.alter_table(AlterTable(st.table, [AlterSpec("add_index", index=st.index)]))
        if isinstance(st, DropIndex):
            return self.alter_table(
                AlterTable(st.table, [AlterSpec("drop_index", name=st.name, if_exists=st.if_exists)])
            )
        if isinstance(st, ViewStmt):
            return self.view(st)
        raise SchemaError(f"unsupported statement {type(st).__name__}: {_clip(self.query)!r}")

    # -- databases ---------------------------------------------------------------------------
    def create_database(self, st: CreateDatabase) -> list[DDLEvent]:
        if not self.cat.tracks(st.name):
            return []
        if st.name in self.cat._dbs:
            if st.if_not_exists:
                return []
            if not st.or_replace:
                raise SchemaError(
                    f"CREATE DATABASE {quote_ident(st.name)}: the catalog already has it: {_clip(self.query)!r}; "
                    "restart the changefeed so the catalog is reloaded from the upstream"
                )
            for s, t in [k for k in self.cat._tables if k[0] == st.name]:
                self.cat._remove(s, t)
        self.cat.add_database(st.name, st.charset, st.collation)
        return [self.event(DDLType.CREATE_SCHEMA, st.name)]

    def alter_database(self, st: AlterDatabase) -> list[DDLEvent]:
        name = st.name or self.default_schema
        if not name:
            raise SchemaError(
                f"ALTER DATABASE without a database name or default database: {_clip(self.query)!r}"
            )
        if not self.cat.tracks(name):
            return []
        cur = self.db_default(name)
        if st.charset is not None or st.collation is not None:
            resolved = resolve_charset(st.charset, st.collation, cur)
            assert resolved is not None
            self.cat._dbs[name] = resolved
        return [self.event(DDLType.ALTER_SCHEMA, name)]

    def drop_database(self, st: DropDatabase) -> list[DDLEvent]:
        if not self.cat.tracks(st.name):
            return []
        if st.name not in self.cat._dbs:
            if st.if_exists:
                return []
            raise SchemaError(
                f"DROP DATABASE {quote_ident(st.name)}: the catalog does not know it: {_clip(self.query)!r}; "
                "restart the changefeed so the catalog is reloaded from the upstream"
            )
        for s, t in [k for k in self.cat._tables if k[0] == st.name]:
            self.cat._remove(s, t)
        del self.cat._dbs[st.name]
        return [self.event(DDLType.DROP_SCHEMA, st.name)]

    # -- tables ------------------------------------------------------------------------------
    def create_table(self, st: CreateTable) -> list[DDLEvent]:
        schema, table = self.resolve(st.name)
        if not self.cat.tracks(schema):
            return []
        if self.cat.get(schema, table) is not None:
            if st.if_not_exists:
                return []
            if not st.or_replace:
                raise SchemaError(
                    f"CREATE TABLE {_q(schema, table)}: the catalog already has this table: {_clip(self.query)!r}; "
                    "restart the changefeed so the catalog is reloaded from the upstream"
                )
        if st.like is not None:
            ls, lt = self.resolve(st.like)
            src = self.cat.get(ls, lt)
            if src is None:
                raise self.unknown(ls, lt)
            self.db_default(schema)
            meta = self.cat.meta(ls, lt) or TableMeta()
            info = replace(src.renamed(schema, table), version=self.ts, _pos={})
            self.cat.put(info, TableMeta(meta.collation, dict(meta.index_flags)))
        else:
            info, meta = build_table(st, schema, self.db_default(schema), self.ts, self.query)
            self.cat.put(info, meta)
        return [self.event(DDLType.CREATE_TABLE, schema, table, info)]

    def drop_table(self, st: DropTable) -> list[DDLEvent]:
        out: list[DDLEvent] = []
        for name in st.names:
            schema, table = self.resolve(name)
            if self.cat.get(schema, table) is None:
                if st.if_exists or not self.cat.tracks(schema):
                    continue
                raise self.unknown(schema, table)
            self.cat._remove(schema, table)
            out.append(self.event(DDLType.DROP_TABLE, schema, table))
        return out

    def truncate(self, st: TruncateTable) -> list[DDLEvent]:
        schema, table = self.resolve(st.name)
        cur = self.cat.get(schema, table)
        if cur is None:
            if not self.cat.tracks(schema):
                return []
            raise self.unknown(schema, table)
        info = cur.with_version(self.ts)
        self.cat.put(info, self.cat.meta(schema, table))
        return [self.event(DDLType.TRUNCATE_TABLE, schema, table, info)]

    def rename(self, st: RenameTable) -> list[DDLEvent]:
        out: list[DDLEvent] = []
        for a, b in st.pairs:
            s1, t1 = self.resolve(a)
            s2, t2 = self.resolve(b)
            cur = self.cat.get(s1, t1)
            if cur is None:
                if st.if_exists or (not self.cat.tracks(s1) and not self.cat.tracks(s2)):
                    continue
                raise self.unknown(s1, t1)
            if self.cat.get(s2, t2) is not None:
                raise SchemaError(
                    f"RENAME TABLE to {_q(s2, t2)}: the catalog already has that table: {_clip(self.query)!r}"
                )
            meta = self.cat.meta(s1, t1)
            self.cat._remove(s1, t1)
            info = replace(cur.renamed(s2, t2), version=self.ts, _pos={})
            self._put_moved(info, meta)
            out.append(self.event(DDLType.RENAME_TABLE, s2, t2, info, old=(s1, t1)))
        return out

    def _put_moved(self, info: TableInfo, meta: TableMeta | None) -> None:
        """Track a renamed table; one moved out of the followed databases is no longer tracked."""
        if not self.cat.tracks(info.schema):
            return
        self.db_default(info.schema)
        self.cat.put(info, meta)

    def view(self, st: ViewStmt) -> list[DDLEvent]:
        kind = {"create": DDLType.CREATE_VIEW, "drop": DDLType.DROP_VIEW, "alter": DDLType.OTHER}[st.action]
        out = []
        for name in st.names:
            schema, view = self.resolve(name)
            if self.cat.tracks(schema):
                out.append(self.event(kind, schema, view))
        return out

    def alter_table(self, st: AlterTable) -> list[DDLEvent]:
        schema, table = self.resolve(st.name)
        cur = self.cat.get(schema, table)
        if cur is None:
            if st.if_exists or not self.cat.tracks(schema):
                return []
            raise self.unknown(schema, table)
        meta = self.cat.meta(schema, table) or TableMeta()
        w = _Work.of(cur, meta)
        new_name: tuple[str, str] | None = None
        for spec in st.specs:
            # table charset options hold for every column the statement adds, wherever they are written
            if spec.action == "options" and spec.options is not None:
                o = spec.options
                if o.charset is not None or o.collation is not None:
                    resolved = resolve_charset(o.charset, o.collation, None)
                    assert resolved is not None
                    w.charset, w.collation = resolved
        for spec in st.specs:
            if spec.action == "rename_table":
                assert spec.table is not None
                new_name = self.resolve(spec.table)
            else:
                self.apply_spec(w, spec)
        info, new_meta = w.finish(self.ts)
        ddl_type = _classify(st.specs)
        if new_name is not None and new_name != (schema, table):
            s2, t2 = new_name
            if self.cat.get(s2, t2) is not None:
                raise SchemaError(
                    f"ALTER TABLE ... RENAME to {_q(s2, t2)}: the catalog already has that table: {_clip(self.query)!r}"
                )
            self.cat._remove(schema, table)
            info = replace(info.renamed(s2, t2), _pos={})
            self._put_moved(info, new_meta)
            return [self.event(ddl_type, s2, t2, info, old=(schema, table))]
        self.cat.put(info, new_meta)
        return [self.event(ddl_type, schema, table, info)]

    def apply_spec(self, w: _Work, spec: AlterSpec) -> None:
        q = self.query
        a = spec.action
        if a == "add_column":
            for cdef in spec.columns:
                if w.col_pos(cdef.name) >= 0:
                    if spec.if_exists:
                        continue
                    raise w.fail(f"column {cdef.name!r} already exists", q)
                col = build_column(cdef, (w.charset, w.collation))
                w.insert_column(col, spec.position, q)
                for idef in _inline_indexes(cdef):
                    w.add_index(idef, q)
            for idef in spec.indexes:
                w.add_index(idef, q)
        elif a == "drop_column":
            assert spec.name is not None
            p = w.col_pos(spec.name)
            if p < 0:
                if spec.if_exists:
                    return
                raise w.fail(f"column {spec.name!r} does not exist", q)
            del w.columns[p]
            n = spec.name.lower()
            for ix in w.indexes:
                ix.columns = [c for c in ix.columns if c.lower() != n]
            w.indexes = [ix for ix in w.indexes if ix.columns]
        elif a in ("modify_column", "change_column"):
            assert spec.name is not None and spec.column is not None
            p = w.col_pos(spec.name)
            if p < 0:
                if spec.if_exists:
                    return
                raise w.fail(f"column {spec.name!r} does not exist", q)
            old = w.columns[p]
            col = build_column(spec.column, (w.charset, w.collation))
            if col.name.lower() != old.name.lower() and w.col_pos(col.name) >= 0:
                raise w.fail(f"column {col.name!r} already exists", q)
            if spec.position is None:
                w.columns[p] = col
            else:
                del w.columns[p]
                w.insert_column(col, spec.position, q)
            w.rename_in_indexes(old.name, col.name)
            for idef in _inline_indexes(spec.column):
                w.add_index(idef, q)
        elif a == "rename_column":
            assert spec.name is not None and spec.new_name is not None
            p = w.col_pos(spec.name)
            if p < 0:
                if spec.if_exists:
                    return
                raise w.fail(f"column {spec.name!r} does not exist", q)
            old = w.columns[p]
            if spec.new_name.lower() != old.name.lower() and w.col_pos(spec.new_name) >= 0:
                raise w.fail(f"column {spec.new_name!r} already exists", q)
            w.columns[p] = replace(old, name=spec.new_name)
            w.rename_in_indexes(old.name, spec.new_name)
        elif a in ("set_default", "drop_default"):
            assert spec.name is not None
            p = w.col_pos(spec.name)
            if p < 0:
                if spec.if_exists:
                    return
                raise w.fail(f"column {spec.name!r} does not exist", q)
            col = w.columns[p]
            dflt = normalize_default(col, spec.default) if a == "set_default" and spec.default else None
            w.columns[p] = with_default(col, dflt)
        elif a == "add_index":
            assert spec.index is not None
            w.add_index(spec.index, q)
        elif a == "drop_index":
            assert spec.name is not None
            w.drop_index(spec.name, spec.if_exists, q)
        elif a == "drop_primary":
            w.drop_index("PRIMARY", False, q)
        elif a == "drop_constraint":
            assert spec.name is not None
            p = w.idx_pos(spec.name)
            if p >= 0 and w.indexes[p].unique:
                del w.indexes[p]
        elif a == "rename_index":
            assert spec.name is not None and spec.new_name is not None
            p = w.idx_pos(spec.name)
            if p < 0:
                if spec.if_exists:
                    return
                raise w.fail(f"index {spec.name!r} does not exist", q)
            if w.idx_pos(spec.new_name) >= 0 and spec.new_name.lower() != spec.name.lower():
                raise w.fail(f"index {spec.new_name!r} already exists", q)
            w.indexes[p].name = spec.new_name
        elif a == "convert":
            assert spec.options is not None
            resolved = resolve_charset(spec.options.charset, spec.options.collation, None)
            assert resolved is not None
            self.convert(w, resolved)
        elif a == "options":
            assert spec.options is not None
            if spec.options.partitioned is not None:
                w.partitioned = spec.options.partitioned
        elif a in ("partition", "noop", "algorithm", "drop_foreign_key"):
            pass
        else:
            raise w.fail(f"unsupported ALTER TABLE action {a!r}", q)

    @staticmethod
    def convert(w: _Work, target: tuple[str, str]) -> None:
        cs, co = target
        new_mb = mbmaxlen(cs)
        for i, c in enumerate(w.columns):
            if c.type not in CHARSET_TYPES or c.charset is None:
                continue
            t = c.type
            if t in TEXT_MAX_BYTES:
                chars = TEXT_MAX_BYTES[t] // mbmaxlen(c.charset)
                bigger = text_type_for_bytes(chars * new_mb, False)
                if TEXT_MAX_BYTES[bigger] > TEXT_MAX_BYTES[t]:
                    t = bigger
            w.columns[i] = replace(c, type=t, charset=cs, collation=co)
        w.charset, w.collation = cs, co


_INDEX_ADD = {"add_index"}
_INDEX_DROP = {"drop_index", "drop_primary", "drop_foreign_key"}


def _classify(specs: list[AlterSpec]) -> DDLType:
    """The DDLType of an ALTER TABLE: one index change is ADD/DROP_INDEX, a rename alone RENAME_TABLE."""
    real = [s for s in specs if s.action != "algorithm"]
    if len(real) == 1:
        a = real[0].action
        if a in _INDEX_ADD:
            return DDLType.ADD_INDEX
        if a in _INDEX_DROP:
            return DDLType.DROP_INDEX
        if a == "rename_table":
            return DDLType.RENAME_TABLE
    return DDLType.ALTER_TABLE


# --------------------------------------------------------------------------------------------
# Reconciling with binlog table maps
# --------------------------------------------------------------------------------------------

# MariaDB enum_field_types codes a table map may carry for each of our column types.
BINLOG_TYPES: dict[str, frozenset[int]] = {
    "tinyint": frozenset({1}),
    "smallint": frozenset({2}),
    "mediumint": frozenset({9}),
    "int": frozenset({3}),
    "bigint": frozenset({8}),
    "float": frozenset({4}),
    "double": frozenset({5}),
    "decimal": frozenset({246, 0}),
    "date": frozenset({10, 14}),
    "datetime": frozenset({12, 18}),
    "timestamp": frozenset({7, 17}),
    "time": frozenset({11, 19}),
    "year": frozenset({13}),
    "char": frozenset({254, 15, 253}),
    "binary": frozenset({254, 15, 253}),
    "varchar": frozenset({15, 253}),
    "varbinary": frozenset({15, 253}),
    "tinytext": frozenset({252, 249}),
    "text": frozenset({252}),
    "mediumtext": frozenset({252, 250}),
    "longtext": frozenset({252, 251}),
    "tinyblob": frozenset({252, 249}),
    "blob": frozenset({252}),
    "mediumblob": frozenset({252, 250}),
    "longblob": frozenset({252, 251}),
    "json": frozenset({252, 245}),
    "bit": frozenset({16}),
    "enum": frozenset({254, 247}),
    "set": frozenset({254, 248}),
    "geometry": frozenset({255}),
}


def reconcile(info: TableInfo, column_names: list[str], column_types: list[int]) -> None:
    """Raise SchemaError when a binlog table map does not match the tracked shape.

    ``column_names`` may be empty when the binlog carries no names
    (``binlog_row_metadata`` not FULL); then only count and types are checked.
    """
    where = _q(info.schema, info.table)
    expected = [f"{c.name} {c.type}" for c in info.columns]
    if len(column_types) != len(info.columns) or (column_names and len(column_names) != len(info.columns)):
        got = len(column_types) if column_types else len(column_names)
        raise SchemaError(
            f"binlog table map of {where} has {got} columns {column_names or ''} but the tracked schema "
            f"(version {info.version}) has {len(info.columns)}: {expected}. A DDL was missed or not applied; "
            "restart the changefeed from a new snapshot"
        )
    for i, c in enumerate(info.columns):
        if column_names and column_names[i].lower() != c.name.lower():
            raise SchemaError(
                f"binlog table map of {where}: column {i + 1} is {column_names[i]!r} but the tracked schema "
                f"(version {info.version}) has {c.name!r}; expected columns {[x.name for x in info.columns]}, "
                f"got {column_names}. Restart the changefeed from a new snapshot"
            )
        allowed = BINLOG_TYPES.get(c.type)
        if allowed is not None and column_types[i] not in allowed:
            raise SchemaError(
                f"binlog table map of {where}: column {c.name!r} has binlog type {column_types[i]} but the "
                f"tracked schema (version {info.version}) says {c.full_type()} (binlog types "
                f"{sorted(allowed)}). Restart the changefeed from a new snapshot"
            )
