"""``ApiClient``: a small httpx client of the ``/api/v2`` API (used by the CLI and the tests)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from sparkcdc import errors
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import ConfigError, SparkCdcError, TransientError

DEFAULT_SERVER = "http://127.0.0.1:8300"
CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a connection to the server (an unreachable one is reported within this)."""


def server_url(text: str) -> str:
    """``--server`` as a base URL: ``http(s)://HOST[:PORT]`` (``HOST:PORT`` alone means http)."""
    raw = text.strip()
    url = (raw if "://" in raw else f"http://{raw}").rstrip("/")
    if any(c.isspace() for c in raw):
        url = ""  # a host never holds a space
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or (port is not None and not 0 < port < 65536)
        or parts.query
        or parts.fragment
    ):
        raise ConfigError(
            f"invalid --server {redact_uri(text)!r}: expected http://HOST:PORT of a sparkcdc server, "
            f"e.g. {DEFAULT_SERVER}"
        )
    return url


_BY_STATUS: dict[int, type[SparkCdcError]] = {
    400: errors.ConfigError,
    401: errors.AuthError,
    404: errors.ChangefeedNotFound,
    409: errors.ChangefeedStateError,
    503: errors.TransientError,
}


def _classes() -> dict[str, type[SparkCdcError]]:
    out: dict[str, type[SparkCdcError]] = {}
    todo: list[type[SparkCdcError]] = [SparkCdcError]
    while todo:
        cls = todo.pop()
        out.setdefault(cls.code, cls)
        todo.extend(cls.__subclasses__())
    return out


def error_from_response(resp: httpx.Response) -> SparkCdcError:
    """The SparkCdcError an API error body describes (the class of its code, else of its status)."""
    try:
        body = resp.json()
        code, msg = str(body["error_code"]), str(body["error_msg"])
    except (ValueError, KeyError, TypeError):
        first = resp.text.strip().splitlines()[0][:200] if resp.text.strip() else ""
        code = "CDC:ErrHTTP"
        msg = f"HTTP {resp.status_code} that is not a sparkcdc API answer ({first!r}); check --server"
    cls = _classes().get(code) or _BY_STATUS.get(resp.status_code, SparkCdcError)
    return cls(msg, code=code)


def _q(changefeed_id: str) -> str:
    return quote(changefeed_id, safe="")


class ApiClient:
    """Calls one sparkcdc server; errors come back as the matching SparkCdcError."""

    def __init__(
        self, server: str = DEFAULT_SERVER, auth_token: str | None = None, timeout: float = 60.0
    ) -> None:
        self.server = server_url(server)
        headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
        self._http = httpx.Client(
            base_url=f"{self.server}/api/v2",
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        """One call; returns the decoded JSON body."""
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            resp = self._http.request(method, path, json=json, params=clean)
        except httpx.TransportError as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TransientError(
                f"cannot reach the sparkcdc server at {redact_uri(self.server)} ({why}); "
                "is `sparkcdc server` running there? (set --server)",
                code="CDC:ErrServerUnreachable",
            ) from exc
        if resp.status_code >= 400:
            raise error_from_response(resp)
        if not resp.content:
            return {}
        try:
            return resp.json()
        except ValueError:
            raise ConfigError(
                f"the server at {redact_uri(self.server)} answered HTTP {resp.status_code} with something that "
                "is not JSON: it is not a sparkcdc server; check --server",
                code="CDC:ErrHTTP",
            ) from None

    def health(self) -> Any:
        """GET /health."""
        return self.request("GET", "/health")

    def status(self) -> Any:
        """GET /status."""
        return self.request("GET", "/status")

    def captures(self) -> Any:
        """GET /captures."""
        return self.request("GET", "/captures")

    def list_changefeeds(self, namespace: str | None = None, all: bool = False) -> Any:
        """GET /changefeeds."""
        return self.request(
            "GET", "/changefeeds", params={"namespace": namespace, "all": "true" if all else None}
        )

    def create_changefeed(self, body: dict[str, Any]) -> Any:
        """POST /changefeeds."""
        return self.request("POST", "/changefeeds", json=body)

    def get_changefeed(self, changefeed_id: str, namespace: str | None = None) -> Any:
        """GET /changefeeds/{id}."""
        return self.request("GET", f"/changefeeds/{_q(changefeed_id)}", params={"namespace": namespace})

    def changefeed_status(self, changefeed_id: str, namespace: str | None = None) -> Any:
        """GET /changefeeds/{id}/status."""
        return self.request(
            "GET", f"/changefeeds/{_q(changefeed_id)}/status", params={"namespace": namespace}
        )

    def update_changefeed(
        self, changefeed_id: str, body: dict[str, Any], namespace: str | None = None
    ) -> Any:
        """PUT /changefeeds/{id}."""
        return self.request(
            "PUT", f"/changefeeds/{_q(changefeed_id)}", json=body, params={"namespace": namespace}
        )

    def pause(self, changefeed_id: str, namespace: str | None = None) -> Any:
        """POST /changefeeds/{id}/pause."""
        return self.request(
            "POST", f"/changefeeds/{_q(changefeed_id)}/pause", params={"namespace": namespace}
        )

    def resume(
        self, changefeed_id: str, overwrite_checkpoint_ts: int | None = None, namespace: str | None = None
    ) -> Any:
        """POST /changefeeds/{id}/resume."""
        body = {"overwrite_checkpoint_ts": overwrite_checkpoint_ts} if overwrite_checkpoint_ts else {}
        return self.request(
            "POST", f"/changefeeds/{_q(changefeed_id)}/resume", json=body, params={"namespace": namespace}
        )

    def remove(self, changefeed_id: str, namespace: str | None = None) -> Any:
        """DELETE /changefeeds/{id}."""
        return self.request("DELETE", f"/changefeeds/{_q(changefeed_id)}", params={"namespace": namespace})
