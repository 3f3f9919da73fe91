"""Statement forms as applications write them, one database each, for the oracle workloads.

Each form is a function ``(upstream, database)`` that creates ``database`` and writes it
with one statement form: savepoints, XA, ``CREATE ... SELECT``, non-transactional engines,
key changes inside one transaction, DDL that moves data (TRUNCATE, RENAME, EXCHANGE
PARTITION), generated and invisible columns, charsets, server-wide binlog settings. The
expected result is whatever the native replica holds, so a form states no expected rows.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from sparkcdc.services.mariadb import LocalMariaDB
from tests.oracle.harness import Segment


@dataclass(frozen=True)
class Form:
    """One statement form: its test id, its database and how it writes it."""

    name: str
    write: Callable[[LocalMariaDB, str], None]
    db: str = ""
    """The database it writes, when another form created it (default ``of_<name>``)."""

    @property
    def database(self) -> str:
        return self.db or f"of_{self.name}"


def sql(up: LocalMariaDB, db: str | None, *statements: str | tuple[str, Any], **connect: Any) -> None:
    """Run statements in order on one connection (autocommit on; BEGIN/COMMIT where a form writes them)."""
    conn = up.connect(db, **connect)
    try:
        with conn.cursor() as cur:
            for s in statements:
                if isinstance(s, tuple):
                    cur.execute(s[0], s[1])
                else:
                    cur.execute(s)
    finally:
        conn.close()


def create_db(up: LocalMariaDB, db: str, *tables: str) -> None:
    """``CREATE DATABASE db`` and its tables."""
    sql(up, None, f"CREATE DATABASE `{db}`")
    sql(up, db, *tables)


KV = "(id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, n INT NULL)"


# -- transactions: savepoints, rollback, XA -------------------------------------------------------


def savepoint_innodb(up: LocalMariaDB, db: str) -> None:
    """SAVEPOINT, ROLLBACK TO SAVEPOINT and RELEASE SAVEPOINT on InnoDB tables only."""
    create_db(
        up, db, f"CREATE TABLE orders {KV} ENGINE=InnoDB", f"CREATE TABLE order_lines {KV} ENGINE=InnoDB"
    )
    sql(
        up,
        db,
        "INSERT INTO orders VALUES (1, 'open', 0), (2, 'open', 0)",
        "BEGIN",
        "INSERT INTO orders VALUES (3, 'open', 0)",
        "SAVEPOINT before_lines",
        "INSERT INTO order_lines VALUES (30, 'widget', 3)",
        "UPDATE orders SET v = 'filled', n = 1 WHERE id = 1",
        "ROLLBACK TO SAVEPOINT before_lines",
        "INSERT INTO order_lines VALUES (31, 'gadget', 3)",
        "SAVEPOINT s2",
        "DELETE FROM orders WHERE id = 2",
        "RELEASE SAVEPOINT s2",
        "COMMIT",
        # nested savepoints, rolled back from the inner to the outer one
        "BEGIN",
        "SAVEPOINT a",
        "INSERT INTO orders VALUES (6, 'a', 6)",
        "SAVEPOINT b",
        "INSERT INTO orders VALUES (7, 'b', 7)",
        "ROLLBACK TO b",
        "UPDATE orders SET n = 60 WHERE id = 6",
        "ROLLBACK TO a",
        "INSERT INTO orders VALUES (8, 'after a', 8)",
        "COMMIT",
        # a savepoint whose rollback undoes everything before the commit
        "BEGIN",
        "SAVEPOINT all_of_it",
        "UPDATE orders SET v = 'gone' WHERE id > 0",
        "ROLLBACK TO SAVEPOINT all_of_it",
        "COMMIT",
    )


def savepoint_myisam(up: LocalMariaDB, db: str) -> None:
    """ROLLBACK TO SAVEPOINT after a MyISAM/Aria write: the server writes the ROLLBACK TO into the binlog."""
    create_db(
        up,
        db,
        f"CREATE TABLE acct {KV} ENGINE=InnoDB",
        "CREATE TABLE audit (id INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(40)) ENGINE=MyISAM",
        "CREATE TABLE hits (id INT PRIMARY KEY, c INT NOT NULL) ENGINE=Aria",
    )
    sql(
        up,
        db,
        "INSERT INTO acct VALUES (1, 'a', 100), (2, 'b', 200)",
        "BEGIN",
        "UPDATE acct SET n = n - 10 WHERE id = 1",
        "SAVEPOINT transfer",
        "UPDATE acct SET n = n + 10 WHERE id = 2",
        "INSERT INTO audit (what) VALUES ('transfer 1->2')",
        "INSERT INTO hits VALUES (1, 1)",
        "INSERT INTO acct VALUES (3, 'c', 300)",
        "ROLLBACK TO SAVEPOINT transfer",
        "UPDATE acct SET n = n + 10 WHERE id = 1",
        "INSERT INTO acct VALUES (4, 'd', 400)",
        "COMMIT",
        "BEGIN",
        "SAVEPOINT s",
        "DELETE FROM acct WHERE id = 4",
        "UPDATE hits SET c = c + 1 WHERE id = 1",
        "ROLLBACK TO s",
        "RELEASE SAVEPOINT s",
        "UPDATE acct SET v = 'kept' WHERE id = 4",
        "COMMIT",
    )


def rollback_mixed(up: LocalMariaDB, db: str) -> None:
    """A transaction over InnoDB and MyISAM that ends with ROLLBACK: the MyISAM rows stay."""
    create_db(
        up,
        db,
        f"CREATE TABLE inno {KV} ENGINE=InnoDB",
        f"CREATE TABLE mi {KV} ENGINE=MyISAM",
    )
    sql(
        up,
        db,
        "INSERT INTO inno VALUES (1, 'kept', 1)",
        "INSERT INTO mi VALUES (1, 'kept', 1)",
        "BEGIN",
        "INSERT INTO inno VALUES (2, 'rolled back', 2)",
        "UPDATE inno SET v = 'rolled back' WHERE id = 1",
        "INSERT INTO mi VALUES (2, 'not transactional', 2)",
        "UPDATE mi SET n = 10 WHERE id = 1",
        "DELETE FROM inno WHERE id = 1",
        "ROLLBACK",
        "BEGIN",
        "INSERT INTO mi VALUES (3, 'first', 3)",
        "INSERT INTO inno VALUES (3, 'rolled back too', 3)",
        "ROLLBACK",
    )


def xa_two_phase(up: LocalMariaDB, db: str) -> None:
    """XA START/END/PREPARE/COMMIT, one prepared on a connection and committed from another."""
    create_db(up, db, f"CREATE TABLE t {KV} ENGINE=InnoDB")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'before', 1)",
        "XA START 'tm-1'",
        "INSERT INTO t VALUES (2, 'xa', 2)",
        "UPDATE t SET n = 10 WHERE id = 1",
        "XA END 'tm-1'",
        "XA PREPARE 'tm-1'",
        "XA COMMIT 'tm-1'",
        "XA START 'tm-2', 'branch-b', 7",
        "INSERT INTO t VALUES (3, 'xa with bqual', 3)",
        "XA END 'tm-2', 'branch-b', 7",
        "XA PREPARE 'tm-2', 'branch-b', 7",
    )
    # A transaction commits while tm-2 is prepared; then the transaction manager commits it.
    sql(up, db, "INSERT INTO t VALUES (4, 'between', 4)")
    sql(up, db, "XA COMMIT 'tm-2', 'branch-b', 7", "UPDATE t SET v = 'after' WHERE id = 3")


def xa_rollback(up: LocalMariaDB, db: str) -> None:
    """XA PREPARE then XA ROLLBACK: the prepared rows never happen."""
    create_db(up, db, f"CREATE TABLE t {KV} ENGINE=InnoDB")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'before', 1)",
        "XA START 'rb-1'",
        "INSERT INTO t VALUES (2, 'rolled back', 2)",
        "DELETE FROM t WHERE id = 1",
        "XA END 'rb-1'",
        "XA PREPARE 'rb-1'",
    )
    sql(up, db, "INSERT INTO t VALUES (3, 'between', 3)")
    sql(
        up,
        db,
        "XA ROLLBACK 'rb-1'",
        "XA START 'rb-2'",
        "UPDATE t SET v = 'never' WHERE id = 3",
        "XA END 'rb-2'",
        "XA ROLLBACK 'rb-2'",
        "INSERT INTO t VALUES (4, 'after', 4)",
    )


def xa_one_phase(up: LocalMariaDB, db: str) -> None:
    """XA COMMIT ... ONE PHASE."""
    create_db(up, db, f"CREATE TABLE t {KV} ENGINE=InnoDB")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'before', 1)",
        "XA START 'op-1'",
        "INSERT INTO t VALUES (2, 'one phase', 2)",
        "UPDATE t SET n = n + 1",
        "XA END 'op-1'",
        "XA COMMIT 'op-1' ONE PHASE",
        "DELETE FROM t WHERE id = 1",
    )


# -- DML forms -------------------------------------------------------------------------------------


def create_select(up: LocalMariaDB, db: str) -> None:
    """CREATE TABLE ... SELECT (with and without its own column definitions)."""
    create_db(up, db, f"CREATE TABLE src {KV} ENGINE=InnoDB")
    sql(
        up,
        db,
        "INSERT INTO src VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', NULL), (4, 'd', 4)",
        "CREATE TABLE copy_all SELECT * FROM src",
        "CREATE TABLE copy_keyed (id INT PRIMARY KEY, total INT) ENGINE=InnoDB "
        "SELECT id, COALESCE(n, 0) * 10 AS total FROM src WHERE id > 1",
        "CREATE TABLE summary ENGINE=InnoDB SELECT COUNT(*) AS c, SUM(n) AS s FROM src",
        "UPDATE copy_keyed SET total = total + 1 WHERE id = 2",
        "INSERT INTO copy_all VALUES (5, 'e', 5)",
    )


def insert_select(up: LocalMariaDB, db: str) -> None:
    """INSERT ... SELECT between tables and from a table into itself."""
    create_db(up, db, f"CREATE TABLE a {KV}", f"CREATE TABLE b {KV}")
    sql(
        up,
        db,
        "INSERT INTO a VALUES (1, 'x', 1), (2, 'y', 2), (3, 'z', 3)",
        "INSERT INTO b SELECT id, CONCAT(v, '!'), n * 2 FROM a WHERE n >= 2",
        "INSERT INTO a SELECT id + 10, v, n FROM a",
        "INSERT IGNORE INTO b SELECT id, 'dup', 0 FROM a",
    )


def replace_into(up: LocalMariaDB, db: str) -> None:
    """REPLACE over the primary key and over a unique key that collides with two rows."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL, n INT, UNIQUE KEY uk_code (code))",
    )
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
        "REPLACE INTO t VALUES (1, 'a', 10)",
        "REPLACE INTO t VALUES (4, 'd', 4)",
        "REPLACE INTO t VALUES (2, 'c', 20)",  # deletes id 2 (key) and id 3 (code 'c')
        "REPLACE INTO t SET id = 5, code = 'a', n = 50",
    )


def upsert(up: LocalMariaDB, db: str) -> None:
    """INSERT ... ON DUPLICATE KEY UPDATE: counters and last-writer rows."""
    create_db(
        up,
        db,
        "CREATE TABLE counters (k VARCHAR(20) PRIMARY KEY, hits INT NOT NULL, last_seen DATETIME NULL)",
    )
    sql(
        up,
        db,
        "INSERT INTO counters VALUES ('home', 1, '2024-01-01 00:00:00') "
        "ON DUPLICATE KEY UPDATE hits = hits + 1",
        "INSERT INTO counters VALUES ('home', 1, '2024-01-02 00:00:00') "
        "ON DUPLICATE KEY UPDATE hits = hits + 1, last_seen = VALUES(last_seen)",
        "INSERT INTO counters VALUES ('about', 1, NULL), ('home', 1, NULL) "
        "ON DUPLICATE KEY UPDATE hits = hits + VALUES(hits)",
        "INSERT INTO counters VALUES ('about', 5, NULL) ON DUPLICATE KEY UPDATE k = 'about-us'",
    )


def multi_table_update(up: LocalMariaDB, db: str) -> None:
    """UPDATE of two tables joined in one statement."""
    create_db(
        up,
        db,
        "CREATE TABLE orders (id INT PRIMARY KEY, customer INT, total DECIMAL(10,2), status VARCHAR(10))",
        "CREATE TABLE customers (id INT PRIMARY KEY, spent DECIMAL(10,2), orders INT)",
    )
    sql(
        up,
        db,
        "INSERT INTO customers VALUES (1, 0, 0), (2, 0, 0), (3, 0, 0)",
        "INSERT INTO orders VALUES (10, 1, 9.99, 'new'), (11, 1, 5.00, 'new'), (12, 2, 100.50, 'new')",
        "UPDATE orders o JOIN customers c ON o.customer = c.id "
        "SET o.status = 'billed', c.spent = c.spent + o.total, c.orders = c.orders + 1 WHERE o.total > 6",
        "UPDATE customers c, orders o SET c.orders = 99, o.customer = 3 WHERE c.id = 3 AND o.id = 11",
    )


def multi_table_delete(up: LocalMariaDB, db: str) -> None:
    """DELETE from two tables joined in one statement, and from one using another."""
    create_db(
        up,
        db,
        "CREATE TABLE parent (id INT PRIMARY KEY, gone TINYINT NOT NULL)",
        "CREATE TABLE child (id INT PRIMARY KEY, parent INT NOT NULL, v VARCHAR(10))",
    )
    sql(
        up,
        db,
        "INSERT INTO parent VALUES (1, 0), (2, 1), (3, 1), (4, 0)",
        "INSERT INTO child VALUES (10, 1, 'a'), (20, 2, 'b'), (21, 2, 'c'), (30, 3, 'd'), (40, 4, 'e')",
        "DELETE p, c FROM parent p JOIN child c ON c.parent = p.id WHERE p.id = 2",
        "DELETE c FROM child c JOIN parent p ON c.parent = p.id WHERE p.gone = 1",
        "DELETE FROM child USING child JOIN parent ON child.parent = parent.id WHERE parent.id = 4",
    )


def load_data(up: LocalMariaDB, db: str) -> None:
    """LOAD DATA LOCAL INFILE of a CSV file, then REPLACE-mode loading over it."""
    create_db(up, db, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(40), score DECIMAL(6,2) NULL)")
    fd, name = tempfile.mkstemp(suffix=".csv")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write('1,"ann",1.50\n2,"bob, jr.",\\N\n3,"chloé",99.99\n4,"d""q",0\n')
        sql(
            up,
            db,
            f"LOAD DATA LOCAL INFILE '{name}' INTO TABLE t CHARACTER SET utf8mb4 "
            "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n'",
            local_infile=True,
        )
        with open(name, "w", encoding="utf-8") as f:
            f.write('3,"chloe again",1\n5,"eve",5\n')
        sql(
            up,
            db,
            f"LOAD DATA LOCAL INFILE '{name}' REPLACE INTO TABLE t CHARACTER SET utf8mb4 "
            "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'",
            local_infile=True,
        )
    finally:
        os.unlink(name)


def load_data_server(up: LocalMariaDB, db: str) -> None:
    """Server-side LOAD DATA INFILE (the server reads the file): column lists with SET, IGNORE over
    duplicate keys, a keyless table, and SELECT ... INTO OUTFILE loaded back into a copy."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(40), score DECIMAL(6,2) NULL, loaded INT)",
        "CREATE TABLE copy_t LIKE t",
        "CREATE TABLE nokey (a INT, b VARCHAR(10))",
    )
    files = Path(up.tmpdir) / f"{db}-load"
    files.mkdir(parents=True, exist_ok=True)
    first, dup, nokey, out = (files / n for n in ("first.csv", "dup.csv", "nokey.tsv", "out.txt"))
    first.write_text('id,name,score\n1,"ann",1.50\n2,"bob, jr.",\\N\n3,"chloé",99.99\n', encoding="utf-8")
    dup.write_text('2,"bob again",7\n4,"dan",4.25\n', encoding="utf-8")
    nokey.write_text("1\tx\n1\tx\n2\t\\N\n", encoding="utf-8")
    fields = "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'"
    sql(
        up,
        db,
        f"LOAD DATA INFILE '{first}' INTO TABLE t CHARACTER SET utf8mb4 {fields} IGNORE 1 LINES "
        "(id, @name, score) SET name = UPPER(@name), loaded = 1",
        f"LOAD DATA INFILE '{dup}' IGNORE INTO TABLE t CHARACTER SET utf8mb4 {fields} "
        "(id, name, score) SET loaded = 2",
        f"LOAD DATA INFILE '{nokey}' INTO TABLE nokey",
        f"SELECT * FROM t ORDER BY id INTO OUTFILE '{out}'",
        f"LOAD DATA INFILE '{out}' INTO TABLE copy_t",
        "BEGIN",
        f"LOAD DATA INFILE '{dup}' REPLACE INTO TABLE copy_t CHARACTER SET utf8mb4 {fields} "
        "(id, name, score) SET loaded = 3",
        "UPDATE copy_t SET score = score + 1 WHERE id = 4",
        "COMMIT",
    )


def trigger_writes(up: LocalMariaDB, db: str) -> None:
    """A trigger that writes an audit table on every insert and update."""
    create_db(
        up,
        db,
        f"CREATE TABLE items {KV}",
        "CREATE TABLE audit (seq INT AUTO_INCREMENT PRIMARY KEY, item INT, what VARCHAR(20))",
        "CREATE TRIGGER items_ai AFTER INSERT ON items FOR EACH ROW "
        "INSERT INTO audit (item, what) VALUES (NEW.id, 'insert')",
        "CREATE TRIGGER items_au AFTER UPDATE ON items FOR EACH ROW "
        "INSERT INTO audit (item, what) VALUES (NEW.id, CONCAT('update ', OLD.n, '->', NEW.n))",
    )
    sql(
        up,
        db,
        "INSERT INTO items VALUES (1, 'a', 1), (2, 'b', 2)",
        "UPDATE items SET n = n + 1",
        "BEGIN",
        "INSERT INTO items VALUES (3, 'c', 3)",
        "UPDATE items SET v = 'cc' WHERE id = 3",
        "COMMIT",
    )


def procedure_writes(up: LocalMariaDB, db: str) -> None:
    """A stored procedure that inserts, updates and deletes, called inside and outside a transaction."""
    create_db(
        up,
        db,
        f"CREATE TABLE stock {KV}",
        "CREATE PROCEDURE restock(IN p_id INT, IN p_qty INT) BEGIN "
        "INSERT INTO stock VALUES (p_id, 'restocked', p_qty) ON DUPLICATE KEY UPDATE n = n + p_qty; "
        "DELETE FROM stock WHERE n <= 0; "
        "END",
    )
    sql(
        up,
        db,
        "INSERT INTO stock VALUES (1, 'a', 5), (2, 'b', 0), (3, 'c', 1)",
        "CALL restock(1, 10)",
        "CALL restock(4, 2)",
        "BEGIN",
        "CALL restock(3, -1)",
        "CALL restock(5, 7)",
        "COMMIT",
    )


# -- engines and temporary tables ------------------------------------------------------------------


def nontransactional_engines(up: LocalMariaDB, db: str) -> None:
    """Aria and MyISAM tables written on their own (autocommit, multi-row, updates, deletes)."""
    create_db(
        up,
        db,
        f"CREATE TABLE aria {KV} ENGINE=Aria",
        f"CREATE TABLE aria_nt {KV} ENGINE=Aria TRANSACTIONAL=0",
        f"CREATE TABLE myisam {KV} ENGINE=MyISAM",
        "CREATE TABLE myisam_nopk (a INT, b VARCHAR(10)) ENGINE=MyISAM",
    )
    statements: list[str] = []
    for t in ("aria", "aria_nt", "myisam"):
        statements += [
            f"INSERT INTO {t} VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
            f"UPDATE {t} SET n = n * 10 WHERE id > 1",
            f"UPDATE {t} SET id = 30 WHERE id = 3",
            f"DELETE FROM {t} WHERE id = 1",
        ]
    statements += [
        "INSERT INTO myisam_nopk VALUES (1, 'x'), (1, 'x'), (2, 'y')",
        "DELETE FROM myisam_nopk WHERE a = 1 LIMIT 1",
        "UPDATE myisam_nopk SET b = 'z' WHERE a = 2",
    ]
    sql(up, db, *statements)


def engines_in_one_txn(up: LocalMariaDB, db: str) -> None:
    """InnoDB, Aria and MyISAM written in one committed transaction."""
    create_db(
        up,
        db,
        f"CREATE TABLE inno {KV} ENGINE=InnoDB",
        f"CREATE TABLE aria {KV} ENGINE=Aria",
        f"CREATE TABLE mi {KV} ENGINE=MyISAM",
    )
    sql(
        up,
        db,
        "BEGIN",
        "INSERT INTO inno VALUES (1, 'i', 1), (2, 'i', 2)",
        "INSERT INTO aria VALUES (1, 'a', 1)",
        "INSERT INTO mi VALUES (1, 'm', 1)",
        "UPDATE inno SET n = n + 100",
        "UPDATE mi SET n = n + 100",
        "DELETE FROM aria WHERE id = 1",
        "INSERT INTO aria VALUES (2, 'a2', 2)",
        "COMMIT",
        "BEGIN",
        "INSERT INTO mi SELECT id + 10, v, n FROM inno",
        "UPDATE inno SET v = 'done'",
        "COMMIT",
    )


def temporary_table(up: LocalMariaDB, db: str) -> None:
    """A TEMPORARY table filled, changed and used to fill a real table; it never appears downstream."""
    create_db(up, db, f"CREATE TABLE report {KV}")
    sql(
        up,
        db,
        "CREATE TEMPORARY TABLE staging (id INT PRIMARY KEY, v VARCHAR(40), n INT)",
        "INSERT INTO staging VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)",
        "UPDATE staging SET n = n * 100 WHERE id > 1",
        "DELETE FROM staging WHERE id = 3",
        "INSERT INTO report SELECT id, v, n FROM staging",
        "BEGIN",
        "INSERT INTO staging VALUES (4, 'four', 4)",
        "INSERT INTO report SELECT id, v, n FROM staging WHERE id = 4",
        "COMMIT",
        "CREATE TEMPORARY TABLE tmp_copy SELECT * FROM report",
        "UPDATE report r JOIN tmp_copy c ON r.id = c.id SET r.n = c.n + 1",
        "DROP TEMPORARY TABLE staging",
        "DROP TEMPORARY TABLE tmp_copy",
    )


# -- one key several times in one transaction ------------------------------------------------------


def key_changed_twice(up: LocalMariaDB, db: str) -> None:
    """One primary key moved twice in one transaction (1 -> 2 -> 3), and a swap of two keys."""
    create_db(up, db, f"CREATE TABLE t {KV}")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'moving', 1), (10, 'x', 10), (11, 'y', 11)",
        "BEGIN",
        "UPDATE t SET id = 2 WHERE id = 1",
        "UPDATE t SET id = 3, n = 3 WHERE id = 2",
        "COMMIT",
        "BEGIN",
        "UPDATE t SET id = 12 WHERE id = 10",
        "UPDATE t SET id = 10 WHERE id = 11",
        "UPDATE t SET id = 11 WHERE id = 12",
        "COMMIT",
        # a key moved away and a new row taking its old key in the same transaction
        "BEGIN",
        "UPDATE t SET id = 4 WHERE id = 3",
        "INSERT INTO t VALUES (3, 'new at 3', 33)",
        "COMMIT",
    )


def insert_update_delete(up: LocalMariaDB, db: str) -> None:
    """Insert -> update -> delete of one key in one transaction, and delete -> insert of another."""
    create_db(up, db, f"CREATE TABLE t {KV}")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'old', 1)",
        "BEGIN",
        "INSERT INTO t VALUES (2, 'short-lived', 2)",
        "UPDATE t SET v = 'updated', n = 20 WHERE id = 2",
        "DELETE FROM t WHERE id = 2",
        "DELETE FROM t WHERE id = 1",
        "INSERT INTO t VALUES (1, 'reborn', 100)",
        "UPDATE t SET n = n + 1 WHERE id = 1",
        "COMMIT",
        "BEGIN",
        "INSERT INTO t VALUES (5, 'five', 5)",
        "UPDATE t SET n = 50 WHERE id = 5",
        "UPDATE t SET n = 500 WHERE id = 5",
        "COMMIT",
    )


# -- DDL that moves data ---------------------------------------------------------------------------


def truncate(up: LocalMariaDB, db: str) -> None:
    """TRUNCATE TABLE between writes."""
    create_db(up, db, f"CREATE TABLE t {KV}", f"CREATE TABLE keep {KV}")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)",
        "INSERT INTO keep VALUES (1, 'stays', 1)",
        "TRUNCATE TABLE t",
        "INSERT INTO t VALUES (2, 'after truncate', 22), (3, 'c', 3)",
        "TRUNCATE keep",
    )


def rename_tables(up: LocalMariaDB, db: str) -> None:
    """RENAME TABLE with several pairs, including the swap applications use to publish a table."""
    create_db(
        up,
        db,
        f"CREATE TABLE a {KV}",
        f"CREATE TABLE c {KV}",
        f"CREATE TABLE live {KV}",
        f"CREATE TABLE live_new {KV}",
    )
    sql(
        up,
        db,
        "INSERT INTO a VALUES (1, 'a', 1)",
        "INSERT INTO c VALUES (1, 'c', 1)",
        "INSERT INTO live VALUES (1, 'old', 1)",
        "INSERT INTO live_new VALUES (1, 'new', 1), (2, 'new', 2)",
        "RENAME TABLE a TO b, c TO d",
        "INSERT INTO b VALUES (2, 'b', 2)",
        "UPDATE d SET v = 'd' WHERE id = 1",
        "RENAME TABLE live TO live_old, live_new TO live",
        "INSERT INTO live VALUES (3, 'after swap', 3)",
        "UPDATE live_old SET n = 0",
    )


def exchange_partition(up: LocalMariaDB, db: str) -> None:
    """A range-partitioned table, ALTER TABLE ... EXCHANGE PARTITION with a staging table, writes after."""
    create_db(
        up,
        db,
        "CREATE TABLE events (id INT NOT NULL, day INT NOT NULL, v VARCHAR(20), PRIMARY KEY (id, day)) "
        "PARTITION BY RANGE (day) (PARTITION p1 VALUES LESS THAN (100), "
        "PARTITION p2 VALUES LESS THAN (200), PARTITION pmax VALUES LESS THAN MAXVALUE)",
        "CREATE TABLE staging (id INT NOT NULL, day INT NOT NULL, v VARCHAR(20), PRIMARY KEY (id, day))",
    )
    sql(
        up,
        db,
        "INSERT INTO events VALUES (1, 10, 'p1'), (2, 150, 'p2'), (3, 250, 'pmax'), (4, 20, 'p1')",
        "INSERT INTO staging VALUES (7, 50, 'loaded'), (8, 99, 'loaded')",
        "ALTER TABLE events EXCHANGE PARTITION p1 WITH TABLE staging",
        "UPDATE events SET v = 'after exchange' WHERE day < 100",
        "INSERT INTO staging VALUES (9, 1, 'into staging')",
        "ALTER TABLE events TRUNCATE PARTITION p2",
        "INSERT INTO events VALUES (5, 120, 'p2 again')",
    )


def generated_columns(up: LocalMariaDB, db: str) -> None:
    """VIRTUAL and STORED generated columns, including an indexed one."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, price DECIMAL(10,2) NOT NULL, qty INT NOT NULL, "
        "total DECIMAL(12,2) AS (price * qty) STORED, "
        "label VARCHAR(60) AS (CONCAT('#', id, ' x', qty)) VIRTUAL, "
        "big TINYINT AS (qty > 10) VIRTUAL, KEY k_total (total))",
    )
    sql(
        up,
        db,
        "INSERT INTO t (id, price, qty) VALUES (1, 2.50, 4), (2, 10.00, 1), (3, 1.00, 20)",
        "UPDATE t SET qty = qty + 1 WHERE id < 3",
        "UPDATE t SET id = 30 WHERE id = 3",
        "DELETE FROM t WHERE total = 10.00 * 2",
        "ALTER TABLE t ADD COLUMN half DECIMAL(12,2) AS (total / 2) VIRTUAL",
        "INSERT INTO t (id, price, qty) VALUES (4, 3.00, 3)",
    )


def invisible_columns(up: LocalMariaDB, db: str) -> None:
    """INVISIBLE columns written explicitly and through their default."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), "
        "secret VARCHAR(20) INVISIBLE DEFAULT 'hidden', rev INT INVISIBLE NOT NULL DEFAULT 0)",
    )
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'implicit')",
        "INSERT INTO t (id, v, secret, rev) VALUES (2, 'explicit', 'told', 5)",
        "UPDATE t SET rev = rev + 1, secret = CONCAT(secret, '!')",
        "ALTER TABLE t ADD COLUMN later INT INVISIBLE DEFAULT 7",
        "INSERT INTO t (id, v, later) VALUES (3, 'after alter', 8)",
    )


def charsets(up: LocalMariaDB, db: str) -> None:
    """Values in utf8mb3, latin1 and binary-charset columns (and a utf8mb4 one beside them)."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, "
        "u3 VARCHAR(40) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci, "
        "l1 VARCHAR(40) CHARACTER SET latin1, "
        "c1 CHAR(6) CHARACTER SET latin1, "
        "bin VARCHAR(40) CHARACTER SET binary, "
        "bc CHAR(4) CHARACTER SET binary, "
        "t3 TEXT CHARACTER SET utf8mb3, "
        "u4 VARCHAR(40) CHARACTER SET utf8mb4) DEFAULT CHARSET=latin1",
    )
    rows = [
        (1, "héllo wörld", "ÿéàç £", "ß", b"\x00\xff\x80'\\\n", b"\x01\x02", "日本語", "😀 emoji"),
        (2, "", "", "", b"", b"", "", ""),
        (3, None, None, None, None, None, None, None),
        (4, "trailing ", "trailing  ", "a", b"a\x00", b"a", "end ", "x"),
        (5, "a'b\"c\\d", "quote's", "'", b"\x27\x5c", b"\xfe\xff", "multi\nline", "tab\tsep"),
    ]
    sql(
        up,
        db,
        *[("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", r) for r in rows],
        ("UPDATE t SET l1 = %s, bin = %s WHERE id = 1", ("Ñandú ½", b"\xde\xad\xbe\xef")),
    )


def more_charsets(up: LocalMariaDB, db: str) -> None:
    """Text in the charsets whose tables differ from ISO-8859-1 and UTF-8 (MySQL's latin1 is cp1252:
    '€' is 0x80), multi-byte and UCS-2/UTF-16/UTF-32 columns, and ENUM/SET elements in them (as
    MariaDB's ctype tests write them, hex-literal elements of a binary ENUM too)."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, "
        "l1 VARCHAR(20) CHARACTER SET latin1, "
        "k VARCHAR(20) CHARACTER SET koi8r, "
        "w VARCHAR(20) CHARACTER SET cp1251, "
        "l2 VARCHAR(20) CHARACTER SET latin2, "
        "sj VARCHAR(20) CHARACTER SET sjis, "
        "gb TEXT CHARACTER SET gbk, "
        "u2 VARCHAR(20) CHARACTER SET ucs2, "
        "u16 TEXT CHARACTER SET utf16, "
        "u32 VARCHAR(20) CHARACTER SET utf32, "
        "e2 ENUM('x', 'y', 'é') CHARACTER SET ucs2, "
        "s16 SET('a', 'b', 'ü') CHARACTER SET utf16, "
        "eb ENUM(0x6100, 0x6200, 0x6300) CHARACTER SET binary, "
        "ek ENUM('да', 'нет') CHARACTER SET koi8r)",
    )
    rows = [
        (
            1,
            "€ Š œ Ÿ ‰",
            "Привет",
            "Добрый",
            "Zażółć",
            "日本語",
            "中文字符",
            "ü€",
            "😀 utf16",
            "𝄞 utf32",
            "é",
            "a,ü",
            "b\x00",
            "да",
        ),
        (2, "", "", "", "", "", "", "", "", "", "x", "", "a\x00", "нет"),
        (3, None, None, None, None, None, None, None, None, None, None, None, None, None),
    ]
    sql(
        up,
        db,
        *[("INSERT INTO t VALUES (" + ", ".join(["%s"] * 14) + ")", r) for r in rows],
        (
            "UPDATE t SET l1 = %s, k = %s, e2 = 'y', s16 = 'b', eb = 'c\x00', ek = 'нет' WHERE id = 1",
            ("ƒ„…†", "Ёжик"),
        ),
        "DELETE FROM t WHERE id = 2",
    )


def connection_literals(up: LocalMariaDB, db: str) -> None:
    """String literals of binary columns (ENUM/SET elements, DEFAULTs) written under a
    ``collation_connection`` other than UTF-8, as MariaDB's ``main/ctype_utf32`` does: their bytes
    are that charset's (``'a'`` is 0x00000061 under utf32), which the statement text alone does not
    say. A DEFAULT added by ALTER fills the rows already there; a binary ENUM with non-ASCII
    elements under UTF-8 and latin1 connections; a table whose default charset is binary, and an
    ALTER adding columns to it that name no charset (binary by that default, which only the catalog
    knows); a table that takes binary from its database's default."""
    create_db(up, db)
    sql(
        up,
        db,
        "SET NAMES utf8, COLLATION_CONNECTION=utf32_bin",
        "CREATE TABLE t (id INT PRIMARY KEY, c1 ENUM('a','b','ac') CHARACTER SET binary, "
        "s1 SET('x','y') CHARACTER SET binary, c2 ENUM('a','b') CHARACTER SET utf32 DEFAULT 'a', "
        "e3 ENUM('p','q') CHARACTER SET binary DEFAULT 'q', v VARCHAR(10) CHARACTER SET binary DEFAULT 'q')",
        "INSERT INTO t (id, c1, s1) VALUES (1, 1, 1), (2, 2, 3), (3, 3, 2)",
        "INSERT INTO t (id, c1, s1, c2, v) VALUES (4, 'b', 3, 'b', 'zz')",
        "ALTER TABLE t ADD COLUMN c3 ENUM('k','l') CHARACTER SET binary DEFAULT 'l', "
        "ADD COLUMN w VARBINARY(16) DEFAULT 'é'",
        "INSERT INTO t (id, c1, c3) VALUES (5, 'ac', 'k')",
        "UPDATE t SET c1 = 'a', e3 = 'p' WHERE id = 2",
        "SET NAMES utf8mb4",
        "CREATE TABLE u (id INT PRIMARY KEY, e ENUM('é', 'ü', 'plain') CHARACTER SET binary, "
        "b VARBINARY(8) DEFAULT 'ñ')",
        "INSERT INTO u (id, e) VALUES (1, 'é'), (2, 3), (3, 'ü')",
        "SET NAMES latin1",
        "CREATE TABLE l (id INT PRIMARY KEY, e ENUM('é', 'x') CHARACTER SET binary DEFAULT 'é') "
        "CHARACTER SET binary",
        "INSERT INTO l (id) VALUES (1)",
        "INSERT INTO l VALUES (2, 'x'), (3, 'é')",
        "ALTER TABLE l ADD COLUMN m BLOB DEFAULT 'ü'",
        "ALTER TABLE l ADD COLUMN f ENUM('ö', 'y') DEFAULT 'ö', ADD COLUMN g VARCHAR(4) DEFAULT 'ñ'",
        "INSERT INTO l (id, f) VALUES (4, 'y'), (5, 'ö')",
        f"ALTER DATABASE `{db}` CHARACTER SET binary",
        "CREATE TABLE k (id INT PRIMARY KEY, e ENUM('é', 'x') DEFAULT 'é', c CHAR(2) DEFAULT 'ß')",
        "INSERT INTO k (id) VALUES (1)",
        "INSERT INTO k (id, e) VALUES (2, 'x'), (3, 'é')",
        f"ALTER DATABASE `{db}` CHARACTER SET utf8mb4",
        "SET NAMES utf8mb4",
        "UPDATE u SET e = 'ü' WHERE id = 1",
    )


def japanese_mappings(up: LocalMariaDB, db: str) -> None:
    """ujis and sjis text where Python's codec tables and MariaDB's map a character differently
    (ujis 0xA1C0 and sjis 0x815F: U+FF3C in Python's, U+005C in MariaDB's), in a table with a key
    and in one without, whose UPDATE and DELETE match rows by those values."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, u VARCHAR(10) CHARACTER SET ujis, s VARCHAR(10) CHARACTER SET sjis)",
        "CREATE TABLE nk (u VARCHAR(10) CHARACTER SET ujis, s VARCHAR(10) CHARACTER SET sjis, n INT)",
    )
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, X'A1C0', X'815F'), (2, X'A4A2A1C0', X'82A0815F'), (3, 'plain', 'plain')",
        "INSERT INTO nk VALUES (X'A1C0', X'815F', 1), (X'A4A2A1C0', X'82A0', 2), (X'A1C0', X'815F', 3)",
        "UPDATE t SET u = CONCAT(u, X'A1C0'), s = CONCAT(s, X'815F') WHERE id = 1",
        "UPDATE nk SET n = n + 10 WHERE n = 1",
        "DELETE FROM nk WHERE n = 2",
        "UPDATE t SET id = 4 WHERE id = 2",
    )


def large_values(up: LocalMariaDB, db: str) -> None:
    """Values of a few hundred kilobytes in TEXT and BLOB columns (well under max_allowed_packet)."""
    create_db(up, db, "CREATE TABLE t (id INT PRIMARY KEY, doc MEDIUMTEXT, img MEDIUMBLOB)")
    big_text = ("lorem ipsum é 😀 " * 20000)[:300_000]
    big_blob = bytes(range(256)) * 1024
    sql(
        up,
        db,
        ("INSERT INTO t VALUES (1, %s, %s)", (big_text, big_blob)),
        ("INSERT INTO t VALUES (2, %s, NULL)", ("small",)),
        "UPDATE t SET doc = CONCAT(doc, 'tail') WHERE id = 1",
    )


def compressed_columns(up: LocalMariaDB, db: str) -> None:
    """MariaDB's COMPRESSED columns (zlib, binlog types 140/141): short values are stored as they
    are, long repetitive ones compressed; empty and NULL values; a latin1 one among utf8mb4 ones."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, "
        "s VARCHAR(200) COMPRESSED, "
        "l VARCHAR(2000) COMPRESSED CHARACTER SET latin1, "
        "vb VARBINARY(3000) COMPRESSED, "
        "doc TEXT COMPRESSED, "
        "img MEDIUMBLOB COMPRESSED, "
        "plain VARCHAR(20) CHARACTER SET latin1) DEFAULT CHARSET=utf8mb4",
    )
    long_text = "compressible é 😀 " * 400
    rows = [
        (1, "short é", "ÿé", b"\x00\x01", "tiny", b"\xff", "à"),
        (2, "é" * 190, "à" * 1500, bytes(range(256)) * 10, long_text, bytes(range(256)) * 400, "ÿ"),
        (3, "", "", b"", "", b"", ""),
        (4, None, None, None, None, None, None),
    ]
    sql(
        up,
        db,
        "SET SESSION column_compression_threshold = 8",
        *[("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s)", r) for r in rows],
        ("UPDATE t SET doc = %s, s = 'now short' WHERE id = 2", ("ünïcode " * 300,)),
        ("UPDATE t SET doc = %s, img = %s WHERE id = 1", (long_text, b"\x00" * 50000)),
        "DELETE FROM t WHERE id = 3",
    )


def ddl_sql_mode(up: LocalMariaDB, db: str) -> None:
    """DDLs whose effect depends on the session's sql_mode, run without NO_AUTO_VALUE_ON_ZERO (which a
    MySQL downstream applies rows with): MODIFY ... AUTO_INCREMENT numbers the 0 values, as on the
    native replica, which runs each DDL with the sql_mode its binlog event records."""
    create_db(
        up,
        db,
        "CREATE TABLE numbered (id INT NOT NULL, v INT, KEY (id))",
        "CREATE TABLE added (v INT)",
    )
    sql(
        up,
        db,
        "INSERT INTO numbered VALUES (0, 1), (0, 2), (5, 3)",
        "INSERT INTO added VALUES (10), (20)",
        "SET SESSION sql_mode = ''",
        "ALTER TABLE numbered MODIFY id INT NOT NULL AUTO_INCREMENT",
        "ALTER TABLE added ADD COLUMN id INT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST",
        "INSERT INTO numbered (v) VALUES (4)",
        "INSERT INTO added (v) VALUES (30)",
    )


def period_keys_later(up: LocalMariaDB, db: str) -> None:
    """Unique keys ``WITHOUT OVERLAPS`` over application-time periods that earlier statements
    defined (in CREATE TABLE; by ALTER TABLE ... ADD PERIOD), or that their own statement defines
    after the key (MariaDB builds columns, then periods, then keys), then rows split by ``UPDATE``
    and ``DELETE ... FOR PORTION OF``, which insert the parts of a row outside the portion."""
    create_db(
        up,
        db,
        "CREATE TABLE booking (room INT NOT NULL, s DATE NOT NULL, e DATE NOT NULL, guest VARCHAR(20), "
        "PERIOD FOR stay (s, e))",
        "CREATE TABLE price (item INT NOT NULL, f DATE NOT NULL, t DATE NOT NULL, amount INT)",
        "CREATE TABLE lease (unit INT, PRIMARY KEY (unit, term WITHOUT OVERLAPS), a DATE NOT NULL, "
        "b DATE NOT NULL, PERIOD FOR term (a, b))",
        "CREATE TABLE slot (id INT NOT NULL, a DATE NOT NULL, b DATE NOT NULL)",
    )
    sql(
        up,
        db,
        "ALTER TABLE booking ADD PRIMARY KEY (room, stay WITHOUT OVERLAPS)",
        "ALTER TABLE price ADD PERIOD FOR valid (f, t)",
        "CREATE UNIQUE INDEX one_price ON price (item, valid WITHOUT OVERLAPS)",
        "INSERT INTO booking VALUES (1, '2026-01-01', '2026-01-10', 'ann'), (2, '2026-01-05', '2026-01-20', 'bob')",
        "INSERT INTO price VALUES (7, '2026-01-01', '2026-12-31', 100), (8, '2026-01-01', '2026-06-30', 50)",
        "UPDATE booking FOR PORTION OF stay FROM '2026-01-03' TO '2026-01-05' SET guest = 'cat' WHERE room = 1",
        "DELETE FROM price FOR PORTION OF valid FROM '2026-03-01' TO '2026-04-01' WHERE item = 7",
        "UPDATE price SET amount = amount + 1 WHERE item = 8",
        "DELETE FROM booking WHERE room = 2",
        "ALTER TABLE slot ADD UNIQUE KEY one (id, p WITHOUT OVERLAPS), ADD INDEX by_n (n), "
        "ADD PERIOD FOR p (a, b), ADD COLUMN n INT",
        "INSERT INTO lease VALUES (1, '2026-01-01', '2026-03-01'), (1, '2026-03-01', '2026-05-01')",
        "INSERT INTO slot VALUES (1, '2026-01-01', '2026-02-01', 5), (2, '2026-01-01', '2026-02-01', 6)",
        "DELETE FROM lease FOR PORTION OF term FROM '2026-02-01' TO '2026-04-01' WHERE unit = 1",
        "UPDATE slot FOR PORTION OF p FROM '2026-01-10' TO '2026-01-20' SET n = 9 WHERE id = 2",
    )


def mariadb_types(up: LocalMariaDB, db: str) -> None:
    """MariaDB's UUID, INET4 and INET6 types, as values and as primary keys (updated and deleted by key)."""
    create_db(
        up,
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, u UUID, i4 INET4, i6 INET6, v VARCHAR(10))",
        "CREATE TABLE by_uuid (u UUID PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE by_inet6 (a INET6 PRIMARY KEY, b INET4 NOT NULL, v INT, UNIQUE KEY (b))",
    )
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, '123e4567-e89b-12d3-a456-426655440000', '192.168.0.1', '2001:db8::ff00:42:8329', 'a'),"
        " (2, '00000000-0000-0000-0000-000000000000', '0.0.0.0', '::', 'b'),"
        " (3, 'ffffffff-ffff-ffff-ffff-ffffffffffff', '255.255.255.255', '::ffff:192.0.2.128', 'c'),"
        " (4, NULL, NULL, NULL, 'd')",
        "UPDATE t SET u = '6ccd780c-baba-1026-9564-5b8c656024db', i6 = 'fe80::1' WHERE id = 1",
        "INSERT INTO by_uuid VALUES ('123e4567-e89b-12d3-a456-426655440000', 'x'),"
        " ('6ccd780c-baba-1026-9564-5b8c656024db', 'y'), ('00000000-0000-0000-0000-000000000001', 'z')",
        "UPDATE by_uuid SET v = 'moved', u = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee' "
        "WHERE u = '123e4567-e89b-12d3-a456-426655440000'",
        "DELETE FROM by_uuid WHERE u = '00000000-0000-0000-0000-000000000001'",
        "INSERT INTO by_inet6 VALUES ('2001:db8::1', '10.0.0.1', 1), ('::1', '127.0.0.1', 2), ('fe80::2', '10.0.0.2', 3)",
        "UPDATE by_inet6 SET v = v + 10, b = '10.9.9.9' WHERE a = '::1'",
        "DELETE FROM by_inet6 WHERE a = 'fe80::2'",
    )


MAX_PACKET = 4 * 1024 * 1024
"""The upstream's max_allowed_packet while ``near_max_packet`` writes (set back after)."""


def near_max_packet(up: LocalMariaDB, db: str) -> None:
    """Values just under the upstream's max_allowed_packet (4 MiB here): statements of nearly the
    largest size the server takes, and row events larger than it (an UPDATE logs both images)."""
    create_db(up, db, "CREATE TABLE t (id INT PRIMARY KEY, doc LONGTEXT, img LONGBLOB)")
    old = up.query("SELECT @@global.max_allowed_packet")[0][0]
    sql(up, None, f"SET GLOBAL max_allowed_packet = {MAX_PACKET}")
    try:
        room = MAX_PACKET - 4096  # the statement's own text and the protocol's header
        text = ("near the packet limit é " * (room // 20))[: room // 2]
        blob = bytes(range(256)) * (room // 512)
        sql(
            up,
            db,
            ("INSERT INTO t VALUES (1, %s, NULL)", (text + "x" * (room - len(text.encode()) - 16),)),
            ("INSERT INTO t VALUES (2, NULL, %s)", (blob,)),
            ("UPDATE t SET doc = %s WHERE id = 1", (text[: room // 2 - 8] + "tail",)),
            ("UPDATE t SET img = %s WHERE id = 2", (blob[::-1],)),
        )
    finally:
        sql(up, None, f"SET GLOBAL max_allowed_packet = {int(old)}")


def flush_binary_logs(up: LocalMariaDB, db: str) -> None:
    """Writes on both sides of FLUSH BINARY LOGS (a binlog rotation in the middle of the workload)."""
    create_db(up, db, f"CREATE TABLE t {KV}")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'before rotation', 1), (2, 'b', 2)",
        "FLUSH BINARY LOGS",
        "UPDATE t SET v = 'after rotation' WHERE id = 1",
        "INSERT INTO t VALUES (3, 'c', 3)",
        "FLUSH BINARY LOGS",
        "FLUSH BINARY LOGS",
        "DELETE FROM t WHERE id = 2",
    )


# -- forms under a server-wide binlog setting ------------------------------------------------------


def _mixed_writes(up: LocalMariaDB, db: str) -> None:
    """A table's whole life: DDL, multi-row inserts with long values, updates, a key change, deletes."""
    create_db(up, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200), n INT, b BLOB)")
    sql(
        up,
        db,
        *[
            ("INSERT INTO t VALUES (%s, %s, %s, %s)", (i, f"row {i} " + "x" * (i * 7), i, bytes([i]) * 50))
            for i in range(1, 21)
        ],
        "BEGIN",
        "UPDATE t SET v = CONCAT(v, ' updated'), n = n * 2 WHERE id % 3 = 0",
        "UPDATE t SET id = id + 100 WHERE id % 5 = 0",
        "DELETE FROM t WHERE id % 7 = 0",
        "COMMIT",
        "ALTER TABLE t ADD COLUMN extra VARCHAR(20) DEFAULT 'added'",
        "INSERT INTO t (id, v, n, extra) VALUES (50, 'after alter', 50, 'set')",
    )


def compressed_binlog(up: LocalMariaDB, db: str) -> None:
    """Every event of this form written with log_bin_compress=ON (min length 10); set back after."""
    old = up.query("SELECT @@global.log_bin_compress, @@global.log_bin_compress_min_len")[0]
    sql(up, None, "SET GLOBAL log_bin_compress = ON, log_bin_compress_min_len = 10")
    try:
        _mixed_writes(up, db)
    finally:
        sql(
            up, None, f"SET GLOBAL log_bin_compress = {int(old[0])}, log_bin_compress_min_len = {int(old[1])}"
        )


def checksum_none(up: LocalMariaDB, db: str) -> None:
    """This form's events written with binlog_checksum=NONE (the change rotates the binlog); set back after."""
    old = str(up.query("SELECT @@global.binlog_checksum")[0][0])
    sql(up, None, "SET GLOBAL binlog_checksum = NONE")
    try:
        _mixed_writes(up, db)
    finally:
        sql(up, None, f"SET GLOBAL binlog_checksum = {old}")


FORMS: list[Form] = [
    Form("savepoint_innodb", savepoint_innodb),
    Form("savepoint_myisam", savepoint_myisam),
    Form("rollback_mixed", rollback_mixed),
    Form("xa_two_phase", xa_two_phase),
    Form("xa_rollback", xa_rollback),
    Form("xa_one_phase", xa_one_phase),
    Form("create_select", create_select),
    Form("insert_select", insert_select),
    Form("replace_into", replace_into),
    Form("upsert", upsert),
    Form("multi_table_update", multi_table_update),
    Form("multi_table_delete", multi_table_delete),
    Form("load_data", load_data),
    Form("load_data_server", load_data_server),
    Form("trigger_writes", trigger_writes),
    Form("procedure_writes", procedure_writes),
    Form("flush_binary_logs", flush_binary_logs),
    Form("nontransactional_engines", nontransactional_engines),
    Form("engines_in_one_txn", engines_in_one_txn),
    Form("temporary_table", temporary_table),
    Form("key_changed_twice", key_changed_twice),
    Form("insert_update_delete", insert_update_delete),
    Form("truncate", truncate),
    Form("rename_tables", rename_tables),
    Form("exchange_partition", exchange_partition),
    Form("generated_columns", generated_columns),
    Form("invisible_columns", invisible_columns),
    Form("charsets", charsets),
    Form("large_values", large_values),
    Form("more_charsets", more_charsets),
    Form("japanese_mappings", japanese_mappings),
    Form("connection_literals", connection_literals),
    Form("compressed_columns", compressed_columns),
    Form("mariadb_types", mariadb_types),
    Form("period_keys_later", period_keys_later),
    Form("ddl_sql_mode", ddl_sql_mode),
    Form("near_max_packet", near_max_packet),
    # the writes of the two server-setting forms below, with no setting: their control
    Form("mixed_writes", _mixed_writes),
]
"""The forms of the main workload, written in this order in one binlog range."""

COMPRESSED_FORMS = [Form("compressed_binlog", compressed_binlog)]
CHECKSUM_FORMS = [Form("checksum_none", checksum_none)]


# -- forms across a stop and a resume of the changefeed --------------------------------------------


def xa_open_prepare(up: LocalMariaDB, db: str) -> None:
    """Two XA transactions prepared and left open (their connections gone) when the changefeed stops."""
    create_db(up, db, f"CREATE TABLE t {KV}", "CREATE TABLE nopk (a INT, b VARCHAR(10))")
    sql(up, db, "INSERT INTO t VALUES (1, 'before', 0)", "INSERT INTO nopk VALUES (1, 'x'), (1, 'x')")
    sql(
        up,
        db,
        "XA START 'open_commit'",
        "INSERT INTO t VALUES (2, 'prepared', 1)",
        "UPDATE t SET n = n + 1 WHERE id = 1",
        "INSERT INTO nopk VALUES (2, 'y'), (2, 'y')",
        "XA END 'open_commit'",
        "XA PREPARE 'open_commit'",
    )
    sql(
        up,
        db,
        "XA START 'open_rollback'",
        "INSERT INTO t VALUES (3, 'never', 2)",
        "XA END 'open_rollback'",
        "XA PREPARE 'open_rollback'",
    )
    sql(up, db, "INSERT INTO t VALUES (4, 'after the prepares', 0)", "INSERT INTO nopk VALUES (4, 'z')")


def xa_open_commit(up: LocalMariaDB, db: str) -> None:
    """After the resume: writes, then the open XA transactions committed and rolled back, then more writes."""
    sql(
        up,
        db,
        "INSERT INTO t VALUES (5, 'after the resume', 0)",
        "XA COMMIT 'open_commit'",
        "XA ROLLBACK 'open_rollback'",
        "UPDATE t SET v = 'after the commit' WHERE id = 2",
        "DELETE FROM nopk WHERE a = 1 LIMIT 1",
    )


def between_restarts(up: LocalMariaDB, db: str) -> None:
    """Ordinary writes (a key changed twice, a table without a key) between two restarts."""
    create_db(up, db, f"CREATE TABLE t {KV}", "CREATE TABLE nopk (a INT, b VARCHAR(10))")
    sql(
        up,
        db,
        "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)",
        "INSERT INTO nopk VALUES (1, 'dup'), (1, 'dup'), (1, 'dup')",
        "BEGIN",
        "UPDATE t SET id = 10 WHERE id = 1",
        "UPDATE t SET id = 20, v = 'moved twice' WHERE id = 10",
        "COMMIT",
    )


def after_restarts(up: LocalMariaDB, db: str) -> None:
    """Writes to the tables of ``between_restarts`` after the second resume."""
    sql(up, db, "UPDATE nopk SET b = 'one' WHERE a = 1 LIMIT 1", "DELETE FROM t WHERE id = 2")


RESTART_FORMS = [
    Form("xa_open_prepare", xa_open_prepare),
    Form("xa_open_commit", xa_open_commit, db="of_xa_open_prepare"),
    Form("between_restarts", between_restarts),
    Form("after_restarts", after_restarts, db="of_between_restarts"),
]
RESTARTS = ("xa_open_prepare", "between_restarts")
"""Each path's run stops after these forms and resumes (same changefeed, data dir and sink)."""


def segments(forms: Sequence[Form]) -> list[Segment]:
    """The oracle segments of a workload: each form writes its own database, in order."""

    def segment(form: Form) -> Segment:
        def write(up: LocalMariaDB) -> None:
            try:
                form.write(up, form.database)
            except pymysql.MySQLError as exc:
                raise AssertionError(f"form {form.name} failed on the upstream: {exc}") from exc

        return Segment(form.name, write, (form.database,))

    return [segment(form) for form in forms]
