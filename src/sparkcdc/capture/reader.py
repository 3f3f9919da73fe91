"""Readers over the binlog: a row reader (decodes RowChanges) and a scanner (boundaries and DDL only)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sparkcdc.capture.catalog.scope import unquote_ident
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import BinlogStream
from sparkcdc.capture.relay import RelayStream, binlog_stream
from sparkcdc.capture.row_image import check_full_image
from sparkcdc.capture.rowcodec import RowDecoder, TimestampRenderer, row_changes, rows_event_images
from sparkcdc.capture.tablemap import TableMap, table_info_from_map
from sparkcdc.capture.txnstream import (
    Begin,
    End,
    Idle,
    QueryItem,
    RollbackTo,
    RowsItem,
    Savepoint,
    StatementRows,
    TableMapItem,
    TxnStream,
    XaCommit,
    XaStart,
)
from sparkcdc.capture.upstream import UpstreamConfig, binary_logs
from sparkcdc.errors import BinlogPurgedError, DecodeError, UpstreamSetupError
from sparkcdc.model import BinlogPosition, RowChange, TableInfo

log = logging.getLogger(__name__)

TableLookup = Callable[[str, str], TableInfo | None]
TableMatch = Callable[[str, str], bool]


def _names_match(info: TableInfo, tm: TableMap) -> bool:
    if len(info.columns) != tm.column_count:
        return False
    return all(c.name.lower() == n.lower() for c, n in zip(info.columns, tm.names, strict=True))


_HIDDEN_HASH = re.compile(r"DB_ROW_HASH_[0-9]+")
"""MariaDB's hidden column of a long UNIQUE key (a hash of a TEXT/BLOB or a long VARCHAR): the
server appends one per such key after the table's own columns, and the binlog logs and names it,
while the table's definition (SHOW CREATE TABLE, information_schema, the DDL) does not have it."""


def hidden_hash_columns(info: TableInfo, tm: TableMap) -> int:
    """How many trailing columns of the map are hidden hash columns the tracked shape leaves out,
    when the other columns match it by name (0 otherwise)."""
    n = len(info.columns)
    extra = tm.names[n:]
    if not extra or not all(_HIDDEN_HASH.fullmatch(x) for x in extra):
        return 0
    if any(c.name.lower() != m.lower() for c, m in zip(info.columns, tm.names[:n], strict=True)):
        return 0
    return len(extra)


class TableShapes:
    """Resolves the TableInfo for a table map: the tracked shape if it matches, else one built from the map."""

    def __init__(self, lookup: TableLookup | None = None, version: int = 0) -> None:
        self.lookup = lookup
        self.version = version
        self._cache: dict[tuple[str, str, tuple[str, ...], tuple[int, ...]], TableInfo] = {}
        self.last: dict[tuple[str, str], TableInfo] = {}
        """The shape most recently resolved per table (the one its current rows use)."""
        self.mismatch_expected = False
        """Set while reading rows older than the tracked shapes (a schema history bootstrapped later
        than them): their table maps may list other columns, which is no reason to warn."""

    def resolve(self, tm: TableMap) -> TableInfo:
        """The shape of the rows of this table map."""
        key = (tm.schema, tm.table, tuple(tm.names), tuple(tm.types))
        got = self._cache.get(key)
        if got is not None:
            self.last[(tm.schema, tm.table)] = got
            return got
        tracked = self.lookup(tm.schema, tm.table) if self.lookup else None
        if tracked is not None and (_names_match(tracked, tm) or hidden_hash_columns(tracked, tm)):
            info = tracked  # hidden hash columns are decoded and left out of the rows (RowReader._rows)
        else:
            if tracked is not None:
                log.log(
                    logging.DEBUG if self.mismatch_expected else logging.WARNING,
                    "table %s.%s: binlog columns %s differ from the tracked shape %s; decoding with the binlog's",
                    tm.schema,
                    tm.table,
                    tm.names,
                    list(tracked.column_names),
                )
            info = table_info_from_map(tm, tracked.version if tracked is not None else self.version)
        self._cache[key] = info
        self.last[(tm.schema, tm.table)] = info
        return info


def partial_update_error(
    up: UpstreamConfig, schema: str, table: str, pos: BinlogPosition | None
) -> UpstreamSetupError:
    """The error for a MySQL PARTIAL_UPDATE_ROWS_EVENT: its JSON diffs are not applied, so its rows are refused."""
    where = f" in the transaction at {pos.file}:{pos.pos}" if pos is not None else ""
    return UpstreamSetupError(
        f"table {schema}.{table}: upstream {up.host}:{up.port} wrote a PARTIAL_UPDATE_ROWS_EVENT{where} "
        "(binlog_row_value_options=PARTIAL_JSON logs JSON updates as diffs), which sparkcdc does not apply; "
        "run SET PERSIST binlog_row_value_options='' on the upstream, then start the changefeed again from "
        "after that transaction (--start-position or --start-ts) with a snapshot of the table "
        '([snapshot] mode = "initial"), since the diffed rows cannot be read'
    )


@dataclass
class ReadStats:
    """Counters of one read."""

    rows: int = 0
    txns: int = 0
    bytes: int = 0
    skipped_rows_events: int = 0


class RowReader:
    """Decodes every row change in ``[start, end)`` (``end=None``: follow the binlog forever)."""

    def __init__(
        self,
        upstream: UpstreamConfig,
        start: Offset,
        end: Offset | None = None,
        *,
        shapes: TableShapes | None = None,
        match: TableMatch | None = None,
        time_zone: str = "UTC",
        heartbeat_s: float = 1.0,
        blocking: bool = True,
        shapes_from: tuple[int, int] | None = None,
        relay_dir: str = "",
    ) -> None:
        """``shapes_from``: the binlog position (``Offset.key()``) the tracked shapes describe the
        tables from; transactions starting before it may have other columns (see ``TableShapes``).
        ``relay_dir``: a server's binlog relay of this upstream (``capture/relay.py``), read where it
        holds the binlog instead of a replication connection of this reader's own."""
        self.upstream = upstream
        self.start = start
        self.end = end
        self.shapes = shapes or TableShapes()
        self.match = match
        self.tsr = TimestampRenderer(time_zone)
        self.heartbeat_s = heartbeat_s
        self.blocking = blocking
        self.stats = ReadStats()
        self.position = start
        self.shapes_from = shapes_from
        self.relay_dir = relay_dir
        self.last_rows_bytes = 0
        """The size of the ROWS event the last yielded list of row changes was decoded from."""
        self._decoders: dict[int, tuple[TableMap, RowDecoder | None, TableInfo | None]] = {}

    def _decoder(self, tm: TableMap) -> tuple[TableMap, RowDecoder | None, TableInfo | None]:
        if self.match is not None and not self.match(tm.schema, tm.table):
            return (tm, None, None)
        info = self.shapes.resolve(tm)
        # The table map cannot tell UUID/INET4/INET6 from BINARY(n): the tracked shape can.
        return (tm, RowDecoder(tm, self.tsr, info=info), info)

    def events(self) -> Iterator[RowChange | Offset]:
        """RowChanges in commit order; an Offset after each transaction and when idle."""
        for item in self.event_batches():
            if type(item) is list:
                yield from item
            else:
                yield item  # type: ignore[misc]

    def event_batches(self) -> Iterator[list[RowChange] | Offset]:
        """``events`` with the RowChanges of each ROWS event as one list (one table, one transaction).

        Only what a transaction committed is yielded: rows a ``ROLLBACK TO`` undid, rows of a
        transaction the server logged and rolled back, and rows of an XA transaction's first phase
        (delivered by its ``XA COMMIT``, with that transaction's commit_ts) are not.
        """
        end_key = self.end.key() if self.end is not None else None
        if end_key is not None and self.start.key() >= end_key:
            return
        stream = binlog_stream(
            self.upstream,
            self.start.file,
            self.start.pos,
            blocking=self.blocking,
            heartbeat_s=self.heartbeat_s,
            relay_dir=self.relay_dir,
        )
        try:
            txs = TxnStream(stream, self.start)
            txn = _Txn()
            by_id: dict[int, tuple[TableMap, RowDecoder | None, TableInfo | None]] = {}
            for item in txs.items():
                if isinstance(item, RowsItem):
                    if txn.skip_rows:
                        continue
                    rows = self._rows(item, by_id, txn)
                    if rows:
                        yield from txn.add(rows, txs.where())
                elif isinstance(item, TableMapItem):
                    by_id[item.tm.table_id] = self._table_map(item.tm)
                elif isinstance(item, Begin):
                    txn = _Txn(item.ts, BinlogPosition(item.start.file, item.start.pos, item.gtid))
                    by_id = {}
                    if self.shapes_from is not None:
                        self.shapes.mismatch_expected = item.start.key() < self.shapes_from
                elif isinstance(item, End):
                    if item.outcome == "commit":
                        yield from txn.release()
                    else:
                        txn.discard(item.outcome, txs.where())
                    self.stats.txns += 1
                    self.stats.bytes += item.nbytes
                    self.position = item.end
                    yield item.end
                    if end_key is not None and item.end.key() >= end_key:
                        return
                elif isinstance(item, Idle):
                    self.position = item.at
                    yield item.at
                    # The end can follow non-transaction events (a rotation, a binlog checkpoint):
                    # no End reaches it, the idle position does.
                    if not self.blocking or (end_key is not None and item.at.key() >= end_key):
                        return
                elif isinstance(item, StatementRows):
                    check_statement_rows(item, self.match)
                elif isinstance(item, Savepoint):
                    txn.savepoint(item.name)
                elif isinstance(item, RollbackTo):
                    txn.rollback_to(item.name, txs.where())
                elif isinstance(item, XaStart):
                    txn.xa_first_phase(item.prepared)
                elif isinstance(item, XaCommit):
                    at = item.prepared or find_prepared(self.upstream, item.xid, txs.offset())
                    for rows in self._prepared_rows(at, txn):
                        yield from txn.add(rows, txs.where())
        finally:
            stream.close()

    def _table_map(self, tm: TableMap) -> tuple[TableMap, RowDecoder | None, TableInfo | None]:
        cached = self._decoders.get(tm.table_id)
        if (
            cached is None
            or cached[0].names != tm.names
            or cached[0].types != tm.types
            or (cached[0].schema, cached[0].table) != (tm.schema, tm.table)
            or cached[0].meta != tm.meta
        ):
            cached = self._decoder(tm)
            self._decoders[tm.table_id] = cached
        return cached

    def _rows(
        self,
        item: RowsItem,
        by_id: dict[int, tuple[TableMap, RowDecoder | None, TableInfo | None]],
        txn: _Txn,
    ) -> list[RowChange]:
        """The row changes of one ROWS event (none for a table outside the filter)."""
        entry = by_id.get(item.table_id)
        if entry is None:
            raise DecodeError(
                f"a ROWS event for table id {item.table_id} without its TABLE_MAP in the transaction at "
                f"{txn.where()}"
            )
        tm, dec, info = entry
        if dec is None or info is None:
            self.stats.skipped_rows_events += 1
            return []
        op = item.op
        if op == "P":
            raise partial_update_error(self.upstream, tm.schema, tm.table, txn.pos)
        check_full_image(
            item.body,
            item.version,
            op,
            tm.column_count,
            table=f"{tm.schema}.{tm.table}",
            where=f"the transaction at {txn.where()}",
        )
        images = rows_event_images(dec, item.body, item.version, op)
        if len(info.columns) < tm.column_count:  # MariaDB's hidden hash columns, last in the map
            n = len(info.columns)
            images = [(b if b is None else b[:n], a if a is None else a[:n]) for b, a in images]
        rows = row_changes(op, tm.schema, tm.table, info.version, txn.ts, images, txn.seq, txn.pos)
        txn.seq += len(rows)
        self.stats.rows += 1 if txn.seq else 0
        self.last_rows_bytes = len(item.body)
        return rows

    def _prepared_rows(self, at: Offset, txn: _Txn) -> Iterator[list[RowChange]]:
        """The rows of the XA transaction prepared at ``at``, as rows of ``txn`` (its XA COMMIT)."""
        # Whole before the XA COMMIT that names it: a relay's stream (blocking) ends at its End too.
        stream = binlog_stream(
            self.upstream,
            at.file,
            at.pos,
            blocking=bool(self.relay_dir),
            heartbeat_s=self.heartbeat_s,
            relay_dir=self.relay_dir,
        )
        try:
            by_id: dict[int, tuple[TableMap, RowDecoder | None, TableInfo | None]] = {}
            began = False
            for item in TxnStream(stream, at).items():
                if isinstance(item, Begin):
                    if began:
                        break
                    began = True
                elif isinstance(item, TableMapItem):
                    by_id[item.tm.table_id] = self._table_map(item.tm)
                elif isinstance(item, RowsItem):
                    rows = self._rows(item, by_id, txn)
                    if rows:
                        yield rows
                elif isinstance(item, End):
                    if item.outcome != "xa_prepare":
                        raise DecodeError(
                            f"XA COMMIT in the transaction at {txn.where()} names the transaction at "
                            f"{at.file}:{at.pos}, which is no prepared XA transaction"
                        )
                    return
            raise BinlogPurgedError(
                f"XA COMMIT in the transaction at {txn.where()}: its prepared transaction at {at.file}:{at.pos} "
                "is no longer whole in the upstream binlog"
            )
        finally:
            stream.close()


_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_DML_TARGET = re.compile(
    r"\s*(?:(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\s+INTO)?"
    r"|UPDATE(?:\s+(?:LOW_PRIORITY|IGNORE))*"
    r"|DELETE(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE))*\s+FROM"
    r"|LOAD\s+DATA\b.*?\bINTO\s+TABLE)"
    rf"\s+(?P<a>{_NAME})(?:\s*\.\s*(?P<b>{_NAME}))?(?P<rest>.*)",
    re.I | re.S,
)


def statement_target(query: str, schema: str) -> tuple[str, str] | None:
    """The one table a statement-format row change writes, or None when that is not plain to see
    (several tables, a CALL, a statement this does not read)."""
    m = _DML_TARGET.match(query)
    if m is None:
        return None
    rest = m.group("rest").lstrip()
    if rest.startswith(",") or re.match(r"(?i)(?:AS\s+)?\w*\s*(?:,|JOIN\b|STRAIGHT_JOIN\b)", rest):
        return None
    if m.group("b") is not None:
        return unquote_ident(m.group("a")), unquote_ident(m.group("b"))
    return schema, unquote_ident(m.group("a"))


def check_statement_rows(item: StatementRows, match: TableMatch | None) -> None:
    """Refuse a statement-format row change unless it plainly writes a table outside the filter."""
    target = statement_target(item.query, item.schema)
    if target is not None and match is not None and not match(*target):
        return
    raise UpstreamSetupError(
        f"a row change logged as a statement at {item.where} ({item.query[:200]!r}): the upstream wrote it "
        "with binlog_format STATEMENT or MIXED, so its rows are not in the binlog; run SET GLOBAL "
        "binlog_format=ROW on the upstream (and binlog_format=ROW in its my.cnf), then start the "
        "changefeed again from after this position with a snapshot of the tables it changed"
    )


HOLD_ROWS = 200_000
"""Row changes a transaction may hold back after a SAVEPOINT (see ``_Txn``) before it sends them."""

HOLD_TXN_ROWS = 10_000
"""Row changes any transaction holds back until its end (see ``_Txn``) before it streams them."""


class _Txn:
    """The row changes of one transaction on their way out.

    Only what the transaction committed may leave, and a binlog says that at its end: a group
    ending with ROLLBACK (the server logs one when a transaction that also changed a
    non-transactional table rolls back, e.g. to a SAVEPOINT) did not happen, and a ``ROLLBACK TO``
    undoes what followed its SAVEPOINT. So a transaction's rows wait for its end, up to
    ``HOLD_TXN_ROWS`` row changes (after a SAVEPOINT up to ``HOLD_ROWS``); a larger transaction
    streams from there on, and a ROLLBACK of what it already sent fails by name instead of being
    delivered. A MySQL XA transaction's first phase waits whole (its end says whether it
    committed in one phase). A MariaDB XA prepare is known at its start: its rows are not decoded
    at all (``XA COMMIT`` reads them again).
    """

    def __init__(self, ts: int = 0, pos: BinlogPosition | None = None) -> None:
        self.ts = ts
        self.pos = pos
        self.seq = 0
        self.held: list[list[RowChange]] | None = []
        self.held_rows = 0
        self.savepoints: dict[str, tuple[int, int, int]] = {}
        """name -> (held lists, held rows, seq) at the SAVEPOINT."""
        self.sent = False
        """Some rows were sent already: a later ROLLBACK cannot undo them."""
        self.sent_past_savepoint = False
        self.skip_rows = False
        self.hold_whole = False
        """A MySQL XA first phase: no bound."""

    def where(self) -> str:
        return f"{self.pos.file}:{self.pos.pos}" if self.pos is not None else "?"

    def add(self, rows: list[RowChange], where: str) -> Iterator[list[RowChange]]:
        if self.held is None:
            self.sent = True
            yield rows
            return
        self.held.append(rows)
        self.held_rows += len(rows)
        if self.hold_whole or self.held_rows <= (HOLD_ROWS if self.savepoints else HOLD_TXN_ROWS):
            return
        if self.savepoints:
            self.sent_past_savepoint = True
            self.savepoints.clear()
        yield from self.release()  # from here on the transaction streams

    def release(self) -> Iterator[list[RowChange]]:
        held, self.held, self.held_rows = self.held or [], None, 0
        if held:
            self.sent = True
        yield from held

    def savepoint(self, name: str) -> None:
        if self.held is None:
            self.held = []
        self.savepoints.pop(name, None)  # a savepoint set again moves
        self.savepoints[name] = (len(self.held), self.held_rows, self.seq)

    def rollback_to(self, name: str, where: str) -> None:
        mark = self.savepoints.get(name)
        if mark is None or self.held is None:
            why = (
                f"more than {HOLD_ROWS} row changes followed a SAVEPOINT and were sent"
                if self.sent_past_savepoint
                else f"no SAVEPOINT {name!r} came before it"
            )
            raise DecodeError(
                f"ROLLBACK TO {name!r} at {where} in the transaction at {self.where()}: {why}; "
                "no change of this transaction was committed"
            )
        n_lists, n_rows, self.seq = mark
        del self.held[n_lists:]
        self.held_rows = n_rows
        names = list(self.savepoints)
        for later in names[names.index(name) + 1 :]:
            del self.savepoints[later]

    def xa_first_phase(self, prepared: bool) -> None:
        if prepared:
            self.skip_rows = True
        else:
            self.hold_whole = True

    def discard(self, outcome: str, where: str) -> None:
        if self.sent:
            raise DecodeError(
                f"the transaction at {self.where()} ends with {outcome.upper().replace('_', ' ')} at {where} "
                f"after more than {HOLD_TXN_ROWS} of its row changes were sent; none of them was committed"
            )
        self.held, self.held_rows = None, 0


def find_prepared(up: UpstreamConfig, xid: str, before: Offset) -> Offset:
    """Where the XA transaction ``xid``, still prepared at ``before``, was prepared.

    For an ``XA COMMIT`` whose prepare the reader's offset does not name (it was prepared before
    the changefeed's start): the binlog files still on the upstream are scanned up to ``before``.
    """
    conn = up.connect()
    try:
        files = [name for name, _size in binary_logs(conn)]
    finally:
        conn.close()
    if files:
        first = Offset(files[0], 4, 0)  # only the open XA transactions matter here, not the chain
        last = first
        for txn in Scanner(up).scan(first, stop=lambda t: t.end.key() >= before.key()):
            if txn.end.key() > before.key():
                break
            last = txn.end
        for x, f, p in last.xa:
            if x == xid:
                return Offset(f, p, 0)
    raise BinlogPurgedError(
        f"XA COMMIT {xid} at {before.file}:{before.pos}: its XA PREPARE is no longer in the upstream "
        f"binlog (files {files[0] if files else '-'} to {files[-1] if files else '-'}), so its rows "
        "cannot be read; start a new changefeed with a snapshot of the tables it changed"
    )


@dataclass
class TxnInfo:
    """What the scanner learnt about one transaction."""

    start: Offset
    end: Offset
    ts: int
    nbytes: int
    tables: set[tuple[str, str]] = field(default_factory=set)
    queries: list[QueryItem] = field(default_factory=list)
    """Its DDL statements, each with its default schema and the session it ran in."""
    statement_rows: list[StatementRows] = field(default_factory=list)
    """Row changes logged as statements (refused by a changefeed that captures their table)."""


class Scanner:
    """Walks transaction boundaries without decoding rows (driver side: cheap)."""

    def __init__(self, upstream: UpstreamConfig, *, heartbeat_s: float = 1.0, relay_dir: str = "") -> None:
        """``relay_dir``: a server's binlog relay of this upstream (``capture/relay.py``), read by
        scans that know a position the binlog reaches (``scan(until=...)``)."""
        self.upstream = upstream
        self.heartbeat_s = heartbeat_s
        self.relay_dir = relay_dir

    def scan(
        self,
        start: Offset,
        *,
        max_bytes: int | None = None,
        stop: Callable[[TxnInfo], bool] | None = None,
        blocking: bool = False,
        until: tuple[str, int] | None = None,
    ) -> Generator[TxnInfo, None, None]:
        """Transactions after ``start`` up to the current end of the binlog (non-blocking).

        ``until``: a binlog position read before (the head): the scan reaches at least there, and
        with a relay ends there (a relay can tell where its copy ends, not where the binlog does).
        """
        reach = Offset(until[0], until[1], 0).key() if until is not None and self.relay_dir else None
        stream: BinlogStream | RelayStream
        if reach is not None:
            stream = RelayStream(
                Path(self.relay_dir), self.upstream, start.file, start.pos, heartbeat_s=self.heartbeat_s
            )
            if start.key() >= reach:
                return
        else:
            stream = BinlogStream(
                self.upstream, start.file, start.pos, blocking=blocking, heartbeat_s=self.heartbeat_s
            )
        try:
            txs = TxnStream(stream, start, want_rows=False)
            cur: TxnInfo | None = None
            total = 0
            for item in txs.items():
                if isinstance(item, Begin):
                    cur = TxnInfo(item.start, item.start, item.ts, 0)
                elif isinstance(item, TableMapItem):
                    if cur is not None:
                        cur.tables.add((item.tm.schema, item.tm.table))
                elif isinstance(item, QueryItem):
                    if cur is not None:
                        cur.queries.append(item)
                elif isinstance(item, StatementRows):
                    if cur is not None:
                        cur.statement_rows.append(item)
                elif isinstance(item, XaCommit):
                    if cur is not None:
                        at = item.prepared or find_prepared(self.upstream, item.xid, txs.offset())
                        cur.tables.update(self.prepared_tables(at))
                elif isinstance(item, End):
                    if cur is None:
                        continue
                    cur.end = item.end
                    cur.nbytes = item.nbytes
                    total += item.nbytes
                    done = cur
                    cur = None
                    yield done
                    if stop is not None and stop(done):
                        return
                    if max_bytes is not None and total >= max_bytes:
                        return
                    if reach is not None and done.end.key() >= reach:
                        return
                elif isinstance(item, Idle):
                    if reach is not None:
                        if cur is None and item.at.key() >= reach:
                            return
                        continue
                    if blocking:
                        continue
                    return
        finally:
            stream.close()

    def prepared_tables(self, at: Offset) -> set[tuple[str, str]]:
        """The tables the XA transaction prepared at ``at`` changes."""
        relayed = bool(self.relay_dir)
        stream = binlog_stream(
            self.upstream,
            at.file,
            at.pos,
            blocking=relayed,
            heartbeat_s=self.heartbeat_s,
            relay_dir=self.relay_dir,
        )
        tables: set[tuple[str, str]] = set()
        try:
            for item in TxnStream(stream, at, want_rows=False).items():
                if isinstance(item, TableMapItem):
                    tables.add((item.tm.schema, item.tm.table))
                elif isinstance(item, End) or (isinstance(item, Idle) and not relayed):
                    # The prepared transaction is whole before its XA COMMIT: a relay's idle (its
                    # copy ends here for now) is not the binlog's end.
                    break
        finally:
            stream.close()
        return tables
