"""The replication protocol: ask the server for its binlog and read raw events.

Only what CDC needs: COM_BINLOG_DUMP from a file:pos (or a MariaDB GTID
position), COM_BINLOG_DUMP_GTID from a MySQL GTID set, checksums stripped,
heartbeats, and a non-blocking mode that stops at the current end of the binlog.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import pymysql

from sparkcdc.capture.gtid import MysqlGtidSet
from sparkcdc.capture.upstream import (
    CR_SERVER_GONE,
    CR_SERVER_LOST,
    ER_ACCESS_DENIED,
    ER_SPECIFIC_ACCESS_DENIED,
    UpstreamConfig,
    new_server_id,
)
from sparkcdc.errors import BinlogPurgedError, UpstreamSetupError, UpstreamUnavailable

log = logging.getLogger(__name__)

COM_BINLOG_DUMP = 0x12
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_THROUGH_GTID = 0x04
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02
HEADER_LEN = 19

# Event types: every number MariaDB 10.11 (sql/log_event.h) and MySQL 8.4
# (libbinlogevents' binlog_event.h) define. ``txnstream`` decodes each or says why not.
UNKNOWN_EVENT = 0
START_EVENT_V3 = 1
QUERY_EVENT = 2
STOP_EVENT = 3
ROTATE_EVENT = 4
INTVAR_EVENT = 5
LOAD_EVENT = 6
SLAVE_EVENT = 7
CREATE_FILE_EVENT = 8
APPEND_BLOCK_EVENT = 9
EXEC_LOAD_EVENT = 10
DELETE_FILE_EVENT = 11
NEW_LOAD_EVENT = 12
RAND_EVENT = 13
USER_VAR_EVENT = 14
FORMAT_DESCRIPTION_EVENT = 15
XID_EVENT = 16
BEGIN_LOAD_QUERY_EVENT = 17
EXECUTE_LOAD_QUERY_EVENT = 18
TABLE_MAP_EVENT = 19
PRE_GA_WRITE_ROWS_EVENT = 20
PRE_GA_UPDATE_ROWS_EVENT = 21
PRE_GA_DELETE_ROWS_EVENT = 22
WRITE_ROWS_V1 = 23
UPDATE_ROWS_V1 = 24
DELETE_ROWS_V1 = 25
INCIDENT_EVENT = 26
HEARTBEAT_EVENT = 27
IGNORABLE_EVENT = 28
ROWS_QUERY_EVENT = 29
WRITE_ROWS_V2 = 30
UPDATE_ROWS_V2 = 31
DELETE_ROWS_V2 = 32
MYSQL_GTID_EVENT = 33
ANONYMOUS_GTID_EVENT = 34
PREVIOUS_GTIDS_EVENT = 35
TRANSACTION_CONTEXT_EVENT = 36
VIEW_CHANGE_EVENT = 37
XA_PREPARE_EVENT = 38
PARTIAL_UPDATE_ROWS_EVENT = 39
TRANSACTION_PAYLOAD_EVENT = 40
HEARTBEAT_EVENT_V2 = 41
MYSQL_GTID_TAGGED_EVENT = 42
MARIA_ANNOTATE_ROWS = 160
MARIA_BINLOG_CHECKPOINT = 161
MARIA_GTID_EVENT = 162
MARIA_GTID_LIST = 163
MARIA_START_ENCRYPTION = 164
MARIA_QUERY_COMPRESSED = 165
MARIA_WRITE_ROWS_COMPRESSED_V1 = 166
MARIA_UPDATE_ROWS_COMPRESSED_V1 = 167
MARIA_DELETE_ROWS_COMPRESSED_V1 = 168
MARIA_WRITE_ROWS_COMPRESSED_V2 = 169
MARIA_UPDATE_ROWS_COMPRESSED_V2 = 170
MARIA_DELETE_ROWS_COMPRESSED_V2 = 171

_FIRST_EVENT, _LAST_EVENT = "UNKNOWN_EVENT", "MARIA_DELETE_ROWS_COMPRESSED_V2"
_names = list(globals())
EVENT_NAMES: dict[int, str] = {
    globals()[n]: n for n in _names[_names.index(_FIRST_EVENT) : _names.index(_LAST_EVENT) + 1]
}
"""Event type number -> its constant's name, for messages."""


def event_name(t: int) -> str:
    """``QUERY_EVENT (2)``: how messages name an event type."""
    return f"{EVENT_NAMES.get(t, 'an unknown event type')} ({t})"


ROWS_EVENTS = {
    WRITE_ROWS_V1: ("I", 1),
    UPDATE_ROWS_V1: ("U", 1),
    DELETE_ROWS_V1: ("D", 1),
    WRITE_ROWS_V2: ("I", 2),
    UPDATE_ROWS_V2: ("U", 2),
    DELETE_ROWS_V2: ("D", 2),
}

ER_MASTER_FATAL_READING_BINLOG = 1236

_HEADER = struct.Struct("<IBIIIH")


@dataclass(slots=True)
class RawEvent:
    """One binlog event: header fields and the body without the checksum."""

    timestamp: int
    type: int
    server_id: int
    size: int
    log_pos: int
    """Position right after this event in its file (0 for artificial events)."""
    flags: int
    body: bytes


class BinlogStream:
    """A replication connection streaming raw events from a start position."""

    def __init__(
        self,
        upstream: UpstreamConfig,
        file: str,
        pos: int,
        *,
        blocking: bool = True,
        heartbeat_s: float = 1.0,
        gtid: str | MysqlGtidSet | None = None,
        read_timeout: float | None = None,
    ) -> None:
        """``gtid``: a MariaDB GTID position (text) or a MySQL GTID set: stream what follows it."""
        self.upstream = upstream
        self.file = file
        self.pos = pos
        self.blocking = blocking
        self.heartbeat_s = heartbeat_s
        self.gtid = gtid
        self.server_id = new_server_id()
        self.read_timeout = read_timeout or max(30.0, heartbeat_s * 10)
        self.checksum = False
        self.conn: pymysql.connections.Connection | None = None

    def open(self) -> None:
        """Connect and send COM_BINLOG_DUMP."""
        conn = self.upstream.connect(read_timeout=self.read_timeout)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@global.binlog_checksum")
                row = cur.fetchone()
                self.checksum = bool(row and str(row[0]).upper() != "NONE")
                # MySQL 8.0.26+ reads the source_* names first, older servers and MariaDB the master_*
                # ones; a user variable nobody reads is harmless.
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
                cur.execute("SET @source_binlog_checksum = @@global.binlog_checksum")
                cur.execute("SET @mariadb_slave_capability = 4")
                period = int(self.heartbeat_s * 1e9)
                cur.execute("SET @master_heartbeat_period = %s", (period,))
                cur.execute("SET @source_heartbeat_period = %s", (period,))
                if isinstance(self.gtid, str):
                    cur.execute("SET @slave_connect_state = %s", (self.gtid,))
                    cur.execute("SET @slave_gtid_strict_mode = 0")
                    cur.execute("SET @slave_gtid_ignore_duplicates = 0")
            payload = self.dump_command()
            conn._next_seq_id = 0
            conn._write_bytes(struct.pack("<I", len(payload))[:3] + b"\x00" + payload)
            conn._next_seq_id = 1
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    def dump_command(self) -> bytes:
        """The COM_BINLOG_DUMP (file:pos, MariaDB GTID) or COM_BINLOG_DUMP_GTID (MySQL GTID set) payload."""
        flags = 0 if self.blocking else BINLOG_DUMP_NON_BLOCK
        if isinstance(self.gtid, MysqlGtidSet):
            data = self.gtid.encode()
            return (
                struct.pack("<BHII", COM_BINLOG_DUMP_GTID, flags | BINLOG_THROUGH_GTID, self.server_id, 0)
                + struct.pack("<QI", 4, len(data))
                + data
            )
        name = b"" if self.gtid is not None else self.file.encode()
        pos = 4 if self.gtid is not None else self.pos
        return struct.pack("<BIHI", COM_BINLOG_DUMP, pos, flags, self.server_id) + name

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # closing a broken socket may raise; the stream is gone either way
                pass
            self.conn = None

    def __enter__(self) -> BinlogStream:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def events(self) -> Iterator[RawEvent]:
        """Raw events until the end (non-blocking mode) or forever (blocking mode)."""
        if self.conn is None:
            self.open()
        conn = self.conn
        assert conn is not None
        read_packet = conn._read_packet
        unpack = _HEADER.unpack_from
        strip = 4 if self.checksum else 0
        while True:
            try:
                pkt = read_packet()
            except pymysql.err.OperationalError as exc:
                self._raise_stream_error(exc)
            data = pkt._data
            first = data[0]
            if first == 0xFE and len(data) < 9:
                return  # EOF: end of binlog in non-blocking mode
            if first != 0:
                continue
            ts, typ, sid, size, log_pos, flags = unpack(data, 1)
            if typ == FORMAT_DESCRIPTION_EVENT:
                body = data[1 + HEADER_LEN :]
                # The FDE announces the checksum algorithm in its last 5 bytes.
                alg = body[-5] if len(body) >= 5 else 0
                self.checksum = alg == 1
                strip = 4 if self.checksum else 0
                yield RawEvent(ts, typ, sid, size, log_pos, flags, body[:-5] if alg in (0, 1) else body)
                continue
            end = len(data) - strip
            yield RawEvent(ts, typ, sid, size, log_pos, flags, data[1 + HEADER_LEN : end])

    def _raise_stream_error(self, exc: pymysql.err.OperationalError) -> None:
        code = exc.args[0] if exc.args else 0
        msg = exc.args[1] if len(exc.args) > 1 else str(exc)
        if code == ER_MASTER_FATAL_READING_BINLOG:
            low = str(msg).lower()
            if "could not find" in low or "purged" in low or "not find first log" in low or "gtid" in low:
                where = f"GTID position {self.gtid}" if self.gtid else f"position {self.file}:{self.pos}"
                never = " (or was never written there)" if self.gtid else ""
                raise BinlogPurgedError(
                    f"the start {where} is no longer in the upstream binlog{never} "
                    f"({msg}); start a new changefeed from a later --start-ts, or take a snapshot "
                    '([snapshot] mode = "initial")'
                ) from exc
            raise UpstreamSetupError(f"the upstream refused to send its binlog: {msg}") from exc
        if code in (ER_SPECIFIC_ACCESS_DENIED, ER_ACCESS_DENIED):
            # A missing privilege is permanent: retrying the stream would loop forever.
            raise UpstreamSetupError(
                f"user {self.upstream.user!r} may not read the binlog of {self.upstream.host}:"
                f"{self.upstream.port}: {msg}; run GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* "
                f"TO {self.upstream.user!r}@'%'"
            ) from exc
        if code in (CR_SERVER_LOST, CR_SERVER_GONE):
            raise UpstreamUnavailable(
                f"lost the binlog connection to {self.upstream.host}:{self.upstream.port}: {msg}"
            ) from exc
        raise UpstreamUnavailable(
            f"binlog stream error from {self.upstream.host}:{self.upstream.port}: {msg}"
        ) from exc
