"""Group raw binlog events into transactions with their commit_ts and boundaries."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sparkcdc.capture import protocol as P
from sparkcdc.capture.gtid import parse_mysql_gtid_event
from sparkcdc.capture.offset import Offset, file_start_ts, next_ts
from sparkcdc.capture.payload import payload_events
from sparkcdc.capture.protocol import BinlogStream, RawEvent
from sparkcdc.capture.tablemap import TableMap, parse_table_map


@dataclass(slots=True)
class Begin:
    """A transaction starts; every event until the matching End shares ``ts``."""

    ts: int
    start: Offset
    gtid: str | None


@dataclass(slots=True)
class TableMapItem:
    """A TABLE_MAP event inside the current transaction."""

    tm: TableMap


@dataclass(slots=True)
class RowsItem:
    """A ROWS event (undecoded body) inside the current transaction.

    ``op``: I, U, D, or P for a MySQL PARTIAL_UPDATE_ROWS_EVENT (JSON diffs, refused by the reader).
    """

    op: str
    version: int
    table_id: int
    body: bytes


@dataclass(slots=True)
class QueryItem:
    """A QUERY event that is not BEGIN/COMMIT (DDL or other statements)."""

    query: str
    schema: str


@dataclass(slots=True)
class End:
    """The transaction ended; ``end`` is the boundary after it (with ts = its commit_ts)."""

    end: Offset
    nbytes: int


@dataclass(slots=True)
class Idle:
    """The stream reached the end of the binlog (heartbeat or non-blocking EOF) at ``at``."""

    at: Offset


Item = Begin | TableMapItem | RowsItem | QueryItem | End | Idle


def parse_query(body: bytes) -> tuple[str, str]:
    """(default schema, query text) of a QUERY event body."""
    _thread, _exec, db_len, _err, status_len = struct.unpack_from("<IIBHH", body, 0)
    p = 13 + status_len
    schema = body[p : p + db_len].decode("utf-8", "surrogateescape")
    p += db_len + 1
    return schema, body[p:].decode("utf-8", "surrogateescape")


def parse_maria_gtid(body: bytes, server_id: int) -> tuple[str, int]:
    """(gtid text, flags) of a MariaDB GTID event."""
    seq, domain, flags = struct.unpack_from("<QIB", body, 0)
    return f"{domain}-{server_id}-{seq}", flags


FL_STANDALONE = 1


class TxnStream:
    """Turns a BinlogStream into transaction items with a deterministic commit_ts chain."""

    def __init__(self, stream: BinlogStream, start: Offset, *, want_rows: bool = True) -> None:
        self.stream = stream
        self.file = start.file
        self.pos = start.pos
        self.ts = start.ts
        self.want_rows = want_rows
        self._in_txn = False
        self._standalone = False
        self._txn_start = 0
        self._mariadb = True
        """Whether a MariaDB server wrote the binlog (from the format description event)."""

    def offset(self) -> Offset:
        """The current boundary (valid between transactions)."""
        return Offset(self.file, self.pos, self.ts)

    def items(self) -> Iterator[Item]:
        """Items in binlog order."""
        for ev in self.stream.events():
            yield from self._handle(ev)
        yield Idle(self.offset())

    def _begin(self, ev: RawEvent, gtid: str | None) -> Begin:
        self._in_txn = True
        self._txn_start = self.pos
        start = self.offset()
        self.ts = next_ts(self.ts, ev.timestamp)
        return Begin(self.ts, start, gtid)

    def _end(self, ev: RawEvent) -> End:
        self._in_txn = False
        self._standalone = False
        self._advance(ev)
        return End(self.offset(), self.pos - self._txn_start)

    def _advance(self, ev: RawEvent) -> None:
        if ev.log_pos:
            self.pos = ev.log_pos

    def _handle(self, ev: RawEvent) -> Iterator[Item]:
        t = ev.type
        if t in P.ROWS_EVENTS:
            if self.want_rows:
                op, ver = P.ROWS_EVENTS[t]
                yield RowsItem(op, ver, int.from_bytes(ev.body[0:6], "little"), ev.body)
            self._advance(ev)
            return
        if t == P.PARTIAL_UPDATE_ROWS_EVENT:
            if self.want_rows:
                yield RowsItem("P", 2, int.from_bytes(ev.body[0:6], "little"), ev.body)
            self._advance(ev)
            return
        if t == P.TRANSACTION_PAYLOAD_EVENT:
            # A compressed transaction (MySQL 8.0.20+): its events, read as if they stood in the file.
            for inner in payload_events(ev):
                yield from self._handle(inner)
            return
        if t == P.TABLE_MAP_EVENT:
            yield TableMapItem(parse_table_map(ev.body, mariadb=self._mariadb))
            self._advance(ev)
            return
        if t == P.XID_EVENT:
            yield self._end(ev)
            return
        if t == P.MARIA_GTID_EVENT:
            gtid, flags = parse_maria_gtid(ev.body, ev.server_id)
            yield self._begin(ev, gtid)
            self._standalone = bool(flags & FL_STANDALONE)
            self._advance(ev)
            return
        if t in (P.MYSQL_GTID_EVENT, P.ANONYMOUS_GTID_EVENT):
            yield self._begin(ev, parse_mysql_gtid_event(ev.body) if t == P.MYSQL_GTID_EVENT else None)
            self._standalone = True  # until a BEGIN query says otherwise
            self._advance(ev)
            return
        if t == P.QUERY_EVENT:
            schema, query = parse_query(ev.body)
            q = query.strip().upper()
            if q == "BEGIN" or q.startswith("XA START"):
                if not self._in_txn:
                    yield self._begin(ev, None)
                self._standalone = False
                self._advance(ev)
                return
            if q in ("COMMIT", "ROLLBACK") or q.startswith("XA END") or q.startswith("XA COMMIT"):
                yield self._end(ev)
                return
            if not self._in_txn:
                yield self._begin(ev, None)
                self._standalone = True
            yield QueryItem(query, schema)
            if self._standalone:
                yield self._end(ev)
            else:
                self._advance(ev)
            return
        if t == P.ROTATE_EVENT:
            pos = struct.unpack_from("<Q", ev.body, 0)[0]
            name = ev.body[8:].decode()
            if name != self.file:
                self.file = name
                self.pos = pos
                self._new_file = True
            return
        if t == P.FORMAT_DESCRIPTION_EVENT:
            # binlog version (2 bytes), then the server version (50 bytes): who wrote this binlog
            self._mariadb = b"MariaDB" in ev.body[2:52]
            # A file's own FDE (real or resent at dump start) fixes the chain at its start; a
            # chain carried over from the previous file (same-second rotation) is never lowered.
            if self.pos <= 4 or getattr(self, "_new_file", False):
                self.ts = max(file_start_ts(_fde_created(ev)), self.ts)
                self._new_file = False
            self._advance(ev)
            return
        if t in (P.HEARTBEAT_EVENT, P.HEARTBEAT_EVENT_V2):
            if not self._in_txn:
                yield Idle(self.offset())
            return
        # GTID_LIST, BINLOG_CHECKPOINT, ANNOTATE_ROWS, STOP and others carry nothing we need.
        self._advance(ev)


def _fde_created(ev: RawEvent) -> int:
    created = struct.unpack_from("<I", ev.body, 52)[0]
    return int(created or ev.timestamp)


def first_event_info(stream: BinlogStream) -> dict[str, Any]:
    """Facts from the start of a binlog file: FDE time and the size of the GTID list before it
    (MariaDB's GTID_LIST domains, MySQL's PREVIOUS_GTIDS server UUIDs)."""
    info: dict[str, Any] = {"fde_ts": None, "gtid_list_count": None}
    for ev in stream.events():
        if ev.type == P.FORMAT_DESCRIPTION_EVENT:
            info["fde_ts"] = _fde_created(ev)
        elif ev.type == P.MARIA_GTID_LIST:
            info["gtid_list_count"] = struct.unpack_from("<I", ev.body, 0)[0] & 0x0FFFFFFF
            break
        elif ev.type == P.PREVIOUS_GTIDS_EVENT:
            # MySQL: the server UUIDs with transactions before this file (none: nothing was purged)
            info["gtid_list_count"] = struct.unpack_from("<Q", ev.body, 0)[0] if len(ev.body) >= 8 else 0
            break
        elif ev.type in (P.MARIA_GTID_EVENT, P.MYSQL_GTID_EVENT, P.ANONYMOUS_GTID_EVENT, P.QUERY_EVENT):
            break
    return info
