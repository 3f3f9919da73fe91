"""The crash-and-failover torture scenario for longer, several seeds in a row.

Usage (from the repository root)::

    .venv/bin/python bench/torture/run.py 600 [--faults 12] [--seeds 1,2 | --random-seeds 2]

Each seed runs ``tests/e2e/torture.py``'s scenario (two servers on PostgreSQL, storage, Kafka,
MySQL, HTTP and Iceberg changelog changefeeds, old-header transactions, kill -9 of owners and
of Spark Python workers, and a server killed by the ``after-sink-commit`` failpoint) for the
given seconds with ``--faults`` faults spread over it, then prints one line: transactions,
faults by kind, the faults that found nothing to hit, checkpoint samples, problems, and the
1-minute load average before and after. Every fault and problem follows on a line of its own.
The exit status is 1 when any seed found a problem. ``make test`` runs the same scenario for a
minute with three faults (``tests/e2e/test_torture.py``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.torture import run_torture  # noqa: E402

from sparkcdc.services.mariadb import LocalMariaDB  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("seconds", type=float, help="how long each seed's workload runs")
    p.add_argument("--faults", type=int, default=12, help="faults per seed, the kinds in turn (default 12)")
    p.add_argument("--seeds", help="comma-separated seeds (default: random ones)")
    p.add_argument("--random-seeds", type=int, default=1, help="how many random seeds without --seeds")
    args = p.parse_args(argv)
    seeds = (
        [int(s) for s in args.seeds.split(",")]
        if args.seeds
        else [random.randrange(1 << 31) for _ in range(args.random_seeds)]
    )
    print(f"torture bench: {args.seconds:.0f}s and {args.faults} faults per seed, seeds {seeds}", flush=True)
    failed = 0
    for seed in seeds:
        before = os.getloadavg()[0]
        t0 = time.monotonic()
        with LocalMariaDB() as upstream, tempfile.TemporaryDirectory(prefix="sparkcdc-torture-") as work:
            report = run_torture(upstream, Path(work), seconds=args.seconds, faults=args.faults, seed=seed)
        print(
            f"{report.line()}; {time.monotonic() - t0:.0f}s in all; load {before:.2f} -> {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        for fault in report.faults + [f"missed {m}" for m in report.missed]:
            print(f"  fault {fault}")
        for pair in report.renumbered:
            print(f"  renumbered {pair}")
        for problem in report.problems:
            print(f"  PROBLEM {problem}")
        failed += bool(report.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
