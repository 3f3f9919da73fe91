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
``_op``, ``_commit_ts`` and ``_seq``; a DDL that changes those columns stops the query with a
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
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from sparkcdc.errors import ConfigError, SchemaError
from sparkcdc.model import DDLEvent, TableInfo
from sparkcdc.pipeline.dataframe_rows import CHANGE_SCHEMA, TIME_ZONE
from sparkcdc.pipeline.source import BinlogPartition, BinlogStreamReader

SOURCE_NAME = "sparkcdc"

OPTIONS: dict[str, str] = {
    "upstream-uri": "the upstream MySQL/MariaDB, mysql://user:password@host:port/ (required)",
    "data-dir": "where the source keeps its start point and schema history, one per query (required)",
    "filter": "table filter rules separated by commas (TiCDC syntax; @file for a rule holding a comma); "
    "default *.*",
    "start-ts": "start after this commit_ts (default: the binlog's head when the query first starts)",
    "table": "schema.table: that table's columns typed, plus _op, _commit_ts and _seq",
}
"""Every option the source takes, with what it means (an unknown key is refused with this list)."""


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
    from sparkcdc.filter import changefeed_filter

    captured = changefeed_filter(opts.filter_rules).match
    bootstrap_ts, bootstrap_pos = bootstrap_history(
        up, history_path, start, start if from_head else None, captured
    )
    spec = SourceSpec(
        changefeed_id=SOURCE_NAME,
        upstream_uri=opts.upstream_uri,
        start=start.to_json(),
        history_path=history_path,
        filter_rules=opts.filter_rules,
        time_zone=TIME_ZONE,  # TIMESTAMP text in before/after; the typed stream carries the instant
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


class ChangeStreamReader(BinlogStreamReader, SupportsTriggerAvailableNow):
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

    def prepareForTriggerAvailableNow(self) -> None:
        """``trigger(availableNow=True)``: read what the binlog holds now, then finish.

        The planner's target-ts becomes the chain state at the binlog head (``tso query``): every
        transaction committed later has a larger commit_ts, and none is planned.
        """
        from sparkcdc.capture.start import query_tso

        self.planner.spec.target_ts = query_tso(self.planner.up)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[BinlogPartition]:
        """The changefeed's segments; a DDL batch from the offset log is checked again."""
        from sparkcdc.pipeline.plan import ddls_of

        self._check_ddls(ddls_of(end) or [])
        return super().partitions(start, end)

    def _check_ddls(self, ddls: list[DDLEvent]) -> None:
        """Refuse a DDL that changes the typed table's columns."""
        if self.table is None:
            return
        from sparkcdc.pipeline.spark_types import changed_columns_message, column_signature

        key = (self.table.schema, self.table.table)
        for e in ddls:
            if (e.schema, e.table) != key or e.table_info is None:
                continue
            if column_signature(e.table_info) != column_signature(self.table):
                raise SchemaError(changed_columns_message(self.table, e.table_info, e.commit_ts, e.query))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Executor: decode the segment into Arrow batches of the stream's rows."""
        from sparkcdc.pipeline.dataframe_rows import change_batches, typed_batches

        assert isinstance(partition, BinlogPartition)
        if self.table is None:
            return change_batches(partition)
        return typed_batches(partition, self.table)


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
        """CHANGE_SCHEMA, or the typed table's columns with _op, _commit_ts and _seq."""
        _spec, table = self._prepare()
        if table is None:
            return CHANGE_SCHEMA
        # Imported here: the typed schema comes from Arrow types, which the untyped stream's source
        # runner (a process per query) does without (pipeline/runner_site).
        from sparkcdc.pipeline.spark_types import typed_schema

        return typed_schema(TableInfo.from_dict(table))

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
    from sparkcdc.pipeline.spark import register_data_source

    register_data_source(spark, ChangeStreamDataSource)
