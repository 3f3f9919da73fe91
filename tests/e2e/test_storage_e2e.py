"""e2e: MariaDB → `sparkcdc run` (Spark) → storage files → `sparkcdc consumer` → a second MariaDB.

One mixed workload (every type, key changes, a table without a primary key,
hostile names, ADD/DROP COLUMN mid-stream) is written upstream between two
``sparkcdc cli tso query`` calls. Three changefeeds replicate exactly that range
(``--start-ts``/``--target-ts``), running side by side: file:// CSV with
commit-ts, file:// canal-json with the TiDB extension, and CSV on a real S3
server (moto). Each output is replayed with the consumer into the downstream
MariaDB, which must then equal the upstream table by table, row by row. The
file layout is checked against TiCDC's rules on the way.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.s3 import LocalS3

from .workload import (
    ACCOUNTS,
    ALL_TYPES,
    TABLES,
    CliProcess,
    assert_tables_equal,
    run_args,
    run_cli,
    run_workload,
    tso,
)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

SCHEMA = "e2e_storage"
RUN_TIMEOUT = 420


@dataclass
class Output:
    """One changefeed's output and how to read it back."""

    name: str
    uri: str
    config: Path
    log: str


@dataclass
class Replicated:
    """The workload's ts range and the three changefeed outputs."""

    start_ts: int
    target_ts: int
    outputs: dict[str, Output]
    root: Path


def _write_config(path: Path, extra: str = "") -> Path:
    path.write_text(f'[filter]\nrules = ["{SCHEMA}.*"]\n{extra}')
    return path


@pytest.fixture(scope="module")
def replicated(
    mariadb: LocalMariaDB, local_s3: LocalS3, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicated]:
    """Run the workload once, then the three changefeeds over its range until each exits 0."""
    root = tmp_path_factory.mktemp("storage-e2e")
    start_ts = tso(mariadb.uri)
    run_workload(mariadb, SCHEMA)
    target_ts = tso(mariadb.uri)
    assert target_ts > start_ts

    local_s3.create_bucket("cdc")
    csv_cfg = _write_config(root / "csv.toml", "[sink.csv]\ninclude-commit-ts = true\n")
    s3_cfg = _write_config(
        root / "s3.toml",
        '[sink]\ndate-separator = "none"\nfile-index-digit = 6\n[sink.csv]\ninclude-commit-ts = true\n',
    )
    outputs = {
        "csv": Output("csv", f"file://{root / 'csv'}?protocol=csv", csv_cfg, ""),
        "canal": Output(
            "canal",
            f"file://{root / 'canal'}?protocol=canal-json&enable-tidb-extension=true",
            _write_config(root / "canal.toml"),
            "",
        ),
        "s3": Output("s3", local_s3.sink_uri("cdc/e2e/storage", protocol="csv"), s3_cfg, ""),
    }
    procs: dict[str, CliProcess] = {}
    try:
        for name, out in outputs.items():
            procs[name] = CliProcess(
                run_args(
                    mariadb.uri,
                    out.uri,
                    f"e2e-storage-{name}",
                    root / "state",
                    "--start-ts",
                    str(start_ts),
                    "--target-ts",
                    str(target_ts),
                    "--spark-conf",
                    "spark.driver.memory=1g",
                    config=out.config,
                    master="local[1]",
                ),
                root / f"run-{name}.log",
            )
        for name, proc in procs.items():
            rc = proc.wait(RUN_TIMEOUT)
            outputs[name].log = proc.output()
            assert rc == 0, f"sparkcdc run ({name}) exited with {rc}:\n{proc.output()[-4000:]}"
            assert f"reached target-ts {target_ts}" in proc.output()
    finally:
        for proc in procs.values():
            proc.stop()
    yield Replicated(start_ts, target_ts, outputs, root)


def _replay(out: Output, downstream: LocalMariaDB) -> str:
    """``sparkcdc consumer --once`` of one output into a clean downstream schema; returns its output."""
    res = run_cli(
        [
            "consumer",
            "--upstream-uri",
            out.uri,
            "--downstream-uri",
            f"mysql://root:@127.0.0.1:{downstream.port}/",
            "--config",
            str(out.config),
            "--progress-schema",
            f"progress_{out.name}",
            "--once",
        ],
        timeout=300,
    )
    assert res.returncode == 0, f"consumer ({out.name}) failed:\n{res.stdout}\n{res.stderr[-4000:]}"
    return res.stdout


def _reset_downstream(downstream: LocalMariaDB, name: str) -> None:
    downstream.execute(f"DROP DATABASE IF EXISTS `{SCHEMA}`", f"DROP DATABASE IF EXISTS `progress_{name}`")


def _replay_and_compare(out: Output, mariadb: LocalMariaDB, downstream: LocalMariaDB) -> None:
    _reset_downstream(downstream, out.name)
    first = _replay(out, downstream)
    assert re.search(r"applied \d+ DDL, [1-9]\d* rows", first), first
    assert_tables_equal(mariadb, downstream, SCHEMA)
    # A second run finds its progress downstream and applies nothing new.
    again = _replay(out, downstream)
    assert re.search(r"applied 0 DDL, 0 rows", again), again
    assert_tables_equal(mariadb, downstream, SCHEMA)


# -- file layout helpers ---------------------------------------------------------------------------


def _data_files(root: Path, ext: str) -> list[Path]:
    return sorted(p for p in root.rglob(f"CDC*{ext}") if p.is_file())


def _csv_commit_ts(path: Path) -> list[int]:
    """The commit-ts column (4th field) of every record of a CSV file written with include-commit-ts."""
    text = path.read_bytes().decode("utf-8")
    records = list(csv.reader(io.StringIO(text, newline=""), delimiter=",", quotechar='"'))
    out = []
    for rec in records:
        assert rec[0] in ("I", "U", "D"), f"{path}: unexpected record {rec[:4]}"
        assert rec[2] == SCHEMA and rec[1] in TABLES, f"{path}: unexpected table {rec[1:3]}"
        out.append(int(rec[3]))
    return out


def _check_common_layout(root: Path, ext: str, rep: Replicated, date_dir: bool, width: int) -> None:
    meta = json.loads((root / "metadata").read_bytes())
    assert set(meta) == {"checkpoint-ts"}
    assert meta["checkpoint-ts"] >= rep.target_ts

    files = _data_files(root, ext)
    assert files, f"no data files under {root}"
    dirs: dict[Path, list[Path]] = {}
    for f in files:
        rel = f.relative_to(root).parts
        # {schema}/{table}/{version}[/{date}]/CDC{n}{ext}
        assert rel[0] == SCHEMA and rel[1] in TABLES, rel
        assert rel[2].isdigit() and rep.start_ts < int(rel[2]) <= rep.target_ts, rel
        assert len(rel) == (5 if date_dir else 4), rel
        if date_dir:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", rel[3]), rel
        assert re.fullmatch(rf"CDC\d{{{width}}}{re.escape(ext)}", f.name), f.name
        dirs.setdefault(f.parent, []).append(f)
    for d, in_dir in dirs.items():
        index = d / "meta" / "CDC.index"
        assert index.read_text() == max(p.name for p in in_dir) + "\n", f"{index} does not name the last file"
        numbers = sorted(int(p.name[3 : 3 + width]) for p in in_dir)
        assert numbers == list(range(1, len(numbers) + 1)), f"{d}: file numbers {numbers} have gaps"

    # Every table has a schema file per version directory; the ALTERs made new versions.
    for table in TABLES:
        versions = sorted(int(p.name) for p in (root / SCHEMA / table).iterdir() if p.name.isdigit())
        schema_files = sorted((root / SCHEMA / table / "meta").glob("schema_*_*.json"))
        schema_versions = {int(p.name.split("_")[1]) for p in schema_files}
        assert set(versions) <= schema_versions, (
            f"{table}: data versions {versions}, schema files {schema_files}"
        )
        for p in schema_files:
            body = json.loads(p.read_text())
            assert body["Table"] == table and body["Schema"] == SCHEMA and body["Version"] == 1
            assert body["TableVersion"] == int(p.name.split("_")[1])
    acct = sorted(int(p.name) for p in (root / SCHEMA / ACCOUNTS).iterdir() if p.name.isdigit())
    assert len(acct) >= 3, f"accounts has version dirs {acct}: expected one per CREATE/ADD COLUMN/DROP COLUMN"
    newest = sorted(
        (root / SCHEMA / ACCOUNTS / "meta").glob("schema_*_*.json"), key=lambda p: int(p.name.split("_")[1])
    )[-1]
    body = json.loads(newest.read_text())
    assert [c["ColumnName"] for c in body["TableColumns"]] == ["id", "owner", "note", "balance"]
    assert "DROP COLUMN" in body["Query"].upper()
    types_versions = sorted(int(p.name) for p in (root / SCHEMA / ALL_TYPES).iterdir() if p.name.isdigit())
    assert len(types_versions) >= 2, (
        f"all_types has version dirs {types_versions}: expected a new one after ADD COLUMN"
    )


# -- tests -----------------------------------------------------------------------------------------


def test_csv_to_file_replays_to_equal_tables(
    replicated: Replicated, mariadb: LocalMariaDB, downstream: LocalMariaDB
) -> None:
    _replay_and_compare(replicated.outputs["csv"], mariadb, downstream)


def test_csv_file_layout_and_commit_ts_order(replicated: Replicated) -> None:
    root = replicated.root / "csv"
    _check_common_layout(root, ".csv", replicated, date_dir=True, width=20)
    meta_ts = json.loads((root / "metadata").read_bytes())["checkpoint-ts"]
    records = 0
    for f in _data_files(root, ".csv"):
        ts = _csv_commit_ts(f)
        records += len(ts)
        assert ts == sorted(ts), f"{f}: commit_ts decreases inside the file"
        assert all(replicated.start_ts < t <= meta_ts for t in ts), f"{f}: commit_ts outside the range"
    assert records >= 300


def test_canal_json_to_file_replays_to_equal_tables(
    replicated: Replicated, mariadb: LocalMariaDB, downstream: LocalMariaDB
) -> None:
    root = replicated.root / "canal"
    _check_common_layout(root, ".json", replicated, date_dir=True, width=20)
    for f in _data_files(root, ".json"):
        lines = [ln for ln in f.read_bytes().split(b"\r\n") if ln]
        msgs = [json.loads(ln) for ln in lines]
        assert all(not m["isDdl"] and m["type"] in ("INSERT", "UPDATE", "DELETE") for m in msgs), f
        ts = [m["_tidb"]["commitTs"] for m in msgs]
        assert ts == sorted(ts), f"{f}: commitTs decreases inside the file"
        assert all(m["es"] == t >> 18 for m, t in zip(msgs, ts, strict=True))
    _replay_and_compare(replicated.outputs["canal"], mariadb, downstream)


def test_csv_to_s3_replays_to_equal_tables(
    replicated: Replicated, mariadb: LocalMariaDB, downstream: LocalMariaDB, local_s3: LocalS3
) -> None:
    fs = local_s3.filesystem()
    meta = json.loads(fs.cat("cdc/e2e/storage/metadata"))
    assert meta["checkpoint-ts"] >= replicated.target_ts
    keys = [k for k in fs.find("cdc/e2e/storage") if re.match(r"CDC\d+\.", os.path.basename(k))]
    # date-separator = "none", file-index-digit = 6: {schema}/{table}/{version}/CDC000001.csv
    assert keys and all(re.fullmatch(r".*/\d+/CDC\d{6}\.csv", k) for k in keys), keys[:5]
    assert any("/order items/" in k for k in keys)
    _replay_and_compare(replicated.outputs["s3"], mariadb, downstream)
