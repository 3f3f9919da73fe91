"""commit_ts: strictly increasing in commit order, shared by a transaction, the commit second, replay-stable."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from sparkcdc.capture.offset import Offset, file_seq
from sparkcdc.capture.reader import RowReader
from sparkcdc.capture.start import head_offset, offset_for_position, offset_for_ts, query_tso
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model import RowChange
from sparkcdc.model.ts import physical_ms
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _up(db: LocalMariaDB) -> UpstreamConfig:
    return UpstreamConfig.from_uri(db.uri)


def _read(
    up: UpstreamConfig, start: Offset, end: Offset, schema: str
) -> tuple[list[RowChange], list[Offset]]:
    """Rows of ``schema`` and every boundary Offset in ``[start, end)``."""
    rows: list[RowChange] = []
    offsets: list[Offset] = []
    for ev in RowReader(up, start, end).events():
        if isinstance(ev, RowChange):
            if ev.schema == schema:
                rows.append(ev)
        else:
            offsets.append(ev)
    return rows, offsets


def _key(r: RowChange) -> tuple[object, ...]:
    return (r.op, r.table, r.commit_ts, r.seq, r.before, r.after)


def _txn_of(r: RowChange) -> int:
    img = r.after if r.after is not None else r.before
    assert img is not None
    return int(img[1])  # column `txn`: the number of the transaction that wrote the row


def _same_second(
    action: Callable[[], None], attempts: int = 5, prepare: Callable[[], None] | None = None
) -> tuple[float, float]:
    """Run ``action`` starting right after a whole second until it finishes inside that second."""
    for _ in range(attempts):
        if prepare is not None:
            prepare()
        now = time.time()
        time.sleep(1.02 - (now % 1.0))  # align to just after a second boundary, not a readiness wait
        t0 = time.time()
        action()
        t1 = time.time()
        if int(t0) == int(t1):
            return t0, t1
    raise AssertionError(f"could not run the action within one wall-clock second in {attempts} attempts")


def test_commit_ts_increases_per_transaction_shared_by_its_rows_and_in_the_commit_second(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    up = _up(mariadb)
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.a (id INT PRIMARY KEY, txn INT, v VARCHAR(20))",
        f"CREATE TABLE `{fresh_db}`.b (id INT PRIMARY KEY, txn INT)",
    )
    start = head_offset(up)
    conn = mariadb.connect(fresh_db)
    windows: dict[int, tuple[float, float]] = {}
    with conn.cursor() as cur:
        for txn in range(1, 25):
            t0 = time.time()
            if txn % 3 == 0:
                cur.execute(f"INSERT INTO a VALUES ({txn * 100}, {txn}, 'auto')")  # autocommit
            else:
                cur.execute("BEGIN")
                for k in range(txn % 5 + 1):
                    cur.execute(f"INSERT INTO a VALUES ({txn * 100 + k + 1}, {txn}, 'x')")
                cur.execute(f"INSERT INTO b (id, txn) VALUES ({txn}, {txn})")
                if txn > 2:
                    cur.execute(f"UPDATE a SET txn = {txn}, v = 'upd' WHERE id = {(txn - 1) * 100 + 1}")
                    cur.execute(f"DELETE FROM b WHERE id = {txn - 2}")
                cur.execute("COMMIT")
            windows[txn] = (t0, time.time())
            if txn == 12:
                cur.execute("ALTER TABLE b ADD COLUMN extra INT NULL")
    conn.close()
    end = head_offset(up)
    rows, offsets = _read(up, start, end, fresh_db)

    by_txn: dict[int, set[int]] = defaultdict(set)
    by_position: dict[object, set[int]] = defaultdict(set)
    for r in rows:
        by_position[r.position].add(r.commit_ts)
        if r.op != "D":  # a delete's image names the transaction that wrote the row, not this one
            by_txn[_txn_of(r)].add(r.commit_ts)
    assert len(by_position) == 24 and all(len(v) == 1 for v in by_position.values())
    assert sorted(by_txn) == list(range(1, 25)), "every transaction delivered rows"
    for txn, tss in by_txn.items():
        assert len(tss) == 1, f"rows of transaction {txn} carry different commit_ts {sorted(tss)}"
    ordered = [next(iter(by_txn[t])) for t in range(1, 25)]
    assert all(a < b for a, b in itertools.pairwise(ordered)), (
        f"commit_ts not strictly increasing in commit order: {ordered}"
    )
    for txn, (t0, t1) in windows.items():
        sec = physical_ms(ordered[txn - 1]) // 1000
        assert int(t0) <= sec <= int(t1), f"txn {txn}: commit_ts second {sec} outside [{t0}, {t1}]"
    # The stream order is the commit order, and the Offsets' chain state follows the rows.
    assert [r.commit_ts for r in rows] == sorted(r.commit_ts for r in rows)
    assert [o.ts for o in offsets] == sorted(o.ts for o in offsets)
    assert offsets[-1] == end

    # Replay from the start and from every boundary gives identical commit_ts.
    again, _ = _read(up, start, end, fresh_db)
    assert [_key(r) for r in again] == [_key(r) for r in rows]
    for o in offsets[:-1]:
        tail, _ = _read(up, o, end, fresh_db)
        expected = [_key(r) for r in rows if r.commit_ts > o.ts]
        assert [_key(r) for r in tail] == expected, f"replay from boundary {o} differs from the full read"


def test_commit_ts_across_a_binlog_rotation(mariadb: LocalMariaDB, fresh_db: str) -> None:
    up = _up(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, txn INT)")
    start = head_offset(up)
    for i in range(1, 6):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES ({i}, {i})")
    old_file = head_offset(up).file
    # This test is about an ordinary rotation: the old file must have been created in an earlier
    # second (two files created in one second are the next test's case).
    created_s = physical_ms(offset_for_position(up, old_file, 4).ts) // 1000
    wait_until(lambda: time.time() >= created_s + 1, timeout=5, what="a second after the file was created")
    mariadb.execute("FLUSH BINARY LOGS")
    new_file = head_offset(up).file
    assert new_file != old_file
    for i in range(6, 11):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES ({i}, {i})")
    end = head_offset(up)
    rows, offsets = _read(up, start, end, fresh_db)
    assert [_txn_of(r) for r in rows] == list(range(1, 11))
    tss = [r.commit_ts for r in rows]
    assert all(a < b for a, b in itertools.pairwise(tss)), f"not increasing across the rotation: {tss}"
    assert {r.position.file for r in rows if r.position} == {old_file, new_file}

    # Starting at the new file's start computes the same chain as reading across the rotation.
    file_start = offset_for_position(up, new_file, 4)
    tail, _ = _read(up, file_start, end, fresh_db)
    assert [_key(r) for r in tail] == [_key(r) for r in rows if r.position and r.position.file == new_file]
    # And from the last boundary of the old file.
    last_old = [o for o in offsets if o.file == old_file][-1]
    tail2, _ = _read(up, last_old, end, fresh_db)
    assert [_key(r) for r in tail2] == [_key(r) for r in rows[5:]]


def test_commit_ts_increases_across_two_rotations_in_one_second(mariadb: LocalMariaDB, fresh_db: str) -> None:
    """Two binlog files created in the same second, with transactions in both, still order by commit_ts."""
    up = _up(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, txn INT)")
    start = head_offset(up)
    conn = mariadb.connect(fresh_db)
    n = [0]

    def burst() -> None:
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")
            for _ in range(3):
                n[0] += 1
                cur.execute(f"INSERT INTO t VALUES ({n[0]}, {n[0]})")
            cur.execute("FLUSH BINARY LOGS")
            for _ in range(3):
                n[0] += 1
                cur.execute(f"INSERT INTO t VALUES ({n[0]}, {n[0]})")

    try:
        _same_second(burst)
    finally:
        conn.close()
    rows, _ = _read(up, start, head_offset(up), fresh_db)
    rows = [r for r in rows if _txn_of(r) > n[0] - 6]  # the burst that fit in one second
    tss = [r.commit_ts for r in rows]
    assert len(tss) == 6
    assert all(a < b for a, b in itertools.pairwise(tss)), (
        f"commit_ts repeats or decreases when two binlog files start in the same second: {tss}"
    )


def test_commit_ts_increases_across_two_rotations_in_one_second_at_any_file_number(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    """The same, with the second rotation's file number at a multiple of 32 (mysql-bin.000032, ...)."""
    up = _up(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, txn INT)")
    start = head_offset(up)

    def to_file_30() -> None:
        for _ in range(40):
            if file_seq(head_offset(up).file) % 32 == 30:
                return
            mariadb.execute("FLUSH BINARY LOGS")
        raise AssertionError("FLUSH BINARY LOGS did not reach a file number 30 (mod 32)")

    conn = mariadb.connect(fresh_db)
    n = [0]

    def burst() -> None:
        with conn.cursor() as cur:
            cur.execute("FLUSH BINARY LOGS")  # file number 31 (mod 32)
            for _ in range(3):
                n[0] += 1
                cur.execute(f"INSERT INTO t VALUES ({n[0]}, {n[0]})")
            cur.execute("FLUSH BINARY LOGS")  # file number 0 (mod 32)
            for _ in range(3):
                n[0] += 1
                cur.execute(f"INSERT INTO t VALUES ({n[0]}, {n[0]})")

    try:
        _same_second(burst, attempts=3, prepare=to_file_30)
    finally:
        conn.close()
    rows, _ = _read(up, start, head_offset(up), fresh_db)
    rows = [r for r in rows if _txn_of(r) > n[0] - 6]  # the burst that fit in one second
    assert {file_seq(r.position.file) % 32 for r in rows if r.position} == {31, 0}
    tss = [r.commit_ts for r in rows]
    assert len(tss) == 6
    assert all(a < b for a, b in itertools.pairwise(tss)), (
        f"commit_ts repeats or decreases when two binlog files start in the same second: {tss}"
    )


def test_query_tso_is_below_every_later_transaction_in_the_same_second(
    mariadb: LocalMariaDB, fresh_db: str
) -> None:
    up = _up(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, txn INT)")
    # query_tso scans the current binlog file; a fresh file keeps the burst well inside one second.
    mariadb.execute("FLUSH BINARY LOGS")
    start = head_offset(up)
    conn = mariadb.connect(fresh_db)
    tso: list[int] = []
    n = [0]

    def burst() -> None:
        with conn.cursor() as cur:
            for _ in range(5):
                n[0] += 1
                cur.execute(f"INSERT INTO t VALUES ({n[0]}, 0)")
            tso.append(query_tso(up))
            for _ in range(20):
                n[0] += 1
                cur.execute(f"INSERT INTO t VALUES ({n[0]}, 1)")

    try:
        t0, _t1 = _same_second(burst, attempts=8)
    finally:
        conn.close()
    ts = tso[-1]
    end = head_offset(up)
    rows, _ = _read(up, start, end, fresh_db)
    last = [r for r in rows if r.after is not None and r.after[0] > n[0] - 25]
    before = [r for r in last if r.after is not None and r.after[1] == 0]
    after = [r for r in last if r.after is not None and r.after[1] == 1]
    assert len(before) == 5 and len(after) == 20
    # The boundary really is inside one second: the tso and the later commits share it.
    assert physical_ms(ts) // 1000 == int(t0)
    assert {physical_ms(r.commit_ts) // 1000 for r in after} == {int(t0)}
    assert all(r.commit_ts <= ts for r in before)
    assert all(r.commit_ts > ts for r in after), f"a transaction after tso {ts} got a commit_ts <= it"

    # offset_for_ts(ts): exactly the transactions with commit_ts > ts follow the returned boundary.
    probes = {ts, start.ts, rows[0].commit_ts - 1}
    for r in rows[:: max(1, len(rows) // 8)]:
        probes.update({r.commit_ts, r.commit_ts - 1})
    for probe in sorted(probes):
        off = offset_for_ts(up, probe)
        tail, _ = _read(up, off, end, fresh_db)
        assert [_key(r) for r in tail] == [_key(r) for r in rows if r.commit_ts > probe], (
            f"offset_for_ts({probe}) = {off} does not start right after the transactions <= {probe}"
        )
    assert offset_for_ts(up, rows[-1].commit_ts).ts == rows[-1].commit_ts


def test_cli_tso_query_prints_an_int_below_later_commits(mariadb: LocalMariaDB, fresh_db: str) -> None:
    up = _up(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.t (id INT PRIMARY KEY, txn INT)")
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (1, 0)")
    head = head_offset(up)
    res = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "cli", "tso", "query", "--upstream-uri", mariadb.uri],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    printed = int(res.stdout.strip())
    assert printed >= head.ts
    mariadb.execute(f"INSERT INTO `{fresh_db}`.t VALUES (2, 1)")
    rows, _ = _read(up, head, head_offset(up), fresh_db)
    assert [r.after for r in rows] == [(2, 1)]
    assert rows[0].commit_ts > printed
