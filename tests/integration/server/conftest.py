"""Real ``sparkcdc server`` processes on free 127.0.0.1 ports, and the CLI run as a subprocess."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from sparkcdc.server.client import ApiClient
from sparkcdc.services.common import free_port, kill_tree, wait_until

SRC = str(Path(__file__).resolve().parents[3] / "src")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.pop("SPARKCDC_AUTH_TOKEN", None)
    env.pop("SPARKCDC_SERVER", None)
    return env


class ServerProc:
    """One ``sparkcdc server`` subprocess; its output goes to ``log_path``."""

    def __init__(
        self,
        meta_uri: str,
        workdir: Path,
        *,
        token: str | None = None,
        lease: float = 5,
        extra: tuple[str, ...] = (),
        name: str = "server",
        data_dir: Path | None = None,
        default_data_dir: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        """``data_dir``: a ``--data-dir`` shared with other servers (default: one of its own in ``workdir``);
        ``default_data_dir``: give none (the server derives it); ``env``: added to its environment."""
        self.meta_uri = meta_uri
        self.env = dict(env or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        self.workdir = workdir
        self.log_path = workdir / f"{name}-{self.port}.log"
        self.args = [
            sys.executable,
            "-m",
            "sparkcdc.cli.main",
            "server",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--meta-uri",
            meta_uri,
            "--lease-seconds",
            str(lease),
            *(() if default_data_dir else ("--data-dir", str(data_dir or workdir / f"data-{name}"))),
            "--spark-conf",
            "spark.driver.memory=1g",
            *(("--auth-token", token) if token else ()),
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> ServerProc:
        """Start and wait until /health answers."""
        log = open(self.log_path, "ab")  # the child keeps its own copy
        # Its own process group, so kill9() takes the Spark JVM down with it like a dead host.
        self.proc = subprocess.Popen(
            self.args,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**_env(), **self.env},
            cwd=self.workdir,
            start_new_session=True,
        )
        log.close()

        def healthy() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log()[-3000:]}")
            with ApiClient(self.url, timeout=2) as c:
                return c.health() == {}

        wait_until(
            healthy,
            timeout=timeout,
            what=f"sparkcdc server on {self.port}",
            on_timeout=lambda: self.log()[-3000:],
        )
        return self

    def client(self) -> ApiClient:
        """An API client with this server's token."""
        return ApiClient(self.url, self.token)

    def cli(
        self, *args: str, token: bool = True, subprocess_: bool = False, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``sparkcdc cli ARGS --server URL [--auth-token T]``.

        In this process by default (the same ``main()`` the console script calls, without
        an interpreter start per call); ``subprocess_=True`` runs the real command line.
        """
        group_verb, rest = args[:2], args[2:]
        argv = ["cli", *group_verb, "--server", self.url, *rest]
        if token and self.token:
            argv += ["--auth-token", self.token]
        if subprocess_:
            cmd = [sys.executable, "-m", "sparkcdc.cli.main", *argv]
            return subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=self.workdir
            )
        from sparkcdc.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse refusals
                rc = int(exc.code or 0)
        return subprocess.CompletedProcess(argv, rc, out.getvalue(), err.getvalue())

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 90) -> int | None:
        """SIGTERM (the server releases its changefeeds), then SIGKILL after ``timeout``."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        rc = self.proc.returncode
        try:  # anything the server left behind in its group (a Spark JVM that outlived it)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc = None
        return rc

    def kill9(self) -> None:
        """kill -9 the server's process group (server and Spark JVM; no release, no cleanup)."""
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            self.proc = None

    def kill_tree(self) -> None:
        """kill -9 the server and every process it started (Spark's Python workers have their own group)."""
        assert self.proc is not None
        kill_tree(self.proc.pid, self.kill9)


def status_of(server: ServerProc, cf_id: str) -> dict[str, Any]:
    """GET /changefeeds/{id}/status."""
    with server.client() as c:
        st: dict[str, Any] = c.changefeed_status(cf_id)
        return st
