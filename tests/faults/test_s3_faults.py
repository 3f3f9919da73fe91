"""S3 faults: the endpoint answers 503 for a while, then the bucket is deleted.

moto cannot be made to fail, so the sink talks to it through ``FaultyS3Proxy`` (a shim in
``s3_proxy.py``) that answers ``503 SlowDown`` while the test says so. The changefeed retries through
the 5xx period and catches up; the consumer (straight to moto) replays the files into a replica equal
to the upstream. Then the bucket is deleted under the running changefeed: the error names the bucket.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import ACCESS_KEY, REGION, SECRET_KEY, LocalS3
from tests.e2e.workload import CliProcess, mixed_rounds, replay_once, run_args, tso, wait_for

from .s3_proxy import FaultyS3Proxy
from .support import assert_rows_equal, checkpoint, create_round_tables, wait_checkpoint

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.spark]

SCHEMA = "fault_s3"
CHANGEFEED = "fault-s3"
BUCKET = "fault-bucket"
FAILING_FOR = 20.0
"""Seconds of 503 answers at least: longer than the S3 client's own retries of one request (s3fs's 5
tries of a throttled request, ~2 s of waits, each botocore's 3 attempts, at most 3 s of backoff); the
period then lasts until the changefeed's own retry has shown."""


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        yield server


def _uri(endpoint: str, path: str) -> str:
    q = f"endpoint={endpoint}&access-key={ACCESS_KEY}&secret-access-key={SECRET_KEY}&region={REGION}"
    return f"s3://{path}?protocol=csv&{q}"


def test_s3_5xx_then_deleted_bucket(
    upstream: LocalMariaDB, replica: LocalMariaDB, s3: LocalS3, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    s3.create_bucket(BUCKET)
    start_ts = tso(upstream.uri)
    create_round_tables(upstream, SCHEMA)
    config = tmp_path / "cf.toml"
    config.write_text(
        f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\noutput-old-value = true\n'
    )
    data_dir = tmp_path / "data"
    with FaultyS3Proxy(s3.host, s3.port) as proxy:
        sink_uri = _uri(proxy.endpoint, f"{BUCKET}/cdc")
        run = CliProcess(
            run_args(
                upstream.uri, sink_uri, CHANGEFEED, data_dir, "--start-ts", str(start_ts), config=config
            ),
            tmp_path / "run.log",
        )
        try:
            run.wait_started(timeout=240)
            mixed_rounds(upstream, SCHEMA, 1, 30)
            wait_checkpoint(run, data_dir, CHANGEFEED, tso(upstream.uri), 120, "the first rows")

            proxy.failing = 503
            failing_since = time.monotonic()
            mixed_rounds(upstream, SCHEMA, 31, 30)
            wait_for(lambda: proxy.failed > 0, 30, "a request during the 5xx period")
            during = checkpoint(data_dir, CHANGEFEED)
            time.sleep(max(0.0, FAILING_FOR - (time.monotonic() - failing_since)))  # the 5xx period
            # a write that began late in the period can still be inside the S3 client's own retries
            # (slow under load): the period lasts until the changefeed's retry has shown
            run.wait_for(
                "warning: [CDC:ErrSinkUnavailable]", 120, "the changefeed's retry during the 5xx period"
            )
            proxy.failing = None
            mixed_rounds(upstream, SCHEMA, 61, 30)
            target = tso(upstream.uri)
            done = wait_checkpoint(run, data_dir, CHANGEFEED, target, 180, "the catch-up after 5xx")
            # The consumer applies up to the sink's ``metadata``, which follows the checkpoint every 2 s.
            fs = s3.filesystem()
            wait_for(
                lambda: json.loads(fs.cat_file(f"{BUCKET}/cdc/metadata"))["checkpoint-ts"] >= target,
                30,
                "the sink's metadata to reach the checkpoint",
            )
            assert int(done["checkpoint_ts"]) > int(during["checkpoint_ts"])
            retried = time.monotonic() - t0

            replay_once(_uri(s3.endpoint, f"{BUCKET}/cdc"), replica.port, "progress_fault_s3", config)
            assert_rows_equal(upstream, replica, SCHEMA)

            # The bucket goes away under the running changefeed: it fails, naming the bucket.
            fs.rm(f"{BUCKET}/cdc", recursive=True)
            fs.rmdir(BUCKET)
            mixed_rounds(upstream, SCHEMA, 91, 5)
            rc = run.wait(timeout=180)
        finally:
            run.stop()
            # shown with a failure: what the server itself refused (e.g. which request saw NoSuchBucket)
            for when, method, path, status, body in proxy.refused:
                print(
                    f"refused {time.strftime('%H:%M:%S', time.localtime(when))} {method} {path}: {status} {body!r}"
                )
    out = run.output()
    assert rc != 0, out[-4000:]
    warnings = [line for line in out.splitlines() if line.startswith("warning: [CDC:ErrSinkUnavailable]")]
    assert warnings and all("retrying in" in w for w in warnings), out[-4000:]
    final = [line for line in out.splitlines() if line.startswith("Error: [")]
    assert len(final) == 1 and f"bucket {BUCKET!r} does not exist" in final[0], out[-4000:]
    print(
        f"s3: {proxy.failed} requests answered 503, {proxy.forwarded} forwarded, {len(warnings)} retry "
        f"warnings; {retried:.0f}s; then {final[0][:200]}"
    )
