"""Cost of one MariaDB connection: PyMySQL's own ``connect`` (the baseline) against ``sparkcdc.mysql_client``.

.venv/bin/python bench/connect/run.py [--connections 100] [--rounds 3]

Starts a private MariaDB (no TLS offered, as the tests' servers) and opens and closes
``--connections`` connections each way per round, alternating; prints wall and CPU time per
connection and the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import pymysql

from sparkcdc import mysql_client
from sparkcdc.services.mariadb import LocalMariaDB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with LocalMariaDB() as db:
        for rnd in range(args.rounds):
            for name, connect in (
                ("pymysql.connect", pymysql.connect),
                ("mysql_client.connect", mysql_client.connect),
            ):
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(args.connections):
                    connect(host="127.0.0.1", port=db.port, user="root", password="").close()
                wall = (time.perf_counter() - t0) / args.connections * 1000
                cpu = (time.process_time() - c0) / args.connections * 1000
                print(
                    f"round {rnd} {name:22s} {wall:6.2f} ms wall, {cpu:6.2f} ms CPU per connection; "
                    f"load {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
