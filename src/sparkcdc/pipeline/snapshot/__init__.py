"""The initial snapshot as Spark work: ranges read in parallel, corrected to the handover point, written once.

``run_initial_snapshot`` runs before the streaming query of a changefeed with
``[snapshot] mode = "initial"``. With S = the changefeed's start offset (the
handover point) it

1. plans key ranges of every selected table (``capture.snapshot``) and records one
   ``RangeState`` per range in a ``RangeStore`` (a JSON file per range in the
   checkpoint dir, or the meta database's ``range_progress`` table) — ``plan``;
2. reads the ranges as Spark tasks, chunk by chunk, spooling each chunk as a parquet
   file under ``<checkpoint>/snapshot/rows/<range id>/`` and recording progress after
   each chunk (a crash resumes every range after its last finished chunk; a finished
   range is never read again). A range that grows past ``split_factor`` times its
   planned size hands its remaining key space to child ranges, which inherit its
   progress and run in the next round — ``read``, ``spool``;
3. reads the binlog ``(S, H]`` (H = the head once every range finished) in executor
   tasks and keeps, per touched key, the first event's before image — ``correct``;
4. writes ``spool ⋈̸ corrections ∪ corrections' rows`` (op ``I``, commit_ts = S.ts)
   through the sink with the changefeed's ``BatchWriter``, as one batch committed at
   S.ts, and marks the snapshot done — ``write``. The streaming query then starts from S.

``run`` holds ``InitialSnapshot``, which runs the four steps in order, and reports progress.
The modules import downward only: plan ← spool ← read, correct ← write ← run.

Everything the sink receives is the upstream state at S followed (by the stream) by
every change after S: exact, whatever the concurrent write load.
"""

from sparkcdc.pipeline.snapshot.correct import read_corrections
from sparkcdc.pipeline.snapshot.plan import (
    SNAPSHOT_BATCH_ID,
    STAGE_DONE,
    STAGE_SNAPSHOT,
    STAGE_SPLIT,
    FileRangeStore,
    MetaRangeStore,
    RangeState,
    RangeStore,
    SnapshotOptions,
    SnapshotTaskSpec,
    StaleRangeWriter,
)
from sparkcdc.pipeline.snapshot.read import read_range
from sparkcdc.pipeline.snapshot.run import (
    InitialSnapshot,
    SnapshotFigures,
    run_initial_snapshot,
    snapshot_progress,
)

__all__ = [
    "SNAPSHOT_BATCH_ID",
    "STAGE_DONE",
    "STAGE_SNAPSHOT",
    "STAGE_SPLIT",
    "FileRangeStore",
    "InitialSnapshot",
    "MetaRangeStore",
    "RangeState",
    "RangeStore",
    "SnapshotFigures",
    "SnapshotOptions",
    "SnapshotTaskSpec",
    "StaleRangeWriter",
    "read_corrections",
    "read_range",
    "run_initial_snapshot",
    "snapshot_progress",
]
