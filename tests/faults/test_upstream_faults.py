"""Upstream faults: a MariaDB restart mid-stream, an outage the run outlives, binlog purged past a checkpoint.

Every changefeed writes CSV files with commit-ts and old values (``file://``; without old values an
UPDATE of a table without a key cannot be replayed); ``sparkcdc consumer`` replays them into
the replica, which must equal the upstream. The upstream is this module's own MariaDB (it is restarted
and its binlog purged).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture.offset import base_ts
from sparkcdc.services.common import stop_process, wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import CliProcess, mixed_rounds, replay_once, run_args, run_cli, tso, wait_for
from tests.integration.server.conftest import ServerProc

from .support import (
    assert_rows_equal,
    checkpoint,
    create_round_tables,
    restart_mariadb,
    wait_checkpoint,
)

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.spark]


def _binlogs(db: LocalMariaDB) -> list[str]:
    return [str(r[0]) for r in db.query("SHOW BINARY LOGS")]


def _setup(db: LocalMariaDB, schema: str, tmp_path: Path) -> tuple[int, str, Path]:
    """Tables, the ts before them, the CSV sink URI and the changefeed config."""
    start_ts = tso(db.uri)
    create_round_tables(db, schema)
    config = tmp_path / "cf.toml"
    config.write_text(
        f'[filter]\nrules = ["{schema}.*"]\n[sink.csv]\ninclude-commit-ts = true\noutput-old-value = true\n'
    )
    return start_ts, f"file://{tmp_path / 'sink'}?protocol=csv", config


RUN_STUCK_SECONDS = 15
"""`sparkcdc run --error-stuck-seconds`: passing errors without progress for this long end the run."""


def test_upstream_restart_then_long_outage_resumes_from_checkpoint(
    upstream: LocalMariaDB, replica: LocalMariaDB, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    schema, cf = "fault_up_restart", "fault-up-restart"
    start_ts, sink_uri, config = _setup(upstream, schema, tmp_path)
    data_dir = tmp_path / "data"
    args = run_args(upstream.uri, sink_uri, cf, data_dir, config=config)
    run = CliProcess(
        [*args, "--start-ts", str(start_ts), "--error-stuck-seconds", str(RUN_STUCK_SECONDS)],
        tmp_path / "run1.log",
    )
    try:
        run.wait_started(timeout=240)
        mixed_rounds(upstream, schema, 1, 30)
        upstream.execute("FLUSH BINARY LOGS")
        mixed_rounds(upstream, schema, 31, 30)
        files_before = _binlogs(upstream)
        restart_mariadb(upstream, down_for=3)
        mixed_rounds(upstream, schema, 61, 30)  # into the binlog file the restart opened
        assert _binlogs(upstream)[-1] not in files_before
        wait_checkpoint(run, data_dir, cf, tso(upstream.uri), 180, "the stream after the restart")

        # Down for longer than the retry window: the run retries with warnings, then exits with
        # the error; a rerun while the upstream is still down fails at once naming the upstream.
        stop_process(upstream.proc, grace=30)
        upstream.proc = None
        dead_ts = base_ts(int(time.time()) + 1)  # above any time the upstream's clock could still give
        down_at = time.monotonic()
        wait_for(lambda: "warning: [CDC:ErrUpstreamUnavailable]" in run.output(), 120, "a retry warning")
        rc = run.wait(timeout=RUN_STUCK_SECONDS + 120)
        out = run.output()
        assert rc != 0 and time.monotonic() - down_at >= RUN_STUCK_SECONDS, out[-4000:]
        assert "Error: [CDC:ErrUpstreamUnavailable] errors for" in out, out[-4000:]
        assert "--error-stuck-seconds" in out and "Traceback" not in out, out[-4000:]
    except BaseException:
        if upstream.proc is None:
            upstream.start()  # the module's other tests need it
        raise
    finally:
        run.stop(signal.SIGTERM)
    try:
        # A batch planned before the upstream went down may commit during the outage (an idle one
        # moves the checkpoint to the upstream clock it read, possibly while MariaDB shut down):
        # nothing claims a time after the upstream was gone.
        at_exit = checkpoint(data_dir, cf)
        assert at_exit["checkpoint_ts"] < dead_ts, (at_exit, dead_ts)
        refused = run_cli([*args], timeout=120)
        assert refused.returncode != 0
        err = refused.stderr + refused.stdout
        assert "[CDC:ErrUpstreamUnavailable]" in err and f"127.0.0.1:{upstream.port}" in err, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        assert checkpoint(data_dir, cf)["checkpoint_ts"] == at_exit["checkpoint_ts"]  # the refused run
    finally:
        upstream.start()  # the module's other tests need it, whatever failed above
    mixed_rounds(upstream, schema, 91, 30)
    target = tso(upstream.uri)
    rerun = CliProcess([*args, "--target-ts", str(target)], tmp_path / "run2.log")
    try:
        rc = rerun.wait(timeout=300)
    finally:
        rerun.stop()
    assert rc == 0, rerun.output()[-4000:]
    assert f"reached target-ts {target}" in rerun.output()

    replay_once(sink_uri, replica.port, "progress_fault_up_restart", config)
    assert_rows_equal(upstream, replica, schema)
    print(f"upstream restart + outage: {time.monotonic() - t0:.0f}s")


STUCK_SECONDS = 20
"""The server's --error-stuck-seconds: how long passing errors may last before a changefeed is failed."""


def test_upstream_down_past_the_retry_window_fails_then_resume_continues(
    upstream: LocalMariaDB, replica: LocalMariaDB, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    schema, cf = "fault_up_window", "fault-up-window"
    start_ts, sink_uri, config = _setup(upstream, schema, tmp_path)
    server = ServerProc(
        f"sqlite:///{tmp_path / 'meta.db'}",
        tmp_path,
        lease=5,
        extra=("--error-stuck-seconds", str(STUCK_SECONDS)),
    ).start()

    def query() -> dict[str, Any]:
        res = server.cli("changefeed", "query", "-c", cf, "-s")
        assert res.returncode == 0, res.stdout + res.stderr
        return dict(json.loads(res.stdout))

    def wait_query(pred: Callable[[dict[str, Any]], Any], timeout: float, what: str) -> dict[str, Any]:
        """Poll ``query`` until ``pred`` holds; a changefeed that fails meanwhile ends the wait at once."""
        q = wait_until(
            lambda: (lambda q: q if pred(q) or q["state"] == "failed" else None)(query()),
            timeout=timeout,
            interval=0.5,
            what=what,
            on_timeout=lambda: f"{query()}\n{server.log()[-3000:]}",
        )
        assert pred(q), f"{what}: {q}"
        return q

    try:
        created = server.cli(
            "changefeed", "create", "-c", cf, "--upstream-uri", upstream.uri, "--sink-uri", sink_uri,
            "--config", str(config), "--start-ts", str(start_ts),
        )  # fmt: skip
        assert created.returncode == 0, created.stdout + created.stderr
        mixed_rounds(upstream, schema, 1, 30)
        before = tso(upstream.uri)
        wait_query(lambda q: q["checkpoint_tso"] >= before and q["state"] == "normal", 240, "the first rows")

        stop_process(upstream.proc, grace=30)
        upstream.proc = None
        down_at = time.monotonic()
        warned = wait_query(lambda q: q["warning"] or q["state"] == "failed", 60, "a warning")
        assert warned["state"] == "normal" and "[CDC:ErrUpstreamUnavailable]" in warned["warning"], warned
        failed = wait_query(lambda q: q["state"] == "failed", STUCK_SECONDS + 60, "the changefeed to fail")
        error = json.dumps(failed["error"])
        assert time.monotonic() - down_at >= STUCK_SECONDS
        assert "CDC:ErrUpstreamUnavailable" in error and f"127.0.0.1:{upstream.port}" in error, error
        assert failed["checkpoint_tso"] >= before

        upstream.start()  # a new binlog file; rows go into it before and after the resume
        mixed_rounds(upstream, schema, 31, 15)
        resumed = server.cli("changefeed", "resume", "-c", cf)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        mixed_rounds(upstream, schema, 46, 15)
        target = tso(upstream.uri)
        wait_query(
            lambda q: q["checkpoint_tso"] >= target and q["state"] == "normal", 240, "the resumed stream"
        )
        paused = server.cli("changefeed", "pause", "-c", cf)  # the sink publishes its last metadata
        assert paused.returncode == 0, paused.stdout + paused.stderr
        wait_query(lambda q: q["state"] == "stopped", 60, "the pause")
    finally:
        server.stop()

    replay_once(sink_uri, replica.port, "progress_fault_up_window", config)
    assert_rows_equal(upstream, replica, schema)
    print(f"upstream past the retry window: failed with {error[:200]}; {time.monotonic() - t0:.0f}s")


def test_binlog_purged_past_checkpoint_fails_with_the_file_and_the_fix(
    upstream: LocalMariaDB, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    schema, cf = "fault_purged", "fault-purged"
    start_ts, sink_uri, config = _setup(upstream, schema, tmp_path)
    data_dir = tmp_path / "data"
    args = run_args(upstream.uri, sink_uri, cf, data_dir, config=config)
    mixed_rounds(upstream, schema, 1, 20)
    target = tso(upstream.uri)
    first = CliProcess(
        [*args, "--start-ts", str(start_ts), "--target-ts", str(target)], tmp_path / "run1.log"
    )
    try:
        assert first.wait(timeout=300) == 0, first.output()[-4000:]
    finally:
        first.stop()
    stopped_at = checkpoint(data_dir, cf)["end"]["file"]

    mixed_rounds(upstream, schema, 21, 20)

    def purged() -> bool:
        # MariaDB keeps a file until its binlog checkpoint has passed it: flush and purge until it went.
        upstream.execute("FLUSH BINARY LOGS")
        upstream.execute(f"PURGE BINARY LOGS TO '{_binlogs(upstream)[-1]}'")
        return stopped_at not in _binlogs(upstream)

    wait_for(purged, 30, f"{stopped_at} to be purged")

    rerun = CliProcess(args, tmp_path / "run2.log")
    try:
        rc = rerun.wait(timeout=300)
    finally:
        rerun.stop()
    out = rerun.output()
    assert rc != 0, out[-4000:]
    final = [line for line in out.splitlines() if line.startswith("Error: [CDC:ErrBinlogPurged]")]
    assert len(final) == 1, out[-4000:]
    assert stopped_at in final[0] and "new changefeed" in final[0] and "snapshot" in final[0], final[0]
    print(f"binlog purged: {time.monotonic() - t0:.0f}s")
