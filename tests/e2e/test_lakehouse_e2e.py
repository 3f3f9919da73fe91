"""e2e: MySQL → ``sparkcdc run`` → Iceberg / Delta tables, read back by three readers, equal to the upstream.

Per format: the mixed workload's tables (every MySQL type with its limits and NULLs, a table whose
handle is a NOT NULL unique key, hostile names) are filled, then a changefeed with
``[snapshot] mode = "initial"`` lands them and streams the rest of the workload: updates, key
changes, deletes, multi-table transactions, ADD COLUMN, DROP COLUMN, then RENAME COLUMN, widened
types (INT → BIGINT, a wider DECIMAL and VARCHAR) and TRUNCATE. The first run kills its whole
process group with SIGKILL right after a table commit in the middle of the stream
(``lakehouse_crash``), leaving a batch applied to some tables only; a second run continues to a
target ts. Every table is then read with the format's own reader (pyiceberg's scan, deltalake's
``to_pyarrow_table``) and with DuckDB's Parquet reader over the table's live data files, and must
equal the upstream: a replayed batch was recognised where it had been committed, and applied
where it had not. The Delta run uses ``mode=changelog`` and checks that the log holds every change
once and folds into the upstream's rows.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkcdc.services.mariadb import LocalMariaDB

from .workload import (
    ACCOUNTS,
    ALL_TYPES,
    SPACED,
    UK_ONLY,
    CliProcess,
    Workload,
    create_tables,
    list_tables,
    q,
    run_args,
    tso,
)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
CRASH_AFTER = 7
"""Table commits before the first run kills itself: the snapshot's four, then three of the stream."""


class CrashingRun(CliProcess):
    """``sparkcdc`` through ``tests.e2e.lakehouse_crash``: SIGKILL of its group after N table commits."""

    def __init__(self, after: int, args: list[str], log_path: Path) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.lakehouse_crash", str(after), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )


def _stream_phases(wl: Workload) -> None:
    """The workload after the snapshot, then renames, widened types and a truncate with rows after."""
    wl.phase_updates()
    wl.phase_transactions()
    wl.phase_add_column()
    wl.phase_drop_column()
    wl.phase_final()
    wl.sql(
        f"ALTER TABLE {q(ACCOUNTS)} CHANGE owner holder VARCHAR(60) NOT NULL",
        f"ALTER TABLE {q(ACCOUNTS)} MODIFY balance DECIMAL(20,2) NOT NULL",
        f"ALTER TABLE {q(UK_ONLY)} MODIFY n BIGINT NULL",
        f"ALTER TABLE {q(ALL_TYPES)} RENAME COLUMN extra TO extra2",
    )
    wl.sql(
        f"UPDATE {q(ACCOUNTS)} SET holder = CONCAT(holder, ' renamed'), balance = balance * 1000000",
        f"UPDATE {q(UK_ONLY)} SET n = n + 5000000000",
        f"UPDATE {q(ALL_TYPES)} SET extra2 = -id WHERE id % 2 = 0",
        f"TRUNCATE TABLE {q(SPACED)}",
        f"INSERT INTO {q(SPACED)} (`order`, `select`, `a b`, `x``y`, qty) VALUES (7, 'after truncate', 1.5, 'q', 3)",
    )


# -- reading both sides --------------------------------------------------------------------------


def _upstream(
    db: LocalMariaDB, schema: str, table: str
) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """(columns as (name, data type), rows as dicts of Python values) of an upstream table."""
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(
                "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
                (schema, table),
            )
            cols = [(str(n), str(t).lower()) for n, t in cur.fetchall()]
            exprs = [
                f"CAST({q(n)} AS CHAR)" if t == "time" else f"{q(n)} + 0" if t == "bit" else q(n)
                for n, t in cols
            ]
            cur.execute(f"SELECT {', '.join(exprs)} FROM {q(table)}")
            return cols, [dict(zip([n for n, _ in cols], r, strict=True)) for r in cur.fetchall()]
    finally:
        conn.close()


def _norm(data_type: str, v: Any) -> Any:
    """One value in a form both sides agree on (the lakehouse keeps every value, see the type map)."""
    if v is None:
        return None
    if data_type in ("date", "datetime", "timestamp"):
        if isinstance(v, str):  # a zero date upstream: NULL in the lakehouse
            return None
        if isinstance(v, dt.datetime) and v.tzinfo is not None:
            return v.astimezone(dt.UTC).replace(tzinfo=None)
        return v
    if data_type == "float":
        return float(f"{float(v):.6g}")
    if data_type == "double":
        return float(f"{float(v):.14g}")
    if data_type == "decimal":
        return Decimal(v).normalize()
    if data_type in ("bigint", "int", "tinyint", "smallint", "mediumint", "bit", "year"):
        return int(v)
    if isinstance(v, bytes) and data_type in ("char", "varchar", "text", "json", "longtext", "enum", "set"):
        return v.decode()
    if isinstance(v, bytearray):
        return bytes(v)
    return v


def _rows(cols: list[tuple[str, str]], rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = [tuple(_norm(t, r[n]) for n, t in cols) for r in rows]
    return sorted(out, key=repr)


def _lake_name(schema: str, table: str) -> str:
    return f"{schema}_{table}"


def _read_delta(root: Path, name: str) -> tuple[pa.Table, list[str]]:
    from deltalake import DeltaTable

    t = DeltaTable(str(root / name))
    return t.to_pyarrow_table(), [u.removeprefix("file://") for u in t.file_uris()]


def _read_iceberg(warehouse: Path, name: str) -> tuple[pa.Table, list[str]]:
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog(
        "sparkcdc", uri=f"sqlite:///{warehouse}/sparkcdc-catalog.db", warehouse=f"file://{warehouse}"
    )
    t = cat.load_table(("default", name))
    files = [task.file.file_path.removeprefix("file://") for task in t.scan().plan_files()]
    return t.scan().to_arrow(), files


def _duckdb(files: list[str], columns: list[str], fmt: str) -> list[dict[str, Any]]:
    """The live rows of a table's Parquet data files, read by DuckDB's own reader.

    Iceberg names a column in its Parquet files by the Avro-compatible form of its name
    (``a b`` → ``a_x20b``); its readers match columns by field id.
    """
    import duckdb
    from pyiceberg.schema import make_compatible_name

    if not files:
        return []
    con = duckdb.connect()
    try:
        physical = [make_compatible_name(c) if fmt == "iceberg" else c for c in columns]
        cols = ", ".join(
            '"' + p.replace('"', '""') + '" AS "' + c.replace('"', '""') + '"'
            for p, c in zip(physical, columns, strict=True)
        )
        rel = con.execute(f"SELECT {cols} FROM read_parquet(?, union_by_name = true)", [files])
        names = [d[0] for d in rel.description]
        return [dict(zip(names, r, strict=True)) for r in rel.fetchall()]
    finally:
        con.close()


def _fold_changelog(log: pa.Table, cols: list[tuple[str, str]], key: list[str]) -> list[dict[str, Any]]:
    """The rows a changelog table describes: its changes applied in (commit_ts, seq) order."""
    names = [n for n, _ in cols]
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in log.sort_by([("_commit_ts", "ascending"), ("_seq", "ascending")]).to_pylist():
        k = tuple(r[c] for c in key)
        if r["_op"] == "D":
            state.pop(k, None)
            continue
        if r["_op"] == "U":
            state.pop(tuple(r["_before_" + c] for c in key), None)
        state[k] = {n: r[n] for n in names}
    return list(state.values())


def _check(db: LocalMariaDB, schema: str, fmt: str, root: Path, mode: str) -> None:
    tables = list_tables(db, schema)
    assert sorted(tables) == sorted([ACCOUNTS, ALL_TYPES, SPACED, UK_ONLY])
    for table in tables:
        cols, up_rows = _upstream(db, schema, table)
        want = _rows(cols, up_rows)
        name = _lake_name(schema, table)
        data, files = _read_delta(root, name) if fmt == "delta" else _read_iceberg(root, name)
        names = [n for n, _ in cols]
        if mode == "changelog":
            seen = data.select(["_commit_ts", "_seq"]).to_pylist()
            assert len({(r["_commit_ts"], r["_seq"]) for r in seen}) == len(seen), f"{name}: a change twice"
            key = ["a", "b"] if table == UK_ONLY else ["id"] if table != SPACED else ["order"]
            got = _rows(cols, _fold_changelog(data, cols, key))
        else:
            assert [f.name for f in data.schema] == names, f"{name}: columns {data.schema.names} != {names}"
            got = _rows(cols, data.select(names).to_pylist())
        assert got == want, f"{fmt} table {name} differs from {schema}.{table}: {_first_diff(got, want)}"
        if mode != "changelog":
            by_duckdb = _rows(cols, _duckdb(files, names, fmt))
            assert by_duckdb == want, f"DuckDB reads {name} otherwise: {_first_diff(by_duckdb, want)}"


def _first_diff(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> str:
    extra = [r for r in got if r not in want]
    missing = [r for r in want if r not in got]
    return f"{len(got)} rows vs {len(want)}; extra {extra[:2]}; missing {missing[:2]}"


@pytest.mark.parametrize(("fmt", "mode"), [("iceberg", "upsert"), ("delta", "changelog")])
def test_snapshot_stream_ddl_and_kill9_mid_commit(
    mariadb: LocalMariaDB, tmp_path: Path, fmt: str, mode: str
) -> None:
    schema = f"e2e_lake_{fmt}"
    create_tables(mariadb, schema)
    wl = Workload(mariadb, schema, rows=40)
    wl.phase_inserts()

    root = tmp_path / "lake"
    config = tmp_path / "cf.toml"
    config.write_text(f'[filter]\nrules = ["{schema}.*"]\n[snapshot]\nmode = "initial"\n')
    sink_uri = f"{fmt}://{root}?mode={mode}"
    if fmt == "delta" and mode == "upsert":
        sink_uri = f"delta://{root}"
    common = run_args(mariadb.uri, sink_uri, f"lake-{fmt}", tmp_path / "data", config=config)
    t0 = time.monotonic()
    run1 = CrashingRun(CRASH_AFTER, common, tmp_path / "run1.log")
    try:
        run1.wait_started(timeout=240)
        started = time.monotonic() - t0
        _stream_phases(wl)
        rc = run1.wait(timeout=240)
        assert rc == -9, (
            f"the first run was to be killed mid-commit, it exited {rc}:\n{run1.output()[-3000:]}"
        )
        assert "lakehouse crash: SIGKILL after table commit" in run1.output()
    finally:
        run1.stop()
    crashed = time.monotonic() - t0
    target = tso(mariadb.uri)
    run2 = CliProcess([*common, "--target-ts", str(target)], tmp_path / "run2.log")
    try:
        rc = run2.wait(timeout=300)
        assert rc == 0, f"the second run failed ({rc}):\n{run2.output()[-4000:]}"
    finally:
        run2.stop()
    finished = time.monotonic() - t0
    print(f"{fmt}: snapshot done {started:.1f}s, killed {crashed:.1f}s, caught up {finished:.1f}s")
    _check(mariadb, schema, fmt, root, mode)
