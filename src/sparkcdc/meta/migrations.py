"""Versioned migrations of the meta database, applied in order when a store opens.

Each migration is a function of a connection inside one transaction, and its
table definitions are frozen copies: changing ``tables.py`` means appending a new
migration, never editing an old one. Two servers opening the same database at
once serialise on a lock (PostgreSQL advisory lock, SQLite ``BEGIN IMMEDIATE``),
so each migration runs exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Connection,
    Double,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    select,
    text,
)

from sparkcdc.errors import ConfigError
from sparkcdc.meta.tables import schema_migrations

log = logging.getLogger(__name__)

# An arbitrary constant key for pg_advisory_xact_lock ("sparkcdc" in ASCII, truncated to int64).
_PG_LOCK_KEY = 0x737061726B636463


def _v1_initial(conn: Connection) -> None:
    md = MetaData()
    Table(
        "changefeeds",
        md,
        Column("namespace", String(128), primary_key=True),
        Column("id", String(128), primary_key=True),
        Column("upstream_uri", Text, nullable=False),
        Column("sink_uri", Text, nullable=False),
        Column("config", JSON, nullable=False),
        Column("state", String(16), nullable=False),
        Column("error", JSON, nullable=True),
        Column("warning", Text, nullable=True),
        Column("owner", String(64), nullable=True),
        Column("lease_expire_at", Double, nullable=True),
        Column("epoch", BigInteger, nullable=False),
        Column("version", BigInteger, nullable=False),
        Column("start_ts", BigInteger, nullable=True),
        Column("target_ts", BigInteger, nullable=True),
        Column("checkpoint_ts", BigInteger, nullable=False),
        Column("resolved_ts", BigInteger, nullable=False),
        Column("subscriber_name", String(255), nullable=True, unique=True),
        Column("stats", JSON, nullable=True),
        Column("created_at", Double, nullable=False),
        Column("updated_at", Double, nullable=False),
    )
    Table(
        "range_progress",
        md,
        Column("namespace", String(128), primary_key=True),
        Column("changefeed_id", String(128), primary_key=True),
        Column("schema_name", String(255), primary_key=True),
        Column("table_name", String(255), primary_key=True),
        Column("range_id", BigInteger, primary_key=True, autoincrement=False),
        Column("stage", String(16), nullable=False),
        Column("snapshot_version", BigInteger, nullable=True),
        Column("last_snapshot_key", JSON, nullable=True),
        Column("last_log_position", JSON, nullable=True),
        Column("rows_copied", BigInteger, nullable=False),
        Column("parent_range_id", BigInteger, nullable=True),
        Column("version", BigInteger, nullable=False),
        Column("updated_at", Double, nullable=False),
    )
    Table(
        "schema_history",
        md,
        Column("upstream_id", String(255), primary_key=True),
        Column("schema_name", String(255), primary_key=True),
        Column("table_name", String(255), primary_key=True),
        Column("version", BigInteger, primary_key=True, autoincrement=False),
        Column("table_info", JSON, nullable=True),
        Column("query", Text, nullable=False),
        Column("created_at", Double, nullable=False),
    )
    Table(
        "servers",
        md,
        Column("id", String(64), primary_key=True),
        Column("address", String(255), nullable=False),
        Column("version", String(64), nullable=False),
        Column("pid", Integer, nullable=False),
        Column("heartbeat_at", Double, nullable=False),
        Column("started_at", Double, nullable=False),
    )
    md.create_all(conn)


Migration = tuple[int, str, Callable[[Connection], None]]

MIGRATIONS: list[Migration] = [
    (1, "initial: changefeeds, range_progress, schema_history, servers", _v1_initial),
]
"""Every migration in order; append only."""


def latest_version() -> int:
    """The schema version this code expects."""
    return MIGRATIONS[-1][0]


def migrate(engine: Engine) -> list[int]:
    """Apply the missing migrations under a database-wide lock; returns the versions applied."""
    applied: list[int] = []
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Blocks a second server until this transaction (and its DDL) commits.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        # SQLite: the store's engine begins every transaction with BEGIN IMMEDIATE,
        # which already holds the database's write lock here.
        schema_migrations.create(conn, checkfirst=True)
        done = set(conn.execute(select(schema_migrations.c.version)).scalars())
        unknown = sorted(v for v in done if v > latest_version())
        if unknown:
            raise ConfigError(
                f"the meta database has schema version(s) {unknown} newer than this sparkcdc "
                f"(latest known {latest_version()}); upgrade sparkcdc on this server"
            )
        for version, name, fn in MIGRATIONS:
            if version in done:
                continue
            log.info("meta: applying migration %d (%s)", version, name)
            fn(conn)
            conn.execute(
                schema_migrations.insert().values(version=version, name=name, applied_at=time.time())
            )
            applied.append(version)
    return applied
