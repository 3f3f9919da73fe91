"""A changefeed's state storage: ``--data-dir`` as a local path or an object-store URL.

A data dir is a local path (a shared mount counts as local) or a URL in the storage
sink's form with the same parameters (``s3://bucket/prefix?endpoint=…&access-key=…``,
``gcs://…``, ``azure://…``). Every process opens it the same way from its location
string, so a location can travel to Spark executors inside a task spec.

What lives under ``<data-dir>/<changefeed id>/`` and who touches it:

- ``start.json``, ``checkpoint.json``, ``planned.json`` (the batch with rows being written),
  ``schema_history.jsonl`` (+ ``.bootstrap.json``): the driver and its streaming source process
  (both on the driver host);
- ``snapshot/plan.json``, ``snapshot/done.json``: the driver;
- ``snapshot/ranges/<id>.json`` (range progress, when no meta database keeps it) and
  ``snapshot/rows/…`` (the spool: parquet chunks, rendered-chunk entries): executors
  write them, executors and the driver read them;
- ``spark/``: Spark's own checkpoint (offset and commit logs), written by the driver only.
  It needs a Hadoop file system, so for an object-store data dir it stays on the driver's
  local disk (``spark_checkpoint_location``); a driver that lost it resumes from
  ``checkpoint.json``;
- ``upstream.json`` (``sparkcdc run``): the upstream the changefeed follows (``UpstreamIdentity``);
  a start against another upstream is refused.

The server keeps ``<data dir>/changefeeds/<namespace>/<id>/`` per changefeed: ``identity.json``
(the changefeed's identity in the meta database, and the meta database's: ``own_changefeed_dir``),
``snapshot/`` (the initial snapshot, continued by every claim) and ``epoch-<N>/`` (one claim's
start point, checkpoint, schema history and Spark checkpoint).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import re
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import ConfigError, SchemaError, SparkCdcError, StateStorageError
from sparkcdc.sink.objectstore import StorageBackend

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
STATE_SCHEMES = ("file", "s3", "gcs", "gs", "azure", "azblob")
ROLE = "data dir"


@dataclass
class StateDir:
    """A folder of state: a local directory or a prefix in a bucket (picklable, opens lazily)."""

    location: str
    """What it was parsed from: a local absolute path, or a URL with its query parameters."""
    backend: StorageBackend

    @classmethod
    def parse(cls, location: str) -> StateDir:
        """Read a data dir; an unknown scheme or bad URL parameter is a ``ConfigError`` naming it."""
        text = location.strip()
        if not text:
            raise ConfigError("the data dir is empty: give a local path or an s3://, gcs:// or azure:// URL")
        m = _SCHEME.match(text)
        if m is None or m.group(1).lower() == "file":
            path = text[len("file://") :] if m is not None else text
            if not path:
                raise ConfigError(f"data dir {text!r} has no path: use file:///absolute/dir or a plain path")
            root = os.path.abspath(os.path.expanduser(path))
            return cls(root, StorageBackend("file", root, {}, root, ROLE))
        scheme = m.group(1).lower()
        shown = redact_uri(text)
        if scheme not in STATE_SCHEMES:
            raise ConfigError(
                f"data dir {shown!r}: scheme {scheme!r} is not supported; use a local path (a shared mount "
                "counts as local), s3://bucket/prefix, gcs://bucket/prefix or azure://container/prefix"
            )
        try:
            p = ParsedURI.parse(text)
            backend = StorageBackend.from_uri(p)
            p.reject_unknown()
        except SparkCdcError as exc:
            raise ConfigError(f"invalid data dir {shown!r}: {exc.message}") from exc
        backend.role = ROLE
        return cls(text, backend)

    @property
    def local(self) -> bool:
        """Whether the data dir is a local (or mounted) folder."""
        return self.backend.scheme == "file"

    @property
    def display(self) -> str:
        """The location with secrets redacted (for messages and logs)."""
        return self.backend.display

    def child(self, rel: str) -> StateDir:
        """The sub-folder ``rel``."""
        return StateDir(
            self.join(rel), replace(self.backend, root=self.backend.full(rel), display=self.join_display(rel))
        )

    def join(self, rel: str) -> str:
        """The location string of ``rel`` below this folder (a path, or a URL keeping its parameters)."""
        if self.local:
            return os.path.join(self.location, rel)
        parts = urlsplit(self.location)
        path = parts.path.rstrip("/") + "/" + rel.strip("/")
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))

    # ------------------------------------------------------------------ validation

    def check(self) -> None:
        """Refuse a data dir that is a file, cannot be created or written, or whose bucket is unreachable."""
        if self.local:
            root = self.backend.root
            if os.path.exists(root) and not os.path.isdir(root):
                raise ConfigError(f"data dir {root!r} is a file, not a directory: give a directory")
            try:
                os.makedirs(root, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the data dir {root!r}: {exc.strerror or exc}") from exc
            if not os.access(root, os.W_OK | os.X_OK):
                raise ConfigError(
                    f"data dir {root!r} is not writable by this user: give a writable directory"
                )
            return
        probe = f".sparkcdc-probe-{uuid.uuid4().hex}"
        try:
            self.backend.fs.invalidate_cache()
            self.backend.write(probe, b"probe")
            self.remove(probe)
        except Exception as exc:  # botocore/aiohttp/azure raise their own types (no credentials, no bucket)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(
                f"cannot write to the data dir {self.display!r} ({type(exc).__name__}: {first}); check the "
                "bucket exists and the credentials in the URL (access-key/secret-access-key, "
                "credentials-file, account-key or sas-token) may write there"
            ) from exc

    # ------------------------------------------------------------------ objects

    def exists(self, rel: str) -> bool:
        """Whether the object ``rel`` exists."""
        return self.backend.exists(rel)

    def read_bytes(self, rel: str) -> bytes | None:
        """A whole object, or None if it does not exist."""
        return self.backend.read(rel)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write a whole object atomically (local: temp file, fsync, rename; object stores: one PUT)."""
        self.backend.write(rel, data)

    def read_json(self, rel: str) -> Any:
        """A JSON object, or None if it does not exist."""
        data = self.read_bytes(rel)
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError as exc:
            raise StateStorageError(
                f"{self.join_display(rel)} in the data dir is not valid JSON ({exc}); restore it or remove "
                "the changefeed's data dir to start over"
            ) from exc

    def write_json(self, rel: str, data: Any) -> None:
        """Write a JSON object atomically."""
        self.write_bytes(rel, json.dumps(data).encode())

    def size(self, rel: str) -> int | None:
        """An object's size, or None if it does not exist."""
        return self.backend.size(rel)

    def list(self, rel: str = "") -> list[str]:
        """Names directly under ``rel`` ([] if it does not exist)."""
        return self.backend.list_dir(rel)

    def remove(self, rel: str) -> None:
        """Delete one object (nothing if it does not exist)."""
        path = self.backend.full(rel)
        try:
            if self.local:
                os.remove(path)
            else:
                self.backend.fs.rm(path)
        except FileNotFoundError:
            return

    def remove_tree(self, rel: str = "") -> None:
        """Delete ``rel`` and everything under it (nothing if it does not exist)."""
        self.backend.remove_tree(rel)

    def join_display(self, rel: str) -> str:
        """``rel`` below this folder, with secrets redacted."""
        return redact_uri(self.join(rel)) if not self.local else self.join(rel)

    def local_path(self, rel: str = "") -> str:
        """The file-system path of ``rel`` (local data dirs only)."""
        if not self.local:
            raise ValueError(f"{self.display} is not a local folder")
        return os.path.join(self.backend.root, rel) if rel else self.backend.root

    # ------------------------------------------------------------------ parquet

    def write_parquet(self, rel: str, table: Any) -> None:
        """Write an Arrow table as one parquet object (snappy)."""
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(table, buf, compression="snappy")
        self.write_bytes(rel, buf.getvalue())

    def read_parquet(self, rel: str) -> Any:
        """An Arrow table from a parquet object."""
        import pyarrow.parquet as pq

        if self.local:
            return pq.read_table(self.local_path(rel))
        data = self.read_bytes(rel)
        if data is None:
            raise StateStorageError(f"the spooled file {self.join_display(rel)} is missing from the data dir")
        return pq.read_table(io.BytesIO(data))


SPARK_CHECKPOINT_ROOT_CONF = "spark.sql.streaming.checkpointLocation"
"""The Spark setting (``--spark-conf``) that names the driver-local folder of Spark checkpoints."""


def spark_checkpoint_location(state: StateDir, changefeed_id: str, root: str | None = None) -> str:
    """Where Spark's own checkpoint of a changefeed lives: ``spark/`` in a local data dir, else driver-local.

    Spark writes its offset and commit logs through Hadoop, which has no s3/gcs/azure file
    system in the pyspark wheel; the query is stateless, so only the driver reads them. The
    driver-local folder is under ``root`` (the session's ``spark.sql.streaming.checkpointLocation``),
    by default ``<temp dir>/sparkcdc-spark-checkpoints``.
    """
    if state.local:
        return state.local_path("spark")
    digest = hashlib.sha256(state.display.encode()).hexdigest()[:16]
    root = root or os.path.join(tempfile.gettempdir(), "sparkcdc-spark-checkpoints")
    return os.path.join(root, f"{changefeed_id}-{digest}")


class StateSchemaHistoryStore:
    """Schema history as one JSON-lines object in a data dir (object stores have no append).

    Only the driver host writes it (bootstrap, then the source's planner on each DDL); an
    append rewrites the object, which stays small (one line per table version).
    """

    def __init__(self, state: StateDir, rel: str) -> None:
        self.state = state
        self.rel = rel

    def load(self) -> list[dict[str, Any]]:
        """Every complete entry ([] if the object does not exist)."""
        from sparkcdc.capture.schema_history import parse_history_lines

        data = self.state.read_bytes(self.rel)
        return [] if data is None else parse_history_lines(data, self.state.join_display(self.rel))

    def append(self, entries: list[dict[str, Any]]) -> None:
        """Add entries at the end (the whole object is written again)."""
        if not entries:
            return
        import orjson

        data = self.state.read_bytes(self.rel) or b""
        data = data[: data.rfind(b"\n") + 1]  # a torn tail (never on an object store, but cheap to drop)
        self.state.write_bytes(self.rel, data + b"".join(orjson.dumps(e) + b"\n" for e in entries))


def open_history_store(location: str) -> Any:
    """The schema history store at a location (a local JSON-lines file, or an object in a data dir)."""
    from sparkcdc.capture.schema_history import FileSchemaHistoryStore

    if not location:
        raise SchemaError("no schema history location was given")
    parent, name = split_location(location)
    if parent.local:
        return FileSchemaHistoryStore(parent.local_path(name))
    return StateSchemaHistoryStore(parent, name)


def split_location(location: str) -> tuple[StateDir, str]:
    """A file's location as (its folder, its name)."""
    m = _SCHEME.match(location)
    if m is None or m.group(1).lower() == "file":
        path = StateDir.parse(location).location
        return StateDir.parse(os.path.dirname(path)), os.path.basename(path)
    parts = urlsplit(location)
    head, _, name = parts.path.rstrip("/").rpartition("/")
    return StateDir.parse(urlunsplit((parts.scheme, parts.netloc, head, parts.query, ""))), name


@functools.lru_cache(maxsize=64)
def state_dir(location: str) -> StateDir:
    """``StateDir.parse`` kept per process, so the tasks of an executor share one connection pool."""
    return StateDir.parse(location)


def check_executors_see(spark: Any, folder: StateDir, why: str) -> None:
    """On a non-local master, refuse a folder the Spark executors cannot read (one on the driver's own disk).

    The driver writes a probe object and a task per executor core looks for it; a local master
    shares the driver's disk, so nothing is checked there.
    """
    sc = spark.sparkContext
    if str(sc.master).startswith("local"):
        return
    probe = f".sparkcdc-probe-{uuid.uuid4().hex}"
    folder.write_bytes(probe, b"probe")
    location, n = folder.location, max(2, int(sc.defaultParallelism))
    try:
        sc.setJobDescription(f"sparkcdc: check the executors see {folder.display}")
        seen = sc.parallelize(range(n), n).map(lambda _: state_dir(location).exists(probe)).collect()
    finally:
        folder.remove(probe)
    if not all(seen):
        raise ConfigError(
            f"the Spark executors cannot see {folder.display} (master {sc.master}): {why}; use a folder "
            "every host mounts at the same path, or an s3://, gcs:// or azure:// URL"
        )


IDENTITY_FILE = "identity.json"
"""A server's changefeed folder: whose state it is (``changefeed_uid``, ``meta_uid``)."""

STATE_MISMATCH = "CDC:ErrStateOfAnotherChangefeed"
"""The code of a start that finds another changefeed's (or another upstream's) state in its folder."""


def move_aside(folder: StateDir) -> str:
    """Move a folder to a sibling ``<name>.replaced-<UTC time>``; returns the new location (shown)."""
    parent, name = split_location(folder.location)
    aside = f"{name}.replaced-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:6]}"
    src, dst = folder.backend.root, parent.backend.full(aside)
    try:
        if folder.local:
            os.replace(src, dst)
        else:
            folder.backend.fs.mv(src, dst, recursive=True)
    except OSError as exc:
        raise StateStorageError(
            f"cannot move {folder.display} aside to {parent.join_display(aside)} ({exc}); remove it to start "
            "the changefeed afresh"
        ) from exc
    return parent.join_display(aside)


def own_changefeed_dir(folder: StateDir, label: str, changefeed_uid: str, meta_uid: str) -> str | None:
    """Make ``folder`` the state of changefeed ``changefeed_uid`` of meta database ``meta_uid``.

    A folder of that changefeed is kept. One of another meta database is refused (its offsets and
    snapshot belong to another changefeed, maybe of another upstream). One of an earlier changefeed
    of this meta database (removed, then created again with the same id), or one without an identity
    (an older sparkcdc), is moved aside and the changefeed starts afresh; returns where it went.
    """
    found = folder.read_json(IDENTITY_FILE)
    if isinstance(found, dict) and found.get("changefeed_uid") == changefeed_uid:
        return None
    if isinstance(found, dict) and found.get("meta_uid") != meta_uid:
        raise StateStorageError(
            f"{folder.display} holds the state of changefeed {label!r} {found.get('changefeed_uid')} of meta "
            f"database {found.get('meta_uid')}, not of this changefeed {label!r} {changefeed_uid} of meta "
            f"database {meta_uid}; give each meta database its own --data-dir, or remove that folder to "
            "start this changefeed afresh",
            code=STATE_MISMATCH,
        )
    moved = move_aside(folder) if found is not None or folder.list() else None
    folder.write_json(IDENTITY_FILE, {"changefeed_uid": changefeed_uid, "meta_uid": meta_uid})
    return moved


@dataclass(frozen=True)
class UpstreamIdentity:
    """Which upstream server a changefeed's offsets belong to: what ``upstream.json`` records."""

    server_uuid: str | None
    """MySQL's ``server_uuid`` (MariaDB has none)."""
    server_id: int
    binlog: str
    """``log_bin_basename``: the binlog's path without the file number (``/var/lib/mysql/mysql-bin``),
    which tells apart two MariaDB servers that share a ``server_id``."""
    address: str = ""
    """host:port it was reached at (shown, not compared: the same server may move)."""

    @classmethod
    def query(cls, up: Any) -> UpstreamIdentity:
        """Read the identity of the upstream ``up`` (a ``capture.upstream.UpstreamConfig``)."""
        conn = up.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('server_uuid', 'server_id', 'log_bin_basename')"
                )
                v = {str(r[0]).lower(): str(r[1]) for r in cur.fetchall()}
        finally:
            conn.close()
        return cls(
            v.get("server_uuid") or None,
            int(v.get("server_id") or 0),
            v.get("log_bin_basename") or "",
            f"{up.host}:{up.port}",
        )

    def same_server(self, other: UpstreamIdentity) -> bool:
        """The same server: equal server_uuid when both have one (MySQL), else equal server_id and binlog path."""
        if self.server_uuid and other.server_uuid:
            return self.server_uuid == other.server_uuid
        return (self.server_id, self.binlog) == (other.server_id, other.binlog)

    def __str__(self) -> str:
        who = f"server_uuid {self.server_uuid}, " if self.server_uuid else ""
        return f"{self.address} ({who}server_id {self.server_id}, binlog {self.binlog or '?'})"

    def to_json(self) -> dict[str, Any]:
        """The ``upstream.json`` form."""
        return {
            "server_uuid": self.server_uuid,
            "server_id": self.server_id,
            "binlog": self.binlog,
            "address": self.address,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> UpstreamIdentity:
        """Inverse of ``to_json``."""
        return cls(
            d.get("server_uuid"),
            int(d.get("server_id") or 0),
            str(d.get("binlog") or ""),
            str(d.get("address") or ""),
        )


def follow_upstream(
    recorded: dict[str, Any] | None, current: UpstreamIdentity, label: str, where: str, fix: str
) -> None:
    """The one rule for ``run`` and the server: a changefeed's offsets belong to the upstream recorded.

    ``recorded``: the identity kept in ``where`` (None: none yet); ``fix``: what the user can do.
    """
    if recorded is None:
        return
    was = UpstreamIdentity.from_json(recorded)
    if not was.same_server(current):
        raise ConfigError(
            f"changefeed {label!r} follows upstream {was} ({where}), not {current}: its offsets and schema "
            f"history mean nothing there; {fix}",
            code=STATE_MISMATCH,
        )


def check_upstream_identity(folder: StateDir, label: str, current: UpstreamIdentity) -> None:
    """Refuse a changefeed folder that follows another upstream; record the upstream on a first start."""
    found = folder.read_json("upstream.json")
    if found is None:
        folder.write_json("upstream.json", current.to_json())
        return
    follow_upstream(
        found,
        current,
        label,
        f"recorded in {folder.display}",
        "give another --changefeed-id (or --data-dir) for this upstream, or remove that folder to start afresh",
    )
