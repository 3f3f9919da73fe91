"""Avro schemas and values for TiCDC's ``avro``/``flat-avro`` protocol (spec §2).

A table version becomes two Avro record schemas: the key (handle-key columns in
table order) and the value (all columns, then the TiDB extension fields when
``enable-tidb-extension`` is on). Every column block carries
``connect.parameters.tidb_type`` and the Avro type of spec §2's type map; the
JSON text is byte-identical to TiCDC's (Go ``json.Marshal``: map keys sorted,
struct fields in declaration order, ``<``/``>``/``&`` escaped).

Where the spec is silent we follow TiCDC (``pkg/sink/codec/avro/avro.go``),
with these deliberate differences:

* **Binary and BIT defaults.** TiCDC marshals a ``[]byte`` default with Go's
  ``json.Marshal``, which writes base64 text, so Avro readers would see the
  base64 characters as the default bytes. We write the Avro-spec form (a string
  whose code points 0-255 are the bytes), which reads back as the real default.
* **Expression defaults** (``DEFAULT (1+1)`` on a numeric column) cannot be an
  Avro literal; the field then has no default (TiCDC fails the changefeed).
  ``CURRENT_TIMESTAMP``/``current_timestamp()`` on a string-typed column is
  written as ``"CURRENT_TIMESTAMP"``, as TiDB reports it.
* The design document (the seed) maps FLOAT to ``double``; the spec (TiCDC's
  current code, tiflow#8490) maps it to ``float``, which we follow.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sparkcdc.errors import SinkError
from sparkcdc.model import ColumnInfo, TableInfo
from sparkcdc.model.schema import BLOB_TYPES, TEXT_TYPES

DECIMAL_PRECISE = "precise"
DECIMAL_STRING = "string"
BIGINT_UNSIGNED_LONG = "long"
BIGINT_UNSIGNED_STRING = "string"

TIDB_OP = "_tidb_op"
TIDB_COMMIT_TS = "_tidb_commit_ts"
TIDB_PHYSICAL_TIME = "_tidb_commit_physical_time"
EXTENSION_FIELDS: tuple[dict[str, Any], ...] = (
    {"default": "", "name": TIDB_OP, "type": "string"},
    {"default": 0, "name": TIDB_COMMIT_TS, "type": "long"},
    {"default": 0, "name": TIDB_PHYSICAL_TIME, "type": "long"},
)

_SMALL_INTS = frozenset({"tinyint", "smallint", "mediumint"})
_STRING_TYPES = frozenset({"json", "date", "datetime", "timestamp", "time"})
_PLUGIN_TIDB_TYPES = {"uuid": "UUID", "inet4": "INET4", "inet6": "INET6"}
"""MariaDB's data-type plugins (TiDB has none): strings of their text, tidb_type their MariaDB name."""
_CURRENT_TS = re.compile(r"(?i)^current_timestamp(\(\d*\))?$|^now\(\d*\)$|^localtimestamp(\(\d*\))?$")

Converter = Callable[[Any], Any]


def sanitize_name(name: str) -> str:
    """An Avro-safe name: a leading digit gets a ``_`` prefix, other invalid characters become ``_``."""
    out: list[str] = []
    for i, ch in enumerate(name):
        if i == 0 and "0" <= ch <= "9":
            out.append("_")
            out.append(ch)
        elif ch == "_" or "a" <= ch <= "z" or "A" <= ch <= "Z" or "0" <= ch <= "9":
            out.append(ch)
        else:
            out.append("_")
    return "".join(out)


def avro_namespace(namespace: str, schema: str) -> str:
    """The record namespace: sanitize(changefeed namespace) + "." + sanitize(schema)."""
    return sanitize_name(namespace) + "." + sanitize_name(schema)


def subject_for(topic: str, is_key: bool) -> str:
    """The TopicNameStrategy subject: topic with ``.`` → ``_``, plus ``-key`` or ``-value``."""
    return topic.replace(".", "_") + ("-key" if is_key else "-value")


def tidb_type(col: ColumnInfo) -> str:
    """The ``connect.parameters.tidb_type`` of a column."""
    t = col.type
    if t in _SMALL_INTS or t == "int":
        return "INT UNSIGNED" if col.unsigned else "INT"
    if t == "bigint":
        return "BIGINT UNSIGNED" if col.unsigned else "BIGINT"
    if t in TEXT_TYPES:
        return "TEXT"
    if t in BLOB_TYPES:
        return "BLOB"
    if t in _PLUGIN_TIDB_TYPES:
        return _PLUGIN_TIDB_TYPES[t]
    if t in (
        "float",
        "double",
        "bit",
        "decimal",
        "enum",
        "set",
        "json",
        "date",
        "datetime",
        "timestamp",
        "time",
        "year",
    ):
        return t.upper()
    raise SinkError(
        f"the avro protocol cannot encode column {col.name!r} of type {col.type!r}; "
        "leave the table out with [filter] rules or use another protocol such as canal-json"
    )


def escape_enum_element(element: str) -> str:
    """An ENUM/SET element as TiCDC lists it in ``allowed`` (``,`` → ``\\,``)."""
    return element.replace(",", "\\,").replace("\\'", "'").replace("''", "'")


def column_block(col: ColumnInfo, decimal_mode: str, bigint_mode: str) -> dict[str, Any]:
    """The Avro type block of one column (before nullability is applied)."""
    tt = tidb_type(col)
    t = col.type
    params: dict[str, str]
    if t in _SMALL_INTS:
        avro_type = "int"
    elif t == "int":
        avro_type = "long" if col.unsigned else "int"
    elif t == "bigint":
        avro_type = "string" if col.unsigned and bigint_mode == BIGINT_UNSIGNED_STRING else "long"
    elif t == "float":
        avro_type = "float"
    elif t == "double":
        avro_type = "double"
    elif t == "bit":
        length = col.length if col.length is not None else 1
        return {"type": "bytes", "connect.parameters": {"length": str(length), "tidb_type": tt}}
    elif t == "decimal":
        if decimal_mode == DECIMAL_PRECISE:
            return {
                "type": "bytes",
                "connect.parameters": {"tidb_type": tt},
                "logicalType": "decimal",
                "precision": col.precision if col.precision is not None else 10,
                "scale": col.scale if col.scale is not None else 0,
            }
        avro_type = "string"
    elif t in TEXT_TYPES:
        avro_type = "string"
    elif t in BLOB_TYPES:
        avro_type = "bytes"
    elif t in ("enum", "set"):
        allowed = ",".join(escape_enum_element(e) for e in col.elements)
        return {"type": "string", "connect.parameters": {"allowed": allowed, "tidb_type": tt}}
    elif t in _STRING_TYPES or t in _PLUGIN_TIDB_TYPES:
        avro_type = "string"
    elif t == "year":
        avro_type = "int"
    else:  # pragma: no cover - tidb_type() already refused it
        raise SinkError(f"the avro protocol cannot encode column type {t!r}")
    params = {"tidb_type": tt}
    return {"type": avro_type, "connect.parameters": params}


def _to_int64(v: int) -> int:
    return v - (1 << 64) if v >= (1 << 63) else v


def _bit_bytes(v: int) -> bytes:
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")


def decimal_unscaled_bytes(value: Decimal, scale: int) -> bytes:
    """A decimal as Avro's decimal logical type: big-endian two's-complement unscaled integer."""
    # exact integer arithmetic: Decimal operations would round to the context's 28 digits
    sign, digits, exp = value.as_tuple()
    if not isinstance(exp, int):
        raise SinkError(f"decimal value {value} cannot be encoded (not a finite number)")
    unscaled = int("".join(map(str, digits)) or "0")
    shift = exp + scale
    if shift >= 0:
        unscaled *= 10**shift
    else:
        unscaled, rest = divmod(unscaled, 10**-shift)
        if rest:
            raise SinkError(f"decimal value {value} has more fraction digits than the column scale {scale}")
    if sign:
        unscaled = -unscaled
    magnitude = unscaled if unscaled >= 0 else ~unscaled
    return unscaled.to_bytes((magnitude.bit_length() + 8) // 8, "big", signed=True)


def _decimal_string(scale: int) -> Converter:
    def conv(v: Any) -> str:
        d = v if isinstance(v, Decimal) else Decimal(str(v))
        s = f"{d:.{scale}f}"
        return s[1:] if s.startswith("-") and d == 0 else s

    return conv


def _decimal_precise(scale: int) -> Converter:
    def conv(v: Any) -> bytes:
        return decimal_unscaled_bytes(v if isinstance(v, Decimal) else Decimal(str(v)), scale)

    return conv


def _float32(v: Any) -> float:
    return float(struct.unpack("<f", struct.pack("<f", float(v)))[0])


def column_converter(col: ColumnInfo, decimal_mode: str, bigint_mode: str) -> Converter | None:
    """A function mapping a RowChange value to the Avro value (None: the value is used as is)."""
    t = col.type
    if t == "bigint" and col.unsigned:
        return str if bigint_mode == BIGINT_UNSIGNED_STRING else _to_int64
    if t == "bit":
        return _bit_bytes
    if t == "decimal":
        scale = col.scale if col.scale is not None else 0
        return _decimal_precise(scale) if decimal_mode == DECIMAL_PRECISE else _decimal_string(scale)
    if t == "float":
        return float
    if t == "double":
        return float
    return None


_UNSET = object()


def _parse_bit_default(text: str) -> int:
    m = re.fullmatch(r"(?i)b'([01]*)'", text.strip())
    if m:
        return int(m.group(1) or "0", 2)
    m = re.fullmatch(r"(?i)0x([0-9a-f]+)", text.strip())
    if m:
        return int(m.group(1), 16)
    return int(text)


def default_value(col: ColumnInfo, decimal_mode: str, bigint_mode: str) -> Any:
    """The Avro JSON default of a column: a JSON value, None for NULL, or _UNSET when it has none."""
    if col.default is None:
        return None  # no default or DEFAULT NULL: both read as null
    text = col.default
    t = col.type
    try:
        if t in _SMALL_INTS or t in ("int", "year"):
            return int(text)
        if t == "bigint":
            n = int(text)
            if col.unsigned:
                return str(n) if bigint_mode == BIGINT_UNSIGNED_STRING else _to_int64(n)
            return n
        if t == "float":
            return _float32(text)
        if t == "double":
            return float(text)
        if t == "decimal":
            if decimal_mode == DECIMAL_PRECISE:
                return _UNSET  # logical types carry no default (TiCDC/goavro)
            return _decimal_string(col.scale or 0)(Decimal(text))
        if t == "bit":
            return _bit_bytes(_parse_bit_default(text)).decode("latin-1")
        if t in BLOB_TYPES:
            return text  # already bytes, one code point per byte (``ddl.columns.normalize_default``)
    except (ValueError, InvalidOperation):
        return _UNSET
    if _CURRENT_TS.match(text):
        return "CURRENT_TIMESTAMP"
    return text


def field_block(col: ColumnInfo, decimal_mode: str, bigint_mode: str) -> dict[str, Any]:
    """One record field (``default``/``name``/``type`` in Go's sorted map-key order)."""
    block = column_block(col, decimal_mode, bigint_mode)
    name = sanitize_name(col.name)
    if "logicalType" in block:
        if col.nullable:
            return {"default": None, "name": name, "type": ["null", block]}
        return {"name": name, "type": block}
    default = default_value(col, decimal_mode, bigint_mode)
    if col.nullable:
        if default is None or default is _UNSET:
            return {"default": None, "name": name, "type": ["null", block]}
        return {"default": default, "name": name, "type": [block, "null"]}
    if default is None or default is _UNSET:
        return {"name": name, "type": block}
    return {"default": default, "name": name, "type": block}


def go_json(obj: Any) -> str:
    """Compact JSON as Go's ``json.Marshal`` writes it (HTML-safe escapes, UTF-8 kept)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def record_schema(
    namespace: str,
    table: TableInfo,
    columns: tuple[ColumnInfo, ...],
    *,
    extension: bool,
    decimal_mode: str,
    bigint_mode: str,
) -> dict[str, Any]:
    """The record schema over ``columns`` (plus the extension fields) as a JSON-able dict."""
    fields = [field_block(c, decimal_mode, bigint_mode) for c in columns]
    seen: dict[str, str] = {}
    for c, f in zip(columns, fields, strict=True):
        other = seen.setdefault(f["name"], c.name)
        if other != c.name:
            raise SinkError(
                f"columns {other!r} and {c.name!r} of table {table.schema}.{table.table} both become Avro field "
                f"{f['name']!r} after name sanitising; rename one of them or leave the table out with [filter] rules"
            )
    if extension:
        for ext in EXTENSION_FIELDS:
            if ext["name"] in seen:
                raise SinkError(
                    f"column {seen[ext['name']]!r} of table {table.schema}.{table.table} clashes with the "
                    f"TiDB extension field {ext['name']!r}; disable enable-tidb-extension or rename the column"
                )
            fields.append(dict(ext))
    return {
        "type": "record",
        "name": sanitize_name(table.table),
        "namespace": avro_namespace(namespace, table.schema),
        "fields": fields,
    }


@dataclass(frozen=True)
class FieldPlan:
    """How one column becomes one Avro field."""

    position: int
    name: str
    convert: Converter | None


@dataclass(frozen=True)
class TableSchemas:
    """Key and value schemas of one table version, with the per-field value plans."""

    key_json: str | None
    value_json: str
    key_fields: tuple[FieldPlan, ...]
    value_fields: tuple[FieldPlan, ...]
    unique_positions: tuple[int, ...]
    """Positions of every PK/UK column: an UPDATE changing one of them is split."""


def build_table_schemas(
    table: TableInfo, *, namespace: str, extension: bool, decimal_mode: str, bigint_mode: str
) -> TableSchemas:
    """Generate the key/value schemas and value plans for a table version."""
    handle = {table.index_of(c) for c in table.handle_key}
    key_cols = tuple(c for i, c in enumerate(table.columns) if i in handle)
    key_json = None
    if key_cols:
        key_json = go_json(
            record_schema(
                namespace,
                table,
                key_cols,
                extension=False,
                decimal_mode=decimal_mode,
                bigint_mode=bigint_mode,
            )
        )
    value_json = go_json(
        record_schema(
            namespace,
            table,
            table.columns,
            extension=extension,
            decimal_mode=decimal_mode,
            bigint_mode=bigint_mode,
        )
    )

    def plan(i: int, c: ColumnInfo) -> FieldPlan:
        return FieldPlan(i, sanitize_name(c.name), column_converter(c, decimal_mode, bigint_mode))

    unique: set[int] = set()
    for ix in table.indexes:
        if ix.primary or ix.unique:
            unique.update(table.index_of(c) for c in ix.columns)
    unique |= handle
    return TableSchemas(
        key_json=key_json,
        value_json=value_json,
        key_fields=tuple(plan(i, c) for i, c in enumerate(table.columns) if i in handle),
        value_fields=tuple(plan(i, c) for i, c in enumerate(table.columns)),
        unique_positions=tuple(sorted(unique)),
    )


def to_record(fields: tuple[FieldPlan, ...], row: tuple[Any, ...]) -> dict[str, Any]:
    """The Avro record (a dict) of a row image over the planned fields."""
    rec: dict[str, Any] = {}
    for f in fields:
        v = row[f.position]
        if v is not None and f.convert is not None:
            v = f.convert(v)
        rec[f.name] = v
    return rec
