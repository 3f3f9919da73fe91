"""e2e: a storage changefeed whose batches are split into segments written by parallel Spark tasks.

With a small split size every DML batch of the mixed workload is cut into several segments. Each
Spark task decodes its segment and writes it; the segments' files are staged and numbered in
segment order at commit. The output on a local directory and on S3 (moto) is checked for
contiguous file numbers and commit order across files, and replayed into a downstream MariaDB
that must equal the upstream.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.pipeline import plan, source
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import LocalS3

from .workload import assert_tables_equal, replay_once, run_workload, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_segments"


def _run(
    spark: Any, uri: str, sink_uri: str, config: Path, state: Path, start_ts: int, target_ts: int
) -> None:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.pipeline.changefeed import start_changefeed
    from sparkcdc.pipeline.spec import ChangefeedSpec

    spec = ChangefeedSpec(
        changefeed_id=f"seg-{state.name}",
        upstream_uri=uri,
        sink_uri=sink_uri,
        config=ReplicaConfig.from_file(config),
        start_ts=start_ts,
        target_ts=target_ts,
        checkpoint_dir=str(state),
        trigger_interval="200 milliseconds",
    )
    running = start_changefeed(spark, spec)
    try:
        assert running.wait(timeout=300), f"did not reach target-ts: {running.exception()}"
    finally:
        running.stop()


def _segments_per_batch(state: Path) -> list[int]:
    out = []
    for p in sorted((state / "spark" / "offsets").glob("[0-9]*")):
        end = json.loads(p.read_text().splitlines()[2])
        out.append(int(end.get("segments", 0)))
    return out


def _check_files(names: list[str], read: Callable[[str], bytes]) -> int:
    """Per directory: CDC1..n with no gap, CDC.index naming CDCn, commit_ts never decreasing. Rows."""
    dirs: dict[str, list[str]] = {}
    for n in names:
        if "/" not in n:
            continue
        d, base = n.rsplit("/", 1)
        if base.startswith("CDC") and base.endswith(".csv"):
            dirs.setdefault(d, []).append(base)
    rows = 0
    for d, files in dirs.items():
        files.sort()
        assert files == [f"CDC{k:020d}.csv" for k in range(1, len(files) + 1)], f"{d}: {files}"
        assert read(f"{d}/meta/CDC.index").decode().strip() == files[-1]
        last = 0
        for f in files:
            for rec in csv.reader(io.StringIO(read(f"{d}/{f}").decode(), newline="")):
                ts = int(rec[3])
                assert ts >= last, f"{d}/{f}: commit_ts {ts} after {last}"
                last = ts
                rows += 1
    return rows


def test_parallel_segments_to_file_and_s3_equal_upstream(
    spark: Any,
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    local_s3: LocalS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plan, "SPLIT_BYTES", 8192)  # several segments from 400 rows
    # The driver hands each batch's segments, as the source's runner planned them, to the writers.
    handed: list[int | None] = []
    planned = source.read_planned_segments

    def spy(directory: str, end: dict[str, Any]) -> list[str] | None:
        segs = planned(directory, end)
        handed.append(None if segs is None else len(segs))
        return segs

    monkeypatch.setattr(source, "read_planned_segments", spy)
    start_ts = tso(mariadb.uri)
    run_workload(mariadb, SCHEMA, rows=400, seed=11)
    target_ts = tso(mariadb.uri)
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\n')
    local_s3.create_bucket("segments")
    outputs = {
        "file": f"file://{tmp_path / 'out'}?protocol=csv",
        "s3": local_s3.sink_uri("segments/cdc", protocol="csv"),
    }
    fs = local_s3.filesystem()
    for name, sink_uri in outputs.items():
        state = tmp_path / name
        _run(spark, mariadb.uri, sink_uri, config, state, start_ts, target_ts)
        segments = _segments_per_batch(state)
        assert max(segments) >= 2, f"no batch was split into segments: {segments}"
        assert handed == [n for n in segments if n], f"segments of the runner {handed}, batches {segments}"
        handed.clear()
        if name == "file":
            root = tmp_path / "out"
            names = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
            rows = _check_files(names, lambda rel: (tmp_path / "out" / rel).read_bytes())
            assert not list(root.rglob(".sparkcdc-staging/*/*/*")), "staged files were left behind"
        else:
            names = [k[len("segments/cdc/") :] for k in fs.find("segments/cdc")]
            rows = _check_files(names, lambda rel: fs.cat(f"segments/cdc/{rel}"))
            assert not [n for n in names if n.startswith(".sparkcdc-staging/")], "staged objects left behind"
        assert rows >= 400
        downstream.execute(
            f"DROP DATABASE IF EXISTS `{SCHEMA}`", f"DROP DATABASE IF EXISTS `progress_seg_{name}`"
        )
        replay_once(sink_uri, downstream.port, f"progress_seg_{name}", config)
        assert_tables_equal(mariadb, downstream, SCHEMA)
