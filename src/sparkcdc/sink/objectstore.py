"""Object storage through fsspec: file://, s3://, gcs:// (gs://), azure:// (azblob://).

``StorageBackend`` is built from a ``ParsedURI`` (it reads and so claims the
backend's own URI parameters), is picklable, and opens its filesystem lazily
so that each Spark executor connects on its own.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import (
    SinkError,
    SinkUnavailable,
    SinkURIError,
    SparkCdcError,
    StateStorageError,
    StateStorageUnavailable,
)

STORAGE_SCHEMES = ("file", "s3", "gcs", "gs", "azure", "azblob")


@dataclass
class StorageBackend:
    """A storage root (a local directory, a bucket + prefix) and how to reach it."""

    scheme: str
    root: str
    options: dict[str, Any] = field(default_factory=dict)
    display: str = ""
    role: str = "storage sink"
    """What the storage is for, in error messages: the storage sink or a changefeed's data dir."""
    _fs: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_uri(cls, p: ParsedURI) -> StorageBackend:
        """Read the scheme-specific parameters of a storage URI (the caller rejects leftovers)."""
        scheme = p.scheme
        display = redact_uri(p.raw)
        host = p.hosts[0][0] if p.hosts else ""
        if scheme == "file":
            root = (host + p.path) if host else p.path
            if not root:
                raise SinkURIError(f"storage URI {display!r} has no directory: use file:///absolute/dir")
            return cls("file", os.path.abspath(root), {}, display)
        if scheme not in STORAGE_SCHEMES:
            raise SinkURIError(
                f"storage URI scheme {scheme!r} is not supported (in {display!r}); "
                f"use one of: {', '.join(STORAGE_SCHEMES)}"
            )
        if not host:
            raise SinkURIError(f"storage URI {display!r} has no bucket: use {scheme}://bucket/prefix")
        root = (host + "/" + p.path.strip("/")).rstrip("/")
        if scheme == "s3":
            return cls("s3", root, _s3_options(p), display)
        if scheme in ("gcs", "gs"):
            opts: dict[str, Any] = {}
            creds = p.get_str("credentials-file")
            if creds:
                opts["token"] = creds
            endpoint = p.get_str("endpoint")
            if endpoint:
                opts["endpoint_url"] = endpoint
            return cls("gcs", root, opts, display)
        return cls("azure", root, _azure_options(p, display), display)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_fs"] = None
        return state

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (created on first use)."""
        if self._fs is None:
            self._fs = self._open()
        return self._fs

    def _open(self) -> Any:
        if self.scheme == "file":
            from fsspec.implementations.local import LocalFileSystem

            return LocalFileSystem()
        if self.scheme == "s3":
            import s3fs

            return s3fs.S3FileSystem(**self.options)
        if self.scheme == "gcs":
            try:
                import gcsfs
            except ModuleNotFoundError as exc:
                raise SinkError("the gcs:// storage sink needs gcsfs: pip install 'sparkcdc[gcs]'") from exc
            return gcsfs.GCSFileSystem(**self.options)
        try:
            import adlfs
        except ModuleNotFoundError as exc:
            raise SinkError("the azure:// storage sink needs adlfs: pip install 'sparkcdc[azure]'") from exc
        return adlfs.AzureBlobFileSystem(**self.options)

    def check(self) -> None:
        """Reach the storage: a local root is created, a bucket must exist."""
        if self.scheme == "file":
            try:
                os.makedirs(self.root, exist_ok=True)
            except OSError as exc:
                raise SinkError(f"cannot create the storage sink directory {self.root!r}: {exc}") from exc
            return
        bucket = self.root.split("/", 1)[0]
        try:
            self.fs.invalidate_cache()
            self.fs.ls(bucket, detail=False)
        except (FileNotFoundError, PermissionError) as exc:
            raise SinkError(
                f"bucket {bucket!r} of storage URI {self.display!r} does not exist or is not accessible "
                f"with the given credentials; create it first ({exc})"
            ) from exc
        except Exception as exc:  # botocore/aiohttp raise their own types for a dead endpoint
            raise SinkUnavailable(f"cannot reach the storage of {self.display!r}: {exc}") from exc

    def full(self, rel: str) -> str:
        """The backend path of a path relative to the root."""
        return posixpath.join(self.root, rel) if rel else self.root

    def write(self, rel: str, data: bytes) -> None:
        """Write a whole object atomically (local files: temp file, fsync, rename)."""
        f = self.open_atomic(rel)
        f.write(data)
        f.commit()

    def open_atomic(self, rel: str) -> AtomicFile:
        """An object written piece by piece that appears whole at ``commit``, or not at all."""
        return AtomicFile(self, rel)

    def move(self, src: str, dst: str) -> None:
        """Move an object (local files: a rename; object stores: copy, then delete)."""
        a, b = self.full(src), self.full(dst)
        try:
            if self.scheme == "file":
                os.makedirs(os.path.dirname(b), exist_ok=True)
                os.replace(a, b)
            else:
                self.fs.mv(a, b)
        except OSError as exc:
            raise _io_error("move", f"{a} -> {b}", exc, self.role) from exc

    def remove_tree(self, rel: str) -> None:
        """Delete a directory and everything under it (nothing if it does not exist)."""
        path = self.full(rel)
        try:
            if self.scheme == "file":
                shutil.rmtree(path, ignore_errors=False)
            else:
                self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _io_error("delete", path, exc, self.role) from exc

    def read(self, rel: str) -> bytes | None:
        """A whole object, or None if it does not exist."""
        path = self.full(rel)
        try:
            data: bytes = self.fs.cat_file(path)
            return data
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _io_error("read", path, exc, self.role) from exc

    def size(self, rel: str) -> int | None:
        """The size of an object, or None if it does not exist."""
        path = self.full(rel)
        try:
            if self.scheme != "file":
                self.fs.invalidate_cache(path)
            return int(self.fs.size(path))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _io_error("stat", path, exc, self.role) from exc

    def exists(self, rel: str) -> bool:
        """Whether an object exists."""
        try:
            if self.scheme != "file":
                self.fs.invalidate_cache(self.full(rel))
            return bool(self.fs.exists(self.full(rel)))
        except OSError as exc:
            raise _io_error("stat", self.full(rel), exc, self.role) from exc

    def list_dir(self, rel: str) -> list[str]:
        """Names of the objects directly under a directory ([] if missing)."""
        path = self.full(rel)
        try:
            entries = (
                self.fs.ls(path, detail=False, refresh=True)
                if self.scheme != "file"
                else self.fs.ls(path, detail=False)
            )
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _io_error("list", path, exc, self.role) from exc
        return [posixpath.basename(str(e).rstrip("/")) for e in entries]

    def walk_files(self) -> dict[str, int]:
        """Every object under the root: relative path → size."""
        try:
            if self.scheme != "file":
                self.fs.invalidate_cache()
            found = self.fs.find(self.root, detail=True)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise _io_error("list", self.root, exc, self.role) from exc
        root = self.root.rstrip("/")
        out: dict[str, int] = {}
        for path, info in found.items():
            if info.get("type") == "directory":
                continue
            p = str(path)
            if self.scheme == "file":
                rel = os.path.relpath(p, root).replace(os.sep, "/")
            else:
                p = p.split("://", 1)[-1]
                if not p.startswith(root + "/"):
                    continue
                rel = p[len(root) + 1 :]
            if "/." in "/" + rel:  # temp files of an atomic write in progress
                continue
            out[rel] = int(info.get("size") or 0)
        return out


def _s3_options(p: ParsedURI) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    client: dict[str, Any] = {}
    # botocore's standard retries (3 attempts, at most 1 + 2 s of backoff) instead of its legacy
    # mode (5 attempts, up to 15 s), under s3fs's own 5 tries of a throttled request: a failing
    # store reaches the changefeed's retry, which says so, within seconds, not a minute later
    config: dict[str, Any] = {"retries": {"mode": "standard", "max_attempts": 3}}
    extra: dict[str, Any] = {}
    key, secret = p.get_str("access-key"), p.get_str("secret-access-key")
    if bool(key) != bool(secret):
        raise SinkURIError(
            f"storage URI {redact_uri(p.raw)!r}: access-key and secret-access-key must be given together"
        )
    if key:
        opts["key"], opts["secret"] = key, secret
    token = p.get_str("session-token")
    if token:
        opts["token"] = token
    endpoint = p.get_str("endpoint")
    if endpoint:
        if not endpoint.startswith(("http://", "https://")):
            raise SinkURIError(
                f"invalid endpoint {endpoint!r} in storage URI: expected http://host:port or https://host"
            )
        opts["endpoint_url"] = endpoint
    region = p.get_str("region")
    if region:
        client["region_name"] = region
    if p.get_bool("force-path-style", False):
        config["s3"] = {"addressing_style": "path"}
    for param, arg in (
        ("storage-class", "StorageClass"),
        ("sse", "ServerSideEncryption"),
        ("sse-kms-key-id", "SSEKMSKeyId"),
        ("acl", "ACL"),
    ):
        v = p.get_str(param)
        if v:
            extra[arg] = v
    if client:
        opts["client_kwargs"] = client
    if config:
        opts["config_kwargs"] = config
    if extra:
        opts["s3_additional_kwargs"] = extra
    opts["skip_instance_cache"] = True
    return opts


def _azure_options(p: ParsedURI, display: str) -> dict[str, Any]:
    account = p.get_str("account-name") or os.environ.get("AZURE_STORAGE_ACCOUNT")
    key = p.get_str("account-key")
    sas = p.get_str("sas-token")
    endpoint = p.get_str("endpoint")
    if not account:
        raise SinkURIError(f"storage URI {display!r} needs account-name=<storage account>")
    if key and sas:
        raise SinkURIError(f"storage URI {display!r}: give either sas-token or account-key, not both")
    if not key and not sas:
        raise SinkURIError(f"storage URI {display!r} needs sas-token=<token> or account-key=<key>")
    opts: dict[str, Any] = {"account_name": account}
    if endpoint:
        cs = f"AccountName={account};BlobEndpoint={endpoint.rstrip('/')};"
        cs += f"AccountKey={key};" if key else f"SharedAccessSignature={sas.lstrip('?') if sas else ''};"
        opts = {"connection_string": cs}
    elif key:
        opts["account_key"] = key
    else:
        opts["sas_token"] = sas
    return opts


STREAM_BLOCK_BYTES = 8 * 1024 * 1024
"""Bytes an object store's file holds before it sends them as one part of a multipart upload (S3
takes parts of 5 MiB and more); a smaller object is sent in one request when it is committed."""


class AtomicFile:
    """One object of a ``StorageBackend`` written piece by piece: whole at ``commit``, or not at all.

    A local file is written under a hidden temporary name in its directory, then synced and renamed;
    an object store's file is a multipart upload (or one request for a small object), completed at
    ``commit`` and aborted by ``discard``. So what is written never waits whole in memory.
    """

    def __init__(self, backend: StorageBackend, rel: str) -> None:
        self.backend = backend
        self.path = backend.full(rel)
        self._tmp = ""
        self._f: Any = None
        try:
            if backend.scheme == "file":
                directory = os.path.dirname(self.path)
                os.makedirs(directory, exist_ok=True)
                fd, self._tmp = tempfile.mkstemp(
                    prefix=".tmp-", suffix="-" + uuid.uuid4().hex[:8], dir=directory
                )
                self._f = os.fdopen(fd, "wb")
            else:
                self._f = backend.fs.open(self.path, "wb", block_size=STREAM_BLOCK_BYTES)
        except OSError as exc:
            raise self._error(exc) from exc

    def write(self, data: bytes) -> None:
        """Append ``data``."""
        try:
            self._f.write(data)
        except OSError as exc:
            self.discard()
            raise self._error(exc) from exc

    def commit(self) -> None:
        """Make the object appear, whole (local files: fsync, then rename over any older one)."""
        try:
            if self.backend.scheme == "file":
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
                os.replace(self._tmp, self.path)
            else:
                self._f.close()
        except OSError as exc:
            self.discard()
            raise self._error(exc) from exc
        self._f = None

    def discard(self) -> None:
        """Drop what was written (nothing appears); never raises."""
        if self._f is None:
            return
        f, self._f = self._f, None
        try:
            if self.backend.scheme == "file":
                try:
                    f.close()  # flushes what is buffered: fails again on a full disk, closes all the same
                finally:
                    if self._tmp:
                        os.unlink(self._tmp)
            else:
                f.discard()  # aborts a multipart upload, even after a failed close
                f.closed = True  # nothing to send when the file object is collected
        except Exception:  # the temp file or upload is already gone; the caller's error is what matters
            pass

    def _error(self, exc: OSError) -> SparkCdcError:
        b = self.backend
        if isinstance(exc, FileNotFoundError) and b.scheme != "file":
            # An object store has no directories: all a write can miss is the bucket, and it does not
            # come back by itself (retrying would loop on a deleted bucket).
            return _missing_bucket(b.root.split("/", 1)[0], self.path, exc, b.role)
        return _io_error("write", self.path, exc, b.role)


def _missing_bucket(bucket: str, path: str, exc: OSError, role: str) -> SparkCdcError:
    permanent = SinkError if role == "storage sink" else StateStorageError
    return permanent(
        f"cannot write {path!r} in the {role}: bucket {bucket!r} does not exist (was it deleted?); "
        f"create it again or use another bucket ({exc})"
    )


def _io_error(op: str, path: str, exc: OSError, role: str = "storage sink") -> SparkCdcError:
    permanent, passing = (
        (SinkError, SinkUnavailable)
        if role == "storage sink"
        else (StateStorageError, StateStorageUnavailable)
    )
    if isinstance(exc, PermissionError) or exc.errno in (
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
    ):
        return permanent(f"cannot {op} {path!r} in the {role}: {exc}")
    return passing(f"cannot {op} {path!r} in the {role}: {exc}")
