"""The initial snapshot: key ranges, chunked keyset reads, and the exact correction to the handover point.

A selected table is split into key ranges by its handle key (``TableInfo.handle_key``).
Each range is read in chunks with keyset pagination
(``WHERE key > last AND key <= hi ORDER BY key LIMIT chunk``), each chunk a plain
consistent read at its own time. Chunks read after the handover point S may already
include changes made after S; they are corrected exactly with the binlog ``(S, H]``
(H = the head once every range finished):

* for every key touched in ``(S, H]`` its FIRST event after S tells the row's state
  at S: the before image (absent when that first event is an INSERT);
* a key never touched up to H was the same at S and at the time its chunk read it.

So ``state(S) = {snapshot rows whose key was not touched} ∪ {first-event before images}``,
whatever the read time of each chunk. A table without a handle key is read as one
range in one consistent read whose exact binlog position R is known
(``binlog_snapshot_file/position``); its rows are corrected as a multiset by undoing
the changes of ``(S, R]`` (``undo_changes``).

Values are converted to exactly what the binlog decoder yields for the same row (see
``ColumnInfo``): temporal types as MySQL text, FLOAT as the exact float32, BIT as int,
TIMESTAMP in the changefeed time zone.
"""

from __future__ import annotations

import base64
import logging
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sparkcdc.errors import SchemaError
from sparkcdc.model import RowChange, TableInfo

log = logging.getLogger(__name__)

Key = tuple[Any, ...]

# --------------------------------------------------------------------------- key values in JSON


def encode_key(values: Sequence[Any] | None) -> list[Any] | None:
    """Raw key values as JSON (Decimal → {"d": str}, bytes → {"b": base64}, float → {"f": repr})."""
    if values is None:
        return None
    out: list[Any] = []
    for v in values:
        if isinstance(v, bool) or v is None or isinstance(v, int | str):
            out.append(v)
        elif isinstance(v, Decimal):
            out.append({"d": str(v)})
        elif isinstance(v, bytes | bytearray):
            out.append({"b": base64.b64encode(bytes(v)).decode()})
        elif isinstance(v, float):
            out.append({"f": repr(v)})
        else:
            raise TypeError(f"cannot store a key value of type {type(v).__name__}: {v!r}")
    return out


def decode_key(data: Sequence[Any] | None) -> Key | None:
    """Inverse of ``encode_key``."""
    if data is None:
        return None
    out: list[Any] = []
    for v in data:
        if isinstance(v, dict):
            if "d" in v:
                out.append(Decimal(v["d"]))
            elif "b" in v:
                out.append(base64.b64decode(v["b"]))
            else:
                out.append(float(v["f"]))
        else:
            out.append(v)
    return tuple(out)


def key_token(values: Iterable[Any]) -> str:
    """The identity of a key (or of a whole row for key-less tables) as one comparable string."""
    return "\x1f".join(repr(v) for v in values)


# --------------------------------------------------------------------------- SQL


def quote(name: str) -> str:
    """A backquoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def table_ref(info: TableInfo) -> str:
    """`schema`.`table`."""
    return f"{quote(info.schema)}.{quote(info.table)}"


def _compare(cols: Sequence[str], op: str, last_op: str) -> str:
    """(c1, c2, ...) op (%s, %s, ...) expanded into nested ORs an index range scan uses."""
    c = quote(cols[0])
    if len(cols) == 1:
        return f"{c} {last_op} %s"
    return f"({c} {op} %s OR ({c} = %s AND {_compare(cols[1:], op, last_op)}))"


def _params(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for i, v in enumerate(values):
        out.append(v)
        if i < len(values) - 1:
            out.append(v)
    return out


def range_predicate(cols: Sequence[str], after: Key | None, upto: Key | None) -> tuple[str, list[Any]]:
    """``key > after AND key <= upto`` (either side open when None) with its parameters."""
    parts: list[str] = []
    params: list[Any] = []
    if after is not None:
        parts.append(_compare(cols, ">", ">"))
        params += _params(after)
    if upto is not None:
        parts.append(_compare(cols, "<", "<="))
        params += _params(upto)
    return (" AND ".join(parts) if parts else "1=1"), params


def column_expr(info: TableInfo, name: str) -> str:
    """How a column is selected: FLOAT as its exact double value (the text form is rounded)."""
    c = info.column(name)
    return f"CAST({quote(c.name)} AS DOUBLE)" if c.type == "float" else quote(c.name)


def select_list(info: TableInfo) -> str:
    """The columns in table order, each through ``column_expr``."""
    return ", ".join(column_expr(info, c.name) for c in info.columns)


def reader_conv() -> dict[int, Any]:
    """PyMySQL converters that keep temporal values as the server's text (what the binlog decoder yields)."""
    from pymysql.constants import FIELD_TYPE
    from pymysql.converters import conversions

    conv = dict(conversions)  # encoders (by Python type) and decoders (by field type)
    for t in (
        FIELD_TYPE.DATE,
        FIELD_TYPE.NEWDATE,
        FIELD_TYPE.DATETIME,
        FIELD_TYPE.TIMESTAMP,
        FIELD_TYPE.TIME,
        FIELD_TYPE.BIT,
        FIELD_TYPE.SET,
        FIELD_TYPE.ENUM,
        FIELD_TYPE.JSON,
    ):
        conv.pop(t, None)
    return conv


# --------------------------------------------------------------------------- value conversion


def _bit(v: Any) -> int:
    return int.from_bytes(v, "big")


def _float32(v: Any) -> float:
    return float(struct.unpack("<f", struct.pack("<f", float(v)))[0])


def _bytes(v: Any) -> bytes:
    return bytes(v) if not isinstance(v, bytes) else v


def _timestamp_in(tz: str) -> Callable[[Any], Any] | None:
    from sparkcdc.capture.rowcodec import TimestampRenderer

    r = TimestampRenderer(tz)
    if r.utc:
        return None  # the session runs in UTC: the server's text is already the rendering

    def conv(v: Any) -> Any:
        text = str(v)
        if text.startswith("0000-00-00"):
            return text
        head, _, frac = text.partition(".")
        d = datetime.strptime(head, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        out = d.astimezone(r.zone).strftime("%Y-%m-%d %H:%M:%S")
        return out + ("." + frac if frac else "")

    return conv


class RowConverter:
    """Turns a row as read by ``SELECT select_list(info)`` into the binlog decoder's Python values."""

    def __init__(self, info: TableInfo, time_zone: str = "UTC") -> None:
        self.info = info
        fns: list[tuple[int, Callable[[Any], Any]]] = []
        ts = _timestamp_in(time_zone)
        for i, c in enumerate(info.columns):
            fn: Callable[[Any], Any] | None = None
            if c.type == "bit":
                fn = _bit
            elif c.type == "float":
                fn = _float32
            elif c.type == "timestamp":
                fn = ts
            elif c.is_binary or c.type == "geometry":
                fn = _bytes
            elif c.type == "year":
                fn = int
            if fn is not None:
                fns.append((i, fn))
        self._fns = fns
        self.key_index = info.handle_key_index

    def convert(self, raw: Sequence[Any]) -> tuple[Any, ...]:
        """One row."""
        if not self._fns:
            return tuple(raw)
        row = list(raw)
        for i, fn in self._fns:
            v = row[i]
            if v is not None:
                row[i] = fn(v)
        return tuple(row)

    def key_of(self, row: Sequence[Any]) -> Key:
        """The handle-key values of a (raw or converted) row."""
        return tuple(row[i] for i in self.key_index)


# --------------------------------------------------------------------------- rows parsed in C

try:
    from sparkcdc.capture import _textrows
except ImportError as _exc:  # not built (a source checkout without the compile step)
    _textrows = None  # type: ignore[assignment]
    log.warning(
        "the C row reader (sparkcdc.capture._textrows) is unavailable: %s; reading rows with PyMySQL", _exc
    )

_INT_FIELDS = frozenset({1, 2, 3, 8, 9, 13})  # TINY, SHORT, LONG, LONGLONG, INT24, YEAR
_TEXT_FIELDS = frozenset({7, 10, 11, 12, 14, 245, 247, 248})  # temporal types, JSON, ENUM, SET
_STRING_FIELDS = frozenset({15, 16, 249, 250, 251, 252, 253, 254, 255})  # PyMySQL's TEXT_TYPES
_BINARY_CHARSET = 63


def text_kinds(
    fields: Sequence[Any], info: TableInfo, time_zone: str
) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
    """How ``_textrows`` converts each column of ``SELECT select_list(info)``; None when it cannot.

    The kinds give what PyMySQL (with ``reader_conv``) then ``RowConverter`` give: the field type
    chooses the parsing (integers, floats, decimals, text or bytes by the field's charset), the
    column type the binlog decoder's value (BIT as int, FLOAT as float32, TIMESTAMP in the time zone).
    """
    t = _textrows
    if t is None or len(fields) != len(info.columns):
        return None
    ts = _timestamp_in(time_zone)
    kinds: list[int] = []
    objs: list[Any] = []
    for f, c in zip(fields, info.columns, strict=True):
        ft, obj = int(f.type_code), None
        if c.type == "bit":
            kind = t.T_BIT if ft == 16 and f.charsetnr == _BINARY_CHARSET else -1
        elif c.type == "float":
            kind = t.T_FLOAT32 if ft in (4, 5) else -1
        elif c.type == "timestamp" and ts is not None:
            kind, obj = t.T_CALL, ts
        elif ft in (0, 246):
            kind, obj = t.T_DECIMAL, Decimal
        elif ft in _INT_FIELDS:
            kind = t.T_INT
        elif ft in (4, 5):
            kind = t.T_DOUBLE
        elif ft in _TEXT_FIELDS:
            kind = t.T_TEXT
        elif ft in _STRING_FIELDS:
            kind = t.T_BYTES if f.charsetnr == _BINARY_CHARSET else t.T_TEXT
        else:
            kind = -1
        if kind == t.T_TEXT and (c.is_binary or c.type == "geometry"):
            kind = -1  # the reference would fail on it too: not a shape the reader knows
        if kind < 0:
            return None
        kinds.append(kind)
        objs.append(obj)
    return tuple(kinds), tuple(objs)


class TextRowReader:
    """Reads ``SELECT select_list(info)`` results with the C row parser (``_textrows``).

    PyMySQL sends the statement and reads the column definitions; the row packets are then
    read from its buffered socket file in large blocks and split and converted in C, to the
    values ``RowConverter.convert`` gives for PyMySQL's rows (its reference). ``usable`` is False
    when the C parser is not built, when the connection does not use utf8mb4, or when a key
    column's value is converted (BIT, TIMESTAMP in another time zone), since the next chunk's
    lower bound is the last row's key as read.
    """

    BLOCK = 1 << 18

    def __init__(self, info: TableInfo, time_zone: str = "UTC") -> None:
        self.info = info
        self.time_zone = time_zone
        self._kinds: tuple[tuple[int, ...], tuple[Any, ...]] | None = None
        ts_key = _timestamp_in(time_zone) is not None and any(
            info.column(k).type == "timestamp" for k in info.handle_key
        )
        bit_key = any(info.column(k).type == "bit" for k in info.handle_key)
        self.usable = _textrows is not None and not ts_key and not bit_key

    def select(self, conn: Any, sql: str) -> list[tuple[Any, ...]]:
        """Every row of one SELECT of ``select_list(info)`` (``sql`` has its parameters in it)."""
        from pymysql.protocol import MysqlPacket

        t = _textrows
        assert t is not None
        conn.query(sql, unbuffered=True)
        result = conn._result
        kinds = self._kinds
        if kinds is None:
            kinds = text_kinds(result.fields, self.info, self.time_zone)
            if kinds is None:
                raise SchemaError(f"the C row reader cannot read {self.info.schema}.{self.info.table}")
            self._kinds = kinds
        ks, objs = kinds
        rfile = conn._rfile
        seq = conn._next_seq_id
        rows: list[tuple[Any, ...]] = []
        data = b""
        pos = 0
        try:
            while True:
                got, pos, seq, state = t.parse_rows(data, pos, seq, ks, objs)
                rows += got
                if state == t.S_EOF:
                    if pos != len(data):
                        raise ValueError(f"{len(data) - pos} bytes after the end of a result set")
                    break
                if state == t.S_MORE:
                    data = data[pos:] + self._read(conn, rfile)
                    pos = 0
                    continue
                # An error packet or a row of several packets: read whole packets, then handle them.
                payload, data, pos, seq = self._whole_payload(conn, rfile, data, pos, seq)
                if state == t.S_ERROR:
                    result.unbuffered_active = False
                    MysqlPacket(payload, conn.encoding).raise_for_error()
                rows.append(t.parse_row(payload, ks, objs))
        except (ValueError, TypeError, UnicodeError, ArithmeticError) as exc:
            conn._force_close()  # the stream is out of step: the connection cannot be reused
            raise SchemaError(f"cannot read rows of {self.info.schema}.{self.info.table}: {exc}") from exc
        except BaseException:
            if result.unbuffered_active:
                conn._force_close()
            raise
        conn._next_seq_id = seq
        result.unbuffered_active = False
        result.has_next = False
        result.connection = None
        return rows

    def _read(self, conn: Any, rfile: Any) -> bytes:
        import pymysql

        try:
            block = rfile.read1(self.BLOCK)
        except OSError as exc:
            conn._force_close()
            raise pymysql.err.OperationalError(
                2013, f"Lost connection to MySQL server during query ({exc})"
            ) from exc
        if not block:
            conn._force_close()
            raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
        return bytes(block)

    def _whole_payload(
        self, conn: Any, rfile: Any, data: bytes, pos: int, seq: int
    ) -> tuple[bytes, bytes, int, int]:
        """The payload of the (possibly multi-packet) packet at ``data[pos:]``; the data and position after it."""
        assert _textrows is not None
        parts: list[bytes] = []
        while True:
            while len(data) - pos < 4:
                data = data[pos:] + self._read(conn, rfile)
                pos = 0
            n = int.from_bytes(data[pos : pos + 3], "little")
            if data[pos + 3] != seq & 0xFF:
                raise ValueError(f"packet sequence number wrong: got {data[pos + 3]}, expected {seq & 0xFF}")
            while len(data) - pos < 4 + n:
                data = data[pos:] + self._read(conn, rfile)
                pos = 0
            parts.append(data[pos + 4 : pos + 4 + n])
            pos += 4 + n
            seq = (seq + 1) & 0xFF
            if n < _textrows.MAX_PACKET:
                return b"".join(parts), data, pos, seq


# --------------------------------------------------------------------------- ranges


@dataclass
class KeyRange:
    """Keys in ``(after, upto]`` of one table (None: unbounded on that side)."""

    range_id: int
    schema: str
    table: str
    after: Key | None
    upto: Key | None
    estimated_rows: int = 0


MAX_SPLIT_DEPTH = 5
ID_BITS = 16
CHILD_BITS = 8


def child_range_id(parent_id: int, depth: int, index: int) -> int:
    """A child's id: the parent's id with the child number appended (unique by construction)."""
    if index < 1 or index >= 1 << CHILD_BITS:
        raise ValueError(f"child index {index} out of range 1..{(1 << CHILD_BITS) - 1}")
    return parent_id | (index << (ID_BITS + CHILD_BITS * depth))


def range_depth(range_id: int) -> int:
    """How many splits produced this range (0 for a planned range)."""
    rest = range_id >> ID_BITS
    d = 0
    while rest:
        rest >>= CHILD_BITS
        d += 1
    return d


def estimate_rows(conn: Any, info: TableInfo) -> int:
    """InnoDB's row estimate (information_schema.TABLES.TABLE_ROWS)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (info.schema, info.table),
        )
        row = cur.fetchone()
    return int(row[0] or 0) if row else 0


def sample_boundaries(
    conn: Any, info: TableInfo, step: int, after: Key | None = None, upto: Key | None = None, limit: int = 0
) -> tuple[list[Key], int]:
    """Keys every ``step`` rows of ``(after, upto]`` in key order, and the row count of the last piece.

    Keyset steps (``WHERE key > prev ORDER BY key LIMIT 1 OFFSET step-1``) read each index entry once.
    ``limit`` > 0 stops after that many boundaries.
    """
    cols = info.handle_key
    if not cols:
        raise SchemaError(f"table {info.schema}.{info.table} has no handle key to split by")
    keys = ", ".join(column_expr(info, c) for c in cols)
    order = ", ".join(quote(c) for c in cols)
    bounds: list[Key] = []
    prev = after
    with conn.cursor() as cur:
        while True:
            where, params = range_predicate(cols, prev, upto)
            cur.execute(
                f"SELECT {keys} FROM {table_ref(info)} WHERE {where} ORDER BY {order} LIMIT 1 OFFSET %s",
                [*params, step - 1],
            )
            row = cur.fetchone()
            if row is None:
                break
            k = tuple(row)
            if upto is not None and k == tuple(upto):
                break
            bounds.append(k)
            prev = k
            if limit and len(bounds) >= limit:
                break
        where, params = range_predicate(cols, prev, upto)
        cur.execute(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {table_ref(info)} WHERE {where} LIMIT %s) x",
            [*params, step],
        )
        got = cur.fetchone()
    return bounds, int(got[0]) if got else 0


def plan_table_ranges(conn: Any, info: TableInfo, range_rows: int, first_id: int) -> list[KeyRange]:
    """Split a table into ranges of about ``range_rows`` rows by its handle key (one range without a key)."""
    if not info.handle_key:
        log.warning(
            "table %s.%s has no primary key or NOT NULL unique key: it is read as one range in one "
            "consistent read (no parallelism, no resume inside it)",
            info.schema,
            info.table,
        )
        return [KeyRange(first_id, info.schema, info.table, None, None, estimate_rows(conn, info))]
    bounds, last = sample_boundaries(conn, info, max(1, range_rows))
    out: list[KeyRange] = []
    prev: Key | None = None
    for i, b in enumerate(bounds):
        out.append(KeyRange(first_id + i, info.schema, info.table, prev, b, range_rows))
        prev = b
    out.append(KeyRange(first_id + len(bounds), info.schema, info.table, prev, None, last))
    return out


def split_remaining(
    conn: Any, info: TableInfo, parent_id: int, after: Key | None, upto: Key | None, range_rows: int
) -> list[KeyRange]:
    """Hand the key space ``(after, upto]`` of a range that grew too large to child ranges."""
    depth = range_depth(parent_id)
    bounds, last = sample_boundaries(conn, info, max(1, range_rows), after, upto, limit=(1 << CHILD_BITS) - 2)
    out: list[KeyRange] = []
    prev = after
    for i, b in enumerate(bounds, start=1):
        out.append(
            KeyRange(child_range_id(parent_id, depth, i), info.schema, info.table, prev, b, range_rows)
        )
        prev = b
    out.append(
        KeyRange(child_range_id(parent_id, depth, len(bounds) + 1), info.schema, info.table, prev, upto, last)
    )
    return out


def chunk_sql(info: TableInfo, after: Key | None, upto: Key | None) -> tuple[str, list[Any]]:
    """The statement of a chunk of ``(after, upto]`` in key order (its last parameter is the row limit)."""
    cols = info.handle_key
    where, params = range_predicate(cols, after, upto)
    order = ", ".join(quote(c) for c in cols)
    return (
        f"SELECT {select_list(info)} FROM {table_ref(info)} WHERE {where} ORDER BY {order} LIMIT %s",
        params,
    )


def read_chunk(
    conn: Any, info: TableInfo, after: Key | None, upto: Key | None, limit: int
) -> list[tuple[Any, ...]]:
    """Up to ``limit`` raw rows of ``(after, upto]`` in key order (one plain consistent read).

    The reference reader (PyMySQL's parsing; ``RowConverter`` converts its rows); ``read_values`` is the fast one.
    """
    sql, params = chunk_sql(info, after, upto)
    with conn.cursor() as cur:
        cur.execute(sql, [*params, limit])
        return list(cur.fetchall())


def read_values(
    conn: Any, reader: TextRowReader, after: Key | None, upto: Key | None, limit: int
) -> list[tuple[Any, ...]]:
    """``read_chunk`` with its rows converted as ``RowConverter`` converts them, parsed in C (``reader.usable``)."""
    sql, params = chunk_sql(reader.info, after, upto)
    with conn.cursor() as cur:
        text = cur.mogrify(sql, [*params, limit])
    return reader.select(conn, text)


def consistent_read_all(conn: Any, info: TableInfo, batch: int) -> Iterator[tuple[str, int] | list[Any]]:
    """A whole table in one consistent read: first its exact binlog position (file, pos), then row batches."""
    import pymysql

    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {str(r[0]).lower(): str(r[1]) for r in cur.fetchall()}
        if "binlog_snapshot_file" not in status:
            raise SchemaError(
                f"table {info.schema}.{info.table} has no primary key or NOT NULL unique key and the "
                "upstream does not report binlog_snapshot_file/position (MariaDB does); add a primary key"
            )
        yield (status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))
        cur.execute(f"SELECT {select_list(info)} FROM {table_ref(info)}")
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            yield list(rows)
        cur.execute("COMMIT")


# --------------------------------------------------------------------------- corrections


def touched_keys(ev: RowChange, key_index: Sequence[int]) -> list[tuple[Key, tuple[Any, ...] | None]]:
    """(key, the row under that key just before the event) for every key an event touches.

    INSERT: the new key did not exist; DELETE: the key held ``before``; UPDATE: the old key held
    ``before`` and, when the key changed, the new key did not exist just before.
    """
    if ev.op == "I":
        assert ev.after is not None
        return [(tuple(ev.after[i] for i in key_index), None)]
    assert ev.before is not None
    k_before = tuple(ev.before[i] for i in key_index)
    if ev.op == "D":
        return [(k_before, ev.before)]
    assert ev.after is not None
    k_after = tuple(ev.after[i] for i in key_index)
    if k_after == k_before:
        return [(k_before, ev.before)]
    return [(k_before, ev.before), (k_after, None)]


@dataclass
class Correction:
    """The state at S of one touched key: its row, or None when it did not exist."""

    schema: str
    table: str
    key: str
    commit_ts: int
    seq: int
    row: tuple[Any, ...] | None


def first_events(
    events: Iterable[RowChange], key_index_of: Callable[[str, str], Sequence[int] | None]
) -> dict[tuple[str, str, str], Correction]:
    """For each touched (schema, table, key token) the correction from its first event."""
    out: dict[tuple[str, str, str], Correction] = {}
    for ev in events:
        idx = key_index_of(ev.schema, ev.table)
        if not idx:
            continue
        for k, row in touched_keys(ev, idx):
            tok = key_token(k)
            slot = (ev.schema, ev.table, tok)
            cur = out.get(slot)
            if cur is None or (ev.commit_ts, ev.seq) < (cur.commit_ts, cur.seq):
                out[slot] = Correction(ev.schema, ev.table, tok, ev.commit_ts, ev.seq, row)
    return out


def state_at_handover(
    snapshot: Iterable[tuple[str, str, str, tuple[Any, ...]]],
    corrections: dict[tuple[str, str, str], Correction],
) -> list[tuple[str, str, tuple[Any, ...]]]:
    """(schema, table, row) at S from snapshot rows (schema, table, key token, row) and corrections.

    The reference implementation of what the Spark job does with an anti-join and a union.
    """
    out = [(s, t, row) for s, t, k, row in snapshot if (s, t, k) not in corrections]
    out.extend((c.schema, c.table, c.row) for c in corrections.values() if c.row is not None)
    return out


@dataclass
class MultisetDelta:
    """Row changes of a key-less table between S and its read: what to take out and put back."""

    added: Counter[str] = field(default_factory=Counter)
    removed: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    def add(self, ev: RowChange) -> None:
        """Account for one change made after S (and before the read)."""
        if ev.op in ("I", "U"):
            assert ev.after is not None
            self.added[key_token(ev.after)] += 1
        if ev.op in ("D", "U"):
            assert ev.before is not None
            self.removed.setdefault(key_token(ev.before), []).append(ev.before)

    def net(self) -> tuple[Counter[str], list[tuple[Any, ...]]]:
        """(copies to drop from the read per row token, rows to add back)."""
        drop: Counter[str] = Counter()
        back: list[tuple[Any, ...]] = []
        tokens = set(self.added) | set(self.removed)
        for tok in tokens:
            d = len(self.removed.get(tok, ())) - self.added.get(tok, 0)
            if d < 0:
                drop[tok] = -d
            elif d > 0:
                back.extend(self.removed[tok][:d])
        return drop, back


def undo_changes(rows: Iterable[tuple[Any, ...]], delta: MultisetDelta) -> Iterator[tuple[Any, ...]]:
    """The multiset of rows at S from the rows at the read time R and the changes in (S, R]."""
    drop, back = delta.net()
    for row in rows:
        if drop:
            tok = key_token(row)
            n = drop.get(tok, 0)
            if n:
                if n == 1:
                    del drop[tok]
                else:
                    drop[tok] = n - 1
                continue
        yield row
    if drop:
        raise SchemaError(
            f"the snapshot of a key-less table lacks {sum(drop.values())} row(s) that the binlog says were "
            "written after the handover point; the table changed outside the binlog (sql_log_bin=0?)"
        )
    yield from back


# --------------------------------------------------------------------------- records rendered by the upstream


@dataclass
class RenderedChunk:
    """One chunk of a range whose CSV records the upstream rendered (``codec.csv_sql``)."""

    records: bytes
    """The records, each with its terminator (the key is in field ``TableRecordSQL.key_field``)."""
    rows: int
    """How many records."""
    others: list[tuple[Any, ...]]
    """Raw rows of the chunk the upstream cannot render exactly (read as ``read_chunk`` reads)."""
    upto: Key | None
    """The chunk's inclusive upper key bound (the range's own for its last chunk)."""
    last: bool
    """True for the range's last chunk."""


class ChunkTooLarge(Exception):
    """The rendered records of a chunk do not fit in one result value (``max_allowed_packet``)."""


def _pct(sql: str) -> str:
    """SQL text with ``%`` doubled, for a statement executed with parameters."""
    return sql.replace("%", "%%")


RENDERED_CHUNK_MAX_BYTES = 64 << 20
"""The most a rendered chunk may hold by default (the upstream builds it in memory, once per reading task)."""


def records_session(conn: Any, cap: int = RENDERED_CHUNK_MAX_BYTES) -> int:
    """Let GROUP_CONCAT return a whole rendered chunk; the byte limit of one (``max_allowed_packet``, at most ``cap``)."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@max_allowed_packet")
        row = cur.fetchone()
        limit = min(int(row[0]) if row else 16 << 20, cap)
        cur.execute("SET SESSION group_concat_max_len = %s", [limit])
    return limit


def read_rendered_chunk(
    conn: Any, info: TableInfo, rec: Any, after: Key | None, upto: Key | None, limit: int, max_bytes: int
) -> RenderedChunk:
    """Up to ``limit`` rows of ``(after, upto]`` as records rendered by the upstream, in one consistent read.

    ``rec`` is the table's ``codec.csv_sql.TableRecordSQL``. The chunk's upper bound is found
    first (an index-only keyset step), then one aggregate returns every record of the chunk.
    ``ChunkTooLarge`` when they exceed ``max_bytes`` (the caller reads fewer rows at a time).
    """
    cols = info.handle_key
    order = _pct(", ".join(quote(c) for c in cols))
    ref, record, exact, key = (_pct(s) for s in (table_ref(info), rec.record, rec.exact, rec.key))
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        try:
            where, params = range_predicate(cols, after, upto)
            cur.execute(
                f"SELECT {order} FROM {ref} WHERE {where} ORDER BY {order} LIMIT 1 OFFSET %s",
                [*params, limit - 1],
            )
            row = cur.fetchone()
            hi = tuple(row) if row is not None else upto
            where, params = range_predicate(cols, after, hi)
            if rec.exact == "1":
                select = f"COUNT(*), NULL, CAST(GROUP_CONCAT({record} SEPARATOR '') AS BINARY)"
            else:
                # One scan, ``exact`` evaluated twice a row: GROUP_CONCAT skips the NULLs.
                select = (
                    f"COUNT(*), CAST(GROUP_CONCAT(IF({exact}, NULL, {key}) SEPARATOR ',') AS CHAR), "
                    f"CAST(GROUP_CONCAT(IF({exact}, {record}, NULL) SEPARATOR '') AS BINARY)"
                )
            cur.execute(f"SELECT {select} FROM {ref} WHERE {where}", params)
            got = cur.fetchone()
            count = int(got[0]) if got else 0
            inexact = [int(k) for k in got[1].split(",")] if got and got[1] else []
            records: bytes = bytes(got[2] or b"") if got else b""
            if len(records) >= max_bytes or len(got[1] or "") >= max_bytes:
                raise ChunkTooLarge(
                    f"rows of {info.schema}.{info.table} render to ≥ {max_bytes} bytes in one chunk"
                )
            count -= len(inexact)
            others: list[tuple[Any, ...]] = []
            if inexact:
                cur.execute(
                    f"SELECT {_pct(select_list(info))} FROM {ref} WHERE {key} IN ({', '.join(['%s'] * len(inexact))}) "
                    f"ORDER BY {order}",
                    inexact,
                )
                others = list(cur.fetchall())
        finally:
            cur.execute("COMMIT")
    return RenderedChunk(records, count, others, hi, row is None)
