"""One binlog reader per upstream in a server: the relay.

A server's changefeeds on one upstream read the same binlog. Without a relay each Spark task
opens a replication connection of its own for its segment. With one, the server keeps a single
blocking binlog dump per upstream (``RelayWriter``) and appends every event it receives to files
on local disk, as MariaDB's replica does with its relay log. A task on this host reads its
segment from there (``RelayStream``): the same events, in the same order, as the server would
send it for the same start position (``tests/integration/capture/test_relay.py`` compares the two
over every transaction boundary of a binlog).

The relay is a bounded buffer: it keeps at most ``max_bytes`` of binlog. A reader whose start is
not in the relay (a changefeed behind it, a start before the relay started, a host without the
relay's directory) reads the upstream itself, as it did without a relay; so does a reader that
reaches the relay's end while the relay stopped or lags by more than ``RELAY_WAIT_S`` (it goes on
from the upstream at the position it reached). A slow changefeed therefore never holds the relay
or its siblings back.

What the server sends beside the binlog's own events is not stored but made again by the reader,
as the server makes it (MariaDB 10.11 and MySQL 8 alike): a rotate event naming the start
(``log_pos`` 0, artificial), the file's format description with ``log_pos`` and ``created`` set
to 0 when the start is past it, the same artificial rotate after each real one, and heartbeats
while there is nothing to send. An event the writer cannot place in that model (an artificial
event of another kind, an event that starts before the last one ends) stops the relay with an error naming it and its
position: every reader then reads the upstream itself.

Files in a relay directory:

- ``relay.json``: the upstream (host, port), this host's name, the upstream's server id, whether
  its events carried checksums, and an epoch (new whenever the relay starts over).
- ``<binlog file>.fde``: where the relay of that file starts, and the file's format description.
- ``<binlog file>.relay``: the file's events from there on, each as a record (``_REC``, then the
  body without checksum).
- ``<binlog file>.idx``: every ``INDEX_EVERY`` bytes of records, a (position, record offset) pair.
- ``alive``: touched by the writer at least once per heartbeat; a reader trusts the relay only
  while it is fresh (``RELAY_STALE_S``).
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql

from sparkcdc.capture import protocol as P
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import BinlogStream, RawEvent, event_name
from sparkcdc.capture.upstream import UpstreamConfig, binary_logs, master_status
from sparkcdc.errors import BinlogPurgedError, SparkCdcError, TransientError

log = logging.getLogger(__name__)

RELAY_MAX_BYTES = 256 << 20
"""Binlog bytes a relay keeps by default (whole files; the file being written is always kept)."""

RELAY_WAIT_S = 2.0
"""How long a reader at the relay's end waits for it to grow before it reads the upstream itself."""

RELAY_STALE_S = 5.0
"""A relay whose ``alive`` file is older than this has stopped: readers do not wait for it."""

INDEX_EVERY = 64 << 10
"""Record bytes between two entries of a relay file's index."""

LOG_EVENT_ARTIFICIAL_F = 0x20
_FDE_CREATED = slice(52, 56)
"""The ``created`` field in a format description body (after the binlog and server versions)."""

_REC = struct.Struct("<IBIIIHI")
"""A record: timestamp, type, server id, size, log_pos, flags (the event header), body length."""
_IDX = struct.Struct("<QQ")
_FDE_HEAD = struct.Struct("<Q")


class RelayError(SparkCdcError):
    """The relay met what it cannot store faithfully; it stops and readers read the upstream."""


class _StartOver(Exception):
    """The upstream's binlog is not the one the relay holds (purged, reset, another server)."""


def relay_key(up: UpstreamConfig) -> str:
    """The directory name of an upstream's relay: one per host, port and user."""
    safe = "".join(c if c.isalnum() or c in "-." else "_" for c in f"{up.host}-{up.port}-{up.user}")
    return safe


def _pack(ev: RawEvent) -> bytes:
    return (
        _REC.pack(ev.timestamp, ev.type, ev.server_id, ev.size, ev.log_pos, ev.flags, len(ev.body)) + ev.body
    )


def _start_of(ev: RawEvent) -> int:
    return ev.log_pos - ev.size


def _rotate_body(pos: int, name: str) -> bytes:
    return struct.pack("<Q", pos) + name.encode()


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except FileNotFoundError:
        path.touch()


class RelayWriter:
    """Follows an upstream's binlog with one blocking dump and appends it to ``directory``."""

    def __init__(
        self,
        upstream: UpstreamConfig,
        directory: Path,
        *,
        max_bytes: int = RELAY_MAX_BYTES,
        backfill_bytes: int | None = None,
        heartbeat_s: float = 1.0,
    ) -> None:
        """``backfill_bytes``: how much of the binlog before the head a new relay starts with at most
        (whole files; default a quarter of ``max_bytes``)."""
        self.upstream = upstream
        self.directory = directory
        self.max_bytes = max_bytes
        self.backfill_bytes = max_bytes // 4 if backfill_bytes is None else backfill_bytes
        self.heartbeat_s = heartbeat_s
        self.file: str | None = None
        """The binlog file being relayed and the position after its last stored event."""
        self.pos = 0
        self.error: BaseException | None = None
        """Why the relay stopped for good (readers read the upstream)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: BinlogStream | None = None
        self._fd = -1
        self._offset = 0
        self._next_index = 0
        self._files: list[str] = []
        self._fde: RawEvent | None = None
        self._last_touch = 0.0
        self._pending: str | None = None
        """The next file the last stored (real) rotate named: its artificial rotate and its format
        description come next."""
        self.started = threading.Event()
        """Set once the relay holds its first position (readers may use it from there)."""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> RelayWriter:
        """Start following in a thread of its own."""
        self._thread = threading.Thread(target=self._run, name=f"relay-{self.directory.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0, *, remove: bool = True) -> None:
        """Stop following: readers read the upstream from now on. The files are removed unless
        ``remove`` is false (as a relay that died leaves them)."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()  # ends a blocking read
        if self._thread is not None:
            self._thread.join(timeout)
        if not self.alive:
            self._close_file()
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def alive(self) -> bool:
        """Whether the writer still follows the upstream."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                self._follow()
                delay = 0.5
            except _StartOver as exc:
                if self._stop.is_set():
                    break
                log.warning(
                    "binlog relay %s starts over at the upstream's head: %s", self.directory.name, exc
                )
                self.file = None
            except (TransientError, pymysql.err.Error, OSError) as exc:
                if self._stop.is_set():
                    break
                log.warning(
                    "binlog relay %s lost the upstream at %s:%s (%s); reconnecting",
                    self.directory.name,
                    self.file,
                    self.pos,
                    exc,
                )
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
            except BaseException as exc:  # a relay that cannot go on stops; readers fall back
                if self._stop.is_set():
                    break  # the stop closed the stream under a read
                self.error = exc
                log.error(
                    "binlog relay %s stopped at %s:%s: %s; its changefeeds read the upstream themselves",
                    self.directory.name,
                    self.file,
                    self.pos,
                    exc,
                )
                break
            finally:
                if self._stream is not None:
                    self._stream.close()
                    self._stream = None
        (self.directory / "alive").unlink(missing_ok=True)

    # -- following ---------------------------------------------------------------------------

    def _first_position(self) -> tuple[str, int]:
        """Where a new relay starts: the start of the oldest binlog files that hold at most
        ``backfill_bytes`` up to the head (a changefeed started a moment ago finds its start in the
        relay), or the head when the current file alone holds more."""
        conn = self.upstream.connect()
        try:
            head = master_status(conn)
            files = binary_logs(conn)
        finally:
            conn.close()
        first = head
        total = 0
        for name, size in reversed(files):
            if Offset(name, 4, 0).key() > Offset(*head, 0).key():
                continue  # rotated after the head was read
            total += size
            if total > self.backfill_bytes:
                break
            first = (name, 4)
        return first

    def _begin(self, server_id: int, checksum: bool) -> None:
        """A new relay: the directory emptied, ``relay.json`` with a new epoch."""
        self._close_file()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True)
        meta = {
            "host": self.upstream.host,
            "port": self.upstream.port,
            "hostname": socket.gethostname(),
            "server_id": server_id,
            "checksum": checksum,
            "epoch": uuid.uuid4().hex,
        }
        tmp = self.directory / "relay.json.tmp"
        tmp.write_text(json.dumps(meta))
        tmp.rename(self.directory / "relay.json")
        self._files = []
        self._pending = None

    def _follow(self) -> None:
        resume = self.file is not None
        if not resume:
            self.file, self.pos = self._first_position()
        file, pos = self.file, self.pos
        assert file is not None
        stream = BinlogStream(self.upstream, file, pos, blocking=True, heartbeat_s=self.heartbeat_s)
        self._stream = stream
        events = stream.events()
        try:
            first = next(events)
            fde = next(events)
        except BinlogPurgedError as exc:
            raise _StartOver(str(exc)) from exc
        except StopIteration:
            raise TransientError(f"the binlog dump from {file}:{pos} ended at once") from None
        if self._stop.is_set():
            return
        if not (
            first.type == P.ROTATE_EVENT and first.log_pos == 0 and first.body == _rotate_body(pos, file)
        ):
            raise RelayError(
                f"the upstream began a binlog dump from {file}:{pos} with {event_name(first.type)}"
            )
        if fde.type != P.FORMAT_DESCRIPTION_EVENT:
            raise RelayError(
                f"the upstream sent {event_name(fde.type)} after the dump's rotate at {file}:{pos}"
            )
        if resume:
            if self._fde is None or _normal_fde(fde) != _normal_fde(self._fde):
                raise _StartOver(f"the format description of {file} changed (another binlog at that name)")
        else:
            self._begin(first.server_id, stream.checksum)
            self._new_file(file, pos, fde)
            if fde.log_pos:
                self._append(fde)
        self.started.set()
        _touch(self.directory / "alive")
        self._last_touch = time.monotonic()
        for ev in events:
            if self._stop.is_set():
                return
            t = ev.type
            if t in (P.HEARTBEAT_EVENT, P.HEARTBEAT_EVENT_V2):
                self._keep_alive(force=True)
                continue
            if ev.log_pos == 0:
                if (
                    t == P.ROTATE_EVENT
                    and self._pending is not None
                    and ev.body == _rotate_body(4, self._pending)
                ):
                    continue  # readers make it again after the real rotate
                raise RelayError(f"artificial {event_name(t)} at {self.file}:{self.pos}")
            if self._pending is not None:
                if t != P.FORMAT_DESCRIPTION_EVENT or _start_of(ev) != 4:
                    raise RelayError(
                        f"{event_name(t)} at {self._pending}:{_start_of(ev)} where its format description belongs"
                    )
                self._close_file()
                self._new_file(self._pending, 4, ev)
                self._pending = None
            elif _start_of(ev) < self.pos:
                # Later is normal: the server leaves out what the dump did not ask for (MariaDB's
                # annotate events). Earlier would overlap what is stored.
                raise RelayError(
                    f"{event_name(t)} at {self.file}:{_start_of(ev)} starts before the last event's end ({self.pos})"
                )
            self._append(ev)
            if t == P.ROTATE_EVENT:
                self._pending = ev.body[8:].decode()
            self._keep_alive()

    def _keep_alive(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_touch >= min(0.5, self.heartbeat_s):
            _touch(self.directory / "alive")
            self._last_touch = now

    def _new_file(self, name: str, first: int, fde: RawEvent) -> None:
        tmp = self.directory / f"{name}.fde.tmp"
        tmp.write_bytes(_FDE_HEAD.pack(first) + _pack(fde))
        (self.directory / f"{name}.relay").touch()
        (self.directory / f"{name}.idx").touch()
        tmp.rename(self.directory / f"{name}.fde")
        self._fde = fde
        self._fd = os.open(self.directory / f"{name}.relay", os.O_WRONLY | os.O_APPEND)
        self._idx_fd = os.open(self.directory / f"{name}.idx", os.O_WRONLY | os.O_APPEND)
        self._offset = 0
        self._next_index = 0
        self.file, self.pos = name, first
        self._files.append(name)
        self._trim()

    def _append(self, ev: RawEvent) -> None:
        if self._offset >= self._next_index:
            os.write(self._idx_fd, _IDX.pack(_start_of(ev), self._offset))
            self._next_index = self._offset + INDEX_EVERY
        data = _pack(ev)
        os.write(self._fd, data)
        self._offset += len(data)
        self.pos = ev.log_pos

    def _close_file(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            os.close(self._idx_fd)
            self._fd = -1

    def _trim(self) -> None:
        """Remove the oldest relayed files while the relay holds more than ``max_bytes``."""
        sizes = {}
        for name in self._files:
            try:
                sizes[name] = (self.directory / f"{name}.relay").stat().st_size
            except FileNotFoundError:
                sizes[name] = 0
        total = sum(sizes.values())
        while len(self._files) > 1 and total > self.max_bytes:
            old = self._files.pop(0)
            for suffix in (".fde", ".idx", ".relay"):
                (self.directory / f"{old}{suffix}").unlink(missing_ok=True)
            total -= sizes[old]


def _normal_fde(fde: RawEvent) -> RawEvent:
    """A format description as the server sends it for a start past it: log_pos and created 0."""
    body = bytearray(fde.body)
    body[_FDE_CREATED] = b"\0\0\0\0"
    return RawEvent(fde.timestamp, fde.type, fde.server_id, fde.size, 0, fde.flags, bytes(body))


class _RelayFile:
    """A relayed binlog file open for reading."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self.path = directory / f"{name}.relay"
        raw = (directory / f"{name}.fde").read_bytes()  # FileNotFoundError: not relayed
        (self.first,) = _FDE_HEAD.unpack_from(raw, 0)
        got = _parse(raw, _FDE_HEAD.size)
        if got is None:
            raise OSError(f"{name}.fde is cut short")
        self.fde = got[0]
        idx = (directory / f"{name}.idx").read_bytes()
        n = len(idx) // _IDX.size
        self.index = [_IDX.unpack_from(idx, i * _IDX.size) for i in range(n)]
        self.fd = os.open(self.path, os.O_RDONLY)
        self.ino = os.fstat(self.fd).st_ino
        self.offset = 0
        """The file offset of the next record (``_buf[_at:]`` holds it and what was read after it)."""
        self._buf = b""
        self._at = 0
        self.rotated_to: str | None = None
        """After ``seek`` to the end of a rotated file: the file its rotate names."""

    def close(self) -> None:
        os.close(self.fd)

    def replaced(self) -> bool:
        """Whether the file at the path is no longer this one (removed, or the relay started over)."""
        try:
            return os.stat(self.path).st_ino != self.ino
        except FileNotFoundError:
            return True

    def seek(self, pos: int) -> bool:
        """Move to the event that starts at ``pos``, or to the end when ``pos`` is where the
        relayed events end now. False when no event starts there."""
        if pos < self.first:
            return False
        keys = [p for p, _ in self.index]
        i = bisect.bisect_right(keys, pos) - 1
        self.offset = self.index[i][1] if i >= 0 else 0
        self._buf, self._at = b"", 0
        end = self.first
        last: RawEvent | None = None
        while True:
            got = self._peek()
            if got is None:
                if last is not None and last.type == P.ROTATE_EVENT:
                    self.rotated_to = last.body[8:].decode()
                return end == pos
            ev, n = got
            start = _start_of(ev)
            if start == pos:
                return True
            if start > pos:
                return False
            end, last = ev.log_pos, ev
            self._take(n)

    def _fill(self) -> bool:
        """Read on from the file; the bytes not parsed yet stay in front."""
        data = os.pread(self.fd, 1 << 20, self.offset + len(self._buf) - self._at)
        if not data:
            return False
        self._buf = self._buf[self._at :] + data
        self._at = 0
        return True

    def _peek(self) -> tuple[RawEvent, int] | None:
        while True:
            got = _parse(self._buf, self._at)
            if got is not None:
                return got
            if not self._fill():
                return None

    def _take(self, n: int) -> None:
        self._at += n
        self.offset += n

    def next_event(self) -> RawEvent | None:
        """The next relayed event, None at the relay's end for now."""
        got = self._peek()
        if got is None:
            return None
        self._take(got[1])
        return got[0]


def _parse(buf: bytes, at: int) -> tuple[RawEvent, int] | None:
    """The record at ``at`` and the bytes it takes, None when ``buf`` does not hold all of it."""
    if len(buf) - at < _REC.size:
        return None
    ts, typ, sid, size, log_pos, flags, n = _REC.unpack_from(buf, at)
    end = at + _REC.size + n
    if len(buf) < end:
        return None
    return RawEvent(ts, typ, sid, size, log_pos, flags, bytes(buf[at + _REC.size : end])), end - at


_read_meta: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}
"""``relay.json`` of each relay folder as last read, by the file's (inode, mtime, size): an idle
changefeed's source looks at its relay five times a second (``Planner._wait_for_writes``)."""

_newest: dict[Path, tuple[int, str]] = {}
"""The newest relayed file of each folder as last listed, by the folder's mtime."""


def _settled(mtime_ns: int) -> bool:
    """Whether a file or folder last changed at ``mtime_ns`` may be known by that time: a change
    within the same tick of the kernel's coarse clock would leave it as it is, so a listing or a
    read is kept only once its time is a second old."""
    return time.time_ns() - mtime_ns >= 1_000_000_000


def relay_meta(directory: Path, up: UpstreamConfig) -> dict[str, Any] | None:
    """The relay's ``relay.json`` when it relays ``up`` on this host and is alive, else None."""
    path = directory / "relay.json"
    try:
        st = os.stat(path)
        key = (st.st_ino, st.st_mtime_ns, st.st_size)  # written by a rename: a new file, a new inode
        known = _read_meta.get(directory)
        if known is not None and known[0] == key:
            meta = known[1]
        else:
            meta = json.loads(path.read_text())
            if _settled(st.st_mtime_ns):
                _read_meta[directory] = (key, meta)
        age = time.time() - (directory / "alive").stat().st_mtime
    except (OSError, ValueError):
        return None
    if (meta.get("host"), meta.get("port"), meta.get("hostname")) != (up.host, up.port, socket.gethostname()):
        return None
    if age > RELAY_STALE_S:
        return None
    return meta


def relay_tip(directory: Path, up: UpstreamConfig) -> tuple[str, int] | None:
    """The newest relayed file and its size now: it changes whenever the relay stores an event.
    None when no relay of ``up`` is alive there (the caller asks the upstream instead)."""
    if relay_meta(directory, up) is None:
        return None
    try:
        listed = os.stat(directory).st_mtime_ns  # a file added or dropped changes it
        known = _newest.get(directory)
        if known is not None and known[0] == listed:
            name = known[1]
        else:
            newest: tuple[tuple[int, int], str] | None = None
            with os.scandir(directory) as entries:
                for e in entries:
                    if e.name.endswith(".relay"):
                        key = (Offset(e.name[: -len(".relay")], 0, 0).key(), e.name)
                        newest = key if newest is None or key > newest else newest
            if newest is None:
                return None
            name = newest[1]
            if _settled(listed):
                _newest[directory] = (listed, name)
        return name, os.stat(directory / name).st_size
    except (OSError, ValueError):
        return None


class RelayStream:
    """The events ``BinlogStream(upstream, file, pos, blocking=True)`` yields, read from the relay
    in ``directory`` while it holds them, then from the upstream (``relay`` counts which)."""

    def __init__(
        self,
        directory: Path,
        upstream: UpstreamConfig,
        file: str,
        pos: int,
        *,
        heartbeat_s: float = 1.0,
        wait_s: float = RELAY_WAIT_S,
    ) -> None:
        self.directory = directory
        self.upstream = upstream
        self.file = file
        self.pos = pos
        self.heartbeat_s = heartbeat_s
        self.wait_s = wait_s
        self.relayed = 0
        """Events read from the relay (the rest came from the upstream)."""
        self.checksum = False
        self._current: _RelayFile | None = None
        self._upstream: BinlogStream | None = None

    def open(self) -> None:
        """Nothing to open ahead: ``events`` opens what it reads."""

    def close(self) -> None:
        """Close the relay file and the upstream connection, if open (idempotent)."""
        if self._current is not None:
            self._current.close()
            self._current = None
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def __enter__(self) -> RelayStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _from_upstream(self, file: str, pos: int, *, skip_artificial: bool) -> Iterator[RawEvent]:
        self._upstream = BinlogStream(self.upstream, file, pos, blocking=True, heartbeat_s=self.heartbeat_s)
        # What the dump sends first for a start (already sent, from the relay): its artificial
        # rotate, then the file's format description when the start is past it.
        skip = [P.ROTATE_EVENT, P.FORMAT_DESCRIPTION_EVENT] if skip_artificial else []
        for ev in self._upstream.events():
            self.checksum = self._upstream.checksum
            if skip and ev.log_pos == 0 and ev.type == skip[0]:
                skip.pop(0)
                continue
            skip = []
            yield ev

    def _open(self, name: str, pos: int) -> _RelayFile | None:
        try:
            f = _RelayFile(self.directory, name)
        except (OSError, IndexError):
            return None
        if f.seek(pos):
            return f
        f.close()
        return None

    def events(self) -> Iterator[RawEvent]:
        """Raw events from the start, forever (blocking mode)."""
        meta = relay_meta(self.directory, self.upstream)
        f = self._open(self.file, self.pos) if meta is not None else None
        if meta is None or f is None:
            yield from self._from_upstream(self.file, self.pos, skip_artificial=False)
            return
        self._current = f
        self.checksum = bool(meta["checksum"])
        sid = int(meta["server_id"])
        tail = 4 if self.checksum else 0
        yield self._artificial_rotate(sid, self.pos, self.file, tail)
        if self.pos > 4:
            yield _normal_fde(f.fde)
        waited_since: float | None = None
        last_beat = 0.0
        rotated_to = f.rotated_to
        while True:
            if rotated_to is not None:
                # After a real rotate the server sends an artificial one, then the next file from 4.
                name, rotated_to = rotated_to, None
                yield self._artificial_rotate(sid, 4, name, tail)
                nxt = self._open_next(name)
                f.close()
                self._current = None
                self.file, self.pos = name, 4
                if nxt is None:
                    yield from self._from_upstream(name, 4, skip_artificial=True)
                    return
                f = self._current = nxt
                waited_since = None
                continue
            ev = f.next_event()
            if ev is not None:
                waited_since = None
                self.relayed += 1
                self.pos = ev.log_pos
                yield ev
                if ev.type == P.ROTATE_EVENT:
                    rotated_to = ev.body[8:].decode()
                continue
            now = time.monotonic()
            if waited_since is None:
                # At the relay's end: a heartbeat at once, so a reader waiting for this position
                # (a scan to the head) learns it is here; then one per heartbeat period.
                waited_since = now
                last_beat = now - self.heartbeat_s
            if (
                now - waited_since >= self.wait_s
                or f.replaced()
                or relay_meta(self.directory, self.upstream) is None
            ):
                # The relay lags, stopped or started over: go on from the upstream where it ended.
                f.close()
                self._current = None
                yield from self._from_upstream(self.file, self.pos, skip_artificial=True)
                return
            if now - last_beat >= self.heartbeat_s:
                last_beat = now
                body = self.file.encode()
                yield RawEvent(0, P.HEARTBEAT_EVENT, sid, 19 + len(body) + tail, self.pos, 0, body)
            time.sleep(min(0.05, 0.002 + (now - waited_since) / 10))

    def _open_next(self, name: str) -> _RelayFile | None:
        """The relay of the file a rotate named, waiting up to ``wait_s`` for the writer to start it."""
        deadline = time.monotonic() + self.wait_s
        while True:
            f = self._open(name, 4)
            if f is not None or time.monotonic() >= deadline:
                return f
            if relay_meta(self.directory, self.upstream) is None:
                return None
            time.sleep(0.01)

    @staticmethod
    def _artificial_rotate(server_id: int, pos: int, name: str, tail: int) -> RawEvent:
        body = _rotate_body(pos, name)
        return RawEvent(0, P.ROTATE_EVENT, server_id, 19 + len(body) + tail, 0, LOG_EVENT_ARTIFICIAL_F, body)


def binlog_stream(
    upstream: UpstreamConfig,
    file: str,
    pos: int,
    *,
    blocking: bool = True,
    heartbeat_s: float = 1.0,
    relay_dir: str = "",
) -> BinlogStream | RelayStream:
    """A stream of the binlog from ``file:pos``: from the relay in ``relay_dir`` when there is one
    (blocking streams only: a non-blocking one must end where the upstream's binlog ends)."""
    if relay_dir and blocking:
        return RelayStream(Path(relay_dir), upstream, file, pos, heartbeat_s=heartbeat_s)
    return BinlogStream(upstream, file, pos, blocking=blocking, heartbeat_s=heartbeat_s)


def process_relay_root() -> Path:
    """This process's folder for its relays (under the temporary directory). Folders of processes
    that are gone (a server killed before it could remove its relays) are removed here."""
    tmp = Path(tempfile.gettempdir())
    for old in tmp.glob("sparkcdc-relay-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return tmp / f"sparkcdc-relay-{os.getpid()}"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


class RelayHub:
    """The relays of one server: one per upstream, while at least one of its changefeeds runs."""

    def __init__(self, root: Path, *, max_bytes: int = RELAY_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._relays: dict[str, tuple[RelayWriter, int]] = {}

    def acquire(self, upstream_uri: str) -> str:
        """The relay directory of the upstream (its relay started when none runs); ``release`` it."""
        up = UpstreamConfig.from_uri(upstream_uri)
        key = relay_key(up)
        with self._lock:
            writer, users = self._relays.get(key, (None, 0))
            if writer is None or not writer.alive:
                if writer is not None:
                    writer.stop()
                writer = RelayWriter(up, self.root / key, max_bytes=self.max_bytes).start()
                log.info("binlog relay of %s started in %s", up.redacted, writer.directory)
            self._relays[key] = (writer, users + 1)
            return str(writer.directory)

    def release(self, upstream_uri: str) -> None:
        """One changefeed of the upstream stopped: its relay stops with the last one."""
        key = relay_key(UpstreamConfig.from_uri(upstream_uri))
        with self._lock:
            writer, users = self._relays.get(key, (None, 0))
            if writer is None:
                return
            if users > 1:
                self._relays[key] = (writer, users - 1)
                return
            del self._relays[key]
        writer.stop()
        log.info("binlog relay of %s stopped", writer.upstream.redacted)

    def status(self) -> list[dict[str, Any]]:
        """Each relay: its upstream (no password), whether it follows, where, and the bytes it holds."""
        with self._lock:
            relays = [(w, n) for w, n in self._relays.values()]
        out = []
        for w, users in relays:
            held = sum(p.stat().st_size for p in w.directory.glob("*.relay") if p.exists())
            out.append(
                {
                    "upstream": w.upstream.redacted,
                    "following": w.alive and w.error is None,
                    "file": w.file,
                    "pos": w.pos,
                    "bytes": held,
                    "changefeeds": users,
                    "error": str(w.error) if w.error is not None else None,
                }
            )
        return out

    def users(self, upstream_uri: str) -> int:
        """How many running changefeeds hold the upstream's relay."""
        with self._lock:
            return self._relays.get(relay_key(UpstreamConfig.from_uri(upstream_uri)), (None, 0))[1]

    def close(self) -> None:
        """Stop every relay."""
        with self._lock:
            writers = [w for w, _ in self._relays.values()]
            self._relays.clear()
        for w in writers:
            w.stop()
