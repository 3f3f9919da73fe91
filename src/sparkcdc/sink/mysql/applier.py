"""Apply row changes and DDLs to a downstream MySQL/MariaDB/TiDB, TiCDC style.

Used by the MySQL sink (in Spark executors for rows, on the driver for DDL) and
by the consumers that replay storage files or Kafka messages::

    applier = MySQLApplier(ConnParams(host="127.0.0.1", port=3306), safe_mode=False)
    applier.apply_ddl("shop", "CREATE TABLE orders (id INT PRIMARY KEY, note TEXT)")
    applier.apply_rows([(row_change, table_info), ...], replicating_ts=checkpoint)
    applier.close()

Semantics (spec §7, TiCDC's ``cdc/sink/dmlsink/txn/mysql``):

- Rows are applied in the order given (commit order); the rows of one upstream
  transaction (one ``commit_ts``) go into one downstream transaction when they
  fit in ``max_txn_row``; consecutive small transactions share one downstream
  transaction up to ``max_txn_row`` rows. A larger transaction is split into
  ``max_txn_row`` pieces unless ``split_txn=False`` (transaction-atomicity=table).
- Safe mode (``safe_mode=True``, or a row with ``commit_ts <= replicating_ts``):
  INSERT → ``REPLACE``, UPDATE → ``DELETE`` (old key, only if it changed) +
  ``REPLACE``; replaying such rows any number of times gives the same table.
- Otherwise rows use plain INSERT/UPDATE/DELETE; a duplicate-key error rolls the
  downstream transaction back and applies it again in safe mode (the row was
  already there: a replay after a restart).
- Tables without a handle key (no PK, no NOT NULL unique key): DELETE/UPDATE
  match every stored column NULL-safely (``<=>``) with ``LIMIT 1``. Replaying an
  INSERT into such a table cannot be made idempotent (TiCDC has the same limit).
- Connection faults and deadlocks are retried on a fresh connection (the retried
  transaction runs in safe mode, as its commit may have happened); when retries
  run out a ``SinkUnavailable`` (transient) is raised; any other downstream
  refusal raises ``SinkError`` (permanent).
- ``apply_ddl`` tolerates re-applying a DDL that already took effect (exists /
  does not exist / duplicate column or key errors), so a replay after a
  restart does not fail.
- With ``progress_id`` (the MySQL sink passes the changefeed id), every
  downstream transaction also records, per table, the ``commit_ts`` of the last
  row it applied in ``sparkcdc.mysql_sink_progress``, and whether that upstream
  transaction was applied whole; rows of transactions recorded as applied are
  skipped. A replay is then exactly-once, tables without a key included, except
  for a big transaction that was split over several downstream transactions and
  interrupted: it is re-applied in safe mode. ``commit_ts`` must be deterministic
  and increasing per table, and the input of ``apply_rows`` must end at a
  transaction boundary (the pipeline's batches do).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pymysql

from sparkcdc.capture.charsets import CODECS
from sparkcdc.errors import SinkError, SparkCdcError
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.sink.mysql.connection import (
    ER_BAD_DB,
    ER_DUP_ENTRY,
    ConnParams,
    classify,
    connect,
    ddl_sql_mode,
    error_code,
)
from sparkcdc.sink.mysql.statements import Statement, StatementPlanner, TablePlan, quote_ident_raw

log = logging.getLogger(__name__)

# DDL errors that mean "this DDL already took effect" (TiCDC's IsIgnorableMySQLDDLError).
IGNORABLE_DDL_CODES: dict[int, str] = {
    1007: "database exists",
    1008: "database does not exist",
    1050: "table exists",
    1051: "unknown table",
    1054: "unknown column",
    1060: "duplicate column",
    1061: "duplicate key name",
    1068: "multiple primary key",
    1091: "can't drop field or key",
    1176: "key does not exist",
    1507: "partition does not exist",
    1517: "duplicate partition name",
    4028: "constraint does not exist",
}
ER_NO_SUCH_TABLE = 1146

PROGRESS_SCHEMA = "sparkcdc"
PROGRESS_TABLE = "mysql_sink_progress"
PROGRESS_DDL = (
    f"CREATE TABLE IF NOT EXISTS `{PROGRESS_SCHEMA}`.`{PROGRESS_TABLE}` ("
    "changefeed_id VARCHAR(128) NOT NULL, table_schema VARCHAR(64) NOT NULL, table_name VARCHAR(64) NOT NULL, "
    "commit_ts BIGINT UNSIGNED NOT NULL, seq BIGINT NOT NULL, complete TINYINT NOT NULL, "
    "updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, "
    "PRIMARY KEY (changefeed_id, table_schema, table_name)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
    "COLLATE=utf8mb4_bin"  # InnoDB whatever the server's default engine: it commits with the rows
)
_RENAME = re.compile(r"^\s*(RENAME\s+TABLE|ALTER\s+TABLE\s+\S+\s+RENAME\s+(TO|AS)?)", re.IGNORECASE)

Pair = tuple[RowChange, TableInfo]


@dataclass
class ApplierStats:
    """Counters for tests, logs and the benchmark."""

    rows: int = 0
    txns: int = 0
    statements: int = 0
    round_trips: int = 0
    safe_retries: int = 0
    retries: int = 0
    ddls: int = 0
    ddls_skipped: int = 0
    rows_skipped: int = 0
    """Rows at or below the recorded progress (already applied before a restart)."""


ER_WRONG_VALUE_FOR_VAR = 1231
ER_DUP_ENTRY_AUTOINCREMENT_CASE = 1569
_BAD_MODE = re.compile(r"can't be set to the value of '([^']*)'")


@contextlib.contextmanager
def ddl_session_mode(conn: Any, sql_mode: str | None, also: tuple[str, ...] = ()) -> Iterator[None]:
    """The session's ``sql_mode`` set to ``sql_mode`` (None: ``connection.ddl_sql_mode`` of the server's
    global one) plus the flags ``also``, then restored.

    A flag the downstream does not know (a MariaDB one on MySQL, a removed one) is left out,
    one at a time as the server names it, and logged.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT @@SESSION.sql_mode, @@GLOBAL.sql_mode")
        session, default = cur.fetchone()
        flags = [f for f in (ddl_sql_mode(default) if sql_mode is None else sql_mode).split(",") if f]
        flags += [f for f in also if f not in flags]
        while True:
            try:
                cur.execute("SET SESSION sql_mode = %s", (",".join(flags),))
                break
            except pymysql.err.OperationalError as exc:
                m = _BAD_MODE.search(str(exc.args[1]) if len(exc.args) > 1 else "")
                if error_code(exc) != ER_WRONG_VALUE_FOR_VAR or m is None or m.group(1) not in flags:
                    raise
                log.warning("the downstream has no sql_mode %s; the DDL runs without it", m.group(1))
                flags.remove(m.group(1))

    def restore() -> None:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = %s", (session,))

    try:
        yield
    except BaseException:
        with contextlib.suppress(pymysql.err.Error, OSError):  # the statement's error is the one to report
            restore()
        raise
    restore()


def _renumbers_zero(exc: BaseException) -> bool:
    """An ALTER TABLE that gave 0 values of an AUTO_INCREMENT column new numbers, one of them taken
    ("ALTER TABLE causes auto_increment resequencing, resulting in duplicate entry")."""
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    return error_code(exc) in (ER_DUP_ENTRY, ER_DUP_ENTRY_AUTOINCREMENT_CASE) and "resequencing" in text


class MySQLApplier:
    """Applies RowChange/DDL to one downstream over one connection (not thread-safe)."""

    def __init__(
        self,
        conn_params: ConnParams,
        safe_mode: bool = False,
        max_txn_row: int = 256,
        *,
        split_txn: bool = True,
        batch_dml: bool = True,
        multi_statement: bool = True,
        max_multi_update_row: int = 40,
        max_statement_bytes: int = 4 << 20,
        max_retries: int = 5,
        retry_backoff: float = 0.5,
        retry_backoff_max: float = 10.0,
        progress_id: str | None = None,
    ) -> None:
        if max_txn_row <= 0:
            raise ValueError(f"max_txn_row must be > 0, got {max_txn_row}")
        self.params = conn_params
        self.safe_mode = safe_mode
        self.max_txn_row = max_txn_row
        self.split_txn = split_txn
        self.batch_dml = batch_dml
        self.multi_statement = multi_statement and conn_params.multi_statements
        self.max_multi_update_row = max(1, max_multi_update_row)
        self.max_statement_bytes = max_statement_bytes
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.stats = ApplierStats()
        self._conn: pymysql.Connection | None = None
        self._plans: dict[int, tuple[TableInfo, TablePlan]] = {}
        self.progress_id = progress_id
        self._progress: dict[tuple[str, str], tuple[int, int, bool]] = {}
        self._open_txn_ts: int | None = None
        self._open_tables: set[tuple[str, str]] = set()
        self._replay_ts: dict[tuple[str, str], int] = {}
        """Per table, the commit_ts of a transaction that was only partly applied before: safe mode."""
        self._progress_loaded: set[tuple[str, str]] = set()
        self._progress_ready = False

    # -- connections ---------------------------------------------------------------------------

    def connection(self) -> pymysql.Connection:
        """The open downstream connection (opened on first use)."""
        if self._conn is None:
            self._conn, self.params = connect(self.params, autocommit=False)
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except pymysql.err.Error:
                # Already broken; the fault that brought us here is what gets reported.
                pass

    def close(self) -> None:
        """Close the connection."""
        self._drop_connection()

    def __enter__(self) -> MySQLApplier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _backoff(self, attempt: int) -> None:
        time.sleep(min(self.retry_backoff_max, self.retry_backoff * (2 ** (attempt - 1))))

    # -- DDL -----------------------------------------------------------------------------------

    def apply_ddl(self, schema: str | None, query: str, sql_mode: str | None = None) -> bool:
        """Run one DDL in ``schema``; False if it had already taken effect (ignored error).

        It runs under ``sql_mode``, the upstream session's for the statement (None: the
        downstream server's default, which a statement without a recorded mode ran with
        upstream too), as a replica runs it: the mode decides how the statement parses
        (ANSI_QUOTES, ORACLE, ...) and what it does to the rows (an AUTO_INCREMENT column added
        over 0 values numbers them unless NO_AUTO_VALUE_ON_ZERO), where rows are applied with
        the session's relaxed mode (``connection.adjust_sql_mode``).
        """
        attempt = 0
        while True:
            try:
                return self._exec_ddl(schema, query, sql_mode)
            except (pymysql.err.Error, OSError) as exc:
                err = classify(exc, f"applying DDL {query!r} in schema {schema!r}")
                self._drop_connection()
                if not err.transient or attempt >= self.max_retries:
                    raise err from exc
                attempt += 1
                self.stats.retries += 1
                log.warning("retrying DDL (attempt %d/%d): %s", attempt, self.max_retries, err.message)
                self._backoff(attempt)

    def _exec_ddl(self, schema: str | None, query: str, sql_mode: str | None) -> bool:
        conn = self.connection()
        # A DDL commits by itself; MariaDB 10.11 waits for a lock forever (until
        # innodb_lock_wait_timeout) on ALTER TABLE ... EXCHANGE PARTITION in a session with
        # autocommit off, even with no other session: run DDL with autocommit on.
        conn.autocommit(True)
        try:
            try:
                with ddl_session_mode(conn, sql_mode):
                    return self._exec_ddl_autocommit(conn, schema, query)
            except pymysql.err.MySQLError as exc:
                if sql_mode is not None or not _renumbers_zero(exc):
                    raise
                # The upstream mode is unknown (a consumer: TiCDC's formats do not carry it). The
                # upstream ran this DDL over the same rows without this error, so its session kept
                # 0 values (NO_AUTO_VALUE_ON_ZERO): run it as that session did.
                log.warning(
                    "DDL %r renumbers 0 values into a duplicate key without NO_AUTO_VALUE_ON_ZERO, which "
                    "the upstream session therefore had: running it with that flag",
                    query,
                )
                with ddl_session_mode(conn, None, also=("NO_AUTO_VALUE_ON_ZERO",)):
                    return self._exec_ddl_autocommit(conn, schema, query)
        finally:
            try:
                conn.autocommit(False)
            except (pymysql.err.Error, OSError):
                self._drop_connection()  # broken: the next statement opens a new one

    def _exec_ddl_autocommit(self, conn: Any, schema: str | None, query: str) -> bool:
        with conn.cursor() as cur:
            if schema:
                try:
                    cur.execute("USE " + quote_ident_raw(schema))
                except pymysql.err.OperationalError as exc:
                    # CREATE/DROP DATABASE of that very schema: run it without a current schema.
                    if error_code(exc) != ER_BAD_DB:
                        raise
            try:
                cur.execute(query)
            except pymysql.err.MySQLError as exc:
                code = error_code(exc)
                why = IGNORABLE_DDL_CODES.get(code or 0)
                if why is None and code == ER_NO_SUCH_TABLE and _RENAME.match(query):
                    why = "renamed table no longer exists"
                if why is None:
                    raise
                conn.rollback()
                self.stats.ddls_skipped += 1
                log.warning("DDL already applied downstream (%s), skipped: %s (%s)", why, query, exc)
                return False
        conn.commit()
        self.stats.ddls += 1
        return True

    # -- rows ----------------------------------------------------------------------------------

    def plan(self, table: TableInfo) -> TablePlan:
        """The cached statement plan of a table shape."""
        hit = self._plans.get(id(table))
        if hit is not None and hit[0] is table:
            return hit[1]
        if len(self._plans) > 4096:
            self._plans.clear()
        p = TablePlan.build(table)
        self._plans[id(table)] = (table, p)
        return p

    def apply_rows(self, rows: Iterable[Pair], replicating_ts: int | None = None) -> int:
        """Apply row changes in the given (commit) order; returns how many were applied."""
        n = 0
        if self.progress_id is not None:
            rows = self._skip_applied(rows)
        for chunk, complete in self._chunks(rows):
            n += self._apply_chunk(chunk, replicating_ts, complete)
        return n

    # -- progress (exactly-once replay) ---------------------------------------------------------

    def ensure_progress_table(self) -> None:
        """Create ``sparkcdc.mysql_sink_progress`` if it is missing."""
        conn = self.connection()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{PROGRESS_SCHEMA}`")
            cur.execute(PROGRESS_DDL)
        conn.commit()
        self._progress_ready = True

    def applied_position(self, schema: str, table: str) -> tuple[int, int, bool] | None:
        """The recorded ``(commit_ts, seq, complete)`` of the last applied row of a table (None if none)."""
        key = (schema, table)
        if key not in self._progress_loaded:
            attempt = 0
            while True:
                try:
                    if not self._progress_ready:
                        self.ensure_progress_table()
                    conn = self.connection()
                    with conn.cursor() as cur:
                        cur.execute(
                            f"SELECT commit_ts, seq, complete FROM `{PROGRESS_SCHEMA}`.`{PROGRESS_TABLE}` "
                            "WHERE changefeed_id = %s AND table_schema = %s AND table_name = %s",
                            (self.progress_id, schema, table),
                        )
                        row = cur.fetchone()
                    conn.commit()
                    break
                except (pymysql.err.Error, OSError) as exc:
                    err = classify(exc, f"reading the replication progress of {schema}.{table}")
                    self._drop_connection()
                    if not err.transient or attempt >= self.max_retries:
                        raise err from exc
                    attempt += 1
                    self._backoff(attempt)
            if row is not None:
                self._progress[key] = (int(row[0]), int(row[1]), bool(row[2]))
            self._progress_loaded.add(key)
        return self._progress.get(key)

    def _skip_applied(self, rows: Iterable[Pair]) -> Iterator[Pair]:
        """Drop rows of transactions recorded as applied.

        Only whole transactions are skipped: a transaction recorded as partly applied
        (a big one split over several downstream transactions) is applied again in
        safe mode, since rows sharing a commit_ts need not arrive in the same order
        (or with the same seq) on a replay, e.g. snapshot rows.
        """
        for pair in rows:
            r = pair[0]
            pos = self.applied_position(r.schema, r.table)
            if pos is not None:
                ts, _seq, complete = pos
                if r.commit_ts < ts or (r.commit_ts == ts and complete):
                    self.stats.rows_skipped += 1
                    continue
                if r.commit_ts == ts:
                    self._replay_ts[(r.schema, r.table)] = ts
            yield pair

    def _progress_statement(
        self, chunk: list[Pair], complete: bool
    ) -> tuple[str, list[Any], dict[tuple[str, str], tuple[int, int, bool]]]:
        last: dict[tuple[str, str], tuple[int, int, bool]] = {}
        end_ts = chunk[-1][0].commit_ts
        for r, _ in chunk:
            # A table whose last row here is before the chunk's last transaction saw that transaction whole.
            last[(r.schema, r.table)] = (r.commit_ts, r.seq, complete or r.commit_ts != end_ts)
        if self._open_txn_ts == chunk[0][0].commit_ts:
            # The last piece of a split transaction: the tables only its earlier pieces touched are done too.
            for key in self._open_tables:
                pos = self._progress.get(key)
                if key not in last and pos is not None and pos[0] == self._open_txn_ts:
                    last[key] = (pos[0], pos[1], complete)
        args: list[Any] = []
        for (schema, table), (ts, seq, done) in last.items():
            args.extend((self.progress_id, schema, table, ts, seq, int(done)))
        sql = (
            f"INSERT INTO `{PROGRESS_SCHEMA}`.`{PROGRESS_TABLE}` "
            "(changefeed_id, table_schema, table_name, commit_ts, seq, complete) VALUES "
            + ",".join(["(%s,%s,%s,%s,%s,%s)"] * len(last))
            + " ON DUPLICATE KEY UPDATE commit_ts = VALUES(commit_ts), seq = VALUES(seq), "
            "complete = VALUES(complete)"
        )
        return sql, args, last

    def _chunks(self, rows: Iterable[Pair]) -> Iterator[tuple[list[Pair], bool]]:
        """Downstream transactions: whole upstream transactions packed up to max_txn_row rows.

        Yields ``(rows, complete)``: ``complete`` is False for a piece of a split upstream
        transaction that is not its last piece. The end of the input counts as a
        transaction boundary.
        """
        pending: list[Pair] = []
        txn: list[Pair] = []
        txn_ts: int | None = None
        limit = self.max_txn_row

        def close_txn() -> Iterator[tuple[list[Pair], bool]]:
            nonlocal pending, txn
            if pending and len(pending) + len(txn) > limit:
                yield pending, True
                pending = []
            if len(txn) > limit:
                if self.split_txn:
                    for i in range(0, len(txn), limit):
                        yield txn[i : i + limit], i + limit >= len(txn)
                else:
                    yield txn, True
            else:
                pending.extend(txn)
            txn = []

        for pair in rows:
            ts = pair[0].commit_ts
            if txn and ts != txn_ts:
                yield from close_txn()
            txn_ts = ts
            txn.append(pair)
            if self.split_txn and len(txn) >= limit and not pending:
                # A big transaction: stream it in pieces instead of holding it whole.
                yield txn, False
                txn = []
        yield from close_txn()
        if pending:
            yield pending, True

    def _apply_chunk(self, chunk: list[Pair], replicating_ts: int | None, complete: bool = True) -> int:
        force_safe = False
        attempt = 0
        while True:
            try:
                self._exec_chunk(chunk, replicating_ts, force_safe, complete)
                return len(chunk)
            except pymysql.err.IntegrityError as exc:
                self._rollback()
                if error_code(exc) == ER_DUP_ENTRY and not force_safe:
                    # The row is already downstream (a replay): redo the transaction idempotently.
                    log.info(
                        "duplicate key in %d-row transaction, applying it again in safe mode: %s",
                        len(chunk),
                        exc,
                    )
                    self.stats.safe_retries += 1
                    force_safe = True
                    continue
                raise self._refused(exc, chunk) from exc
            except UnicodeEncodeError as exc:
                # text that is not Unicode (bytes its charset's codec could not read, kept as lone
                # surrogates) where the table's charset is unknown: no statement can carry it
                self._rollback()
                raise SinkError(
                    f"rows of {_rows_of(chunk)} hold text that is not Unicode ({exc.reason}: {exc.object[exc.start : exc.end]!r}), "
                    "bytes its column's character set holds but sparkcdc could not read (UTF-16 lone "
                    "surrogates, or a table whose character set the sink was not told); leave the table out "
                    "of the changefeed, or convert the column to utf8mb4 upstream"
                ) from exc
            except (pymysql.err.Error, OSError) as exc:
                err = classify(exc, "applying rows")
                self._drop_connection()
                if not err.transient:
                    raise self._refused(exc, chunk) from exc
                if attempt >= self.max_retries:
                    raise err from exc
                attempt += 1
                self.stats.retries += 1
                log.warning(
                    "retrying a %d-row transaction (attempt %d/%d): %s",
                    len(chunk),
                    attempt,
                    self.max_retries,
                    err.message,
                )
                self._backoff(attempt)
                # The lost transaction may have committed: apply it idempotently.
                force_safe = True
                if self.progress_id is not None:
                    # ...or, with the progress table, find out whether it did.
                    for r, _ in chunk:
                        self._progress_loaded.discard((r.schema, r.table))
                    chunk = list(self._skip_applied(chunk))
                    if not chunk:
                        return 0

    def _refused(self, exc: BaseException, chunk: list[Pair]) -> SparkCdcError:
        return SinkError(
            f"the downstream {self.params.redacted()} refused rows of {_rows_of(chunk)}"
            f": {type(exc).__name__}: {exc}; check that the downstream "
            f"table exists with the upstream's columns (DDL replicated) and accepts the values{_lost_bytes(chunk)}"
        )

    def _rollback(self) -> None:
        if self._conn is not None:
            try:
                self._conn.rollback()
            except pymysql.err.Error:
                self._drop_connection()

    def statements(
        self, chunk: Iterable[Pair], replicating_ts: int | None, force_safe: bool = False
    ) -> list[Statement]:
        """The statements one downstream transaction would run (exposed for tests)."""
        planner = StatementPlanner(
            self.max_txn_row, batch=self.batch_dml, max_statement_bytes=self.max_statement_bytes
        )
        always_safe = force_safe or self.safe_mode
        for row, table in chunk:
            safe = (
                always_safe
                or (replicating_ts is not None and row.commit_ts <= replicating_ts)
                or (bool(self._replay_ts) and self._replay_ts.get((row.schema, row.table)) == row.commit_ts)
            )
            planner.add(row, self.plan(table), safe)
        return planner.finish()

    def _exec_chunk(
        self, chunk: list[Pair], replicating_ts: int | None, force_safe: bool, complete: bool
    ) -> None:
        stmts = self.statements(chunk, replicating_ts, force_safe)
        conn = self.connection()
        conn.begin()
        with conn.cursor() as cur:
            i = 0
            while i < len(stmts):
                st = stmts[i]
                if st.single and self.multi_statement:
                    j = i + 1
                    while j < len(stmts) and stmts[j].single and j - i < self.max_multi_update_row:
                        j += 1
                    if j - i > 1:
                        self._exec_multi(cur, stmts[i:j])
                        i = j
                        continue
                cur.execute(st.sql, st.args)
                self.stats.round_trips += 1
                i += 1
            progress = None
            if self.progress_id is not None:
                sql, args, progress = self._progress_statement(chunk, complete)
                cur.execute(sql, args)
                self.stats.round_trips += 1
        conn.commit()
        if progress is not None:
            self._progress.update(progress)
            end_ts = chunk[-1][0].commit_ts
            if complete:
                self._open_txn_ts, self._open_tables = None, set()
            else:
                if self._open_txn_ts != end_ts:
                    self._open_txn_ts, self._open_tables = end_ts, set()
                self._open_tables.update(k for k, v in progress.items() if v[0] == end_ts)
        self.stats.statements += len(stmts)
        self.stats.rows += len(chunk)
        self.stats.txns += 1

    def _exec_multi(self, cur: Any, stmts: list[Statement]) -> None:
        args: list[Any] = []
        for st in stmts:
            args.extend(st.args)
        cur.execute(";".join(st.sql for st in stmts), args)
        # Later statements' errors surface while reading their results.
        while cur.nextset():
            pass
        self.stats.round_trips += 1


def _lost_bytes(chunk: list[Pair]) -> str:
    """Why a refused chunk may not be the downstream's fault: a value holding U+FFFD in a column whose
    character set is not Unicode stands for bytes the message format could not carry (canal-json
    writes U+FFFD for bytes that are not UTF-8, as TiCDC does); '' when no value does."""
    for row, table in chunk:
        for image in (row.after, row.before):
            for col, v in zip(table.columns, image or (), strict=False):
                if type(v) is not str or "\ufffd" not in v or not col.charset:
                    continue
                codec = CODECS.get(col.charset.lower())
                if codec is not None and not codec.startswith("utf-"):
                    return (
                        f"; column {col.name} of {row.schema}.{row.table} ({col.charset}) holds U+FFFD, which "
                        "stands for bytes of that character set the message could not carry (canal-json "
                        "writes U+FFFD for bytes that are not UTF-8, as TiCDC does): such a row cannot be "
                        "applied as the upstream has it; convert the column to utf8mb4 upstream or leave "
                        "the table out of the changefeed"
                    )
    return ""


def _rows_of(chunk: list[Pair]) -> str:
    """The tables and commit_ts range of a chunk, for errors: ``a.t, a.u (commit_ts 5..9)``."""
    tables = sorted({f"{r.schema}.{r.table}" for r, _ in chunk})
    return f"{', '.join(tables)} (commit_ts {chunk[0][0].commit_ts}..{chunk[-1][0].commit_ts})"
