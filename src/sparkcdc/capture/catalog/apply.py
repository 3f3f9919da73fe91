"""How each DDL statement changes a ``SchemaCatalog`` and which ``DDLEvent`` it produces."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sparkcdc.capture.catalog.table import (
    TableMeta,
    WorkingTable,
    build_table,
    inline_indexes,
    qualified,
)
from sparkcdc.capture.ddl import (
    CHARSET_TYPES,
    TEXT_MAX_BYTES,
    AlterDatabase,
    AlterSpec,
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropDatabase,
    DropIndex,
    DropTable,
    RenameTable,
    TableName,
    TruncateTable,
    UnsupportedTable,
    ViewStmt,
    build_column,
    clip_sql,
    mbmaxlen,
    normalize_default,
    quote_ident,
    resolve_charset,
    text_type_for_bytes,
    with_default,
)
from sparkcdc.errors import SchemaError
from sparkcdc.model.events import DDLEvent, DDLType
from sparkcdc.model.schema import TableInfo

if TYPE_CHECKING:
    from sparkcdc.capture.catalog import SchemaCatalog


def _alter_order(spec: AlterSpec) -> int:
    """Where an ALTER TABLE's spec applies: MariaDB's ``mysql_prepare_alter_table`` builds the new
    columns, then the periods, then the keys, whatever order the statement writes them in (``ADD
    UNIQUE KEY u (id, p WITHOUT OVERLAPS), ADD PERIOD FOR p (s, e)`` is accepted). Specs of one rank
    keep their order (``sorted`` is stable)."""
    if spec.action == "add_period":
        return 1
    if spec.action == "add_index":
        return 2
    return 0


def alter_table_charset(st: AlterTable, table: tuple[str, str]) -> tuple[str, str]:
    """The (charset, collation) the columns an ALTER TABLE adds without their own get: ``table``'s
    default, or the one the statement's table options set (they hold for every column it adds,
    wherever they are written)."""
    for spec in st.specs:
        if spec.action == "options" and spec.options is not None:
            o = spec.options
            if o.charset is not None or o.collation is not None:
                resolved = resolve_charset(o.charset, o.collation, None)
                assert resolved is not None
                table = resolved
    return table


class DDLApplier:
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
            f"DDL on table {qualified(schema, table)}, which the schema catalog does not know: "
            f"{clip_sql(self.query)!r}. The table was probably created before capture started and was not "
            "loaded; restart the changefeed so the catalog is reloaded from the upstream"
        )

    def resolve(self, name: TableName) -> tuple[str, str]:
        return name.resolve(self.default_schema, self.query)

    def db_default(self, schema: str) -> tuple[str, str]:
        d = self.cat.database_charset(schema)
        if d is None:
            raise SchemaError(
                f"database {quote_ident(schema)} is not known to the schema catalog: {clip_sql(self.query)!r}; "
                "restart the changefeed so the catalog is reloaded from the upstream"
            )
        return d

    def run(self, st: Any) -> list[DDLEvent]:
        if isinstance(st, CreateIndex):
            st = AlterTable(st.table, [AlterSpec("add_index", index=st.index)])
        elif isinstance(st, DropIndex):
            st = AlterTable(st.table, [AlterSpec("drop_index", name=st.name, if_exists=st.if_exists)])
        apply = _APPLY.get(type(st))
        if apply is None:
            raise SchemaError(f"unsupported statement {type(st).__name__}: {clip_sql(self.query)!r}")
        return apply(self, st)

    # -- databases ---------------------------------------------------------------------------
    def create_database(self, st: CreateDatabase) -> list[DDLEvent]:
        if not self.cat.tracks(st.name):
            return []
        if st.name in self.cat._dbs:
            if st.if_not_exists:
                return []
            if not st.or_replace:
                raise SchemaError(
                    f"CREATE DATABASE {quote_ident(st.name)}: the catalog already has it: {clip_sql(self.query)!r}; "
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
                f"ALTER DATABASE without a database name or default database: {clip_sql(self.query)!r}"
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
                f"DROP DATABASE {quote_ident(st.name)}: the catalog does not know it: {clip_sql(self.query)!r}; "
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
                    f"CREATE TABLE {qualified(schema, table)}: the catalog already has this table: {clip_sql(self.query)!r}; "
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
            self.cat.put(info, meta.copy())
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
                    f"RENAME TABLE to {qualified(s2, t2)}: the catalog already has that table: {clip_sql(self.query)!r}"
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
        w = WorkingTable.of(cur, meta)
        w.charset, w.collation = alter_table_charset(st, (w.charset, w.collation))
        new_name: tuple[str, str] | None = None
        for spec in sorted(st.specs, key=_alter_order):
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
                    f"ALTER TABLE ... RENAME to {qualified(s2, t2)}: the catalog already has that table: {clip_sql(self.query)!r}"
                )
            self.cat._remove(schema, table)
            info = replace(info.renamed(s2, t2), _pos={})
            self._put_moved(info, new_meta)
            return [self.event(ddl_type, s2, t2, info, old=(schema, table))]
        self.cat.put(info, new_meta)
        events = [self.event(ddl_type, schema, table, info)]
        for spec in st.specs:
            if spec.action == "partition" and spec.table is not None:
                # EXCHANGE PARTITION ... WITH TABLE other: the other table's rows change too, so it
                # gets a version at this DDL as well (a consumer that orders by table version then
                # applies its earlier rows before the exchange and its later ones after). Both
                # events carry the one statement: sinks that run it run it once.
                s2, t2 = self.resolve(spec.table)
                other = self.cat.get(s2, t2)
                if other is not None:
                    moved = other.with_version(self.ts)
                    self.cat.put(moved, self.cat.meta(s2, t2))
                    events.append(self.event(ddl_type, s2, t2, moved))
        return events

    def apply_spec(self, w: WorkingTable, spec: AlterSpec) -> None:
        q = self.query
        a = spec.action
        if a == "add_column":
            self._add_columns(w, spec)
        elif a == "drop_column":
            self._drop_column(w, spec)
        elif a in ("modify_column", "change_column"):
            self._modify_column(w, spec)
        elif a == "rename_column":
            self._rename_column(w, spec)
        elif a in ("set_default", "drop_default"):
            assert spec.name is not None
            p = w.existing_col(spec.name, spec.if_exists, q)
            if p is None:
                return
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
            self._rename_index(w, spec)
        elif a == "add_period":
            assert spec.period is not None
            w.add_period(spec.period, spec.if_exists, q)
        elif a == "drop_period":
            assert spec.name is not None
            w.drop_period(spec.name, spec.if_exists, q)
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

    def _add_columns(self, w: WorkingTable, spec: AlterSpec) -> None:
        """ADD COLUMN: the new columns with their inline indexes, then the indexes of ADD (...)."""
        q = self.query
        for cdef in spec.columns:
            if w.col_pos(cdef.name) >= 0:
                if spec.if_exists:
                    continue
                raise w.fail(f"column {cdef.name!r} already exists", q)
            col = build_column(cdef, (w.charset, w.collation))
            w.insert_column(col, spec.position, q)
            for idef in inline_indexes(cdef):
                w.add_index(idef, q)
        for idef in spec.indexes:
            w.add_index(idef, q)

    def _drop_column(self, w: WorkingTable, spec: AlterSpec) -> None:
        """DROP COLUMN: the column goes, and so do the indexes left with no columns."""
        q = self.query
        assert spec.name is not None
        p = w.existing_col(spec.name, spec.if_exists, q)
        if p is None:
            return
        del w.columns[p]
        n = spec.name.lower()
        for ix in w.indexes:
            ix.columns = [c for c in ix.columns if c.lower() != n]
        w.indexes = [ix for ix in w.indexes if ix.columns]

    def _modify_column(self, w: WorkingTable, spec: AlterSpec) -> None:
        """MODIFY/CHANGE COLUMN: the column redefined (and perhaps renamed or moved) in place."""
        q = self.query
        assert spec.name is not None and spec.column is not None
        p = w.existing_col(spec.name, spec.if_exists, q)
        if p is None:
            return
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
        for idef in inline_indexes(spec.column):
            w.add_index(idef, q)

    def _rename_column(self, w: WorkingTable, spec: AlterSpec) -> None:
        """RENAME COLUMN: the column and its mentions in indexes take the new name."""
        q = self.query
        assert spec.name is not None and spec.new_name is not None
        p = w.existing_col(spec.name, spec.if_exists, q)
        if p is None:
            return
        old = w.columns[p]
        if spec.new_name.lower() != old.name.lower() and w.col_pos(spec.new_name) >= 0:
            raise w.fail(f"column {spec.new_name!r} already exists", q)
        w.columns[p] = replace(old, name=spec.new_name)
        w.rename_in_indexes(old.name, spec.new_name)

    def _rename_index(self, w: WorkingTable, spec: AlterSpec) -> None:
        """RENAME INDEX/KEY: the index takes the new name."""
        q = self.query
        assert spec.name is not None and spec.new_name is not None
        p = w.idx_pos(spec.name)
        if p < 0:
            if spec.if_exists:
                return
            raise w.fail(f"index {spec.name!r} does not exist", q)
        if w.idx_pos(spec.new_name) >= 0 and spec.new_name.lower() != spec.name.lower():
            raise w.fail(f"index {spec.new_name!r} already exists", q)
        w.indexes[p].name = spec.new_name

    @staticmethod
    def convert(w: WorkingTable, target: tuple[str, str]) -> None:
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


def _unsupported_table(self: DDLApplier, st: UnsupportedTable) -> list[DDLEvent]:
    """A sequence or system-versioned table made in a followed database stops the changefeed."""
    schema, table = st.name.resolve(self.default_schema, self.query)
    if not self.cat.tracks(schema):
        return []
    rule = "!" + ".".join(
        n if n.replace("_", "").replace("$", "").isalnum() else quote_ident(n) for n in (schema, table)
    )
    raise SchemaError(
        f"DDL at commit ts {self.ts} on {st.kind} {qualified(schema, table)}, in a database the changefeed "
        f"captures: {clip_sql(self.query)!r}; sparkcdc does not deliver the rows of sequences and "
        "system-versioned tables yet. Start a new changefeed after this DDL (--start-ts later than "
        f"{self.ts}) with the table left out in [filter] rules ({rule!r}), or make the table in a database "
        "the changefeed does not capture"
    )


_APPLY: dict[type, Callable[[DDLApplier, Any], list[DDLEvent]]] = {
    CreateDatabase: DDLApplier.create_database,
    AlterDatabase: DDLApplier.alter_database,
    DropDatabase: DDLApplier.drop_database,
    CreateTable: DDLApplier.create_table,
    DropTable: DDLApplier.drop_table,
    TruncateTable: DDLApplier.truncate,
    RenameTable: DDLApplier.rename,
    AlterTable: DDLApplier.alter_table,
    ViewStmt: DDLApplier.view,
    UnsupportedTable: _unsupported_table,
}
"""Statement class → what it does to the catalog (CREATE/DROP INDEX run as ALTER TABLE)."""
