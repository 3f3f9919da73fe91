"""Start points other than a ts: a binlog file:pos and a MariaDB GTID."""

from __future__ import annotations

import pytest

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import Scanner
from sparkcdc.capture.start import head_offset, offset_for_gtid, offset_for_position
from sparkcdc.services.mariadb import LocalMariaDB

from .helpers import read_all, upstream

pytestmark = pytest.mark.integration


def test_gtid_and_position_start_points_agree(mariadb: LocalMariaDB, fresh_db: str) -> None:
    up = upstream(mariadb)
    mariadb.execute(f"CREATE TABLE `{fresh_db}`.g (id INT PRIMARY KEY)")
    begin = head_offset(up)
    for i in range(5):
        mariadb.execute(f"INSERT INTO `{fresh_db}`.g VALUES ({i})")
    txns = list(Scanner(up).scan(begin))
    assert len(txns) == 5
    third = txns[2].end  # the boundary after the third insert
    [(gtid,)] = mariadb.query("SELECT BINLOG_GTID_POS(%s, %s)", (third.file, third.pos))
    by_gtid = offset_for_gtid(up, str(gtid))
    by_pos = offset_for_position(up, third.file, third.pos)
    assert by_gtid == by_pos == third
    rows = read_all(mariadb, by_gtid, fresh_db)
    assert [r.after for r in rows] == [(3,), (4,)]
    assert all(r.commit_ts > third.ts for r in rows)


def test_a_gtid_at_the_head_starts_at_the_head(mariadb: LocalMariaDB) -> None:
    up = upstream(mariadb)
    head = head_offset(up)
    [(gtid,)] = mariadb.query("SELECT @@GLOBAL.gtid_binlog_pos")
    got = offset_for_gtid(up, str(gtid))
    assert isinstance(got, Offset) and got.key() == head.key()
