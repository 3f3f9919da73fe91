"""Shared e2e helpers: a deterministic mixed workload, table comparison, and `sparkcdc` child processes.

``run_workload(db, schema)`` writes, in this order: the tables (every MySQL type,
a table without a primary key but with a NOT NULL unique key, a table whose name
has a space and whose columns are reserved words), inserts, updates (including
primary-key and unique-key changes), deletes, multi-row and multi-table
transactions, ``ALTER TABLE … ADD COLUMN`` with rows of the new shape, ``ALTER
TABLE … DROP COLUMN`` with rows after it, and a last round of changes. The same
seed gives the same statements.

``assert_tables_equal(up, down, schema)`` compares every table of ``schema``
row by row: column names and types, then all rows as server-rendered text
(``HEX`` for binary, ``+0`` for BIT) ordered by every column.

``SteadyLoad`` is a writer thread of small transactions for kill/restart tests.

``mixed_rounds(db, schema, start, n)`` is a smaller workload on ``ROUND_TABLES``
(``round_tables_sql``) that tests feed while a changefeed streams, and
``table_rows(db, schema)`` what they poll until the downstream equals the upstream.

``CliProcess`` runs ``python -m sparkcdc.cli.main …`` in its own process group
(``sparkcdc run`` and friends): the one child-process wrapper of the e2e tests; ``run_args``
is the one ``sparkcdc run`` command line they start it with.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import pymysql

ALL_TYPES = "all_types"
UK_ONLY = "uk_only"
SPACED = "order items"
ACCOUNTS = "accounts"
TABLES = (ALL_TYPES, UK_ONLY, SPACED, ACCOUNTS)

TYPE_COLUMNS: list[tuple[str, str]] = [
    ("ti", "TINYINT"),
    ("tiu", "TINYINT UNSIGNED"),
    ("si", "SMALLINT"),
    ("miu", "MEDIUMINT UNSIGNED"),
    ("i", "INT"),
    ("iu", "INT UNSIGNED"),
    ("bi", "BIGINT"),
    ("biu", "BIGINT UNSIGNED"),
    ("f", "FLOAT"),
    ("d", "DOUBLE"),
    ("dec1", "DECIMAL(10,2)"),
    ("dec2", "DECIMAL(65,30)"),
    ("dt", "DATE"),
    ("dt0", "DATETIME"),
    ("dt3", "DATETIME(3)"),
    ("ts6", "TIMESTAMP(6) NULL"),
    ("tm", "TIME"),
    ("tm4", "TIME(4)"),
    ("y", "YEAR"),
    ("c", "CHAR(10)"),
    ("vc", "VARCHAR(300)"),
    ("txt", "TEXT"),
    ("lat", "VARCHAR(20) CHARACTER SET latin1"),
    ("bn", "BINARY(4)"),
    ("vb", "VARBINARY(300)"),
    ("bl", "BLOB"),
    ("b1", "BIT(1)"),
    ("b64", "BIT(64)"),
    ("e", "ENUM('a','b,c','é')"),
    ("s", "SET('x','y','z')"),
    ("j", "JSON"),
]

# Fixed rows of SQL literals: limits, zeros/empties, NULLs.
EDGE_ROWS: list[tuple[str, ...]] = [
    (
        "-128", "255", "-32768", "16777215", "-2147483648", "4294967295", "-9223372036854775808",
        "18446744073709551615", "-3.4e38", "1.7976931348623157e308", "-99999999.99",
        "-99999999999999999999999999999999999.999999999999999999999999999999", "'9999-12-31'",
        "'9999-12-31 23:59:59'", "'2024-02-29 12:34:56.789'", "'2038-01-19 03:14:07.999999'", "'838:59:59'",
        "'-00:00:01.0001'", "2155", "'😀 ok'", "REPEAT('é', 300)", "'multi\\nline \"q\" \\\\ ,;'",
        "'ÿé latin'", "x'00FF'", "x'00010203FFFEFD2C0D0A'", "REPEAT(x'AB', 3000)", "b'1'",
        "b'1111111111111111111111111111111111111111111111111111111111111111'", "'b,c'", "'x,z'",
        '\'{"k": [1, 2], "s": "é<&>"}\'',
    ),
    (
        "127", "0", "32767", "0", "2147483647", "0", "9223372036854775807", "0", "3.14", "-0.5", "0.01",
        "0.000000000000000000000000000001", "'0000-00-00'", "'0000-00-00 00:00:00'",
        "'0000-00-00 00:00:00.000'", "'1970-01-01 00:00:01'", "'00:00:00'", "'23:59:59.9999'", "0", "''",
        "''", "''", "'abc'", "x'00000000'", "x''", "x''", "b'0'",
        "b'1000000000000000000000000000000000000000000000000000000000000000'", "'a'", "''", "'[]'",
    ),
    tuple("NULL" for _ in TYPE_COLUMNS),
]  # fmt: skip


class Database(Protocol):
    """What the helpers need of a database: ``LocalMariaDB`` has it."""

    def connect(self, database: str | None = None, **kw: Any) -> Any: ...


def q(name: str) -> str:
    """A backtick-quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def create_tables(db: Database, schema: str) -> None:
    """Create (or re-create) the workload's database and tables."""
    cols = ", ".join(f"{q(n)} {t}" for n, t in TYPE_COLUMNS)
    statements = [
        f"DROP DATABASE IF EXISTS {q(schema)}",
        f"CREATE DATABASE {q(schema)}",
        f"CREATE TABLE {q(schema)}.{q(ALL_TYPES)} (id INT PRIMARY KEY, {cols})",
        # No primary key: the NOT NULL unique key is the handle.
        f"CREATE TABLE {q(schema)}.{q(UK_ONLY)} (a INT NOT NULL, b VARCHAR(20) NOT NULL, c VARCHAR(50) NULL, "
        "n INT NULL, UNIQUE KEY uk_ab (a, b), KEY kn (n))",
        f"CREATE TABLE {q(schema)}.{q(SPACED)} (`order` INT PRIMARY KEY, `select` VARCHAR(40), "
        "`a b` DECIMAL(12,3), `x``y` CHAR(3) NULL, qty INT NOT NULL DEFAULT 1)",
        f"CREATE TABLE {q(schema)}.{q(ACCOUNTS)} (id BIGINT AUTO_INCREMENT PRIMARY KEY, owner VARCHAR(30) NOT NULL, "
        "balance DECIMAL(15,2) NOT NULL, updated DATETIME(6) NULL)",
    ]
    _execute(db, None, statements)


def _execute(db: Database, schema: str | None, statements: Sequence[str | tuple[str, Any]]) -> None:
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00', sql_mode = ''")
            for s in statements:
                if isinstance(s, tuple):
                    cur.execute(s[0], s[1])
                else:
                    cur.execute(s)
    finally:
        conn.close()


def _gen_row(i: int, rnd: random.Random) -> tuple[Any, ...]:
    """A parameter tuple for all_types (id first)."""
    return (
        i,
        rnd.randint(-128, 127),
        rnd.randint(0, 255),
        rnd.randint(-32768, 32767),
        rnd.randint(0, 16777215),
        rnd.randint(-(2**31), 2**31 - 1),
        rnd.randint(0, 2**32 - 1),
        rnd.randint(-(2**63), 2**63 - 1),
        rnd.randint(0, 2**64 - 1),
        rnd.choice([0.5, 1.25, -2.75, 1e10, 3.0e-5]) * (i % 11),
        rnd.random() * 10 ** rnd.randint(-5, 12),
        f"{rnd.randint(-99999999, 99999999)}.{rnd.randint(0, 99):02d}",
        f"{rnd.randint(0, 10**30)}.{rnd.randint(0, 10**30 - 1):030d}",
        f"20{rnd.randint(0, 39):02d}-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
        f"2001-02-03 04:05:{i % 60:02d}",
        f"2024-01-02 03:04:05.{i % 1000:03d}",
        None if i % 9 == 0 else f"2020-06-0{1 + i % 9} 12:00:00.{i:06d}"[:26],
        f"{'-' if i % 2 else ''}{i % 839}:{i % 60:02d}:01",
        f"12:{i % 60:02d}:00.{i % 10000:04d}",
        1901 + i % 255,
        f"c{i % 1000}",
        f"hé'llo\\ {i} 😀 " + "v" * (i % 40),
        None if i % 4 == 0 else "text\r\nline," * (i % 5) + '"q"',
        f"lat{i}ÿ",
        bytes([i % 256, 0, 255, 44]),
        bytes([0, i % 256, 39, 92, 10, 13]),
        bytes(rnd.randrange(256) for _ in range(i % 64)),
        i % 2,
        i * 2654435761 % 2**64,
        ["a", "b,c", "é"][i % 3],
        ["", "x", "x,y", "x,z", "x,y,z"][i % 5],
        f'{{"i": {i}, "s": "<&>\\n", "a": [1, 2.5, null]}}',
    )


class Workload:
    """The deterministic mixed workload of one schema."""

    def __init__(self, db: Database, schema: str, rows: int = 120, seed: int = 7) -> None:
        self.db = db
        self.schema = schema
        self.rows = rows
        self.rnd = random.Random(seed)
        self.next_id = 1

    def sql(self, *statements: str | tuple[str, Any]) -> None:
        """Run statements in one autocommit session."""
        _execute(self.db, self.schema, statements)

    def txn(self, *statements: str | tuple[str, Any]) -> None:
        """Run statements in one transaction."""
        conn = self.db.connect(self.schema)
        try:
            with conn.cursor() as cur:
                cur.execute("SET time_zone = '+00:00', sql_mode = ''")
                cur.execute("BEGIN")
                for s in statements:
                    if isinstance(s, tuple):
                        cur.execute(s[0], s[1])
                    else:
                        cur.execute(s)
                cur.execute("COMMIT")
        finally:
            conn.close()

    def insert_types(self, n: int) -> None:
        """n generated all_types rows, a few per multi-row INSERT."""
        names = ", ".join(["id", *(q(c) for c, _ in TYPE_COLUMNS)])
        marks = ", ".join(["%s"] * (len(TYPE_COLUMNS) + 1))
        conn = self.db.connect(self.schema)
        try:
            with conn.cursor() as cur:
                cur.execute("SET time_zone = '+00:00', sql_mode = ''")
                while n > 0:
                    k = min(n, 1 + self.next_id % 4)
                    rows = [_gen_row(self.next_id + j, self.rnd) for j in range(k)]
                    cur.executemany(f"INSERT INTO {q(ALL_TYPES)} ({names}) VALUES ({marks})", rows)
                    self.next_id += k
                    n -= k
        finally:
            conn.close()

    def phase_inserts(self) -> None:
        """Edge rows, generated rows, and rows of the other tables."""
        names = ", ".join(["id", *(q(c) for c, _ in TYPE_COLUMNS)])
        self.sql(
            *(
                f"INSERT INTO {q(ALL_TYPES)} ({names}) VALUES ({-1 - k}, {', '.join(row)})"
                for k, row in enumerate(EDGE_ROWS)
            )
        )
        self.insert_types(self.rows)
        self.sql(
            (
                f"INSERT INTO {q(UK_ONLY)} (a, b, c, n) VALUES " + ", ".join(["(%s, %s, %s, %s)"] * 20),
                [v for k in range(20) for v in (k % 5, f"b{k}", None if k % 3 else f"c {k}", k)],
            ),
            *(
                (
                    f"INSERT INTO {q(SPACED)} (`order`, `select`, `a b`, `x``y`, qty) VALUES (%s, %s, %s, %s, %s)",
                    (k, f"sel {k} 'x'", f"{k}.125", None if k % 2 else "a`b", k),
                )
                for k in range(1, 31)
            ),
            (
                f"INSERT INTO {q(ACCOUNTS)} (owner, balance, updated) VALUES "
                + ", ".join(["(%s, %s, %s)"] * 10),
                [
                    v
                    for k in range(10)
                    for v in (f"owner{k}", f"{1000 + k}.00", f"2024-05-0{1 + k % 9} 00:00:00.5")
                ],
            ),
        )

    def phase_updates(self) -> None:
        """Value updates, key changes, deletes."""
        self.sql(
            f"UPDATE {q(ALL_TYPES)} SET vc = CONCAT(vc, '!'), d = d * 2, j = JSON_SET(j, '$.u', 1) WHERE id % 3 = 0",
            f"UPDATE {q(ALL_TYPES)} SET e = 'é', s = 'y', bl = NULL, ts6 = NULL WHERE id % 5 = 1",
            # Primary-key changes (one statement moving several rows, then single rows).
            f"UPDATE {q(ALL_TYPES)} SET id = id + 100000 WHERE id % 7 = 0",
            f"UPDATE {q(ALL_TYPES)} SET id = -100 WHERE id = -3",
            f"DELETE FROM {q(ALL_TYPES)} WHERE id % 11 = 4",
            # Unique-key changes and deletes on the table without a primary key.
            f"UPDATE {q(UK_ONLY)} SET b = CONCAT(b, '-moved') WHERE a = 1",
            f"UPDATE {q(UK_ONLY)} SET c = 'changed', n = n * 10 WHERE a = 2",
            f"DELETE FROM {q(UK_ONLY)} WHERE a = 3",
            f"UPDATE {q(SPACED)} SET `order` = `order` + 1000 WHERE `order` % 4 = 0",
            f"UPDATE {q(SPACED)} SET `select` = NULL, `a b` = -`a b` WHERE `order` % 3 = 0",
            f"DELETE FROM {q(SPACED)} WHERE `order` % 5 = 0",
        )

    def phase_transactions(self, n: int = 15, first: int = 0) -> None:
        """Multi-row, multi-table transactions (transfers with an order and a unique-key row)."""
        for k in range(first, first + n):
            src, dst = 1 + k % 10, 1 + (k * 3 + 1) % 10
            amount = f"{k + 1}.50"
            self.txn(
                (f"UPDATE {q(ACCOUNTS)} SET balance = balance - %s, updated = %s WHERE id = %s",
                 (amount, f"2024-06-01 00:{k % 60:02d}:{k % 60:02d}.123456", src)),
                (f"UPDATE {q(ACCOUNTS)} SET balance = balance + %s WHERE id = %s", (amount, dst)),
                (f"INSERT INTO {q(SPACED)} (`order`, `select`, `a b`, qty) VALUES (%s, %s, %s, %s)",
                 (5000 + k, f"transfer {src}->{dst}", amount, k)),
                (f"INSERT INTO {q(UK_ONLY)} (a, b, c, n) VALUES (%s, %s, %s, %s)", (100 + k, "t", "txn", k)),
                (f"DELETE FROM {q(UK_ONLY)} WHERE a = %s AND b = 't'", (100 + k - 1,)) if k % 2 else "DO 0",
            )  # fmt: skip

    def phase_add_column(self) -> None:
        """ALTER TABLE … ADD COLUMN mid-stream, then rows that use the new columns."""
        self.sql(
            f"ALTER TABLE {q(ACCOUNTS)} ADD COLUMN note VARCHAR(64) NULL DEFAULT 'n/a' AFTER owner",
            f"ALTER TABLE {q(ALL_TYPES)} ADD COLUMN extra INT NULL",
        )
        self.sql(
            f"UPDATE {q(ACCOUNTS)} SET note = CONCAT('vip ', id) WHERE id % 2 = 0",
            (f"INSERT INTO {q(ACCOUNTS)} (owner, note, balance) VALUES (%s, %s, %s)", ("late", "new shape", "1.00")),
            f"UPDATE {q(ALL_TYPES)} SET extra = id * 2 WHERE id % 4 = 1",
        )  # fmt: skip
        self.insert_types(self.rows // 4)
        self.phase_transactions(5, first=100)

    def phase_drop_column(self) -> None:
        """ALTER TABLE … DROP COLUMN, then rows of the narrower shape."""
        self.sql(f"ALTER TABLE {q(ACCOUNTS)} DROP COLUMN updated")
        self.sql(
            (f"INSERT INTO {q(ACCOUNTS)} (owner, note, balance) VALUES (%s, %s, %s)", ("after drop", None, "2.00")),
            f"UPDATE {q(ACCOUNTS)} SET balance = balance + 0.01",
            f"DELETE FROM {q(ACCOUNTS)} WHERE id = 3",
        )  # fmt: skip

    def phase_final(self) -> None:
        """A last mixed round touching every table."""
        self.insert_types(self.rows // 4)
        self.sql(
            f"UPDATE {q(ALL_TYPES)} SET id = id + 200000 WHERE id % 13 = 2",
            f"DELETE FROM {q(ALL_TYPES)} WHERE id % 17 = 5",
            f"UPDATE {q(UK_ONLY)} SET n = n + 1",
            f"UPDATE {q(SPACED)} SET qty = qty + 1, `x``y` = 'z' WHERE `order` > 10",
        )
        self.txn(
            f"DELETE FROM {q(SPACED)} WHERE `order` BETWEEN 1 AND 4",
            f"INSERT INTO {q(SPACED)} (`order`, `select`, `a b`) VALUES (2, 'back', 2.5)",
            f"UPDATE {q(ALL_TYPES)} SET txt = 'last' WHERE id < 0",
        )

    def run(self) -> None:
        """Create the tables and run every phase."""
        create_tables(self.db, self.schema)
        self.phase_inserts()
        self.phase_updates()
        self.phase_transactions()
        self.phase_add_column()
        self.phase_drop_column()
        self.phase_final()


def run_workload(db: Database, schema: str, rows: int = 120, seed: int = 7) -> None:
    """Create ``schema``'s tables and run the whole mixed workload on them."""
    Workload(db, schema, rows, seed).run()


class SteadyLoad(threading.Thread):
    """Small transactions on the workload tables until ``stop()`` (for kill/restart tests)."""

    def __init__(self, db: Database, schema: str, pause: float = 0.02, seed: int = 11) -> None:
        super().__init__(name=f"steady-load-{schema}", daemon=True)
        self.db = db
        self.schema = schema
        self.pause = pause
        self.rnd = random.Random(seed)
        self.transactions = 0
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            conn = self.db.connect(self.schema)
            try:
                with conn.cursor() as cur:
                    cur.execute("SET time_zone = '+00:00', sql_mode = ''")
                    k = 0
                    while not self._stop_event.is_set():
                        k += 1
                        self._one(cur, k)
                        self.transactions += 1
                        self._stop_event.wait(self.pause)
            finally:
                conn.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _one(self, cur: Any, k: int) -> None:
        rnd = self.rnd
        cur.execute("BEGIN")
        order = 10_000 + k
        cur.execute(
            f"INSERT INTO {q(SPACED)} (`order`, `select`, `a b`, qty) VALUES (%s, %s, %s, %s)",
            (order, f"load {k}", f"{k}.5", k % 100),
        )
        cur.execute(
            f"INSERT INTO {q(UK_ONLY)} (a, b, c, n) VALUES (%s, %s, %s, %s)", (1000 + k, "load", f"c{k}", k)
        )
        if k % 3 == 0:
            cur.execute(
                f"UPDATE {q(SPACED)} SET qty = qty + 1, `x``y` = 'u' WHERE `order` = %s", (order - 2,)
            )
        if k % 5 == 0:
            cur.execute(f"UPDATE {q(SPACED)} SET `order` = `order` + 100000 WHERE `order` = %s", (order - 4,))
        if k % 7 == 0:
            cur.execute(f"DELETE FROM {q(UK_ONLY)} WHERE a = %s", (1000 + k - 6,))
        if k % 4 == 0:
            cur.execute(
                f"UPDATE {q(ACCOUNTS)} SET balance = balance + %s WHERE id = %s",
                (f"{rnd.randint(1, 999)}.{rnd.randint(0, 99):02d}", 1 + k % 10),
            )
        cur.execute("COMMIT")

    def stop(self) -> int:
        """Stop, join, re-raise a writer error; return the number of committed transactions."""
        self._stop_event.set()
        self.join(timeout=60)
        if self.error is not None:
            raise AssertionError(f"the steady load failed: {self.error!r}") from self.error
        return self.transactions


# -- comparison ------------------------------------------------------------------------------------


def list_tables(db: Database, schema: str) -> list[str]:
    """Base tables of ``schema``, sorted."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_TYPE='BASE TABLE'",
                (schema,),
            )
            return sorted(str(r[0]) for r in cur.fetchall())
    finally:
        conn.close()


def _columns(cur: Any, schema: str, table: str) -> list[tuple[str, str, str]]:
    cur.execute(
        "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
        (schema, table),
    )
    return [(str(n), str(ct).lower(), str(dt).lower()) for n, ct, dt in cur.fetchall()]


def _text_expr(name: str, data_type: str) -> str:
    col = q(name)
    if data_type in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return f"HEX({col})"
    if data_type == "bit":
        return f"CAST({col} + 0 AS CHAR)"
    return f"CAST({col} AS CHAR)"


def table_snapshot(
    db: Database, schema: str, table: str
) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """(columns as (name, type), every row as text ordered by all columns) of one table."""
    conn = db.connect(conv={})  # no converters: every value arrives as the server's text
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cols = _columns(cur, schema, table)
            if not cols:
                raise AssertionError(f"table {schema}.{table} does not exist")
            exprs = [_text_expr(n, dt) for n, _, dt in cols]
            cur.execute(
                f"SELECT {', '.join(exprs)} FROM {q(schema)}.{q(table)} "
                f"ORDER BY {', '.join(str(k + 1) for k in range(len(exprs)))}"
            )
            rows = [tuple(v.decode() if isinstance(v, bytes) else v for v in r) for r in cur.fetchall()]
            return [(n, ct) for n, ct, _ in cols], rows
    finally:
        conn.close()


def diff_tables(up: Database, down: Database, schema: str) -> list[str]:
    """Human-readable differences between ``schema`` upstream and downstream ([] when equal)."""
    problems: list[str] = []
    up_tables, down_tables = list_tables(up, schema), list_tables(down, schema)
    if up_tables != down_tables:
        problems.append(f"tables differ: upstream {up_tables}, downstream {down_tables}")
    for t in up_tables:
        if t not in down_tables:
            continue
        ucols, urows = table_snapshot(up, schema, t)
        dcols, drows = table_snapshot(down, schema, t)
        if ucols != dcols:
            problems.append(f"{schema}.{t}: columns differ: upstream {ucols}, downstream {dcols}")
            continue
        if urows != drows:
            uset, dset = set(urows), set(drows)
            missing = [r for r in urows if r not in dset]
            extra = [r for r in drows if r not in uset]
            problems.append(
                f"{schema}.{t}: {len(urows)} rows upstream, {len(drows)} downstream; "
                f"{len(missing)} missing downstream (first: {missing[:2]}), "
                f"{len(extra)} extra downstream (first: {extra[:2]})"
                + ("" if missing or extra else "; the same rows with different multiplicity")
            )
    return problems


def assert_tables_equal(up: Database, down: Database, schema: str) -> None:
    """Every table of ``schema`` has the same columns and the same rows upstream and downstream."""
    problems = diff_tables(up, down, schema)
    assert not problems, "downstream differs from upstream:\n" + "\n".join(problems)


def row_count(db: Database, schema: str, table: str) -> int:
    """COUNT(*) of one table."""
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {q(schema)}.{q(table)}")
            row = cur.fetchone()
            return int(row[0]) if row else 0
    finally:
        conn.close()


# -- rounds: a small workload written while a changefeed streams ---------------------------------

ROUND_TABLES = ("all_types", "nopk", "sel`ect %s")
"""The tables of ``round_tables_sql``: every common type, no key at all, a hostile name."""


def round_tables_sql(schema: str) -> list[str]:
    """``CREATE DATABASE`` and the ``ROUND_TABLES`` of the rounds workload (run them as one batch)."""
    return [
        f"CREATE DATABASE {schema}",
        f"""CREATE TABLE {schema}.all_types (
          id INT PRIMARY KEY, ti TINYINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dec1 DECIMAL(10,2),
          dt DATE, dtm DATETIME(3), ts TIMESTAMP(6) NULL, tm TIME, y YEAR, vc VARCHAR(64), tx TEXT,
          bn BINARY(4), vb VARBINARY(16), e ENUM('a','b','c'), s SET('x','y','z'), b8 BIT(8), j JSON)""",
        f"CREATE TABLE {schema}.nopk (a INT, b VARCHAR(10), c VARCHAR(10))",
        f"CREATE TABLE {schema}.`sel``ect %s` (`order` INT PRIMARY KEY, `a``b` VARCHAR(20), `%d` CHAR(1))",
    ]


def mixed_rounds(db: Database, schema: str, start: int, n: int, text_suffix: str = "") -> None:
    """n rounds of mixed changes on ``ROUND_TABLES``, one or two transactions each.

    Inserts into every table (duplicate rows in ``nopk``), updates, a primary-key change
    (``id + 1000000`` for ``i % 5 == 1``), deletes. ``text_suffix`` ends every ``vc`` value.
    """
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            for i in range(start, start + n):
                cur.execute(
                    "INSERT INTO all_types (id, ti, biu, f, d, dec1, dt, dtm, ts, tm, y, vc, tx, bn, vb, e, s, b8, j) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        i,
                        i % 128 - 64,
                        2**64 - 1 - i,
                        i / 8,
                        i / 3,
                        f"{i}.25",
                        "2024-02-29",
                        "2024-01-02 03:04:05.678",
                        "2024-06-01 12:00:00.123456",
                        "-12:34:56",
                        1901 + i % 255,
                        f"hé'llo\\ {i} 😀{text_suffix}",
                        "x" * (i % 50) + '\n\t"',
                        bytes([i % 256, 0, 255, 1]),
                        bytes([0, i % 256, 39, 92]),
                        "abc"[i % 3],
                        "x,z" if i % 2 else "",
                        i % 256,
                        f'{{"i": {i}, "s": "<&>"}}',
                    ),
                )
                cur.execute(
                    "INSERT INTO nopk (a, b, c) VALUES (%s, %s, NULL), (%s, %s, 'dup')", (i, "x", i, "x")
                )
                cur.execute(
                    "INSERT INTO `sel``ect %%s` (`order`, `a``b`, `%%d`) VALUES (%s, %s, %s)",
                    (i, f"v{i}", "'"),
                )
                conn.commit()
                if i % 3 == 0:
                    cur.execute(
                        "UPDATE all_types SET vc = CONCAT(vc, '!'), d = d * 2, j = JSON_SET(j, '$.u', 1) "
                        "WHERE id = %s",
                        (i,),
                    )
                if i % 5 == 1:
                    # A key change: id moves to a free range.
                    cur.execute("UPDATE all_types SET id = id + 1000000 WHERE id = %s", (i,))
                if i % 4 == 2:
                    cur.execute("DELETE FROM nopk WHERE a = %s AND c IS NULL", (i,))
                    cur.execute("UPDATE nopk SET b = 'y' WHERE a = %s", (i,))
                if i % 7 == 3:
                    cur.execute("DELETE FROM `sel``ect %%s` WHERE `order` = %s", (i,))
                conn.commit()
    finally:
        conn.close()


def table_rows(
    db: Database, schema: str, tables: Sequence[str] = ROUND_TABLES
) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of each table as server text, sorted (a table that does not exist yet maps to a marker row).

    Two results are equal when the tables hold the same rows, whatever their order and keys.
    """
    conn = db.connect(conv={})  # no converters: every value arrives as the server's text
    out: dict[str, list[tuple[Any, ...]]] = {}
    try:
        with conn.cursor() as cur:
            for t in tables:
                try:
                    cur.execute(f"SELECT * FROM {q(schema)}.{q(t)}")
                except pymysql.MySQLError as exc:  # not replicated yet: a marker row, polled again
                    out[t] = [("missing", str(exc))]
                    continue
                out[t] = sorted(cur.fetchall(), key=repr)
    finally:
        conn.close()
    return out


# -- child processes -------------------------------------------------------------------------------


def run_args(
    upstream_uri: str,
    sink_uri: str,
    changefeed: str,
    data_dir: Path | str,
    *extra: str,
    config: Path | None = None,
    master: str = "local[2]",
) -> list[str]:
    """``sparkcdc run`` arguments for one changefeed without the progress line; ``extra`` goes last."""
    args = ["run", "--upstream-uri", upstream_uri, "--sink-uri", sink_uri]
    if config is not None:
        args += ["--config", str(config)]
    return [*args, "-c", changefeed, "--data-dir", str(data_dir), "--master", master, "--no-progress", *extra]


class CliProcess:
    """One ``sparkcdc`` child process (own process group), output collected in a log file."""

    def __init__(self, args: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        full_env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        full_env.update(env or {})
        self.args = list(args)
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sparkcdc.cli.main", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        """The child's pid (also its process group id)."""
        return self.proc.pid

    def output(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float, what: str) -> None:
        """Wait until the output contains ``text``; fail if the process exits first."""
        from sparkcdc.services.common import wait_until

        wait_until(
            lambda: self.proc.poll() is not None or text in self.output(),
            timeout=timeout,
            what=what,
            interval=0.3,
            on_timeout=lambda: self.output()[-4000:],
        )
        if text not in self.output():
            raise AssertionError(
                f"sparkcdc exited with {self.proc.returncode} before {what}:\n{self.output()[-4000:]}"
            )

    def wait_started(self, timeout: float = 180) -> None:
        """Wait until ``sparkcdc run`` reports it started (after its snapshot, if any)."""
        self.wait_for("started; data dir", timeout, "sparkcdc run to start")

    def wait(self, timeout: float) -> int:
        """Wait for the exit code; kill the group and fail on timeout."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(
                f"sparkcdc did not exit within {timeout:.0f}s:\n{self.output()[-4000:]}"
            ) from None
        self._log.close()
        return rc

    def kill_tree(self) -> None:
        """A crash of the machine: the driver, the JVM and every Python worker die at once (Spark's
        workers sit in their own process group, so they are killed by pid as well)."""
        from sparkcdc.services.common import kill_tree

        kill_tree(self.proc.pid, self.kill9)

    def kill9(self) -> None:
        """SIGKILL the whole process group (the driver, Spark's JVM and its Python workers)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone
        self.proc.wait(timeout=30)
        self._log.close()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to the group if it still runs (SIGKILL after 30 s), then close the log."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
            except ProcessLookupError:
                pass  # exited in between
        if not self._log.closed:
            self._log.close()


def run_cli(args: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one ``sparkcdc`` command to completion and capture its output."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def replay_once(
    sink_uri: str, downstream_port: int, progress_schema: str, config: Any = None, timeout: float = 300
) -> str:
    """``sparkcdc consumer --once`` from a sink's output into the downstream; asserts exit 0, returns stdout."""
    res = run_cli(
        [
            "consumer",
            "--upstream-uri",
            sink_uri,
            "--downstream-uri",
            f"mysql://root:@127.0.0.1:{downstream_port}/",
            *(["--config", str(config)] if config else []),
            "--progress-schema",
            progress_schema,
            "--once",
        ],
        timeout=timeout,
    )
    assert res.returncode == 0, f"consumer failed:\n{res.stdout}\n{res.stderr[-4000:]}"
    return res.stdout


def tso(upstream_uri: str) -> int:
    """``sparkcdc cli tso query``."""
    res = run_cli(["cli", "tso", "query", "--upstream-uri", upstream_uri], timeout=60)
    assert res.returncode == 0, f"tso query failed: {res.stdout}{res.stderr}"
    return int(res.stdout.strip().splitlines()[-1])


def wait_for(
    probe: Callable[[], Any], timeout: float, what: str, on_timeout: Callable[[], str] | None = None
) -> Any:
    """Poll ``probe`` until truthy (thin wrapper over services.common.wait_until); ``on_timeout`` adds
    what the failure message should show (a process's output, a state file)."""
    from sparkcdc.services.common import wait_until

    return wait_until(probe, timeout=timeout, what=what, interval=0.2, on_timeout=on_timeout)


def elapsed(t0: float) -> float:
    """Seconds since ``t0`` (time.monotonic)."""
    return time.monotonic() - t0
