"""Keep secrets out of API responses, CLI output and log lines."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sparkcdc.config.uri import MASK, redact_text, redact_uri, uri_secrets
from sparkcdc.errors import SparkCdcError

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


def scrub(text: str | None, uris: Iterable[str | None]) -> str | None:
    """``text`` with every secret of ``uris`` replaced by ``xxxxx`` (for error and warning messages)."""
    if not text:
        return text
    for secret in uri_secrets(" ".join(u for u in uris if u)):
        text = text.replace(secret, MASK)
    return text


def unexpected(exc: BaseException) -> str:
    """An error nobody expected as one coded line, ``[CODE] Type: first line``, its URIs redacted."""
    code = exc.code if isinstance(exc, SparkCdcError) else SparkCdcError.code
    lines = str(exc).strip().splitlines()
    return f"[{code}] {type(exc).__name__}: {redact_text(lines[0] if lines else '')[:500]}"
