"""Compare the user databases of two MariaDB servers table by table, row by row.

``diff_databases(a, b, databases)`` returns one line per difference (an empty list when every
base table exists on both with the same columns and rows); ``assert_same`` raises with them.
Rows are matched by the table's primary key (else its first all-NOT-NULL unique key) and the
first differing key is named; a table without one is compared as a multiset of rows.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sparkcdc.services.mariadb import LocalMariaDB

SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def user_databases(db: LocalMariaDB) -> list[str]:
    """Every database of ``db`` except the system ones, sorted."""
    return sorted(str(r[0]) for r in db.query("SHOW DATABASES") if str(r[0]) not in SYSTEM_DATABASES)


def base_tables(db: LocalMariaDB, database: str) -> list[str]:
    """The base tables (and sequences) of one database, sorted; views are left out."""
    rows = db.query(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = %s AND table_type IN ('BASE TABLE', 'SEQUENCE') ORDER BY table_name",
        (database,),
    )
    return [str(r[0]) for r in rows]


def _columns(db: LocalMariaDB, database: str, table: str) -> list[tuple[str, str]]:
    rows = db.query(
        "SELECT column_name, column_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
        (database, table),
    )
    return [(str(r[0]), str(r[1])) for r in rows]


def _key_columns(db: LocalMariaDB, database: str, table: str) -> list[str]:
    """The primary key, else the first unique key whose columns are all NOT NULL, else []."""
    rows = db.query(
        "SELECT s.index_name, s.column_name, c.is_nullable FROM information_schema.statistics s "
        "JOIN information_schema.columns c ON c.table_schema = s.table_schema "
        "AND c.table_name = s.table_name AND c.column_name = s.column_name "
        "WHERE s.table_schema = %s AND s.table_name = %s AND s.non_unique = 0 AND s.sub_part IS NULL "
        "ORDER BY s.index_name = 'PRIMARY' DESC, s.index_name, s.seq_in_index",
        (database, table),
    )
    keys: dict[str, list[tuple[str, bool]]] = {}
    for name, col, nullable in rows:
        keys.setdefault(str(name), []).append((str(col), str(nullable) == "YES"))
    for cols in keys.values():
        if not any(nullable for _, nullable in cols):
            return [c for c, _ in cols]
    return []


def _rows(db: LocalMariaDB, database: str, table: str) -> list[tuple[Any, ...]]:
    """Every row as the server's own bytes: no decoding that could fail (the test files store
    invalid UTF-8 on purpose) or round (floats, decimals); both servers spell a value alike."""
    conn = db.connect(use_unicode=False, conv={})
    try:
        with conn.cursor() as cur:
            cur.execute("SET character_set_results = binary")
            cur.execute(f"SELECT * FROM `{database}`.`{table}`")
            return list(cur.fetchall())
    finally:
        conn.close()


def _sort_key(value: Any) -> str:
    return repr(value)


def diff_table(a: LocalMariaDB, b: LocalMariaDB, database: str, table: str) -> str | None:
    """The first difference of one table between ``a`` and ``b``, or None when equal."""
    where = f"`{database}`.`{table}`"
    cols_a, cols_b = _columns(a, database, table), _columns(b, database, table)
    if cols_a != cols_b:
        return f"{where}: columns differ: {cols_a} on {a.port} vs {cols_b} on {b.port}"
    names = [c for c, _ in cols_a]
    key = _key_columns(a, database, table)
    rows_a, rows_b = _rows(a, database, table), _rows(b, database, table)
    if key:
        idx = [names.index(k) for k in key]
        by_a = {tuple(r[i] for i in idx): r for r in rows_a}
        by_b = {tuple(r[i] for i in idx): r for r in rows_b}
        differing = [k for k in by_a.keys() | by_b.keys() if by_a.get(k) != by_b.get(k)]
        if not differing:
            return None
        first = min(differing, key=_sort_key)
        return (
            f"{where}: {len(differing)} key(s) differ; first {dict(zip(key, first, strict=True))}: "
            f"{by_a.get(first)!r} on {a.port} vs {by_b.get(first)!r} on {b.port}"
        )
    count_a, count_b = Counter(rows_a), Counter(rows_b)
    if count_a == count_b:
        return None
    only_a = sorted((count_a - count_b).elements(), key=_sort_key)
    only_b = sorted((count_b - count_a).elements(), key=_sort_key)
    return (
        f"{where} (no key): {len(only_a)} row(s) only on {a.port}, {len(only_b)} only on {b.port}; "
        f"first: {only_a[:1]!r} vs {only_b[:1]!r}"
    )


def diff_databases(a: LocalMariaDB, b: LocalMariaDB, databases: list[str]) -> list[str]:
    """Every difference of the named databases between ``a`` and ``b`` (missing tables, columns, rows)."""
    problems: list[str] = []
    for database in databases:
        tables_a, tables_b = base_tables(a, database), base_tables(b, database)
        if tables_a != tables_b:
            problems.append(
                f"`{database}`: tables only on {a.port}: {sorted(set(tables_a) - set(tables_b))}, "
                f"only on {b.port}: {sorted(set(tables_b) - set(tables_a))}"
            )
        for table in sorted(set(tables_a) & set(tables_b)):
            problem = diff_table(a, b, database, table)
            if problem:
                problems.append(problem)
    return problems


def count_rows(db: LocalMariaDB, databases: list[str]) -> tuple[int, int]:
    """(tables, rows) over the named databases: shows that a comparison compared something."""
    tables = rows = 0
    for database in databases:
        for table in base_tables(db, database):
            tables += 1
            rows += int(db.query(f"SELECT COUNT(*) FROM `{database}`.`{table}`")[0][0])
    return tables, rows


def assert_same(a: LocalMariaDB, b: LocalMariaDB, databases: list[str]) -> None:
    """Raise AssertionError naming the first differences when the databases differ."""
    problems = diff_databases(a, b, databases)
    assert not problems, f"{len(problems)} table(s) differ:\n" + "\n".join(problems[:20])
