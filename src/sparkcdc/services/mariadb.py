"""Start a real MariaDB with a ROW binlog in a temporary directory on 127.0.0.1.

Used by the tests, ``make demo`` and the benchmarks::

    with LocalMariaDB() as db:
        conn = db.connect()
        print(db.uri)   # mysql://root:@127.0.0.1:PORT/
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql

from sparkcdc import mysql_client
from sparkcdc.services.common import free_port, stop_process, wait_until

BINLOG_ARGS = (
    "--log-bin=mysql-bin",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
)


def _find(*names: str) -> str:
    for n in names:
        p = shutil.which(n) or (f"/usr/sbin/{n}" if os.path.exists(f"/usr/sbin/{n}") else None)
        if p:
            return p
    raise FileNotFoundError(
        f"none of {names} found: install MariaDB (apt-get install mariadb-server) or run `make setup`"
    )


class LocalMariaDB:
    """A throw-away MariaDB server; ``stop()`` (or leaving the ``with``) removes it."""

    def __init__(
        self,
        *,
        port: int | None = None,
        datadir: str | None = None,
        extra_args: tuple[str, ...] = (),
        binlog: bool = True,
        keep: bool = False,
        server_id: int = 1,
    ) -> None:
        """``server_id``: distinct per server of one replication topology (a native replica needs its own)."""
        self.server_id = server_id
        self.port = port or free_port()
        self._own_dir = datadir is None
        self.basedir = Path(datadir or tempfile.mkdtemp(prefix="sparkcdc-mariadb-"))
        self.datadir = self.basedir / "data"
        self.socket = str(self.basedir / "mysqld.sock")
        # A private tmpdir: instances started at the same time must not share scratch files.
        self.tmpdir = self.basedir / "tmp"
        self.extra_args = extra_args
        self.binlog = binlog
        self.keep = keep
        self.proc: subprocess.Popen[bytes] | None = None
        self.user = "root"
        self.password = ""
        self.host = "127.0.0.1"

    @property
    def uri(self) -> str:
        """The upstream URI for sparkcdc (``mysql://root:@127.0.0.1:PORT/``)."""
        return f"mysql://{self.user}:{self.password}@{self.host}:{self.port}/"

    @property
    def log_path(self) -> Path:
        return self.basedir / "mariadb.err"

    def start(self, timeout: float = 60.0) -> LocalMariaDB:
        """Initialise the data directory if needed, start the server and wait until it answers."""
        if not (self.datadir / "mysql").exists():
            self.datadir.mkdir(parents=True, exist_ok=True)
            self.tmpdir.mkdir(parents=True, exist_ok=True)
            cmd = [
                _find("mariadb-install-db", "mysql_install_db"),
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--tmpdir={self.tmpdir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root" if os.geteuid() == 0 else f"--user={os.getenv('USER', 'nobody')}",
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if res.returncode != 0:
                raise RuntimeError(f"mariadb-install-db failed: {res.stdout}\n{res.stderr}")
        args = [
            _find("mariadbd", "mysqld"),
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--tmpdir={self.tmpdir}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--socket={self.socket}",
            f"--pid-file={self.basedir / 'mysqld.pid'}",
            f"--log-error={self.log_path}",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=256M",
            "--innodb-log-file-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
            "--sync-binlog=0",
            "--max-allowed-packet=1G",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--default-time-zone=+00:00",
            "--max-connections=500",
        ]
        if os.geteuid() == 0:
            args.append("--user=root")
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        args.append(f"--server-id={self.server_id}")
        if self.binlog:
            args.extend(BINLOG_ARGS)
        args.extend(self.extra_args)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.proc.returncode}: {self._tail_log()}")
            conn = self.connect(connect_timeout=1)
            conn.close()
            return True

        try:
            wait_until(ready, timeout=timeout, what=f"MariaDB on port {self.port}", on_timeout=self._tail_log)
        except BaseException:
            self.stop()
            raise
        return self

    def _tail_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def connect(self, database: str | None = None, **kw: Any) -> pymysql.connections.Connection:
        """A new PyMySQL connection as root (autocommit on)."""
        params: dict[str, Any] = dict(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=database,
            autocommit=True,
            charset="utf8mb4",
        )
        params.update(kw)
        return mysql_client.connect(**params)

    def execute(self, *statements: str, database: str | None = None) -> None:
        """Run statements on a fresh autocommit connection."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                for s in statements:
                    cur.execute(s)
        finally:
            conn.close()

    def query(self, sql: str, args: Any = None, database: str | None = None) -> list[tuple[Any, ...]]:
        """Rows of one SELECT."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    def replicate_from(self, primary: LocalMariaDB, *, timeout: float = 60.0) -> None:
        """Make this server a native GTID replica of ``primary`` and wait until both its threads run."""
        if primary.server_id == self.server_id:
            raise ValueError(f"a replica needs its own server_id; both are {self.server_id}")
        self.execute(
            "STOP SLAVE",
            "RESET SLAVE ALL",
            f"CHANGE MASTER TO MASTER_HOST='{primary.host}', MASTER_PORT={primary.port}, "
            f"MASTER_USER='{primary.user}', MASTER_PASSWORD='{primary.password}', "
            "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
            "START SLAVE",
        )

        def running() -> bool:
            st = self.slave_status()
            self._raise_slave_error(st)
            return st.get("Slave_IO_Running") == "Yes" and st.get("Slave_SQL_Running") == "Yes"

        wait_until(running, timeout=timeout, what=f"replica on port {self.port} to connect to {primary.port}")

    def slave_status(self) -> dict[str, Any]:
        """``SHOW SLAVE STATUS`` as a dict (empty when this server replicates nothing)."""
        conn = self.connect()
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute("SHOW SLAVE STATUS")
                row = cur.fetchone()
                return dict(row) if row else {}
        finally:
            conn.close()

    def _raise_slave_error(self, st: dict[str, Any]) -> None:
        for key in ("Last_SQL_Error", "Last_IO_Error"):
            if st.get(key):
                raise RuntimeError(f"replica on port {self.port} stopped: {key}: {st[key]}")

    def wait_caught_up(self, primary: LocalMariaDB, *, timeout: float = 120.0) -> None:
        """Wait until this replica applied every transaction in ``primary``'s binlog so far."""
        pos = str(primary.query("SELECT @@gtid_binlog_pos")[0][0] or "")
        if not pos:
            return
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            got = self.query("SELECT MASTER_GTID_WAIT(%s, %s)", (pos, max(0.1, min(left, 2.0))))[0][0]
            if got == 0:
                return
            self._raise_slave_error(self.slave_status())
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"replica on port {self.port} did not reach {primary.port}'s GTID position {pos} "
                    f"within {timeout:.0f}s (at {self.query('SELECT @@gtid_slave_pos')[0][0]})"
                )

    def stop(self) -> None:
        """Stop the server and, unless ``keep``, remove its directory."""
        stop_process(self.proc, grace=30)
        self.proc = None
        if self._own_dir and not self.keep:
            shutil.rmtree(self.basedir, ignore_errors=True)

    def kill(self) -> None:
        """kill -9 the server (keeps the data directory)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def __enter__(self) -> LocalMariaDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
