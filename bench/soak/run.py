"""Soak: a steady write load for N minutes while ``sparkcdc run`` is kill -9'd at random points.

Usage (from the repository root)::

    .venv/bin/python bench/soak/run.py --minutes 30 [--kill-min 60] [--kill-max 180] [--pause 0.02]

Starts a private upstream and downstream MariaDB. A writer thread commits small mixed
transactions (inserts, updates, key moves, deletes; ``tests/e2e/workload.SteadyLoad``) with
``--pause`` seconds between them for the whole run. ``sparkcdc run`` (file sink, CSV with
commit-ts, one changefeed id and data dir) follows it; every ``--kill-min``..``--kill-max``
seconds the whole process group (driver, Spark JVM, Python workers) gets SIGKILL and is
started again at once. At the end the writer stops, a last run goes to ``--target-ts`` (the
upstream's ts after the last write), ``sparkcdc consumer --once`` replays the files into the
downstream, and every table is compared row by row.

It prints the transactions written, the kills survived, the mismatching tables (target 0),
and the changefeed's memory over time: the RSS of the process tree (driver, JVM, Python
workers) sampled every 5 s, as a minute-by-minute series with each run's peak (target: flat).
It is a script, not a test: the figures go into the notes of the work that ran it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.e2e.workload import (  # noqa: E402
    CliProcess,
    SteadyLoad,
    Workload,
    create_tables,
    diff_tables,
    replay_once,
    tso,
)

from sparkcdc.services.mariadb import LocalMariaDB  # noqa: E402

SCHEMA = "soak"
CHANGEFEED = "soak"


def tree_rss_mb(pid: int) -> float:
    """RSS of a process and its descendants, in MB (0 when it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--kill-min", type=float, default=60.0, help="shortest time between kills, seconds")
    ap.add_argument("--kill-max", type=float, default=180.0, help="longest time between kills, seconds")
    ap.add_argument("--pause", type=float, default=0.02, help="seconds between the writer's transactions")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    if not 0 < args.kill_min <= args.kill_max:
        ap.error(f"need 0 < --kill-min <= --kill-max, got {args.kill_min} and {args.kill_max}")
    rnd = random.Random(args.seed)

    with TemporaryDirectory(prefix="sparkcdc-soak-") as tmp, LocalMariaDB() as up, LocalMariaDB() as down:
        work = Path(tmp)
        start_ts = tso(up.uri)
        create_tables(up, SCHEMA)
        Workload(up, SCHEMA, rows=40).phase_inserts()
        sink_uri = f"file://{work / 'sink'}?protocol=csv"
        config = work / "cf.toml"
        config.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\n')
        common = [
            "run",
            "--upstream-uri",
            up.uri,
            "--sink-uri",
            sink_uri,
            "--config",
            str(config),
            "-c",
            CHANGEFEED,
            "--data-dir",
            str(work / "data"),
            "--master",
            args.master,
            "--no-progress",
        ]
        load = SteadyLoad(up, SCHEMA, pause=args.pause, seed=args.seed)
        load.start()
        t0 = time.monotonic()
        deadline = t0 + args.minutes * 60
        samples: list[tuple[float, float]] = []
        peaks: list[float] = []
        kills = 0
        n = 0
        while time.monotonic() < deadline:
            n += 1
            first = ["--start-ts", str(start_ts)] if n == 1 else []
            run = CliProcess([*common, *first], work / f"run{n}.log")
            peak = 0.0
            kill_at = min(deadline, time.monotonic() + rnd.uniform(args.kill_min, args.kill_max))
            while time.monotonic() < kill_at and run.proc.poll() is None:
                rss = tree_rss_mb(run.pid)
                samples.append((time.monotonic() - t0, rss))
                peak = max(peak, rss)
                time.sleep(5)
            if run.proc.poll() is not None:
                print(f"run {n} exited by itself with {run.proc.returncode}:\n{run.output()[-3000:]}")
                return 1
            run.kill9()
            kills += 1
            peaks.append(peak)
            print(
                f"{(time.monotonic() - t0) / 60:5.1f} min: kill {kills} (run peak RSS {peak:,.0f} MB)",
                flush=True,
            )
        txns = load.stop()
        target_ts = tso(up.uri)
        final = CliProcess([*common, "--target-ts", str(target_ts)], work / "final.log")
        rc = final.wait(timeout=1200)
        if rc != 0:
            print(f"the final run exited with {rc}:\n{final.output()[-3000:]}")
            return 1
        replay_once(sink_uri, down.port, "soak_progress", config, timeout=1200)
        problems = diff_tables(up, down, SCHEMA)

    print()
    print(f"minutes {args.minutes:g}, load transactions {txns:,}, kills survived {kills}")
    print(f"mismatching tables: {len(problems)}" + "".join(f"\n  {p}" for p in problems))
    print("changefeed RSS (process tree), MB, by minute: median / max")
    by_minute: dict[int, list[float]] = {}
    for t, rss in samples:
        if rss > 0:
            by_minute.setdefault(int(t // 60), []).append(rss)
    for m in sorted(by_minute):
        v = by_minute[m]
        print(f"  {m:3d}: {sorted(v)[len(v) // 2]:7,.0f} / {max(v):7,.0f}")
    print("peak RSS of each run, MB: " + ", ".join(f"{p:,.0f}" for p in peaks))
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")
    return 0 if not problems else 2


if __name__ == "__main__":
    sys.exit(main())
