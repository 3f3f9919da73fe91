"""One table's shape: built from CREATE TABLE, and the working copy a statement edits.

``build_table`` and ``parse_create_table`` turn a CREATE TABLE into the ``TableInfo``
MariaDB 10.11 reports (index order, hash keys, foreign-key indexes included) and the
``TableMeta`` later ALTERs need; ``WorkingTable`` is the mutable table an ALTER edits
before ``finish`` freezes it again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from sparkcdc.capture.ddl import (
    CHARSET_TYPES,
    SERVER_CHARSET,
    SERVER_COLLATION,
    TEXT_MAX_BYTES,
    ColumnDef,
    CreateTable,
    IndexDef,
    PeriodDef,
    UnsupportedTable,
    build_column,
    clip_sql,
    mbmaxlen,
    parse_statement,
    quote_ident,
    resolve_charset,
    with_default,
)
from sparkcdc.errors import SchemaError
from sparkcdc.model.schema import ColumnInfo, IndexInfo, TableInfo

# InnoDB's largest index key (DYNAMIC row format); a UNIQUE key over more becomes a hash key.
MAX_KEY_BYTES = 3072


def qualified(schema: str, table: str) -> str:
    """The quoted ``schema.table`` name that SQL and error messages use."""
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
    """Per-table facts the catalog needs to apply later DDL: default collation, index flags and
    application-time periods."""

    collation: str | None = None
    index_flags: dict[str, IndexFlags] = field(default_factory=dict)
    """Keyed by lower-case index name."""
    periods: dict[str, PeriodDef] = field(default_factory=dict)
    """Keyed by lower-case period name: a later ``WITHOUT OVERLAPS`` key names one."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        d: dict[str, Any] = {
            "collation": self.collation,
            "index_flags": {
                k: [f.partial, f.long_hash, f.fulltext, f.generated]
                for k, f in self.index_flags.items()
                if f != IndexFlags()
            },
        }
        if self.periods:
            d["periods"] = [[p.name, p.start, p.end] for p in self.periods.values()]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TableMeta:
        """Inverse of ``to_dict``."""
        if not d:
            return cls()
        flags = {k: IndexFlags(*v) for k, v in (d.get("index_flags") or {}).items()}
        periods = {p[0].lower(): PeriodDef(*p) for p in d.get("periods") or ()}
        return cls(collation=d.get("collation"), index_flags=flags, periods=periods)

    def copy(self) -> TableMeta:
        """A copy another table (CREATE TABLE ... LIKE) can take."""
        return TableMeta(self.collation, dict(self.index_flags), dict(self.periods))


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
    without_overlaps: bool = False


def table_charset(info: TableInfo, meta: TableMeta) -> tuple[str, str]:
    """The table's default (charset, collation): what a column added without its own gets."""
    cs = info.charset or SERVER_CHARSET
    if meta.collation:
        return cs, meta.collation
    resolved = resolve_charset(cs, None, None)
    assert resolved is not None
    return cs, resolved[1]


class WorkingTable:
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
        self.periods: dict[str, PeriodDef] = {}

    @classmethod
    def of(cls, info: TableInfo, meta: TableMeta) -> WorkingTable:
        w = cls(info.schema, info.table, *table_charset(info, meta), info.partitioned)
        w.periods = dict(meta.periods)
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
                    without_overlaps=ix.without_overlaps,
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

    def existing_col(self, name: str, if_exists: bool, query: str) -> int | None:
        """The position of column ``name``; None when it is missing under IF EXISTS, else an error."""
        p = self.col_pos(name)
        if p >= 0:
            return p
        if if_exists:
            return None
        raise self.fail(f"column {name!r} does not exist", query)

    def idx_pos(self, name: str) -> int:
        n = name.lower()
        for i, ix in enumerate(self.indexes):
            if ix.name.lower() == n:
                return i
        return -1

    def fail(self, what: str, query: str) -> SchemaError:
        return SchemaError(
            f"cannot apply DDL to {qualified(self.schema, self.table)}: {what}; statement: {clip_sql(query)!r}. "
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
        """A renamed column: its indexes and periods name it anew."""
        for ix in self.indexes:
            ix.columns = [new if c.lower() == old.lower() else c for c in ix.columns]
        for k, p in self.periods.items():
            start = new if p.start.lower() == old.lower() else p.start
            end = new if p.end.lower() == old.lower() else p.end
            self.periods[k] = PeriodDef(p.name, start, end)

    # -- periods ---------------------------------------------------------------------------
    def add_period(self, period: PeriodDef, if_not_exists: bool, query: str) -> None:
        if period.name.lower() in self.periods:
            if if_not_exists:
                return
            raise self.fail(f"period {period.name!r} already exists", query)
        for c in (period.start, period.end):
            if self.col_pos(c) < 0:
                raise self.fail(f"period {period.name!r} names column {c!r}, which does not exist", query)
        self.periods[period.name.lower()] = period

    def drop_period(self, name: str, if_exists: bool, query: str) -> None:
        if self.periods.pop(name.lower(), None) is None and not if_exists:
            raise self.fail(f"period {name!r} does not exist", query)

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
        parts = idef.parts
        if idef.period is not None:
            # WITHOUT OVERLAPS over a period an earlier statement defined: its end, then its start
            period = self.periods.get(idef.period.lower())
            if period is None:
                raise self.fail(
                    f"WITHOUT OVERLAPS names period {idef.period!r}, which the table does not have", query
                )
            parts = [*parts, (period.end, None), (period.start, None)]
        for cname, prefix in parts:
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
            self.indexes.append(
                _Idx("PRIMARY", cols, True, True, partial, without_overlaps=idef.without_overlaps)
            )
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
        if idef.functional:
            # MySQL 8 functional key parts index expressions (hidden columns no row image shows):
            # recorded under its name, never a key of the rows' identity.
            name = idef.name if idef.name is not None else self.unique_index_name("functional_index")
            self.indexes.append(_Idx(name, cols, False, False, True))
            return
        name = idef.name if idef.name is not None else self.unique_index_name(cols[0])
        unique = idef.kind == "unique"
        long_hash = unique and (idef.using_hash or text_no_prefix or nbytes > MAX_KEY_BYTES)
        self.indexes.append(
            _Idx(
                name,
                cols,
                unique,
                False,
                partial,
                long_hash,
                idef.kind == "fulltext",
                without_overlaps=unique and idef.without_overlaps,
            )
        )

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
                raise SchemaError(f"duplicate column {c.name!r} in {qualified(self.schema, self.table)}")
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
            indexes=tuple(
                IndexInfo(ix.name, tuple(ix.columns), ix.unique, ix.primary, ix.without_overlaps)
                for ix in ordered
            ),
            version=version,
            charset=self.charset,
            partitioned=self.partitioned,
        )
        flags = {
            ix.name.lower(): IndexFlags(ix.partial, ix.long_hash, ix.fulltext, ix.generated_fk)
            for ix in ordered
            if ix.partial or ix.long_hash or ix.fulltext or ix.generated_fk
        }
        return info, TableMeta(self.collation, flags, dict(self.periods))


def _key_bytes(col: ColumnInfo, prefix: int | None) -> int:
    if col.type in ("char", "varchar") or col.type in CHARSET_TYPES:
        chars = prefix if prefix is not None else (col.length or 0)
        return chars * mbmaxlen(col.charset)
    if col.type in ("binary", "varbinary") or col.type in TEXT_MAX_BYTES:
        return prefix if prefix is not None else (col.length or 0)
    return 8


def inline_indexes(cdef: ColumnDef) -> list[IndexDef]:
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
            f"CREATE TABLE ... SELECT is not supported by the schema tracker: {clip_sql(query)!r}; "
            "create the table first, then INSERT ... SELECT"
        )
    cs, co = resolve_charset(stmt.options.charset, stmt.options.collation, db_default) or db_default
    w = WorkingTable(schema, stmt.name.name, cs, co, bool(stmt.options.partitioned))
    for item in stmt.items:
        if isinstance(item, ColumnDef):
            w.columns.append(build_column(item, (cs, co)))
    for period in stmt.periods:
        w.add_period(period, False, query)
    foreign: list[tuple[IndexDef, _Idx]] = []
    for item in stmt.items:
        for idef in inline_indexes(item) if isinstance(item, ColumnDef) else [item]:
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
    info, _ = parse_create_table_meta(sql, default_schema, version, default_charset, default_collation)
    return info


def parse_create_table_meta(
    sql: str,
    default_schema: str,
    version: int,
    default_charset: str | None,
    default_collation: str | None,
) -> tuple[TableInfo, TableMeta]:
    stmt = parse_statement(sql)
    if isinstance(stmt, UnsupportedTable):
        raise SchemaError(
            f"{qualified(*stmt.name.resolve(default_schema, sql))} is a {stmt.kind}, whose rows sparkcdc "
            f"does not deliver yet; leave it out in [filter] rules: {clip_sql(sql)!r}"
        )
    if not isinstance(stmt, CreateTable):
        raise SchemaError(f"not a CREATE TABLE statement: {clip_sql(sql)!r}")
    if stmt.like is not None:
        raise SchemaError(f"CREATE TABLE ... LIKE needs the source table's shape: {clip_sql(sql)!r}")
    schema, _ = stmt.name.resolve(default_schema, sql)
    db_default = resolve_charset(default_charset, default_collation, (SERVER_CHARSET, SERVER_COLLATION))
    assert db_default is not None
    return build_table(stmt, schema, db_default, version, sql)
