"""Wait for a change in a few folders without polling them (Linux ``inotify``, through libc).

An idle changefeed's source waits in ``latestOffset`` for a write (``Planner._wait_for_writes``):
with the server's binlog relay, a write shows as a relayed file that grows. Looking at the file
five times a second, twenty idle changefeeds woke twenty processes a hundred times a second
between them. A watch wakes the source only when a file in the relay's folder is written, or when
the driver asks the query to stop (a file made in the marks folder). The caller still looks at
what it waits for after every wake and at its own interval: an event says "look", never what
changed, and a folder the watch cannot follow (another host's, a platform without ``inotify``)
is looked at as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
import sys

log = logging.getLogger(__name__)

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

WATCHED = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE
"""A file written, made, renamed into or removed from the folder; not a touch (``alive``)."""

_libc: ctypes.CDLL | None = None
_warned = False
"""Whether a watch that could not be made was logged (once per process)."""


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL("libc.so.6", use_errno=True)  # glibc: no ldconfig run to find it
        except OSError:
            _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return _libc


class DirWatch:
    """An ``inotify`` descriptor watching ``folders`` (each must exist)."""

    def __init__(self, folders: list[str]) -> None:
        if not sys.platform.startswith("linux"):
            raise OSError(f"no inotify on {sys.platform}")
        libc = _lib()
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd: int | None = fd
        self._poller = select.poll()  # not select(): no limit on the descriptor's number
        self._poller.register(fd, select.POLLIN)
        for folder in folders:
            if libc.inotify_add_watch(fd, os.fsencode(folder), WATCHED) < 0:
                err = ctypes.get_errno()
                self.close()
                raise OSError(err, f"inotify_add_watch {folder}: {os.strerror(err)}")

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a change; whether one came (its events are read)."""
        fd = self.fd
        if fd is None:
            raise ValueError("the watch is closed")
        if not self._poller.poll(max(0.0, timeout) * 1000):
            return False
        try:
            while os.read(fd, 1 << 16):
                pass
        except BlockingIOError:
            pass  # every queued event read
        return True

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


def watch_folders(folders: list[str]) -> DirWatch | None:
    """A watch of ``folders``, or None where the platform or the folders do not allow one (the
    caller polls); the reason is logged once per process."""
    try:
        return DirWatch(folders)
    except OSError as exc:
        global _warned
        if not _warned:
            log.info("watching %s for changes is not possible (%s); polling instead", folders, exc)
            _warned = True
        return None
