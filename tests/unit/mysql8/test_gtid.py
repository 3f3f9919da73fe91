"""--start-gtid: MySQL GTID sets parsed, normalised and encoded for COM_BINLOG_DUMP_GTID; MariaDB positions kept."""

from __future__ import annotations

import struct
import uuid

import pytest
from pymysqlreplication.gtid import GtidSet as OracleGtidSet

from sparkcdc.capture import protocol as P
from sparkcdc.capture.gtid import (
    MysqlGtidSet,
    parse_mysql_gtid_event,
    parse_mysql_gtid_set,
    parse_start_gtid,
)
from sparkcdc.capture.protocol import BinlogStream
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import ConfigError

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "ab11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize(
    "text",
    [
        f"{A}:1-5:7",
        f"{A.upper()}:1-5:7,{B}:3",
        f"{A}:1-100",
        f"{B}:1-3:5-9:11,\n{A}:1-2",
    ],
)
def test_encoding_matches_python_mysql_replication(text: str) -> None:
    ours = parse_mysql_gtid_set(text)
    oracle = OracleGtidSet(text.replace("\n", ""))
    # the oracle keeps the UUIDs in the given order, MySQL (and we) sort them
    assert sorted(_split(ours.encode())) == sorted(_split(oracle.encoded()))


def _split(raw: bytes) -> list[bytes]:
    n = struct.unpack_from("<Q", raw, 0)[0]
    p = 8
    out = []
    for _ in range(n):
        k = struct.unpack_from("<Q", raw, p + 16)[0]
        size = 16 + 8 + 16 * k
        out.append(raw[p : p + size])
        p += size
    assert p == len(raw)
    return out


def test_intervals_are_merged_and_printed_like_mysql() -> None:
    s = parse_mysql_gtid_set(f"{B}:7, {A}:5-9:1-3:4 ,{A}:11-12:10")
    assert str(s) == f"{A}:1-12,{B}:7"
    assert s.contains(uuid.UUID(A), 12) and not s.contains(uuid.UUID(A), 13)
    assert not s.contains(uuid.UUID(B), 6)
    # gtid_executed prints newlines after the commas
    assert parse_mysql_gtid_set(f"{A}:1-5,\n{B}:1-2") == parse_mysql_gtid_set(f"{B}:1-2,{A}:1-5")


def test_start_gtid_accepts_both_flavours() -> None:
    assert parse_start_gtid("0-1-1234") == "0-1-1234"
    assert parse_start_gtid(" 0-1-5,1-2-7 ") == "0-1-5,1-2-7"
    got = parse_start_gtid(f"{A}:1-100")
    assert isinstance(got, MysqlGtidSet) and str(got) == f"{A}:1-100"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("", "empty|DOMAIN-SERVER-SEQ"),
        ("12345", "DOMAIN-SERVER-SEQ.*UUID:FIRST-LAST"),
        ("not-a-uuid:1-5", "'not-a-uuid' is not a server UUID"),
        (f"{A}", "DOMAIN-SERVER-SEQ"),
        (f"{A}:", "'' is not an interval"),
        (f"{A}:5-1", "1 <= FIRST <= LAST"),
        (f"{A}:0-3", "1 <= FIRST <= LAST"),
        (f"{A}:1-x", "'1-x' is not an interval"),
        (f"{A}:mytag:1-5", "tagged GTIDs .* are not supported"),
    ],
)
def test_bad_gtids_name_the_value_and_the_shapes(text: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern) as exc:
        parse_start_gtid(text)
    assert repr(text) in str(exc.value) or not text


def test_dump_gtid_command_layout() -> None:
    up = UpstreamConfig("h", 3306, "u", "p")
    gset = parse_mysql_gtid_set(f"{A}:1-100")
    s = BinlogStream(up, "", 4, gtid=gset, blocking=False)
    cmd = s.dump_command()
    assert cmd[0] == P.COM_BINLOG_DUMP_GTID
    flags, server_id, name_len = struct.unpack_from("<HII", cmd, 1)
    assert flags == P.BINLOG_DUMP_NON_BLOCK | P.BINLOG_THROUGH_GTID
    assert server_id == s.server_id and name_len == 0
    pos, size = struct.unpack_from("<QI", cmd, 11)
    assert pos == 4 and size == len(gset.encode()) and cmd[23:] == gset.encode()
    # MariaDB positions and file:pos keep COM_BINLOG_DUMP
    assert BinlogStream(up, "", 4, gtid="0-1-5").dump_command()[0] == P.COM_BINLOG_DUMP
    plain = BinlogStream(up, "mysql-bin.000003", 1234).dump_command()
    assert plain[0] == P.COM_BINLOG_DUMP and plain.endswith(b"mysql-bin.000003")
    assert struct.unpack_from("<I", plain, 1)[0] == 1234


def test_gtid_event_text() -> None:
    body = b"\x01" + uuid.UUID(A).bytes + struct.pack("<q", 42) + b"\x02" + b"\x00" * 16
    assert parse_mysql_gtid_event(body) == f"{A}:42"


def test_a_mariadb_position_on_mysql_is_refused_with_the_mysql_shape() -> None:
    from sparkcdc.capture.start import offset_for_gtid
    from tests.unit.mysql8.fake_server import FakeMySQL8

    with FakeMySQL8(b"pw") as srv:
        up = UpstreamConfig.from_uri(f"mysql://cdc:pw@127.0.0.1:{srv.port}/")
        with pytest.raises(
            ConfigError, match=r"'0-1-5' is a MariaDB GTID position but upstream .* is MySQL 8\.4\.3"
        ):
            offset_for_gtid(up, "0-1-5")
