"""Row encoding for storage files: the protocol's ``codec.base.Encoder``, one value per line."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sparkcdc.codec.base import CodecOptions, Encoder, build_encoder
from sparkcdc.codec.values import key_column_indexes, split_update_if_key_changed
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError
from sparkcdc.model import RowChange, TableInfo


class RowEncoder:
    """Encodes one row change into the bytes of a data file (terminator included).

    CSV records carry their terminator; a canal-json message gets the ``[sink] terminator``.
    """

    def __init__(self, protocol: str, config: ReplicaConfig, enable_tidb_extension: bool = False) -> None:
        self.protocol = protocol
        self.config = config
        self.enable_tidb_extension = enable_tidb_extension
        self._codec: Encoder | None = None
        self._terminator = b"" if protocol == "csv" else config.sink.terminator.encode("utf-8")
        self._fns: dict[tuple[int, str, str], tuple[TableInfo, Callable[[RowChange], bytes]]] = {}
        """(id(table), schema, table name) → (table, its encoder); the table is kept so its id is not reused."""
        self.build()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_codec"] = None
        state["_fns"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_fns", {})

    def build(self) -> Encoder:
        """The protocol's encoder (built on first use, so config errors surface at sink creation)."""
        if self._codec is None:
            options = CodecOptions(enable_tidb_extension=self.enable_tidb_extension)
            self._codec = build_encoder(self.protocol, self.config, options)
        return self._codec

    def encode(self, row: RowChange, table: TableInfo) -> bytes:
        """The row's line(s) in the file."""
        return self.table_encoder(table, row)(row)

    def encode_many(self, rows: Iterable[RowChange], table: TableInfo) -> list[bytes]:
        """``encode`` for each row of one table, in order (the table's encoder is looked up once)."""
        rows = list(rows)
        if not rows:
            return []
        return list(map(self.table_encoder(table, rows[0]), rows))

    def table_encoder(self, table: TableInfo, row: RowChange) -> Callable[[RowChange], bytes]:
        """``encode`` bound to the rows of ``row``'s schema and table name with shape ``table``."""
        key = (id(table), row.schema, row.table)
        entry = self._fns.get(key)
        if entry is None or entry[0] is not table:
            value = self.build().value_encoder(row, table)
            if value is None:
                raise ConfigError(f"protocol {self.protocol} has no one-value-per-row form for storage files")
            fn = value
            term = self._terminator
            if term:

                def fn(r: RowChange) -> bytes:
                    return value(r) + term

            if len(self._fns) > 4096:
                self._fns.clear()
            entry = self._fns[key] = (table, fn)
        return entry[1]

    def header(self, table: TableInfo) -> bytes:
        """The first line of a new file of ``table`` (CSV's ``output-field-header``), else b''."""
        return self.build().header(table)


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
