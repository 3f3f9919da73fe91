"""The session sql_mode of a QUERY event (status variable Q_SQL_MODE), named for ``SET sql_mode``.

The live servers' events go through the oracle (form ``ddl_sql_mode``); here the layout and names.
"""

from __future__ import annotations

import struct

import pytest

from sparkcdc.capture.txnstream import QueryStatus, parse_query, query_status, sql_mode_names
from sparkcdc.errors import DecodeError


def query_body(status: bytes, db: bytes = b"db", query: bytes = b"ALTER TABLE t ADD c INT") -> bytes:
    return struct.pack("<IIBHH", 7, 0, len(db), 0, len(status)) + status + db + b"\x00" + query


def test_flags2_then_sql_mode() -> None:
    mode = (1 << 19) | (1 << 21) | (1 << 30)
    body = query_body(
        b"\x00" + struct.pack("<I", 0) + b"\x01" + struct.pack("<Q", mode) + b"\x04" + b"\x00" * 6
    )
    assert query_status(body).sql_mode == mode
    assert (
        sql_mode_names(mode, mariadb=True)
        == "NO_AUTO_VALUE_ON_ZERO,STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"
    )


def test_no_status_variables_or_another_first() -> None:
    assert query_status(query_body(b"")).sql_mode is None
    assert query_status(query_body(b"\x04" + b"\x00" * 6)).sql_mode is None


def test_the_high_bits_differ_between_mariadb_and_mysql() -> None:
    assert sql_mode_names(1 << 32, mariadb=True) == "EMPTY_STRING_IS_NULL"
    assert sql_mode_names(1 << 32, mariadb=False) == "TIME_TRUNCATE_FRACTIONAL"
    assert sql_mode_names(0, mariadb=True) == ""
    # A newer server's flag sparkcdc has no name for is left out (and logged).
    assert sql_mode_names((1 << 40) | 1, mariadb=True) == "REAL_AS_FLOAT"


def _charset(client: int, connection: int = 8, server: int = 8) -> bytes:
    return b"\x04" + struct.pack("<HHH", client, connection, server)


def test_the_walk_passes_the_catalog_and_auto_increment_to_the_client_charset() -> None:
    # MariaDB 10.11's order: FLAGS2, SQL_MODE, CATALOG_NZ ("std"), AUTO_INCREMENT, CHARSET, TIME_ZONE
    status = (
        b"\x00"
        + struct.pack("<I", 0)
        + b"\x01"
        + struct.pack("<Q", 1 << 19)
        + b"\x06\x03std"
        + b"\x03"
        + struct.pack("<HH", 2, 1)
        + _charset(12)  # ujis_japanese_ci
        + b"\x05\x06+00:00"
    )
    st = query_status(query_body(status))
    assert (st.sql_mode, st.charset_client, st.collation_connection) == (1 << 19, 12, 8)
    assert query_status(query_body(b"\x00" + struct.pack("<I", 0) + b"\xfe\x01\x02" + _charset(12))) == (
        QueryStatus(None, None)  # a variable of unknown size stops the walk
    )


def test_the_text_is_read_in_the_client_charset() -> None:
    ddl = "ALTER TABLE t ADD c ENUM('あ','い') COMMENT 'ü'"
    ujis = query_body(_charset(12), query=ddl.encode("euc_jp"))
    assert parse_query(ujis) == ("db", ddl)
    latin1 = query_body(_charset(8), query="INSERT INTO t VALUES ('€ü')".encode("cp1252"))
    assert parse_query(latin1)[1] == "INSERT INTO t VALUES ('€ü')"
    # no charset recorded, binary or UTF-8: read as UTF-8 (bytes that are not UTF-8 kept as they were)
    assert parse_query(query_body(b"", query=ddl.encode()))[1] == ddl
    assert parse_query(query_body(_charset(63), query=ddl.encode()))[1] == ddl
    # a charset without a codec: ASCII text reads the same, other text is refused by name
    assert parse_query(query_body(_charset(3), query=b"DROP TABLE t"))[1] == "DROP TABLE t"
    with pytest.raises(DecodeError, match="a statement sent in client character set dec8"):
        parse_query(query_body(_charset(3), query=b"DROP TABLE t /* \xe9 */"))
