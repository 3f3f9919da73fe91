"""The codec contract: what every protocol's encoder offers, and the one factory the sinks build it with.

A sink asks ``build_encoder(protocol, config, options)`` for an ``Encoder`` and uses only this
interface; it never chooses a codec class itself. An encoder is built on the driver (where its
options are checked) and again in each executor after unpickling, so it must be picklable and
cache nothing it cannot rebuild.

- ``value_encoder``: the hot path for protocols whose row change is one keyless value
  (canal-json, CSV): a function bound to one table that turns a row change into its bytes.
- ``messages``: the general form, (key, value) pairs in order (Avro: key, value or tombstone).
- ``encode_ddl`` / ``encode_watermark``: the protocol's DDL and resolved-ts messages, or None
  when it sends none.
- ``header``: what starts a new file of a table (CSV's header line), else b"".
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from sparkcdc.errors import ConfigError

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.model import DDLEvent, RowChange, TableInfo

KeyValue = tuple[bytes | None, bytes | None]
"""One message: key (None: no key) and value (None: a tombstone)."""

ValueEncoder = Callable[["RowChange"], bytes]
RowsEncoder = Callable[[list["RowChange"]], list[bytes]]


@dataclass(frozen=True)
class CodecOptions:
    """What a sink's URI adds to the changefeed config for its encoder (TiCDC's codec ``Config``)."""

    enable_tidb_extension: bool = False
    only_output_updated_columns: bool | None = None
    """None: ``[sink] only-output-updated-columns`` of the config."""
    content_compatible: bool | None = None
    """None: ``[sink] content-compatible`` of the config."""
    avro: Any = None
    """``codec.avro.AvroOptions`` (protocol avro only: the registry and the Avro modes)."""


class Encoder(ABC):
    """One protocol's encoding of change events."""

    protocol: ClassVar[str] = ""

    @abstractmethod
    def value_encoder(self, row: RowChange, table: TableInfo) -> ValueEncoder | None:
        """The value of each row change of ``row``'s schema and table name with shape ``table``,
        for protocols that send one keyless value per row; None for the others."""

    def rows_encoder(self, row: RowChange, table: TableInfo) -> RowsEncoder | None:
        """``value_encoder`` for a list of row changes of one table and one commit_ts at once (a run of
        one transaction); None where the protocol has none (the writer then encodes row by row)."""
        return None

    @abstractmethod
    def messages(self, row: RowChange, table: TableInfo, topic: str = "") -> list[KeyValue]:
        """The messages of one row change, in order (``topic`` names Avro's registry subjects)."""

    def encode_ddl(self, ddl: DDLEvent) -> bytes | None:
        """The DDL message, or None when the protocol sends none."""
        return None

    def encode_watermark(self, ts: int) -> bytes | None:
        """The resolved-ts message, or None when the protocol sends none."""
        return None

    def header(self, table: TableInfo) -> bytes:
        """The first bytes of a new data file of ``table`` (b"" but for CSV with a header line)."""
        return b""


ENCODERS: dict[str, str] = {
    "canal-json": "sparkcdc.codec.canal_json:CanalJsonEncoder",
    "csv": "sparkcdc.codec.csv:CSVEncoder",
    "avro": "sparkcdc.codec.avro:AvroEncoder",
}
"""Protocol → ``module:class`` of its encoder (imported when first built)."""


def build_encoder(protocol: str, config: ReplicaConfig, options: CodecOptions | None = None) -> Encoder:
    """The encoder of ``protocol`` for a changefeed's config and its sink's codec options."""
    target = ENCODERS.get(protocol)
    if target is None:
        raise ConfigError(
            f"no encoder for protocol {protocol!r}; sparkcdc encodes {', '.join(sorted(ENCODERS))}"
        )
    module_name, cls_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    encoder: Encoder = cls.build(config, options or CodecOptions())
    return encoder
