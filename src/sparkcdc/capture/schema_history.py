"""Schema history: every version of every table, persisted, so old binlog decodes with its own shape.

A row with commit_ts ``ts`` is decoded with ``SchemaHistory.at(schema, table, ts)``:
the newest table version at or before ``ts``. Versions come from a bootstrap
(the catalog loaded when capture starts) and from each DDLEvent the catalog
produces. Entries are appended to a ``SchemaHistoryStore``; ``SchemaHistory.open``
replays them, so a restarted process decodes exactly as before. Recording the
same DDL twice (a binlog re-scan after a restart) is a no-op.

Typical use by the capture::

    history = SchemaHistory.open(FileSchemaHistoryStore(path))
    if history.empty:
        catalog = SchemaCatalog.load_from_upstream(conn, schemas, version=start_ts)
        history.bootstrap(catalog, start_ts)
    else:
        catalog = history.catalog_at(checkpoint_ts)
    ...
    events = history.apply(catalog, query, default_schema, commit_ts)  # for each QUERY event
"""

from __future__ import annotations

import bisect
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from sparkcdc.capture.catalog import SchemaCatalog, TableMatch, TableMeta
from sparkcdc.capture.ddl import AlterDatabase, CreateDatabase, parse_statement, resolve_charset
from sparkcdc.errors import SchemaError
from sparkcdc.model.events import DDLEvent, DDLType
from sparkcdc.model.schema import TableInfo

ENTRY_FORMAT = 1


class SchemaHistoryStore(Protocol):
    """Where history entries (JSON-able dicts) are kept, in append order."""

    def load(self) -> list[dict[str, Any]]:
        """Every stored entry, oldest first."""
        ...

    def append(self, entries: list[dict[str, Any]]) -> None:
        """Durably add entries at the end."""
        ...


def parse_history_lines(data: bytes, where: str) -> list[dict[str, Any]]:
    """The complete JSON lines of a history file's bytes; a torn last line (crash mid-write) is dropped."""
    lines = data.split(b"\n")
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        last = i == len(lines) - 1  # no newline after it: the write was cut short
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            if last:
                break
            raise SchemaError(
                f"schema history file {where} is corrupt at line {i + 1}: {e}; restore it from a "
                "backup or remove it and restart the changefeed from a new snapshot"
            ) from e
        if last:
            break
        out.append(entry)
    return out


class FileSchemaHistoryStore:
    """A JSON-lines file; each append is fsynced. A torn last line (crash mid-write) is dropped."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> list[dict[str, Any]]:
        """Every complete entry in the file ([] if it does not exist)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return parse_history_lines(data, str(self.path))

    def append(self, entries: list[dict[str, Any]]) -> None:
        """Append entries as JSON lines and fsync (a torn tail is cut off first)."""
        if not entries:
            return
        payload = b"".join(orjson.dumps(e) + b"\n" for e in entries)
        created = not self.path.exists()
        if created:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size:
                f.seek(max(0, size - 1))
                if f.read(1) != b"\n":
                    self._truncate_torn_tail(f, size)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if created:
            _fsync_dir(self.path.parent)

    @staticmethod
    def _truncate_torn_tail(f: Any, size: int) -> None:
        f.seek(0)
        data = f.read(size)
        cut = data.rfind(b"\n") + 1
        f.truncate(cut)
        f.seek(0, os.SEEK_END)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems do not support fsync on directories; the file itself is synced
    finally:
        os.close(fd)


class MemorySchemaHistoryStore:
    """An in-memory store (tests, one-shot runs)."""

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self.entries: list[dict[str, Any]] = list(entries or [])

    def load(self) -> list[dict[str, Any]]:
        """Every entry."""
        return list(self.entries)

    def append(self, entries: list[dict[str, Any]]) -> None:
        """Add entries."""
        self.entries.extend(entries)


@dataclass(frozen=True, slots=True)
class _Version:
    ts: int
    info: TableInfo | None
    meta: TableMeta | None


def _ddl_key(ev: DDLEvent) -> tuple[Any, ...]:
    return (ev.commit_ts, ev.query, ev.schema, ev.table, ev.ddl_type.value, ev.old_schema, ev.old_table)


class SchemaHistory:
    """Every version of every table (and database), in commit_ts order."""

    def __init__(self, store: SchemaHistoryStore | None = None, captured: TableMatch | None = None) -> None:
        """``captured``: the changefeed's table filter, given to every catalog ``catalog_at`` makes
        (a DDL that fails on tables outside it only forgets them; see ``SchemaCatalog.apply_ddl``)."""
        self.captured = captured
        self._store: SchemaHistoryStore = store if store is not None else MemorySchemaHistoryStore()
        self._tables: dict[tuple[str, str], list[_Version]] = {}
        self._dbs: dict[str, list[tuple[int, tuple[str, str] | None]]] = {}
        self._server: tuple[str, str] = ("utf8mb4", "utf8mb4_general_ci")
        self._scope: list[str] | None = None
        self._keys: set[tuple[Any, ...]] = set()
        self._events: dict[tuple[int, str], list[DDLEvent]] = {}
        self._bootstraps: list[int] = []
        # catalogs this history handed out or was given: record() finds an event's TableMeta there
        self._catalogs: list[weakref.ref[SchemaCatalog]] = []

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, store: SchemaHistoryStore, captured: TableMatch | None = None) -> SchemaHistory:
        """Replay the store's entries into a new history that appends to the same store."""
        h = cls(store, captured)
        for entry in store.load():
            h._apply_entry(entry)
        return h

    @property
    def empty(self) -> bool:
        """True until something was bootstrapped or recorded."""
        return not self._bootstraps and not self._keys

    # -- recording ---------------------------------------------------------------------------
    def bootstrap(self, catalog: SchemaCatalog, version: int) -> None:
        """Record every table of a catalog as in force from ``version`` on."""
        self._remember(catalog)
        if version in self._bootstraps:
            return
        entry = {"format": ENTRY_FORMAT, "kind": "bootstrap", "ts": version, "catalog": catalog.to_dict()}
        self._apply_entry(entry)
        self._store.append([entry])

    def record(self, ev: DDLEvent, meta: TableMeta | None = None) -> bool:
        """Record one DDLEvent (``meta``: the catalog's TableMeta for the new shape, if known).

        Without ``meta`` it is taken from the catalog the event came from, when that catalog was
        handed out by ``catalog_at`` or given to ``bootstrap``/``apply``. Returns False when the
        same DDL (commit_ts, query, table) was already recorded.
        """
        if meta is None and ev.table_info is not None:
            meta = self._meta_of(ev)
        entry = self._entry_for(ev, meta)
        if entry is None:
            return False
        self._apply_entry(entry)
        self._store.append([entry])
        return True

    def apply(
        self, catalog: SchemaCatalog, query: str, default_schema: str | None, commit_ts: int
    ) -> list[DDLEvent]:
        """Apply a QUERY event to the catalog and record the DDLEvents it produced.

        A statement at or before the catalog's ``applied_ts`` was applied before (a re-scan
        after a restart): the catalog is left alone and the recorded events are returned.
        """
        self._remember(catalog)
        if commit_ts <= catalog.applied_ts:
            return list(self._events.get((commit_ts, query), []))
        events = catalog.apply_ddl(query, default_schema, commit_ts)
        entries: list[dict[str, Any]] = []
        for schema, table in catalog.forgotten:
            # the table's shape is unknown from here on: no version of it is in force
            forget: dict[str, Any] = {
                "format": ENTRY_FORMAT,
                "kind": "forget",
                "ts": commit_ts,
                "schema": schema,
                "table": table,
            }
            self._apply_entry(forget)
            entries.append(forget)
        for ev in events:
            meta = catalog.meta(ev.schema, ev.table) if ev.table_info is not None else None
            entry = self._entry_for(ev, meta)
            if entry is not None:
                self._apply_entry(entry)
                entries.append(entry)
        self._store.append(entries)
        return events

    def _remember(self, catalog: SchemaCatalog) -> None:
        self._catalogs = [r for r in self._catalogs if r() is not None and r() is not catalog]
        self._catalogs.append(weakref.ref(catalog))

    def _meta_of(self, ev: DDLEvent) -> TableMeta | None:
        for ref in reversed(self._catalogs):
            cat = ref()
            # the very TableInfo object the catalog produced for this event
            if cat is not None and cat.get(ev.schema, ev.table) is ev.table_info:
                return cat.meta(ev.schema, ev.table)
        return None

    def _entry_for(self, ev: DDLEvent, meta: TableMeta | None) -> dict[str, Any] | None:
        if _ddl_key(ev) in self._keys:
            return None
        db: list[str] | None = None
        if ev.ddl_type in (DDLType.CREATE_SCHEMA, DDLType.ALTER_SCHEMA):
            db = list(self._database_defaults(ev))
        return {
            "format": ENTRY_FORMAT,
            "kind": "ddl",
            "ts": ev.commit_ts,
            "query": ev.query,
            "schema": ev.schema,
            "table": ev.table,
            "ddl_type": ev.ddl_type.value,
            "old_schema": ev.old_schema,
            "old_table": ev.old_table,
            "seq": ev.seq,
            "table_info": ev.table_info.to_dict() if ev.table_info is not None else None,
            "meta": meta.to_dict() if meta is not None else None,
            "db": db,
        }

    def _database_defaults(self, ev: DDLEvent) -> tuple[str, str]:
        st = parse_statement(ev.query)
        current = self._db_at(ev.schema, ev.commit_ts) or self._server
        if isinstance(st, CreateDatabase):
            return resolve_charset(st.charset, st.collation, self._server) or self._server
        if isinstance(st, AlterDatabase):
            return resolve_charset(st.charset, st.collation, current) or current
        return current

    # -- replay ------------------------------------------------------------------------------
    def _apply_entry(self, entry: dict[str, Any]) -> None:
        kind = entry.get("kind")
        ts = int(entry["ts"])
        if kind == "bootstrap":
            cat = SchemaCatalog.from_dict(entry["catalog"])
            self._server = (cat.server_charset, cat.server_collation)
            self._scope = sorted(cat.scope) if cat.scope is not None else None
            for key, versions in self._tables.items():
                if versions and versions[-1].info is not None and cat.get(*key) is None:
                    self._add_table(key, _Version(ts, None, None))
            for name, vs in self._dbs.items():
                if vs and vs[-1][1] is not None and name not in cat.databases():
                    self._add_db(name, ts, None)
            for name in cat.databases():
                d = cat.database_charset(name)
                self._add_db(name, ts, d)
            for info in cat.tables():
                self._add_table(
                    (info.schema, info.table), _Version(ts, info, cat.meta(info.schema, info.table))
                )
            bisect.insort(self._bootstraps, ts)
            return
        if kind == "forget":
            key0 = (str(entry["schema"]), str(entry["table"]))
            versions0 = self._tables.get(key0)
            if versions0 and versions0[-1].info is not None:
                self._add_table(key0, _Version(ts, None, None))
            return
        if kind != "ddl":
            raise SchemaError(
                f"unknown schema history entry kind {kind!r}; is the history from a newer sparkcdc?"
            )
        ev = DDLEvent(
            query=entry["query"],
            schema=entry["schema"],
            table=entry["table"],
            ddl_type=DDLType(entry["ddl_type"]),
            commit_ts=ts,
            table_version=ts,
            table_info=TableInfo.from_dict(entry["table_info"]) if entry.get("table_info") else None,
            old_schema=entry.get("old_schema"),
            old_table=entry.get("old_table"),
            seq=int(entry.get("seq", 0)),
        )
        key = _ddl_key(ev)
        if key in self._keys:
            return
        self._keys.add(key)
        self._events.setdefault((ts, ev.query), []).append(ev)
        meta = TableMeta.from_dict(entry["meta"]) if entry.get("meta") else None
        t = ev.ddl_type
        if t in (DDLType.CREATE_SCHEMA, DDLType.ALTER_SCHEMA):
            db = entry.get("db")
            self._add_db(ev.schema, ts, (db[0], db[1]) if db else self._server)
            return
        if t == DDLType.DROP_SCHEMA:
            self._add_db(ev.schema, ts, None)
            for key2, versions in self._tables.items():
                if key2[0] == ev.schema and versions and versions[-1].info is not None:
                    self._add_table(key2, _Version(ts, None, None))
            return
        if t == DDLType.DROP_TABLE:
            self._add_table((ev.schema, ev.table), _Version(ts, None, None))
            return
        if ev.old_schema is not None and ev.old_table is not None:
            if (ev.old_schema, ev.old_table) != (ev.schema, ev.table):
                self._add_table((ev.old_schema, ev.old_table), _Version(ts, None, None))
        if ev.table_info is not None:
            self._add_table((ev.schema, ev.table), _Version(ts, ev.table_info, meta))

    def _add_table(self, key: tuple[str, str], v: _Version) -> None:
        versions = self._tables.setdefault(key, [])
        # equal commit_ts keep record order (RENAME a TO t, b TO a, t TO b in one statement)
        i = bisect.bisect_right([x.ts for x in versions], v.ts)
        versions.insert(i, v)

    def _add_db(self, name: str, ts: int, d: tuple[str, str] | None) -> None:
        vs = self._dbs.setdefault(name, [])
        i = bisect.bisect_right([x[0] for x in vs], ts)
        vs.insert(i, (ts, d))

    # -- queries -----------------------------------------------------------------------------
    def _version_at(self, schema: str, table: str, ts: int) -> _Version | None:
        versions = self._tables.get((schema, table))
        if not versions:
            return None
        i = bisect.bisect_right([x.ts for x in versions], ts)
        return versions[i - 1] if i else None

    def _db_at(self, name: str, ts: int) -> tuple[str, str] | None:
        vs = self._dbs.get(name)
        if not vs:
            return None
        i = bisect.bisect_right([x[0] for x in vs], ts)
        return vs[i - 1][1] if i else None

    def at(self, schema: str, table: str, ts: int) -> TableInfo | None:
        """The shape in force for a row with commit_ts ``ts`` (None if the table did not exist then)."""
        v = self._version_at(schema, table, ts)
        return v.info if v is not None else None

    def versions(self, schema: str, table: str) -> list[int]:
        """The commit_ts of every recorded shape of a table, ascending."""
        out: list[int] = []
        for v in self._tables.get((schema, table), []):
            if v.info is not None and (not out or out[-1] != v.ts):
                out.append(v.ts)
        return out

    def events(self, since_ts: int = 0) -> list[DDLEvent]:
        """The recorded DDLEvents with commit_ts > ``since_ts``, in commit order."""
        out = [ev for (ts, _), evs in self._events.items() if ts > since_ts for ev in evs]
        return sorted(out, key=lambda e: e.commit_ts)

    def catalog_at(self, ts: int) -> SchemaCatalog:
        """A catalog with every database and table as they were at ``ts``."""
        cat = SchemaCatalog(
            server_charset=self._server[0],
            server_collation=self._server[1],
            scope=self._scope,
            captured=self.captured,
        )
        for name in sorted(self._dbs):
            d = self._db_at(name, ts)
            if d is not None:
                cat.add_database(name, d[0], d[1])
        for key in sorted(self._tables):
            v = self._version_at(key[0], key[1], ts)
            if v is not None and v.info is not None:
                cat.put(v.info, v.meta)
        cat.applied_ts = ts
        self._remember(cat)
        return cat
