"""Helpers shared by the local-service launchers: free ports and deadline polling."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            got = probe()
            if got:
                return got
        except Exception as exc:  # the probe's failure is the reason we keep polling
            last_exc = exc
        if time.monotonic() >= deadline:
            extra = on_timeout() if on_timeout else ""
            raise TimeoutError(f"{what} not ready after {timeout:.0f}s (last error: {last_exc!r}) {extra}")
        time.sleep(interval)


def port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def stop_process(proc: subprocess.Popen[bytes] | None, grace: float = 15.0) -> None:
    """SIGTERM a child process, SIGKILL it if it has not exited after ``grace`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def kill_tree(pid: int, kill_root: Callable[[], None]) -> None:
    """``kill_root()`` (a SIGKILL of the process ``pid``, or of its group), then SIGKILL every process
    it had started: Spark's Python workers sit in process groups of their own."""
    import psutil

    tree = psutil.Process(pid).children(recursive=True)
    kill_root()
    for p in tree:
        try:
            p.kill()
        except psutil.Error:
            pass  # gone with its parent
    psutil.wait_procs(tree, timeout=30)
