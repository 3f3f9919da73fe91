"""The folder watch an idle source waits on (``pipeline/dirwatch.py``), on real files."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sparkcdc.pipeline.dirwatch import DirWatch, watch_folders


def test_a_write_or_a_new_file_wakes_the_watch_and_a_touch_does_not(tmp_path: Path) -> None:
    relay, marks = tmp_path / "relay", tmp_path / "marks"
    relay.mkdir()
    marks.mkdir()
    (relay / "alive").touch()
    (relay / "a.relay").write_bytes(b"x")
    watch = DirWatch([str(relay), str(marks)])
    try:
        assert not watch.wait(0.2), "nothing changed"
        os.utime(relay / "alive")  # the relay's heartbeat: not a write
        assert not watch.wait(0.2)
        with open(relay / "a.relay", "ab") as f:
            f.write(b"event")
        assert watch.wait(5), "a relayed event appended"
        assert not watch.wait(0.1), "its events were read: the next wait waits again"
        (relay / "b.relay").touch()
        assert watch.wait(5), "a new relayed file"
        (marks / "sparkcdc-stopping").touch()
        assert watch.wait(5), "the driver's stop"
    finally:
        watch.close()


def test_a_wait_lasts_its_timeout_and_a_missing_folder_gives_no_watch(tmp_path: Path) -> None:
    watch = watch_folders([str(tmp_path)])
    assert watch is not None
    try:
        t0 = time.monotonic()
        assert not watch.wait(0.3)
        assert 0.25 <= time.monotonic() - t0 < 2
    finally:
        watch.close()
    assert watch_folders([str(tmp_path / "gone")]) is None, "the caller polls instead"
