"""The HTTP sink's settings, read from the sink URI (closed: unknown parameters are refused).

``http(s)://host:port/path?protocol=canal-json&batch-size=256&timeout=10s&max-retries=5
&backoff=500ms&auth-header=Bearer%20xyz&enable-tidb-extension=false&insecure-skip-verify=false&ca=…``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import SinkURIError

PROTOCOLS = ("canal-json",)
DEFAULT_BATCH_SIZE = 256
MAX_BATCH_SIZE = 100_000
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_RETRIES = 5
DEFAULT_BACKOFF = 0.5
MAX_BACKOFF = 30.0


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
    protocol = p.get("protocol") or config.sink.protocol or "canal-json"
    if protocol not in PROTOCOLS:
        raise SinkURIError(
            f"invalid protocol {protocol!r} for the HTTP sink (in {red!r}); allowed: {', '.join(PROTOCOLS)}"
        )
    batch_size = p.get_int("batch-size", DEFAULT_BATCH_SIZE, min_value=1, max_value=MAX_BATCH_SIZE)
    timeout = p.get_duration("timeout", DEFAULT_TIMEOUT)
    backoff = p.get_duration("backoff", DEFAULT_BACKOFF)
    max_retries = p.get_int("max-retries", DEFAULT_MAX_RETRIES, min_value=0, max_value=100)
    ext = p.get_bool("enable-tidb-extension", None)
    if ext is None:
        ext = bool(config.sink.kafka_config.codec_config.enable_tidb_extension)
    insecure = p.get_bool("insecure-skip-verify", False)
    ca = p.get("ca")
    auth = p.get("auth-header")
    p.reject_unknown()
    assert batch_size is not None and timeout is not None and backoff is not None and max_retries is not None
    if timeout <= 0:
        raise SinkURIError(f"invalid timeout in {red!r}: it must be a positive duration like 5s")
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
        protocol=protocol,
        batch_size=batch_size,
        timeout=timeout,
        max_retries=max_retries,
        backoff=min(backoff, MAX_BACKOFF),
        enable_tidb_extension=ext,
        verify=not insecure,
        ca=ca,
        auth_header=auth,
        uri_redacted=red,
    )
