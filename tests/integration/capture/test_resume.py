"""Resume: a reader restarted from its last Offset continues with no loss or duplication."""

from __future__ import annotations

import json
import time

import pytest

from sparkcdc.capture.offset import Offset, file_seq
from sparkcdc.capture.reader import RowReader
from sparkcdc.capture.start import head_offset, offset_for_position
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import ConfigError
from sparkcdc.model import RowChange
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _key(r: RowChange) -> tuple[object, ...]:
    return (r.op, r.schema, r.table, r.commit_ts, r.seq, r.before, r.after)


def _write_workload(db: LocalMariaDB, schema: str, rotate_at: int | None = None) -> None:
    """Transactions of 1..6 row changes (inserts, updates, deletes) on two tables."""
    conn = db.connect(schema)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(30), d DECIMAL(10,2))")
        cur.execute("CREATE TABLE b (id BIGINT PRIMARY KEY, n INT)")
        for t in range(1, 31):
            cur.execute("BEGIN")
            for k in range(t % 4 + 1):
                cur.execute(f"INSERT INTO a VALUES ({t * 10 + k}, 'v{t}-{k}', {t}.{k:02d})")
            if t > 1:
                cur.execute(f"UPDATE a SET v = 'u{t}' WHERE id = {(t - 1) * 10}")
                cur.execute(f"INSERT INTO b VALUES ({t}, {t}) ON DUPLICATE KEY UPDATE n = n + 1")
            if t > 3:
                cur.execute(f"DELETE FROM b WHERE id = {t - 2}")
            cur.execute("COMMIT")
            if rotate_at is not None and t == rotate_at:
                cur.execute("FLUSH BINARY LOGS")
    conn.close()


def _full(
    up: UpstreamConfig, start: Offset, end: Offset, schema: str
) -> tuple[list[RowChange], list[Offset]]:
    rows: list[RowChange] = []
    offsets: list[Offset] = []
    for ev in RowReader(up, start, end).events():
        if isinstance(ev, RowChange):
            if ev.schema == schema:
                rows.append(ev)
        else:
            offsets.append(ev)
    return rows, offsets


def _read_until(
    up: UpstreamConfig, start: Offset, end: Offset, schema: str, stop_after_rows: int
) -> tuple[list[RowChange], Offset]:
    """A consumer that commits rows at each boundary and dies after ``stop_after_rows`` rows (mid-transaction)."""
    committed: list[RowChange] = []
    pending: list[RowChange] = []
    checkpoint = start
    seen = 0
    for ev in RowReader(up, start, end).events():
        if isinstance(ev, Offset):
            committed.extend(pending)
            pending = []
            checkpoint = ev
            continue
        if ev.schema != schema:
            continue
        pending.append(ev)
        seen += 1
        if seen >= stop_after_rows:
            break  # the pending rows of the unfinished transaction are lost with the process
    return committed, checkpoint


def test_resume_from_the_last_offset_has_no_loss_or_duplication(mariadb: LocalMariaDB, fresh_db: str) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    start = head_offset(up)
    _write_workload(mariadb, fresh_db, rotate_at=17)
    end = head_offset(up)
    full, _ = _full(up, start, end, fresh_db)
    assert len(full) > 100
    assert len({r.position.file for r in full if r.position}) == 2, "the workload spans a rotation"

    for cut in (1, len(full) // 3, len(full) // 2, len(full) - 1):
        first, checkpoint = _read_until(up, start, end, fresh_db, cut)
        # The checkpoint survives a process restart as JSON.
        restored = Offset.from_json(json.loads(json.dumps(checkpoint.to_json())))
        assert restored == checkpoint
        rest, _ = _full(up, restored, end, fresh_db)
        assert [_key(r) for r in first + rest] == [_key(r) for r in full], f"resume after {cut} rows"
        assert len(first) < cut, "the rows of the unfinished transaction were not committed"


def test_offset_for_position_round_trips_every_boundary(mariadb: LocalMariaDB, fresh_db: str) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    # a file of its own: each lookup reads its file from the start, and the session's current file
    # holds whatever the tests before this one wrote
    mariadb.execute("FLUSH BINARY LOGS")
    start = head_offset(up)
    _write_workload(mariadb, fresh_db, rotate_at=10)
    end = head_offset(up)
    full, offsets = _full(up, start, end, fresh_db)
    assert len({o.file for o in offsets}) == 2
    for o in offsets:
        got = offset_for_position(up, o.file, o.pos)
        assert got == o, f"offset_for_position({o.file}, {o.pos}) = {got}, the reader saw {o}"
        rest, _ = _full(up, got, end, fresh_db)
        after = [r for r in full if r.position and (file_seq(r.position.file), r.position.pos) >= o.key()]
        assert [_key(r) for r in rest] == [_key(r) for r in after]


def test_a_position_inside_a_transaction_is_refused(mariadb: LocalMariaDB, fresh_db: str) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    start = head_offset(up)
    _write_workload(mariadb, fresh_db)
    end = head_offset(up)
    full, _ = _full(up, start, end, fresh_db)
    # The end of a table-map event of our last transaction is inside it, not a boundary.
    inside = [
        int(r[4])
        for r in mariadb.query(
            f"SHOW BINLOG EVENTS IN '{end.file}' FROM {start.pos if start.file == end.file else 4}"
        )
        if r[2] == "Table_map"
    ]
    assert inside
    for pos in (inside[-1], full[-1].position.pos + 1 if full[-1].position else 5):
        with pytest.raises(ConfigError, match=r"not a transaction boundary.*SHOW MASTER STATUS"):
            offset_for_position(up, end.file, pos)


@pytest.mark.timeout(60)
def test_a_read_up_to_a_head_after_a_rotation_stops(mariadb: LocalMariaDB, fresh_db: str) -> None:
    """The head can sit after non-transaction events (a new file's header, a binlog checkpoint)."""
    up = UpstreamConfig.from_uri(mariadb.uri)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY)")
    start = head_offset(up)
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1)", "FLUSH BINARY LOGS")
    end = head_offset(up)
    assert end.file != start.file and end.ts == offset_for_position(up, end.file, 4).ts
    t0 = time.monotonic()
    rows, offsets = _full(up, start, end, fresh_db)  # a blocking reader: it must stop at `end`
    assert time.monotonic() - t0 < 10
    assert [r.after for r in rows] == [(1,)]
    # A binlog checkpoint event may land after `end` was taken; the reader stops at the first idle point >= end.
    assert offsets[-1].key() >= end.key() and offsets[-1].ts == end.ts
