"""Versioned migrations of the meta database, applied in order when a store opens.

``tables.py`` is the one definition of the tables. The first migration creates
them from it; each later migration changes an existing database from the shape
before it to the next one (adding the columns and tables it names from
``tables.py``). A new database (no migration applied yet) gets the current shape
from the first migration and every version is recorded as applied, so a later
migration only ever runs on a database that existed before it. Changing
``tables.py`` therefore means appending a migration, never editing one. Each
migration is a function of a connection inside one transaction. Two servers
opening the same database at once serialise on a lock (PostgreSQL advisory
lock, SQLite ``BEGIN IMMEDIATE``), so each migration runs exactly once.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from sqlalchemy import Connection, Engine, select, text, update

from sparkcdc.errors import ConfigError
from sparkcdc.meta.tables import (
    changefeeds,
    meta_info,
    metadata,
    schema_migrations,
    snapshot_done,
    subscription_key,
)

log = logging.getLogger(__name__)

# An arbitrary constant key for pg_advisory_xact_lock ("sparkcdc" in ASCII, truncated to int64).
_PG_LOCK_KEY = 0x737061726B636463


def _create_tables(conn: Connection) -> None:
    """Every table of ``tables.py`` that does not exist yet: on a new database, the current shape."""
    metadata.create_all(conn)


def _identities(conn: Connection) -> None:
    """``changefeeds.uid`` (a uuid for each existing changefeed), ``snapshot_done`` and ``meta_info``."""
    conn.execute(text("ALTER TABLE changefeeds ADD COLUMN uid VARCHAR(64)"))
    metadata.create_all(conn, tables=[snapshot_done, meta_info])
    c = changefeeds.c
    for ns, cid in conn.execute(select(c.namespace, c.id)).all():
        conn.execute(update(changefeeds).where(c.namespace == ns, c.id == cid).values(uid=str(uuid.uuid4())))


_ONE_TABLE = re.compile(r"`((?:[^`]|``)+)`\.`((?:[^`]|``)+)`")
"""The filter rule of a subscription (``server.service.subscription_rule``)."""


def _subscriptions(conn: Connection) -> None:
    """A subscriber's name is unique per (namespace, schema, table), no longer across the database.

    Version 2's ``subscriber_name`` was unique on its own, and SQLite cannot drop that constraint in
    place: the names move to ``subscriber`` beside the table each subscribes to (read from its
    one-table filter rule), and the old column stays behind, empty.
    """
    for column in ("subscriber", "subscribed_schema", "subscribed_table"):
        conn.execute(text(f"ALTER TABLE changefeeds ADD COLUMN {column} VARCHAR(255)"))
    rows = conn.execute(
        text(
            "SELECT namespace, id, subscriber_name, config FROM changefeeds WHERE subscriber_name IS NOT NULL"
        )
    ).all()
    c = changefeeds.c
    for ns, cid, name, config in rows:
        schema, table = subscribed_of(config)
        conn.execute(
            update(changefeeds)
            .where(c.namespace == ns, c.id == cid)
            .values(subscriber=name, subscribed_schema=schema, subscribed_table=table)
        )
    conn.execute(text("UPDATE changefeeds SET subscriber_name = NULL"))
    subscription_key.create(conn)


def subscribed_of(config: object) -> tuple[str, str]:
    """The (schema, table) a stored config's one-table filter rule selects, else ("", "")."""
    if isinstance(config, str):
        import json

        config = json.loads(config)
    rules = ((config or {}).get("filter") or {}).get("rules") if isinstance(config, dict) else None
    if isinstance(rules, list) and len(rules) == 1 and isinstance(rules[0], str):
        m = _ONE_TABLE.fullmatch(rules[0])
        if m is not None:
            return m.group(1).replace("``", "`"), m.group(2).replace("``", "`")
    return "", ""


def _upstream_identity(conn: Connection) -> None:
    """``changefeeds.upstream``: the identity of the upstream server (recorded at the next claim)."""
    conn.execute(text("ALTER TABLE changefeeds ADD COLUMN upstream JSON"))


Migration = tuple[int, str, Callable[[Connection], None]]

MIGRATIONS: list[Migration] = [
    (1, "initial: changefeeds, range_progress, schema_history, servers", _create_tables),
    (2, "identities: changefeeds.uid, snapshot_done, meta_info", _identities),
    (3, "subscriptions: a subscriber name is unique per namespace, schema and table", _subscriptions),
    (4, "upstream identity: changefeeds.upstream", _upstream_identity),
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
        new_database = not done
        for version, name, fn in MIGRATIONS:
            if version in done:
                continue
            if new_database and version != MIGRATIONS[0][0]:
                # the first migration built the current shape of tables.py: nothing to change
                log.info("meta: migration %d (%s) is part of the new database", version, name)
            else:
                log.info("meta: applying migration %d (%s)", version, name)
                fn(conn)
            conn.execute(
                schema_migrations.insert().values(version=version, name=name, applied_at=time.time())
            )
            applied.append(version)
    return applied
