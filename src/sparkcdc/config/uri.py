"""Parsing of sink and upstream URIs with closed query parameters.

Sink options are typed, ranged and merged with the changefeed TOML by ``config.options``;
``ParsedURI`` splits the URI and records which parameters were read, so that
``reject_unknown`` can refuse the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from sparkcdc.errors import SinkURIError

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str, key: str = "duration") -> float:
    """A Go-style duration (``5s``, ``1m30s``, ``200ms``) in seconds."""
    t = text.strip()
    if not _DURATION.match(t):
        raise SinkURIError(f"invalid value {text!r} for {key!r}: expected a duration like 5s, 200ms or 1m30s")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(t))


@dataclass
class ParsedURI:
    """A URI split into parts, with a record of which query parameters were read."""

    raw: str = field(repr=False)
    scheme: str
    username: str | None
    password: str | None = field(repr=False)
    hosts: list[tuple[str, int | None]]
    path: str
    params: dict[str, str] = field(repr=False)
    _used: set[str] = field(default_factory=set, repr=False)

    @classmethod
    def parse(cls, uri: str) -> ParsedURI:
        """Split a URI; several ``host:port`` pairs separated by commas are allowed."""
        if unencoded_userinfo(uri):
            raise SinkURIError(
                f"invalid URI {redact_uri(uri)!r}: its user or password holds / ? or #, which must be "
                "percent-encoded (%2F %3F %23)"
            )
        try:
            parts = urlsplit(uri)
        except ValueError as exc:
            raise SinkURIError(f"invalid URI {redact_uri(uri)!r}: {exc}") from exc
        if not parts.scheme:
            raise SinkURIError(
                f"invalid URI {redact_uri(uri)!r}: missing scheme (like kafka://, s3://, file://)"
            )
        netloc = parts.netloc
        user = password = None
        if "@" in netloc:
            cred, netloc = netloc.rsplit("@", 1)
            user, _, pw = cred.partition(":")
            user = unquote(user)
            password = unquote(pw)
        hosts: list[tuple[str, int | None]] = []
        for hp in filter(None, netloc.split(",")):
            host, sep, port = hp.rpartition(":") if not hp.endswith("]") else (hp, "", "")
            if not sep:
                host, port = hp, ""
            if port and not port.isdigit():
                raise SinkURIError(f"invalid port {port!r} in URI {redact_uri(uri)!r}")
            hosts.append((host.strip("[]"), int(port) if port else None))
        params: dict[str, str] = {}
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if k in params:
                raise SinkURIError(f"parameter {k!r} is given twice in URI {redact_uri(uri)!r}")
            params[k] = v
        return cls(uri, parts.scheme.lower(), user, password, hosts, unquote(parts.path), params)

    def get(self, key: str, default: str | None = None) -> str | None:
        """A raw parameter value."""
        self._used.add(key)
        return self.params.get(key, default)

    def get_str(
        self, key: str, default: str | None = None, allowed: tuple[str, ...] | None = None
    ) -> str | None:
        """A string parameter, optionally one of ``allowed``."""
        v = self.get(key, default)
        if v is not None and allowed is not None and v not in allowed:
            raise SinkURIError(
                f"invalid value {v!r} for sink URI parameter {key!r}; allowed: {', '.join(allowed)}"
            )
        return v

    def get_bool(self, key: str, default: bool | None = None) -> bool | None:
        """A boolean parameter (true/false)."""
        v = self.get(key)
        if v is None:
            return default
        if v.lower() in ("true", "1"):
            return True
        if v.lower() in ("false", "0"):
            return False
        raise SinkURIError(f"invalid value {v!r} for sink URI parameter {key!r}: expected true or false")

    def reject_unknown(self, allowed: set[str] | None = None) -> None:
        """Refuse parameters that nothing read (and that are not in ``allowed``)."""
        unknown = sorted(set(self.params) - self._used - (allowed or set()))
        if unknown:
            known = sorted(self._used | (allowed or set()))
            raise SinkURIError(
                f"unknown sink URI parameter(s) {', '.join(map(repr, unknown))} in {redact_uri(self.raw)!r}; "
                f"supported: {', '.join(known)}"
            )


MASK = "xxxxx"

_SECRET_PARAMS = re.compile(
    r"(?i)((?:^|(?<=[?&;\s]))(?:(?:[a-z0-9_.-]*[-_.])?(?:password|passwd|pwd|secret|token|credentials?)|"
    r"account-key|access-key|access-key-id|secret-access-key|secret-key|key|auth-header|authorization)=)"
    r"[^&\s'\"]*"
)
"""A secret query parameter (``password=``, ``sasl-password=``, ``secret-access-key=`` ...) and its value."""

_PLACEHOLDERS = ("password", "PASSWORD", MASK)
"""Passwords of the URI forms messages show (``mysql://user:password@host:port/``), left as they are.

A user's real password that happens to be one of them is still masked in what the CLI prints:
it scrubs the secrets of its own arguments (``scrub_secrets``)."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_HOSTLIKE = re.compile(r"^[A-Za-z0-9.\-_:\[\],%]*$")


def _userinfo_end(rest: str) -> int:
    """Where the userinfo of ``rest`` (the text after ``scheme://``) ends: the index of its ``@``, or -1.

    A password may hold ``@``, ``/``, ``?`` or ``#`` unencoded, so the ``@`` is the last one followed
    by something shaped like a host list; without such, the last ``@`` (masking too much is safe).
    """
    ats = [i for i, ch in enumerate(rest) if ch == "@"]
    if not ats:
        return -1
    for i in reversed(ats):
        host = re.split(r"[/?#]", rest[i + 1 :], maxsplit=1)[0]
        if host and _HOSTLIKE.match(host):
            return i
    return ats[-1]


def _redact_one(rest: str) -> str:
    """The text after ``scheme://`` (one URI, up to the end of its token) with secrets masked."""
    at = _userinfo_end(rest)
    if at >= 0:
        cred = rest[:at]
        user, sep, pw = cred.partition(":")
        if pw not in _PLACEHOLDERS:
            rest = (f"{user}:{MASK}" if sep else user) + rest[at:]
    return _SECRET_PARAMS.sub(lambda m: m.group(1) + MASK, rest)


def redact_text(text: str) -> str:
    """``text`` with the password of everything shaped ``scheme://user:pass@...`` and secret parameters masked.

    Works on any string (an error message, an argument) whether or not its URIs parse: a URI runs
    to the next whitespace.
    """
    out: list[str] = []
    pos = 0
    for m in _SCHEME.finditer(text):
        if m.start() < pos:
            continue
        end = m.end()
        stop = re.search(r"\s", text[end:])
        token_end = end + stop.start() if stop else len(text)
        out.append(text[pos : m.start()])
        out.append(text[m.start() : end] + _redact_one(text[end:token_end]))
        pos = token_end
    out.append(text[pos:])
    return "".join(out)


def split_scheme(uri: str) -> str:
    """The lower-case scheme of a URI-shaped string ('' without one), whether or not the rest parses."""
    m = _SCHEME.match(uri.strip())
    return m.group(0)[:-3].lower() if m else ""


def unencoded_userinfo(uri: str) -> bool:
    """Whether the user or password of ``uri`` holds a character that ends the authority (``/ ? #``).

    ``urlsplit`` then cuts the URI inside the password: the host, the port and the path it gives
    are pieces of the password.
    """
    m = _SCHEME.match(uri.strip())
    if not m:
        return False
    rest = uri.strip()[m.end() :]
    at = _userinfo_end(rest)
    return at >= 0 and any(ch in rest[:at] for ch in "/?#")


def redact_uri(uri: str) -> str:
    """The URI with its password and secret parameters replaced by ``xxxxx`` (any string, parsed or not)."""
    return redact_text(uri)


def uri_secrets(text: str) -> list[str]:
    """The secrets (passwords, secret parameter values) in the URIs of ``text``, raw and URL-decoded.

    For scrubbing messages that may quote them outside a URI (a driver's error text); secrets shorter
    than 3 characters are left out, they would mask unrelated text.
    """
    found: set[str] = set()
    for m in _SCHEME.finditer(text):
        rest = text[m.end() :]
        stop = re.search(r"\s", rest)
        rest = rest[: stop.start()] if stop else rest
        at = _userinfo_end(rest)
        if at >= 0:
            _, sep, pw = rest[:at].partition(":")
            if sep and pw:
                found.update({pw, unquote(pw), quote(unquote(pw), safe="")})
        for q in _SECRET_PARAMS.finditer(rest):
            value = rest[q.end(1) : q.end()]
            if value:
                found.update({value, unquote(value), quote(unquote(value), safe="")})
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)


def scrub_secrets(text: str, sources: list[str]) -> str:
    """``text`` with its URIs redacted and every secret of the URIs in ``sources`` masked."""
    text = redact_text(text)
    for secret in uri_secrets(" ".join(sources)):
        text = text.replace(secret, MASK)
    return text
