"""Executor side of the storage sink: buffer rows per data directory, write files + index.

For each (schema, table, version) directory a writer keeps one buffer; a buffer
becomes a file when it reaches ``file-size`` (never inside a transaction with
``transaction-atomicity = "table"``) and at ``close()``. Every file is preceded
by its ``meta/CDC.index``, so a restarted writer continues the numbering.

When several segments of a batch are written at once (``WriterContext.segments
> 1``), a writer cannot know its files' numbers: it writes them under the
hidden staging directory instead (``STAGING_DIR``), and the driver's commit
(``publish_staged``) numbers and moves them in segment order.

Date directories (``date-separator``) come from the batch, never from a clock: every file of a
table in a batch goes to the date of the commit_ts of the table's first row in the batch
(``commit_date``; staged files of later segments are moved to that date at publish time).
Batches follow commit order, so a table's dates never go backwards, and a replayed batch lands
in the directory it landed in the first time.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.errors import SchemaError, SinkError
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.base import PartitionWriter, WriterContext
from sparkcdc.sink.objectstore import AtomicFile, StorageBackend
from sparkcdc.sink.storage.config import StorageSettings
from sparkcdc.sink.storage.encoding import RowEncoder, split_update
from sparkcdc.sink.storage.layout import (
    DataDir,
    commit_date,
    data_file_name,
    parse_index_file,
    parse_schema_file_path,
    schema_meta_dir,
)
from sparkcdc.sink.storage.replay import PublishedTail, published_tail, tail_has_commit_ts
from sparkcdc.sink.storage.schema_file import TableDefinition

log = logging.getLogger(__name__)

STAGING_DIR = ".sparkcdc-staging"
"""Files of parallel segments wait here for their number; hidden, like every dot path of the layout."""
COALESCE_ROWS = 4096
"""Encoded rows a buffer keeps before they go into its file, joined (each small bytes object costs
~40 bytes beyond its data, and each write a call): a writer holds at most this many rows per
table, whatever ``file-size`` is (64 MiB by default)..."""
COALESCE_BYTES = 4 * 1024 * 1024
"""... and at most this many bytes of them (rows of large values reach it first)."""


def staging_dir(changefeed_id: str, batch_id: int) -> str:
    """The staging directory of one batch of a changefeed."""
    return f"{STAGING_DIR}/{changefeed_id}/b{batch_id}"


# (storage root, schema, table, row version) -> the version directory its files go to.
# Schema files are immutable once written, so the answer can be kept per process.
_VERSION_CACHE: dict[tuple[str, str, str, str, int], int] = {}
_VERSION_LOCK = threading.Lock()


def ensure_table_schema(
    backend: StorageBackend, info: TableInfo, version: int, output_column_id: bool = False
) -> int:
    """TiCDC's ``CheckOrWriteSchema``: the version directory for a table's rows at ``version``.

    The exact schema file exists → ``version``; else the newest schema file with
    the same checksum → its version; else (the table existed before the
    changefeed) the schema file is written now with an empty Query.
    """
    key = (backend.scheme, backend.root, info.schema, info.table, version)
    with _VERSION_LOCK:
        cached = _VERSION_CACHE.get(key)
    if cached is not None:
        return cached
    d = TableDefinition.from_table_info(info, version, output_column_id)
    checksum = d.checksum()
    if version > 0 and backend.exists(d.path()):
        resolved = version
    else:
        best = 0
        for name in backend.list_dir(schema_meta_dir(info.schema, info.table)):
            parsed = parse_schema_file_path(f"{schema_meta_dir(info.schema, info.table)}/{name}")
            if parsed and parsed[3] == checksum:
                best = max(best, parsed[2])
        if best:
            resolved = best
        elif version > 0:
            backend.write(d.path(), d.marshal())
            resolved = version
        else:
            raise SchemaError(
                f"table {info.schema}.{info.table} has no table version (0) and no schema file in "
                f"storage matches its shape; the capture must give rows the commit_ts of the DDL (or "
                f"of the changefeed start) that produced the table shape"
            )
    with _VERSION_LOCK:
        _VERSION_CACHE[key] = resolved
    return resolved


@dataclass
class _Buffer:
    """Encoded rows waiting for one data directory."""

    schema: str
    table: str
    version: int
    info: TableInfo
    chunks: list[bytes] = field(default_factory=list)
    """Encoded rows not yet in ``file``."""
    held: int = 0
    """Bytes in ``chunks``."""
    file: AtomicFile | None = None
    """The data file being written (started at the first ``COALESCE_ROWS`` rows, or at flush)."""
    path: str = ""
    """Where ``file`` goes (a staged or a final path)."""
    date: str = ""
    """The date directory of every file of the buffer (from the first row's commit_ts, see ``commit_date``)."""
    size: int = 0
    rows: int = 0
    last_commit_ts: int = 0
    full: bool = False
    tail: PublishedTail | None = None
    """In a batch that may be a replay: what an earlier attempt published in the directory."""


class StorageWriter(PartitionWriter):
    """Writes one route group of one batch into data files."""

    _warned_untimed = False
    """A replay without commit_ts in the records was reported (once per process)."""

    def __init__(self, settings: StorageSettings, ctx: WriterContext, encoder: RowEncoder) -> None:
        self.settings = settings
        self.backend = settings.backend
        self.ctx = ctx
        self.encoder = encoder
        self._buffers: dict[tuple[str, str, int], _Buffer] = {}
        # (schema, table) -> date directory of the table's files in this batch (its first row's).
        self._dates: dict[tuple[str, str], str] = {}
        # (schema, table, row version) -> (shape, its buffer, its encoder): one lookup per row.
        self._bound: dict[tuple[str, str, int], tuple[TableInfo, _Buffer, Any]] = {}
        self._next_index: dict[str, int] = {}
        self._files: list[str] = []
        self._staged: list[list[Any]] = []
        self._stage_seq = 0
        self._stage_prefix = (
            f"{staging_dir(ctx.changefeed_id, ctx.batch_id)}/s{ctx.segment:06d}-{uuid.uuid4().hex[:12]}"
            if ctx.segments > 1
            else ""
        )
        self._rows = 0
        self._bytes = 0
        self._max_commit_ts = 0

    def write(self, row: RowChange, table: TableInfo) -> None:
        """Encode a row into its directory's buffer (flushing a full buffer between transactions)."""
        bound = self._bound.get((row.schema, row.table, row.table_version))
        if bound is None or bound[0] is not table:
            version = ensure_table_schema(
                self.backend, table, row.table_version, self.settings.output_column_id
            )
            key = (row.schema, row.table, version)
            buf = self._buffers.get(key)
            if buf is None:
                date = self._dates.get((row.schema, row.table))
                if date is None:
                    s = self.settings
                    date = self._dates[(row.schema, row.table)] = commit_date(
                        s.date_separator, row.commit_ts, s.time_zone
                    )
                buf = self._buffers[key] = _Buffer(row.schema, row.table, version, table, date=date)
                if self.ctx.replay:
                    buf.tail = self._published_tail(buf)
            bound = self._bound[(row.schema, row.table, row.table_version)] = (
                table,
                buf,
                self.encoder.table_encoder(table, row),
            )
        _, buf, encode = bound
        if buf.tail is not None and self._published(buf, row, table, encode):
            return
        if buf.full and (
            self.settings.transaction_atomicity != "table" or row.commit_ts != buf.last_commit_ts
        ):
            self._flush(buf)
        if buf.rows and row.commit_ts < buf.last_commit_ts:
            raise SchemaError(
                f"rows for {row.schema}.{row.table} arrived out of commit order "
                f"({row.commit_ts} after {buf.last_commit_ts}); the pipeline must sort each group by "
                f"(commit_ts, seq)"
            )
        if row.op != "U" or self.settings.output_raw_change_event:
            data = encode(row)
            buf.chunks.append(data)
            buf.held += len(data)
        else:
            for r in split_update(row, table):
                data = encode(r)
                buf.chunks.append(data)
                buf.held += len(data)
        if len(buf.chunks) >= COALESCE_ROWS or buf.held >= COALESCE_BYTES:
            self._write_held(buf)
        buf.rows += 1
        buf.last_commit_ts = row.commit_ts
        if row.commit_ts > self._max_commit_ts:
            self._max_commit_ts = row.commit_ts
        if buf.size + buf.held >= self.settings.file_size:
            buf.full = True

    def _published_tail(self, buf: _Buffer) -> PublishedTail | None:
        """What is published at the end of the buffer's directory (see ``replay``)."""
        s, enc = self.settings, self.encoder
        if not tail_has_commit_ts(s.protocol, enc.config, enc.enable_tidb_extension):
            if not StorageWriter._warned_untimed:
                StorageWriter._warned_untimed = True
                log.info(
                    "storage sink: the records carry no commit_ts, so a batch run again after a restart "
                    "publishes again what its earlier attempt published (at least once); set [sink.csv] "
                    "include-commit-ts = true (or enable-tidb-extension=true for canal-json) to skip it"
                )
            return None
        directory = DataDir(buf.schema, buf.table, buf.version, None, buf.date)
        return published_tail(s.backend, directory, s.protocol, enc.config, s.extension, s.file_index_width)

    def _published(self, buf: _Buffer, row: RowChange, table: TableInfo, encode: Any) -> bool:
        """Whether an earlier attempt of this batch published ``row`` already (then it is skipped)."""
        tail = buf.tail
        assert tail is not None
        if row.commit_ts < tail.commit_ts:
            return True
        if row.commit_ts == tail.commit_ts and tail.size > 0:
            rows = (
                [row] if row.op != "U" or self.settings.output_raw_change_event else split_update(row, table)
            )
            tail.size -= sum(len(encode(r)) for r in rows)
            if tail.size < 0:
                raise SinkError(
                    f"{tail.path} ends with part of a record of the transaction at commit_ts "
                    f"{row.commit_ts} that this replay writes differently; the directory was written by "
                    "another configuration or changed by hand: stop the changefeed and check it"
                )
            return True
        buf.tail = None
        return False

    def close(self) -> dict[str, Any]:
        """Write every buffer as a file; return the files written."""
        for buf in self._buffers.values():
            self._flush(buf)
        self._buffers.clear()
        self._bound.clear()
        return {
            "writer_id": self.ctx.writer_id,
            "files": list(self._files),
            "staged": list(self._staged),
            "rows": self._rows,
            "bytes": self._bytes,
            "max_commit_ts": self._max_commit_ts,
        }

    def abort(self) -> None:
        """Drop buffered rows and files being written; files already written stay (a retry writes new ones)."""
        for buf in self._buffers.values():
            if buf.file is not None:
                buf.file.discard()
        self._buffers.clear()
        self._bound.clear()

    def _start_file(self, buf: _Buffer) -> AtomicFile:
        """Open the buffer's next data file and write its header."""
        directory = DataDir(buf.schema, buf.table, buf.version, None, buf.date)
        if self._stage_prefix:
            # Numbered and moved into place by the driver's commit, after every earlier segment's files.
            self._stage_seq += 1
            buf.path = f"{self._stage_prefix}/{self._stage_seq:06d}.{self.settings.extension}"
        else:
            index = self._allocate_index(directory)
            name = data_file_name(index, self.settings.extension, self.settings.file_index_width)
            # The index goes first: a crash between the two leaves an index naming a missing
            # file, which the next writer reuses instead of skipping a number.
            self.backend.write(directory.index_path, (name + "\n").encode())
            buf.path = f"{directory.path}/{name}"
        f = buf.file = self.backend.open_atomic(buf.path)
        header = self.encoder.header(buf.info)
        if header:
            f.write(header)
            buf.size += len(header)
        return f

    def _write_held(self, buf: _Buffer) -> AtomicFile:
        """Write the rows the buffer holds into its file (started here if need be), joined."""
        f = buf.file or self._start_file(buf)
        if buf.chunks:
            f.write(b"".join(buf.chunks))
            buf.chunks.clear()
            buf.size += buf.held
            buf.held = 0
        return f

    def _flush(self, buf: _Buffer) -> None:
        if not buf.chunks and buf.file is None:
            buf.full = False
            return
        f = self._write_held(buf)
        f.commit()
        buf.file = None
        if self._stage_prefix:
            self._staged.append([buf.schema, buf.table, buf.version, buf.date, buf.path])
        else:
            self._files.append(buf.path)
        self._rows += buf.rows
        self._bytes += buf.size
        buf.size = 0
        buf.rows = 0
        buf.full = False

    def _allocate_index(self, directory: DataDir) -> int:
        key = directory.path
        nxt = self._next_index.get(key)
        if nxt is None:
            nxt = next_file_index(
                self.backend, directory, self.settings.extension, self.settings.file_index_width
            )
        self._next_index[key] = nxt + 1
        return nxt


def next_file_index(backend: StorageBackend, directory: DataDir, extension: str, width: int) -> int:
    """The number of the next data file in a directory, from its ``meta/CDC.index``.

    No index → 1; the indexed file exists and is non-empty → its number + 1;
    otherwise (written index, lost data file) the indexed number is reused.
    """
    data = backend.read(directory.index_path)
    if data is None:
        return 1
    last = parse_index_file(data, extension)
    size = backend.size(directory.file_path(last, extension, width))
    if size:
        return last + 1
    return max(last, 1)


def publish_staged(
    settings: StorageSettings, staged: list[list[Any]], checkpoint_ts: int | None = None
) -> list[str]:
    """Driver: number and move staged files into their directories, in the given order.

    Each entry is ``[schema, table, version, date, staged path]``. As for a direct write, a
    directory's ``meta/CDC.index`` names the file before the file appears. Every file of a table
    goes to one date directory: that of the table's first entry (the earliest segment's first
    row); entries without a date (``None``: staged by ``stage_records``) take the date of
    ``checkpoint_ts``, the batch's commit_ts.
    """
    backend = settings.backend
    ext, width = settings.extension, settings.file_index_width
    next_index: dict[str, int] = {}
    dates: dict[tuple[str, str], str] = {}
    published = []
    for schema, table, version, staged_date, path in staged:
        date = dates.get((schema, table))
        if date is None:
            if staged_date is None:
                if checkpoint_ts is None:
                    raise SchemaError(
                        f"staged file {path} of {schema}.{table} has no date directory and the batch "
                        "no commit_ts to date it by; pass the batch's checkpoint_ts to publish_staged"
                    )
                staged_date = commit_date(settings.date_separator, checkpoint_ts, settings.time_zone)
            date = dates[(schema, table)] = staged_date
        directory = DataDir(schema, table, int(version), None, date)
        nxt = next_index.get(directory.path)
        if nxt is None:
            nxt = next_file_index(backend, directory, ext, width)
        next_index[directory.path] = nxt + 1
        name = data_file_name(nxt, ext, width)
        backend.write(directory.index_path, (name + "\n").encode())
        final = f"{directory.path}/{name}"
        backend.move(path, final)
        published.append(final)
    return published


def cut_records(records: list[bytes], file_size: int) -> list[tuple[bytes, int]]:
    """Encoded records joined into pieces of at most ``file_size`` bytes (a longer record stands alone)."""
    pieces: list[tuple[bytes, int]] = []
    cut: list[bytes] = []
    size = 0
    for r in records:
        if cut and size + len(r) > file_size:
            pieces.append((b"".join(cut), len(cut)))
            cut, size = [], 0
        cut.append(r)
        size += len(r)
    if cut:
        pieces.append((b"".join(cut), len(cut)))
    return pieces


def stage_records(
    settings: StorageSettings,
    changefeed_id: str,
    batch_id: int,
    name: str,
    info: TableInfo,
    version: int,
    pieces: list[tuple[bytes, int]],
) -> list[tuple[list[Any], int]]:
    """Executor: write ``(encoded records, how many)`` pieces of one table as staged data files.

    Returns ``(staged entry, records)`` per file. The files get their numbers and their date
    directory (that of the batch's commit_ts) when the batch commits (``publish_staged``), like
    the files of parallel segments.
    """
    backend = settings.backend
    resolved = ensure_table_schema(backend, info, version, settings.output_column_id)
    date = None
    out = []
    for i, (data, n) in enumerate(pieces):
        path = f"{staging_dir(changefeed_id, batch_id)}/{name}-{i:04d}.{settings.extension}"
        backend.write(path, data)
        out.append(([info.schema, info.table, resolved, date, path], n))
    return out
