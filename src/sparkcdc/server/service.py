"""The changefeed verbs behind the API: validate, store, and shape the answers (secrets redacted)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from sparkcdc import __version__
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import (
    ChangefeedExists,
    ChangefeedNotFound,
    ChangefeedStateError,
    ConfigError,
    ConflictError,
    SinkURIError,
    SparkCdcError,
)
from sparkcdc.filter import TableFilter
from sparkcdc.meta import ChangefeedInfo, ChangefeedState, MetaStore, NewChangefeed
from sparkcdc.meta.migrations import subscribed_of
from sparkcdc.model.ts import physical_ms
from sparkcdc.pipeline.request import check_target_after_start, commit_ts
from sparkcdc.pipeline.state import UpstreamIdentity, follow_upstream
from sparkcdc.server.redact import redact_config, scrub

CHANGEFEED_ID_RE = re.compile(r"^[a-zA-Z0-9]+(\-[a-zA-Z0-9]+)*$")
MAX_ID_LENGTH = 128
CAS_RETRIES = 20
REMOVE_WAIT_S = 45.0
"""How long a remove waits for the owner to stop the changefeed (the client waits 60 s for an answer)."""
REMOVE_POLL_S = 0.2
"""How often a remove reads whether the owner let the changefeed go."""

SinkValidator = Callable[[str, ReplicaConfig, str], None]
UpstreamProbe = Callable[[str, int | None, Callable[[str, str], bool] | None], int]
"""(upstream URI, start-ts, the changefeed's table filter) -> the start-ts; raises when the upstream is unfit."""


def short_repr(value: Any, limit: int = 40) -> str:
    """``repr(value)``, cut to about ``limit`` characters (a bad value is named, not echoed whole)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]} ({len(str(value))} characters)"


def invalid_param(message: str) -> ConfigError:
    """A 400 for a malformed request parameter."""
    return ConfigError(message, code="CDC:ErrAPIInvalidParam")


def validate_changefeed_id(value: Any) -> str:
    """TiCDC's id rule: letters and digits in groups joined by single dashes."""
    if not isinstance(value, str) or not CHANGEFEED_ID_RE.match(value) or len(value) > MAX_ID_LENGTH:
        raise ConfigError(
            f"invalid changefeed id {short_repr(value)}: use letters, digits and single dashes between them "
            f"(matching ^[a-zA-Z0-9]+(\\-[a-zA-Z0-9]+)*$, at most {MAX_ID_LENGTH} characters), e.g. 'orders-to-kafka'",
            code="CDC:ErrInvalidChangefeedID",
        )
    return value


def validate_namespace(value: Any) -> str:
    """A namespace follows the changefeed id rule."""
    if value is None or value == "":
        return "default"
    if not isinstance(value, str) or not CHANGEFEED_ID_RE.match(value) or len(value) > MAX_ID_LENGTH:
        raise invalid_param(
            f"invalid namespace {short_repr(value)}: use letters, digits and single dashes, e.g. 'default'"
        )
    return value


def validate_upstream_uri(uri: Any) -> str:
    """An upstream is a MySQL-compatible server: ``mysql://user:pass@host:port/``."""
    if not isinstance(uri, str) or not uri:
        raise ConfigError("missing upstream URI: pass --upstream-uri mysql://user:password@host:3306/")
    from sparkcdc.capture.upstream import UpstreamConfig

    UpstreamConfig.from_uri(uri)
    return uri


def _check_strings(body: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Refuse a field that must be a string but holds another JSON type."""
    for key in keys:
        v = body.get(key)
        if v is not None and not isinstance(v, str):
            raise invalid_param(f"invalid {key} {short_repr(v)}: expected a string, got {type(v).__name__}")


def _ts(body: dict[str, Any], key: str) -> int | None:
    """``pipeline.request.commit_ts`` of a body field, refused as a malformed parameter (400)."""
    try:
        return commit_ts(key, body.get(key))
    except ConfigError as err:
        raise invalid_param(err.message) from None


def default_sink_validator(sink_uri: str, config: ReplicaConfig, changefeed_id: str) -> None:
    """Build the sink (which checks the URI and options) and let it reach its destination."""
    from sparkcdc.sink import create_sink

    sink = create_sink(sink_uri, config, changefeed_id)
    try:
        sink.check()
    finally:
        sink.close()


def default_upstream_probe(
    upstream_uri: str, start_ts: int | None, captures: Callable[[str, str], bool] | None = None
) -> int:
    """Check the upstream is fit for CDC; returns ``start_ts``, or "now" as a ts when it is None.

    ``captures``: the changefeed's table filter; a sequence or system-versioned table it captures is refused.
    """
    from sparkcdc.capture.start import query_tso
    from sparkcdc.capture.upstream import UpstreamConfig, check_upstream

    up = UpstreamConfig.from_uri(upstream_uri)
    check_upstream(up, captures=captures)
    return start_ts if start_ts is not None else query_tso(up)


def default_upstream_identity(upstream_uri: str) -> dict[str, Any]:
    """Which server the upstream is (``UpstreamIdentity``): the changefeed's offsets belong to it."""
    from sparkcdc.capture.upstream import UpstreamConfig

    return UpstreamIdentity.query(UpstreamConfig.from_uri(upstream_uri)).to_json()


def subscription_rule(database: str, table: str) -> str:
    """A table-filter rule selecting exactly one table (quoted, so any name is literal)."""
    return "`" + database.replace("`", "``") + "`.`" + table.replace("`", "``") + "`"


def ts_time(ts: int) -> str:
    """TiCDC's ``checkpoint_time`` format (UTC)."""
    ms = physical_ms(ts)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class ChangefeedService:
    """create/update/pause/resume/remove with validation, on top of the meta store."""

    def __init__(
        self,
        store: MetaStore,
        sink_validator: SinkValidator = default_sink_validator,
        upstream_probe: UpstreamProbe = default_upstream_probe,
        upstream_identity: Callable[[str], dict[str, Any]] = default_upstream_identity,
    ) -> None:
        self.store = store
        self.sink_validator = sink_validator
        self.upstream_probe = upstream_probe
        self.upstream_identity = upstream_identity

    # ------------------------------------------------------------------ validation

    def build_config(self, raw: Any, sink_uri: str, changefeed_id: str, upstream_uri: str) -> ReplicaConfig:
        """Check a replica config and its sink together; returns the typed config."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise invalid_param(f"replica_config must be an object, got {type(raw).__name__}")
        validate_upstream_uri(upstream_uri)
        if not isinstance(sink_uri, str) or not sink_uri:
            raise SinkURIError("missing sink URI: pass --sink-uri, e.g. file:///data/cdc?protocol=canal-json")
        try:
            config = ReplicaConfig.from_dict(raw)
            TableFilter.changefeed_filter(config.filter.rules, config.case_sensitive)
            self.sink_validator(sink_uri, config, changefeed_id)
        except SparkCdcError as err:
            # A sink's message may quote its URI: never echo a password back.
            clean = scrub(err.message, [sink_uri, upstream_uri]) or ""
            if clean == err.message:
                raise
            raise type(err)(clean, code=err.code) from None
        return config

    # ------------------------------------------------------------------ verbs

    def create(self, body: dict[str, Any]) -> ChangefeedInfo:
        """POST /changefeeds: validate everything, then store the changefeed in state normal."""
        known = {
            "namespace",
            "changefeed_id",
            "start_ts",
            "target_ts",
            "sink_uri",
            "upstream_uri",
            "replica_config",
            "subscriber_name",
            "database",
            "table",
        }
        unknown = sorted(set(body) - known)
        if unknown:
            raise invalid_param(f"unknown field(s) {unknown} in the request; allowed: {sorted(known)}")
        _check_strings(body, ("namespace", "changefeed_id", "sink_uri", "upstream_uri", "database", "table"))
        namespace = validate_namespace(body.get("namespace"))
        cf_id = body.get("changefeed_id") or str(uuid.uuid4())
        validate_changefeed_id(cf_id)
        start_ts, target_ts = _ts(body, "start_ts"), _ts(body, "target_ts")
        check_target_after_start(start_ts, target_ts)
        subscriber = body.get("subscriber_name")
        if subscriber is not None and (not isinstance(subscriber, str) or not subscriber.strip()):
            raise invalid_param(f"invalid subscriber_name {subscriber!r}: a non-empty name")
        raw_config = body.get("replica_config")
        raw_config = {} if raw_config is None else raw_config
        if not isinstance(raw_config, dict):
            raise invalid_param(f"replica_config must be an object, got {type(raw_config).__name__}")
        database, table = body.get("database"), body.get("table")
        subscribed: tuple[str, str] | None = None
        if database is not None or table is not None:
            raw_config = self._subscription_config(raw_config, database, table)
            subscribed = (str(database), str(table))
        self._refuse_taken(namespace, cf_id, subscriber, subscribed)
        upstream_uri = body.get("upstream_uri")
        sink_uri = body.get("sink_uri")
        config = self.build_config(raw_config, sink_uri, cf_id, upstream_uri)  # type: ignore[arg-type]
        # Like TiCDC, a changefeed without --start-ts starts "now": fixed here, so a restart
        # before the first checkpoint cannot skip what was committed meanwhile.
        captures = TableFilter.changefeed_filter(config.filter.rules, config.case_sensitive).match
        given_start = start_ts
        start_ts = self._probe(upstream_uri, start_ts, captures)  # type: ignore[arg-type]
        check_target_after_start(start_ts, target_ts, start_is_now=given_start is None)
        return self.store.create_changefeed(
            NewChangefeed(
                id=cf_id,
                namespace=namespace,
                upstream_uri=upstream_uri,  # type: ignore[arg-type]
                sink_uri=sink_uri,  # type: ignore[arg-type]
                config=config.to_dict(),
                start_ts=start_ts,
                target_ts=target_ts,
                subscriber_name=subscriber,
                subscribed_table=subscribed,
                upstream=self.upstream_identity(upstream_uri),  # type: ignore[arg-type]
            )
        )

    def _refuse_taken(
        self, namespace: str, cf_id: str, subscriber: str | None, subscribed: tuple[str, str] | None
    ) -> None:
        # Cheap early answers before reaching the sink and the upstream; the insert re-checks atomically.
        try:
            cf = self.store.get_changefeed(cf_id, namespace)
        except ChangefeedNotFound:
            pass
        else:
            raise ChangefeedExists(
                f"changefeed {cf_id!r} already exists in namespace {namespace!r} (state {cf.state}); "
                "choose another --changefeed-id or remove it first"
            )
        if subscriber is not None:
            # Seed 003's subscribe key: a name is taken per (namespace, database, table).
            for cf in self.store.list_changefeeds(namespace=namespace):
                if cf.subscriber_name == subscriber and subscribed_of(cf.config) == (subscribed or ("", "")):
                    raise ChangefeedExists(
                        f"subscriber {subscriber!r} already has changefeed {cf.id!r} (namespace {cf.namespace!r}); "
                        "use another subscriber name or remove that changefeed"
                    )

    def _probe(
        self, upstream_uri: str, start_ts: int | None, captures: Callable[[str, str], bool] | None = None
    ) -> int:
        try:
            return self.upstream_probe(upstream_uri, start_ts, captures)
        except SparkCdcError as err:
            clean = scrub(err.message, [upstream_uri]) or ""
            if clean == err.message:
                raise
            raise type(err)(clean, code=err.code) from None

    def _subscription_config(self, raw: dict[str, Any], database: Any, table: Any) -> dict[str, Any]:
        for name, v in (("database", database), ("table", table)):
            if not isinstance(v, str) or not v:
                raise invalid_param(
                    f"a subscription needs both database and table; {name} is {v!r} "
                    "(pass --database DB --table TABLE)"
                )
        filt = raw.get("filter") or {}
        if not isinstance(filt, dict):
            raise invalid_param("replica_config.filter must be an object")
        rules = filt.get("rules")
        if rules not in (None, ["*.*"]):
            raise ConfigError(
                f"--database/--table select the subscribed table, but the config also sets filter.rules={rules!r}; "
                "use one or the other"
            )
        return {**raw, "filter": {**filt, "rules": [subscription_rule(database, table)]}}

    def update(self, changefeed_id: str, namespace: str, body: dict[str, Any]) -> ChangefeedInfo:
        """PUT /changefeeds/{id}: change sink, upstream, target-ts or config; only while stopped or failed."""
        known = {"sink_uri", "upstream_uri", "target_ts", "replica_config"}
        unknown = sorted(set(body) - known)
        if unknown:
            raise invalid_param(f"unknown field(s) {unknown} in the update; allowed: {sorted(known)}")
        _check_strings(body, ("sink_uri", "upstream_uri"))
        if not set(body) & known:
            raise invalid_param(
                "nothing to update: give at least one of sink_uri, upstream_uri, target_ts, replica_config"
            )
        for _ in range(CAS_RETRIES):
            cf = self.store.get_changefeed(changefeed_id, namespace)
            if cf.state not in (ChangefeedState.STOPPED, ChangefeedState.FAILED):
                raise ChangefeedStateError(
                    f"changefeed {changefeed_id!r} is {cf.state}; update works only when it is stopped or failed: "
                    "pause it first (`sparkcdc cli changefeed pause -c ID`)"
                )
            sink_uri = body.get("sink_uri") or cf.sink_uri
            upstream_uri = body.get("upstream_uri") or cf.upstream_uri
            upstream = cf.upstream
            if body.get("upstream_uri"):
                self._probe(upstream_uri, cf.checkpoint_ts or None)
                # The same server at another address (or with other credentials): its offsets still hold.
                upstream = self.upstream_identity(upstream_uri)
                follow_upstream(
                    cf.upstream,
                    UpstreamIdentity.from_json(upstream),
                    cf.id,
                    "recorded in the meta database",
                    "give the address of that server, or create a new changefeed with a start-ts for this one",
                )
            raw = body.get("replica_config")
            raw_config = cf.config if raw is None else raw
            target_ts = _ts(body, "target_ts") if "target_ts" in body else cf.target_ts
            floor = max(cf.checkpoint_ts, cf.start_ts or 0)
            if target_ts is not None and target_ts <= floor:
                raise ConfigError(
                    f"the target-ts {target_ts} is not after the changefeed's checkpoint-ts {floor}; "
                    "choose a larger target-ts (or 0 for none)",
                    code="CDC:ErrTargetTsBeforeStartTs",
                )
            if isinstance(raw, dict) and cf.subscriber_name and "filter" not in raw:
                # Keep the subscribed table when the new config does not say otherwise.
                raw_config = {**raw, "filter": cf.config.get("filter", {})}
            config = self.build_config(raw_config, sink_uri, cf.id, upstream_uri)
            try:
                return self.store.update_changefeed(
                    cf,
                    sink_uri=sink_uri,
                    upstream_uri=upstream_uri,
                    upstream=upstream,
                    target_ts=target_ts,
                    config=config.to_dict(),
                )
            except ConflictError:
                continue
        raise ConflictError(f"changefeed {changefeed_id!r} keeps changing; retry the update")

    def pause(self, changefeed_id: str, namespace: str) -> ChangefeedInfo:
        """POST pause: normal or failed → stopped (the owner then stops and releases it)."""
        return self._transition(changefeed_id, namespace, self._pause_values)

    def _pause_values(self, cf: ChangefeedInfo) -> dict[str, Any] | None:
        if cf.state == ChangefeedState.STOPPED:
            return None
        if cf.state in (ChangefeedState.NORMAL, ChangefeedState.FAILED):
            return {"state": ChangefeedState.STOPPED}
        raise ChangefeedStateError(
            f"changefeed {cf.id!r} is {cf.state} and cannot be paused; only a normal or failed changefeed can"
        )

    def resume(
        self, changefeed_id: str, namespace: str, overwrite_checkpoint_ts: int | None = None
    ) -> ChangefeedInfo:
        """POST resume: stopped or failed → normal, optionally from another checkpoint."""
        if overwrite_checkpoint_ts is not None and (
            isinstance(overwrite_checkpoint_ts, bool)
            or not isinstance(overwrite_checkpoint_ts, int)
            or overwrite_checkpoint_ts <= 0
        ):
            raise invalid_param(
                f"invalid overwrite_checkpoint_ts {overwrite_checkpoint_ts!r}: expected a positive integer commit ts"
            )

        def values(cf: ChangefeedInfo) -> dict[str, Any] | None:
            if cf.state == ChangefeedState.NORMAL and overwrite_checkpoint_ts is None:
                return None
            if cf.state not in (ChangefeedState.STOPPED, ChangefeedState.FAILED):
                raise ChangefeedStateError(
                    f"changefeed {cf.id!r} is {cf.state}; only a stopped or failed changefeed can be resumed"
                    + (" with a new checkpoint: pause it first" if cf.state == ChangefeedState.NORMAL else "")
                )
            out: dict[str, Any] = {"state": ChangefeedState.NORMAL, "error": None, "warning": None}
            if overwrite_checkpoint_ts is not None:
                if cf.target_ts and overwrite_checkpoint_ts >= cf.target_ts:
                    raise ConfigError(
                        f"overwrite-checkpoint-ts {overwrite_checkpoint_ts} is not before the target-ts "
                        f"{cf.target_ts}; choose an earlier ts or update the target-ts",
                        code="CDC:ErrTargetTsBeforeStartTs",
                    )
                if cf.lease_valid(self.store.now()):
                    raise ChangefeedStateError(
                        f"changefeed {cf.id!r} is still being stopped by server {cf.owner}; "
                        "retry the resume in a few seconds"
                    )
                out.update(checkpoint_ts=overwrite_checkpoint_ts, resolved_ts=overwrite_checkpoint_ts)
                # The next claim starts at the new ts, not after the last committed batch's offset.
                out["stats"] = {k: v for k, v in (cf.stats or {}).items() if k != "checkpoint_end"}
            return out

        return self._transition(
            changefeed_id, namespace, values, overwrite=overwrite_checkpoint_ts is not None
        )

    def remove(self, changefeed_id: str, namespace: str, wait_s: float = REMOVE_WAIT_S) -> ChangefeedInfo:
        """DELETE: any state → removed (a tombstone), answered once no server runs the changefeed.

        The owner stops a removed changefeed on its next tick and releases it; until then its
        sink can still receive rows. So the call waits, as TiCDC's DELETE does, until no lease
        is held (released, or its owner's lease ran out): a row written after it returns is in
        no removed changefeed's sink. A tombstone whose owner is still stopping it may be removed
        again, which waits again; one already released is gone (404).
        """

        def values(cf: ChangefeedInfo) -> dict[str, Any] | None:
            return {"state": ChangefeedState.REMOVED, "subscriber_name": None}

        cf = self.store.get_changefeed(changefeed_id, namespace, include_removed=True)
        if cf.state != ChangefeedState.REMOVED or not cf.lease_valid(self.store.now()):
            cf = self._transition(changefeed_id, namespace, values)
        deadline = time.monotonic() + wait_s
        while cf.lease_valid(self.store.now()):
            if time.monotonic() >= deadline:
                raise ChangefeedStateError(
                    f"changefeed {cf.id!r} is removed, but server {cf.owner} has not stopped it within "
                    f"{wait_s:.0f} s (its lease runs until it does, or until the server is gone); "
                    "remove it again to wait again",
                    code="CDC:ErrChangeFeedDeletionUnfinished",
                )
            time.sleep(REMOVE_POLL_S)
            try:
                now = self.store.get_changefeed(changefeed_id, namespace, include_removed=True)
            except ChangefeedNotFound:
                break  # the tombstone is gone too
            if now.uid != cf.uid:
                break  # a new changefeed took the id: the removed one was released first
            cf = now
        return cf

    def _transition(
        self,
        changefeed_id: str,
        namespace: str,
        values_of: Callable[[ChangefeedInfo], dict[str, Any] | None],
        overwrite: bool = False,
    ) -> ChangefeedInfo:
        for _ in range(CAS_RETRIES):
            cf = self.store.get_changefeed(changefeed_id, namespace)
            values = values_of(cf)
            if values is None:
                return cf
            try:
                return self.store.update_changefeed(cf, overwrite_checkpoint=overwrite, **values)
            except ConflictError:
                continue  # the owner renewed its lease meanwhile; read again
        raise ConflictError(f"changefeed {changefeed_id!r} keeps changing; retry")

    # ------------------------------------------------------------------ views

    @staticmethod
    def _secrets(cf: ChangefeedInfo) -> list[str]:
        return [cf.sink_uri, cf.upstream_uri]

    def detail(self, cf: ChangefeedInfo) -> dict[str, Any]:
        """GET /changefeeds/{id}: TiCDC's ChangeFeedInfo shape (plus owner, warning, subscriber, stats)."""
        return {
            "namespace": cf.namespace,
            "id": cf.id,
            "upstream_uri": redact_uri(cf.upstream_uri),
            "sink_uri": redact_uri(cf.sink_uri),
            "create_time": _iso(cf.created_at),
            "update_time": _iso(cf.updated_at),
            "start_ts": cf.start_ts or 0,
            "target_ts": cf.target_ts or 0,
            "config": redact_config(cf.config),
            "state": cf.state.value,
            "error": self._error(cf),
            "warning": scrub(cf.warning, self._secrets(cf)),
            "creator_version": __version__,
            "resolved_ts": cf.resolved_ts,
            "checkpoint_ts": cf.checkpoint_ts,
            "checkpoint_time": ts_time(cf.checkpoint_ts),
            "owner": cf.owner,
            "epoch": cf.epoch,
            "subscriber_name": cf.subscriber_name,
            "stats": cf.stats,
        }

    def summary(self, cf: ChangefeedInfo) -> dict[str, Any]:
        """One item of GET /changefeeds (TiCDC's ChangefeedCommonInfo)."""
        return {
            "namespace": cf.namespace,
            "id": cf.id,
            "state": cf.state.value,
            "checkpoint_tso": cf.checkpoint_ts,
            "checkpoint_time": ts_time(cf.checkpoint_ts),
            "error": self._error(cf),
            "warning": scrub(cf.warning, self._secrets(cf)),
            "owner": cf.owner,
            "subscriber_name": cf.subscriber_name,
            "sink_uri": redact_uri(cf.sink_uri),
            "stats": cf.stats,
        }

    def status(self, cf: ChangefeedInfo) -> dict[str, Any]:
        """GET /changefeeds/{id}/status."""
        return {
            "state": cf.state.value,
            "resolved_ts": cf.resolved_ts,
            "checkpoint_ts": cf.checkpoint_ts,
            "checkpoint_time": ts_time(cf.checkpoint_ts),
            "last_error": self._error(cf),
            "last_warning": scrub(cf.warning, self._secrets(cf)),
            "owner": cf.owner,
            "stats": cf.stats,
        }

    def snapshot(self, cf: ChangefeedInfo) -> dict[str, Any]:
        """GET /changefeeds/{id}/snapshot: the initial snapshot's key ranges by table, with their progress."""
        from sparkcdc.pipeline.snapshot.plan import STAGE_DONE, STAGE_SPLIT, range_states

        tables: dict[tuple[str, str], dict[str, Any]] = {}
        for st in range_states(self.store.get_range_progress(cf.id, cf.namespace)):
            if st.stage == STAGE_SPLIT:
                continue  # its key space lives on in the ranges split from it
            t = tables.setdefault(
                (st.schema, st.table),
                {"schema": st.schema, "table": st.table, "rows_copied": 0, "estimated_rows": 0, "ranges": []},
            )
            t["ranges"].append(
                {
                    "range_id": st.range_id,
                    "stage": st.stage,
                    "done": st.stage == STAGE_DONE,
                    "rows_copied": st.rows_copied,
                    "estimated_rows": st.estimated_rows,
                    "attempts": st.attempts,
                }
            )
        items = []
        for t in tables.values():
            ranges = t["ranges"]
            t["rows_copied"] = sum(r["rows_copied"] for r in ranges)
            t["estimated_rows"] = sum(r["estimated_rows"] for r in ranges)
            t["ranges_done"] = sum(1 for r in ranges if r["done"])
            t["ranges_total"] = len(ranges)
            items.append(t)
        return {"total": len(items), "items": items}

    def _error(self, cf: ChangefeedInfo) -> dict[str, Any] | None:
        if not cf.error:
            return None
        err = dict(cf.error)
        if isinstance(err.get("message"), str):
            err["message"] = scrub(err["message"], self._secrets(cf))
        return err
