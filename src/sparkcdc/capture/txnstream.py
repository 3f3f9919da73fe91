"""Group raw binlog events into transactions with their commit_ts and boundaries."""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkcdc.capture import protocol as P
from sparkcdc.capture.charsets import charset_of, codec_of
from sparkcdc.capture.compressed import PLAIN_TYPE, uncompress_event
from sparkcdc.capture.gtid import parse_mysql_gtid_event
from sparkcdc.capture.offset import Offset, file_start_ts, next_ts
from sparkcdc.capture.payload import payload_events
from sparkcdc.capture.protocol import BinlogStream, RawEvent
from sparkcdc.capture.statement_kind import StatementKind, classify, savepoint_name, xa_xid
from sparkcdc.capture.tablemap import TableMap, parse_table_map
from sparkcdc.errors import DecodeError, UpstreamSetupError

if TYPE_CHECKING:
    from sparkcdc.capture.relay import RelayStream

log = logging.getLogger(__name__)


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
    """A DDL statement (a QUERY event that is neither transaction nor XA control)."""

    query: str
    schema: str
    sql_mode: str | None = None
    """The session ``sql_mode`` the event records (``sql_mode_names``), None when it records none."""
    connection: str | None = None
    """The charset the session converted string literals into (its ``collation_connection``'s; the
    client charset under a binary one), None when the event records none: the batch planner makes
    the literals of binary columns independent of it (``ddl.literals.pin_connection_literals``)."""


@dataclass(slots=True)
class StatementRows:
    """A row change logged as a statement (``binlog_format`` STATEMENT or MIXED): its rows are not in
    the binlog. ``where``: its position, for the error a reader that needs its rows raises."""

    query: str
    schema: str
    where: str


@dataclass(slots=True)
class Savepoint:
    """``SAVEPOINT name`` inside the current transaction: a later ``RollbackTo`` may undo what follows."""

    name: str


@dataclass(slots=True)
class RollbackTo:
    """``ROLLBACK TO name``: the row events since ``SAVEPOINT name`` did not happen.

    The server writes it only when the transaction also changed a non-transactional table; otherwise
    it drops those row events from the transaction before writing it.
    """

    name: str


@dataclass(slots=True)
class XaStart:
    """The transaction is the first phase of an XA transaction ``xid``.

    ``prepared``: the server said so at its start (MariaDB's GTID flag), so its rows are never the
    changes of this transaction; otherwise (MySQL) its end tells: ``End.outcome`` is ``xa_prepare``,
    or ``commit`` for ``XA COMMIT ... ONE PHASE``.
    """

    xid: str
    prepared: bool


@dataclass(slots=True)
class XaCommit:
    """``XA COMMIT xid``: the rows of the prepared transaction at ``prepared`` are this transaction's.

    ``prepared`` is the start of the prepared transaction in the binlog, or None when it was prepared
    before this stream's start offset and the offset does not name it (the reader looks it up).
    """

    xid: str
    prepared: Offset | None


@dataclass(slots=True)
class End:
    """The transaction ended; ``end`` is the boundary after it (with ts = its commit_ts).

    ``outcome``: ``commit``; ``rollback`` (the server logged it and rolled it back: nothing of it
    happened); ``xa_prepare`` (its rows wait for an ``XA COMMIT`` later in the binlog).
    """

    end: Offset
    nbytes: int
    outcome: str = "commit"


@dataclass(slots=True)
class Idle:
    """The stream reached the end of the binlog (heartbeat or non-blocking EOF) at ``at``."""

    at: Offset


Item = (
    Begin
    | TableMapItem
    | RowsItem
    | QueryItem
    | StatementRows
    | Savepoint
    | RollbackTo
    | XaStart
    | XaCommit
    | End
    | Idle
)

COMMIT = "commit"
ROLLBACK = "rollback"
XA_PREPARE = "xa_prepare"


def parse_query(body: bytes) -> tuple[str, str]:
    """(default schema, query text) of a QUERY event body.

    The text is in the session's ``character_set_client`` (``Q_CHARSET_CODE``), as the server
    received it: a DDL sent in ujis or latin1 has its literals and comments in that charset, not
    UTF-8. The schema name is in the server's system charset, UTF-8.
    """
    _thread, _exec, db_len, _err, status_len = struct.unpack_from("<IIBHH", body, 0)
    p = 13 + status_len
    schema = body[p : p + db_len].decode("utf-8", "surrogateescape")
    p += db_len + 1
    return schema, decode_query_text(body[p:], query_status(body).charset_client)


def decode_query_text(raw: bytes, charset_client: int | None) -> str:
    """A statement's bytes read in its client charset (a collation id; None or binary: UTF-8).

    Text that is plain ASCII reads the same in every client charset. Other text in a charset
    sparkcdc has no codec for is refused: read as UTF-8 it would reach the downstream changed.
    """
    if charset_client is None or charset_of(charset_client) in (None, "binary", "utf8mb3", "utf8mb4"):
        return raw.decode("utf-8", "surrogateescape")
    if raw.isascii():
        return raw.decode("ascii")
    try:
        codec = codec_of(charset_client)
    except DecodeError as exc:
        raise DecodeError(f"a statement sent in client {exc}") from None
    return raw.decode(codec, "surrogateescape")


Q_FLAGS2_CODE = 0
Q_SQL_MODE_CODE = 1
Q_CHARSET_CODE = 4

_STATUS_FIXED = {0: 4, 1: 8, 3: 4, 4: 6, 7: 2, 8: 2, 9: 8, 10: 4, 13: 3, 128: 3, 129: 8}
"""Status variables of a fixed size: FLAGS2, SQL_MODE, AUTO_INCREMENT, CHARSET, LC_TIME_NAMES,
CHARSET_DATABASE, TABLE_MAP_FOR_UPDATE, MASTER_DATA_WRITTEN, MICROSECONDS, MariaDB's HRNOW and XID."""


@dataclass(frozen=True)
class QueryStatus:
    """What sparkcdc reads of a QUERY event's status variables (None: not recorded)."""

    sql_mode: int | None = None
    charset_client: int | None = None
    """The session's ``character_set_client``, as a collation id."""
    collation_connection: int | None = None
    """The session's ``collation_connection`` (string literals are converted into its charset)."""


def query_status(body: bytes) -> QueryStatus:
    """The ``sql_mode`` bits and client charset a QUERY event's status variables record.

    Servers write ``Q_FLAGS2``, ``Q_SQL_MODE``, the catalog, ``Q_AUTO_INCREMENT`` and
    ``Q_CHARSET`` first; the walk stops at the first variable it does not know the size of,
    which comes after those two.
    """
    status_len = struct.unpack_from("<H", body, 11)[0]
    p, end = 13, 13 + status_len
    sql_mode = charset = connection = None
    while p < end:
        code = body[p]
        p += 1
        if code == Q_SQL_MODE_CODE and p + 8 <= end:
            sql_mode = int.from_bytes(body[p : p + 8], "little")
        elif code == Q_CHARSET_CODE and p + 6 <= end:
            charset = int.from_bytes(body[p : p + 2], "little")
            connection = int.from_bytes(body[p + 2 : p + 4], "little")
        if code in _STATUS_FIXED:
            p += _STATUS_FIXED[code]
        elif code in (5, 6) and p < end:  # TIME_ZONE, CATALOG_NZ: a length byte and the text
            p += 1 + body[p]
        elif code == 2 and p < end:  # the old CATALOG: a length byte, the text and a NUL
            p += 2 + body[p]
        elif code == 11 and p < end:  # INVOKER: user and host, each a length byte and the text
            p += 1 + body[p]
            if p < end:
                p += 1 + body[p]
        else:
            break
    return QueryStatus(sql_mode, charset, connection)


_SQL_MODE_BITS = (
    "REAL_AS_FLOAT",
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "IGNORE_SPACE",
    "IGNORE_BAD_TABLE_OPTIONS",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "POSTGRESQL",
    "ORACLE",
    "MSSQL",
    "DB2",
    "MAXDB",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_FIELD_OPTIONS",
    "MYSQL323",
    "MYSQL40",
    "ANSI",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "TRADITIONAL",
    "NO_AUTO_CREATE_USER",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
)
"""``sql_mode`` flags by bit, 0-31: MariaDB's names (MySQL 8 leaves bit 4 and bits 8-17, 28 unused)."""
_MARIADB_HIGH_BITS = ("EMPTY_STRING_IS_NULL", "SIMULTANEOUS_ASSIGNMENT", "TIME_ROUND_FRACTIONAL")
_MYSQL_HIGH_BITS = ("TIME_TRUNCATE_FRACTIONAL",)


def sql_mode_names(bits: int, mariadb: bool) -> str:
    """``sql_mode`` bits as the comma-separated names ``SET sql_mode`` takes.

    Bits above the known ones (a newer server's flags) are left out; the DDL then runs
    without them downstream, and the first such value is logged.
    """
    names = list(_SQL_MODE_BITS) + list(_MARIADB_HIGH_BITS if mariadb else _MYSQL_HIGH_BITS)
    out = [name for i, name in enumerate(names) if bits >> i & 1]
    unknown = bits & ~((1 << len(names)) - 1)
    if unknown and unknown not in _UNKNOWN_MODES_SEEN:
        _UNKNOWN_MODES_SEEN.add(unknown)
        log.warning(
            "a DDL's sql_mode has bits %#x sparkcdc has no name for; downstream runs it without them", unknown
        )
    return ",".join(out)


_UNKNOWN_MODES_SEEN: set[int] = set()


FL_STANDALONE = 1
FL_GROUP_COMMIT_ID = 2
FL_PREPARED_XA = 64
FL_COMPLETED_XA = 128


def xid_key(format_id: int, gtrid: bytes, bqual: bytes) -> str:
    """An XA transaction's id in ``statement_kind.xa_xid``'s form: ``X'GTRID',X'BQUAL',formatID``."""
    return f"X'{gtrid.hex().upper()}',X'{bqual.hex().upper()}',{format_id}"


def xid_of_statement(query: str) -> str:
    """The id of the XA statement ``query`` (``XA COMMIT X'31',X'',1`` -> ``X'31',X'',1``)."""
    xid = xa_xid(query)
    if xid is None:
        raise DecodeError(f"cannot read the XA transaction id of {query[:200]!r}")
    return xid


def parse_maria_gtid(body: bytes, server_id: int) -> tuple[str, int, str | None]:
    """(gtid text, flags, XA id or None) of a MariaDB GTID event."""
    seq, domain, flags = struct.unpack_from("<QIB", body, 0)
    xid = None
    if flags & (FL_PREPARED_XA | FL_COMPLETED_XA):
        p = 13 + (8 if flags & FL_GROUP_COMMIT_ID else 0)
        format_id, glen, blen = struct.unpack_from("<IBB", body, p)
        data = body[p + 6 : p + 6 + glen + blen]
        xid = xid_key(format_id, data[:glen], data[glen:])
    return f"{domain}-{server_id}-{seq}", flags, xid


def parse_xa_prepare(body: bytes) -> tuple[bool, str]:
    """(one phase, XA id) of an XA_PREPARE_LOG_EVENT body."""
    one_phase, format_id, glen, blen = struct.unpack_from("<BIII", body, 0)
    data = body[13 : 13 + glen + blen]
    return bool(one_phase), xid_key(format_id, data[:glen], data[glen:])


def _savepoint_name(query: str) -> str:
    """The savepoint a SAVEPOINT / ROLLBACK TO statement names."""
    name = savepoint_name(query)
    if name is None:
        raise DecodeError(f"cannot read the savepoint name of {query[:200]!r}")
    return name


NOTHING_FOR_US: dict[int, str] = {
    P.STOP_EVENT: "the server stopped; the next file follows",
    P.INTVAR_EVENT: "context of a statement-format query, which is refused when it follows",
    P.RAND_EVENT: "context of a statement-format query, which is refused when it follows",
    P.USER_VAR_EVENT: "context of a statement-format query, which is refused when it follows",
    P.IGNORABLE_EVENT: "written to be ignored by readers that do not know it",
    P.ROWS_QUERY_EVENT: "the statement's text beside its row events (informational)",
    P.MARIA_ANNOTATE_ROWS: "the statement's text beside its row events (informational)",
    P.PREVIOUS_GTIDS_EVENT: "the GTIDs of earlier files",
    P.MARIA_GTID_LIST: "the GTIDs of earlier files",
    P.MARIA_BINLOG_CHECKPOINT: "crash recovery bookkeeping of the server",
    P.MARIA_START_ENCRYPTION: "the file is encrypted on disk; the server sends its events decrypted",
}
"""Event types that carry nothing for a captured table, and why."""

REFUSED: dict[int, str] = {
    P.UNKNOWN_EVENT: "an invalid event",
    P.START_EVENT_V3: "a binlog of MySQL before 5.0",
    P.LOAD_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.SLAVE_EVENT: "never written by a server",
    P.CREATE_FILE_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.APPEND_BLOCK_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.EXEC_LOAD_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.DELETE_FILE_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.NEW_LOAD_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.BEGIN_LOAD_QUERY_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.EXECUTE_LOAD_QUERY_EVENT: "statement-format LOAD DATA (binlog_format is not ROW)",
    P.PRE_GA_WRITE_ROWS_EVENT: "row events of MySQL 5.1 before GA",
    P.PRE_GA_UPDATE_ROWS_EVENT: "row events of MySQL 5.1 before GA",
    P.PRE_GA_DELETE_ROWS_EVENT: "row events of MySQL 5.1 before GA",
    P.INCIDENT_EVENT: "the server lost changes it could not log (an incident); a replica stops here too",
    P.TRANSACTION_CONTEXT_EVENT: "MySQL group replication, which sparkcdc does not read",
    P.VIEW_CHANGE_EVENT: "MySQL group replication, which sparkcdc does not read",
    P.MYSQL_GTID_TAGGED_EVENT: "a MySQL 8.3+ tagged GTID, which sparkcdc does not read yet",
}
"""Event types sparkcdc refuses, and what they mean: a changefeed meeting one fails, naming it."""

HANDLED = frozenset(
    {
        P.QUERY_EVENT,
        P.ROTATE_EVENT,
        P.FORMAT_DESCRIPTION_EVENT,
        P.XID_EVENT,
        P.TABLE_MAP_EVENT,
        P.HEARTBEAT_EVENT,
        P.HEARTBEAT_EVENT_V2,
        P.MYSQL_GTID_EVENT,
        P.ANONYMOUS_GTID_EVENT,
        P.XA_PREPARE_EVENT,
        P.PARTIAL_UPDATE_ROWS_EVENT,
        P.TRANSACTION_PAYLOAD_EVENT,
        P.MARIA_GTID_EVENT,
        *P.ROWS_EVENTS,
        *PLAIN_TYPE,
    }
)
"""Event types ``TxnStream`` decodes."""


class TxnStream:
    """Turns a BinlogStream into transaction items with a deterministic commit_ts chain.

    Open XA transactions (prepared, not yet committed or rolled back) travel in the offsets
    (``Offset.xa``): ``XA COMMIT`` names where the prepared rows are.
    """

    def __init__(self, stream: BinlogStream | RelayStream, start: Offset, *, want_rows: bool = True) -> None:
        self.stream = stream
        self.file = start.file
        self.pos = start.pos
        self.ts = start.ts
        self.xa: dict[str, tuple[str, int]] = {xid: (f, p) for xid, f, p in start.xa}
        self.want_rows = want_rows
        self._in_txn = False
        self._standalone = False
        self._txn_start = 0
        self._begin_at: Offset | None = None
        self._xa_xid: str | None = None
        """The XA transaction the current one prepares (its first phase)."""
        self._mariadb = True
        """Whether a MariaDB server wrote the binlog (from the format description event)."""
        self._new_file = False

    def offset(self) -> Offset:
        """The current boundary (valid between transactions)."""
        xa = tuple(sorted((xid, f, p) for xid, (f, p) in self.xa.items()))
        return Offset(self.file, self.pos, self.ts, xa)

    def where(self) -> str:
        """The current position, for messages."""
        return f"{self.file}:{self.pos}"

    def items(self) -> Iterator[Item]:
        """Items in binlog order."""
        for ev in self.stream.events():
            yield from self._handle(ev)
        yield Idle(self.offset())

    def _begin(self, ev: RawEvent, gtid: str | None) -> Begin:
        self._in_txn = True
        self._txn_start = self.pos
        start = self.offset()
        self._begin_at = start
        self._xa_xid = None
        self.ts = next_ts(self.ts, ev.timestamp)
        return Begin(self.ts, start, gtid)

    def _end(self, ev: RawEvent, outcome: str = COMMIT) -> End:
        self._in_txn = False
        self._standalone = False
        if outcome == XA_PREPARE and self._xa_xid is not None and self._begin_at is not None:
            self.xa[self._xa_xid] = (self._begin_at.file, self._begin_at.pos)
        self._xa_xid = None
        self._advance(ev)
        return End(self.offset(), self.pos - self._txn_start, outcome)

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
        if t in PLAIN_TYPE:
            # MariaDB's log_bin_compress: the same event, its large part compressed.
            if t == P.MARIA_QUERY_COMPRESSED or self.want_rows:
                yield from self._handle(uncompress_event(ev, self.where()))
            else:
                self._advance(ev)
            return
        if t == P.TABLE_MAP_EVENT:
            yield TableMapItem(parse_table_map(ev.body, mariadb=self._mariadb))
            self._advance(ev)
            return
        if t == P.XID_EVENT:
            yield self._end(ev)
            return
        if t == P.QUERY_EVENT:
            yield from self._query(ev)
            return
        if t == P.MARIA_GTID_EVENT:
            gtid, flags, xid = parse_maria_gtid(ev.body, ev.server_id)
            yield self._begin(ev, gtid)
            self._standalone = bool(flags & FL_STANDALONE)
            if flags & FL_PREPARED_XA and xid is not None:
                self._xa_xid = xid
                yield XaStart(xid, True)
            self._advance(ev)
            return
        if t in (P.MYSQL_GTID_EVENT, P.ANONYMOUS_GTID_EVENT):
            yield self._begin(ev, parse_mysql_gtid_event(ev.body) if t == P.MYSQL_GTID_EVENT else None)
            self._standalone = True  # until a BEGIN query says otherwise
            self._advance(ev)
            return
        if t == P.XA_PREPARE_EVENT:
            one_phase, xid = parse_xa_prepare(ev.body)
            if not one_phase:
                self._xa_xid = xid
            yield self._end(ev, COMMIT if one_phase else XA_PREPARE)
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
            if self.pos <= 4 or self._new_file:
                self.ts = max(file_start_ts(_fde_created(ev)), self.ts)
                self._new_file = False
            self._advance(ev)
            return
        if t in (P.HEARTBEAT_EVENT, P.HEARTBEAT_EVENT_V2):
            if not self._in_txn:
                yield Idle(self.offset())
            return
        if t in NOTHING_FOR_US:
            self._advance(ev)
            return
        raise UpstreamSetupError(
            f"binlog event {P.event_name(t)} at {self.where()}: {REFUSED.get(t, 'sparkcdc does not know it')}; "
            "sparkcdc reads binlog_format=ROW binlogs of MariaDB 10.x+ and MySQL 8; "
            "no change after this position was delivered"
        )

    def _query(self, ev: RawEvent) -> Iterator[Item]:
        """A QUERY event: transaction or XA control, DDL, or a statement sparkcdc refuses."""
        schema, query = parse_query(ev.body)
        kind = classify(query)
        K = StatementKind
        if kind is K.BEGIN:
            if not self._in_txn:
                yield self._begin(ev, None)
            self._standalone = False
            self._advance(ev)
            return
        if kind is K.XA_START:
            if not self._in_txn:
                yield self._begin(ev, None)
            self._standalone = False
            if self._xa_xid is None:
                self._xa_xid = xid_of_statement(query)
                yield XaStart(self._xa_xid, False)
            self._advance(ev)
            return
        if kind is K.COMMIT or kind is K.XA_COMMIT_ONE_PHASE:
            yield self._end(ev)
            return
        if kind is K.ROLLBACK:
            yield self._end(ev, ROLLBACK)
            return
        if kind in (K.XA_COMMIT, K.XA_ROLLBACK):
            xid = xid_of_statement(query)
            if not self._in_txn:
                yield self._begin(ev, None)
            prepared = self.xa.pop(xid, None)
            if kind is K.XA_COMMIT:
                at = Offset(prepared[0], prepared[1], 0) if prepared is not None else None
                yield XaCommit(xid, at)
            yield self._end(ev)
            return
        if kind in (K.SAVEPOINT, K.ROLLBACK_TO_SAVEPOINT, K.RELEASE_SAVEPOINT, K.XA_END, K.TEMPORARY_DDL):
            if kind is K.SAVEPOINT:
                yield Savepoint(_savepoint_name(query))
            elif kind is K.ROLLBACK_TO_SAVEPOINT:
                yield RollbackTo(_savepoint_name(query))
            if not self._in_txn:
                # A statement of its own (DROP TEMPORARY TABLE at a session's end): an empty transaction.
                yield self._begin(ev, None)
                yield self._end(ev)
            else:
                self._advance(ev)
            return
        if kind is K.DML:
            # Its readers decide: a changefeed fails when the statement may change a table it captures.
            if not self._in_txn:
                yield self._begin(ev, None)
                self._standalone = True
            yield StatementRows(query, schema, self.where())
            if self._standalone:
                yield self._end(ev)
            else:
                self._advance(ev)
            return
        if kind is not K.DDL and self._in_txn and not self._standalone:
            raise UpstreamSetupError(
                f"a statement sparkcdc cannot classify inside the transaction at {self.where()}: "
                f"{query[:200]!r}; no change after this position was delivered"
            )
        if not self._in_txn:
            yield self._begin(ev, None)
            self._standalone = True
        status = query_status(ev.body)
        connection = None
        if status.collation_connection is not None:
            connection = charset_of(status.collation_connection)
            if connection == "binary" and status.charset_client is not None:
                connection = charset_of(status.charset_client)  # literals keep the client's bytes
        bits = status.sql_mode
        yield QueryItem(
            query, schema, None if bits is None else sql_mode_names(bits, self._mariadb), connection
        )
        if self._standalone:
            yield self._end(ev)
        else:
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
