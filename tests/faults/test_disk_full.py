"""Disk full under the file sink: a 2 MiB tmpfs as the sink root, nearly filled by a filler file.

The changefeed fails with an error that says the disk is full (ENOSPC is permanent for the storage
sink: it does not pass by itself). At no point does ``CDC.index`` or ``metadata`` name an incomplete
file: every data file an index names is absent (the index is written first) or parses to its last
record. After the filler is deleted a rerun continues from the checkpoint, and the replica equals
the upstream. Needs root (``mount -t tmpfs``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import CliProcess, mixed_rounds, replay_once, run_args, tso

from .support import assert_rows_equal, checkpoint, create_round_tables, wait_checkpoint

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.spark]

SCHEMA = "fault_disk"
CHANGEFEED = "fault-disk-full"
FREE_BYTES = 160 * 1024
"""Room left beside the filler: the first rows fit, the next few hundred rounds do not."""


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for the test, unmounted afterwards."""
    mnt = tmp_path / "sink"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def check_published(root: Path) -> int:
    """Assert that every file an index or the metadata names is complete; return the data files seen."""
    meta = root / "metadata"
    if meta.exists():
        assert int(json.loads(meta.read_bytes())["checkpoint-ts"]) > 0
    seen = 0
    for index in root.rglob("meta/CDC.index"):
        last = index.read_text().strip()
        directory = index.parent.parent
        number = int(last.removeprefix("CDC").split(".")[0])
        for f in sorted(directory.glob("CDC*.csv")):
            n = int(f.name.removeprefix("CDC").split(".")[0])
            assert n <= number, f"{f} is not named by {index} ({last})"
            data = f.read_bytes()
            assert data.endswith(b"\n"), f"{f} ends inside a record"
            rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
            assert rows and len({len(r) for r in rows}) == 1, f"{f} has records of different widths"
            seen += 1
    for tmp in root.rglob(".tmp-*"):
        raise AssertionError(f"a temporary file was left behind: {tmp}")
    return seen


def test_disk_full_fails_clearly_publishes_no_partial_file_and_rerun_completes(
    upstream: LocalMariaDB, replica: LocalMariaDB, small_disk: Path, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (2 * 1024 * 1024 - FREE_BYTES))
    start_ts = tso(upstream.uri)
    create_round_tables(upstream, SCHEMA)
    config = tmp_path / "cf.toml"
    config.write_text(
        f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\noutput-old-value = true\n'
    )
    sink_uri = f"file://{small_disk}?protocol=csv"
    data_dir = tmp_path / "data"  # the changefeed's own state is on an ordinary disk
    args = run_args(upstream.uri, sink_uri, CHANGEFEED, data_dir, config=config)

    run = CliProcess([*args, "--start-ts", str(start_ts)], tmp_path / "run1.log")
    try:
        run.wait_started(timeout=240)
        mixed_rounds(upstream, SCHEMA, 1, 10)
        wait_checkpoint(run, data_dir, CHANGEFEED, tso(upstream.uri), 120, "the rows that fit")
        mixed_rounds(upstream, SCHEMA, 11, 600, text_suffix="x" * 40)
        rc = run.wait(timeout=180)
    finally:
        run.stop()
    out = run.output()
    assert rc != 0, out[-4000:]
    final = [line for line in out.splitlines() if line.startswith("Error: [")]
    assert len(final) == 1 and "No space left on device" in final[0], out[-4000:]
    assert str(small_disk) in final[0], final[0]
    stuck_at = int(checkpoint(data_dir, CHANGEFEED)["checkpoint_ts"])
    assert check_published(small_disk) > 0

    filler.unlink()  # space freed
    target = tso(upstream.uri)
    rerun = CliProcess([*args, "--target-ts", str(target)], tmp_path / "run2.log")
    try:
        assert rerun.wait(timeout=300) == 0, rerun.output()[-4000:]
    finally:
        rerun.stop()
    assert int(checkpoint(data_dir, CHANGEFEED)["checkpoint_ts"]) >= target > stuck_at
    check_published(small_disk)
    replay_once(sink_uri, replica.port, "progress_fault_disk", config)
    assert_rows_equal(upstream, replica, SCHEMA)
    print(f"disk full: {final[0][:200]}; {time.monotonic() - t0:.0f}s")


@pytest.mark.parametrize("size", [100, 64 * 1024])
def test_a_file_the_full_disk_refuses_leaves_no_temporary_file(small_disk: Path, size: int) -> None:
    """Whether the disk refuses a write (past the file object's buffer) or only the flush at commit."""
    from sparkcdc.errors import SinkError
    from sparkcdc.sink.objectstore import StorageBackend

    with contextlib.suppress(OSError):  # as much as fits
        (small_disk / "filler").write_bytes(b"\0" * (2 * 1024 * 1024))
    with pytest.raises(OSError):
        (small_disk / "more").write_bytes(b"\0" * 4096)
    (small_disk / "more").unlink()
    backend = StorageBackend("file", str(small_disk))
    with pytest.raises(SinkError, match="No space left on device"):
        f = backend.open_atomic("t/CDC000001.csv")
        f.write(b"x" * size)
        f.commit()
    assert sorted(p.name for p in small_disk.rglob("*") if p.is_file()) == ["filler"]
