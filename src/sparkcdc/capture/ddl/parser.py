"""The statement parser: one DDL statement (CREATE, ALTER, DROP, RENAME, TRUNCATE) into a statement object.

``parse_statement`` is the entry point; anything that is not DDL becomes
``Ignored`` without being parsed, and DDL it cannot read raises ``SchemaError``.
"""

from __future__ import annotations

import re
from typing import Literal

from sparkcdc.capture.ddl.definitions import DefinitionParser
from sparkcdc.capture.ddl.statements import (
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
    PeriodDef,
    RenameTable,
    Statement,
    TableName,
    TableOptions,
    TruncateTable,
    UnsupportedTable,
    ViewStmt,
)

# Leading words of ALTER TABLE specifications that only touch table options or storage.
_ALTER_NOOP_WORDS = {
    "FORCE",
    "ENABLE",
    "DISABLE",
    "DISCARD",
    "IMPORT",
    "ORDER",
    "WITH",
    "WITHOUT",
    "VALIDATION",
}
_PARTITION_OP_WORDS = {
    "COALESCE",
    "REORGANIZE",
    "EXCHANGE",
    "ANALYZE",
    "CHECK",
    "OPTIMIZE",
    "REBUILD",
    "REPAIR",
    "TRUNCATE",
}


class _Parser(DefinitionParser):
    def statement(self) -> Statement:
        if self.at_end():
            return Ignored("empty statement")
        t = self.peek()
        assert t is not None
        w = t.upper
        if w == "CREATE":
            self.i += 1
            return self.create()
        if w == "ALTER":
            self.i += 1
            return self.alter()
        if w == "DROP":
            self.i += 1
            return self.drop()
        if w == "RENAME":
            self.i += 1
            return self.rename()
        if w == "TRUNCATE":
            self.i += 1
            self.accept_kw("TABLE")
            name = self.table_name()
            return TruncateTable(name)
        return Ignored(f"{w or t.value} statement")

    def create(self) -> Statement:
        or_replace = self.accept_kw("OR", "REPLACE")
        temporary = False
        unique_kind: str | None = None
        while True:
            if self.accept_kw("TEMPORARY"):
                temporary = True
            elif self.is_kw("ALGORITHM") or self.is_kw("SQL", "SECURITY"):
                self.accept_kw("SQL")
                self.next()
                self.value_word()
            elif self.accept_kw("DEFINER"):
                self.accept_op("=")
                self.next()
                if self.accept_op("@"):
                    self.next()
                elif self.accept_op("("):
                    self.expect_op(")")
            elif self.is_kw("UNIQUE") or self.is_kw("FULLTEXT") or self.is_kw("SPATIAL"):
                unique_kind = self.next().upper
            elif self.accept_kw("ONLINE") or self.accept_kw("OFFLINE") or self.accept_kw("AGGREGATE"):
                pass
            else:
                break
        t = self.peek()
        w = t.upper if t is not None else ""
        if w == "TABLE":
            self.i += 1
            if temporary:
                return Ignored("temporary table")
            return self.create_table(or_replace)
        if w in ("DATABASE", "SCHEMA"):
            self.i += 1
            ine = self.accept_if_not_exists()
            name = self.ident("a database name")
            cs, co = self.charset_options()
            return CreateDatabase(name, ine, or_replace, cs, co)
        if w == "INDEX":
            self.i += 1
            ine = self.accept_if_not_exists()
            name = self.ident("an index name")
            self.skip_index_type()
            self.expect_kw("ON")
            table = self.table_name()
            parts, functional, period = self.index_parts()
            kind: Literal["unique", "key", "fulltext", "spatial"] = {
                "UNIQUE": "unique",
                "FULLTEXT": "fulltext",
                "SPATIAL": "spatial",
                None: "key",
            }[unique_kind]  # type: ignore[assignment]
            using_hash = self.index_tail()
            idef = IndexDef(kind, name, parts, using_hash, ine, functional)
            return CreateIndex(table, self.with_period(idef, period))
        if w == "VIEW":
            self.i += 1
            self.accept_if_not_exists()
            return ViewStmt("create", [self.table_name()])
        if w == "SEQUENCE" and not temporary:
            self.i += 1
            self.accept_if_not_exists()
            return UnsupportedTable(self.table_name(), "sequence")
        return Ignored(f"CREATE {w}")

    def charset_options(self) -> tuple[str | None, str | None]:
        cs: str | None = None
        co: str | None = None
        while not self.at_end():
            self.accept_kw("DEFAULT")
            if self.accept_kw("CHARACTER", "SET") or self.accept_kw("CHARSET"):
                cs = self.value_word()
            elif self.accept_kw("COLLATE"):
                co = self.value_word()
            else:
                self.next()
                if self.is_op("="):
                    self.value_word()
        if cs is not None and cs.upper() == "DEFAULT":
            cs = None
        if co is not None and co.upper() == "DEFAULT":
            co = None
        return cs, co

    def create_table(self, or_replace: bool) -> Statement:
        ine = self.accept_if_not_exists()
        name = self.table_name()
        kind = self.unsupported_kind()
        if kind is not None:
            return UnsupportedTable(name, kind)
        if self.accept_kw("LIKE"):
            return CreateTable(name, [], [], TableOptions(), ine, or_replace, like=self.table_name())
        if self.is_op("(") and self.is_kw("LIKE", k=1):
            self.i += 2
            like = self.table_name()
            self.expect_op(")")
            return CreateTable(name, [], [], TableOptions(), ine, or_replace, like=like)
        columns: list[ColumnDef] = []
        items: list[ColumnDef | IndexDef] = []
        periods: list[PeriodDef] = []
        if self.is_op("(") and not (self.is_kw("SELECT", k=1) or self.is_op("(", k=1)):
            self.i += 1
            while True:
                item = self.create_item()
                if isinstance(item, PeriodDef):
                    periods.append(item)
                elif item is not None:
                    items.append(item)
                    if isinstance(item, ColumnDef):
                        columns.append(item)
                if self.accept_op(","):
                    continue
                self.expect_op(")")
                break
        options = self.table_options(stop_words=())
        if not columns and not options.as_select:
            raise self.error("a table needs at least one column")
        return CreateTable(name, columns, items, options, ine, or_replace, periods=periods)

    def unsupported_kind(self) -> Literal["sequence", "system-versioned table"] | None:
        """What kind of unsupported table the CREATE TABLE makes: WITH SYSTEM VERSIONING (table
        or column) or the SEQUENCE=1 table option; None for an ordinary table."""
        toks = self.toks
        words = [t.upper for t in toks] + ["", ""]
        depth = 0
        for i in range(self.i, len(toks)):
            t = toks[i]
            if t.kind == "op":
                depth += 1 if t.value == "(" else -1 if t.value == ")" else 0
            elif words[i] == "WITH" and words[i + 1] == "SYSTEM" and words[i + 2] == "VERSIONING":
                return "system-versioned table"
            elif words[i] == "SEQUENCE" and depth == 0:
                j = i + 2 if i + 1 < len(toks) and toks[i + 1].value == "=" else i + 1
                if j < len(toks) and toks[j].kind == "num" and toks[j].value != "0":
                    return "sequence"
        return None

    def table_options(self, stop_words: tuple[str, ...], allow_select: bool = True) -> TableOptions:
        """Scan table options to the end (or a stop word), keeping charset/collation/partitioning."""
        opts = TableOptions()
        while not self.at_end():
            t = self.peek()
            assert t is not None
            if t.upper in stop_words:
                break
            if t.kind == "op" and t.value == ",":
                if "," in stop_words:
                    break
                self.i += 1
                continue
            if self.accept_kw("DEFAULT"):
                continue
            if self.accept_kw("CHARACTER", "SET") or self.accept_kw("CHARSET"):
                v = self.value_word()
                opts.charset = None if v.upper() == "DEFAULT" else v
                continue
            if self.accept_kw("COLLATE"):
                v = self.value_word()
                opts.collation = None if v.upper() == "DEFAULT" else v
                continue
            if self.is_kw("PARTITION", "BY"):
                opts.partitioned = True
                self.skip_rest_of_spec()
                break
            if self.accept_kw("REMOVE", "PARTITIONING"):
                opts.partitioned = False
                continue
            if self.is_kw("WITH", "SYSTEM", "VERSIONING"):
                raise self.error("system-versioned tables are not supported")
            if allow_select and (
                t.upper in ("SELECT", "AS", "IGNORE", "REPLACE", "WITH")
                or (t.kind == "op" and t.value == "(" and self.is_kw("SELECT", k=1))
            ):
                opts.as_select = True
                self.i = len(self.toks)
                break
            if t.kind == "op" and t.value == "(":
                self.skip_parens()
                continue
            self.i += 1
        return opts

    def alter(self) -> Statement:
        self.accept_kw("ONLINE") or self.accept_kw("OFFLINE")
        self.accept_kw("IGNORE")
        if self.accept_kw("TABLE"):
            return self.alter_table()
        if self.accept_kw("DATABASE") or self.accept_kw("SCHEMA"):
            name: str | None = None
            t = self.peek()
            if t is not None and (
                t.kind == "qid"
                or (
                    t.kind == "id"
                    and t.upper
                    not in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "UPGRADE", "READ")
                )
            ):
                name = self.next().value
            cs, co = self.charset_options()
            return AlterDatabase(name, cs, co)
        # ALTER [ALGORITHM=..] [DEFINER=..] [SQL SECURITY ..] VIEW
        while self.is_kw("ALGORITHM") or self.is_kw("DEFINER") or self.is_kw("SQL", "SECURITY"):
            if self.accept_kw("SQL"):
                self.next()
                self.next()
                continue
            self.next()
            self.accept_op("=")
            self.next()
            if self.accept_op("@"):
                self.next()
            elif self.accept_op("("):
                self.expect_op(")")
        if self.accept_kw("VIEW"):
            return ViewStmt("alter", [self.table_name()])
        t = self.peek()
        return Ignored(f"ALTER {t.upper if t is not None else ''}")

    def alter_table(self) -> Statement:
        if_exists = self.accept_if_exists()
        name = self.table_name()
        if self.accept_kw("WAIT"):
            self.next()
        self.accept_kw("NOWAIT")
        specs: list[AlterSpec] = []
        while not self.at_end():
            if self.accept_op(","):
                continue
            specs.append(self.alter_spec())
        if any(s.action == "system_versioning" for s in specs):
            return UnsupportedTable(name, "system-versioned table")
        return AlterTable(name, specs, if_exists)

    def position(self) -> tuple[str, str | None] | None:
        if self.accept_kw("FIRST"):
            return ("first", None)
        if self.accept_kw("AFTER"):
            return ("after", self.ident("a column name"))
        return None

    def alter_spec(self) -> AlterSpec:
        t = self.peek()
        assert t is not None
        w = t.upper
        if w == "ADD":
            return self._alter_add()
        if w == "DROP":
            return self._alter_drop()
        if w in ("MODIFY", "CHANGE"):
            return self._alter_modify_or_change(w)
        if w == "ALTER":
            return self._alter_alter()
        if w == "RENAME":
            return self._alter_rename()
        if w == "CONVERT":
            return self._alter_convert()
        if w == "PARTITION" and not self.is_kw("PARTITION", "BY"):
            self.skip_rest_of_spec()
            return AlterSpec("partition")
        if w in _PARTITION_OP_WORDS and self.is_kw("PARTITION", k=1):
            return self._partition_op(w)
        if w in ("ALGORITHM", "LOCK"):
            self.skip_rest_of_spec()
            return AlterSpec("algorithm")
        if w in _ALTER_NOOP_WORDS:
            self.skip_rest_of_spec()
            return AlterSpec("noop")
        if t.kind != "id":
            raise self.error("unexpected token in ALTER TABLE")
        opts = self.table_options(stop_words=(",",), allow_select=False)
        return AlterSpec("options", options=opts)

    def _partition_or_period(self, word: str) -> AlterSpec | None:
        """``word`` (ADD or DROP) PARTITION, PERIOD or SYSTEM VERSIONING; None for anything else."""
        if self.is_kw("PARTITION"):
            self.skip_rest_of_spec()
            return AlterSpec("partition")
        if self.is_kw("PERIOD") and (self.is_kw("FOR", k=1) or self.is_kw("IF", k=1)):  # not a column
            self.i += 1
            # PERIOD [IF [NOT] EXISTS] FOR name: an application-time period changes no column or
            # key, but the catalog keeps it for a key that names it later (WITHOUT OVERLAPS);
            # SYSTEM_TIME is system versioning
            if_exists = self.accept_if_not_exists() if word == "ADD" else self.accept_if_exists()
            if self.is_kw("SYSTEM_TIME", k=1):
                self.skip_rest_of_spec()
                return AlterSpec("system_versioning")
            if word == "DROP":
                self.expect_kw("FOR")
                return AlterSpec("drop_period", name=self.ident("a period name"), if_exists=if_exists)
            return AlterSpec("add_period", period=self.period_def(), if_exists=if_exists)
        if self.is_kw("SYSTEM", "VERSIONING"):
            self.skip_rest_of_spec()
            return AlterSpec("system_versioning")
        return None

    def _alter_add(self) -> AlterSpec:
        """ADD ...: a partition, period, check or constraint, an index, or one or more columns."""
        self.i += 1
        skipped = self._partition_or_period("ADD")
        if skipped is not None:
            return skipped
        if self.is_kw("CHECK") or (self.is_kw("CONSTRAINT") and not self._constraint_is_index()):
            self.skip_rest_of_spec()
            return AlterSpec("noop")
        idx = self.index_def()
        if idx is not None:
            return AlterSpec("add_index", index=idx, if_exists=idx.if_not_exists)
        self.accept_kw("COLUMN")
        ine = self.accept_if_not_exists()
        if self.accept_op("("):
            cols: list[ColumnDef] = []
            idxs: list[IndexDef] = []
            while True:
                ix = self.index_def()
                if ix is not None:
                    idxs.append(ix)
                else:
                    cols.append(self.column_def(self.ident("a column name")))
                if self.accept_op(","):
                    continue
                self.expect_op(")")
                break
            return AlterSpec("add_column", columns=cols, indexes=idxs, if_exists=ine)
        col = self.column_def(self.ident("a column name"))
        return AlterSpec("add_column", columns=[col], position=self.position(), if_exists=ine)

    def _alter_drop(self) -> AlterSpec:
        """DROP ...: the primary key, an index, foreign key, constraint, check, partition, period, column."""
        self.i += 1
        if self.accept_kw("PRIMARY", "KEY"):
            return AlterSpec("drop_primary")
        if self.accept_kw("INDEX") or self.accept_kw("KEY"):
            ie = self.accept_if_exists()
            return AlterSpec("drop_index", name=self.ident("an index name"), if_exists=ie)
        if self.accept_kw("FOREIGN", "KEY"):
            ie = self.accept_if_exists()
            return AlterSpec("drop_foreign_key", name=self.ident(), if_exists=ie)
        if self.accept_kw("CONSTRAINT"):
            ie = self.accept_if_exists()
            return AlterSpec("drop_constraint", name=self.ident(), if_exists=ie)
        if self.accept_kw("CHECK"):
            self.skip_rest_of_spec()
            return AlterSpec("noop")
        skipped = self._partition_or_period("DROP")
        if skipped is not None:
            return skipped
        self.accept_kw("COLUMN")
        ie = self.accept_if_exists()
        name = self.ident("a column name")
        self.accept_kw("RESTRICT") or self.accept_kw("CASCADE")
        return AlterSpec("drop_column", name=name, if_exists=ie)

    def _alter_modify_or_change(self, word: str) -> AlterSpec:
        """MODIFY [COLUMN] col def, or CHANGE [COLUMN] old new def: a column redefined in place."""
        self.i += 1
        self.accept_kw("COLUMN")
        ie = self.accept_if_exists()
        if word == "MODIFY":
            col = self.column_def(self.ident("a column name"))
            return AlterSpec(
                "modify_column", column=col, name=col.name, position=self.position(), if_exists=ie
            )
        old = self.ident("a column name")
        col = self.column_def(self.ident("a column name"))
        return AlterSpec("change_column", column=col, name=old, position=self.position(), if_exists=ie)

    def _alter_alter(self) -> AlterSpec:
        """ALTER ...: an index, check or constraint (no-ops), or a column's default or visibility."""
        self.i += 1
        if self.accept_kw("INDEX") or self.accept_kw("KEY"):
            self.skip_rest_of_spec()
            return AlterSpec("noop")
        if self.accept_kw("CHECK") or self.accept_kw("CONSTRAINT"):
            self.skip_rest_of_spec()
            return AlterSpec("noop")
        self.accept_kw("COLUMN")
        ie = self.accept_if_exists()
        name = self.ident("a column name")
        if self.accept_kw("SET", "DEFAULT"):
            return AlterSpec("set_default", name=name, default=self.default_value(), if_exists=ie)
        if self.accept_kw("DROP", "DEFAULT"):
            return AlterSpec("drop_default", name=name, if_exists=ie)
        if self.accept_kw("SET", "VISIBLE") or self.accept_kw("SET", "INVISIBLE"):
            return AlterSpec("noop")
        raise self.error("expected SET DEFAULT or DROP DEFAULT")

    def _alter_rename(self) -> AlterSpec:
        """RENAME ...: a column, an index, or the table itself."""
        self.i += 1
        if self.accept_kw("COLUMN"):
            ie = self.accept_if_exists()
            old = self.ident("a column name")
            self.expect_kw("TO")
            return AlterSpec("rename_column", name=old, new_name=self.ident("a column name"), if_exists=ie)
        if self.accept_kw("INDEX") or self.accept_kw("KEY"):
            ie = self.accept_if_exists()
            old = self.ident("an index name")
            self.expect_kw("TO")
            return AlterSpec("rename_index", name=old, new_name=self.ident("an index name"), if_exists=ie)
        self.accept_kw("TO") or self.accept_kw("AS")
        return AlterSpec("rename_table", table=self.table_name())

    def _alter_convert(self) -> AlterSpec:
        """CONVERT TO CHARACTER SET cs [COLLATE co]: every text column moves to the charset."""
        self.i += 1
        if self.is_kw("PARTITION") or self.is_kw("TABLE"):
            raise self.error("CONVERT PARTITION/TABLE is not supported")
        self.expect_kw("TO")
        if not (self.accept_kw("CHARACTER", "SET") or self.accept_kw("CHARSET")):
            raise self.error("expected CHARACTER SET")
        cs = self.value_word()
        co: str | None = None
        if self.accept_kw("COLLATE"):
            co = self.value_word()
        return AlterSpec("convert", options=TableOptions(charset=cs, collation=co))

    def _partition_op(self, word: str) -> AlterSpec:
        """A partition operation; EXCHANGE PARTITION p WITH TABLE t names the table whose rows move too."""
        other: TableName | None = None
        if word == "EXCHANGE":
            self.i += 2
            self.ident("a partition name")
            if self.accept_kw("WITH") and self.accept_kw("TABLE"):
                other = self.table_name()
        self.skip_rest_of_spec()
        return AlterSpec("partition", table=other)

    def _constraint_is_index(self) -> bool:
        j = 1
        t = self.peek(j)
        if t is not None and t.upper not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            j += 1
        t = self.peek(j)
        return t is not None and t.upper in ("PRIMARY", "UNIQUE", "FOREIGN")

    def drop(self) -> Statement:
        temporary = self.accept_kw("TEMPORARY")
        if self.accept_kw("TABLE") or self.accept_kw("TABLES"):
            if temporary:
                return Ignored("temporary table")
            ie = self.accept_if_exists()
            names = [self.table_name()]
            while self.accept_op(","):
                names.append(self.table_name())
            return DropTable(names, ie)
        if self.accept_kw("DATABASE") or self.accept_kw("SCHEMA"):
            ie = self.accept_if_exists()
            return DropDatabase(self.ident("a database name"), ie)
        if self.accept_kw("INDEX"):
            self.accept_kw("ONLINE") or self.accept_kw("OFFLINE")
            ie = self.accept_if_exists()
            name = self.ident("an index name")
            self.expect_kw("ON")
            return DropIndex(self.table_name(), name, ie)
        if self.accept_kw("VIEW"):
            self.accept_if_exists()
            names = [self.table_name()]
            while self.accept_op(","):
                names.append(self.table_name())
            return ViewStmt("drop", names)
        t = self.peek()
        return Ignored(f"DROP {t.upper if t is not None else ''}")

    def rename(self) -> Statement:
        if not (self.accept_kw("TABLE") or self.accept_kw("TABLES")):
            t = self.peek()
            return Ignored(f"RENAME {t.upper if t is not None else ''}")
        ie = self.accept_if_exists()
        pairs: list[tuple[TableName, TableName]] = []
        while True:
            a = self.table_name()
            if self.accept_kw("WAIT"):
                self.next()
            self.accept_kw("NOWAIT")
            self.expect_kw("TO")
            b = self.table_name()
            pairs.append((a, b))
            if not self.accept_op(","):
                break
        return RenameTable(pairs, ie)


_DDL_WORDS = {"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE"}
_LEAD_RE = re.compile(
    r"(?:\s+|#[^\n]*(?:\n|$)|--(?:[ \t\r][^\n]*)?(?:\n|$)|/\*(?![!M])(?:.|\n)*?\*/|/\*M?!\d*)*"
)
# trailing words that do not change what a statement does
_HARMLESS_TAIL = {"RESTRICT", "CASCADE", "ALGORITHM", "LOCK", "WAIT", "NOWAIT"}


def first_word(sql: str) -> str:
    """The statement's first keyword (upper case), skipping comments; "" if none."""
    m = _LEAD_RE.match(sql)
    rest = sql[m.end() if m else 0 :]
    w = re.match(r"[A-Za-z_]+", rest)
    return w.group(0).upper() if w else ""


def parse_statement(sql: str) -> Statement:
    """Parse one SQL statement into a statement object (``Ignored`` for non-DDL)."""
    w = first_word(sql)
    if w not in _DDL_WORDS:
        return Ignored(f"{w or 'empty'} statement")
    p = _Parser(sql)
    st = p.statement()
    if (
        not p.at_end()
        and not isinstance(
            st, (Ignored, CreateTable, AlterTable, CreateDatabase, AlterDatabase, UnsupportedTable)
        )
        and not (isinstance(st, ViewStmt) and st.action != "drop")
    ):
        t = p.peek()
        assert t is not None
        if t.upper not in _HARMLESS_TAIL:
            raise p.error("unexpected trailing text")
    return st
