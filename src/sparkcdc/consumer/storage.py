"""Replay storage-sink files (csv or canal-json) into MySQL, like TiCDC's storage consumer.

Each round:

1. read the root ``metadata`` checkpoint C first (every row with commit_ts ≤ C
   is in storage by then), then list the storage;
2. order the work by table version: a schema file (its ``Query`` runs as DDL)
   comes before the data directories of the same version; data directories by
   (version, partition, date, schema, table), files by number;
3. apply rows in file order, up to C: a row with commit_ts > C stops its
   directory until a later round; rows with commit_ts ≤ the table's watermark
   (the C of the last round that finished the table) or below the largest
   commit_ts already applied to the table are replays of a retried batch and are
   dropped (at-least-once upstream, deduplicated here);
4. record progress in the downstream table
   ``<progress-schema>.sparkcdc_consumer_progress`` (next file and row offset
   per directory, watermark and largest applied commit_ts per table, executed
   schema files), so a re-run continues where the last one stopped.

Rows are applied through ``sparkcdc.sink.mysql.applier.MySQLApplier``; rows
that may already be downstream (at or below the table's applied commit_ts, or
without a commit_ts) use safe mode (REPLACE / DELETE by key), so replaying is
idempotent for tables with a primary or NOT NULL unique key.

Files without commit_ts (csv without ``include-commit-ts``, canal-json without
``enable-tidb-extension``) are applied whole, file by file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import redact_uri
from sparkcdc.consumer.downstream import downstream_settings
from sparkcdc.consumer.progress import ProgressTable
from sparkcdc.errors import ConfigError, DecodeError, SinkError
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.mysql.applier import MySQLApplier
from sparkcdc.sink.mysql.config import parse_mysql_sink
from sparkcdc.sink.mysql.connection import connect
from sparkcdc.sink.mysql.statements import quote_ident_raw
from sparkcdc.sink.storage.config import StorageSettings
from sparkcdc.sink.storage.layout import (
    METADATA_FILE,
    DataDir,
    parse_data_path,
    parse_metadata,
    parse_schema_file_path,
)
from sparkcdc.sink.storage.schema_file import TableDefinition

log = logging.getLogger(__name__)

PROGRESS_TABLE = "sparkcdc_consumer_progress"
PROGRESS_COLUMNS = (
    "consumer_id VARCHAR(32) NOT NULL, kind VARCHAR(8) NOT NULL, item_hash CHAR(40) NOT NULL, "
    "item TEXT NOT NULL, file_index BIGINT NOT NULL DEFAULT 0, row_offset BIGINT NOT NULL DEFAULT 0, "
    "watermark BIGINT UNSIGNED NOT NULL DEFAULT 0, max_commit_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, "
    "updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), "
    "PRIMARY KEY (consumer_id, kind, item_hash)"
)
DEFAULT_PROGRESS_SCHEMA = "sparkcdc_consumer"
DEFAULT_SOURCE_WAIT = 600.0
"""Seconds a running consumer waits for the storage's first ``metadata`` file before it gives up."""
WAIT_REPORT = 30.0
"""Seconds between the lines a running consumer logs while it waits for the first ``metadata``."""
NO_TS_SAFE = 1 << 64
"""replicating_ts for rows without commit_ts: always safe mode."""


@dataclass
class RoundStats:
    """What one round did."""

    checkpoint_ts: int | None = None
    ddls: int = 0
    tables_created: int = 0
    files: int = 0
    rows: int = 0
    rows_dropped: int = 0
    rows_pending: int = 0
    dirs_waiting_for_schema: int = 0


@dataclass
class _DirProgress:
    file_index: int = 0
    row_offset: int = 0
    max_commit_ts: int = 0


@dataclass
class _TableProgress:
    watermark: int = 0


@dataclass
class _Progress:
    dirs: dict[str, _DirProgress] = field(default_factory=dict)
    tables: dict[str, _TableProgress] = field(default_factory=dict)
    ddls: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _SchemaFile:
    schema: str
    table: str
    version: int
    checksum: int
    path: str


class StorageConsumer:
    """Applies a storage sink's files to a downstream MySQL."""

    def __init__(
        self,
        upstream_uri: str,
        downstream_uri: str,
        config: ReplicaConfig | None = None,
        *,
        file_index_width: int = 20,
        progress_schema: str = DEFAULT_PROGRESS_SCHEMA,
    ) -> None:
        self.config = config or ReplicaConfig()
        self.settings = StorageSettings.from_uri(upstream_uri, self.config)
        self.backend = self.settings.backend
        self.protocol = self.settings.protocol
        self.file_index_width = file_index_width
        self.upstream = redact_uri(upstream_uri)
        self.consumer_id = hashlib.sha1(f"{self.backend.scheme}://{self.backend.root}".encode()).hexdigest()[
            :16
        ]
        self.downstream = downstream_settings(downstream_uri)
        if not progress_schema or "`" in progress_schema:
            raise ConfigError(f"invalid progress schema name {progress_schema!r}")
        self.progress_schema = progress_schema
        self.applier = MySQLApplier(
            self.downstream.conn,
            safe_mode=self.downstream.safe_mode,
            max_txn_row=self.downstream.max_txn_row,
            split_txn=self.downstream.transaction_atomicity != "table",
        )
        self._decoder: Any = None
        if self.protocol == "csv":
            from sparkcdc.codec.csv import CSVDecoder

            self._decoder = CSVDecoder.from_config(self.config)
        self._defs: dict[str, TableDefinition] = {}
        self._infos: dict[str, TableInfo] = {}
        self._progress = ProgressTable(self.progress_schema, PROGRESS_TABLE, PROGRESS_COLUMNS)

    # -- public --------------------------------------------------------------------------------

    def check_source(self) -> None:
        """Refuse a storage root that does not exist (a local path, a bucket) before any round."""
        if self.backend.scheme == "file":
            root = self.backend.root
            if not os.path.exists(root):
                raise ConfigError(
                    f"the storage directory {root!r} of --upstream-uri {self.upstream!r} does not exist; "
                    "give the directory of the changefeed's storage sink"
                )
            if not os.path.isdir(root):
                raise ConfigError(
                    f"the storage path {root!r} of --upstream-uri {self.upstream!r} is a file, not a "
                    "directory; give the directory of the changefeed's storage sink"
                )
            return
        self.backend.check()

    def run(
        self,
        flush_interval: float = 10.0,
        once: bool = False,
        stop: threading.Event | None = None,
        source_wait: float = DEFAULT_SOURCE_WAIT,
    ) -> RoundStats:
        """Run rounds every ``flush_interval`` seconds until ``stop`` is set (one round with ``once``).

        Without a ``metadata`` file the storage holds no sink output (yet): ``once`` refuses at
        once, otherwise the rounds wait at most ``source_wait`` seconds for it.
        """
        stop = stop or threading.Event()
        self.check_source()
        total = RoundStats()
        began = time.monotonic()
        said_waiting: float | None = None
        while True:
            started = time.monotonic()
            stats = self.run_once()
            if stats.checkpoint_ts is None and (once or started - began >= source_wait):
                waited = "" if once else f" after waiting {source_wait:g}s (--source-wait)"
                raise ConfigError(
                    f"no metadata file in {self.upstream!r}{waited}: it is not the output of a storage "
                    "sink, or the changefeed has not written its first checkpoint; check --upstream-uri"
                )
            if stats.checkpoint_ts is None and (
                said_waiting is None or started - said_waiting >= WAIT_REPORT
            ):
                said_waiting = started
                log.info(
                    "no metadata file in %r yet: waiting for the changefeed's first checkpoint "
                    "(gives up in %.0fs, --source-wait)",
                    self.upstream,
                    source_wait - (started - began),
                )
            for f in ("ddls", "tables_created", "files", "rows", "rows_dropped"):
                setattr(total, f, getattr(total, f) + getattr(stats, f))
            total.checkpoint_ts = stats.checkpoint_ts
            total.rows_pending = stats.rows_pending
            log.info(
                "storage consumer round: checkpoint %s, %d DDL, %d files, %d rows applied, %d dropped, %d pending",
                stats.checkpoint_ts,
                stats.ddls,
                stats.files,
                stats.rows,
                stats.rows_dropped,
                stats.rows_pending,
            )
            if once or stop.wait(max(0.0, flush_interval - (time.monotonic() - started))):
                return total

    def close(self) -> None:
        """Close the downstream connection."""
        self.applier.close()

    def __enter__(self) -> StorageConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run_once(self) -> RoundStats:
        """One round: apply everything in storage up to the ``metadata`` checkpoint."""
        stats = RoundStats()
        raw = self.backend.read(METADATA_FILE)
        if raw is None:
            log.debug("no metadata file in %s yet; nothing to apply", self.upstream)
            return stats
        checkpoint = parse_metadata(raw)
        stats.checkpoint_ts = checkpoint
        listing = self.backend.walk_files()
        progress = self._load_progress()

        schema_files: dict[tuple[str, str, int], _SchemaFile] = {}
        dir_files: dict[DataDir, list[tuple[int, str]]] = {}
        other_extensions: set[str] = set()
        for path in listing:
            sp = parse_schema_file_path(path)
            if sp is not None:
                sf = _SchemaFile(sp[0], sp[1], sp[2], sp[3], path)
                prev = schema_files.get((sf.schema, sf.table, sf.version))
                if prev is None or prev.path < path:
                    schema_files[(sf.schema, sf.table, sf.version)] = sf
                continue
            dp = parse_data_path(path, self.settings.date_separator)
            if dp is None:
                continue
            if dp[2] != self.settings.extension:
                other_extensions.add(dp[2])
                continue
            dir_files.setdefault(dp[0], []).append((dp[1], path))
        if other_extensions and not dir_files:
            found = ", ".join(sorted(other_extensions))
            raise ConfigError(
                f"{self.upstream!r} holds {found} data files and none with {self.settings.extension}, the "
                f"extension of protocol={self.protocol}; give the protocol the changefeed wrote with "
                "(protocol=csv or protocol=canal-json in --upstream-uri)"
            )

        work: list[tuple[tuple[Any, ...], Any]] = []
        for sf in schema_files.values():
            if sf.version <= checkpoint and sf.path not in progress.ddls:
                work.append(((sf.version, 0, -1, "", sf.schema, sf.table), sf))
        for d in dir_files:
            if d.version > checkpoint:
                continue  # every row of a newer version is newer than the checkpoint
            work.append(
                ((d.version, 1, -1 if d.partition is None else d.partition, d.date, d.schema, d.table), d)
            )
        work.sort(key=lambda w: w[0])

        blocked: set[str] = set()
        done_queries: set[tuple[int, str]] = set()
        for _, item in work:
            if isinstance(item, _SchemaFile):
                self._apply_schema_file(item, progress, done_queries, stats)
            else:
                key = _table_key(item.schema, item.table)
                dir_schema = schema_files.get((item.schema, item.table, item.version))
                if dir_schema is None:
                    # TiCDC's consumer waits for the schema file: it defines how to decode the rows.
                    stats.dirs_waiting_for_schema += 1
                    blocked.add(key)
                    continue
                if not self._apply_dir(
                    item, sorted(dir_files[item]), dir_schema, checkpoint, progress, stats
                ):
                    blocked.add(key)

        # Every row ≤ checkpoint of the other tables is applied: later copies are replays.
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            for d in dir_files:
                key = _table_key(d.schema, d.table)
                tp = progress.tables.setdefault(key, _TableProgress())
                if key not in blocked and tp.watermark < checkpoint:
                    tp.watermark = checkpoint
                    self._save_table(cur, key, tp)
        conn.commit()
        return stats

    # -- schema files --------------------------------------------------------------------------

    def _table_info(self, sf: _SchemaFile) -> TableInfo:
        """The table shape of a schema file, with the downstream table's character sets (the
        schema file names none; the applier writes non-UTF-8 text back as its bytes with them)."""
        info = self._infos.get(sf.path)
        if info is None:
            from sparkcdc.consumer.downstream import downstream_table, with_downstream_charsets

            info = self._definition(sf).to_table_info()
            if any(c.is_text for c in info.columns):
                info = with_downstream_charsets(info, downstream_table(self.applier, info.schema, info.table))
            self._infos[sf.path] = info
        return info

    def _definition(self, sf: _SchemaFile) -> TableDefinition:
        d = self._defs.get(sf.path)
        if d is None:
            data = self.backend.read(sf.path)
            if data is None:
                raise DecodeError(f"schema file {sf.path} disappeared from {self.upstream}")
            d = TableDefinition.parse(data, sf.path)
            if d.checksum() != sf.checksum:
                raise DecodeError(
                    f"schema file {sf.path} fails its checksum (computed {d.checksum():010d}); the file "
                    "was changed after the sink wrote it"
                )
            self._defs[sf.path] = d
        return d

    def _apply_schema_file(
        self, sf: _SchemaFile, progress: _Progress, done: set[tuple[int, str]], stats: RoundStats
    ) -> None:
        d = self._definition(sf)
        if d.query:
            if (sf.version, d.query) not in done:
                if d.table:
                    self._ensure_database(d.schema)
                self.applier.apply_ddl(d.schema if d.table else None, d.query)
                stats.ddls += 1
                done.add((sf.version, d.query))
        elif d.is_table_schema:
            # The table existed before the changefeed: create it from its definition if missing.
            if self._create_table_if_missing(d):
                stats.tables_created += 1
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            self._save(cur, "ddl", sf.path, 0, 0, sf.version, 0)
        conn.commit()
        progress.ddls.add(sf.path)

    def _ensure_database(self, schema: str) -> None:
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS " + quote_ident_raw(schema))
        conn.commit()

    def _create_table_if_missing(self, d: TableDefinition) -> bool:
        conn = self._progress.connect(self.applier)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
                (d.schema, d.table),
            )
            row = cur.fetchone()
            if row and row[0]:
                return False
        ddl = create_table_sql(d)
        self._ensure_database(d.schema)
        log.info("creating %s.%s downstream from its schema file: %s", d.schema, d.table, ddl)
        self.applier.apply_ddl(d.schema, ddl)
        return True

    # -- data ----------------------------------------------------------------------------------

    def _apply_dir(
        self,
        d: DataDir,
        files: list[tuple[int, str]],
        sf: _SchemaFile,
        checkpoint: int,
        progress: _Progress,
        stats: RoundStats,
    ) -> bool:
        """Apply a directory's new files up to the checkpoint; False if schema is missing."""
        info = self._table_info(sf)
        if not info.columns:
            raise DecodeError(f"schema file {sf.path} has no columns; cannot decode {d.path}")
        key = _table_key(d.schema, d.table)
        dp = progress.dirs.setdefault(d.path, _DirProgress())
        tp = progress.tables.setdefault(key, _TableProgress())
        for index, path in files:
            if index < dp.file_index:
                continue
            offset = dp.row_offset if index == dp.file_index else 0
            data = self.backend.read(path)
            if data is None:
                raise DecodeError(f"data file {path} disappeared from {self.upstream}")
            rows = list(self._decode(data, info))
            pairs: list[tuple[RowChange, TableInfo]] = []
            pending = False
            pos = offset
            max_ts = dp.max_commit_ts
            while pos < len(rows):
                row = rows[pos]
                ts = row.commit_ts
                if ts and ts > checkpoint:
                    pending = True
                    break
                if ts and (ts <= tp.watermark or ts < dp.max_commit_ts):
                    stats.rows_dropped += 1
                else:
                    pairs.append((row, info))
                    max_ts = max(max_ts, ts)
                pos += 1
            if pairs:
                replicating = dp.max_commit_ts if all(r.commit_ts for r, _ in pairs) else NO_TS_SAFE
                if self.protocol == "csv" and not info.handle_key and any(r.op == "U" for r, _ in pairs):
                    # A CSV UPDATE has no pre-image, and the schema file names no key of this table (a NOT
                    # NULL unique key is not in it): only safe mode (DELETE the old image, which matches
                    # nothing, then REPLACE through the downstream's own unique key) applies it; a plain
                    # UPDATE matching every column of the new image would change nothing.
                    replicating = NO_TS_SAFE
                self.applier.apply_rows(pairs, replicating_ts=replicating)
                stats.rows += len(pairs)
            dp.max_commit_ts = max_ts
            if pending:
                dp.file_index, dp.row_offset = index, pos
                stats.rows_pending += len(rows) - pos
            else:
                dp.file_index, dp.row_offset = index + 1, 0
                stats.files += 1
            conn = self._progress.connect(self.applier)
            with conn.cursor() as cur:
                self._save(cur, "dir", d.path, dp.file_index, dp.row_offset, 0, dp.max_commit_ts)
            conn.commit()
            if pending:
                break
        return True

    def _decode(self, data: bytes, info: TableInfo) -> Iterator[RowChange]:
        if self.protocol == "csv":
            for i, rec in enumerate(self._decoder.decode(data, info)):
                row = rec.to_row_change(info, i)
                if row.op == "U" and row.before is None:
                    # CSV carries no pre-image; the writer split key changes, so the key is the same.
                    row = dataclasses.replace(row, before=row.after)
                yield row
            return
        yield from decode_canal_json_file(data, info, self.config.sink.terminator)

    # -- progress ------------------------------------------------------------------------------

    def _load_progress(self) -> _Progress:
        conn = self._progress.connect(self.applier)
        p = _Progress()
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT kind, item, file_index, row_offset, watermark, max_commit_ts FROM {self._progress.name} "
                "WHERE consumer_id=%s",
                (self.consumer_id,),
            )
            for kind, item, fi, ro, wm, mx in cur.fetchall():
                if kind == "dir":
                    p.dirs[item] = _DirProgress(int(fi), int(ro), int(mx))
                elif kind == "table":
                    p.tables[item] = _TableProgress(int(wm))
                elif kind == "ddl":
                    p.ddls.add(item)
        conn.commit()
        return p

    def _save(self, cur: Any, kind: str, item: str, fi: int, ro: int, wm: int, mx: int) -> None:
        cur.execute(
            f"INSERT INTO {self._progress.name} (consumer_id, kind, item_hash, item, file_index, row_offset, "
            "watermark, max_commit_ts) VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON DUPLICATE KEY UPDATE "
            "file_index=VALUES(file_index), row_offset=VALUES(row_offset), watermark=VALUES(watermark), "
            "max_commit_ts=VALUES(max_commit_ts)",
            (self.consumer_id, kind, hashlib.sha1(item.encode()).hexdigest(), item, fi, ro, wm, mx),
        )

    def _save_table(self, cur: Any, key: str, tp: _TableProgress) -> None:
        self._save(cur, "table", key, 0, 0, tp.watermark, 0)


def _table_key(schema: str, table: str) -> str:
    return f"{schema}.{table}"


# -- canal-json files ------------------------------------------------------------------------------


def decode_canal_json_file(data: bytes, info: TableInfo, terminator: str = "\r\n") -> Iterator[RowChange]:
    """The row changes of a canal-json data file (one message per terminator-ended line).

    Values stay in the form MySQL accepts as query parameters: binary → bytes,
    ENUM/SET → their numeric index/bitmask (the schema file has no elements),
    BIT → int, everything else the message's text.
    """
    from sparkcdc.codec.canal_json import canal_value_to_python, decode_canal_json

    sep = terminator.encode() if terminator else b"\n"
    names = info.column_names
    for seq, line in enumerate(data.split(sep)):
        line = line.strip(b"\r\n")
        if not line:
            continue
        msg = decode_canal_json(line)
        if msg.kind != "dml":
            continue
        op = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}.get(msg.type)
        if op is None:
            raise DecodeError(f"canal-json message of type {msg.type!r} in a data file is not a row change")
        types = msg.mysql_type or {}
        new = (msg.data or [{}])[0]

        def image(
            values: dict[str, str | None],
            fallback: dict[str, str | None] | None,
            types: dict[str, str] = types,
        ) -> tuple[Any, ...]:
            out = []
            for n in names:
                raw = values[n] if n in values else (fallback or {}).get(n)
                out.append(canal_value_to_python(raw, types.get(n, "varchar")))
            return tuple(out)

        after: tuple[Any, ...] | None = image(new, None)
        before: tuple[Any, ...] | None = None
        if op == "D":
            before, after = after, None
        elif op == "U" and msg.old:
            before = image(msg.old[0], new)
        yield RowChange(
            op=op,  # type: ignore[arg-type]
            schema=msg.database or info.schema,
            table=msg.table or info.table,
            table_version=info.version,
            commit_ts=int(msg.commit_ts or 0),
            before=before,
            after=after,
            seq=seq,
        )


# -- CREATE TABLE from a schema file ----------------------------------------------------------------


def create_table_sql(d: TableDefinition) -> str:
    """A CREATE TABLE for a table known only from its schema file (the table predates the changefeed)."""
    cols: list[str] = []
    pk: list[str] = []
    for c in d.columns or []:
        tp = c.type.upper()
        unsigned = tp.endswith(" UNSIGNED")
        base = tp.removesuffix(" UNSIGNED")
        if base in ("ENUM", "SET"):
            raise SinkError(
                f"table {d.schema}.{d.table} existed before the changefeed and does not exist downstream; "
                f"its schema file cannot describe the {base} column {c.name!r} (no element list), so "
                "create the table downstream first and run the consumer again"
            )
        if base in ("DECIMAL", "FLOAT", "DOUBLE") and c.precision:
            sql_type = f"{base}({c.precision},{c.scale or 0})" if c.scale or base == "DECIMAL" else base
        elif base in ("DATETIME", "TIMESTAMP", "TIME") and c.scale:
            sql_type = f"{base}({c.scale})"
        elif base in ("CHAR", "VARCHAR", "BINARY", "VARBINARY", "BIT") and c.precision:
            sql_type = f"{base}({c.precision})"
        else:
            sql_type = base
        if unsigned:
            sql_type += " UNSIGNED"
        part = f"{quote_ident_raw(c.name)} {sql_type}"
        if c.nullable == "false":
            part += " NOT NULL"
        if c.is_pk == "true":
            pk.append(quote_ident_raw(c.name))
        cols.append(part)
    if pk:
        cols.append(f"PRIMARY KEY ({', '.join(pk)})")
    return f"CREATE TABLE IF NOT EXISTS {quote_ident_raw(d.table)} ({', '.join(cols)})"


def connect_downstream(downstream_uri: str) -> pymysql.Connection:
    """A plain autocommit connection to the downstream (for tools and tests)."""
    conn, _ = connect(parse_mysql_sink(downstream_uri, ReplicaConfig()).conn, autocommit=True)
    return conn
