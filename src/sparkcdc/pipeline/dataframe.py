"""The change stream as a public Spark source: ``spark.readStream.format("sparkcdc")``.

After ``sparkcdc.spark.register(spark)``::

    spark.readStream.format("sparkcdc")
        .option("upstream-uri", "mysql://cdc:pw@db:3306/")
        .option("data-dir", "/data/orders-job/sparkcdc")
        .option("filter", "shop.*")
        .option("start-ts", "452178360467423233")
        .load()

gives one row per row change: ``commit_ts, seq, op, schema, table, table_version, before,
after``. ``before``/``after`` are VARIANTs of the row images as canal-json renders them (an
object of column name → the canal-json value string, or null). With ``option("table",
"shop.orders")`` the rows are that table's columns typed (``pipeline.spark_types``) plus
``_op`` and ``_commit_ts``; a DDL that changes those columns stops the query with a
``SchemaError`` that says where to start the next one.

It is the changefeed's own source (``pipeline.source.BinlogStreamReader``, the planner of
``pipeline.plan``) with other rows: offsets are binlog positions with the commit_ts chain
state, so a restart from the query's Spark checkpoint re-reads a batch with the same
commit_ts, seq and values. Its start point and schema history live in ``data-dir``
(``start.json``, ``schema_history.jsonl``, as in a changefeed's data dir), which must stay
with the query's checkpoint location: one data dir per query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSource, InputPartition
from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    VariantType,
    VariantVal,
)

from sparkcdc.errors import ConfigError, DecodeError, SchemaError
from sparkcdc.model import DDLEvent, TableInfo
from sparkcdc.pipeline.source import ARROW_BATCH_ROWS, BinlogPartition, BinlogStreamReader

SOURCE_NAME = "sparkcdc"

OPTIONS: dict[str, str] = {
    "upstream-uri": "the upstream MySQL/MariaDB, mysql://user:password@host:port/ (required)",
    "data-dir": "where the source keeps its start point and schema history, one per query (required)",
    "filter": "table filter rules separated by commas (TiCDC syntax; @file for a rule holding a comma); "
    "default *.*",
    "start-ts": "start after this commit_ts (default: the binlog's head when the query first starts)",
    "table": "schema.table: that table's columns typed, plus _op and _commit_ts",
}
"""Every option the source takes, with what it means (an unknown key is refused with this list)."""

CHANGE_SCHEMA = StructType(
    [
        StructField("commit_ts", LongType(), False),
        StructField("seq", LongType(), False),
        StructField("op", StringType(), False),
        StructField("schema", StringType(), False),
        StructField("table", StringType(), False),
        StructField("table_version", LongType(), False),
        StructField("before", VariantType(), True),
        StructField("after", VariantType(), True),
    ]
)
"""The untyped stream: one row per row change; before is null for an INSERT, after for a DELETE."""

OP_NAMES = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}
"""RowChange.op → the stream's ``op`` (canal-json's ``type``)."""

TIME_ZONE = "UTC"
"""TIMESTAMP values are rendered in UTC (before/after); the typed stream carries the instant."""


def _option_error(key: str, value: str, fix: str) -> ConfigError:
    return ConfigError(f"sparkcdc source: option {key}={value!r}: {fix}")


def parse_table_name(value: str) -> tuple[str, str]:
    """``schema.table`` (either part may be back-quoted, ```a.b```) → (schema, table)."""
    parts: list[str] = []
    i, n = 0, len(value)
    while i <= n:
        if i < n and value[i] == "`":
            j, name = i + 1, []
            while True:
                k = value.find("`", j)
                if k < 0:
                    raise _option_error("table", value, "a back-quoted name is not closed")
                name.append(value[j:k])
                if value.startswith("``", k):
                    name.append("`")
                    j = k + 2
                    continue
                i = k + 1
                break
            parts.append("".join(name))
        else:
            k = value.find(".", i)
            k = n if k < 0 else k
            parts.append(value[i:k])
            i = k
        if i < n and value[i] != ".":
            raise _option_error("table", value, "expected a dot after a back-quoted name")
        i += 1
    if len(parts) != 2 or not all(parts):
        raise _option_error("table", value, "give one table as schema.table, e.g. shop.orders")
    return parts[0], parts[1]


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass
class SourceOptions:
    """The source's options, checked (``OPTIONS``)."""

    upstream_uri: str
    data_dir: str
    filter_rules: list[str] = field(default_factory=lambda: ["*.*"])
    start_ts: int | None = None
    table: tuple[str, str] | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Check every option; raise ConfigError naming a bad key or value and the fix."""
        opts = {k.lower(): v for k, v in options.items()}
        unknown = sorted(set(opts) - set(OPTIONS) - {"path"})
        if unknown:
            allowed = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
            raise ConfigError(f"sparkcdc source: unknown option(s) {unknown}; the options are {allowed}")
        if opts.get("path"):
            raise _option_error("path", opts["path"], "the source takes no path; pass data-dir as an option")
        for key in ("upstream-uri", "data-dir"):
            if not opts.get(key, "").strip():
                raise ConfigError(f"sparkcdc source: option {key} is required ({OPTIONS[key]})")
        from sparkcdc.capture.upstream import UpstreamConfig
        from sparkcdc.filter import changefeed_filter

        UpstreamConfig.from_uri(opts["upstream-uri"])  # raises naming what is wrong with it
        start_ts = None
        if "start-ts" in opts:
            text = opts["start-ts"].strip()
            if not text.isdigit():
                raise _option_error("start-ts", text, "give a commit_ts, a non-negative integer")
            start_ts = int(text)
        table = parse_table_name(opts["table"].strip()) if "table" in opts else None
        if table is not None and "filter" in opts:
            raise ConfigError(
                "sparkcdc source: options table and filter conflict: table already selects the one table "
                "it types; give one of them"
            )
        rules = ["*.*"]
        if table is not None:
            rules = [f"{_quote(table[0])}.{_quote(table[1])}"]
        elif "filter" in opts:
            rules = [r.strip() for r in opts["filter"].split(",") if r.strip()]
            if not rules:
                raise _option_error("filter", opts["filter"], "give at least one rule, e.g. shop.*")
        changefeed_filter(rules)  # raises FilterRuleError naming the bad rule
        return cls(opts["upstream-uri"], opts["data-dir"].strip(), rules, start_ts, table)

    def fingerprint(self) -> dict[str, Any]:
        """What a data dir was made for: another query must not reuse it with other options."""
        from sparkcdc.capture.upstream import UpstreamConfig

        up = UpstreamConfig.from_uri(self.upstream_uri)
        return {
            "upstream": f"{up.host}:{up.port}",
            "filter": self.filter_rules,
            "start-ts": self.start_ts,
            "table": list(self.table) if self.table else None,
        }


def prepare(opts: SourceOptions) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The source's spec (``SourceSpec`` JSON) and the typed table's shape at the start point.

    Checks the upstream, resolves the start point once (``start.json`` in the data dir) and
    bootstraps the schema history, as ``start_changefeed`` does for a changefeed.
    """
    from sparkcdc.capture.schema_history import SchemaHistory
    from sparkcdc.capture.upstream import UpstreamConfig, check_upstream
    from sparkcdc.pipeline.plan import SourceSpec
    from sparkcdc.pipeline.start import bootstrap_history, check_start_ts, resolve_start
    from sparkcdc.pipeline.state import StateDir, open_history_store

    up = UpstreamConfig.from_uri(opts.upstream_uri)
    check_upstream(up)
    state = StateDir.parse(opts.data_dir)
    state.check()
    made_for = state.read_json("source.json")
    if made_for is not None and made_for != opts.fingerprint():
        raise ConfigError(
            f"sparkcdc source: data-dir {state.join_display('')!r} belongs to a query with other options "
            f"({json.dumps(made_for)}); give each query its own data-dir (a new query: an empty one)"
        )
    started = state.exists("start.json")
    if not started and opts.start_ts is not None:
        check_start_ts(up, opts.start_ts)
    start = resolve_start(up, opts.data_dir, opts.start_ts)
    if made_for is None:
        state.write_json("source.json", opts.fingerprint())
    history_path = state.join("schema_history.jsonl")
    from_head = not started and opts.start_ts is None
    bootstrap_ts, bootstrap_pos = bootstrap_history(up, history_path, start, start if from_head else None)
    spec = SourceSpec(
        changefeed_id=SOURCE_NAME,
        upstream_uri=opts.upstream_uri,
        start=start.to_json(),
        history_path=history_path,
        filter_rules=opts.filter_rules,
        time_zone=TIME_ZONE,
        bootstrap_ts=bootstrap_ts,
        bootstrap_pos=bootstrap_pos,
    )
    if opts.table is None:
        return spec.to_json(), None
    info = SchemaHistory.open(open_history_store(history_path)).catalog_at(start.ts).get(*opts.table)
    if info is None:
        name = ".".join(opts.table)
        raise ConfigError(
            f"sparkcdc source: option table={name!r}: the upstream has no such table at the start point "
            f"(commit_ts {start.ts}); create it first, or check the name (schema.table)"
        )
    return spec.to_json(), info.to_dict()


class ChangeStreamReader(BinlogStreamReader):
    """The changefeed's stream reader with the public rows: variant images, or one table typed."""

    def __init__(self, spec: dict[str, Any], table: dict[str, Any] | None) -> None:
        super().__init__(json.dumps(spec), segments_mode=False)
        self.table = TableInfo.from_dict(table) if table is not None else None

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        """The end of the next batch with changes or DDLs (an idle upstream gives no empty batches)."""
        from sparkcdc.pipeline.plan import offset_of

        plan = self.planner.next_batch(offset_of(start))
        if plan is None or (not plan.is_ddl and not plan.segments):
            return start
        if plan.is_ddl:
            self._check_ddls(plan.ddls)
        return plan.end_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[BinlogPartition]:
        """The changefeed's segments; a DDL batch from the offset log is checked again."""
        from sparkcdc.pipeline.plan import ddls_of

        self._check_ddls(ddls_of(end) or [])
        return super().partitions(start, end)

    def _check_ddls(self, ddls: list[DDLEvent]) -> None:
        """Refuse a DDL that changes the typed table's columns."""
        if self.table is None:
            return
        from sparkcdc.pipeline.spark_types import column_signature

        key = (self.table.schema, self.table.table)
        for e in ddls:
            if (e.schema, e.table) != key or e.table_info is None:
                continue
            if column_signature(e.table_info) != column_signature(self.table):
                raise SchemaError(_changed_message(self.table, e.table_info, e.commit_ts, e.query))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Executor: decode the segment into Arrow batches of the stream's rows."""
        assert isinstance(partition, BinlogPartition)
        if self.table is None:
            return change_batches(partition)
        return typed_batches(partition, self.table)


def _changed_message(table: TableInfo, now: TableInfo, ts: int, what: str) -> str:
    before = ", ".join(f"{n} {t}" for n, t in _signature(table))
    after = ", ".join(f"{n} {t}" for n, t in _signature(now))
    return (
        f"table {table.schema}.{table.table} changed its columns at commit_ts {ts} ({what}): the typed "
        f"stream has ({before}), the table now ({after}). A typed stream keeps its columns: start a new "
        f"query (a new checkpointLocation and data-dir) with option start-ts={ts}, or read the untyped "
        "stream (leave out option table)"
    )


def _signature(info: TableInfo) -> list[tuple[str, str]]:
    from sparkcdc.pipeline.spark_types import column_signature

    return column_signature(info)


def _arrow_schema(schema: StructType) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def change_batches(partition: BinlogPartition) -> Iterator[Any]:
    """The untyped rows of a segment as Arrow batches (``CHANGE_SCHEMA``)."""
    import pyarrow as pa

    from sparkcdc.codec.canal_json.reference import TableLayout, column_tokens
    from sparkcdc.pipeline.source import iter_segment_batches

    schema = _arrow_schema(CHANGE_SCHEMA)
    variant = schema.field("before").type
    cols: list[list[Any]] = [[] for _ in range(6)]
    images: list[list[Any]] = [[], []]
    layouts: dict[int, Any] = {}

    def image_variant(cells: Any, image: tuple[Any, ...] | None) -> tuple[bytes, bytes] | None:
        if image is None:
            return None
        v = VariantVal.parseJson("{" + ",".join(column_tokens(cells, image)) + "}")
        return v.value, v.metadata

    def variants(values: list[tuple[bytes, bytes] | None]) -> Any:
        return pa.StructArray.from_arrays(
            [
                pa.array([b"" if v is None else v[0] for v in values], pa.binary()),
                pa.array([b"" if v is None else v[1] for v in values], pa.binary()),
            ],
            fields=list(variant),
            mask=pa.array([v is None for v in values]),
        )

    def batch() -> Any:
        arrays = [pa.array(c, f.type) for c, f in zip(cols, schema, strict=False)]
        out = pa.RecordBatch.from_arrays([*arrays, variants(images[0]), variants(images[1])], schema=schema)
        for c in (*cols, *images):
            c.clear()
        return out

    for rows, info, _own in iter_segment_batches(partition):
        if info is None:
            first = rows[0]
            raise DecodeError(
                f"{first.schema}.{first.table}: rows at commit_ts {first.commit_ts} have no shape"
            )
        layout = layouts.get(id(info))
        if layout is None:
            layout = layouts[id(info)] = (info, TableLayout(info, info.schema, info.table, False).cols)
        cells = layout[1]
        for ev in rows:
            cols[0].append(ev.commit_ts)
            cols[1].append(ev.seq)
            cols[2].append(OP_NAMES[ev.op])
            cols[3].append(ev.schema)
            cols[4].append(ev.table)
            cols[5].append(ev.table_version)
            images[0].append(image_variant(cells, ev.before))
            images[1].append(image_variant(cells, ev.after))
        if len(cols[0]) >= ARROW_BATCH_ROWS:
            yield batch()
    if cols[0]:
        yield batch()


def typed_batches(partition: BinlogPartition, table: TableInfo) -> Iterator[Any]:
    """One table's rows of a segment, typed, as Arrow batches (``spark_types.typed_schema``)."""
    import pyarrow as pa

    from sparkcdc.pipeline.source import iter_segment_batches
    from sparkcdc.pipeline.spark_types import TypedRows, column_signature, typed_schema

    schema = _arrow_schema(typed_schema(table))
    signature = column_signature(table)
    width = len(table.columns)
    cols: list[list[Any]] = [[] for _ in range(width + 2)]
    converters: dict[int, tuple[TableInfo, TypedRows]] = {}
    for rows, info, _own in iter_segment_batches(partition):
        first = rows[0]
        if info is None:
            raise DecodeError(
                f"{first.schema}.{first.table}: rows at commit_ts {first.commit_ts} have no shape"
            )
        conv = converters.get(id(info))
        if conv is None:
            if column_signature(info) != signature:
                raise SchemaError(_changed_message(table, info, first.commit_ts, "the rows' columns"))
            conv = converters[id(info)] = (info, TypedRows(info, TIME_ZONE))
        for i, values in enumerate(conv[1].columns([ev.image for ev in rows])):
            cols[i].extend(values)
        cols[width].extend(OP_NAMES[ev.op] for ev in rows)
        cols[width + 1].extend(ev.commit_ts for ev in rows)
        if len(cols[width]) >= ARROW_BATCH_ROWS:
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
            )
            for c in cols:
                c.clear()
    if cols[width]:
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
        )


class ChangeStreamDataSource(DataSource):
    """``spark.readStream.format("sparkcdc")``: the change stream as a DataFrame (see the module doc)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.source_options = SourceOptions.parse(options)
        self._prepared: tuple[dict[str, Any], dict[str, Any] | None] | None = None

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _prepare(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        # schema() runs first, on the driver at load(); Spark then ships this object with the result.
        if self._prepared is None:
            self._prepared = prepare(self.source_options)
        return self._prepared

    def schema(self) -> StructType:
        """CHANGE_SCHEMA, or the typed table's columns with _op and _commit_ts."""
        from sparkcdc.pipeline.spark_types import typed_schema

        _spec, table = self._prepare()
        return CHANGE_SCHEMA if table is None else typed_schema(TableInfo.from_dict(table))

    def streamReader(self, schema: StructType) -> ChangeStreamReader:
        """The stream reader (the schema is the source's own: a user schema is refused)."""
        spec, table = self._prepare()
        own = self.schema()
        if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in own.fields]:
            raise ConfigError(
                f"sparkcdc source: it sets its own schema ({own.simpleString()}), not "
                f"{schema.simpleString()}; leave out .schema(...)"
            )
        return ChangeStreamReader(spec, table)

    def reader(self, schema: StructType) -> Any:
        """Refused: the change stream is read with ``spark.readStream``."""
        raise ConfigError(
            'sparkcdc source: it is a streaming source; use spark.readStream.format("sparkcdc"), '
            "not spark.read"
        )


def register(spark: Any) -> None:
    """Make ``spark.readStream.format("sparkcdc")`` available in this Spark session."""
    spark.dataSource.register(ChangeStreamDataSource)
