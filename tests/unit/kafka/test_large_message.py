"""Size accounting, claim-check objects and paths, and the large-message handler with the real encoder."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import DecodeError, MessageTooLargeError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.sink.kafka.config import KafkaOptions, LargeMessageOptions
from sparkcdc.sink.kafka.encoders import MessageEncoder
from sparkcdc.sink.kafka.large_message import (
    ClaimCheckStorage,
    LargeMessageHandler,
    claim_check_body,
    message_size,
    parse_claim_check_body,
)

TABLE = TableInfo(
    "db",
    "big",
    (ColumnInfo("id", "bigint", nullable=False), ColumnInfo("payload", "text")),
    (IndexInfo("PRIMARY", ("id",), True, True),),
)


def row(payload: str, op: str = "I") -> RowChange:
    img = (42, payload)
    return RowChange(
        op, "db", "big", 1, 445644800000262144, img if op == "D" else None, None if op == "D" else img
    )  # type: ignore[arg-type]


def encoder() -> MessageEncoder:
    opts = KafkaOptions.parse("kafka://h:1/t?protocol=canal-json&enable-tidb-extension=true", ReplicaConfig())
    return MessageEncoder(opts, ReplicaConfig())


def test_message_size_is_key_value_plus_36() -> None:
    assert message_size(None, b"x" * 100) == 136
    assert message_size(b"k" * 10, b"v" * 5) == 51
    assert message_size(None, None) == 36


def test_claim_check_body_is_go_style_base64_json() -> None:
    body = claim_check_body(None, b'{"a":1}', raw_value=False)
    assert body == b'{"key":null,"value":"eyJhIjoxfQ=="}'
    assert parse_claim_check_body(body, False) == (None, b'{"a":1}')
    keyed = claim_check_body(b"\x00\x01", b"v", raw_value=False)
    assert json.loads(keyed)["key"] == base64.b64encode(b"\x00\x01").decode()
    assert claim_check_body(b"k", b"raw", raw_value=True) == b"raw"
    assert parse_claim_check_body(b"raw", True) == (None, b"raw")
    with pytest.raises(DecodeError, match="claim-check-raw-value"):
        parse_claim_check_body(b"not json", False)


def test_claim_check_storage_paths(tmp_path: Path) -> None:
    store = ClaimCheckStorage(f"file://{tmp_path}/cc/")
    loc = store.write(None, b"hello", raw_value=False)
    assert re.fullmatch(rf"file://{tmp_path}/cc/[0-9a-f-]{{36}}\.json", loc)
    assert store.read(loc) == b'{"key":null,"value":"aGVsbG8="}'
    with pytest.raises(DecodeError, match="not under the configured claim-check storage"):
        store.read("s3://elsewhere/x.json")
    with pytest.raises(DecodeError, match="does not exist"):
        store.read(f"file://{tmp_path}/cc/missing.json")


def test_handler_passes_small_messages_and_refuses_large_ones() -> None:
    enc = encoder()
    h = LargeMessageHandler(LargeMessageOptions(), 500, "canal-json")
    small = enc.encode_row(row("x"), TABLE, "t")
    assert h.check(enc, row("x"), TABLE, small) is small
    big = row("y" * 800)
    with pytest.raises(MessageTooLargeError) as exc:
        h.check(enc, big, TABLE, enc.encode_row(big, TABLE, "t"))
    size = message_size(*enc.encode_row(big, TABLE, "t")[0])
    assert f"is {size} bytes, larger than max-message-bytes 500" in str(exc.value)
    assert "table `db`.`big`" in str(exc.value)


def test_handle_key_only_replaces_the_message() -> None:
    enc = encoder()
    h = LargeMessageHandler(LargeMessageOptions(option="handle-key-only"), 400, "canal-json")
    big = row("z" * 1000)
    out = h.check(enc, big, TABLE, enc.encode_row(big, TABLE, "t"))
    doc = json.loads(out[0][1] or b"")
    assert doc["data"] == [{"id": "42"}] and doc["_tidb"]["onlyHandleKey"] is True
    assert h.handled == 1
    tiny = LargeMessageHandler(LargeMessageOptions(option="handle-key-only"), 100, "canal-json")
    with pytest.raises(MessageTooLargeError, match="even the handle-key columns do not fit"):
        tiny.check(enc, big, TABLE, enc.encode_row(big, TABLE, "t"))


def test_claim_check_writes_the_full_message(tmp_path: Path) -> None:
    enc = encoder()
    opts = LargeMessageOptions(option="claim-check", claim_check_storage_uri=f"file://{tmp_path}")
    h = LargeMessageHandler(opts, 600, "canal-json")
    big = row("w" * 1000, op="D")
    full = enc.encode_row(big, TABLE, "t")
    out = h.check(enc, big, TABLE, full)
    ref = json.loads(out[0][1] or b"")
    loc = ref["_tidb"]["claimCheckLocation"]
    assert ref["type"] == "DELETE" and ref["data"] == [{"id": "42"}]
    assert h.storage is not None
    assert parse_claim_check_body(h.storage.read(loc), False) == full[0]
