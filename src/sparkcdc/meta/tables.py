"""The current shape of the meta database, defined once: ``migrations.py`` creates it from here.

Times are Unix seconds (``DOUBLE``); ts columns hold TiCDC-shaped commit_ts values.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("name", String(255), nullable=False),
    Column("applied_at", Double, nullable=False),
)

changefeeds = Table(
    "changefeeds",
    metadata,
    Column("namespace", String(128), primary_key=True),
    Column("id", String(128), primary_key=True),
    Column("upstream_uri", Text, nullable=False),
    Column("sink_uri", Text, nullable=False),
    Column("config", JSON, nullable=False),
    Column("state", String(16), nullable=False),
    Column("error", JSON(none_as_null=True), nullable=True),
    Column("warning", Text, nullable=True),
    Column("owner", String(64), nullable=True),
    Column("lease_expire_at", Double, nullable=True),
    Column("epoch", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("start_ts", BigInteger, nullable=True),
    Column("target_ts", BigInteger, nullable=True),
    Column("checkpoint_ts", BigInteger, nullable=False),
    Column("resolved_ts", BigInteger, nullable=False),
    # A subscription (seed 003's ``subscribe`` row): its subscriber's name is unique per subscribed
    # table (the index below), not across the meta database. Empty schema and table: a subscriber
    # of a changefeed that names no table (then its name is unique among those).
    Column("subscriber", String(255), nullable=True),
    Column("subscribed_schema", String(255), nullable=True),
    Column("subscribed_table", String(255), nullable=True),
    Column("stats", JSON(none_as_null=True), nullable=True),
    Column("created_at", Double, nullable=False),
    Column("updated_at", Double, nullable=False),
    # The changefeed's identity (a uuid given at creation): its state in a data dir records it, so a
    # re-created changefeed with the same id, or one of another meta database, never adopts that state.
    Column("uid", String(64), nullable=True),
    # The upstream server its offsets belong to (``pipeline.state.UpstreamIdentity``): a claim or an
    # update that reaches another server is refused.
    Column("upstream", JSON(none_as_null=True), nullable=True),
)

subscription_key = Index(
    "changefeeds_subscription",
    changefeeds.c.namespace,
    changefeeds.c.subscribed_schema,
    changefeeds.c.subscribed_table,
    changefeeds.c.subscriber,
    unique=True,
)
"""One changefeed per subscriber and table (rows without a subscriber hold NULLs and never collide)."""

range_progress = Table(
    "range_progress",
    metadata,
    Column("namespace", String(128), primary_key=True),
    Column("changefeed_id", String(128), primary_key=True),
    Column("schema_name", String(255), primary_key=True),
    Column("table_name", String(255), primary_key=True),
    Column("range_id", BigInteger, primary_key=True, autoincrement=False),
    Column("stage", String(16), nullable=False),
    Column("snapshot_version", BigInteger, nullable=True),
    Column("last_snapshot_key", JSON(none_as_null=True), nullable=True),
    Column("last_log_position", JSON(none_as_null=True), nullable=True),
    Column("rows_copied", BigInteger, nullable=False),
    Column("parent_range_id", BigInteger, nullable=True),
    Column("version", BigInteger, nullable=False),
    Column("updated_at", Double, nullable=False),
)

schema_history = Table(
    "schema_history",
    metadata,
    Column("upstream_id", String(255), primary_key=True),
    Column("schema_name", String(255), primary_key=True),
    Column("table_name", String(255), primary_key=True),
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    Column("table_info", JSON(none_as_null=True), nullable=True),
    Column("query", Text, nullable=False),
    Column("created_at", Double, nullable=False),
)

snapshot_done = Table(
    "snapshot_done",
    metadata,
    Column("namespace", String(128), primary_key=True),
    Column("changefeed_id", String(128), primary_key=True),
    Column("changefeed_uid", String(64), nullable=False),
    Column("report", JSON, nullable=False),
    Column("done_at", Double, nullable=False),
)
"""A changefeed whose initial snapshot is durable in its sink (any server then resumes it exactly)."""

meta_info = Table(
    "meta_info",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
"""Facts about the meta database itself (``identity``: a uuid made on first use)."""

servers = Table(
    "servers",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("address", String(255), nullable=False),
    Column("version", String(64), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("heartbeat_at", Double, nullable=False),
    Column("started_at", Double, nullable=False),
)
