"""e2e: MariaDB's UUID, INET4 and INET6 through `sparkcdc run` to storage CSV and canal-json, replayed back.

Tables with UUID primary keys (time-based ones from ``UUID()``, which InnoDB stores in another byte
order, and random ones), INET4/INET6 columns with NULLs, key-changing updates and deletes are
written upstream between two TSOs, together with DDL and rows of a UUID/INET6 table in a database
the changefeeds' filter leaves out (created and altered inside the range). Both outputs are replayed with the consumer into a second
MariaDB, which must then equal the upstream table by table, row by row.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import CliProcess, assert_tables_equal, replay_once, run_args, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_mtypes"
OTHER = "e2e_mtypes_other"
RUN_TIMEOUT = 420


def _create(db: LocalMariaDB) -> None:
    """The captured tables, created before the changefeeds' start: the consumer creates them
    downstream from their schema files (the rows of a start in the past before a DDL of their
    table are decoded with the binlog's table map, which cannot tell UUID from BINARY(16))."""
    db.execute(
        f"CREATE TABLE `{SCHEMA}`.ids (id UUID PRIMARY KEY, v4 INET4, v6 INET6, ref UUID NULL, note VARCHAR(20))",
        f"CREATE TABLE `{SCHEMA}`.hosts (id INT PRIMARY KEY, addr INET6 NOT NULL, a4 INET4 NULL, "
        "owner UUID NULL, UNIQUE KEY (addr))",
    )


def _workload(db: LocalMariaDB) -> None:
    rng = random.Random(5)
    db.execute(f"CREATE TABLE `{OTHER}`.noise (id UUID PRIMARY KEY, v INET6)")
    conn = db.connect(SCHEMA)
    try:
        with conn.cursor() as cur:
            for i in range(60):
                four = ".".join(str(rng.randrange(256)) for _ in range(4))
                six = rng.choice(
                    ["::", "::1", f"::ffff:{four}", "2001:db8::" + format(i, "x"), "fe80::1:0:0:2"]
                )
                cur.execute(
                    "INSERT INTO ids VALUES (" + ("UUID()" if i % 2 else "%s") + ", %s, %s, %s, %s)",
                    ([str(uuid.uuid4())] if i % 2 == 0 else [])
                    + [
                        rng.choice([four, None, "0.0.0.0"]),
                        six if i % 5 else None,
                        rng.choice([None, str(uuid.uuid4())]),
                        f"n{i}",
                    ],
                )
                cur.execute(
                    "INSERT INTO hosts VALUES (%s, %s, %s, UUID())",
                    (i, f"2001:db8:{i:x}::{i:x}", four if i % 3 else None),
                )
                cur.execute(f"INSERT INTO `{OTHER}`.noise VALUES (UUID(), %s)", (f"::{i + 1:x}",))
            cur.execute("UPDATE ids SET v6 = '::ffff:10.0.0.1', ref = UUID() WHERE note LIKE 'n1%'")
            cur.execute("UPDATE ids SET id = UUID() WHERE note IN ('n2', 'n3', 'n40')")  # key changes
            cur.execute("UPDATE hosts SET addr = CONCAT('::ffff:10.0.0.', id) WHERE id < 10")
            cur.execute("DELETE FROM ids WHERE note IN ('n5', 'n6')")
            cur.execute("DELETE FROM hosts WHERE id IN (20, 21)")
            cur.execute(f"ALTER TABLE `{OTHER}`.noise ADD w INET4, ADD u UUID")
            cur.execute(f"UPDATE `{OTHER}`.noise SET w = '1.2.3.4', u = UUID()")
        conn.commit()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def outputs(
    mariadb: LocalMariaDB, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[str, Path]]]:
    """Run the workload, then a CSV and a canal-json changefeed over its range until each exits 0."""
    root = tmp_path_factory.mktemp("mtypes-e2e")
    for db in (SCHEMA, OTHER):
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`", f"CREATE DATABASE `{db}`")
    _create(mariadb)
    start_ts = tso(mariadb.uri)
    _workload(mariadb)
    target_ts = tso(mariadb.uri)
    cfg = root / "cfg.toml"
    cfg.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n[sink.csv]\ninclude-commit-ts = true\n')
    outs = {
        "csv": (f"file://{root / 'csv'}?protocol=csv", cfg),
        "canal": (f"file://{root / 'canal'}?protocol=canal-json&enable-tidb-extension=true", cfg),
    }
    procs = {
        name: CliProcess(
            run_args(
                mariadb.uri,
                uri,
                f"e2e-mtypes-{name}",
                root / "state",
                "--start-ts",
                str(start_ts),
                "--target-ts",
                str(target_ts),
                "--spark-conf",
                "spark.driver.memory=1g",
                config=c,
                master="local[1]",
            ),
            root / f"run-{name}.log",
        )
        for name, (uri, c) in outs.items()
    }
    try:
        for name, proc in procs.items():
            rc = proc.wait(RUN_TIMEOUT)
            assert rc == 0, f"sparkcdc run ({name}) exited with {rc}:\n{proc.output()[-4000:]}"
            assert f"reached target-ts {target_ts}" in proc.output()
    finally:
        for proc in procs.values():
            proc.stop()
    yield outs
    mariadb.execute(f"DROP DATABASE IF EXISTS `{OTHER}`")


def _files(uri: str, ext: str) -> list[Path]:
    root = Path(uri.removeprefix("file://").split("?")[0])
    return sorted(p for p in root.rglob(f"CDC*{ext}") if p.is_file())


@pytest.mark.parametrize("name", ["csv", "canal"])
def test_replay_equals_upstream(
    outputs: dict[str, tuple[str, Path]], name: str, mariadb: LocalMariaDB, downstream: LocalMariaDB
) -> None:
    uri, cfg = outputs[name]
    downstream.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`", f"DROP DATABASE IF EXISTS `progress_mt_{name}`")
    out = replay_once(uri, downstream.port, f"progress_mt_{name}", cfg)
    assert re.search(r"applied \d+ DDL, [1-9]\d* rows", out), out
    assert_tables_equal(mariadb, downstream, SCHEMA)
    # the excluded database never reached the sink
    root = Path(uri.removeprefix("file://").split("?")[0])
    assert not (root / OTHER).exists()


def test_csv_and_canal_values_are_mariadbs_text(
    outputs: dict[str, tuple[str, Path]], mariadb: LocalMariaDB
) -> None:
    ids = {r[0] for r in mariadb.query("SELECT id FROM ids", database=SCHEMA)}
    csv_ids = set()
    for f in _files(outputs["csv"][0], ".csv"):
        for rec in csv.reader(io.StringIO(f.read_text(), newline="")):
            if rec[1] == "ids" and rec[0] == "I":
                csv_ids.add(rec[4])
    assert ids <= csv_ids  # every surviving key was inserted as its text
    assert all(re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", i) for i in csv_ids)
    seen = 0
    for f in _files(outputs["canal"][0], ".json"):
        for line in f.read_text().splitlines():
            msg = json.loads(line)
            if msg["table"] != "ids":
                continue
            seen += 1
            assert msg["mysqlType"] == {
                "id": "uuid",
                "v4": "inet4",
                "v6": "inet6",
                "ref": "uuid",
                "note": "varchar",
            }
            assert msg["sqlType"]["id"] == msg["sqlType"]["v6"] == msg["sqlType"]["v4"] == 12
            assert msg["pkNames"] == ["id"]
    assert seen
