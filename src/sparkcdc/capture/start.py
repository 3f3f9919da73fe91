"""Where a changefeed starts: a start-ts, a ``file:pos``, a GTID, or now (the head; ``tso query``).

Every start point becomes an ``Offset`` here. ``sparkcdc run`` starts top to bottom:

1. ``cli.cmd_run.run`` → ``pipeline.changefeed.start_changefeed(spark, spec)``; a given start point
   is resolved before Spark starts (``cli.cmd_run.check_resume`` → ``pipeline.start.resolve_start``,
   after refusing a start-ts beyond the upstream's current ts), so step 2 finds it;
2. → ``pipeline.start.resolve_start``: the data dir's ``start.json`` if an earlier run wrote one;
3. otherwise → ``resolve_start_offset(up, start_ts, position, gtid)`` (this module), which picks
   ``offset_for_position`` | ``offset_for_gtid`` | ``offset_for_ts`` | ``head_offset``; they ask
   the server (``binary_logs``, ``master_status``) and walk the binlog (``_file_start`` for a
   file's chain state, ``scan_head``, ``capture.reader.Scanner``); ``resolve_start`` then writes
   the offset to ``start.json``;
4. → ``pipeline.start.bootstrap_history``: the upstream's tables into the schema history at that
   offset (binlog position from ``master_status``, or the head step 3 just read);
5. the initial snapshot (if configured) and the streaming query start from the offset.
"""

from __future__ import annotations

from dataclasses import replace

from sparkcdc.capture.gtid import MysqlGtidSet, parse_start_gtid
from sparkcdc.capture.offset import Offset, file_seq, file_start_ts
from sparkcdc.capture.protocol import BinlogStream
from sparkcdc.capture.reader import Scanner
from sparkcdc.capture.txnstream import Idle, TxnStream, first_event_info
from sparkcdc.capture.upstream import (
    UpstreamConfig,
    binary_logs,
    check_upstream,
    master_status,
    server_version,
)
from sparkcdc.errors import BinlogPurgedError, ConfigError


def resolve_start_offset(
    up: UpstreamConfig, start_ts: int | None = None, position: str | None = None, gtid: str | None = None
) -> Offset:
    """The offset a new changefeed starts at: after the first start point given, or the binlog's head now.

    ``position`` (``FILE:POS`` of a transaction boundary) comes first, then ``gtid`` (a MariaDB GTID
    position or a MySQL GTID set), then ``start_ts`` (every transaction after the offset has a larger commit_ts).
    """
    if position:
        file, sep, pos = position.rpartition(":")
        if not sep or not pos.isdigit():
            raise ConfigError(
                f"invalid start position {position!r}: use FILE:POS, e.g. mysql-bin.000003:1234"
            )
        return offset_for_position(up, file, int(pos))
    if gtid:
        return offset_for_gtid(up, gtid)
    return offset_for_ts(up, start_ts) if start_ts is not None else head_offset(up)


def offset_for_position(up: UpstreamConfig, file: str, pos: int) -> Offset:
    """The chain state at a position between transactions ``file:pos`` (scans that file from its start).

    Besides transaction ends, a position after events that belong to no transaction (a file's
    header events, a late BINLOG_CHECKPOINT) is a boundary too: nothing committed in between.
    """
    begin = Offset(file, 4, _file_start(up, file)[0])
    if pos <= 4:
        return begin
    target = (file_seq(file), pos)
    last = begin
    for txn in Scanner(up).scan(begin, stop=lambda t: t.end.key() >= target):
        if txn.start.key() >= target:
            # pos lies in the gap before this transaction: no transaction between last and pos
            if _event_boundary(up, file, last.pos, pos):
                return replace(last, pos=pos)
            break
        last = txn.end
        if txn.end.key() == target:
            return txn.end
        if txn.end.key() > target:
            break
    else:
        head = scan_head(up, last)
        if last.key() <= target <= head.key() and _event_boundary(up, file, last.pos, pos):
            return replace(last, pos=pos)
    raise ConfigError(
        f"binlog position {file}:{pos} is not a transaction boundary; use a position printed by "
        "SHOW MASTER STATUS (SHOW BINARY LOG STATUS on MySQL 8.2+) or an Exec_Master_Log_Pos"
    )


def _event_boundary(up: UpstreamConfig, file: str, begin: int, pos: int) -> bool:
    """Whether ``pos`` is where an event of ``file`` ends, reading from the boundary ``begin``."""
    if pos == begin:
        return True
    from sparkcdc.capture import protocol as P

    with BinlogStream(up, file, begin, blocking=False) as s:
        for ev in s.events():
            if ev.log_pos == 0:
                continue  # the stream's artificial rotate and format events
            if ev.log_pos >= pos or ev.type == P.ROTATE_EVENT:
                return ev.log_pos == pos  # a rotate ends the file: nothing of it lies further
    return False


def offset_for_gtid(up: UpstreamConfig, gtid: str) -> Offset:
    """The boundary right before the first transaction after a GTID start point.

    ``gtid``: a MariaDB GTID position (``0-1-1234``: the server streams what follows it) or a MySQL
    GTID set (``uuid:1-100``: the server streams every transaction outside it, and the changefeed
    starts before the first one; a set with holes replays what follows the first hole).
    """
    from sparkcdc.capture import protocol as P

    start = parse_start_gtid(gtid)
    conn = up.connect()
    try:
        ver = server_version(conn)
    finally:
        conn.close()
    if isinstance(start, MysqlGtidSet):
        check_upstream(up, need_gtid=True)  # gtid_mode=ON, and not a MariaDB server
    elif not ver.mariadb:
        raise ConfigError(
            f"--start-gtid {gtid!r} is a MariaDB GTID position but upstream {up.host}:{up.port} is {ver}: "
            "give a MySQL GTID set such as 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100 "
            "(SELECT @@GLOBAL.gtid_executed prints one)"
        )
    file = ""
    with BinlogStream(up, "", 4, gtid=start, blocking=False) as s:
        for ev in s.events():
            if ev.type == P.ROTATE_EVENT:
                file = ev.body[8:].decode()
            elif ev.type in (P.MARIA_GTID_EVENT, P.MYSQL_GTID_EVENT) and ev.log_pos:
                return offset_for_position(up, file, ev.log_pos - ev.size)
    return head_offset(up)


def offset_for_ts(up: UpstreamConfig, start_ts: int) -> Offset:
    """The boundary after which every transaction has commit_ts > start_ts, with chain state ``start_ts``.

    The chain state is at least ``start_ts`` (a checkpoint the resolved ts of an idle changefeed
    reached lies between commit_ts values): every later transaction then exceeds it, and the ones
    the binlog already gave a larger commit_ts keep theirs (``next_ts`` of a smaller state is the same).
    """
    conn = up.connect()
    try:
        files = [f for f, _ in binary_logs(conn)]
    finally:
        conn.close()
    if not files:
        raise ConfigError("the upstream has no binlog files; is log_bin on?")
    # The newest file whose chain starts at or before start_ts holds the boundary.
    lo, hi = 0, len(files) - 1
    starts: dict[int, tuple[int, int | None]] = {}

    def start_of(i: int) -> int:
        if i not in starts:
            starts[i] = _file_start(up, files[i], files)
        return starts[i][0]

    if start_ts < start_of(0):
        gtids = starts[0][1]
        if file_seq(files[0]) > 1 and gtids:
            raise BinlogPurgedError(
                f"start-ts {start_ts} is older than the oldest binlog file the upstream still has "
                f"({files[0]}); the changes in between were purged. Use a later --start-ts, or a snapshot "
                '([snapshot] mode = "initial")'
            )
        return Offset(files[0], 4, start_of(0))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if start_of(mid) <= start_ts:
            lo = mid
        else:
            hi = mid - 1
    begin = Offset(files[lo], 4, start_of(lo))
    last = begin
    for txn in Scanner(up).scan(begin):
        if txn.ts > start_ts:
            return _at_least(txn.start, start_ts)
        last = txn.end
    return _at_least(scan_head(up, last), start_ts)


def _at_least(offset: Offset, ts: int) -> Offset:
    return offset if offset.ts >= ts else replace(offset, ts=ts)


def head_offset(up: UpstreamConfig) -> Offset:
    """The boundary at the end of the binlog now, with the chain state there."""
    conn = up.connect()
    try:
        file, _pos = master_status(conn)
    finally:
        conn.close()
    # Start from the file's own chain state (a file created in the same second as its
    # predecessor continues that file's chain).
    return scan_head(up, Offset(file, 4, _file_start(up, file)[0]))


def query_tso(up: UpstreamConfig) -> int:
    """A ts such that every transaction committed after this call gets a larger commit_ts."""
    return head_offset(up).ts


def scan_head(up: UpstreamConfig, from_offset: Offset) -> Offset:
    """The boundary at the current end of the binlog, scanning from ``from_offset``."""
    stream = BinlogStream(up, from_offset.file, from_offset.pos, blocking=False)
    try:
        for item in TxnStream(stream, from_offset, want_rows=False).items():
            if isinstance(item, Idle):
                return item.at
    finally:
        stream.close()
    return from_offset


def _file_start(up: UpstreamConfig, name: str, files: list[str] | None = None) -> tuple[int, int | None]:
    """Chain state at the start of a binlog file, and the size of its GTID list."""
    info = _first_info(up, name)
    fde = int(info["fde_ts"] or 0)
    ts = file_start_ts(fde)
    if files is None:
        conn = up.connect()
        try:
            files = [f for f, _ in binary_logs(conn)]
        finally:
            conn.close()
    idx = files.index(name) if name in files else -1
    if idx > 0 and _first_info(up, files[idx - 1])["fde_ts"] == fde:
        # Created in the same second as the previous file: continue after that file's chain.
        prev = files[idx - 1]
        prev_start = _file_start(up, prev, files)[0]
        end = prev_start
        for txn in Scanner(up).scan(Offset(prev, 4, prev_start), stop=lambda t: t.end.file != prev):
            if txn.end.file == prev:
                end = txn.ts
        ts = max(ts, end)
    return ts, info["gtid_list_count"]


def _first_info(up: UpstreamConfig, name: str) -> dict[str, int | None]:
    with BinlogStream(up, name, 4, blocking=False) as s:
        info = first_event_info(s)
    if info["fde_ts"] is None:
        raise BinlogPurgedError(f"binlog file {name} has no format description event")
    return info
