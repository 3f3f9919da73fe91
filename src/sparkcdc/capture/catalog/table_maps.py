"""The tracked table shapes held against the binlog's table maps: drift fails loudly."""

from __future__ import annotations

from sparkcdc.capture.catalog.table import qualified
from sparkcdc.errors import SchemaError
from sparkcdc.model.schema import TableInfo

# MariaDB enum_field_types codes a table map may carry for each of our column types.
BINLOG_TYPES: dict[str, frozenset[int]] = {
    "tinyint": frozenset({1}),
    "smallint": frozenset({2}),
    "mediumint": frozenset({9}),
    "int": frozenset({3}),
    "bigint": frozenset({8}),
    "float": frozenset({4}),
    "double": frozenset({5}),
    "decimal": frozenset({246, 0}),
    "date": frozenset({10, 14}),
    "datetime": frozenset({12, 18}),
    "timestamp": frozenset({7, 17}),
    "time": frozenset({11, 19}),
    "year": frozenset({13}),
    "char": frozenset({254, 15, 253}),
    "binary": frozenset({254, 15, 253}),
    "varchar": frozenset({15, 253}),
    "varbinary": frozenset({15, 253}),
    "tinytext": frozenset({252, 249}),
    "text": frozenset({252}),
    "mediumtext": frozenset({252, 250}),
    "longtext": frozenset({252, 251}),
    "tinyblob": frozenset({252, 249}),
    "blob": frozenset({252}),
    "mediumblob": frozenset({252, 250}),
    "longblob": frozenset({252, 251}),
    "json": frozenset({252, 245}),
    "bit": frozenset({16}),
    "enum": frozenset({254, 247}),
    "set": frozenset({254, 248}),
    "geometry": frozenset({255}),
    # MariaDB's data-type plugins are logged as BINARY(16)/BINARY(4)
    "uuid": frozenset({254}),
    "inet4": frozenset({254}),
    "inet6": frozenset({254}),
}


def reconcile(info: TableInfo, column_names: list[str], column_types: list[int]) -> None:
    """Raise SchemaError when a binlog table map does not match the tracked shape.

    ``column_names`` may be empty when the binlog carries no names
    (``binlog_row_metadata`` not FULL); then only count and types are checked.
    """
    where = qualified(info.schema, info.table)
    expected = [f"{c.name} {c.type}" for c in info.columns]
    if len(column_types) != len(info.columns) or (column_names and len(column_names) != len(info.columns)):
        got = len(column_types) if column_types else len(column_names)
        raise SchemaError(
            f"binlog table map of {where} has {got} columns {column_names or ''} but the tracked schema "
            f"(version {info.version}) has {len(info.columns)}: {expected}. A DDL was missed or not applied; "
            "restart the changefeed from a new snapshot"
        )
    for i, c in enumerate(info.columns):
        if column_names and column_names[i].lower() != c.name.lower():
            raise SchemaError(
                f"binlog table map of {where}: column {i + 1} is {column_names[i]!r} but the tracked schema "
                f"(version {info.version}) has {c.name!r}; expected columns {[x.name for x in info.columns]}, "
                f"got {column_names}. Restart the changefeed from a new snapshot"
            )
        allowed = BINLOG_TYPES.get(c.type)
        if allowed is not None and column_types[i] not in allowed:
            raise SchemaError(
                f"binlog table map of {where}: column {c.name!r} has binlog type {column_types[i]} but the "
                f"tracked schema (version {info.version}) says {c.full_type()} (binlog types "
                f"{sorted(allowed)}). Restart the changefeed from a new snapshot"
            )
