"""The Confluent Schema Registry REST API (the subset Avro producers and consumers use) on Starlette.

Errors are Confluent's: ``{"error_code": N, "message": "…"}`` with 40401 subject
not found, 40402 version not found, 40403 schema not found, 409 incompatible
schema, 42201 invalid schema, 42202 invalid version, 42203 invalid
compatibility level.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import avro.schema
import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sparkcdc.registry.compat import (
    LEVELS,
    InvalidSchema,
    incompatibilities,
    incompatibility_message,
    parse_schema,
)
from sparkcdc.registry.store import GLOBAL, RegistryStore, VersionRow, fingerprint

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_VERSION = 2**31 - 1


class RegistryError(Exception):
    """An error answered as Confluent's error body."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def _subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def _json(data: Any, status: int = 200) -> Response:
    return JSONResponse(data, status_code=status, media_type=MEDIA_TYPE)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


class SchemaRegistryApp:
    """Request handlers over a ``RegistryStore``; ``app`` is the ASGI application."""

    def __init__(self, store: RegistryStore) -> None:
        self.store = store
        self._parsed: dict[int, avro.schema.Schema] = {}
        self._parsed_lock = threading.Lock()
        routes = [
            Route("/", self.root, methods=["GET"]),
            Route("/subjects", self.list_subjects, methods=["GET"]),
            Route("/subjects/{subject}", self.lookup, methods=["POST"]),
            Route("/subjects/{subject}", self.delete_subject, methods=["DELETE"]),
            Route("/subjects/{subject}/versions", self.list_versions, methods=["GET"]),
            Route("/subjects/{subject}/versions", self.register, methods=["POST"]),
            Route("/subjects/{subject}/versions/{version}", self.get_version, methods=["GET"]),
            Route("/subjects/{subject}/versions/{version}", self.delete_version, methods=["DELETE"]),
            Route("/subjects/{subject}/versions/{version}/schema", self.get_version_schema, methods=["GET"]),
            Route("/schemas/types", self.schema_types, methods=["GET"]),
            Route("/schemas/ids/{id}", self.get_schema, methods=["GET"]),
            Route("/schemas/ids/{id}/schema", self.get_schema_text, methods=["GET"]),
            Route("/schemas/ids/{id}/subjects", self.schema_subjects, methods=["GET"]),
            Route("/schemas/ids/{id}/versions", self.schema_versions, methods=["GET"]),
            Route("/config", self.get_config, methods=["GET"]),
            Route("/config", self.put_config, methods=["PUT"]),
            Route("/config", self.delete_config, methods=["DELETE"]),
            Route("/config/{subject}", self.get_config, methods=["GET"]),
            Route("/config/{subject}", self.put_config, methods=["PUT"]),
            Route("/config/{subject}", self.delete_config, methods=["DELETE"]),
            Route("/compatibility/subjects/{subject}/versions", self.test_compat_all, methods=["POST"]),
            Route("/compatibility/subjects/{subject}/versions/{version}", self.test_compat, methods=["POST"]),
        ]
        self.app = Starlette(
            routes=[Route(r.path, self._wrap(r.endpoint), methods=list(r.methods or [])) for r in routes],
            exception_handlers={HTTPException: self._http_error},  # type: ignore[dict-item]
        )

    # -- plumbing -------------------------------------------------------------------------------------------

    def _wrap(self, fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await fn(request)
            except RegistryError as err:
                return _json({"error_code": err.error_code, "message": err.message}, err.status)
            except sa.exc.SQLAlchemyError as exc:
                log.error("registry store failed: %s", exc)
                return _json({"error_code": 50001, "message": f"Error in the backend data store: {exc}"}, 500)

        return endpoint

    async def _http_error(self, request: Request, exc: HTTPException) -> Response:
        phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, str(exc.detail))
        return _json(
            {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {phrase}"}, exc.status_code
        )

    async def _body(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            raise RegistryError(400, 400, f"Unexpected character in request body: {exc}") from exc
        if not isinstance(body, dict):
            raise RegistryError(400, 400, "The request body must be a JSON object")
        return body

    def _schema_from_body(self, body: dict[str, Any]) -> tuple[str, str, avro.schema.Schema]:
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        if schema_type != "AVRO":
            raise RegistryError(
                422, 42201, f"Invalid schema type {schema_type}: this registry stores AVRO schemas only"
            )
        if body.get("references"):
            raise RegistryError(
                422, 42201, "Invalid schema: schema references are not supported by this registry"
            )
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise RegistryError(422, 42201, 'Invalid schema: the request has no "schema" string')
        try:
            parsed = parse_schema(text)
        except InvalidSchema as exc:
            raise RegistryError(422, 42201, str(exc)) from exc
        compact = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
        return schema_type, compact, parsed

    def _parsed_schema(self, schema_id: int, text: str) -> avro.schema.Schema:
        with self._parsed_lock:
            got = self._parsed.get(schema_id)
        if got is None:
            got = parse_schema(text)
            with self._parsed_lock:
                self._parsed[schema_id] = got
        return got

    @staticmethod
    def _version_arg(raw: str) -> int | None:
        """None for latest, else the version number; 42202 when invalid."""
        if raw == "latest" or raw == "-1":
            return None
        try:
            v = int(raw)
        except ValueError:
            v = 0
        if not 1 <= v <= MAX_VERSION:
            raise RegistryError(
                422,
                42202,
                f"The specified version '{raw}' is not a valid version id. Allowed values are between "
                f'[1, {MAX_VERSION}] and the string "latest"',
            )
        return v

    def _find_version(self, subject: str, raw: str, include_deleted: bool = False) -> VersionRow:
        want = self._version_arg(raw)
        versions = self.store.versions(subject, include_deleted)
        if not versions:
            raise _subject_not_found(subject)
        if want is None:
            live = [v for v in versions if not v.deleted] or versions
            return live[-1]
        for v in versions:
            if v.version == want:
                return v
        raise RegistryError(404, 40402, f"Version {want} not found.")

    @staticmethod
    def _version_body(v: VersionRow) -> dict[str, Any]:
        body: dict[str, Any] = {
            "subject": v.subject,
            "version": v.version,
            "id": v.schema_id,
            "schema": v.text,
        }
        if v.schema_type != "AVRO":
            body["schemaType"] = v.schema_type
        return body

    # -- handlers -------------------------------------------------------------------------------------------

    async def root(self, request: Request) -> Response:
        return Response("{}", media_type=MEDIA_TYPE)

    async def list_subjects(self, request: Request) -> Response:
        subjects = await run_in_threadpool(self.store.subjects, _flag(request, "deleted"))
        prefix = request.query_params.get("subjectPrefix")
        if prefix:
            subjects = [s for s in subjects if s.startswith(prefix)]
        return _json(subjects)

    async def list_versions(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        versions = await run_in_threadpool(self.store.versions, subject, _flag(request, "deleted"))
        if not versions:
            raise _subject_not_found(subject)
        return _json([v.version for v in versions])

    async def register(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        schema_type, text, parsed = self._schema_from_body(await self._body(request))

        def check(live: list[VersionRow]) -> None:
            level = self.store.effective_config(subject)
            previous = [(v.version, self._parsed_schema(v.schema_id, v.text)) for v in live]
            problems = incompatibilities(parsed, previous, level)
            if problems:
                old_text = next(v.text for v in live if v.version == problems[0].old_version)
                raise RegistryError(409, 409, incompatibility_message(subject, level, problems, old_text))

        schema_id, _version, _created = await run_in_threadpool(
            self.store.register, subject, schema_type, text, check
        )
        return _json({"id": schema_id})

    async def lookup(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        schema_type, text, _ = self._schema_from_body(await self._body(request))
        include_deleted = _flag(request, "deleted")
        versions = await run_in_threadpool(self.store.versions, subject, include_deleted)
        if not versions:
            raise _subject_not_found(subject)
        fp = fingerprint(schema_type, text)
        for v in reversed(versions):
            if fingerprint(v.schema_type, v.text) == fp:
                return _json(self._version_body(v))
        raise RegistryError(404, 40403, "Schema not found")

    async def get_version(self, request: Request) -> Response:
        v = await run_in_threadpool(
            self._find_version,
            request.path_params["subject"],
            request.path_params["version"],
            _flag(request, "deleted"),
        )
        return _json(self._version_body(v))

    async def get_version_schema(self, request: Request) -> Response:
        v = await run_in_threadpool(
            self._find_version,
            request.path_params["subject"],
            request.path_params["version"],
            _flag(request, "deleted"),
        )
        return Response(v.text, media_type=MEDIA_TYPE)

    async def delete_subject(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        permanent = _flag(request, "permanent")
        every = await run_in_threadpool(self.store.versions, subject, True)
        if not every:
            raise _subject_not_found(subject)
        live = [v for v in every if not v.deleted]
        if permanent and live:
            raise RegistryError(
                404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
            )
        if not permanent and not live:
            raise RegistryError(
                404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            )
        return _json(await run_in_threadpool(self.store.delete_subject, subject, permanent))

    async def delete_version(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        permanent = _flag(request, "permanent")
        v = await run_in_threadpool(self._find_version, subject, request.path_params["version"], True)
        if permanent and not v.deleted:
            raise RegistryError(
                404,
                40407,
                f"Subject '{subject}' Version {v.version} was not deleted first before being permanently deleted",
            )
        if not permanent and v.deleted:
            raise RegistryError(
                404,
                40406,
                f"Subject '{subject}' Version {v.version} was soft deleted.Set permanent=true to delete permanently",
            )
        await run_in_threadpool(self.store.delete_version, subject, v.version, permanent)
        return _json(v.version)

    async def schema_types(self, request: Request) -> Response:
        return _json(["AVRO"])

    def _schema_id(self, request: Request) -> int:
        try:
            return int(request.path_params["id"])
        except ValueError:
            raise RegistryError(404, 40403, f"Schema {request.path_params['id']} not found") from None

    async def get_schema(self, request: Request) -> Response:
        sid = self._schema_id(request)
        row = await run_in_threadpool(self.store.schema_by_id, sid)
        if row is None:
            raise RegistryError(404, 40403, f"Schema {sid} not found")
        body: dict[str, Any] = {"schema": row.text}
        if row.schema_type != "AVRO":
            body["schemaType"] = row.schema_type
        return _json(body)

    async def get_schema_text(self, request: Request) -> Response:
        sid = self._schema_id(request)
        row = await run_in_threadpool(self.store.schema_by_id, sid)
        if row is None:
            raise RegistryError(404, 40403, f"Schema {sid} not found")
        return Response(row.text, media_type=MEDIA_TYPE)

    async def schema_subjects(self, request: Request) -> Response:
        sid = self._schema_id(request)
        uses = await run_in_threadpool(self.store.usages, sid, _flag(request, "deleted"))
        if not uses and await run_in_threadpool(self.store.schema_by_id, sid) is None:
            raise RegistryError(404, 40403, f"Schema {sid} not found")
        return _json(sorted({s for s, _ in uses}))

    async def schema_versions(self, request: Request) -> Response:
        sid = self._schema_id(request)
        uses = await run_in_threadpool(self.store.usages, sid, _flag(request, "deleted"))
        if not uses and await run_in_threadpool(self.store.schema_by_id, sid) is None:
            raise RegistryError(404, 40403, f"Schema {sid} not found")
        return _json([{"subject": s, "version": v} for s, v in uses])

    async def get_config(self, request: Request) -> Response:
        subject = request.path_params.get("subject", GLOBAL)
        level = await run_in_threadpool(self.store.get_config, subject)
        if subject == GLOBAL:
            return _json({"compatibilityLevel": level or "BACKWARD"})
        if level is None:
            if not _flag(request, "defaultToGlobal"):
                raise RegistryError(
                    404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            level = await run_in_threadpool(self.store.effective_config, subject)
        return _json({"compatibilityLevel": level})

    async def put_config(self, request: Request) -> Response:
        subject = request.path_params.get("subject", GLOBAL)
        body = await self._body(request)
        level = str(body.get("compatibility") or body.get("compatibilityLevel") or "").upper()
        if level not in LEVELS:
            raise RegistryError(
                422,
                42203,
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive",
            )
        await run_in_threadpool(self.store.set_config, subject, level)
        return _json({"compatibility": level})

    async def delete_config(self, request: Request) -> Response:
        subject = request.path_params.get("subject", GLOBAL)
        old = await run_in_threadpool(self.store.delete_config, subject)
        if old is None and subject != GLOBAL:
            raise _subject_not_found(subject)
        return _json({"compatibilityLevel": old or "BACKWARD"})

    async def _compat(self, request: Request, version: str | None) -> Response:
        subject = request.path_params["subject"]
        _, _, parsed = self._schema_from_body(await self._body(request))

        def work() -> list[str]:
            level = self.store.effective_config(subject)
            if version is None:
                live = self.store.versions(subject)
                previous = [(v.version, self._parsed_schema(v.schema_id, v.text)) for v in live]
                problems = incompatibilities(parsed, previous, level)
            else:
                v = self._find_version(subject, version)
                # one given version: the level's direction, without the transitive part
                problems = incompatibilities(
                    parsed,
                    [(v.version, self._parsed_schema(v.schema_id, v.text))],
                    level.removesuffix("_TRANSITIVE"),
                )
            return [p.render() for p in problems]

        messages = await run_in_threadpool(work)
        body: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            body["messages"] = messages
        return _json(body)

    async def test_compat(self, request: Request) -> Response:
        return await self._compat(request, request.path_params["version"])

    async def test_compat_all(self, request: Request) -> Response:
        return await self._compat(request, None)


def create_app(meta_uri: str) -> Starlette:
    """The ASGI app of a registry stored at ``meta_uri``."""
    return SchemaRegistryApp(RegistryStore(meta_uri)).app


def serve(host: str, port: int, meta_uri: str, log_level: str = "info") -> None:
    """Run the registry in the foreground until interrupted."""
    import uvicorn

    store = RegistryStore(meta_uri)
    try:
        uvicorn.run(SchemaRegistryApp(store).app, host=host, port=port, log_level=log_level, access_log=False)
    finally:
        store.close()
