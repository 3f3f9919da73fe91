"""Start a real S3-compatible server (moto's ``moto_server``) on 127.0.0.1.

Used by the storage-sink tests, demos and benchmarks::

    with LocalS3() as s3:
        s3.create_bucket("cdc")
        uri = s3.sink_uri("cdc/prefix", protocol="csv")
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from sparkcdc.services.common import free_port, stop_process, wait_until

ACCESS_KEY = "sparkcdc"
SECRET_KEY = "sparkcdc-secret"
REGION = "us-east-1"


def _moto_server() -> list[str]:
    exe = Path(sys.executable).with_name("moto_server")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("moto_server")
    if found:
        return [found]
    raise FileNotFoundError("moto_server not found: pip install 'moto[server]' (the dev extra has it)")


class LocalS3:
    """A throw-away moto S3 server; ``stop()`` (or leaving the ``with``) ends it."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="sparkcdc-moto-", suffix=".log", delete=False)

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> LocalS3:
        """Start the server and wait until it answers."""
        env = dict(os.environ)
        env.setdefault("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        env.setdefault("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        self.proc = subprocess.Popen(
            [*_moto_server(), "-H", self.host, "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}: {self._tail_log()}")
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as resp:
                return bool(resp.status == 200)

        try:
            wait_until(ready, timeout=timeout, what=f"moto S3 on port {self.port}", on_timeout=self._tail_log)
        except BaseException:
            self.stop()
            raise
        return self

    def _tail_log(self) -> str:
        try:
            return Path(self._log.name).read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def storage_options(self) -> dict[str, Any]:
        """s3fs keyword arguments for this server."""
        return {
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "endpoint_url": self.endpoint,
            "client_kwargs": {"region_name": REGION},
            "skip_instance_cache": True,
        }

    def filesystem(self) -> Any:
        """An s3fs filesystem talking to this server."""
        import s3fs

        return s3fs.S3FileSystem(**self.storage_options())

    def create_bucket(self, name: str) -> None:
        """Create a bucket."""
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )
        client.create_bucket(Bucket=name)

    def sink_uri(self, bucket_and_prefix: str, **params: str) -> str:
        """An ``s3://`` sink URI with this server's endpoint and credentials."""
        q = {
            "endpoint": self.endpoint,
            "access-key": ACCESS_KEY,
            "secret-access-key": SECRET_KEY,
            "region": REGION,
        }
        q.update(params)
        return f"s3://{bucket_and_prefix}?" + "&".join(f"{k}={v}" for k, v in q.items())

    def stop(self) -> None:
        """Stop the server."""
        stop_process(self.proc, grace=15)
        self.proc = None
        self._log.close()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass  # already removed

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
