"""Durable registry state in SQL (SQLAlchemy Core): schemas, subject versions, compatibility config.

Tables: ``registry_schemas`` (global ids → schema text, unique by fingerprint),
``registry_subject_versions`` (subject, version → schema id, soft-delete flag)
and ``registry_config`` (subject → compatibility level; ``""`` is the global
level). Writes are serialised by a process lock and each runs in one
transaction, so ids and versions survive a restart and are never reused.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from sparkcdc.errors import ConfigError

GLOBAL = ""
DEFAULT_COMPATIBILITY = "BACKWARD"

metadata = sa.MetaData()
schemas_table = sa.Table(
    "registry_schemas",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
    sa.Column("schema_type", sa.String(16), nullable=False),
    sa.Column("schema_text", sa.Text, nullable=False),
)
versions_table = sa.Table(
    "registry_subject_versions",
    metadata,
    sa.Column("subject", sa.String(255), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("schema_id", sa.Integer, nullable=False),
    sa.Column("deleted", sa.Boolean, nullable=False, default=False),
)
config_table = sa.Table(
    "registry_config",
    metadata,
    sa.Column("subject", sa.String(255), primary_key=True),
    sa.Column("compatibility", sa.String(32), nullable=False),
)


@dataclass(frozen=True)
class SchemaRow:
    """A stored schema."""

    id: int
    schema_type: str
    text: str


@dataclass(frozen=True)
class VersionRow:
    """One version of a subject."""

    subject: str
    version: int
    schema_id: int
    deleted: bool
    schema_type: str
    text: str


def fingerprint(schema_type: str, text: str) -> str:
    """The identity of a schema: sha256 of its type and key-sorted compact JSON."""
    try:
        canon = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        canon = text
    return hashlib.sha256(f"{schema_type}\n{canon}".encode()).hexdigest()


def engine_for(meta_uri: str) -> sa.Engine:
    """An SQLAlchemy engine for a meta URI (sqlite:///path, postgresql://…, mysql://…)."""
    url = meta_uri
    for prefix, driver in (
        ("postgres://", "postgresql+psycopg://"),
        ("postgresql://", "postgresql+psycopg://"),
        ("mysql://", "mysql+pymysql://"),
    ):
        if url.startswith(prefix):
            url = driver + url[len(prefix) :]
    try:
        if url.startswith("sqlite"):
            return sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        return sa.create_engine(url, pool_pre_ping=True)
    except (sa.exc.ArgumentError, ImportError) as exc:
        raise ConfigError(
            f"invalid --meta-uri {meta_uri!r}: {exc}; use sqlite:///path/to/registry.db, "
            "postgresql://user:pass@host/db or mysql://user:pass@host/db"
        ) from exc


class RegistryStore:
    """Subjects, versions, global schema ids and compatibility levels in one SQL database."""

    def __init__(self, meta_uri: str) -> None:
        self.engine = engine_for(meta_uri)
        metadata.create_all(self.engine)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- config ---------------------------------------------------------------------------------------------

    def get_config(self, subject: str = GLOBAL) -> str | None:
        """The level set for a subject (or the global one for ``""``); None if unset."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(config_table.c.compatibility).where(config_table.c.subject == subject)
            ).first()
        return None if row is None else str(row[0])

    def effective_config(self, subject: str) -> str:
        """The subject's level, else the global level, else BACKWARD."""
        return self.get_config(subject) or self.get_config(GLOBAL) or DEFAULT_COMPATIBILITY

    def set_config(self, subject: str, level: str) -> None:
        """Set the level of a subject (``""``: global)."""
        with self._lock, self.engine.begin() as conn:
            conn.execute(sa.delete(config_table).where(config_table.c.subject == subject))
            conn.execute(sa.insert(config_table).values(subject=subject, compatibility=level))

    def delete_config(self, subject: str) -> str | None:
        """Remove a subject's level; returns the old one."""
        with self._lock, self.engine.begin() as conn:
            old = conn.execute(
                sa.select(config_table.c.compatibility).where(config_table.c.subject == subject)
            ).first()
            conn.execute(sa.delete(config_table).where(config_table.c.subject == subject))
        return None if old is None else str(old[0])

    # -- reads ----------------------------------------------------------------------------------------------

    def subjects(self, include_deleted: bool = False) -> list[str]:
        """Subjects with at least one (non-deleted, unless asked) version."""
        q = sa.select(versions_table.c.subject).distinct()
        if not include_deleted:
            q = q.where(versions_table.c.deleted == sa.false())
        with self.engine.connect() as conn:
            return sorted(str(r[0]) for r in conn.execute(q))

    def versions(self, subject: str, include_deleted: bool = False) -> list[VersionRow]:
        """A subject's versions in order."""
        q = (
            sa.select(
                versions_table.c.subject,
                versions_table.c.version,
                versions_table.c.schema_id,
                versions_table.c.deleted,
                schemas_table.c.schema_type,
                schemas_table.c.schema_text,
            )
            .join(schemas_table, schemas_table.c.id == versions_table.c.schema_id)
            .where(versions_table.c.subject == subject)
            .order_by(versions_table.c.version)
        )
        if not include_deleted:
            q = q.where(versions_table.c.deleted == sa.false())
        with self.engine.connect() as conn:
            return [VersionRow(r[0], int(r[1]), int(r[2]), bool(r[3]), r[4], r[5]) for r in conn.execute(q)]

    def subject_exists(self, subject: str, include_deleted: bool = False) -> bool:
        """Whether a subject has any version."""
        return bool(self.versions(subject, include_deleted))

    def schema_by_id(self, schema_id: int) -> SchemaRow | None:
        """A schema by its global id."""
        with self.engine.connect() as conn:
            r = conn.execute(
                sa.select(schemas_table.c.id, schemas_table.c.schema_type, schemas_table.c.schema_text).where(
                    schemas_table.c.id == schema_id
                )
            ).first()
        return None if r is None else SchemaRow(int(r[0]), r[1], r[2])

    def usages(self, schema_id: int, include_deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) pairs that use a schema id."""
        q = sa.select(versions_table.c.subject, versions_table.c.version).where(
            versions_table.c.schema_id == schema_id
        )
        if not include_deleted:
            q = q.where(versions_table.c.deleted == sa.false())
        with self.engine.connect() as conn:
            return sorted((str(r[0]), int(r[1])) for r in conn.execute(q))

    # -- writes ---------------------------------------------------------------------------------------------

    def register(
        self,
        subject: str,
        schema_type: str,
        text: str,
        check: Callable[[list[VersionRow]], None],
    ) -> tuple[int, int, bool]:
        """Register a schema: (id, version, created). ``check`` sees the live versions and may raise."""
        fp = fingerprint(schema_type, text)
        with self._lock:
            live = self.versions(subject)
            for v in live:
                if fingerprint(v.schema_type, v.text) == fp:
                    return v.schema_id, v.version, False
            check(live)
            with self.engine.begin() as conn:
                existing = conn.execute(
                    sa.select(schemas_table.c.id).where(schemas_table.c.fingerprint == fp)
                ).first()
                if existing is not None:
                    schema_id = int(existing[0])
                else:
                    schema_id = (
                        int(
                            conn.execute(
                                sa.select(sa.func.coalesce(sa.func.max(schemas_table.c.id), 0))
                            ).scalar_one()
                        )
                        + 1
                    )
                    conn.execute(
                        sa.insert(schemas_table).values(
                            id=schema_id, fingerprint=fp, schema_type=schema_type, schema_text=text
                        )
                    )
                version = (
                    int(
                        conn.execute(
                            sa.select(sa.func.coalesce(sa.func.max(versions_table.c.version), 0)).where(
                                versions_table.c.subject == subject
                            )
                        ).scalar_one()
                    )
                    + 1
                )
                conn.execute(
                    sa.insert(versions_table).values(
                        subject=subject, version=version, schema_id=schema_id, deleted=False
                    )
                )
        return schema_id, version, True

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        """Soft-delete the live versions, or (permanent) remove the soft-deleted ones; returns the versions."""
        with self._lock, self.engine.begin() as conn:
            where = versions_table.c.subject == subject
            if permanent:
                rows = conn.execute(
                    sa.select(versions_table.c.version).where(where).order_by(versions_table.c.version)
                )
                versions = [int(r[0]) for r in rows]
                conn.execute(sa.delete(versions_table).where(where))
                conn.execute(sa.delete(config_table).where(config_table.c.subject == subject))
            else:
                live = where & (versions_table.c.deleted == sa.false())
                rows = conn.execute(
                    sa.select(versions_table.c.version).where(live).order_by(versions_table.c.version)
                )
                versions = [int(r[0]) for r in rows]
                conn.execute(sa.update(versions_table).where(live).values(deleted=True))
        return versions

    def delete_version(self, subject: str, version: int, permanent: bool) -> None:
        """Soft-delete one version, or (permanent) remove it."""
        with self._lock, self.engine.begin() as conn:
            where = (versions_table.c.subject == subject) & (versions_table.c.version == version)
            if permanent:
                conn.execute(sa.delete(versions_table).where(where))
            else:
                conn.execute(sa.update(versions_table).where(where).values(deleted=True))
