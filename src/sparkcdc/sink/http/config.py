"""The HTTP sink's settings, read from the sink URI (closed: unknown parameters are refused).

The parameters and their limits are declared in ``OPTIONS`` (the sink is sparkcdc's own: TiCDC
has no HTTP sink); a value outside a limit is refused, never lowered to it.

``http(s)://host:port/path?protocol=canal-json&batch-size=256&timeout=10s&max-retries=5
&backoff=500ms&auth-header=Bearer%20xyz&enable-tidb-extension=false&insecure-skip-verify=false&ca=…``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from sparkcdc.config.options import Kind, Option, OptionTable, resolve
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import SinkURIError

PROTOCOLS = ("canal-json",)
DEFAULT_BATCH_SIZE = 256
MAX_BATCH_SIZE = 100_000
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_RETRIES = 5
MAX_MAX_RETRIES = 100
DEFAULT_BACKOFF = 0.5
MAX_BACKOFF = 30.0
"""The longest wait between two attempts (the backoff doubles per attempt up to it)."""

OPTIONS = OptionTable(
    Option("protocol", Kind.ENUM, "canal-json", toml="protocol", choices=PROTOCOLS),
    Option(
        "batch-size",
        Kind.INT,
        DEFAULT_BATCH_SIZE,
        ge=1,
        le=MAX_BATCH_SIZE,
        help="messages per POST",
    ),
    Option("timeout", Kind.DURATION, DEFAULT_TIMEOUT, gt=0, help="of one request"),
    Option(
        "max-retries",
        Kind.INT,
        DEFAULT_MAX_RETRIES,
        ge=0,
        le=MAX_MAX_RETRIES,
        help="retries of a request after a 5xx or a connection error",
    ),
    Option(
        "backoff",
        Kind.DURATION,
        DEFAULT_BACKOFF,
        ge=0,
        le=MAX_BACKOFF,
        help="the first wait before a retry; it doubles per attempt",
    ),
    Option("enable-tidb-extension", Kind.BOOL, False, toml="kafka-config.codec-config.enable-tidb-extension"),
    Option("insecure-skip-verify", Kind.BOOL, False),
    Option("ca", Kind.STR, help="CA file for an https:// endpoint"),
    Option("auth-header", Kind.STR, secret=True, help="sent as the Authorization header"),
)
"""The HTTP sink's URI parameters."""


@dataclass(frozen=True)
class HTTPSinkSettings:
    """Everything the HTTP sink and its writer need (picklable)."""

    endpoint: str
    """The URL POSTed to: the sink URI without its query."""
    protocol: str = "canal-json"
    batch_size: int = DEFAULT_BATCH_SIZE
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff: float = DEFAULT_BACKOFF
    enable_tidb_extension: bool = False
    verify: bool = True
    ca: str | None = None
    auth_header: str | None = field(default=None, repr=False)
    """Sent as ``Authorization``; never logged or shown (repr/messages use ``uri_redacted``)."""
    uri_redacted: str = ""


def parse_http_sink(uri: str, config: ReplicaConfig) -> HTTPSinkSettings:
    """Validate an HTTP sink URI; ConfigError names the key, the value and what is allowed."""
    p = ParsedURI.parse(uri)
    red = redact_uri(uri)
    if p.scheme not in ("http", "https"):
        raise SinkURIError(
            f"the HTTP sink does not handle scheme {p.scheme!r} in {red!r}; use http:// or https://"
        )
    if not p.hosts or not p.hosts[0][0] or len(p.hosts) > 1:
        raise SinkURIError(f"sink URI {red!r} must name exactly one host: http://host:port/path")
    if p.username or p.password:
        raise SinkURIError(
            f"sink URI {red!r} carries user:password; pass credentials with auth-header=… "
            "(sent as the Authorization header) instead"
        )
    o = resolve(OPTIONS, p, config.sink, where="sink")
    insecure, ca, auth = o["insecure-skip-verify"], o["ca"], o["auth-header"]
    p.reject_unknown()
    if insecure and ca:
        raise SinkURIError(f"sink URI {red!r} sets both ca and insecure-skip-verify=true; keep one")
    if (insecure or ca) and p.scheme != "https":
        raise SinkURIError(f"ca/insecure-skip-verify need an https:// sink URI (got {red!r})")
    if auth is not None and (not auth.strip() or "\n" in auth or "\r" in auth):
        raise SinkURIError("auth-header must be a non-empty single-line value such as 'Bearer <token>'")
    parts = urlsplit(uri)
    endpoint = urlunsplit((parts.scheme, parts.netloc, parts.path or "/", "", ""))
    return HTTPSinkSettings(
        endpoint=endpoint,
        protocol=o["protocol"],
        batch_size=o["batch-size"],
        timeout=o["timeout"],
        max_retries=o["max-retries"],
        backoff=o["backoff"],
        enable_tidb_extension=o["enable-tidb-extension"],
        verify=not insecure,
        ca=ca,
        auth_header=auth,
        uri_redacted=red,
    )
