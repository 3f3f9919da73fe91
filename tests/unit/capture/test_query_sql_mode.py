"""The session sql_mode of a QUERY event (status variable Q_SQL_MODE), named for ``SET sql_mode``.

The live servers' events go through the oracle (form ``ddl_sql_mode``); here the layout and names.
"""

from __future__ import annotations

import struct

from sparkcdc.capture.txnstream import query_sql_mode, sql_mode_names


def query_body(status: bytes, db: bytes = b"db", query: bytes = b"ALTER TABLE t ADD c INT") -> bytes:
    return struct.pack("<IIBHH", 7, 0, len(db), 0, len(status)) + status + db + b"\x00" + query


def test_flags2_then_sql_mode() -> None:
    mode = (1 << 19) | (1 << 21) | (1 << 30)
    body = query_body(
        b"\x00" + struct.pack("<I", 0) + b"\x01" + struct.pack("<Q", mode) + b"\x04" + b"\x00" * 6
    )
    assert query_sql_mode(body) == mode
    assert (
        sql_mode_names(mode, mariadb=True)
        == "NO_AUTO_VALUE_ON_ZERO,STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"
    )


def test_no_status_variables_or_another_first() -> None:
    assert query_sql_mode(query_body(b"")) is None
    assert query_sql_mode(query_body(b"\x04" + b"\x00" * 6)) is None


def test_the_high_bits_differ_between_mariadb_and_mysql() -> None:
    assert sql_mode_names(1 << 32, mariadb=True) == "EMPTY_STRING_IS_NULL"
    assert sql_mode_names(1 << 32, mariadb=False) == "TIME_TRUNCATE_FRACTIONAL"
    assert sql_mode_names(0, mariadb=True) == ""
    # A newer server's flag sparkcdc has no name for is left out (and logged).
    assert sql_mode_names((1 << 40) | 1, mariadb=True) == "REAL_AS_FLOAT"
