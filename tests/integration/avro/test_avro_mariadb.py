"""Every MySQL type captured from a real MariaDB binlog, encoded as avro and decoded by confluent-kafka."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.start import head_offset
from sparkcdc.codec.avro import AvroDecoder, AvroEncoder, AvroOptions
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.registry.local import LocalSchemaRegistry
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.capture.helpers import upstream
from tests.integration.capture.test_types import COLUMNS, ROWS

pytestmark = pytest.mark.integration


def _expected(col: Any, v: Any, decimal: str, bigint: str) -> Any:
    if v is None:
        return None
    if col.type == "bigint" and col.unsigned:
        return str(v) if bigint == "string" else (v - 2**64 if v >= 2**63 else v)
    if col.type == "decimal":
        return v if decimal == "precise" else f"{v:.{col.scale or 0}f}"
    if col.type == "float":
        return struct.unpack("<f", struct.pack("<f", v))[0]
    if col.type == "bit":
        return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
    return v


def _capture(mariadb: LocalMariaDB, db: str) -> tuple[list[RowChange], TableInfo]:
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    mariadb.execute(f"CREATE TABLE `{db}`.all_types (id INT PRIMARY KEY, {cols})")
    up = upstream(mariadb)
    start = head_offset(up)
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        for i, row in enumerate(ROWS, start=1):
            cur.execute(f"INSERT INTO all_types VALUES ({i}, {', '.join(row)})")
        cur.execute("UPDATE all_types SET i = 7 WHERE id = 1")
        cur.execute("UPDATE all_types SET id = 10 WHERE id = 2")
        cur.execute("DELETE FROM all_types WHERE id = 3")
    conn.close()
    shapes = TableShapes()
    rows = [
        ev
        for ev in RowReader(up, start, head_offset(up), shapes=shapes, time_zone="UTC").events()
        if isinstance(ev, RowChange) and ev.schema == db
    ]
    return rows, shapes.last[(db, "all_types")]


@pytest.mark.parametrize(("decimal", "bigint"), [("precise", "long"), ("string", "string")])
def test_captured_rows_round_trip(mariadb: LocalMariaDB, fresh_db: str, decimal: str, bigint: str) -> None:
    rows, table = _capture(mariadb, fresh_db)
    assert [r.op for r in rows] == ["I", "I", "I", "U", "U", "D"]
    with LocalSchemaRegistry() as reg:
        opts = AvroOptions.from_sink(
            f"kafka://h:1/t?protocol=avro&schema-registry={reg.url}&enable-tidb-extension=true"
            f"&avro-decimal-handling-mode={decimal}&avro-bigint-unsigned-handling-mode={bigint}"
        )
        enc = AvroEncoder(opts)
        client = SchemaRegistryClient({"url": reg.url})
        de = AvroDeserializer(client)
        topic = f"{fresh_db}_all_types"
        messages = [m for r in rows for m in enc.encode_row(r, table, topic)]
        # 3 inserts, 1 update, the PK update as tombstone + insert, 1 delete
        assert len(messages) == 7
        decoded = [
            (
                de(k, SerializationContext(topic, MessageField.KEY)) if k is not None else None,
                de(v, SerializationContext(topic, MessageField.VALUE)) if v is not None else None,
            )
            for k, v in messages
        ]
        assert [k["id"] for k, _ in decoded if k is not None] == [1, 2, 3, 1, 2, 10, 3]
        assert [v["_tidb_op"] if v else None for _, v in decoded] == ["c", "c", "c", "u", None, "c", None]
        images = [r.after for r in rows[:4]] + [None, rows[4].after, None]
        for (_, value), image in zip(decoded, images, strict=True):
            if image is None:
                assert value is None
                continue
            for col, v in zip(table.columns, image, strict=True):
                assert value[col.name] == _expected(col, v, decimal, bigint), col.name
        # our decoder restores RowChange values exactly
        back = AvroDecoder(client).decode(*messages[0])
        assert back is not None and back.value is not None  # type: ignore[union-attr]
        assert tuple(back.value.values()) == rows[0].after  # type: ignore[union-attr]
