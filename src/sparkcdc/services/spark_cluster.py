"""Start a real Spark standalone cluster (one master, N workers) from the pyspark wheel on 127.0.0.1.

Each worker runs in a mount namespace of its own with a private tmpfs on ``/tmp``, so the worker, its
executors and their Python workers behave like another host: nothing one of them writes under ``/tmp``
is visible to the driver or to the other workers. Used by the cluster tests and by
``scripts/local-cluster.sh``::

    with LocalSparkCluster(workers=2) as cluster:
        subprocess.run([sys.executable, "driver.py"], env=cluster.driver_env(), check=True)
        cluster.kill_worker(0)      # kill -9 of one "host" (worker, executors, Python workers)
        cluster.restart_worker(0)   # back, with a fresh /tmp

A driver reaches the cluster with ``SPARKCDC_SPARK_MASTER`` (set by ``driver_env()``) and the
settings of ``spark_conf()``. Isolation needs ``unshare``/``mount``, i.e. root; without them the
workers share the host's ``/tmp`` and ``isolated`` is False.

As a command (``scripts/local-cluster.sh`` calls it)::

    python -m sparkcdc.services.spark_cluster start|stop|status [--dir .local-cluster]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import psutil

from sparkcdc.services.common import free_port, wait_until

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Inside a worker's mount namespace /tmp is its own tmpfs, so these paths are private to the worker.
ISOLATED_WORK_DIR = "/tmp/spark-work"
ISOLATED_LOCAL_DIRS = "/tmp/spark-local"
UNSHARE = ("unshare", "--mount", "--propagation", "private")
# Inside a worker's mount namespace: keep the host's /tmp reachable at /mnt for a moment, put a private
# tmpfs over /tmp, bind back the paths given before "--" (they are under the host's /tmp), hide /mnt.
PRIVATE_TMP = (
    "mount --bind /tmp /mnt && mount -t tmpfs tmpfs /tmp || exit 1; "
    'while [ "$1" != "--" ]; do mkdir -p "$1" && mount --bind "/mnt${1#/tmp}" "$1" || exit 1; shift; done; '
    'shift; umount -l /mnt; exec "$@"'
)


def host_paths_under_tmp() -> list[str]:
    """What a worker must still see although it is under /tmp: this interpreter's environment and a checkout.

    A checkout (and its ``.venv``) cloned under /tmp would otherwise vanish under the worker's private
    /tmp, and with it the Python that Spark starts for every task.
    """
    import sparkcdc

    package_root = Path(sparkcdc.__file__).resolve().parents[2]  # the checkout for src/sparkcdc/
    found = sorted({str(Path(p).resolve()) for p in (sys.prefix, package_root)})
    under = [p for p in found if p.startswith("/tmp/")]
    return [p for p in under if not any(p != q and p.startswith(q + "/") for q in under)]


STATE_FILE = "state.json"


def spark_home() -> str:
    """The directory of the installed ``pyspark`` package (it holds ``bin/spark-class`` and the jars)."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent)


def isolation_available() -> bool:
    """Whether this process may give a child a private tmpfs on /tmp (``unshare --mount`` + ``mount``)."""
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(
            [*UNSHARE, "sh", "-c", PRIVATE_TMP, "sh", *host_paths_under_tmp(), "--", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@dataclass
class _Member:
    """One process tree of the cluster: the master or one worker, started in a session of its own."""

    name: str
    pid: int
    create_time: float
    web_port: int
    proc: subprocess.Popen[bytes] | None = None

    def processes(self) -> list[psutil.Process]:
        """The live processes of this tree: the root, its descendants and anything left in its session."""
        found: dict[int, psutil.Process] = {}
        try:
            root = psutil.Process(self.pid)
            if abs(root.create_time() - self.create_time) < 1.0:
                found[root.pid] = root
                for child in root.children(recursive=True):
                    found[child.pid] = child
        except psutil.Error:
            pass  # the root is gone; orphans are still in its session
        # start_new_session=True made the root a session leader: the session id is its pid, and children
        # keep it even when they are re-parented or (like pyspark's daemon) start a process group of their own.
        for p in psutil.process_iter(["create_time"]):
            if p.pid in found:
                continue
            try:
                if os.getsid(p.pid) == self.pid and p.info["create_time"] >= self.create_time - 1.0:
                    found[p.pid] = p
            except (OSError, psutil.Error):
                continue
        return [p for p in sorted(found.values(), key=lambda p: p.pid) if _running(p)]

    def reap(self) -> None:
        """Collect the exit status of the root if this process started it."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass  # still running: nothing to reap yet
            self.proc = None


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(procs: list[psutil.Process], timeout: float) -> None:
    """Poll until none of ``procs`` runs (a zombie counts as gone) or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while any(_running(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.02)


def _signal_tree(member: _Member, sig: int, timeout: float) -> None:
    """Send ``sig`` to every process of the tree until none is left or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        procs = member.processes()
        if not procs:
            member.reap()
            return
        if time.monotonic() >= deadline:
            member.reap()
            if sig == signal.SIGKILL:
                raise TimeoutError(f"{member.name}: processes {[p.pid for p in procs]} survived SIGKILL")
            return
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass  # exited meanwhile
        # then look again: a process forked meanwhile (a Python worker) is in the next scan
        _wait_gone(procs, min(1.0, max(0.0, deadline - time.monotonic())))


class LocalSparkCluster:
    """A throw-away Spark standalone master with ``workers`` workers on 127.0.0.1; ``stop()`` ends it all."""

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        isolate: bool = True,
        *,
        log_dir: str | Path | None = None,
    ) -> None:
        if workers < 1 or cores < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.isolate = isolate
        self.isolated = isolate
        self.host = "127.0.0.1"
        self.port = free_port()
        self.web_port = free_port()
        self._own_log_dir = log_dir is None
        self.log_dir = (
            Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="sparkcdc-spark-"))
        )
        self.spark_home = spark_home()
        self.python = sys.executable
        self._master: _Member | None = None
        self._workers: list[_Member | None] = [None] * workers

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``."""
        return f"spark://{self.host}:{self.port}"

    @property
    def web_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the master's web UI (``/json/`` is its status)."""
        return f"http://{self.host}:{self.web_port}"

    # -- starting -------------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=self.spark_home,
            SPARK_LOCAL_IP=self.host,
            PYSPARK_PYTHON=self.python,
        )
        return env

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], web_port: int) -> _Member:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # The fd is opened here, before any unshare: it keeps pointing at this file inside the namespace.
        with open(self.log_dir / f"{name}.log", "ab") as logf:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a session of its own: a kill reaches this tree only
            )
        try:
            created = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            created = time.time()
        return _Member(name=name, pid=proc.pid, create_time=created, web_port=web_port, proc=proc)

    def _start_master(self) -> None:
        argv = [
            f"{self.spark_home}/bin/spark-class",
            MASTER_CLASS,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--webui-port",
            str(self.web_port),
        ]
        self._master = self._spawn("master", argv, self._env(), self.web_port)

    def _start_worker(self, i: int) -> None:
        web_port = free_port()  # a new port per start: it tells this instance apart in the master's list
        worker_args = [
            WORKER_CLASS,
            self.master_url,
            "--host",
            self.host,
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            str(web_port),
        ]
        spark_class = f"{self.spark_home}/bin/spark-class"
        env = self._env()
        if self.isolated:
            env["SPARK_LOCAL_DIRS"] = ISOLATED_LOCAL_DIRS
            keep = host_paths_under_tmp()
            argv = [*UNSHARE, "sh", "-c", PRIVATE_TMP, "sh", *keep, "--", spark_class, *worker_args]
            argv += ["--work-dir", ISOLATED_WORK_DIR]
        else:
            base = self.log_dir / f"worker-{i}"
            (base / "local").mkdir(parents=True, exist_ok=True)
            env["SPARK_LOCAL_DIRS"] = str(base / "local")
            argv = [spark_class, *worker_args, "--work-dir", str(base / "work")]
        self._workers[i] = self._spawn(f"worker-{i}", argv, env, web_port)

    def start(self, timeout: float = 90.0) -> LocalSparkCluster:
        """Start the master and the workers and wait until every worker is ALIVE at the master."""
        if self._master is not None:
            return self
        if self.isolate and not isolation_available():
            self.isolated = False
            log.warning(
                "cannot unshare a mount namespace (not root?): the Spark workers share the host's /tmp "
                "and do not behave like separate hosts"
            )
        deadline = time.monotonic() + timeout
        try:
            self._start_master()
            wait_until(
                self._master_ready,
                timeout=max(1.0, deadline - time.monotonic()),
                what=f"Spark master on {self.master_url}",
                interval=0.2,
                on_timeout=self._tail_logs,
            )
            for i in range(self.workers):
                self._start_worker(i)
            for i in range(self.workers):
                self._wait_worker_alive(i, max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        return self

    def _master_ready(self) -> bool:
        assert self._master is not None
        if self._master.proc is not None and self._master.proc.poll() is not None:
            raise RuntimeError(f"the Spark master exited with {self._master.proc.returncode}")
        return self._status().get("status") == "ALIVE"

    def _wait_worker_alive(self, i: int, timeout: float) -> None:
        def alive() -> bool:
            member = self._worker(i)
            if member.proc is not None and member.proc.poll() is not None:
                raise RuntimeError(f"worker {i} exited with {member.proc.returncode}")
            return self._worker_entry(i) is not None

        wait_until(
            alive,
            timeout=timeout,
            what=f"Spark worker {i} at {self.master_url}",
            interval=0.2,
            on_timeout=self._tail_logs,
        )

    def _worker(self, i: int) -> _Member:
        member = self._workers[i]
        if member is None:
            raise RuntimeError(f"worker {i} is not running")
        return member

    # -- looking -------------------------------------------------------------------------------------

    def _status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=2) as resp:
            status: dict[str, Any] = json.load(resp)
        return status

    def alive_workers(self) -> list[dict[str, Any]]:
        """The workers the master lists as ALIVE (it keeps DEAD entries of killed workers)."""
        return [w for w in self._status().get("workers", []) if w.get("state") == "ALIVE"]

    def _worker_entry(self, i: int) -> dict[str, Any] | None:
        """Worker i's ALIVE entry at the master (matched by the web UI port of its current instance)."""
        member = self._workers[i]
        if member is None:
            return None
        for w in self.alive_workers():
            if urlparse(str(w.get("webuiaddress", ""))).port == member.web_port:
                return w
        return None

    def worker_processes(self, i: int) -> list[psutil.Process]:
        """Worker i's JVM, its executor JVMs and their Python workers (its whole process tree)."""
        member = self._workers[i]
        return member.processes() if member is not None else []

    def _tail_logs(self) -> str:
        tails = []
        for path in sorted(self.log_dir.glob("*.log")):
            try:
                tails.append(f"--- {path.name}:\n{path.read_text(errors='replace')[-2000:]}")
            except OSError:
                continue
        return "\n".join(tails)

    # -- breaking -------------------------------------------------------------------------------------

    def kill_worker(self, i: int, timeout: float = 30.0) -> None:
        """SIGKILL worker i's whole tree at once (a host's Spark processes dying) and wait until they are gone."""
        member = self._worker(i)
        _signal_tree(member, signal.SIGKILL, timeout)
        # The master drops a worker as soon as its connection breaks; wait for that so that
        # alive_workers() tells the truth when this returns.
        wait_until(
            lambda: self._worker_entry(i) is None,
            timeout=timeout,
            what=f"the master to notice that worker {i} is gone",
            interval=0.1,
        )
        self._workers[i] = None

    def restart_worker(self, i: int, timeout: float = 60.0) -> None:
        """Start worker i again (a new private /tmp, killing the old tree if any) and wait until it is ALIVE."""
        if self._master is None:
            raise RuntimeError("the cluster is not started")
        if self._workers[i] is not None:
            self.kill_worker(i, timeout=timeout)
        self._start_worker(i)
        try:
            self._wait_worker_alive(i, timeout)
        except BaseException:
            _signal_tree(self._worker(i), signal.SIGKILL, 30)
            self._workers[i] = None
            raise

    def stop(self) -> None:
        """Stop the workers (with their executors and Python workers) and the master; idempotent."""
        members = [m for m in self._workers if m is not None]
        if self._master is not None:
            members.append(self._master)
        # SIGTERM to all at once lets the JVMs end cleanly; whatever is left after a moment gets SIGKILL.
        procs = [p for m in members for p in m.processes()]
        for p in procs:
            try:
                p.terminate()
            except psutil.Error:
                pass  # exited meanwhile
        _wait_gone(procs, 3.0)
        for m in members:
            _signal_tree(m, signal.SIGKILL, 30.0)
        self._workers = [None] * self.workers
        self._master = None
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- using -------------------------------------------------------------------------------------

    def driver_env(self) -> dict[str, str]:
        """The environment for a driver subprocess: ``os.environ`` plus what reaching this cluster needs."""
        env = dict(os.environ)
        env.update(
            SPARK_LOCAL_IP=self.host,
            PYSPARK_PYTHON=self.python,
            PYSPARK_DRIVER_PYTHON=self.python,
            SPARKCDC_SPARK_MASTER=self.master_url,
        )
        return env

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings a driver (from the pyspark wheel) sets to run its executors on this cluster."""
        return {
            # The executors connect back to the driver: it must listen and advertise on loopback.
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            # An executor must fit into a worker's memory, or the master never starts one there.
            "spark.executor.memory": "1g",
            # One core per executor: with cores=1 per worker each worker holds exactly one executor.
            "spark.executor.cores": "1",
            # Take every core of the cluster, not more: the application never waits for cores that
            # do not exist (and after a worker loss it runs on what is left).
            "spark.cores.max": str(self.workers * self.cores),
            # The executors' Python workers run this interpreter (it has pyspark and sparkcdc).
            "spark.executorEnv.PYSPARK_PYTHON": self.python,
        }

    # -- state for the command line -------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """What ``from_state`` needs to find (and stop) the processes of this cluster again."""

        def member(m: _Member | None) -> dict[str, Any] | None:
            if m is None:
                return None
            return {"name": m.name, "pid": m.pid, "create_time": m.create_time, "web_port": m.web_port}

        return {
            "master_url": self.master_url,
            "web_url": self.web_url,
            "port": self.port,
            "web_port": self.web_port,
            "workers": self.workers,
            "cores": self.cores,
            "memory": self.memory,
            "isolated": self.isolated,
            "log_dir": str(self.log_dir),
            "master": member(self._master),
            "worker_members": [member(m) for m in self._workers],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LocalSparkCluster:
        """A handle on a cluster started by another process (``to_state()``), e.g. to stop it."""
        cluster = cls(
            workers=int(state["workers"]),
            cores=int(state["cores"]),
            memory=str(state["memory"]),
            isolate=bool(state["isolated"]),
            log_dir=state["log_dir"],
        )
        cluster.port = int(state["port"])
        cluster.web_port = int(state["web_port"])

        def member(d: dict[str, Any] | None) -> _Member | None:
            if d is None:
                return None
            return _Member(
                name=str(d["name"]),
                pid=int(d["pid"]),
                create_time=float(d["create_time"]),
                web_port=int(d["web_port"]),
            )

        cluster._master = member(state["master"])
        cluster._workers = [member(d) for d in state["worker_members"]]
        return cluster


# -- command line -------------------------------------------------------------------------------------


def _read_state(state_dir: Path) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads((state_dir / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    return state


def _cmd_start(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir)
    if _read_state(state_dir) is not None:
        print(f"a cluster is already recorded in {state_dir / STATE_FILE}; stop it first", file=sys.stderr)
        return 1
    cluster = LocalSparkCluster(
        workers=args.workers, cores=args.cores, memory=args.memory, log_dir=state_dir.resolve() / "logs"
    )
    cluster.start(timeout=args.timeout)
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / STATE_FILE).write_text(json.dumps(cluster.to_state(), indent=2) + "\n")
    # The processes run on in their own sessions after this command exits; `stop` ends them.
    print(f"master:  {cluster.master_url}")
    print(f"web UI:  {cluster.web_url}")
    print(f"workers: {len(cluster.alive_workers())} alive, isolated={cluster.isolated}")
    print(f"logs:    {cluster.log_dir}")
    print(f"driver:  export SPARKCDC_SPARK_MASTER={cluster.master_url} SPARK_LOCAL_IP=127.0.0.1")
    print("conf:    " + " ".join(f"--conf {k}={v}" for k, v in cluster.spark_conf().items()))
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    state_dir = Path(args.dir)
    state = _read_state(state_dir)
    if state is None:
        print("no cluster recorded; nothing to stop")
        return 0
    LocalSparkCluster.from_state(state).stop()
    (state_dir / STATE_FILE).unlink()
    print(f"stopped {state['master_url']}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state = _read_state(Path(args.dir))
    if state is None:
        print("no cluster recorded")
        return 1
    cluster = LocalSparkCluster.from_state(state)
    print(f"master:  {cluster.master_url}")
    print(f"web UI:  {cluster.web_url}")
    try:
        workers = cluster.alive_workers()
    except OSError as exc:
        print(f"the master does not answer: {exc}")
        return 1
    print(f"alive workers: {len(workers)} of {cluster.workers}")
    for w in workers:
        print(f"  {w['id']}  cores {w['coresused']}/{w['cores']}  memory {w['memoryused']}/{w['memory']} MB")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``start`` / ``stop`` / ``status`` of a detached local cluster recorded in a state directory."""
    parser = argparse.ArgumentParser(
        prog="python -m sparkcdc.services.spark_cluster", description=main.__doc__
    )
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument(
        "--dir",
        default=os.environ.get("SPARKCDC_CLUSTER_DIR", ".local-cluster"),
        help="state directory (default $SPARKCDC_CLUSTER_DIR or %(default)s)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--memory", default="2g")
    parser.add_argument("--timeout", type=float, default=90.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    commands = {"start": _cmd_start, "stop": _cmd_stop, "status": _cmd_status}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
