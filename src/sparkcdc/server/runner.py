"""How the scheduler runs a changefeed: the ``ChangefeedRunner`` protocol and its Spark implementation.

The real runner hands a changefeed to ``sparkcdc.pipeline.changefeed.start_changefeed``
as a streaming query in this server's SparkSession (created on first use).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol

from sparkcdc.capture.relay import RELAY_MAX_BYTES, RelayHub, process_relay_root
from sparkcdc.errors import ConfigError, PermanentError, SparkCdcError, TransientError
from sparkcdc.pipeline.spec import ChangefeedSpec

log = logging.getLogger(__name__)

MASTER_FORMS = (
    "local, local[N], local[*], local[N,M], spark://HOST:PORT[,HOST:PORT...], yarn, k8s://HOST:PORT"
)
"""The ``--spark-master`` forms, as a refusal lists them."""

_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(\s*,\s*[1-9][0-9]*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\]")
_HOST_PORT = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})")
MASTER_PROBE_SECONDS = 3.0
"""How long a start waits for a TCP connection to a standalone master before calling it unreachable."""


def check_spark_master(master: str) -> str:
    """``master`` if it has one of Spark's master URL forms, else a ConfigError listing them."""
    m = master.strip()

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"invalid --spark-master {master!r}: {why}; use one of {MASTER_FORMS}")

    if _LOCAL.fullmatch(m) or _LOCAL_CLUSTER.fullmatch(m) or m == "yarn":
        return m
    if m.startswith("local"):
        raise refuse("a local master takes a positive number of threads (or *), e.g. local[2]")
    if m.startswith("spark://"):
        for hp in m[len("spark://") :].split(","):
            hm = _HOST_PORT.fullmatch(hp.strip())
            if hm is None or not 0 < int(hm.group(2)) < 65536:
                raise refuse(f"{hp!r} is not HOST:PORT with a port from 1 to 65535")
        return m
    if m.startswith("k8s://") and len(m) > len("k8s://"):
        return m
    raise refuse("not a Spark master URL")


def standalone_masters(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a ``spark://`` master (empty for any other form)."""
    if not master.startswith("spark://"):
        return []
    out = []
    for hp in master[len("spark://") :].split(","):
        hm = _HOST_PORT.fullmatch(hp.strip())
        if hm is not None:
            out.append((hm.group(1).strip("[]"), int(hm.group(2))))
    return out


SLOTS_PER_CORE = 4
"""Task slots of a server's default local master per core of its host (see ``server_spark_conf``)."""


def host_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def default_server_master() -> str:
    """``local[SLOTS_PER_CORE x cores]``: the default ``--spark-master`` of a server."""
    return f"local[{SLOTS_PER_CORE * host_cores()}]"


DAEMON_KEY = "spark.python.daemon.module"
WORKER_DAEMON = "sparkcdc.pipeline.worker_daemon"
"""A server's executors' Python daemon (``pipeline/worker_daemon.py``)."""


def server_spark_conf(master: str, conf: dict[str, str]) -> dict[str, str]:
    """The Spark settings of a server's session: ``conf`` (the ``--spark-conf`` flags) over the
    server's own.

    A server runs many changefeeds in one Spark application, and a sink waiting on its downstream
    (an HTTP request, a MySQL lock, a broker) holds its task slots meanwhile. So:
    - the scheduler is FAIR, with one pool per changefeed (``pipeline.spark.use_changefeed_pool``):
      a free slot goes to the changefeed with the fewest running tasks, not to the next task of a
      changefeed that queued a large batch first;
    - under a local master, one changefeed's batch runs at most as many tasks at once as the host
      has cores (``pipeline.spark.CHANGEFEED_TASKS_KEY``): its decoding gains nothing from more,
      and the default master has ``SLOTS_PER_CORE`` slots per core, so it takes
      ``SLOTS_PER_CORE`` changefeeds hanging at once, each with a full batch, to hold every slot
      (a 1-writer sink, HTTP or Kafka, holds one slot: it takes 4 x cores of those);
    - the executors' Python daemon is ``pipeline.worker_daemon``: a worker forked after a quiet
      minute starts with sparkcdc's task modules loaded.
    """
    from sparkcdc.pipeline.spark import CHANGEFEED_TASKS_KEY

    out = {"spark.scheduler.mode": "FAIR", DAEMON_KEY: WORKER_DAEMON}
    if master.strip().startswith("local") and CHANGEFEED_TASKS_KEY not in conf:
        out[CHANGEFEED_TASKS_KEY] = str(host_cores())
    return {**out, **conf}


def probe_spark_master(master: str, timeout: float = MASTER_PROBE_SECONDS) -> str | None:
    """None when a standalone master (any of its hosts) takes TCP connections, else why not."""
    reasons = []
    for host, port in standalone_masters(master):
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return None
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or type(exc).__name__}")
    return "; ".join(reasons) or None


def master_unreachable(
    master: str, why: str, fix: str = "restart the server with --spark-master pointing at a running master"
) -> TransientError:
    """The error a changefeed shows while its Spark master cannot be reached (``fix``: what else to do)."""
    return TransientError(
        f"the Spark master {master} is unreachable ({why}); start it, or {fix}",
        code="CDC:ErrSparkMasterUnreachable",
    )


class ProgressLike(Protocol):
    """What a progress report carries (``sparkcdc.pipeline.changefeed.Progress``)."""

    checkpoint_ts: int
    resolved_ts: int
    rows_total: int
    rows_per_sec: float
    lag_s: float


class RunningHandle(Protocol):
    """A started changefeed (``sparkcdc.pipeline.changefeed.RunningChangefeed``)."""

    def stop(self) -> None:
        """Stop the query and wait for it to end."""

    def is_active(self) -> bool:
        """Whether the query is still running."""

    def exception(self) -> SparkCdcError | None:
        """The error that ended the query, if any."""

    def finished(self) -> bool:
        """Whether the checkpoint reached target_ts and the query ended by itself."""


class ChangefeedRunner(Protocol):
    """Starts changefeeds; the scheduler owns their lifecycle."""

    def start(
        self,
        spec: ChangefeedSpec,
        on_progress: Callable[[ProgressLike], None],
        on_resolved: Callable[[int, dict[str, Any]], None] | None = None,
        on_planned: Callable[[dict[str, Any]], None] | None = None,
    ) -> RunningHandle:
        """Start one changefeed; raises SparkCdcError if it cannot start.

        ``on_resolved``: records a raised chain state in the meta database before the sink
        publishes it; ``on_planned``: records a batch with rows before its writers run
        (``pipeline.changefeed.start_changefeed``).
        """

    def shutdown(self) -> None:
        """Release shared resources (the SparkSession) after every changefeed stopped."""


class SparkChangefeedRunner:
    """Runs each changefeed as a streaming query in one lazily created SparkSession."""

    def __init__(
        self,
        master: str | None = None,
        app_name: str = "sparkcdc-server",
        conf: dict[str, str] | None = None,
        *,
        relay_max_bytes: int = RELAY_MAX_BYTES,
    ) -> None:
        """``relay_max_bytes``: the bound of each upstream's binlog relay (``capture/relay.py``), kept in
        a folder of this process under the temporary directory; with a local master only (a
        cluster's executors on other hosts could not read it). 0: no relay."""
        self.master = master or default_server_master()
        self.app_name = app_name
        self.conf = dict(conf or {})
        self._spark: Any = None
        self._lock = threading.Lock()
        local = self.master.startswith("local")
        self.relays: RelayHub | None = (
            RelayHub(process_relay_root(), max_bytes=relay_max_bytes)
            if local and relay_max_bytes > 0
            else None
        )
        """The server's binlog relays: a changefeed's segment tasks read its upstream's there."""

    def spark(self) -> Any:
        """The SparkSession (with sparkcdc's data source registered), created on first use."""
        with self._lock:
            if self._spark is not None and _stopped(self._spark):
                # Spark ended the application itself (a master that gave up on it): start a new one.
                log.warning("the SparkSession (master %s) was stopped; starting a new one", self.master)
                self._spark = None
            if self._spark is None:
                why = probe_spark_master(self.master)
                if why is not None:
                    raise master_unreachable(self.master, why)
                from sparkcdc.pipeline.spark import get_spark

                log.info("starting SparkSession (master %s)", self.master)
                conf = server_spark_conf(self.master, self.conf)
                if self.master.startswith("local"):
                    # Keep a local driver on the loopback interface (not the host's first address).
                    conf.setdefault("spark.driver.host", "127.0.0.1")
                    conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
                try:
                    self._spark = get_spark(self.master, self.app_name, conf)
                except Exception as exc:
                    # A context the master gave up on stays registered and fails every later
                    # start at once: stop it, so the next start (the master back) gets a new one.
                    _stop_active_context()
                    if standalone_masters(self.master):
                        raise master_unreachable(
                            self.master, f"it did not accept this application: {java_summary(exc)}"
                        ) from exc
                    raise
                threading.Thread(
                    target=_warm_up, args=(self._spark,), name="spark-warm-up", daemon=True
                ).start()
            return self._spark

    def start(
        self,
        spec: ChangefeedSpec,
        on_progress: Callable[[ProgressLike], None],
        on_resolved: Callable[[int, dict[str, Any]], None] | None = None,
        on_planned: Callable[[dict[str, Any]], None] | None = None,
    ) -> RunningHandle:
        """Start the changefeed's streaming query."""
        try:
            from sparkcdc.pipeline.changefeed import start_changefeed
        except ImportError as exc:
            raise PermanentError(
                f"this sparkcdc has no changefeed pipeline (cannot import sparkcdc.pipeline.changefeed: {exc}); "
                "install a complete sparkcdc",
                code="CDC:ErrPipelineMissing",
            ) from exc
        relays = self.relays
        if relays is None:
            handle: RunningHandle = start_changefeed(
                self.spark(), spec, on_progress, on_resolved=on_resolved, on_planned=on_planned
            )
            return handle
        uri = spec.upstream_uri
        spec = dataclasses.replace(spec, relay_dir=relays.acquire(uri))
        try:
            handle = start_changefeed(
                self.spark(), spec, on_progress, on_resolved=on_resolved, on_planned=on_planned
            )
        except BaseException:
            relays.release(uri)
            raise
        return _RelayUser(handle, lambda: relays.release(uri))

    def shutdown(self) -> None:
        """Stop the SparkSession if one was started, and the binlog relays."""
        with self._lock:
            if self._spark is not None:
                self._spark.stop()
                self._spark = None
        if self.relays is not None:
            self.relays.close()


def _warm_up(spark: Any) -> None:
    """Run the session's first writer-shaped job now, beside the changefeeds' starts
    (``pipeline.spark.warm_up_writers``); a failure is said and changes nothing else."""
    from sparkcdc.pipeline.spark import warm_up_writers

    try:
        log.debug("Spark's writer path warmed up in %.2fs", warm_up_writers(spark))
    except Exception as exc:
        if _stopped(spark):  # the server stopped its session meanwhile
            log.debug("warming up Spark's writer path ended with the session: %s", exc)
        else:
            log.warning("warming up Spark's writer path failed (the first batch with rows pays it): %s", exc)


class _RelayUser:
    """A started changefeed that holds its upstream's relay until it is stopped."""

    def __init__(self, handle: RunningHandle, release: Callable[[], None]) -> None:
        self.handle = handle
        self._release: Callable[[], None] | None = release
        self._lock = threading.Lock()

    def stop(self) -> None:
        try:
            self.handle.stop()
        finally:
            with self._lock:
                release, self._release = self._release, None
            if release is not None:
                release()

    def is_active(self) -> bool:
        return self.handle.is_active()

    def exception(self) -> SparkCdcError | None:
        return self.handle.exception()

    def finished(self) -> bool:
        return self.handle.finished()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)


def _stopped(spark: Any) -> bool:
    """Whether a SparkSession's context has been stopped (by us or by Spark)."""
    try:
        jsc = spark.sparkContext._jsc
        return jsc is None or bool(jsc.sc().isStopped())
    except Exception:  # a gateway that is gone means a stopped session too
        return True


def _stop_active_context() -> None:
    """Stop the process's SparkContext, if one is left from a failed start."""
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is not None:
            sc.stop()
    except Exception as exc:  # nothing left to stop is fine; anything else shows at the next start
        log.debug("stopping the leftover SparkContext: %s", type(exc).__name__)


def java_summary(exc: BaseException) -> str:
    """The first line of the JVM's exception behind a Py4J error (else of ``exc``)."""
    java = getattr(exc, "java_exception", None)
    try:
        text = str(java.toString()) if java is not None else str(exc)
    except Exception:  # the gateway may be gone
        text = str(exc)
    lines = text.strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]
