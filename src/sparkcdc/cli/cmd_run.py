"""``sparkcdc run``: one changefeed in the foreground, no server."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
import uuid

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import (
    MAX_UNCLASSIFIED_RETRIES,
    ConfigError,
    SparkCdcError,
    UnclassifiedError,
    map_spark_error,
    retry_verdict,
)
from sparkcdc.model.ts import physical_ms

ID_RULE = re.compile(r"^[a-zA-Z0-9]+(\-[a-zA-Z0-9]+)*$")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``run`` command."""
    p = sub.add_parser("run", help="run one changefeed in the foreground")
    p.add_argument("--upstream-uri", required=True, help="mysql://user:pass@host:port/")
    p.add_argument(
        "--sink-uri", required=True, help="file:///dir?protocol=csv, s3://..., kafka://..., mysql://..."
    )
    p.add_argument("--config", help="changefeed TOML file ([filter], [sink], ...)")
    p.add_argument("--start-ts", type=int, help="replicate every transaction with commit_ts > start-ts")
    p.add_argument("--start-position", help="start after this binlog transaction boundary, FILE:POS")
    p.add_argument("--start-gtid", help="start after this MariaDB GTID position, e.g. 0-1-1234")
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
    p.set_defaults(func=run)


def build_spec(args: argparse.Namespace) -> object:
    """Validate every input before anything starts."""
    from sparkcdc.pipeline.changefeed import ChangefeedSpec

    cid = args.changefeed_id or str(uuid.uuid4())
    if not ID_RULE.match(cid):
        raise ConfigError(
            f"invalid changefeed id {cid!r}: use letters, digits and single dashes "
            "(matching ^[a-zA-Z0-9]+(\\-[a-zA-Z0-9]+)*$)"
        )
    cfg = ReplicaConfig.from_file(args.config) if args.config else ReplicaConfig()
    given = [f for f in ("start_ts", "start_position", "start_gtid") if getattr(args, f) is not None]
    if len(given) > 1:
        raise ConfigError(
            f"--{given[0].replace('_', '-')} and --{given[1].replace('_', '-')} cannot be used together; "
            "give one start point"
        )
    if args.start_ts is not None and args.start_ts < 0:
        raise ConfigError(f"invalid --start-ts {args.start_ts}: must be >= 0")
    if args.target_ts is not None and args.start_ts is not None and args.target_ts <= args.start_ts:
        raise ConfigError(f"--target-ts {args.target_ts} must be greater than --start-ts {args.start_ts}")
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
    )


def run(args: argparse.Namespace) -> int:
    """Run until Ctrl-C, or until the checkpoint reaches --target-ts."""
    from sparkcdc.capture.upstream import UpstreamConfig, check_upstream
    from sparkcdc.cli.cmd_server import parse_spark_conf
    from sparkcdc.pipeline.changefeed import Progress, start_changefeed
    from sparkcdc.pipeline.spark import get_spark
    from sparkcdc.pipeline.state import StateDir

    spec = build_spec(args)
    state = StateDir.parse(args.data_dir)
    # Reach the upstream (address, credentials, binlog settings), then the data dir (a file,
    # unwritable, no bucket, no credentials), before Spark starts.
    check_upstream(UpstreamConfig.from_uri(args.upstream_uri))
    state.check()
    tty = sys.stderr.isatty()
    last_print = [0.0]

    def show(p: Progress) -> None:
        if args.no_progress:
            return
        now = time.monotonic()
        if now - last_print[0] < 1.0:
            return
        last_print[0] = now
        if p.snapshot_phase and p.snapshot_phase != "done":
            eta = f", ETA {p.snapshot_eta_s:.0f}s" if p.snapshot_eta_s is not None else ""
            line = (
                f"changefeed {spec.changefeed_id}: snapshot {p.snapshot_phase}: {p.snapshot_rows} rows copied, "  # type: ignore[attr-defined]
                f"ranges {p.snapshot_ranges_done}/{p.snapshot_ranges_total}{eta}"
            )
            print(
                ("\r" + line + "\x1b[K") if tty else line,
                file=sys.stderr,
                end="" if tty else "\n",
                flush=True,
            )
            return
        line = (
            f"changefeed {spec.changefeed_id}: checkpoint-ts {p.checkpoint_ts} "  # type: ignore[attr-defined]
            f"({time.strftime('%H:%M:%S', time.gmtime(physical_ms(p.checkpoint_ts) / 1000))} UTC) "
            f"rows {p.rows_total} ({p.rows_per_sec:,.0f} rows/s) lag {p.lag_s:.1f}s"
            f"{' caught up' if p.caught_up else ''}"
        )
        print(("\r" + line + "\x1b[K") if tty else line, file=sys.stderr, end="" if tty else "\n", flush=True)

    terminated: list[int] = []

    def on_term(signum: int, _frame: object) -> None:
        # SIGTERM (systemd, Kubernetes, kill) stops like Ctrl-C: the query stops and the sink is
        # closed, which publishes its last checkpoint (e.g. the storage sink's metadata file).
        terminated.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    spark = get_spark(args.master, conf=parse_spark_conf(args.spark_conf))
    backoff = 1.0
    started_once = False
    unclassified = 0  # restarts in a row, without progress, after errors sparkcdc does not recognise

    def retry_later(err: SparkCdcError, lead: str = "") -> None:
        """Raise the error the changefeed fails with, or wait the backoff before it restarts."""
        nonlocal backoff, unclassified
        verdict = retry_verdict(err, unclassified)
        if verdict is err:
            raise err
        if verdict is not None:
            raise verdict from err
        count = ""
        if isinstance(err, UnclassifiedError):
            unclassified += 1
            count = f" ({unclassified} of {MAX_UNCLASSIFIED_RETRIES} retries for an unrecognised error)"
        print(
            f"{lead}warning: [{err.code}] {err.message}; retrying in {backoff:.0f}s{count}", file=sys.stderr
        )
        time.sleep(backoff)
        backoff = min(backoff * 2, 60.0)

    while True:
        try:
            running = start_changefeed(spark, spec, show)  # type: ignore[arg-type]
        except Exception as exc:
            # Spark jobs run while starting (the initial snapshot): their failure carries the error.
            err = map_spark_error(exc)
            if not started_once:
                # At the first start a fault is reported at once: nothing hangs on a bad setup.
                if err is exc or isinstance(err, UnclassifiedError):
                    raise  # as it is (an unexpected failure keeps its traceback)
                raise err from exc
            retry_later(err)
            continue
        started_once = True
        cid = spec.changefeed_id  # type: ignore[attr-defined]
        print(f"changefeed {cid} started; data dir {state.child(cid).display}", file=sys.stderr)
        try:
            while True:
                if running.wait(timeout=1.0):
                    p = running.progress()
                    print(
                        f"\nchangefeed {spec.changefeed_id} reached target-ts {args.target_ts} "  # type: ignore[attr-defined]
                        f"(checkpoint-ts {p.checkpoint_ts}, {p.rows_total} rows)",
                        file=sys.stderr,
                    )
                    return 0
                if not running.is_active():
                    break
        except KeyboardInterrupt:
            print("\nstopping...", file=sys.stderr)
            return 128 + terminated[0] if terminated else 130
        finally:
            running.stop()
        failure = running.exception()
        if failure is None:
            return 1
        if running.batches:
            unclassified = 0  # it made progress: the earlier failures are over
        # A passing fault (upstream restart, sink down) resumes from the checkpoint after a pause.
        retry_later(failure, lead="\n")
