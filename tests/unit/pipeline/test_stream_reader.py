"""The stream reader Spark ships to the executors carries no planner."""

from __future__ import annotations

import json
import pickle

from sparkcdc.pipeline.plan import SourceSpec
from sparkcdc.pipeline.source import BinlogStreamReader


def _spec(tmp_path: object) -> str:
    spec = SourceSpec(
        changefeed_id="cf",
        upstream_uri="mysql://root:@127.0.0.1:9/",
        start={"file": "mysql-bin.000001", "pos": 4, "ts": 1},
        history_path=f"{tmp_path}/schema_history.jsonl",
    )
    return json.dumps(spec.to_json())


def test_reader_makes_its_planner_on_first_use(tmp_path: object) -> None:
    reader = BinlogStreamReader(_spec(tmp_path), segments_mode=True)
    assert reader._planner is None  # Spark's plan_data_source_read makes one only to pickle `read`
    assert reader.initialOffset() == {"file": "mysql-bin.000001", "pos": 4, "ts": 1}
    reader.stop()  # no planner, nothing to close
    planner = reader.planner
    assert reader.planner is planner
    assert planner.spec is reader.spec


def test_pickled_reader_leaves_the_planner_behind(tmp_path: object) -> None:
    reader = BinlogStreamReader(_spec(tmp_path), segments_mode=True)
    _ = reader.planner
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._planner is None
    assert copy.segments_mode and copy.spec == reader.spec
    assert reader._planner is not None  # the original keeps its own
