"""Failpoints: named points where a test or the torture bench has the process killed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import psutil
import pytest

from sparkcdc import failpoint
from sparkcdc.services.common import wait_until


def test_points_are_parsed_and_an_unknown_one_is_refused() -> None:
    assert failpoint._parse("") == {}
    assert failpoint._parse("after-sink-commit=0.25") == {"after-sink-commit": 0.25}
    assert failpoint._parse(" after-sink-commit ") == {"after-sink-commit": 1.0}
    with pytest.raises(ValueError, match="unknown failpoint 'before-lunch'"):
        failpoint._parse("before-lunch=1")


def test_an_armed_point_kills_the_process_and_its_children_with_sigkill() -> None:
    child = textwrap.dedent(
        """
        import subprocess, sys
        from sparkcdc import failpoint
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(sleeper.pid, flush=True)
        failpoint.hit("after-sink-commit")
        print("survived", flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", child],
        env={**os.environ, failpoint.ENV: "after-sink-commit=1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -9 and "survived" not in proc.stdout
    sleeper = int(proc.stdout.split()[0])

    def gone() -> bool:
        try:
            return psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    # SIGKILL is sent before the process kills itself, and acts when the kernel next schedules
    # the child: on a loaded machine that may be a moment after the parent is gone
    wait_until(gone, timeout=10, what=f"the child {sleeper} killed", interval=0.05)


def test_an_unarmed_point_does_nothing() -> None:
    failpoint.hit("after-sink-commit")  # this test process has no SPARKCDC_FAILPOINTS
