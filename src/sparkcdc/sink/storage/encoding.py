"""Row encoding for storage files: the csv or canal-json codec behind one small interface."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sparkcdc.codec.values import key_column_indexes, split_update_if_key_changed
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import RowChange, TableInfo


class RowEncoder:
    """Encodes one row change into the bytes of a data file (terminator included).

    CSV rows go through the codec's compiled per-table encoders (``CSVEncoder.row_encoder``).
    """

    def __init__(self, protocol: str, config: ReplicaConfig, enable_tidb_extension: bool = False) -> None:
        self.protocol = protocol
        self.config = config
        self.enable_tidb_extension = enable_tidb_extension
        self._codec: Any = None
        self._terminator = config.sink.terminator.encode("utf-8")
        self._fns: dict[int, tuple[TableInfo, Callable[[RowChange], bytes]]] = {}
        self.build()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_codec"] = None
        state["_fns"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_fns", {})

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
        entry = self._fns.get(id(table))
        if entry is None or entry[0] is not table:
            return self.table_encoder(table)(row)
        return entry[1](row)

    def encode_many(self, rows: Iterable[RowChange], table: TableInfo) -> list[bytes]:
        """``encode`` for each row of one table, in order (the table's encoder is looked up once)."""
        return list(map(self.table_encoder(table), rows))

    def table_encoder(self, table: TableInfo) -> Callable[[RowChange], bytes]:
        """``encode`` bound to one table: a compiled CSV encoder, or canal-json + terminator."""
        entry = self._fns.get(id(table))
        if entry is None or entry[0] is not table:
            codec = self.build()
            fn: Callable[[RowChange], bytes]
            if self.protocol == "csv":
                fn = codec.row_encoder(table)
            else:
                term = self._terminator

                def fn(row: RowChange) -> bytes:
                    data: bytes = codec.encode_row(row, table)
                    return data + term

            if len(self._fns) > 4096:
                self._fns.clear()
            entry = self._fns[id(table)] = (table, fn)
        return entry[1]

    def header(self, table: TableInfo) -> bytes:
        """The CSV header line for a new file (``output-field-header``), else b''."""
        if self.protocol != "csv" or not self.config.sink.csv.output_field_header:
            return b""
        h: bytes = self.build().header(table)
        return h


# id(table) -> (table, its key-column positions); the table is kept so its id is not reused.
_KEY_INDEXES: dict[int, tuple[TableInfo, tuple[int, ...]]] = {}


def split_update(row: RowChange, table: TableInfo) -> list[RowChange]:
    """Spec §7: an UPDATE that changes a key becomes DELETE + INSERT (codec/values.py's rule)."""
    if row.op != "U":
        return [row]
    before, after = row.before, row.after
    if before is None or after is None:
        return [row]
    entry = _KEY_INDEXES.get(id(table))
    if entry is None or entry[0] is not table:
        if len(_KEY_INDEXES) > 4096:
            _KEY_INDEXES.clear()
        entry = _KEY_INDEXES[id(table)] = (table, tuple(key_column_indexes(table)))
    for i in entry[1]:
        if before[i] != after[i] or type(before[i]) is not type(after[i]):
            return split_update_if_key_changed(row, table)
    return [row]
