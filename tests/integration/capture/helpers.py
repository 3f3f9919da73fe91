"""Helpers for capture tests: read everything the binlog holds after an offset; plan batches."""

from __future__ import annotations

from pathlib import Path

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model import RowChange
from sparkcdc.pipeline.plan import BatchPlan, Planner, SourceSpec
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB


def upstream(db: LocalMariaDB) -> UpstreamConfig:
    return UpstreamConfig.from_uri(db.uri)


def read_all(db: LocalMariaDB, start: Offset, schema: str | None = None, tz: str = "UTC") -> list[RowChange]:
    """Every row change after ``start`` up to the current end of the binlog."""
    up = upstream(db)
    end = head_offset(up)
    out = []
    for ev in RowReader(up, start, end, shapes=TableShapes(), time_zone=tz).events():
        if isinstance(ev, RowChange) and (schema is None or ev.schema == schema):
            out.append(ev)
    return out


def planner(
    db: LocalMariaDB,
    tmp_path: Path,
    start: Offset,
    target_ts: int | None = None,
    marks_dir: str = "",
    relay_dir: str = "",
    filter_rules: list[str] | None = None,
) -> Planner:
    """A batch planner of a changefeed starting at ``start`` (``marks_dir``: the driver raises its
    idle chain state there; ``relay_dir``: a binlog relay of ``db``, ``capture/relay.py``)."""
    spec = SourceSpec(
        changefeed_id="resolved",
        upstream_uri=db.uri,
        start=start.to_json(),
        history_path=str(tmp_path / "schema_history.jsonl"),
        target_ts=target_ts,
        marks_dir=marks_dir,
        relay_dir=relay_dir,
        filter_rules=filter_rules if filter_rules is not None else ["*.*"],
    )
    return Planner(spec)


def next_plan(p: Planner, start: Offset, timeout: float = 10) -> BatchPlan:
    """Ask for the batch after ``start`` the way Spark's trigger does, until there is one."""
    return wait_until(lambda: p.next_batch(start), timeout=timeout, what="a batch", interval=0.05)


def old_insert(db: LocalMariaDB, schema: str, values: str, seconds_ago: int) -> None:
    """An INSERT whose binlog header second lies in the past (as a replica's applier writes them)."""
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET timestamp = UNIX_TIMESTAMP() - {seconds_ago}")
            cur.execute(f"INSERT INTO t VALUES {values}")
    finally:
        conn.close()
