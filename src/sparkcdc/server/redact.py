"""Keep secrets out of API responses, CLI output and log lines."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from sparkcdc.config.uri import redact_text, redact_uri
from sparkcdc.errors import SparkCdcError

MASK = "xxxxx"

_SECRET_KEY = re.compile(
    r"(?i)(password|passwd|secret|token|sas-token|account-key|access-key|credential|auth-header|authorization)"
)


def redact_config(value: Any, key: str = "") -> Any:
    """A copy of a config tree with secret-named values masked and URIs redacted."""
    if isinstance(value, dict):
        return {k: redact_config(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_config(v, key) for v in value]
    if isinstance(value, str) and value:
        if _SECRET_KEY.search(key.replace("_", "-")):
            return MASK
        if "://" in value:
            return redact_uri(value)
    return value


def secrets_of(uris: Iterable[str | None]) -> list[str]:
    """The secret substrings (passwords, secret parameters) in some URIs, raw and URL-decoded."""
    out: set[str] = set()
    for uri in uris:
        if not uri:
            continue
        try:
            parts = urlsplit(uri)
        except ValueError:
            continue
        netloc = parts.netloc
        if "@" in netloc:
            cred = netloc.rsplit("@", 1)[0]
            _, sep, pw = cred.partition(":")
            if sep and pw:
                out.update({pw, unquote(pw), quote(unquote(pw), safe="")})
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if v and (_SECRET_KEY.search(k) or k.lower() == "key"):
                out.update({v, quote(v, safe="")})
    # Very short "secrets" would mask unrelated text; passwords that short are masked in URIs anyway.
    return sorted((s for s in out if len(s) >= 3), key=len, reverse=True)


def scrub(text: str | None, uris: Iterable[str | None]) -> str | None:
    """``text`` with every secret of ``uris`` replaced by ``xxxxx`` (for error and warning messages)."""
    if not text:
        return text
    for secret in secrets_of(uris):
        text = text.replace(secret, MASK)
    return text


def unexpected(exc: BaseException) -> str:
    """An error nobody expected as one coded line, ``[CODE] Type: first line``, its URIs redacted."""
    code = exc.code if isinstance(exc, SparkCdcError) else SparkCdcError.code
    lines = str(exc).strip().splitlines()
    return f"[{code}] {type(exc).__name__}: {redact_text(lines[0] if lines else '')[:500]}"
