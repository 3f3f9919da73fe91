"""Start a real PostgreSQL 15 in a temporary directory on 127.0.0.1 (the meta database for several servers).

::

    with LocalPostgres() as pg:
        uri = pg.create_database("meta")   # postgresql://sparkcdc:...@127.0.0.1:PORT/meta

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres``
user that the Debian package creates (or as ``LocalPostgres(run_as=...)``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from sparkcdc.services.common import free_port, wait_until

DEFAULT_BINDIR = "/usr/lib/postgresql/15/bin"


def _bindir() -> Path:
    env = os.environ.get("SPARKCDC_PG_BINDIR")
    for cand in [env, DEFAULT_BINDIR, *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]:
        if cand and (Path(cand) / "initdb").exists():
            return Path(cand)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise FileNotFoundError(
        "PostgreSQL's initdb was not found: apt-get install postgresql-15, or set SPARKCDC_PG_BINDIR"
    )


class LocalPostgres:
    """A throw-away PostgreSQL server; ``stop()`` (or leaving the ``with``) removes it."""

    def __init__(
        self,
        *,
        port: int | None = None,
        user: str = "sparkcdc",
        password: str = "sparkcdc-secret",
        run_as: str | None = None,
        keep: bool = False,
    ) -> None:
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.user = user
        self.password = password
        self.keep = keep
        self.bindir = _bindir()
        self.basedir = Path(tempfile.mkdtemp(prefix="sparkcdc-pg-"))
        self.datadir = self.basedir / "data"
        self.proc: subprocess.Popen[bytes] | None = None
        self.run_as = run_as if run_as is not None else ("postgres" if os.geteuid() == 0 else None)

    @property
    def log_path(self) -> Path:
        return self.basedir / "postgres.log"

    def uri(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URI for a database on this server."""
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def _popen_kw(self) -> dict[str, Any]:
        if self.run_as is None:
            return {}
        pw = pwd.getpwnam(self.run_as)
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _chown(self) -> None:
        if self.run_as is None:
            return
        pw = pwd.getpwnam(self.run_as)
        for root, dirs, files in os.walk(self.basedir):
            os.chown(root, pw.pw_uid, pw.pw_gid)
            for name in dirs + files:
                os.chown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)

    def start(self, timeout: float = 60.0) -> LocalPostgres:
        """initdb (with a password for ``user``), start ``postgres`` and wait until it accepts logins."""
        pwfile = self.basedir / "pwfile"
        pwfile.write_text(self.password + "\n")
        self._chown()
        res = subprocess.run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                self.user,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.basedir,
            **self._popen_kw(),
        )
        pwfile.unlink()
        if res.returncode != 0:
            raise RuntimeError(f"initdb failed: {res.stdout}\n{res.stderr}")
        log_file = open(self.log_path, "ab")  # closed by stop()
        self._log_file = log_file
        self.proc = subprocess.Popen(
            [
                str(self.bindir / "postgres"),
                "-D",
                str(self.datadir),
                "-p",
                str(self.port),
                "-h",
                self.host,
                "-k",
                str(self.basedir),
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "shared_buffers=32MB",
                "-c",
                "max_connections=200",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=self.basedir,
            **self._popen_kw(),
        )

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: {self._tail_log()}")
            with self.connect():
                return True

        try:
            wait_until(
                ready, timeout=timeout, what=f"PostgreSQL on port {self.port}", on_timeout=self._tail_log
            )
        except BaseException:
            self.stop()
            raise
        return self

    def connect(self, database: str = "postgres") -> Any:
        """A new psycopg connection (autocommit on)."""
        import psycopg

        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            dbname=database,
            autocommit=True,
            connect_timeout=2,
        )

    def create_database(self, name: str) -> str:
        """Create (or recreate) a database; returns its URI."""
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.uri(name)

    def _tail_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server (fast shutdown) and, unless ``keep``, remove its directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # "fast" shutdown: disconnect clients, then exit
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        if getattr(self, "_log_file", None) is not None:
            self._log_file.close()
        if not self.keep:
            shutil.rmtree(self.basedir, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
