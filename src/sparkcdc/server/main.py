"""Run a sparkcdc server: the ``/api/v2`` HTTP API plus the changefeed scheduler."""

from __future__ import annotations

import errno
import logging
import math
import os
import signal
import socket
import tempfile
import uuid
from dataclasses import dataclass, field

from sparkcdc.capture.relay import RELAY_MAX_BYTES
from sparkcdc.config.uri import redact_uri
from sparkcdc.errors import ConfigError
from sparkcdc.meta import MetaStore
from sparkcdc.metrics import ChangefeedMetrics, RelayCollector
from sparkcdc.pipeline.restart import DEFAULT_ERROR_STUCK_SECONDS, check_error_stuck_seconds
from sparkcdc.server.app import ServerState, create_app
from sparkcdc.server.history import ChangefeedHistory
from sparkcdc.server.runner import (
    ChangefeedRunner,
    SparkChangefeedRunner,
    check_spark_master,
    default_server_master,
    probe_spark_master,
)
from sparkcdc.server.scheduler import Scheduler
from sparkcdc.server.service import ChangefeedService

log = logging.getLogger(__name__)


@dataclass
class ServerOptions:
    """The ``sparkcdc server`` flags."""

    listen: str = "127.0.0.1:8300"
    meta_uri: str = ""
    spark_master: str = field(default_factory=default_server_master)
    spark_conf: dict[str, str] = field(default_factory=dict)
    auth_token: str | None = None
    lease_seconds: float = 10.0
    data_dir: str | None = None
    advertise_addr: str | None = None
    max_changefeeds: int | None = None
    error_stuck_seconds: float = DEFAULT_ERROR_STUCK_SECONDS
    """How long a changefeed may keep failing with passing errors, without progress, before it is failed."""
    debug: bool = False
    """Log the traceback of unexpected errors (``sparkcdc --debug server``)."""
    binlog_relay_mb: int = RELAY_MAX_BYTES >> 20
    """The binlog relay's bound per upstream (``capture/relay.py``; local Spark masters only); 0: none."""


def parse_listen(listen: str, flag: str = "--listen") -> tuple[str, int]:
    """``host:port`` → (host, port); the port from 1 to 65535."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host.strip("[]"):
        raise ConfigError(f"invalid {flag} {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8300")
    if not 0 < int(port) < 65536:
        raise ConfigError(f"invalid {flag} {listen!r}: the port {port} is out of range; use 1 to 65535")
    return host.strip("[]"), int(port)


def bind_listen(host: str, port: int, listen: str) -> socket.socket:
    """The listening socket for ``--listen``, or a ConfigError saying why it cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(
            f"invalid --listen {listen!r}: cannot resolve the host {host!r} ({exc}); "
            "give an address of this machine, e.g. 127.0.0.1:8300 or 0.0.0.0:8300"
        ) from None
    family, kind, proto, _name, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        fix = {
            errno.EADDRINUSE: "another process listens there: stop it or choose another port",
            errno.EADDRNOTAVAIL: "it is not an address of this machine: use one of its addresses or 0.0.0.0",
            errno.EACCES: "ports below 1024 need privileges: choose a port from 1024 up",
        }.get(exc.errno or 0, "choose another HOST:PORT")
        raise ConfigError(f"cannot listen on {listen!r} ({exc.strerror}): {fix}") from None
    return sock


def check_options(opts: ServerOptions) -> tuple[str, int]:
    """Refuse bad flags before anything starts; returns the listen host and port."""
    host, port = parse_listen(opts.listen)
    if opts.advertise_addr is not None:
        parse_listen(opts.advertise_addr, "--advertise-addr")
    if not opts.meta_uri:
        raise ConfigError("missing --meta-uri: e.g. sqlite:////var/lib/sparkcdc/meta.db or postgresql://...")
    if not math.isfinite(opts.lease_seconds) or opts.lease_seconds < 1:
        raise ConfigError(
            f"invalid --lease-seconds {opts.lease_seconds}: must be a number of seconds, at least 1"
        )
    check_error_stuck_seconds(opts.error_stuck_seconds)
    if opts.auth_token is not None and not opts.auth_token.strip():
        raise ConfigError("--auth-token is empty: give a token or leave the flag out")
    if opts.binlog_relay_mb < 0:
        raise ConfigError(
            f"invalid --binlog-relay-mb {opts.binlog_relay_mb}: give 0 (no relay) or more MB of binlog to keep"
        )
    if opts.max_changefeeds is not None and opts.max_changefeeds < 0:
        raise ConfigError(
            f"invalid --max-changefeeds {opts.max_changefeeds}: give 0 (serve the API only) or more"
        )
    check_spark_master(opts.spark_master)
    return host, port


def run_server(opts: ServerOptions, runner: ChangefeedRunner | None = None) -> int:
    """Serve until SIGINT/SIGTERM, then stop the changefeeds and release their leases."""
    import uvicorn

    host, port = check_options(opts)
    advertise = opts.advertise_addr or (
        f"{socket.gethostname()}:{port}" if host in ("0.0.0.0", "::") else opts.listen
    )
    server_id = str(uuid.uuid4())
    from sparkcdc.pipeline.state import SPARK_CHECKPOINT_ROOT_CONF, StateDir

    sock = bind_listen(host, port, opts.listen)
    try:
        if opts.data_dir:
            StateDir.parse(opts.data_dir).check()  # a file, an unwritable folder, a bad URL: refused first
        store = MetaStore.open(opts.meta_uri)
        # By default a folder of the meta database's own: servers of other meta databases on this host
        # never share (nor adopt) a changefeed's state.
        data_dir = opts.data_dir or os.path.join(tempfile.gettempdir(), "sparkcdc-data", store.identity())
        StateDir.parse(data_dir).check()
    except BaseException:
        sock.close()
        raise
    if runner is None and (why := probe_spark_master(opts.spark_master)) is not None:
        # Not refused (the master may come up later); changefeeds show it as their warning meanwhile.
        log.warning(
            "the Spark master %s is unreachable (%s): changefeeds wait for it", opts.spark_master, why
        )
    metrics = ChangefeedMetrics()
    history = ChangefeedHistory(store, metrics, debug=opts.debug)
    runner = runner or SparkChangefeedRunner(
        opts.spark_master,
        f"sparkcdc-server-{server_id[:8]}",
        opts.spark_conf,
        relay_max_bytes=opts.binlog_relay_mb << 20,
    )
    relays = getattr(runner, "relays", None)
    if relays is not None:
        metrics.registry.register(RelayCollector(relays.status))
    scheduler = Scheduler(
        store,
        runner,
        server_id=server_id,
        address=advertise,
        data_dir=data_dir,
        lease_seconds=opts.lease_seconds,
        max_changefeeds=opts.max_changefeeds,
        error_stuck_seconds=opts.error_stuck_seconds,
        spark_checkpoint_root=opts.spark_conf.get(SPARK_CHECKPOINT_ROOT_CONF),
        metrics=metrics,
        debug=opts.debug,
    )
    state = ServerState(
        store=store,
        service=ChangefeedService(store),
        server_id=server_id,
        address=advertise,
        lease_seconds=opts.lease_seconds,
        auth_token=opts.auth_token,
        scheduler=scheduler,
        metrics=metrics,
        history=history,
        debug=opts.debug,
    )
    app = create_app(state)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    log.info(
        "sparkcdc server %s listening on %s (meta %s, data dir %s, lease %.0fs, spark %s, auth %s)",
        server_id,
        opts.listen,
        redact_uri(opts.meta_uri),
        StateDir.parse(data_dir).display,
        opts.lease_seconds,
        opts.spark_master,
        "on" if opts.auth_token else "off",
    )
    stop_signals: list[int] = []

    def note_signal(sig: int, _frame: object) -> None:
        # uvicorn handles SIGINT/SIGTERM while it serves, then re-raises them: they land
        # here instead of killing the process before the changefeeds are released.
        stop_signals.append(sig)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, note_signal)
    scheduler.start()
    history.start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        log.info("sparkcdc server %s stopping: releasing its changefeeds", server_id)
        history.stop()
        scheduler.shutdown()
        store.close()
    return 0 if server.started else 1
