"""Row encoding for storage files: the csv or canal-json codec behind one small interface."""

from __future__ import annotations

from typing import Any

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import RowChange, TableInfo


class RowEncoder:
    """Encodes one row change into the bytes of a data file (terminator included)."""

    def __init__(self, protocol: str, config: ReplicaConfig, enable_tidb_extension: bool = False) -> None:
        self.protocol = protocol
        self.config = config
        self.enable_tidb_extension = enable_tidb_extension
        self._codec: Any = None
        self._terminator = config.sink.terminator.encode("utf-8")
        self.build()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_codec"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def build(self) -> Any:
        """The underlying codec (built on first use, so config errors surface at sink creation)."""
        if self._codec is None:
            if self.protocol == "csv":
                from sparkcdc.codec.csv import CSVEncoder

                self._codec = CSVEncoder.from_config(self.config)
            else:
                from sparkcdc.codec.canal_json import CanalJsonEncoder

                self._codec = CanalJsonEncoder(self.config, enable_tidb_extension=self.enable_tidb_extension)
        return self._codec

    def encode(self, row: RowChange, table: TableInfo) -> bytes:
        """The row's line(s) in the file."""
        codec = self.build()
        data: bytes = codec.encode_row(row, table)
        if self.protocol == "canal-json":
            return data + self._terminator
        return data

    def header(self, table: TableInfo) -> bytes:
        """The CSV header line for a new file (``output-field-header``), else b''."""
        if self.protocol != "csv" or not self.config.sink.csv.output_field_header:
            return b""
        h: bytes = self.build().header(table)
        return h


def split_update(row: RowChange, table: TableInfo) -> list[RowChange]:
    """Spec §7: an UPDATE that changes a key becomes DELETE + INSERT (codec/values.py's rule)."""
    from sparkcdc.codec.values import split_update_if_key_changed

    return split_update_if_key_changed(row, table)
