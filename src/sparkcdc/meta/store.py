"""``MetaStore``: changefeeds, per-range progress, schema history and servers in one SQL database.

SQLAlchemy Core on SQLite (embedded default, WAL + busy timeout) or PostgreSQL
(psycopg 3, for several servers). Every write that moves ownership or a
checkpoint is a compare-and-swap on the row's ``version``
(``UPDATE ... WHERE id = ? AND version = ?``; no row updated → ``ConflictError``),
and checkpoints never move backwards unless the caller explicitly overwrites them.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    create_engine,
    delete,
    event,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    DisconnectionError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
)
from sqlalchemy.pool import QueuePool

from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import (
    ChangefeedExists,
    ChangefeedNotFound,
    ConfigError,
    ConflictError,
    SchemaError,
)
from sparkcdc.meta.migrations import migrate
from sparkcdc.meta.models import (
    ChangefeedInfo,
    ChangefeedState,
    NewChangefeed,
    RangeProgress,
    RangeStage,
    SchemaVersion,
    ServerInfo,
)
from sparkcdc.meta.tables import (
    changefeeds,
    meta_info,
    range_progress,
    schema_history,
    servers,
    snapshot_done,
)

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000

SQLITE_POOL_SIZE = 8
"""SQLite connections a store keeps open between transactions. A server's changefeeds each record
their marks and renewals every second: a connection opened per transaction (the open, the WAL
and shared-memory files, the pragmas) cost more than the transaction. More threads at once get
connections of their own, closed when returned; SQLite itself serialises the writers."""

# Columns a caller may set through update_changefeed (identity, version and timestamps are the store's).
_UPDATABLE = {
    "upstream_uri",
    "sink_uri",
    "config",
    "state",
    "error",
    "warning",
    "owner",
    "lease_expire_at",
    "epoch",
    "start_ts",
    "target_ts",
    "checkpoint_ts",
    "resolved_ts",
    "subscriber_name",
    "stats",
    "upstream",
}


_HEADER_CHECKED: set[Path] = set()
"""Meta database files whose header this process has read: never read again. Closing any
descriptor of the file drops every POSIX lock the process holds on it, its open SQLite
connections' included (SQLite's "How To Corrupt An SQLite Database File", 2.2): another process
could then take itself for the last connection and remove the WAL under them."""


def _check_sqlite_path(path: Path, uri: str) -> None:
    """Refuse a path that cannot hold a SQLite meta database (a folder, a missing folder, another file)."""
    if path.is_dir():
        raise ConfigError(
            f"meta URI {redact_uri(uri)!r}: {str(path)!r} is a directory; give a file path, "
            f"e.g. sqlite:///{path / 'meta.db'}"
        )
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ConfigError(
            f"meta URI {redact_uri(uri)!r}: {str(blocker)!r} is a file, not a folder; "
            "choose a path whose parent folders are folders"
        )
    if not path.parent.is_dir():
        # As SQLite itself, and so that a mistyped folder is not a second, empty meta database.
        raise ConfigError(
            f"meta URI {redact_uri(uri)!r}: the folder {str(path.parent)!r} does not exist; "
            f"create it (mkdir -p {path.parent}) or choose an existing folder"
        )
    if path in _HEADER_CHECKED:
        return
    _HEADER_CHECKED.add(path)
    if path.exists() and path.stat().st_size >= 16:
        with path.open("rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                raise ConfigError(
                    f"meta URI {redact_uri(uri)!r}: {str(path)!r} is not a SQLite database; "
                    "choose a new file name or the server's meta.db"
                )


def _engine_for(uri: str) -> Engine:
    scheme = uri.split(":", 1)[0].lower()
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        url = "postgresql+psycopg" + uri[len(scheme) :]
        try:
            return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5, hide_parameters=True)
        except (ModuleNotFoundError, NoSuchModuleError) as exc:
            raise ConfigError(
                f"meta URI {redact_uri(uri)!r} needs the PostgreSQL driver psycopg 3: "
                "pip install 'sparkcdc[postgres]'"
            ) from exc
        except ArgumentError as exc:
            raise ConfigError(f"invalid meta URI {redact_uri(uri)!r}: {exc}") from exc
    if scheme == "sqlite":
        try:
            database = make_url(uri).database
        except ArgumentError as exc:
            raise ConfigError(f"invalid meta URI {redact_uri(uri)!r}: {exc}") from exc
        if not database or database == ":memory:":
            raise ConfigError(
                f"meta URI {uri!r} has no file path; use sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        _check_sqlite_path(Path(database).expanduser().resolve(), uri)
        engine = create_engine(
            uri,
            poolclass=QueuePool,
            pool_size=SQLITE_POOL_SIZE,
            max_overflow=-1,  # no thread waits for a connection
            hide_parameters=True,  # SQL errors must not print sink URIs (and their passwords)
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        )

        path = Path(database).expanduser()

        def _identity() -> tuple[int, int, int] | None:
            try:
                st = path.stat()
            except OSError:
                return None
            return os.getpid(), st.st_dev, st.st_ino

        @event.listens_for(engine, "checkout")
        def _on_checkout(_dbapi_conn: Any, record: Any, proxy: Any) -> None:
            # A pooled connection serves only the process that opened it (never across a fork), and
            # only while the file it opened is the one at the path: a meta database that was removed
            # or replaced is found as a connection opened per transaction would find it.
            if record.info.get("identity") != _identity():
                if record.info.get("pid") != os.getpid():
                    record.dbapi_connection = proxy.dbapi_connection = None  # the parent's: not closed here
                raise DisconnectionError(f"the pooled SQLite connection no longer matches {path}")

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, record: Any) -> None:
            record.info["pid"] = os.getpid()
            # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit BEGIN is deferred).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()
            record.info["identity"] = _identity()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Take the write lock up front: a read-then-CAS transaction never dies half-way
            # with SQLITE_BUSY on upgrade, and migrations are serialised between processes.
            conn.exec_driver_sql(
                "BEGIN" if conn.get_execution_options().get("sparkcdc_read") else "BEGIN IMMEDIATE"
            )

        return engine
    raise ConfigError(
        f"meta URI scheme {scheme!r} is not supported (in {redact_uri(uri)!r}); "
        "use sqlite:///path/to/meta.db (one server) or postgresql://user:pass@host:port/db (several servers)"
    )


class MetaStore:
    """The meta database of a sparkcdc cluster (any number of servers share one)."""

    def __init__(self, engine: Engine, uri: str) -> None:
        self.engine = engine
        self.uri = uri

    @classmethod
    def open(cls, uri: str, *, apply_migrations: bool = True) -> MetaStore:
        """Connect to ``sqlite:///path`` or ``postgresql://...`` and bring the schema up to date."""
        engine = _engine_for(uri)
        store = cls(engine, uri)
        if apply_migrations:
            # SQLite answers "database is locked" at once, without waiting for the busy timeout, when
            # two connections of a fresh file race for its first write (switching it to WAL, the first
            # migration); the loser tries again.
            deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
            delay = 0.02
            while True:
                try:
                    applied = migrate(engine)
                    break
                except OperationalError as exc:
                    if (
                        engine.dialect.name == "sqlite"
                        and "locked" in str(exc.orig)
                        and time.monotonic() + delay < deadline
                    ):
                        time.sleep(delay)
                        delay = min(delay * 2, 0.5)
                        continue
                    engine.dispose()
                    raise ConfigError(
                        f"cannot open the meta database {redact_uri(uri)!r}: {exc.orig}; "
                        "check that it is running and the URI's host, port, user and password"
                    ) from exc
            if applied:
                log.info("meta database %s migrated to version %d", redact_uri(uri), applied[-1])
        return store

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return str(self.engine.dialect.name)

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        # A read-only transaction: on SQLite a deferred BEGIN, so readers never wait for writers (WAL).
        with self.engine.connect().execution_options(sparkcdc_read=True) as conn:
            yield conn
            conn.rollback()

    def _now(self, conn: Connection) -> float:
        # Leases compare against the database's clock when it has one, so servers on
        # different hosts agree on expiry regardless of their own clock skew.
        if self.dialect == "postgresql":
            return float(conn.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one())
        return time.time()

    def now(self) -> float:
        """The meta database's current time (Unix seconds)."""
        with self._read() as conn:
            return self._now(conn)

    # ------------------------------------------------------------------ changefeeds

    def create_changefeed(self, new: NewChangefeed) -> ChangefeedInfo:
        """Insert a changefeed in state normal; a taken id or subscriber name raises ChangefeedExists.

        A tombstone (state removed) with the same id is replaced once no server holds its lease.
        """
        with self._tx() as conn:
            now = self._now(conn)
            old = self._find(conn, new.namespace, new.id)
            if old is not None:
                if old.state != ChangefeedState.REMOVED:
                    raise ChangefeedExists(
                        f"changefeed {new.id!r} already exists in namespace {new.namespace!r} "
                        f"(state {old.state}); choose another --changefeed-id or remove it first"
                    )
                if old.lease_valid(now):
                    raise ChangefeedExists(
                        f"changefeed {new.id!r} is still being removed by server {old.owner}; retry in a few seconds"
                    )
                conn.execute(delete(changefeeds).where(_cf_key(new.namespace, new.id)))
                # The new changefeed starts afresh: nothing of the removed one's snapshot carries over.
                self._delete_progress(conn, new.namespace, new.id)
            schema, table = new.subscribed_table or ("", "")
            if new.subscriber_name is not None:
                c = changefeeds.c
                holder = conn.execute(
                    select(c.namespace, c.id).where(
                        c.namespace == new.namespace,
                        c.subscribed_schema == schema,
                        c.subscribed_table == table,
                        c.subscriber == new.subscriber_name,
                    )
                ).first()
                if holder is not None:
                    raise ChangefeedExists(
                        f"subscriber {new.subscriber_name!r} already has changefeed {holder.id!r} "
                        f"(namespace {holder.namespace!r}); use another subscriber name or remove that changefeed"
                    )
            start = new.start_ts or 0
            try:
                conn.execute(
                    insert(changefeeds).values(
                        namespace=new.namespace,
                        id=new.id,
                        upstream_uri=new.upstream_uri,
                        sink_uri=new.sink_uri,
                        config=new.config,
                        state=ChangefeedState.NORMAL.value,
                        error=None,
                        warning=None,
                        owner=None,
                        lease_expire_at=None,
                        epoch=0,
                        version=1,
                        start_ts=new.start_ts,
                        target_ts=new.target_ts,
                        checkpoint_ts=start,
                        resolved_ts=start,
                        subscriber=new.subscriber_name,
                        subscribed_schema=schema if new.subscriber_name is not None else None,
                        subscribed_table=table if new.subscriber_name is not None else None,
                        stats=None,
                        created_at=now,
                        updated_at=now,
                        uid=str(uuid.uuid4()),
                        upstream=new.upstream,
                    )
                )
            except IntegrityError as exc:
                # Another server inserted the same id or subscriber between our check and insert.
                raise ChangefeedExists(
                    f"changefeed {new.id!r} (or subscriber {new.subscriber_name!r}) was just created by "
                    "another request; choose another id"
                ) from exc
            return self._get(conn, new.namespace, new.id)

    def get_changefeed(
        self, changefeed_id: str, namespace: str = "default", *, include_removed: bool = False
    ) -> ChangefeedInfo:
        """One changefeed; ChangefeedNotFound if missing (or removed, unless ``include_removed``)."""
        with self._read() as conn:
            cf = self._find(conn, namespace, changefeed_id)
        if cf is None or (cf.state == ChangefeedState.REMOVED and not include_removed):
            raise ChangefeedNotFound(
                f"changefeed {changefeed_id!r} does not exist in namespace {namespace!r}; "
                "`sparkcdc cli changefeed list` shows the existing ones"
            )
        return cf

    def changefeeds_by_key(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], ChangefeedInfo]:
        """The rows of these changefeeds ((namespace, id) each), removed ones included, in one read:
        a scheduler's tick reads every changefeed it owns this way. A key without a row is absent."""
        wanted = set(keys)
        ids = sorted({cf_id for _ns, cf_id in wanted})
        found: dict[tuple[str, str], ChangefeedInfo] = {}
        with self._read() as conn:
            for i in range(0, len(ids), 500):  # under every database's limit of bound values
                q = select(changefeeds).where(changefeeds.c.id.in_(ids[i : i + 500]))
                for r in conn.execute(q).mappings():
                    info = _to_info(r)
                    if info.key in wanted:
                        found[info.key] = info
        return found

    def list_changefeeds(
        self, namespace: str | None = None, *, include_removed: bool = False
    ) -> list[ChangefeedInfo]:
        """Changefeeds ordered by (namespace, id); removed ones only with ``include_removed``."""
        q = select(changefeeds).order_by(changefeeds.c.namespace, changefeeds.c.id)
        if namespace is not None:
            q = q.where(changefeeds.c.namespace == namespace)
        if not include_removed:
            q = q.where(changefeeds.c.state != ChangefeedState.REMOVED.value)
        with self._read() as conn:
            return [_to_info(r) for r in conn.execute(q).mappings()]

    def update_changefeed(
        self, expected: ChangefeedInfo, *, overwrite_checkpoint: bool = False, **values: Any
    ) -> ChangefeedInfo:
        """Compare-and-swap: apply ``values`` if the row is still at ``expected.version``.

        ``checkpoint_ts``/``resolved_ts`` only move forward unless ``overwrite_checkpoint``.
        """
        bad = set(values) - _UPDATABLE
        if bad:
            raise ValueError(f"not updatable changefeed column(s): {sorted(bad)}")
        if not overwrite_checkpoint:
            for col in ("checkpoint_ts", "resolved_ts"):
                if col in values and values[col] is not None:
                    values[col] = max(int(values[col]), getattr(expected, col))
        values = {k: (v.value if isinstance(v, ChangefeedState) else v) for k, v in values.items()}
        with self._tx() as conn:
            self._cas(conn, expected, changefeeds.c.version == expected.version, values)
            return self._get(conn, expected.namespace, expected.id)

    def claim_changefeed(self, expected: ChangefeedInfo, owner: str, lease_seconds: float) -> ChangefeedInfo:
        """Take ownership of a normal changefeed whose lease is free or expired (CAS); bumps ``epoch``."""
        with self._tx() as conn:
            now = self._now(conn)
            c = changefeeds.c
            cond = and_(
                c.version == expected.version,
                c.state == ChangefeedState.NORMAL.value,
                or_(
                    c.owner.is_(None), c.owner == owner, c.lease_expire_at.is_(None), c.lease_expire_at < now
                ),
            )
            values = {
                "owner": owner,
                "lease_expire_at": now + lease_seconds,
                "epoch": c.epoch + 1,
                "warning": None,
            }
            self._cas(conn, expected, cond, values)
            return self._get(conn, expected.namespace, expected.id)

    def renew_lease(
        self, expected: ChangefeedInfo, owner: str, lease_seconds: float, **values: Any
    ) -> ChangefeedInfo:
        """The owner extends its lease (and records progress in ``values``) by CAS."""
        for col in ("checkpoint_ts", "resolved_ts"):
            if col in values and values[col] is not None:
                values[col] = max(int(values[col]), getattr(expected, col))
        unknown = set(values) - _RENEWABLE
        if unknown:
            raise ValueError(f"a renewal cannot write {sorted(unknown)}")
        with self._tx() as conn:
            now = self._now(conn)
            # Statements made once per set of columns, with every value bound: each changefeed of
            # a server renews every few seconds and records every mark, and a statement built
            # afresh cost SQLAlchemy's cache key walk over its values each time.
            cols = tuple(sorted(values))
            res = conn.execute(
                _renew_statement(cols),
                {
                    **values,
                    "lease_expire_at": now + lease_seconds,
                    "updated_at": now,
                    "_ns": expected.namespace,
                    "_id": expected.id,
                    "_version": expected.version,
                    "_owner": owner,
                },
            )
            if res.rowcount != 1:
                self._raise_lost(conn, expected)
            return self._get(conn, expected.namespace, expected.id)

    def release_changefeed(self, expected: ChangefeedInfo, owner: str, **values: Any) -> ChangefeedInfo:
        """The owner gives the changefeed up (CAS), optionally recording a final state and progress."""
        for col in ("checkpoint_ts", "resolved_ts"):
            if col in values and values[col] is not None:
                values[col] = max(int(values[col]), getattr(expected, col))
        values = {k: (v.value if isinstance(v, ChangefeedState) else v) for k, v in values.items()}
        with self._tx() as conn:
            cond = and_(changefeeds.c.version == expected.version, changefeeds.c.owner == owner)
            self._cas(conn, expected, cond, {**values, "owner": None, "lease_expire_at": None})
            return self._get(conn, expected.namespace, expected.id)

    def claimable_changefeeds(self) -> list[ChangefeedInfo]:
        """Normal changefeeds without an owner or whose owner's lease expired."""
        with self._read() as conn:
            now = self._now(conn)
            c = changefeeds.c
            q = (
                select(changefeeds)
                .where(
                    c.state == ChangefeedState.NORMAL.value,
                    or_(c.owner.is_(None), c.lease_expire_at.is_(None), c.lease_expire_at < now),
                )
                .order_by(c.created_at)
            )
            return [_to_info(r) for r in conn.execute(q).mappings()]

    def owned_changefeeds(self, owner: str) -> list[ChangefeedInfo]:
        """Changefeeds whose ``owner`` is this server (whatever their state)."""
        with self._read() as conn:
            q = select(changefeeds).where(changefeeds.c.owner == owner).order_by(changefeeds.c.created_at)
            return [_to_info(r) for r in conn.execute(q).mappings()]

    def delete_changefeed(self, expected: ChangefeedInfo) -> None:
        """Delete a changefeed row and its range progress (CAS on version)."""
        with self._tx() as conn:
            res = conn.execute(
                delete(changefeeds).where(
                    _cf_key(expected.namespace, expected.id), changefeeds.c.version == expected.version
                )
            )
            if res.rowcount != 1:
                self._raise_lost(conn, expected)
            self._delete_progress(conn, expected.namespace, expected.id)

    @staticmethod
    def _delete_progress(conn: Connection, namespace: str, changefeed_id: str) -> None:
        """A changefeed's range progress and snapshot record."""
        for t in (range_progress, snapshot_done):
            conn.execute(delete(t).where(t.c.namespace == namespace, t.c.changefeed_id == changefeed_id))

    def _cas(self, conn: Connection, expected: ChangefeedInfo, cond: Any, values: dict[str, Any]) -> None:
        values = {**values, "version": changefeeds.c.version + 1, "updated_at": self._now(conn)}
        if "subscriber_name" in values:  # the model's name of the ``subscriber`` column
            values["subscriber"] = values.pop("subscriber_name")
            if values["subscriber"] is None:
                values["subscribed_schema"] = values["subscribed_table"] = None
        res = conn.execute(
            update(changefeeds).where(_cf_key(expected.namespace, expected.id), cond).values(**values)
        )
        if res.rowcount != 1:
            self._raise_lost(conn, expected)

    def _raise_lost(self, conn: Connection, expected: ChangefeedInfo) -> None:
        now = self._find(conn, expected.namespace, expected.id)
        if now is None:
            raise ChangefeedNotFound(
                f"changefeed {expected.id!r} does not exist in namespace {expected.namespace!r}"
            )
        raise ConflictError(
            f"changefeed {expected.id!r} changed concurrently (expected version {expected.version}, "
            f"now {now.version}, state {now.state}, owner {now.owner}); re-read it and retry"
        )

    def _find(self, conn: Connection, namespace: str, changefeed_id: str) -> ChangefeedInfo | None:
        # one statement made once, its key bound: a server reads its rows every few seconds
        row = conn.execute(_ROW_BY_KEY, {"_ns": namespace, "_id": changefeed_id}).mappings().first()
        return _to_info(row) if row is not None else None

    def _get(self, conn: Connection, namespace: str, changefeed_id: str) -> ChangefeedInfo:
        cf = self._find(conn, namespace, changefeed_id)
        if cf is None:
            raise ChangefeedNotFound(
                f"changefeed {changefeed_id!r} does not exist in namespace {namespace!r}"
            )
        return cf

    # ------------------------------------------------------------------ range progress

    def get_range_progress(
        self,
        changefeed_id: str,
        namespace: str = "default",
        schema: str | None = None,
        table: str | None = None,
    ) -> list[RangeProgress]:
        """Progress rows of a changefeed, optionally of one table, ordered by table and range id."""
        rp = range_progress.c
        q = select(range_progress).where(rp.namespace == namespace, rp.changefeed_id == changefeed_id)
        if schema is not None:
            q = q.where(rp.schema_name == schema)
        if table is not None:
            q = q.where(rp.table_name == table)
        q = q.order_by(rp.schema_name, rp.table_name, rp.range_id)
        with self._read() as conn:
            return [_to_progress(r) for r in conn.execute(q).mappings()]

    def save_range_progress(self, p: RangeProgress) -> RangeProgress:
        """Insert (``p.version == 0``) or compare-and-swap update a range's progress; returns the stored row."""
        rp = range_progress.c
        key = and_(
            rp.namespace == p.namespace,
            rp.changefeed_id == p.changefeed_id,
            rp.schema_name == p.schema,
            rp.table_name == p.table,
            rp.range_id == p.range_id,
        )
        values = {
            "stage": RangeStage(p.stage).value,
            "snapshot_version": p.snapshot_version,
            "last_snapshot_key": p.last_snapshot_key,
            "last_log_position": p.last_log_position,
            "rows_copied": p.rows_copied,
            "parent_range_id": p.parent_range_id,
        }
        with self._tx() as conn:
            now = self._now(conn)
            if p.version == 0:
                try:
                    conn.execute(
                        insert(range_progress).values(
                            namespace=p.namespace,
                            changefeed_id=p.changefeed_id,
                            schema_name=p.schema,
                            table_name=p.table,
                            range_id=p.range_id,
                            version=1,
                            updated_at=now,
                            **values,
                        )
                    )
                except IntegrityError as exc:
                    raise ConflictError(
                        f"progress of range {p.range_id} of `{p.schema}`.`{p.table}` in changefeed "
                        f"{p.changefeed_id!r} already exists; read it and update with its version"
                    ) from exc
            else:
                res = conn.execute(
                    update(range_progress)
                    .where(key, rp.version == p.version)
                    .values(version=rp.version + 1, updated_at=now, **values)
                )
                if res.rowcount != 1:
                    raise ConflictError(
                        f"progress of range {p.range_id} of `{p.schema}`.`{p.table}` in changefeed "
                        f"{p.changefeed_id!r} changed concurrently (expected version {p.version}); re-read it"
                    )
            row = conn.execute(select(range_progress).where(key)).mappings().one()
            return _to_progress(row)

    def split_range(self, parent: RangeProgress, new_range_ids: Sequence[int]) -> list[RangeProgress]:
        """Create progress rows for ranges split from ``parent``; each inherits the parent's progress.

        Ranges that already have progress keep it (a retried split is harmless).
        """
        out: list[RangeProgress] = []
        for rid in new_range_ids:
            existing = self.get_range_progress(
                parent.changefeed_id, parent.namespace, parent.schema, parent.table
            )
            found = next((e for e in existing if e.range_id == rid), None)
            if found is not None:
                out.append(found)
                continue
            child = RangeProgress(
                changefeed_id=parent.changefeed_id,
                schema=parent.schema,
                table=parent.table,
                range_id=rid,
                stage=parent.stage,
                snapshot_version=parent.snapshot_version,
                last_snapshot_key=parent.last_snapshot_key,
                last_log_position=parent.last_log_position,
                rows_copied=0,
                parent_range_id=parent.range_id,
                namespace=parent.namespace,
            )
            try:
                out.append(self.save_range_progress(child))
            except ConflictError:
                out.extend(
                    e
                    for e in self.get_range_progress(
                        parent.changefeed_id, parent.namespace, parent.schema, parent.table
                    )
                    if e.range_id == rid
                )
        return out

    # ------------------------------------------------------------------ snapshot done

    def snapshot_report(
        self, changefeed_id: str, namespace: str, changefeed_uid: str
    ) -> dict[str, Any] | None:
        """The report of the changefeed's initial snapshot once it is durable in the sink (else None).

        A record of another changefeed identity (a removed one with the same id) does not count.
        """
        sd = snapshot_done.c
        q = select(snapshot_done).where(sd.namespace == namespace, sd.changefeed_id == changefeed_id)
        with self._read() as conn:
            row = conn.execute(q).mappings().first()
        if row is None or row["changefeed_uid"] != changefeed_uid:
            return None
        return dict(row["report"])

    def save_snapshot_report(
        self, changefeed_id: str, namespace: str, changefeed_uid: str, report: dict[str, Any]
    ) -> None:
        """Record that the changefeed's initial snapshot is durable in the sink (idempotent)."""
        sd = snapshot_done.c
        key = and_(sd.namespace == namespace, sd.changefeed_id == changefeed_id)
        with self._tx() as conn:
            conn.execute(delete(snapshot_done).where(key))
            conn.execute(
                insert(snapshot_done).values(
                    namespace=namespace,
                    changefeed_id=changefeed_id,
                    changefeed_uid=changefeed_uid,
                    report=report,
                    done_at=self._now(conn),
                )
            )

    # ------------------------------------------------------------------ identity

    def identity(self) -> str:
        """The meta database's own identity: a uuid made on first use and kept in ``meta_info``."""
        q = select(meta_info.c.value).where(meta_info.c.name == "identity")
        with self._read() as conn:
            found = conn.execute(q).scalar()
        if found is not None:
            return str(found)
        try:
            with self._tx() as conn:
                found = conn.execute(q).scalar()
                if found is None:
                    found = str(uuid.uuid4())
                    conn.execute(insert(meta_info).values(name="identity", value=found))
        except IntegrityError:  # another server made it first (PostgreSQL; SQLite's BEGIN IMMEDIATE waits)
            with self._read() as conn:
                found = conn.execute(q).scalar_one()
        return str(found)

    # ------------------------------------------------------------------ schema history

    def add_schema_version(self, v: SchemaVersion) -> bool:
        """Record a table version; True if new, False if the same version was already stored.

        A different shape or query for an existing version raises SchemaError.
        """
        sh = schema_history.c
        key = and_(
            sh.upstream_id == v.upstream_id,
            sh.schema_name == v.schema,
            sh.table_name == v.table,
            sh.version == v.version,
        )
        with self._tx() as conn:
            row = conn.execute(select(schema_history).where(key)).mappings().first()
            if row is None:
                try:
                    conn.execute(
                        insert(schema_history).values(
                            upstream_id=v.upstream_id,
                            schema_name=v.schema,
                            table_name=v.table,
                            version=v.version,
                            table_info=v.table_info,
                            query=v.query,
                            created_at=self._now(conn),
                        )
                    )
                    return True
                except IntegrityError:
                    row = conn.execute(select(schema_history).where(key)).mappings().one()
            if row["table_info"] != v.table_info or row["query"] != v.query:
                raise SchemaError(
                    f"schema history of upstream {v.upstream_id!r} already has version {v.version} of "
                    f"`{v.schema}`.`{v.table}` with a different shape (query {row['query']!r}); "
                    "two schema trackers disagree: check that one upstream id is not used for two databases"
                )
            return False

    def schema_history(
        self, upstream_id: str, schema: str | None = None, table: str | None = None
    ) -> list[SchemaVersion]:
        """Stored table versions of an upstream, ordered by (schema, table, version)."""
        sh = schema_history.c
        q = select(schema_history).where(sh.upstream_id == upstream_id)
        if schema is not None:
            q = q.where(sh.schema_name == schema)
        if table is not None:
            q = q.where(sh.table_name == table)
        q = q.order_by(sh.schema_name, sh.table_name, sh.version)
        with self._read() as conn:
            return [_to_schema(r) for r in conn.execute(q).mappings()]

    def schema_at(self, upstream_id: str, schema: str, table: str, ts: int) -> SchemaVersion | None:
        """The table's newest version with ``version <= ts`` (the shape a row at ``ts`` was written in)."""
        sh = schema_history.c
        q = (
            select(schema_history)
            .where(
                sh.upstream_id == upstream_id,
                sh.schema_name == schema,
                sh.table_name == table,
                sh.version <= ts,
            )
            .order_by(sh.version.desc())
            .limit(1)
        )
        with self._read() as conn:
            row = conn.execute(q).mappings().first()
        return _to_schema(row) if row is not None else None

    # ------------------------------------------------------------------ servers

    def heartbeat_server(self, server_id: str, address: str, version: str) -> float:
        """Insert or refresh this server's row; returns the database time of the heartbeat."""
        with self._tx() as conn:
            now = self._now(conn)
            res = conn.execute(
                update(servers).where(servers.c.id == server_id).values(heartbeat_at=now, address=address)
            )
            if res.rowcount == 0:
                conn.execute(
                    insert(servers).values(
                        id=server_id,
                        address=address,
                        version=version,
                        pid=os.getpid(),
                        heartbeat_at=now,
                        started_at=now,
                    )
                )
            return now

    def list_servers(self, alive_within: float | None = None) -> list[ServerInfo]:
        """Servers (with the changefeeds each owns), optionally only those that beat recently."""
        with self._read() as conn:
            now = self._now(conn)
            q = select(servers).order_by(servers.c.started_at, servers.c.id)
            if alive_within is not None:
                q = q.where(servers.c.heartbeat_at >= now - alive_within)
            rows = list(conn.execute(q).mappings())
            owned: dict[str, list[str]] = {}
            for ns, cid, owner in conn.execute(
                select(changefeeds.c.namespace, changefeeds.c.id, changefeeds.c.owner).where(
                    changefeeds.c.owner.is_not(None), changefeeds.c.lease_expire_at > now
                )
            ):
                owned.setdefault(owner, []).append(cid if ns == "default" else f"{ns}/{cid}")
        return [
            ServerInfo(
                id=r["id"],
                address=r["address"],
                version=r["version"],
                pid=r["pid"],
                heartbeat_at=r["heartbeat_at"],
                started_at=r["started_at"],
                owned=sorted(owned.get(r["id"], [])),
            )
            for r in rows
        ]

    def remove_server(self, server_id: str) -> None:
        """Forget a server (on clean shutdown)."""
        with self._tx() as conn:
            conn.execute(delete(servers).where(servers.c.id == server_id))

    def prune_servers(self, dead_after: float) -> int:
        """Delete servers whose last heartbeat is older than ``dead_after`` seconds; returns how many."""
        with self._tx() as conn:
            now = self._now(conn)
            res = conn.execute(delete(servers).where(servers.c.heartbeat_at < now - dead_after))
            return int(res.rowcount or 0)


_RENEWABLE = frozenset({"checkpoint_ts", "resolved_ts", "stats", "warning"})
"""What an owner's renewal records beside its lease (``renew_lease``)."""

_renew_statements: dict[tuple[str, ...], Any] = {}

_ROW_BY_KEY = select(changefeeds).where(
    changefeeds.c.namespace == bindparam("_ns"), changefeeds.c.id == bindparam("_id")
)


def _renew_statement(cols: tuple[str, ...]) -> Any:
    """The compare-and-swap of a renewal writing ``cols``, its values and key bound (made once)."""
    stmt = _renew_statements.get(cols)
    if stmt is None:
        c = changefeeds.c
        stmt = (
            update(changefeeds)
            .where(
                c.namespace == bindparam("_ns"),
                c.id == bindparam("_id"),
                c.version == bindparam("_version"),
                c.owner == bindparam("_owner"),
            )
            .values(
                {
                    **{
                        col: bindparam(col, type_=c[col].type)
                        for col in (*cols, "lease_expire_at", "updated_at")
                    },
                    "version": c.version + 1,
                }
            )
        )
        _renew_statements[cols] = stmt
    return stmt


def _cf_key(namespace: str, changefeed_id: str) -> Any:
    return and_(changefeeds.c.namespace == namespace, changefeeds.c.id == changefeed_id)


def _to_info(r: Any) -> ChangefeedInfo:
    return ChangefeedInfo(
        namespace=r["namespace"],
        id=r["id"],
        upstream_uri=r["upstream_uri"],
        sink_uri=r["sink_uri"],
        config=dict(r["config"] or {}),
        state=ChangefeedState(r["state"]),
        error=r["error"],
        warning=r["warning"],
        owner=r["owner"],
        lease_expire_at=r["lease_expire_at"],
        epoch=int(r["epoch"]),
        version=int(r["version"]),
        start_ts=None if r["start_ts"] is None else int(r["start_ts"]),
        target_ts=None if r["target_ts"] is None else int(r["target_ts"]),
        checkpoint_ts=int(r["checkpoint_ts"]),
        resolved_ts=int(r["resolved_ts"]),
        subscriber_name=r["subscriber"],
        stats=dict(r["stats"] or {}),
        created_at=float(r["created_at"]),
        updated_at=float(r["updated_at"]),
        uid=r["uid"] or "",
        upstream=r["upstream"],
    )


def _to_progress(r: Any) -> RangeProgress:
    return RangeProgress(
        changefeed_id=r["changefeed_id"],
        schema=r["schema_name"],
        table=r["table_name"],
        range_id=int(r["range_id"]),
        stage=RangeStage(r["stage"]),
        snapshot_version=None if r["snapshot_version"] is None else int(r["snapshot_version"]),
        last_snapshot_key=r["last_snapshot_key"],
        last_log_position=r["last_log_position"],
        rows_copied=int(r["rows_copied"]),
        parent_range_id=None if r["parent_range_id"] is None else int(r["parent_range_id"]),
        namespace=r["namespace"],
        version=int(r["version"]),
        updated_at=float(r["updated_at"]),
    )


def _to_schema(r: Any) -> SchemaVersion:
    return SchemaVersion(
        upstream_id=r["upstream_id"],
        schema=r["schema_name"],
        table=r["table_name"],
        version=int(r["version"]),
        table_info=r["table_info"],
        query=r["query"],
        created_at=float(r["created_at"]),
    )
