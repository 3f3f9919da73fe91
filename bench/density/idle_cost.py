"""Where one idle changefeed's CPU goes, process by process.

Usage (from the repository root)::

    .venv/bin/python bench/density/idle_cost.py [--idle 60] [--variant '--trigger-interval "1 second"']
                                                [--baseline-src OTHER_CHECKOUT/src]

One upstream MariaDB, then for each variant (the default ``sparkcdc run`` first, the baseline,
then each ``--variant``, whose words are added to the command line; with ``--baseline-src`` the
baseline is the default run with the package imported from another checkout's ``src``, e.g. the
commit before a change, and this checkout's default run comes second) a ``sparkcdc run`` to a CSV
storage sink: after its first checkpoint and a settling pause, the CPU time (user + system, from
``/proc``, so a loaded machine changes the figures little) each process of its tree and the
upstream's mariadbd used over ``--idle`` seconds of a quiet upstream, in % of one core, the
total's ratio to the baseline's, and the load average. The processes are named by role: the
``sparkcdc run`` driver, the Spark JVM, the streaming source's Python runner, Spark's Python
workers.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sparkcdc.services.common import wait_until  # noqa: E402
from sparkcdc.services.mariadb import LocalMariaDB  # noqa: E402


def role(proc: psutil.Process) -> str:
    """What a process of the tree is, from its command line."""
    cmd = " ".join(proc.cmdline())
    if "python_streaming_source_runner" in cmd:
        return "source runner"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "python worker"
    if "java" in proc.name() or "java" in cmd.split(" ", 1)[0]:
        return "spark jvm"
    if "sparkcdc.cli.main" in cmd:
        return "driver"
    return proc.name()


def cpu_times(procs: list[psutil.Process]) -> dict[tuple[int, str], float]:
    """CPU seconds (user + system) of each process still alive, by (pid, role)."""
    out = {}
    for p in procs:
        try:
            t = p.cpu_times()
            out[(p.pid, role(p))] = t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return out


def measure(
    up: LocalMariaDB, words: list[str], idle: float, work: Path, src: str | None = None
) -> dict[str, float]:
    """Run one changefeed, wait for its first checkpoint, then the CPU per role over ``idle`` s."""
    out = Path(tempfile.mkdtemp(prefix="idle-", dir=work))
    log = open(out / "run.log", "w")
    cmd = [
        sys.executable,
        "-m",
        "sparkcdc.cli.main",
        "run",
        "--upstream-uri",
        up.uri,
        "--sink-uri",
        f"file://{out}/sink?protocol=csv",
        "-c",
        "idle",
        "--data-dir",
        str(out / "data"),
        *words,
    ]
    env = None
    if src is not None:
        # before the installed package on sys.path, in the driver and in every Python process Spark starts
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        checkpoint = out / "data" / "idle" / "checkpoint.json"

        def started() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"sparkcdc run exited with {proc.returncode}: see {out / 'run.log'}")
            return checkpoint.exists()

        wait_until(started, timeout=180, what="the changefeed's first checkpoint", interval=0.5)
        time.sleep(10)  # the first batches' planning and imports are not idle
        parent = psutil.Process(proc.pid)
        mariadbd = psutil.Process(up.proc.pid) if up.proc is not None else None
        tree = [parent, *parent.children(recursive=True)] + ([mariadbd] if mariadbd else [])
        before, t0 = cpu_times(tree), time.monotonic()
        time.sleep(idle)
        after, dt = cpu_times(tree), time.monotonic() - t0
        by_role: dict[str, float] = {}
        for key, secs in after.items():
            name = "upstream mariadbd" if mariadbd is not None and key[0] == mariadbd.pid else key[1]
            by_role[name] = by_role.get(name, 0.0) + 100 * (secs - before.get(key, 0.0)) / dt
        return by_role
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--idle", type=float, default=60, help="seconds of idle measured (default 60)")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="words added to `sparkcdc run` (split as a shell does), measured after the default",
    )
    ap.add_argument(
        "--baseline-src",
        default=None,
        help="another checkout's src folder: the baseline is the default run importing sparkcdc from it",
    )
    args = ap.parse_args(argv)
    runs: list[tuple[str, list[str], str | None]] = []
    if args.baseline_src:
        src = str(Path(args.baseline_src).resolve())
        if not (Path(src) / "sparkcdc" / "__init__.py").exists():
            ap.error(
                f"--baseline-src {args.baseline_src!r}: no sparkcdc package there (give a checkout's src)"
            )
        runs.append((f"default, sparkcdc from {src} (baseline)", [], src))
    runs.append(("default" if runs else "default (baseline)", [], None))
    runs += [(v, shlex.split(v), None) for v in args.variant]
    work = Path(tempfile.mkdtemp(prefix="sparkcdc-idle-cost-"))
    with LocalMariaDB() as up:
        conn = up.connect(None)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO shop.t VALUES (1, 'a')")
        conn.commit()
        conn.close()
        base = 0.0
        for label, words, src_dir in runs:
            load = os.getloadavg()[0]
            by_role = measure(up, words, args.idle, work, src_dir)
            total = sum(by_role.values())
            base = base or total
            print(
                f"{label}: {total:.1f} % of a core over {args.idle:.0f} s idle, {total / base:.2f}x the "
                f"baseline; load {load:.2f} -> {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            for name, pct in sorted(by_role.items(), key=lambda kv: -kv[1]):
                print(f"  {name:18} {pct:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
