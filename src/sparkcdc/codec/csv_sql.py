"""CSV records rendered by the upstream server: one SQL expression per table giving ``CSVEncoder``'s bytes.

An initial snapshot to a CSV storage sink does not need a row's Python values: every row
it copies becomes one ``I`` record at the handover ts. For the common column types the
upstream can render that record itself (``CONCAT`` of the quoted text of each value), so
a range chunk arrives as one ``GROUP_CONCAT`` blob that is written to a file as it is,
with no per-row work in Python.

The expression yields exactly the bytes ``CSVEncoder.encode_row`` writes for the row the
snapshot reader would have converted (``capture.snapshot.RowConverter``): each column's
SQL is its kind's rule in ``csv_kinds``, the table that also gives the encoder its
formatters. A table or a setting it cannot render exactly is refused with a reason, and
the snapshot reads that table the ordinary way. Values it cannot render exactly row by row (a DOUBLE whose Go
``%v`` form uses an exponent) are excluded by ``TableRecordSQL.exact`` and read the
ordinary way too.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcdc.codec.csv import CSVDecoder, CSVEncoder
from sparkcdc.codec.csv_kinds import FieldStyle, SQLStyle, column_sql, sql_string
from sparkcdc.config.replica import CSVConfig
from sparkcdc.model import TableInfo
from sparkcdc.model.schema import INT_TYPES


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class TableRecordSQL:
    """How the upstream renders the snapshot records of one table."""

    record: str
    """The SQL expression of one record, terminator included (utf8mb4 text)."""
    exact: str
    """A predicate true for the rows ``record`` renders exactly; ``"1"`` when it renders every row."""
    key: str
    """The (one, integer) handle-key column, quoted."""
    key_field: int
    """The position of the handle-key field in a record (its text is the key's ``key_token``)."""
    key_head: str = ""
    """When the key is the first column: the constant text every record starts with, up to the key."""


@dataclass(frozen=True)
class ServerCSV:
    """The CSV options an upstream-rendered record needs (picklable; built from the sink's encoder)."""

    delimiter: str
    quote: str
    null: str
    terminator: str
    include_commit_ts: bool
    output_old_value: bool
    binary_encoding: str

    @classmethod
    def from_encoder(cls, enc: CSVEncoder) -> tuple[ServerCSV | None, str]:
        """The options of ``enc``, or None and why its records cannot be rendered by the upstream."""
        if not enc.quote:
            return None, "[sink.csv] quote is empty (values are backslash-escaped)"
        if enc.output_handle_key:
            return None, "[sink.csv] output-handle-key is on"
        if enc.output_field_header:
            return None, "[sink.csv] output-field-header is on"
        if enc.quote in enc.null or enc.quote in enc.terminator:
            return None, "[sink.csv] quote appears in the null string or the terminator"
        if any(ch in enc.null for ch in enc.terminator):
            return None, "the terminator shares characters with [sink.csv] null"
        return (
            cls(
                enc.delimiter,
                enc.quote,
                enc.null,
                enc.terminator,
                enc.include_commit_ts,
                enc.output_old_value,
                enc.binary_encoding,
            ),
            "",
        )

    def table(self, info: TableInfo, commit_ts: int, time_zone: str) -> tuple[TableRecordSQL | None, str]:
        """The record expression of ``info``'s rows at ``commit_ts``, or None and why not."""
        idx = info.handle_key_index
        if len(idx) != 1 or info.columns[idx[0]].type not in INT_TYPES:
            return None, "its handle key is not one integer column"
        from sparkcdc.capture.rowcodec import TimestampRenderer

        # The reading session runs in UTC: TIMESTAMP's text is the rendering only in UTC.
        utc = TimestampRenderer(time_zone).utc
        string = FieldStyle(self.quote, self.delimiter, self.null, self.binary_encoding).string()
        head = [string(v) for v in ("I", info.table, info.schema)]
        if self.include_commit_ts:
            head.append(str(commit_ts))
        if self.output_old_value:
            head.append("false")
        style = SQLStyle(self.quote, self.binary_encoding, utc)
        parts: list[str] = []
        exact: list[str] = []
        for c in info.columns:
            field = column_sql(c, _ident(c.name), style)
            if field is None:
                return None, f"column {c.name!r} ({c.type}) is not rendered by the upstream"
            value = field.value
            if field.exact:
                exact.append(field.exact)
            if c.nullable:
                # CONCAT of a NULL is NULL
                value = f"IFNULL(CONCAT({value}), {sql_string(self.null)})"
            parts.append(value)
        d = sql_string(self.delimiter)
        record = f"CONCAT({f', {d}, '.join([sql_string(self.delimiter.join(head)), *parts])}, {sql_string(self.terminator)})"
        key = _ident(info.columns[idx[0]].name)
        key_head = self.delimiter.join(head) + self.delimiter if idx[0] == 0 else ""
        return TableRecordSQL(record, " AND ".join(exact) or "1", key, len(head) + idx[0], key_head), ""

    def decoder(self) -> CSVDecoder:
        """A decoder of these records (for reading a record's key back)."""
        return CSVDecoder(
            CSVConfig(delimiter=self.delimiter, quote=self.quote, null=self.null), self.terminator
        )


def split_records(blob: bytes, quote: bytes, terminator: bytes) -> list[bytes]:
    """The records of a blob of records: a terminator ends one where the quotes before it pair up.

    Every field that can hold the terminator or a quote is quoted (quotes doubled inside), so
    inside an open field the count of quotes since the record's start is odd.
    """
    out: list[bytes] = []
    start = 0
    n = len(blob)
    tl = len(terminator)
    while start < n:
        end = blob.find(terminator, start)
        while end >= 0 and blob.count(quote, start, end) % 2:
            end = blob.find(terminator, end + tl)
        if end < 0:
            raise ValueError(f"a record at byte {start} of the blob has no terminator")
        out.append(blob[start : end + tl])
        start = end + tl
    return out


def record_keys(records: list[bytes], decoder: CSVDecoder, key_field: int, key_head: str = "") -> list[str]:
    """The handle-key text of each record (``split_records``'s output).

    With ``key_head`` (the key is the first column) the key is the text between that constant
    head and the next delimiter; otherwise each record is parsed.
    """
    out = []
    head = key_head.encode("utf-8", "surrogateescape")
    delim = decoder.delimiter.encode()
    start = len(head)
    for r in records:
        if head and r.startswith(head):
            end = r.find(delim, start)
            out.append(r[start : end if end >= 0 else len(r) - len(decoder.terminator)].decode())
            continue
        fields = next(decoder.records(r))
        text = fields[key_field][0]
        if text is None:
            raise ValueError(f"a record has no key in field {key_field}: {r[:200]!r}")
        out.append(text)
    return out
