"""Canal-JSON (TiCDC flavour): encoder beside decoder.

Messages are byte-for-byte TiCDC's (``pkg/sink/codec/canal``): compact JSON in a
fixed key order, strings escaped like easyjson (``<`` ``>`` ``&`` → ``\\u003c``
``\\u003e`` ``\\u0026``, U+2028/2029, other control bytes ``\\u00xx`` in lower
case), every value a JSON string or ``null``. DML keys end ``…mysqlType, old,
data, _tidb``; DDL and WATERMARK keys end ``…data, old, _tidb``. ``mysqlType``
lists columns in table order (TiCDC's order is Go map order, i.e. random).

``CanalJsonEncoder`` renders DML rows with the C extension ``_canaljson`` when it
is built (one ``Columns`` object per table shape and options writes the whole
message), else with Python code generated once per table shape and options (the
whole ``data`` object in one f-string when the values have their documented
types); ``SPARKCDC_PURE_PYTHON_ENCODER=1`` selects the Python code even when the
extension is built. ``ReferenceCanalJsonEncoder`` is the plain column-by-column
implementation both must match byte for byte.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

import orjson

from sparkcdc.codec.canal_types import (
    UNSIGNED_PROMOTION,
    base_java_type,
    base_type_of,
    is_binary_mysql_type,
    mysql_type,
)
from sparkcdc.codec.values import (
    canal_value,
    decimal_text,
    enum_name,
    go_format_float,
    set_names,
    to_float32,
)
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model.events import DDLEvent, DDLType, Op, RowChange
from sparkcdc.model.schema import BLOB_TYPES, INT_TYPES, ColumnInfo, TableInfo
from sparkcdc.model.ts import physical_ms

if TYPE_CHECKING:
    from sparkcdc.codec import _canaljson

log = logging.getLogger(__name__)

try:
    from sparkcdc.codec import _canaljson as _native
except ImportError as _exc:  # not built (a source checkout without the compile step)
    _native = None  # type: ignore[assignment]
    log.warning(
        "the C canal-json renderer (sparkcdc.codec._canaljson) is unavailable: %s; rendering rows in Python",
        _exc,
    )

PURE_PYTHON_ENV = "SPARKCDC_PURE_PYTHON_ENCODER"
"""Set to 1 to render canal-json rows with the compiled Python functions even when the C renderer is built."""


def native_available() -> bool:
    """Whether the C renderer is built and not disabled by ``SPARKCDC_PURE_PYTHON_ENCODER``."""
    return _native is not None and os.environ.get(PURE_PYTHON_ENV, "").strip() not in ("1", "true", "yes")


TIDB_WATERMARK = "TIDB_WATERMARK"

# ------------------------------------------------------------------ easyjson strings

_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')
_ESCAPES: dict[int, str] = {i: f"\\u{i:04x}" for i in range(0x20)}
_ESCAPES.update(
    {
        ord("\t"): "\\t",
        ord("\n"): "\\n",
        ord("\r"): "\\r",
        ord('"'): '\\"',
        ord("\\"): "\\\\",
        ord("<"): "\\u003c",
        ord(">"): "\\u003e",
        ord("&"): "\\u0026",
        0x2028: "\\u2028",
        0x2029: "\\u2029",
    }
)
# Lone surrogates stand for bytes that were not valid UTF-8: easyjson writes one
# U+FFFD per invalid byte (a surrogateescape'd byte is one byte; any other lone
# surrogate would have been three).
_ESCAPES.update({c: "\\ufffd" for c in range(0xDC80, 0xDD00)})
_ESCAPES.update({c: "\\ufffd" * 3 for c in range(0xD800, 0xE000) if not 0xDC80 <= c < 0xDD00})


_RARE = re.compile("[\x08\x0c\ud800-\udfff]")
_c_encode = json.encoder.encode_basestring  # C speed; differs from easyjson only as fixed below


def json_str(s: str) -> str:
    """A JSON string literal escaped exactly like easyjson's ``jwriter.String``."""
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    if _RARE.search(s) is not None:  # \b, \f (json writes them short) and lone surrogates
        return '"' + s.translate(_ESCAPES) + '"'
    out: str = _c_encode(s)
    if "<" in s:
        out = out.replace("<", "\\u003c")
    if ">" in s:
        out = out.replace(">", "\\u003e")
    if "&" in s:
        out = out.replace("&", "\\u0026")
    if "\u2028" in s:
        out = out.replace("\u2028", "\\u2028")
    if "\u2029" in s:
        out = out.replace("\u2029", "\\u2029")
    return out


# ------------------------------------------------------------------ DDL type

_DDL_TYPE: dict[DDLType, str] = {
    DDLType.CREATE_TABLE: "CREATE",
    DDLType.RENAME_TABLE: "RENAME",
    DDLType.ADD_INDEX: "CINDEX",
    DDLType.DROP_INDEX: "DINDEX",
    DDLType.ALTER_TABLE: "ALTER",
    DDLType.DROP_TABLE: "ERASE",
    DDLType.TRUNCATE_TABLE: "TRUNCATE",
}


def canal_ddl_type(ddl_type: DDLType) -> str:
    """The canal ``type`` of a DDL (schema, view and anything unlisted → ``QUERY``)."""
    return _DDL_TYPE.get(ddl_type, "QUERY")


# ------------------------------------------------------------------ value formatters

Formatter = Callable[[Any], str]
"""Turns a non-NULL column value into its JSON token (a quoted string)."""


def _generic(col: ColumnInfo) -> Formatter:
    def fmt(v: Any) -> str:
        s = canal_value(v, col)
        return json_str(s) if s is not None else "null"

    return fmt


def _formatter(col: ColumnInfo) -> Formatter:
    t = col.type
    generic = _generic(col)
    if t in INT_TYPES or t in ("year", "bit"):

        def fmt_int(v: Any) -> str:
            return f'"{v}"' if type(v) is int else generic(v)

        return fmt_int
    if t == "float" or t == "double":
        bits = 32 if t == "float" else 64

        def fmt_float(v: Any) -> str:
            return '"' + go_format_float(v, bits) + '"' if type(v) is float else generic(v)

        return fmt_float
    if t == "decimal":
        scale = col.scale

        def fmt_dec(v: Any) -> str:
            return '"' + decimal_text(v, scale) + '"' if type(v) is Decimal else generic(v)

        return fmt_dec
    if t in BLOB_TYPES:

        def fmt_bin(v: Any) -> str:
            return json_str(v.decode("latin-1")) if type(v) is bytes else generic(v)

        return fmt_bin
    if t == "enum":
        index = {name: str(i) for i, name in enumerate(col.elements, 1)}
        index[""] = "0"

        def fmt_enum(v: Any) -> str:
            i = index.get(v) if type(v) is str else None
            return '"' + i + '"' if i is not None else generic(v)

        return fmt_enum
    if t == "set":
        bit = {name: 1 << i for i, name in enumerate(col.elements)}

        def fmt_set(v: Any) -> str:
            if type(v) is str:
                if not v:
                    return '"0"'
                mask = 0
                for part in v.split(","):
                    b = bit.get(part)
                    if b is None:
                        return generic(v)  # raises DecodeError naming the value
                    mask |= b
                return f'"{mask}"'
            return generic(v)

        return fmt_set

    def fmt_str(v: Any) -> str:
        return json_str(v) if type(v) is str else generic(v)

    return fmt_str


@dataclass(slots=True)
class _ColPlan:
    index: int
    key: str  # '"name":'
    fmt: Formatter
    java: int
    promo: tuple[int, int] | None
    handle: bool


class _TablePlan:
    """Everything about a table that does not change from row to row."""

    def __init__(self, table: TableInfo, schema: str, name: str, full_type: bool) -> None:
        self.table = table
        self.schema = schema
        self.name = name
        handle = set(table.handle_key_index)
        self.cols = [
            _ColPlan(
                index=i,
                key=json_str(c.name) + ":",
                fmt=_formatter(c),
                java=base_java_type(c),
                promo=UNSIGNED_PROMOTION.get(c.type) if c.unsigned else None,
                handle=i in handle,
            )
            for i, c in enumerate(table.columns)
        ]
        self.handle_cols = [c for c in self.cols if c.handle]
        pk = table.primary_key
        self.head = (
            '{"id":0,"database":'
            + json_str(schema)
            + ',"table":'
            + json_str(name)
            + ',"pkNames":['
            + ",".join(json_str(n) for n in pk)
            + '],"isDdl":false,"type":"'
        )
        self.dynamic_java = any(c.promo is not None for c in self.cols)
        self._promo_cols = [(c.index, c.promo[0]) for c in self.cols if c.promo is not None]
        self._sql_type_cache: dict[tuple[bool, tuple[bool, ...]], str] = {}
        self.sql_type = {
            False: self._static_sql_type(self.cols),
            True: self._static_sql_type(self.handle_cols),
        }
        types = [mysql_type(c, full_type) for c in table.columns]
        self.mysql_type = {
            False: self._mysql_type(self.cols, types),
            True: self._mysql_type(self.handle_cols, types),
        }

    @staticmethod
    def _static_sql_type(cols: list[_ColPlan]) -> str:
        if not cols:
            return "null"
        return "{" + ",".join(f"{c.key}{c.java}" for c in cols) + "}"

    @staticmethod
    def _mysql_type(cols: list[_ColPlan], types: list[str]) -> str:
        if not cols:
            return "null"
        return "{" + ",".join(c.key + json_str(types[c.index]) for c in cols) + "}"

    def sql_type_for(self, image: tuple[Any, ...], only_handle: bool) -> str:
        """The ``sqlType`` object for one row image (unsigned promotion depends on the values)."""
        if not self.dynamic_java:
            return self.sql_type[only_handle]
        key = (only_handle, tuple(image[i] is not None and image[i] > limit for i, limit in self._promo_cols))
        cached = self._sql_type_cache.get(key)
        if cached is None:
            cached = self._sql_type_cache[key] = self._build_sql_type(image, only_handle)
        return cached

    def _build_sql_type(self, image: tuple[Any, ...], only_handle: bool) -> str:
        cols = self.handle_cols if only_handle else self.cols
        if not cols:
            return "null"
        parts = []
        for c in cols:
            java = c.java
            if c.promo is not None:
                v = image[c.index]
                if v is not None and v > c.promo[0]:
                    java = c.promo[1]
            parts.append(f"{c.key}{java}")
        return "{" + ",".join(parts) + "}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_claim_check_file_name() -> str:
    """A fresh claim-check object name (``<uuid4>.json``), as TiCDC names them."""
    return f"{uuid.uuid4()}.json"


class ReferenceCanalJsonEncoder:
    """Encodes row changes, DDLs and watermarks as TiCDC canal-json messages (one message each).

    Its row path formats column by column through ``_TablePlan``: the reference
    implementation. ``CanalJsonEncoder`` adds compiled per-table row encoders and
    must produce identical bytes (tests encode randomized rows through both).
    """

    def __init__(
        self,
        config: ReplicaConfig | None = None,
        enable_tidb_extension: bool = False,
        *,
        only_output_updated_columns: bool | None = None,
        content_compatible: bool | None = None,
        delete_only_output_handle_key_columns: bool | None = None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        sink = (config or ReplicaConfig()).sink
        self.enable_tidb_extension = enable_tidb_extension
        self.content_compatible = (
            sink.content_compatible if content_compatible is None else content_compatible
        )
        only_updated = (
            sink.only_output_updated_columns
            if only_output_updated_columns is None
            else only_output_updated_columns
        )
        # content-compatible forces only-output-updated-columns (TiCDC mergeConfig).
        self.only_output_updated_columns = only_updated or self.content_compatible
        self.delete_only_output_handle_key_columns = (
            sink.delete_only_output_handle_key_columns
            if delete_only_output_handle_key_columns is None
            else delete_only_output_handle_key_columns
        )
        self._now_ms = now_ms or _now_ms
        self._plans: dict[int, _TablePlan] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_plans"] = {}
        return state

    # -------------------------------------------------------------- rows

    def _plan(self, row: RowChange, table: TableInfo) -> _TablePlan:
        plan = self._plans.get(id(table))
        if plan is None or plan.table is not table or plan.schema != row.schema or plan.name != row.table:
            if len(table.columns) == 0:
                raise DecodeError(
                    f"table {row.schema}.{row.table} has no columns; cannot encode a canal-json row"
                )
            plan = _TablePlan(table, row.schema, row.table, self.content_compatible)
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[id(table)] = plan
        return plan

    def encode_row(self, row: RowChange, table: TableInfo) -> bytes:
        """One canal-json DML message for a row change."""
        return self._encode_row(row, table, False, None)

    def encode_row_handle_key_only(self, row: RowChange, table: TableInfo) -> bytes:
        """The large-message form: only handle-key columns and ``_tidb.onlyHandleKey=true``."""
        self._require_extension("large-message-handle-option=handle-key-only")
        return self._encode_row(row, table, True, None)

    def encode_row_claim_check(self, row: RowChange, table: TableInfo, location: str) -> bytes:
        """The claim-check form: only handle-key columns and ``_tidb.claimCheckLocation``."""
        self._require_extension("large-message-handle-option=claim-check")
        return self._encode_row(row, table, False, location)

    def _require_extension(self, what: str) -> None:
        if not self.enable_tidb_extension:
            raise ConfigError(
                f"canal-json {what} needs the TiDB extension; set enable-tidb-extension=true "
                "in the sink URI or [sink.kafka-config.codec-config]"
            )

    def _encode_row(
        self, row: RowChange, table: TableInfo, only_handle_key_flag: bool, claim_check: str | None
    ) -> bytes:
        plan = self._plan(row, table)
        op = row.op
        too_large = only_handle_key_flag or claim_check is not None
        if op == "D":
            image = row.before
            kind = "DELETE"
            only_handle = too_large or self.delete_only_output_handle_key_columns
        else:
            image = row.after
            kind = "INSERT" if op == "I" or row.before is None else "UPDATE"
            only_handle = too_large
        if image is None:
            raise DecodeError(
                f"{kind} row change for {row.schema}.{row.table} at commit_ts {row.commit_ts} has no "
                f"{'pre' if op == 'D' else 'post'}-image; the capture must emit full row images"
            )
        cols = plan.handle_cols if only_handle else plan.cols
        data_tokens = [c.key + ("null" if (v := image[c.index]) is None else c.fmt(v)) for c in cols]
        if kind == "UPDATE":
            before = row.before
            assert before is not None
            old_tokens = [c.key + ("null" if (v := before[c.index]) is None else c.fmt(v)) for c in cols]
            if self.only_output_updated_columns:
                old_tokens = [o for o, d in zip(old_tokens, data_tokens, strict=True) if o != d]
            old = "[{" + ",".join(old_tokens) + "}]"
        else:
            old = "null"
        if self.enable_tidb_extension:
            tidb = f',"_tidb":{{"commitTs":{row.commit_ts}'
            if only_handle_key_flag:
                tidb += ',"onlyHandleKey":true'
            if claim_check is not None:
                tidb += ',"claimCheckLocation":' + json_str(claim_check)
            tidb += "}"
        else:
            tidb = ""
        return (
            f'{plan.head}{kind}","es":{row.commit_ts >> 18},"ts":{self._now_ms()},"sql":"",'
            f'"sqlType":{plan.sql_type_for(image, only_handle)},"mysqlType":{plan.mysql_type[only_handle]},'
            f'"old":{old},"data":[{{{",".join(data_tokens)}}}]{tidb}}}'
        ).encode()

    # -------------------------------------------------------------- DDL / watermark

    def encode_ddl(self, ddl: DDLEvent) -> bytes:
        """One canal-json DDL message."""
        parts = [
            '{"id":0,"database":',
            json_str(ddl.schema),
            ',"table":',
            json_str(ddl.table),
            ',"pkNames":null,"isDdl":true,"type":"',
            canal_ddl_type(ddl.ddl_type),
            '","es":',
            str(physical_ms(ddl.commit_ts)),
            ',"ts":',
            str(self._now_ms()),
            ',"sql":',
            json_str(ddl.query),
            ',"sqlType":null,"mysqlType":null,"data":null,"old":null',
        ]
        if self.enable_tidb_extension:
            # commitTs is `omitempty` in TiCDC's tidbExtension struct
            parts.append(',"_tidb":{' + (f'"commitTs":{ddl.commit_ts}' if ddl.commit_ts else "") + "}")
        parts.append("}")
        return "".join(parts).encode("utf-8")

    def encode_watermark(self, ts: int) -> bytes | None:
        """A TIDB_WATERMARK message (None when the TiDB extension is off: TiCDC sends none)."""
        if not self.enable_tidb_extension:
            return None
        return (
            '{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK","es":'
            f'{physical_ms(ts)},"ts":{self._now_ms()},'
            '"sql":"","sqlType":null,"mysqlType":null,"data":null,"old":null,"_tidb":{'
            + (f'"watermarkTs":{ts}' if ts else "")
            + "}}"
        ).encode("utf-8")


# ------------------------------------------------------------------ compiled row encoders


def _column_kind(col: ColumnInfo) -> str:
    """Which fast token expression a column gets (the same branches as ``_formatter``)."""
    t = col.type
    if t in INT_TYPES or t in ("year", "bit"):
        return "int"
    if t == "float":
        return "float32"
    if t == "double":
        return "float64"
    if t == "decimal":
        return "decimal"
    if t in BLOB_TYPES:
        return "bytes"
    if t == "enum":
        return "enum"
    if t == "set":
        return "set"
    if t == "json":
        return "json"  # JSON text nearly always holds quotes: escaped on its own
    return "str"


def _fstring_literal(text: str) -> str:
    """Source of an f-string piece that renders ``text`` verbatim."""
    return "f" + repr(text.replace("{", "{{").replace("}", "}}"))


def _token_statements(c: _ColPlan, kind: str, table: TableInfo, ns: dict[str, Any]) -> list[str]:
    """Statements that set ``t<i>`` to the JSON token of column ``c``'s value ``v<i>``.

    Values of the types ``ColumnInfo`` documents take an inline expression; any
    other value goes through the column's reference formatter (``_ColPlan.fmt``),
    so the text is always the reference's.
    """
    i = c.index
    v = f"v{i}"
    ns[f"F{i}"] = c.fmt
    other = f'("null" if {v} is None else F{i}({v}))'
    if kind == "int":
        return [f"""    t{i} = f'"{{{v}}}"' if type({v}) is int else {other}"""]
    if kind == "float32":
        return [f"""    t{i} = '"' + _gf({v}, 32) + '"' if type({v}) is float else {other}"""]
    if kind == "float64":
        # go_format_float(v, 64) inline: repr is Go's 'f' format unless it has an exponent or is special
        return [
            f"    if type({v}) is float:",
            f"        r = repr({v})",
            f"""        if "e" in r or "n" in r: t{i} = '"' + _gf({v}, 64) + '"'""",
            f"""        else: t{i} = f'"{{r[:-2]}}"' if r[-2:] == ".0" else f'"{{r}}"'""",
            f"    else: t{i} = {other}",
        ]
    if kind == "decimal":
        # decimal_text(v, scale) inline: str(v) already has exactly `scale` fraction digits
        scale = table.columns[i].scale
        if scale is None:
            ok = '"E" not in r'
        elif scale == 0:
            ok = '"E" not in r and "." not in r'
        else:
            ok = f'r[{-scale - 1}:{-scale}] == "." and "E" not in r'
        return [
            f"    if type({v}) is Decimal:",
            f"        r = str({v})",
            f"""        t{i} = f'"{{r}}"' if {ok} else '"' + _dt({v}, {scale!r}) + '"'""",
            f"    else: t{i} = {other}",
        ]
    if kind == "bytes":
        return [f"""    t{i} = _js({v}.decode("latin-1")) if type({v}) is bytes else {other}"""]
    if kind == "enum":
        col = table.columns[i]
        index = {name: str(n) for n, name in enumerate(col.elements, 1)}
        index[""] = "0"
        ns[f"E{i}"] = {name: f'"{n}"' for name, n in index.items()}
        return [f"    t{i} = (E{i}.get({v}) if type({v}) is str else None) or {other}"]
    if kind in ("str", "json"):
        return [f"    t{i} = _js({v}) if type({v}) is str else {other}"]
    return [f"    t{i} = {other}"]  # set: the reference formatter


def _compile_columns(cols: list[_ColPlan], table: TableInfo, full_image: bool) -> tuple[Any, Any]:
    """Generate ``render(img) -> '"a":"1",...'`` and ``tokens(img) -> ('"a":"1"', ...)`` for ``cols``.

    ``render`` has a fast path for rows whose integer and string columns hold
    ints and strs (or NULL where the column is nullable) and whose strings need
    no escaping (one regex search over all of them joined): those values go
    straight into one f-string. Other rows take the per-column token path.
    """
    ns: dict[str, Any] = {
        "_js": json_str,
        "_search": _NEEDS_ESCAPE.search,
        "_gf": go_format_float,
        "_dt": decimal_text,
        "Decimal": Decimal,
    }
    head = ["def _columns(img):"]
    if full_image and cols:
        head.append("    " + "".join(f"v{c.index}, " for c in cols) + "= img")
    else:
        head.extend(f"    v{c.index} = img[{c.index}]" for c in cols)
    kinds = {c.index: _column_kind(table.columns[c.index]) for c in cols}
    token_lines = {c.index: _token_statements(c, kinds[c.index], table, ns) for c in cols}
    simple = [c for c in cols if kinds[c.index] in ("int", "str")]

    def key_literal(n: int, c: _ColPlan) -> str:
        return _fstring_literal(("," if n else "") + c.key)

    general = [line for c in cols for line in token_lines[c.index]]
    general_return = " ".join(f"{key_literal(n, c)} f'{{t{c.index}}}'" for n, c in enumerate(cols)) or "''"

    # render: the tokens of other kinds first, then the fast path, then the per-column path
    render = list(head)
    for c in cols:
        if c.index not in {s.index for s in simple}:
            render.extend(token_lines[c.index])
    if simple:
        guards = []
        strs = []
        prelude = []
        for c in simple:
            v = f"v{c.index}"
            typ = "int" if kinds[c.index] == "int" else "str"
            nullable = table.columns[c.index].nullable
            guards.append(f"({v} is None or type({v}) is {typ})" if nullable else f"type({v}) is {typ}")
            if typ == "str":
                strs.append(f"{{{v} or ''}}" if nullable else f"{{{v}}}")
            if nullable:
                prelude.append(f"""        t{c.index} = "null" if {v} is None else f'"{{{v}}}"'""")
        render.append("    if " + " and ".join(guards) + ":")
        indent = "        "
        if strs:
            render.append(f'        if _search(f"{"".join(strs)}") is None:')
            indent = "            "
        render.extend(indent + line.strip() for line in prelude)
        pieces = []
        for n, c in enumerate(cols):
            pieces.append(key_literal(n, c))
            nullable = table.columns[c.index].nullable
            if c.index in {s.index for s in simple} and not nullable:
                pieces.append(f"""f'"{{v{c.index}}}"'""")
            else:
                pieces.append(f"f'{{t{c.index}}}'")
        render.append(indent + "return " + " ".join(pieces))
        for c in simple:
            render.extend(token_lines[c.index])
    render.append("    return " + general_return)

    tuple_items = "".join(f"{_fstring_literal(c.key)} f'{{t{c.index}}}', " for c in cols)
    tokens = [*head, *general, f"    return ({tuple_items})"]
    where = f"{table.schema}.{table.table}"
    render_ns = dict(ns)
    exec(compile("\n".join(render), f"<canal-json {where} render>", "exec"), render_ns)
    tokens_ns = dict(ns)
    exec(compile("\n".join(tokens), f"<canal-json {where} tokens>", "exec"), tokens_ns)
    return render_ns["_columns"], tokens_ns["_columns"]


def _compile_sql_type(plan: _TablePlan) -> Callable[[tuple[Any, ...]], str]:
    """``sqlt(img)``: the ``sqlType`` object of an all-columns image, promotions cached by outcome."""
    if not plan.dynamic_java:
        const = plan.sql_type[False]
        return lambda img: const
    tests = ", ".join(f"img[{i}] is not None and img[{i}] > {limit}" for i, limit in plan._promo_cols)
    src = (
        "def _sqlt(img):\n"
        f"    key = ({tests},)\n"
        "    s = cache.get(key)\n"
        "    if s is None:\n"
        "        s = cache[key] = build(img, False)\n"
        "    return s\n"
    )
    ns: dict[str, Any] = {"cache": {}, "build": plan._build_sql_type}
    exec(compile(src, f"<canal-json {plan.schema}.{plan.name} sqlType>", "exec"), ns)
    fn: Callable[[tuple[Any, ...]], str] = ns["_sqlt"]
    return fn


def _native_columns(cols: list[_ColPlan], table: TableInfo) -> _canaljson.Columns:
    """The C renderer of ``cols`` (kinds as in ``_column_kind``; FLOAT and SET use their reference formatter)."""
    assert _native is not None
    native = {
        "int": _native.R_INT,
        "float64": _native.R_DOUBLE,
        "decimal": _native.R_DECIMAL,
        "bytes": _native.R_BYTES,
        "str": _native.R_STR,
        "json": _native.R_STR,
        "enum": _native.R_ENUM,
    }
    spec: list[tuple[int, int, bytes, int, Formatter, dict[str, str] | None]] = []
    for c in cols:
        col = table.columns[c.index]
        kind = native.get(_column_kind(col), _native.R_OTHER)
        scale = col.scale if kind == _native.R_DECIMAL and col.scale is not None else -1
        tokens: dict[str, str] | None = None
        if kind == _native.R_ENUM:
            tokens = {name: f'"{n}"' for n, name in enumerate(col.elements, 1)}
            tokens[""] = '"0"'
        spec.append((kind, c.index, c.key.encode(), scale, c.fmt, tokens))
    return _native.Columns(len(table.columns), spec, Decimal)


class _CompiledTable:
    """One table's row encoder for one set of encoder options (built once, reused for every row)."""

    def __init__(self, plan: _TablePlan, enc: ReferenceCanalJsonEncoder) -> None:
        table = plan.table
        self.table = table
        self.schema = plan.schema
        self.name = plan.name
        self.plan = plan
        self.n = len(table.columns)
        self.head = plan.head
        self.render_all, self.tokens_all = _compile_columns(plan.cols, table, True)
        self.render_handle, _ = _compile_columns(plan.handle_cols, table, False)
        self.sql_type_all = _compile_sql_type(plan)
        self.mysql_type_all = plan.mysql_type[False]
        self.mysql_type_handle = plan.mysql_type[True]
        self.only_updated = enc.only_output_updated_columns
        self.delete_handle_only = enc.delete_only_output_handle_key_columns
        self.extension = enc.enable_tidb_extension
        self.native_all: _canaljson.Columns | None = None
        self.native_handle: _canaljson.Columns | None = None
        self.encode: Callable[[RowChange, int], bytes | None] = self.encode_python
        if native_available():
            self.native_all = _native_columns(plan.cols, table)
            self.native_handle = _native_columns(plan.handle_cols, table)
            self.encode = self.encode_native

    def encode_native(self, row: RowChange, now: int) -> bytes | None:
        """``encode_python``'s message, written by the C renderer (only-updated UPDATEs excepted)."""
        op = row.op
        before = None
        if op == "D":
            img = row.before
            if img is None or len(img) != self.n:
                return None
            kind = "DELETE"
            if self.delete_handle_only:
                columns = self.native_handle
                sql_type = self.plan.sql_type_for(img, True)
                mysql_type = self.mysql_type_handle
            else:
                columns = self.native_all
                sql_type = self.sql_type_all(img)
                mysql_type = self.mysql_type_all
        else:
            img = row.after
            if img is None or len(img) != self.n:
                return None
            if op == "I" or row.before is None:
                kind = "INSERT"
            else:
                if self.only_updated:
                    return self.encode_python(row, now)
                before = row.before
                kind = "UPDATE"
            columns = self.native_all
            sql_type = self.sql_type_all(img)
            mysql_type = self.mysql_type_all
        assert columns is not None
        ts = row.commit_ts
        prefix = (
            f'{self.head}{kind}","es":{ts >> 18},"ts":{now},"sql":"","sqlType":{sql_type},'
            f'"mysqlType":{mysql_type},"old":'
        )
        suffix = f'}}],"_tidb":{{"commitTs":{ts}}}}}' if self.extension else "}]}"
        if before is None:
            return columns.message(prefix + 'null,"data":[{', None, "", img, suffix)
        return columns.message(prefix + "[{", before, '}],"data":[{', img, suffix)

    def encode_python(self, row: RowChange, now: int) -> bytes | None:
        """The message, or None when the row needs the reference path (odd images, errors)."""
        op = row.op
        if op == "D":
            img = row.before
            if img is None or len(img) != self.n:
                return None
            kind = "DELETE"
            old = "null"
            if self.delete_handle_only:
                data = self.render_handle(img)
                sql_type = self.plan.sql_type_for(img, True)
                mysql_type = self.mysql_type_handle
            else:
                data = self.render_all(img)
                sql_type = self.sql_type_all(img)
                mysql_type = self.mysql_type_all
        else:
            img = row.after
            if img is None or len(img) != self.n:
                return None
            before = row.before
            if op == "I" or before is None:
                kind = "INSERT"
                old = "null"
                data = self.render_all(img)
            else:
                if len(before) != self.n:
                    return None
                kind = "UPDATE"
                if self.only_updated:
                    new_tokens = self.tokens_all(img)
                    data = ",".join(new_tokens)
                    old = (
                        "[{"
                        + ",".join(
                            [o for o, d in zip(self.tokens_all(before), new_tokens, strict=True) if o != d]
                        )
                        + "}]"
                    )
                else:
                    data = self.render_all(img)
                    old = "[{" + self.render_all(before) + "}]"
            sql_type = self.sql_type_all(img)
            mysql_type = self.mysql_type_all
        ts = row.commit_ts
        tidb = f',"_tidb":{{"commitTs":{ts}}}' if self.extension else ""
        return (
            f'{self.head}{kind}","es":{ts >> 18},"ts":{now},"sql":"","sqlType":{sql_type},'
            f'"mysqlType":{mysql_type},"old":{old},"data":[{{{data}}}]{tidb}}}'
        ).encode()


class CanalJsonEncoder(ReferenceCanalJsonEncoder):
    """The canal-json encoder: the reference's messages, rows rendered by per-table compiled code."""

    def __init__(
        self,
        config: ReplicaConfig | None = None,
        enable_tidb_extension: bool = False,
        *,
        only_output_updated_columns: bool | None = None,
        content_compatible: bool | None = None,
        delete_only_output_handle_key_columns: bool | None = None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(
            config,
            enable_tidb_extension,
            only_output_updated_columns=only_output_updated_columns,
            content_compatible=content_compatible,
            delete_only_output_handle_key_columns=delete_only_output_handle_key_columns,
            now_ms=now_ms,
        )
        self._compiled: dict[int, _CompiledTable] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_compiled"] = {}
        return state

    def _compiled_for(self, row: RowChange, table: TableInfo) -> _CompiledTable:
        comp = self._compiled.get(id(table))
        if comp is None or comp.table is not table or comp.schema != row.schema or comp.name != row.table:
            comp = _CompiledTable(self._plan(row, table), self)
            if len(self._compiled) > 4096:
                self._compiled.clear()
            self._compiled[id(table)] = comp
        return comp

    def encode_row(self, row: RowChange, table: TableInfo) -> bytes:
        """One canal-json DML message for a row change."""
        comp = self._compiled.get(id(table))
        if comp is None or comp.table is not table or comp.schema != row.schema or comp.name != row.table:
            comp = self._compiled_for(row, table)
        try:
            out = comp.encode(row, self._now_ms())
        except Exception:  # odd values: the reference path renders them or raises its own error
            out = None
        if out is None:
            return self._encode_row(row, table, False, None)
        return out

    def row_encoder(self, row: RowChange, table: TableInfo) -> Callable[[RowChange], bytes]:
        """``encode_row`` bound to one table: for rows with the same schema, table name and ``table``."""
        comp = self._compiled_for(row, table)
        encode = comp.encode
        now_ms = self._now_ms
        reference = self._encode_row
        if now_ms is _now_ms:
            time_ns = time.time_ns

            def encode_table_row_now(r: RowChange) -> bytes:
                try:
                    out = encode(r, time_ns() // 1_000_000)  # _now_ms inline
                except Exception:  # odd values: the reference path renders them or raises its own error
                    out = None
                return reference(r, table, False, None) if out is None else out

            return encode_table_row_now

        def encode_table_row(r: RowChange) -> bytes:
            try:
                out = encode(r, now_ms())
            except Exception:  # odd values: the reference path renders them or raises its own error
                out = None
            return reference(r, table, False, None) if out is None else out

        return encode_table_row


# ------------------------------------------------------------------ decoder


@dataclass
class CanalMessage:
    """One decoded canal-json message."""

    kind: Literal["dml", "ddl", "watermark"]
    database: str
    table: str
    type: str
    pk_names: list[str] | None
    is_ddl: bool
    es: int
    ts: int
    sql: str
    sql_type: dict[str, int] | None
    mysql_type: dict[str, str] | None
    data: list[dict[str, str | None]] | None
    old: list[dict[str, str | None]] | None
    commit_ts: int | None = None
    watermark_ts: int | None = None
    only_handle_key: bool = False
    claim_check_location: str | None = None


def decode_canal_json(data: bytes) -> CanalMessage:
    """Parse one canal-json message (kind: ``isDdl`` → ddl; ``TIDB_WATERMARK`` → watermark; else dml)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"not a canal-json message: {exc}; first bytes: {bytes(data[:80])!r}") from exc
    if not isinstance(obj, dict):
        raise DecodeError(f"a canal-json message must be a JSON object, got {type(obj).__name__}")
    ext = obj.get("_tidb") or {}
    if not isinstance(ext, dict):
        raise DecodeError(f"canal-json _tidb must be an object, got {ext!r}")
    is_ddl = bool(obj.get("isDdl", False))
    typ = obj.get("type") or ""
    kind: Literal["dml", "ddl", "watermark"]
    if is_ddl:
        kind = "ddl"
    elif typ == TIDB_WATERMARK:
        kind = "watermark"
    else:
        kind = "dml"
        if typ not in ("INSERT", "UPDATE", "DELETE") and "claimCheckLocation" not in ext:
            raise DecodeError(
                f"canal-json DML message has unknown type {typ!r}; expected INSERT, UPDATE or DELETE"
            )
    return CanalMessage(
        kind=kind,
        database=obj.get("database") or "",
        table=obj.get("table") or "",
        type=typ,
        pk_names=obj.get("pkNames"),
        is_ddl=is_ddl,
        es=int(obj.get("es") or 0),
        ts=int(obj.get("ts") or 0),
        sql=obj.get("sql") or "",
        sql_type=obj.get("sqlType"),
        mysql_type=obj.get("mysqlType"),
        data=obj.get("data"),
        old=obj.get("old"),
        commit_ts=ext.get("commitTs"),
        watermark_ts=ext.get("watermarkTs"),
        only_handle_key=bool(ext.get("onlyHandleKey", False)),
        claim_check_location=ext.get("claimCheckLocation"),
    )


def canal_value_to_python(value: str | None, mysql_type: str, column: ColumnInfo | None = None) -> Any:
    """A canal string as a MySQL query parameter: binary → bytes, ENUM/SET → names (or ints), BIT → int."""
    if value is None:
        return None
    base = base_type_of(mysql_type)
    if is_binary_mysql_type(mysql_type):
        return _latin1_bytes(value)
    try:
        if base == "enum":
            return enum_name(column, int(value)) if column is not None else int(value)
        if base == "set":
            return set_names(column, int(value)) if column is not None else int(value)
        if base in ("bit", "year"):
            # YEAR as a number: MySQL reads the string '0' as 2000, the number 0 as 0000.
            return int(value)
    except ValueError as exc:
        raise DecodeError(f"canal-json value {value!r} is not a valid {mysql_type}: {exc}") from exc
    return value


def _latin1_bytes(value: str) -> bytes:
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise DecodeError(
            f"binary canal-json value {value[:40]!r} holds a character above U+00FF; "
            "binary values must be ISO-8859-1 encoded bytes"
        ) from exc


def canal_value_to_model(value: str | None, column: ColumnInfo) -> Any:
    """A canal string as the model's Python value for the column (inverse of ``canal_value``)."""
    if value is None:
        return None
    t = column.type
    try:
        if t in INT_TYPES or t in ("year", "bit"):
            return int(value)
        if t == "float":
            return to_float32(float(value))
        if t == "double":
            return float(value)
        if t == "decimal":
            return Decimal(value)
        if t in BLOB_TYPES:
            return _latin1_bytes(value)
        if t == "enum":
            return enum_name(column, int(value))
        if t == "set":
            return set_names(column, int(value))
    except (ValueError, ArithmeticError) as exc:
        raise DecodeError(
            f"canal-json value {value!r} is not a valid {column.type} for column {column.name!r}"
        ) from exc
    return value


_OPS: dict[str, Op] = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}


def canal_message_to_row_change(msg: CanalMessage, table: TableInfo) -> RowChange:
    """Rebuild a RowChange from a DML message using the table's columns (missing columns become None).

    For an UPDATE whose ``old`` holds only the changed columns, the other
    pre-image values are taken from ``data``.
    """
    if msg.kind != "dml" or msg.type not in _OPS:
        raise DecodeError(f"canal-json message of type {msg.type!r} is not a row change")
    op = _OPS[msg.type]
    data = (msg.data or [{}])[0]
    cols = table.columns

    def image(values: dict[str, str | None], fallback: dict[str, str | None] | None) -> tuple[Any, ...]:
        out = []
        for c in cols:
            if c.name in values:
                raw = values[c.name]
            elif fallback is not None:
                raw = fallback.get(c.name)
            else:
                raw = None
            out.append(canal_value_to_model(raw, c))
        return tuple(out)

    after = image(data, None)
    before: tuple[Any, ...] | None = None
    if op == "D":
        before, after_img = after, None
        return RowChange(
            op=op,
            schema=msg.database,
            table=msg.table,
            table_version=table.version,
            commit_ts=msg.commit_ts or 0,
            before=before,
            after=after_img,
        )
    if op == "U" and msg.old:
        before = image(msg.old[0], data)
    return RowChange(
        op=op,
        schema=msg.database,
        table=msg.table,
        table_version=table.version,
        commit_ts=msg.commit_ts or 0,
        before=before,
        after=after,
    )
