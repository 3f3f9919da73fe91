"""What the bad-input tests share: a server of the module's own and the CLI run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.integration.server.conftest import ServerProc, _env

FAST = 30.0
"""Seconds a refusal may take."""


def module_server(root: Path) -> Iterator[ServerProc]:
    """A ``sparkcdc server`` on a SQLite meta database under ``root``; it must stop cleanly."""
    srv = ServerProc(f"sqlite:///{root}/meta.db", root, lease=5).start()
    yield srv
    rc = srv.stop()
    assert rc == 0, srv.log()[-3000:]
    assert "Traceback" not in srv.log(), srv.log()[-3000:]


def cli(argv: list[str], cwd: Path) -> tuple[int, str, float]:
    """``sparkcdc <argv>`` in ``cwd`` without Java (a refusal must come before Spark): rc, output, seconds."""
    env = dict(_env(), JAVA_HOME=str(cwd / "no-java"), SPARKCDC_SPARK_MASTER="local[1]")
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=FAST + 60,
        env=env,
        cwd=cwd,
    )
    return res.returncode, res.stdout + res.stderr, time.monotonic() - t0
