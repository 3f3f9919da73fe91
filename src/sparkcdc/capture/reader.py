"""Readers over the binlog: a row reader (decodes RowChanges) and a scanner (boundaries and DDL only)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import BinlogStream
from sparkcdc.capture.rowcodec import RowDecoder, TimestampRenderer, row_changes, rows_event_images
from sparkcdc.capture.tablemap import TableMap, table_info_from_map
from sparkcdc.capture.txnstream import Begin, End, Idle, QueryItem, RowsItem, TableMapItem, TxnStream
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import UpstreamSetupError
from sparkcdc.model import BinlogPosition, RowChange, TableInfo

log = logging.getLogger(__name__)

TableLookup = Callable[[str, str], TableInfo | None]
TableMatch = Callable[[str, str], bool]


def _names_match(info: TableInfo, tm: TableMap) -> bool:
    if len(info.columns) != tm.column_count:
        return False
    return all(c.name.lower() == n.lower() for c, n in zip(info.columns, tm.names, strict=True))


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
        if tracked is not None and _names_match(tracked, tm):
            info = tracked
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
    ) -> None:
        """``shapes_from``: the binlog position (``Offset.key()``) the tracked shapes describe the
        tables from; transactions starting before it may have other columns (see ``TableShapes``)."""
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
        self.last_rows_bytes = 0
        """The size of the ROWS event the last yielded list of row changes was decoded from."""
        self._decoders: dict[int, tuple[TableMap, RowDecoder | None, TableInfo | None]] = {}

    def _decoder(self, tm: TableMap) -> tuple[TableMap, RowDecoder | None, TableInfo | None]:
        if self.match is not None and not self.match(tm.schema, tm.table):
            return (tm, None, None)
        return (tm, RowDecoder(tm, self.tsr), self.shapes.resolve(tm))

    def events(self) -> Iterator[RowChange | Offset]:
        """RowChanges in commit order; an Offset after each transaction and when idle."""
        for item in self.event_batches():
            if type(item) is list:
                yield from item
            else:
                yield item  # type: ignore[misc]

    def event_batches(self) -> Iterator[list[RowChange] | Offset]:
        """``events`` with the RowChanges of each ROWS event as one list (one table, one transaction)."""
        end_key = self.end.key() if self.end is not None else None
        if end_key is not None and self.start.key() >= end_key:
            return
        stream = BinlogStream(
            self.upstream,
            self.start.file,
            self.start.pos,
            blocking=self.blocking,
            heartbeat_s=self.heartbeat_s,
        )
        try:
            txs = TxnStream(stream, self.start)
            ts = 0
            seq = 0
            pos: BinlogPosition | None = None
            by_id: dict[int, tuple[TableMap, RowDecoder | None, TableInfo | None]] = {}
            for item in txs.items():
                if isinstance(item, RowsItem):
                    entry = by_id.get(item.table_id)
                    if entry is None:
                        continue
                    tm, dec, info = entry
                    if dec is None or info is None:
                        self.stats.skipped_rows_events += 1
                        continue
                    schema, table, version = tm.schema, tm.table, info.version
                    op = item.op
                    if op == "P":
                        raise partial_update_error(self.upstream, schema, table, pos)
                    rows = row_changes(
                        op,
                        schema,
                        table,
                        version,
                        ts,
                        rows_event_images(dec, item.body, item.version, op),
                        seq,
                        pos,
                    )
                    seq += len(rows)
                    self.stats.rows += 1 if seq else 0
                    if rows:
                        self.last_rows_bytes = len(item.body)
                        yield rows
                elif isinstance(item, TableMapItem):
                    tm = item.tm
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
                    by_id[tm.table_id] = cached
                elif isinstance(item, Begin):
                    ts = item.ts
                    seq = 0
                    pos = BinlogPosition(item.start.file, item.start.pos, item.gtid)
                    by_id = {}
                    if self.shapes_from is not None:
                        self.shapes.mismatch_expected = item.start.key() < self.shapes_from
                elif isinstance(item, End):
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
                elif isinstance(item, QueryItem):
                    continue
        finally:
            stream.close()


@dataclass
class TxnInfo:
    """What the scanner learnt about one transaction."""

    start: Offset
    end: Offset
    ts: int
    nbytes: int
    tables: set[tuple[str, str]] = field(default_factory=set)
    queries: list[tuple[str, str]] = field(default_factory=list)
    """(default schema, query) of non-BEGIN/COMMIT statements: DDL candidates."""


class Scanner:
    """Walks transaction boundaries without decoding rows (driver side: cheap)."""

    def __init__(self, upstream: UpstreamConfig, *, heartbeat_s: float = 1.0) -> None:
        self.upstream = upstream
        self.heartbeat_s = heartbeat_s

    def scan(
        self,
        start: Offset,
        *,
        max_bytes: int | None = None,
        stop: Callable[[TxnInfo], bool] | None = None,
        blocking: bool = False,
    ) -> Generator[TxnInfo, None, None]:
        """Transactions after ``start`` up to the current end of the binlog (non-blocking)."""
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
                        cur.queries.append((item.schema, item.query))
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
                elif isinstance(item, Idle):
                    if blocking:
                        continue
                    return
        finally:
            stream.close()
