"""A seeded random workload: concurrent transactions of every form a binlog reader meets.

``run_random(upstream, seed=7, seconds=20, database="rw")`` creates ``database`` (dropped first)
and runs ``connections`` threads until ``seconds`` have passed. Each thread has its own
connection and its own ``random.Random(f"{seed}:{index}")``: given the same interleaving a seed
replays the same statements, and the seed is printed first so a failing run can be named.
The interleaving itself is the operating system's, so two runs of one seed differ in detail.

Transactions mix (each form a name in ``FEATURES``; ``features=`` switches forms off):

- ``insert``/``update``/``delete`` on three InnoDB tables, an Aria and a MyISAM table, with UUID,
  INET6, DECIMAL(20,6), DATETIME(6), JSON, BLOB and utf8mb4 text columns;
- ``multi_change`` (one key changed several times in a transaction), ``lifecycle`` (insert,
  update, delete of one key in one transaction), ``savepoint`` (SAVEPOINT, ROLLBACK TO, RELEASE),
  ``rollback`` (whole transactions rolled back), ``upsert`` (INSERT ... ON DUPLICATE KEY UPDATE),
  ``replace``, ``insert_select``, ``multi_table_update``;
- ``xa`` (XA PREPARE then COMMIT), ``xa_rollback`` (XA ROLLBACK after PREPARE), ``xa_one_phase``;
- ``nontransactional``: the Aria and MyISAM tables, inside transactions and outside;
- ``ddl``: ADD COLUMN, DROP COLUMN, ADD/DROP INDEX, RENAME TABLE, TRUNCATE, CREATE TABLE ... SELECT,
  run by connection 0 while the others are paused between transactions (a gate every
  transaction passes), so a DDL never waits on a transaction that waits on it.

Keys come from a small shared range, so connections collide: deadlocks and lock-wait timeouts
happen as in any application; the transaction is rolled back and counted (``Stats.errors`` by
code). Errors outside ``EXPECTED_ERRORS`` are kept in ``Stats.unexpected``: they mean the workload
itself is wrong.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pymysql

from sparkcdc.services.mariadb import LocalMariaDB

FEATURES = frozenset(
    {
        "insert",
        "update",
        "delete",
        "multi_change",
        "lifecycle",
        "savepoint",
        "rollback",
        "upsert",
        "replace",
        "insert_select",
        "multi_table_update",
        "xa",
        "xa_rollback",
        "xa_one_phase",
        "nontransactional",
        "ddl",
    }
)

# Duplicate key, deadlock, lock-wait timeout, the XA state errors a deadlock inside XA leaves, and
# 1178 (SAVEPOINT after a write to an Aria table; savepoint transactions avoid those tables).
EXPECTED_ERRORS = frozenset({1062, 1178, 1205, 1213, 1399, 1402, 1614})
KEYS = 300  # the shared key range: small enough that connections collide
TRANSACTIONAL = ("a", "b", "c")
NON_TRANSACTIONAL = ("aria", "myisam")
TEXTS = ("plain", "café", "naïve résumé", "中文字符", "日本語のテキスト", "emoji 😀🚀", "Ελληνικά", "")


@dataclass
class Stats:
    """What one run did, summed over its connections."""

    seed: int
    committed: int = 0
    rolled_back: int = 0
    statements: int = 0
    ddls: int = 0
    errors: Counter[int] = field(default_factory=Counter)
    forms: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, other: Stats) -> None:
        """Add another connection's counts to these."""
        self.committed += other.committed
        self.rolled_back += other.rolled_back
        self.statements += other.statements
        self.ddls += other.ddls
        self.errors.update(other.errors)
        self.forms.update(other.forms)
        self.unexpected.extend(other.unexpected)

    def summary(self) -> str:
        """One line for a log."""
        return (
            f"seed={self.seed} committed={self.committed} rolled_back={self.rolled_back} "
            f"statements={self.statements} ddls={self.ddls} errors={dict(sorted(self.errors.items()))} "
            f"unexpected={len(self.unexpected)} in {self.seconds:.1f}s"
        )


class Gate:
    """Transactions pass it together; a DDL passes alone, after the running transactions end."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._ddl = False

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._ddl)
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    @contextmanager
    def ddl(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._ddl)
            self._ddl = True
            self._cond.wait_for(lambda: self._active == 0)
        try:
            yield
        finally:
            with self._cond:
                self._ddl = False
                self._cond.notify_all()


@dataclass
class Schema:
    """The tables as the DDL left them; read by transactions, changed only behind the gate."""

    names: dict[str, str] = field(
        default_factory=lambda: {t: f"t_{t}" for t in (*TRANSACTIONAL, *NON_TRANSACTIONAL)}
    )
    extra: dict[str, list[str]] = field(default_factory=dict)
    not_null: set[str] = field(default_factory=set)
    indexed: set[str] = field(default_factory=set)
    copies: list[str] = field(default_factory=list)
    added: int = 0


def _columns_ddl(engine: str) -> str:
    return (
        "id INT NOT NULL PRIMARY KEY, n INT NOT NULL DEFAULT 0, u UUID NULL, ip INET6 NULL, "
        "amount DECIMAL(20,6) NULL, ts DATETIME(6) NULL, doc JSON NULL, data BLOB NULL, "
        f"txt VARCHAR(200) CHARACTER SET utf8mb4 NULL) ENGINE={engine}"
    )


def create_tables(upstream: LocalMariaDB, database: str) -> None:
    """(Re)create ``database`` with the workload's five tables."""
    upstream.execute(
        f"DROP DATABASE IF EXISTS `{database}`", f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4"
    )
    upstream.execute(
        f"CREATE TABLE t_a ({_columns_ddl('InnoDB')}",
        # A composite key, a varchar part of it.
        "CREATE TABLE t_b (id INT NOT NULL, tag VARCHAR(16) NOT NULL, n INT NOT NULL DEFAULT 0, u UUID NULL, "
        "ip INET6 NULL, amount DECIMAL(20,6) NULL, ts DATETIME(6) NULL, doc JSON NULL, data BLOB NULL, "
        "txt VARCHAR(200) CHARACTER SET utf8mb4 NULL, PRIMARY KEY (id, tag)) ENGINE=InnoDB",
        f"CREATE TABLE t_c ({_columns_ddl('InnoDB')}",
        f"CREATE TABLE t_aria ({_columns_ddl('Aria')}",
        f"CREATE TABLE t_myisam ({_columns_ddl('MyISAM')}",
        database=database,
    )


class Worker:
    """One connection and its random stream."""

    def __init__(
        self,
        upstream: LocalMariaDB,
        database: str,
        index: int,
        seed: int,
        features: frozenset[str],
        gate: Gate,
        schema: Schema,
    ) -> None:
        self.rng = random.Random(f"{seed}:{index}")
        self.index = index
        self.database = database
        self.features = features
        self.gate = gate
        self.schema = schema
        self.stats = Stats(seed=seed)
        self.conn = upstream.connect(database)
        self.private = 0  # keys no other connection uses, for lifecycle transactions
        self.xid = 0
        self._sql("SET SESSION innodb_lock_wait_timeout = 2")
        self._sql("SET SESSION lock_wait_timeout = 60")

    # -- values ------------------------------------------------------------------------------
    def _values(self) -> dict[str, Any]:
        r = self.rng
        ip: str | None
        if r.random() < 0.5:
            ip = "::ffff:" + ".".join(str(r.randrange(256)) for _ in range(4))  # INET6 spells IPv4 so
        else:
            ip = ":".join(f"{r.randrange(65536):x}" for _ in range(8))
        micros = r.randrange(0, 4_102_444_800 * 1_000_000)
        values: dict[str, Any] = {
            "n": r.randrange(-1000, 1000),
            "u": str(uuid.UUID(int=r.getrandbits(128), version=r.choice((1, 4)))),
            "ip": ip,
            "amount": Decimal(r.randrange(-(10**14), 10**14)) / Decimal(10**6),
            "ts": dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros),
            "doc": json.dumps(
                {"k": r.randrange(100), "s": r.choice(TEXTS), "l": [r.random(), None, True]},
                ensure_ascii=False,
            ),
            "data": r.randbytes(r.choice((0, 1, 16, 300, 3000))),
            "txt": r.choice(TEXTS) + str(r.randrange(10**6)),
        }
        for name in ("u", "ip", "amount", "ts", "doc", "data", "txt"):
            if r.random() < 0.08:
                values[name] = None
        return values

    def _some_values(self, table: str) -> dict[str, Any]:
        values = self._values()
        chosen = self.rng.sample(sorted(values), k=self.rng.randint(1, len(values)))
        out = {k: values[k] for k in chosen}
        for col in self.schema.extra.get(table, []):
            if self.rng.random() < 0.5:
                value = self.rng.randrange(10**6)
                out[col] = None if col not in self.schema.not_null and self.rng.random() < 0.3 else value
        return out

    # -- statements --------------------------------------------------------------------------
    def _sql(self, sql: str, args: Any = None) -> int:
        self.stats.statements += 1
        with self.conn.cursor() as cur:
            return int(cur.execute(sql, args))

    def _table(self, logical: str) -> str:
        return f"`{self.schema.names[logical]}`"

    def _key(self) -> int:
        return self.rng.randrange(KEYS)

    def _pick(self, transactional_only: bool = False) -> str:
        tables = list(TRANSACTIONAL)
        if "nontransactional" in self.features and not transactional_only and self.rng.random() < 0.3:
            tables = list(NON_TRANSACTIONAL)
        return self.rng.choice(tables)

    def _insert(self, table: str, key: int, *, verb: str = "INSERT", suffix: str = "") -> None:
        values = self._some_values(table)
        values["id"] = key
        if table == "b":
            values["tag"] = self.rng.choice(("x", "y", "ζ"))
        cols = ", ".join(f"`{c}`" for c in values)
        marks = ", ".join(["%s"] * len(values))
        self._sql(
            f"{verb} INTO {self._table(table)} ({cols}) VALUES ({marks}){suffix}", list(values.values())
        )

    def _update(self, table: str, key: int) -> None:
        values = self._some_values(table)
        sets = ", ".join(f"`{c}` = %s" for c in values)
        self._sql(f"UPDATE {self._table(table)} SET {sets}, n = n + 1 WHERE id = %s", [*values.values(), key])

    def _delete(self, table: str, key: int) -> None:
        if self.rng.random() < 0.2:
            self._sql(f"DELETE FROM {self._table(table)} WHERE id BETWEEN %s AND %s", (key, key + 3))
        else:
            self._sql(f"DELETE FROM {self._table(table)} WHERE id = %s", (key,))

    def _op(self, form: str, transactional_only: bool = False) -> None:
        """One step of a transaction in the given form."""
        table = self._pick(transactional_only)
        key = self._key()
        self.stats.forms[form] += 1
        if form == "insert":
            self._insert(table, key)
        elif form == "update":
            self._update(table, key)
        elif form == "delete":
            self._delete(table, key)
        elif form == "multi_change":
            self._insert(table, key, verb="INSERT IGNORE")
            for _ in range(self.rng.randint(2, 5)):
                self._update(table, key)
        elif form == "lifecycle":
            self.private += 1
            own = 1_000_000 * (self.index + 1) + self.private
            self._insert(table, own)
            self._update(table, own)
            self._delete(table, own)
        elif form == "upsert":
            self._insert(
                table, key, suffix=" ON DUPLICATE KEY UPDATE n = n + 1, txt = VALUES(txt), doc = VALUES(doc)"
            )
        elif form == "replace":
            self._insert(table, key, verb="REPLACE")
        elif form == "insert_select":
            target = "aria" if table in NON_TRANSACTIONAL else self.rng.choice(("b", "c"))
            cols = "id, n, u, ip, amount, ts, doc, data, txt"
            tag = ", 'sel'" if target == "b" else ""
            self._sql(
                f"INSERT INTO {self._table(target)} ({cols}{', tag' if target == 'b' else ''}) "
                f"SELECT {cols}{tag} FROM {self._table('a')} WHERE id BETWEEN %s AND %s "
                "ON DUPLICATE KEY UPDATE n = VALUES(n) + 1, amount = VALUES(amount)",
                (key, key + self.rng.randint(0, 10)),
            )
        elif form == "multi_table_update":
            other = self.rng.choice(("b", "c"))
            self._sql(
                f"UPDATE {self._table('a')} x JOIN {self._table(other)} y ON y.id = x.id "
                "SET x.n = x.n + 1, y.n = y.n - 1, y.txt = CONCAT('mt ', x.id) WHERE x.id BETWEEN %s AND %s",
                (key, key + self.rng.randint(0, 8)),
            )
        else:
            raise ValueError(f"unknown workload form {form!r}; known: {sorted(FEATURES)}")

    # -- transactions ------------------------------------------------------------------------
    _STEP_FORMS = (
        "insert",
        "update",
        "delete",
        "multi_change",
        "lifecycle",
        "upsert",
        "replace",
        "insert_select",
        "multi_table_update",
    )

    def _steps(self, transactional_only: bool = False) -> None:
        forms = [f for f in self._STEP_FORMS if f in self.features] or ["update"]
        for _ in range(self.rng.randint(1, 6)):
            try:
                self._op(self.rng.choice(forms), transactional_only)
            except pymysql.err.IntegrityError as exc:
                # A duplicate key fails the statement, not the transaction, as in an application.
                if exc.args[0] != 1062:
                    raise
                self.stats.errors[1062] += 1

    def _plain_transaction(self) -> None:
        # Aria and MyISAM cannot roll back to a savepoint: a savepoint transaction keeps to InnoDB.
        savepoint = "savepoint" in self.features and self.rng.random() < 0.3
        self._sql("START TRANSACTION")
        self._steps(transactional_only=savepoint)
        if savepoint:
            self.stats.forms["savepoint"] += 1
            self._sql("SAVEPOINT sp1")
            self._steps(transactional_only=True)
            if self.rng.random() < 0.5:
                self._sql("ROLLBACK TO SAVEPOINT sp1")
                self._steps(transactional_only=True)
            else:
                self._sql("RELEASE SAVEPOINT sp1")
        if "rollback" in self.features and self.rng.random() < 0.15:
            self.stats.forms["rollback"] += 1
            self._sql("ROLLBACK")
            self.stats.rolled_back += 1
        else:
            self._sql("COMMIT")
            self.stats.committed += 1

    def _xa_transaction(self, how: str) -> None:
        self.xid += 1
        xid = f"'rw-{self.database}-{self.index}-{self.xid}'"  # XA ids are the server's: two runs at once differ
        self.stats.forms[how] += 1
        self._sql(f"XA START {xid}")
        try:
            self._steps(transactional_only=True)
            self._sql(f"XA END {xid}")
        except pymysql.err.MySQLError:
            self._xa_abort(xid)
            raise
        if how == "xa_one_phase":
            self._sql(f"XA COMMIT {xid} ONE PHASE")
            self.stats.committed += 1
            return
        self._sql(f"XA PREPARE {xid}")
        if how == "xa_rollback":
            self._sql(f"XA ROLLBACK {xid}")
            self.stats.rolled_back += 1
        else:
            self._sql(f"XA COMMIT {xid}")
            self.stats.committed += 1

    def _xa_abort(self, xid: str) -> None:
        for sql in (f"XA END {xid}", f"XA ROLLBACK {xid}"):
            try:
                self._sql(sql)
            except pymysql.err.MySQLError as exc:
                # Already ended or already rolled back by the deadlock: the state is what we want.
                self.stats.errors[int(exc.args[0])] += 1

    def _autocommit(self) -> None:
        self.stats.forms["autocommit"] += 1
        self._steps()
        self.stats.committed += 1

    def transaction(self) -> None:
        """One transaction of a randomly chosen form; a deadlock or timeout rolls it back."""
        xa_forms = [f for f in ("xa", "xa_rollback", "xa_one_phase") if f in self.features]
        choice = self.rng.random()
        with self.gate.transaction():
            try:
                if xa_forms and choice < 0.15:
                    self._xa_transaction(self.rng.choice(xa_forms))
                elif choice < 0.25:
                    self._autocommit()
                else:
                    self._plain_transaction()
            except pymysql.err.MySQLError as exc:
                code = int(exc.args[0]) if exc.args and isinstance(exc.args[0], int) else -1
                self.stats.errors[code] += 1
                if code not in EXPECTED_ERRORS:
                    self.stats.unexpected.append(f"[{code}] {exc}")
                self._rollback()

    def _rollback(self) -> None:
        try:
            self._sql("ROLLBACK")
        except pymysql.err.MySQLError as exc:
            # ROLLBACK inside a failed XA branch: XAER_RMFAIL; the branch was ended above.
            self.stats.errors[int(exc.args[0])] += 1
        self.stats.rolled_back += 1

    # -- DDL ---------------------------------------------------------------------------------
    def ddl(self) -> None:
        """One schema change, alone behind the gate."""
        with self.gate.ddl():
            kind = self.rng.choice(("add_column", "drop_column", "index", "rename", "truncate", "ctas"))
            self.stats.forms[f"ddl_{kind}"] += 1
            self.stats.ddls += 1
            s = self.schema
            table = self.rng.choice((*TRANSACTIONAL, *NON_TRANSACTIONAL))
            if kind == "drop_column" and s.extra.get(table):
                col = s.extra[table].pop(self.rng.randrange(len(s.extra[table])))
                self._sql(f"ALTER TABLE {self._table(table)} DROP COLUMN `{col}`")
            elif kind in ("add_column", "drop_column"):
                s.added += 1
                col = f"x{s.added}"
                kind_sql = self.rng.choice(("INT NULL", "INT NOT NULL DEFAULT 7", "VARCHAR(40) DEFAULT 'd'"))
                self._sql(f"ALTER TABLE {self._table(table)} ADD COLUMN `{col}` {kind_sql}")
                s.extra.setdefault(table, []).append(col)
                if "NOT NULL" in kind_sql:
                    s.not_null.add(col)
            elif kind == "index":
                if table in s.indexed:
                    self._sql(f"ALTER TABLE {self._table(table)} DROP INDEX ix_n")
                    s.indexed.discard(table)
                else:
                    self._sql(f"ALTER TABLE {self._table(table)} ADD INDEX ix_n (n, ts)")
                    s.indexed.add(table)
            elif kind == "rename":
                logical = self.rng.choice(("c", "myisam"))
                new = f"t_{logical}_r{s.added}_{self.stats.ddls}"
                self._sql(f"RENAME TABLE {self._table(logical)} TO `{new}`")
                s.names[logical] = new
            elif kind == "truncate":
                self._sql(f"TRUNCATE TABLE {self._table(self.rng.choice(('b', 'aria', 'myisam')))}")
            else:
                name = f"t_copy_{self.stats.ddls}"
                self._sql(
                    f"CREATE TABLE `{name}` (PRIMARY KEY (id)) ENGINE=InnoDB "
                    f"SELECT id, n, u, amount, ts, txt FROM {self._table('a')} WHERE id < %s",
                    (self.rng.randrange(KEYS),),
                )
                s.copies.append(name)
                if len(s.copies) > 3:
                    self._sql(f"DROP TABLE `{s.copies.pop(0)}`")

    def close(self) -> None:
        self.conn.close()


def run_random(
    upstream: LocalMariaDB,
    *,
    seed: int,
    seconds: float,
    connections: int = 4,
    database: str,
    features: frozenset[str] | set[str] = FEATURES,
    ddl_every: tuple[float, float] = (1.0, 3.0),
    rate: float = 0.0,
    log: Callable[[str], None] = print,
) -> Stats:
    """Run the workload for ``seconds`` on ``connections`` threads in ``database`` (created here).

    ``rate``: at most this many transactions per second over all connections (0: as fast as the
    upstream takes them). A long run at full speed writes more than a broker that keeps its log in
    memory can hold; a capped rate keeps the same mix of forms over the same time.
    """
    if rate < 0:
        raise ValueError(f"rate {rate}: expected transactions per second >= 0 (0: no cap)")
    interval = connections / rate if rate else 0.0
    unknown = set(features) - FEATURES
    if unknown:
        raise ValueError(f"unknown workload features {sorted(unknown)}; known: {sorted(FEATURES)}")
    enabled = frozenset(features)
    log(f"random workload: seed={seed} seconds={seconds} connections={connections} database={database}")
    create_tables(upstream, database)
    gate, schema = Gate(), Schema()
    workers = [Worker(upstream, database, i, seed, enabled, gate, schema) for i in range(connections)]
    failures: list[BaseException] = []
    started = time.monotonic()
    deadline = started + seconds

    def loop(worker: Worker) -> None:
        next_ddl = time.monotonic() + worker.rng.uniform(*ddl_every)
        next_txn = time.monotonic()
        try:
            while time.monotonic() < deadline:
                if worker.index == 0 and "ddl" in enabled and time.monotonic() >= next_ddl:
                    worker.ddl()
                    next_ddl = time.monotonic() + worker.rng.uniform(*ddl_every)
                if interval:
                    # the cap: wait out this connection's share of the rate (never past the deadline)
                    time.sleep(max(0.0, min(next_txn, deadline) - time.monotonic()))
                    next_txn = max(next_txn, time.monotonic() - interval) + interval
                    if time.monotonic() >= deadline:
                        break
                worker.transaction()
        except BaseException as exc:  # handed to the caller after the join
            failures.append(exc)

    threads = [threading.Thread(target=loop, args=(w,), name=f"rw-{w.index}") for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = Stats(seed=seed)
    for w in workers:
        total.add(w.stats)
        w.close()
    total.seconds = time.monotonic() - started
    if failures:
        raise RuntimeError(f"random workload seed={seed} failed: {failures[0]!r}") from failures[0]
    log(f"random workload: {total.summary()}")
    return total
