"""Large messages (spec §7): size accounting, handle-key-only, and claim-check storage.

A message's size is ``len(key) + len(value) + 36`` (TiCDC's accounting). Above
``max-message-bytes``:

* ``none``: ``MessageTooLargeError`` naming the table, the size and the limit;
* ``handle-key-only``: re-encode with only the handle-key columns and
  ``_tidb.onlyHandleKey=true`` (still too large → error); a consumer would
  re-read the row from the upstream with ``tidb_snapshot`` — MySQL/MariaDB has no
  such snapshot read, so sparkcdc's consumer cannot restore these rows (it
  reports them);
* ``claim-check``: write the full message to ``<claim-check-storage-uri>/<uuid4>.json``
  as ``{"key": base64|null, "value": base64}`` (the raw value with
  ``claim-check-raw-value``), then send the handle-key message carrying
  ``_tidb.claimCheckLocation``.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from sparkcdc.config.uri import ParsedURI
from sparkcdc.errors import DecodeError, MessageTooLargeError, SinkError, SinkUnavailable
from sparkcdc.sink.kafka.config import MESSAGE_OVERHEAD, LargeMessageOptions
from sparkcdc.sink.objectstore import StorageBackend

if TYPE_CHECKING:
    from sparkcdc.model import RowChange, TableInfo
    from sparkcdc.sink.kafka.encoders import KeyValue, MessageEncoder


_OP_NAMES = {"I": "an INSERT", "U": "an UPDATE", "D": "a DELETE"}


def message_size(key: bytes | None, value: bytes | None) -> int:
    """TiCDC's size of a Kafka message: key + value + 36 bytes of overhead."""
    return len(key or b"") + len(value or b"") + MESSAGE_OVERHEAD


def claim_check_body(key: bytes | None, value: bytes | None, raw_value: bool) -> bytes:
    """The claim-check object: ``{"key":b64|null,"value":b64|null}`` (Go's []byte JSON), or the raw value."""
    if raw_value:
        return value or b""
    doc = {
        "key": None if key is None else base64.b64encode(key).decode("ascii"),
        "value": None if value is None else base64.b64encode(value).decode("ascii"),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def parse_claim_check_body(data: bytes, raw_value: bool) -> tuple[bytes | None, bytes | None]:
    """Inverse of ``claim_check_body``: (key, value)."""
    if raw_value:
        return None, data
    try:
        doc = json.loads(data)
        key = doc.get("key")
        value = doc.get("value")
        return (
            None if key is None else base64.b64decode(key),
            None if value is None else base64.b64decode(value),
        )
    except (ValueError, AttributeError, TypeError) as exc:
        raise DecodeError(
            f'claim-check object is not {{"key":..,"value":..}} JSON with base64 fields: {exc}; '
            "was it written with claim-check-raw-value=true?"
        ) from exc


def _strip_query(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


class ClaimCheckStorage:
    """Where oversized messages go; picklable, the filesystem opens on first use."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.base = _strip_query(uri)
        self._backend: StorageBackend | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri, "base": self.base, "_backend": None}

    def _open(self) -> StorageBackend:
        if self._backend is None:
            p = ParsedURI.parse(self.uri)
            self._backend = StorageBackend.from_uri(p)
            p.reject_unknown()
        return self._backend

    def location(self, name: str) -> str:
        """The full location of an object name (what goes into ``claimCheckLocation``)."""
        return f"{self.base}/{name}"

    def write(self, key: bytes | None, value: bytes | None, raw_value: bool) -> str:
        """Store one full message under a fresh ``<uuid4>.json``; returns its location."""
        name = f"{uuid.uuid4()}.json"
        body = claim_check_body(key, value, raw_value)
        try:
            self._open().write(name, body)
        except (SinkError, SinkUnavailable):
            raise
        except OSError as exc:
            raise SinkUnavailable(f"cannot write claim-check object {self.location(name)!r}: {exc}") from exc
        return self.location(name)

    def read(self, location: str) -> bytes:
        """The stored object at a location written by ``write`` (a location under this storage)."""
        prefix = self.base + "/"
        if not location.startswith(prefix):
            raise DecodeError(
                f"claim-check location {location!r} is not under the configured claim-check storage "
                f"{self.base!r}; point claim-check-storage-uri at the storage the changefeed wrote to"
            )
        rel = location[len(prefix) :]
        data = self._open().read(rel)
        if data is None:
            raise DecodeError(f"claim-check object {location!r} does not exist (deleted or wrong storage?)")
        return bytes(data)


class LargeMessageHandler:
    """Applies max-message-bytes and the large-message option to one row's encoded messages."""

    def __init__(self, options: LargeMessageOptions, max_message_bytes: int, protocol: str) -> None:
        self.options = options
        self.max_message_bytes = max_message_bytes
        self.protocol = protocol
        self.storage = ClaimCheckStorage(options.claim_check_storage_uri) if options.claim_check else None
        self.handled = 0

    def _too_large(self, row: RowChange, size: int, what: str) -> MessageTooLargeError:
        hint = (
            "raise max-message-bytes (and the topic's max.message.bytes), or set "
            "[sink.kafka-config.large-message-handle] large-message-handle-option to handle-key-only or "
            "claim-check (canal-json with enable-tidb-extension=true)"
            if self.options.option == "none"
            else "raise max-message-bytes: even the handle-key columns do not fit"
        )
        return MessageTooLargeError(
            f"{what} for {_OP_NAMES.get(row.op, row.op)} of a row of table `{row.schema}`.`{row.table}` (commit_ts {row.commit_ts}) is "
            f"{size} bytes, larger than max-message-bytes {self.max_message_bytes}; {hint}"
        )

    def check(
        self, encoder: MessageEncoder, row: RowChange, table: TableInfo, messages: list[KeyValue]
    ) -> list[KeyValue]:
        """The messages to send for a row: as encoded, or their large-message replacement."""
        out: list[KeyValue] | None = None
        for i, (key, value) in enumerate(messages):
            size = message_size(key, value)
            if size <= self.max_message_bytes:
                if out is not None:
                    out.append((key, value))
                continue
            if out is None:
                out = list(messages[:i])
            if self.options.option == "none":
                raise self._too_large(row, size, f"the {self.protocol} message")
            self.handled += 1
            if self.options.handle_key_only:
                small = encoder.encode_row_handle_key_only(row, table)
            else:
                assert self.storage is not None
                location = self.storage.write(key, value, self.options.claim_check_raw_value)
                small = encoder.encode_row_claim_check(row, table, location)
            small_size = message_size(*small)
            if small_size > self.max_message_bytes:
                raise self._too_large(
                    row, small_size, f"the {self.options.option} message (full size {size})"
                )
            out.append(small)
        return messages if out is None else out
