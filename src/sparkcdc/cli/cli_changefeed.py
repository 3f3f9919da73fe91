"""``sparkcdc cli changefeed create|list|query|pause|resume|update|remove|statistics`` (TiCDC's verbs)."""

from __future__ import annotations

import argparse
import os
import tomllib
import uuid
from pathlib import Path
from typing import Any

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.request import check_target_after_start
from sparkcdc.server.render import add_client_args, client_of, emit
from sparkcdc.server.service import validate_changefeed_id, validate_namespace

LIST_COLUMNS = [
    "id",
    "namespace",
    "state",
    "checkpoint_tso",
    "checkpoint_time",
    "owner",
    "subscriber_name",
    "error",
]


def _read_config(path: str) -> dict[str, Any]:
    """The TOML file as a dict, checked locally first so mistakes show before any request."""
    ReplicaConfig.from_file(path)
    return tomllib.loads(Path(path).read_text())


def _ts_arg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a commit ts (a non-negative integer)") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; a commit ts is a non-negative integer")
    return v


def _checked(func: Any) -> Any:
    """``func`` after the id and namespace flags are checked here, before any request is sent."""

    def run(args: argparse.Namespace) -> int:
        if getattr(args, "changefeed_id", None) is not None:
            validate_changefeed_id(args.changefeed_id)
        if args.namespace is not None:
            validate_namespace(args.namespace)
        rc: int = func(args)
        return rc

    return run


def cmd_create(args: argparse.Namespace) -> int:
    """Create a changefeed (or a subscription of one table with --subscriber/--database/--table)."""
    cf_id = args.changefeed_id or str(uuid.uuid4())
    validate_changefeed_id(cf_id)
    check_target_after_start(args.start_ts or None, args.target_ts or None)  # as the server's create
    if (args.database is None) != (args.table is None):
        raise ConfigError("--database and --table go together: a subscription selects exactly one table")
    config = _read_config(args.config) if args.config else {}
    if args.schema_registry:
        config.setdefault("sink", {})["schema-registry"] = args.schema_registry
    if not args.upstream_uri:
        raise ConfigError(
            "missing --upstream-uri (or env SPARKCDC_UPSTREAM_URI), e.g. mysql://user:pass@host:3306/"
        )
    body: dict[str, Any] = {
        "namespace": args.namespace,
        "changefeed_id": cf_id,
        "sink_uri": args.sink_uri,
        "upstream_uri": args.upstream_uri,
        "replica_config": config,
    }
    for key in ("start_ts", "target_ts"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if args.subscriber:
        body["subscriber_name"] = args.subscriber
    if args.database is not None:
        body["database"], body["table"] = args.database, args.table
    with client_of(args) as client:
        emit(client.create_changefeed(body), args.output)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """List changefeeds (removed ones too with --all)."""
    with client_of(args) as client:
        data = client.list_changefeeds(args.namespace, all=args.all)
    emit(data["items"], args.output, LIST_COLUMNS)
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    """Show one changefeed (-s: only its state and checkpoint)."""
    with client_of(args) as client:
        info = client.get_changefeed(args.changefeed_id, args.namespace)
    if args.simple:
        keys = ("namespace", "id", "state", "checkpoint_ts", "checkpoint_time", "error", "warning")
        info = {k: info.get(k) for k in keys}
        info["checkpoint_tso"] = info.pop("checkpoint_ts")
    emit(info, args.output)
    return 0


def cmd_statistics(args: argparse.Namespace) -> int:
    """Show a changefeed's progress figures (checkpoint, rows, lag)."""
    with client_of(args) as client:
        st = client.changefeed_status(args.changefeed_id, args.namespace)
    out = {
        "state": st["state"],
        "checkpoint_ts": st["checkpoint_ts"],
        "resolved_ts": st["resolved_ts"],
        "checkpoint_time": st["checkpoint_time"],
        **(st.get("stats") or {}),
    }
    emit(out, args.output)
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    """Pause a changefeed (state stopped)."""
    with client_of(args) as client:
        client.pause(args.changefeed_id, args.namespace)
        emit(client.changefeed_status(args.changefeed_id, args.namespace), args.output)
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    """Resume a stopped or failed changefeed, optionally from --overwrite-checkpoint-ts."""
    with client_of(args) as client:
        client.resume(args.changefeed_id, args.overwrite_checkpoint_ts or None, args.namespace)
        emit(client.changefeed_status(args.changefeed_id, args.namespace), args.output)
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    """Change a stopped or failed changefeed's sink, upstream, target-ts or config."""
    body: dict[str, Any] = {}
    if args.sink_uri:
        body["sink_uri"] = args.sink_uri
    if args.upstream_uri:
        body["upstream_uri"] = args.upstream_uri
    if args.target_ts is not None:
        body["target_ts"] = args.target_ts
    if args.config:
        body["replica_config"] = _read_config(args.config)
    if args.schema_registry:
        body.setdefault("replica_config", {}).setdefault("sink", {})["schema-registry"] = args.schema_registry
    if not body:
        raise ConfigError("nothing to update: give --sink-uri, --upstream-uri, --target-ts or --config")
    with client_of(args) as client:
        emit(client.update_changefeed(args.changefeed_id, body, args.namespace), args.output)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """Remove a changefeed."""
    with client_of(args) as client:
        client.remove(args.changefeed_id, args.namespace)
    emit({"id": args.changefeed_id, "namespace": args.namespace, "removed": True}, args.output)
    return 0


def register(groups: argparse._SubParsersAction) -> None:
    """Add ``cli changefeed`` and its verbs."""
    p = groups.add_parser("changefeed", help="manage changefeeds")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    def verb(
        name: str, func: Any, help: str, needs_id: bool = True, namespace: str | None = "default"
    ) -> argparse.ArgumentParser:
        v = verbs.add_parser(name, help=help)
        add_client_args(v)
        v.add_argument(
            "-n", "--namespace", default=namespace, help="changefeed namespace (default %(default)s)"
        )
        if needs_id:
            v.add_argument("-c", "--changefeed-id", required=True, help="changefeed id")
        v.set_defaults(func=_checked(func))
        return v

    c = verb("create", cmd_create, "create a changefeed", needs_id=False)
    c.add_argument(
        "-c", "--changefeed-id", default=None, help="id (letters, digits, dashes); a UUID when omitted"
    )
    c.add_argument("--sink-uri", required=True, help="e.g. kafka://host:9092/topic?protocol=canal-json")
    c.add_argument(
        "--upstream-uri",
        default=os.environ.get("SPARKCDC_UPSTREAM_URI"),
        help="the MySQL/MariaDB to capture, mysql://user:pass@host:3306/ (env SPARKCDC_UPSTREAM_URI)",
    )
    c.add_argument("--start-ts", type=_ts_arg, default=0, help="replicate changes committed after this ts")
    c.add_argument(
        "--target-ts", type=_ts_arg, default=0, help="stop (state finished) once this ts is reached"
    )
    c.add_argument("--config", default=None, help="changefeed TOML config file")
    c.add_argument(
        "--schema-registry", default=None, help="Avro schema registry URL (sets sink.schema-registry)"
    )
    c.add_argument("--subscriber", default=None, help="subscriber name: at most one changefeed per name")
    c.add_argument("--database", default=None, help="subscribe to one table: its database")
    c.add_argument("--table", default=None, help="subscribe to one table: its name")

    lst = verb(
        "list", cmd_list, "list changefeeds (of every namespace unless -n)", needs_id=False, namespace=None
    )
    lst.add_argument("-a", "--all", action="store_true", help="include removed changefeeds")

    q = verb("query", cmd_query, "show a changefeed")
    q.add_argument("-s", "--simple", action="store_true", help="only state, checkpoint and error")

    verb("statistics", cmd_statistics, "show a changefeed's progress figures")
    verb("pause", cmd_pause, "pause a changefeed")
    r = verb("resume", cmd_resume, "resume a stopped or failed changefeed")
    r.add_argument("--overwrite-checkpoint-ts", type=_ts_arg, default=0, help="resume from this ts instead")
    r.add_argument(
        "--no-confirm", action="store_true", help="accepted for TiCDC compatibility; never prompts"
    )

    u = verb("update", cmd_update, "update a stopped or failed changefeed")
    u.add_argument("--sink-uri", default=None)
    u.add_argument("--upstream-uri", default=None)
    u.add_argument("--target-ts", type=_ts_arg, default=None, help="new target ts (0 for none)")
    u.add_argument("--config", default=None, help="new changefeed TOML config file")
    u.add_argument("--schema-registry", default=None)

    verb("remove", cmd_remove, "remove a changefeed")
