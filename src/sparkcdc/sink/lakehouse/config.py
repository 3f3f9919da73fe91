"""The lakehouse sinks' settings, from ``iceberg://`` and ``delta://`` URIs.

- ``iceberg:///abs/warehouse?catalog-uri=sqlite:////abs/catalog.db``: a local warehouse; without
  ``catalog-uri`` a SQLite catalog is kept in the warehouse (``<warehouse>/sparkcdc-catalog.db``);
- ``iceberg://bucket/prefix?endpoint=…&access-key=…&secret-access-key=…&catalog-uri=postgresql://…``:
  a warehouse on S3 takes the storage sink's S3 parameters and needs a catalog URI;
- ``delta:///abs/root`` or ``delta://bucket/prefix?…``: a Delta table per upstream table under the root.

Common parameters: ``mode`` (upsert | changelog), ``table-name`` (a template of ``{schema}`` and
``{table}``), ``worker-count``; Iceberg also ``namespace`` and ``catalog-name`` (the name the SQL
catalog files its tables under, default ``sparkcdc``: a reader opens the catalog by that name).
Unknown parameters are refused.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.config.options import Kind, Option, OptionTable, resolve
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import SinkURIError
from sparkcdc.sink.lakehouse.changes import MODES
from sparkcdc.sink.objectstore import StorageBackend

FORMATS = ("iceberg", "delta")
DEFAULT_WORKER_COUNT = 4
DEFAULT_TABLE_NAME = "{schema}_{table}"
DEFAULT_NAMESPACE = "default"
DEFAULT_CATALOG_NAME = "sparkcdc"
CATALOG_FILE = "sparkcdc-catalog.db"
STAGING_DIR = "_sparkcdc_staging"

OPTIONS = OptionTable(
    Option("mode", Kind.ENUM, "upsert", choices=MODES, help="upsert mirrors by key; changelog appends"),
    Option(
        "table-name",
        Kind.STR,
        DEFAULT_TABLE_NAME,
        pattern=r"^[A-Za-z0-9_{}.\-]*\{table\}[A-Za-z0-9_{}.\-]*$",
        expect="a name template holding {table}, optionally {schema}, of letters, digits, _ - .",
        help="the lakehouse table of an upstream table",
    ),
    Option("worker-count", Kind.INT, DEFAULT_WORKER_COUNT, gt=0, le=256, help="writer tasks of a batch"),
)
ICEBERG_OPTIONS = OptionTable(
    Option(
        "namespace",
        Kind.STR,
        DEFAULT_NAMESPACE,
        pattern=r"^[A-Za-z0-9_\-]+$",
        expect="letters, digits, _ and -",
        help="the Iceberg namespace of the tables",
    ),
    Option("catalog-uri", Kind.STR, "", secret=True, help="sqlite:///… or postgresql://… SQL catalog"),
    Option(
        "catalog-name",
        Kind.STR,
        DEFAULT_CATALOG_NAME,
        # A SQL catalog keeps each table's row under this name (a VARCHAR(255) column); engines
        # name catalogs by identifiers.
        pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,254}$",
        expect="a name of letters, digits, _ and - starting with a letter or _, at most 255 characters",
        help="the SQL catalog's name: a reader opens the catalog by this name to see the tables",
    ),
)

_PLACEHOLDER = re.compile(r"\{([^}]*)\}")


@dataclass
class LakehouseSettings:
    """Everything a lakehouse sink's driver and writers need (picklable)."""

    format: str
    backend: StorageBackend
    mode: str = "upsert"
    table_name: str = DEFAULT_TABLE_NAME
    worker_count: int = DEFAULT_WORKER_COUNT
    namespace: str = DEFAULT_NAMESPACE
    catalog_uri: str = ""
    catalog_name: str = DEFAULT_CATALOG_NAME
    time_zone: str = "UTC"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def root_uri(self) -> str:
        """The warehouse or root as a URI (``file:///…`` or ``s3://bucket/prefix``)."""
        if self.backend.scheme == "file":
            return "file://" + self.backend.root
        return f"{self.backend.scheme}://{self.backend.root}"

    @property
    def local_root(self) -> str | None:
        """The local directory of a file warehouse, None on object storage."""
        return self.backend.root if self.backend.scheme == "file" else None

    @classmethod
    def from_uri(cls, uri: str, config: ReplicaConfig) -> LakehouseSettings:
        """Parse and validate an ``iceberg://`` or ``delta://`` URI."""
        p = ParsedURI.parse(uri)
        shown = redact_uri(uri)
        if p.scheme not in FORMATS:
            raise SinkURIError(
                f"lakehouse sink scheme {p.scheme!r} in {shown!r}: use one of {', '.join(FORMATS)}"
            )
        opts = resolve(OPTIONS, p, None, where="sink")
        unknown = set(_PLACEHOLDER.findall(opts["table-name"])) - {"schema", "table"}
        if unknown:
            raise SinkURIError(
                f"invalid table-name {opts['table-name']!r} in {shown!r}: unknown placeholder(s) "
                f"{', '.join('{' + u + '}' for u in sorted(unknown))}; use {{schema}} and {{table}}"
            )
        host = p.hosts[0][0] if p.hosts else ""
        storage = dataclasses.replace(p, scheme="s3" if host else "file")
        if not host and not p.path.startswith("/"):
            raise SinkURIError(f"{p.scheme} sink URI {shown!r} needs an absolute path: {p.scheme}:///abs/dir")
        backend = StorageBackend.from_uri(storage)
        backend.role = f"{p.scheme} sink"
        namespace, catalog_uri, catalog_name = DEFAULT_NAMESPACE, "", DEFAULT_CATALOG_NAME
        if p.scheme == "iceberg":
            iopts = resolve(ICEBERG_OPTIONS, p, None, where="sink")
            namespace, catalog_uri = iopts["namespace"], iopts["catalog-uri"]
            catalog_name = iopts["catalog-name"]
            if not catalog_uri:
                if backend.scheme != "file":
                    raise SinkURIError(
                        f"iceberg sink URI {shown!r} has its warehouse on S3 and so needs a catalog: add "
                        "catalog-uri=postgresql://user:password@host:port/db (or sqlite:////abs/catalog.db)"
                    )
                catalog_uri = f"sqlite:///{backend.root}/{CATALOG_FILE}"
            elif not catalog_uri.startswith(("sqlite:///", "postgresql://", "postgres://")):
                raise SinkURIError(
                    f"invalid catalog-uri in {shown!r}: {redact_uri(catalog_uri)!r}; use "
                    "sqlite:////abs/catalog.db or postgresql://user:password@host:port/db"
                )
        p.reject_unknown()
        return cls(
            format=p.scheme,
            backend=backend,
            mode=opts["mode"],
            table_name=opts["table-name"],
            worker_count=opts["worker-count"],
            namespace=namespace,
            catalog_uri=catalog_uri,
            catalog_name=catalog_name,
            time_zone=config.time_zone or "UTC",
        )

    def s3_io_properties(self) -> dict[str, str]:
        """pyiceberg FileIO properties of an S3 warehouse."""
        o = self.backend.options
        props: dict[str, str] = {}
        if o.get("key"):
            props["s3.access-key-id"] = o["key"]
            props["s3.secret-access-key"] = o["secret"]
        if o.get("token"):
            props["s3.session-token"] = o["token"]
        if o.get("endpoint_url"):
            props["s3.endpoint"] = o["endpoint_url"]
        region = o.get("client_kwargs", {}).get("region_name")
        props["s3.region"] = region or "us-east-1"
        if (
            o.get("endpoint_url")
            or o.get("config_kwargs", {}).get("s3", {}).get("addressing_style") == "path"
        ):
            props["s3.force-virtual-addressing"] = "false"
        return props

    def delta_storage_options(self) -> dict[str, str]:
        """delta-rs object-store options of an S3 root."""
        o = self.backend.options
        opts: dict[str, str] = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
        if o.get("key"):
            opts["AWS_ACCESS_KEY_ID"] = o["key"]
            opts["AWS_SECRET_ACCESS_KEY"] = o["secret"]
        if o.get("token"):
            opts["AWS_SESSION_TOKEN"] = o["token"]
        endpoint = o.get("endpoint_url")
        if endpoint:
            opts["AWS_ENDPOINT_URL"] = endpoint
            opts["AWS_ALLOW_HTTP"] = "true" if endpoint.startswith("http://") else "false"
        region = o.get("client_kwargs", {}).get("region_name")
        opts["AWS_REGION"] = region or "us-east-1"
        return opts
