"""The change stream as a DataFrame (``format("sparkcdc")``), used the way a Spark team would.

One module-scoped story on the e2e Spark session:

1. the workload of ``workload.run_workload`` runs after a start-ts; a user job writes the
   untyped stream with ``foreachBatch`` into a parquet table while a second query counts the
   changes by table and op (``trigger(availableNow=True)``: it finishes by itself). Replaying
   the parquet table's images in (commit_ts, seq) order gives every table's rows as the
   upstream has them; inserts minus deletes per table are its row count; the aggregation
   agrees with the parquet table.
2. The parquet job restarts from its Spark checkpoint with its last batches forgotten, then
   with its last batch logged but not committed: the batches read again give the same
   commit_ts, seq and images. A data dir is refused to a query with other options.
3. ``option("table", …)``: typed columns equal the upstream's values (a key change is a DELETE
   and an INSERT); an ADD INDEX passes, an ADD COLUMN stops the query with an error that says
   where to start again, and a new typed query from before that DDL stops at the older rows.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.capture.start import query_tso
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import ConfigError
from sparkcdc.services.mariadb import LocalMariaDB

from .workload import ACCOUNTS, ALL_TYPES, SPACED, UK_ONLY, q, run_workload, table_rows

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

SCHEMA = "df_source"
KEYS = {ACCOUNTS: ("id",), SPACED: ("order",), UK_ONLY: ("a", "b"), ALL_TYPES: ("id",)}
"""Each workload table's key: replaying images by it rebuilds the table."""
TEXT_TABLES = (ACCOUNTS, SPACED, UK_ONLY)
"""Tables whose every column the upstream prints as canal-json renders it (ints, decimals, text, DATETIME)."""
ALL_TYPES_TEXT = (
    "id",
    "ti",
    "i",
    "bi",
    "biu",
    "dec1",
    "dec2",
    "dt",
    "dt0",
    "dt3",
    "tm",
    "c",
    "vc",
    "txt",
)
"""The same for these columns of ``all_types`` (its floats, binaries, bits, enums and sets render otherwise)."""
ROW_COLUMNS = "commit_ts, seq, op, schema, table, table_version, to_json(before) AS b, to_json(after) AS a"


def _start(df: Any, checkpoint: Path, sink: Any = None, **kw: Any) -> Any:
    writer = df.writeStream.option("checkpointLocation", str(checkpoint)).trigger(
        processingTime="100 milliseconds"
    )
    if sink is not None:
        writer = writer.foreachBatch(sink)
    return writer.start(**kw)


def _source(spark: Any, mariadb: LocalMariaDB, data_dir: Path, **options: str) -> Any:
    reader = spark.readStream.format("sparkcdc").option("upstream-uri", mariadb.uri)
    reader = reader.option("data-dir", str(data_dir))
    for k, v in options.items():
        reader = reader.option(k.replace("_", "-"), v)
    return reader.load()


def _parquet_job(out: Path) -> Any:
    """The user's foreachBatch: append the batch to a parquet table."""

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(str(out))

    return write


def _rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    return sorted(
        tuple(r) for r in spark.read.parquet(str(path)).selectExpr(*ROW_COLUMNS.split(", ")).collect()
    )


def _replay(rows: list[tuple[Any, ...]]) -> dict[str, dict[tuple[Any, ...], dict[str, Any]]]:
    """Every table's rows rebuilt from the images, in (commit_ts, seq) order."""
    tables: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {t: {} for t in KEYS}
    for _ts, _seq, _op, _schema, table, _v, before, after in rows:
        state = tables[table]
        if before is not None:
            image = json.loads(before)
            state.pop(tuple(image[k] for k in KEYS[table]), None)
        if after is not None:
            image = json.loads(after)
            state[tuple(image[k] for k in KEYS[table])] = image
    return tables


def _as_rows(images: list[dict[str, Any]]) -> list[list[tuple[str, Any]]]:
    """Rows as sorted (column, text) pairs: comparable whatever the column order."""
    return sorted((sorted(img.items()) for img in images), key=repr)


def _upstream_text(mariadb: LocalMariaDB, table: str, columns: tuple[str, ...] | None = None) -> list[Any]:
    """The upstream's rows as the server prints them."""
    conn = mariadb.connect(conv={})
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT {', '.join(map(q, columns)) if columns else '*'} FROM {q(SCHEMA)}.{q(table)}"
            )
            names = [d[0] for d in cur.description]
            images = [
                {n: v.decode() if isinstance(v, bytes) else v for n, v in zip(names, r, strict=True)}
                for r in cur.fetchall()
            ]
    finally:
        conn.close()
    return _as_rows(images)


def _source_runner_maps(spark: Any) -> dict[int, str]:
    """The memory maps of the session JVM's streaming source runners (one process per query)."""
    jvm = spark.sparkContext._gateway.proc.pid
    maps = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if parent == jvm and "pyspark.sql.streaming.python_streaming_source_runner" in command:
                maps[int(proc.name)] = (proc / "maps").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
    return maps


@pytest.fixture(scope="module")
def stream_run(spark: Any, mariadb: LocalMariaDB, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The workload and both user queries over it, run once for the module's checks."""
    import sparkcdc.spark

    sparkcdc.spark.register(spark)
    root = tmp_path_factory.mktemp("dfsrc")
    start_ts = query_tso(UpstreamConfig.from_uri(mariadb.uri))
    run_workload(mariadb, SCHEMA, rows=40)
    opts = {"filter": f"{SCHEMA}.*", "start_ts": str(start_ts)}
    out = root / "changes"
    job = _start(_source(spark, mariadb, root / "data-a", **opts), root / "ck-a", _parquet_job(out))
    counts = _source(spark, mariadb, root / "data-b", **opts).groupBy("table", "op").count()
    agg = (
        counts.writeStream.outputMode("complete")
        .format("memory")
        .queryName("changes_by_table_op")
        .option("checkpointLocation", str(root / "ck-b"))
        .trigger(availableNow=True)  # reads what the binlog holds when it starts, then finishes
        .start()
    )
    try:
        job.processAllAvailable()
        runners = _source_runner_maps(spark)
        assert agg.awaitTermination(120), "the availableNow aggregation did not finish"
    finally:
        job.stop()
        agg.stop()
    aggregated = {
        (r["table"], r["op"]): r["count"] for r in spark.sql("SELECT * FROM changes_by_table_op").collect()
    }
    return {
        "root": root,
        "out": out,
        "rows": _rows(spark, out),
        "agg": aggregated,
        "opts": opts,
        "runners": runners,
    }


def test_parquet_table_of_the_stream_rebuilds_the_upstream(
    stream_run: dict[str, Any], mariadb: LocalMariaDB
) -> None:
    rows = stream_run["rows"]
    assert rows, "the stream delivered nothing"
    order = [(r[0], r[1]) for r in rows]
    assert len(set(order)) == len(order), "(commit_ts, seq) is not unique"
    assert {r[3] for r in rows} == {SCHEMA}
    assert {r[2] for r in rows} == {"INSERT", "UPDATE", "DELETE"}
    for _ts, _seq, op, *_rest, before, after in rows:
        assert (before is None) == (op == "INSERT") and (after is None) == (op == "DELETE")
    rebuilt = _replay(rows)
    for table in TEXT_TABLES:
        want = _upstream_text(mariadb, table)
        assert _as_rows(list(rebuilt[table].values())) == want, table
    want = _upstream_text(mariadb, ALL_TYPES, ALL_TYPES_TEXT)
    got = _as_rows([{c: img[c] for c in ALL_TYPES_TEXT} for img in rebuilt[ALL_TYPES].values()])
    assert got == want


def test_the_source_runner_of_a_running_query_has_no_pyarrow(stream_run: dict[str, Any]) -> None:
    """A query's source runner process (per changefeed) leaves PyArrow unloaded (runner_site):
    41 MB less per query, read here from the running process's memory map."""
    runners = stream_run["runners"]
    assert runners, "no streaming source runner of the running query was found"
    for pid, maps in runners.items():
        assert "libpython" in maps or "/python" in maps, pid
        assert "libarrow" not in maps and "/numpy/" not in maps, pid


def test_variant_paths_read_the_images(stream_run: dict[str, Any], spark: Any) -> None:
    changes = spark.read.parquet(str(stream_run["out"])).where(f"table = '{ACCOUNTS}' AND op = 'INSERT'")
    got = sorted(
        tuple(r) for r in changes.selectExpr("after:id::bigint", "after:balance::decimal(15,2)").collect()
    )
    inserted = [json.loads(r[7]) for r in stream_run["rows"] if r[4] == ACCOUNTS and r[2] == "INSERT"]
    want = sorted((int(img["id"]), Decimal(img["balance"])) for img in inserted)
    assert got == want and len(got) > 10


def test_streaming_aggregation_counts_what_the_upstream_holds(
    stream_run: dict[str, Any], mariadb: LocalMariaDB
) -> None:
    agg: dict[tuple[str, str], int] = stream_run["agg"]
    assert agg == dict(Counter((r[4], r[2]) for r in stream_run["rows"]))
    upstream = {t: len(table_rows(mariadb, SCHEMA, [t])[t]) for t in KEYS}
    net = {t: agg.get((t, "INSERT"), 0) - agg.get((t, "DELETE"), 0) for t in KEYS}
    assert net == upstream


def test_restart_from_the_checkpoint_reads_the_same_changes(
    stream_run: dict[str, Any], spark: Any, mariadb: LocalMariaDB
) -> None:
    root: Path = stream_run["root"]
    ck = root / "ck-a"

    def batches() -> list[int]:
        return sorted(int(p.name) for p in (ck / "offsets").iterdir() if p.name.isdigit())

    def forget(n: int, *logs: str) -> None:
        for log in logs:  # the log entry and its checksum
            (ck / log / str(n)).unlink(missing_ok=True)
            (ck / log / f".{n}.crc").unlink(missing_ok=True)

    def end_of(n: int) -> dict[str, Any]:
        end: dict[str, Any] = json.loads((ck / "offsets" / str(n)).read_text().splitlines()[-1])
        return end

    def rerun(out: Path) -> list[tuple[Any, ...]]:
        job = _start(_source(spark, mariadb, root / "data-a", **stream_run["opts"]), ck, _parquet_job(out))
        try:
            job.processAllAvailable()
        finally:
            job.stop()
        return _rows(spark, out)

    # Spark forgot the second half of the batches (a lost checkpoint tail): they are planned anew.
    logged = batches()
    assert len(logged) >= 4, logged
    keep = logged[len(logged) // 2]
    for n in logged:
        if n > keep:
            forget(n, "offsets", "commits")
    resume_ts = end_of(keep)["ts"]
    replanned = rerun(root / "changes-again")
    assert replanned, "nothing was read again"
    assert replanned == [r for r in stream_run["rows"] if r[0] > resume_ts]

    # The last batch was planned but not committed (a crash inside it): Spark runs it again from its log.
    last = batches()[-1]
    assert end_of(last).get("segments"), "the workload ends with row changes"
    forget(last, "commits")
    first_ts, last_ts = end_of(last - 1)["ts"], end_of(last)["ts"]
    rerun_rows = rerun(root / "changes-rerun")
    assert rerun_rows, "the batch was not read again"
    assert rerun_rows == [r for r in stream_run["rows"] if first_ts < r[0] <= last_ts]

    # The data dir belongs to its query: other options on it are refused before anything starts.
    from sparkcdc.pipeline.dataframe import SourceOptions, prepare

    other = SourceOptions.parse(
        {"upstream-uri": mariadb.uri, "data-dir": str(root / "data-a"), "filter": "x.*"}
    )
    with pytest.raises(ConfigError, match="give each query its own data-dir"):
        prepare(other)


def test_typed_table_columns_and_a_ddl_that_changes_them(
    stream_run: dict[str, Any], spark: Any, mariadb: LocalMariaDB
) -> None:
    root: Path = stream_run["root"]
    schema = "df_typed"
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        f"CREATE TABLE {schema}.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), big BIGINT UNSIGNED, "
        "created DATETIME(3), paid TIMESTAMP(6) NULL, day DATE, note VARCHAR(20), raw VARBINARY(8), "
        "flag BIT(1), tiny TINYINT, ratio DOUBLE, kind ENUM('a','b'), doc JSON)",
    )
    start_ts = query_tso(UpstreamConfig.from_uri(mariadb.uri))
    conn = mariadb.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            for i in range(1, 5):
                cur.execute(
                    "INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s, %s, %s, b'1', %s, %s, %s, %s)",
                    (i, f"{i}.25", 2**64 - i, f"2024-01-0{i} 10:00:00.123", f"2024-02-0{i} 01:02:03.000004",
                     f"2023-12-0{i}", f"n{i}", bytes([i, 0, 255]), -i, i / 4, "ab"[i % 2], f'{{"i": {i}}}'),
                )  # fmt: skip
            cur.execute("UPDATE orders SET note = NULL, amount = amount * 2 WHERE id = 2")
            cur.execute("DELETE FROM orders WHERE id = 3")
            cur.execute("UPDATE orders SET id = 10 WHERE id = 1")  # a key change: DELETE 1, INSERT 10
            cur.execute("ALTER TABLE orders ADD INDEX by_note (note)")
            cur.execute("UPDATE orders SET note = 'after index' WHERE id = 4")
    finally:
        conn.close()

    with pytest.raises(Exception, match=r"unknown option\(s\) \['tabel'\]; the options are upstream-uri"):
        _source(spark, mariadb, root / "data-t", tabel=f"{schema}.orders")
    df = _source(spark, mariadb, root / "data-t", table=f"{schema}.orders", start_ts=str(start_ts))
    assert df.columns == [
        "id", "amount", "big", "created", "paid", "day", "note", "raw", "flag", "tiny", "ratio", "kind", "doc",
        "_op", "_commit_ts", "_seq",
    ]  # fmt: skip
    types = dict(df.dtypes)
    assert (types["amount"], types["big"], types["created"], types["paid"], types["day"]) == (
        "decimal(10,2)", "decimal(20,0)", "timestamp_ntz", "timestamp", "date",
    )  # fmt: skip
    out = root / "typed"
    job = _start(
        df.selectExpr("*", "unix_micros(paid) AS paid_us").drop("paid"), root / "ck-t", _parquet_job(out)
    )
    try:
        job.processAllAvailable()
    finally:
        job.stop()
    rows = [r.asDict() for r in spark.read.parquet(str(out)).orderBy("_commit_ts", "_seq", "_op").collect()]
    assert [(r["id"], r["_op"]) for r in rows] == [
        (1, "INSERT"), (2, "INSERT"), (3, "INSERT"), (4, "INSERT"), (2, "UPDATE"), (3, "DELETE"), (1, "DELETE"),
        (10, "INSERT"), (4, "UPDATE"),
    ]  # fmt: skip
    assert all(r["_commit_ts"] > start_ts for r in rows)
    final: dict[int, dict[str, Any]] = {}
    for r in rows:  # the typed row of a DELETE is the deleted row
        if r["_op"] == "DELETE":
            del final[r["id"]]
        else:
            final[r["id"]] = r
    upstream = mariadb.query(
        "SELECT id, amount, big, created, UNIX_TIMESTAMP(paid) * 1000000, day, note, raw, flag + 0, tiny, ratio, "
        "kind, doc FROM orders ORDER BY id",
        database=schema,
    )
    got = [
        (
            r["id"], r["amount"], r["big"], r["created"], r["paid_us"], r["day"], r["note"], r["raw"], r["flag"],
            r["tiny"], r["ratio"], r["kind"], r["doc"],
        )
        for _id, r in sorted(final.items())
    ]  # fmt: skip
    want = [(*u[:4], int(u[4]), *u[5:7], bytes(u[7]), int(u[8]), *u[9:]) for u in upstream]
    assert got == want
    assert (
        isinstance(got[0][1], Decimal)
        and isinstance(got[0][3], dt.datetime)
        and isinstance(got[0][5], dt.date)
    )

    # A DDL that changes the columns stops the query and says where to start again.
    mariadb.execute(
        f"ALTER TABLE {schema}.orders ADD COLUMN extra INT", f"INSERT INTO {schema}.orders (id) VALUES (9)"
    )
    job = _start(
        _source(spark, mariadb, root / "data-t", table=f"{schema}.orders", start_ts=str(start_ts)),
        root / "ck-t",
        _parquet_job(out),
    )
    with pytest.raises(Exception) as failed:
        job.processAllAvailable()
    job.stop()
    text = str(failed.value)
    assert f"table {schema}.orders changed its columns at commit_ts" in text, text
    assert "extra int" in text and "option start-ts=" in text, text

    # A new typed query from the same start-ts takes the columns the table has now (with extra):
    # the rows written before the ADD COLUMN have others, and it says so.
    late = _source(spark, mariadb, root / "data-t2", table=f"{schema}.orders", start_ts=str(start_ts))
    assert late.columns[-4:] == ["extra", "_op", "_commit_ts", "_seq"]
    job = _start(late, root / "ck-t2", _parquet_job(root / "typed2"))
    with pytest.raises(Exception) as failed:
        job.processAllAvailable()
    job.stop()
    assert f"rows of {schema}.orders at commit_ts" in str(failed.value), failed.value
    assert "a start-ts after that DDL" in str(failed.value), failed.value
    shutil.rmtree(root / "data-t")
