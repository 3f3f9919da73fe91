"""The start of a changefeed in its data dir: the start offset kept in ``start.json``, the schema history bootstrapped.

``pipeline.changefeed.start_changefeed`` calls ``resolve_start`` and then ``bootstrap_history``;
the upstream side (from a start-ts, ``file:pos``, GTID or the head to an ``Offset``) is
``capture.start.resolve_start_offset``, whose docstring describes the whole chain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sparkcdc.capture.offset import Offset, base_ts, file_seq
from sparkcdc.capture.start import query_tso, resolve_start_offset
from sparkcdc.capture.upstream import UpstreamConfig, master_status, query_one
from sparkcdc.errors import ConfigError, TransientError, UpstreamSetupError
from sparkcdc.pipeline.state import StateDir, open_history_store, split_location

log = logging.getLogger(__name__)


def upstream_current_ts(up: UpstreamConfig) -> int:
    """The upstream's current ts: the chain state at the binlog head, or the end of its clock's second if later.

    Every commit_ts and resolved ts published so far is at most this (an idle changefeed's
    checkpoint follows the upstream clock, a busy one the binlog).
    """
    conn = up.connect()
    try:
        row = query_one(conn, "SELECT UNIX_TIMESTAMP()")
    finally:
        conn.close()
    now_s = int(row[0]) if row else 0
    return max(query_tso(up), base_ts(now_s + 1) - 1)


def check_start_ts(up: UpstreamConfig, start_ts: int) -> None:
    """Refuse a start-ts after the upstream's current ts (TiCDC refuses one after PD's)."""
    current = upstream_current_ts(up)
    if start_ts > current:
        raise ConfigError(
            f"start-ts {start_ts} is after the upstream's current ts {current}; give a --start-ts at or "
            "before it (sparkcdc cli tso query prints the current ts), or leave --start-ts out to start now"
        )


def resolve_start(
    up: UpstreamConfig,
    checkpoint_dir: str,
    start_ts: int | None,
    start_position: str | None = None,
    start_gtid: str | None = None,
) -> Offset:
    """The first offset of a new changefeed, persisted so a restart before the first batch keeps it."""
    state = StateDir.parse(checkpoint_dir)
    saved = state.read_json("start.json")
    if saved is not None:
        return Offset.from_json(saved)
    start = resolve_start_offset(up, start_ts, start_position, start_gtid)
    state.write_json("start.json", start.to_json())
    return start


def bootstrap_history(
    up: UpstreamConfig,
    history_path: str,
    start: Offset,
    head: Offset | None = None,
    captured: Callable[[str, str], bool] | None = None,
) -> tuple[int, list[Any] | None]:
    """Load the upstream's current tables into an empty schema history.

    Returns where the binlog ended when the shapes were read: ``(ts, [file, pos])`` (ts is 0
    when only the position is known; the position is None for a history bootstrapped by an
    older version, which recorded the ts alone).

    The shapes are the upstream's *current* ones, valid from ``start`` on. When the
    changefeed starts in the past, DDLs before that point are already reflected in them;
    the planner passes those statements on without re-applying them, and rows written
    before them are decoded with their binlog table map (which always describes the rows
    exactly). ``head``: the binlog head if the caller just read it. Otherwise the position
    comes from ``SHOW MASTER STATUS``, which costs no scan of the current binlog file.
    ``captured``: the changefeed's table filter; a table outside it whose definition sparkcdc
    cannot read is left out of the history instead of failing the start.
    """
    from sparkcdc.capture.schema_history import SchemaHistory

    store = open_history_store(history_path)
    if store.load():
        m = bootstrap_marker(history_path)
        if m is not None:
            return m
    history = SchemaHistory.open(store)
    catalog, ts, file, pos = _tables_at_a_position(up, start, head, captured)
    history.bootstrap(catalog, start.ts)
    folder, name = split_location(history_path)
    folder.write_json(name + ".bootstrap.json", {"ts": ts, "file": file, "pos": pos})
    if start.key() < (file_seq(file), int(pos)):
        log.info(
            "starting in the past (binlog %s:%d), before the binlog head %s:%d: the schema history starts "
            "from the upstream's current table definitions, DDLs before the head are passed on without "
            "being applied again, and rows written before such a DDL are decoded with the columns of "
            "their binlog table maps",
            start.file,
            start.pos,
            file,
            pos,
        )
    return ts, [file, pos]


def bootstrap_marker(history_path: str) -> tuple[int, list[Any] | None] | None:
    """Where the binlog ended when the schema history was bootstrapped (``bootstrap_history``'s
    return), None before the bootstrap."""
    folder, name = split_location(history_path)
    m = folder.read_json(name + ".bootstrap.json")
    if m is None:
        return None
    return int(m.get("ts", 0)), ([m["file"], int(m["pos"])] if "file" in m else None)


def after_bootstrap(end: Offset, ts: int, bootstrap_ts: int, bootstrap_pos: list[Any] | None) -> bool:
    """Whether a transaction (its end and commit ts) committed after the schema history was
    bootstrapped; the DDLs of one that did not are already in the history's first shapes."""
    if bootstrap_pos:
        return end.key() > (file_seq(str(bootstrap_pos[0])), int(bootstrap_pos[1]))
    return ts > bootstrap_ts


BOOTSTRAP_ATTEMPTS = 10


def _tables_at_a_position(
    up: UpstreamConfig, start: Offset, head: Offset | None, captured: Callable[[str, str], bool] | None
) -> tuple[Any, int, str, int]:
    """The upstream's current tables and a binlog position whose shapes they are: ``(catalog, ts, file, pos)``.

    The definitions are read between two binlog heads. A DDL logged between them may or may not
    be in what was read, and the planner would apply it again on top of itself (or skip one that
    is not there): the read is repeated until no DDL falls between the two heads.
    """
    from sparkcdc.capture.catalog import SchemaCatalog

    last = ""
    for attempt in range(BOOTSTRAP_ATTEMPTS):
        conn = up.connect()
        try:
            if head is not None and attempt == 0:
                ts, file, pos = head.ts, head.file, head.pos
            else:
                (file, pos), ts = master_status(conn), 0
            catalog = SchemaCatalog.load_from_upstream(conn, None, start.ts, captured)
            after = master_status(conn)
        finally:
            conn.close()
        ddl = ddl_between(up, Offset(file, pos, ts), (file_seq(after[0]), after[1]))
        if ddl is None:
            return catalog, ts, file, pos
        last = f"{ddl[1]} ... at {ddl[0]}"
        log.info("DDL %s was logged while the table definitions were read: reading them again", last)
    raise TransientError(
        f"DDL kept running while the upstream's table definitions were read ({BOOTSTRAP_ATTEMPTS} "
        f"attempts, the last {last}); the changefeed starts again when DDL pauses",
        code=UpstreamSetupError.code,
    )


def ddl_between(up: UpstreamConfig, start: Offset, end: tuple[int, int]) -> tuple[str, str] | None:
    """The first DDL of a transaction that ends after ``start`` and at or before ``end``:
    ``(its position, the statement's first words)``, or None (the words, not the statement: an
    account statement carries a password)."""
    from sparkcdc.capture.reader import Scanner
    from sparkcdc.capture.statement_kind import keywords

    if start.key() >= end:
        return None
    for txn in Scanner(up).scan(start, stop=lambda t: t.end.key() >= end):
        if txn.end.key() > end:
            break
        if txn.queries:
            return f"{txn.start.file}:{txn.start.pos}", keywords(txn.queries[0].query)
    return None
