"""e2e: transactions that change one key several times, through every sink family, replayed row by row.

MySQL and MariaDB run a transaction's statements one after the other, so one transaction may
change a key twice (``UPDATE id=2 WHERE id=1; UPDATE id=3 WHERE id=2``), insert, update and delete
one key, swap two keys through a third, swap unique-key values through NULL, move many keys in one
statement, or change a key again after thousands of other rows (past the Kafka writer's chunk of
``MAX_TXN_ROWS``). Such transactions are written to a real MariaDB upstream between two
``sparkcdc cli tso query`` calls; three changefeeds replicate exactly that range side by side:

* the MySQL sink, straight into the downstream MariaDB (small ``max-txn-row``: transactions are
  split over several downstream transactions);
* the storage sink (canal-json files), replayed by ``sparkcdc consumer``;
* the Kafka sink (canal-json on Tansu, index-value dispatch over three partitions, so a key's
  DELETE and its new key's INSERT land on different partitions), replayed by the Kafka consumer.

After each, the downstream must equal the upstream, table by table, row by row.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.kafka import run_kafka_consumer
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from tests.unit.key_chains import (
    PK_TABLE,
    SCENARIOS,
    UK_TABLE,
    Replica,
    random_txn,
    unique_key_swap,
)

from .workload import CliProcess, assert_tables_equal, diff_tables, replay_once, run_args, tso

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_key_chains"
RUN_TIMEOUT = 480
FILLER_ROWS = 9000
"""Rows between two changes of one key in one transaction: more than the Kafka writer's chunk."""
TABLES = {"chains": PK_TABLE, "chains_uk": UK_TABLE}


def _sql_of(table: str, info: TableInfo, change: RowChange) -> tuple[str, list[object]]:
    """The statement that makes ``change`` upstream (every column set, rows found by primary key)."""
    names = info.column_names
    cols = ", ".join(f"`{n}`" for n in names)
    if change.op == "I":
        assert change.after is not None
        return f"INSERT INTO `{table}` ({cols}) VALUES ({', '.join(['%s'] * len(names))})", list(change.after)
    if change.op == "D":
        assert change.before is not None
        return f"DELETE FROM `{table}` WHERE id = %s", [change.before[0]]
    assert change.before is not None and change.after is not None
    sets = ", ".join(f"`{n}` = %s" for n in names)
    return f"UPDATE `{table}` SET {sets} WHERE id = %s", [*change.after, change.before[0]]


def _run_txn(
    conn: pymysql.connections.Connection, statements: Sequence[tuple[str, Sequence[object]]]
) -> None:
    conn.begin()
    with conn.cursor() as cur:
        for sql, args in statements:
            cur.execute(sql, args or None)
    conn.commit()


def write_chains(db: LocalMariaDB) -> None:
    """The tables and the chain transactions (see the module docstring)."""
    db.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.chains (id INT PRIMARY KEY, v VARCHAR(32))",
        f"CREATE TABLE {SCHEMA}.chains_uk (id INT PRIMARY KEY, u INT UNIQUE, v VARCHAR(32))",
        f"CREATE TABLE {SCHEMA}.nokey (a INT, b INT)",
        f"CREATE TABLE {SCHEMA}.filler (id INT PRIMARY KEY, n INT)",
    )
    mirrors = {
        "chains": Replica(PK_TABLE, {}),
        "chains_uk": Replica(UK_TABLE, {}),
    }
    seed: dict[str, list[tuple[object, ...]]] = {
        "chains": [(i, f"r{i}") for i in range(1, 21)],
        "chains_uk": [(i, i * 100, f"r{i}") for i in range(1, 21)],
    }
    conn = db.connect(SCHEMA)

    def run(table: str, txn: list[RowChange]) -> None:
        # the mirror tracks the upstream, so the next generated transaction is valid there too
        mirrors[table].apply_all(txn)
        _run_txn(conn, [_sql_of(table, TABLES[table], c) for c in txn])

    try:
        for table, rows in seed.items():
            run(table, [RowChange("I", SCHEMA, table, 0, 0, None, r) for r in rows])
        run("chains_uk", unique_key_swap(mirrors["chains_uk"], 0))
        for name in sorted(SCENARIOS):
            for table in sorted(TABLES):
                run(table, SCENARIOS[name](mirrors[table], 0))
        rng = random.Random(20240611)
        for _ in range(120):
            table = rng.choice(sorted(TABLES))
            run(table, random_txn(mirrors[table], 0, rng, rng.randint(2, 12), keys=30))
        for table, mirror in mirrors.items():
            assert _rows(db, table) == sorted(mirror.rows.values()), (
                f"upstream {table} is not what was generated"
            )

        low, high = min(mirrors["chains"].rows), max(mirrors["chains"].rows)
        # a key changed twice next to a keyless table's INSERT, DELETE and INSERT of the same row
        _run_txn(
            conn,
            [
                ("INSERT INTO nokey VALUES (1, 1)", []),
                ("UPDATE chains SET id = 900 WHERE id = %s", [low]),
                ("DELETE FROM nokey WHERE a = 1 LIMIT 1", []),
                ("INSERT INTO nokey VALUES (1, 1), (1, 1)", []),
                ("UPDATE chains SET id = 901 WHERE id = 900", []),
            ],
        )
        # many keys moved by one statement, back and forth, in one transaction
        _run_txn(
            conn,
            [
                ("UPDATE chains SET id = id + 1 ORDER BY id DESC", []),
                ("UPDATE chains SET id = id - 1, v = CONCAT(v, '-back') ORDER BY id", []),
                ("UPDATE chains_uk SET u = u + 1 ORDER BY u DESC", []),
            ],
        )
        # one key changed, thousands of other rows, the same key changed again and its old value reused
        filler = ", ".join(f"({i}, {i * 2})" for i in range(1, FILLER_ROWS + 1))
        _run_txn(
            conn,
            [
                ("UPDATE chains SET id = 7001 WHERE id = %s", [high]),
                (f"INSERT INTO filler VALUES {filler}", []),
                ("UPDATE chains SET id = 7002 WHERE id = 7001", []),
                ("INSERT INTO chains VALUES (7001, 'reused')", []),
                ("DELETE FROM filler WHERE MOD(id, 3) = 0", []),
            ],
        )
    finally:
        conn.close()


def _rows(db: LocalMariaDB, table: str) -> list[tuple[object, ...]]:
    return sorted(db.query(f"SELECT * FROM `{SCHEMA}`.`{table}`"))


def _config(path: Path, extra: str = "") -> Path:
    path.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n{extra}')
    return path


@dataclass
class Replicated:
    """The changefeeds' outputs: the MySQL sink's diff (taken at once) and the sink URIs to replay."""

    mysql_problems: list[str]
    storage_uri: str
    storage_config: Path
    kafka_topic: str


@pytest.fixture(scope="module")
def replicated(
    mariadb: LocalMariaDB,
    downstream: LocalMariaDB,
    tansu: LocalTansu,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Replicated]:
    """Write the chains upstream, then run the three changefeeds over exactly that range."""
    root = tmp_path_factory.mktemp("key-chains")
    downstream.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`")
    start_ts = tso(mariadb.uri)
    write_chains(mariadb)
    target_ts = tso(mariadb.uri)
    assert target_ts > start_ts

    run_id = uuid.uuid4().hex[:8]
    topic = f"chains-{run_id}"
    storage_uri = f"file://{root / 'storage'}?protocol=canal-json&enable-tidb-extension=true"
    storage_config = _config(root / "storage.toml")
    changefeeds = {
        "mysql": (
            f"mysql://root:@127.0.0.1:{downstream.port}/?worker-count=2&max-txn-row=16",
            _config(root / "mysql.toml"),
        ),
        "storage": (storage_uri, storage_config),
        "kafka": (
            tansu.sink_uri(topic, "protocol=canal-json&enable-tidb-extension=true&partition-num=3"),
            _config(
                root / "kafka.toml",
                f'[sink]\ndispatchers = [{{matcher = ["{SCHEMA}.*"], partition = "index-value"}}]\n',
            ),
        ),
    }
    procs: dict[str, CliProcess] = {}
    try:
        for name, (uri, config) in changefeeds.items():
            procs[name] = CliProcess(
                run_args(
                    mariadb.uri,
                    uri,
                    f"e2e-chains-{name}-{run_id}",
                    root / "state",
                    "--start-ts",
                    str(start_ts),
                    "--target-ts",
                    str(target_ts),
                    "--spark-conf",
                    "spark.driver.memory=1g",
                    config=config,
                    master="local[1]",
                ),
                root / f"run-{name}.log",
            )
        for name, proc in procs.items():
            rc = proc.wait(RUN_TIMEOUT)
            assert rc == 0, f"sparkcdc run ({name}) exited with {rc}:\n{proc.output()[-4000:]}"
            assert f"reached target-ts {target_ts}" in proc.output()
    finally:
        for proc in procs.values():
            proc.stop()
    # the MySQL sink wrote the downstream directly: compare now, before the replays reuse it
    yield Replicated(diff_tables(mariadb, downstream, SCHEMA), storage_uri, storage_config, topic)
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


def test_mysql_sink_applies_chains_in_binlog_order(replicated: Replicated) -> None:
    assert not replicated.mysql_problems, "downstream differs from upstream:\n" + "\n".join(
        replicated.mysql_problems
    )


def test_storage_files_replay_chains(
    replicated: Replicated, mariadb: LocalMariaDB, downstream: LocalMariaDB
) -> None:
    downstream.execute(
        f"DROP DATABASE IF EXISTS `{SCHEMA}`", "DROP DATABASE IF EXISTS `progress_chains_storage`"
    )
    replay_once(replicated.storage_uri, downstream.port, "progress_chains_storage", replicated.storage_config)
    assert_tables_equal(mariadb, downstream, SCHEMA)


def test_kafka_topic_replays_chains(
    replicated: Replicated, mariadb: LocalMariaDB, downstream: LocalMariaDB, tansu: LocalTansu
) -> None:
    downstream.execute(
        f"DROP DATABASE IF EXISTS `{SCHEMA}`", "DROP DATABASE IF EXISTS `progress_chains_kafka`"
    )
    stats = run_kafka_consumer(
        tansu.sink_uri(replicated.kafka_topic, "protocol=canal-json"),
        f"mysql://root:@127.0.0.1:{downstream.port}/",
        ReplicaConfig(),
        once=True,
        timeout=180,
        progress_schema="progress_chains_kafka",
    )
    assert stats.rows_pending == 0
    assert_tables_equal(mariadb, downstream, SCHEMA)
