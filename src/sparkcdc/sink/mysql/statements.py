"""SQL statement building for the applier: quoted identifiers, placeholders, batching.

Every identifier is backquoted (a backtick inside doubles) and every ``%``
inside an identifier is doubled, because PyMySQL formats the statement with
``%`` placeholders: a column named ``a%s`` must not become a placeholder.
Every value goes through a ``%s`` placeholder (PyMySQL escapes it by type:
bytes → ``_binary'…'``, Decimal unquoted, str quoted, None → NULL).

``StatementPlanner`` turns row changes, in commit order, into a list of
statements: consecutive compatible changes of one table become one multi-row
``INSERT``/``REPLACE`` or one ``DELETE … WHERE key IN (…)``; the order of
changes to the same key is always kept.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.capture.charsets import CODECS
from sparkcdc.model import ColumnInfo, RowChange, TableInfo

ParamFn = Callable[[Any], Any]


def quote_ident(name: str) -> str:
    """A backquoted identifier with ``%`` doubled for PyMySQL's placeholder formatting."""
    return "`" + name.replace("`", "``").replace("%", "%%") + "`"


def quote_ident_raw(name: str) -> str:
    """A backquoted identifier for statements run without parameters (no ``%`` doubling)."""
    return "`" + name.replace("`", "``") + "`"


def qualified(schema: str, table: str) -> str:
    """```schema`.`table``` for a parameterised statement."""
    return f"{quote_ident(schema)}.{quote_ident(table)}"


def _json_param(v: Any) -> Any:
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False)
    return v


def _bit_param(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(v, "big")
    return v


def _escaped_bytes(exc: UnicodeError) -> tuple[bytes, int]:
    """The codec error handler ``sparkcdc.escaped-bytes``: ``surrogateescape`` for UTF-16/32.

    Python's UTF-16/32 encoders take a handler's bytes only in whole code units, and
    ``surrogateescape`` gives one byte per escape, so they refuse it. This handler gives back the
    whole run of escaped bytes (U+DC80-U+DCFF) that starts at the error: a 16-bit unit MariaDB
    holds and Python's decoder could not read (a lone surrogate in ``ucs2``) was escaped as its
    two bytes, and comes back as them.
    """
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text, end = exc.object, exc.start
    while end < len(text) and 0xDC80 <= ord(text[end]) <= 0xDCFF:
        end += 1
    if end == exc.start:
        raise exc
    return bytes(ord(c) - 0xDC00 for c in text[exc.start : end]), end


codecs.register_error("sparkcdc.escaped-bytes", _escaped_bytes)


def _raw_text_param(codec: str) -> ParamFn:
    """Text of a column in a charset other than UTF-8 or latin1, sent as that column's bytes.

    Capture decoded the column's bytes with ``codec`` (a byte it could not read kept as a lone
    surrogate: MariaDB's ``sjis`` and ``ujis`` hold sequences Python's tables lack); encoding the
    text back with the same codec gives exactly those bytes, and a ``_binary`` literal puts them
    into the column unconverted. Sent as text instead, the downstream would map the characters
    back with its own table, which differs from Python's in places (``ujis``: "Illegal mix of
    collations" where a character has no ``ujis`` form there). ASCII is the same either way.
    """

    errors = "sparkcdc.escaped-bytes" if codec.startswith(("utf-16", "utf-32")) else "surrogateescape"

    def convert(v: Any) -> Any:
        if type(v) is not str or v.isascii():
            return v
        try:
            return v.encode(codec, errors)
        except UnicodeEncodeError:  # not text this column's codec read: the downstream decides
            return v

    return convert


def _param_fn(col: ColumnInfo) -> ParamFn | None:
    """A converter for values that PyMySQL would not send as the column expects (None = as is)."""
    if col.type == "json":
        return _json_param
    if col.type == "bit":
        return _bit_param
    if col.type in ("enum", "set") and col.holds_bytes:
        # a binary ENUM/SET element is bytes, one code point per byte: sent as those bytes
        return _raw_text_param("latin-1")
    if col.is_text and col.charset:
        codec = CODECS.get(col.charset.lower())
        # not UTF-8 itself, nor latin1, which reads every byte
        if codec is not None and codec not in ("utf-8", "binary", "ascii", "mysql_latin1"):
            return _raw_text_param(codec)
    return None


@dataclass
class TablePlan:
    """Precomputed statement pieces for one table shape."""

    info: TableInfo
    name: str
    write_idx: tuple[int, ...]
    write_cols: str
    row_ph: str
    key_idx: tuple[int, ...]
    key_cols: tuple[str, ...]
    match_idx: tuple[int, ...]
    """Columns a key-less table's DELETE/UPDATE matches on (all non-generated columns)."""
    convert: tuple[tuple[int, ParamFn], ...]
    exact_key: bool
    """Key values compare exactly in Python as they do downstream (no text collation in the key)."""
    no_replace: bool = False
    """The table has a unique key ``WITHOUT OVERLAPS``, on which MariaDB refuses ``REPLACE``
    (ER_NOT_SUPPORTED_YET): safe mode deletes the rows the image collides with, then inserts it
    (``delete_colliding``)."""
    insert_head: dict[str, str] = field(default_factory=dict)
    """Cached statement texts by kind."""
    collide: tuple[str, tuple[int, ...]] | None = None
    """Cached ``delete_colliding`` statement and the image positions of its parameters."""

    @classmethod
    def build(cls, info: TableInfo) -> TablePlan:
        """Compute the plan of a table shape."""
        write_idx = tuple(i for i, c in enumerate(info.columns) if not c.generated)
        key_idx = info.handle_key_index
        key_cols = tuple(info.columns[i].name for i in key_idx)
        convert = tuple((i, fn) for i, c in enumerate(info.columns) if (fn := _param_fn(c)) is not None)
        exact = bool(key_idx) and all(
            not (
                info.columns[i].is_text or info.columns[i].type in ("enum", "set", "json", "float", "double")
            )
            for i in key_idx
        )
        return cls(
            info=info,
            name=qualified(info.schema, info.table),
            write_idx=write_idx,
            write_cols="(" + ",".join(quote_ident(info.columns[i].name) for i in write_idx) + ")",
            row_ph="(" + ",".join(["%s"] * len(write_idx)) + ")",
            key_idx=key_idx,
            key_cols=key_cols,
            match_idx=write_idx,
            convert=convert,
            exact_key=exact,
            no_replace=any(ix.without_overlaps for ix in info.indexes),
        )

    def params(self, row: Sequence[Any], idx: tuple[int, ...]) -> list[Any]:
        """The values of ``row`` at ``idx``, converted for the driver."""
        if not self.convert:
            return [row[i] for i in idx]
        out = list(row)
        for i, fn in self.convert:
            out[i] = fn(out[i])
        return [out[i] for i in idx]

    def key(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """The handle-key values of a row."""
        return tuple(row[i] for i in self.key_idx)

    def insert(self, rows: Sequence[Sequence[Any]], replace: bool) -> tuple[str, list[Any]]:
        """``INSERT``/``REPLACE INTO t (cols) VALUES (…),(…)``."""
        verb = "REPLACE" if replace else "INSERT"
        head = self.insert_head.get(verb)
        if head is None:
            head = self.insert_head[verb] = f"{verb} INTO {self.name} {self.write_cols} VALUES "
        args: list[Any] = []
        for r in rows:
            args.extend(self.params(r, self.write_idx))
        return head + ",".join([self.row_ph] * len(rows)), args

    def delete_keys(self, keys: Sequence[tuple[Any, ...]]) -> tuple[str, list[Any]]:
        """``DELETE FROM t WHERE k IN (…)``, or an OR-chain of ``(k1 = … AND k2 = …)``."""
        args: list[Any] = []
        if len(self.key_cols) == 1:
            where = f"{quote_ident(self.key_cols[0])} IN (" + ",".join(["%s"] * len(keys)) + ")"
            args.extend(k[0] for k in keys)
        else:
            one = "(" + " AND ".join(f"{quote_ident(c)} = %s" for c in self.key_cols) + ")"
            where = " OR ".join([one] * len(keys))
            for k in keys:
                args.extend(k)
        return f"DELETE FROM {self.name} WHERE {where}", args

    def _where(self) -> str:
        where = self.insert_head.get("WHERE")
        if where is None:
            if self.key_idx:
                where = " AND ".join(f"{quote_ident(c)} = %s" for c in self.key_cols)
            else:
                # No handle key: match every stored column, NULL-safe.
                where = " AND ".join(
                    f"{quote_ident(self.info.columns[i].name)} <=> %s" for i in self.match_idx
                )
            self.insert_head["WHERE"] = where
        return where

    def _where_args(self, row: Sequence[Any]) -> list[Any]:
        return list(self.key(row)) if self.key_idx else self.params(row, self.match_idx)

    def delete_row(self, row: Sequence[Any]) -> tuple[str, list[Any]]:
        """``DELETE FROM t WHERE <key or all columns> LIMIT 1``."""
        sql = self.insert_head.get("DELETE1")
        if sql is None:
            sql = self.insert_head["DELETE1"] = f"DELETE FROM {self.name} WHERE {self._where()} LIMIT 1"
        return sql, self._where_args(row)

    def delete_colliding(self, image: Sequence[Any]) -> tuple[str, list[Any]]:
        """``DELETE`` of every row a unique key of ``image`` collides with: what ``REPLACE`` removes.

        A key ``WITHOUT OVERLAPS`` (its columns end with the period's end, then its start)
        collides where its other parts are equal and the half-open periods overlap.
        """
        if self.collide is None:
            info = self.info
            conds: list[str] = []
            at: list[int] = []
            for ix in info.indexes:
                if not ix.unique:
                    continue
                cols = list(ix.columns[:-2] if ix.without_overlaps else ix.columns)
                parts = [f"{quote_ident(c)} = %s" for c in cols]
                at += [info.index_of(c) for c in cols]
                if ix.without_overlaps:
                    end, start = ix.columns[-2:]
                    parts.append(f"{quote_ident(start)} < %s AND {quote_ident(end)} > %s")
                    at += [info.index_of(end), info.index_of(start)]
                conds.append("(" + " AND ".join(parts) + ")")
            self.collide = (f"DELETE FROM {self.name} WHERE " + " OR ".join(conds), tuple(at))
        sql, positions = self.collide
        return sql, self.params(image, positions)

    def update(self, before: Sequence[Any], after: Sequence[Any]) -> tuple[str, list[Any]]:
        """``UPDATE t SET <all stored columns> WHERE <old key or old row> LIMIT 1``."""
        sql = self.insert_head.get("UPDATE")
        if sql is None:
            sets = ",".join(f"{quote_ident(self.info.columns[i].name)} = %s" for i in self.write_idx)
            sql = self.insert_head["UPDATE"] = f"UPDATE {self.name} SET {sets} WHERE {self._where()} LIMIT 1"
        return sql, self.params(after, self.write_idx) + self._where_args(before)


@dataclass
class Statement:
    """One statement with its parameters; ``rows`` = how many row changes it carries."""

    sql: str
    args: list[Any]
    rows: int
    single: bool = False
    """A one-row statement that may be packed with others into one multi-statement round trip."""


@dataclass
class _Group:
    """Pending deletes then writes of one table; deletes may move before earlier writes of other keys."""

    plan: TablePlan
    deletes: list[tuple[Any, ...]] = field(default_factory=list)
    delete_set: set[tuple[Any, ...]] = field(default_factory=set)
    writes: list[Sequence[Any]] = field(default_factory=list)
    write_keys: set[tuple[Any, ...]] = field(default_factory=set)
    write_bytes: int = 0
    replace: bool = False

    def empty(self) -> bool:
        return not self.deletes and not self.writes


class StatementPlanner:
    """Turns ordered row changes into batched statements (see the module docstring)."""

    def __init__(
        self, max_rows_per_statement: int = 256, batch: bool = True, max_statement_bytes: int = 4 << 20
    ) -> None:
        self.max_rows = max(1, max_rows_per_statement)
        self.batch = batch
        self.max_bytes = max_statement_bytes
        self.out: list[Statement] = []
        self._groups: dict[tuple[str, str], _Group] = {}

    def add(self, row: RowChange, plan: TablePlan, safe: bool) -> None:
        """Add one row change; ``safe`` applies TiCDC's safe mode to it (REPLACE, split UPDATE)."""
        op = row.op
        if op == "I":
            assert row.after is not None
            if safe:
                self._replace(plan, row.after)
            else:
                self._write(plan, row.after, replace=False)
        elif op == "D":
            assert row.before is not None
            self._delete(plan, row.before)
        else:
            assert row.before is not None and row.after is not None
            if not safe:
                self._single(plan, *plan.update(row.before, row.after))
                return
            if not plan.key_idx or plan.key(row.before) != plan.key(row.after):
                self._delete(plan, row.before)
            # REPLACE removes the old image when the key is unchanged (and any row a unique key collides with).
            self._replace(plan, row.after)

    def finish(self) -> list[Statement]:
        """Flush every pending group and return the statements in execution order."""
        for g in list(self._groups.values()):
            self._flush(g)
        self._groups.clear()
        out, self.out = self.out, []
        return out

    def _group(self, plan: TablePlan) -> _Group:
        key = (plan.info.schema, plan.info.table)
        g = self._groups.get(key)
        if g is not None and g.plan is not plan:
            # Another shape of the same table: keep the order across the change.
            self._flush(g)
            g = None
        if g is None:
            g = self._groups[key] = _Group(plan)
        return g

    def _write(self, plan: TablePlan, image: Sequence[Any], replace: bool) -> None:
        if not self.batch:
            self._flush_table(plan)
            self.out.append(Statement(*plan.insert([image], replace), rows=1, single=True))
            return
        g = self._group(plan)
        if g.writes and g.replace != replace:
            self._flush(g)
        g.replace = replace
        g.writes.append(image)
        if plan.key_idx:
            g.write_keys.add(plan.key(image))
        g.write_bytes += _approx_size(image)
        if len(g.writes) >= self.max_rows or g.write_bytes >= self.max_bytes:
            self._flush(g)

    def _replace(self, plan: TablePlan, image: Sequence[Any]) -> None:
        """Safe mode's write: ``REPLACE``, or where MariaDB refuses it (``plan.no_replace``) a
        ``DELETE`` of what the image collides with, then an ``INSERT``."""
        if plan.no_replace:
            self._single(plan, *plan.delete_colliding(image))
            self._write(plan, image, replace=False)
        else:
            self._write(plan, image, replace=True)

    def _delete(self, plan: TablePlan, image: Sequence[Any]) -> None:
        if not plan.key_idx or not self.batch:
            self._flush_table(plan)
            self.out.append(Statement(*plan.delete_row(image), rows=1, single=True))
            return
        g = self._group(plan)
        key = plan.key(image)
        # A delete may run before the pending writes only if it provably targets none of
        # their keys; with a collation in the key, equality downstream is not Python's.
        if g.writes and (not plan.exact_key or key in g.write_keys):
            self._flush(g)
        if key not in g.delete_set:
            g.delete_set.add(key)
            g.deletes.append(key)
        if len(g.deletes) >= self.max_rows:
            self._flush(g)

    def _single(self, plan: TablePlan, sql: str, args: list[Any]) -> None:
        self._flush_table(plan)
        self.out.append(Statement(sql, args, rows=1, single=True))

    def _flush_table(self, plan: TablePlan) -> None:
        g = self._groups.get((plan.info.schema, plan.info.table))
        if g is not None:
            self._flush(g)

    def _flush(self, g: _Group) -> None:
        if g.deletes:
            self.out.append(Statement(*g.plan.delete_keys(g.deletes), rows=len(g.deletes)))
        if g.writes:
            self.out.append(Statement(*g.plan.insert(g.writes, g.replace), rows=len(g.writes)))
        g.deletes, g.delete_set, g.writes, g.write_keys, g.write_bytes = [], set(), [], set(), 0


def _approx_size(image: Sequence[Any]) -> int:
    """A cheap estimate of a row's size in a statement (strings and bytes dominate)."""
    n = 8 * len(image)
    for v in image:
        if isinstance(v, (str, bytes)):
            n += len(v)
    return n
