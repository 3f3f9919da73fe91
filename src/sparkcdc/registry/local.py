"""``LocalSchemaRegistry``: run ``sparkcdc schema-registry`` as a child process on 127.0.0.1 (tests, demos)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

import httpx

from sparkcdc.services.common import free_port, stop_process, wait_until


class LocalSchemaRegistry:
    """A registry subprocess with its SQLite store in ``data_dir`` (a temp dir unless given)."""

    def __init__(self, data_dir: str | Path | None = None, port: int | None = None) -> None:
        self._tmp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="sparkcdc-registry-")
        self.data_dir = Path(data_dir if data_dir is not None else self._tmp.name)  # type: ignore[union-attr]
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_path = self.data_dir / "registry.log"

    @property
    def url(self) -> str:
        """The registry's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def meta_uri(self) -> str:
        """Where the registry stores its state."""
        return f"sqlite:///{self.data_dir / 'registry.db'}"

    def start(self, timeout: float = 30.0) -> LocalSchemaRegistry:
        """Start the process and wait until ``GET /`` answers ``{}``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self._log_path, "ab")  # the child keeps its own copy of the descriptor
        cmd = [
            sys.executable,
            "-m",
            "sparkcdc.cli.main",
            "--log-level",
            "warning",
            "schema-registry",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--meta-uri",
            self.meta_uri,
        ]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        log.close()

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"schema registry exited with code {self.proc.returncode}: {self.log_tail()}"
                )
            return httpx.get(self.url + "/", timeout=2).text == "{}"

        try:
            wait_until(
                ready, timeout=timeout, what=f"schema registry on {self.url}", on_timeout=self.log_tail
            )
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self) -> str:
        """The last lines of the process log."""
        try:
            return self._log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the process (the store stays in ``data_dir``)."""
        if self.proc is None:
            return
        stop_process(self.proc, grace=timeout)
        self.proc = None

    def close(self) -> None:
        """Stop and remove a temporary data dir."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
