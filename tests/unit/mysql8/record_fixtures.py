"""Re-records tests/fixtures/mysql8/: ``python -m tests.unit.mysql8.record_fixtures`` (from the repository root).

- ``mariadb_txn.events``: the TABLE_MAP, ROWS and XID events of one transaction, as a local MariaDB
  (the same server the integration tests start, ``binlog_row_metadata=FULL``) streamed them,
  checksums stripped, back to back with their 19-byte headers and real log_pos;
- ``json_documents.jsonl``: binary JSON documents made by ``jsonb_encode`` (the encoder written from
  json_binary.cc) with the text MySQL's printing rules give them, pinned so a change of either the
  encoder or the decoder shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkcdc.capture import protocol as P
from sparkcdc.capture.jsonbinary import decode_json_binary
from sparkcdc.capture.protocol import BinlogStream
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.services.mariadb import LocalMariaDB
from tests.unit.mysql8 import jsonb_encode as E
from tests.unit.mysql8.mysqlwire import HEADER

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mysql8"

TABLE = """CREATE TABLE m8.orders (
  id INT PRIMARY KEY,
  amount DECIMAL(10,2) NOT NULL,
  qty BIGINT UNSIGNED,
  note VARCHAR(64) CHARACTER SET utf8mb4,
  created DATETIME(6),
  state ENUM('new','paid','gone'),
  doc JSON,
  raw BLOB
)"""

TXN = [
    "BEGIN",
    "INSERT INTO m8.orders VALUES "
    "(1, 12.50, 3, 'café', '2024-02-29 23:59:59.123456', 'new', '{\"a\": [1, 2]}', x'00ff'),"
    "(2, -0.01, 18446744073709551615, '漢字😀', '1999-01-01 00:00:00.000000', 'paid', NULL, NULL),"
    "(3, 99999999.99, 0, '', NULL, NULL, '[]', x'')",
    "UPDATE m8.orders SET amount = amount + 1, state = 'paid' WHERE id = 1",
    "DELETE FROM m8.orders WHERE id = 3",
    "COMMIT",
]

JSON_DOCUMENTS: list[Any] = [
    {"b": 1, "a": [True, False, None], "aa": {"x": 1.5}},
    [0.1, 1e20, 1e-7, -0.0, 100.0, 2**63 - 1, -(2**63), 2**64 - 1],
    'tab\there "quoted" \\ é 中 😀 \x01',
    [E.decimal_opaque("-123.4500", 10, 4), E.Opaque(10, E.packed_datetime(2024, 2, 29))],
    [
        E.Opaque(12, E.packed_datetime(2024, 2, 29, 23, 59, 59, 123456)),
        E.Opaque(11, E.packed_time(100, 0, 1, 5, True)),
    ],
    {"blob": E.Opaque(252, bytes(range(70))), "bit": E.Opaque(16, b"\x80")},
    {f"k{i}": i for i in range(20)},
]


def record_txn() -> None:
    with LocalMariaDB() as db:
        db.execute("CREATE DATABASE m8", TABLE)
        file, pos = db.query("SHOW MASTER STATUS")[0][:2]
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                for sql in TXN:
                    cur.execute(sql)
        finally:
            conn.close()
        up = UpstreamConfig.from_uri(db.uri)
        out = bytearray()
        with BinlogStream(up, str(file), int(pos), blocking=False) as s:
            for ev in s.events():
                if ev.log_pos and ev.type in (P.TABLE_MAP_EVENT, P.XID_EVENT, *P.ROWS_EVENTS):
                    size = P.HEADER_LEN + len(ev.body)
                    out += (
                        HEADER.pack(ev.timestamp, ev.type, ev.server_id, size, ev.log_pos, ev.flags) + ev.body
                    )
    (FIXTURES / "mariadb_txn.events").write_bytes(bytes(out))


def record_json() -> None:
    with (FIXTURES / "json_documents.jsonl").open("w") as f:
        for doc in JSON_DOCUMENTS:
            raw = E.encode(doc)
            f.write(
                json.dumps({"hex": raw.hex(), "text": decode_json_binary(raw)}, ensure_ascii=False) + "\n"
            )


if __name__ == "__main__":
    FIXTURES.mkdir(parents=True, exist_ok=True)
    record_txn()
    record_json()
    print(f"recorded into {FIXTURES}")
