"""Segments of a batch written at the same time, handed to the downstream in segment order.

A sink whose downstream needs a batch in commit order (Kafka: every partition's messages in commit
order) can still decode and encode a batch's segments in parallel tasks, if each task holds its
output until every earlier segment's task has finished: its messages are all acknowledged, so a
later producer's messages land after them. Segment 0 never waits; segment k sends what it holds
once segments 0..k-1 are done, then sends the rest as it goes.

The driver keeps the turns (``TurnDesk``, one per driver process, a small TCP service on the
driver's host, which every executor reaches as it reaches the driver): ``open`` gives each batch a
``TurnTicket`` that travels with the writer function. A task's ``SegmentTurn`` joins the desk on a
connection it keeps for the task's life; a thread of its own waits there for the turn (``ready``
costs nothing), and the task says ``done`` on it once its output is durable.

All or nothing. A segment whose task ends without ``done`` (an error, a lost executor: its
connection closes) gives the batch up: every other segment of it is turned away, whether it waits
or joins later (a retry), so its task fails, frees its slot, and the job fails; the batch then runs
again from its first segment, as the one-task path's retry does. Each partition then holds a
prefix of the batch twice, in order (at-least-once; the consumers drop the repeats). Letting Spark
run one segment again instead could deadlock (its retry waits for a slot that the later segments
hold while they wait for it) or, after a ``done``, send it behind later segments. ``close``, after
the batch's job ended, turns away whatever still waits. Tasks start in index order, so a waiting
task never holds a slot that an earlier segment of its batch needs, except when Spark runs that
segment's task again after its executor was lost before the task joined: a segment waiting for
one that has had no task connected for ``ABSENT_S`` gives the batch up too.
"""

from __future__ import annotations

import logging
import secrets
import socket
import socketserver
import threading
import time
from dataclasses import dataclass
from typing import Any

from sparkcdc.errors import SinkUnavailable
from sparkcdc.pipeline.spark import CHANGEFEED_TASKS_KEY

log = logging.getLogger(__name__)

WAIT_S = 900.0
"""Seconds a segment waits for the earlier ones before its task fails (the batch then runs again)."""

ABSENT_S = 30.0
"""Seconds a segment waits while an earlier one has no task connected to the desk (not started yet,
or lost with its executor before it joined) before the batch is given up: Spark may be holding that
task until a slot frees, and the waiting segments hold the slots."""


@dataclass(frozen=True)
class TurnTicket:
    """Where the desk of one batch is: shipped to the tasks with the writer function."""

    host: str
    port: int
    token: str
    label: str
    """The changefeed and batch, for errors."""


class _Batch:
    __slots__ = ("done", "given_up", "present")

    def __init__(self) -> None:
        self.done: set[int] = set()
        self.present: set[int] = set()
        """Segments whose task is connected now."""
        self.given_up = ""
        """Why the batch was given up ("" while it runs)."""


class TurnDesk:
    """Driver: the turns of every batch in flight in this process."""

    def __init__(self, bind: str, advertise: str) -> None:
        self._cond = threading.Condition()
        self._batches: dict[str, _Batch] = {}
        self.advertise = advertise
        self._server = _Server((bind, 0), _Handler)
        self._server.desk = self
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="sparkcdc-turns", daemon=True)
        self._thread.start()

    def open(self, label: str) -> TurnTicket:
        """Turns for a batch (its segments join with their index)."""
        token = secrets.token_hex(16)
        with self._cond:
            self._batches[token] = _Batch()
        return TurnTicket(self.advertise, self.port, token, label)

    def close(self, ticket: TurnTicket) -> None:
        """The batch's job ended: forget it; a segment still waiting is turned away."""
        with self._cond:
            b = self._batches.pop(ticket.token, None)
            if b is not None and not b.given_up:
                b.given_up = "its job ended"
            self._cond.notify_all()

    def stop(self) -> None:
        """Stop serving (tests)."""
        with self._cond:
            for b in self._batches.values():
                b.given_up = "the desk stopped"
            self._batches.clear()
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def join(self, token: str, segment: int, timeout: float) -> str:
        """Block until ``segment``'s turn: "go", or why it will not come."""
        now = time.monotonic()
        deadline = now + timeout
        absent_since: float | None = None
        """Since when an earlier segment has had no task connected (none yet, or it left)."""
        with self._cond:
            b = self._batches.get(token)
            if b is not None:
                b.present.add(segment)
                if segment in b.done:
                    # a task run again after it said done: what it sends would follow later segments
                    self._give_up(b, f"segment {segment} ran again after it finished")
            while True:
                b = self._batches.get(token)
                if b is None:
                    return "the batch is over"
                if b.given_up:
                    return f"the batch was given up: {b.given_up}"
                missing = [i for i in range(segment) if i not in b.done]
                if not missing:
                    return "go"
                now = time.monotonic()
                absent = [i for i in missing if i not in b.present]
                if not absent:
                    absent_since = None
                elif absent_since is None:
                    absent_since = now
                elif now - absent_since >= ABSENT_S:
                    # its task is not running: lost with its executor before it joined, or waiting
                    # for a slot that this segment holds (a resubmitted task); the batch runs again
                    self._give_up(
                        b,
                        f"segment(s) {absent} had no running task for {ABSENT_S:g}s while later ones waited",
                    )
                    continue
                if now >= deadline:
                    self._give_up(b, f"segment(s) {missing} not done after {timeout:.0f}s")
                    continue
                self._cond.wait(min(deadline - now, 1.0))

    def done(self, token: str, segment: int) -> str:
        with self._cond:
            b = self._batches.get(token)
            if b is None:
                return "the batch is over"
            if b.given_up:
                return f"the batch was given up: {b.given_up}"
            b.done.add(segment)
            self._cond.notify_all()
        return "ok"

    def left(self, token: str, segment: int) -> None:
        """A segment's connection closed: unless it finished, its batch is given up."""
        with self._cond:
            b = self._batches.get(token)
            if b is None:
                return
            b.present.discard(segment)
            if segment not in b.done:
                self._give_up(b, f"the task of segment {segment} ended without finishing")

    def _give_up(self, b: _Batch, why: str) -> None:
        if not b.given_up:
            b.given_up = why
        self._cond.notify_all()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    desk: TurnDesk


class _Handler(socketserver.StreamRequestHandler):
    """A segment's connection: ``JOIN <token> <segment> <timeout>``, answered when its turn comes
    (``go``) or never will; then ``DONE``, answered ``ok``. A connection that closes before
    ``DONE`` gives the batch up."""

    server: _Server

    def handle(self) -> None:
        desk = self.server.desk
        words = self.rfile.readline(512).decode("ascii", "replace").split()
        try:
            if len(words) != 4 or words[0] != "JOIN":
                raise ValueError(words)
            token, segment, timeout = words[1], int(words[2]), float(words[3])
        except ValueError:
            self.wfile.write(b"bad request\n")
            return
        finished = False
        try:
            reply = desk.join(token, segment, timeout)
            self.wfile.write(reply.encode() + b"\n")
            if reply != "go":
                return
            if self.rfile.readline(512).strip() == b"DONE":
                reply = desk.done(token, segment)
                finished = reply == "ok"
                self.wfile.write(reply.encode() + b"\n")
        except OSError:
            pass
        finally:
            if not finished:
                desk.left(token, segment)


_DESK: TurnDesk | None = None
_DESK_LOCK = threading.Lock()


def turn_desk(spark: Any) -> TurnDesk:
    """This driver's desk, started on first use on the address executors reach the driver at
    (``spark.driver.bindAddress`` / ``spark.driver.host`` of the session)."""
    global _DESK
    with _DESK_LOCK:
        if _DESK is None:
            conf = spark.sparkContext.getConf()
            host = conf.get("spark.driver.host") or socket.gethostname()
            bind = conf.get("spark.driver.bindAddress") or host
            _DESK = TurnDesk(bind, host)
            log.debug("segment turns served on %s:%d", host, _DESK.port)
        return _DESK


class SegmentTurn:
    """Executor: one segment's place in its batch's order (joins the desk when made)."""

    def __init__(self, ticket: TurnTicket, segment: int, wait_s: float = WAIT_S) -> None:
        self.ticket = ticket
        self.segment = segment
        self._event = threading.Event()
        self._answer = ""
        try:
            self._sock = socket.create_connection((ticket.host, ticket.port), timeout=30.0)
            self._sock.settimeout(None)
            self._sock.sendall(f"JOIN {ticket.token} {segment} {wait_s}\n".encode())
        except OSError as e:
            raise self._error(
                f"the driver's turn desk {ticket.host}:{ticket.port} cannot be reached: {e}. The "
                "executors must reach that port of the driver (spark.driver.host), or set --spark-conf "
                f"{CHANGEFEED_TASKS_KEY}=1 to write each batch in one task"
            ) from e
        self._file = self._sock.makefile("rb")
        threading.Thread(target=self._await_turn, name="sparkcdc-turn", daemon=True).start()

    def _await_turn(self) -> None:
        try:
            self._answer = self._file.readline(512).decode("ascii", "replace").strip()
        except (OSError, ValueError) as e:
            self._answer = f"the driver's turn desk failed: {e}"
        self._answer = self._answer or "the driver's turn desk closed the connection"
        self._event.set()

    def _error(self, why: str) -> SinkUnavailable:
        return SinkUnavailable(
            f"segment {self.segment} of {self.ticket.label} did not get its turn ({why}); "
            "the batch will be written again"
        )

    def ready(self) -> bool:
        """Whether every earlier segment is done (raises if the turn will never come)."""
        if not self._event.is_set():
            return False
        if self._answer != "go":
            raise self._error(self._answer)
        return True

    def wait(self) -> None:
        """Block until every earlier segment is done."""
        self._event.wait()
        if self._answer != "go":
            raise self._error(self._answer)

    def done(self) -> None:
        """This segment's output is durable: later segments may send theirs."""
        self.wait()
        try:
            self._sock.sendall(b"DONE\n")
            answer = self._file.readline(512).decode("ascii", "replace").strip()
        except OSError as e:
            answer = f"the driver's turn desk failed: {e}"
        finally:
            self.abandon()
        if answer != "ok":
            raise self._error(answer or "the driver's turn desk closed the connection")

    def abandon(self) -> None:
        """Leave the desk (the task failed: the batch is given up unless this segment was done)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the thread still waiting for the turn
        except OSError:
            pass
        self._file.close()
        self._sock.close()
