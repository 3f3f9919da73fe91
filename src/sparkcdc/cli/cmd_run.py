"""``sparkcdc run``: one changefeed in the foreground, no server."""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import signal
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sparkcdc.cli.logs import LOG_FORMATS
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import scrub_secrets
from sparkcdc.errors import ConfigError, SparkCdcError, UnclassifiedError, map_spark_error
from sparkcdc.pipeline.request import check_target_after_start, commit_ts
from sparkcdc.pipeline.restart import (
    DEFAULT_ERROR_STUCK_SECONDS,
    Fail,
    Restart,
    RestartPolicy,
    check_error_stuck_seconds,
)

if TYPE_CHECKING:
    from sparkcdc.pipeline.spec import ChangefeedSpec

log = logging.getLogger("sparkcdc.run")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser("run", help="run one changefeed in the foreground")
    p.add_argument("--upstream-uri", required=True, help="mysql://user:pass@host:port/")
    p.add_argument(
        "--sink-uri", required=True, help="file:///dir?protocol=csv, s3://..., kafka://..., mysql://..."
    )
    p.add_argument("--config", help="changefeed TOML file ([filter], [sink], ...)")
    p.add_argument(
        "--start-ts",
        type=int,
        help="replicate every transaction with commit_ts > start-ts (0 or none: from now)",
    )
    p.add_argument("--start-position", help="start after this binlog transaction boundary, FILE:POS")
    p.add_argument(
        "--start-gtid",
        help="start after this MariaDB GTID position (0-1-1234) or MySQL GTID set (uuid:1-100)",
    )
    p.add_argument("--target-ts", type=int, help="exit 0 once the checkpoint reaches this ts")
    p.add_argument("-c", "--changefeed-id", help="changefeed id (default: a new UUID); the same id resumes")
    p.add_argument(
        "--data-dir",
        default=os.environ.get("SPARKCDC_DATA_DIR", "sparkcdc-data"),
        help="where the changefeed's state lives: a local path (a shared mount on a cluster) or "
        "s3://bucket/prefix?endpoint=...&access-key=...&secret-access-key=..., gcs://..., azure://... "
        "(default ./sparkcdc-data)",
    )
    p.add_argument("--master", default=None, help="Spark master (default local[*]; e.g. spark://host:7077)")
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting, e.g. spark.executor.memory=2g or spark.archives=env.tar.gz#env (repeatable)",
    )
    p.add_argument(
        "--trigger-interval", default="200 milliseconds", help="Spark micro-batch trigger interval"
    )
    p.add_argument("--no-progress", action="store_true", help="do not print the live progress line")
    p.add_argument(
        "--progress-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="off a terminal, print a progress line (or record) at most this often (default %(default)s)",
    )
    p.add_argument(
        "--max-batch-bytes",
        type=int,
        default=64 << 20,
        metavar="BYTES",
        help="binlog bytes a micro-batch reads at most (default 64 MiB)",
    )
    p.add_argument(
        "--error-stuck-seconds",
        type=float,
        default=DEFAULT_ERROR_STUCK_SECONDS,
        help="exit with the error when passing faults (upstream or sink down) last this long without "
        "progress (default %(default)s; the server's flag of the same name)",
    )
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics while the changefeed runs",
    )
    p.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="print the traceback of an error"
    )
    p.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=argparse.SUPPRESS,
        help="log lines as text (default) or one JSON object each",
    )
    p.set_defaults(func=run)


def build_spec(args: argparse.Namespace) -> ChangefeedSpec:
    """Validate every input before anything starts."""
    from sparkcdc.capture.upstream import UpstreamConfig
    from sparkcdc.pipeline.spec import ChangefeedSpec
    from sparkcdc.server.service import validate_changefeed_id

    cid = str(uuid.uuid4()) if args.changefeed_id is None else args.changefeed_id
    validate_changefeed_id(cid)  # TiCDC's rule, as the server and cli changefeed check it
    UpstreamConfig.from_uri(args.upstream_uri)  # its form and parameters, before the sink's
    if args.master is not None:
        from sparkcdc.server.runner import check_spark_master

        try:
            check_spark_master(args.master)  # the one check of Spark's master forms (server and run)
        except ConfigError as err:
            raise ConfigError(err.message.replace("--spark-master", "--master", 1)) from None
    check_trigger_interval(args.trigger_interval)
    if not args.max_batch_bytes > 0:
        raise ConfigError(
            f"invalid --max-batch-bytes {args.max_batch_bytes}: must be a number of bytes, at least 1"
        )
    if not (math.isfinite(args.progress_interval) and args.progress_interval >= 0):
        raise ConfigError(
            f"invalid --progress-interval {args.progress_interval}: must be a number of seconds, 0 or more"
        )
    check_error_stuck_seconds(args.error_stuck_seconds)
    from sparkcdc.cli.cmd_server import parse_spark_conf

    parse_spark_conf(args.spark_conf)
    if args.metrics_listen:
        from sparkcdc.server.main import parse_listen

        parse_listen(args.metrics_listen, "--metrics-listen")
    cfg = ReplicaConfig.from_file(args.config) if args.config else ReplicaConfig()
    given = [f for f in ("start_ts", "start_position", "start_gtid") if getattr(args, f) is not None]
    if len(given) > 1:
        raise ConfigError(
            f"--{given[0].replace('_', '-')} and --{given[1].replace('_', '-')} cannot be used together; "
            "give one start point"
        )
    # 0 means none, as for the server's create (and TiCDC): a start now, no target
    args.start_ts = commit_ts("--start-ts", args.start_ts)
    args.target_ts = commit_ts("--target-ts", args.target_ts)
    if args.start_position is not None:
        file, sep, pos = args.start_position.rpartition(":")
        if not sep or not file or not pos.isdigit():
            raise ConfigError(
                f"invalid --start-position {args.start_position!r}: use FILE:POS, e.g. mysql-bin.000003:1234"
            )
    if args.start_gtid is not None:
        from sparkcdc.capture.gtid import parse_start_gtid

        parse_start_gtid(args.start_gtid)  # a MariaDB position or a MySQL GTID set
    check_target_after_start(args.start_ts, args.target_ts)
    from sparkcdc.sink import create_sink

    create_sink(args.sink_uri, cfg, cid)  # validates the URI and sink options before Spark starts
    from sparkcdc.pipeline.state import StateDir

    state = StateDir.parse(args.data_dir)  # its URL is checked here, its storage once the upstream answered
    return ChangefeedSpec(
        changefeed_id=cid,
        upstream_uri=args.upstream_uri,
        sink_uri=args.sink_uri,
        config=cfg,
        start_ts=args.start_ts,
        target_ts=args.target_ts,
        start_position=args.start_position,
        start_gtid=args.start_gtid,
        checkpoint_dir=state.join(cid),
        trigger_interval=args.trigger_interval,
        max_batch_bytes=args.max_batch_bytes,
    )


_INTERVAL = re.compile(
    r"^(?:interval\s+)?(?:\d+(?:\.\d+)?\s*(?:microseconds?|milliseconds?|seconds?|minutes?|hours?|days?)\s*)+$",
    re.IGNORECASE,
)


def check_trigger_interval(text: str) -> None:
    """Refuse a ``--trigger-interval`` Spark would reject only once the query starts."""
    if not _INTERVAL.match(text.strip()):
        raise ConfigError(
            f"invalid --trigger-interval {text!r}: use a Spark interval such as '200 milliseconds', "
            "'1 second' or '2 minutes'"
        )


def serve_metrics(listen: str) -> Any:
    """Serve a fresh metrics registry at ``http://listen/metrics``; returns its ``ChangefeedMetrics``."""
    from prometheus_client import start_http_server

    from sparkcdc.metrics import ChangefeedMetrics
    from sparkcdc.server.main import parse_listen

    host, port = parse_listen(listen, "--metrics-listen")
    metrics = ChangefeedMetrics()
    try:
        start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on --metrics-listen {listen}: {exc.strerror or exc}"
        ) from exc
    return metrics


def check_resume(args: argparse.Namespace, spec: ChangefeedSpec, up: Any) -> None:
    """Resolve a given start point before Spark starts, and refuse a target-ts already reached.

    A start-ts after the upstream's current ts, a position that is no transaction boundary, a
    GTID or start-ts older than the binlog are refused here; the resolved offset is kept in the
    data dir (``start.json``), where the changefeed's start finds it.
    """
    from sparkcdc.pipeline.start import check_start_ts, resolve_start, upstream_current_ts
    from sparkcdc.pipeline.state import StateDir

    state = StateDir.parse(spec.checkpoint_dir)
    checkpoint: int | None = None
    if args.target_ts is not None:
        saved = state.read_json("checkpoint.json")
        checkpoint = int(saved["checkpoint_ts"]) if saved else None
        if checkpoint is not None and args.target_ts <= checkpoint:
            raise ConfigError(
                f"--target-ts {args.target_ts} is not after the checkpoint-ts {checkpoint} changefeed "
                f"{args.changefeed_id or ''} already reached; give a larger --target-ts, or another "
                "--changefeed-id to start a new changefeed"
            )
    if state.exists("start.json"):
        return  # a resume: the start point was resolved by the first run
    given_start = args.start_ts is not None or args.start_position or args.start_gtid
    if args.target_ts is not None and checkpoint is None and not given_start:
        start_ts = upstream_current_ts(up)  # the start of a new changefeed without a start point: now
        check_target_after_start(start_ts, args.target_ts, start_is_now=True)
    if args.start_ts is not None:
        check_start_ts(up, args.start_ts)
    if args.start_position and args.start_position.rpartition(":")[0] not in _binlog_files(up):
        raise ConfigError(
            f"binlog file {args.start_position.rpartition(':')[0]!r} of --start-position "
            f"{args.start_position!r} is not on the upstream; SHOW BINARY LOGS lists the files it has"
        )
    if args.start_ts is not None or args.start_position or args.start_gtid:
        resolve_start(up, spec.checkpoint_dir, spec.start_ts, spec.start_position, spec.start_gtid)


def _binlog_files(up: Any) -> list[str]:
    from sparkcdc.capture.start import binary_logs

    conn = up.connect()
    try:
        return [name for name, _size in binary_logs(conn)]
    finally:
        conn.close()


class _Run:
    """One ``sparkcdc run``: its output (messages, progress, metrics) and its restarts."""

    def __init__(self, args: argparse.Namespace, changefeed_id: str) -> None:
        from sparkcdc.cli.progress import ProgressDisplay

        self.args = args
        self.cid = changefeed_id
        self.json_logs = getattr(args, "log_format", "text") == "json"
        self.metrics: Any = None
        self.display = (
            None
            if args.no_progress
            else ProgressDisplay(
                changefeed_id, json_logs=self.json_logs, plain_interval_s=args.progress_interval
            )
        )
        self.policy = RestartPolicy(error_stuck_seconds=args.error_stuck_seconds)

    def say(self, message: str, *, last: bool = False) -> None:
        """A lifecycle message: a log record in JSON mode, else a line on stderr (above a live bar).

        ``last``: the run ends; the bar stops first, so the message is the last line.
        """
        if last and self.display is not None:
            self.display.close()
        message = scrub_secrets(message, sys.argv[1:])  # a driver's error text may quote a password
        if self.json_logs:
            log.info("%s", message, extra={"changefeed": self.cid})
        else:
            print(message, file=sys.stderr, flush=True)

    def show(self, p: Any) -> None:
        """A progress report of the changefeed."""
        if self.metrics is not None:
            self.metrics.observe("default", self.cid, p)
        if self.display is not None:
            self.display.update(p)

    def retry_later(self, exc: BaseException) -> None:
        """Raise the error the changefeed fails with, or wait the backoff before it restarts."""
        decision = self.policy.failed(exc)
        if self.metrics is not None:
            self.metrics.record_error(
                "default", self.cid, decision.error.code, retried=isinstance(decision, Restart)
            )
        if isinstance(decision, Fail):
            if decision.error is exc:
                raise decision.error
            raise decision.error from exc
        self.say(f"warning: [{decision.error.code}] {decision.error.message}; {decision.describe()}")
        time.sleep(decision.delay)


_MASTER_FIX = "give --master a running master (or local[N])"


def _stop(running: Any, out: Any) -> None:
    """Stop the changefeed. When its query failed, the error its stop meets (the sink's close, on
    the same fault: a storage sink's last ``metadata`` during an S3 outage) is said as a warning,
    and the query's error decides the restart; otherwise that error ends the run."""
    try:
        running.stop()
    except SparkCdcError as exc:
        if running.exception() is None:
            raise
        out.say(f"warning: [{exc.code}] stopping the failed changefeed: {exc.message}")


def _start_spark(args: argparse.Namespace) -> Any:
    """The Spark session of the run; a standalone master that refuses it fails in one line."""
    from sparkcdc.cli.cmd_server import parse_spark_conf
    from sparkcdc.pipeline.spark import get_spark
    from sparkcdc.server.runner import java_summary, master_unreachable, standalone_masters

    try:
        return get_spark(args.master, conf=parse_spark_conf(args.spark_conf), write_class_archive=True)
    except Exception as exc:
        if args.master and standalone_masters(args.master):
            # e.g. a port that answers but is no Spark master: Spark gives up after a minute.
            raise master_unreachable(
                args.master, f"it did not accept this application: {java_summary(exc)}", _MASTER_FIX
            ) from exc
        raise


def run(args: argparse.Namespace) -> int:
    """Run until Ctrl-C, or until the checkpoint reaches --target-ts."""
    from sparkcdc.capture.upstream import UpstreamConfig, check_upstream
    from sparkcdc.filter import changefeed_filter
    from sparkcdc.pipeline.changefeed import prepare_changefeed, start_changefeed
    from sparkcdc.pipeline.spark import keep_class_archive
    from sparkcdc.pipeline.state import StateDir, UpstreamIdentity, check_upstream_identity
    from sparkcdc.server.runner import master_unreachable, probe_spark_master
    from sparkcdc.sink import create_sink

    spec = build_spec(args)
    cid = spec.changefeed_id
    state = StateDir.parse(args.data_dir)
    # Reach the upstream (address, credentials, binlog settings), the sink (brokers, downstream,
    # bucket) and the data dir (a file, unwritable, no bucket, no credentials) before Spark starts.
    up = UpstreamConfig.from_uri(args.upstream_uri)
    check_upstream(up, captures=changefeed_filter(spec.config.filter.rules, spec.config.case_sensitive).match)
    state.check()
    # The changefeed's folder follows one upstream: its offsets mean nothing on another server.
    check_upstream_identity(state.child(cid), cid, UpstreamIdentity.query(up))
    check_resume(args, spec, up)
    why = probe_spark_master(args.master) if args.master else None
    if why is not None:
        raise master_unreachable(args.master, why, _MASTER_FIX)
    # Last, as a file sink's check makes its folder: a refusal above leaves nothing behind.
    sink = create_sink(spec.sink_uri, spec.config, cid)
    sink.check()
    out = _Run(args, cid)
    if args.metrics_listen:
        out.metrics = serve_metrics(args.metrics_listen)
        out.metrics.set_state("default", cid, "normal")
        out.say(f"metrics of changefeed {cid} at http://{args.metrics_listen}/metrics")
    terminated: list[int] = []

    def on_term(signum: int, _frame: object) -> None:
        # SIGTERM (systemd, Kubernetes, kill) stops like Ctrl-C: the query stops and the sink is
        # closed, which publishes its last checkpoint (e.g. the storage sink's metadata file).
        terminated.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # The schema bootstrap and the start point need no Spark: they run while Spark starts.
    with ThreadPoolExecutor(1, thread_name_prefix="sparkcdc-prepare") as pool:
        # The upstream, the data dir and the sink were reached above: the first start does not again.
        preparing = pool.submit(prepare_changefeed, spec, out.show, checked_sink=sink)
        t_spark = time.monotonic()
        spark = _start_spark(args)
        log.debug("Spark session started in %.2fs", time.monotonic() - t_spark)
    started_once = False
    try:
        while True:
            try:
                # A restart prepares again: the start point is the last checkpoint by then.
                # The one query of this session: Spark's planner processes can go after its first batch.
                running = start_changefeed(
                    spark,
                    spec,
                    out.show,
                    None if started_once else preparing.result(),
                    release_planners=True,
                )
            except Exception as exc:
                # Spark jobs run while starting (the initial snapshot): their failure carries the error.
                err = map_spark_error(exc)
                if not started_once:
                    # At the first start a fault is reported at once: nothing hangs on a bad setup.
                    if err is exc or isinstance(err, UnclassifiedError):
                        raise  # as it is (an unexpected failure keeps its traceback)
                    raise err from exc
                out.retry_later(err)
                continue
            started_once = True
            out.say(f"changefeed {cid} started; data dir {state.child(cid).display}")
            try:
                while True:
                    if running.wait(timeout=1.0):
                        p = running.progress()
                        out.say(
                            f"changefeed {cid} reached target-ts {args.target_ts} "
                            f"(checkpoint-ts {p.checkpoint_ts}, {p.rows_total} rows)",
                            last=True,
                        )
                        return 0
                    if not running.is_active():
                        break
            except KeyboardInterrupt:
                out.say("stopping...", last=True)
                return 128 + terminated[0] if terminated else 130
            finally:
                _stop(running, out)
            failure = running.exception()
            if failure is None:
                return 1
            if running.batches:
                out.policy.progressed()  # the earlier failures are over
            # A passing fault (upstream restart, sink down) resumes from the checkpoint after a pause.
            out.retry_later(failure)
    finally:
        if out.display is not None:
            out.display.stop()
        # The first run on a Spark and Java install leaves the class data archive later starts map.
        keep_class_archive(spark)
