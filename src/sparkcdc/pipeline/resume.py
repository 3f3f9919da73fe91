"""Where a changefeed resumes: the newest consistent point of its durable evidence, decided here once.

A changefeed that starts again may find several records of how far it got:

- Spark's offset log (``spark/offsets/<N>``: the end of every batch Spark planned, the last
  one perhaps not committed yet);
- ``checkpoint.json`` in its data dir (the end of the last batch the sink acknowledged, and of
  every batch that only raised the chain state, saved before the sink published it);
- under a server, the meta database's offset (``stats.checkpoint_end``, recorded by each
  owner) and the ``checkpoint.json`` of the claims before this one, when the data dir is shared.

Each is an offset: a binlog position and the chain state there (``capture.offset.Offset``). The
chain state only grows along the binlog, so the records of one changefeed are ordered by
position, then by chain state (a batch without transactions raises the chain state at the same
position). The newest wins: every record is durable, and everything before the newest was
acknowledged by the sink. Records that disagree (a later position with a smaller chain state,
or positions in binlogs of another base name) cannot come from one changefeed on one upstream:
the start is refused in one coded line naming both.

What the sink itself published (storage ``metadata``, Kafka watermarks, the MySQL progress
table, lakehouse tags) is a commit_ts, not a position: it does not choose the start, it makes
the batches that replay below it skip what the sink already holds (``WriterContext.replay``).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

from sparkcdc.capture.offset import Offset
from sparkcdc.errors import ConfigError

log = logging.getLogger(__name__)

EVIDENCE_CODE = "CDC:ErrResumeEvidenceMismatch"


@dataclass(frozen=True)
class Evidence:
    """One durable record of how far a changefeed got."""

    source: str
    """Where it was read, for the log and the error: "the meta database", "checkpoint.json of epoch-3"."""
    end: dict[str, Any]
    """The offset after the last batch it records (``Offset.to_json``)."""
    checkpoint_ts: int
    rows_total: int = 0

    @property
    def offset(self) -> Offset:
        return Offset.from_json(self.end)

    def __str__(self) -> str:
        return f"{self.source} ({self.offset})"


def _base(name: str) -> str:
    return name.rsplit(".", 1)[0]


def newest(evidence: list[Evidence]) -> Evidence | None:
    """The newest record (the first given of equal ones); ``ConfigError`` (``EVIDENCE_CODE``) when two
    records are inconsistent."""
    if not evidence:
        return None

    def order(e: Evidence) -> tuple[tuple[int, int], int]:
        return (e.offset.key(), e.offset.ts)

    for older, newer in itertools.pairwise(sorted(evidence, key=order)):
        a, b = older.offset, newer.offset
        if _base(a.file) != _base(b.file) or a.ts > b.ts:
            raise ConfigError(
                f"the changefeed's records of where it got disagree: {older} and {newer} cannot both come "
                "from one changefeed on one upstream (another upstream, or a binlog that was reset); "
                "remove the changefeed and create it again with a start-ts",
                code=EVIDENCE_CODE,
            )
    return max(evidence, key=order)  # the first of equal records


def checkpoint_evidence(saved: dict[str, Any] | None, source: str) -> Evidence | None:
    """A ``checkpoint.json`` as evidence (None when there is none)."""
    if not saved or "end" not in saved:
        return None
    return Evidence(source, saved["end"], int(saved["checkpoint_ts"]), int(saved.get("rows_total", 0)))


def spark_log_end(spark_checkpoint: str) -> Evidence | None:
    """The end of the last batch in a local Spark offset log (None without one), with the chain state
    the driver raised there since (``marks.py``): the planner starts from that."""
    from sparkcdc.pipeline.marks import read_marks

    folder = os.path.join(spark_checkpoint, "offsets")
    try:
        batches = [int(n) for n in os.listdir(folder) if n.isdigit()]
    except FileNotFoundError:
        return None
    for batch in sorted(batches, reverse=True):
        try:
            with open(os.path.join(folder, str(batch)), encoding="utf-8") as f:
                lines = f.read().splitlines()
            end = json.loads(lines[2])
            off = Offset.from_json(end)
        except (OSError, IndexError, ValueError, KeyError, TypeError):
            continue  # a half-written last entry: Spark ignores it too
        off = read_marks(spark_checkpoint).raise_start(off)
        return Evidence(f"Spark's offset log (batch {batch})", off.to_json(), off.ts)
    return None


def drop_stale_spark_log(spark_checkpoint: str, saved: dict[str, Any] | None) -> Evidence | None:
    """Move a local Spark checkpoint aside when ``checkpoint.json`` is newer than all it logged.

    Spark resumes from its own offset log and never looks at ``checkpoint.json``. A driver-local
    log (an object-store data dir) outlives a move of the changefeed to another host and back:
    it would replay everything the other host delivered, from where this host stopped. The query
    then starts from ``checkpoint.json``, as on a host without a log. Returns the evidence the
    start follows (None: Spark's log, or nothing, as before).
    """
    spark = spark_log_end(spark_checkpoint)
    saved_ev = checkpoint_evidence(saved, "checkpoint.json")
    if spark is None or saved_ev is None:
        return None
    if newest([spark, saved_ev]) is spark:  # newer, or equal (the first of equal records wins)
        return None
    aside = f"{spark_checkpoint.rstrip(os.sep)}.stale-{time.strftime('%Y%m%dT%H%M%S')}"
    shutil.move(spark_checkpoint, aside)
    log.warning(
        "%s ends before %s: starting from checkpoint.json; moved the older Spark checkpoint to %s",
        spark,
        saved_ev,
        aside,
    )
    return saved_ev


def newer_end(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    """The newer of two offsets (``Offset.to_json``) of one changefeed; ``a`` when they are equal."""
    if a is None or b is None:
        return b if a is None else a
    oa, ob = Offset.from_json(a), Offset.from_json(b)
    return b if (ob.key(), ob.ts) > (oa.key(), oa.ts) else a
