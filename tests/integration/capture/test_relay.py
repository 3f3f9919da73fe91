"""The binlog relay against the server it relays: from any start, the same events as a dump.

The oracle is the upstream itself: for each start position, the events a ``RelayStream`` yields
are compared field by field with those of a real binlog dump from the same position, up to and
including the first heartbeat (the end of what was written). The binlog comes from the seeded
random workload (``tests/oracle/random_workload.py``: transactions of every form, XA, DDL,
non-transactional tables), with binlog rotations during it and MariaDB's compressed events on.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.capture import protocol as P
from sparkcdc.capture.offset import Offset
from sparkcdc.capture.protocol import BinlogStream, RawEvent
from sparkcdc.capture.reader import Scanner
from sparkcdc.capture.relay import RelayHub, RelayStream, RelayWriter, relay_key
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig, master_status
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.oracle.random_workload import run_random

HEARTBEAT_S = 0.2
SEED = 20261129


@pytest.fixture(scope="module")
def upstream_db() -> Iterator[LocalMariaDB]:
    """A MariaDB of its own: the tests rotate its binlog, and it compresses large events."""
    with LocalMariaDB(extra_args=("--log-bin-compress=ON", "--log-bin-compress-min-len=64")) as db:
        yield db


def _until_heartbeat(events: Iterator[RawEvent], limit: int = 1_000_000) -> list[RawEvent]:
    out = []
    for ev in events:
        out.append(ev)
        if ev.type == P.HEARTBEAT_EVENT or len(out) >= limit:
            break
    return out


def _until_position(events: Iterator[RawEvent], file: str, pos: int) -> list[RawEvent]:
    """Events up to the one that ends at ``file:pos`` (heartbeats left out: their timing is not
    the binlog's)."""
    out, current = [], ""
    for ev in events:
        if ev.type == P.ROTATE_EVENT:
            current = ev.body[8:].decode()
        if ev.type == P.HEARTBEAT_EVENT:
            continue
        out.append(ev)
        if current == file and ev.log_pos >= pos:
            break
    return out


def _server(up: UpstreamConfig, file: str, pos: int) -> list[RawEvent]:
    with BinlogStream(up, file, pos, blocking=True, heartbeat_s=HEARTBEAT_S) as s:
        return _until_heartbeat(s.events())


def _relay(directory: Path, up: UpstreamConfig, file: str, pos: int) -> tuple[list[RawEvent], int]:
    with RelayStream(directory, up, file, pos, heartbeat_s=HEARTBEAT_S) as s:
        events = _until_heartbeat(s.events())
        return events, s.relayed


def _caught_up(writer: RelayWriter, up: UpstreamConfig) -> None:
    """Wait until the binlog is quiet (MariaDB writes a rotated file's binlog checkpoint event
    later, in the background) and the relay holds all of it."""
    seen: list[tuple[tuple[str, int], float]] = []

    def done() -> bool:
        if writer.error is not None:
            return True
        conn = up.connect()
        try:
            head = master_status(conn)
        finally:
            conn.close()
        now = time.monotonic()
        if not seen or seen[-1][0] != head:
            seen.append((head, now))
        return (writer.file, writer.pos) == head and now - seen[-1][1] >= 1.0

    wait_until(done, timeout=60, what="the relay to reach the binlog head")
    assert writer.error is None, writer.error


def _workload(db: LocalMariaDB, database: str, seconds: float, rotations: int) -> None:
    stop = threading.Event()

    def rotate() -> None:
        for _ in range(rotations):
            if stop.wait(seconds / (rotations + 1)):
                return
            db.execute("FLUSH BINARY LOGS")

    t = threading.Thread(target=rotate)
    t.start()
    try:
        stats = run_random(
            db, seed=SEED, seconds=seconds, connections=3, database=database, log=lambda _: None
        )
    finally:
        stop.set()
        t.join()
    assert not stats.unexpected, stats.summary()
    assert stats.committed > 100, stats.summary()


def test_from_every_sampled_start_the_relay_sends_what_the_server_sends(
    upstream_db: LocalMariaDB, tmp_path: Path
) -> None:
    up = UpstreamConfig.from_uri(upstream_db.uri)
    before = head_offset(up)  # before the relay: a start there is not in it
    upstream_db.execute("CREATE DATABASE IF NOT EXISTS early", "CREATE TABLE early.t (id INT PRIMARY KEY)")
    upstream_db.execute("INSERT INTO early.t VALUES (1), (2)")
    directory = tmp_path / relay_key(up)
    writer = RelayWriter(up, directory, heartbeat_s=HEARTBEAT_S, backfill_bytes=0).start()
    try:
        assert writer.started.wait(30), writer.error
        first = Offset(writer.file or "", writer.pos, 0)
        assert first.key() > before.key()
        _workload(upstream_db, "relay_rw", seconds=6, rotations=3)
        _caught_up(writer, up)
        assert writer.error is None

        boundaries = [t.end for t in Scanner(up).scan(first)]
        files = sorted({o.file for o in boundaries})
        assert len(files) >= 3, files
        rng = random.Random(SEED)
        starts = [(first.file, first.pos)] + [(f, 4) for f in files[1:]]
        starts += [(o.file, o.pos) for o in rng.sample(boundaries, min(40, len(boundaries)))]
        for file, pos in starts:
            want = _server(up, file, pos)
            got, relayed = _relay(directory, up, file, pos)
            assert want[-1].type == P.HEARTBEAT_EVENT
            assert got == want, f"start {file}:{pos}: the relay's events differ from the server's"
            positioned = sum(1 for ev in want if ev.log_pos and ev.type != P.HEARTBEAT_EVENT)
            assert relayed == positioned, (
                f"start {file}:{pos}: {relayed} of {positioned} events came from the relay"
            )

        # The planner's scan to the head: the same transactions from the relay as from the server.
        conn = up.connect()
        try:
            head = master_status(conn)
        finally:
            conn.close()
        relayed_scan = Scanner(up, relay_dir=str(directory))
        for start in [first, *rng.sample(boundaries, 10)]:
            want_txns = list(Scanner(up).scan(start))
            assert list(relayed_scan.scan(start, until=head)) == want_txns, f"scan from {start}"

        # A start before the relay's first position is read from the upstream, with the same events.
        got, relayed = _relay(directory, up, before.file, before.pos)
        assert relayed == 0
        assert got == _server(up, before.file, before.pos)
    finally:
        writer.stop()
    assert not directory.exists()


def test_a_reader_goes_on_from_the_upstream_where_a_stopped_relay_ends(
    upstream_db: LocalMariaDB, tmp_path: Path
) -> None:
    up = UpstreamConfig.from_uri(upstream_db.uri)
    directory = tmp_path / relay_key(up)
    writer = RelayWriter(up, directory, heartbeat_s=HEARTBEAT_S, backfill_bytes=0).start()
    try:
        assert writer.started.wait(30), writer.error
        start = (writer.file or "", writer.pos)
        upstream_db.execute(
            "CREATE DATABASE IF NOT EXISTS splice", "CREATE TABLE splice.t (id INT PRIMARY KEY, v TEXT)"
        )
        upstream_db.execute(
            *(f"INSERT INTO splice.t VALUES ({i}, REPEAT('x', {i * 10}))" for i in range(1, 30))
        )
        _caught_up(writer, up)

        reader = RelayStream(directory, up, *start, heartbeat_s=HEARTBEAT_S)
        events = reader.events()
        head = [next(events) for _ in range(10)]
        # The relay stops (its files stay, its liveness goes); more is written after it.
        writer.stop(remove=False)
        upstream_db.execute("FLUSH BINARY LOGS")
        upstream_db.execute(*(f"INSERT INTO splice.t VALUES ({i}, 'after')" for i in range(100, 120)))
        conn = up.connect()
        try:
            end = master_status(conn)  # the server may write a binlog checkpoint after: both stop here
        finally:
            conn.close()
        got = [ev for ev in head if ev.type != P.HEARTBEAT_EVENT] + _until_position(events, *end)
        relayed = reader.relayed
        reader.close()
        with BinlogStream(up, *start, blocking=True, heartbeat_s=HEARTBEAT_S) as s:
            want = _until_position(s.events(), *end)
        assert got == want
        positioned = sum(1 for ev in want if ev.log_pos)
        assert 10 <= relayed < positioned, (relayed, positioned)
    finally:
        writer.stop()


def test_the_relay_keeps_at_most_its_bound_and_a_start_it_dropped_reads_the_upstream(
    upstream_db: LocalMariaDB, tmp_path: Path
) -> None:
    up = UpstreamConfig.from_uri(upstream_db.uri)
    directory = tmp_path / relay_key(up)
    writer = RelayWriter(up, directory, heartbeat_s=HEARTBEAT_S, max_bytes=64 << 10, backfill_bytes=0).start()
    try:
        assert writer.started.wait(30), writer.error
        first = (writer.file or "", writer.pos)
        upstream_db.execute(
            "CREATE DATABASE IF NOT EXISTS bound", "CREATE TABLE bound.t (id INT PRIMARY KEY, v LONGBLOB)"
        )
        noise = "CONCAT(" + ", ".join(["RANDOM_BYTES(1024)"] * 4) + ")"  # 4 KB that do not compress
        for n in range(6):
            upstream_db.execute(
                *(f"INSERT INTO bound.t VALUES ({n * 100 + i}, {noise})" for i in range(10)),
                "FLUSH BINARY LOGS",
            )
        _caught_up(writer, up)
        relayed_files = sorted(p.stem for p in directory.glob("*.relay"))
        sizes = [(directory / f"{name}.relay").stat().st_size for name in relayed_files]
        assert first[0] not in relayed_files  # dropped
        assert sum(sizes[:-1]) <= 64 << 10 or len(sizes) == 1, sizes

        got, relayed = _relay(directory, up, *first)
        assert relayed == 0  # its file is gone from the relay
        assert got == _server(up, *first)
        kept = relayed_files[-2]
        got, relayed = _relay(directory, up, kept, 4)
        assert relayed > 0
        assert got == _server(up, kept, 4)
    finally:
        writer.stop()


def test_a_new_relay_starts_with_the_recent_binlog_files_a_changefeed_may_start_in(
    upstream_db: LocalMariaDB, tmp_path: Path
) -> None:
    up = UpstreamConfig.from_uri(upstream_db.uri)
    upstream_db.execute("FLUSH BINARY LOGS")
    upstream_db.execute("CREATE DATABASE IF NOT EXISTS recent", "CREATE TABLE recent.t (id INT PRIMARY KEY)")
    conn = up.connect()
    try:
        before = master_status(conn)  # a changefeed created now starts here
    finally:
        conn.close()
    upstream_db.execute("INSERT INTO recent.t VALUES (1), (2)")
    directory = tmp_path / relay_key(up)
    writer = RelayWriter(up, directory, heartbeat_s=HEARTBEAT_S, backfill_bytes=1 << 20).start()
    try:
        assert writer.started.wait(30), writer.error
        _caught_up(writer, up)
        assert (directory / f"{before[0]}.fde").exists()
        got, relayed = _relay(directory, up, *before)
        assert relayed > 0
        assert got == _server(up, *before)
    finally:
        writer.stop()


def test_a_hub_keeps_one_relay_per_upstream_while_a_changefeed_holds_it(
    upstream_db: LocalMariaDB, tmp_path: Path
) -> None:
    hub = RelayHub(tmp_path / "relays")
    try:
        first = hub.acquire(upstream_db.uri)
        assert hub.acquire(upstream_db.uri) == first  # the second changefeed shares it
        assert hub.users(upstream_db.uri) == 2
        wait_until(lambda: (Path(first) / "alive").exists(), timeout=30, what="the relay following")
        hub.release(upstream_db.uri)
        assert (Path(first) / "alive").exists()  # one changefeed still holds it
        hub.release(upstream_db.uri)
        assert hub.users(upstream_db.uri) == 0
        assert not Path(first).exists()  # stopped with the last one
    finally:
        hub.close()
