"""The HTTP API, shaped like TiCDC's ``/api/v2`` (Starlette; any server answers any request)."""

from __future__ import annotations

import hmac
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from sparkcdc import __version__
from sparkcdc.config.uri import redact_text
from sparkcdc.errors import AuthError, RequestTooLarge, SparkCdcError, TransientError, http_status
from sparkcdc.meta import ChangefeedState, MetaStore
from sparkcdc.server.redact import unexpected
from sparkcdc.server.service import (
    ChangefeedService,
    invalid_param,
    short_repr,
    validate_changefeed_id,
    validate_namespace,
)

log = logging.getLogger(__name__)

PREFIX = "/api/v2"
MAX_BODY_BYTES = 1 << 20
"""The largest request body the API reads (a changefeed request is a few KiB)."""
LIST_STATES = [s.value for s in ChangefeedState]
"""What ``GET /changefeeds?state=`` accepts."""
TRUE_FALSE = {"1": True, "true": True, "0": False, "false": False}
"""What a boolean query parameter (``all``) accepts."""
Handler = Callable[[Request], Awaitable[Response]]

DASHBOARD_DIR = Path(__file__).resolve().parent / "dashboard"
DASHBOARD_FILES = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
"""The dashboard's files besides index.html: everything the page loads, shipped in the package."""


@dataclass
class ServerState:
    """What the handlers need to know about the server they run in."""

    store: MetaStore
    service: ChangefeedService
    server_id: str
    address: str
    lease_seconds: float
    auth_token: str | None = None
    scheduler: Any = None
    metrics: Any = None
    """The process's ``sparkcdc.metrics.ChangefeedMetrics`` (``/metrics``)."""
    history: Any = None
    """The ``server.history.ChangefeedHistory`` sampler (``/changefeeds/{id}/history``)."""
    debug: bool = False
    """Log the traceback of an unexpected error (``sparkcdc --debug server``)."""


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


def error_response(err: SparkCdcError) -> JSONResponse:
    """An API error body ``{"error_code", "error_msg"}`` with the status from ``errors.http_status``."""
    return _json(err.to_dict(), http_status(err))


def _too_large() -> RequestTooLarge:
    return RequestTooLarge(
        f"the request body is larger than {MAX_BODY_BYTES} bytes (1 MiB); "
        "a changefeed request is a JSON object of a few KiB: send its fields, not data"
    )


async def _read_capped(request: Request) -> bytes:
    """The body, refused with 413 as soon as it passes ``MAX_BODY_BYTES`` (never read whole)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks)


async def _body(request: Request) -> dict[str, Any]:
    raw = await _read_capped(request)
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_param(
            f"the request body is not UTF-8 text (byte {exc.start}); send a JSON object"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # The position, not the text: the body may hold a password.
        raise invalid_param(
            f"the request body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "send a JSON object"
        ) from None
    except RecursionError:
        raise invalid_param(
            "the request body is nested too deeply to read; send a flat JSON object"
        ) from None
    if not isinstance(data, dict):
        raise invalid_param(f"the request body must be a JSON object, got {type(data).__name__}")
    return data


def create_app(state: ServerState) -> Starlette:
    """The Starlette application serving ``/api/v2``."""

    async def internal_error(request: Request, exc: Exception) -> Response:
        # One coded line; the traceback only with --debug (it may quote request data).
        log.error(
            "internal error on %s %s: %s",
            request.method,
            request.url.path[:200],
            unexpected(exc),
            exc_info=exc if state.debug else None,
        )
        return _json(
            {
                "error_code": "CDC:ErrInternalServerError",
                "error_msg": f"internal error: {type(exc).__name__}",
            },
            500,
        )

    def guarded(handler: Handler, *, public: bool = False) -> Handler:
        async def wrapper(request: Request) -> Response:
            try:
                if not public and state.auth_token is not None:
                    _check_auth(request, state.auth_token)
                return await handler(request)
            except SparkCdcError as err:
                # One line, no traceback: a refused request is the caller's mistake, not the server's.
                log.log(
                    logging.WARNING if http_status(err) >= 500 else logging.INFO,
                    "%s %s refused (%d): [%s] %s",
                    request.method,
                    request.url.path[:200],
                    http_status(err),
                    err.code,
                    redact_text(err.message.splitlines()[0] if err.message else "")[:500],
                )
                return error_response(err)
            except SQLAlchemyError as exc:
                log.warning(
                    "meta database error on %s %s: %s", request.method, request.url.path, type(exc).__name__
                )
                unavailable = TransientError(
                    f"the meta database is unavailable ({type(exc).__name__}); retry shortly",
                    code="CDC:ErrMetaStoreUnavailable",
                )
                return _json(unavailable.to_dict(), 503)
            except Exception as exc:
                # Answered here: Starlette's last-resort handler re-raises, and uvicorn would log a traceback.
                return await internal_error(request, exc)

        return wrapper

    routes = [
        *_cluster_routes(state, guarded),
        *_changefeed_routes(state, guarded),
        *_page_routes(state, guarded),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "CDC:ErrNotFound", 405: "CDC:ErrMethodNotAllowed"}.get(exc.status_code, "CDC:ErrHTTP")
        msg = f"{request.method} {request.url.path}: {exc.detail}"
        if exc.status_code == 404:
            msg += f"; the API lives under {PREFIX} (health, status, captures, changefeeds)"
        return _json({"error_code": code, "error_msg": msg}, exc.status_code)

    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: http_error, Exception: internal_error},
    )


class _Guard(Protocol):
    """``create_app``'s wrapper of a handler: the bearer-token check (unless public) and the error answers."""

    def __call__(self, handler: Handler, *, public: bool = False) -> Handler: ...


def _cluster_routes(state: ServerState, guarded: _Guard) -> list[Route]:
    """The health, status and captures routes: this server and the servers it shares the meta store with."""

    async def health(request: Request) -> Response:
        return _json({})

    async def status(request: Request) -> Response:
        _only_params(request, ())
        servers = await run_in_threadpool(state.store.list_servers, state.lease_seconds * 3)
        owner = servers[0].id if servers else None
        return _json(
            {
                "version": __version__,
                "git_hash": "",
                "id": state.server_id,
                "pid": os.getpid(),
                "is_owner": owner == state.server_id,
                "liveness": 0,
                "cluster_id": "default",
                "address": state.address,
                "meta_backend": state.store.dialect,
            }
        )

    async def captures(request: Request) -> Response:
        _only_params(request, ())
        servers = await run_in_threadpool(state.store.list_servers, state.lease_seconds * 3)
        owner = servers[0].id if servers else None
        items = [
            {
                "id": s.id,
                "is_owner": s.id == owner,
                "address": s.address,
                "cluster_id": "default",
                "version": s.version,
                "pid": s.pid,
                "started_at": s.started_at,
                "heartbeat_at": s.heartbeat_at,
                "changefeeds": s.owned,
            }
            for s in servers
        ]
        return _json({"total": len(items), "items": items})

    return [
        Route(f"{PREFIX}/health", guarded(health, public=True), methods=["GET"]),
        Route(f"{PREFIX}/status", guarded(status), methods=["GET"]),
        Route(f"{PREFIX}/captures", guarded(captures), methods=["GET"]),
    ]


def _changefeed_routes(state: ServerState, guarded: _Guard) -> list[Route]:
    """The ``/changefeeds`` routes: list, create, read, update, remove, pause, resume, history, snapshot."""
    svc = state.service

    def ns_of(request: Request) -> str:
        _only_params(request, ("namespace",))
        return validate_namespace(request.query_params.get("namespace"))

    def id_of(request: Request) -> str:
        return validate_changefeed_id(request.path_params["id"])

    async def list_changefeeds(request: Request) -> Response:
        _only_params(request, ("namespace", "all", "state"))
        ns = request.query_params.get("namespace")
        ns = validate_namespace(ns) if ns else None
        include_removed = _bool_param(request, "all")
        state_filter = request.query_params.get("state") or None
        if state_filter is not None and state_filter not in LIST_STATES:
            raise invalid_param(
                f"invalid query parameter state={short_repr(state_filter)}: use one of {', '.join(LIST_STATES)}"
            )
        cfs = await run_in_threadpool(state.store.list_changefeeds, ns, include_removed=include_removed)
        items = [svc.summary(cf) for cf in cfs if not state_filter or cf.state.value == state_filter]
        return _json({"total": len(items), "items": items})

    async def create_changefeed(request: Request) -> Response:
        _only_params(request, ())
        body = await _body(request)
        cf = await run_in_threadpool(svc.create, body)
        log.info("changefeed %s created (sink %s)", cf.id, svc.detail(cf)["sink_uri"])
        return _json(svc.detail(cf), 201)

    async def get_changefeed(request: Request) -> Response:
        cf = await run_in_threadpool(state.store.get_changefeed, id_of(request), ns_of(request))
        return _json(svc.detail(cf))

    async def changefeed_status(request: Request) -> Response:
        cf = await run_in_threadpool(state.store.get_changefeed, id_of(request), ns_of(request))
        return _json(svc.status(cf))

    async def update_changefeed(request: Request) -> Response:
        body = await _body(request)
        cf = await run_in_threadpool(svc.update, id_of(request), ns_of(request), body)
        log.info("changefeed %s updated", cf.id)
        return _json(svc.detail(cf))

    async def delete_changefeed(request: Request) -> Response:
        cf = await run_in_threadpool(svc.remove, id_of(request), ns_of(request))
        log.info("changefeed %s removed", cf.id)
        return _json({})

    async def pause(request: Request) -> Response:
        cf = await run_in_threadpool(svc.pause, id_of(request), ns_of(request))
        log.info("changefeed %s paused", cf.id)
        return _json({})

    async def resume(request: Request) -> Response:
        cf_id, ns = id_of(request), ns_of(request)
        body = await _body(request)
        unknown = sorted(set(body) - {"overwrite_checkpoint_ts"})
        if unknown:
            raise invalid_param(f"unknown field(s) {unknown} in resume; allowed: ['overwrite_checkpoint_ts']")
        ts = body.get("overwrite_checkpoint_ts") or None
        cf = await run_in_threadpool(svc.resume, cf_id, ns, ts)
        log.info("changefeed %s resumed%s", cf.id, f" from ts {ts}" if ts else "")
        return _json({})

    async def history(request: Request) -> Response:
        ns = ns_of(request)
        cf = await run_in_threadpool(state.store.get_changefeed, id_of(request), ns)
        h = state.history
        points = h.points(cf.namespace, cf.id) if h is not None else []
        window = h.window_s if h is not None else 0
        interval = h.interval_s if h is not None else 0
        return _json({"window_s": window, "interval_s": interval, "total": len(points), "items": points})

    async def snapshot(request: Request) -> Response:
        cf = await run_in_threadpool(state.store.get_changefeed, id_of(request), ns_of(request))
        return _json(await run_in_threadpool(svc.snapshot, cf))

    return [
        Route(f"{PREFIX}/changefeeds", guarded(list_changefeeds), methods=["GET"]),
        Route(f"{PREFIX}/changefeeds", guarded(create_changefeed), methods=["POST"]),
        Route(f"{PREFIX}/changefeeds/{{id}}", guarded(get_changefeed), methods=["GET"]),
        Route(f"{PREFIX}/changefeeds/{{id}}", guarded(update_changefeed), methods=["PUT"]),
        Route(f"{PREFIX}/changefeeds/{{id}}", guarded(delete_changefeed), methods=["DELETE"]),
        Route(f"{PREFIX}/changefeeds/{{id}}/status", guarded(changefeed_status), methods=["GET"]),
        Route(f"{PREFIX}/changefeeds/{{id}}/pause", guarded(pause), methods=["POST"]),
        Route(f"{PREFIX}/changefeeds/{{id}}/resume", guarded(resume), methods=["POST"]),
        Route(f"{PREFIX}/changefeeds/{{id}}/history", guarded(history), methods=["GET"]),
        Route(f"{PREFIX}/changefeeds/{{id}}/snapshot", guarded(snapshot), methods=["GET"]),
    ]


def _page_routes(state: ServerState, guarded: _Guard) -> list[Route]:
    """The routes outside ``/api/v2``: the Prometheus ``/metrics`` and the dashboard's page and files."""

    async def metrics(request: Request) -> Response:
        from sparkcdc.metrics import CONTENT_TYPE

        body = state.metrics.exposition() if state.metrics is not None else b""
        return Response(body, media_type=CONTENT_TYPE)

    async def dashboard_index(request: Request) -> Response:
        # The page holds no data: it asks for the token, then reads the API with it.
        return FileResponse(DASHBOARD_DIR / "index.html", media_type="text/html; charset=utf-8")

    async def dashboard_file(request: Request) -> Response:
        name = request.path_params["name"]
        media = DASHBOARD_FILES.get(name)
        if media is None:
            raise HTTPException(404, f"no dashboard file {name!r}")
        return FileResponse(DASHBOARD_DIR / name, media_type=media)

    return [
        Route("/metrics", guarded(metrics), methods=["GET"]),
        Route("/", dashboard_index, methods=["GET"]),
        Route("/dashboard/{name}", dashboard_file, methods=["GET"]),
    ]


def _only_params(request: Request, allowed: tuple[str, ...]) -> None:
    """Refuse query parameters the route does not read (a typo would otherwise be ignored)."""
    unknown = sorted(set(request.query_params) - set(allowed))
    if unknown:
        names = ", ".join(short_repr(k) for k in unknown)
        hint = f"allowed: {', '.join(allowed)}" if allowed else "this route takes none"
        raise invalid_param(f"unknown query parameter(s) {names} on {request.url.path[:200]}; {hint}")


def _bool_param(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return False
    value = TRUE_FALSE.get(raw.lower())
    if value is None:
        raise invalid_param(
            f"invalid query parameter {name}={short_repr(raw)}: use true or false (or 1 or 0)"
        )
    return value


def _check_auth(request: Request, token: str) -> None:
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise AuthError(
            "this server requires a bearer token: pass --auth-token (CLI) or the header 'Authorization: Bearer TOKEN'"
        )
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise AuthError("wrong bearer token: use the token the server was started with (--auth-token)")
