"""The seeded random workload against MariaDB's native replication, several seeds in a row.

Usage (from the repository root)::

    .venv/bin/python bench/oracle/run.py 60 [--seeds 1,2,3 | --random-seeds 3] [--connections 4]
                                            [--disable xa,ddl] [--ddl-every 1,3] [--rate 40]
                                            [--paths | --paths-only]

For each seed: a fresh upstream and native replica, ``run_random`` for the given seconds in a
database ``rw_<seed>``, then the replica's catch-up time and a table-by-table comparison. One line
per seed: transactions committed and rolled back, statements, DDLs, errors by code, catch-up
seconds, mismatching tables, and the 1-minute load average before and after (the figures of a
run on a loaded machine are not comparable with those of an idle one). The exit status is 1 when
any seed mismatched.

``--paths`` also delivers each seed's workload through sparkcdc's three paths with the
differential oracle (``tests/oracle/harness.py``) and prints each path's differences from the
native replica: see ``compare_paths``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.oracle.native import native_pair  # noqa: E402
from tests.oracle.random_workload import FEATURES, Stats, run_random  # noqa: E402
from tests.oracle.tablediff import count_rows, diff_databases  # noqa: E402


def load() -> str:
    """The 1-minute load average, printed beside every figure."""
    return f"{os.getloadavg()[0]:.2f}"


DDL_EVERY = (1.0, 3.0)


def native_seed(
    seed: int,
    seconds: float,
    connections: int,
    features: frozenset[str],
    ddl_every: tuple[float, float] = DDL_EVERY,
    rate: float = 0.0,
) -> dict[str, Any]:
    """One seed against a fresh upstream and native replica: the workload's stats and the comparison."""
    database = f"rw_{seed}"
    before = load()
    with native_pair() as (upstream, replica):
        stats = run_random(
            upstream,
            seed=seed,
            seconds=seconds,
            connections=connections,
            database=database,
            features=features,
            ddl_every=ddl_every,
            rate=rate,
            log=lambda line: None,
        )
        t0 = time.monotonic()
        replica.wait_caught_up(upstream, timeout=600)
        catchup = time.monotonic() - t0
        status = replica.slave_status()
        error = status.get("Last_SQL_Error") or status.get("Last_IO_Error") or ""
        problems = diff_databases(upstream, replica, [database])
        tables, rows = count_rows(upstream, [database])
    return {
        "stats": stats,
        "catchup": catchup,
        "error": error,
        "problems": problems,
        "tables": tables,
        "rows": rows,
        "load": f"{before}->{load()}",
    }


def compare_paths(
    seed: int,
    seconds: float,
    *,
    connections: int = 4,
    features: frozenset[str] = FEATURES,
    root: Path | None = None,
    ddl_every: tuple[float, float] = DDL_EVERY,
    rate: float = 0.0,
) -> dict[str, list[str]]:
    """Deliver one seed's workload through sparkcdc's paths; each path's differences from the native replica.

    Uses the differential oracle of ``tests/oracle/harness.py`` (imported here, not at the top, so
    that the native comparison runs without it).
    """
    try:
        from tests.oracle import harness
    except ModuleNotFoundError as exc:
        if exc.name != "tests.oracle.harness":
            raise
        raise RuntimeError(
            "compare_paths needs tests/oracle/harness.py (the differential oracle over sparkcdc's "
            "mysql, storage and kafka paths), which this checkout lacks; run without --paths"
        ) from exc
    database = f"rw_{seed}"
    stats: list[Stats] = []

    def write(upstream: Any) -> None:
        stats.append(
            run_random(
                upstream,
                seed=seed,
                seconds=seconds,
                connections=connections,
                database=database,
                features=features,
                ddl_every=ddl_every,
                rate=rate,
                log=lambda line: None,
            )
        )

    work = root or Path(tempfile.mkdtemp(prefix="sparkcdc-oracle-bench-"))
    with harness.Oracle(work) as oracle:
        cap = oracle.capture(f"rw-{seed}", write, [database])
        out: dict[str, list[str]] = {}
        for path in harness.PATHS:
            failures = cap.paths[path].error_text()
            out[path] = cap.problems(path, database) + ([failures] if failures else [])
    if stats:
        st = stats[0]
        print(
            f"seed {seed} through the paths: committed {st.committed} ({st.committed / st.seconds:.0f}/s), "
            f"rolled back {st.rolled_back}, statements {st.statements}, ddls {st.ddls}, "
            f"errors {dict(sorted(st.errors.items()))}, unexpected {len(st.unexpected)}; load {load()}",
            flush=True,
        )
    return out


def _print_paths(
    seed: int,
    seconds: float,
    connections: int,
    features: frozenset[str],
    ddl_every: tuple[float, float],
    rate: float = 0.0,
) -> int:
    """Run ``compare_paths`` for one seed and print each path's result; 1 when any path differs."""
    bad = 0
    found = compare_paths(
        seed, seconds, connections=connections, features=features, ddl_every=ddl_every, rate=rate
    )
    for path, problems in found.items():
        bad |= bool(problems)
        print(
            f"  {path}: {'equal' if not problems else f'{len(problems)} differences'}; load {load()}",
            flush=True,
        )
        for line in problems[:5]:
            print(f"    {line}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("seconds", type=float, help="how long each seed's workload runs")
    ap.add_argument("--seeds", default="", help="comma-separated seeds (default: 3 random ones)")
    ap.add_argument("--random-seeds", type=int, default=3, help="how many random seeds without --seeds")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument(
        "--disable", default="", help=f"comma-separated forms to switch off, of {sorted(FEATURES)}"
    )
    ap.add_argument(
        "--ddl-every",
        default="1,3",
        help="seconds between two DDLs, drawn uniformly from MIN,MAX (each DDL is a batch of its own downstream)",
    )
    ap.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="at most this many transactions per second over all connections (default 0: no cap); "
        "for long --paths runs, whose Kafka broker keeps the topics in memory",
    )
    ap.add_argument("--paths", action="store_true", help="also compare through sparkcdc's three paths")
    ap.add_argument(
        "--paths-only",
        action="store_true",
        help="compare through sparkcdc's three paths only (their oracle has its own native replica)",
    )
    args = ap.parse_args(argv)

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()] or [
        random.SystemRandom().randrange(1, 2**31) for _ in range(args.random_seeds)
    ]
    disabled = {f.strip() for f in args.disable.split(",") if f.strip()}
    if disabled - FEATURES:
        ap.error(f"--disable: unknown forms {sorted(disabled - FEATURES)}; known: {sorted(FEATURES)}")
    features = FEATURES - disabled
    try:
        lo, hi = (float(x) for x in args.ddl_every.split(","))
    except ValueError:
        ap.error(f"--ddl-every: expected MIN,MAX seconds such as 1,3, got {args.ddl_every!r}")
    if not 0 < lo <= hi:
        ap.error(f"--ddl-every: expected 0 < MIN <= MAX, got {args.ddl_every!r}")
    ddl_every = (lo, hi)
    if args.rate < 0:
        ap.error(f"--rate: expected transactions per second >= 0 (0: no cap), got {args.rate:g}")
    print(
        f"oracle bench: {args.seconds:g}s per seed, seeds {seeds}, {args.connections} connections, "
        f"disabled {sorted(disabled) or 'nothing'}, a DDL every {lo:g}-{hi:g}s, "
        f"rate {f'at most {args.rate:g} transactions/s' if args.rate else 'uncapped'}, load {load()}",
        flush=True,
    )
    mismatched = 0
    for seed in seeds:
        if args.paths_only:
            mismatched += _print_paths(seed, args.seconds, args.connections, features, ddl_every, args.rate)
            continue
        res = native_seed(seed, args.seconds, args.connections, features, ddl_every, args.rate)
        st: Stats = res["stats"]
        bad = len(res["problems"]) + (1 if res["error"] else 0)
        mismatched += bool(bad)
        print(
            f"seed {seed}: committed {st.committed} ({st.committed / st.seconds:.0f}/s), "
            f"rolled back {st.rolled_back}, statements {st.statements}, ddls {st.ddls}, "
            f"errors {dict(sorted(st.errors.items()))}, unexpected {len(st.unexpected)}; "
            f"native replica caught up in {res['catchup']:.1f}s, {res['tables']} tables / {res['rows']} rows, "
            f"mismatches {bad}; load {res['load']}",
            flush=True,
        )
        for line in ([res["error"]] if res["error"] else []) + res["problems"][:5]:
            print(f"  {line}")
        if args.paths:
            mismatched += _print_paths(seed, args.seconds, args.connections, features, ddl_every, args.rate)
    print(f"oracle bench: {len(seeds)} seeds, {mismatched} with mismatches; load {load()}")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
